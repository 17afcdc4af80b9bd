//! What passes between servers and sessions: requests sent for a session (with progress
//! tokens rewritten so they never collide), the log level and resource subscriptions shared
//! by all sessions, and servers' notifications and requests delivered to the right sessions.

use super::{Hub, LOG_LEVELS, Session, lock, log_rank};
use crate::jsonrpc::{self, MemberProbe, Message, RawObject};
use crate::upstream::{CallError, Connection, Sink, Upstream};
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock, OnceLock, Weak};

impl Hub {
    /// Sends a request upstream on behalf of `session`. A `_meta.progressToken` in `params`
    /// is replaced by a hub-wide unique token for the duration of the request, so progress
    /// from any server reaches exactly this requester under its own token.
    pub async fn request_for(
        &self,
        session: &Arc<Session>,
        up: &Upstream,
        method: &str,
        params: &str,
    ) -> Result<Message, CallError> {
        self.request_for_within(session, up, method, params, None)
            .await
    }

    /// [`Hub::request_for`] with `timeout` in place of the server's configured one when given.
    pub async fn request_for_within(
        &self,
        session: &Arc<Session>,
        up: &Upstream,
        method: &str,
        params: &str,
        timeout: Option<std::time::Duration>,
    ) -> Result<Message, CallError> {
        let (params, _guard) = self.rewrite_progress(session, params);
        let _caller = self.note_caller(session, up.index);
        if crate::telemetry::on() {
            return traced_request(up, method, &params, timeout).await;
        }
        up.request_within(method, Some(&params), timeout).await
    }

