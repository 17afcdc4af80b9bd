//! server-everything's whole surface, run with the same client code against the server
//! spawned directly and through `openpact serve` (config `{"mcpServers":{"everything": …}}`)
//! with server-everything reached three ways: as a stdio child, over Streamable HTTP and over
//! HTTP+SSE (its `streamableHttp` and `sse` modes on a loopback port). Each scenario
//! records a transcript of normalised results; every hub's transcript must equal the direct
//! one.
//!
//! The client declares `sampling`, `elicitation` and `roots` and answers server→client
//! requests deterministically (see [`answer`]).
//!
//! Mapping between direct and the hubs: tool and prompt names get the `everything:` prefix through
//! the hub (transcripts hold the bare names); resource URIs are the same on both sides; log
//! `logger`s become `everything` / `everything/<logger>` through the hub (checked, not
//! compared).
//!
//! Normalised before comparing (see [`normalise`]), because the server itself varies them
//! from run to run:
//! - the wall-clock time in server-everything's dynamic resources
//!   (`"… created at 6:03:28 AM"`), in text and inside base64 `blob`s (decoded first): it
//!   appears in template reads, `get-resource-reference` and `resource-prompt`;
//! - `get-env`'s output (each process has its own environment): checked to be a JSON object
//!   of strings, not compared;
//! - the random level of each simulated log message: the logging scenario checks levels
//!   against the filter instead of comparing messages;
//! - `instructions` in `initialize`: the hub only knows them once the server is ready (the
//!   known startup gap is covered in `hub.rs`); the late-initialize test checks them.
//!
//! Not compared: `simulate-research-query` requires task augmentation; called plainly it is
//! the server's own "requires task augmentation" tool error directly, while the hub runs it as
//! the server's task and answers with its report (both checked, not compared).
//!
//! This module holds the harness: a [`Peer`] (one side and the client driving it), how the
//! client answers server→client requests, and the comparison. The scenarios:
//!
//! - `initialize`: capabilities and instructions, early and late.
//! - `tools`: every tool, and URL elicitation.
//! - `resources`: resources, templates, prompts and completion.
//! - `notifications`: log messages against the level, and resource updates to subscribers.
//! - `normalise`: what is made constant before comparing.

mod initialize;
mod normalise;
mod notifications;
mod resources;
mod tools;

use crate::support::{
    self, Client, Hub, LOG_LEVELS, Listening, Peers, Scratch, StderrLog, WAIT,
    everything_listening, free_port, spawn_direct,
};
use normalise::normalise;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::process::Child;
use tokio::time::Instant;

/// The root this client offers for `roots/list`.
pub(crate) const ROOT_URI: &str = "file:///tmp/openpact-everything-root";
/// The text every `sampling/createMessage` gets back.
pub(crate) const SAMPLED: &str = "Sampled reply from the openpact test client.";
/// Watched for "nothing (more) arrives"; notifications caused by a call precede its result.
const QUIET: Duration = Duration::from_millis(400);

/// What the client declares in `initialize`.
fn client_caps() -> Value {
    json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})
}

/// Every tool server-everything lists to a client declaring [`client_caps`].
const TOOLS: [&str; 16] = [
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "get-roots-list",
    "trigger-elicitation-request",
    "trigger-sampling-request",
    "simulate-research-query",
];

fn rank(level: &str) -> usize {
    LOG_LEVELS
        .iter()
        .position(|l| *l == level)
        .unwrap_or_else(|| panic!("unknown log level {level}"))
}

// ---------------------------------------------------------------------------------------
// Processes

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Direct,
    /// The hub with server-everything as its stdio child.
    Hub,
    /// The hub reaching server-everything (`streamableHttp` mode) over Streamable HTTP.
    HubHttp,
    /// The hub reaching server-everything (`sse` mode) over HTTP+SSE.
    HubSse,
}

impl Side {
    /// Every way the hub reaches server-everything.
    const HUBS: [Side; 3] = [Side::Hub, Side::HubHttp, Side::HubSse];

    fn is_hub(self) -> bool {
        self != Side::Direct
    }
}

enum Conn {
    Direct {
        _child: Child,
        client: Client,
        _log: StderrLog,
    },
    Hub(Hub),
}

