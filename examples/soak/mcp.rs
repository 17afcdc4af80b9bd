//! The soak's MCP clients, written for checking rather than speed: [`Handshake`], one
//! Streamable HTTP session (initialize, calls whose SSE streams are read to their response,
//! an optional GET stream, cancellation, DELETE); [`Stateless`], 2026-07-28 stateless calls over
//! HTTP (the `_meta` envelope and the `Mcp-*` headers, input-required rounds); and [`Stdio`],
//! a handshake client on the hub's own stdin/stdout. Each answers the hub's permission prompt
//! (`elicitation/create`: allow once), counts the progress notifications of its own calls,
//! and reports to [`Strays`] any message that reached it but was not for it.

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

pub const HANDSHAKE: &str = "2025-06-18";
pub const STATELESS: &str = "2026-07-28";

pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A reqwest client for plain HTTP on loopback (reqwest is built without a TLS provider).
pub fn http_client() -> Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .build()
        .context("cannot build the HTTP client")
}

/// Messages that reached a client but were meant for another request, or for nobody:
/// cross-delivered answers and progress. Any is a failure.
#[derive(Default)]
pub struct Strays {
    count: AtomicU64,
    notes: Mutex<Vec<String>>,
}

impl Strays {
    pub fn report(&self, what: String) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut notes = lock(&self.notes);
        if notes.len() < 20 {
            notes.push(what);
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn notes(&self) -> Vec<String> {
        lock(&self.notes).clone()
    }
}

fn cut(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// The answer of the hub's permission prompt (and of anything else it asks: roots are
/// empty, the rest is refused).
fn answer_to(method: &str) -> std::result::Result<Value, Value> {
    match method {
        "elicitation/create" => Ok(json!({"action": "accept", "content": {"decision": "once"}})),
        "roots/list" => Ok(json!({"roots": []})),
        other => Err(json!({"code": -32601, "message": format!("soak client: no {other}")})),
    }
}

fn response_to(request: &Value) -> Value {
    let method = request["method"].as_str().unwrap_or_default();
    match answer_to(method) {
        Ok(result) => json!({"jsonrpc": "2.0", "id": request["id"], "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": request["id"], "error": error}),
    }
}

/// The messages of one HTTP response: one JSON body, or SSE events.
pub struct Events {
    resp: Option<reqwest::Response>,
    json: Option<Value>,
    buf: Vec<u8>,
}

impl Events {
    /// A 200 response's messages; any other status is an error carrying the body.
    pub async fn of(resp: reqwest::Response) -> Result<Events> {
        let status = resp.status();
        if status != reqwest::StatusCode::OK {
            let body = resp.text().await.unwrap_or_default();
            bail!(
                "HTTP {status}: {}",
                body.chars().take(300).collect::<String>()
            );
        }
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        if ct.starts_with("application/json") {
            let body = resp.bytes().await.context("reading a JSON answer")?;
            let v = serde_json::from_slice(&body).context("an answer that is not JSON")?;
            return Ok(Events {
                resp: None,
                json: Some(v),
                buf: Vec::new(),
            });
        }
        if !ct.starts_with("text/event-stream") {
            bail!("unexpected content-type {ct:?}");
        }
        Ok(Events {
            resp: Some(resp),
            json: None,
            buf: Vec::new(),
        })
    }

    /// The next message; `None` at the end of the response.
    pub async fn next(&mut self) -> Result<Option<Value>> {
        if let Some(v) = self.json.take() {
            return Ok(Some(v));
        }
        let Some(resp) = self.resp.as_mut() else {
            return Ok(None);
        };
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..pos + 2).collect();
                let block = String::from_utf8_lossy(&block);
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if data.trim().is_empty() {
                    continue;
                }
                return Ok(Some(
                    serde_json::from_str(&data).context("an SSE event that is not JSON")?,
                ));
            }
            match resp.chunk().await.context("the event stream broke")? {
                Some(chunk) => self.buf.extend_from_slice(&chunk),
                None => {
                    self.resp = None;
                    return Ok(None);
                }
            }
        }
    }
}

fn is_request(m: &Value) -> bool {
    m.get("method").is_some() && m.get("id").is_some()
}

/// What one call brought back: the response message and how many progress notifications
/// for it arrived first.
pub struct Reply {
    pub msg: Value,
    pub progress: u32,
}

