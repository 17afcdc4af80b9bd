//! The command line: argument parsing (clap) and one function per command. Output goes
//! through [`output`], the only place in the crate allowed to print.

pub mod auth;
pub mod entry;
pub mod output;
pub mod sandbox;

use crate::config::{self, Config, Transport};
use crate::hub::{Hub, LocalClient};
use crate::jsonrpc::{self, RawObject};
use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Parser)]
#[command(
    name = "openpact",
    version,
    about = "Many MCP servers behind one: serve them to an editor, or call their tools from the shell."
)]
pub struct Cli {
    /// Config file (default: $OPENPACT_CONFIG, ./mcp.json, then the user config dir).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Where openpact keeps its state (default: $OPENPACT_STATE_DIR, then the user state dir).
    #[arg(long, global = true, value_name = "PATH")]
    pub state_dir: Option<PathBuf>,
    /// Same as `openpact serve` (the form some editors expect); takes serve's --http and
    /// --no-stdio, and no command.
    #[arg(long)]
    pub mcp: bool,
    /// With --mcp: as `serve --http`.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, requires = "mcp")]
    pub http: Option<Option<String>>,
    /// With --mcp --http: as `serve --no-stdio`.
    #[arg(long, requires = "http")]
    pub no_stdio: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve every configured server's tools as one MCP server on stdin/stdout, over
    /// Streamable HTTP, or both.
    ///
    /// `--http` adds HTTP on `/mcp` (and `/health`) beside stdio; `--http --no-stdio` serves
    /// HTTP alone. Closing stdin (or a background job's unreadable terminal) ends the stdio
    /// session, and the process unless HTTP is served; HTTP runs until SIGTERM/SIGINT.
    /// HTTP binds 127.0.0.1 by default, checks Origin and Host, and takes the
    /// `openpact.http` settings (address, token, allowedOrigins, maxBodySize, maxSessions,
    /// maxInFlight, sessionIdleTimeout); a non-loopback address needs `openpact.http.token`.
    Serve {
        /// Also serve Streamable HTTP, on ADDR (IP:PORT; default: openpact.http.address,
        /// else 127.0.0.1:8765; port 0 picks a free one; the
        /// address is logged on stderr at start).
        #[arg(long, value_name = "ADDR", num_args = 0..=1)]
        http: Option<Option<String>>,
        /// Don't serve stdio (only with --http).
        #[arg(long, requires = "http")]
        no_stdio: bool,
        /// Serve the stdio session the view of this profile (`openpact.profiles`); over
        /// HTTP each profile has its own endpoint, /mcp/PROFILE.
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
        /// Run as the shared hub of this config, the one `openpact connect` starts: no stdio;
        /// windows connect on a private Unix socket (under $XDG_RUNTIME_DIR/openpact, else
        /// the state dir); exits after openpact.shared.idleExit with no window connected.
        #[arg(long, conflicts_with_all = ["no_stdio", "profile"])]
        shared: bool,
    },
    /// Be an editor's MCP server on stdio through the shared hub of this config, starting it
    /// if none runs: the hub takes over the editor's pipes (a terminal is relayed), and every
    /// window shares one set of servers, cache and logins. Name this in the editor's config:
    /// {"command": "openpact", "args": ["connect"]}.
    Connect {
        /// See the view of this profile (`openpact.profiles`).
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
    },
    /// List the merged tool catalogue, or search it: `openpact tools --search "make a folder"`.
    Tools {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Rank the tools for a task in plain words, as the search_tools meta-tool does.
        #[arg(long, value_name = "QUERY")]
        search: Option<String>,
        /// With --search: how many matches, 1 to 50 (default: openpact.toolSearch.limit).
        #[arg(
            long,
            value_name = "N",
            requires = "search",
            value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=crate::config::ToolSearch::MAX_LIMIT as u64)
        )]
        limit: Option<usize>,
    },
    /// Call a tool: `openpact call SERVER:TOOL '{"arg": 1}'` (use `-` to read the arguments from stdin).
    Call {
        /// The tool, as SERVER:TOOL (any name `openpact tools` shows works).
        tool: String,
        /// Arguments as a JSON object, or `-` for stdin. Default: {}.
        arguments: Option<String>,
        /// Print the raw result JSON.
        #[arg(long)]
        json: bool,
    },
    /// List every server's resources and resource templates.
    Resources {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Read a resource by URI.
    Read {
        uri: String,
        /// Print the raw result JSON.
        #[arg(long)]
        json: bool,
    },
    /// List every server's prompts.
    Prompts {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Get a prompt: `openpact prompt SERVER:NAME '{"arg": "value"}'`.
    Prompt {
        /// The prompt, as SERVER:NAME.
        name: String,
        /// Arguments as a JSON object of strings, or `-` for stdin. Default: {}.
        arguments: Option<String>,
        /// Print the raw result JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show each server's state, protocol, tools, restarts and last stderr lines: those of
    /// the running `openpact serve` processes if there are any, else of freshly started ones.
    Servers {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Start the servers now even when a running `openpact serve` could be shown.
        #[arg(long)]
        start: bool,
    },
    /// Make the running `openpact serve` processes of this config read it again now (they
    /// also do when the file changes, unless `openpact.reload` is false); shows what each did.
    Reload,
    /// Remembered permission decisions: list, allow, deny, forget.
    Permissions {
        #[command(subcommand)]
        command: PermissionsCommand,
    },
    /// The result cache of the running `openpact serve` processes of this config.
    Cache {
        #[command(subcommand)]
        command: CacheCommand,
    },
    /// Starlark scripts of the built-in script tools: list, show, approve, reject.
    Scripts {
        #[command(subcommand)]
        command: ScriptsCommand,
    },
    /// The audit log of calls.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Config file commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Widen a server's sandbox: `openpact sandbox allow NAME write ~/.cache/app`.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Log in to remote servers (OAuth), log out, show the login state.
    Auth {
        #[command(subcommand)]
        command: auth::AuthCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Add a grant to server NAME's `sandbox` in the config file (its comments and layout
    /// kept), make a granted folder under the home folder (0700), and reload the running
    /// hubs of this config. KIND: write | read (paths), net (hosts, like api.example.com or
    /// *.example.com:443), socket (Unix socket paths).
    Allow {
        /// The server, as the config names it.
        name: String,
        /// write, read, net or socket.
        kind: String,
        /// What to allow: paths for write, read and socket; hosts for net.
        #[arg(required = true, value_name = "VALUE")]
        values: Vec<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum PermissionsCommand {
    /// Show remembered decisions.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Always allow a tool or prompt (SERVER:NAME), bound to its current definition, or a
    /// resource (SERVER:URI).
    Allow { name: String },
    /// Always deny a tool or prompt (SERVER:NAME), or a resource (SERVER:URI).
    Deny { name: String },
    /// Forget the decision about SERVER:NAME, so openpact asks again.
    Forget { name: String },
}

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Hits, misses, entries and bytes of each running `openpact serve` of this config.
    Stats {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Empty the cache of each running `openpact serve` of this config (it is sent SIGUSR1).
    Clear,
}

#[derive(Debug, Subcommand)]
pub enum ScriptsCommand {
    /// Every script with its approval status.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Print a script's source (review it before approving).
    Show { name: String },
    /// Approve a script as it is now (its SHA-256 is recorded; an edit needs approval again).
    Approve { name: String },
    /// Refuse a script.
    Reject { name: String },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The last calls, oldest first.
    Tail {
        /// How many.
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: usize,
        /// Raw JSON lines.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the config and print the resolved servers.
    Check {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

impl Cli {
    /// Whether the command asked for `--json`: its failures are then JSON on stdout too.
    pub fn wants_json(&self) -> bool {
        match &self.command {
            Some(
                Command::Tools { json, .. }
                | Command::Call { json, .. }
                | Command::Resources { json }
                | Command::Read { json, .. }
                | Command::Prompts { json }
                | Command::Prompt { json, .. }
                | Command::Servers { json, .. }
                | Command::Config {
                    command: ConfigCommand::Check { json },
                }
                | Command::Audit {
                    command: AuditCommand::Tail { json, .. },
                },
            ) => *json,
            Some(Command::Permissions {
                command: PermissionsCommand::List { json },
            })
            | Some(Command::Cache {
                command: CacheCommand::Stats { json },
            })
            | Some(Command::Scripts {
                command: ScriptsCommand::List { json },
            }) => *json,
            Some(Command::Auth {
                command: auth::AuthCommand::Status { json },
            })
            | Some(Command::Sandbox {
                command: SandboxCommand::Allow { json, .. },
            }) => *json,
            _ => false,
        }
    }

    /// The log filter when `OPENPACT_LOG` and `RUST_LOG` set none: quiet, `serve` too, since
    /// editors show every stderr line of a server as an error; `serve` still says where its
    /// HTTP face listens (port 0 picks one), the one line a person starting it needs. A
    /// command that calls one tool or prompt leaves out which of two servers serves a
    /// contested name or URI: that is for listings, `servers` and `serve`, not news on
    /// every call.
    pub fn default_log_filter(&self) -> &'static str {
        match &self.command {
            Some(Command::Call { .. } | Command::Prompt { .. }) => "warn,openpact::conflicts=error",
            _ => "warn,openpact::listening=info",
        }
    }
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
            let config = load(&cli.config)?;
            let faces = crate::face::Faces {
                stdio: !no_stdio && !shared,
                http,
                profile,
                socket: shared
                    .then(|| crate::face::socket::path_for(config.source.as_deref(), &state)),
            };
            crate::face::serve(&config, &state, faces).await?;
            return Ok(ExitCode::SUCCESS);
        }
        (true, Some(_)) => bail!(
            "--mcp means `openpact serve`, so it takes no other command; run the command without --mcp"
        ),
        (true, None) => {
            let faces = crate::face::Faces {
                stdio: !cli.no_stdio,
                http: cli.http,
                profile: None,
                socket: None,
            };
            let config = load(&cli.config)?;
            crate::face::serve(&config, &state, faces).await?;
            return Ok(ExitCode::SUCCESS);
        }
        (false, Some(c)) => c,
        (false, None) => {
            output::help();
            return Ok(ExitCode::from(2));
        }
    };
    let call = |name: &str, arguments: Option<&str>| -> Result<String> {
        let args = arguments_object(arguments)?;
        Ok(format!(
            "{{\"name\":{},\"arguments\":{args}}}",
            jsonrpc::quote(name)
        ))
    };
    match command {
        Command::Serve { .. } => unreachable_serve(),
        Command::Connect { profile } => {
            let target = match load(&cli.config) {
                Ok(config) => {
                    if let Some(name) = &profile
                        && let Err(hint) = config.profile_view(name)
                    {
                        bail!("no profile \"{name}\" in the config: {hint}");
                    }
                    crate::face::connect::target_for(
                        config.source.as_deref(),
                        &state,
                        cli.state_dir.clone(),
                        profile,
                        config.hub.max_message_size,
                    )
                }
                Err(broken) => {
                    joining_despite(&cli.config, &cli.state_dir, &state, profile, broken)?
                }
            };
            crate::face::connect::run(target).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Tools {
            json,
            search: Some(query),
            limit,
        } => search_tools(&load(&cli.config)?, &state, &query, limit, json).await,
        Command::Tools { json, .. } => {
            list(&load(&cli.config)?, &state, Listing::Tools, json).await
        }
        Command::Prompts { json } => {
            list(&load(&cli.config)?, &state, Listing::Prompts, json).await
        }
        Command::Resources { json } => {
            list(&load(&cli.config)?, &state, Listing::Resources, json).await
        }
        Command::Call {
            tool,
            arguments,
            json,
        } => {
            let params = call(&tool, arguments.as_deref())?;
            invoke(
                &load(&cli.config)?,
                &state,
                Some(&tool),
                "tools/call",
                &params,
                json,
            )
            .await
        }
        Command::Prompt {
            name,
            arguments,
            json,
        } => {
            let params = call(&name, arguments.as_deref())?;
            invoke(
                &load(&cli.config)?,
                &state,
                Some(&name),
                "prompts/get",
                &params,
                json,
            )
            .await
        }
        Command::Read { uri, json } => {
            let params = format!("{{\"uri\":{}}}", jsonrpc::quote(&uri));
            invoke(
                &load(&cli.config)?,
                &state,
                None,
                "resources/read",
                &params,
                json,
            )
            .await
        }
        Command::Servers { json, start } => match load(&cli.config) {
            Ok(config) => servers(&config, &state, json, start).await,
            // A running hub serves its last good config: show it, and what is wrong now.
            Err(e) if !start => {
                let live = hubs_of(&state, located_config(&cli.config).as_deref());
                if live.is_empty() {
                    return Err(e);
                }
                tracing::warn!(
                    "the config has errors (the running hub serves its last good one):\n{e}"
                );
                if json {
                    output::hubs_json(&live, true)?;
                } else {
                    output::live_human(&live);
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => Err(e),
        },
        Command::Permissions { command } => permissions(&cli.config, &state, command).await,
        Command::Reload => reload(&cli.config, &state).await,
        Command::Cache { command } => {
            cache(&state, located_config(&cli.config).as_deref(), command)
        }
        Command::Scripts { command } => scripts(&load(&cli.config)?, &state, command),

        Command::Audit {
            command: AuditCommand::Tail { lines, json },
        } => {
            let records = crate::policy::audit::tail(&state, lines)
                .with_context(|| format!("reading the audit log in {}", state.display()))?;
            output::audit(&records, lines, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Config {
            command: ConfigCommand::Check { json },
        } => config_check(&cli.config, &cli.state_dir, json),
        Command::Auth { command } => auth::run(&load(&cli.config)?, &state, command).await,
        Command::Sandbox {
            command:
                SandboxCommand::Allow {
                    name,
                    kind,
                    values,
                    json,
                },
        } => sandbox::allow(&cli.config, &state, &name, &kind, &values, json).await,
    }
}

/// The servers a SERVER:NAME argument points at, so only those are started.
fn servers_named(config: &Config, name: Option<&str>) -> Option<Vec<String>> {
    let (prefix, _) = name?.split_once(':')?;
    let names: Vec<String> = config
        .servers
        .iter()
        .filter(|s| s.prefix() == prefix)
        .map(|s| s.name.clone())
        .collect();
    (!names.is_empty()).then_some(names)
}

fn start_for(config: &Config, state: &std::path::Path, name: Option<&str>) -> Arc<Hub> {
    match servers_named(config, name) {
        Some(names) => Hub::start_selected(config, state, |n| names.iter().any(|w| w == n)),
        None => Hub::start(config, state),
    }
}

async fn permissions(
    config: &Option<PathBuf>,
    state: &std::path::Path,
    command: PermissionsCommand,
) -> Result<ExitCode> {
    use crate::policy::decisions::Remember;
    let store = crate::policy::decisions::DecisionStore::new(state);
    let (name, decision) = match command {
        PermissionsCommand::List { json } => {
            // Rules beat remembered decisions: show which ones a rule overrides.
            let config = load(config)?;
            let rules = crate::policy::rules::RuleSet::new(&config.hub.policy.permissions);
            output::decisions(&store.all()?, &rules, json)?;
            return Ok(ExitCode::SUCCESS);
        }
        PermissionsCommand::Forget { name } => {
            let existed = store.forget(&name)?;
            output::forgot(&name, existed);
            return Ok(ExitCode::SUCCESS);
        }
        PermissionsCommand::Allow { name } => (name, Remember::Allow),
        PermissionsCommand::Deny { name } => (name, Remember::Deny),
    };
    let config = load(config)?;
    let label = config.label();
    let rules = crate::policy::rules::RuleSet::new(&config.hub.policy.permissions);
    // A decision is bound to the definition the server shows now, so ask the server.
    let hub = start_for(&config, state, Some(&name));
    hub.declare_client(None);
    settle(&hub).await;
    let catalog = hub.catalog();
    let found = catalog
        .tools
        .find(&name)
        .or_else(|| catalog.prompts.find(&name))
        .map(|n| (n.qualified.clone(), n.definition().to_string()))
        .or_else(|| resource_named(&hub, &catalog, &name));
    hub.shutdown().await;
    let Some((qualified, definition)) = found else {
        bail!(
            "no tool, prompt or resource is named {name} (see `openpact tools`, `openpact prompts` and `openpact resources`; a resource is SERVER:URI); for patterns, use openpact.permissions rules in the config"
        );
    };
    // Rules come before remembered decisions: a decision a rule overrides would do nothing,
    // so it is refused with the rule named, and one a rule already makes is only noted.
    let rule = rules.explain(&qualified);
    if let Some(m) = rule.as_ref().filter(|m| !m.agrees_with(decision)) {
        output::overridden(&qualified, decision, m, &label);
        return Ok(ExitCode::from(1));
    }
    store.remember(&qualified, decision, &definition)?;
    output::remembered(&qualified, decision, rule.as_ref(), &definition);
    Ok(ExitCode::SUCCESS)
}

/// `SERVER:URI` when a read of URI goes to that server: the name and (empty) definition a
/// resource's permission is checked under (`hub::session` `by_uri`). Only a URI (with a
/// scheme) may take the route of last resort, the only server with resources: a tool name
/// misspelt is not a resource.
fn resource_named(
    hub: &Hub,
    catalog: &crate::hub::Catalog,
    name: &str,
) -> Option<(Arc<str>, String)> {
    let (prefix, uri) = name.split_once(':')?;
    let upstreams = hub.upstreams();
    let index = match catalog.route_uri_listed(uri) {
        Some(index) => index,
        None if url::Url::parse(uri).is_ok() => catalog.route_uri(uri, &upstreams, |_| true)?,
        None => return None,
    };
    let up = upstreams.iter().find(|u| u.index == index)?;
    (up.config().prefix() == prefix).then(|| (name.into(), String::new()))
}

fn scripts(config: &Config, state: &std::path::Path, command: ScriptsCommand) -> Result<ExitCode> {
    use crate::builtins::scripts;
    let settings = &config.hub.builtins.scripts;
    match command {
        ScriptsCommand::List { json } => {
            let list = scripts::list(settings, state).map_err(anyhow::Error::msg)?;
            output::scripts(&list, &settings.dir, json)?;
        }
        ScriptsCommand::Show { name } => {
            output::script_source(&scripts::show(settings, &name).map_err(anyhow::Error::msg)?)
        }
        ScriptsCommand::Approve { name } => {
            let hash = scripts::approve(settings, state, &name).map_err(anyhow::Error::msg)?;
            output::script_approved(&name, &hash);
        }
        ScriptsCommand::Reject { name } => {
            scripts::reject(settings, state, &name).map_err(anyhow::Error::msg)?;
            output::script_rejected(&name);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks the hubs serving this config to reload (SIGHUP) and waits (a little) for their word.
/// A config with errors is theirs to refuse: they say so and keep serving the last good one;
/// only with no hub to ask are the errors this command's own.
async fn reload(config: &Option<PathBuf>, state: &std::path::Path) -> Result<ExitCode> {
    let loaded = config::load(config.as_deref());
    let source = match &loaded {
        Ok(c) => c.source.clone(),
        Err(_) => located_config(config),
    };
    if source.is_none() && loaded.is_ok() {
        output::nothing_to_reload();
        return Ok(ExitCode::SUCCESS);
    }
    let before = hubs_of(state, source.as_deref());
    if before.is_empty() {
        loaded?;
    }
    let answers = ask_reload(state, &before).await;
    output::reloaded(&answers);
    let failed = answers
        .iter()
        .any(|(_, r)| r.as_ref().is_some_and(|r| !r.applied));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// What each hub did, once asked to reload (`None`: it had not reported back within 5 s).
async fn ask_reload<'h>(
    state: &std::path::Path,
    before: &'h [crate::hub::HubStatus],
) -> Vec<(&'h crate::hub::HubStatus, Option<crate::hub::ReloadStatus>)> {
    for h in before {
        if let Err(e) = crate::platform::send(h.pid, crate::platform::HubSignal::Reload) {
            tracing::warn!(pid = h.pid, "could not signal openpact serve: {e}");
        }
    }
    let reported = |h: &crate::hub::HubStatus| {
        let old = before
            .iter()
            .find(|b| b.pid == h.pid)
            .and_then(|b| b.reload.as_ref());
        h.reload.as_ref().filter(|r| Some(*r) != old).cloned()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut answers: Vec<(&crate::hub::HubStatus, Option<crate::hub::ReloadStatus>)>;
    loop {
        let now: Vec<_> = crate::face::status_file::live(state)
            .into_iter()
            .filter(|h| before.iter().any(|b| b.pid == h.pid))
            .collect();
        answers = before
            .iter()
            .map(|b| (b, now.iter().find(|h| h.pid == b.pid).and_then(reported)))
            .collect();
        if answers.iter().all(|(_, r)| r.is_some()) || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    answers
}

/// `config`: the config file named or found (read or not): only its hubs are reached.
fn cache(
    state: &std::path::Path,
    config: Option<&std::path::Path>,
    command: CacheCommand,
) -> Result<ExitCode> {
    let live = hubs_of(state, config);
    match command {
        CacheCommand::Stats { json } => output::cache_stats(&live, json)?,
        CacheCommand::Clear => {
            for h in &live {
                let clear = crate::platform::HubSignal::ClearCache;
                if let Err(e) = crate::platform::send(h.pid, clear) {
                    tracing::warn!(pid = h.pid, "could not signal openpact serve: {e}");
                }
            }
            output::cache_cleared(live.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A config that does not load only matters to `connect` when no hub runs for its file: a
/// running one serves the last version that did (a reload never applies a broken one), and a
/// new window joins it. It checks the profile itself. Otherwise the error, as for any command.
fn joining_despite(
    config_arg: &Option<PathBuf>,
    state_dir_arg: &Option<PathBuf>,
    state: &std::path::Path,
    profile: Option<String>,
    broken: anyhow::Error,
) -> Result<crate::face::connect::Target> {
    let Ok(Some(file)) = config::file(config_arg.as_deref()) else {
        return Err(broken);
    };
    let target = crate::face::connect::target_for(
        Some(&file),
        state,
        state_dir_arg.clone(),
        profile,
        config::HubSettings::DEFAULT_MAX_MESSAGE_SIZE,
    );
    if !crate::face::connect::hub_listens(&target) {
        return Err(broken);
    }
    tracing::warn!(
        "{broken:#}\nThe shared hub of this config keeps serving its last good version; this window joins it. Fix the file and the hub reloads it."
    );
    Ok(target)
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

async fn list(
    config: &Config,
    state: &std::path::Path,
    what: Listing,
    json: bool,
) -> Result<ExitCode> {
    let hub = Hub::start(config, state);
    hub.declare_client(None);
    settle(&hub).await;
    let catalog = hub.catalog();
    let shown = if json {
        output::listing_json(&hub, &catalog, what)
    } else {
        output::listing_human(&hub, &catalog, what);
        Ok(())
    };
    hub.shutdown().await;
    shown?;
    Ok(ExitCode::SUCCESS)
}

/// `openpact tools --search`: the whole catalogue ranked for `query` by the index that
/// `search_tools` uses.
async fn search_tools(
    config: &Config,
    state: &std::path::Path,
    query: &str,
    limit: Option<usize>,
    json: bool,
) -> Result<ExitCode> {
    if query.trim().is_empty() {
        bail!("--search needs words: the task in plain words, like --search \"make a folder\"");
    }
    // Both are checked to be 1..=MAX_LIMIT (the argument by clap, the setting by config).
    let limit = limit.unwrap_or(config.hub.tool_search.limit);
    let hub = Hub::start(config, state);
    hub.declare_client(None);
    settle(&hub).await;
    let results = crate::hub::views::search_catalog(&hub, query, limit).await;
    let total = hub.catalog().tools.items.len();
    hub.shutdown().await;
    output::search_results(query, &results, total, json)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads a JSON-object argument (`-` = stdin; absent = `{}`) and returns it as JSON text.
fn arguments_object(arguments: Option<&str>) -> Result<String> {
    let text = match arguments {
        None => return Ok("{}".to_string()),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the arguments from stdin")?;
            if s.trim().is_empty() {
                bail!(
                    "`-` reads the arguments from stdin, which was empty; give a JSON object there, like '{{\"message\": \"hi\"}}' ('{{}}' for none)"
                );
            }
            s
        }
        Some(text) => text.to_string(),
    };
    let parsed: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("the arguments are not valid JSON: {}", text.trim()))?;
    if !parsed.is_object() {
        bail!("the arguments must be a JSON object, like '{{\"message\": \"hi\"}}'");
    }
    Ok(parsed.to_string())
}

/// Runs one request through an in-process session, as an editor would, with progress shown
/// on a terminal and Ctrl-C cancelling the request upstream. `name` (SERVER:NAME) limits
/// which servers are started when it clearly names one.
async fn invoke(
    config: &Config,
    state: &std::path::Path,
    name: Option<&str>,
    method: &str,
    params: &str,
    json: bool,
) -> Result<ExitCode> {
    let hub = start_for(config, state, name);
    // Connect first: servers wait to learn the client's capabilities before `initialize`.
    let mut client = LocalClient::connect(hub.clone(), "{}").await;
    settle(&hub).await;
    let progress = output::Progress::new();
    let params = if progress.visible() {
        with_progress_token(params)
    } else {
        params.to_string()
    };
    let id = client.send_request(method, &params);
    let reply = tokio::select! {
        reply = client.response(id, |m| progress.update(m)) => reply,
        _ = tokio::signal::ctrl_c() => {
            client.notify("notifications/cancelled", Some(&format!("{{\"requestId\":{id},\"reason\":\"interrupted\"}}")));
            progress.finish();
            // Let the cancel reach the server before it is stopped.
            tokio::time::sleep(Duration::from_millis(50)).await;
            hub.shutdown().await;
            output::interrupted();
            return Ok(ExitCode::from(130));
        }
    };
    progress.finish();
    hub.shutdown().await;
    let Some(reply) = reply else {
        bail!("the request got no answer")
    };
    if let Some(error) = reply.error() {
        output::rpc_error(error, json);
        return Ok(ExitCode::from(1));
    }
    let result = reply.result().unwrap_or("{}");
    let failed = match method {
        "tools/call" => output::call_result(result, json)?,
        "prompts/get" => output::prompt_result(result, json)?,
        _ => output::read_result(result, json)?,
    };
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn with_progress_token(params: &str) -> String {
    match RawObject::parse(params) {
        Ok(o) => o.with("_meta", "{\"progressToken\":\"cli\"}"),
        Err(_) => params.to_string(),
    }
}

async fn servers(
    config: &Config,
    state_dir: &std::path::Path,
    json: bool,
    start: bool,
) -> Result<ExitCode> {
    if !start {
        let live = hubs_of(state_dir, config.source.as_deref());
        if !live.is_empty() {
            if json {
                output::hubs_json(&live, true)?;
            } else {
                output::live_human(&live);
            }
            return Ok(ExitCode::SUCCESS);
        }
    }
    let started_at = crate::time::now_rfc3339();
    let hub = Hub::start(config, state_dir);
    hub.declare_client(None);
    settle(&hub).await;
    let status = hub.status();
    hub.shutdown().await;
    if json {
        let fresh = crate::hub::HubStatus {
            pid: std::process::id(),
            config: config.source.as_ref().map(|p| p.display().to_string()),
            started_at,
            updated_at: crate::time::now_rfc3339(),
            servers: status,
            cache: None,
            reload: None,
            socket: None,
        };
        output::hubs_json(&[fresh], false)?;
    } else {
        output::servers_human(&status);
    }
    Ok(ExitCode::SUCCESS)
}

/// The config file the command line names or the look-up finds, without reading it.
fn located_config(explicit: &Option<PathBuf>) -> Option<PathBuf> {
    config::file(explicit.as_deref()).ok().flatten()
}

/// The running hubs serving the config file `config` (none: no file, the built-ins alone).
/// Only those: another config's hubs are not the ones a command is about.
fn hubs_of(
    state: &std::path::Path,
    config: Option<&std::path::Path>,
) -> Vec<crate::hub::HubStatus> {
    crate::face::status_file::live(state)
        .into_iter()
        .filter(|h| same_config(h.config.as_deref(), config))
        .collect()
}

/// Whether a running hub's config (as it published it) is the file `ours` names.
fn same_config(theirs: Option<&str>, ours: Option<&std::path::Path>) -> bool {
    match (theirs, ours) {
        (None, None) => true,
        (Some(theirs), Some(ours)) => {
            let theirs = std::path::Path::new(theirs);
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

fn config_check(
    path: &Option<PathBuf>,
    state_dir: &Option<PathBuf>,
    json: bool,
) -> Result<ExitCode> {
    let state = self::state_dir(state_dir);
    match config::load(path.as_deref()).and_then(Config::strict) {
        Ok(config) => {
            if json {
                output::config_json(&config, &state)?;
            } else {
                output::config_human(&config, &state);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            output::config_problems(&e, json)?;
            Ok(ExitCode::from(1))
        }
    }
}

/// `KEY=…` for display: values may be secrets and are never shown.
pub fn env_keys(t: &Transport) -> Vec<String> {
    match t {
        Transport::Stdio { env, .. } => env.iter().map(|(k, _)| k.clone()).collect(),
        Transport::Http { headers, .. } => headers.iter().map(|(k, _)| k.clone()).collect(),
    }
}
