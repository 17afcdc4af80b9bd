//! The 2026-07-28 revision, downstream: requests that carry the client's version and
//! capabilities in `_meta` instead of an `initialize`, each served on its own.
//!
//! A request runs on a session of its own ([`Session::ephemeral`]), so routing, the policy
//! pipeline and progress work exactly as for a handshake client. What that session would send
//! the client as a request — a server's sampling, elicitation or roots request, the hub's
//! own permission prompt — becomes an input-required result instead, and the call waits
//! here, upstream call and all, until the client retries with the answers and the signed
//! `requestState` ([`state`]) that leads back to it. `listen` serves
//! `subscriptions/listen`.

mod listen;
#[doc(hidden)]
pub mod state;

use super::{Hub, LOG_LEVELS, Session, lock, log_rank};
use crate::jsonrpc::{self, Frame, Kind, Message, code};
use crate::transport::queue::{DROPPABLE_BACKLOG, QueueRx, QueueTx, queue};
use crate::transport::{Outbox, Outgoing};
use serde_json::{Map, Value, json};
use state::{Opened, Signer};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

pub use crate::revision::STATELESS_VERSION as VERSION;
use crate::revision::code::{HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_VERSION};
use crate::revision::meta::{
    CLIENT_CAPABILITIES as KEY_CAPS, CLIENT_INFO as KEY_INFO, LOG_LEVEL as KEY_LOG,
    PROTOCOL_VERSION as KEY_VERSION, SERVER_INFO as KEY_SERVER_INFO,
};

/// How long a request waits for the client to come back with the input it asked for: long
/// enough for a person to answer a prompt. After that its upstream call is cancelled.
const INPUT_WAIT: Duration = Duration::from_secs(600);
/// Requests waiting for input at once, over all clients: each holds an upstream call open.
const MAX_WAITING: usize = 1024;
/// How long after a question further ones may join it in one input-required result.
const GATHER: Duration = Duration::from_millis(25);

/// The client requests of the revision (anything else is unknown to it).
const METHODS: [&str; 10] = [
    "server/discover",
    "completion/complete",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
];

/// The only requests that may answer with input-required.
const RESUMABLE: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// What a 2026-07-28 request produces, in order: notifications, then its answer.
#[derive(Debug)]
pub enum Out {
    Notify(String),
    Done { line: String, status: Status },
}

impl Out {
    fn bytes(&self) -> usize {
        match self {
            Out::Notify(line) | Out::Done { line, .. } => line.len(),
        }
    }
}

/// The reader is gone.
#[derive(Debug)]
pub struct Gone;

/// Where a call's notifications and answer go. Its answer always does; progress and log
/// messages are dropped while the client leaves more than [`DROPPABLE_BACKLOG`] unread
/// (logged once per call).
pub struct Answers {
    queue: QueueTx<Out>,
    dropped: AtomicU64,
}

impl Answers {
    pub fn send(&self, out: Out) -> Result<(), Gone> {
        let bytes = out.bytes();
        if self.queue.send(out, bytes) {
            Ok(())
        } else {
            Err(Gone)
        }
    }

    /// Sends a notification that may be dropped for a client that does not read.
    fn droppable(&self, line: String) {
        let unread = self.queue.held().1;
        if unread < DROPPABLE_BACKLOG {
            let _ = self.send(Out::Notify(line));
        } else if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                unread,
                "a {VERSION} client is not reading the stream of its request; its progress \
                 and log messages are dropped until it does"
            );
        }
    }

    pub async fn closed(&self) {
        self.queue.closed().await;
    }
}

/// The HTTP status the revision ties to an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    NotFound,
}

impl Out {
    fn error(id: &str, code: i64, message: &str, data: Option<&str>, status: Status) -> Out {
        Out::Done {
            line: jsonrpc::error(id, code, message, data),
            status,
        }
    }
}

