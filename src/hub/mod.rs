//! Many upstream servers as one: starts them in parallel, keeps the merged catalogue current,
//! routes calls by a lookup table, and tells downstream sessions when the catalogue changes.
//!
//! Knows upstreams and sessions; knows nothing of stdin, HTTP or the terminal.

pub mod catalog;
pub mod names;
pub mod session;

pub use catalog::{Catalog, CatalogTool};
pub use session::Session;

use crate::config::{Config, HubSettings};
use crate::jsonrpc::{self, Kind, Message};
use crate::upstream::{CallError, Event, State, Upstream};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::JoinHandle;

/// Something every downstream session may need to pass on.
#[derive(Debug, Clone)]
pub enum HubEvent {
    ToolsChanged,
}

pub struct Hub {
    pub settings: HubSettings,
    upstreams: Vec<Arc<Upstream>>,
    catalog: RwLock<Arc<Catalog>>,
    /// Bumps on every snapshot change of any server; waiters re-check their condition.
    changed: watch::Sender<u64>,
    events: broadcast::Sender<HubEvent>,
    shutdown: watch::Sender<bool>,
    supervisors: std::sync::Mutex<Vec<JoinHandle<()>>>,
    started: Instant,
}

/// Why a tool call could not be routed.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("Unknown tool: {0}")]
    UnknownTool(String),
    #[error("tool '{tool}' belongs to server '{server}', which is {state}")]
    ServerDown {
        tool: String,
        server: String,
        state: String,
    },
}

impl RouteError {
    pub fn code(&self) -> i64 {
        match self {
            RouteError::UnknownTool(_) => jsonrpc::code::INVALID_PARAMS,
            RouteError::ServerDown { .. } => crate::upstream::code::UNAVAILABLE,
        }
    }
}

impl Hub {
    /// Starts every enabled server of `config` (in parallel) and returns at once.
    pub fn start(config: &Config) -> Arc<Hub> {
        Self::start_selected(config, |_| true)
    }

    /// Like [`Hub::start`], but only servers for which `pick` is true are started (the CLI
    /// starts just the server it needs); the others stay disabled.
    pub fn start_selected(config: &Config, pick: impl Fn(&str) -> bool) -> Arc<Hub> {
        let (ev_tx, ev_rx) = mpsc::unbounded_channel();
        let upstreams: Vec<_> = config
            .servers
            .iter()
            .enumerate()
            .map(|(i, sc)| {
                let mut sc = sc.clone();
                if !pick(&sc.name) {
                    sc.disabled = true;
                }
                Upstream::new(i, sc, config.hub.max_message_size, ev_tx.clone())
            })
            .collect();
        drop(ev_tx);
        let (shutdown, shutdown_rx) = watch::channel(false);
        let hub = Arc::new(Hub {
            settings: config.hub.clone(),
            upstreams,
            catalog: RwLock::new(Arc::new(Catalog::build(&[], config.hub.tool_names))),
            changed: watch::channel(0).0,
            events: broadcast::channel(64).0,
            shutdown,
            supervisors: std::sync::Mutex::new(Vec::new()),
            started: Instant::now(),
        });
        let handles: Vec<_> = hub
            .upstreams
            .iter()
            .map(|up| tokio::spawn(up.clone().supervise(shutdown_rx.clone())))
            .collect();
        if let Ok(mut s) = hub.supervisors.lock() {
            *s = handles;
        }
        tokio::spawn(event_loop(Arc::downgrade(&hub), ev_rx));
        hub
    }

    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
    }

    pub fn upstream_named(&self, name: &str) -> Option<&Arc<Upstream>> {
        self.upstreams.iter().find(|u| u.name() == name)
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        match self.catalog.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.events.subscribe()
    }

    /// True while some server is still on its way to its first ready or failed state.
    pub fn starting(&self) -> bool {
        self.upstreams
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

    /// Resolves a tool name of any accepted form to its server and upstream name.
    pub fn route(&self, name: &str) -> Result<(Arc<Upstream>, String), RouteError> {
        let catalog = self.catalog();
        if let Some(t) = catalog.find(name) {
            return Ok((self.upstreams[t.upstream].clone(), t.original.clone()));
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
                    tool: name.into(),
                    server: up.name().into(),
                    state: up.describe_state(),
                });
            }
        }
        Err(RouteError::UnknownTool(name.into()))
    }

    /// Calls a tool by any accepted name. `params` is the downstream `tools/call` params
    /// object; only its `name` is rewritten, everything else passes through untouched.
    pub async fn call_tool(
        &self,
        name: &str,
        params: &jsonrpc::RawObject<'_>,
    ) -> Result<Message, HubCallError> {
        let (up, original) = match self.route(name) {
            Ok(found) => found,
            // Its server may still be starting: wait for it as `tools/list` would.
            Err(_) if self.starting() => {
                let left = self
                    .settings
                    .list_wait
                    .saturating_sub(self.started.elapsed());
                self.wait_until(left, || self.route(name).is_ok() || !self.starting())
                    .await;
                self.route(name)?
            }
            Err(e) => return Err(e.into()),
        };
        let upstream_params = params.with("name", &jsonrpc::quote(&original));
        Ok(up.request("tools/call", Some(&upstream_params)).await?)
    }

    /// Stops every server (in parallel) and waits for them, at most about two seconds.
    pub async fn shutdown(&self) {
        let _ = self.shutdown.send(true);
        let handles: Vec<_> = match self.supervisors.lock() {
            Ok(mut s) => std::mem::take(&mut *s),
            Err(_) => Vec::new(),
        };
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
            crate::config::ToolNames::Qualified => ":",
            crate::config::ToolNames::Portable => "__",
        };
        Some(format!(
            "openpact serves the tools of several MCP servers; each tool is named SERVER{sep}TOOL. What each server says about itself:\n\n{}",
            parts.join("\n\n")
        ))
    }
}

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

async fn event_loop(hub: std::sync::Weak<Hub>, mut rx: mpsc::UnboundedReceiver<Event>) {
    while let Some(first) = rx.recv().await {
        let Some(hub) = hub.upgrade() else { return };
        // Coalesce a burst (50 servers coming up) into one rebuild and one announcement.
        let mut rebuild = false;
        let mut next = Some(first);
        while let Some(ev) = next.take() {
            match ev {
                Event::Changed(_) => rebuild = true,
                Event::Notification(i, m) => {
                    tracing::debug!(server = %hub.upstreams[i].name(), method = m.method(), "notification not forwarded yet");
                }
                Event::Request(i, m) => {
                    if let Some(conn) = hub.upstreams[i].connection() {
                        let msg =
                            format!("openpact does not forward {} to clients yet", m.method());
                        let _ = conn.send(jsonrpc::error(
                            m.id(),
                            jsonrpc::code::METHOD_NOT_FOUND,
                            &msg,
                            None,
                        ));
                    }
                    debug_assert_eq!(m.kind(), Kind::Request);
                }
            }
            next = rx.try_recv().ok();
        }
        if rebuild {
            let fresh = Catalog::build(&hub.upstreams, hub.settings.tool_names);
            let changed = {
                let mut cur = hub
                    .catalog
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let changed = cur.fingerprint != fresh.fingerprint;
                *cur = Arc::new(fresh);
                changed
            };
            hub.changed.send_modify(|g| *g += 1);
            // Servers stopping at shutdown empty the catalogue; nobody needs to hear that.
            if changed && !*hub.shutdown.borrow() {
                let _ = hub.events.send(HubEvent::ToolsChanged);
            }
        }
    }
}
