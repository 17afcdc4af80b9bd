//! Outbound HTTP for the built-in tools (`web_fetch`, GitHub, chat, calendar feeds, the
//! scripts' `http.get`/`http.post`), with one set of rules: http/https only, a byte cap on
//! bodies, one deadline for the whole exchange, redirects followed by hand, and — for URLs a
//! model chose — a guard against private, loopback and link-local addresses.
//!
//! The guard checks the addresses a name actually resolves to, inside the client's DNS
//! resolver, so the connection goes only to an address that was checked (no second lookup
//! an attacker's DNS could answer differently). IP-literal hosts never reach a resolver, so
//! they are checked before any request is made. Every redirect hop goes through the same
//! checks.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Once, OnceLock};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// The User-Agent sent unless the caller gives one.
pub const USER_AGENT: &str = "OpenPact/0.1 (+https://github.com/open-pact/openpact)";

/// One outbound request.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    /// Overrides `web.timeout` for this request (the whole exchange, redirects included).
    pub timeout: Option<Duration>,
}

impl HttpRequest {
    /// A GET with no headers or body.
    pub fn get(url: impl Into<String>) -> HttpRequest {
        HttpRequest {
            method: "GET".into(),
            url: url.into(),
            headers: Vec::new(),
            body: None,
            timeout: None,
        }
    }
}

/// What came back from the last hop.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    pub status: u16,
    /// The canonical reason phrase for `status` (empty for unknown codes).
    pub status_text: String,
    pub headers: Vec<(String, String)>,
    /// At most `web.max_bytes` bytes.
    pub body: Vec<u8>,
    /// The body was longer than `web.max_bytes`; the rest was not read.
    pub truncated: bool,
    /// The URL after redirects.
    pub final_url: String,
}

impl HttpResponse {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// For an error message when the body has no better one: its first `max_chars`
    /// characters (trimmed), or the reason phrase when it is empty.
    pub(crate) fn excerpt(&self, max_chars: usize) -> String {
        let body = String::from_utf8_lossy(&self.body);
        let body = body.trim();
        if body.is_empty() {
            self.status_text.clone()
        } else {
            body.chars().take(max_chars).collect()
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    #[error("URL must start with http:// or https://")]
    Scheme,
    #[error(
        "refusing to fetch private address {addr} ({host}): set openpact.builtins.web.allowPrivate to allow"
    )]
    Blocked { host: String, addr: IpAddr },
    #[error("too many redirects (more than {0})")]
    TooManyRedirects(usize),
    #[error("timed out after {}", fmt_duration(*.0))]
    Timeout(Duration),
    /// A method or header the caller gave is not valid HTTP.
    #[error("invalid request: {0}")]
    BadRequest(String),
    /// Connection, TLS or protocol failure (never includes the URL, which may hold a token).
    #[error("{0}")]
    Http(String),
}

fn fmt_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Shared HTTP client with the address rules of one [`crate::config::WebSettings`].
/// Cheap to clone (clones share connections).
#[derive(Clone)]
pub struct Fetcher {
    core: Arc<Core>,
    /// A private runtime for [`Fetcher::fetch_blocking`], made on first use. Kept apart from
    /// `core` so a request running on it never holds the last reference to it.
    blocking: Arc<OnceLock<Option<BlockingRuntime>>>,
}

struct Core {
    /// Built on the first request: loading the TLS roots costs milliseconds of CPU and a few
    /// hundred KiB, which a hub whose built-ins never go online should not pay at startup.
    client: OnceLock<Result<reqwest::Client, String>>,
    /// Names resolved without the guard (tests standing in for public servers).
    trusted: Vec<(String, IpAddr)>,
    /// Refuse private addresses (`guard && !allow_private`).
    block: bool,
    max_bytes: u64,
    timeout: Duration,
    max_redirects: usize,
}

/// Owns a runtime and shuts it down without blocking, since the last `Fetcher` may be
/// dropped inside an async context, where a plain runtime drop panics.
struct BlockingRuntime(Option<tokio::runtime::Runtime>);

