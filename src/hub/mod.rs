//! Many upstream servers as one: starts them in parallel, keeps the merged catalogue current,
//! routes requests by lookup tables, and carries everything else between servers and the
//! downstream sessions — progress (with tokens rewritten so they never collide), log
//! messages, resource updates to subscribers, server→client requests, cancellations, and
//! `list_changed` announcements.
//!
//! Knows upstreams and sessions; knows nothing of stdin, HTTP or the terminal.
//!
//! This file holds the hub itself: starting it, its state, waiting for servers, what it
//! declares to clients, and stopping. Each other file owns one topic of it: `assemble`
//! puts a config's servers, secrets and policy in place (at start and at `reload`);
//! `routing` finds the server for a name or URI; `relay` carries traffic between servers
//! and sessions; `events` keeps the catalogue current; `hosts` decides hosts beyond a
//! server's allow list; `status` pictures every server; `login` holds remote servers'
//! credentials for logins through a client (the session's half is `session/login.rs`);
//! `session` is one downstream client, `stateless` the 2026-07-28 requests.

pub mod apps;
mod assemble;
pub mod catalog;
mod events;
pub mod hosts;
pub mod local;
mod login;
pub mod names;
mod relay;
mod reload;
mod routing;
pub mod session;
pub mod stateless;
pub mod status;
pub mod tasks;
pub mod uri_template;
pub mod views;

pub use catalog::{Catalog, Named};
pub use local::LocalClient;
pub use reload::{NEEDS_RESTART, ReloadReport, ReloadStatus};
pub use routing::{NameKind, Route, RouteError};
pub use session::Session;
pub use status::{HubStatus, ServerStatus};

use crate::auth::ServerAuth;
use crate::builtins::Builtins;
use crate::config::{Config, HubSettings};
use crate::jsonrpc::RawObject;
use crate::metrics::Metrics;
use crate::policy::Policy;
use crate::upstream::Entry;
use crate::upstream::{State, Upstream};
use events::event_loop;
use relay::HubSink;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
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