/// A hub on `side`'s server-everything, called `everything` however it is reached (so that
/// names match), in a scratch dir of its own. `listWait` is generous so that a busy machine
/// never shows the client a server still starting.
/// Also the server-everything it reaches over HTTP, if it does.
async fn start_hub(side: Side, peers: &Peers) -> (Conn, Option<Listening>) {
    let (entry, server) = match side {
        Side::Hub => (peers.entry("PEER_EVERYTHING", &[]), None),
        Side::HubHttp | Side::HubSse => {
            let (mode, kind, path) = if side == Side::HubHttp {
                ("streamableHttp", "streamable-http", "mcp")
            } else {
                ("sse", "sse", "sse")
            };
            let server = everything_listening(peers, mode, free_port()).await;
            let url = format!("http://127.0.0.1:{}/{path}", server.port);
            (json!({"type": kind, "url": url}), Some(server))
        }
        Side::Direct => unreachable!("not a hub"),
    };
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"everything": entry}),
        Some(json!({"listWait": "30s"})),
    );
    let hub = support::serve(&config).await.owning(sc);
    (Conn::Hub(hub), server)
}

/// One side of the comparison and the client driving it.
struct Peer {
    side: Side,
    conn: Conn,
    /// server-everything listening on a port, for the hubs that reach it over HTTP.
    _server: Option<Listening>,
    /// Notifications and server→client requests, in order of arrival.
    seen: Vec<Value>,
    /// (step, normalised result) in the order the scenario ran them.
    transcript: Vec<(String, Value)>,
    init: Value,
}

impl Peer {
    /// Starts the process; nothing is sent yet.
    async fn start(side: Side, peers: &Peers, sc: &Scratch) -> Peer {
        let (conn, server) = match side {
            Side::Direct => {
                let words = peers.command("PEER_EVERYTHING");
                let (child, client, log) = spawn_direct("server-everything", &words, sc.path());
                let conn = Conn::Direct {
                    _child: child,
                    client,
                    _log: log,
                };
                (conn, None)
            }
            hub => start_hub(hub, peers).await,
        };
        Peer {
            side,
            conn,
            _server: server,
            seen: Vec::new(),
            transcript: Vec::new(),
            init: Value::Null,
        }
    }

    /// Initializes a started peer with [`client_caps`], and waits until server-everything
    /// has fetched the client's roots (it asks 350 ms after `initialized`, then logs it).
    async fn open(&mut self) {
        self.initialize(client_caps()).await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        self.roots_synced().await;
    }

    /// Waits until server-everything has asked for the roots (350 ms after `initialized`)
    /// and logged what it got.
    async fn roots_synced(&mut self) {
        let side = self.side;
        let synced = self
            .pump(WAIT, |seen| {
                seen.iter().any(|m| {
                    m["method"] == "notifications/message"
                        && m["params"]["data"] == "Roots updated: 1 root(s) received from client"
                })
            })
            .await;
        assert!(synced, "{side:?}: no roots sync; saw {:#?}", self.seen);
        let ask = self
            .seen
            .iter()
            .find(|m| m["method"] == "roots/list")
            .unwrap_or_else(|| panic!("{side:?}: roots/list never asked"));
        if side.is_hub() {
            // The hub forwards under ids of its own.
            assert!(ask["id"].is_u64(), "hub-allocated id expected: {ask}");
        }
        let log = self
            .seen
            .iter()
            .find(|m| m["params"]["data"] == "Roots updated: 1 root(s) received from client")
            .unwrap();
        assert_eq!(log["params"]["level"], "info", "{log}");
        assert_eq!(
            log["params"]["logger"].as_str(),
            self.logger(Some("everything-server")).as_deref(),
            "{side:?}: {log}"
        );
    }