impl Drop for BlockingRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

static CRYPTO: Once = Once::new();

/// reqwest is built without a default crypto provider (ring instead of aws-lc, which needs a
/// C toolchain); install ring once per process. Another part of the process may have done it
/// already, which is fine.
fn install_crypto_provider() {
    CRYPTO.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Fetcher {
    /// `guard`: refuse private/loopback/link-local/unspecified/multicast addresses (for URLs a
    /// model chose); off for configured provider base URLs.
    pub fn new(web: &crate::config::WebSettings, guard: bool) -> Result<Fetcher, NetError> {
        Self::build(web, guard, Vec::new())
    }

    fn build(
        web: &crate::config::WebSettings,
        guard: bool,
        trusted: Vec<(String, IpAddr)>,
    ) -> Result<Fetcher, NetError> {
        Ok(Fetcher {
            core: Arc::new(Core {
                client: OnceLock::new(),
                trusted,
                block: guard && !web.allow_private,
                max_bytes: web.max_bytes,
                timeout: web.timeout,
                max_redirects: web.max_redirects,
            }),
            blocking: Arc::new(OnceLock::new()),
        })
    }

    /// A guarded fetcher for tests that resolves `host` to `addr` without checking it, to
    /// stand in for a public server on loopback.
    #[cfg(test)]
    pub(crate) fn with_trusted_host(
        web: &crate::config::WebSettings,
        host: &str,
        addr: IpAddr,
    ) -> Result<Fetcher, NetError> {
        Self::build(web, true, vec![(host.to_string(), addr)])
    }

    /// Whether this fetcher refuses private addresses.
    #[cfg(test)]
    pub fn guarded(&self) -> bool {
        self.core.block
    }

    pub async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, NetError> {
        self.core.fetch(req).await
    }

    /// For synchronous callers on a non-async thread (Starlark builtins); must not be called
    /// from inside the tokio runtime's async context (it would block a worker).
    pub fn fetch_blocking(&self, req: HttpRequest) -> Result<HttpResponse, NetError> {
        let rt = self
            .blocking
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("openpact-net")
                    .enable_all()
                    .build()
                    .ok()
                    .map(|rt| BlockingRuntime(Some(rt)))
            })
            .as_ref()
            .and_then(|b| b.0.as_ref())
            .ok_or_else(|| NetError::Http("cannot start the HTTP runtime".into()))?;
        // Run on the private runtime's worker and wait on a plain channel: unlike
        // `Runtime::block_on`, this cannot panic whatever thread the caller is on.
        let core = self.core.clone();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        rt.spawn(async move {
            let _ = tx.send(core.fetch(req).await);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(NetError::Http("the HTTP request was abandoned".into())))
    }
}

impl Core {
    fn client(&self) -> Result<&reqwest::Client, NetError> {
        self.client
            .get_or_init(|| {
                install_crypto_provider();
                let resolver = GuardedResolver {
                    block: self.block,
                    trusted: self.trusted.clone(),
                };
                let mut builder = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .dns_resolver(resolver);
                if self.block {
                    // A proxy would resolve the target itself, past the guard.
                    builder = builder.no_proxy();
                }
                builder
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client: {}", chain(&e)))
            })
            .as_ref()
            .map_err(|e| NetError::Http(e.clone()))
    }

    async fn fetch(&self, req: HttpRequest) -> Result<HttpResponse, NetError> {
        let limit = req.timeout.unwrap_or(self.timeout);
        match tokio::time::timeout(limit, self.run(req)).await {
            Ok(r) => r,
            Err(_) => Err(NetError::Timeout(limit)),
        }
    }

