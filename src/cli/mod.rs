//! The command line: `args` is what clap parses, this module runs it — `serve` at once,
//! every other command through `dispatch` to the module of its family — and holds what
//! the commands share (loading the config, waiting for servers, finding the running hubs).
//! Output goes through [`output`], the only place in the crate allowed to print.

mod addrm;
mod args;
pub mod auth;
mod catalog;
pub mod entry;
// The shared hub speaks over a unix socket (see src/platform/mod.rs).
#[cfg(unix)]
pub mod connect;
mod hosts;
mod hubs;
pub mod import;
pub mod output;
mod registry;
pub mod sandbox;
pub mod setup;
mod stores;

pub use args::{
    AuditCommand, CacheCommand, Cli, Command, ConfigCommand, PermissionsCommand, RegistryCommand,
    SandboxCommand, ScriptsCommand,
};

use crate::config::{self, Config, Transport};
use crate::hub::Hub;
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    let state = state_dir(&cli.state_dir);
    let command = match (cli.mcp, cli.command) {
        (
            false,
            Some(Command::Serve {
                http,
                no_stdio,
                profile,
                shared,
            }),
        ) => {
            return serve(&cli.config, &state, |config| crate::face::Faces {
                stdio: !no_stdio && !shared,
                http,
                profile,
                socket: shared
                    .then(|| crate::face::socket::path_for(config.source.as_deref(), &state)),
            })
            .await;
        }
        (true, Some(_)) => bail!(
            "--mcp means `openpact serve`, so it takes no other command; run the command without --mcp"
        ),
        (true, None) => {
            return serve(&cli.config, &state, |_| crate::face::Faces {
                stdio: !cli.no_stdio,
                http: cli.http,
                profile: None,
                socket: None,
            })
            .await;
        }
        (false, Some(c)) => c,
        (false, None) => {
            output::help();
            return Ok(ExitCode::from(2));
        }
    };
    dispatch(&cli.config, &cli.state_dir, &state, command).await
}

/// `openpact serve` (or `--mcp`): the hub behind the faces `faces` makes of the config,
/// until it ends.
async fn serve(
    config: &Option<PathBuf>,
    state: &Path,
    faces: impl FnOnce(&Config) -> crate::face::Faces,
) -> Result<ExitCode> {
    let config = load(config)?;
    crate::face::serve(&config, state, faces(&config)).await?;
    Ok(ExitCode::SUCCESS)
}

/// Runs a command other than `serve`. `config_arg` and `state_dir_arg`: `--config` and
/// `--state-dir` as given; `state`: the state dir they resolve to.
async fn dispatch(
    config_arg: &Option<PathBuf>,
    state_dir_arg: &Option<PathBuf>,
    state: &Path,
    command: Command,
) -> Result<ExitCode> {
    let config = || load(config_arg);
    match command {
        Command::Serve { .. } => unreachable_serve(),
        Command::Connect { profile } => {
            connect::command(config_arg, state_dir_arg, state, profile).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools {
            json,
            search: Some(query),
            limit,
        } => catalog::search_tools(&config()?, state, &query, limit, json).await,
        Command::Tools { json, .. } => catalog::list(&config()?, state, Listing::Tools, json).await,
        Command::Prompts { json } => catalog::list(&config()?, state, Listing::Prompts, json).await,
        Command::Resources { json } => {
            catalog::list(&config()?, state, Listing::Resources, json).await
        }
        Command::Call {
            tool,
            arguments,
            json,
        } => {
            catalog::call(
                config_arg,
                state,
                "tools/call",
                &tool,
                arguments.as_deref(),
                json,
            )
            .await
        }
        Command::Prompt {
            name,
            arguments,
            json,
        } => {
            catalog::call(
                config_arg,
                state,
                "prompts/get",
                &name,
                arguments.as_deref(),
                json,
            )
            .await
        }
        Command::Read { uri, json } => catalog::read(config_arg, state, &uri, json).await,
        Command::Servers { json, start } => hubs::servers(config_arg, state, json, start).await,
        Command::Permissions { command } => stores::permissions(config_arg, state, command).await,
        Command::Reload => hubs::reload(config_arg, state).await,
        Command::Ui { no_open } => {
            hubs::ui(state, located_config(config_arg).as_deref(), !no_open).await
        }
        Command::Cache { command } => {
            hubs::cache(state, located_config(config_arg).as_deref(), command)
        }
        Command::Scripts { command } => stores::scripts(&config()?, state, command),
        Command::Audit {
            command: AuditCommand::Tail { lines, json },
        } => stores::audit_tail(state, lines, json),
        Command::Config {
            command: ConfigCommand::Check { json },
        } => stores::config_check(config_arg, state_dir_arg, json),
        Command::Auth { command } => auth::run(&config()?, state, command).await,
        Command::Import {
            from,
            write,
            home,
            json,
        } => import::run(config_arg, home.as_deref(), &from, write, json),
        Command::Setup {
            hosts,
            undo,
            home,
            json,
        } => setup::run(
            config_arg,
            state_dir_arg,
            home.as_deref(),
            &hosts,
            undo,
            json,
        ),
        Command::Sandbox {
            command:
                SandboxCommand::Allow {
                    name,
                    kind,
                    values,
                    json,
                },
        } => sandbox::allow(config_arg, state, &name, &kind, &values, json).await,
        Command::Add(args) => addrm::add(config_arg, state, args).await,
        Command::Remove { name, json } => addrm::remove(config_arg, state, &name, json).await,
        Command::Registry {
            command:
                RegistryCommand::Search {
                    query,
                    registry_url,
                    json,
                },
        } => addrm::search(&registry_url, &query, json).await,
    }
}

fn unreachable_serve() -> Result<ExitCode> {
    bail!("internal: serve is handled before dispatch")
}

fn load(path: &Option<PathBuf>) -> Result<Config> {
    let config = config::load(path.as_deref())?;
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    Ok(config)
}

/// What a listing command shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Listing {
    Tools,
    Prompts,
    Resources,
}

