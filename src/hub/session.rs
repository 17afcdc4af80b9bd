//! One downstream client. Answers what the hub serves itself (`initialize`, `ping`, the
//! merged lists), routes the rest to the right server with only names rewritten, forwards
//! server→client requests to the client under ids of its own, and keeps what belongs to this
//! client: its capabilities, log level, resource subscriptions and requests in flight (so a
//! `notifications/cancelled` reaches the right upstream request).

use super::{Hub, HubEvent, NameKind, Route, log_rank};
use crate::FastMap;
use crate::jsonrpc::{self, Frame, Kind, MemberProbe, Message, RawObject, code, parse_frame};
use crate::policy::audit::Record;
use crate::policy::cache::{Key, Lookup};
use crate::policy::canonical::canonical;
use crate::policy::prompt::Asker;
use crate::policy::{Target, Verdict};
use crate::transport::Outbox;
use crate::upstream::{CallError, Connection, LEGACY_VERSIONS, OFFERED_VERSION, Upstream};
use std::borrow::Cow;
use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

use tokio::task::AbortHandle;

/// A server's request passed on to the client: which server, which of its processes, and the
/// id that process used.
struct Forwarded {
    upstream: usize,
    conn: Weak<Connection>,
    id: String,
}

impl Forwarded {
    fn alive(&self) -> bool {
        self.conn.upgrade().is_some_and(|c| !c.is_closed())
    }
}

pub struct Session {
    hub: Arc<Hub>,
    out: Outbox,
    /// Downstream request id (JSON text) → the task serving it, numbered so that a task
    /// finishing after its answer went out never removes a newer request's entry that
    /// reuses the id.
    in_flight: Mutex<FastMap<Arc<str>, (u64, AbortHandle)>>,
    next_task: AtomicU64,
    initialized: AtomicBool,
    /// `capabilities` from the client's `initialize`, as JSON text.
    capabilities: Mutex<Option<String>>,
    /// Least severe log level the client wants, if it said.
    log_rank: Mutex<Option<usize>>,
    subscriptions: Mutex<HashSet<String>>,
    /// Our id for a request forwarded to the client → where it came from.
    forwarded: Mutex<FastMap<u64, Forwarded>>,
    next_forward_id: AtomicU64,
    /// Requests the hub itself sent the client (permission prompts), by our id.
    own: Mutex<FastMap<u64, oneshot::Sender<Message>>>,
    /// `clientInfo.name` from `initialize`, for the audit log.
    client_name: Mutex<Arc<str>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A response line for `id` from an upstream reply: the server's result or error verbatim,
/// or the hub's own error when the server could not answer.
fn relay(id: &str, reply: &CallReply) -> String {
    match reply {
        Ok(reply) => match (reply.result(), reply.error()) {
            (Some(result), _) => jsonrpc::result(id, result),
            (None, Some(error)) => jsonrpc::error_raw(id, error),
            (None, None) => jsonrpc::error(
                id,
                code::INTERNAL_ERROR,
                "server sent an empty response",
                None,
            ),
        },
        Err(e) => jsonrpc::error(id, e.code(), &e.to_string(), None),
    }
}

/// A server's answer to a request the hub forwarded.
type CallReply = Result<Message, CallError>;

/// What a request handler produced: the line to answer with, or word that it answered
/// itself (to do its bookkeeping after the answer was on its way).
enum Reply {
    Line(String),
    Sent,
}

impl From<String> for Reply {
    fn from(line: String) -> Reply {
        Reply::Line(line)
    }
}

impl Session {
    pub fn new(hub: Arc<Hub>, out: Outbox) -> Arc<Session> {
        let session = Arc::new(Session {
            hub,
            out,
            in_flight: Mutex::new(FastMap::default()),
            next_task: AtomicU64::new(0),
            initialized: AtomicBool::new(false),
            capabilities: Mutex::new(None),
            log_rank: Mutex::new(None),
            subscriptions: Mutex::new(HashSet::new()),
            forwarded: Mutex::new(FastMap::default()),
            next_forward_id: AtomicU64::new(1),
            own: Mutex::new(FastMap::default()),
            client_name: Mutex::new(Arc::from("unknown")),
        });
        session.hub.register(&session);
        tokio::spawn(forward_hub_events(
            Arc::downgrade(&session),
            session.hub.subscribe(),
        ));
        session
    }

    /// Everything sent to the client passes here, so secrets are removed in one place.
    pub(crate) fn send(&self, line: String) {
        let policy = &self.hub.policy;
        let line = if policy.has_secrets() {
            policy.redact(&line).into_owned()
        } else {
            line
        };
        self.out.send(line);
    }

    fn send_error(&self, id: &str, code: i64, message: &str) {
        self.send(jsonrpc::error(id, code, message, None));
    }

