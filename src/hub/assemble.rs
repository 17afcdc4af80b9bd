//! One way to build a hub from a config. A config becomes an [`Assembly`] — each server
//! with its sandbox plan and credentials — and [`Hub::apply`] is the one place that puts it
//! in place: over an empty hub at start, as a difference at reload, always in the same
//! order. Secrets and policy come first, so that nothing a server or script says can leave
//! before the policy knows the secrets to redact from it; then the built-ins, the servers,
//! and the views over them. Starting a server in its slot and stopping one are here too:
//! nothing else puts servers in place.

use super::{
    Hub, ReloadReport, builtin_entries, catalog, lock, login, read, token_name, views, write,
};
use crate::auth::{Opener, ServerAuth, TokenStore};
use crate::builtins::Builtins;
use crate::config::{Config, ServerConfig, Transport};
use crate::policy::Policy;
use crate::sandbox::Plan;
use crate::upstream::Upstream;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What in-flight calls of a removed server fail with (after its name).
const REMOVED: &str = "was removed from the config";
/// What in-flight calls of a server restarted for a config change fail with.
const RESTARTED: &str = "was restarted because its entry in the config changed";

/// A config resolved into what the hub runs.
pub(super) struct Assembly {
    pub(super) config: Config,
    /// Per server of `config`, in order: its sandbox plan and, for an enabled remote server,
    /// its OAuth credentials.
    servers: Vec<(Plan, Option<ServerAuth>)>,
}

impl Assembly {
    pub(super) fn of(config: Config, state_dir: &Path) -> Assembly {
        let plans = crate::sandbox::plans(&config, state_dir);
        let auths = auths_of(&config, state_dir);
        Assembly {
            servers: plans.into_iter().zip(auths).collect(),
            config,
        }
    }
}

/// What applying leaves to finish: servers changed in place (their tool list may need a
/// fetch) and the supervisors told to stop.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) retune: Vec<(Arc<Upstream>, ServerConfig)>,
    pub(super) stopping: Vec<JoinHandle<()>>,
}

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

impl Hub {
    /// Puts `next` in place over `running` (`None`: the hub runs nothing yet), recording in
    /// `report` what happened to each server. Returns at once: what is left to wait for is
    /// in the [`Pending`], and the catalogue is rebuilt by the caller.
    pub(super) fn apply(
        self: &Arc<Self>,
        running: Option<&Config>,
        next: Assembly,
        report: &mut ReloadReport,
    ) -> Pending {
        let new = &next.config;
        let state_dir = self.policy().state_dir().to_path_buf();
        // 1. Secrets and policy: the tokens of the credentials in use and of the new ones.
        let seats: Vec<_> = read(&self.logins).into_iter().flatten().collect();
        let tokens = seats
            .iter()
            .map(|s| s.auth())
            .chain(next.servers.iter().filter_map(|(_, a)| a.as_ref()));
        let configured = secrets_of(new);
        let mut secrets = configured.clone();
        for auth in tokens {
            let name = token_name(auth);
            secrets.extend(auth.secrets().into_iter().map(|v| (name.clone(), v)));
        }
        let policy =
            self.policy()
                .reconfigured(&new.hub.policy, &server_names(new), &secrets, new.label());
        move_decisions(&policy, running, new);
        *write(&self.policy) = Arc::new(policy);
        // 2. Built-ins: scripts see the secrets they may use, so new secrets rebuild them too.
        let rebuild = running.is_none_or(|old| {
            old.hub.builtins != new.hub.builtins || secrets_of(old) != configured
        });
        if rebuild {
            let builtins = Arc::new(
                if new.hub.builtins.enabled {
                    crate::builtins::from_settings(&new.hub.builtins, &secrets, &state_dir)
                } else {
                    Builtins::default()
                }
                .joined(&self.host.tools),
            );
            super::lock(&self.builder).set_builtins(&builtin_entries(&builtins));
            *write(&self.builtins) = builtins;
        }
        // 3. Servers: start the new, stop the removed, restart or retune the changed.
        let mut pending = Pending::default();
        let table = self.upstreams();
        let live = |name: &str| {
            table
                .iter()
                .find(|u| !u.is_removed() && u.name() == name)
                .cloned()
        };
        for up in table.iter().filter(|u| !u.is_removed()) {
            if !new.servers.iter().any(|s| s.name == up.name()) {
                up.retire(REMOVED);
                pending.stopping.extend(self.stop_server(up.index));
                report.removed.push(up.name().to_string());
            }
        }
        for (sc, (plan, auth)) in new.servers.iter().zip(next.servers) {
            match live(&sc.name) {
                None => {
                    pending
                        .stopping
                        .extend(self.put_server(None, sc.clone(), plan, auth));
                    report.added.push(sc.name.clone());
                }
                Some(up) => match change(&up.config(), up.sandbox(), sc, &plan) {
                    Change::None => {}
                    Change::InPlace => {
                        pending.retune.push((up, sc.clone()));
                        report.retuned.push(sc.name.clone());
                    }
                    Change::Restart => {
                        up.retire(RESTARTED);
                        pending.stopping.extend(self.put_server(
                            Some(up.index),
                            sc.clone(),
                            plan,
                            auth,
                        ));
                        report.restarted.push(sc.name.clone());
                    }
                },
            }
        }
        // 4. Views, over the servers' places in the table.
        let table = self.upstreams();
        let index_of = |name: &str| {
            table
                .iter()
                .find(|u| !u.is_removed() && u.name() == name)
                .map(|u| u.index)
        };
        *write(&self.view_specs) = views::ViewSpec::all(new, &index_of).into();
        pending
    }

