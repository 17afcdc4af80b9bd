//! Remote MCP servers over HTTP: the Streamable HTTP client (the `initialize` eras,
//! 2025-03-26 … 2025-11-25, and the stateless 2026-07-28 shape) and the deprecated HTTP+SSE
//! client (2024-11-05), behind one [`Link`].
//!
//! A link sits between the JSON-RPC client (`upstream::Connection`) and the network: it
//! takes the lines the client writes to its [`Outbox`](crate::transport::Outbox), sends each
//! as an HTTP request, and hands every JSON-RPC message that comes back (a JSON body, or the
//! events of an SSE stream) to the client as a [`Frame`]. It knows JSON-RPC ids (to tell
//! which request a response or an HTTP error belongs to) and the MCP session and version
//! headers, no MCP methods. When the link cannot go on (the network failed, the server
//! answered 5xx, forgot the session, or wants a login) it says so once, through the receiver
//! [`Link::open`] returns.

#[doc(hidden)]
pub mod events;
mod shared;
mod sse;
mod stateless;
mod streamable;

use crate::auth::Credentials;
use crate::jsonrpc::Frame;
use crate::transport::lines::Outgoing;
use shared::Shared;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use url::Url;

/// Which HTTP transport a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteKind {
    /// Streamable HTTP first; the HTTP+SSE transport when the first POST is answered
    /// with 400, 404 or 405 (the spec's backwards-compatibility recipe).
    Auto,
    Streamable,
    Sse,
}

impl RemoteKind {
    /// From a config entry's `type`: `"http"` (also what an entry with a `url` and no type
    /// gets) tries both, `"streamable-http"` and `"sse"` pin one.
    pub fn from_config(kind: &str) -> RemoteKind {
        match kind {
            "streamable-http" => RemoteKind::Streamable,
            "sse" => RemoteKind::Sse,
            _ => RemoteKind::Auto,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            RemoteKind::Auto => "auto",
            RemoteKind::Streamable => "streamable-http",
            RemoteKind::Sse => "sse",
        }
    }
}

/// Everything a link needs to know about one remote server.
pub struct RemoteSpec {
    /// The server's name, for logs and messages.
    pub label: String,
    pub url: Url,
    /// Sent with every request (`Authorization` from `credentials` replaces a configured one).
    pub headers: Vec<(String, String)>,
    pub kind: RemoteKind,
    pub max_message_size: usize,
    /// The longest one POST exchange may run (the server's request timeout and a margin);
    /// the JSON-RPC client times requests out itself, this only reclaims the task.
    pub deadline: Duration,
    pub credentials: Option<Arc<dyn Credentials>>,
}

/// Why a link ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEnd {
    /// The network failed, the server answered 5xx, or a stream it must keep ended. The text
    /// reads after "server 'NAME' " ("could not be reached: …", "answered HTTP 500 …").
    Lost(String),
    /// The server answered 404 to our session id: it has forgotten the session, and the
    /// client must start over with a new `initialize`.
    SessionExpired,
    /// The server wants authorization that only a login can give: `detail` says what the
    /// server answered, `how` what the credentials said to do about it, if they exist.
    NeedsLogin { detail: String, how: Option<String> },
}

impl LinkEnd {
    /// A phrase that reads after "server 'NAME' ".
    pub fn reason(&self) -> String {
        match self {
            LinkEnd::Lost(reason) => reason.clone(),
            LinkEnd::SessionExpired => "ended our session (HTTP 404); starting a new one".into(),
            LinkEnd::NeedsLogin { detail, .. } => format!("needs a login ({detail})"),
        }
    }
}

/// Where a link hands what the server sent.
pub type Deliver = Arc<dyn Fn(Frame) + Send + Sync>;

/// An open connection to a remote server. Dropping it stops every request and stream it
/// runs; [`Link::close`] first ends the server's session politely.
pub struct Link {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
    task: JoinHandle<()>,
}

enum Command {
    /// The handshake is done: send this protocol version from now on, and listen for the
    /// server's own messages.
    Established(String),
}