    /// Remembers that `session` waits on server `upstream` until the guard is dropped.
    fn note_caller(&self, session: &Arc<Session>, upstream: usize) -> CallerGuard<'_> {
        let number = self.next_caller.fetch_add(1, Ordering::Relaxed);
        lock(&self.callers).push(Caller {
            upstream,
            number,
            session: Arc::downgrade(session),
        });
        CallerGuard { hub: self, number }
    }

    /// Who gets server `upstream`'s request needing client capability `cap`: a session with
    /// a call to it in flight (the server is working on a call; on stdio nothing says which,
    /// so the newest able to answer). Only a server no session is calling asks any handshake
    /// session able to answer (a server may ask for roots at any time); a question is never
    /// carried to another client than the ones waiting on the server.
    pub(super) fn asked_session(&self, upstream: usize, cap: &str) -> Option<Arc<Session>> {
        let calling: Vec<Arc<Session>> = lock(&self.callers)
            .iter()
            .rev()
            .filter(|c| c.upstream == upstream)
            .filter_map(|c| c.session.upgrade())
            .collect();
        if !calling.is_empty() {
            return calling.into_iter().find(|s| s.client_has(cap));
        }
        self.sessions()
            .into_iter()
            .find(|s| !s.is_stateless() && s.client_has(cap))
    }

    fn rewrite_progress<'h, 'p>(
        &'h self,
        session: &Arc<Session>,
        params: &'p str,
    ) -> (Cow<'p, str>, Option<ProgressGuard<'h>>) {
        // Most calls carry no `_meta`: skip parsing them.
        static META: LazyLock<MemberProbe> = LazyLock::new(|| MemberProbe::new("_meta"));
        if !META.may_have(params) {
            return (Cow::Borrowed(params), None);
        }
        let Ok(obj) = RawObject::parse(params) else {
            return (Cow::Borrowed(params), None);
        };
        let Some(meta_text) = obj.get("_meta") else {
            return (Cow::Borrowed(params), None);
        };
        let Ok(meta) = RawObject::parse(meta_text) else {
            return (Cow::Borrowed(params), None);
        };
        let Some(original) = meta.get("progressToken") else {
            return (Cow::Borrowed(params), None);
        };
        let token = format!(
            "\"openpact-{}\"",
            self.next_token.fetch_add(1, Ordering::Relaxed)
        );
        lock(&self.progress).insert(
            token.clone(),
            (Arc::downgrade(session), original.to_string()),
        );
        let new_meta = meta.with("progressToken", &token);
        (
            Cow::Owned(obj.with("_meta", &new_meta)),
            Some(ProgressGuard { hub: self, token }),
        )
    }

    /// Applies a session's `logging/setLevel`: servers get the most verbose level any
    /// session wants (each session filters for itself).
    pub(crate) async fn set_log_level(&self) {
        let wanted = self
            .sessions()
            .iter()
            // 2026-07-28 clients ask per request; their level is theirs alone.
            .filter(|s| !s.is_stateless())
            .filter_map(|s| s.log_rank())
            .min()
            .map(|r| LOG_LEVELS[r].to_string());
        *lock(&self.log_level) = wanted.clone();
        if let Some(level) = wanted {
            let params = format!("{{\"level\":\"{level}\"}}");
            let targets: Vec<_> = self
                .upstreams()
                .iter()
                .filter(|u| {
                    u.snapshot()
                        .info
                        .as_ref()
                        .is_some_and(|i| i.has_capability("logging"))
                })
                .cloned()
                .collect();
            for up in targets {
                if let Err(e) = up.request("logging/setLevel", Some(&params)).await {
                    tracing::debug!(server = %up.name(), "logging/setLevel: {e}");
                }
            }
        }
    }

    /// Counts a session's subscription; the first one for a URI subscribes upstream.
    pub(crate) async fn subscribe_uri(
        &self,
        up: &Upstream,
        uri: &str,
        params: &str,
    ) -> Result<Option<Message>, CallError> {
        let first = {
            let mut subs = lock(&self.subscriptions);
            let n = subs.entry((up.index, uri.to_string())).or_insert(0);
            *n += 1;
            *n == 1
        };
        if !first {
            return Ok(None);
        }
        match up.request("resources/subscribe", Some(params)).await {
            Ok(reply) => {
                if reply.error().is_some() {
                    self.forget_subscription(up.index, uri);
                }
                Ok(Some(reply))
            }
            Err(e) => {
                self.forget_subscription(up.index, uri);
                Err(e)
            }
        }
    }

    /// Drops a session's subscription; the last one for a URI unsubscribes upstream.
    pub(crate) async fn unsubscribe_uri(
        &self,
        up: &Upstream,
        uri: &str,
        params: &str,
    ) -> Result<Option<Message>, CallError> {
        if !self.forget_subscription(up.index, uri) {
            return Ok(None);
        }
        up.request("resources/unsubscribe", Some(params))
            .await
            .map(Some)
    }

    /// Returns true when that was the last subscriber.
    fn forget_subscription(&self, upstream: usize, uri: &str) -> bool {
        let mut subs = lock(&self.subscriptions);
        let key = (upstream, uri.to_string());
        match subs.get_mut(&key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            Some(_) => {
                subs.remove(&key);
                true
            }
            None => false,
        }
    }

    fn on_notification(&self, i: usize, m: &Message) {
        let params = m.params().unwrap_or("{}");
        let obj = RawObject::parse(params).unwrap_or_default();
        match m.method() {
            "notifications/progress" => {
                let target = obj
                    .get("progressToken")
                    .and_then(|t| lock(&self.progress).get(t).cloned());
                if let Some((session, original)) = target
                    && let Some(session) = session.upgrade()
                {
                    let params = obj.with("progressToken", &original);
                    session.send_droppable(jsonrpc::notification(
                        "notifications/progress",
                        Some(&params),
                    ));
                }
            }
            "notifications/message" => {
                let server = self.server_name(i);
                let logger = match obj.get_str("logger") {
                    Some(l) if !l.is_empty() => format!("{server}/{l}"),
                    _ => server.to_string(),
                };
                let rank = obj
                    .get_str("level")
                    .as_deref()
                    .and_then(log_rank)
                    .unwrap_or(0);
                let line = jsonrpc::notification(
                    "notifications/message",
                    Some(&obj.with("logger", &jsonrpc::quote(&logger))),
                );
                for s in self.sessions() {
                    s.deliver_log(rank, &line);
                }
            }
            "notifications/resources/updated" => {
                if let Some(uri) = obj.get_str("uri") {
                    // A view's update goes to the clients subscribed to its hub URI.
                    let prefix = self.upstreams()[i].config().prefix().to_string();
                    let shown = super::apps::updated(&prefix, &uri, m.text());
                    let (uri, line) = match &shown {
                        Some((uri, line)) => (uri.as_str(), line.as_str()),
                        None => (&*uri, m.text()),
                    };
                    for s in self.sessions() {
                        s.deliver_update(uri, line);
                    }
                }
            }
            "notifications/cancelled" => {
                if let Some(id) = obj.get("requestId") {
                    for s in self.sessions() {
                        s.cancel_forwarded(i, id, obj.get("reason"));
                    }
                }
            }
            "notifications/elicitation/complete" => {
                for s in self
                    .sessions()
                    .iter()
                    .filter(|s| s.client_has("elicitation"))
                {
                    s.send_unprompted(m.text().to_string());
                }
            }
            other => {
                tracing::debug!(server = %self.upstreams()[i].name(), method = other, "notification not forwarded")
            }
        }
    }

    fn on_request(&self, i: usize, m: Message, from: Weak<Connection>) {
        let up = &self.upstreams()[i];
        let capability = super::client_capability(m.method());
        let session = capability.and_then(|cap| self.asked_session(i, cap));
        match (capability, session) {
            (Some(_), Some(session)) => session.forward_server_request(i, m, from),
            (Some(cap), None) => {
                let msg = format!(
                    "the client connected to openpact does not support {cap}, so {} cannot be answered",
                    m.method()
                );
                tracing::debug!(server = %up.name(), "{msg}");
                if let Some(conn) = from.upgrade() {
                    let _ = conn.send(jsonrpc::error(
                        m.id(),
                        jsonrpc::code::METHOD_NOT_FOUND,
                        &msg,
                        None,
                    ));
                }
            }
            (None, _) => {
                if let Some(conn) = from.upgrade() {
                    let msg = format!("Method not found: {}", m.method());
                    let _ = conn.send(jsonrpc::error(
                        m.id(),
                        jsonrpc::code::METHOD_NOT_FOUND,
                        &msg,
                        None,
                    ));
                }
            }
        }
    }

    /// After a server (re)starts, restore what sessions had set up: the log level and the
    /// resource subscriptions it serves.
    pub(super) async fn replay(&self, i: usize) {
        let up = &self.upstreams()[i];
        let level = lock(&self.log_level).clone();
        if let Some(level) = level
            && up
                .snapshot()
                .info
                .as_ref()
                .is_some_and(|inf| inf.has_capability("logging"))
        {
            let _ = up
                .request(
                    "logging/setLevel",
                    Some(&format!("{{\"level\":\"{level}\"}}")),
                )
                .await;
        }
        let uris: Vec<String> = lock(&self.subscriptions)
            .keys()
            .filter(|(u, _)| *u == i)
            .map(|(_, uri)| uri.clone())
            .collect();
        for uri in uris {
            let params = format!("{{\"uri\":{}}}", jsonrpc::quote(&uri));
            if let Err(e) = up.request("resources/subscribe", Some(&params)).await {
                tracing::warn!(server = %up.name(), %uri, "could not restore a subscription after restart: {e}");
            }
        }
    }
}