    /// Starts server `sc` in slot `slot` (a new one at the end for `None`), telling the one it
    /// replaces there to stop; returns that one's supervisor, to wait for.
    fn put_server(
        self: &Arc<Self>,
        slot: Option<usize>,
        sc: ServerConfig,
        plan: Plan,
        auth: Option<ServerAuth>,
    ) -> Option<JoinHandle<()>> {
        let mut table = self.upstreams().to_vec();
        let index = slot.unwrap_or(table.len());
        let up = Upstream::new(index, sc, plan, &self.settings, self.links.clone());
        let seat = auth.map(|auth| {
            up.set_credentials(Arc::new(auth.clone()));
            // Tokens from a login or a refresh while serving are redacted from then on too,
            // by whichever policy is current then.
            let name = token_name(&auth);
            let hub = Arc::downgrade(self);
            auth.watch_tokens(Arc::new(move |values| {
                if let Some(hub) = hub.upgrade() {
                    hub.policy().add_secrets(&name, values);
                }
            }));
            Arc::new(login::LoginSeat::new(auth))
        });
        {
            let mut logins = write(&self.logins);
            if logins.len() <= index {
                logins.resize(index + 1, None);
            }
            logins[index] = seat;
        }
        // In the table before it runs: its first event looks it up there.
        if index < table.len() {
            table[index] = up.clone();
        } else {
            table.push(up.clone());
        }
        *write(&self.upstreams) = table.into();
        self.metrics.name_server(index, up.name());
        let (stop, stop_rx) = watch::channel(false);
        let handle = tokio::spawn(up.supervise(stop_rx));
        let mut supervisors = lock(&self.supervisors);
        if supervisors.len() <= index {
            supervisors.resize_with(index + 1, || None);
        }
        let (old_stop, old) = supervisors[index].replace((stop, handle))?;
        let _ = old_stop.send(true);
        Some(old)
    }

    /// Tells server `i`'s supervisor to stop (the server stays in the table, stopped), and
    /// returns it.
    fn stop_server(&self, i: usize) -> Option<JoinHandle<()>> {
        let (stop, handle) = lock(&self.supervisors).get_mut(i)?.take()?;
        let _ = stop.send(true);
        Some(handle)
    }
}

/// Remembered decisions follow a server's tools when a `namespace` renames them: those
/// stored under the server's name (before it had a namespace) or under its previous prefix
/// move to the prefix its tools have now — unless some server's tools still go by the old
/// prefix, whose decisions they then are.
fn move_decisions(policy: &Policy, running: Option<&Config>, new: &Config) {
    for sc in &new.servers {
        let to = sc.prefix();
        let before = running
            .and_then(|old| old.servers.iter().find(|s| s.name == sc.name))
            .map(ServerConfig::prefix);
        let mut from = vec![sc.name.as_str()];
        from.extend(before);
        from.dedup();
        for from in from {
            if from == to || new.servers.iter().any(|s| s.prefix() == from) {
                continue;
            }
            match policy.decisions().move_prefix(from, to) {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    server = %sc.name,
                    "moved {n} remembered decision(s) from \"{from}:…\" to \"{to}{}…\": the server's tools are named so now",
                    if to.is_empty() { "" } else { ":" }
                ),
                Err(e) => tracing::warn!(
                    server = %sc.name,
                    "remembered decisions under \"{from}:…\" could not be moved to the server's new names ({e}); they no longer apply"
                ),
            }
        }
    }
}

/// The OAuth credentials of each enabled remote server (`None` for the others), over one
/// token store. Logins run in the browser where someone can finish them: with a browser
/// command configured (`OPENPACT_OAUTH_BROWSER`) or a terminal on stderr; otherwise a
/// server that needs one waits as "needs login" and says how.
fn auths_of(config: &Config, state_dir: &Path) -> Vec<Option<ServerAuth>> {
    fn remote(s: &ServerConfig) -> Option<(&String, &crate::config::OAuthSettings)> {
        match &s.transport {
            Transport::Http { url, oauth, .. } if !s.disabled => Some((url, oauth)),
            _ => None,
        }
    }
    if !config.servers.iter().any(|s| remote(s).is_some()) {
        return config.servers.iter().map(|_| None).collect();
    }
    let store = Arc::new(TokenStore::open(state_dir));
    let interactive =
        matches!(Opener::from_env(), Opener::Command(_)) || std::io::stderr().is_terminal();
    config
        .servers
        .iter()
        .map(|s| {
            remote(s).map(|(url, oauth)| {
                ServerAuth::new(&s.name, url, oauth, store.clone(), interactive)
            })
        })
        .collect()
}

/// Secret values to redact: the configured secret variables, every value openpact injects
/// into a server's environment, remote servers' header values and OAuth client secrets.
fn secrets_of(config: &Config) -> Vec<(String, String)> {
    let mut secrets: Vec<(String, String)> = config
        .hub
        .policy
        .secrets
        .env
        .iter()
        .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
        .collect();
    for s in &config.servers {
        match &s.transport {
            Transport::Stdio { injected, .. } => secrets.extend(injected.iter().cloned()),
            Transport::Http { headers, oauth, .. } => {
                let upper = s.name.to_ascii_uppercase();
                secrets.extend(headers.iter().map(|(k, v)| {
                    (
                        format!("{upper}_HEADER_{}", k.to_ascii_uppercase()),
                        v.clone(),
                    )
                }));
                if let Some(secret) = &oauth.client_secret {
                    secrets.push((format!("{upper}_CLIENT_SECRET"), secret.clone()));
                }
            }
        }
    }
    secrets
}

/// The configured servers' names in order, then the built-ins' (the rate limiter's
/// buckets).
pub(super) fn server_names(config: &Config) -> Vec<String> {
    let mut servers: Vec<String> = config.servers.iter().map(|s| s.name.clone()).collect();
    servers.push(catalog::BUILTIN_SERVER.to_string());
    servers
}
