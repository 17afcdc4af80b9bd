//! One client's handshake Streamable HTTP session: the bodies of its POSTs handed to a hub
//! [`Session`] (the very one the stdio face uses), with each line it sends routed to an
//! HTTP response.
//!
//! A response goes to the POST that asked; a progress notification to the POST whose
//! request carried its token. Anything else (logging, list_changed, the hub's and servers'
//! requests to the client) goes to the GET stream when one is open, else to the newest POST
//! still waiting (turning its reply into an SSE stream), else into the GET stream's replay
//! buffer, delivered when the client opens it (or resumes it with `Last-Event-ID`).
//!
//! Nothing here grows without bound when a client does not read (every queue counts its
//! events and bytes, see `queue`): progress and log messages for a POST with more than
//! [`DROPPABLE_BACKLOG`] unread are dropped (logged once per request); a GET stream with
//! more than [`GET_QUEUE`] events or [`GET_BYTES`] unread is closed, and the client resumes
//! from the replay buffer, which keeps at most [`REPLAY`] events and [`REPLAY_BYTES`].
//! Responses are never dropped: there is one per request, and requests in flight are capped.

use crate::FastMap;
use crate::hub::{Hub, Session};
use crate::jsonrpc::{Frame, Kind, Message, RawObject};
use crate::transport::queue::{DROPPABLE_BACKLOG, QueueRx, QueueTx, queue};
use crate::transport::{Outbox, Outgoing};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

/// Events the GET stream keeps for resumption…
pub const REPLAY: usize = 256;
/// …and at most this many bytes of them (the newest event is always kept).
pub const REPLAY_BYTES: usize = 8 << 20;
/// Events a GET stream may have unread before it is closed (the client resumes it)…
pub const GET_QUEUE: usize = 1024;
/// …or bytes.
pub const GET_BYTES: usize = 8 << 20;

/// A line for a waiting POST; `last` is its response.
pub struct ToPost {
    pub line: String,
    pub last: bool,
}

struct Waiter {
    tx: QueueTx<ToPost>,
    /// The client's progress token for this request, as JSON text.
    token: Option<String>,
    /// When it started, so unrelated messages go to the newest.
    order: u64,
    /// Messages dropped because the client did not read this POST's stream.
    dropped: u64,
}

impl Waiter {
    /// Whether the client reads this POST's stream well enough to take another message
    /// that may be dropped.
    fn has_room(&self) -> bool {
        self.tx.held().1 < DROPPABLE_BACKLOG
    }

    fn send(&self, line: String, last: bool) {
        let bytes = line.len();
        let _ = self.tx.send(ToPost { line, last }, bytes);
    }

    /// Drops `line` for a client that does not read; says so the first time.
    fn drop_line(&mut self, session: &str, id: &str) {
        self.dropped += 1;
        if self.dropped == 1 {
            tracing::warn!(
                session,
                id,
                "the client is not reading the stream of this request ({} bytes unread); \
                 its progress and log messages are dropped until it does",
                self.tx.held().1
            );
        }
    }
}

#[derive(Default)]
struct Routes {
    /// Downstream request id (JSON text) → the POST waiting for its answer.
    waiters: FastMap<String, Waiter>,
    next_order: u64,
    /// The open GET stream, and which opening of it this is.
    get: Option<(u64, QueueTx<(u64, String)>)>,
    get_openings: u64,
    /// GET events by sequence number, newest last, and their bytes.
    ring: VecDeque<(u64, String)>,
    ring_bytes: usize,
    next_seq: u64,
    /// The newest event handed to a live GET stream.
    delivered: u64,
    ended: bool,
}

pub struct HttpSession {
    pub id: String,
    /// The hub view it was opened on (its endpoint: `/mcp` is 0, `/mcp/PROFILE` the
    /// profile's); requests for it come to that endpoint only.
    pub view: usize,
    session: Arc<Session>,
    routes: Mutex<Routes>,
    last_seen: Mutex<Instant>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A GET stream just opened: what to replay first, then what follows.
pub struct GetOpen {
    pub replay: Vec<(u64, String)>,
    pub rx: QueueRx<(u64, String)>,
    pub guard: GetGuard,
}

/// Why a request cannot be taken now.
pub enum Refused {
    DuplicateId,
    TooMany,
    Ended,
}

impl HttpSession {
    /// A new session of `hub`, seeing view `view`.
    pub fn open(hub: &Arc<Hub>, id: String, view: usize) -> Arc<HttpSession> {
        let (out, rx) = Outbox::channel();
        let me = Arc::new(HttpSession {
            id,
            view,
            session: Session::new(hub.clone(), out, view),
            routes: Mutex::new(Routes {
                next_seq: 1,
                ..Routes::default()
            }),
            last_seen: Mutex::new(Instant::now()),
        });
        tokio::spawn(pump(Arc::downgrade(&me), rx));
        me
    }

