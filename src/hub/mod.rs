//! Many upstream servers as one: starts them in parallel, keeps the merged catalogue current,
//! routes requests by lookup tables, and carries everything else between servers and the
//! downstream sessions — progress (with tokens rewritten so they never collide), log
//! messages, resource updates to subscribers, server→client requests, cancellations, and
//! `list_changed` announcements.
//!
//! Knows upstreams and sessions; knows nothing of stdin, HTTP or the terminal.

pub mod catalog;
pub mod local;
pub mod names;
pub mod session;
pub mod status;
pub mod uri_template;

pub use catalog::{Catalog, CatalogTool, Named};
pub use local::LocalClient;
pub use session::Session;
pub use status::{HubStatus, ServerStatus};

use crate::builtins::Builtins;
use crate::config::{Config, HubSettings, ToolNames};
use crate::jsonrpc::{self, MemberProbe, Message, RawObject};
use crate::policy::Policy;
use crate::upstream::Entry;
use crate::upstream::{CallError, Connection, Event, Sink, State, Upstream};
use std::path::Path;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

/// Something every downstream session may need to pass on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubEvent {
    ToolsChanged,
    PromptsChanged,
    ResourcesChanged,
}

impl HubEvent {
    pub fn notification(self) -> &'static str {
        match self {
            HubEvent::ToolsChanged => "notifications/tools/list_changed",
            HubEvent::PromptsChanged => "notifications/prompts/list_changed",
            HubEvent::ResourcesChanged => "notifications/resources/list_changed",
        }
    }
}

/// Log levels of `logging/setLevel` and `notifications/message`, least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

pub fn log_rank(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|l| *l == level)
}

pub struct Hub {
    pub settings: HubSettings,
    upstreams: Vec<Arc<Upstream>>,
    catalog: RwLock<Arc<Catalog>>,
    /// Bumps on every snapshot change of any server; waiters re-check their condition.
    changed: watch::Sender<u64>,
    events: broadcast::Sender<HubEvent>,
    shutdown: watch::Sender<bool>,
    supervisors: Mutex<Vec<JoinHandle<()>>>,
    started: Instant,
    /// What upstream `initialize` declares, taken from the first downstream client.
    client_caps: watch::Sender<Option<String>>,
    sessions: Mutex<Vec<Weak<Session>>>,
    /// Hub progress token (JSON text) → the session and the token it used.
    progress: Mutex<HashMap<String, (Weak<Session>, String)>>,
    next_token: AtomicU64,
    /// The most verbose level any session asked for, replayed to restarted servers.
    log_level: Mutex<Option<String>>,
    /// (server, URI) → number of sessions subscribed; replayed to restarted servers.
    subscriptions: Mutex<HashMap<(usize, String), usize>>,
    pub policy: Arc<Policy>,
    /// Server changes announced so far, and how many of them the catalogue reflects.
    seq: Arc<AtomicU64>,
    rebuilt: AtomicU64,
    /// OpenPact's own tools, served in process.
    pub builtins: Builtins,
}

/// Why a request could not be routed to a server.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("Unknown {kind}: {name}")]
    Unknown { kind: &'static str, name: String },
    #[error("{kind} '{name}' belongs to server '{server}', which is {state}")]
    ServerDown {
        kind: &'static str,
        name: String,
        server: String,
        state: String,
    },
    #[error("Resource not found: no server offers {0}")]
    NoServerForUri(String),
}

impl RouteError {
    pub fn code(&self) -> i64 {
        match self {
            RouteError::Unknown { .. } => jsonrpc::code::INVALID_PARAMS,
            RouteError::ServerDown { .. } => crate::upstream::code::UNAVAILABLE,
            RouteError::NoServerForUri(_) => RESOURCE_NOT_FOUND,
        }
    }
}