    async fn initialize(&mut self, capabilities: Value) {
        let r = self
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                       "clientInfo": {"name": "openpact-everything-test", "version": "0"}}),
            )
            .await;
        assert_eq!(
            r["result"]["protocolVersion"], "2025-11-25",
            "{:?}: {r}",
            self.side
        );
        self.init = r["result"].clone();
    }

    fn client(&mut self) -> &mut Client {
        match &mut self.conn {
            Conn::Direct { client, .. } => client,
            Conn::Hub(hub) => &mut hub.client,
        }
    }

    /// The hub process of a hub side.
    fn hub(&mut self) -> &mut Hub {
        match &mut self.conn {
            Conn::Hub(hub) => hub,
            Conn::Direct { .. } => panic!("the direct side has no hub"),
        }
    }

    async fn send(&mut self, m: Value) {
        self.client().send(&m).await;
    }

    /// The name of a server-everything tool or prompt on this side.
    fn name(&self, bare: &str) -> String {
        match self.side {
            Side::Direct => bare.to_string(),
            _ => format!("everything:{bare}"),
        }
    }

    /// The server-everything name of a listed tool or prompt (panics on a foreign name).
    fn bare(&self, name: &str) -> String {
        match self.side {
            Side::Direct => name.to_string(),
            _ => name
                .strip_prefix("everything:")
                .unwrap_or_else(|| panic!("hub name without the everything: prefix: {name}"))
                .to_string(),
        }
    }

    /// The `logger` a client on this side sees for a message server-everything logs with
    /// `upstream` (None: no logger).
    fn logger(&self, upstream: Option<&str>) -> Option<String> {
        match (self.side, upstream) {
            (Side::Direct, l) => l.map(String::from),
            (_, Some(l)) => Some(format!("everything/{l}")),
            (_, None) => Some("everything".into()),
        }
    }

    fn record(&mut self, step: impl Into<String>, value: &Value) {
        self.transcript.push((step.into(), normalise(value)));
    }

    /// Sends a request and waits for its response (the whole message), answering
    /// server→client requests and keeping notifications in `seen` meanwhile.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.client().next_id();
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let side = self.side;
            let m = self.client().recv(left).await.unwrap_or_else(|| {
                panic!("{side:?}: no answer to {method} {params} within {WAIT:?}")
            });
            if m.get("method").is_none() && m["id"] == json!(id) {
                return m;
            }
            self.absorb(m).await;
        }
    }

    /// The `result` of a request that must succeed.
    async fn result(&mut self, method: &str, params: Value) -> Value {
        let r = self.request(method, params.clone()).await;
        assert!(
            r.get("error").is_none() && r["result"].is_object(),
            "{:?}: {method} {params} failed: {r}",
            self.side
        );
        r["result"].clone()
    }

    /// `tools/call` of a server-everything tool; the result (tool errors included).
    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let name = self.name(tool);
        self.result("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    async fn set_level(&mut self, level: &str) {
        let r = self
            .result("logging/setLevel", json!({"level": level}))
            .await;
        assert_eq!(r, json!({}), "{:?}", self.side);
    }

    /// Every item of a paginated list, following `nextCursor`.
    async fn list_all(&mut self, method: &str, field: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut params = json!({});
        loop {
            let r = self.result(method, params).await;
            out.extend(
                r[field]
                    .as_array()
                    .unwrap_or_else(|| panic!("{method}: no {field} in {r}"))
                    .iter()
                    .cloned(),
            );
            match r.get("nextCursor").and_then(Value::as_str) {
                Some(c) => params = json!({"cursor": c}),
                None => return out,
            }
        }
    }

    /// A list with tool/prompt names mapped back to server-everything's.
    async fn list_bare(&mut self, method: &str, field: &str) -> Vec<Value> {
        let mut items = self.list_all(method, field).await;
        for item in &mut items {
            let bare = self.bare(item["name"].as_str().expect("a name"));
            item["name"] = json!(bare);
        }
        items
    }

    /// Answers a server→client request, or keeps a notification; both go to `seen`.
    async fn absorb(&mut self, m: Value) {
        if m.get("method").is_none() {
            panic!("{:?}: a response to no request of ours: {m}", self.side);
        }
        if m.get("id").is_some() {
            let reply = match answer(&m) {
                Ok(result) => json!({"jsonrpc": "2.0", "id": m["id"], "result": result}),
                Err(error) => json!({"jsonrpc": "2.0", "id": m["id"], "error": error}),
            };
            self.send(reply).await;
        }
        self.seen.push(m);
    }

    /// Receives (and absorbs) until `done(seen)` holds or `limit` passes; whether it held.
    async fn pump(&mut self, limit: Duration, done: impl Fn(&[Value]) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if done(&self.seen) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            match self.client().recv(left).await {
                Some(m) => self.absorb(m).await,
                None => return done(&self.seen),
            }
        }
    }

    /// Receives (and absorbs) for `limit`.
    async fn settle(&mut self, limit: Duration) {
        self.pump(limit, |_| false).await;
    }

    /// Params of the messages with `method` seen since `mark`.
    fn since(&self, mark: usize, method: &str) -> Vec<Value> {
        self.seen[mark..]
            .iter()
            .filter(|m| m["method"] == method)
            .map(|m| m["params"].clone())
            .collect()
    }
}

