//! An in-process downstream client: the CLI talks to the hub through a [`Session`] exactly as
//! an editor does over stdio, so both exercise one code path.

use super::{Hub, Session};
use crate::jsonrpc::{self, Frame, Kind, Message};
use crate::transport::{Outbox, Outgoing};
use std::sync::Arc;
use tokio::sync::mpsc;

pub struct LocalClient {
    session: Arc<Session>,
    rx: mpsc::UnboundedReceiver<Outgoing>,
    next_id: u64,
}

impl LocalClient {
    /// Opens a session and runs `initialize` with `capabilities` (JSON text).
    pub async fn connect(hub: Arc<Hub>, capabilities: &str) -> LocalClient {
        let (tx, rx) = Outbox::channel();
        let session = Session::new(hub, tx, 0);
        let mut client = LocalClient {
            session,
            rx,
            next_id: 0,
        };
        let params = format!(
            "{{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{capabilities},\"clientInfo\":{{\"name\":\"openpact-cli\",\"version\":\"{}\"}}}}",
            env!("CARGO_PKG_VERSION")
        );
        let id = client.send_request("initialize", &params);
        let _ = client.response(id, |_| {}).await;
        client.notify("notifications/initialized", None);
        client
    }

    /// Sends a request; returns its id.
    pub fn send_request(&mut self, method: &str, params: &str) -> u64 {
        self.next_id += 1;
        let line = jsonrpc::request(&self.next_id.to_string(), method, Some(params));
        self.session.handle_frame(Frame::Line(line.into_bytes()));
        self.next_id
    }

    pub fn notify(&self, method: &str, params: Option<&str>) {
        let line = jsonrpc::notification(method, params);
        self.session.handle_frame(Frame::Line(line.into_bytes()));
    }

    /// Waits for the response to `id`, handing every other message (progress, log lines,
    /// server→client requests) to `on_message`. None if the session went away.
    pub async fn response(
        &mut self,
        id: u64,
        mut on_message: impl FnMut(&Message),
    ) -> Option<Message> {
        while let Some(out) = self.rx.recv().await {
            let Outgoing::Line(line) = out else { continue };
            let Ok(m) = Message::parse(line.into_boxed_str()) else {
                continue;
            };
            if m.kind() == Kind::Response && m.id_u64() == Some(id) {
                return Some(m);
            }
            on_message(&m);
        }
        None
    }
}
