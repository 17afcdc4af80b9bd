//! One downstream client. Answers what the hub serves itself (`initialize`, `ping`, the
//! merged lists), routes the rest to the right server with only names rewritten, forwards
//! server→client requests to the client under ids of its own, and keeps what belongs to this
//! client: its capabilities, log level, resource subscriptions and requests in flight (so a
//! `notifications/cancelled` reaches the right upstream request).
//!
//! This file holds the session's state, reading the client's frames, running each request
//! on its own task, and sending. `lists` answers `initialize` and the merged lists;
//! `calls` runs calls, prompts and resource reads as a `Call` through named stages (look up,
//! admit, dispatch, settle) — `login` logs in through this client when a call's server waits
//! for it, `search` turns the search meta-tools into answers or the calls they stand for,
//! `input` sends a call upstream and answers what its server asks; `routed` passes
//! subscriptions, completions and log levels on; `client` carries requests to the client.
//!
//! Until the client has sent `notifications/initialized`, it gets only answers, pings,
//! progress and log messages: what the hub would send on its own (servers' requests,
//! resource updates, list changes) waits, as the handshake requires. A list change is
//! announced only for a list this client was given, and only once per version it has not
//! seen (clients re-list on every announcement, and some warn about every tool they see
//! twice). A batch from the client is answered with one array.

mod calls;
mod client;
mod follow;
mod input;
mod lists;
mod login;
mod program;
mod routed;
mod search;
mod tasks;
mod traced;

pub(crate) use tasks::declares_extension;
pub(crate) use traced::{error_type, target};

use super::{Hub, HubEvent, NameKind};
use crate::FastMap;
use crate::jsonrpc::{
    self, Frame, Kind, Message, Messages, ParseError, RawObject, code, parse_frame,
};
use crate::transport::Outbox;
use crate::upstream::{CallError, Connection};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
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
    pub(super) hub: Arc<Hub>,
    out: Outbox,
    /// Downstream request id (JSON text) → the task serving it, numbered so that a task
    /// finishing after its answer went out never removes a newer request's entry that
    /// reuses the id.
    in_flight: Mutex<FastMap<Arc<str>, (u64, AbortHandle)>>,
    /// Woken when a request of `in_flight` ends: the reader may take more ([`Session::room`]).
    settled: tokio::sync::Notify,
    /// Progress and log notifications dropped since the client last kept up (it was not
    /// reading its answers); 0 while it reads.
    dropped: AtomicU64,
    next_task: AtomicU64,
    /// What the hub sends on its own, held until the client has sent
    /// `notifications/initialized` (`None` from then on).
    held: Mutex<Option<Vec<String>>>,
    /// Per list the client can be told has changed: the version it was given and the last
    /// version announced since.
    lists: Mutex<[ListSeen; LISTS]>,
    /// Requests of the client's batches still unanswered, by id (JSON text), each with the
    /// batch its answer joins.
    batches: Mutex<FastMap<Arc<str>, Arc<Mutex<Batch>>>>,
    /// How many batches wait for answers: while none does, sending looks at nothing.
    open_batches: AtomicUsize,
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
    /// Serves one 2026-07-28 request (see [`crate::hub::stateless`]): gets no spontaneous
    /// notifications, and logs only when that request asked for them.
    stateless: bool,
    /// This client's permission prompts, one at a time.
    prompt_turn: tokio::sync::Mutex<()>,
    /// Which private and untrusted tools this session has called (the data-flow guard).
    pub(crate) flows: crate::policy::flows::Seen,
    /// Which of the hub's views this client sees (0: the default one; see
    /// [`crate::hub::views`]).
    view: usize,
    /// What this client's code-mode programs keep for each other (`keep`/`kept`).
    kept: Mutex<crate::code::kept::Kept>,
    /// This session's number, unique in the process: what its tasks belong to.
    number: u64,
    /// Dropped with the session: what ends its task passing on the hub's events (which
    /// would otherwise wait for the next event, however long, holding the session's memory).
    alive: Mutex<Option<oneshot::Sender<()>>>,
}