/// How the client answers server→client requests: a fixed root, a fixed sampled text, and
/// an accepted elicitation (filled from the requested schema in form mode).
pub(crate) fn answer(m: &Value) -> Result<Value, Value> {
    match m["method"].as_str().unwrap_or_default() {
        "roots/list" => Ok(json!({"roots": [{"uri": ROOT_URI, "name": "openpact test root"}]})),
        "sampling/createMessage" => Ok(json!({
            "role": "assistant",
            "content": {"type": "text", "text": SAMPLED},
            "model": "openpact-test-model",
            "stopReason": "endTurn",
        })),
        // URL mode: the user "opened the link"; form mode: every field filled.
        "elicitation/create" if m["params"]["mode"] == "url" => Ok(json!({"action": "accept"})),
        "elicitation/create" => Ok(json!({
            "action": "accept",
            "content": fill(&m["params"]["requestedSchema"]),
        })),
        "ping" => Ok(json!({})),
        other => Err(json!({"code": -32601, "message": format!("Method not found: {other}")})),
    }
}

/// A value for every property of an elicitation schema: its default, else its first choice,
/// else a fixed value of its type and format.
fn fill(schema: &Value) -> Value {
    let props = schema["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("elicitation schema without properties: {schema}"));
    let mut out = Map::new();
    for (key, p) in props {
        let first_choice = |p: &Value| {
            p["enum"]
                .get(0)
                .cloned()
                .or_else(|| p["oneOf"].get(0).map(|c| c["const"].clone()))
                .or_else(|| p["anyOf"].get(0).map(|c| c["const"].clone()))
        };
        let v = if let Some(d) = p.get("default") {
            d.clone()
        } else if let Some(c) = first_choice(p) {
            c
        } else {
            match (p["type"].as_str(), p["format"].as_str()) {
                (Some("string"), Some("email")) => json!("ada@example.com"),
                (Some("string"), Some("uri")) => json!("https://example.com/ada"),
                (Some("string"), Some("date")) => json!("1815-12-10"),
                (Some("string"), _) => json!("Ada Lovelace"),
                (Some("boolean"), _) => json!(true),
                (Some("integer" | "number"), _) => p.get("minimum").cloned().unwrap_or(json!(1)),
                (Some("array"), _) => json!([first_choice(&p["items"]).unwrap_or(json!("x"))]),
                _ => panic!("cannot fill elicitation property {key}: {p}"),
            }
        };
        out.insert(key.clone(), v);
    }
    Value::Object(out)
}

/// The names of listed tools, sorted.
fn listed_names(tools: &[Value]) -> BTreeSet<String> {
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The text of content block `i` of a tool result.
fn block_text(result: &Value, i: usize) -> String {
    result["content"][i]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in content[{i}] of {result}"))
        .to_string()
}

/// The two transcripts must hold the same steps with equal results.
fn assert_same(direct: &Peer, hub: &Peer) {
    let side = hub.side;
    let steps = |p: &Peer| {
        p.transcript
            .iter()
            .map(|(s, _)| s.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        steps(hub),
        steps(direct),
        "{side:?}: the scenario ran differently"
    );
    for ((step, d), (_, h)) in direct.transcript.iter().zip(&hub.transcript) {
        assert_eq!(h, d, "{step}: through the hub ({side:?}) ≠ direct");
    }
    assert!(!direct.transcript.is_empty());
}

/// Starts the direct side and every hub side, all at once, each going on with `then` as
/// soon as it has started (a hub declares its client's capabilities upstream only if the
/// client's `initialize` comes within a second of its start).
async fn start_all(
    peers: &Peers,
    sc: &Scratch,
    then: impl AsyncFn(&mut Peer),
) -> (Peer, [Peer; 3]) {
    let one = async |side| {
        let mut p = Peer::start(side, peers, sc).await;
        then(&mut p).await;
        p
    };
    let [a, b, c] = Side::HUBS;
    let (direct, a, b, c) = tokio::join!(one(Side::Direct), one(a), one(b), one(c));
    (direct, [a, b, c])
}

/// Opens the direct side and every hub side, all at once.
async fn open_all(peers: &Peers, sc: &Scratch) -> (Peer, [Peer; 3]) {
    start_all(peers, sc, Peer::open).await
}

/// Runs `scenario` on the direct side and every hub side at once.
async fn run_all(direct: &mut Peer, hubs: &mut [Peer; 3], scenario: impl AsyncFn(&mut Peer)) {
    let [a, b, c] = hubs;
    tokio::join!(scenario(direct), scenario(a), scenario(b), scenario(c));
}

/// Opens every side, runs `scenario` on each at once and compares each hub's transcript
/// with the direct one; the sides, for further checks.
async fn compare(
    peers: &Peers,
    sc: &Scratch,
    scenario: impl AsyncFn(&mut Peer),
) -> (Peer, [Peer; 3]) {
    let (mut direct, mut hubs) = open_all(peers, sc).await;
    run_all(&mut direct, &mut hubs, scenario).await;
    for hub in &hubs {
        assert_same(&direct, hub);
    }
    (direct, hubs)
}