    /// Whether the client declared capability `name` (e.g. `sampling`).
    pub fn client_has(&self, name: &str) -> bool {
        lock(&self.capabilities)
            .as_deref()
            .and_then(|c| {
                RawObject::parse(c)
                    .ok()
                    .map(|o| o.get(name).is_some_and(|v| v != "null"))
            })
            .unwrap_or(false)
    }

    pub(crate) fn log_rank(&self) -> Option<usize> {
        *lock(&self.log_rank)
    }

    pub(crate) fn deliver_log(&self, rank: usize, line: &str) {
        if self.log_rank().is_none_or(|min| rank >= min) {
            self.send(line.to_string());
        }
    }

    pub(crate) fn deliver_update(&self, uri: &str, line: &str) {
        if lock(&self.subscriptions).contains(uri) {
            self.send(line.to_string());
        }
    }

    /// Sends a server's request to the client under an id of ours.
    pub(crate) fn forward_server_request(
        &self,
        upstream: usize,
        m: Message,
        from: Weak<Connection>,
    ) {
        let id = self.next_forward_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.forwarded).insert(
            id,
            Forwarded {
                upstream,
                conn: from,
                id: m.id().to_string(),
            },
        );
        self.send(jsonrpc::request(&id.to_string(), m.method(), m.params()));
    }

    /// A server cancelled a request of its that we forwarded to this client.
    pub(crate) fn cancel_forwarded(
        &self,
        upstream: usize,
        upstream_id: &str,
        reason: Option<&str>,
    ) {
        let ours = {
            let mut fwd = lock(&self.forwarded);
            let found = fwd
                .iter()
                .find(|(_, f)| f.upstream == upstream && f.id == upstream_id && f.alive())
                .map(|(k, _)| *k);

            if let Some(k) = found {
                fwd.remove(&k);
            }
            found
        };
        if let Some(ours) = ours {
            let params = match reason {
                Some(r) => format!("{{\"requestId\":{ours},\"reason\":{r}}}"),
                None => format!("{{\"requestId\":{ours}}}"),
            };
            self.send(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }

    /// Handles one frame read from the client.
    pub fn handle_frame(self: &Arc<Self>, frame: Frame) {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::Oversized { len, .. } => {
                let msg = format!(
                    "message of {len} bytes exceeds the limit of {} bytes (openpact.maxMessageSize)",
                    self.hub.settings.max_message_size
                );
                tracing::warn!("{msg}");
                return self.send_error("null", code::INVALID_REQUEST, &msg);
            }
        };
        match parse_frame(line) {
            Ok(messages) => {
                for m in messages {
                    match m {
                        Ok(m) => self.handle(m),
                        Err(e) => self.send_error(
                            "null",
                            code::INVALID_REQUEST,
                            &format!("Invalid request: {e}"),
                        ),
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "client sent a line that is not JSON-RPC");
                let what = if e.code() == code::PARSE_ERROR {
                    "Parse error"
                } else {
                    "Invalid request"
                };
                self.send_error("null", e.code(), &format!("{what}: {e}"));
            }
        }
    }

    fn handle(self: &Arc<Self>, m: Message) {
        match m.kind() {
            Kind::Request => self.request(m),
            Kind::Notification => self.notification(&m),
            Kind::Response => self.response(&m),
        }
    }

    fn request(self: &Arc<Self>, m: Message) {
        match m.method() {
            "initialize" => {
                self.accept_client(&m);
                self.spawn(m, |s, m| async move { s.initialize(&m).await })
            }
            "ping" => self.send(jsonrpc::result(m.id(), "{}")),
            // The 2026-07-28 era arrives later; -32601 makes modern clients fall back to
            // `initialize` on the same pipe.
            "server/discover" => self.send_error(
                m.id(),
                code::METHOD_NOT_FOUND,
                "Method not found: server/discover",
            ),
            "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
                self.spawn(m, |s, m| async move { s.list(&m).await })
            }
            "tools/call" => {
                self.spawn(m, |s, m| async move { s.by_name(&m, NameKind::Tool).await })
            }
            "prompts/get" => self.spawn(
                m,
                |s, m| async move { s.by_name(&m, NameKind::Prompt).await },
            ),
            "resources/read" => self.spawn(m, |s, m| async move { s.by_uri(&m).await }),
            "resources/subscribe" | "resources/unsubscribe" => {
                self.spawn(m, |s, m| async move { s.subscription(&m).await })
            }
            "completion/complete" => self.spawn(m, |s, m| async move { s.complete(&m).await }),
            "logging/setLevel" => self.spawn(m, |s, m| async move { s.set_level(&m).await }),
            other => self.send_error(
                m.id(),
                code::METHOD_NOT_FOUND,
                &format!("Method not found: {other}"),
            ),
        }
    }

    fn notification(&self, m: &Message) {
        match m.method() {
            "notifications/initialized" => self.initialized.store(true, Ordering::Release),
            "notifications/cancelled" => {
                let id = m
                    .params()
                    .and_then(|p| RawObject::parse(p).ok())
                    .and_then(|o| o.get("requestId"));
                if let Some(id) = id
                    && let Some((_, task)) = lock(&self.in_flight).remove(id)
                {
                    // Dropping the request future sends the upstream its own cancel.
                    task.abort();
                    tracing::debug!(id, "request cancelled by the client");
                }
            }
            "notifications/roots/list_changed" => {
                for up in self.hub.upstreams() {
                    if let Some(conn) = up.connection() {
                        conn.notify("notifications/roots/list_changed", None);
                    }
                }
            }
            other => tracing::debug!(method = other, "ignored notification"),
        }
    }

    /// The client answered a request we forwarded from a server: pass it back under the
    /// server's own id.
    fn response(&self, m: &Message) {
        if let Some(tx) = m.id_u64().and_then(|id| lock(&self.own).remove(&id)) {
            let _ = tx.send(m.clone());
            return;
        }
        let Some(fwd) = m.id_u64().and_then(|id| lock(&self.forwarded).remove(&id)) else {
            tracing::debug!(
                id = m.id(),
                "response from the client to no request of ours"
            );
            return;
        };
        let line = match (m.result(), m.error()) {
            (Some(r), _) => jsonrpc::result(&fwd.id, r),
            (None, Some(e)) => jsonrpc::error_raw(&fwd.id, e),
            (None, None) => return,
        };
        // Only to the very process that asked: a restarted server may reuse the same id.
        match fwd.conn.upgrade().filter(|c| !c.is_closed()) {
            Some(conn) => {
                let _ = conn.send(line);
            }
            None => tracing::debug!(
                id = m.id(),
                "answer for a server process that has gone; dropped"
            ),
        }
    }

    /// Runs a request on its own task so slow servers never hold up the others, and keeps it
    /// cancellable by id.
    fn spawn<F, Fut>(self: &Arc<Self>, m: Message, f: F)
    where
        F: FnOnce(Arc<Session>, Message) -> Fut,
        Fut: std::future::Future + Send + 'static,
        Fut::Output: Into<Reply>,
    {
        let id: Arc<str> = m.id().into();
        // Boxed: the request futures are large, and a box is moved instead of all of them.
        let mut fut = Box::pin(f(self.clone(), m));
        // Requests that never leave the hub (a cache hit, a refusal, a list) finish at their
        // first poll: answering them here spares a task and an in-flight entry. Anything that
        // must wait is then moved to its own task, whose polls register the real waker.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(reply) = fut.as_mut().poll(&mut cx) {
            if let Reply::Line(line) = reply.into() {
                self.send(line);
            }
            return;
        }
        let me = self.clone();
        let number = self.next_task.fetch_add(1, Ordering::Relaxed);
        // Hold the lock across spawn + insert so a fast task cannot remove itself first.
        let mut in_flight = lock(&self.in_flight);
        let key = id.clone();
        let task = tokio::spawn(async move {
            let reply = fut.await.into();
            {
                let mut in_flight = lock(&me.in_flight);
                if in_flight.get(&key).is_some_and(|(n, _)| *n == number) {
                    in_flight.remove(&key);
                }
            }
            if let Reply::Line(line) = reply {
                me.send(line);
            }
        });
        in_flight.insert(id, (number, task.abort_handle()));
    }

