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

use crate::config::hosts::{HostPattern, is_local_address, is_private_address};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::timeout;

/// The most a request head may take; proxy requests carry small heads.
const HEAD_LIMIT: usize = 16 * 1024;
/// A client that has not sent its whole head by then is cut off, so it holds no slot for long.
const HEAD_DEADLINE: Duration = Duration::from_secs(10);
/// For resolving and connecting upstream, and for writing the first bytes there.
const CONNECT_DEADLINE: Duration = Duration::from_secs(10);
/// Connections served at once by one proxy; past it, new ones wait in the listen backlog, so a
/// flood from one server cannot exhaust the hub's file descriptors.
const MAX_CONNECTIONS: usize = 256;
/// How long an error answer may take to write, including reading what the client still sends:
/// closing a socket with unread input resets it, and the reset can destroy the answer before
/// the client reads it.
const LINGER: Duration = Duration::from_secs(2);
/// The most a client's unread input is drained after an error answer.
const LINGER_LIMIT: usize = 64 * 1024;
/// Why a connection that waited on another's question is refused when that one went away.
const ABANDONED: &str = "the connection that asked about it ended before an answer";
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
                    connections.spawn(async move { serve(client, &rules).await });
                }
                Err(e) => {
                    tracing::warn!(server = %rules.server, "egress proxy: accept failed: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
}

/// Why a destination could not be reached.
enum Failure {
    /// The gate or the address check said no: 403, and counted. `listable`: see
    /// [`Refusal::listable`].
    Refused { reason: String, listable: bool },
    /// Allowed, but resolving or connecting failed: 502.
    Unreachable(String),
}

/// What a client asked for.
enum Request {
    Connect {
        host: String,
        port: u16,
    },
    /// A plain-HTTP request, with `head` rewritten for the origin server.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

/// Why a request head could not be read.
enum HeadError {
    /// The client went away (or failed) before finishing it: nothing to answer.
    Closed,
    TooLarge,
}

async fn serve(mut client: TcpStream, rules: &Rules) {
    let (buf, end) = match timeout(HEAD_DEADLINE, read_head(&mut client)).await {
        Ok(Ok(head)) => head,
        Ok(Err(HeadError::Closed)) => return,
        Ok(Err(HeadError::TooLarge)) => {
            let body = format!("openpact: the request head is over {HEAD_LIMIT} bytes\n");
            return answer(&mut client, 431, &body).await;
        }
        Err(_) => {
            let body = "openpact: the request head did not arrive in time\n";
            return answer(&mut client, 408, body).await;
        }
    };
    let request = match parse_head(&buf[..end]) {
        Ok(request) => request,
        Err(body) => return answer(&mut client, 400, &body).await,
    };
    let (host, port) = match &request {
        Request::Connect { host, port } | Request::Forward { host, port, .. } => (host, *port),
    };
    let shown = host_port(host, port);
    let mut upstream = match rules.open(host, port).await {
        Ok(upstream) => upstream,
        Err(Failure::Refused { reason, listable }) => {
            let body = format!("{}\n", rules.refuse(host, port, reason, listable).message());
            return answer(&mut client, 403, &body).await;
        }
        Err(Failure::Unreachable(reason)) => {
            tracing::debug!(server = %rules.server, host, port, "egress failed: {reason}");
            let body = format!("openpact: cannot reach {shown}: {reason}\n");
            return answer(&mut client, 502, &body).await;
        }
    };
    tracing::debug!(server = %rules.server, host, port, "egress allowed");
    // Whatever the client sent past the head (the start of a TLS handshake, a request body)
    // belongs upstream too.
    let rest = &buf[end..];
    let opened = async {
        match &request {
            Request::Connect { .. } => {
                upstream.write_all(rest).await?;
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
            }
            Request::Forward { head, .. } => {
                upstream.write_all(head).await?;
                upstream.write_all(rest).await
            }
        }
    };
    match timeout(CONNECT_DEADLINE, opened).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::debug!(server = %rules.server, host, port, "egress: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!(server = %rules.server, host, port, "egress: stalled at the start");
            return;
        }
    }
    // Interactive protocols in the tunnel should not wait for Nagle; failing to set it only
    // costs latency.
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
        tracing::debug!(server = %rules.server, host, port, "egress connection ended: {e}");
    }
}