/// Whether `m` belongs here: `server/discover`, or a request whose `_meta` names a protocol
/// version (the revision's envelope; handshake clients never send that key).
pub fn wants_stateless(m: &Message) -> bool {
    if m.method() == "server/discover" {
        return true;
    }
    // A cheap look first: the key as written, or an escape that could spell it (`\/`,
    // `\u0069`), which only the parse reads.
    m.params().is_some_and(|p| {
        let p = p.as_bytes();
        memchr::memmem::find(p, KEY_VERSION.as_bytes()).is_some()
            || memchr::memmem::find(p, b"\\u").is_some()
            || memchr::memmem::find(p, b"\\/").is_some()
    }) && envelope_version(m).is_some()
}

/// The protocol version in the request's `_meta`, if any.
pub fn envelope_version(m: &Message) -> Option<String> {
    let params: Value = serde_json::from_str(m.params()?).ok()?;
    Some(params.get("_meta")?.get(KEY_VERSION)?.as_str()?.to_string())
}

/// Requests waiting for their client's input, and the key that signs their handles.
pub(crate) struct Waiting {
    signer: Option<Signer>,
    parked: Mutex<HashMap<String, Parked>>,
}

struct Parked {
    running: Running,
    digest: String,
    timer: AbortHandle,
}

impl Waiting {
    pub(crate) fn new() -> Waiting {
        let signer = Signer::new();
        if signer.is_none() {
            tracing::error!(
                "no random source: 2026-07-28 clients cannot be asked for input (sampling, elicitation, permission prompts)"
            );
        }
        Waiting {
            signer,
            parked: Mutex::new(HashMap::new()),
        }
    }
}

/// One 2026-07-28 request being served; dropping it before its answer cancels the request.
pub struct Call {
    rx: QueueRx<Out>,
    task: AbortHandle,
}

impl Call {
    pub async fn next(&mut self) -> Option<Out> {
        self.rx.recv().await
    }

