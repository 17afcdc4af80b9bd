#!/usr/bin/env bash
# .ci/fuzz.sh [SECONDS] -- runs every fuzz target of tests/fuzz (cargo-fuzz, libFuzzer) for
# SECONDS each (default 20), starting from the committed seeds in tests/fuzz/corpus/TARGET;
# what a run finds goes to target/fuzz-corpus and crashes to target/fuzz-artifacts. Needs a
# nightly toolchain; without one it says so and skips (exit 0). cargo-fuzz is installed
# into target/fuzz-tools when missing (pinned).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECS="${1:-20}"
CARGO_FUZZ_VERSION=0.13.2

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  printf '==> fuzz: SKIPPED, no nightly toolchain here (rustup toolchain install nightly)\n' >&2
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  if [ ! -x target/fuzz-tools/bin/cargo-fuzz ]; then
    cargo install --locked --root target/fuzz-tools cargo-fuzz --version "$CARGO_FUZZ_VERSION"
  fi
  export PATH="$ROOT/target/fuzz-tools/bin:$PATH"
fi
FUZZ=(cargo +nightly fuzz)
DIR=(--fuzz-dir tests/fuzz)
# No AddressSanitizer: the crate forbids unsafe code, and libFuzzer still catches panics,
# hangs and running out of memory; without it the build and every execution are faster.
# 16 codegen units let the big crates build on both cores (cargo-fuzz's default is 1).
BUILD=(--target-dir target/fuzz -O -s none --codegen-units 16)
# A short run replays the seeds and explores a little: it needs the instrumented code, not
# the fastest. Optimising at level 1 instead of 3 takes minutes off the cold build (the
# longest step of a clean CI run); a long run by hand sets FUZZ_OPT_LEVEL=3.
export CARGO_PROFILE_RELEASE_OPT_LEVEL="${FUZZ_OPT_LEVEL:-1}"
"${FUZZ[@]}" build "${DIR[@]}" "${BUILD[@]}"
for t in $("${FUZZ[@]}" list "${DIR[@]}"); do
  mkdir -p "target/fuzz-corpus/$t" "target/fuzz-artifacts/$t"
  printf '==> fuzz %s for %ss\n' "$t" "$SECS" >&2
  log="target/fuzz-artifacts/$t.log"
  rc=0
  "${FUZZ[@]}" run "${DIR[@]}" "${BUILD[@]}" "$t" \
    "target/fuzz-corpus/$t" "tests/fuzz/corpus/$t" -- \
    -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="target/fuzz-artifacts/$t/" \
    -print_final_stats=1 >"$log" 2>&1 || rc=$?
  grep -E '^stat::(number_of_executed_units|peak_rss_mb)' "$log" >&2 || true
  if [ "$rc" -ne 0 ]; then
    # A crash leaves its input in the artifacts dir; the log has the panic and the stack.
    grep -E 'panicked|ERROR|SUMMARY|Test unit written' "$log" | head -20 >&2 || true
    printf '==> fuzz %s FAILED (exit %d); log: %s\n' "$t" "$rc" "$log" >&2
    exit 1
  fi
done
printf '==> fuzz: every target ran %ss without a crash\n' "$SECS" >&2