impl Reply {
    pub fn text(&self) -> Option<&str> {
        self.msg.pointer("/result/content/0/text")?.as_str()
    }

    pub fn is_ok(&self) -> bool {
        self.msg.get("result").is_some() && self.msg["result"]["isError"] != json!(true)
    }

    pub fn error_code(&self) -> Option<i64> {
        self.msg.pointer("/error/code")?.as_i64()
    }

    pub fn brief(&self) -> String {
        cut(&self.msg)
    }
}

/// What a handshake session's POSTs and GET share.
struct Conn {
    http: reqwest::Client,
    url: String,
    sid: String,
    strays: Arc<Strays>,
}

impl Conn {
    fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.sid)
            .header("mcp-protocol-version", HANDSHAKE)
            .body(body.to_string())
    }

    async fn answer(&self, request: &Value) {
        // A lost answer shows as the call waiting for it timing out.
        let _ = self.post(&response_to(request)).send().await;
    }

    /// Reads a POST's stream to the response to `id`, answering the hub's questions and
    /// counting progress for `token` on the way.
    async fn read_answer(
        &self,
        events: &mut Events,
        id: u64,
        token: Option<&str>,
    ) -> Result<Reply> {
        let mut progress = 0;
        while let Some(m) = events.next().await? {
            if is_request(&m) {
                self.answer(&m).await;
            } else if m["method"] == "notifications/progress" {
                if token.is_some_and(|t| m["params"]["progressToken"] == t) {
                    progress += 1;
                } else {
                    self.strays.report(format!(
                        "HTTP session: progress {} on the stream of request {id} (token {token:?})",
                        cut(&m)
                    ));
                }
            } else if m.get("method").is_some() {
                // Log messages, list changes: nothing to check.
            } else if m["id"] == json!(id) {
                return Ok(Reply { msg: m, progress });
            } else {
                self.strays.report(format!(
                    "HTTP session: {} on the stream of request {id}",
                    cut(&m)
                ));
            }
        }
        bail!("the stream ended without the response to {id}")
    }

    async fn request(
        &self,
        id: u64,
        method: &str,
        params: Value,
        token: Option<&str>,
    ) -> Result<Reply> {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let resp = self.post(&body).send().await.context("POST")?;
        let mut events = Events::of(resp).await?;
        self.read_answer(&mut events, id, token).await
    }

    /// Reads the GET stream until it ends: the hub's questions are answered; a response on
    /// it is a stray.
    async fn listen(self: Arc<Self>) {
        let resp = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.sid)
            .header("mcp-protocol-version", HANDSHAKE)
            .send()
            .await;
        let Ok(resp) = resp else { return };
        let Ok(mut events) = Events::of(resp).await else {
            return;
        };
        while let Ok(Some(m)) = events.next().await {
            if is_request(&m) {
                self.answer(&m).await;
            } else if m.get("method").is_none() {
                self.strays
                    .report(format!("HTTP session: {} on the GET stream", cut(&m)));
            }
        }
    }
}

/// One handshake Streamable HTTP session.
pub struct Handshake {
    conn: Arc<Conn>,
    next_id: u64,
    get: Option<tokio::task::JoinHandle<()>>,
}

