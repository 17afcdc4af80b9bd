//! The command line as clap parses it: the commands, their arguments and help text, and
//! what the parse says before anything runs (`--json` wanted, the default log filter).

use super::auth;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

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
    /// Open the dashboard of the running hub of this config in the browser, with a
    /// one-time login link (also printed; it works once, for ten minutes). A hub without
    /// `--http` starts the dashboard on a loopback port of its own.
    Ui {
        /// Print the link only; do not start a browser.
        #[arg(long)]
        no_open: bool,
    },
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
    /// Read the MCP servers the editors and agents on this machine have configured (Claude
    /// Desktop, Claude Code, Cursor, VS Code, Windsurf, Gemini CLI, Codex, opencode) and show
    /// each once as an openpact entry, secrets as ${VAR}; --write adds them to the config.
    Import {
        /// Only these hosts (repeat, or comma-separated): claude-desktop, claude-code,
        /// cursor, vscode, windsurf, gemini, codex, opencode.
        #[arg(long, value_name = "HOST", value_delimiter = ',')]
        from: Vec<String>,
        /// Add the new servers to the config file (made when missing; comments kept).
        #[arg(long)]
        write: bool,
        /// Read the hosts' files under DIR as if it were the home folder.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Point editors at openpact: rewrite each HOST's user config so its only MCP server is
    /// `openpact connect`, after a backup beside the file (FILE.openpact-backup-STAMP).
    Setup {
        /// claude-desktop, claude-code, cursor, vscode, windsurf, gemini, codex, opencode.
        #[arg(required = true, value_name = "HOST")]
        hosts: Vec<String>,
        /// Put back each file's newest backup instead.
        #[arg(long)]
        undo: bool,
        /// The hosts' files are under DIR, as if it were the home folder.
        #[arg(long, value_name = "DIR")]
        home: Option<PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Add a server to the config file (its comments and layout kept; made if missing) and
    /// reload the running hubs: `openpact add NAME -- COMMAND ARGS…`, `openpact add NAME
    /// --url URL`, or `openpact add --registry NAME` from the MCP Registry. A secret-looking
    /// `--env` or `--header` value is written as a `${VAR}` reference, and the command says
    /// which variable to set.
    Add(AddArgs),
    /// Remove server NAME from the config file (its comments and layout kept) and reload the
    /// running hubs.
    Remove {
        /// The server, as the config names it.
        name: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// The MCP Registry: `openpact registry search QUERY`.
    Registry {
        #[command(subcommand)]
        command: RegistryCommand,
    },
    /// Log in to remote servers (OAuth), log out, show the login state.
    Auth {
        #[command(subcommand)]
        command: auth::AuthCommand,
    },
}

/// `openpact add`'s arguments.
#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The server's name in the config (with --registry: default, the last part of the
    /// registry name).
    #[arg(required_unless_present = "registry")]
    pub name: Option<String>,
    /// An environment variable for the server, KEY=VALUE (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", conflicts_with_all = ["url", "registry"])]
    pub env: Vec<String>,
    /// The folder the server runs in.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["url", "registry"])]
    pub cwd: Option<PathBuf>,
    /// The prefix of the server's tools (default: its name; "" for none).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// A remote server's URL (Streamable HTTP, or legacy SSE).
    #[arg(long, value_name = "URL", conflicts_with = "registry")]
    pub url: Option<String>,
    /// An HTTP header for a remote server, 'KEY: VALUE' (repeatable).
    #[arg(
        long = "header",
        short = 'H',
        value_name = "'KEY: VALUE'",
        requires = "url"
    )]
    pub headers: Vec<String>,
    /// Take the server from the MCP Registry by its name (e.g. io.github.user/weather).
    #[arg(long, value_name = "NAME")]
    pub registry: Option<String>,
    /// With --registry: this version instead of the latest.
    #[arg(long, value_name = "V", requires = "registry")]
    pub version: Option<String>,
    /// The MCP Registry to ask.
    #[arg(long, value_name = "URL", env = "OPENPACT_REGISTRY_URL", default_value = REGISTRY_URL)]
    pub registry_url: String,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// The command that starts a stdio server and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The official MCP Registry.
pub const REGISTRY_URL: &str = "https://registry.modelcontextprotocol.io";

#[derive(Debug, Subcommand)]
pub enum RegistryCommand {
    /// The registry's servers whose name matches QUERY, latest versions.
    Search {
        query: String,
        /// The MCP Registry to ask.
        #[arg(long, value_name = "URL", env = "OPENPACT_REGISTRY_URL", default_value = REGISTRY_URL)]
        registry_url: String,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
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
                | Command::Import { json, .. }
                | Command::Setup { json, .. }
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
            Some(Command::Add(AddArgs { json, .. }) | Command::Remove { json, .. })
            | Some(Command::Registry {
                command: RegistryCommand::Search { json, .. },
            })
            | Some(Command::Auth {
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
