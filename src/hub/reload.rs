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
pub struct ReloadStatus {
    /// RFC 3339.
    pub at: String,
    pub applied: bool,
    /// What changed (applied) or why nothing was (not applied).
    pub message: String,
    /// Settings that changed in the file but wait for a restart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
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

/// Hub settings that changed between `old` and `new` but are read only at start.
fn restart_only(old: &Config, new: &Config) -> Vec<String> {
    let (o, n) = (&old.hub, &new.hub);
    let mut out = Vec::new();
    let mut check = |changed: bool, what: &str| {
        if changed {
            out.push(what.to_string());
        }
    };
    check(o.tool_names != n.tool_names, "openpact.toolNames");
    check(
        o.max_message_size != n.max_message_size,
        "openpact.maxMessageSize",
    );
    check(o.page_size != n.page_size, "openpact.pageSize");
    check(o.list_wait != n.list_wait, "openpact.listWait");
    check(o.restart != n.restart, "openpact.restart");
    check(o.http != n.http, "openpact.http");
    check(
        o.policy.cache.max_bytes != n.policy.cache.max_bytes,
        "openpact.cache.maxBytes",
    );
    check(o.shared != n.shared, "openpact.shared");
    let names =
        |c: &Config| -> Vec<String> { c.hub.profiles.iter().map(|p| p.name.clone()).collect() };
    if !names(new).starts_with(&names(old)) {
        out.push("openpact.profiles (removing, renaming or reordering profiles)".into());
    }
    out
}

impl Hub {
    /// Applies `new` (already checked) as the difference from the config the hub runs.
    pub async fn reload(self: &Arc<Self>, new: Config) -> ReloadReport {
        let mut current = self.reloads.current.lock().await;
        let state_dir = self.reloads.state_dir.clone();
        let mut report = ReloadReport {
            needs_restart: restart_only(&current, &new),
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
        self.apply_hub_settings(&current, &new, &report.needs_restart);
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
        let mut kept = new;
        if !report.needs_restart.is_empty() {
            // What waits for a restart stays as it runs, so the next reload reports it again.
            kept.hub.profiles.clone_from(&current.hub.profiles);
        }
        *current = kept;
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
    fn apply_hub_settings(&self, old: &Config, new: &Config, needs_restart: &[String]) {
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
        let mut shape = new.clone();
        if needs_restart
            .iter()
            .any(|n| n.starts_with("openpact.profiles"))
        {
            shape.hub.profiles.clone_from(&old.hub.profiles);
        }
        let specs: Arc<[views::ViewSpec]> = views::ViewSpec::all(&shape, &index_of).into();
        *write(&self.view_specs) = specs;
    }
}