impl Rules {
    /// Checks `host:port` against the allow list (or has the gate decide about it), and only
    /// then resolves and connects.
    async fn open(&self, host: &str, port: u16) -> Result<TcpStream, Failure> {
        let mut matched = false;
        let mut local_ok = false;
        // Whether an entry names the host (not just "any public host"): only that reaches
        // a private network.
        let mut private_ok = false;
        for pattern in self.allow.iter().filter(|p| p.matches(host, port)) {
            matched = true;
            local_ok |= pattern.names_local();
            private_ok |= !pattern.is_any_public();
        }
        if !matched {
            match self.decide(host, port).await {
                // Allowed as named: a local address only when the name is one.
                Decision::Allow => {
                    local_ok =
                        HostPattern::parse(&host_port(host, port)).is_ok_and(|p| p.names_local());
                    private_ok = true;
                }
                Decision::Refuse(reason) => {
                    return Err(Failure::Refused {
                        reason,
                        listable: true,
                    });
                }
            }
        }
        let resolved: Vec<SocketAddr> =
            match timeout(CONNECT_DEADLINE, tokio::net::lookup_host((host, port))).await {
                Ok(Ok(found)) => found.collect(),
                Ok(Err(e)) => {
                    return Err(Failure::Unreachable(format!("cannot resolve {host}: {e}")));
                }
                Err(_) => return Err(deadline()),
            };
        let addresses = match usable(&resolved, local_ok, private_ok) {
            Ok(addresses) => addresses,
            Err(Unusable::Local(reason)) => {
                return Err(Failure::Refused {
                    reason,
                    listable: false,
                });
            }
            // Only "any public host" matched: asked about like a host outside the list, as
            // naming it in the list would allow it.
            Err(Unusable::Private(ip)) => match self.decide(host, port).await {
                Decision::Allow => usable(&resolved, local_ok, true).unwrap_or_default(),
                Decision::Refuse(reason) => {
                    return Err(Failure::Refused {
                        reason: format!(
                            "it resolves to {ip}, a private address, which \"any public host\" \
                             does not reach and only an entry naming the host or the address \
                             allows; {reason}"
                        ),
                        listable: true,
                    });
                }
            },
        };
        let attempt = async {
            let mut last = format!("{host} has no address");
            for address in addresses {
                match TcpStream::connect(address).await {
                    Ok(stream) => return Ok(stream),
                    Err(e) => last = format!("{address}: {e}"),
                }
            }
            Err(Failure::Unreachable(last))
        };
        timeout(CONNECT_DEADLINE, attempt)
            .await
            .unwrap_or_else(|_| Err(deadline()))
    }

    /// The gate's decision about a host outside the list; connections that come while it
    /// is being decided share it.
    async fn decide(&self, host: &str, port: u16) -> Decision {
        let key = (host.to_owned(), port);
        let (mut waiting, asker) = {
            let mut deciding = self.deciding.lock().unwrap_or_else(PoisonError::into_inner);
            match deciding.get(&key) {
                Some(pending) => (pending.clone(), None),
                None => {
                    let (tx, rx) = watch::channel(None);
                    deciding.insert(key.clone(), rx.clone());
                    (rx, Some(tx))
                }
            }
        };
        if let Some(tx) = asker {
            let decision = self.gate.decide(host, port).await;
            self.deciding
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&key);
            let _ = tx.send(Some(decision.clone()));
            return decision;
        }
        match waiting.wait_for(Option::is_some).await {
            Ok(decided) => decided
                .clone()
                .unwrap_or(Decision::Refuse(ABANDONED.into())),
            Err(_) => Decision::Refuse(ABANDONED.into()),
        }
    }

    fn refuse(&self, host: &str, port: u16, reason: String, listable: bool) -> Refusal {
        tracing::warn!(server = %self.server, host, port, "egress refused: {reason}");
        let refusal = Refusal {
            server: self.server.clone(),
            config: self.config.clone(),
            host: host.to_owned(),
            port,
            reason,
            listable,
        };
        self.gate.refused(&refusal);
        refusal
    }
}