impl Link {
    /// Starts a link that sends what arrives on `lines` (the receiving end of an
    /// [`Outbox::channel`](crate::transport::Outbox::channel)) and hands what the server
    /// sends to `deliver`. `learned` holds the transport that worked before (kept across
    /// reconnects); it is set once one works. The receiver fires once, when the link cannot
    /// go on.
    pub fn open(
        spec: Arc<RemoteSpec>,
        learned: Arc<Mutex<Option<RemoteKind>>>,
        lines: mpsc::UnboundedReceiver<Outgoing>,
        deliver: Deliver,
    ) -> Result<(Link, oneshot::Receiver<LinkEnd>), String> {
        let client = client()?;
        let (end_tx, end_rx) = oneshot::channel();
        let shared = Arc::new(Shared::new(spec, client, deliver, learned, end_tx)?);
        let (commands, command_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(streamable::run(shared.clone(), lines, command_rx));
        Ok((
            Link {
                shared,
                commands,
                task,
            },
            end_rx,
        ))
    }

    /// The handshake finished with `protocol_version`: it goes on every later request, and
    /// the server's stream for messages of its own is opened (when it offers one).
    pub fn established(&self, protocol_version: &str) {
        let _ = self
            .commands
            .send(Command::Established(protocol_version.to_string()));
    }

    /// The transport in use, once known.
    pub fn kind(&self) -> Option<RemoteKind> {
        self.shared.learned()
    }

    /// Ends the server's session (DELETE, when it gave us one) and stops the link.
    pub async fn close(self) {
        self.task.abort();
        self.shared.end_session().await;
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Hands `resp`, the server's answer to the POST of `line` (a request or a notification), to
/// the Streamable HTTP client's response handling, as a link does once the transport is
/// known: what it delivers goes to `deliver`; the end of the link, if the answer ended it, is
/// returned. A resumption it attempts goes to `spec.url`. For the fuzz targets (`tests/fuzz`),
/// which drive it with made-up responses.
#[cfg(any(test, feature = "internals"))]
#[doc(hidden)]
pub async fn answer_post(
    spec: Arc<RemoteSpec>,
    line: String,
    resp: reqwest::Response,
    deliver: Deliver,
) -> Result<Option<LinkEnd>, String> {
    let (end_tx, mut end_rx) = oneshot::channel();
    let learned = Arc::new(Mutex::new(Some(RemoteKind::Streamable)));
    let shared = Arc::new(Shared::new(spec, client()?, deliver, learned, end_tx)?);
    streamable::answered(&shared, &streamable::Outbound::new(line), resp).await;
    Ok(end_rx.try_recv().ok())
}

/// Redirects are followed only within the server's origin: a hop elsewhere would carry the
/// configured headers and the token to a host they were not meant for.
const MAX_REDIRECTS: usize = 5;

/// The HTTP client every remote server shares (one connection pool), built on first use.
/// HTTP/1.1 and HTTP/2 (by ALPN), rustls with ring and the platform's root certificates.
pub fn client() -> Result<reqwest::Client, String> {
    static CLIENT: OnceLock<Result<reqwest::Client, String>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            // reqwest is built without a default crypto provider; another part of the
            // process may have installed ring already, which is fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
            let policy = reqwest::redirect::Policy::custom(|attempt| {
                let same = attempt
                    .previous()
                    .first()
                    .is_some_and(|first| first.origin() == attempt.url().origin());
                if same && attempt.previous().len() <= MAX_REDIRECTS {
                    attempt.follow()
                } else {
                    attempt.stop()
                }
            });
            reqwest::Client::builder()
                .user_agent(concat!("openpact/", env!("CARGO_PKG_VERSION")))
                .redirect(policy)
                .connect_timeout(Duration::from_secs(15))
                // Idle SSE streams: notice a peer that vanished without closing.
                .tcp_keepalive(Duration::from_secs(30))
                .pool_idle_timeout(Duration::from_secs(60))
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {}", describe(&e)))
        })
        .clone()
}

/// A reqwest error as a short phrase, without the URL (which may carry a secret).
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    // The innermost cause says the most ("Connection refused"); keep at most two.
    let detail = parts
        .iter()
        .rev()
        .take(2)
        .rev()
        .cloned()
        .collect::<Vec<_>>();
    let head = if e.is_connect() {
        "could not connect"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_body() || e.is_decode() {
        "broke off its answer"
    } else {
        "failed"
    };
    if detail.is_empty() {
        head.to_string()
    } else {
        format!("{head}: {}", detail.join(": "))
    }
}

#[cfg(test)]
mod tests;
