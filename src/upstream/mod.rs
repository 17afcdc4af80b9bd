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
mod remote;
pub mod stateless;

pub use connection::{CallError, Connection, Incoming, code};
pub use handshake::{Entry, HANDSHAKE_VERSIONS, HandshakeError, OFFERED_VERSION, ServerInfo};
pub use remote::RemoteStatus;

use crate::config::human_duration;
use crate::config::{HubSettings, Protocol, RestartPolicy, ServerConfig, Transport};
use crate::jsonrpc::{Message, RawObject};
use crate::transport::{ChildProc, ChildSpec, StderrLog, read_frames, spawn_writer};
use std::collections::BTreeSet;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Mutex as AsyncMutex, mpsc, oneshot, watch};

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

/// The hosts a server's egress proxy refused (host, port), the first few.
type RefusedHosts = Arc<std::sync::Mutex<Vec<(String, u16)>>>;
const REFUSED_KEPT: usize = 8;

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

/// A server's egress proxy answered to the hub through its sink.
struct SinkGate {
    sink: Arc<dyn Sink>,
    index: usize,
    /// The hosts refused so far, which a failed start names.
    seen: RefusedHosts,
}

impl crate::sandbox::proxy::Gate for SinkGate {
    fn decide(
        &self,
        host: &str,
        port: u16,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = crate::sandbox::proxy::Decision> + Send>>
    {
        self.sink.egress_decide(self.index, host, port)
    }

    fn refused(&self, refusal: &crate::sandbox::proxy::Refusal) {
        self.sink.egress_refused(self.index, refusal);
        if let Ok(mut seen) = self.seen.lock()
            && seen.len() < REFUSED_KEPT
            && !seen
                .iter()
                .any(|(h, p)| *h == refusal.host && *p == refusal.port)
        {
            seen.push((refusal.host.clone(), refusal.port));
        }
    }
}

/// Each step of stopping a server that failed its start (after stdin close, after SIGTERM)
/// waits at most this long.
pub const STOP_GRACE: Duration = Duration::from_millis(400);

/// When openpact itself stops, how long a server has to exit after its stdin closes before
/// SIGTERM, and after SIGTERM before SIGKILL. Short: hosts give the whole process little
/// time (Claude Code sends SIGINT, then SIGTERM 100 ms later, and a host may follow with
/// SIGKILL, which would leave servers running in their own process groups). Servers that
/// exit on EOF do so within a few milliseconds; the ones that linger (Python's
/// `mcp-server-time` does) end on SIGTERM.
const SHUTDOWN_EOF_GRACE: Duration = Duration::from_millis(50);
const SHUTDOWN_TERM_GRACE: Duration = Duration::from_millis(250);

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

/// How the next connection starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Initialize,
    Discover,
    Probe,
}

/// A stateless listen stream that ends is opened again after this (doubling, up to
/// [`RELISTEN_MAX`], while it keeps ending at once).
const RELISTEN: Duration = Duration::from_millis(500);
const RELISTEN_MAX: Duration = Duration::from_secs(30);
/// A listen request is meant to stay open; it is renewed after this long all the same, so a
/// stream that silently died is noticed.
const LISTEN_RENEW: Duration = Duration::from_secs(3600);

/// How long a server's `initialize` waits for the downstream client to say what it supports
/// (the process is already starting meanwhile). Editors send `initialize` right away and CLI
/// commands declare nothing at once, so the wait only ever runs out for a client that is
/// slow to start (a Node client on a loaded machine took over a second): then the servers
/// are told `{}` and list only the tools that need no client capability.
const CLIENT_CAPS_WAIT: Duration = Duration::from_secs(3);

/// A process that finished its handshake.
struct Running {
    conn: Arc<Connection>,
    proc: Arc<AsyncMutex<Option<ChildProc>>>,
    /// Fires with the reason when the process's stdout ends.
    exited: oneshot::Receiver<String>,
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

    /// The sandbox's recent refusals of this server.
    pub fn refusals(&self) -> &crate::sandbox::refusal::Record {
        &self.refusals
    }

