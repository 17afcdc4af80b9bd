//! One upstream server: its process or remote link, connection, handshake and lifecycle
//! (disabled → starting → ready → restarting / reconnecting / needs login / failed → stopped).
//!
//! A supervisor task per server owns the process. Crashes fail in-flight calls at once with
//! the exit status and last stderr lines, then the server is restarted with exponential
//! backoff and jitter; a server that keeps crashing is parked as failed. Remote servers are
//! supervised alike (see [`remote`]). Knows one server only.
//!
//! Each server is spoken to in the era its config asks for (`protocol`): `initialize`
//! (handshake), 2026-07-28 (see [`stateless`]: `server/discover`, the `_meta` envelope, change
//! notifications through `subscriptions/listen`), or `auto`, which probes once and
//! remembers the answer for the life of the process.

mod connection;
mod handshake;
mod lists;
mod ready;
mod remote;
mod sandboxed;
pub mod stateless;
mod supervise;

pub use connection::{CallError, Connection, Incoming, code};
pub use handshake::{Entry, HANDSHAKE_VERSIONS, HandshakeError, OFFERED_VERSION, ServerInfo};
pub use lists::ListKind;
pub use remote::RemoteStatus;

use crate::config::{HubSettings, RestartPolicy, ServerConfig};
use crate::jsonrpc::{Message, RawObject};
use crate::transport::StderrLog;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, watch};

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Disabled,
    Starting,
    Ready,
    /// Crashed after having been ready; waiting to start again.
    Restarting,
    /// A remote server that could not be reached or lost its connection; trying again with
    /// backoff (the reason is in `last_error`).
    Reconnecting,
    /// A remote server that wants a login before it answers; the text says how to log in.
    NeedsLogin(String),
    Failed(String),
    Stopped,
}

impl State {
    pub fn label(&self) -> &'static str {
        match self {
            State::Disabled => "disabled",
            State::Starting => "starting",
            State::Ready => "ready",
            State::Restarting => "restarting",
            State::Reconnecting => "reconnecting",
            State::NeedsLogin(_) => "needs login",
            State::Failed(_) => "failed",
            State::Stopped => "stopped",
        }
    }

    /// Still on its way to ready or failed for the first time.
    pub fn is_pending(&self) -> bool {
        matches!(self, State::Starting)
    }
}

/// Everything the hub and the CLI may read about a server at one moment.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub state: State,
    pub info: Option<ServerInfo>,
    pub tools: Arc<Vec<Entry>>,
    /// Tools the server lists that its `enabledTools` / `disabledTools` hide.
    pub hidden_tools: usize,
    pub prompts: Arc<Vec<Entry>>,
    pub resources: Arc<Vec<Entry>>,
    pub templates: Arc<Vec<Entry>>,
    /// Wall-clock time the current process was started.
    pub started_at: Option<SystemTime>,
    /// Spawn to handshake complete, for the current process.
    pub ready_in: Option<Duration>,
    pub restarts: u32,
    pub last_error: Option<String>,
    pub pid: Option<u32>,
    pub stderr: Option<Arc<StderrLog>>,
    /// Bumps every time a new process becomes ready (caches key on it).
    pub generation: u64,
    /// For a remote server: where it is and how it is reached.
    pub remote: Option<RemoteStatus>,
}

/// What an upstream tells the hub through its event channel (coalesced there).
#[derive(Debug)]
pub enum Event {
    /// The snapshot of server `index` changed (state or lists); the number orders all
    /// changes of all servers (see [`Upstream::new`]'s `seq`).
    Changed(usize, u64),
}