/// Why [`usable`] left no address to connect to.
#[derive(Debug, PartialEq, Eq)]
enum Unusable {
    /// Every address was local; the reason for refusing.
    Local(String),
    /// Every address was local or private, and this one private.
    Private(IpAddr),
}

/// The addresses of `resolved` the proxy may connect to: local ones (loopback, link-local,
/// unspecified) only when `local_ok`, that is when an allow entry matching the name names a
/// local host itself; private ones (see [`is_private_address`]) only when `private_ok`, that
/// is when an entry matching it names the host rather than being "any public host".
fn usable(
    resolved: &[SocketAddr],
    local_ok: bool,
    private_ok: bool,
) -> Result<Vec<SocketAddr>, Unusable> {
    let reachable: Vec<SocketAddr> = resolved
        .iter()
        .filter(|a| local_ok || !is_local_address(a.ip()))
        .filter(|a| private_ok || !is_private_address(a.ip()))
        .copied()
        .collect();
    if !reachable.is_empty() {
        return Ok(reachable);
    }
    if let Some(private) = resolved
        .iter()
        .find(|a| !private_ok && is_private_address(a.ip()))
    {
        return Err(Unusable::Private(private.ip()));
    }
    match resolved.first() {
        Some(local) => Err(Unusable::Local(format!(
            "it resolves to {}, a local address, which only an entry naming a local host (such \
             as `localhost:PORT` or the address itself) allows",
            local.ip()
        ))),
        None => Ok(Vec::new()),
    }
}

/// Why a connection allowed by the list still failed: it took too long.
fn deadline() -> Failure {
    Failure::Unreachable(format!(
        "no connection within {} s",
        CONNECT_DEADLINE.as_secs()
    ))
}

/// Reads up to the blank line that ends the head; returns what was read and where the head
/// ends (bytes past it were sent ahead by the client).
async fn read_head(client: &mut TcpStream) -> Result<(Vec<u8>, usize), HeadError> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let scanned = buf.len().saturating_sub(3);
        let n = match client.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(HeadError::Closed),
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        match head_end(&buf, scanned) {
            Some(end) if end <= HEAD_LIMIT => return Ok((buf, end)),
            Some(_) => return Err(HeadError::TooLarge),
            None if buf.len() >= HEAD_LIMIT => return Err(HeadError::TooLarge),
            None => {}
        }
    }
}

/// Where the head ends: just past the first empty line (CRLF, or a bare LF as RFC 9112
/// tolerates), looking from `from`.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    memchr::memchr_iter(b'\n', &buf[from..])
        .map(|i| from + i)
        .find_map(|i| match &buf[i + 1..] {
            [b'\n', ..] => Some(i + 2),
            [b'\r', b'\n', ..] => Some(i + 3),
            _ => None,
        })
}

/// Parses a request head; an error is the body of a 400 answer.
fn parse_head(head: &[u8]) -> Result<Request, String> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let request_line = lines.next().unwrap_or_default();
    let request_line = std::str::from_utf8(request_line)
        .ok()
        .filter(|l| l.bytes().all(|b| b.is_ascii_graphic() || b == b' '))
        .ok_or_else(|| malformed("the request line is not ASCII text"))?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed("expected `METHOD TARGET HTTP/1.1`"));
    };
    if method.is_empty() || !method.bytes().all(token_byte) {
        return Err(malformed("the method is not a token"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(malformed("only HTTP/1.1 and HTTP/1.0 are spoken"));
    }
    let mut headers = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        if line.starts_with(b" ") || line.starts_with(b"\t") {
            return Err(malformed("folded header lines are not accepted"));
        }
        let colon =
            memchr::memchr(b':', line).ok_or_else(|| malformed("a header line has no `:`"))?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.is_empty() || !name.iter().all(|&b| token_byte(b)) {
            return Err(malformed("a header name is not a token"));
        }
        if value.iter().any(|&b| b == b'\r' || b == 0) {
            return Err(malformed("a header value has a control character"));
        }
        // Token bytes are ASCII.
        let name = std::str::from_utf8(name).unwrap_or_default();
        headers.push((name, value));
    }
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = parse_authority(target, None)?;
        return Ok(Request::Connect { host, port });
    }
    let Some(rest) = strip_prefix_ignore_case(target, "http://") else {
        if target.starts_with('/') || target == "*" {
            return Err(
                "openpact: this is the egress proxy of a sandboxed MCP server, not a web \
                 server; send requests in absolute form (`GET http://host/path`) or tunnel \
                 with `CONNECT host:port`\n"
                    .to_owned(),
            );
        }
        if strip_prefix_ignore_case(target, "https://").is_some() {
            return Err(malformed("tunnel https with `CONNECT host:443`"));
        }
        return Err(malformed("the target is not an http:// URL"));
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    let (host, port) = parse_authority(authority, Some(80))?;
    let path = path.split('#').next().unwrap_or_default();
    let head = origin_head(method, authority, path, version, &headers);
    Ok(Request::Forward { host, port, head })
}

