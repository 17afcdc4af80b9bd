//! One downstream client: answers the MCP requests the hub serves itself (`initialize`,
//! `ping`, `tools/list`), routes the rest, tracks what is in flight so a client's
//! `notifications/cancelled` reaches the right upstream request, and passes catalogue
//! changes on as `notifications/tools/list_changed`.

use super::{Hub, HubEvent};
use crate::jsonrpc::{self, Frame, Kind, Message, RawObject, code, parse_frame};
use crate::transport::Outgoing;
use crate::upstream::{LEGACY_VERSIONS, OFFERED_VERSION};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

pub struct Session {
    hub: Arc<Hub>,
    out: mpsc::UnboundedSender<Outgoing>,
    /// Downstream request id (JSON text) → the task serving it.
    in_flight: Mutex<HashMap<String, AbortHandle>>,
    initialized: AtomicBool,
}

impl Session {
    pub fn new(hub: Arc<Hub>, out: mpsc::UnboundedSender<Outgoing>) -> Arc<Session> {
        let session = Arc::new(Session {
            hub,
            out,
            in_flight: Mutex::new(HashMap::new()),
            initialized: AtomicBool::new(false),
        });
        tokio::spawn(forward_hub_events(
            Arc::downgrade(&session),
            session.hub.subscribe(),
        ));
        session
    }

    fn send(&self, line: String) {
        let _ = self.out.send(Outgoing::Line(line));
    }

    fn send_error(&self, id: &str, code: i64, message: &str) {
        self.send(jsonrpc::error(id, code, message, None));
    }

    /// Handles one frame read from the client.
    pub fn handle_frame(self: &Arc<Self>, frame: Frame) {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::Oversized { len } => {
                let msg = format!(
                    "message of {len} bytes exceeds the limit of {} bytes (openpact.maxMessageSize)",
                    self.hub.settings.max_message_size
                );
                tracing::warn!("{msg}");
                return self.send_error("null", code::INVALID_REQUEST, &msg);
            }
        };
        match parse_frame(line) {
            Ok(messages) => {
                for m in messages {
                    match m {
                        Ok(m) => self.handle(m),
                        Err(e) => self.send_error(
                            "null",
                            code::INVALID_REQUEST,
                            &format!("Invalid request: {e}"),
                        ),
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "client sent a line that is not JSON-RPC");
                let what = if e.code() == code::PARSE_ERROR {
                    "Parse error"
                } else {
                    "Invalid request"
                };
                self.send_error("null", e.code(), &format!("{what}: {e}"));
            }
        }
    }

    fn handle(self: &Arc<Self>, m: Message) {
        match m.kind() {
            Kind::Request => self.request(m),
            Kind::Notification => self.notification(&m),
            Kind::Response => tracing::debug!(
                id = m.id(),
                "response from the client to no request of ours"
            ),
        }
    }

    fn request(self: &Arc<Self>, m: Message) {
        match m.method() {
            "initialize" => self.initialize(&m),
            "ping" => self.send(jsonrpc::result(m.id(), "{}")),
            // The 2026-07-28 era arrives later; -32601 makes modern clients fall back to
            // `initialize` on the same pipe.
            "server/discover" => self.send_error(
                m.id(),
                code::METHOD_NOT_FOUND,
                "Method not found: server/discover",
            ),
            "tools/list" => self.spawn(m, |s, m| async move { s.tools_list(&m).await }),
            "tools/call" => self.spawn(m, |s, m| async move { s.tools_call(&m).await }),
            other => self.send_error(
                m.id(),
                code::METHOD_NOT_FOUND,
                &format!("Method not found: {other}"),
            ),
        }
    }

    fn notification(&self, m: &Message) {
        match m.method() {
            "notifications/initialized" => self.initialized.store(true, Ordering::Release),
            "notifications/cancelled" => {
                let id = m
                    .params()
                    .and_then(|p| RawObject::parse(p).ok())
                    .and_then(|o| o.get("requestId").map(str::to_string));
                if let Some(id) = id {
                    if let Some(task) = self.lock_in_flight().remove(&id) {
                        // Dropping the request future sends the upstream its own cancel.
                        task.abort();
                        tracing::debug!(id, "request cancelled by the client");
                    }
                }
            }
            other => tracing::debug!(method = other, "ignored notification"),
        }
    }