    /// Cancels everything in flight, answering each with an error, and tells servers whose
    /// requests to this client are still open that it is gone (used at shutdown: a client
    /// still reading deserves an answer rather than silence).
    pub fn abort_all(&self, reason: &str) {
        let drained: Vec<_> = lock(&self.in_flight).drain().collect();
        for (id, (_, task)) in drained {
            task.abort();
            self.send_error(&id, crate::upstream::code::UNAVAILABLE, reason);
        }
        let forwarded: Vec<_> = lock(&self.forwarded).drain().collect();
        for (_, fwd) in forwarded {
            if let Some(conn) = fwd.conn.upgrade() {
                let _ = conn.send(jsonrpc::error(
                    &fwd.id,
                    code::INTERNAL_ERROR,
                    "the client went away",
                    None,
                ));
            }
        }
    }

    /// A server's process ended: its requests to the client can no longer be answered, so the
    /// client is told to stop working on them.
    pub(crate) fn server_gone(&self, upstream: usize) {
        let gone: Vec<u64> = {
            let mut fwd = lock(&self.forwarded);
            let keys: Vec<u64> = fwd
                .iter()
                .filter(|(_, f)| f.upstream == upstream && !f.alive())
                .map(|(k, _)| *k)
                .collect();
            for k in &keys {
                fwd.remove(k);
            }
            keys
        };
        for id in gone {
            let params =
                format!("{{\"requestId\":{id},\"reason\":\"the server that asked has stopped\"}}");
            self.send(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }

    pub fn in_flight(&self) -> usize {
        lock(&self.in_flight).len()
    }

    /// Takes note of the client (synchronously, so requests right behind `initialize` already
    /// see its capabilities) and tells the servers what it supports.
    fn accept_client(&self, m: &Message) {
        let params = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .unwrap_or_default();
        if let Some(name) = params
            .get("clientInfo")
            .and_then(|c| RawObject::parse(c).ok())
            .and_then(|c| c.get_str("name"))
        {
            *lock(&self.client_name) = name.into();
        }
        let caps = params.get("capabilities");
        *lock(&self.capabilities) = caps.map(str::to_string);
        self.hub.declare_client(caps);
    }

    /// The `initialize` result. Servers that come up quickly (most do, once they know the
    /// client's capabilities) get a moment to, so their instructions and capabilities are in
    /// it; a slow server is never waited for beyond that.
    async fn initialize(&self, m: &Message) -> String {
        self.hub.settled(INITIALIZE_GRACE).await;
        let params = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .unwrap_or_default();
        let version = match params.get_str("protocolVersion") {
            Some(v) if LEGACY_VERSIONS.contains(&v.as_ref()) => v.into_owned(),
            _ => OFFERED_VERSION.to_string(),
        };
        let mut result = format!(
            "{{\"protocolVersion\":\"{version}\",\"capabilities\":{},\"serverInfo\":{{\"name\":\"openpact\",\"title\":\"openpact MCP hub\",\"version\":\"{}\"}}",
            self.hub.capabilities(),
            env!("CARGO_PKG_VERSION")
        );
        if let Some(text) = self.hub.instructions() {
            result.push_str(",\"instructions\":");
            result.push_str(&jsonrpc::quote(&text));
        }
        result.push('}');
        jsonrpc::result(m.id(), &result)
    }

    /// One page of a merged list, with the hub's own cursors.
    async fn list(&self, m: &Message) -> String {
        self.hub.startup_grace().await;
        let catalog = self.hub.catalog();
        let (field, fingerprint, items): (&str, u64, Vec<&str>) = match m.method() {
            "tools/list" => (
                "tools",
                catalog.tools.fingerprint,
                catalog.tools.jsons().collect(),
            ),
            "prompts/list" => (
                "prompts",
                catalog.prompts.fingerprint,
                catalog.prompts.jsons().collect(),
            ),
            "resources/list" => (
                "resources",
                catalog.resources_fingerprint,
                catalog.resources.iter().map(|r| &*r.json).collect(),
            ),
            _ => (
                "resourceTemplates",
                catalog.templates_fingerprint,
                catalog.templates.iter().map(|r| &*r.json).collect(),
            ),
        };
        let cursor_raw = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .and_then(|o| o.get("cursor").map(str::to_string));
        let cursor = match cursor_raw.as_deref() {
            None | Some("null") => None,
            Some(raw) => match serde_json::from_str::<String>(raw) {
                Ok(c) => Some(c),
                Err(_) => {
                    return jsonrpc::error(
                        m.id(),
                        code::INVALID_PARAMS,
                        "Invalid cursor: it must be a string from nextCursor",
                        None,
                    );
                }
            },
        };

        let start = match cursor {
            None => 0,
            Some(c) => match parse_cursor(&c, fingerprint) {
                Some(offset) if offset <= items.len() => offset,
                _ => {
                    return jsonrpc::error(
                        m.id(),
                        code::INVALID_PARAMS,
                        "Invalid or stale cursor: the list changed; list again from the start",
                        None,
                    );
                }
            },
        };
        let end = (start + self.hub.settings.page_size).min(items.len());
        let page = &items[start..end];
        let mut result =
            String::with_capacity(32 + page.iter().map(|t| t.len() + 1).sum::<usize>());
        result.push_str("{\"");
        result.push_str(field);
        result.push_str("\":[");
        for (i, t) in page.iter().enumerate() {
            if i > 0 {
                result.push(',');
            }
            result.push_str(t);
        }
        result.push(']');
        if end < items.len() {
            result.push_str(",\"nextCursor\":");
            result.push_str(&jsonrpc::quote(&format!("{fingerprint:016x}.{end}")));
        }
        result.push('}');
        jsonrpc::result(m.id(), &result)
    }

    /// `tools/call` and `prompts/get`: route by name, then the policy pipeline — permission →
    /// rate limit → cache lookup → call (only `name` rewritten) → answer → cache store →
    /// audit.
    /// Redaction happens where every line leaves ([`Session::send`]).
    async fn by_name(self: &Arc<Self>, m: &Message, kind: NameKind) -> Reply {
        let t0 = Instant::now();
        let params = m.params().unwrap_or("{}");
        let obj = match RawObject::parse(params) {
            Ok(o) => o,
            Err(e) => {
                return jsonrpc::error(
                    m.id(),
                    code::INVALID_PARAMS,
                    &format!("{} params must be an object: {e}", m.method()),
                    None,
                )
                .into();
            }
        };
        let Some(name) = obj.get_str("name") else {
            return jsonrpc::error(
                m.id(),
                code::INVALID_PARAMS,
                &format!("{} needs a string `name`", m.method()),
                None,
            )
            .into();
        };
        let (route, named) = match self.hub.route_name(kind, &name).await {
            Ok(found) => found,
            Err(e) => return jsonrpc::error(m.id(), e.code(), &e.to_string(), None).into(),
        };
        let arguments = obj.get("arguments").unwrap_or("{}");
        let target = Target {
            kind: match kind {
                NameKind::Tool => "tool",
                NameKind::Prompt => "prompt",
            },
            qualified: &named.qualified,
            server: self.hub.server_name(named.upstream),
            description: &named.description,
            definition: named.definition(),
            arguments,
            ask_every_time: matches!(route, Route::Builtin)
                && crate::builtins::ASK_EVERY_TIME.contains(&named.original.as_str()),
        };
        let policy = self.hub.policy.clone();
        let ttl = match kind {
            NameKind::Tool => policy.cache_ttl(&named.qualified, named.read_only),
            NameKind::Prompt => None,
        };
        // The cache key and the audit record share one canonical form of the arguments.
        let canon: Option<Arc<str>> =
            (ttl.is_some() || policy.audit_enabled()).then(|| canonical(arguments).into());
        let mut audit = self.audit_start(m.method(), named.qualified.clone(), canon.clone());
        if let Some(denied) = self.admit(m, &target, &mut audit).await {
            return self.answer(audit, t0, denied);
        }
        let claim = match ttl {
            None => None,
            Some(ttl) => {
                let key = Key::from_canonical(
                    named.upstream,
                    &named.original,
                    canon.unwrap_or_else(|| canonical(arguments).into()),
                );
                match policy.cache.lookup::<CallReply>(key).await {
                    Lookup::Hit(result) => {
                        audit.cache = "hit".into();
                        // Only successful, non-error results are stored.
                        audit.outcome = "ok".into();
                        return self.answer(audit, t0, jsonrpc::result(m.id(), &result));
                    }
                    Lookup::Failed(reply) => {
                        audit.cache = "miss".into();
                        self.note_outcome(&mut audit, &reply);
                        return self.answer(audit, t0, relay(m.id(), &reply));
                    }
                    Lookup::Claimed(claim) => Some((claim, ttl)),
                }
            }
        };
        audit.cache = if claim.is_some() { "miss" } else { "off" }.into();
        let upstream_params = obj.with("name", &named.original_json);
        let reply = self
            .dispatch(
                &route,
                m.method(),
                &named.original,
                arguments,
                &upstream_params,
            )
            .await;
        self.note_outcome(&mut audit, &reply);
        let sent = self.answer(audit, t0, relay(m.id(), &reply));
        if let Some((claim, ttl)) = claim {
            match reply.as_ref().ok().and_then(Message::result) {
                // Only successful, non-error results are stored — already redacted, so the
                // cache never holds a secret.
                Some(result) if !is_error_result(result) => {
                    claim.store(Arc::from(policy.redact(result).as_ref()), ttl);
                }
                _ => claim.fail(Arc::new(reply)),
            }
        }
        sent
    }

    /// Sends a routed `tools/call` / `prompts/get` to its server, or runs a built-in tool in
    /// process (its result wrapped as if a server had answered, so the rest of the pipeline
    /// treats both alike).
    async fn dispatch(
        self: &Arc<Self>,
        route: &Route,
        method: &str,
        tool: &str,
        arguments: &str,
        upstream_params: &str,
    ) -> Result<Message, CallError> {
        match route {
            Route::Server(up) => {
                self.hub
                    .request_for(self, up, method, upstream_params)
                    .await
            }
            Route::Builtin => {
                let args: serde_json::Value =
                    serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null);
                let output = self
                    .hub
                    .builtins
                    .call(tool, &args)
                    .await
                    .unwrap_or_else(|| {
                        crate::builtins::ToolOutput::error(format!("Unknown tool: {tool}"))
                    });
                let line = jsonrpc::result("0", &output.to_result().to_string());
                Message::parse(line.into_boxed_str()).map_err(|e| CallError::Closed {
                    server: super::catalog::BUILTIN_SERVER.into(),
                    reason: format!("produced an unreadable result: {e}"),
                })
            }
        }
    }

    /// Permission and rate limit. `Some(line)` is the refusal to send instead of calling.
    async fn admit(
        self: &Arc<Self>,
        m: &Message,
        target: &Target<'_>,
        audit: &mut Record,
    ) -> Option<String> {
        let policy = &self.hub.policy;
        let verdict = policy.permission(target, self.as_ref()).await;
        let (decision, source) = match &verdict {
            Verdict::Allow(s) => ("allow", *s),
            Verdict::Deny(s, _) => ("deny", *s),
        };
        audit.decision = decision.into();
        audit.source = source.label().into();
        if let Verdict::Deny(_, message) = verdict {
            audit.outcome = "denied".into();
            audit.error = Some(message.clone());
            tracing::info!(target = %policy.redact(target.qualified), source = source.label(), "denied");
            return Some(if m.method() == "tools/call" {
                // A tool error the model can read and relay, as the spec prefers.
                let text = jsonrpc::quote(&message);
                jsonrpc::result(
                    m.id(),
                    &format!(
                        "{{\"content\":[{{\"type\":\"text\",\"text\":{text}}}],\"isError\":true}}"
                    ),
                )
            } else {
                jsonrpc::error(m.id(), PERMISSION_DENIED, &message, None)
            });
        }
        if let Err(limited) = policy.rate_limit(target.server, target.qualified) {
            audit.outcome = "rateLimited".into();
            let retry_ms = limited.retry_after.as_millis();
            let data = serde_json::json!({
                "limit": limited.which,
                "perSecond": limited.limit.per_second,
                "burst": limited.limit.burst,
                "retryAfterMs": retry_ms,
            });
            return Some(jsonrpc::error(
                m.id(),
                RATE_LIMITED,
                "Rate limit exceeded. Please try again later.",
                Some(&data.to_string()),
            ));
        }
        None
    }

    /// The audit record as far as it is known before the call; an empty one (nothing
    /// allocated) when auditing is off.
    fn audit_start(&self, method: &str, target: Arc<str>, canon: Option<Arc<str>>) -> Record {
        let policy = &self.hub.policy;
        let (true, Some(canon)) = (policy.audit_enabled(), canon) else {
            return Record::default();
        };
        let arguments = policy.settings.audit.arguments.then(|| {
            serde_json::from_str(&policy.redact(&canon)).unwrap_or(serde_json::Value::Null)
        });
        const METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];
        Record {
            at: Some(std::time::SystemTime::now()),
            client: lock(&self.client_name).clone(),
            method: METHODS
                .into_iter()
                .find(|known| *known == method)
                .map_or_else(|| method.to_string().into(), Cow::Borrowed),
            target,
            cache: "off".into(),
            hash_later: Some(canon),
            arguments,
            ..Record::default()
        }
    }