/// The 2024-11-05 … 2025-11-25 "resource not found" code.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// Either a routing failure or a failed upstream request.
#[derive(Debug, thiserror::Error)]
pub enum HubCallError {
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    Call(#[from] CallError),
}

impl HubCallError {
    pub fn code(&self) -> i64 {
        match self {
            HubCallError::Route(e) => e.code(),
            HubCallError::Call(e) => e.code(),
        }
    }
}

/// Where a tool or prompt is served.
#[derive(Clone)]
pub enum Route {
    Server(Arc<Upstream>),
    /// OpenPact's own tools, in process.
    Builtin,
}

/// Which namespaced list a name is looked up in.
#[derive(Debug, Clone, Copy)]
pub enum NameKind {
    Tool,
    Prompt,
}

impl Hub {
    /// Starts every enabled server of `config` (in parallel) and returns at once.
    pub fn start(config: &Config, state_dir: &Path) -> Arc<Hub> {
        Self::start_selected(config, state_dir, |_| true)
    }

    /// Like [`Hub::start`], but only servers for which `pick` is true are started (the CLI
    /// starts just the server it needs); the others stay disabled.
    pub fn start_selected(
        config: &Config,
        state_dir: &Path,
        pick: impl Fn(&str) -> bool,
    ) -> Arc<Hub> {
        let secrets = Self::secrets_of(config);
        let policy = Arc::new(Self::policy_for(config, state_dir, &secrets));
        let builtins = if config.hub.builtins.enabled {
            crate::builtins::from_settings(&config.hub.builtins, &secrets, state_dir)
        } else {
            Builtins::default()
        };
        let builtin_tools: Vec<Entry> = builtins
            .tools()
            .iter()
            .map(|t| Entry {
                key: t.name.to_string(),
                json: t.to_json().to_string().into(),
            })
            .collect();
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        let sink = Arc::new(HubSink(OnceLock::new()));
        let seq = Arc::new(AtomicU64::new(0));
        let (client_caps, caps_rx) = watch::channel(None);
        let upstreams: Vec<_> = config
            .servers
            .iter()
            .enumerate()
            .map(|(i, sc)| {
                let mut sc = sc.clone();
                if !pick(&sc.name) {
                    sc.disabled = true;
                }
                Upstream::new(
                    i,
                    sc,
                    &config.hub,
                    ev_tx.clone(),
                    sink.clone(),
                    seq.clone(),
                    caps_rx.clone(),
                )
            })
            .collect();
        drop(ev_tx);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let mut builder = catalog::Builder::new(config.hub.tool_names, &builtin_tools);
        let hub = Arc::new(Hub {
            settings: config.hub.clone(),
            upstreams,
            catalog: RwLock::new(Arc::new(builder.build(&[]))),
            changed: watch::channel(0).0,
            events: broadcast::channel(64).0,
            shutdown,
            supervisors: Mutex::new(Vec::new()),
            started: Instant::now(),
            client_caps,
            sessions: Mutex::new(Vec::new()),
            progress: Mutex::new(HashMap::new()),
            next_token: AtomicU64::new(1),
            log_level: Mutex::new(None),
            subscriptions: Mutex::new(HashMap::new()),
            policy,
            seq,
            rebuilt: AtomicU64::new(0),
            builtins,
        });
        let _ = sink.0.set(Arc::downgrade(&hub));
        let handles: Vec<_> = hub
            .upstreams
            .iter()
            .map(|up| tokio::spawn(up.clone().supervise(shutdown_rx.clone())))
            .collect();
        *lock(&hub.supervisors) = handles;
        tokio::spawn(event_loop(Arc::downgrade(&hub), ev_rx, builder));
        hub
    }

    /// Secret values to redact: the configured secret variables and every value openpact
    /// injects into a server's environment.
    fn secrets_of(config: &Config) -> Vec<(String, String)> {
        let mut secrets: Vec<(String, String)> = config
            .hub
            .policy
            .secrets
            .env
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
            .collect();
        for s in &config.servers {
            if let crate::config::Transport::Stdio { injected, .. } = &s.transport {
                secrets.extend(injected.iter().cloned());
            }
        }
        secrets
    }

    fn policy_for(config: &Config, state_dir: &Path, secrets: &[(String, String)]) -> Policy {
        let mut servers: Vec<String> = config.servers.iter().map(|s| s.name.clone()).collect();
        servers.push(catalog::BUILTIN_SERVER.to_string());
        let label = config
            .source
            .as_ref()
            .map_or_else(|| "your mcp.json".to_string(), |p| p.display().to_string());
        Policy::new(&config.hub.policy, state_dir, &servers, secrets, label)
    }