    pub fn poll_next(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Out>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts serving `m` for a client of view `view` reached through `origin` (a state issued
/// to one origin is refused from another).
pub fn start(hub: Arc<Hub>, m: Message, origin: String, view: usize) -> Call {
    let (tx, rx) = queue();
    let tx = Answers {
        queue: tx,
        dropped: AtomicU64::new(0),
    };
    // A view is part of the origin: a state issued on one profile's endpoint is no use on
    // another's.
    let origin = format!("{origin}#{view}");
    let task = tokio::spawn(serve(hub, m, origin, view, tx));
    Call {
        rx,
        task: task.abort_handle(),
    }
}

/// What a request says about its client.
struct Envelope {
    capabilities: String,
    client_name: String,
    log_rank: Option<usize>,
}

impl Envelope {
    fn read(m: &Message, params: &Value) -> Result<Envelope, Out> {
        let id = m.id();
        let meta = params.get("_meta");
        let version = meta.and_then(|m| m.get(KEY_VERSION));
        match version {
            Some(Value::String(v)) if v == VERSION => {}
            Some(Value::String(v)) => {
                let data = json!({"supported": [VERSION], "requested": v}).to_string();
                return Err(Out::error(
                    id,
                    UNSUPPORTED_VERSION,
                    &format!(
                        "Unsupported protocol version {v:?}: requests without initialize speak {VERSION}; older revisions start with initialize"
                    ),
                    Some(&data),
                    Status::BadRequest,
                ));
            }
            _ => {
                return Err(Out::error(
                    id,
                    code::INVALID_PARAMS,
                    &format!("params._meta[{KEY_VERSION:?}] must be a string"),
                    None,
                    Status::BadRequest,
                ));
            }
        }
        let capabilities = match meta.and_then(|m| m.get(KEY_CAPS)) {
            Some(c @ Value::Object(_)) => c.to_string(),
            _ => {
                return Err(Out::error(
                    id,
                    code::INVALID_PARAMS,
                    &format!(
                        "params._meta must carry {KEY_CAPS:?}, an object ({{}} declares no optional capability)"
                    ),
                    None,
                    Status::BadRequest,
                ));
            }
        };
        let log_rank = match meta.and_then(|m| m.get(KEY_LOG)) {
            None | Some(Value::Null) => None,
            Some(Value::String(level)) if log_rank(level).is_some() => log_rank(level),
            Some(other) => {
                return Err(Out::error(
                    id,
                    code::INVALID_PARAMS,
                    &format!(
                        "params._meta[{KEY_LOG:?}] is {other}, not one of {}",
                        LOG_LEVELS.join(", ")
                    ),
                    None,
                    Status::BadRequest,
                ));
            }
        };
        let client_name = meta
            .and_then(|m| m.get(KEY_INFO))
            .and_then(|i| i.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        Ok(Envelope {
            capabilities,
            client_name,
            log_rank,
        })
    }
}

async fn serve(hub: Arc<Hub>, m: Message, origin: String, view: usize, tx: Answers) {
    let id = m.id().to_string();
    let params: Value = match m.params().map(serde_json::from_str::<Value>) {
        None => Value::Object(Map::new()),
        Some(Ok(p @ Value::Object(_))) => p,
        Some(_) => {
            let _ = tx.send(Out::error(
                &id,
                code::INVALID_PARAMS,
                "params must be an object",
                None,
                Status::BadRequest,
            ));
            return;
        }
    };
    let envelope = match Envelope::read(&m, &params) {
        Ok(e) => e,
        Err(out) => {
            let _ = tx.send(out);
            return;
        }
    };
    // The first client's capabilities are what upstream servers are told the hub can pass on.
    hub.declare_client(Some(&envelope.capabilities));
    let method = m.method();
    if !METHODS.contains(&method) {
        let _ = tx.send(Out::error(
            &id,
            code::METHOD_NOT_FOUND,
            &format!("Method not found: {method} (not part of {VERSION})"),
            None,
            Status::NotFound,
        ));
        return;
    }
    match method {
        "server/discover" => {
            let _ = tx.send(Out::Done {
                line: discover(&hub, &id, view),
                status: Status::Ok,
            });
        }
        "subscriptions/listen" => listen::run(hub, &id, &params, &envelope, view, &tx).await,
        _ => call(hub, &m, params, envelope, &origin, view, &tx).await,
    }
}

/// `server/discover`: what `initialize` would say, in the revision's shape.
fn discover(hub: &Hub, id: &str, view: usize) -> String {
    let mut capabilities: Value =
        serde_json::from_str(&hub.capabilities()).unwrap_or_else(|_| json!({}));
    if let Some(caps) = capabilities.as_object_mut() {
        // Tasks are an extension in this revision; the hub does not offer it.
        caps.remove("tasks");
    }
    let mut versions = vec![VERSION];
    versions.extend(crate::upstream::HANDSHAKE_VERSIONS.iter().rev());
    let mut result = json!({
        "supportedVersions": versions,
        "capabilities": capabilities,
    });
    result["instructions"] = Value::String(hub.instructions(view));
    complete(&mut result, true);
    jsonrpc::result(id, &result.to_string())
}

/// Marks a result complete, with the hub's identity, and the caching fields lists carry.
fn complete(result: &mut Value, cacheable: bool) {
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    obj.entry("resultType").or_insert_with(|| json!("complete"));
    if cacheable {
        // Zero: the catalogue changes whenever a server comes, goes or changes its lists;
        // clients learn of that on `subscriptions/listen` rather than from a lifetime.
        obj.entry("ttlMs").or_insert_with(|| json!(0));
        obj.entry("cacheScope").or_insert_with(|| json!("private"));
    }
    stamp(obj);
}

fn stamp(obj: &mut Map<String, Value>) {
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(
            KEY_SERVER_INFO.to_string(),
            json!({"name": "openpact", "version": env!("CARGO_PKG_VERSION")}),
        );
    }
}

/// The request line the session serves: the client's, without what only this module reads.
/// Public (hidden) for the fuzz targets in `tests/fuzz`.
#[doc(hidden)]
pub fn inner_request(id: &str, method: &str, params: &Value) -> String {
    let mut params = params.clone();
    if let Some(obj) = params.as_object_mut() {
        obj.remove("requestState");
        obj.remove("inputResponses");
        let empty = obj
            .get_mut("_meta")
            .and_then(Value::as_object_mut)
            .map(|meta| {
                for key in [KEY_VERSION, KEY_CAPS, KEY_INFO, KEY_LOG] {
                    meta.remove(key);
                }
                meta.is_empty()
            });
        if empty == Some(true) {
            obj.remove("_meta");
        }
    }
    jsonrpc::request(id, method, Some(&params.to_string()))
}

fn progress_token(params: &Value) -> Option<Value> {
    params.get("_meta")?.get("progressToken").cloned()
}

/// Binds a `requestState` to the request it may come back with. Public (hidden) for the
/// fuzz targets in `tests/fuzz`.
#[doc(hidden)]
pub fn request_digest(origin: &str, method: &str, params: &Value) -> String {
    let target = params
        .get("name")
        .or_else(|| params.get("uri"))
        .map(Value::to_string)
        .unwrap_or_default();
    let arguments = params
        .get("arguments")
        .map(|a| crate::policy::canonical::canonical(&a.to_string()))
        .unwrap_or_default();
    state::digest(&[origin, method, &target, &arguments])
}

/// A tool call, prompt, read, list or completion, on a session of its own.
async fn call(
    hub: Arc<Hub>,
    m: &Message,
    params: Value,
    envelope: Envelope,
    origin: &str,
    view: usize,
    tx: &Answers,
) {
    let id = m.id();
    let method = m.method();
    let resumable = RESUMABLE.contains(&method);
    let digest = request_digest(origin, method, &params);
    let token = progress_token(&params);
    let mut running = None;
    if resumable && let Some(state) = params.get("requestState").and_then(Value::as_str) {
        match resume(&hub, state, &digest) {
            Ok(Some(r)) => running = Some(r),
            // Its wait ended (or the hub restarted): run the request afresh, which asks again.
            Ok(None) => tracing::debug!(id, "requestState of a request no longer waiting"),
            Err(e) => {
                let _ = tx.send(Out::error(id, code::INVALID_PARAMS, &e, None, Status::Ok));
                return;
            }
        }
    }
    let mut running = match running {
        Some(mut r) => {
            r.answer(params.get("inputResponses"));
            r
        }
        None => {
            let (out, rx) = Outbox::channel();
            let session = Session::ephemeral(
                hub.clone(),
                out,
                &envelope.capabilities,
                &envelope.client_name,
                envelope.log_rank,
                view,
            );
            let inner_id = id.to_string();
            let line = inner_request(&inner_id, method, &params);
            session.handle_frame(Frame::Line(line.into_bytes()));
            Running {
                session,
                rx,
                inner_id,
                token: token.clone(),
                asked: Vec::new(),
                // Servers SHOULD take answers offered up front and ignore keys they do not know.
                preset: params
                    .get("inputResponses")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
            }
        }
    };
    let next = if running.asked.is_empty() {
        running.until_next(tx, token.as_ref(), resumable).await
    } else {
        // Some questions are still unanswered: the call cannot move on without them.
        Next::Input
    };
    match next {
        Next::Done(line) => {
            let line = final_line(id, method, &line);
            let status = status_of(&line);
            let _ = tx.send(Out::Done { line, status });
        }

        Next::Input => {
            let asked = running.asked_json();
            match park(&hub, running, digest) {
                Ok(state) => {
                    let mut result = json!({
                        "resultType": "input_required",
                        "inputRequests": asked,
                        "requestState": state,
                    });
                    if let Some(obj) = result.as_object_mut() {
                        stamp(obj);
                    }
                    let _ = tx.send(Out::Done {
                        line: jsonrpc::result(id, &result.to_string()),
                        status: Status::Ok,
                    });
                }
                Err(why) => {
                    let _ = tx.send(Out::error(id, code::INTERNAL_ERROR, &why, None, Status::Ok));
                }
            }
        }
    }
}

/// The waiting request `state` leads to, taken out of the table.
fn resume(hub: &Hub, state: &str, digest: &str) -> Result<Option<Running>, String> {
    let waiting = &hub.waiting;
    let Some(signer) = &waiting.signer else {
        return Ok(None);
    };
    let handle = match signer.open(state, digest).map_err(|e| e.to_string())? {
        Opened::Live(h) => h,
        Opened::Expired => return Ok(None),
    };
    let parked = lock(&waiting.parked).remove(&handle);
    Ok(parked.and_then(|p| {
        p.timer.abort();
        // The signature already binds the digest; this guards against a handle collision.
        (p.digest == digest).then_some(p.running)
    }))
}

/// Puts `running` aside until its client answers, returning the signed state that leads back.
fn park(hub: &Arc<Hub>, running: Running, digest: String) -> Result<String, String> {
    let waiting = &hub.waiting;
    let signer = waiting.signer.as_ref().ok_or_else(|| {
        "this request needs the client's input, but openpact has no random source to sign the request state with".to_string()
    })?;
    let handle = state::random_handle()
        .ok_or_else(|| "no random source for a request state handle".to_string())?;
    let expires = state::now() + INPUT_WAIT.as_secs();
    let signed = signer.sign(&handle, expires, &digest);
    let mut parked = lock(&waiting.parked);
    if parked.len() >= MAX_WAITING {
        return Err(format!(
            "{MAX_WAITING} requests are already waiting for their clients' input; answer or drop some first"
        ));
    }
    let weak = Arc::downgrade(hub);
    let key = handle.clone();
    let timer = tokio::spawn(async move {
        tokio::time::sleep(INPUT_WAIT).await;
        if let Some(hub) = weak.upgrade() {
            let gone = lock(&hub.waiting.parked).remove(&key);
            if gone.is_some() {
                tracing::debug!("a request waited too long for its client's input; cancelled");
            }
        }
    })
    .abort_handle();
    parked.insert(
        handle,
        Parked {
            running,
            digest,
            timer,
        },
    );
    Ok(signed)
}

/// The answer line as the revision wants it: under the client's id, marked complete, and
/// with the retired resource-not-found code mapped to its successor.
fn final_line(id: &str, method: &str, line: &str) -> String {
    let Ok(mut msg) = serde_json::from_str::<Value>(line) else {
        return line.to_string();
    };
    if let Some(result) = msg.get_mut("result") {
        // Lists and reads carry caching fields in this revision.
        let cacheable = method.ends_with("/list") || method == "resources/read";
        complete(result, cacheable);
        return jsonrpc::result(id, &result.to_string());
    }
    if let Some(error) = msg.get_mut("error") {
        if error.get("code").and_then(Value::as_i64) == Some(-32002) {
            error["code"] = json!(code::INVALID_PARAMS);
        }
        return jsonrpc::error_raw(id, &error.to_string());
    }
    line.to_string()
}

/// What stopped a running request.
enum Next {
    Done(String),
    Input,
}

/// The revision ties its own errors to HTTP 400, whoever raised them (a 2026-07-28 server
/// behind the hub too); everything else is 200.
fn status_of(line: &str) -> Status {
    let code = serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|m| m.get("error")?.get("code")?.as_i64());
    match code {
        Some(HEADER_MISMATCH | MISSING_CLIENT_CAPABILITY | UNSUPPORTED_VERSION) => {
            Status::BadRequest
        }
        _ => Status::Ok,
    }
}

/// A question the session put to the client, waiting for its answer.
struct Asked {
    /// The session's id for it (a number).
    id: String,
    /// Its key in `inputRequests`.
    key: String,
    method: String,
    params: Option<Value>,
}

/// A request in progress on its own session.
struct Running {
    session: Arc<Session>,
    rx: mpsc::UnboundedReceiver<Outgoing>,
    /// The id the session serves the request under (the first attempt's).
    inner_id: String,
    /// The first attempt's progress token, which the session's notifications carry.
    token: Option<Value>,
    asked: Vec<Asked>,
    /// Answers the client sent for questions not asked yet, by key.
    preset: Map<String, Value>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // Abandoned, or done: whatever still runs for it upstream is cancelled.
        self.session.abort_all("the request was cancelled");
    }
}

impl Running {
    /// Runs until the answer, or until the client must be asked something.
    async fn until_next(&mut self, tx: &Answers, token: Option<&Value>, resumable: bool) -> Next {
        loop {
            let Some(out) = self.rx.recv().await else {
                return Next::Done(jsonrpc::error(
                    &self.inner_id,
                    code::INTERNAL_ERROR,
                    "the request ended without an answer",
                    None,
                ));
            };
            let Outgoing::Line(line) = out else { continue };
            if let Some(next) = self.take(line, tx, token, resumable) {
                return next;
            }
            if self.asked.is_empty() {
                continue;
            }
            // Questions sent together are asked together: a server sending several at once
            // has them on their way within moments of each other.
            while let Ok(Some(Outgoing::Line(line))) =
                tokio::time::timeout(GATHER, self.rx.recv()).await
            {
                if let Some(next) = self.take(line, tx, token, resumable) {
                    return next;
                }
            }
            return Next::Input;
        }
    }

