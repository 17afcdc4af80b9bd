//! One downstream client. Answers what the hub serves itself (`initialize`, `ping`, the
//! merged lists), routes the rest to the right server with only names rewritten, forwards
//! server→client requests to the client under ids of its own, and keeps what belongs to this
//! client: its capabilities, log level, resource subscriptions and requests in flight (so a
//! `notifications/cancelled` reaches the right upstream request).

use super::{Hub, HubEvent, NameKind, log_rank};
use crate::jsonrpc::{self, Frame, Kind, Message, RawObject, code, parse_frame};
use crate::transport::Outgoing;
use crate::upstream::{CallError, LEGACY_VERSIONS, OFFERED_VERSION, Upstream};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

pub struct Session {
    hub: Arc<Hub>,
    out: mpsc::UnboundedSender<Outgoing>,
    /// Downstream request id (JSON text) → the task serving it.
    in_flight: Mutex<HashMap<String, AbortHandle>>,
    initialized: AtomicBool,
    /// `capabilities` from the client's `initialize`, as JSON text.
    capabilities: Mutex<Option<String>>,
    /// Least severe log level the client wants, if it said.
    log_rank: Mutex<Option<usize>>,
    subscriptions: Mutex<HashSet<String>>,
    /// Our id for a request forwarded to the client → (server, that server's id as JSON).
    forwarded: Mutex<HashMap<u64, (usize, String)>>,
    next_forward_id: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A response line for `id` from an upstream reply: the server's result or error verbatim,
/// or the hub's own error when the server could not answer.
fn relay(id: &str, reply: Result<Message, CallError>) -> String {
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

impl Session {
    pub fn new(hub: Arc<Hub>, out: mpsc::UnboundedSender<Outgoing>) -> Arc<Session> {
        let session = Arc::new(Session {
            hub,
            out,
            in_flight: Mutex::new(HashMap::new()),
            initialized: AtomicBool::new(false),
            capabilities: Mutex::new(None),
            log_rank: Mutex::new(None),
            subscriptions: Mutex::new(HashSet::new()),
            forwarded: Mutex::new(HashMap::new()),
            next_forward_id: AtomicU64::new(1),
        });
        session.hub.register(&session);
        tokio::spawn(forward_hub_events(
            Arc::downgrade(&session),
            session.hub.subscribe(),
        ));
        session
    }

    pub(crate) fn send(&self, line: String) {
        let _ = self.out.send(Outgoing::Line(line));
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
    pub(crate) fn forward_server_request(&self, upstream: usize, m: Message) {
        let id = self.next_forward_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.forwarded).insert(id, (upstream, m.id().to_string()));
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
                .find(|(_, (u, id))| *u == upstream && id == upstream_id)
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
            Frame::Oversized { len } => {
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
            "initialize" => self.initialize(&m),
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
                    .and_then(|o| o.get("requestId").map(str::to_string));
                if let Some(id) = id
                    && let Some(task) = lock(&self.in_flight).remove(&id)
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
        let Some((upstream, upstream_id)) =
            m.id_u64().and_then(|id| lock(&self.forwarded).remove(&id))
        else {
            tracing::debug!(
                id = m.id(),
                "response from the client to no request of ours"
            );
            return;
        };
        let line = match (m.result(), m.error()) {
            (Some(r), _) => jsonrpc::result(&upstream_id, r),
            (None, Some(e)) => jsonrpc::error_raw(&upstream_id, e),
            (None, None) => return,
        };
        if let Some(conn) = self.hub.upstreams()[upstream].connection() {
            let _ = conn.send(line);
        }
    }

    /// Runs a request on its own task so slow servers never hold up the others, and keeps it
    /// cancellable by id.
    fn spawn<F, Fut>(self: &Arc<Self>, m: Message, f: F)
    where
        F: FnOnce(Arc<Session>, Message) -> Fut,
        Fut: std::future::Future<Output = String> + Send + 'static,
    {
        let id = m.id().to_string();
        let fut = f(self.clone(), m);
        let me = self.clone();
        // Hold the lock across spawn + insert so a fast task cannot remove itself first.
        let mut in_flight = lock(&self.in_flight);
        let key = id.clone();
        let task = tokio::spawn(async move {
            let line = fut.await;
            lock(&me.in_flight).remove(&key);
            me.send(line);
        });
        in_flight.insert(id, task.abort_handle());
    }

    /// Cancels everything in flight, answering each with an error, and tells servers whose
    /// requests to this client are still open that it is gone (used at shutdown: a client
    /// still reading deserves an answer rather than silence).
    pub fn abort_all(&self, reason: &str) {
        let drained: Vec<_> = lock(&self.in_flight).drain().collect();
        for (id, task) in drained {
            task.abort();
            self.send_error(&id, crate::upstream::code::UNAVAILABLE, reason);
        }
        let forwarded: Vec<_> = lock(&self.forwarded).drain().collect();
        for (_, (upstream, id)) in forwarded {
            if let Some(conn) = self.hub.upstreams()[upstream].connection() {
                let _ = conn.send(jsonrpc::error(
                    &id,
                    code::INTERNAL_ERROR,
                    "the client went away",
                    None,
                ));
            }
        }
    }

    pub fn in_flight(&self) -> usize {
        lock(&self.in_flight).len()
    }

    fn initialize(&self, m: &Message) {
        let params = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .unwrap_or_default();
        let version = match params.get_str("protocolVersion") {
            Some(v) if LEGACY_VERSIONS.contains(&v.as_str()) => v,
            _ => OFFERED_VERSION.to_string(),
        };
        let caps = params.get("capabilities");
        *lock(&self.capabilities) = caps.map(str::to_string);
        self.hub.declare_client(caps);
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
        self.send(jsonrpc::result(m.id(), &result));
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
        let cursor = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .and_then(|o| o.get_str("cursor"));
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

    /// `tools/call` and `prompts/get`: route by name, rewrite only `name`.
    async fn by_name(self: &Arc<Self>, m: &Message, kind: NameKind) -> String {
        let params = m.params().unwrap_or("{}");
        let obj = match RawObject::parse(params) {
            Ok(o) => o,
            Err(e) => {
                return jsonrpc::error(
                    m.id(),
                    code::INVALID_PARAMS,
                    &format!("{} params must be an object: {e}", m.method()),
                    None,
                );
            }
        };
        let Some(name) = obj.get_str("name") else {
            return jsonrpc::error(
                m.id(),
                code::INVALID_PARAMS,
                &format!("{} needs a string `name`", m.method()),
                None,
            );
        };
        let (up, original) = match self.hub.route_name(kind, &name).await {
            Ok(found) => found,
            Err(e) => return jsonrpc::error(m.id(), e.code(), &e.to_string(), None),
        };
        let params = obj.with("name", &jsonrpc::quote(&original));
        relay(
            m.id(),
            self.hub.request_for(self, &up, m.method(), &params).await,
        )
    }

    fn uri_of(m: &Message) -> Result<String, String> {
        let params = m.params().unwrap_or("{}");
        RawObject::parse(params)
            .ok()
            .and_then(|o| o.get_str("uri"))
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

    /// `resources/read`: URIs are not namespaced; route by the URI → server map.
    async fn by_uri(self: &Arc<Self>, m: &Message) -> String {
        let uri = match Self::uri_of(m) {
            Ok(u) => u,
            Err(line) => return line,
        };
        let up = match self.route_uri(m, &uri).await {
            Ok(up) => up,
            Err(line) => return line,
        };
        relay(
            m.id(),
            self.hub
                .request_for(self, &up, m.method(), m.params().unwrap_or("{}"))
                .await,
        )
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
                relay(m.id(), Ok(reply))
            }
            Err(e) => {
                if subscribe {
                    lock(&self.subscriptions).remove(&uri);
                }
                relay(m.id(), Err(e))
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
                        .map(|(up, original)| {
                            let new_ref = reference.with("name", &jsonrpc::quote(&original));
                            (up, obj.with("ref", &new_ref))
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
                self.hub.request_for(self, &up, m.method(), &params).await,
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