/// One client's requests in flight at once before the hub stops reading more from it (its
/// writes then wait in the pipe): with the answers it has not read, what bounds the memory a
/// client that sends without reading can make the hub hold.
pub const MAX_IN_FLIGHT: usize = 64;

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long a 2026-07-28 call of a client that reads tasks may take before it is answered
/// with a task instead of its result.
const TASK_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether a 2025-11-25 `tools/call` asks to run as a task (`params.task`).
fn asks_task(m: &Message) -> bool {
    static TASK: std::sync::LazyLock<jsonrpc::MemberProbe> =
        std::sync::LazyLock::new(|| jsonrpc::MemberProbe::new("task"));
    m.params().is_some_and(|p| {
        TASK.may_have(p)
            && RawObject::parse(p)
                .ok()
                .and_then(|o| o.get("task").map(|t| t.starts_with('{')))
                .unwrap_or(false)
    })
}

/// The answer to an element of a frame that is not a valid message.
fn invalid(e: &ParseError) -> String {
    jsonrpc::error(
        "null",
        code::INVALID_REQUEST,
        &format!("Invalid request: {e}"),
        None,
    )
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

/// The lists a client re-lists on `list_changed`, as indexes into [`Session::lists`]: tools,
/// prompts, resources and resource templates (the last two share one notification).
const LISTS: usize = 4;

fn list_index(method: &str) -> usize {
    match method {
        "tools/list" => 0,
        "prompts/list" => 1,
        "resources/list" => 2,
        _ => 3,
    }
}

/// One list as this client knows it: catalogue fingerprints.
#[derive(Debug, Default, Clone, Copy)]
struct ListSeen {
    given: Option<u64>,
    announced: Option<u64>,
}

/// A batch's answers so far, sent as one array once none is missing.
struct Batch {
    missing: usize,
    answers: Vec<String>,
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
    /// A session of view `view` (0: the default one; see [`Hub::view_named`]).
    pub fn new(hub: Arc<Hub>, out: Outbox, view: usize) -> Arc<Session> {
        let session = Self::build(hub, out, None, "unknown", None, false, view);
        let (alive, gone) = oneshot::channel();
        *lock(&session.alive) = Some(alive);
        tokio::spawn(forward_hub_events(
            Arc::downgrade(&session),
            session.hub.subscribe(),
            gone,
        ));
        session
    }

    /// A session for one 2026-07-28 request: what a handshake client declares once in
    /// `initialize` (capabilities, name, log level) comes from that request's `_meta`.
    pub(crate) fn ephemeral(
        hub: Arc<Hub>,
        out: Outbox,
        capabilities: &str,
        client_name: &str,
        log_rank: Option<usize>,
        view: usize,
    ) -> Arc<Session> {
        Self::build(
            hub,
            out,
            Some(capabilities),
            client_name,
            log_rank,
            true,
            view,
        )
    }

    fn build(
        hub: Arc<Hub>,
        out: Outbox,
        capabilities: Option<&str>,
        client_name: &str,
        log_rank: Option<usize>,
        stateless: bool,
        view: usize,
    ) -> Arc<Session> {
        let session = Arc::new(Session {
            hub,
            out,
            in_flight: Mutex::new(FastMap::default()),
            settled: tokio::sync::Notify::new(),
            dropped: AtomicU64::new(0),
            next_task: AtomicU64::new(0),
            // A 2026-07-28 request has no handshake to wait for.
            held: Mutex::new((!stateless).then(Vec::new)),
            lists: Mutex::new([ListSeen::default(); LISTS]),
            batches: Mutex::new(FastMap::default()),
            open_batches: AtomicUsize::new(0),
            capabilities: Mutex::new(capabilities.map(str::to_string)),
            log_rank: Mutex::new(log_rank),
            subscriptions: Mutex::new(HashSet::new()),
            forwarded: Mutex::new(FastMap::default()),
            next_forward_id: AtomicU64::new(1),
            own: Mutex::new(FastMap::default()),
            client_name: Mutex::new(Arc::from(client_name)),
            stateless,
            prompt_turn: tokio::sync::Mutex::new(()),
            flows: Default::default(),
            view,
            kept: Mutex::new(Default::default()),
            number: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            alive: Mutex::new(None),
        });
        session.hub.register(&session);
        session
    }

    pub(crate) fn is_stateless(&self) -> bool {
        self.stateless
    }

    /// The catalogue as this client sees it.
    pub(crate) fn catalog(&self) -> Arc<crate::hub::Catalog> {
        self.hub.view_catalog(self.view)
    }

    pub(crate) fn view(&self) -> usize {
        self.view
    }

    /// Everything sent to the client passes here, so secrets are removed in one place.
    pub(crate) fn send(&self, line: String) {
        let policy = self.hub.policy();
        let line = if policy.has_secrets() {
            policy.redact(&line).into_owned()
        } else {
            line
        };
        if self.open_batches.load(Ordering::Acquire) > 0 {
            if let Some(line) = self.join_batch(line) {
                self.out.send(line);
            }
            return;
        }
        self.out.send(line);
    }

    /// What the hub sends the client on its own (a server's request or notification, a
    /// question of its own): held until the client has sent `notifications/initialized`.
    pub(crate) fn send_unprompted(&self, line: String) {
        // Sent under the lock, so nothing overtakes what is being released.
        let mut held = lock(&self.held);
        match held.as_mut() {
            Some(waiting) => waiting.push(line),
            None => self.send(line),
        }
    }

    /// The client finished its handshake: what was held goes out, in order.
    fn initialized(&self) {
        let mut held = lock(&self.held);
        for line in held.take().unwrap_or_default() {
            self.send(line);
        }
    }

    fn is_initialized(&self) -> bool {
        lock(&self.held).is_none()
    }

    /// Notes that the client was given version `fingerprint` of the list `method` returns.
    fn given(&self, method: &str, fingerprint: u64) {
        lock(&self.lists)[list_index(method)] = ListSeen {
            given: Some(fingerprint),
            announced: None,
        };
    }

    /// Whether `event` is news to this client: a list it was given has changed since, to a
    /// version not announced yet. Marks it announced.
    fn news(&self, event: HubEvent) -> bool {
        let catalog = self.catalog();
        let now: &[(usize, u64)] = match event {
            HubEvent::ToolsChanged => &[(0, catalog.listed_tools().fingerprint)],
            HubEvent::PromptsChanged => &[(1, catalog.prompts.fingerprint)],
            HubEvent::ResourcesChanged => &[
                (2, catalog.resources_fingerprint),
                (3, catalog.templates_fingerprint),
            ],
        };
        let mut lists = lock(&self.lists);
        let mut news = false;
        for &(i, fingerprint) in now {
            let seen = &mut lists[i];
            if seen.given.is_some_and(|g| g != fingerprint) && seen.announced != Some(fingerprint) {
                seen.announced = Some(fingerprint);
                news = true;
            }
        }
        news
    }

    /// Files `line` (already redacted) with its batch if it answers a batched request;
    /// otherwise hands the line back.
    fn join_batch(&self, line: String) -> Option<String> {
        let id = match Message::parse(line.as_str().into()) {
            Ok(m) if m.kind() == Kind::Response => m.id().to_string(),
            _ => return Some(line),
        };
        self.settle_batched(&id, Some(line))
    }

    /// Counts the batched request `id` (JSON text) as settled, with its answer (none when
    /// the client cancelled it: a cancelled request is not answered), and sends the batch's
    /// array once nothing is missing. Hands `answer` back when `id` is in no batch.
    fn settle_batched(&self, id: &str, answer: Option<String>) -> Option<String> {
        let Some(batch) = lock(&self.batches).remove(id) else {
            return answer;
        };
        let complete = {
            let mut b = lock(&batch);
            b.answers.extend(answer);
            b.missing -= 1;
            (b.missing == 0).then(|| std::mem::take(&mut b.answers))
        };
        if let Some(answers) = complete {
            self.open_batches.fetch_sub(1, Ordering::AcqRel);
            if !answers.is_empty() {
                self.out.send(format!("[{}]", answers.join(",")));
            }
        }
        None
    }

    /// Runs a batch from the client, whose answers go out as one array (nothing at all when
    /// it holds only notifications and responses). Each request still runs on its own.
    fn batch(self: &Arc<Self>, items: Vec<Result<Message, ParseError>>) {
        let mut answers = Vec::new();
        let mut ids: Vec<Arc<str>> = Vec::new();
        let mut run = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Ok(m) if m.kind() == Kind::Request => {
                    let id: Arc<str> = m.id().into();
                    if ids.contains(&id) {
                        // Two answers with one id could not be told apart.
                        answers.push(jsonrpc::error(
                            &id,
                            code::INVALID_REQUEST,
                            "Invalid request: the id is used twice in this batch",
                            None,
                        ));
                    } else {
                        ids.push(id);
                        run.push(m);
                    }
                }
                Ok(m) => run.push(m),
                Err(e) => answers.push(invalid(&e)),
            }
        }
        if ids.is_empty() {
            if !answers.is_empty() {
                self.out.send(format!("[{}]", answers.join(",")));
            }
        } else {
            let batch = Arc::new(Mutex::new(Batch {
                missing: ids.len(),
                answers,
            }));
            {
                let mut batches = lock(&self.batches);
                for id in ids {
                    batches.insert(id, batch.clone());
                }
            }
            self.open_batches.fetch_add(1, Ordering::AcqRel);
        }
        for m in run {
            self.handle(m);
        }
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
        let wanted = match self.log_rank() {
            Some(min) => rank >= min,
            // 2026-07-28 clients opt in per request; handshake ones get everything by default.
            None => !self.stateless,
        };
        if wanted {
            self.send_droppable(line.to_string());
        }
    }

    /// Sends a notification the client can do without (progress, a log message), unless
    /// answers are piling up for a client that does not read them: then it is dropped, and
    /// counted, and the log says so when the client catches up again.
    pub(crate) fn send_droppable(&self, line: String) {
        if self.out.backlog() >= self.backlog_limit() {
            if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    client = %lock(&self.client_name),
                    "the client is not reading its messages: dropping progress and log notifications for it until it catches up"
                );
            }
            return;
        }
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(client = %lock(&self.client_name), dropped, "the client caught up; progress and log notifications flow again");
        }
        self.send(line);
    }

    /// Bytes of answers waiting for this client above which the hub stops reading from it
    /// and drops what may be dropped: one largest message.
    fn backlog_limit(&self) -> usize {
        self.hub.settings.max_message_size
    }

    /// Waits until the hub may read more from this client: fewer bytes waiting for it than
    /// [`Session::backlog_limit`], and fewer than [`MAX_IN_FLIGHT`] of its requests in flight —
    /// unless it owes the hub answers (a permission prompt, a server's question), which must
    /// be read for those requests to end.
    pub async fn room(&self) {
        loop {
            let settled = self.settled.notified();
            let wrote = self.out.wrote();
            tokio::pin!(settled, wrote);
            settled.as_mut().enable();
            if let Some(w) = wrote.as_mut().as_pin_mut() {
                w.enable();
            }
            let owes = !lock(&self.own).is_empty() || !lock(&self.forwarded).is_empty();
            if self.out.backlog() < self.backlog_limit()
                && (owes || lock(&self.in_flight).len() < MAX_IN_FLIGHT)
            {
                return;
            }
            let written = async {
                match wrote.as_mut().as_pin_mut() {
                    Some(w) => w.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = &mut settled => {}
                () = written => {}
            }
        }
    }

    pub(crate) fn deliver_update(&self, uri: &str, line: &str) {
        if lock(&self.subscriptions).contains(uri) {
            self.send_unprompted(line.to_string());
        }
    }

    /// Handles one frame read from the client.
    pub fn handle_frame(self: &Arc<Self>, frame: Frame) {
        self.handle_frame_seen(frame, |_| {});
    }

    /// [`Session::handle_frame`], showing `seen` each message before it is handled.
    pub fn handle_frame_seen(self: &Arc<Self>, frame: Frame, mut seen: impl FnMut(&Message)) {
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
            Ok(Messages::Batch(items)) => {
                let items: Vec<_> = items.collect();
                items.iter().flatten().for_each(&mut seen);
                self.batch(items)
            }
            Ok(messages) => {
                for m in messages {
                    match m {
                        Ok(m) => {
                            seen(&m);
                            self.handle(m)
                        }
                        Err(e) => self.send(invalid(&e)),
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

    /// Tells this new session what its client told an earlier hub — its `initialize`,
    /// `notifications/initialized`, log level and subscriptions, which `openpact connect`
    /// kept when that hub went away — without answering: the client had its answers then.
    pub async fn replay(self: &Arc<Self>, messages: Vec<Message>) {
        for m in messages {
            match m.method() {
                "initialize" => {
                    self.accept_client(&m);
                    let _ = self.initialize(&m).await;
                }
                "notifications/initialized" => self.initialized(),
                "logging/setLevel" => {
                    let _ = self.set_level(&m).await;
                }
                "resources/subscribe" => {
                    let _ = self.subscription(&m).await;
                }
                other => tracing::debug!(method = other, "nothing to replay"),
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
        if !self.stateless && super::stateless::wants_stateless(&m) {
            return self.spawn(m, |s, m| async move { s.serve_stateless(m).await });
        }
        match m.method() {
            "initialize" => {
                self.accept_client(&m);
                self.spawn(m, |s, m| async move { s.initialize(&m).await })
            }
            "ping" => self.send(jsonrpc::result(m.id(), "{}")),
            "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
                self.spawn(m, |s, m| async move { s.list(&m).await })
            }
            "tools/call" if !self.stateless && asks_task(&m) => {
                self.spawn(m, |s, m| async move { s.legacy_task_call(&m).await })
            }
            "tools/call" if self.stateless && self.client_has_tasks() => self
                .spawn(m, |s, m| async move {
                    s.extension_task_call(&m, TASK_AFTER).await
                }),
            "tools/call" => {
                self.spawn(m, |s, m| async move { s.by_name(&m, NameKind::Tool).await })
            }
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" | "tasks/update" => {
                self.spawn(m, |s, m| async move { s.task_request(&m).await })
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
            "notifications/initialized" => self.initialized(),
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
                    self.settled.notify_waiters();
                    tracing::debug!(id, "request cancelled by the client");
                    if self.open_batches.load(Ordering::Acquire) > 0 {
                        self.settle_batched(id, None);
                    }
                }
            }
            "notifications/roots/list_changed" => {
                for up in self.hub.upstreams().iter() {
                    if let Some(conn) = up.connection() {
                        conn.notify("notifications/roots/list_changed", None);
                    }
                }
            }
            other => tracing::debug!(method = other, "ignored notification"),
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
        let op = traced::operation(self, &m);
        let mut fut = traced::Traced::new(op, Box::pin(f(self.clone(), m)));
        // Requests that never leave the hub (a cache hit, a refusal, a list) finish at their
        // first poll: answering them here spares a task and an in-flight entry. Anything that
        // must wait is then moved to its own task, whose polls register the real waker.
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(reply) = std::pin::Pin::new(&mut fut).poll(&mut cx) {
            if let Reply::Line(line) = reply {
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
            if let Reply::Line(line) = fut.await {
                me.send(line);
            }
            // After the answer is queued: a reader waiting for room sees both at once.
            {
                let mut in_flight = lock(&me.in_flight);
                if in_flight.get(&key).is_some_and(|(n, _)| *n == number) {
                    in_flight.remove(&key);
                }
            }
            me.settled.notify_waiters();
        });
        in_flight.insert(id, (number, task.abort_handle()));
    }

    /// Cancels everything in flight, answering each with an error, and tells servers whose
    /// requests to this client are still open that it is gone (used at shutdown: a client
    /// still reading deserves an answer rather than silence).
    pub fn abort_all(&self, reason: &str) {
        if !self.stateless {
            // Nobody can read this client's tasks any more.
            self.hub.tasks.forget(self.task_owner());
        }
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

    /// A 2026-07-28 request on this session's pipe: served on its own (see
    /// [`super::stateless`]), its notifications and answer sent here.
    async fn serve_stateless(self: Arc<Self>, m: Message) -> Reply {
        let origin = format!("stdio:{:p}", Arc::as_ptr(&self));
        let mut call = super::stateless::start(self.hub.clone(), m, origin, self.view);
        while let Some(out) = call.next().await {
            match out {
                super::stateless::Out::Notify(line) => self.send(line),
                super::stateless::Out::Done { line, .. } => return Reply::Line(line),
            }
        }
        Reply::Sent
    }

    pub fn in_flight(&self) -> usize {
        lock(&self.in_flight).len()
    }

    /// The client is gone or the hub is stopping: requests in flight may still finish for
    /// `grace` (a pipe's end asks for its answers: `printf '…' | openpact serve`), then the
    /// rest are answered with `reason` ([`Session::abort_all`]).
    pub async fn finish(&self, grace: std::time::Duration, reason: &str) {
        let deadline = tokio::time::Instant::now() + grace;
        while self.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        self.abort_all(reason);
    }
}

async fn forward_hub_events(
    session: std::sync::Weak<Session>,
    mut rx: tokio::sync::broadcast::Receiver<HubEvent>,
    mut gone: oneshot::Receiver<()>,
) {
    loop {
        let next = tokio::select! {
            next = rx.recv() => next,
            _ = &mut gone => return,
        };
        let events: &[HubEvent] = match next {
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
        if s.is_initialized() {
            for ev in events {
                if s.news(*ev) {
                    s.send_unprompted(jsonrpc::notification(ev.notification(), None));
                }
            }
        }
    }
}