    /// Files each refusal `text` (a redacted stderr line, a tool result's text) reports, when
    /// the kernel confines this server: elsewhere a denied path is the file's own mode, which
    /// no grant changes. Whether any was.
    pub fn note_refusals(&self, text: &str) -> bool {
        let (crate::sandbox::Mode::Enforced, Some(profile)) =
            (&self.sandbox.mode, &self.sandbox.profile)
        else {
            return false;
        };
        let home = home_dir();
        let config = self.config_named();
        let judge = crate::sandbox::refusal::Judge {
            server: &self.name,
            home: home.as_deref(),
            profile,
            config: config.as_deref(),
        };
        let mut noted = false;
        for line in text.lines() {
            if let Some(r) = crate::sandbox::refusal::detect(line).and_then(|s| judge.refusal(&s)) {
                tracing::warn!(server = %self.name, "{}", r.sentence());
                self.refusals.note(r);
                noted = true;
            }
        }
        if noted {
            // Published like any change, so `servers` and the status file show it.
            self.update(|_| {});
        }
        noted
    }

    /// The config file a refusal's command names, as the user would type it: `None` for the
    /// user's own, which a plain `openpact` finds from anywhere; any other file must be named,
    /// or the command would edit another config than this hub's.
    fn config_named(&self) -> Option<String> {
        let lookup = |k: &str| std::env::var(k).ok();
        let file = self
            .sink
            .config_file()
            .filter(|f| crate::config::user_config_file(&lookup).as_ref() != Some(f))?;
        Some(crate::sandbox::refusal::tilde(&file, home_dir().as_deref()))
    }