    /// Handles one line of the session: the answer is returned; questions are noted;
    /// notifications go to the client.
    fn take(
        &mut self,
        line: String,
        tx: &Answers,
        token: Option<&Value>,
        resumable: bool,
    ) -> Option<Next> {
        let m = Message::parse(line.as_str().into()).ok()?;
        match m.kind() {
            Kind::Response => (m.id() == self.inner_id).then_some(Next::Done(line)),
            Kind::Request => {
                let params = m.params().and_then(|p| serde_json::from_str(p).ok());
                if let Some(answer) = self.preset.remove(&self.key_for(m.id())) {
                    // The client answered before being asked (it knew the question).
                    let line = jsonrpc::result(m.id(), &answer.to_string());
                    self.session.handle_frame(Frame::Line(line.into_bytes()));
                    return None;
                }
                if resumable {
                    let key = self.key_for(m.id());
                    self.asked.push(Asked {
                        id: m.id().to_string(),
                        key,
                        method: m.method().to_string(),
                        params,
                    });
                } else {
                    let refusal = jsonrpc::error(
                        m.id(),
                        code::METHOD_NOT_FOUND,
                        &format!(
                            "a {VERSION} client can be asked for input only during tools/call, prompts/get and resources/read"
                        ),
                        None,
                    );
                    self.session.handle_frame(Frame::Line(refusal.into_bytes()));
                }
                None
            }
            Kind::Notification => {
                match m.method() {
                    // The session withdrew a question (it timed out, or its server gave up).
                    "notifications/cancelled" => {
                        let withdrawn = m
                            .params()
                            .and_then(|p| serde_json::from_str::<Value>(p).ok())
                            .and_then(|p| p.get("requestId").map(Value::to_string));
                        if let Some(w) = withdrawn {
                            self.asked.retain(|a| a.id != w);
                        }
                    }
                    "notifications/progress" => {
                        tx.droppable(self.retoken(line, token));
                    }
                    "notifications/message" => tx.droppable(line),
                    _ => {
                        let _ = tx.send(Out::Notify(line));
                    }
                }
                None
            }
        }
    }