/// Waits for the servers still starting. Quietly up to `openpact.listWait`, as `serve` does
/// for a first `tools/list`; then it says on stderr which servers it waits for and how long
/// they may take, and waits on until each is ready or has failed its handshake (its
/// `timeout`). Giving up at `listWait` would look tidier but never work for a server whose
/// first `npx`/`uvx` run downloads it: each command would kill the download and the next
/// would start it again. A hung server costs its `timeout`, said up front, not in silence.
async fn settle(hub: &Hub) {
    let quiet = hub.settings.list_wait;
    hub.settled(quiet).await;
    let pending = || -> Vec<Arc<crate::upstream::Upstream>> {
        hub.upstreams()
            .iter()
            .filter(|u| u.snapshot().state.is_pending())
            .cloned()
            .collect()
    };
    let waiting = pending();
    let Some(longest) = waiting.iter().map(|u| u.config().timeout).max() else {
        return;
    };
    let names: Vec<&str> = waiting.iter().map(|u| u.name()).collect();
    output::waiting_for(&names, quiet, longest);
    hub.settled(longest.saturating_sub(quiet) + Duration::from_secs(1))
        .await;
    let left = pending();
    let left: Vec<&str> = left.iter().map(|u| u.name()).collect();
    output::still_starting(&left);
}

/// The servers a SERVER:NAME argument points at, so only those are started.
pub(super) fn servers_named(config: &Config, name: Option<&str>) -> Option<Vec<String>> {
    let (prefix, _) = name?.split_once(':')?;
    let names: Vec<String> = config
        .servers
        .iter()
        .filter(|s| s.prefix() == prefix)
        .map(|s| s.name.clone())
        .collect();
    (!names.is_empty()).then_some(names)
}

fn start_for(config: &Config, state: &Path, name: Option<&str>) -> Arc<Hub> {
    match servers_named(config, name) {
        Some(names) => Hub::start_selected(config, state, |n| names.iter().any(|w| w == n)),
        None => Hub::start(config, state),
    }
}

/// The config file the command line names or the look-up finds, without reading it.
fn located_config(explicit: &Option<PathBuf>) -> Option<PathBuf> {
    config::file(explicit.as_deref()).ok().flatten()
}

/// The running hubs serving the config file `config` (none: no file, the built-ins alone).
/// Only those: another config's hubs are not the ones a command is about.
fn hubs_of(state: &Path, config: Option<&Path>) -> Vec<crate::hub::HubStatus> {
    crate::face::status_file::live(state)
        .into_iter()
        .filter(|h| same_config(h.config.as_deref(), config))
        .collect()
}

/// Whether a running hub's config (as it published it) is the file `ours` names.
fn same_config(theirs: Option<&str>, ours: Option<&Path>) -> bool {
    match (theirs, ours) {
        (None, None) => true,
        (Some(theirs), Some(ours)) => {
            let theirs = Path::new(theirs);
            theirs == ours
                || matches!(
                    (std::fs::canonicalize(theirs), std::fs::canonicalize(ours)),
                    (Ok(a), Ok(b)) if a == b
                )
        }
        _ => false,
    }
}

fn state_dir(explicit: &Option<PathBuf>) -> PathBuf {
    let env = |k: &str| std::env::var(k).ok();
    config::state_dir(explicit.as_deref(), &env)
}

/// `KEY=…` for display: values may be secrets and are never shown.
pub fn env_keys(t: &Transport) -> Vec<String> {
    match t {
        Transport::Stdio { env, .. } => env.iter().map(|(k, _)| k.clone()).collect(),
        Transport::Http { headers, .. } => headers.iter().map(|(k, _)| k.clone()).collect(),
    }
}