    fn lock_in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<String, AbortHandle>> {
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs a request on its own task so slow servers never hold up the others, and keeps it
    /// cancellable by id.
    fn spawn<F, Fut>(self: &Arc<Self>, m: Message, f: F)
    where
        F: FnOnce(Arc<Session>, Message) -> Fut,
        Fut: std::future::Future<Output = String> + Send + 'static,
    {
        let id = m.id().to_string();
        let fut = f(self.clone(), m);
        let me = self.clone();
        // Hold the lock across spawn + insert so a fast task cannot remove itself first.
        let mut in_flight = self.lock_in_flight();
        let key = id.clone();
        let task = tokio::spawn(async move {
            let line = fut.await;
            me.lock_in_flight().remove(&key);
            me.send(line);
        });
        in_flight.insert(id, task.abort_handle());
    }

    /// Cancels everything in flight, answering each with an error (used at shutdown, where
    /// a client still reading deserves an answer rather than silence).
    pub fn abort_all(&self, reason: &str) {
        let drained: Vec<_> = self.lock_in_flight().drain().collect();
        for (id, task) in drained {
            task.abort();
            self.send_error(&id, crate::upstream::code::UNAVAILABLE, reason);
        }
    }

    pub fn in_flight(&self) -> usize {
        self.lock_in_flight().len()
    }

    fn initialize(&self, m: &Message) {
        let requested = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .and_then(|o| o.get_str("protocolVersion"));
        let version = match requested {
            Some(v) if LEGACY_VERSIONS.contains(&v.as_str()) => v,
            _ => OFFERED_VERSION.to_string(),
        };
        let mut result = format!(
            "{{\"protocolVersion\":\"{version}\",\"capabilities\":{{\"tools\":{{\"listChanged\":true}}}},\"serverInfo\":{{\"name\":\"openpact\",\"title\":\"openpact MCP hub\",\"version\":\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        );
        if let Some(text) = self.hub.instructions() {
            result.push_str(",\"instructions\":");
            result.push_str(&jsonrpc::quote(&text));
        }
        result.push('}');
        self.send(jsonrpc::result(m.id(), &result));
    }

    async fn tools_list(&self, m: &Message) -> String {
        self.hub.startup_grace().await;
        let catalog = self.hub.catalog();
        let cursor = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .and_then(|o| o.get_str("cursor"));
        let start = match cursor {
            None => 0,
            Some(c) => match parse_cursor(&c, catalog.fingerprint) {
                Some(offset) if offset <= catalog.tools.len() => offset,
                _ => {
                    return jsonrpc::error(
                        m.id(),
                        code::INVALID_PARAMS,
                        "Invalid or stale cursor: the tool list changed; list again from the start",
                        None,
                    );
                }
            },
        };
        let end = (start + self.hub.settings.page_size).min(catalog.tools.len());
        let page = &catalog.tools[start..end];
        let mut result =
            String::with_capacity(32 + page.iter().map(|t| t.json.len() + 1).sum::<usize>());
        result.push_str("{\"tools\":[");
        for (i, t) in page.iter().enumerate() {
            if i > 0 {
                result.push(',');
            }
            result.push_str(&t.json);
        }
        result.push(']');
        if end < catalog.tools.len() {
            result.push_str(",\"nextCursor\":");
            result.push_str(&jsonrpc::quote(&format!(
                "{:016x}.{end}",
                catalog.fingerprint
            )));
        }
        result.push('}');
        jsonrpc::result(m.id(), &result)
    }

    async fn tools_call(&self, m: &Message) -> String {
        let params = m.params().unwrap_or("{}");
        let obj = match RawObject::parse(params) {
            Ok(o) => o,
            Err(e) => {
                return jsonrpc::error(
                    m.id(),
                    code::INVALID_PARAMS,
                    &format!("tools/call params must be an object: {e}"),
                    None,
                );
            }
        };
        let Some(name) = obj.get_str("name") else {
            return jsonrpc::error(
                m.id(),
                code::INVALID_PARAMS,
                "tools/call needs a string `name`",
                None,
            );
        };
        match self.hub.call_tool(&name, &obj).await {
            Ok(reply) => match (reply.result(), reply.error()) {
                (Some(result), _) => jsonrpc::result(m.id(), result),
                (None, Some(error)) => jsonrpc::error_raw(m.id(), error),
                (None, None) => jsonrpc::error(
                    m.id(),
                    code::INTERNAL_ERROR,
                    "server sent an empty response",
                    None,
                ),
            },
            Err(e) => jsonrpc::error(m.id(), e.code(), &e.to_string(), None),
        }
    }
}

fn parse_cursor(cursor: &str, fingerprint: u64) -> Option<usize> {
    let (fp, offset) = cursor.split_once('.')?;
    if u64::from_str_radix(fp, 16).ok()? != fingerprint {
        return None;
    }
    offset.parse().ok()
}

async fn forward_hub_events(
    session: std::sync::Weak<Session>,
    mut rx: tokio::sync::broadcast::Receiver<HubEvent>,
) {
    loop {
        let ev = match rx.recv().await {
            Ok(ev) => ev,
            // Missed events only mean the list changed more than once: announce it once.
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => HubEvent::ToolsChanged,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        let Some(s) = session.upgrade() else { return };
        match ev {
            HubEvent::ToolsChanged if s.initialized.load(Ordering::Acquire) => {
                s.send(jsonrpc::notification(
                    "notifications/tools/list_changed",
                    None,
                ));
            }
            HubEvent::ToolsChanged => {}
        }
    }
}