/// The head sent upstream for a plain-HTTP request: origin-form target, `Host` from the URL
/// (RFC 9112 §3.2.2: a proxy replaces the client's), no hop-by-hop headers, and
/// `Connection: close`, since the proxy forwards one request per connection.
fn origin_head(
    method: &str,
    authority: &str,
    path: &str,
    version: &str,
    headers: &[(&str, &[u8])],
) -> Vec<u8> {
    let slash = if path.starts_with('/') { "" } else { "/" };
    let start = format!("{method} {slash}{path} {version}\r\nHost: {authority}\r\n");
    // Headers a `Connection` header names are hop-by-hop too; the framing ones stay, since
    // the body is forwarded as it came.
    let mut nominated: Vec<String> = Vec::new();
    for (_, value) in headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
    {
        let value = String::from_utf8_lossy(value);
        nominated.extend(value.split(',').map(|t| t.trim().to_ascii_lowercase()));
    }
    let mut head = start.into_bytes();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        let framing = lower == "content-length" || lower == "transfer-encoding";
        if lower == "host"
            || lower == "connection"
            || lower == "keep-alive"
            || lower.starts_with("proxy-")
            || (!framing && nominated.contains(&lower))
        {
            continue;
        }
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// `host:port`, `[v6]:port`, or (with a default port) either without the port. The host
/// comes back lower-cased, an IPv6 address without brackets.
fn parse_authority(authority: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or_else(|| malformed("an IPv6 address has no closing `]`"))?;
        let v6: Ipv6Addr = inside
            .parse()
            .map_err(|_| malformed("the bracketed host is not an IPv6 address"))?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| malformed("junk after the IPv6 address"))?,
            ),
        };
        (v6.to_string(), port)
    } else {
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        let valid = !host.is_empty()
            && host.len() <= 254
            && host.bytes().all(|b| name_byte(b) || b == b'.');
        if !valid {
            return Err(malformed("the host is not a host name or an address"));
        }
        (host.to_ascii_lowercase(), port)
    };
    let port = match (port, default_port) {
        (Some(""), Some(default)) | (None, Some(default)) => default,
        (None, None) => return Err(malformed("CONNECT needs `host:port`")),
        // `parse` alone would take a sign (`+80`).
        (Some(text), _) => match text.parse::<u16>() {
            Ok(port) if port != 0 && text.bytes().all(|b| b.is_ascii_digit()) => port,
            _ => return Err(malformed("the port is not a number from 1 to 65535")),
        },
    };
    Ok((host, port))
}