impl Handshake {
    /// `initialize` (declaring elicitation), `notifications/initialized`, and the GET stream
    /// when `get_stream`.
    pub async fn connect(
        http: reqwest::Client,
        url: &str,
        strays: Arc<Strays>,
        get_stream: bool,
    ) -> Result<Handshake> {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": HANDSHAKE, "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "openpact-soak", "version": "1"}}});
        let resp = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(init.to_string())
            .send()
            .await
            .context("POST initialize")?;
        let sid = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut events = Events::of(resp).await.context("initialize")?;
        let sid = sid.ok_or_else(|| anyhow!("initialize answered without a session id"))?;
        let conn = Arc::new(Conn {
            http,
            url: url.to_string(),
            sid,
            strays,
        });
        let r = conn.read_answer(&mut events, 0, None).await?;
        if r.msg.get("result").is_none() {
            bail!("initialize failed: {}", r.brief());
        }
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let status = conn.post(&done).send().await?.status();
        if status != reqwest::StatusCode::ACCEPTED {
            bail!("notifications/initialized answered {status}");
        }
        let get = get_stream.then(|| tokio::spawn(conn.clone().listen()));
        Ok(Handshake {
            conn,
            next_id: 0,
            get,
        })
    }

    pub fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// A request and its response (within `limit`).
    pub async fn request(&mut self, method: &str, params: Value, limit: Duration) -> Result<Reply> {
        let id = self.next_id();
        tokio::time::timeout(limit, self.conn.request(id, method, params, None))
            .await
            .map_err(|_| anyhow!("no answer to {method} {id} within {limit:?}"))?
    }

    /// `tools/call` (with a progress token when given) and its response, within `limit`.
    pub async fn call(
        &mut self,
        name: &str,
        arguments: Value,
        token: Option<&str>,
        limit: Duration,
    ) -> Result<Reply> {
        let id = self.next_id();
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(t) = token {
            params["_meta"] = json!({"progressToken": t});
        }
        tokio::time::timeout(limit, self.conn.request(id, "tools/call", params, token))
            .await
            .map_err(|_| anyhow!("no answer to {name} (request {id}) within {limit:?}"))?
    }

    /// POSTs a `tools/call` with progress token `token`: its id and its stream, open once
    /// the first message comes (the hub sends the headers with it).
    pub async fn open_call(
        &mut self,
        name: &str,
        arguments: Value,
        token: &str,
    ) -> Result<(u64, Events)> {
        let id = self.next_id();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": name, "arguments": arguments, "_meta": {"progressToken": token}}});
        let resp = self.conn.post(&body).send().await.context("POST")?;
        Ok((id, Events::of(resp).await?))
    }

    /// Reads `events` up to a progress notification, answering the hub's questions on the
    /// way; a response first is an error.
    pub async fn until_progress(&self, events: &mut Events) -> Result<()> {
        while let Some(m) = events.next().await? {
            if is_request(&m) {
                self.conn.answer(&m).await;
            } else if m["method"] == "notifications/progress" {
                return Ok(());
            } else if m.get("method").is_none() {
                bail!("expected progress first, got {}", cut(&m));
            }
        }
        bail!("the stream ended before any progress")
    }

    /// Reads `events` to their end, answering the hub's questions; a response is an error.
    pub async fn until_end(&self, events: &mut Events) -> Result<()> {
        while let Some(m) = events.next().await? {
            if is_request(&m) {
                self.conn.answer(&m).await;
            } else if m.get("method").is_none() {
                bail!("answered: {}", cut(&m));
            }
        }
        Ok(())
    }

    /// `notifications/cancelled` for request `id`.
    pub async fn cancel(&self, id: u64) -> Result<()> {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "soak: cancelled"}});
        let status = self.conn.post(&note).send().await?.status();
        if status != reqwest::StatusCode::ACCEPTED {
            bail!("notifications/cancelled answered {status}");
        }
        Ok(())
    }

    /// DELETE: the session ends; the status the hub answered.
    pub async fn delete(mut self) -> Result<u16> {
        let resp = self
            .conn
            .http
            .delete(&self.conn.url)
            .header("mcp-session-id", &self.conn.sid)
            .header("mcp-protocol-version", HANDSHAKE)
            .send()
            .await?;
        if let Some(mut get) = self.get.take() {
            // The GET stream closes with the session.
            let _ = tokio::time::timeout(Duration::from_secs(5), &mut get).await;
            get.abort();
        }
        Ok(resp.status().as_u16())
    }
}

impl Drop for Handshake {
    fn drop(&mut self) {
        if let Some(get) = self.get.take() {
            get.abort();
        }
    }
}

/// 2026-07-28 stateless calls over HTTP (each POST carries its version and capabilities).
pub struct Stateless {
    http: reqwest::Client,
    url: String,
    strays: Arc<Strays>,
    next_id: u64,
}

fn stateless_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "openpact-soak-modern", "version": "1"},
    })
}

impl Stateless {
    pub fn new(http: reqwest::Client, url: &str, strays: Arc<Strays>) -> Stateless {
        Stateless {
            http,
            url: url.to_string(),
            strays,
            next_id: 0,
        }
    }