    /// How this server is contained.
    pub fn sandbox(&self) -> &crate::sandbox::Plan {
        &self.sandbox
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

    fn stop_reason(&self) -> String {
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

    fn update(&self, f: impl FnOnce(&mut Snapshot)) {
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

    fn set_conn(&self, conn: Option<Arc<Connection>>) {
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
        match self.connection() {
            Some(conn) if conn.is_stateless() => {
                match self.stateless_locally(&conn, method, params) {
                    Some(reply) => reply,
                    None => conn.request(method, params, self.config().timeout).await,
                }
            }
            Some(conn) => conn.request(method, params, self.config().timeout).await,
            None => Err(CallError::NotReady {
                server: self.name.to_string(),
                state: self.describe_state(),
            }),
        }
    }

    /// The era the server was found to speak (for a server that is, or was, connected).
    pub fn era(&self) -> Option<Era> {
        match self.config().protocol {
            Protocol::Handshake => Some(Era::Handshake),
            Protocol::Stateless => Some(Era::Stateless),
            Protocol::Auto => *self
                .era
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }

    fn plan(&self) -> Plan {
        let sse = matches!(&self.config().transport, Transport::Http { kind, .. } if kind == "sse");
        match (self.config().protocol, self.era()) {
            (Protocol::Handshake, _) => Plan::Initialize,
            (Protocol::Stateless, _) => Plan::Discover,
            // 2026-07-28 has no HTTP+SSE transport: nothing to probe.
            _ if sse => Plan::Initialize,
            (Protocol::Auto, Some(Era::Handshake)) => Plan::Initialize,
            (Protocol::Auto, Some(Era::Stateless)) => Plan::Discover,
            (Protocol::Auto, None) => Plan::Probe,
        }
    }

    fn learn_era(&self, era: Era) {
        *self
            .era
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(era);
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

    /// Runs the server until `shutdown` turns true: start, supervise, restart, stop.
    pub async fn supervise(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let config = self.config();
        if !config.disabled && !config.unavailable.is_empty() {
            let reason = config
                .unavailable
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            tracing::error!(server = %self.name(), "not started: {reason}");
            self.update(|s| {
                s.state = State::Failed(reason.clone());
                s.last_error = Some(reason);
            });
            return;
        }
        let (spec, _proxy, refused) = match &config.transport {
            _ if config.disabled => return,
            Transport::Stdio {
                program,
                args,
                env,
                cwd,
                ..
            } => match self.launch(program, args).await {
                Ok((launch, proxy, refused)) => {
                    let spec = ChildSpec {
                        label: self.name.to_string(),
                        inherit_env: launch.env.is_none(),
                        env: launch.env.unwrap_or_else(|| env.clone()),
                        program: launch.program,
                        args: launch.args,
                        cwd: cwd.clone(),
                        scrub: {
                            let sink = self.sink.clone();
                            Some(Arc::new(move |line: &str| sink.scrub(line)))
                        },
                        observe: {
                            let me = Arc::downgrade(&self);
                            Some(Arc::new(move |line: &str| {
                                if let Some(me) = me.upgrade() {
                                    me.note_refusals(line);
                                }
                            }))
                        },
                    };
                    (spec, proxy, refused)
                }
                Err(reason) => {
                    tracing::error!(server = %self.name(), "not started: {reason}");
                    self.update(|s| {
                        s.state = State::Failed(reason.clone());
                        s.last_error = Some(reason);
                    });
                    return;
                }
            },
            Transport::Http { .. } => return self.supervise_remote(shutdown).await,
        };
        let mut crashes: VecDeque<Instant> = VecDeque::new();
        let mut ever_ready = false;
        loop {
            if *shutdown.borrow() {
                break;
            }
            let attempt = tokio::select! {
                r = self.start_once(&spec) => r,
                _ = shutdown.changed() => break,
            };
            let reason = match attempt {
                Err(reason) if !ever_ready => {
                    let reason = self.with_sandbox_hint(reason, &refused);
                    tracing::error!(server = %self.name(), "failed to start: {reason}");
                    self.update(|s| {
                        s.state = State::Failed(reason.clone());
                        s.last_error = Some(reason);
                    });
                    // Nothing to restart: a server that never came up needs the user to act.
                    let _ = shutdown.changed().await;
                    break;
                }
                Err(reason) => reason,
                Ok(mut running) => {
                    ever_ready = true;
                    tokio::select! {
                        reason = &mut running.exited => {
                            let reason = reason.unwrap_or_else(|_| "stopped answering".into());
                            self.set_conn(None);
                            reason
                        }
                        _ = shutdown.changed() => {
                            self.stop(running).await;
                            return;
                        }
                    }
                }
            };
            // A crash: decide whether to come back.
            let now = Instant::now();
            crashes.push_back(now);
            while crashes
                .front()
                .is_some_and(|t| now.duration_since(*t) > self.restart.window)
            {
                crashes.pop_front();
            }
            if crashes.len() >= self.restart.max_crashes as usize {
                let parked = format!(
                    "crashed {} times within {}; not restarting (last: {reason}). Fix the server and restart openpact",
                    crashes.len(),
                    human_duration(self.restart.window)
                );
                tracing::error!(server = %self.name(), "{parked}");
                self.update(|s| {
                    s.state = State::Failed(parked.clone());
                    s.last_error = Some(reason);
                    s.pid = None;
                });
                let _ = shutdown.changed().await;
                break;
            }
            let delay = backoff(&self.restart, crashes.len() as u32);
            tracing::warn!(server = %self.name(), "crashed: {reason}; restarting in {}", human_duration(delay));
            self.update(|s| {
                s.state = State::Restarting;
                s.last_error = Some(reason);
                s.restarts += 1;
                s.pid = None;
            });
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.changed() => break,
            }
        }
        self.set_conn(None);
        self.update(|s| {
            if !matches!(s.state, State::Failed(_)) {
                s.state = State::Stopped;
            }
            s.pid = None;
        });
    }

    /// The process's command line and environment under its sandbox, the egress proxy its
    /// network goes through (kept for as long as the server is supervised), and the hosts
    /// that proxy refused.
    async fn launch(
        &self,
        program: &std::path::Path,
        args: &[String],
    ) -> Result<
        (
            crate::sandbox::Launch,
            Option<crate::sandbox::proxy::EgressProxy>,
            RefusedHosts,
        ),
        String,
    > {
        let refused = RefusedHosts::default();
        let proxy = match self.sandbox.proxied() {
            None => None,
            Some(allow) => {
                let gate = Arc::new(SinkGate {
                    sink: self.sink.clone(),
                    index: self.index,
                    seen: refused.clone(),
                });
                let proxy = crate::sandbox::proxy::EgressProxy::start(
                    self.name.to_string(),
                    self.config_named(),
                    allow.to_vec(),
                    gate,
                )
                .await
                .map_err(|e| format!("sandbox: could not start the egress proxy: {e}"))?;
                Some(proxy)
            }
        };
        let launch = self
            .sandbox
            .launch(program, args, proxy.as_ref())
            .map_err(|e| e.to_string())?;
        if !launch.withheld.is_empty() {
            tracing::debug!(server = %self.name(), withheld = %launch.withheld.join(", "), "variables of the hub's environment not passed to the server (sandbox)");
        }
        for warning in self.sandbox.profile.iter().flat_map(|p| &p.warnings) {
            tracing::warn!(server = %self.name(), "sandbox: {warning}");
        }
        Ok((launch, proxy, refused))
    }

    /// A start that failed inside the sandbox says so, and how to widen it: by the host the
    /// egress proxy refused meanwhile when there is one.
    fn with_sandbox_hint(&self, reason: String, refused: &RefusedHosts) -> String {
        if self.sandbox.profile.is_none() {
            return reason;
        }
        // What the server itself said was refused (a path, a socket), and the hosts its
        // proxy refused while it started (an install script's download).
        let refused = refused.lock().map(|r| r.clone()).unwrap_or_default();
        let hints: Vec<String> = self
            .refusals
            .recent()
            .last()
            .map(crate::sandbox::refusal::Refusal::sentence)
            .into_iter()
            .chain(crate::sandbox::runtimes::refused_during_start(
                self.name(),
                self.config_named().as_deref(),
                &refused,
            ))
            .chain(self.sandbox.profile.as_ref().and_then(|p| {
                crate::sandbox::runtimes::failed_install_script(&p.caches.join("npm"), self.name())
            }))
            .collect();
        if !hints.is_empty() {
            return format!("{reason} ({})", hints.join("; "));
        }
        format!(
            "{reason} (it ran in openpact's sandbox: if it needs more files, hosts or variables, widen its profile with \"sandbox\": {{\"filesystem\": {{\"read\"/\"write\": […]}}, \"network\": …, \"env\": […]}}, or set \"sandbox\": false; `openpact servers` shows what each server may touch)"
        )
    }

    async fn stop(&self, running: Running) {
        self.set_conn(None);
        running.conn.close_input();
        let proc = running.proc.lock().await.take();
        if let Some(proc) = proc {
            proc.terminate(SHUTDOWN_EOF_GRACE, SHUTDOWN_TERM_GRACE)
                .await;
        }
        running.conn.fail_all(&self.stop_reason());
        self.update(|s| {
            s.state = State::Stopped;
            s.pid = None;
        });
    }

    /// Spawns the process and runs the handshake. On failure the process is stopped and the
    /// reason (with the server's last stderr lines) returned.
    async fn start_once(self: &Arc<Self>, spec: &ChildSpec) -> Result<Running, String> {
        match self.spawn_and_handshake(spec).await {
            Err(StartError::ProbeDied(reason)) => {
                // `auto` asked with `server/discover` and the server ended: a handshake server
                // that takes any unknown first message badly. Start it afresh and initialize.
                tracing::info!(server = %self.name(), "ended on the server/discover probe ({reason}); starting it again with initialize");
                self.spawn_and_handshake(spec)
                    .await
                    .map_err(StartError::into_reason)
            }
            other => other.map_err(StartError::into_reason),
        }
    }

    async fn spawn_and_handshake(
        self: &Arc<Self>,
        spec: &ChildSpec,
    ) -> Result<Running, StartError> {
        let t0 = Instant::now();
        let spawned = spec
            .spawn()
            .await
            .map_err(|e| StartError::Failed(e.to_string()))?;
        let stderr = spawned.stderr.clone();
        let pid = spawned.proc.pid();
        self.update(|s| {
            s.state = if s.restarts > 0 {
                State::Restarting
            } else {
                State::Starting
            };
            s.started_at = Some(SystemTime::now());
            s.pid = pid;
            s.stderr = Some(stderr.clone());
        });
        let (out, _) = spawn_writer(spawned.stdin, self.name.to_string());
        let conn = Connection::new(self.name.to_string(), out, stderr.clone());
        let proc = Arc::new(AsyncMutex::new(Some(spawned.proc)));
        let (exit_tx, exited) = oneshot::channel();
        let me = Arc::downgrade(self);
        let this_conn = Arc::downgrade(&conn);
        let incoming = move |item: Incoming| {
            if let Some(me) = me.upgrade() {
                me.on_incoming(item, &this_conn);
            }
        };
        tokio::spawn(read_until_exit(
            conn.clone(),
            spawned.stdout,
            self.max_message_size,
            incoming,
            proc.clone(),
            exit_tx,
        ));

        match self.handshake(&conn, t0, |_| {}).await {
            Ok(()) => Ok(Running { conn, proc, exited }),
            Err(e) => {
                let mut reason = e.to_string();
                // Unwrap our own "server 'x'" prefix: the caller names the server already.
                if let HandshakeError::Call(CallError::Closed { reason: r, .. }) = &e {
                    reason = r.clone();
                } else {
                    reason.push_str(&stderr.summary(5));
                }
                conn.close_input();
                let proc = proc.lock().await.take();
                if let Some(proc) = proc {
                    proc.terminate(STOP_GRACE, STOP_GRACE).await;
                }
                Err(match e {
                    HandshakeError::ProbeDied(why) => StartError::ProbeDied(why),
                    _ => StartError::Failed(reason),
                })
            }
        }
    }

    /// Runs the handshake on a new connection and publishes the server as ready: `initialize`,
    /// then `initialized` (called with the negotiated version), then every list.
    async fn handshake(
        self: &Arc<Self>,
        conn: &Arc<Connection>,
        t0: Instant,
        initialized: impl FnOnce(&str),
    ) -> Result<(), HandshakeError> {
        let probing = self.plan() == Plan::Probe;
        let info = match self.discover(conn).await? {
            Some(info) => info,
            None => {
                let caps = self.client_capabilities().await;
                match handshake::initialize(conn, &caps, self.config().timeout).await {
                    Ok(info) => info,
                    // A stateless server still starting (a first `uvx` run, a loaded machine)
                    // can miss the probe's short wait, then refuse `initialize`: it is asked
                    // again, with its whole timeout, before the refusal counts.
                    Err(refused @ HandshakeError::Rejected { .. }) if probing => {
                        match stateless::discover(conn, self.config().timeout).await? {
                            stateless::Discovery::Stateless(info) => {
                                tracing::info!(server = %self.name(), "answered server/discover late and refused initialize: it speaks {}", stateless::STATELESS_VERSION);
                                conn.set_stateless();
                                self.learn_era(Era::Stateless);
                                info
                            }
                            _ => return Err(refused),
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        initialized(&info.protocol_version);
        let [tools, prompts, resources, templates] = self.fetch_lists(conn, &info).await?;
        let (tools, hidden_tools) = self.filter_tools(tools);
        if conn.is_stateless() {
            tokio::spawn(self.clone().listen(conn.clone(), info.clone()));
        }
        let ready_in = t0.elapsed();
        tracing::info!(server = %self.name(), version = %info.protocol_version, tools = tools.len(), ms = ready_in.as_millis() as u64, "ready");
        self.set_conn(Some(conn.clone()));
        self.update(|s| {
            s.state = State::Ready;
            s.info = Some(info);
            s.tools = Arc::new(tools);
            s.hidden_tools = hidden_tools;
            s.prompts = Arc::new(prompts);
            s.resources = Arc::new(resources);
            s.templates = Arc::new(templates);
            s.ready_in = Some(ready_in);
            s.generation += 1;
        });
        Ok(())
    }

    /// The stateless start (`server/discover`), when the plan has one: the server's
    /// description, or None when `initialize` is next (planned, or the probe found a handshake
    /// server).
    async fn discover(&self, conn: &Connection) -> Result<Option<ServerInfo>, HandshakeError> {
        let plan = self.plan();
        if plan == Plan::Initialize {
            return Ok(None);
        }
        // Over HTTP a handshake server refuses the probe at once; only a stdio server can stay
        // silent, so only there is the wait cut short.
        let stdio = matches!(self.config().transport, Transport::Stdio { .. });
        let wait = if plan == Plan::Probe && stdio {
            stateless::PROBE_TIMEOUT.min(self.config().timeout)
        } else {
            self.config().timeout
        };
        match stateless::discover(conn, wait).await? {
            stateless::Discovery::Stateless(info) => {
                conn.set_stateless();
                self.learn_era(Era::Stateless);
                tracing::debug!(server = %self.name(), "speaks {}", stateless::STATELESS_VERSION);
                Ok(Some(info))
            }
            stateless::Discovery::Handshake(why) if plan == Plan::Probe => {
                tracing::info!(server = %self.name(), "not a {} server ({why}); using initialize", stateless::STATELESS_VERSION);
                self.learn_era(Era::Handshake);
                Ok(None)
            }
            stateless::Discovery::Handshake(why) => Err(HandshakeError::NotStateless(why)),
            stateless::Discovery::Died(reason) if plan == Plan::Probe => {
                self.learn_era(Era::Handshake);
                Err(HandshakeError::ProbeDied(reason))
            }
            stateless::Discovery::Died(reason) => Err(HandshakeError::Call(CallError::Closed {
                server: self.name().to_string(),
                reason,
            })),
        }
    }

    /// Keeps a `subscriptions/listen` stream open on a stateless server's connection for as
    /// long as it lives: its list-change notifications refresh the lists like handshake
    /// `list_changed` ones, and its resource updates reach the subscribed clients. Opened
    /// again after it ends (then the lists are fetched afresh: changes may have been
    /// missed) and whenever the set of subscribed resources changes.
    async fn listen(self: Arc<Self>, conn: Arc<Connection>, info: ServerInfo) {
        let mut uris = self.listen_uris.subscribe();
        let mut quick_ends = 0u32;
        let mut missed = false;
        loop {
            let wanted = uris.borrow_and_update().clone();
            let Some(params) = stateless::listen_params(&info, &wanted) else {
                tokio::select! {
                    _ = uris.changed() => continue,
                    _ = conn.closed() => return,
                }
            };
            if missed {
                for kind in [
                    ListKind::Tools,
                    ListKind::Prompts,
                    ListKind::Resources,
                    ListKind::Templates,
                ] {
                    if info.has_capability(kind.capability()) {
                        self.refresh(kind).await;
                    }
                }
            }
            let opened = Instant::now();
            tokio::select! {
                ended = conn.request("subscriptions/listen", Some(&params), LISTEN_RENEW) => {
                    if conn.is_closed() {
                        return;
                    }
                    match ended {
                        Ok(m) if m.error().is_some() => tracing::warn!(server = %self.name(), error = m.error().unwrap_or_default(), "subscriptions/listen refused"),
                        Ok(_) => tracing::debug!(server = %self.name(), "listen stream ended by the server"),
                        Err(e) => tracing::debug!(server = %self.name(), "listen stream ended: {e}"),
                    }
                    quick_ends = if opened.elapsed() < Duration::from_secs(2) { quick_ends + 1 } else { 0 };
                    missed = true;
                    let wait = RELISTEN.saturating_mul(1 << quick_ends.min(6)).min(RELISTEN_MAX);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = conn.closed() => return,
                    }
                }
                // Dropping the request cancels it (stdio: notifications/cancelled; HTTP:
                // the POST is aborted), and the next one carries the new filter.
                _ = uris.changed() => {}
                _ = conn.closed() => return,
            }
        }
    }

    /// The capabilities to declare upstream: what the downstream client declared, as soon as
    /// it has (or `{}` if it has not said within a moment).
    async fn client_capabilities(&self) -> String {
        let mut rx = self.client_caps.clone();
        let _ = tokio::time::timeout(CLIENT_CAPS_WAIT, rx.wait_for(Option::is_some)).await;
        let caps = rx.borrow().clone();
        caps.unwrap_or_else(|| "{}".to_string())
    }

    /// Fetches every list the server's capabilities promise: tools, prompts, resources and
    /// resource templates, concurrently. Only a failing tool list fails the server; the
    /// others are optional features, so a server that declares them but cannot list them
    /// is logged and served without them.
    async fn fetch_lists(
        &self,
        conn: &Connection,
        info: &ServerInfo,
    ) -> Result<[Vec<Entry>; 4], HandshakeError> {
        let want = |kind: ListKind| info.has_capability(kind.capability());
        let list = |kind: ListKind| async move {
            if !want(kind) {
                return Ok(Vec::new());
            }
            let (method, field, key) = kind.wire();
            handshake::list_all(conn, self.name(), method, field, key, self.config().timeout).await
        };
        let (tools, prompts, resources, templates) = tokio::join!(
            list(ListKind::Tools),
            list(ListKind::Prompts),
            list(ListKind::Resources),
            list(ListKind::Templates)
        );
        let optional = |kind: ListKind, r: Result<Vec<Entry>, HandshakeError>| {
            r.unwrap_or_else(|e| {
                tracing::warn!(server = %self.name(), "{} failed, serving none: {e}", kind.wire().0);
                Vec::new()
            })
        };
        Ok([
            tools?,
            optional(ListKind::Prompts, prompts),
            optional(ListKind::Resources, resources),
            optional(ListKind::Templates, templates),
        ])
    }

    /// The tools its filter lets the hub serve, and how many it hid: a hidden tool is never
    /// listed, named or routed, so a call to it is a call to an unknown tool.
    fn filter_tools(&self, tools: Vec<Entry>) -> (Vec<Entry>, usize) {
        let filter = &self.config().tool_filter;
        if !filter.is_active() {
            return (tools, 0);
        }
        let before = tools.len();
        let kept: Vec<Entry> = tools
            .into_iter()
            .filter(|t| filter.allows(&t.key))
            .collect();
        let hidden = before - kept.len();
        (kept, hidden)
    }

    /// Re-fetches one list (after its `notifications/…/list_changed`).
    pub async fn refresh(&self, kind: ListKind) {
        let Some(conn) = self.connection() else {
            return;
        };
        let (method, field, key) = kind.wire();
        match handshake::list_all(
            &conn,
            self.name(),
            method,
            field,
            key,
            self.config().timeout,
        )
        .await
        {
            Ok(items) => {
                tracing::info!(server = %self.name(), count = items.len(), "{method}: list changed");
                let (items, hidden) = match kind {
                    ListKind::Tools => self.filter_tools(items),
                    _ => (items, 0),
                };
                let items = Arc::new(items);
                self.update(|s| match kind {
                    ListKind::Tools => {
                        s.tools = items;
                        s.hidden_tools = hidden;
                    }
                    ListKind::Prompts => s.prompts = items,
                    ListKind::Resources => s.resources = items,
                    ListKind::Templates => s.templates = items,
                });
            }
            Err(e) => {
                tracing::warn!(server = %self.name(), "could not refresh after list_changed ({method}): {e}")
            }
        }
    }

    /// A server's own notification or request (never a response). Runs on the reader task.
    fn on_incoming(self: &Arc<Self>, item: Incoming, from: &std::sync::Weak<Connection>) {
        match item {
            Incoming::Notification(m) => match ListKind::from_notification(m.method()) {
                Some(kinds) => {
                    for &kind in kinds {
                        let me = self.clone();
                        tokio::spawn(async move { me.refresh(kind).await });
                    }
                }
                None => self.sink.notification(self.index, m),
            },
            Incoming::Request(m) => self.sink.request(self.index, m, from.clone()),
        }
    }
}

/// Why a process could not be started.
enum StartError {
    /// The reason, with the server's last stderr lines.
    Failed(String),
    /// It ended on the `server/discover` probe.
    ProbeDied(String),
}

impl StartError {
    fn into_reason(self) -> String {
        match self {
            StartError::Failed(reason) | StartError::ProbeDied(reason) => reason,
        }
    }
}

/// The lists a server may offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
    Templates,
}

impl ListKind {
    /// (method, result field, identifying member)
    pub fn wire(self) -> (&'static str, &'static str, &'static str) {
        match self {
            ListKind::Tools => ("tools/list", "tools", "name"),
            ListKind::Prompts => ("prompts/list", "prompts", "name"),
            ListKind::Resources => ("resources/list", "resources", "uri"),
            ListKind::Templates => (
                "resources/templates/list",
                "resourceTemplates",
                "uriTemplate",
            ),
        }
    }

    fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::Templates => "resources",
        }
    }

    /// The lists a `notifications/…/list_changed` invalidates.
    fn from_notification(method: &str) -> Option<&'static [ListKind]> {
        match method {
            "notifications/tools/list_changed" => Some(&[ListKind::Tools]),
            "notifications/prompts/list_changed" => Some(&[ListKind::Prompts]),
            "notifications/resources/list_changed" => {
                Some(&[ListKind::Resources, ListKind::Templates])
            }
            _ => None,
        }
    }
}

/// Reads the server's stdout until it ends, then works out why (exit status, last stderr
/// lines), fails every in-flight request with that reason and reports it.
async fn read_until_exit(
    conn: Arc<Connection>,
    stdout: tokio::process::ChildStdout,
    max: usize,
    incoming: impl Fn(Incoming),
    proc: Arc<AsyncMutex<Option<ChildProc>>>,
    exit_tx: oneshot::Sender<String>,
) {
    let read = read_frames(stdout, max, |frame| conn.on_frame(frame, &incoming)).await;
    // Stdout closing almost always means the process is exiting; give it and its stderr a
    // moment so the report can say how it ended and what it said last.
    let status = {
        let mut guard = proc.lock().await;
        match guard.as_mut() {
            Some(p) => {
                let status = tokio::time::timeout(Duration::from_millis(500), p.wait())
                    .await
                    .ok()
                    .and_then(Result::ok);
                if status.is_some() {
                    p.kill_group();
                }
                status
            }
            None => None,
        }
    };
    conn.stderr.wait_done(Duration::from_millis(200)).await;
    let mut reason = match (status, read) {
        (Some(status), _) => format!("exited ({status})"),
        (None, Err(e)) => format!("stdout failed: {e}"),
        (None, Ok(())) => "closed its stdout".to_string(),
    };
    reason.push_str(&conn.stderr.summary(5));
    conn.fail_all(&reason);
    let _ = exit_tx.send(reason);
}

fn backoff(policy: &RestartPolicy, crash_count: u32) -> Duration {
    let exp = policy
        .initial_backoff
        .saturating_mul(1u32 << crash_count.saturating_sub(1).min(16));
    let base = exp.min(policy.max_backoff);
    // Jitter of up to a quarter, so servers that crashed together do not restart in lockstep.
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    base + base.mul_f64(f64::from(nanos % 1000) / 4000.0)
}

/// The user's home folder, which refusals show paths under as `~`.
fn home_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_bounded_jitter() {
        let p = RestartPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..Default::default()
        };
        for (n, base) in [(1, 100), (2, 200), (3, 350), (20, 350)] {
            let d = backoff(&p, n).as_millis();
            assert!(
                d >= base && d <= base + base / 4,
                "crash {n}: {d}ms not in [{base}, {}]",
                base + base / 4
            );
        }
    }
}