    /// Reads the audit outcome off a server's reply, sparing [`Session::answer`] a re-parse of
    /// the line it becomes. Failures to get a reply are left to `answer`, which records the
    /// error object the client was sent.
    fn note_outcome(&self, audit: &mut Record, reply: &CallReply) {
        let policy = &self.hub.policy;
        if !policy.audit_enabled() {
            return;
        }
        let Ok(msg) = reply else { return };
        audit.outcome = match (msg.result(), msg.error()) {
            (Some(result), _) if is_error_result(result) => "isError".into(),
            (Some(_), _) => "ok".into(),
            (None, Some(error)) => {
                audit.error = Some(policy.redact(error).into_owned());
                "error".into()
            }
            (None, None) => return,
        };
    }

    /// Sends the answer, then completes and files the audit record: that bookkeeping need
    /// not delay the client.
    fn answer(&self, mut audit: Record, t0: Instant, line: String) -> Reply {
        let policy = &self.hub.policy;
        if !policy.audit_enabled() {
            self.send(line);
            return Reply::Sent;
        }
        audit.duration_ms = (t0.elapsed().as_secs_f64() * 1e6).round() / 1e3;
        audit.result_bytes = line.len();
        if audit.outcome.is_empty() {
            audit.outcome = match Message::parse(line.as_str().into()) {
                Ok(msg) if msg.error().is_some() => {
                    audit.error = msg.error().map(|e| policy.redact(e).into_owned());
                    "error".into()
                }
                Ok(msg) if msg.result().is_some_and(is_error_result) => "isError".into(),
                _ => "ok".into(),
            };
        }
        self.send(line);
        // A URI or a denial message can quote a secret.
        if let Cow::Owned(redacted) = policy.redact(&audit.target) {
            audit.target = redacted.into();
        }
        audit.error = audit.error.map(|e| policy.redact(&e).into_owned());
        policy.audit(audit);
        Reply::Sent
    }

