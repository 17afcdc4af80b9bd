//! Requests to the client: servers' requests forwarded under ids of ours (their answers
//! and cancellations, and what happens when the server that asked is gone), and the hub's
//! own questions: permissions (form elicitation) and login URLs (URL elicitation).

use super::{Forwarded, Session, lock};
use crate::jsonrpc::{self, Message, RawObject};
use crate::policy::prompt::{Answer, Asker, Question};
use crate::upstream::Connection;
use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::oneshot;

impl Session {
    /// Sends a server's request to the client under an id of ours.
    pub(crate) fn forward_server_request(
        &self,
        upstream: usize,
        m: Message,
        from: Weak<Connection>,
    ) {
        let id = self.next_forward_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.forwarded).insert(
            id,
            Forwarded {
                upstream,
                conn: from,
                id: m.id().to_string(),
            },
        );
        self.send_unprompted(jsonrpc::request(&id.to_string(), m.method(), m.params()));
    }

    /// The id (JSON text) the server used for a request forwarded under our id `ours`.
    pub(crate) fn forwarded_id(&self, ours: &str) -> Option<String> {
        let ours: u64 = ours.parse().ok()?;
        lock(&self.forwarded).get(&ours).map(|f| f.id.clone())
    }

    /// A server cancelled a request of its that we forwarded to this client.
    pub(crate) fn cancel_forwarded(
        &self,
        upstream: usize,
        upstream_id: &str,
        reason: Option<&str>,
    ) {
        let ours = {
            let mut fwd = lock(&self.forwarded);
            let found = fwd
                .iter()
                .find(|(_, f)| f.upstream == upstream && f.id == upstream_id && f.alive())
                .map(|(k, _)| *k);

            if let Some(k) = found {
                fwd.remove(&k);
            }
            found
        };
        if let Some(ours) = ours {
            let params = match reason {
                Some(r) => format!("{{\"requestId\":{ours},\"reason\":{r}}}"),
                None => format!("{{\"requestId\":{ours}}}"),
            };
            self.send_unprompted(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }

    /// The client answered a request we forwarded from a server: pass it back under the
    /// server's own id.
    pub(super) fn response(&self, m: &Message) {
        if let Some(tx) = m.id_u64().and_then(|id| lock(&self.own).remove(&id)) {
            let _ = tx.send(m.clone());
            return;
        }
        let Some(fwd) = m.id_u64().and_then(|id| lock(&self.forwarded).remove(&id)) else {
            tracing::debug!(
                id = m.id(),
                "response from the client to no request of ours"
            );
            return;
        };
        let line = match (m.result(), m.error()) {
            (Some(r), _) => jsonrpc::result(&fwd.id, r),
            (None, Some(e)) => jsonrpc::error_raw(&fwd.id, e),
            (None, None) => return,
        };
        // Only to the very process that asked: a restarted server may reuse the same id.
        match fwd.conn.upgrade().filter(|c| !c.is_closed()) {
            Some(conn) => {
                let _ = conn.send(line);
            }
            None => tracing::debug!(
                id = m.id(),
                "answer for a server process that has gone; dropped"
            ),
        }
    }

    /// A server's process ended: its requests to the client can no longer be answered, so the
    /// client is told to stop working on them.
    pub(crate) fn server_gone(&self, upstream: usize) {
        let gone: Vec<u64> = {
            let mut fwd = lock(&self.forwarded);
            let keys: Vec<u64> = fwd
                .iter()
                .filter(|(_, f)| f.upstream == upstream && !f.alive())
                .map(|(k, _)| *k)
                .collect();
            for k in &keys {
                fwd.remove(k);
            }
            keys
        };
        for id in gone {
            let params =
                format!("{{\"requestId\":{id},\"reason\":\"the server that asked has stopped\"}}");
            self.send_unprompted(jsonrpc::notification(
                "notifications/cancelled",
                Some(&params),
            ));
        }
    }
}

impl Session {
    /// Whether the client declared the MCP Apps extension: it is shown tools' views.
    pub(crate) fn shows_apps(&self) -> bool {
        lock(&self.capabilities)
            .as_deref()
            .is_some_and(crate::hub::apps::declared)
    }

    /// Whether the client declared URL-mode elicitation (`elicitation.url`, 2025-11-25).
    pub(crate) fn can_open_urls(&self) -> bool {
        lock(&self.capabilities)
            .as_deref()
            .and_then(|c| {
                RawObject::parse(c)
                    .ok()?
                    .get("elicitation")
                    .map(str::to_string)
            })
            .and_then(|e| RawObject::parse(&e).ok()?.get("url").map(|v| v != "null"))
            .unwrap_or(false)
    }

    /// Asks the client to open `url` (URL-mode elicitation under `elicitation_id`). True when
    /// the user agreed; false on decline, cancel, an error or a client that went away.
    /// Dropped before the answer, the request is withdrawn.
    pub(crate) async fn open_url(&self, elicitation_id: &str, message: &str, url: &str) -> bool {
        let params = format!(
            "{{\"mode\":\"url\",\"message\":{},\"elicitationId\":{},\"url\":{}}}",
            jsonrpc::quote(message),
            jsonrpc::quote(elicitation_id),
            jsonrpc::quote(url)
        );
        let reply = self
            .ask_client("elicitation/create", &params, None, "no longer needed")
            .await;
        let accepted = reply.and_then(|m| {
            let result: serde_json::Value = serde_json::from_str(m.result()?).ok()?;
            Some(result.get("action")?.as_str()? == "accept")
        });
        accepted.unwrap_or(false)
    }

    /// Sends the hub's own request `method` (`elicitation/create`, `sampling/createMessage`,
    /// `roots/list`) with `params`; the client's answer, or None when `timeout` passes
    /// first. Withdrawn (with `dropped` as the reason) if this is dropped first, so the
    /// client does not keep showing a dead dialog.
    pub(super) async fn ask_client(
        &self,
        method: &str,
        params: &str,
        timeout: Option<Duration>,
        dropped: &'static str,
    ) -> Option<Message> {
        let id = self.next_forward_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.own).insert(id, tx);
        let mut pending = Withdraw {
            session: self,
            id,
            reason: dropped,
        };
        self.send_unprompted(jsonrpc::request(&id.to_string(), method, Some(params)));
        let reply = match timeout {
            Some(limit) => tokio::time::timeout(limit, rx).await.ok(),
            None => Some(rx.await),
        };
        match reply {
            Some(Ok(reply)) => {
                pending.reason = "";
                Some(reply)
            }
            _ => {
                pending.reason = "timed out";
                None
            }
        }
    }
}