/// `host:port`, with an IPv6 host in brackets.
pub fn host_port(host: &str, port: u16) -> String {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => format!("[{host}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

fn malformed(what: &str) -> String {
    format!("openpact: malformed proxy request: {what}\n")
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// RFC 9110 `tchar`.
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// Writes a short plain-text answer and closes, reading (and discarding) what the client still
/// sends for a moment so the close does not reset the connection before the answer is read.
async fn answer(client: &mut TcpStream, status: u16, body: &str) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Error",
    };
    let mut response = format!("HTTP/1.1 {status} {reason}\r\n");
    let _ = write!(
        response,
        "Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let close = async {
        client.write_all(response.as_bytes()).await?;
        client.shutdown().await?;
        let mut drained = 0;
        let mut sink = [0u8; 4096];
        while drained < LINGER_LIMIT {
            match client.read(&mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<_, io::Error>(())
    };
    let _ = timeout(LINGER, close).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    const WAIT: Duration = Duration::from_secs(10);

    /// An HTTP origin on loopback that answers each request with the head (and body) it got.
    async fn echo_origin() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    let end = loop {
                        if let Some(end) = head_end(&buf, 0) {
                            break end;
                        }
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            let l = l.to_ascii_lowercase();
                            l.strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    while buf.len() < end + length {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let echoed = &buf[..end + length];
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        echoed.len()
                    );
                    let _ = s.write_all(reply.as_bytes()).await;
                    let _ = s.write_all(echoed).await;
                    let _ = s.shutdown().await;
                });
            }
        });
        port
    }

    type Refusals = Arc<Mutex<Vec<Refusal>>>;

    /// A gate that answers every host outside the list with `answer` after `delay`, counting
    /// the questions and recording the refusals.
    struct Recorder {
        seen: Refusals,
        asked: std::sync::atomic::AtomicUsize,
        answer: Decision,
        delay: Duration,
    }

    impl Gate for Recorder {
        fn decide(&self, _: &str, _: u16) -> Pin<Box<dyn Future<Output = Decision> + Send>> {
            self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let (answer, delay) = (self.answer.clone(), self.delay);
            Box::pin(async move {
                tokio::time::sleep(delay).await;
                answer
            })
        }
        fn refused(&self, r: &Refusal) {
            self.seen.lock().unwrap().push(r.clone());
        }
    }

    async fn gated(
        allow: &[String],
        answer: Decision,
        delay: Duration,
    ) -> (EgressProxy, Arc<Recorder>) {
        let gate = Arc::new(Recorder {
            seen: Refusals::default(),
            asked: Default::default(),
            answer,
            delay,
        });
        let allow = allow
            .iter()
            .map(|p| HostPattern::parse(p).unwrap())
            .collect();
        let proxy = EgressProxy::start("srv".into(), None, allow, gate.clone())
            .await
            .unwrap();
        (proxy, gate)
    }

    async fn proxy(allow: &[String]) -> (EgressProxy, Refusals) {
        let no = Decision::Refuse("nobody to ask".into());
        let (proxy, gate) = gated(allow, no, Duration::ZERO).await;
        (proxy, gate.seen.clone())
    }

    /// Sends `request` to the proxy and reads until it closes.
    async fn exchange(proxy: &EgressProxy, request: &[u8]) -> String {
        exchange_at(proxy.port(), request).await
    }

    async fn exchange_at(port: u16, request: &[u8]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(request).await.unwrap();
        let mut out = Vec::new();
        timeout(WAIT, s.read_to_end(&mut out))
            .await
            .expect("the proxy closes")
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[tokio::test]
    async fn connect_tunnels_bytes_both_ways() {
        let origin = echo_origin().await;
        let (proxy, refusals) = proxy(&[format!("127.0.0.1:{origin}")]).await;
        assert_eq!(proxy.url(), format!("http://127.0.0.1:{}", proxy.port()));
        let mut s = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        // Bytes sent with the head go through, and so do bytes sent after the answer.
        let connect = format!(
            "CONNECT 127.0.0.1:{origin} HTTP/1.1\r\nHost: 127.0.0.1:{origin}\r\n\r\nGET /inside HTTP/1.1\r\n"
        );
        s.write_all(connect.as_bytes()).await.unwrap();
        let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
        let mut got = vec![0u8; established.len()];
        timeout(WAIT, s.read_exact(&mut got))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got, established);
        s.write_all(b"X-Inside: yes\r\n\r\n").await.unwrap();
        let mut out = String::new();
        timeout(WAIT, s.read_to_string(&mut out))
            .await
            .unwrap()
            .unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
        assert!(
            out.contains("GET /inside HTTP/1.1\r\nX-Inside: yes\r\n\r\n"),
            "{out}"
        );
        assert!(refusals.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn connect_to_a_port_not_allowed_is_refused_once() {
        let origin = echo_origin().await;
        let (proxy, refusals) = proxy(&[format!("127.0.0.1:{origin}")]).await;
        let other = if origin == 1 { 2 } else { origin - 1 };
        let out = exchange(
            &proxy,
            format!("CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(out.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{out}");
        assert!(
            out.ends_with(&format!(
                "\r\n\r\nopenpact: server \"srv\" may not reach 127.0.0.1:{other}: nobody to \
                 ask; to allow it: `openpact sandbox allow srv net 127.0.0.1:{other}`\n"
            )),
            "{out}"
        );
        let refusals = refusals.lock().unwrap();
        assert_eq!(refusals.len(), 1);
        assert_eq!(refusals[0].server, "srv");
        assert_eq!(refusals[0].host, "127.0.0.1");
        assert_eq!(refusals[0].port, other);
    }

    #[tokio::test]
    async fn plain_http_goes_upstream_in_origin_form_without_proxy_headers() {
        let origin = echo_origin().await;
        let (proxy, refusals) = proxy(&[format!("127.0.0.1:{origin}")]).await;
        let request = format!(
            "POST http://127.0.0.1:{origin}/path?q=1 HTTP/1.1\r\nHost: elsewhere\r\n\
             Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
             Connection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\nX-Hop: 1\r\n\
             X-Test: kept\r\nContent-Length: 5\r\n\r\nhello"
        );
        let out = exchange(&proxy, request.as_bytes()).await;
        let (_, echoed) = out.split_once("\r\n\r\n").unwrap();
        assert_eq!(
            echoed,
            format!(
                "POST /path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{origin}\r\nX-Test: kept\r\n\
                 Content-Length: 5\r\nConnection: close\r\n\r\nhello"
            )
        );
        // No path at all is `/`.
        let out = exchange(
            &proxy,
            format!("GET http://127.0.0.1:{origin} HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(out.contains("\r\n\r\nGET / HTTP/1.1\r\n"), "{out}");
        assert!(refusals.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_name_not_listed_is_refused_before_it_is_resolved() {
        let (proxy, refusals) = proxy(&["*.example.com".into(), "127.0.0.1".into()]).await;
        let out = exchange(&proxy, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 403 "), "{out}");
        assert!(out.contains("may not reach evil.example:443"), "{out}");
        let out = exchange(
            &proxy,
            b"GET http://EVIL.example/x HTTP/1.1\r\nHost: evil.example\r\n\r\n",
        )
        .await;
        assert!(out.contains("may not reach evil.example:80"), "{out}");
        let refusals = refusals.lock().unwrap();
        assert_eq!(refusals.len(), 2);
        for r in refusals.iter() {
            assert_eq!(r.host, "evil.example");
            // The gate's reason: it comes before any lookup.
            assert_eq!(r.reason, "nobody to ask");
        }
        assert_eq!(
            refusals[0].fix().unwrap(),
            "openpact sandbox allow srv net evil.example"
        );
    }

    #[tokio::test]
    async fn localhost_works_when_an_entry_names_it() {
        let origin = echo_origin().await;
        let (proxy, refusals) = proxy(&[format!("localhost:{origin}")]).await;
        let out = exchange(
            &proxy,
            format!("CONNECT localhost:{origin} HTTP/1.1\r\n\r\nGET /local HTTP/1.1\r\n\r\n")
                .as_bytes(),
        )
        .await;
        assert!(
            out.starts_with("HTTP/1.1 200 Connection established\r\n\r\n"),
            "{out}"
        );
        assert!(out.contains("GET /local HTTP/1.1"), "{out}");
        assert!(refusals.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_wildcard_does_not_allow_localhost() {
        let origin = echo_origin().await;
        let (proxy, refusals) = proxy(&["*.example.com".into()]).await;
        let out = exchange(
            &proxy,
            format!("CONNECT localhost:{origin} HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(out.starts_with("HTTP/1.1 403 "), "{out}");
        assert_eq!(refusals.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn an_allowed_host_that_does_not_answer_gets_502_not_a_refusal() {
        let closed = {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            listener.local_addr().unwrap().port()
        };
        let (proxy, refusals) = proxy(&["127.0.0.1".into()]).await;
        let out = exchange(
            &proxy,
            format!("CONNECT 127.0.0.1:{closed} HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(out.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{out}");
        assert!(
            out.contains(&format!("cannot reach 127.0.0.1:{closed}")),
            "{out}"
        );
        assert!(refusals.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_host_the_gate_allows_goes_through_and_a_burst_asks_once() {
        let origin = echo_origin().await;
        // Long enough for the whole burst to arrive while the first is being decided.
        let slow = Duration::from_secs(2);
        let (proxy, gate) = gated(&["*.example.com".into()], Decision::Allow, slow).await;
        let request = format!("GET http://127.0.0.1:{origin}/held HTTP/1.1\r\n\r\n");
        let burst: Vec<_> = (0..5)
            .map(|_| {
                let (port, request) = (proxy.port(), request.clone());
                tokio::spawn(async move { exchange_at(port, request.as_bytes()).await })
            })
            .collect();
        for one in burst {
            let out = one.await.unwrap();
            assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
            assert!(out.contains("GET /held HTTP/1.1"), "{out}");
        }
        let asked = || gate.asked.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(asked(), 1, "one question for the burst");
        assert!(gate.seen.lock().unwrap().is_empty());
        // Decided, so the next one is asked about afresh.
        exchange(&proxy, request.as_bytes()).await;
        assert_eq!(asked(), 2);
    }

    #[test]
    fn local_addresses_need_an_entry_that_names_them() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        for local in [
            "127.0.0.1:80",
            "127.1.2.3:80",
            "169.254.169.254:80",
            "0.0.0.0:80",
            "[::1]:80",
            "[fe80::1]:80",
            "[::]:80",
            "[::ffff:127.0.0.1]:80",
            "[fd00:ec2::254]:80",
        ] {
            let Err(Unusable::Local(reason)) = usable(&[addr(local)], false, true) else {
                panic!("{local} is local");
            };
            assert!(reason.contains("local address"), "{local}: {reason}");
            assert_eq!(usable(&[addr(local)], true, true).unwrap(), [addr(local)]);
        }
        // A name that resolves both ways reaches only its remote address.
        let mixed = [addr("127.0.0.1:443"), addr("93.184.216.34:443")];
        assert_eq!(
            usable(&mixed, false, false).unwrap(),
            [addr("93.184.216.34:443")]
        );
        assert_eq!(
            usable(&[addr("[2606:4700::1111]:443")], false, false)
                .unwrap()
                .len(),
            1
        );
        assert!(usable(&[], false, false).unwrap().is_empty());
    }

    #[test]
    fn private_addresses_need_an_entry_that_names_the_host() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        for private in [
            "10.0.0.1:443",
            "172.16.5.4:80",
            "192.168.1.1:80",
            "100.64.0.1:80",
            "[fd12::1]:80",
            "[::ffff:192.168.1.1]:80",
        ] {
            let only = [addr(private)];
            assert_eq!(
                usable(&only, false, false),
                Err(Unusable::Private(addr(private).ip()))
            );
            assert_eq!(usable(&only, false, true).unwrap(), only);
        }
        // Public ones are preferred; local ones stay local whatever names the host.
        let mixed = [addr("192.168.1.1:443"), addr("93.184.216.34:443")];
        assert_eq!(
            usable(&mixed, false, false).unwrap(),
            [addr("93.184.216.34:443")]
        );
        let local_and_private = [addr("127.0.0.1:80"), addr("10.0.0.1:80")];
        assert_eq!(
            usable(&local_and_private, false, true).unwrap(),
            [addr("10.0.0.1:80")]
        );
        assert_eq!(
            usable(&local_and_private, false, false),
            Err(Unusable::Private(addr("10.0.0.1:80").ip()))
        );
    }

    #[tokio::test]
    async fn any_public_host_asks_about_a_private_address_and_names_the_fix() {
        let gate = Arc::new(Recorder {
            seen: Refusals::default(),
            asked: Default::default(),
            answer: Decision::Refuse("nobody to ask".into()),
            delay: Duration::ZERO,
        });
        let allow = vec![HostPattern::any_public()];
        let proxy = EgressProxy::start("srv".into(), None, allow, gate.clone())
            .await
            .unwrap();
        let out = exchange(&proxy, b"CONNECT 192.168.1.1:8080 HTTP/1.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
        assert!(out.contains("192.168.1.1, a private address"), "{out}");
        assert!(
            out.contains("openpact sandbox allow srv net 192.168.1.1:8080"),
            "{out}"
        );
        assert_eq!(gate.asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        let seen = gate.seen.lock().unwrap().clone();
        assert!(seen.len() == 1 && seen[0].listable, "{seen:?}");
        // Loopback stays local: refused without asking, and no entry of this kind fixes it.
        let out = exchange(&proxy, b"CONNECT 127.0.0.1:8080 HTTP/1.1\r\n\r\n").await;
        assert!(out.contains("a local address"), "{out}");
        assert_eq!(gate.asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn malformed_heads_get_400_and_a_close() {
        let (proxy, refusals) = proxy(&["127.0.0.1".into()]).await;
        for bad in [
            "NONSENSE\r\n\r\n",
            "GET http://127.0.0.1/ HTTP/9.9\r\n\r\n",
            "GET  http://127.0.0.1/ HTTP/1.1\r\n\r\n",
            "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n",
            "CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n",
            "CONNECT 127.0.0.1:99999 HTTP/1.1\r\n\r\n",
            "CONNECT [::1 HTTP/1.1\r\n\r\n",
            "CONNECT user@127.0.0.1:80 HTTP/1.1\r\n\r\n",
            "GET http://127.0.0.1/ HTTP/1.1\r\nNo colon\r\n\r\n",
            "GET http://127.0.0.1/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
            "GET https://127.0.0.1/ HTTP/1.1\r\n\r\n",
            "GET ftp://127.0.0.1/ HTTP/1.1\r\n\r\n",
        ] {
            let out = exchange(&proxy, bad.as_bytes()).await;
            assert!(
                out.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{bad:?}: {out}"
            );
            assert!(out.contains("malformed"), "{bad:?}: {out}");
        }
        assert!(refusals.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn origin_form_requests_are_told_this_is_a_proxy() {
        let (proxy, _) = proxy(&["127.0.0.1".into()]).await;
        let out = exchange(&proxy, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await;
        assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
        assert!(out.contains("egress proxy"), "{out}");
    }

    #[tokio::test]
    async fn an_oversized_head_gets_431_and_a_close() {
        let (proxy, _) = proxy(&["127.0.0.1".into()]).await;
        let mut request = b"GET http://127.0.0.1/ HTTP/1.1\r\nX-Big: ".to_vec();
        request.resize(HEAD_LIMIT + 4096, b'a');
        let out = exchange(&proxy, &request).await;
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    }

    #[tokio::test]
    async fn a_silent_client_does_not_hold_up_others() {
        let origin = echo_origin().await;
        let (proxy, _) = proxy(&[format!("127.0.0.1:{origin}")]).await;
        let _silent = TcpStream::connect(("127.0.0.1", proxy.port()))
            .await
            .unwrap();
        let out = exchange(
            &proxy,
            format!("GET http://127.0.0.1:{origin}/ HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    }

    #[tokio::test]
    async fn dropping_the_proxy_closes_its_port_and_its_tunnels() {
        let origin = echo_origin().await;
        let (proxy, _) = proxy(&[format!("127.0.0.1:{origin}")]).await;
        let port = proxy.port();
        let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        s.write_all(format!("CONNECT 127.0.0.1:{origin} HTTP/1.1\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut got = [0u8; 39];
        timeout(WAIT, s.read_exact(&mut got))
            .await
            .unwrap()
            .unwrap();
        drop(proxy);
        // The tunnel is open (the origin waits for a request) until the proxy goes.
        let mut rest = Vec::new();
        let closed = timeout(WAIT, s.read_to_end(&mut rest)).await.unwrap();
        assert!(closed.is_err() || rest.is_empty(), "{closed:?} {rest:?}");
        assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
    }
}