    async fn run(&self, req: HttpRequest) -> Result<HttpResponse, NetError> {
        let HttpRequest {
            method,
            url,
            mut headers,
            mut body,
            timeout: _,
        } = req;
        let mut method = reqwest::Method::from_bytes(method.to_ascii_uppercase().as_bytes())
            .map_err(|_| NetError::BadRequest(format!("unknown method {method:?}")))?;
        let mut url = parse_url(&url)?;
        if !headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("user-agent"))
        {
            headers.push(("User-Agent".into(), USER_AGENT.into()));
        }
        let mut hops = 0usize;
        loop {
            self.check_literal(&url)?;
            tracing::debug!(
                method = %method,
                host = url.host_str().unwrap_or(""),
                "outbound HTTP request"
            );
            let mut rb = self.client()?.request(method.clone(), url.clone());
            for (k, v) in &headers {
                let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                    .map_err(|_| NetError::BadRequest(format!("invalid header name {k:?}")))?;
                let value = reqwest::header::HeaderValue::from_str(v)
                    .map_err(|_| NetError::BadRequest(format!("invalid value for header {k}")))?;
                rb = rb.header(name, value);
            }
            if let Some(b) = &body {
                rb = rb.body(b.clone());
            }
            let mut resp = rb.send().await.map_err(|e| self.map_error(e))?;
            let status = resp.status();
            if status.is_redirection() {
                let location = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string);
                if let Some(location) = location {
                    hops += 1;
                    if hops > self.max_redirects {
                        return Err(NetError::TooManyRedirects(self.max_redirects));
                    }
                    let next = url
                        .join(&location)
                        .map_err(|e| NetError::InvalidUrl(format!("redirect location: {e}")))?;
                    check_scheme(&next)?;
                    // Browser rules: 303 (and 301/302 after a POST) continue as a GET without a body.
                    let to_get = match status.as_u16() {
                        303 => method != reqwest::Method::HEAD,
                        301 | 302 => method == reqwest::Method::POST,
                        _ => false,
                    };
                    if to_get {
                        method = reqwest::Method::GET;
                        body = None;
                        headers.retain(|(k, _)| {
                            !k.eq_ignore_ascii_case("content-type")
                                && !k.eq_ignore_ascii_case("content-length")
                        });
                    }
                    if next.origin() != url.origin() {
                        // Credentials were meant for the first origin only.
                        headers.retain(|(k, _)| {
                            !["authorization", "cookie", "proxy-authorization"]
                                .iter()
                                .any(|s| k.eq_ignore_ascii_case(s))
                        });
                    }
                    url = next;
                    continue;
                }
            }
            let resp_headers = resp
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let cap = usize::try_from(self.max_bytes).unwrap_or(usize::MAX);
            let mut buf = Vec::new();
            let mut truncated = false;
            while let Some(chunk) = resp.chunk().await.map_err(|e| self.map_error(e))? {
                let room = cap - buf.len();
                if chunk.len() > room {
                    buf.extend_from_slice(&chunk[..room]);
                    truncated = true;
                    // Stop here: dropping the response abandons the rest unread.
                    break;
                }
                buf.extend_from_slice(&chunk);
            }
            return Ok(HttpResponse {
                status: status.as_u16(),
                status_text: status.canonical_reason().unwrap_or("").to_string(),
                headers: resp_headers,
                body: buf,
                truncated,
                final_url: url.to_string(),
            });
        }
    }

    /// IP-literal hosts skip DNS (and so the resolver's check): check them here.
    fn check_literal(&self, url: &Url) -> Result<(), NetError> {
        if !self.block {
            return Ok(());
        }
        let ip = match url.host() {
            Some(Host::Ipv4(a)) => IpAddr::V4(a),
            Some(Host::Ipv6(a)) => IpAddr::V6(a),
            _ => return Ok(()),
        };
        if is_private(ip) {
            return Err(NetError::Blocked {
                host: url.host_str().unwrap_or("").to_string(),
                addr: ip,
            });
        }
        Ok(())
    }

    fn map_error(&self, e: reqwest::Error) -> NetError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(s) = source {
            if let Some(b) = s.downcast_ref::<BlockedAddr>() {
                return NetError::Blocked {
                    host: b.host.clone(),
                    addr: b.addr,
                };
            }
            source = s.source();
        }
        if e.is_timeout() {
            return NetError::Timeout(self.timeout);
        }
        NetError::Http(chain(&e.without_url()))
    }
}