impl Asker for Session {
    fn decide(&self, question: &Question) -> Option<Answer> {
        self.hub.host.decide.as_ref().map(|decide| decide(question))
    }

    fn client(&self) -> String {
        lock(&self.client_name).to_string()
    }

    fn can_elicit(&self) -> bool {
        self.client_has("elicitation")
    }

    fn turn(&self) -> &tokio::sync::Mutex<()> {
        &self.prompt_turn
    }

    fn elicit(
        &self,
        message: String,
        schema: &'static str,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Option<String>> + Send + '_>> {
        Box::pin(async move {
            let params = format!(
                "{{\"message\":{},\"requestedSchema\":{schema}}}",
                jsonrpc::quote(&message)
            );
            self.ask_client(
                "elicitation/create",
                &params,
                Some(timeout),
                "the call was cancelled",
            )
            .await
            .and_then(|reply| reply.result().map(str::to_string))
        })
    }
}

/// Sends `notifications/cancelled` for an own request to the client unless it was answered.
struct Withdraw<'s> {
    session: &'s Session,
    id: u64,
    reason: &'static str,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        if self.reason.is_empty() {
            return;
        }
        lock(&self.session.own).remove(&self.id);
        let params = format!(
            "{{\"requestId\":{},\"reason\":{}}}",
            self.id,
            jsonrpc::quote(self.reason)
        );
        self.session.send_unprompted(jsonrpc::notification(
            "notifications/cancelled",
            Some(&params),
        ));
    }
}
