"""Client under test for the MCP conformance suite's client scenarios (stdlib only).

`conformance client --command "tests/conformance/client.sh"` appends the scenario server's
URL as the last argument. openpact is the MCP client under test: this script writes a
config naming that URL as the one server (no tool-name prefix), runs `openpact serve`
on it, and plays the editor in front of it over stdio: initialize (declaring elicitation),
list the tools, call each one, and answer the server's elicitation requests with the
defaults of the requested schema. Logins (the auth scenarios) run headless: the hub gets
a browser command that follows the authorization redirect back to its loopback callback.

Environment: OPENPACT_BIN (the binary; default target/release/openpact),
MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_CONTEXT (JSON: client_id/client_secret for
auth/pre-registration).
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CIMD_URL = "https://conformance-test.local/client-metadata.json"
# Each scenario is killed by the runner after 30 s; answer well before that.
DEADLINE = time.monotonic() + 25


def log(*parts):
    print("conformance-client:", *parts, file=sys.stderr, flush=True)


def config(url, context):
    server = {"url": url, "namespace": ""}
    # A 2026-07-28 scenario's server speaks only that revision.
    if os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION") == "2026-07-28":
        server["protocol"] = "2026-07-28"
    oauth = {}
    if context.get("client_id"):
        oauth["clientId"] = context["client_id"]
    if context.get("client_secret"):
        oauth["clientSecret"] = context["client_secret"]
    if oauth:
        server["oauth"] = oauth
    # The scenarios test the client side only: no built-ins, and no permission prompt.
    hub = {"builtins": False, "permissions": {"default": "allow"}}
    return {"mcpServers": {"conformance": server}, "openpact": hub}


class Hub:
    """`openpact serve` on pipes, with a reader thread that answers server requests."""

    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.replies = {}
        self.cv = threading.Condition()
        self.next_id = 0
        threading.Thread(target=self.read, daemon=True).start()

    def send(self, message):
        self.p.stdin.write((json.dumps(message) + "\n").encode())
        self.p.stdin.flush()

    def read(self):
        for line in self.p.stdout:
            try:
                m = json.loads(line)
            except ValueError:
                log("not JSON from the hub:", line[:200])
                continue
            if "method" in m and "id" in m:
                self.answer(m)
            elif "id" in m:
                with self.cv:
                    self.replies[m["id"]] = m
                    self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

    def answer(self, m):
        if m["method"] == "elicitation/create":
            props = (m.get("params", {}).get("requestedSchema") or {}).get("properties") or {}
            content = {k: s["default"] for k, s in props.items() if isinstance(s, dict) and "default" in s}
            self.send({"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept", "content": content}})
        elif m["method"] == "ping":
            self.send({"jsonrpc": "2.0", "id": m["id"], "result": {}})
        else:
            self.send({"jsonrpc": "2.0", "id": m["id"],
                       "error": {"code": -32601, "message": "not supported by the conformance client"}})

    def request(self, method, params):
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with self.cv:
            while rid not in self.replies:
                left = DEADLINE - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    raise RuntimeError(f"no answer to {method}")
                self.cv.wait(left)
            return self.replies.pop(rid)


def main():
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    binary = os.environ.get("OPENPACT_BIN") or os.path.join(ROOT, "target", "release", "openpact")
    work = tempfile.mkdtemp(prefix="openpact-conformance-")
    cfg = os.path.join(work, "mcp.json")
    with open(cfg, "w") as f:
        json.dump(config(url, context), f)
    env = dict(os.environ)
    env.setdefault("OPENPACT_OAUTH_BROWSER", f"{sys.executable} {os.path.join(ROOT, 'tests', 'conformance', 'browser.py')}")
    env.setdefault("OPENPACT_OAUTH_CLIENT_METADATA_URL", CIMD_URL)
    env.setdefault("OPENPACT_LOG", "info")
    hub = Hub([binary, "--config", cfg, "--state-dir", os.path.join(work, "state"), "serve"], env)
    code = 0
    try:
        init = hub.request("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "openpact-conformance-driver", "version": "0"},
        })
        hub.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        log(scenario, "initialize:", json.dumps(init.get("result", init))[:200])
        listed = hub.request("tools/list", {})
        tools = listed.get("result", {}).get("tools", [])
        log(scenario, "tools:", [t["name"] for t in tools])
        for tool in tools:
            args = {"a": 5, "b": 3} if tool["name"] == "add_numbers" else {}
            reply = hub.request("tools/call", {"name": tool["name"], "arguments": args})
            log(scenario, tool["name"], json.dumps(reply)[:300])
    except RuntimeError as e:
        log(scenario, "failed:", e)
        code = 1
    finally:
        hub.p.stdin.close()
        try:
            hub.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            hub.p.kill()
    sys.exit(code)


if __name__ == "__main__":
    main()