    fn uri_of(m: &Message) -> Result<String, String> {
        let params = m.params().unwrap_or("{}");
        RawObject::parse(params)
            .ok()
            .and_then(|o| o.get_str("uri").map(Cow::into_owned))
            .ok_or_else(|| {
                jsonrpc::error(
                    m.id(),
                    code::INVALID_PARAMS,
                    &format!("{} needs a string `uri`", m.method()),
                    None,
                )
            })
    }

    async fn route_uri(&self, m: &Message, uri: &str) -> Result<Arc<Upstream>, String> {
        self.hub
            .route_uri(uri)
            .await
            .map_err(|e| jsonrpc::error(m.id(), e.code(), &e.to_string(), None))
    }

    /// `resources/read`: URIs are not namespaced; route by the URI → server map. Passes
    /// permission (as `server:<uri>`), rate limit and audit like a call.
    async fn by_uri(self: &Arc<Self>, m: &Message) -> Reply {
        let t0 = Instant::now();
        let uri = match Self::uri_of(m) {
            Ok(u) => u,
            Err(line) => return line.into(),
        };
        let up = match self.route_uri(m, &uri).await {
            Ok(up) => up,
            Err(line) => return line.into(),
        };
        let qualified = format!("{}:{uri}", up.config.prefix());
        let target = Target {
            kind: "resource",
            qualified: &qualified,
            server: up.name(),
            description: "",
            definition: "",
            arguments: "{}",
            ask_every_time: false,
        };
        let mut audit = self.audit_start(m.method(), qualified.as_str().into(), Some("{}".into()));
        if let Some(denied) = self.admit(m, &target, &mut audit).await {
            return self.answer(audit, t0, denied);
        }
        let reply = self
            .hub
            .request_for(self, &up, m.method(), m.params().unwrap_or("{}"))
            .await;
        self.note_outcome(&mut audit, &reply);
        self.answer(audit, t0, relay(m.id(), &reply))
    }

