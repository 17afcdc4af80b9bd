//! What `connect` keeps of the editor's session, handed over or relayed: the requests in
//! flight, and what a new hub must replay (`initialize`, the log level, subscriptions).

use super::RESTARTED;
use crate::jsonrpc::{self, Kind, Message};
use std::collections::{BTreeSet, HashSet};

/// What the editor said that a new hub must hear again.
#[derive(Default)]
pub(super) struct Replay {
    /// The `initialize` request.
    initialize: Option<String>,
    initialized: bool,
    /// The `logging/setLevel` request.
    level: Option<String>,
    subscriptions: BTreeSet<String>,
}

impl Replay {
    /// The messages a new hub replays, in order (see `Session::replay`).
    pub(super) fn messages(&self) -> Vec<String> {
        let mut all: Vec<String> = self.initialize.iter().cloned().collect();
        if self.initialized {
            all.push(jsonrpc::notification("notifications/initialized", None));
        }
        all.extend(self.level.iter().cloned());
        all.extend(self.subscriptions.iter().map(|uri| {
            jsonrpc::request(
                "0",
                "resources/subscribe",
                Some(&serde_json::json!({ "uri": uri }).to_string()),
            )
        }));
        all
    }
}

/// What `connect` keeps of the session: enough to stand in for the editor.
#[derive(Default)]
pub(super) struct Kept {
    pub(super) replay: Replay,
    /// The editor's requests not answered yet (ids as JSON text).
    pub(super) in_flight: HashSet<String>,
    /// The editor has been written part of a line.
    pub(super) torn: bool,
}

impl Kept {
    /// What the editor is told when its hub went away: an error for each request in flight
    /// (which are then no longer), and that the lists may have changed.
    pub(super) fn hub_gone(&mut self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .in_flight
            .drain()
            .map(|id| jsonrpc::error(&id, crate::upstream::code::UNAVAILABLE, RESTARTED, None))
            .collect();
        if self.replay.initialized {
            for list in ["tools", "prompts", "resources"] {
                lines.push(jsonrpc::notification(
                    &format!("notifications/{list}/list_changed"),
                    None,
                ));
            }
        }
        lines
    }
}

/// The answer to request `id` while no hub runs and none could be started (`why`).
pub(super) fn not_running(id: &str, why: &str) -> String {
    jsonrpc::error(
        id,
        crate::upstream::code::UNAVAILABLE,
        &format!("openpact's shared hub is not running and could not be started: {why}"),
        None,
    )
}

/// What an editor's message means for standing in for it: a request is in flight, and some
/// must be replayed to a new hub.
pub(super) fn note(m: &Message, replay: &mut Replay, in_flight: &mut HashSet<String>) {
    match m.kind() {
        Kind::Request => {
            in_flight.insert(m.id().to_string());
            match m.method() {
                "initialize" => replay.initialize = Some(m.text().to_string()),
                "logging/setLevel" => replay.level = Some(m.text().to_string()),
                "resources/subscribe" => replay.subscriptions.extend(field(m, "uri")),
                "resources/unsubscribe" => {
                    if let Some(uri) = field(m, "uri") {
                        replay.subscriptions.remove(&uri);
                    }
                }
                _ => {}
            }
        }
        Kind::Notification => match m.method() {
            "notifications/initialized" => replay.initialized = true,
            // A cancelled request is not answered.
            "notifications/cancelled" => {
                if let Some(id) = m
                    .params()
                    .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
                    .and_then(|p| p.get("requestId").map(|id| id.to_string()))
                {
                    in_flight.remove(&id);
                }
            }
            _ => {}
        },
        Kind::Response => {}
    }
}

/// A string field of a message's params.
fn field(m: &Message, name: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(m.params()?).ok()?;
    v.get(name)?.as_str().map(String::from)
}