    pub fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The POST of one request, with the revision's headers; `params` get the `_meta`.
    pub fn post(
        &self,
        id: u64,
        method: &str,
        name: Option<&str>,
        mut params: Value,
    ) -> reqwest::RequestBuilder {
        let meta = params.get("_meta").cloned().unwrap_or_else(|| json!({}));
        let mut full = stateless_meta();
        if let (Some(full), Some(extra)) = (full.as_object_mut(), meta.as_object()) {
            full.extend(extra.clone());
        }
        params["_meta"] = full;
        let mut r = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", STATELESS)
            .header("mcp-method", method);
        if let Some(n) = name {
            r = r.header("mcp-name", n);
        }
        r.body(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
    }

    /// Reads one answer: progress for `token` counted, anything not for request `id` a stray.
    pub async fn read(&self, events: &mut Events, id: u64, token: Option<&str>) -> Result<Reply> {
        let mut progress = 0;
        while let Some(m) = events.next().await? {
            if m["method"] == "notifications/progress" {
                if token.is_some_and(|t| m["params"]["progressToken"] == t) {
                    progress += 1;
                } else {
                    self.strays.report(format!(
                        "2026-07-28: progress {} on the stream of request {id}",
                        cut(&m)
                    ));
                }
            } else if m.get("method").is_some() && m.get("id").is_none() {
                // A log message: nothing to check.
            } else if m["id"] == json!(id) && m.get("method").is_none() {
                return Ok(Reply { msg: m, progress });
            } else {
                self.strays.report(format!(
                    "2026-07-28: {} on the stream of request {id}",
                    cut(&m)
                ));
            }
        }
        bail!("the stream ended without the response to {id}")
    }

    /// `method` with `params` (and `Mcp-Name: name`), its input-required rounds answered (the
    /// permission prompt: allow once), within `limit`.
    pub async fn request(
        &mut self,
        method: &str,
        name: Option<&str>,
        params: Value,
        token: Option<&str>,
        limit: Duration,
    ) -> Result<Reply> {
        let work = async {
            let mut params = params;
            let mut progress = 0;
            for _round in 0..4 {
                let id = self.next_id();
                let resp = self
                    .post(id, method, name, params.clone())
                    .send()
                    .await
                    .context("POST")?;
                let mut events = Events::of(resp).await?;
                let mut reply = self.read(&mut events, id, token).await?;
                progress += reply.progress;
                let result = &reply.msg["result"];
                if result["resultType"] != "input_required" {
                    reply.progress = progress;
                    return Ok(reply);
                }
                let mut answers = serde_json::Map::new();
                for (key, req) in result["inputRequests"].as_object().into_iter().flatten() {
                    let method = req["method"].as_str().unwrap_or_default();
                    let answer = answer_to(method)
                        .map_err(|_| anyhow!("asked for {method}: {}", reply.brief()))?;
                    answers.insert(key.clone(), answer);
                }
                params["requestState"] = result["requestState"].clone();
                params["inputResponses"] = Value::Object(answers);
            }
            bail!("still asking after 4 rounds")
        };
        tokio::time::timeout(limit, work)
            .await
            .map_err(|_| anyhow!("no answer to {method} within {limit:?}"))?
    }

    /// `tools/call`.
    pub async fn call(
        &mut self,
        name: &str,
        arguments: Value,
        token: Option<&str>,
        limit: Duration,
    ) -> Result<Reply> {
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(t) = token {
            params["_meta"] = json!({"progressToken": t});
        }
        self.request("tools/call", Some(name), params, token, limit)
            .await
    }
}

/// A request of the stdio client waiting for its response.
struct Pending {
    tx: oneshot::Sender<Value>,
    token: Option<String>,
    progress: Arc<AtomicU64>,
}

#[derive(Default)]
struct StdioState {
    pending: HashMap<u64, Pending>,
    /// Requests this client cancelled: an answer may still cross the cancellation.
    cancelled: HashSet<u64>,
}

/// A handshake client on the hub's stdin/stdout: requests in flight side by side, the hub's
/// questions answered by the reader.
pub struct Stdio {
    out: mpsc::UnboundedSender<String>,
    state: Arc<Mutex<StdioState>>,
    next_id: AtomicU64,
    /// Set when the hub's stdout ended.
    closed: Arc<std::sync::atomic::AtomicBool>,
}

impl Stdio {
    pub fn start(stdin: ChildStdin, stdout: ChildStdout, strays: Arc<Strays>) -> Stdio {
        let (out, mut rx) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            let mut stdin = stdin;
            while let Some(line) = rx.recv().await {
                if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
                    return;
                }
            }
        });
        let state = Arc::new(Mutex::new(StdioState::default()));
        let closed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (st, reply, done) = (state.clone(), out.clone(), closed.clone());
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(m) = serde_json::from_str::<Value>(&line) else {
                    strays.report(format!("stdio: a line that is not JSON: {line:.200}"));
                    continue;
                };
                if is_request(&m) {
                    let _ = reply.send(format!("{}\n", response_to(&m)));
                } else if m["method"] == "notifications/progress" {
                    let s = lock(&st);
                    let token = &m["params"]["progressToken"];
                    match s
                        .pending
                        .values()
                        .find(|p| p.token.as_deref() == token.as_str())
                    {
                        Some(p) => {
                            p.progress.fetch_add(1, Ordering::Relaxed);
                        }
                        // Progress of a cancelled call may still be on its way.
                        None if token
                            .as_str()
                            .and_then(|t| t.strip_prefix("stdio-")?.parse::<u64>().ok())
                            .is_some_and(|id| s.cancelled.contains(&id)) => {}
                        None => strays.report(format!("stdio: progress for nobody: {}", cut(&m))),
                    }
                } else if m.get("method").is_some() {
                    // Log messages, list changes.
                } else {
                    let id = m["id"].as_u64();
                    let mut s = lock(&st);
                    match id.and_then(|id| s.pending.remove(&id)) {
                        Some(p) => {
                            let _ = p.tx.send(m);
                        }
                        None if id.is_some_and(|id| s.cancelled.contains(&id)) => {}
                        None => strays.report(format!("stdio: a response for nobody: {}", cut(&m))),
                    }
                }
            }
            done.store(true, Ordering::Relaxed);
        });
        Stdio {
            out,
            state,
            next_id: AtomicU64::new(0),
            closed,
        }
    }

    pub fn closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    fn send(&self, msg: &Value) -> Result<()> {
        self.out
            .send(format!("{msg}\n"))
            .map_err(|_| anyhow!("the hub's stdin is closed"))
    }

    pub fn notify(&self, method: &str, params: Value) -> Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    /// Sends a request; its id, the receiver of its response and its progress counter.
    /// With `progress`, the token is `stdio-ID`.
    pub fn begin(
        &self,
        method: &str,
        mut params: Value,
        progress: bool,
    ) -> Result<(u64, oneshot::Receiver<Value>, Arc<AtomicU64>)> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let token = progress.then(|| format!("stdio-{id}"));
        if let Some(t) = &token {
            params["_meta"] = json!({"progressToken": t});
        }
        let (tx, rx) = oneshot::channel();
        let counter = Arc::new(AtomicU64::new(0));
        lock(&self.state).pending.insert(
            id,
            Pending {
                tx,
                token,
                progress: counter.clone(),
            },
        );
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok((id, rx, counter))
    }

    /// A request and its response within `limit`.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        progress: bool,
        limit: Duration,
    ) -> Result<Reply> {
        let (id, rx, counter) = self.begin(method, params, progress)?;
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(msg)) => Ok(Reply {
                msg,
                progress: u32::try_from(counter.load(Ordering::Relaxed)).unwrap_or(u32::MAX),
            }),
            Ok(Err(_)) => bail!("stdio: the reader ended before the response to {id}"),
            Err(_) => {
                lock(&self.state).pending.remove(&id);
                bail!("stdio: no answer to {method} {id} within {limit:?}")
            }
        }
    }

    /// Cancels request `id`: `notifications/cancelled`, and a late answer is not a stray.
    pub fn cancel(&self, id: u64) -> Result<()> {
        {
            let mut s = lock(&self.state);
            s.pending.remove(&id);
            s.cancelled.insert(id);
        }
        self.notify(
            "notifications/cancelled",
            json!({"requestId": id, "reason": "soak: cancelled"}),
        )
    }

    /// Requests still waiting for an answer.
    pub fn in_flight(&self) -> usize {
        lock(&self.state).pending.len()
    }
}