    async fn subscription(&self, m: &Message) -> String {
        let uri = match Self::uri_of(m) {
            Ok(u) => u,
            Err(line) => return line,
        };
        let up = match self.route_uri(m, &uri).await {
            Ok(up) => up,
            Err(line) => return line,
        };
        let params = m.params().unwrap_or("{}");
        let subscribe = m.method() == "resources/subscribe";
        let changed = if subscribe {
            lock(&self.subscriptions).insert(uri.clone())
        } else {
            lock(&self.subscriptions).remove(&uri)
        };
        if !changed {
            // Already in that state for this client: nothing to tell the server.
            return jsonrpc::result(m.id(), "{}");
        }
        let reply = if subscribe {
            self.hub.subscribe_uri(&up, &uri, params).await
        } else {
            self.hub.unsubscribe_uri(&up, &uri, params).await
        };
        match reply {
            Ok(None) => jsonrpc::result(m.id(), "{}"),
            Ok(Some(reply)) => {
                if subscribe && reply.error().is_some() {
                    lock(&self.subscriptions).remove(&uri);
                }
                relay(m.id(), &Ok(reply))
            }
            Err(e) => {
                if subscribe {
                    lock(&self.subscriptions).remove(&uri);
                }
                relay(m.id(), &Err(e))
            }
        }
    }