    pub fn touch(&self) {
        *lock(&self.last_seen) = Instant::now();
    }

    /// Nothing waiting and no stream open for at least `idle`.
    pub fn idle_for(&self, idle: std::time::Duration) -> bool {
        self.idle_since().is_some_and(|t| t.elapsed() >= idle)
    }

    /// When the client last did anything, if nothing of it is waiting or open now.
    pub fn idle_since(&self) -> Option<Instant> {
        let r = lock(&self.routes);
        let busy = !r.waiters.is_empty() || r.get.as_ref().is_some_and(|(_, tx)| !tx.is_closed());
        (!busy).then(|| *lock(&self.last_seen))
    }

    /// Hands a client message (not a request) to the session.
    pub fn feed(&self, body: Vec<u8>) {
        self.touch();
        self.session.handle_frame(Frame::Line(body));
    }

    /// After the client's `notifications/cancelled` (`m`) went to the session: no answer
    /// will come for that request (none is sent for a cancelled one), so its POST's stream
    /// ends now. Left open for as long as the client reads it (SDK clients read a stream to
    /// its end), it would hold a slot of `maxInFlight` and keep the session from ever being
    /// idle; a session that cancelled `maxInFlight` calls could call nothing more.
    pub fn cancelled(&self, m: &Message) {
        let id = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .and_then(|p| p.get("requestId"));
        if let Some(id) = id {
            // The waiter's queue closes with it: the stream ends without an answer.
            lock(&self.routes).waiters.remove(id);
        }
    }

    /// Whether the session was ended (DELETE, idle, evicted, or the hub stopping).
    pub fn is_ended(&self) -> bool {
        lock(&self.routes).ended
    }

    /// Registers a POST waiting for request `id`, then hands the request to the session.
    pub fn request(
        self: &Arc<Self>,
        m: &Message,
        body: Vec<u8>,
        max_in_flight: usize,
    ) -> Result<(QueueRx<ToPost>, WaiterGuard), Refused> {
        self.touch();
        let token = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .and_then(|p| p.get("_meta"))
            .and_then(|meta| RawObject::parse(meta).ok())
            .and_then(|meta| meta.get("progressToken"))
            .map(str::to_string);
        let (tx, rx) = queue();
        let order = {
            let mut r = lock(&self.routes);
            if r.ended {
                return Err(Refused::Ended);
            }
            if r.waiters.contains_key(m.id()) {
                return Err(Refused::DuplicateId);
            }
            if r.waiters.len() >= max_in_flight {
                return Err(Refused::TooMany);
            }
            r.next_order += 1;
            let order = r.next_order;
            r.waiters.insert(
                m.id().to_string(),
                Waiter {
                    tx,
                    token,
                    order,
                    dropped: 0,
                },
            );
            order
        };
        let guard = WaiterGuard {
            session: self.clone(),
            id: m.id().to_string(),
            order,
        };
        self.session.handle_frame(Frame::Line(body));
        Ok((rx, guard))
    }

    /// Opens the GET stream (closing an earlier one): what it must replay first, and the
    /// receiver for what follows. `after`: the sequence number in `Last-Event-ID`.
    pub fn open_get(self: &Arc<Self>, after: Option<u64>) -> Option<GetOpen> {
        self.touch();
        let (tx, rx) = queue();
        let mut r = lock(&self.routes);
        if r.ended {
            return None;
        }
        let from = after.unwrap_or(r.delivered);
        if let Some(after) = after
            && r.ring.front().is_some_and(|(first, _)| *first > after + 1)
        {
            tracing::debug!(
                session = %self.id,
                after,
                "GET stream resumed past the replay buffer; older events are lost"
            );
        }
        let replay: Vec<(u64, String)> = r
            .ring
            .iter()
            .filter(|(seq, _)| *seq > from)
            .cloned()
            .collect();
        if let Some((seq, _)) = replay.last() {
            r.delivered = r.delivered.max(*seq);
        }
        r.get_openings += 1;
        let opening = r.get_openings;
        r.get = Some((opening, tx));
        Some(GetOpen {
            replay,
            rx,
            guard: GetGuard {
                session: self.clone(),
                opening,
            },
        })
    }

