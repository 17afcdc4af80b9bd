//! A JSON-RPC client over one child's pipes: allocates ids, matches responses, times out and
//! cancels requests, answers the server's `ping`, and hands everything else up as events.
//! Towards a 2026-07-28 server it stamps every request with the `_meta` envelope and sends
//! no notification but `notifications/cancelled`.

use crate::FastMap;
use crate::jsonrpc::{self, Frame, Kind, Message, parse_frame};
use crate::transport::{Outbox, StderrLog};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Why a request got no response from the server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error("server '{server}' did not answer {method} within {}; the request was cancelled", crate::config::human_duration(*after))]
    Timeout {
        server: String,
        method: String,
        after: Duration,
    },
    #[error("server '{server}' {reason}")]
    Closed { server: String, reason: String },
    #[error("server '{server}' is not ready ({state})")]
    NotReady { server: String, state: String },
    #[error(
        "server '{server}' answered with a message of {len} bytes, over the limit (openpact.maxMessageSize); the answer was dropped"
    )]
    TooLarge { server: String, len: usize },
    #[error(
        "server '{server}' is not reading its input ({} MiB sent to it wait unread); the request was refused",
        bytes >> 20
    )]
    NotReading { server: String, bytes: usize },
}

/// Bytes of requests a server may leave unread on its stdin before further requests to it
/// are refused: a server that stopped reading must not make the hub hold everything its
/// clients send it.
pub const INPUT_BACKLOG: usize = 32 << 20;

/// JSON-RPC error codes the hub uses for failures of its own.
pub mod code {
    /// The server did not answer in time.
    pub const TIMEOUT: i64 = -32001;
    /// The server is down, crashed, or not started.
    pub const UNAVAILABLE: i64 = -32010;
}

impl CallError {
    pub fn code(&self) -> i64 {
        match self {
            CallError::Timeout { .. } => code::TIMEOUT,
            CallError::Closed { .. }
            | CallError::NotReady { .. }
            | CallError::NotReading { .. } => code::UNAVAILABLE,
            CallError::TooLarge { .. } => jsonrpc::code::INTERNAL_ERROR,
        }
    }
}

/// Something the server sent that is not a response to us.
#[derive(Debug)]
pub enum Incoming {
    Notification(Message),
    Request(Message),
}

type Reply = Result<Message, CallError>;

pub struct Connection {
    label: String,
    out: Outbox,
    pending: Mutex<FastMap<u64, oneshot::Sender<Reply>>>,
    next_id: AtomicU64,
    /// Set once the connection is finished; later requests fail at once with this reason.
    closed: Mutex<Option<String>>,
    /// Turns true with `closed`, for whoever waits on the connection's end.
    ended: watch::Sender<bool>,
    /// The server speaks 2026-07-28: requests carry the `_meta` envelope.
    stateless: AtomicBool,
    /// The log level to ask a stateless server for, on every request (it has no setLevel).
    log_level: Mutex<Option<String>>,
    pub stderr: Arc<StderrLog>,
}

impl Connection {
    pub fn new(label: String, out: Outbox, stderr: Arc<StderrLog>) -> Arc<Self> {
        Arc::new(Connection {
            label,
            out,
            pending: Mutex::new(FastMap::default()),
            next_id: AtomicU64::new(1),
            closed: Mutex::new(None),
            ended: watch::Sender::new(false),
            stateless: AtomicBool::new(false),
            log_level: Mutex::new(None),
            stderr,
        })
    }

    /// From now on the server is spoken to in 2026-07-28 (after `server/discover` said so).
    pub fn set_stateless(&self) {
        self.stateless.store(true, Ordering::Release);
    }

    pub fn is_stateless(&self) -> bool {
        self.stateless.load(Ordering::Acquire)
    }

    /// The log level stamped on a stateless server's requests (`None`: no log messages).
    pub fn set_log_level(&self, level: Option<String>) {
        *self
            .log_level
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = level;
    }

    /// Resolves once the connection has ended.
    pub async fn closed(&self) {
        let mut rx = self.ended.subscribe();
        let _ = rx.wait_for(|ended| *ended).await;
    }

