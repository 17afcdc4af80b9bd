//! Applying a changed config to the running hub, and only the difference ([`Hub::apply`],
//! the same path a hub starts by): a server added starts, one removed stops, one whose start
//! changed (command, args, env, cwd, url, headers, protocol, sandbox…) restarts, one changed
//! only in what applies in place (namespace, timeout, tool filters) keeps its process, and
//! the rest are not touched. Settings that cannot change live are kept and reported (which they are is the config's
//! rule: [`crate::config::as_running`]). The
//! caller checks the config first: one with errors never gets here.

use super::assemble::Assembly;
use super::{Hub, HubEvent};
use crate::config::Config;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What the hub runs now and how its last reload went.
pub(super) struct Reloads {
    state_dir: PathBuf,
    /// The config file the hub serves (it does not change while it runs).
    pub(super) file: Option<PathBuf>,
    /// The config applied last: the one the hub started with, then each good reload.
    current: tokio::sync::Mutex<Config>,
    last: Mutex<Option<ReloadStatus>>,
}

impl Reloads {
    pub(super) fn new(config: &Config, state_dir: &Path) -> Reloads {
        Reloads {
            state_dir: state_dir.to_path_buf(),
            file: config.source.clone(),
            current: tokio::sync::Mutex::new(config.clone()),
            last: Mutex::new(None),
        }
    }
}

/// The last reload, as `openpact servers` and `/health` show it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ReloadStatus {
    /// RFC 3339.
    pub at: String,
    pub applied: bool,
    /// What changed (applied) or why nothing was (not applied).
    pub message: String,
    /// Settings that changed in the file but wait for a restart. (Read under its old name
    /// too: the status file of a hub started before the rename.)
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        alias = "needs_restart"
    )]
    pub needs_restart: Vec<String>,
    /// What the applied config warns of (an unknown key, with the one it may have meant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// What a setting read only at start waits for, after its name.
pub const NEEDS_RESTART: &str =
    "it applies when openpact restarts (the running hub keeps the old value)";

/// What a reload did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ReloadReport {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub restarted: Vec<String>,
    /// Changed in place (namespace, timeout, tool filters): same process.
    pub retuned: Vec<String>,
    /// Settings that changed but need a restart of openpact to apply.
    pub needs_restart: Vec<String>,
}

impl ReloadReport {
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (label, names) in [
            ("added", &self.added),
            ("removed", &self.removed),
            ("restarted", &self.restarted),
            ("changed in place", &self.retuned),
        ] {
            if !names.is_empty() {
                parts.push(format!("{label}: {}", names.join(", ")));
            }
        }
        if parts.is_empty() {
            "no server changed".to_string()
        } else {
            parts.join("; ")
        }
    }
}

/// How long a reload waits for the servers it stops before it rebuilds the catalogue (a
/// server that takes longer drops out of it when it does stop).
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

impl Hub {
    /// Applies `new` (already checked) as the difference from the config the hub runs.
    pub async fn reload(self: &Arc<Self>, new: Config) -> ReloadReport {
        let mut current = self.reloads.current.lock().await;
        let (new, needs_restart) = crate::config::as_running(&current, new);
        let mut report = ReloadReport {
            needs_restart,
            ..ReloadReport::default()
        };
        let next = Assembly::of(new.clone(), &self.reloads.state_dir);
        let pending = self.apply(Some(&current), next, &mut report);
        for (up, sc) in pending.retune {
            up.retune(sc).await;
        }
        let stopped = async {
            for handle in pending.stopping {
                let _ = handle.await;
            }
        };
        if tokio::time::timeout(STOP_WAIT, stopped).await.is_err() {
            tracing::warn!("some servers the reload stops have not stopped yet");
        }
        // The servers' own events rebuild the catalogue as they start and stop; names,
        // filters, built-ins and views changed here need a rebuild now.
        super::events::rebuild_now(self);
        for event in [
            HubEvent::ToolsChanged,
            HubEvent::PromptsChanged,
            HubEvent::ResourcesChanged,
        ] {
            // Each session compares its own lists and tells its client only of a real change.
            let _ = self.events.send(event);
        }
        let status = ReloadStatus {
            at: crate::time::rfc3339(std::time::SystemTime::now()),
            applied: true,
            message: report.summary(),
            needs_restart: report.needs_restart.clone(),
            warnings: new.warnings.clone(),
        };
        *current = new;
        // Those told of a refusal hear that the fix took.
        let fixed = if self.last_reload().is_some_and(|last| !last.applied) {
            ": the errors reported before are fixed"
        } else {
            ""
        };
        if !status.warnings.is_empty() || !status.needs_restart.is_empty() {
            let mut text = format!("openpact reloaded its config ({}){fixed}", status.message);
            for w in &status.warnings {
                text.push_str(&format!("\nwarning: {w}"));
            }
            for setting in &status.needs_restart {
                text.push_str(&format!("\n{setting} changed; {NEEDS_RESTART}"));
            }
            self.tell_clients("warning", &text);
        } else if !fixed.is_empty() {
            let text = format!(
                "openpact applied the changed config ({}){fixed}",
                status.message
            );
            self.tell_clients("notice", &text);
        }
        self.record_reload(status);
        report
    }

    /// Records a reload that was not applied (the config had errors), and tells the clients.
    pub fn reload_refused(&self, why: &str) {
        self.tell_clients(
            "error",
            &format!(
                "openpact did not apply the changed config: it has errors, so the last good one still serves\n{why}"
            ),
        );
        self.record_reload(ReloadStatus {
            at: crate::time::rfc3339(std::time::SystemTime::now()),
            applied: false,
            message: why.to_string(),
            needs_restart: Vec::new(),
            warnings: Vec::new(),
        });
    }

    /// A log message from openpact itself (logger `openpact`) to every client, as the
    /// servers' own reach them: where the user is, which the hub's log is not.
    fn tell_clients(&self, level: &str, text: &str) {
        let rank = super::log_rank(level).unwrap_or(0);
        let params = format!(
            "{{\"level\":{},\"logger\":\"openpact\",\"data\":{}}}",
            crate::jsonrpc::quote(level),
            crate::jsonrpc::quote(text)
        );
        let line = crate::jsonrpc::notification("notifications/message", Some(&params));
        for s in self.sessions() {
            s.deliver_log(rank, &line);
        }
    }

    /// How the last reload went (`None`: none yet).
    pub fn last_reload(&self) -> Option<ReloadStatus> {
        super::lock(&self.reloads.last).clone()
    }

    fn record_reload(&self, status: ReloadStatus) {
        *super::lock(&self.reloads.last) = Some(status);
        self.changed.send_modify(|g| *g += 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key camelCase, as in the rest of the status file; a file written before the
    /// rename still reads.
    #[test]
    fn reload_status_keys_are_camel_case_and_the_old_name_still_reads() {
        let status = ReloadStatus {
            at: "2026-01-01T00:00:00Z".into(),
            applied: true,
            message: "no server changed".into(),
            needs_restart: vec!["openpact.pageSize".into()],
            warnings: Vec::new(),
        };
        let v = serde_json::to_value(&status).unwrap();
        assert_eq!(v["needsRestart"], serde_json::json!(["openpact.pageSize"]));
        assert!(v.get("needs_restart").is_none(), "{v}");
        let old = r#"{"at":"2026-01-01T00:00:00Z","applied":true,"message":"no server changed","needs_restart":["openpact.pageSize"]}"#;
        assert_eq!(serde_json::from_str::<ReloadStatus>(old).unwrap(), status);
    }
}