/// Where a server's own notifications and requests go. Called on the server's reader task, in
/// the order the server wrote them, so implementations must not block.
pub trait Sink: Send + Sync {
    fn notification(&self, server: usize, m: Message);
    /// `from` is the connection the request came on: its answer must go back there, never to
    /// a restarted successor that may reuse the same request id.
    fn request(&self, server: usize, m: Message, from: std::sync::Weak<Connection>);
    /// Removes secrets from text that leaves openpact (stderr lines, error reasons).
    fn scrub(&self, text: &str) -> String;
    /// Server `server`'s egress proxy refused a connection (counted in `/metrics`).
    fn egress_refused(&self, server: usize, refusal: &crate::sandbox::proxy::Refusal);
    /// Server `server` wants a host its allow list does not name
    /// ([`crate::sandbox::proxy::Gate::decide`]).
    fn egress_decide(
        &self,
        server: usize,
        host: &str,
        port: u16,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::sandbox::proxy::Decision> + Send>>;
    /// The config file the hub serves, which a command fixing a server's entry must edit.
    fn config_file(&self) -> Option<std::path::PathBuf>;
}

/// What ties an upstream to its hub.
#[derive(Clone)]
pub struct HubLinks {
    pub events: mpsc::UnboundedSender<Event>,
    pub sink: Arc<dyn Sink>,
    /// See [`Upstream::new`]'s `seq`.
    pub seq: Arc<AtomicU64>,
    pub client_caps: watch::Receiver<Option<String>>,
}

pub struct Upstream {
    pub index: usize,
    /// Never changes for this upstream (a reload that renames makes another one).
    name: Arc<str>,
    /// Swapped by a reload that changes only what applies in place (namespace, timeout,
    /// tool filters); anything else about how it starts makes a new upstream.
    config: RwLock<Arc<ServerConfig>>,
    /// Why it was stopped while the hub serves on (removed from the config, restarted for a
    /// change): what its in-flight calls fail with.
    retired: std::sync::Mutex<Option<String>>,
    max_message_size: usize,
    restart: RestartPolicy,
    conn: RwLock<Option<Arc<Connection>>>,
    snapshot: RwLock<Arc<Snapshot>>,
    events: mpsc::UnboundedSender<Event>,
    sink: Arc<dyn Sink>,
    /// Shared by all servers of a hub: bumped before every snapshot change, so whoever sees
    /// a new snapshot can tell whether the hub has caught up with it.
    seq: Arc<AtomicU64>,
    /// The client capabilities to declare in `initialize` (JSON text), once known.
    client_caps: watch::Receiver<Option<String>>,
    /// What a remote server needs across reconnects (credentials, the transport that worked).
    remote: remote::Remote,
    /// The era `auto` found (kept for the process: a server does not change it).
    era: std::sync::Mutex<Option<Era>>,
    /// Resource URIs the hub subscribed to on a stateless server: its listen stream's filter.
    listen_uris: watch::Sender<BTreeSet<String>>,
    /// What the process may touch, worked out from the config when the hub started.
    sandbox: crate::sandbox::Plan,
    /// What the sandbox refused it lately, as it reported (stderr, tool results).
    refusals: crate::sandbox::refusal::Record,
}

/// The protocol era a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Handshake,
    Stateless,
}

