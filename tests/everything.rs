//! server-everything's whole surface, run twice with the same client code: once against the
//! server spawned directly, once through `openpact serve` (config
//! `{"mcpServers":{"everything": …}}`). Each scenario records a transcript of normalised
//! results; the two transcripts must be equal.
//!
//! The client declares `sampling`, `elicitation` and `roots` and answers server→client
//! requests deterministically (see [`answer`]).
//!
//! Mapping between the two sides: tool and prompt names get the `everything:` prefix through
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
//! Not covered: `simulate-research-query` requires task augmentation (`tasks/*`), which the
//! hub neither declares nor relays; it is called without a task on both sides (the server's
//! own "requires task augmentation" tool error, compared like every other result).

use crate::support::{self, Client, Hub, Peers, Scratch, WAIT};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// The root this client offers for `roots/list`.
const ROOT_URI: &str = "file:///tmp/openpact-everything-root";
/// The text every `sampling/createMessage` gets back.
const SAMPLED: &str = "Sampled reply from the openpact test client.";
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

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

fn rank(level: &str) -> usize {
    LOG_LEVELS
        .iter()
        .position(|l| *l == level)
        .unwrap_or_else(|| panic!("unknown log level {level}"))
}

// ---------------------------------------------------------------------------------------
// Processes

/// A child's stderr, collected in the background and printed if the test fails.
pub(crate) struct StderrLog {
    what: String,
    text: Arc<Mutex<String>>,
}

impl StderrLog {
    pub(crate) fn drain(
        what: &str,
        pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    ) -> StderrLog {
        let text = Arc::new(Mutex::new(String::new()));
        let sink = text.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut s = sink.lock().unwrap();
                if s.len() < 1 << 20 {
                    s.push_str(&line);
                    s.push('\n');
                }
            }
        });
        StderrLog {
            what: what.to_string(),
            text,
        }
    }
}

impl Drop for StderrLog {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- {} stderr ----\n{}",
                self.what,
                self.text.lock().unwrap()
            );
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Direct,
    Hub,
}

enum Conn {
    Direct {
        _child: Child,
        client: Client,
        _log: StderrLog,
    },
    Hub(Hub),
}

/// The hub config: server-everything as `everything`. `listWait` is generous so that a busy
/// machine never shows the client a server still starting.
fn hub_config(peers: &Peers, sc: &Scratch) -> std::path::PathBuf {
    sc.servers(
        json!({"everything": peers.entry("PEER_EVERYTHING", &[])}),
        Some(json!({"listWait": "30s"})),
    )
}

/// One side of the comparison and the client driving it.
struct Peer {
    side: Side,
    conn: Conn,
    /// Notifications and server→client requests, in order of arrival.
    seen: Vec<Value>,
    /// (step, normalised result) in the order the scenario ran them.
    transcript: Vec<(String, Value)>,
    init: Value,
}