    /// Sends a request and waits for its response (which may be a JSON-RPC error: that is
    /// the server's answer and is returned as `Ok`). On timeout, or if the returned future is
    /// dropped first, the server is sent `notifications/cancelled`.
    pub async fn request(&self, method: &str, params: Option<&str>, timeout: Duration) -> Reply {
        let stamped;
        let params = if self.is_stateless() {
            let level = self
                .log_level
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            stamped = super::stateless::stamp(params, level.as_deref());
            Some(stamped.as_str())
        } else {
            params
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Some(reason) = self.closed_reason() {
            return Err(CallError::Closed {
                server: self.label.clone(),
                reason,
            });
        }
        let unread = self.out.backlog();
        if unread >= INPUT_BACKLOG {
            tracing::warn!(server = %self.label, unread, "the server is not reading its input; a request to it was refused");
            return Err(CallError::NotReading {
                server: self.label.clone(),
                bytes: unread,
            });
        }
        self.lock_pending().insert(id, tx);
        let mut guard = CancelGuard {
            conn: self,
            id,
            reason: Some("cancelled by the client"),
        };
        if !self.send(jsonrpc::request(&id.to_string(), method, params)) {
            guard.reason = None;
            self.lock_pending().remove(&id);
            let reason = self
                .closed_reason()
                .unwrap_or_else(|| "closed its input".into());
            return Err(CallError::Closed {
                server: self.label.clone(),
                reason,
            });
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => {
                guard.reason = None;
                reply
            }
            Ok(Err(_)) => {
                guard.reason = None;
                let reason = self.closed_reason().unwrap_or_else(|| "went away".into());
                Err(CallError::Closed {
                    server: self.label.clone(),
                    reason,
                })
            }
            Err(_) => {
                guard.reason = Some("timed out");
                Err(CallError::Timeout {
                    server: self.label.clone(),
                    method: method.to_string(),
                    after: timeout,
                })
            }
        }
    }

    /// Sends a notification; to a stateless server only `notifications/cancelled` (the one
    /// notification 2026-07-28 has from a client), the rest are dropped.
    pub fn notify(&self, method: &str, params: Option<&str>) {
        if self.is_stateless() && method != "notifications/cancelled" {
            tracing::debug!(server = %self.label, method, "not sent: a 2026-07-28 server has no such notification");
            return;
        }
        self.send(jsonrpc::notification(method, params));
    }

    /// Sends an already-built line (responses to server requests go this way); false when
    /// the server's input is closed.
    pub fn send(&self, line: String) -> bool {
        self.out.send(line)
    }

    /// Closes the server's stdin (step one of shutdown).
    pub fn close_input(&self) {
        self.out.close();
    }

    /// Marks the connection finished and fails every in-flight request with `reason`.
    pub fn fail_all(&self, reason: &str) {
        if let Ok(mut c) = self.closed.lock() {
            c.get_or_insert_with(|| reason.to_string());
        }
        self.ended.send_replace(true);
        let drained: Vec<_> = self.lock_pending().drain().collect();
        for (_, tx) in drained {
            let _ = tx.send(Err(CallError::Closed {
                server: self.label.clone(),
                reason: reason.to_string(),
            }));
        }
    }

    /// True once the connection has ended (the process exited or was stopped).
    pub fn is_closed(&self) -> bool {
        self.closed_reason().is_some()
    }

    fn closed_reason(&self) -> Option<String> {
        self.closed.lock().ok().and_then(|c| c.clone())
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, FastMap<u64, oneshot::Sender<Reply>>> {
        // A poisoned map only means another thread panicked mid-insert; the map itself is
        // still consistent enough to use.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Handles one frame from the server's stdout. Everything that is not a response goes to
    /// `incoming` synchronously, in order, so a notification the server sent before a
    /// response (say, the last progress step) is delivered before that response.
    pub fn on_frame(&self, frame: Frame, incoming: &dyn Fn(Incoming)) {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::Oversized { len, edges } => {
                tracing::warn!(server = %self.label, len, "dropped a message over the size limit (openpact.maxMessageSize)");
                // If it was the answer to one of our requests, fail that request now with the
                // reason, rather than letting it run into its timeout.
                if let Some(tx) =
                    jsonrpc::id_in_edges(&edges).and_then(|id| self.lock_pending().remove(&id))
                {
                    let _ = tx.send(Err(CallError::TooLarge {
                        server: self.label.clone(),
                        len,
                    }));
                }
                return;
            }
        };
        // A line that cannot even start a JSON object or array is text a server printed
        // (a banner, a log line): shown as such, which a parse error would not do.
        match line.iter().find(|b| !b.is_ascii_whitespace()) {
            None => return,
            Some(b'{' | b'[') => {}
            Some(_) => {
                self.stderr
                    .push_stdout_noise(&self.label, &String::from_utf8_lossy(&line));
                return;
            }
        }
        let messages = match parse_frame(line) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(server = %self.label, error = %e, "skipped a line on stdout that is not JSON-RPC (stdout must carry only JSON-RPC)");
                return;
            }
        };
        for m in messages {
            match m {
                Ok(m) => self.dispatch(m, incoming),
                Err(e) => {
                    tracing::warn!(server = %self.label, error = %e, "skipped a batch element")
                }
            }
        }
    }

    fn dispatch(&self, m: Message, incoming: &dyn Fn(Incoming)) {
        match m.kind() {
            Kind::Response => {
                let waiter = m.id_u64().and_then(|id| self.lock_pending().remove(&id));
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(Ok(m));
                    }
                    None => {
                        tracing::debug!(server = %self.label, id = m.id(), "response to no pending request (late or unknown)")
                    }
                }
            }
            Kind::Request if m.method() == "ping" => {
                let _ = self.send(jsonrpc::result(m.id(), "{}"));
            }
            Kind::Request => incoming(Incoming::Request(m)),
            Kind::Notification => incoming(Incoming::Notification(m)),
        }
    }
}

struct CancelGuard<'a> {
    conn: &'a Connection,
    id: u64,
    reason: Option<&'static str>,
}

impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        if let Some(reason) = self.reason {
            self.conn.lock_pending().remove(&self.id);
            let params = format!(
                "{{\"requestId\":{},\"reason\":{}}}",
                self.id,
                jsonrpc::quote(reason)
            );
            self.conn.notify("notifications/cancelled", Some(&params));
        }
    }
}