    /// Ends the session: its requests in flight are cancelled upstream (each waiting POST is
    /// answered with an error) and its GET stream closes.
    pub fn end(&self, reason: &str) {
        {
            let mut r = lock(&self.routes);
            r.ended = true;
            r.get = None;
        }
        self.session.abort_all(reason);
    }

    fn route(&self, line: String) {
        let Ok(m) = Message::parse(line.as_str().into()) else {
            return;
        };
        let mut r = lock(&self.routes);
        match m.kind() {
            Kind::Response => match r.waiters.remove(m.id()) {
                Some(w) => w.send(line, true),
                None => tracing::debug!(
                    session = %self.id,
                    id = m.id(),
                    "answer for a request whose POST is gone; dropped"
                ),
            },
            Kind::Notification if m.method() == "notifications/progress" => {
                let token = m
                    .params()
                    .and_then(|p| RawObject::parse(p).ok())
                    .and_then(|p| p.get("progressToken"));
                let waiter = token.and_then(|t| {
                    r.waiters
                        .iter_mut()
                        .find(|(_, w)| w.token.as_deref() == Some(t))
                });
                match waiter {
                    Some((_, w)) if w.has_room() => w.send(line, false),
                    Some((id, w)) => w.drop_line(&self.id, id),
                    None => unrelated(&mut r, line, &self.id),
                }
            }
            _ => unrelated(&mut r, line, &self.id),
        }
    }
}

/// A message tied to no waiting POST: the GET stream, else the newest POST (while its
/// client reads it), else the replay buffer.
fn unrelated(r: &mut Routes, line: String, session: &str) {
    if r.get.as_ref().is_some_and(|(_, tx)| tx.is_closed()) {
        r.get = None;
    }
    if r.get.is_none()
        && let Some(w) = r.waiters.values().max_by_key(|w| w.order)
        && w.has_room()
    {
        w.send(line, false);
        return;
    }
    let seq = r.next_seq;
    r.next_seq += 1;
    r.ring_bytes += line.len();
    r.ring.push_back((seq, line.clone()));
    while r.ring.len() > REPLAY || (r.ring_bytes > REPLAY_BYTES && r.ring.len() > 1) {
        if let Some((_, old)) = r.ring.pop_front() {
            r.ring_bytes -= old.len();
        }
    }
    if let Some((_, tx)) = &r.get {
        let (events, bytes) = tx.held();
        if events < GET_QUEUE && bytes < GET_BYTES {
            let bytes = line.len();
            tx.send((seq, line), bytes);
            r.delivered = seq;
        } else {
            // A client that does not read its stream: close it; it can resume from the buffer.
            tracing::warn!(
                session,
                events,
                bytes,
                "the client is not reading its GET stream; closed (it may resume from the \
                 replay buffer)"
            );
            r.get = None;
        }
    }
}

/// Carries the session's outgoing lines to their routes until the session is gone.
async fn pump(session: Weak<HttpSession>, mut rx: tokio::sync::mpsc::UnboundedReceiver<Outgoing>) {
    while let Some(out) = rx.recv().await {
        let Outgoing::Line(line) = out else { continue };
        let Some(s) = session.upgrade() else { return };
        s.route(line);
    }
}

/// Removes a POST's waiter when its response is dropped (sent, or the connection gone), and
/// cancels its request if it went unanswered.
pub struct WaiterGuard {
    session: Arc<HttpSession>,
    id: String,
    /// Only this POST's waiter goes, not a later request that reuses the id.
    order: u64,
}

impl Drop for WaiterGuard {
    fn drop(&mut self) {
        let mut r = lock(&self.session.routes);
        // Still waiting: the response was never routed here, so the POST was dropped before
        // it (the client closed the connection or stopped reading its stream).
        let unanswered = r
            .waiters
            .get(&self.id)
            .is_some_and(|w| w.order == self.order);
        if unanswered {
            r.waiters.remove(&self.id);
        }
        let ended = r.ended;
        drop(r);
        if unanswered && !ended {
            // Cancel the call now, as the client would have, rather than leave it running
            // upstream until the session expires (an ended session has cancelled it already).
            let cancel = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"the client disconnected"}}}}"#,
                self.id
            );
            self.session.feed(cancel.into_bytes());
        }
    }
}

/// Marks the GET stream closed when its response is dropped.
pub struct GetGuard {
    session: Arc<HttpSession>,
    opening: u64,
}

impl Drop for GetGuard {
    fn drop(&mut self) {
        let mut r = lock(&self.session.routes);
        if r.get.as_ref().is_some_and(|(n, _)| *n == self.opening) {
            r.get = None;
        }
        drop(r);
        self.session.touch();
    }
}
