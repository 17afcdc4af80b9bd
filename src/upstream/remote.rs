//! Supervising a remote server (Streamable HTTP or HTTP+SSE, see
//! [`crate::transport::http`]): connect and handshake; after any failure, fail the calls in
//! flight and reconnect with exponential backoff and jitter (a server that is down at start
//! keeps being retried, never parked); start over at once when the server forgets our
//! session; and wait for a login when it wants one.

use super::supervise::backoff;
use super::{CallError, Connection, HandshakeError, State, Upstream};
use crate::auth::Credentials;
use crate::config::display_url;
use crate::config::human_duration;
use crate::config::{ServerConfig, Transport};
use crate::jsonrpc::Frame;
use crate::transport::http::{Link, LinkEnd, RemoteKind, RemoteSpec};
use crate::transport::{Outbox, StderrLog};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Notify, oneshot, watch};

/// What `openpact servers` shows of a remote server (never a header or a token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteStatus {
    /// Without user info, and with query values hidden.
    pub url: String,
    /// `streamable-http` or `sse` once known; before that what the config asks for
    /// (`auto` tries both).
    pub transport: String,
}

impl RemoteStatus {
    pub(super) fn of(config: &ServerConfig) -> Option<RemoteStatus> {
        match &config.transport {
            Transport::Http { url, kind, .. } => Some(RemoteStatus {
                url: display_url(url),
                transport: RemoteKind::from_config(kind).label().to_string(),
            }),
            Transport::Stdio { .. } => None,
        }
    }
}

/// What a remote server keeps across reconnects.
pub(super) struct Remote {
    credentials: RwLock<Option<Arc<dyn Credentials>>>,
    /// The transport that worked (for the process lifetime: a server does not change it).
    learned: Arc<Mutex<Option<RemoteKind>>>,
    /// Wakes a server waiting to reconnect or for a login.
    retry: Notify,
}

impl Remote {
    /// No credentials until the hub gives some ([`Upstream::set_credentials`]): without
    /// them a server that answers 401 shows as "needs login".
    pub(super) fn new() -> Remote {
        Remote {
            credentials: RwLock::new(None),
            learned: Arc::new(Mutex::new(None)),
            retry: Notify::new(),
        }
    }
}

/// A link that stays up this long counts as a success: the backoff starts from the
/// beginning when it fails.
const STABLE: Duration = Duration::from_secs(5);
/// A remote request may run this much past the server's timeout before its task is dropped
/// (the JSON-RPC client has timed it out by then).
const DEADLINE_MARGIN: Duration = Duration::from_secs(10);

/// A handshaken link.
struct Linked {
    conn: Arc<Connection>,
    link: Link,
    ended: oneshot::Receiver<LinkEnd>,
    since: Instant,
}

impl Upstream {
    /// Gives a remote server its credentials, used from its next connection on.
    pub fn set_credentials(&self, credentials: Arc<dyn Credentials>) {
        *self
            .remote
            .credentials
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(credentials);
    }

    /// Asks a remote server that waits for a login, or to reconnect, to try at once (after a
    /// login, say).
    pub fn retry_now(&self) {
        // Reconnecting until this attempt ends, so whoever asked can tell its outcome from
        // the "needs login" it ends a wait for.
        if matches!(self.snapshot().state, State::NeedsLogin(_)) {
            self.update(|s| s.state = State::Reconnecting);
        }
        self.remote.retry.notify_one();
    }

    fn remote_spec(&self) -> Result<RemoteSpec, String> {
        let Transport::Http {
            url, headers, kind, ..
        } = &self.config().transport
        else {
            return Err("is not a remote server".into());
        };
        let url = url::Url::parse(url)
            .map_err(|e| format!("has an invalid url ({}): {e}", display_url(url)))?;
        Ok(RemoteSpec {
            label: self.name.to_string(),
            url,
            headers: headers.clone(),
            kind: RemoteKind::from_config(kind),
            max_message_size: self.max_message_size,
            deadline: self.config().timeout + DEADLINE_MARGIN,
            credentials: self
                .remote
                .credentials
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        })
    }