impl Upstream {
    pub fn new(
        index: usize,
        config: ServerConfig,
        sandbox: crate::sandbox::Plan,
        settings: &HubSettings,
        links: HubLinks,
    ) -> Arc<Self> {
        let HubLinks {
            events,
            sink,
            seq,
            client_caps,
        } = links;
        let state = if config.disabled {
            State::Disabled
        } else {
            State::Starting
        };
        let snapshot = Snapshot {
            state,
            info: None,
            tools: Arc::new(Vec::new()),
            hidden_tools: 0,
            prompts: Arc::new(Vec::new()),
            resources: Arc::new(Vec::new()),
            templates: Arc::new(Vec::new()),
            started_at: None,
            ready_in: None,
            restarts: 0,
            last_error: None,
            pid: None,
            stderr: None,
            generation: 0,
            remote: RemoteStatus::of(&config),
        };
        let remote = remote::Remote::new();
        Arc::new(Upstream {
            index,
            name: Arc::from(config.name.as_str()),
            config: RwLock::new(Arc::new(config)),
            retired: std::sync::Mutex::new(None),
            max_message_size: settings.max_message_size,
            restart: settings.restart,
            conn: RwLock::new(None),
            snapshot: RwLock::new(Arc::new(snapshot)),
            events,
            sink,
            seq,
            client_caps,
            remote,
            era: std::sync::Mutex::new(None),
            listen_uris: watch::Sender::new(BTreeSet::new()),
            sandbox,
            refusals: crate::sandbox::refusal::Record::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its current config entry.
    pub fn config(&self) -> Arc<ServerConfig> {
        match self.config.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Applies a config entry that differs from the current one only in what needs no
    /// restart; the tool list is fetched again when its filter changed.
    pub async fn retune(&self, config: ServerConfig) {
        let refilter = self.config().tool_filter != config.tool_filter;
        *self
            .config
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(config);
        if refilter {
            self.refresh(ListKind::Tools).await;
        }
    }

    /// Marks it as stopped for `reason` before its supervisor is told to stop, so its
    /// in-flight calls say why.
    pub fn retire(&self, reason: &str) {
        *self
            .retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason.to_string());
    }

    /// Whether a reload removed it from the config (it stays in the hub's table, stopped).
    pub fn is_removed(&self) -> bool {
        self.retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    pub(super) fn stop_reason(&self) -> String {
        self.retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "was stopped".to_string())
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        match self.snapshot.read() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub(super) fn update(&self, f: impl FnOnce(&mut Snapshot)) {
        let n = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        {
            let mut guard = self
                .snapshot
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut next = (**guard).clone();
            f(&mut next);
            // Reasons quote servers' own words, which may echo a secret.
            if let Some(e) = &next.last_error {
                next.last_error = Some(self.sink.scrub(e));
            }
            if let State::Failed(r) = &next.state {
                next.state = State::Failed(self.sink.scrub(r));
            }
            *guard = Arc::new(next);
        }
        let _ = self.events.send(Event::Changed(self.index, n));
    }

    pub(super) fn set_conn(&self, conn: Option<Arc<Connection>>) {
        *self
            .conn
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = conn;
    }

    pub fn connection(&self) -> Option<Arc<Connection>> {
        self.conn.read().ok().and_then(|c| c.clone())
    }

    /// Sends a request to the server with its configured timeout. To a stateless server, the
    /// handshake methods it no longer has are done the stateless way, here: `ping` is answered
    /// locally, `logging/setLevel` becomes the log level stamped on each request, and
    /// `resources/subscribe` / `unsubscribe` change the listen stream's filter.
    pub async fn request(&self, method: &str, params: Option<&str>) -> Result<Message, CallError> {
        self.request_within(method, params, None).await
    }

    /// [`Upstream::request`] waiting `timeout` instead of the configured one when given (a
    /// task's blocking `tasks/result` may take as long as the task lives).
    pub async fn request_within(
        &self,
        method: &str,
        params: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Message, CallError> {
        let timeout = timeout.unwrap_or_else(|| self.config().timeout);
        match self.connection() {
            Some(conn) if conn.is_stateless() => {
                match self.stateless_locally(&conn, method, params) {
                    Some(reply) => reply,
                    None => conn.request(method, params, timeout).await,
                }
            }
            Some(conn) => conn.request(method, params, timeout).await,
            None => Err(CallError::NotReady {
                server: self.name.to_string(),
                state: self.describe_state(),
            }),
        }
    }

    /// A handshake-only method towards a stateless server, done the hub's way; None for the
    /// methods that go to the server.
    fn stateless_locally(
        &self,
        conn: &Connection,
        method: &str,
        params: Option<&str>,
    ) -> Option<Result<Message, CallError>> {
        let obj = params
            .and_then(|p| RawObject::parse(p).ok())
            .unwrap_or_default();
        match method {
            "ping" => {}
            "logging/setLevel" => conn.set_log_level(obj.get_str("level").map(|l| l.into_owned())),
            "resources/subscribe" | "resources/unsubscribe" => {
                let uri = obj.get_str("uri")?.into_owned();
                let subscribe = method == "resources/subscribe";
                self.listen_uris.send_if_modified(|uris| {
                    if subscribe {
                        uris.insert(uri)
                    } else {
                        uris.remove(&uri)
                    }
                });
            }
            _ => return None,
        }
        Some(stateless::local_reply("{}"))
    }

    /// A one-line description of the state, with the reason when failed.
    pub fn describe_state(&self) -> String {
        let snap = self.snapshot();
        match &snap.state {
            State::Failed(reason) => format!("failed: {reason}"),
            State::NeedsLogin(how) => format!("waiting for a login; {how}"),
            State::Reconnecting => match &snap.last_error {
                Some(e) => format!("reconnecting (last error: {e})"),
                None => "reconnecting".to_string(),
            },
            other => other.label().to_string(),
        }
    }
}