    /// The `inputRequests` key for the session's request `id`: the server's own id for it
    /// when that is a string (servers name what they ask, e.g. `user_name`), else ours.
    fn key_for(&self, id: &str) -> String {
        let theirs = self
            .session
            .forwarded_id(id)
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|t| t.as_str().map(str::to_string))
            .filter(|k| !k.is_empty() && !self.asked.iter().any(|a| a.key == *k));
        theirs.unwrap_or_else(|| format!("openpact-{id}"))
    }

    /// Progress under the token of the attempt the client is waiting on now.
    fn retoken(&self, line: String, current: Option<&Value>) -> String {
        let (Some(current), Some(first)) = (current, &self.token) else {
            return line;
        };
        if current == first {
            return line;
        }
        let Ok(mut v) = serde_json::from_str::<Value>(&line) else {
            return line;
        };
        if let Some(params) = v.get_mut("params").and_then(Value::as_object_mut) {
            params.insert("progressToken".into(), current.clone());
        }
        v.to_string()
    }

    /// The `inputRequests` of the questions still open.
    fn asked_json(&self) -> Value {
        let mut map = Map::new();
        for a in &self.asked {
            let mut params = a.params.clone().unwrap_or_else(|| json!({}));
            if a.method == "elicitation/create"
                && let Some(p) = params.as_object_mut()
            {
                // URL-mode elicitation has no id in this revision: the retry is the answer.
                p.remove("elicitationId");
            }
            let mut entry = Map::new();
            entry.insert("method".into(), json!(a.method));
            if a.method != "roots/list" || params.as_object().is_some_and(|p| !p.is_empty()) {
                entry.insert("params".into(), params);
            }
            map.insert(a.key.clone(), Value::Object(entry));
        }
        Value::Object(map)
    }

