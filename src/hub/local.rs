//! An in-process downstream client: the CLI and the embedding API talk to the hub through a
//! [`Session`] exactly as an editor does over stdio, so every call takes one code path
//! (policy, cache, audit). Requests may run concurrently: a reader task hands each response
//! to the request waiting for it, and everything else the session sends (progress, log
//! lines, list changes) to whoever reads [`LocalClient::connect`]'s message channel.

use super::{Hub, Session};
use crate::FastMap;
use crate::jsonrpc::{self, Frame, Kind, Message};
use crate::transport::{Outbox, Outgoing};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

type Waiting = Arc<Mutex<FastMap<u64, oneshot::Sender<Message>>>>;

/// What the session sent that answers no request: notifications, and requests to the client.
pub type Messages = mpsc::UnboundedReceiver<Message>;

pub struct LocalClient {
    session: Arc<Session>,
    next_id: AtomicU64,
    waiting: Waiting,
    reader: JoinHandle<()>,
}

impl LocalClient {
    /// Opens a session and runs `initialize` as client `name` with `capabilities` (JSON
    /// text). None if the session went away before answering.
    pub async fn connect(
        hub: Arc<Hub>,
        name: &str,
        capabilities: &str,
    ) -> Option<(LocalClient, Messages)> {
        let (tx, rx) = Outbox::channel();
        let (others, messages) = mpsc::unbounded_channel();
        let waiting = Waiting::default();
        let client = LocalClient {
            session: Session::new(hub, tx, 0),
            next_id: AtomicU64::new(1),
            reader: tokio::spawn(read(rx, waiting.clone(), others)),
            waiting,
        };
        let params = format!(
            "{{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{capabilities},\"clientInfo\":{{\"name\":{},\"version\":\"{}\"}}}}",
            serde_json::Value::from(name),
            env!("CARGO_PKG_VERSION")
        );
        client.request("initialize", &params).await?;
        client.notify("notifications/initialized", None);
        Some((client, messages))
    }

    /// Sends a request (params: JSON text) and returns its id and where its response will
    /// come; the receiver fails if the session goes away first.
    pub fn send_request(&self, method: &str, params: &str) -> (u64, oneshot::Receiver<Message>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(id, tx);
        let line = jsonrpc::request(&id.to_string(), method, Some(params));
        self.session.handle_frame(Frame::Line(line.into_bytes()));
        (id, rx)
    }

    /// Sends a request and waits for its response; None if the session went away.
    pub async fn request(&self, method: &str, params: &str) -> Option<Message> {
        self.send_request(method, params).1.await.ok()
    }

    pub fn notify(&self, method: &str, params: Option<&str>) {
        let line = jsonrpc::notification(method, params);
        self.session.handle_frame(Frame::Line(line.into_bytes()));
    }
}

impl Drop for LocalClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Hands each response to its request, and every other message to `others` (dropped when
/// nobody reads them).
async fn read(
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    waiting: Waiting,
    others: mpsc::UnboundedSender<Message>,
) {
    while let Some(out) = rx.recv().await {
        let Outgoing::Line(line) = out else { continue };
        let Ok(m) = Message::parse(line.into_boxed_str()) else {
            continue;
        };
        if m.kind() == Kind::Response {
            if let Some(tx) = m.id_u64().and_then(|id| lock(&waiting).remove(&id)) {
                let _ = tx.send(m);
            }
        } else {
            let _ = others.send(m);
        }
    }
    // The session is gone: every request still waiting learns it from its dropped sender.
    lock(&waiting).clear();
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