    /// The name of server `i` (`openpact` for the built-ins).
    pub fn server_name(&self, i: usize) -> &str {
        catalog::server_name(&self.upstreams, i)
    }

    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        match self.catalog.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Fires after every change of any server (state, lists).
    pub fn watch_changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.events.subscribe()
    }

    pub(crate) fn register(&self, session: &Arc<Session>) {
        let mut sessions = lock(&self.sessions);
        sessions.retain(|s| s.strong_count() > 0);
        sessions.push(Arc::downgrade(session));
    }

    fn sessions(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Records what the downstream client supports, so servers are told only about
    /// server→client requests the hub can really pass on. The first client decides; `None`
    /// (no client, as in CLI listings) declares nothing.
    pub fn declare_client(&self, capabilities: Option<&str>) {
        let obj = capabilities
            .and_then(|c| RawObject::parse(c).ok())
            .unwrap_or_default();
        let mut out = String::from("{");
        for key in ["roots", "sampling", "elicitation"] {
            if let Some(v) = obj.get(key).filter(|v| *v != "null") {
                if out.len() > 1 {
                    out.push(',');
                }
                out.push_str(&format!("\"{key}\":{v}"));
            }
        }
        out.push('}');
        self.client_caps.send_if_modified(|c| {
            if c.is_none() {
                *c = Some(out);
                true
            } else {
                false
            }
        });
    }

    /// True while some server is still on its way to its first ready or failed state.
    pub fn starting(&self) -> bool {
        // A server that just became ready counts as starting until the catalogue shows it.
        self.rebuilt.load(Ordering::SeqCst) < self.seq.load(Ordering::SeqCst)
            || self
                .upstreams
                .iter()
                .any(|u| u.snapshot().state.is_pending())
    }

    /// Waits until no server is still starting, or `limit` has passed.
    pub async fn settled(&self, limit: Duration) {
        self.wait_until(limit, || !self.starting()).await;
    }

    /// Re-checks `done` after every change of any server until it holds or `limit` passes.
    async fn wait_until(&self, limit: Duration, done: impl Fn() -> bool) {
        let mut rx = self.changed.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        while !done() {
            if tokio::time::timeout_at(deadline, rx.changed())
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Waits for the servers still starting, but never past `settings.list_wait` after the
    /// hub started: clients that ignore `list_changed` still see the tools of servers that
    /// take a moment, while a hung server cannot stall the list for long.
    pub async fn startup_grace(&self) {
        let left = self
            .settings
            .list_wait
            .saturating_sub(self.started.elapsed());
        if !left.is_zero() {
            self.settled(left).await;
        }
    }

    /// Resolves a tool or prompt name of any accepted form to its server and upstream name.
    /// A name whose server is still starting waits for it (within `list_wait`).
    pub async fn route_name(
        &self,
        kind: NameKind,
        name: &str,
    ) -> Result<(Route, Arc<Named>), RouteError> {
        match self.try_route_name(kind, name) {
            Err(_) if self.starting() => {
                let left = self
                    .settings
                    .list_wait
                    .saturating_sub(self.started.elapsed());
                self.wait_until(left, || {
                    self.try_route_name(kind, name).is_ok() || !self.starting()
                })
                .await;
                self.try_route_name(kind, name)
            }
            other => other,
        }
    }

    fn try_route_name(
        &self,
        kind: NameKind,
        name: &str,
    ) -> Result<(Route, Arc<Named>), RouteError> {
        let catalog = self.catalog();
        let (list, label) = match kind {
            NameKind::Tool => (&catalog.tools, "tool"),
            NameKind::Prompt => (&catalog.prompts, "prompt"),
        };
        if let Some(t) = list.find(name) {
            // Fill the catalogue entry's lazy definition hash before cloning it, so the hash
            // is computed once per catalogue, not once per call.
            let _ = t.definition();
            let route = match self.upstreams.get(t.upstream) {
                Some(up) => Route::Server(up.clone()),
                None => Route::Builtin,
            };
            return Ok((route, t.clone()));
        }
        // Not served: if the name points at a known server, say what is wrong with it.
        for up in &self.upstreams {
            let prefix = up.config.prefix();
            let matches = !prefix.is_empty()
                && (name
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with(':') || rest.starts_with("__")));
            if matches && up.snapshot().state != State::Ready {
                return Err(RouteError::ServerDown {
                    kind: label,
                    name: name.into(),
                    server: up.name().into(),
                    state: up.describe_state(),
                });
            }
        }
        Err(RouteError::Unknown {
            kind: label,
            name: name.into(),
        })
    }

    /// The server serving a resource URI (or a URI template, for completion).
    pub async fn route_uri(&self, uri: &str) -> Result<Arc<Upstream>, RouteError> {
        // A URI no ready server lists may belong to one still starting: wait for it before
        // falling back to "the only server with resources", which could be the wrong one.
        if self.catalog().route_uri_listed(uri).is_none() && self.starting() {
            let left = self
                .settings
                .list_wait
                .saturating_sub(self.started.elapsed());
            self.wait_until(left, || {
                self.catalog().route_uri_listed(uri).is_some() || !self.starting()
            })
            .await;
        }
        match self.catalog().route_uri(uri, &self.upstreams) {
            Some(i) => Ok(self.upstreams[i].clone()),
            None => Err(RouteError::NoServerForUri(uri.into())),
        }
    }

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
        let (params, _guard) = self.rewrite_progress(session, params);
        up.request(method, Some(&params)).await
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
            .filter_map(|s| s.log_rank())
            .min()
            .map(|r| LOG_LEVELS[r].to_string());
        *lock(&self.log_level) = wanted.clone();
        if let Some(level) = wanted {
            let params = format!("{{\"level\":\"{level}\"}}");
            let targets: Vec<_> = self
                .upstreams
                .iter()
                .filter(|u| {
                    u.snapshot()
                        .info
                        .as_ref()
                        .is_some_and(|i| i.has_capability("logging"))
                })
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

    /// The downstream `initialize` capabilities: the union of what ready servers offer.
    /// Servers still starting could offer anything, so while any is, every list the hub can
    /// bridge is declared (an empty list is a valid answer, and `list_changed` follows).
    pub fn capabilities(&self) -> String {
        let starting = self.starting();
        let offered = |cap: &str| {
            starting
                || self.upstreams.iter().any(|u| {
                    u.snapshot().state == State::Ready
                        && u.snapshot()
                            .info
                            .as_ref()
                            .is_some_and(|i| i.has_capability(cap))
                })
        };
        let subscribe = starting
            || self.upstreams.iter().any(|u| {
                u.snapshot().info.as_ref().is_some_and(|i| {
                    RawObject::parse(&i.capabilities)
                        .ok()
                        .and_then(|o| {
                            o.get("resources")
                                .and_then(|r| RawObject::parse(r).ok())
                                .and_then(|r| r.get("subscribe").map(|v| v == "true"))
                        })
                        .unwrap_or(false)
                })
            });
        let mut caps = vec!["\"tools\":{\"listChanged\":true}".to_string()];
        if offered("resources") {
            caps.push(format!(
                "\"resources\":{{\"subscribe\":{subscribe},\"listChanged\":true}}"
            ));
        }
        if offered("prompts") {
            caps.push("\"prompts\":{\"listChanged\":true}".into());
        }
        if offered("completions") {
            caps.push("\"completions\":{}".into());
        }
        if offered("logging") {
            caps.push("\"logging\":{}".into());
        }
        format!("{{{}}}", caps.join(","))
    }

    /// Warns about policy rules that name a tool no ready server offers (a typo would never
    /// match). Servers' names were checked when the config was loaded; tools can only be
    /// checked once the servers have listed them.
    pub fn check_rule_targets(&self) {
        let catalog = self.catalog();
        let p = &self.policy.settings;
        let lists: [(&str, Vec<&String>); 5] = [
            ("permissions.allow", p.permissions.allow.iter().collect()),
            ("permissions.ask", p.permissions.ask.iter().collect()),
            ("permissions.deny", p.permissions.deny.iter().collect()),
            (
                "cache.rules",
                p.cache.rules.iter().map(|(g, _)| g).collect(),
            ),
            (
                "rateLimits.tools",
                p.rate_limits.tools.iter().map(|(g, _)| g).collect(),
            ),
        ];
        for (section, globs) in lists {
            for glob in globs {
                let Some((server, tool)) = glob.split_once(':') else {
                    // No `:`: a built-in tool (or a tool of a server without a prefix).
                    if !glob.contains(['*', '?', '[', '{']) && catalog.tools.find(glob).is_none() {
                        tracing::warn!(
                            "openpact.{section}: \"{glob}\" names no tool openpact serves; the rule will never match"
                        );
                    }
                    continue;
                };
                if server.contains(['*', '?', '[', '{'])
                    || tool.contains(['*', '?', '[', '{'])
                    || tool.contains("://")
                {
                    continue;
                }
                let up = self.upstreams.iter().find(|u| u.config.prefix() == server);
                if up.is_some_and(|u| u.snapshot().state == State::Ready)
                    && catalog.tools.find(glob).is_none()
                    && catalog.prompts.find(glob).is_none()
                {
                    tracing::warn!(
                        "openpact.{section}: \"{glob}\" names no tool or prompt of server \"{server}\"; the rule will never match"
                    );
                }
            }
        }
    }

    /// Stops every server (in parallel) and waits for them, at most about two seconds.
    pub async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        let handles: Vec<_> = std::mem::take(&mut *lock(&self.supervisors));
        let all = async {
            for h in handles {
                let _ = h.await;
            }
        };
        if tokio::time::timeout(Duration::from_millis(1800), all)
            .await
            .is_err()
        {
            tracing::warn!("some servers did not stop in time");
        }
        let policy = self.policy.clone();
        let _ = tokio::task::spawn_blocking(move || policy.flush_audit()).await;
    }

    /// Instructions for the downstream `initialize`: each server's own, labelled.
    pub fn instructions(&self) -> Option<String> {
        let mut parts = Vec::new();
        for up in &self.upstreams {
            if let Some(text) = up
                .snapshot()
                .info
                .as_ref()
                .and_then(|i| i.instructions.clone())
            {
                parts.push(format!("## {}\n{}", up.name(), text.trim()));
            }
        }
        if parts.is_empty() {
            return None;
        }
        let sep = match self.settings.tool_names {
            ToolNames::Qualified => ":",
            ToolNames::Portable => "__",
        };
        Some(format!(
            "openpact serves the tools of several MCP servers; each tool is named SERVER{sep}TOOL. What each server says about itself:\n\n{}",
            parts.join("\n\n")
        ))
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
                    session.send(jsonrpc::notification(
                        "notifications/progress",
                        Some(&params),
                    ));
                }
            }
            "notifications/message" => {
                let server = self.upstreams[i].name();
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
                    for s in self.sessions() {
                        s.deliver_update(&uri, m.text());
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
                    s.send(m.text().to_string());
                }
            }
            other => {
                tracing::debug!(server = %self.upstreams[i].name(), method = other, "notification not forwarded")
            }
        }
    }

    fn on_request(&self, i: usize, m: Message, from: Weak<Connection>) {
        let up = &self.upstreams[i];
        let capability = match m.method() {
            "sampling/createMessage" => Some("sampling"),
            "elicitation/create" => Some("elicitation"),
            "roots/list" => Some("roots"),
            _ => None,
        };
        let session =
            capability.and_then(|cap| self.sessions().into_iter().find(|s| s.client_has(cap)));
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
    async fn replay(&self, i: usize) {
        let up = &self.upstreams[i];
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
struct HubSink(OnceLock<Weak<Hub>>);

impl Sink for HubSink {
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

    fn scrub(&self, text: &str) -> String {
        match self.0.get().and_then(Weak::upgrade) {
            Some(hub) => hub.policy.redact(text).into_owned(),
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked while holding it; the data is
    // plain bookkeeping that stays usable.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// While servers are still starting for the first time, the catalogue is rebuilt at most
/// this often: each rebuild merges every server's share, so rebuilding once per server as
/// 50 of them come up costs a quadratic amount of work on the CPUs those servers need.
/// The rebuild after the last one settles is immediate. Until then nobody lists (a listing
/// waits for the servers to settle, within `listWait`); only a call to a server that is
/// already up may wait this long for its name to be known.
const STARTUP_REBUILD_EVERY: Duration = Duration::from_millis(25);

/// What the event loop remembers between events.
#[derive(Default)]
struct Seen {
    generations: HashMap<usize, u64>,
    tool_lists: HashMap<usize, usize>,
    warned: std::collections::HashSet<catalog::Conflict>,
}

async fn event_loop(
    hub: Weak<Hub>,
    mut rx: mpsc::UnboundedReceiver<Event>,
    mut builder: catalog::Builder,
) {
    let mut seen = Seen::default();
    // Highest event sequence number not yet in the catalogue (0: nothing pending).
    let mut dirty = 0;
    let mut last_build: Option<tokio::time::Instant> = None;
    loop {
        let due = last_build.map(|t| t + STARTUP_REBUILD_EVERY);
        let first = tokio::select! {
            ev = rx.recv() => match ev {
                Some(ev) => Some(ev),
                None => return,
            },
            () = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)),
                if dirty > 0 && due.is_some() => None,
        };
        let Some(hub) = hub.upgrade() else { return };
        // Coalesce a burst (50 servers coming up) into one rebuild and one announcement.
        let mut next = first;
        while let Some(ev) = next.take() {
            dirty = dirty.max(on_event(&hub, &mut seen, ev));
            next = rx.try_recv().ok();
        }
        if dirty == 0 {
            continue;
        }
        let starting = hub
            .upstreams
            .iter()
            .any(|u| u.snapshot().state.is_pending());
        let now = tokio::time::Instant::now();
        if starting && due.is_some_and(|due| now < due) {
            continue;
        }
        rebuild(&hub, &mut builder, &mut seen, dirty, !starting);
        dirty = 0;
        last_build = Some(now);
    }
}

/// Acts on one server event at once; returns its sequence number (the catalogue is rebuilt
/// later).
fn on_event(hub: &Arc<Hub>, seen: &mut Seen, ev: Event) -> u64 {
    let Event::Changed(i, n) = ev;
    let snap = hub.upstreams[i].snapshot();
    if snap.state != State::Ready {
        for s in hub.sessions() {
            s.server_gone(i);
        }
    }

    // A restart or a new tool list makes cached results of that server stale.
    let tools_id = Arc::as_ptr(&snap.tools) as usize;
    if seen
        .tool_lists
        .insert(i, tools_id)
        .is_some_and(|old| old != tools_id)
        || snap.state != State::Ready
    {
        hub.policy.cache.invalidate_server(i);
    }

    if snap.state == State::Ready
        && seen.generations.insert(i, snap.generation) != Some(snap.generation)
    {
        let h = hub.clone();
        tokio::spawn(async move { h.replay(i).await });
    }
    n
}

/// Rebuilds the catalogue, publishes it and announces what changed. Name conflicts are
/// reported only once no server is on its first start (`warn`): while 50 servers come up in
/// random order, which one wins a contested name keeps changing, and every interim winner
/// would be reported.
fn rebuild(hub: &Hub, builder: &mut catalog::Builder, seen: &mut Seen, upto: u64, warn: bool) {
    // Servers stopping at shutdown empty the catalogue one by one; nobody needs to see or
    // hear that, and 50 rebuilds would only slow the exit.
    if *hub.shutdown.borrow() {
        hub.rebuilt.fetch_max(upto, Ordering::SeqCst);
        hub.changed.send_modify(|g| *g += 1);
        return;
    }
    let fresh = builder.build(&hub.upstreams);
    let new_conflicts: Vec<catalog::Conflict> = if warn {
        fresh
            .conflicts
            .iter()
            .filter(|c| seen.warned.insert((*c).clone()))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let changes = {
        let mut cur = hub
            .catalog
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut changes = Vec::new();
        if cur.tools.fingerprint != fresh.tools.fingerprint {
            changes.push(HubEvent::ToolsChanged);
        }
        if cur.prompts.fingerprint != fresh.prompts.fingerprint {
            changes.push(HubEvent::PromptsChanged);
        }
        if cur.resources_fingerprint != fresh.resources_fingerprint
            || cur.templates_fingerprint != fresh.templates_fingerprint
        {
            changes.push(HubEvent::ResourcesChanged);
        }
        *cur = Arc::new(fresh);
        changes
    };
    hub.rebuilt.fetch_max(upto, Ordering::SeqCst);
    hub.changed.send_modify(|g| *g += 1);
    for c in changes {
        let _ = hub.events.send(c);
    }
    // After publishing: a client waiting for the servers to settle need not wait for these.
    for message in catalog::Conflict::messages(&new_conflicts, &hub.upstreams) {
        tracing::warn!("{message}");
    }
}
