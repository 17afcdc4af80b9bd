//! A serialisable picture of every server, for `openpact servers` and for the live status
//! file `openpact serve` keeps in the state dir.

use super::Hub;
pub use crate::time::rfc3339;
use crate::upstream::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    pub state: String,
    pub reason: Option<String>,
    pub protocol_version: Option<String>,
    pub server_info: Option<Value>,
    pub tools: Option<usize>,
    /// Tools the server lists that its `enabledTools` / `disabledTools` hide.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub hidden_tools: usize,
    pub started_at: Option<String>,
    pub ready_ms: Option<u64>,
    pub restarts: u32,
    pub last_error: Option<String>,
    pub pid: Option<u32>,
    pub stderr: Vec<String>,
    /// For a remote server: its URL (without credentials) and transport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<crate::upstream::RemoteStatus>,
    /// How the process is contained (`crate::sandbox::Plan::to_json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Value>,
    /// What the sandbox refused it lately (`{"kind","what","at","fix"}`, oldest first): paths
    /// and sockets as the server reported them, hosts as its egress proxy refused them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refusals: Vec<Value>,
    /// Hosts beyond its allow list the user answered about for good (see `hub::hosts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub asked_hosts: Vec<Value>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What a running `openpact serve` publishes about itself.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HubStatus {
    pub pid: u32,
    pub config: Option<String>,
    pub started_at: String,
    pub updated_at: String,
    pub servers: Vec<ServerStatus>,
    #[serde(default)]
    pub cache: Option<crate::policy::cache::CacheStats>,
    /// The last reload of the config (none yet: absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload: Option<super::ReloadStatus>,
    /// Where a shared hub (`serve --shared`, what `openpact connect` starts) takes windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// The dashboard's address (`serve --http`), where `openpact ui` sends the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui: Option<String>,
}

impl Hub {
    /// Every server's picture, removed ones left out.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.upstreams()
            .iter()
            .filter(|up| !up.is_removed())
            .map(|up| {
                let s = up.snapshot();
                let info = s.info.as_ref();
                ServerStatus {
                    name: up.name().to_string(),
                    state: s.state.label().to_string(),
                    reason: match &s.state {
                        State::Failed(r) | State::NeedsLogin(r) => Some(r.clone()),
                        _ => None,
                    },
                    protocol_version: info.map(|i| i.protocol_version.clone()),
                    server_info: info.and_then(|i| serde_json::from_str(&i.server_info).ok()),
                    tools: (s.state == State::Ready).then(|| s.tools.len()),
                    hidden_tools: s.hidden_tools,
                    started_at: s.started_at.map(rfc3339),
                    ready_ms: s.ready_in.map(|d| d.as_millis() as u64),
                    restarts: s.restarts,
                    last_error: s.last_error.clone(),
                    pid: s.pid,
                    stderr: s.stderr.as_ref().map(|l| l.tail(10)).unwrap_or_default(),
                    remote: s.remote.clone(),
                    sandbox: Some(up.sandbox().to_json()),
                    refusals: self.refusals_of(up),
                    asked_hosts: self.remembered_hosts(up.index),
                }
            })
            .collect()
    }

    /// Server `up`'s last refusals of both kinds, oldest first.
    fn refusals_of(&self, up: &crate::upstream::Upstream) -> Vec<Value> {
        let mut all = self.hosts.shown(up.index);
        all.extend(
            up.refusals()
                .recent()
                .iter()
                .filter_map(|r| serde_json::to_value(r).ok()),
        );
        all.sort_by(|a, b| a["at"].as_str().cmp(&b["at"].as_str()));
        all
    }
}