    /// Runs a remote server until `shutdown` turns true.
    pub(super) async fn supervise_remote(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut failures = 0u32;
        loop {
            if *shutdown.borrow() {
                break;
            }
            let spec = match self.remote_spec() {
                Ok(spec) => Arc::new(spec),
                Err(reason) => {
                    tracing::error!(server = %self.name(), "not started: {reason}");
                    self.update(|s| {
                        s.state = State::Failed(reason.clone());
                        s.last_error = Some(reason);
                    });
                    let _ = shutdown.changed().await;
                    break;
                }
            };
            let attempt = tokio::select! {
                r = self.connect_once(spec) => r,
                _ = shutdown.changed() => break,
            };
            let (end, was_stable) = match attempt {
                Ok(mut linked) => {
                    let end = tokio::select! {
                        end = &mut linked.ended => end.unwrap_or_else(|_| LinkEnd::Lost("stopped answering".into())),
                        _ = shutdown.changed() => {
                            self.stop_remote(linked).await;
                            return;
                        }
                    };
                    self.set_conn(None);
                    linked.conn.fail_all(&end.reason());
                    (end, linked.since.elapsed() >= STABLE)
                }
                Err(end) => (end, false),
            };
            failures = if was_stable { 1 } else { failures + 1 };
            // The link's reasons are predicates ("is unreachable (…)"): give them their subject.
            let reason = format!("'{}' {}", self.name(), end.reason());
            let delay = match &end {
                LinkEnd::NeedsLogin { detail, how } => {
                    let how = match how {
                        Some(how) => format!("{how} ({detail})"),
                        None => format!("run `openpact auth login {}` ({detail})", self.name()),
                    };
                    tracing::warn!(server = %self.name(), "needs a login: {how}");
                    self.update(|s| {
                        s.state = State::NeedsLogin(how);
                        s.last_error = Some(reason.clone());
                    });
                    // A login elsewhere (the CLI) is noticed on the next try.
                    self.restart.max_backoff
                }
                LinkEnd::SessionExpired if failures == 1 => Duration::ZERO,
                _ => backoff(&self.restart, failures),
            };
            if !matches!(end, LinkEnd::NeedsLogin { .. }) {
                tracing::warn!(server = %self.name(), "{reason}; reconnecting in {}", human_duration(delay));
                self.update(|s| {
                    if s.state == State::Ready {
                        s.restarts += 1;
                    }
                    s.state = State::Reconnecting;
                    s.last_error = Some(reason);
                });
            }
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = self.remote.retry.notified() => {}
                _ = shutdown.changed() => break,
            }
        }
        self.set_conn(None);
        self.update(|s| {
            if !matches!(s.state, State::Failed(_)) {
                s.state = State::Stopped;
            }
        });
    }

    /// Opens a link and runs the handshake over it.
    async fn connect_once(self: &Arc<Self>, spec: Arc<RemoteSpec>) -> Result<Linked, LinkEnd> {
        let t0 = Instant::now();
        self.update(|s| s.started_at = Some(SystemTime::now()));
        let (out, lines) = Outbox::channel();
        let conn = Connection::new(self.name.to_string(), out, Arc::new(StderrLog::default()));
        let deliver = {
            let me = Arc::downgrade(self);
            let weak = Arc::downgrade(&conn);
            Arc::new(move |frame: Frame| {
                let Some(conn) = weak.upgrade() else { return };
                conn.on_frame(frame, &|item| {
                    if let Some(me) = me.upgrade() {
                        me.on_incoming(item, &weak);
                    }
                });
            })
        };
        let (link, mut ended) = Link::open(spec, self.remote.learned.clone(), lines, deliver)
            .map_err(|e| LinkEnd::Lost(format!("cannot be reached: {e}")))?;
        let handshake = self.handshake(&conn, t0, |version| {
            link.established(version);
            if let Some(kind) = link.kind() {
                self.update(|s| {
                    if let Some(r) = &mut s.remote {
                        r.transport = kind.label().to_string();
                    }
                });
            }
        });
        let done = tokio::select! {
            done = handshake => done,
            end = &mut ended => {
                return Err(end.unwrap_or_else(|_| LinkEnd::Lost("stopped answering".into())));
            }
        };
        match done {
            Ok(()) => Ok(Linked {
                conn,
                link,
                ended,
                since: Instant::now(),
            }),
            Err(e) => {
                // The link's own reason (a 401, a lost connection) beats the handshake's.
                if let Ok(end) = ended.try_recv() {
                    return Err(end);
                }
                link.close().await;
                Err(LinkEnd::Lost(match e {
                    HandshakeError::Call(CallError::Closed { reason, .. }) => reason,
                    e => e.to_string(),
                }))
            }
        }
    }

    async fn stop_remote(&self, linked: Linked) {
        self.set_conn(None);
        linked.link.close().await;
        linked.conn.fail_all(&self.stop_reason());
        self.update(|s| s.state = State::Stopped);
    }
}