impl Peer {
    /// Starts the process; nothing is sent yet.
    async fn start(side: Side, peers: &Peers, sc: &Scratch) -> Peer {
        let conn = match side {
            Side::Direct => {
                let words = peers.command("PEER_EVERYTHING");
                let mut child = Command::new(&words[0])
                    .args(&words[1..])
                    .current_dir(sc.path())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true)
                    .spawn()
                    .unwrap_or_else(|e| panic!("spawn {words:?}: {e}"));
                let log = StderrLog::drain("server-everything", child.stderr.take().unwrap());
                let client =
                    Client::over(child.stdin.take().unwrap(), child.stdout.take().unwrap());
                Conn::Direct {
                    _child: child,
                    client,
                    _log: log,
                }
            }
            Side::Hub => Conn::Hub(support::serve(&hub_config(peers, sc)).await),
        };
        Peer {
            side,
            conn,
            seen: Vec::new(),
            transcript: Vec::new(),
            init: Value::Null,
        }
    }

    /// Starts, initializes with [`client_caps`], and waits until server-everything has
    /// fetched the client's roots (it asks 350 ms after `initialized`, then logs it).
    async fn open(side: Side, peers: &Peers, sc: &Scratch) -> Peer {
        let mut p = Peer::start(side, peers, sc).await;
        p.initialize(client_caps()).await;
        p.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        p.roots_synced().await;
        p
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
        if side == Side::Hub {
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

    async fn send(&mut self, m: Value) {
        self.client().send(&m).await;
    }

    /// The name of a server-everything tool or prompt on this side.
    fn name(&self, bare: &str) -> String {
        match self.side {
            Side::Direct => bare.to_string(),
            Side::Hub => format!("everything:{bare}"),
        }
    }

    /// The server-everything name of a listed tool or prompt (panics on a foreign name).
    fn bare(&self, name: &str) -> String {
        match self.side {
            Side::Direct => name.to_string(),
            Side::Hub => name
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
            (Side::Hub, Some(l)) => Some(format!("everything/{l}")),
            (Side::Hub, None) => Some("everything".into()),
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
fn answer(m: &Value) -> Result<Value, Value> {
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

// ---------------------------------------------------------------------------------------
// Normalisation

const STAMP: &str = " created at ";

/// Replaces the clock time after each " created at " with `<time>`.
fn untime(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(STAMP) {
        out.push_str(&rest[..i + STAMP.len()]);
        rest = &rest[i + STAMP.len()..];
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == ':'))
            .unwrap_or(rest.len());
        if n > 0 {
            rest = &rest[n..];
            for suffix in [" AM", " PM", "\u{202f}AM", "\u{202f}PM"] {
                if let Some(r) = rest.strip_prefix(suffix) {
                    rest = r;
                }
            }
            out.push_str("<time>");
        }
    }
    out.push_str(rest);
    out
}

/// Standard base64 (with or without padding); None if it is not.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for c in s.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    Some(out)
}

fn base64_encode(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The run-dependent parts of server-everything's answers, made constant: clock times in
/// text, and in base64 blobs that decode to such text (replaced by "base64 of: <text>").
fn normalise(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(untime(s)),
        Value::Array(a) => Value::Array(a.iter().map(normalise).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    if k == "blob"
                        && let Some(text) = v
                            .as_str()
                            .and_then(base64_decode)
                            .and_then(|b| String::from_utf8(b).ok())
                        && text.contains(STAMP)
                    {
                        return (k.clone(), json!(format!("base64 of: {}", untime(&text))));
                    }
                    (k.clone(), normalise(v))
                })
                .collect(),
        ),
        other => other.clone(),
    }
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
    let steps = |p: &Peer| {
        p.transcript
            .iter()
            .map(|(s, _)| s.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(steps(hub), steps(direct), "the scenario ran differently");
    for ((step, d), (_, h)) in direct.transcript.iter().zip(&hub.transcript) {
        assert_eq!(h, d, "{step}: through the hub ≠ direct");
    }
    assert!(!direct.transcript.is_empty());
}

/// Opens both sides (in parallel).
async fn open_both(peers: &Peers, sc: &Scratch) -> (Peer, Peer) {
    tokio::join!(
        Peer::open(Side::Direct, peers, sc),
        Peer::open(Side::Hub, peers, sc)
    )
}

// ---------------------------------------------------------------------------------------
// initialize

/// What server-everything offers, as both it and the hub must declare it.
fn assert_everything_caps(side: Side, caps: &Value) {
    assert_eq!(caps["resources"]["subscribe"], true, "{side:?}: {caps:#}");
    for cap in ["tools", "resources", "prompts", "completions", "logging"] {
        assert!(caps[cap].is_object(), "{side:?}: no {cap} in {caps:#}");
    }
    assert_eq!(caps["tools"]["listChanged"], true, "{side:?}: {caps:#}");
    assert_eq!(caps["prompts"]["listChanged"], true, "{side:?}: {caps:#}");
    assert_eq!(caps["resources"]["listChanged"], true, "{side:?}: {caps:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_initialize_declares_what_everything_offers() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (direct, hub) = open_both(&peers, &sc).await;
    assert_eq!(direct.init["serverInfo"]["name"], "mcp-servers/everything");
    assert_eq!(hub.init["serverInfo"]["name"], "openpact");
    assert_everything_caps(Side::Direct, &direct.init["capabilities"]);
    assert_everything_caps(Side::Hub, &hub.init["capabilities"]);
    // Only what the hub can bridge: server-everything's experimental `tasks` is not relayed.
    let keys: BTreeSet<&str> = hub.init["capabilities"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["tools", "resources", "prompts", "completions", "logging"]),
        "{:#}",
        hub.init
    );
}

/// A client that initializes only once server-everything is ready gets the capabilities
/// (and instructions) of the real server, not the "still starting: everything" answer; and
/// since it came after the hub's 1 s wait, server-everything was told no client capability:
/// the hub lists what server-everything lists to a client declaring none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_initialize_sees_the_ready_server() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (mut direct, mut hub) = tokio::join!(
        Peer::start(Side::Direct, &peers, &sc),
        Peer::start(Side::Hub, &peers, &sc)
    );
    let deadline = Instant::now() + WAIT;
    let stderr = loop {
        let Conn::Hub(h) = &hub.conn else {
            unreachable!()
        };
        let text = h.stderr();
        if text.contains("ready server=everything") {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "everything not ready within {WAIT:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(stderr.contains("ready server=everything"));
    for p in [&mut direct, &mut hub] {
        p.initialize(json!({})).await;
        p.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_everything_caps(p.side, &p.init["capabilities"]);
    }
    let own = direct.init["instructions"]
        .as_str()
        .expect("server-everything has instructions");
    let all = hub.init["instructions"]
        .as_str()
        .unwrap_or_else(|| panic!("no instructions: {:#}", hub.init));
    assert!(
        all.contains(&format!("## everything\n{}", own.trim())),
        "{all}"
    );
    // server-everything registers its conditional tools after `initialized`.
    direct.settle(QUIET).await;
    let d = direct.list_bare("tools/list", "tools").await;
    let h = hub.list_bare("tools/list", "tools").await;
    assert_eq!(h, d);
    let names: Vec<&str> = d.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(!names.contains(&"get-roots-list"), "{names:?}");
    assert!(names.contains(&"get-sum"), "{names:?}");
}

// ---------------------------------------------------------------------------------------
// Tools

/// Lists the tools until the conditional ones (registered after `initialized`) are there.
async fn settled_tools(p: &mut Peer) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let tools = p.list_bare("tools/list", "tools").await;
        if tools
            .iter()
            .any(|t| t["name"] == "trigger-sampling-request")
        {
            return tools;
        }
        assert!(
            Instant::now() < deadline,
            "{:?}: conditional tools never listed: {tools:#?}",
            p.side
        );
        p.pump(Duration::from_millis(200), |_| false).await;
    }
}