/// An error and its causes on one line, deduplicated (hyper repeats its causes).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = Some(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}

fn parse_url(s: &str) -> Result<Url, NetError> {
    let lower = s.trim_start().to_ascii_lowercase();
    if !lower.starts_with("http://") && !lower.starts_with("https://") {
        return Err(NetError::Scheme);
    }
    let url = Url::parse(s.trim()).map_err(|e| NetError::InvalidUrl(e.to_string()))?;
    check_scheme(&url)?;
    Ok(url)
}

fn check_scheme(url: &Url) -> Result<(), NetError> {
    match url.scheme() {
        "http" | "https" if url.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
        "http" | "https" => Err(NetError::InvalidUrl("no host".into())),
        _ => Err(NetError::Scheme),
    }
}

/// The resolver's refusal, found again in reqwest's error chain by [`Core::map_error`].
#[derive(Debug)]
struct BlockedAddr {
    host: String,
    addr: IpAddr,
}

impl std::fmt::Display for BlockedAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves to private address {}", self.host, self.addr)
    }
}

impl std::error::Error for BlockedAddr {}

/// System DNS, then the address check: refuse the name if ANY of its addresses is private,
/// so a name with one public and one private address cannot be raced onto the private one.
struct GuardedResolver {
    block: bool,
    /// Test-only pins (empty otherwise): names resolved to a fixed address, unchecked.
    trusted: Vec<(String, IpAddr)>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let block = self.block;
        let host = name.as_str().to_string();
        let pinned = self
            .trusted
            .iter()
            .find(|(h, _)| h.eq_ignore_ascii_case(&host))
            .map(|(_, a)| *a);
        Box::pin(async move {
            if let Some(addr) = pinned {
                let addrs: Addrs = Box::new(std::iter::once(SocketAddr::new(addr, 0)));
                return Ok(addrs);
            }
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if block && let Some(bad) = found.iter().find(|a| is_private(a.ip())) {
                let refused: Box<dyn std::error::Error + Send + Sync> = Box::new(BlockedAddr {
                    host,
                    addr: bad.ip(),
                });
                return Err(refused);
            }
            let addrs: Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

/// Addresses a model-chosen URL must not reach: private, loopback, link-local (incl. cloud
/// metadata 169.254.169.254), unspecified, multicast, broadcast, shared/CGNAT and reserved
/// ranges; IPv6 forms that embed an IPv4 address are judged by that address.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => private_v4(a),
        IpAddr::V6(a) => private_v6(a),
    }
}

fn private_v4(a: Ipv4Addr) -> bool {
    let o = a.octets();
    a.is_private()
        || a.is_loopback()
        || a.is_link_local()
        || a.is_unspecified()
        || a.is_multicast()
        || a.is_broadcast()
        || o[0] == 0 // "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10 shared (CGNAT)
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24 protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18.0.0/15 benchmarking
        || o[0] >= 240 // reserved
}

fn private_v6(a: Ipv6Addr) -> bool {
    if let Some(v4) = a.to_ipv4_mapped() {
        return private_v4(v4);
    }
    let s = a.segments();
    // Deprecated IPv4-compatible ::a.b.c.d (but not :: and ::1, handled below).
    if s[..6] == [0; 6] && s[6] != 0 {
        return private_v4(Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32));
    }
    // NAT64 64:ff9b::/96 reaches the embedded IPv4 address.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return private_v4(Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32));
    }
    // 6to4 2002:AABB:CCDD::/48 embeds AA.BB.CC.DD.
    if s[0] == 0x2002 {
        return private_v4(Ipv4Addr::from(((s[1] as u32) << 16) | s[2] as u32));
    }
    a.is_loopback()
        || a.is_unspecified()
        || a.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
}

#[cfg(test)]
mod tests;