/// Receives servers' notifications and requests on their reader tasks. Holds the hub
/// weakly: upstreams live inside the hub, so a strong reference would be a cycle.
pub(super) struct HubSink(pub(super) OnceLock<Weak<Hub>>);

impl Sink for HubSink {
    fn egress_refused(&self, server: usize, refusal: &crate::sandbox::proxy::Refusal) {
        if let Some(hub) = self.0.get().and_then(Weak::upgrade) {
            hub.metrics.egress_refused(server);
            hub.hosts.refused(server, refusal);
            // `servers` shows refusals: the status file is rewritten on a change.
            hub.changed.send_modify(|g| *g += 1);
        }
    }

    fn egress_decide(
        &self,
        server: usize,
        host: &str,
        port: u16,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::sandbox::proxy::Decision> + Send>>
    {
        let hub = self.0.get().and_then(Weak::upgrade);
        let (host, port) = (host.to_owned(), port);
        Box::pin(async move {
            match hub {
                Some(hub) => hub.decide_host(server, &host, port).await,
                None => crate::sandbox::proxy::Decision::Refuse("openpact is stopping".into()),
            }
        })
    }

    fn notification(&self, server: usize, m: Message) {
        if let Some(hub) = self.0.get().and_then(Weak::upgrade) {
            hub.on_notification(server, &m);
        }
    }

    fn request(&self, server: usize, m: Message, from: Weak<Connection>) {
        if let Some(hub) = self.0.get().and_then(Weak::upgrade) {
            hub.on_request(server, m, from);
        }
    }

    fn config_file(&self) -> Option<std::path::PathBuf> {
        self.0
            .get()
            .and_then(Weak::upgrade)
            .and_then(|hub| hub.reloads.file.clone())
    }

    fn scrub(&self, text: &str) -> String {
        match self.0.get().and_then(Weak::upgrade) {
            Some(hub) => hub.policy().redact(text).into_owned(),
            None => text.to_string(),
        }
    }
}

/// Removes a progress token mapping when its request ends, however it ends.
struct ProgressGuard<'h> {
    hub: &'h Hub,
    token: String,
}

