//! The 2026-07-28 revision, downstream: requests that carry the client's version and
//! capabilities in `_meta` instead of an `initialize`, each served on its own.
//!
//! A request runs on a session of its own ([`Session::ephemeral`]), so routing, the policy
//! pipeline and progress work exactly as for a handshake client. What that session would send
//! the client as a request — a server's sampling, elicitation or roots request, the hub's
//! own permission prompt — becomes an input-required result instead, and the call waits
//! here, upstream call and all, until the client retries with the answers and the signed
//! `requestState` ([`state`]) that leads back to it (`waiting`). `envelope` reads what a
//! request says about its client; `listen` serves `subscriptions/listen`.

mod envelope;
mod listen;
#[doc(hidden)]
pub mod state;
mod waiting;

#[doc(hidden)]
// The fuzz targets read requests the way the hub does.
#[cfg(feature = "internals")]
pub use envelope::{inner_request, request_digest};
pub(crate) use waiting::Waiting;

use super::Hub;
use crate::hub::tasks::EXTENSION;
use crate::jsonrpc::{self, Message, code};
use crate::transport::queue::{DROPPABLE_BACKLOG, QueueRx, QueueTx, queue};
use envelope::Envelope;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::task::AbortHandle;

pub use crate::revision::STATELESS_VERSION as VERSION;
use crate::revision::code::{HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_VERSION};
use crate::revision::meta::{PROTOCOL_VERSION as KEY_VERSION, SERVER_INFO as KEY_SERVER_INFO};

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

/// The Tasks extension's requests, served to a request that declares the extension.
const TASK_METHODS: [&str; 3] = ["tasks/get", "tasks/update", "tasks/cancel"];

fn declares_tasks(envelope: &Envelope) -> bool {
    crate::hub::session::declares_extension(Some(&envelope.capabilities))
}

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
    if TASK_METHODS.contains(&method) && !declares_tasks(&envelope) {
        let _ = tx.send(Out::error(
            &id,
            MISSING_CLIENT_CAPABILITY,
            &format!("{method} is part of the {EXTENSION} extension, which this request's clientCapabilities do not declare"),
            Some(&json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}}).to_string()),
            Status::BadRequest,
        ));
        return;
    }
    if !METHODS.contains(&method) && !TASK_METHODS.contains(&method) {
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
        _ => waiting::call(hub, &m, params, envelope, &origin, view, &tx).await,
    }
}

/// `server/discover`: what `initialize` would say, in the revision's shape.
fn discover(hub: &Hub, id: &str, view: usize) -> String {
    let mut capabilities: Value =
        serde_json::from_str(&hub.capabilities()).unwrap_or_else(|_| json!({}));
    if let Some(caps) = capabilities.as_object_mut() {
        // Tasks are an extension in this revision.
        caps.remove("tasks");
        caps.insert("extensions".into(), json!({EXTENSION: {}}));
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
