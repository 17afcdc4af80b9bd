//! Real MCP SDK clients against `openpact serve --http` on the legacy protocol: the
//! TypeScript SDK v1 (`StreamableHTTPClientTransport`) and the Python SDK (`mcp` 2.3,
//! `streamable_http_client`). Each initializes, lists, calls the fixture's echo, receives
//! the progress tool's notifications, answers a permission prompt through its elicitation
//! handler and cancels a slow call, the hub serving on afterwards.

use crate::http_face::http_base;
use crate::support::{Hub, Peers, Ran, Scratch, WAIT, fixture, serve_with};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// The TypeScript SDK client; prints what it saw as one JSON object. The SDK is resolved
/// from the peers dir (argv[3]), so the script may live anywhere.
const TS_CLIENT: &str = r#"
import { createRequire } from "node:module";
const [url, peersDir] = process.argv.slice(2);
const require = createRequire(peersDir + "/package.json");
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { ElicitRequestSchema, CallToolResultSchema } = require("@modelcontextprotocol/sdk/types.js");

const asked = [];
const client = new Client({ name: "ts-sdk-http", version: "0" },
  { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(req.params);
  return { action: "accept", content: { decision: "once" } };
});
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const call = (name, args, options) =>
  client.callTool({ name, arguments: args }, CallToolResultSchema, { timeout: 60000, ...options });
const out = { sessionId: transport.sessionId ?? null, server: client.getServerVersion() };
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.echo = await call("fx:echo", { message: "ts over http" });
const progress = [];
out.progress = await call("fx:progress", { steps: 3, ms: 20 }, { onprogress: (p) => progress.push(p) });
out.progressSeen = progress;
out.add = await call("fx:add", { a: 2, b: 3 });
out.asked = asked;
const abort = new AbortController();
setTimeout(() => abort.abort("the test cancels"), 300);
const t0 = Date.now();
try {
  await call("fx:slow", { ms: 30000 }, { signal: abort.signal });
  out.cancelled = "answered anyway";
} catch (e) {
  out.cancelled = String(e);
}
out.cancelMs = Date.now() - t0;
out.after = await call("fx:echo", { message: "ts still served" });
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(out));
"#;

/// The Python SDK client, the same steps; prints one JSON object.
const PY_CLIENT: &str = r#"
import asyncio, json, sys, time
import anyio
from mcp import Client
import mcp.types as types

async def main():
    url = sys.argv[1]
    asked, progress = [], []
    dump = lambda r: r.model_dump(mode="json", by_alias=True, exclude_none=True)
    async def on_elicit(context, params):
        asked.append(dump(params))
        return types.ElicitResult(action="accept", content={"decision": "once"})
    async def on_progress(p, total, message):
        progress.append({"progress": p, "total": total})
    out = {}
    async with Client(url, mode="legacy", read_timeout_seconds=60,
                      elicitation_callback=on_elicit) as client:
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        out["echo"] = dump(await client.call_tool("fx:echo", {"message": "py over http"}))
        out["progress"] = dump(await client.call_tool(
            "fx:progress", {"steps": 3, "ms": 20}, progress_callback=on_progress))
        out["progressSeen"] = progress
        out["add"] = dump(await client.call_tool("fx:add", {"a": 2, "b": 3}))
        out["asked"] = asked
        t0 = time.monotonic()
        with anyio.move_on_after(0.3) as scope:
            await client.call_tool("fx:slow", {"ms": 30000})
        out["cancelled"] = scope.cancelled_caught
        out["cancelMs"] = round((time.monotonic() - t0) * 1000)
        out["after"] = dump(await client.call_tool("fx:echo", {"message": "py still served"}))
    print(json.dumps(out))

asyncio.run(main())
"#;

/// A hub serving stdio and HTTP on a free loopback port, fx ready; echo, progress and slow
/// are allowed, anything else (add) asks.
struct HttpHub {
    hub: Hub,
    url: String,
    dir: PathBuf,
}