    /// `completion/complete`: prompts by (namespaced) name, resources by URI template.
    async fn complete(self: &Arc<Self>, m: &Message) -> String {
        let params = m.params().unwrap_or("{}");
        let parsed = RawObject::parse(params).ok().and_then(|o| {
            let r = o.get("ref")?;
            let reference = RawObject::parse(r).ok()?;
            Some((o, reference))
        });
        let Some((obj, reference)) = parsed else {
            return jsonrpc::error(
                m.id(),
                code::INVALID_PARAMS,
                "completion/complete needs a `ref` object",
                None,
            );
        };
        let routed = match reference.get_str("type").as_deref() {
            Some("ref/prompt") => match reference.get_str("name") {
                Some(name) => {
                    self.hub
                        .route_name(NameKind::Prompt, &name)
                        .await
                        .and_then(|(route, named)| {
                            // Built-ins have no prompts; a prompt name always routes to a server.
                            let Route::Server(up) = route else {
                                return Err(super::RouteError::Unknown {
                                    kind: "prompt",
                                    name: named.wire.to_string(),
                                });
                            };
                            let new_ref = reference.with("name", &named.original_json);
                            Ok((up, obj.with("ref", &new_ref)))
                        })
                }
                None => {
                    return jsonrpc::error(
                        m.id(),
                        code::INVALID_PARAMS,
                        "ref/prompt needs a `name`",
                        None,
                    );
                }
            },
            Some("ref/resource") => match reference.get_str("uri") {
                Some(uri) => self
                    .hub
                    .route_uri(&uri)
                    .await
                    .map(|up| (up, params.to_string())),
                None => {
                    return jsonrpc::error(
                        m.id(),
                        code::INVALID_PARAMS,
                        "ref/resource needs a `uri`",
                        None,
                    );
                }
            },
            _ => {
                return jsonrpc::error(
                    m.id(),
                    code::INVALID_PARAMS,
                    "ref.type must be ref/prompt or ref/resource",
                    None,
                );
            }
        };
        match routed {
            Ok((up, params)) => relay(
                m.id(),
                &self.hub.request_for(self, &up, m.method(), &params).await,
            ),
            Err(e) => jsonrpc::error(m.id(), e.code(), &e.to_string(), None),
        }
    }