impl Drop for ProgressGuard<'_> {
    fn drop(&mut self) {
        lock(&self.hub.progress).remove(&self.token);
    }
}

/// A session's request in flight to a server.
pub(super) struct Caller {
    pub(super) upstream: usize,
    pub(super) number: u64,
    session: Weak<Session>,
}

struct CallerGuard<'h> {
    hub: &'h Hub,
    number: u64,
}

impl Drop for CallerGuard<'_> {
    fn drop(&mut self) {
        let mut callers = lock(&self.hub.callers);
        if let Some(pos) = callers.iter().rposition(|c| c.number == self.number) {
            callers.remove(pos);
        }
    }
}

/// The request to `up` as a client span (a child of the current one) whose trace context goes
/// in `params._meta` (SEP-414 reserves `_meta` for such keys, so a server must accept them;
/// a server entry's `"telemetry": false` keeps them out), its outcome and duration recorded.
async fn traced_request(
    up: &Upstream,
    method: &str,
    params: &str,
    timeout: Option<std::time::Duration>,
) -> Result<Message, CallError> {
    use crate::telemetry::{Operation, Request, Side};
    use tracing::Instrument;
    let obj = RawObject::parse(params).ok();
    let (tool, uri) = super::session::target(method, obj.as_ref());
    let version = up
        .snapshot()
        .info
        .as_ref()
        .map(|i| i.protocol_version.clone());
    let Some(op) = Operation::new(
        Side::Client,
        &Request {
            method,
            tool: tool.as_deref(),
            uri: uri.as_deref(),
            protocol_version: version.as_deref(),
            ..Request::default()
        },
    ) else {
        return up.request_within(method, Some(params), timeout).await;
    };
    let params = match &obj {
        Some(obj) if up.config().telemetry => Cow::Owned(with_trace_context(obj, &op.span)),
        _ => Cow::Borrowed(params),
    };
    let reply = up
        .request_within(method, Some(&params), timeout)
        .instrument(op.span.clone())
        .await;
    match &reply {
        Ok(m) => {
            if let Some(error) = super::session::error_type(m) {
                op.failed(&error);
            }
        }
        Err(e) => op.failed(&e.code().to_string()),
    }
    op.end();
    reply
}

/// `params` with `span`'s trace context in its `_meta` (replacing the client's `traceparent`
/// and `tracestate`: the server's parent is the hub's span; other `_meta` members kept).
fn with_trace_context(params: &RawObject<'_>, span: &tracing::Span) -> String {
    let context = crate::telemetry::context_of(span);
    let quoted: Vec<(&str, String)> = crate::telemetry::META_KEYS
        .iter()
        .filter_map(|k| context.get(*k).map(|v| (*k, jsonrpc::quote(v))))
        .collect();
    let edits: Vec<(&str, Option<&str>)> =
        quoted.iter().map(|(k, v)| (*k, Some(v.as_str()))).collect();
    let meta = params
        .get("_meta")
        .and_then(|t| RawObject::parse(t).ok())
        .unwrap_or_default();
    params.with("_meta", &meta.rewrite(&edits))
}
