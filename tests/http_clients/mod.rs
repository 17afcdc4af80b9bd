//! Real MCP SDK clients against `openpact serve --http`: the TypeScript SDK v1
//! (`@modelcontextprotocol/sdk`) and v2 (`@modelcontextprotocol/client`), the Python SDK
//! (`mcp` 2.3) and rmcp's streamable HTTP client. Each lists, calls the fixture's echo,
//! receives the progress tool's notifications, answers a permission prompt (through its
//! elicitation handler on the handshake protocol, through an input-required result on
//! 2026-07-28), subscribes to a resource and gets its update (handshake), and cancels a slow
//! call, which reaches the fixture, the hub serving on afterwards.
//!
//! One script per SDK (`client.mjs`, `client.py`, beside this file) takes the era as an
//! argument; each prints what it saw as one JSON object, checked here.

mod rmcp_client;

use crate::http_face::http_base;
use crate::support::{Hub, Peers, Ran, Scratch, WAIT, fixture, serve_with};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// The revision without `initialize`, which the hub's downstream is learning to speak.
const STATELESS: &str = "2026-07-28";

/// What a `fx:touch` of the subscribed resource must announce: the URI as the hub lists it.
const SUBSCRIBED: &str = "fixture://static/1";

/// A hub serving stdio and HTTP on a free loopback port, fx ready; everything the clients
/// use is allowed except `fx:add`, which asks.
struct HttpHub {
    hub: Hub,
    url: String,
}

async fn http_hub() -> HttpHub {
    let sc = Scratch::new();
    let permissions = json!({"permissions": {"default": "ask", "allow":
        ["fx:echo", "fx:progress", "fx:slow", "fx:touch", "fx:cancelled"]}});
    let config = sc.servers(json!({"fx": fixture(&[])}), Some(permissions));
    let mut hub = serve_with(&config, &["serve", "--http", "127.0.0.1:0"], &[])
        .await
        .owning(sc);
    HttpHub {
        url: format!("{}/mcp", http_base(&mut hub).await),
        hub,
    }
}

/// Runs this folder's `script` with `interpreter` (a peers.json command) and `args` after the
/// hub's URL; its JSON output.
async fn run_client(
    peers: &Peers,
    interpreter: &str,
    script: &str,
    args: &[&str],
    h: &HttpHub,
) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/http_clients")
        .join(script);
    let words = peers.command(interpreter);
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..])
        .arg(&path)
        .arg(&h.url)
        .args(args)
        .stdin(Stdio::null());
    let ran = Ran::of(cmd, (script, args), Duration::from_secs(90)).await;
    assert_eq!(ran.code, Some(0), "{ran}\nhub:\n{}", h.hub.stderr());
    ran.json()
}

/// The TypeScript SDK `sdk` (v1 or v2) in `mode` (handshake or 2026-07-28).
async fn typescript(peers: &Peers, sdk: &str, mode: &str, h: &HttpHub) -> Value {
    let peers_dir = peers.vars["OPENPACT_PEERS_DIR"].as_str().unwrap();
    run_client(peers, "PEER_NODE", "client.mjs", &[peers_dir, sdk, mode], h).await
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or("")
}

/// What every client must have seen, in either era: real values, not just success.
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

    // The cancel was quick, reached the fixture, and the hub served on.
    let ms = v["cancelMs"].as_u64().unwrap();
    assert!(ms < 10_000, "{who}: the cancel took {ms} ms");
    let upstream = v["upstreamCancelled"].as_array().unwrap();
    assert_eq!(
        upstream.len(),
        1,
        "{who}: the fixture saw one cancel: {v:#}"
    );
    assert_eq!(text(&v["after"]), format!("{who} still served"), "{v:#}");
}

/// A handshake session: the subscribed resource's update arrived once, with the hub's URI.
fn assert_handshake(v: &Value, who: &str) {
    let resources = v["resources"].as_array().unwrap();
    assert!(
        resources.contains(&json!(SUBSCRIBED)),
        "{who}: the hub lists {SUBSCRIBED}: {v:#}"
    );
    assert_eq!(v["subscribed"], SUBSCRIBED, "{who}: {v:#}");
    assert_eq!(text(&v["touch"]), "touched", "{who}: {v:#}");
    assert_eq!(v["updated"], json!([SUBSCRIBED]), "{who}: {v:#}");
}

/// A 2026-07-28 exchange: the prompt came as an input-required result carrying an
/// elicitation for add (the first, unanswered call), which the SDK then fulfilled.
fn assert_stateless(v: &Value, who: &str) {
    assert_eq!(v["protocolVersion"], STATELESS, "{who}: {v:#}");
    let ir = &v["inputRequired"];
    assert_eq!(ir["resultType"], "input_required", "{who}: {v:#}");
    let requests: Vec<&Value> = match &ir["inputRequests"] {
        Value::Object(m) => m.values().collect(),
        Value::Array(a) => a.iter().collect(),
        _ => Vec::new(),
    };
    assert_eq!(requests.len(), 1, "{who}: one input request: {v:#}");
    assert_eq!(requests[0]["method"], "elicitation/create", "{who}: {v:#}");
    assert!(
        requests[0]["params"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("fx:add"),
        "{who}: {v:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_v1_client_over_http() {
    let Some(peers) = Peers::get() else { return };
    let h = http_hub().await;
    let v = typescript(&peers, "v1", "legacy", &h).await;
    let sid = v["sessionId"].as_str().unwrap_or("");
    assert!(sid.len() >= 32, "a session id: {v:#}");
    assert_eq!(v["server"]["name"], "openpact", "{v:#}");
    assert_session(&v, "ts-v1");
    assert_handshake(&v, "ts-v1");
    assert!(
        v["cancelled"]
            .as_str()
            .unwrap()
            .contains("the test cancels"),
        "{v:#}"
    );
    h.hub
        .wait_log("request cancelled by the client", WAIT)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_v2_client_over_http_handshake() {
    let Some(peers) = Peers::get() else { return };
    let h = http_hub().await;
    let v = typescript(&peers, "v2", "legacy", &h).await;
    let sid = v["sessionId"].as_str().unwrap_or("");
    assert!(sid.len() >= 32, "a session id: {v:#}");
    assert_eq!(v["server"]["name"], "openpact", "{v:#}");
    assert_session(&v, "ts-v2");
    assert_handshake(&v, "ts-v2");
    h.hub
        .wait_log("request cancelled by the client", WAIT)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_v2_client_over_http_2026() {
    let Some(peers) = Peers::get() else { return };
    let h = http_hub().await;
    let v = typescript(&peers, "v2", STATELESS, &h).await;
    assert_eq!(v["sessionId"], Value::Null, "stateless: {v:#}");
    assert_session(&v, "ts-v2");
    assert_stateless(&v, "ts-v2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_over_http() {
    let Some(peers) = Peers::get() else { return };
    let h = http_hub().await;
    let v = run_client(&peers, "PEER_PYTHON", "client.py", &["legacy"], &h).await;
    assert_session(&v, "py");
    assert_handshake(&v, "py");
    assert_eq!(v["cancelled"], true, "{v:#}");
    h.hub
        .wait_log("request cancelled by the client", WAIT)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_over_http_2026() {
    let Some(peers) = Peers::get() else { return };
    let h = http_hub().await;
    let v = run_client(&peers, "PEER_PYTHON", "client.py", &[STATELESS], &h).await;
    assert_session(&v, "py");
    assert_stateless(&v, "py");
    assert_eq!(v["cancelled"], true, "{v:#}");
}