    /// Hands the client's answers to the session; unanswered questions stay open, and
    /// answers to questions not asked yet are kept for when they are.
    fn answer(&mut self, responses: Option<&Value>) {
        let mut responses = responses
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut open = Vec::new();
        for a in std::mem::take(&mut self.asked) {
            match responses.remove(&a.key) {
                Some(result) => {
                    let line = jsonrpc::result(&a.id, &result.to_string());
                    self.session.handle_frame(Frame::Line(line.into_bytes()));
                }
                None => open.push(a),
            }
        }
        self.asked = open;
        self.preset = responses;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn notifications_for_a_client_that_does_not_read_are_dropped_but_never_the_answer() {
        let (queue, mut rx) = queue();
        let tx = Answers {
            queue,
            dropped: AtomicU64::new(0),
        };
        let note = "n".repeat(600 << 10);
        for _ in 0..5 {
            tx.droppable(note.clone());
        }
        tx.send(Out::Done {
            line: "answer".into(),
            status: Status::Ok,
        })
        .unwrap();
        // Two fit under the bound (the second starts below it); the rest were dropped.
        let mut notes = 0;
        loop {
            match rx.recv().await {
                Some(Out::Notify(_)) => notes += 1,
                Some(Out::Done { line, .. }) => {
                    assert_eq!(line, "answer");
                    break;
                }
                None => panic!("the answer was lost"),
            }
        }
        assert_eq!(notes, 2);
        assert_eq!(tx.dropped.load(Ordering::Relaxed), 3);
        // Read again, it gets notifications again.
        tx.droppable(note);
        assert!(matches!(rx.recv().await, Some(Out::Notify(_))));
    }

    fn request(params: &str) -> Message {
        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{params}}}"#);
        Message::parse(line.into()).unwrap()
    }

    /// Found by the fuzzer (tests/fuzz, target `request_state`): an envelope whose key was
    /// written with JSON escapes was read as a handshake request.
    #[test]
    fn the_envelope_is_seen_however_its_key_is_spelled() {
        for params in [
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
            r#"{"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}"#,
            r#"{"_meta":{"\u0069o.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
            r#"{"\u005fmeta":{"io.modelcontextprotocol\u002FprotocolVersion":"2026-07-28"}}"#,
        ] {
            let m = request(params);
            assert_eq!(envelope_version(&m).as_deref(), Some(VERSION), "{params}");
            assert!(wants_stateless(&m), "{params}");
        }
        for params in [
            r#"{"_meta":{"progressToken":1}}"#,
            r#"{"name":"a\/b","arguments":{"x":"\u00e9"}}"#,
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":7}}"#,
        ] {
            assert!(!wants_stateless(&request(params)), "{params}");
        }
    }
}