    async fn set_level(&self, m: &Message) -> String {
        let level = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .and_then(|o| o.get_str("level"));
        let Some(rank) = level.as_deref().and_then(log_rank) else {
            return jsonrpc::error(
                m.id(),
                code::INVALID_PARAMS,
                &format!(
                    "unknown log level; use one of {}",
                    super::LOG_LEVELS.join(", ")
                ),
                None,
            );
        };
        *lock(&self.log_rank) = Some(rank);
        self.hub.set_log_level().await;
        jsonrpc::result(m.id(), "{}")
    }
}

/// How long `initialize` may wait for servers still starting.
const INITIALIZE_GRACE: Duration = Duration::from_millis(750);

/// A `tools/call` result with `isError: true`.
fn is_error_result(result: &str) -> bool {
    static IS_ERROR: LazyLock<MemberProbe> = LazyLock::new(|| MemberProbe::new("isError"));
    // Most results have no `isError` member at all; only those that might need parsing.
    IS_ERROR.may_have(result)
        && RawObject::parse(result)
            .ok()
            .and_then(|o| o.get("isError").map(|v| v == "true"))
            .unwrap_or(false)
}

/// JSON-RPC code for a refused `prompts/get` or `resources/read` (tools get an `isError`
/// result instead).
pub const PERMISSION_DENIED: i64 = -32003;
/// The code the rate limit answers with.
pub const RATE_LIMITED: i64 = -32000;

impl Asker for Session {
    fn can_elicit(&self) -> bool {
        self.client_has("elicitation")
    }

    fn elicit(
        &self,
        message: String,
        schema: &'static str,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Option<String>> + Send + '_>> {
        Box::pin(async move {
            let id = self.next_forward_id.fetch_add(1, Ordering::Relaxed);
            let (tx, rx) = oneshot::channel();
            lock(&self.own).insert(id, tx);
            // Withdraws the question if this call ends first (timeout, or the client cancelled
            // the call), so the client does not keep showing a dead dialog.
            let mut pending = Withdraw {
                session: self,
                id,
                reason: "the call was cancelled",
            };
            let params = format!(
                "{{\"message\":{},\"requestedSchema\":{schema}}}",
                jsonrpc::quote(&message)
            );
            self.send(jsonrpc::request(
                &id.to_string(),
                "elicitation/create",
                Some(&params),
            ));
            match tokio::time::timeout(timeout, rx).await {
                Ok(Ok(reply)) => {
                    pending.reason = "";
                    reply.result().map(str::to_string)
                }
                _ => {
                    pending.reason = "timed out";
                    None
                }
            }
        })
    }
}

/// Sends `notifications/cancelled` for an own request to the client unless it was answered.
struct Withdraw<'s> {
    session: &'s Session,
    id: u64,
    reason: &'static str,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if self.reason.is_empty() {
            return;
        }
        lock(&self.session.own).remove(&self.id);
        let params = format!(
            "{{\"requestId\":{},\"reason\":{}}}",
            self.id,
            jsonrpc::quote(self.reason)
        );
        self.session.send(jsonrpc::notification(
            "notifications/cancelled",
            Some(&params),
        ));
    }
}

fn parse_cursor(cursor: &str, fingerprint: u64) -> Option<usize> {
    let (fp, offset) = cursor.split_once('.')?;
    if u64::from_str_radix(fp, 16).ok()? != fingerprint {
        return None;
    }
    offset.parse().ok()
}

async fn forward_hub_events(
    session: std::sync::Weak<Session>,
    mut rx: tokio::sync::broadcast::Receiver<HubEvent>,
) {
    loop {
        let events: &[HubEvent] = match rx.recv().await {
            Ok(HubEvent::ToolsChanged) => &[HubEvent::ToolsChanged],
            Ok(HubEvent::PromptsChanged) => &[HubEvent::PromptsChanged],
            Ok(HubEvent::ResourcesChanged) => &[HubEvent::ResourcesChanged],
            // Missed events only mean lists changed more than once: announce each once.
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => &[
                HubEvent::ToolsChanged,
                HubEvent::PromptsChanged,
                HubEvent::ResourcesChanged,
            ],
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        let Some(s) = session.upgrade() else { return };
        if s.initialized.load(Ordering::Acquire) {
            for ev in events {
                s.send(jsonrpc::notification(ev.notification(), None));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_error_result;

    #[test]
    fn is_error_result_reads_the_member_however_it_is_written() {
        assert!(!is_error_result(
            r#"{"content":[{"type":"text","text":"hi"}]}"#
        ));
        assert!(!is_error_result(r#"{"content":[],"isError":false}"#));
        assert!(is_error_result(r#"{"content":[],"isError":true}"#));
        assert!(is_error_result(r#"{"content":[], "isError" : true}"#));
        // A key with escapes is the same key.
        assert!(is_error_result(r#"{"content":[],"\u0069sError":true}"#));
        // The words inside a text are not the member.
        assert!(!is_error_result(
            r#"{"content":[{"type":"text","text":"\"isError\": true"}]}"#
        ));
    }
}