async fn http_hub() -> HttpHub {
    let sc = Scratch::new();
    let dir = sc.path().to_path_buf();
    let permissions = json!({"permissions":
        {"default": "ask", "allow": ["fx:echo", "fx:progress", "fx:slow"]}});
    let config = sc.servers(json!({"fx": fixture(&[])}), Some(permissions));
    let mut hub = serve_with(&config, &["serve", "--http", "127.0.0.1:0"], &[])
        .await
        .owning(sc);
    HttpHub {
        url: format!("{}/mcp", http_base(&mut hub).await),
        hub,
        dir,
    }
}

/// Runs a client script (`interpreter` from peers.json) against the hub; its JSON output.
async fn run_client(
    peers: &Peers,
    interpreter: &str,
    script: &str,
    file: &str,
    h: &HttpHub,
) -> Value {
    let path = h.dir.join(file);
    std::fs::write(&path, script).unwrap();
    let words = peers.command(interpreter);
    let peers_dir = peers.vars["OPENPACT_PEERS_DIR"].as_str().unwrap();
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..])
        .arg(&path)
        .arg(&h.url)
        .arg(peers_dir)
        .current_dir(&h.dir)
        .stdin(Stdio::null());
    let ran = Ran::of(cmd, file, Duration::from_secs(90)).await;
    assert_eq!(ran.code, Some(0), "{ran}\nhub:\n{}", h.hub.stderr());
    ran.json()
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or("")
}

/// What both SDKs must have seen: real values, not just success.
fn assert_session(v: &Value, who: &str) {
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    for t in ["fx:echo", "fx:progress", "fx:add", "fx:slow"] {
        assert!(tools.contains(&t), "{who}: {t} missing from {tools:?}");
    }
    assert_eq!(text(&v["echo"]), format!("{who} over http"), "{v:#}");
    assert_ne!(v["echo"]["isError"], true, "{v:#}");

    let seen = v["progressSeen"].as_array().unwrap();
    assert_eq!(seen.len(), 3, "{who}: one notification per step: {v:#}");
    let values: Vec<f64> = seen
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "{who}: progress rises: {values:?}"
    );
    assert_ne!(v["progress"]["isError"], true, "{v:#}");

    // The prompt came once, for add, in the hub's form; the call then ran.
    let asked = v["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{who}: {v:#}");
    assert!(
        asked[0]["message"].as_str().unwrap().contains("fx:add"),
        "{who}: {v:#}"
    );
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["always", "once", "deny"]),
        "{who}: {v:#}"
    );
    assert_eq!(text(&v["add"]), "5", "{who}: {v:#}");
    assert_ne!(v["add"]["isError"], true, "{v:#}");

    let ms = v["cancelMs"].as_u64().unwrap();
    assert!(ms < 10_000, "{who}: the cancel took {ms} ms");
    assert_eq!(text(&v["after"]), format!("{who} still served"), "{v:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_client_over_http() {
    let Some(peers) = Peers::get() else { return };
    let h = http_hub().await;
    let v = run_client(&peers, "PEER_NODE", TS_CLIENT, "client.mjs", &h).await;
    let sid = v["sessionId"].as_str().unwrap_or("");
    assert!(sid.len() >= 32, "a session id: {v:#}");
    assert_eq!(v["server"]["name"], "openpact", "{v:#}");
    assert_session(&v, "ts");
    let cancelled = v["cancelled"].as_str().unwrap();
    assert!(cancelled.contains("the test cancels"), "{v:#}");
    h.hub
        .wait_log("request cancelled by the client", WAIT)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_over_http() {
    let Some(peers) = Peers::get() else { return };
    let h = http_hub().await;
    let v = run_client(&peers, "PEER_PYTHON", PY_CLIENT, "client.py", &h).await;
    assert_session(&v, "py");
    assert_eq!(v["cancelled"], true, "{v:#}");
    h.hub
        .wait_log("request cancelled by the client", WAIT)
        .await;
}