async fn tools_scenario(p: &mut Peer) {
    let tools = settled_tools(p).await;
    let listed: BTreeSet<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        listed,
        TOOLS.iter().map(|t| t.to_string()).collect(),
        "{:?}",
        p.side
    );
    p.record("tools/list", &json!(tools));
    let mut called = BTreeSet::new();

    let plain: &[(&str, Value)] = &[
        ("echo", json!({"message": "hello from openpact"})),
        ("get-annotated-message", json!({"messageType": "error"})),
        ("get-annotated-message", json!({"messageType": "success"})),
        (
            "get-annotated-message",
            json!({"messageType": "debug", "includeImage": true}),
        ),
        ("get-resource-links", json!({"count": 4})),
        ("get-resource-links", json!({})),
        (
            "get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 1}),
        ),
        (
            "get-resource-reference",
            json!({"resourceType": "Blob", "resourceId": 2}),
        ),
        ("get-structured-content", json!({"location": "Chicago"})),
        ("get-structured-content", json!({"location": "New York"})),
        ("get-sum", json!({"a": 2, "b": 3})),
        ("get-sum", json!({"a": -1.5, "b": 0.25})),
        ("get-tiny-image", json!({})),
        ("get-roots-list", json!({})),
        // Needs task augmentation, which the hub does not relay: the server's own tool
        // error, the same on both sides.
        (
            "simulate-research-query",
            json!({"topic": "python", "ambiguous": false}),
        ),
        // On, then off again: the messages and updates they start are the business of the
        // logging and subscription tests.
        ("toggle-simulated-logging", json!({})),
        ("toggle-simulated-logging", json!({})),
        ("toggle-subscriber-updates", json!({})),
        ("toggle-subscriber-updates", json!({})),
    ];
    for (tool, args) in plain {
        let r = p.call(tool, args.clone()).await;
        p.record(format!("tools/call {tool} {args}"), &r);
        called.insert(tool.to_string());
    }
    let side = p.side;
    let find = |step: &str| {
        p.transcript
            .iter()
            .find(|(s, _)| s.starts_with(step))
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(
        block_text(&find("tools/call echo"), 0),
        "Echo: hello from openpact"
    );
    assert_eq!(
        find("tools/call get-sum {\"a\":2")["content"][0]["text"],
        "The sum of 2 and 3 is 5."
    );
    assert_eq!(
        find("tools/call get-structured-content {\"location\":\"Chicago\"}")["structuredContent"],
        json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})
    );
    assert!(block_text(&find("tools/call get-roots-list"), 0).contains(ROOT_URI));
    let research = find("tools/call simulate-research-query");
    assert_eq!(research["isError"], true, "{side:?}: {research}");
    assert!(
        block_text(&research, 0).contains("task augmentation"),
        "{side:?}: {research}"
    );
    let reference = find("tools/call get-resource-reference {\"resourceType\":\"Text\"");
    assert_eq!(
        reference["content"][1]["resource"]["text"],
        "Resource 1: This is a plaintext resource created at <time>",
        "{side:?}: normalisation missed the time: {reference}"
    );

    // get-env: each process has its own environment; only check that it answers one.
    let env = p.call("get-env", json!({})).await;
    let vars: Value = serde_json::from_str(&block_text(&env, 0)).unwrap();
    assert!(
        vars.as_object()
            .is_some_and(|o| !o.is_empty() && o.values().all(Value::is_string)),
        "{side:?}: {env}"
    );
    p.record("tools/call get-env", &json!("<environment: not compared>"));
    called.insert("get-env".into());

    // Progress: with the client's own token (string and number), in order, before the
    // result.
    for token in [json!("everything-progress"), json!(7)] {
        let mark = p.seen.len();
        let name = p.name("trigger-long-running-operation");
        let r = p
            .request(
                "tools/call",
                json!({"name": name, "arguments": {"duration": 0.3, "steps": 3},
                       "_meta": {"progressToken": token}}),
            )
            .await;
        let progress = p.since(mark, "notifications/progress");
        assert_eq!(
            progress,
            (1..=3)
                .map(|i| json!({"progress": i, "total": 3, "progressToken": token}))
                .collect::<Vec<_>>(),
            "{side:?}: progress before the result"
        );
        p.record(
            format!("tools/call trigger-long-running-operation token {token}"),
            &r["result"],
        );
        p.record(
            format!("progress for token {token}"),
            &json!(progress.len()),
        );
    }
    called.insert("trigger-long-running-operation".into());

    // Server→client requests: what the client was asked, and what the tool made of the
    // answer.
    let mark = p.seen.len();
    let r = p
        .call(
            "trigger-sampling-request",
            json!({"prompt": "Say hello", "maxTokens": 20}),
        )
        .await;
    let asked = p.since(mark, "sampling/createMessage");
    assert_eq!(asked.len(), 1, "{side:?}: {asked:?}");
    assert!(block_text(&r, 0).contains(SAMPLED), "{side:?}: {r}");
    p.record("sampling/createMessage asked", &asked[0]);
    p.record("tools/call trigger-sampling-request", &r);
    called.insert("trigger-sampling-request".into());

    let mark = p.seen.len();
    let r = p.call("trigger-elicitation-request", json!({})).await;
    let asked = p.since(mark, "elicitation/create");
    assert_eq!(asked.len(), 1, "{side:?}: {asked:?}");
    let all_text: String = (0..r["content"].as_array().unwrap().len())
        .map(|i| block_text(&r, i))
        .collect();
    assert!(
        all_text.contains("User provided the requested information")
            && all_text.contains("- Name: Ada Lovelace")
            && all_text.contains("- Favorite Integer: 42"),
        "{side:?}: {all_text}"
    );
    p.record("elicitation/create asked", &asked[0]);
    p.record("tools/call trigger-elicitation-request", &r);
    called.insert("trigger-elicitation-request".into());

    // gzip-file-as-resource fetches a URL; a data: URI keeps it off the network. It
    // registers a session resource (announced with resources/list_changed) that must then
    // be listed and readable on both sides.
    let data = format!(
        "data:text/plain;base64,{}",
        base64_encode(b"Hello from the openpact everything test.\n")
    );
    let uri = "demo://resource/session/openpact-test.txt.gz";
    let r = p
        .call(
            "gzip-file-as-resource",
            json!({"name": "openpact-test.txt.gz", "data": data, "outputType": "resourceLink"}),
        )
        .await;
    assert_eq!(r["content"][0]["type"], "resource_link", "{side:?}: {r}");
    assert_eq!(r["content"][0]["uri"], uri, "{side:?}: {r}");
    p.record("tools/call gzip-file-as-resource resourceLink", &r);
    let deadline = Instant::now() + WAIT;
    let listed = loop {
        let resources = p.list_all("resources/list", "resources").await;
        if let Some(found) = resources.iter().find(|r| r["uri"] == uri) {
            break found.clone();
        }
        assert!(
            Instant::now() < deadline,
            "{side:?}: {uri} never listed: {resources:#?}"
        );
        p.pump(Duration::from_millis(200), |_| false).await;
    };
    p.record("resources/list: the session resource", &listed);
    let read = p.result("resources/read", json!({"uri": uri})).await;
    let blob = read["contents"][0]["blob"].as_str().unwrap_or_default();
    let gz = base64_decode(blob).unwrap_or_default();
    assert!(
        gz.starts_with(&[0x1f, 0x8b]),
        "{side:?}: not gzip data: {read}"
    );
    p.record("resources/read session resource", &read);
    let r = p
        .call(
            "gzip-file-as-resource",
            json!({"name": "openpact-inline.txt.gz", "data": data, "outputType": "resource"}),
        )
        .await;
    assert_eq!(
        r["content"][0]["resource"]["blob"], blob,
        "{side:?}: same input, same gzip"
    );
    p.record("tools/call gzip-file-as-resource resource", &r);
    called.insert("gzip-file-as-resource".into());

    // Invalid arguments: the server's own validation, passed on as it is.
    let r = p
        .request(
            "tools/call",
            json!({"name": p.name("get-sum"), "arguments": {"a": "two"}}),
        )
        .await;
    p.record("tools/call get-sum with a string", &r["result"]);
    p.record("tools/call get-sum with a string (error)", &r["error"]);

    // Cancellation: once the client cancels, no response comes for that request (the
    // server may still report progress for a moment; the hub drops it with the token).
    let id = p.client().next_id();
    let name = p.name("trigger-long-running-operation");
    let mark = p.seen.len();
    p.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                  "params": {"name": name, "arguments": {"duration": 3, "steps": 30},
                             "_meta": {"progressToken": "to-be-cancelled"}}}))
        .await;
    let started = p
        .pump(WAIT, |seen| {
            seen[mark..]
                .iter()
                .any(|m| m["params"]["progressToken"] == "to-be-cancelled")
        })
        .await;
    assert!(started, "{side:?}: no progress before the cancel");
    p.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": id, "reason": "test cancels"}}),
    )
    .await;
    // A response to it would make `absorb` panic.
    p.settle(QUIET).await;
    let pong = p.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{side:?}: {pong}");
    p.record(
        "cancelled trigger-long-running-operation",
        &json!("no response"),
    );

    // Every server→client request came under an id of its own.
    let ids: Vec<&Value> = p
        .seen
        .iter()
        .filter(|m| m.get("id").is_some())
        .map(|m| &m["id"])
        .collect();
    let unique: BTreeSet<String> = ids.iter().map(|i| i.to_string()).collect();
    assert_eq!(unique.len(), ids.len(), "{side:?}: ids reused: {ids:?}");
    assert!(
        ids.len() >= 3,
        "{side:?}: roots, sampling, elicitation: {ids:?}"
    );

    assert_eq!(called, listed_names(&tools), "{side:?}: every tool called");

    // The list_changed announcements server-everything sent (and the hub's own) changed
    // nothing: the list is still the same, and the connection still answers.
    let again = p.list_bare("tools/list", "tools").await;
    assert_eq!(again, tools, "{side:?}");
    let pong = p.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{side:?}: {pong}");
}

