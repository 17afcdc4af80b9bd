//! The embedding API's own client session of the hub: requests go in as JSON-RPC lines,
//! exactly as an editor's do (so every call takes the one pipeline: policy, cache, audit),
//! and a reader task hands each response to the call waiting for it, so calls run
//! concurrently over one session.

use super::Error;
use crate::hub::Session;
use crate::jsonrpc::{self, Frame, Kind, Message};
use crate::transport::{Outbox, Outgoing};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

type Waiting = Arc<Mutex<HashMap<u64, oneshot::Sender<Message>>>>;

pub(super) struct Client {
    session: Arc<Session>,
    next_id: AtomicU64,
    waiting: Waiting,
    reader: JoinHandle<()>,
}

impl Client {
    /// Opens a session on `hub` and initializes it, declaring no client capabilities: the
    /// host answers permission questions through its hook, not through elicitation.
    pub(super) async fn connect(hub: Arc<crate::hub::Hub>) -> Result<Client, Error> {
        let (tx, rx) = Outbox::channel();
        let waiting = Waiting::default();
        let client = Client {
            session: Session::new(hub, tx, 0),
            next_id: AtomicU64::new(1),
            reader: tokio::spawn(read(rx, waiting.clone())),
            waiting,
        };
        let params = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "openpact-embed", "version": env!("CARGO_PKG_VERSION")},
        });
        client.request("initialize", &params).await?;
        let line = jsonrpc::notification("notifications/initialized", None);
        client.session.handle_frame(Frame::Line(line.into_bytes()));
        Ok(client)
    }

    /// Sends `method` and waits for its result; a JSON-RPC error becomes [`Error::Rpc`].
    pub(super) async fn request(&self, method: &str, params: &Value) -> Result<Value, Error> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.waiting).insert(id, tx);
        let line = jsonrpc::request(&id.to_string(), method, Some(&params.to_string()));
        self.session.handle_frame(Frame::Line(line.into_bytes()));
        let answer = rx.await.map_err(|_| Error::Closed)?;
        if let Some(error) = answer.error() {
            let error: Value = serde_json::from_str(error).unwrap_or_default();
            return Err(Error::Rpc {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            });
        }
        let result = answer.result().unwrap_or("null");
        serde_json::from_str(result).map_err(|e| Error::Answer {
            method: method.to_string(),
            why: e.to_string(),
        })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Hands each response to its caller. Notifications are left out: the host learns of
/// changes through [`super::Events`], from the hub itself; and the hub sends this session
/// no requests, as it declared no capability that would need one.
async fn read(mut rx: mpsc::UnboundedReceiver<Outgoing>, waiting: Waiting) {
    while let Some(out) = rx.recv().await {
        let Outgoing::Line(line) = out else { continue };
        let Ok(m) = Message::parse(line.into_boxed_str()) else {
            continue;
        };
        if m.kind() != Kind::Response {
            continue;
        }
        if let Some(tx) = m.id_u64().and_then(|id| lock(&waiting).remove(&id)) {
            let _ = tx.send(m);
        }
    }
    // The session is gone: every caller still waiting learns it from its dropped sender.
    lock(&waiting).clear();
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
