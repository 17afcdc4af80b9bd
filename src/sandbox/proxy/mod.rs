//! The egress proxy: one loopback HTTP proxy per confined server, forwarding only to the hosts
//! its profile allows.
//!
//! A confined server may open TCP connections only to its own proxy's port (the kernel sees
//! to that), so this is where its `sandbox.network.allow` is enforced. It speaks just enough
//! HTTP/1.1 for proxy clients: `CONNECT host:port` tunnels (HTTPS and anything else) and
//! absolute-form plain-HTTP requests, one per client connection. A name is checked against the
//! allow list before it is resolved, and resolved here rather than by the server, so a refused
//! name never reaches DNS; the address it resolves to is checked again, so an allowed name
//! that points at loopback or link-local (DNS rebinding, cloud metadata) reaches nothing local
//! unless an entry names a local host itself. "Any public host" (the known-servers table's
//! entry for servers whose job is any URL) reaches no private network either (the user's
//! router, NAS, services on the machine's LAN address): a private address it alone matches
//! is asked about like a host outside the list.
//!
//! A host that matches no entry is not refused outright: the connection is held while the
//! proxy's [`Gate`] (the hub) decides, by asking the user where someone can answer.
//! Connections to one host that arrive while it is being decided wait for the same answer,
//! so a burst of them raises one question.

use crate::config::hosts::HostPattern;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

mod connection;
mod decide;
mod request;
#[cfg(test)]
mod tests;

/// For resolving and connecting upstream, and for writing the first bytes there.
const CONNECT_DEADLINE: Duration = Duration::from_secs(10);
/// Connections served at once by one proxy; past it, new ones wait in the listen backlog, so a
/// flood from one server cannot exhaust the hub's file descriptors.
const MAX_CONNECTIONS: usize = 256;
/// Backoff after a failed accept (such as running out of descriptors), so it does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// A connection the proxy refused, for the caller to count and show.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub server: String,
    /// The config file its command names, as shown (`None`: the user's own).
    pub config: Option<String>,
    /// As the client named it (lower-cased; an IPv6 address without brackets).
    pub host: String,
    pub port: u16,
    pub reason: String,
    /// Whether an allow entry for the host would let it through (not so for a name that
    /// resolves to a local address: only an entry naming a local host allows that).
    pub listable: bool,
}

impl Refusal {
    /// `host:port` as a client would write it.
    pub fn what(&self) -> String {
        host_port(&self.host, self.port)
    }

    /// The command that allows the host, when one does.
    pub fn fix(&self) -> Option<String> {
        self.listable.then(|| {
            super::refusal::allow_command(
                self.config.as_deref(),
                &self.server,
                crate::config::sandbox::Grant::Net,
                &allow_entry(&self.host, self.port),
            )
        })
    }

    /// What the server's client (and, through the hub, the user) is told.
    pub fn message(&self) -> String {
        let mut text = format!(
            "openpact: server \"{}\" may not reach {}: {}",
            self.server,
            self.what(),
            self.reason
        );
        if let Some(fix) = self.fix() {
            let _ = write!(text, "; to allow it: `{fix}`");
        }
        text
    }
}

/// The entry that allows `host:port`: the bare host for the web's ports (an entry without a
/// port allows any), else with the port.
fn allow_entry(host: &str, port: u16) -> String {
    match port {
        80 | 443 if host.contains(':') => format!("[{host}]"),
        80 | 443 => host.to_owned(),
        _ => host_port(host, port),
    }
}

/// What becomes of a connection to a host outside the allow list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// With the reason, as the refusal records it.
    Refuse(String),
}

/// The proxy's owner: decides about hosts outside the allow list and hears of refusals.
pub trait Gate: Send + Sync {
    /// Whether `host:port`, which matches no allow entry, may be reached; the connection is
    /// held until this answers, so it must answer in bounded time.
    fn decide(&self, host: &str, port: u16) -> Pin<Box<dyn Future<Output = Decision> + Send>>;
    /// Called once for each refused connection.
    fn refused(&self, refusal: &Refusal);
}

/// One server's egress proxy on 127.0.0.1. Dropping it stops the listener and closes every
/// connection it serves.
#[derive(Debug)]
pub struct EgressProxy {
    port: u16,
    listener: JoinHandle<()>,
}

impl EgressProxy {
    /// Binds 127.0.0.1:0 and serves until dropped.
    /// `config` is the config file a refusal's command names (see [`Refusal::config`]).
    pub async fn start(
        server: String,
        config: Option<String>,
        allow: Vec<HostPattern>,
        gate: Arc<dyn Gate>,
    ) -> io::Result<EgressProxy> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let port = listener.local_addr()?.port();
        let rules = Arc::new(Rules {
            server,
            config,
            allow,
            gate,
            deciding: Mutex::new(HashMap::new()),
        });
        let listener = tokio::spawn(accept_loop(listener, rules));
        Ok(EgressProxy { port, listener })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The value for the server's `HTTP_PROXY` / `HTTPS_PROXY`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        // The connections live in the listener task's JoinSet, so they end with it.
        self.listener.abort();
    }
}

/// The answer about one host being decided, for the connections that wait on it.
type Pending = watch::Receiver<Option<Decision>>;

/// What one proxy enforces.
struct Rules {
    server: String,
    /// See [`Refusal::config`].
    config: Option<String>,
    allow: Vec<HostPattern>,
    gate: Arc<dyn Gate>,
    /// Hosts outside the list being decided now.
    deciding: Mutex<HashMap<(String, u16), Pending>>,
}

async fn accept_loop(listener: TcpListener, rules: Arc<Rules>) {
    // Owned by this task, so aborting it drops (and aborts) every connection.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept(), if connections.len() < MAX_CONNECTIONS => match accepted {
                Ok((client, _)) => {
                    let rules = Arc::clone(&rules);
                    connections.spawn(async move { connection::serve(client, &rules).await });
                }
                Err(e) => {
                    tracing::warn!(server = %rules.server, "egress proxy: accept failed: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
}

/// `host:port`, with an IPv6 host in brackets.
pub fn host_port(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => format!("[{host}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}