/// The client capability a server's request to the client needs; None for any other method
/// (no client answers those).
pub(crate) fn client_capability(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

pub struct Hub {
    pub settings: HubSettings,
    /// Every server by index. A reload appends the servers it adds, puts a server that must
    /// restart in its old place, and leaves a removed one there stopped
    /// ([`Upstream::is_removed`]): an index means one server for the hub's whole life.
    upstreams: RwLock<Arc<[Arc<Upstream>]>>,
    catalog: RwLock<Arc<Catalog>>,
    /// The views clients are served ([`views`]): the default one first, then one per profile.
    view_specs: RwLock<Arc<[views::ViewSpec]>>,
    /// Their catalogues, rebuilt with the whole one.
    views: RwLock<Arc<[Arc<Catalog>]>>,
    /// Bumps on every snapshot change of any server; waiters re-check their condition.
    changed: watch::Sender<u64>,
    events: broadcast::Sender<HubEvent>,
    shutdown: watch::Sender<bool>,
    /// Per index: what stops its supervisor, and the supervisor.
    supervisors: Mutex<Vec<Option<Supervisor>>>,
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
    /// Swapped by a reload; a call keeps the policy it started with.
    policy: RwLock<Arc<Policy>>,
    /// Counted where the policy pipeline settles each call; served on `/metrics`.
    pub metrics: Metrics,
    /// The tasks the hub runs for its clients (MCP Tasks, both eras).
    pub(crate) tasks: tasks::Tasks,
    /// Server changes announced so far, and how many of them the catalogue reflects.
    seq: Arc<AtomicU64>,
    rebuilt: AtomicU64,
    /// OpenPact's own tools, served in process.
    builtins: RwLock<Arc<Builtins>>,
    /// Per server: its OAuth credentials, for logins through a client (remote servers only).
    logins: RwLock<Vec<Option<Arc<login::LoginSeat>>>>,
    /// 2026-07-28 requests waiting for their clients' input.
    waiting: stateless::Waiting,
    /// Sessions' requests in flight, by server: a server's request to "the client" goes to
    /// the session whose call it is working on.
    callers: Mutex<Vec<relay::Caller>>,
    next_caller: AtomicU64,
    /// Hosts servers asked for beyond their allow lists, and the refused ones.
    hosts: hosts::Hosts,
    /// Builds the catalogue from the servers' lists (the event loop's, and a reload's).
    builder: Mutex<catalog::Builder>,
    /// What each new upstream is tied to the hub with.
    links: crate::upstream::HubLinks,
    /// The config the hub runs now, and how the last reload went.
    reloads: reload::Reloads,
    /// The embedding program's part, fixed for the hub's life.
    host: Host,
}

/// What a program embedding the hub brings to it (`crate::embed`): its answers to permission
/// questions, and tools of its own served as built-ins.
#[derive(Default)]
pub(crate) struct Host {
    pub(crate) decide: Option<crate::policy::prompt::Decider>,
    pub(crate) tools: Vec<Arc<dyn crate::builtins::Group>>,
}

/// What stops a server's supervisor, and the supervisor.
type Supervisor = (watch::Sender<bool>, JoinHandle<()>);

/// The built-in tools as catalogue entries.
fn builtin_entries(builtins: &Builtins) -> Vec<Entry> {
    builtins
        .tools()
        .iter()
        .map(|t| Entry {
            key: t.name.to_string(),
            json: t.to_json().to_string().into(),
        })
        .collect()
}

/// The secret name an OAuth token is redacted as.
fn token_name(auth: &ServerAuth) -> String {
    format!("OAUTH_TOKEN_{}", auth.server().to_ascii_uppercase())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn read<T: Clone>(l: &RwLock<T>) -> T {
    match l.read() {
        Ok(v) => v.clone(),
        Err(p) => p.into_inner().clone(),
    }
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
        Self::start_hosted(config, state_dir, pick, Host::default())
    }

    /// Like [`Hub::start_selected`], with what an embedding program adds.
    pub(crate) fn start_hosted(
        config: &Config,
        state_dir: &Path,
        pick: impl Fn(&str) -> bool,
        host: Host,
    ) -> Arc<Hub> {
        let mut config = config.clone();
        for sc in config.servers.iter_mut().filter(|sc| !pick(&sc.name)) {
            sc.disabled = true;
        }
        // Built empty, with the config's rules but no secrets, servers or built-ins yet:
        // `apply` puts them in place in the same order a reload does.
        let servers = assemble::server_names(&config);
        let policy = Policy::new(&config.hub.policy, state_dir, &servers, &[], config.label());
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        let sink = Arc::new(HubSink(OnceLock::new()));
        let (client_caps, caps_rx) = watch::channel(None);
        let links = crate::upstream::HubLinks {
            events: ev_tx,
            sink: sink.clone(),
            seq: Arc::new(AtomicU64::new(0)),
            client_caps: caps_rx,
        };
        let (shutdown, _) = watch::channel(false);
        let mut builder = catalog::Builder::new(config.hub.tool_names, &[]);
        let empty = Arc::new(builder.build(&[]));
        let hub = Arc::new(Hub {
            settings: config.hub.clone(),
            upstreams: RwLock::new(Arc::from(Vec::new())),
            catalog: RwLock::new(empty.clone()),
            view_specs: RwLock::new(Arc::from(Vec::new())),
            views: RwLock::new(Arc::from([empty])),
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
            policy: RwLock::new(Arc::new(policy)),
            metrics: Metrics::new(&servers),
            tasks: tasks::Tasks::default(),
            seq: links.seq.clone(),
            rebuilt: AtomicU64::new(0),
            builtins: RwLock::new(Arc::new(Builtins::default())),
            logins: RwLock::new(Vec::new()),
            waiting: stateless::Waiting::new(),
            callers: Mutex::new(Vec::new()),
            next_caller: AtomicU64::new(0),
            hosts: hosts::Hosts::default(),
            builder: Mutex::new(builder),
            links,
            reloads: reload::Reloads::new(&config, state_dir),
            host,
        });
        let _ = sink.0.set(Arc::downgrade(&hub));
        crate::sandbox::sweep_stale_temp();
        // Nothing runs yet, so nothing is left pending.
        let _ = hub.apply(
            None,
            assemble::Assembly::of(config, state_dir),
            &mut ReloadReport::default(),
        );
        events::rebuild_now(&hub);
        tokio::spawn(event_loop(Arc::downgrade(&hub), ev_rx));
        hub
    }

    /// The name of server `i` (`openpact` for the built-ins).
    pub fn server_name(&self, i: usize) -> String {
        catalog::server_name(&self.upstreams(), i).to_string()
    }

    /// Every server by index, removed ones included (see [`Upstream::is_removed`]).
    pub fn upstreams(&self) -> Arc<[Arc<Upstream>]> {
        read(&self.upstreams)
    }

    /// The policy a call starting now goes through.
    pub fn policy(&self) -> Arc<Policy> {
        read(&self.policy)
    }

    /// A tool's data-flow labels, each with where it came from: its own (built-in default,
    /// annotations) and the current config's.
    pub fn tool_labels(&self, tool: &Named) -> crate::policy::flows::Labels {
        self.policy().flows.labels(&tool.qualified, tool.flows)
    }

    pub fn builtins(&self) -> Arc<Builtins> {
        read(&self.builtins)
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        read(&self.catalog)
    }

    /// View `view`'s catalogue (the whole one for an unknown view).
    pub fn view_catalog(&self, view: usize) -> Arc<Catalog> {
        match read(&self.views).get(view) {
            Some(c) => c.clone(),
            None => self.catalog(),
        }
    }

    /// The view of profile `name`.
    pub fn view_named(&self, name: &str) -> Option<usize> {
        read(&self.view_specs)
            .iter()
            .position(|v| v.name.as_deref() == Some(name))
    }

    /// The configured profiles' names, in order.
    pub fn profile_names(&self) -> Vec<String> {
        read(&self.view_specs)
            .iter()
            .filter_map(|v| v.name.clone())
            .collect()
    }

    /// Whether server `i` (or the built-ins) is in view `view`.
    pub fn in_view(&self, view: usize, i: usize) -> bool {
        read(&self.view_specs)
            .get(view)
            .is_none_or(|v| v.shows_server(i))
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

    /// Client sessions alive now.
    pub fn session_count(&self) -> usize {
        lock(&self.sessions)
            .iter()
            .filter(|s| s.strong_count() > 0)
            .count()
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
        let extensions = capabilities.and_then(apps::carried);
        let mut out = String::from("{");
        let declared = ["roots", "sampling", "elicitation"]
            .into_iter()
            .filter_map(|key| Some((key, obj.get(key).filter(|v| *v != "null")?)))
            .chain(extensions.as_deref().map(|e| ("extensions", e)));
        for (key, v) in declared {
            if out.len() > 1 {
                out.push(',');
            }
            out.push_str(&format!("\"{key}\":{v}"));
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
                .upstreams()
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

    /// The downstream `initialize` capabilities: the union of what ready servers offer.
    /// Servers still starting could offer anything, so while any is, every list the hub can
    /// bridge is declared (an empty list is a valid answer, and `list_changed` follows).
    pub fn capabilities(&self) -> String {
        let starting = self.starting();
        let offered = |cap: &str| {
            starting
                || self.upstreams().iter().any(|u| {
                    u.snapshot().state == State::Ready
                        && u.snapshot()
                            .info
                            .as_ref()
                            .is_some_and(|i| i.has_capability(cap))
                })
        };
        let subscribe = starting
            || self.upstreams().iter().any(|u| {
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
        let mut caps = vec![
            "\"tools\":{\"listChanged\":true}".to_string(),
            // Any call can run as a hub task (see `tasks`).
            "\"tasks\":{\"list\":{},\"cancel\":{},\"requests\":{\"tools\":{\"call\":{}}}}"
                .to_string(),
        ];
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
        let policy = self.policy();
        let p = &policy.settings;
        let lists: [(&str, Vec<&String>); 8] = [
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
            ("flows.private", p.flows.private.iter().collect()),
            ("flows.untrusted", p.flows.untrusted.iter().collect()),
            ("flows.egress", p.flows.egress.iter().collect()),
        ];
        for (section, globs) in lists {
            for glob in globs {
                let Some((server, tool)) = glob.split_once(':') else {
                    // No `:`: a built-in tool (or a tool of a server without a prefix).
                    if !glob.contains(['*', '?', '[', '{']) && catalog.tool(glob).is_none() {
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
                let up = self
                    .upstreams()
                    .iter()
                    .find(|u| !u.is_removed() && u.config().prefix() == server)
                    .cloned();
                if up.is_some_and(|u| u.snapshot().state == State::Ready)
                    && catalog.tool(glob).is_none()
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
        self.shutdown.send_replace(true);
        let handles: Vec<_> = std::mem::take(&mut *lock(&self.supervisors))
            .into_iter()
            .flatten()
            .map(|(stop, handle)| {
                let _ = stop.send(true);
                handle
            })
            .collect();
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
        let policy = self.policy();
        let _ = tokio::task::spawn_blocking(move || {
            policy.flush_audit();
            crate::sandbox::remove_temp_root();
        })
        .await;
    }

    /// Instructions for the downstream `initialize`: what openpact is, always (a client
    /// initializing while slow servers start still learns what it is talking to), then each
    /// ready server's own, labelled. Worded to hold whatever the host does to tool names:
    /// hosts add prefixes of their own and swap separators, so the text never spells the
    /// wire form.
    /// Only the servers of view `view` are told of; a view whose tools are searched says so.
    pub fn instructions(&self, view: usize) -> String {
        let mut text = String::from(
            "openpact is an MCP hub: it serves the tools, prompts and resources of several MCP \
             servers as one. The name of each tool and prompt starts with the name of the \
             server that provides it (or a prefix configured for that server); openpact's own \
             tools have plain names. Servers that are still starting add their tools when ready.",
        );
        if self.view_catalog(view).search.is_some() {
            text.push_str(
                " Only a few tools are listed: find the one for a task with search_tools \
                 (describe the task in plain words), then call it with call_tool.",
            );
        }
        let mut first = true;
        for up in self
            .upstreams()
            .iter()
            .filter(|u| !u.is_removed() && self.in_view(view, u.index))
        {
            if let Some(own) = up
                .snapshot()
                .info
                .as_ref()
                .and_then(|i| i.instructions.as_deref())
            {
                if first {
                    text.push_str("\n\nWhat each server says about itself:");
                    first = false;
                }
                text.push_str(&format!("\n\n## {}\n{}", up.name(), own.trim()));
            }
        }
        text
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked while holding it; the data is
    // plain bookkeeping that stays usable.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
