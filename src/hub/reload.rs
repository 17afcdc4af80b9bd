//! Applying a changed config to the running hub, and only the difference: a server added
//! starts, one removed stops, one whose start changed (command, args, env, cwd, url,
//! headers, protocol, sandbox…) restarts, one changed only in what applies in place
//! (namespace, timeout, tool filters) keeps its process, and the rest are not touched. The
//! policy and built-ins are rebuilt for the next call; settings that cannot change live are
//! reported. The caller checks the config first: one with errors never gets here.

use super::{Hub, HubEvent, read, views, write};
use crate::config::{Config, ServerConfig};
use crate::sandbox::Plan;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What the hub runs now and how its last reload went.
pub(super) struct Reloads {
    state_dir: PathBuf,
    /// The config applied last: the one the hub started with, then each good reload.
    current: tokio::sync::Mutex<Config>,
    last: Mutex<Option<ReloadStatus>>,
}

impl Reloads {
    pub(super) fn new(config: &Config, state_dir: &Path) -> Reloads {
        Reloads {
            state_dir: state_dir.to_path_buf(),
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
}

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

/// What in-flight calls of a removed server fail with (after its name).
pub const REMOVED: &str = "was removed from the config";
/// What in-flight calls of a server restarted for a config change fail with.
pub const RESTARTED: &str = "was restarted because its entry in the config changed";

/// How long a reload waits for the servers it stops before it rebuilds the catalogue (a
/// server that takes longer drops out of it when it does stop).
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// How a server's new entry differs from what runs.
#[derive(Debug, PartialEq)]
enum Change {
    None,
    InPlace,
    Restart,
}

fn change(old: &ServerConfig, old_plan: &Plan, new: &ServerConfig, new_plan: &Plan) -> Change {
    if old_plan != new_plan {
        return Change::Restart;
    }
    if old == new {
        return Change::None;
    }
    let mut tuned = old.clone();
    tuned.namespace.clone_from(&new.namespace);
    tuned.timeout = new.timeout;
    tuned.tool_filter = new.tool_filter.clone();
    if tuned == *new {
        Change::InPlace
    } else {
        Change::Restart
    }
}

/// What the hub runs of `new`: `new` with the settings read only at start kept as in `old`,
/// and the names of those that differ (they wait for a restart). Kept as they run, a later
/// reload reports them again.
fn as_running(old: &Config, mut new: Config) -> (Config, Vec<String>) {
    let mut waiting = Vec::new();
    let (o, n) = (&old.hub, &mut new.hub);
    macro_rules! keep {
        ($($field:ident).+, $name:expr) => {
            if o.$($field).+ != n.$($field).+ {
                waiting.push($name.to_string());
                n.$($field).+ = o.$($field).+.clone();
            }
        };
    }
    keep!(tool_names, "openpact.toolNames");
    keep!(max_message_size, "openpact.maxMessageSize");
    keep!(page_size, "openpact.pageSize");
    keep!(list_wait, "openpact.listWait");
    keep!(restart, "openpact.restart");
    keep!(http, "openpact.http");
    keep!(policy.cache.max_bytes, "openpact.cache.maxBytes");
    keep!(shared, "openpact.shared");
    // Sessions hold a view by its index: profiles may be added, not removed or moved.
    let names = |c: &crate::config::HubSettings| -> Vec<String> {
        c.profiles.iter().map(|p| p.name.clone()).collect()
    };
    if !names(n).starts_with(&names(o)) {
        waiting.push("openpact.profiles (removing, renaming or reordering profiles)".into());
        n.profiles.clone_from(&o.profiles);
    }
    (new, waiting)
}

impl Hub {
    /// Applies `new` (already checked) as the difference from the config the hub runs.
    pub async fn reload(self: &Arc<Self>, new: Config) -> ReloadReport {
        let mut current = self.reloads.current.lock().await;
        let state_dir = self.reloads.state_dir.clone();
        let (new, needs_restart) = as_running(&current, new);
        let mut report = ReloadReport {
            needs_restart,
            ..ReloadReport::default()
        };
        let plans = crate::sandbox::plans(&new, &state_dir);
        let auths = Self::auths_of(&new, &state_dir, &|_: &str| true);
        let table = self.upstreams();
        let live = |name: &str| {
            table
                .iter()
                .find(|u| !u.is_removed() && u.name() == name)
                .cloned()
        };
        // Supervisors told to stop: waited for below, so the catalogue is rebuilt once.
        let mut stopping = Vec::new();
        for up in table.iter().filter(|u| !u.is_removed()) {
            if !new.servers.iter().any(|s| s.name == up.name()) {
                up.retire(REMOVED);
                stopping.extend(self.stop_server(up.index));
                report.removed.push(up.name().to_string());
            }
        }
        for ((sc, plan), auth) in new.servers.iter().zip(plans).zip(auths) {
            match live(&sc.name) {
                None => {
                    stopping.extend(self.put_server(None, sc.clone(), plan, auth));
                    report.added.push(sc.name.clone());
                }
                Some(up) => match change(&up.config(), up.sandbox(), sc, &plan) {
                    Change::None => {}
                    Change::InPlace => {
                        up.retune(sc.clone()).await;
                        report.retuned.push(sc.name.clone());
                    }
                    Change::Restart => {
                        up.retire(RESTARTED);
                        stopping.extend(self.put_server(Some(up.index), sc.clone(), plan, auth));
                        report.restarted.push(sc.name.clone());
                    }
                },
            }
        }
        let stopped = async {
            for handle in stopping {
                let _ = handle.await;
            }
        };
        if tokio::time::timeout(STOP_WAIT, stopped).await.is_err() {
            tracing::warn!("some servers the reload stops have not stopped yet");
        }
        self.apply_hub_settings(&current, &new);
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
        *current = new;
        self.record_reload(ReloadStatus {
            at: crate::time::rfc3339(std::time::SystemTime::now()),
            applied: true,
            message: report.summary(),
            needs_restart: report.needs_restart.clone(),
        });
        report
    }

    /// Records a reload that was not applied (the config had errors).
    pub fn reload_refused(&self, why: &str) {
        self.record_reload(ReloadStatus {
            at: crate::time::rfc3339(std::time::SystemTime::now()),
            applied: false,
            message: why.to_string(),
            needs_restart: Vec::new(),
        });
    }

    /// How the last reload went (`None`: none yet).
    pub fn last_reload(&self) -> Option<ReloadStatus> {
        super::lock(&self.reloads.last).clone()
    }

    fn record_reload(&self, status: ReloadStatus) {
        *super::lock(&self.reloads.last) = Some(status);
        self.changed.send_modify(|g| *g += 1);
    }

    /// Tells server `i`'s supervisor to stop (the server stays in the table, stopped), and
    /// returns it.
    fn stop_server(&self, i: usize) -> Option<tokio::task::JoinHandle<()>> {
        let (stop, handle) = super::lock(&self.supervisors).get_mut(i)?.take()?;
        let _ = stop.send(true);
        Some(handle)
    }

    /// The policy, built-ins and views of `new`, for the next call and listing.
    fn apply_hub_settings(&self, old: &Config, new: &Config) {
        let seats: Vec<_> = read(&self.logins).into_iter().flatten().collect();
        let secrets = Self::secrets_with_tokens(new, seats.iter().map(|s| s.auth()));
        let servers = Self::server_names(new);
        let policy = self
            .policy()
            .reconfigured(&new.hub.policy, &servers, &secrets, new.label());
        *write(&self.policy) = Arc::new(policy);
        if old.hub.builtins != new.hub.builtins {
            let builtins = Arc::new(Self::builtins_for(new, &secrets, &self.reloads.state_dir));
            super::lock(&self.builder).set_builtins(&super::builtin_entries(&builtins));
            *write(&self.builtins) = builtins;
        }
        let table = self.upstreams();
        let index_of = |name: &str| {
            table
                .iter()
                .find(|u| !u.is_removed() && u.name() == name)
                .map(|u| u.index)
        };
        let specs: Arc<[views::ViewSpec]> = views::ViewSpec::all(new, &index_of).into();
        *write(&self.view_specs) = specs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        crate::config::parse(text, std::path::Path::new(""), &|_| None).unwrap()
    }

    /// What waits for a restart runs as before and is reported on every reload until then;
    /// what applies live comes through.
    #[test]
    fn settings_read_at_start_keep_running_and_are_reported_again() {
        let old = config(r#"{"openpact": {"listWait": "5s", "profiles": {"a": {}, "b": {}}}}"#);
        let new = config(
            r#"{"openpact": {"listWait": "1s", "profiles": {"b": {}}, "toolSearch": {"mode": "on"}}}"#,
        );
        let (running, waiting) = as_running(&old, new.clone());
        assert_eq!(
            waiting,
            [
                "openpact.listWait",
                "openpact.profiles (removing, renaming or reordering profiles)"
            ]
        );
        assert_eq!(running.hub.list_wait, old.hub.list_wait);
        assert_eq!(running.hub.profiles, old.hub.profiles);
        assert_eq!(running.hub.tool_search, new.hub.tool_search, "applies live");
        let (_, again) = as_running(&running, new);
        assert_eq!(again, waiting, "reported again by the next reload");
        let (_, none) = as_running(&old, old.clone());
        assert!(none.is_empty());
    }

    /// Every key camelCase, as in the rest of the status file; a file written before the
    /// rename still reads.
    #[test]
    fn reload_status_keys_are_camel_case_and_the_old_name_still_reads() {
        let status = ReloadStatus {
            at: "2026-01-01T00:00:00Z".into(),
            applied: true,
            message: "no server changed".into(),
            needs_restart: vec!["openpact.pageSize".into()],
        };
        let v = serde_json::to_value(&status).unwrap();
        assert_eq!(v["needsRestart"], serde_json::json!(["openpact.pageSize"]));
        assert!(v.get("needs_restart").is_none(), "{v}");
        let old = r#"{"at":"2026-01-01T00:00:00Z","applied":true,"message":"no server changed","needs_restart":["openpact.pageSize"]}"#;
        assert_eq!(serde_json::from_str::<ReloadStatus>(old).unwrap(), status);
    }
}
