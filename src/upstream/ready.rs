//! Bringing a new connection to ready in the era the server speaks: the plan (`initialize`,
//! `server/discover`, or a probe for `auto`), the handshake, and the client capabilities
//! declared upstream.

use super::{CallError, Connection, Era, HandshakeError, ServerInfo, State, Upstream};
use super::{handshake, stateless};
use crate::config::{Protocol, Transport};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the next connection starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    Initialize,
    Discover,
    Probe,
}

/// How long a server's `initialize` waits for the downstream client to say what it supports
/// (the process is already starting meanwhile). Editors send `initialize` right away and CLI
/// commands declare nothing at once, so the wait only ever runs out for a client that is
/// slow to start (a Node client on a loaded machine took over a second): then the servers
/// are told `{}` and list only the tools that need no client capability.
const CLIENT_CAPS_WAIT: Duration = Duration::from_secs(3);

impl Upstream {
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

    /// Runs the handshake on a new connection and publishes the server as ready: `initialize`,
    /// then `initialized` (called with the negotiated version), then every list.
    pub(super) async fn handshake(
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

    /// The capabilities to declare upstream: what the downstream client declared, as soon as
    /// it has (or `{}` if it has not said within a moment).
    async fn client_capabilities(&self) -> String {
        let mut rx = self.client_caps.clone();
        let _ = tokio::time::timeout(CLIENT_CAPS_WAIT, rx.wait_for(Option::is_some)).await;
        let caps = rx.borrow().clone();
        caps.unwrap_or_else(|| "{}".to_string())
    }
}