fn listed_names(tools: &[Value]) -> BTreeSet<String> {
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_answers_the_same_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (mut direct, mut hub) = open_both(&peers, &sc).await;
    tokio::join!(tools_scenario(&mut direct), tools_scenario(&mut hub));
    assert_same(&direct, &hub);
    let Conn::Hub(h) = &mut hub.conn else {
        unreachable!()
    };
    let (code, _) = h.close().await;
    assert_eq!(code, Some(0), "{}", h.stderr());
}

// ---------------------------------------------------------------------------------------
// Resources, prompts, completion

async fn resources_prompts_scenario(p: &mut Peer) {
    let side = p.side;
    let resources = p.list_all("resources/list", "resources").await;
    assert!(
        resources
            .iter()
            .any(|r| r["uri"] == "demo://resource/static/document/features.md"),
        "{side:?}: {resources:#?}"
    );
    p.record("resources/list", &json!(resources));
    for r in &resources {
        let uri = r["uri"].as_str().unwrap();
        let read = p.result("resources/read", json!({"uri": uri})).await;
        assert_eq!(read["contents"][0]["uri"], uri, "{side:?}: {read}");
        assert!(
            read["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| !t.is_empty()),
            "{side:?}: {read}"
        );
        p.record(format!("resources/read {uri}"), &read);
    }

    let templates = p
        .list_all("resources/templates/list", "resourceTemplates")
        .await;
    let uri_templates: Vec<&str> = templates
        .iter()
        .filter_map(|t| t["uriTemplate"].as_str())
        .collect();
    assert_eq!(
        uri_templates,
        [
            "demo://resource/dynamic/text/{resourceId}",
            "demo://resource/dynamic/blob/{resourceId}"
        ],
        "{side:?}"
    );
    p.record("resources/templates/list", &json!(templates));
    for uri in [
        "demo://resource/dynamic/text/1",
        "demo://resource/dynamic/text/42",
        "demo://resource/dynamic/blob/1",
        "demo://resource/dynamic/blob/7",
    ] {
        let read = p.result("resources/read", json!({"uri": uri})).await;
        assert_eq!(read["contents"][0]["uri"], uri, "{side:?}: {read}");
        p.record(format!("resources/read {uri}"), &read);
    }
    let text1 = p
        .transcript
        .iter()
        .find(|(s, _)| s == "resources/read demo://resource/dynamic/text/1")
        .unwrap()
        .1
        .clone();
    assert_eq!(
        text1["contents"][0]["text"],
        "Resource 1: This is a plaintext resource created at <time>"
    );
    let blob7 = &p.transcript.last().unwrap().1;
    assert_eq!(
        blob7["contents"][0]["blob"],
        "base64 of: Resource 7: This is a base64 blob created at <time>"
    );
    // A URI the template matches but the server rejects: its own error, passed on.
    let bad = p
        .request(
            "resources/read",
            json!({"uri": "demo://resource/dynamic/text/abc"}),
        )
        .await;
    assert!(bad["error"]["code"].is_i64(), "{side:?}: {bad}");
    p.record("resources/read text/abc (error)", &bad["error"]);

    let prompts = p.list_bare("prompts/list", "prompts").await;
    let names = listed_names(&prompts);
    assert_eq!(
        names,
        BTreeSet::from(
            [
                "simple-prompt",
                "args-prompt",
                "completable-prompt",
                "resource-prompt"
            ]
            .map(String::from)
        ),
        "{side:?}"
    );
    p.record("prompts/list", &json!(prompts));
    let gets: &[(&str, Value)] = &[
        ("simple-prompt", json!({})),
        ("args-prompt", json!({"city": "Paris"})),
        ("args-prompt", json!({"city": "Austin", "state": "Texas"})),
        (
            "completable-prompt",
            json!({"department": "Engineering", "name": "Alice"}),
        ),
        (
            "resource-prompt",
            json!({"resourceType": "Text", "resourceId": "1"}),
        ),
        (
            "resource-prompt",
            json!({"resourceType": "Blob", "resourceId": "2"}),
        ),
    ];
    let mut got = BTreeSet::new();
    for (prompt, args) in gets {
        let name = p.name(prompt);
        let r = p
            .result("prompts/get", json!({"name": name, "arguments": args}))
            .await;
        assert!(
            r["messages"].as_array().is_some_and(|m| !m.is_empty()),
            "{side:?}: {r}"
        );
        p.record(format!("prompts/get {prompt} {args}"), &r);
        got.insert(prompt.to_string());
    }
    assert_eq!(got, names, "{side:?}: every prompt fetched");
    let paris = &p.transcript[p.transcript.len() - 5].1;
    assert_eq!(
        paris["messages"][0]["content"]["text"], "What's weather in Paris?",
        "{side:?}: {paris}"
    );
    // The server's own errors for bad arguments.
    for (prompt, args) in [
        (
            "resource-prompt",
            json!({"resourceType": "Nope", "resourceId": "1"}),
        ),
        ("args-prompt", json!({})),
    ] {
        let name = p.name(prompt);
        let r = p
            .request("prompts/get", json!({"name": name, "arguments": args}))
            .await;
        assert!(r["error"]["code"].is_i64(), "{side:?}: {r}");
        p.record(format!("prompts/get {prompt} {args} (error)"), &r["error"]);
    }

    // Completion, for prompt arguments (by namespaced name) and template variables (by
    // URI template).
    let prompt_ref = |p: &Peer, name: &str| json!({"type": "ref/prompt", "name": p.name(name)});
    let cases = [
        (prompt_ref(p, "completable-prompt"), "department", "", None),
        (prompt_ref(p, "completable-prompt"), "department", "S", None),
        (
            prompt_ref(p, "completable-prompt"),
            "name",
            "",
            Some(json!({"arguments": {"department": "Sales"}})),
        ),
        (
            prompt_ref(p, "completable-prompt"),
            "name",
            "E",
            Some(json!({"arguments": {"department": "Sales"}})),
        ),
        (prompt_ref(p, "resource-prompt"), "resourceType", "B", None),
        (prompt_ref(p, "resource-prompt"), "resourceId", "3", None),
        (
            json!({"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"}),
            "resourceId",
            "5",
            None,
        ),
        (
            json!({"type": "ref/resource", "uri": "demo://resource/dynamic/blob/{resourceId}"}),
            "resourceId",
            "x",
            None,
        ),
    ];
    for (reference, arg, value, context) in cases {
        let mut params = json!({"ref": reference, "argument": {"name": arg, "value": value}});
        if let Some(c) = &context {
            params["context"] = c.clone();
        }
        let r = p.result("completion/complete", params).await;
        let mut label_ref = reference.clone();
        if let Some(n) = reference["name"].as_str() {
            label_ref["name"] = json!(p.bare(n));
        }
        p.record(
            format!("completion/complete {label_ref} {arg}={value:?} {context:?}"),
            &r,
        );
    }
    let values = |step: &str| {
        p.transcript
            .iter()
            .find(|(s, _)| s.contains(step))
            .unwrap_or_else(|| panic!("no step {step}"))
            .1["completion"]["values"]
            .clone()
    };
    assert_eq!(
        values("department=\"S\""),
        json!(["Sales", "Support"]),
        "{side:?}"
    );
    assert_eq!(
        values("name=\"\" Some"),
        json!(["David", "Eve", "Frank"]),
        "{side:?}"
    );
    assert_eq!(values("resourceType=\"B\""), json!(["Blob"]), "{side:?}");
    assert_eq!(values("resourceId=\"5\""), json!(["5"]), "{side:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_prompts_and_completions_are_the_same_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (mut direct, mut hub) = open_both(&peers, &sc).await;
    tokio::join!(
        resources_prompts_scenario(&mut direct),
        resources_prompts_scenario(&mut hub)
    );
    assert_same(&direct, &hub);
}

// ---------------------------------------------------------------------------------------
// Logging

/// server-everything's simulated log messages seen since `mark` (its other messages, about
/// roots and subscriptions, left out).
fn simulated(p: &Peer, mark: usize) -> Vec<Value> {
    p.since(mark, "notifications/message")
        .into_iter()
        .filter(|m| {
            m["data"]
                .as_str()
                .is_some_and(|d| d.contains("-level message") || d.contains("level-message"))
        })
        .collect()
}

/// Turns simulated logging on and off `times` times (each "on" sends one message of a random
/// level, if the level passes) and returns the simulated messages that arrived.
async fn toggle_logging(p: &mut Peer, times: usize) -> Vec<Value> {
    let mark = p.seen.len();
    for _ in 0..times {
        let on = p.call("toggle-simulated-logging", json!({})).await;
        assert!(block_text(&on, 0).starts_with("Started"), "{on}");
        let off = p.call("toggle-simulated-logging", json!({})).await;
        assert!(block_text(&off, 0).starts_with("Stopped"), "{off}");
    }
    p.settle(QUIET).await;
    simulated(p, mark)
}

async fn logging_scenario(p: &mut Peer) {
    let side = p.side;
    for level in LOG_LEVELS {
        let r = p.result("logging/setLevel", json!({"level": level})).await;
        p.record(format!("logging/setLevel {level}"), &r);
    }
    // An unknown level is refused on both sides (server-everything says -32603, the hub
    // -32602: not compared).
    let bad = p
        .request("logging/setLevel", json!({"level": "loud"}))
        .await;
    assert!(bad["error"]["code"].is_i64(), "{side:?}: {bad}");

    // debug: every message passes; the logger says where it came from.
    p.set_level("debug").await;
    let got = toggle_logging(p, 1).await;
    assert_eq!(got.len(), 1, "{side:?}: {got:?}");
    for m in &got {
        assert_eq!(
            m["logger"].as_str(),
            p.logger(None).as_deref(),
            "{side:?}: {m}"
        );
    }

    // error, then emergency: nothing below arrives. Each "on" passes "error" with
    // probability 1/2, so 16 of them miss only once in 65536 runs.
    for (level, times, must_arrive) in [("error", 16, true), ("emergency", 8, false)] {
        p.set_level(level).await;
        let got = toggle_logging(p, times).await;
        if must_arrive {
            assert!(
                !got.is_empty(),
                "{side:?}: nothing at {level} in {times} tries"
            );
        }
        for m in &got {
            let l = m["level"].as_str().unwrap();
            assert!(
                rank(l) >= rank(level),
                "{side:?}: {l} at level {level}: {m}"
            );
            assert_eq!(m["logger"].as_str(), p.logger(None).as_deref(), "{m}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_respect_the_level_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (mut direct, mut hub) = open_both(&peers, &sc).await;
    tokio::join!(logging_scenario(&mut direct), logging_scenario(&mut hub));
    assert_same(&direct, &hub);
}

// ---------------------------------------------------------------------------------------
// Subscriptions

/// Turns simulated updates on (one round of `resources/updated` for each subscribed URI at
/// once), waits until `want` arrived (or QUIET passed if `want` is empty), turns them off;
/// returns the updated URIs seen, sorted.
async fn updates_round(p: &mut Peer, want: &[&str]) -> Vec<String> {
    let mark = p.seen.len();
    let on = p.call("toggle-subscriber-updates", json!({})).await;
    assert!(block_text(&on, 0).starts_with("Started"), "{on}");
    let all_there = |seen: &[Value]| {
        want.iter().all(|u| {
            seen[mark..].iter().any(|m| {
                m["method"] == "notifications/resources/updated" && m["params"]["uri"] == *u
            })
        })
    };
    let ok = p.pump(WAIT, all_there).await;
    assert!(
        ok,
        "{:?}: no update for {want:?}: {:#?}",
        p.side,
        &p.seen[mark..]
    );
    p.settle(QUIET).await;
    let off = p.call("toggle-subscriber-updates", json!({})).await;
    assert!(block_text(&off, 0).starts_with("Stopped"), "{off}");
    let mut uris: Vec<String> = p
        .since(mark, "notifications/resources/updated")
        .iter()
        .map(|u| u["uri"].as_str().unwrap().to_string())
        .collect();
    uris.sort();
    uris
}

async fn subscriptions_scenario(p: &mut Peer) {
    let side = p.side;
    let features = "demo://resource/static/document/features.md";
    let text3 = "demo://resource/dynamic/text/3";
    let mark = p.seen.len();
    for uri in [features, text3] {
        let r = p.result("resources/subscribe", json!({"uri": uri})).await;
        p.record(format!("resources/subscribe {uri}"), &r);
    }
    // server-everything acknowledges each subscription with a log message.
    let ok = p
        .pump(WAIT, |seen| {
            seen[mark..]
                .iter()
                .filter(|m| {
                    m["params"]["data"]
                        .as_str()
                        .is_some_and(|d| d.starts_with("Received Subscribe"))
                })
                .count()
                == 2
        })
        .await;
    assert!(ok, "{side:?}: {:#?}", &p.seen[mark..]);
    let acks: Vec<Value> = p
        .since(mark, "notifications/message")
        .into_iter()
        .filter(|m| {
            m["data"]
                .as_str()
                .is_some_and(|d| d.starts_with("Received"))
        })
        .collect();
    for a in &acks {
        assert_eq!(a["logger"].as_str(), p.logger(None).as_deref(), "{a}");
    }
    p.record(
        "subscribe acknowledgements",
        &json!(acks.iter().map(|a| a["data"].clone()).collect::<Vec<_>>()),
    );

    let both = updates_round(p, &[features, text3]).await;
    assert_eq!(both, [text3, features], "{side:?}");
    p.record("updates while subscribed to both", &json!(both));

    let r = p
        .result("resources/unsubscribe", json!({"uri": features}))
        .await;
    p.record(format!("resources/unsubscribe {features}"), &r);
    let one = updates_round(p, &[text3]).await;
    assert_eq!(
        one,
        [text3],
        "{side:?}: unsubscribed {features} still updated"
    );
    p.record("updates after unsubscribing one", &json!(one));

    let r = p
        .result("resources/unsubscribe", json!({"uri": text3}))
        .await;
    p.record(format!("resources/unsubscribe {text3}"), &r);
    let none = updates_round(p, &[]).await;
    assert!(none.is_empty(), "{side:?}: {none:?}");
    p.record("updates after unsubscribing all", &json!(none));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_updates_reach_subscribers_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (mut direct, mut hub) = open_both(&peers, &sc).await;
    tokio::join!(
        subscriptions_scenario(&mut direct),
        subscriptions_scenario(&mut hub)
    );
    assert_same(&direct, &hub);
}

// ---------------------------------------------------------------------------------------
// URL elicitation (a client that declares `elicitation.url`)

/// With `elicitation: {form, url}` server-everything adds `trigger-url-elicitation`: the
/// request path (an `elicitation/create` in URL mode, answered by the client) and the error
/// path (a -32042 error with the elicitation in `data`, then a retry) both look the same
/// through the hub.
async fn url_elicitation_scenario(p: &mut Peer) {
    let side = p.side;
    let tools = settled_tools(p).await;
    assert!(
        tools.iter().any(|t| t["name"] == "trigger-url-elicitation"),
        "{side:?}: {:?}",
        listed_names(&tools)
    );
    p.record("tools/list", &json!(tools));
    let args = json!({"url": "https://example.com/consent", "elicitationId": "openpact-elicit-1"});
    let mark = p.seen.len();
    let r = p.call("trigger-url-elicitation", args.clone()).await;
    let asked = p.since(mark, "elicitation/create");
    assert_eq!(asked.len(), 1, "{side:?}: {asked:?}");
    assert_eq!(asked[0]["mode"], "url", "{side:?}: {asked:?}");
    assert!(
        block_text(&r, 0).contains("completed the URL elicitation"),
        "{side:?}: {r}"
    );
    p.record("elicitation/create asked (url)", &asked[0]);
    p.record("tools/call trigger-url-elicitation", &r);

    let mut with_error = args.clone();
    with_error["errorPath"] = json!(true);
    let name = p.name("trigger-url-elicitation");
    let first = p
        .request("tools/call", json!({"name": name, "arguments": with_error}))
        .await;
    // The prerequisite's elicitationId is a fresh random UUID: not compared.
    let mut error = first["error"].clone();
    assert_eq!(error["code"], -32042, "{side:?}: {first}");
    let elicitations = error["data"]["elicitations"]
        .as_array_mut()
        .unwrap_or_else(|| panic!("{side:?}: no elicitations in {first}"));
    for e in elicitations {
        assert!(e["elicitationId"].is_string(), "{side:?}: {e}");
        e["elicitationId"] = json!("<random>");
    }
    p.record(
        "tools/call trigger-url-elicitation errorPath (error)",
        &error,
    );
    let retry = p
        .request("tools/call", json!({"name": name, "arguments": with_error}))
        .await;
    p.record("retry after -32042", &retry["result"]);
}

async fn initialized(p: &mut Peer, caps: Value) {
    p.initialize(caps).await;
    p.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_elicitation_is_the_same_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let caps = json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}});
    let (mut direct, mut hub) = tokio::join!(
        Peer::start(Side::Direct, &peers, &sc),
        Peer::start(Side::Hub, &peers, &sc)
    );
    // Both at once: the hub tells server-everything what its client declared only if the
    // client's initialize comes within a second of the hub's start.
    tokio::join!(
        initialized(&mut direct, caps.clone()),
        initialized(&mut hub, caps.clone())
    );
    tokio::join!(
        url_elicitation_scenario(&mut direct),
        url_elicitation_scenario(&mut hub)
    );
    assert_same(&direct, &hub);
}
