//! Hosts a confined server wants beyond its allow list: asked for while its egress proxy
//! holds the connection (the client of a call under way, else the terminal, else refused),
//! "always" remembered per server with the permission decisions, and each refusal kept on
//! the server and put into the result of the tool call it broke.

use super::Hub;
use crate::jsonrpc::{self, Message};
use crate::policy::decisions::Remember;
use crate::policy::prompt::{Answer, Asker, NoClient};
use crate::sandbox::proxy::{Decision, Refusal, host_port};
use crate::upstream::CallError;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

/// Refusals kept per server for `servers` and `/health`.
const KEPT: usize = 5;

/// What the hub knows of hosts per server.
#[derive(Default)]
pub(super) struct Hosts {
    /// Per server index: how many connections were refused in all, and the last few.
    refused: Mutex<HashMap<usize, (u64, VecDeque<Kept>)>>,
    /// "once" answers: (server, `host:port`, the calls in flight when it was given). The
    /// host stays allowed while one of those calls is.
    once: Mutex<Vec<(usize, String, Vec<u64>)>>,
}

struct Kept {
    refusal: Refusal,
    at: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The key of a remembered decision about `what` (`host:port`) for server `server`: apart
/// from tools' `prefix:name`, so a namespace change never moves it.
pub fn host_key(server: &str, what: &str) -> String {
    format!("{server}/net/{what}")
}

impl Hosts {
    pub(super) fn refused(&self, server: usize, refusal: &Refusal) {
        let mut refused = lock(&self.refused);
        let (count, kept) = refused.entry(server).or_default();
        *count += 1;
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(Kept {
            refusal: refusal.clone(),
            at: crate::time::now_rfc3339(),
        });
    }

    /// How many connections of server `server` were refused so far.
    pub(super) fn mark(&self, server: usize) -> u64 {
        lock(&self.refused)
            .get(&server)
            .map_or(0, |(count, _)| *count)
    }

    /// The messages of the refusals after `mark`, each once.
    fn since(&self, server: usize, mark: u64) -> Vec<String> {
        let refused = lock(&self.refused);
        let Some((count, kept)) = refused.get(&server) else {
            return Vec::new();
        };
        let new = usize::try_from(count.saturating_sub(mark)).unwrap_or(usize::MAX);
        let mut messages: Vec<String> = Vec::new();
        for k in kept.iter().skip(kept.len().saturating_sub(new)) {
            let message = k.refusal.message();
            if !messages.contains(&message) {
                messages.push(message);
            }
        }
        messages
    }

    /// Server `server`'s last refusals as `servers --json` and `/health` show them.
    pub(super) fn shown(&self, server: usize) -> Vec<Value> {
        lock(&self.refused)
            .get(&server)
            .map(|(_, kept)| {
                kept.iter()
                    .map(|k| {
                        json!({
                            "kind": "net",
                            "what": k.refusal.what(),
                            "at": k.at,
                            "reason": k.refusal.reason,
                            "fix": k.refusal.fix(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Hub {
    /// Whether server `server` may reach `host:port`, which its allow list does not name.
    pub(super) async fn decide_host(&self, server: usize, host: &str, port: u16) -> Decision {
        let what = host_port(host, port);
        if self.granted_once(server, &what) {
            return Decision::Allow;
        }
        let name = self.server_name(server);
        let key = host_key(&name, &what);
        // The client of a call to this server is asked (as for the server's own requests);
        // not a 2026-07-28 one, whose questions ride on its own call's result, which cannot
        // wait for a connection held here.
        let session = self
            .asked_session(server, "elicitation")
            .filter(|s| !s.is_stateless());
        let asker: &dyn Asker = match &session {
            Some(s) => s.as_ref(),
            None => &NoClient,
        };
        let policy = self.policy();
        match policy.ask_host(&name, &what, &key, asker).await {
            Ok(Answer::Once) => {
                let calls = self.calls_on(server);
                tracing::info!(server = %name, host = %what, "allowed once by the user");
                if !calls.is_empty() {
                    lock(&self.hosts.once).push((server, what, calls));
                }
                Decision::Allow
            }
            Ok(_) => {
                tracing::info!(server = %name, host = %what, "allowed (remembered)");
                // `servers` shows the remembered hosts.
                self.changed.send_modify(|g| *g += 1);
                Decision::Allow
            }
            Err(reason) => Decision::Refuse(reason),
        }
    }

    /// Whether a "once" given during a call still in flight covers `what`; drops the ones
    /// whose calls have all ended.
    fn granted_once(&self, server: usize, what: &str) -> bool {
        let mut once = lock(&self.hosts.once);
        if once.is_empty() {
            return false;
        }
        let live = self.calls_on(server);
        once.retain(|(s, _, calls)| *s != server || calls.iter().any(|c| live.contains(c)));
        once.iter().any(|(s, w, _)| *s == server && w == what)
    }

    /// The numbers of the calls in flight to server `server`.
    fn calls_on(&self, server: usize) -> Vec<u64> {
        super::lock(&self.callers)
            .iter()
            .filter(|c| c.upstream == server)
            .map(|c| c.number)
            .collect()
    }

    /// A `tools/call` reply of server `server`, made an error carrying the proxy's words when
    /// the proxy refused one of its connections after `mark` (taken when the call started):
    /// a server often reports that as success with empty content, or as a bare `fetch
    /// failed`, and the user must learn what was refused and what allows it.
    pub(super) fn with_refusals(
        &self,
        server: usize,
        mark: u64,
        reply: Result<Message, CallError>,
    ) -> Result<Message, CallError> {
        let messages = self.hosts.since(server, mark);
        let Some(result) = reply
            .as_ref()
            .ok()
            .filter(|_| !messages.is_empty())
            .and_then(Message::result)
        else {
            return reply;
        };
        let mut result: Value = serde_json::from_str(result).unwrap_or_else(|_| json!({}));
        let mut content = vec![json!({"type": "text", "text": messages.join("\n")})];
        if let Some(Value::Array(theirs)) = result.get_mut("content").map(Value::take) {
            content.extend(theirs);
        }
        result["content"] = Value::Array(content);
        result["isError"] = Value::Bool(true);
        let line = jsonrpc::result("0", &result.to_string());
        match Message::parse(line.into_boxed_str()) {
            Ok(made) => Ok(made),
            Err(_) => reply,
        }
    }

    /// Server `server`'s remembered answers about hosts, for `servers` and `/health`.
    pub(super) fn remembered_hosts(&self, server: usize) -> Vec<Value> {
        let prefix = host_key(&self.server_name(server), "");
        let Ok(all) = self.policy().decisions().all() else {
            return Vec::new();
        };
        all.range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(key, r)| {
                json!({
                    "host": &key[prefix.len()..],
                    "decision": match r.decision {
                        Remember::Allow => "allow",
                        Remember::Deny => "deny",
                    },
                    "at": r.at,
                    "forget": format!("openpact permissions forget {key}"),
                })
            })
            .collect()
    }
}
