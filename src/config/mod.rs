//! The config layer: finds the JSON config file and turns it into a validated, resolved [`Config`].
//!
//! Everything that can be wrong with a config is reported at load time, all at once,
//! with the file, the JSON path and a fix, so the hub never starts half-configured.

mod build;
mod builtins;
pub mod edit;
mod expand;
pub mod hosts;
mod jsonc;
mod paths;
mod policy;
mod resolve;
mod running;
pub mod sandbox;
pub(crate) mod suggest;
mod units;
pub mod views;

#[cfg(test)]
mod tests;

pub use builtins::{
    BuiltinsSettings, CalendarFeed, CalendarSource, ChatProvider, ChatSettings, GithubSettings,
    ScriptsSettings, VaultSettings, WebSettings,
};
pub use expand::{looks_secret, secret_entry};
pub use running::as_running;
pub use units::human_duration;

/// The server name built-in tools go by in logs, audit records, metrics and listings.
pub const BUILTIN_SERVER: &str = "openpact";
pub use paths::{FILE_NAME, cache_dir, data_dir, locate, state_dir, user_config_file};
pub use policy::{
    CacheSettings, FlowGuard, Flows, Limit, Permissions, PolicySettings, RateLimits, Rule,
};
// For the fuzz target `redact` and tests/remote_faults.rs.
#[cfg(feature = "internals")]
pub use policy::Secrets;

pub use views::{CodeMode, CodeModeSwitch, Globs, Profile, SearchMode, ToolSearch, ToolSelection};

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file label used in messages when the config did not come from a file.
pub const EMBEDDED_LABEL: &str = "<embedded default>";

/// A loaded, validated config with every server's command resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `None` when no file was found (or the text was embedded): an empty hub.
    pub source: Option<PathBuf>,
    /// In file order: `mcpServers` first, then `servers`.
    pub servers: Vec<ServerConfig>,
    pub hub: HubSettings,
    /// Non-fatal findings (`FILE: PATH: message`) for the caller to log.
    pub warnings: Vec<String>,
    /// Keys that are ignored (unknown, or out of place); each is in `warnings` too, and a
    /// problem for [`Config::strict`].
    pub ignored: Vec<Problem>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub name: String,
    /// `None` = use the name; `Some("")` = no prefix at all.
    pub namespace: Option<String>,
    pub disabled: bool,
    /// Per-request timeout.
    pub timeout: Duration,
    pub protocol: Protocol,
    pub transport: Transport,
    /// Problems in this server's entry (command not found, unset variable, wrong type…).
    /// Such a server is reported as failed while the others run; `config check` and
    /// [`Config::strict`] treat them as errors.
    pub unavailable: Vec<Problem>,
    /// The entry's `sandbox` key (always `Unset` for remote servers: it is an error there).
    pub sandbox: sandbox::SandboxChoice,
    /// `enabledTools` / `disabledTools`: which of the server's tools the hub serves.
    pub tool_filter: ToolFilter,
    /// `telemetry`: whether the hub puts its trace context (`traceparent`…) in the `_meta`
    /// of requests to this server while `openpact.telemetry` is on (default true).
    pub telemetry: bool,
}

/// Which of a server's tools the hub serves: those `enabledTools` matches (all when it is
/// absent), minus those `disabledTools` matches; globs over the server's own tool names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolFilter {
    pub enabled: Option<Globs>,
    pub disabled: Globs,
}

impl ToolFilter {
    /// From globs the config already checked (an invalid one is skipped).
    pub fn new(enabled: Option<Vec<String>>, disabled: Vec<String>) -> ToolFilter {
        ToolFilter {
            enabled: enabled.map(Globs::new),
            disabled: Globs::new(disabled),
        }
    }

    /// Whether it hides anything at all.
    pub fn is_active(&self) -> bool {
        self.enabled.is_some() || !self.disabled.is_empty()
    }

    /// Whether the hub serves the server's tool `name`.
    pub fn allows(&self, name: &str) -> bool {
        self.enabled.as_ref().is_none_or(|e| e.matches(name)) && !self.disabled.matches(name)
    }
}

/// The sentence that lists the profiles there are, for a name that is none of them.
pub fn profiles_named(known: &[&str]) -> String {
    if known.is_empty() {
        "it defines none (openpact.profiles)".to_string()
    } else {
        format!("the profiles are {}", known.join(", "))
    }
}

impl Config {
    /// The view of profile `name` (1 for the first profile; 0 is the whole catalogue), or a
    /// sentence that lists the profiles there are.
    pub fn profile_view(&self, name: &str) -> Result<usize, String> {
        if let Some(i) = self.hub.profiles.iter().position(|p| p.name == name) {
            return Ok(i + 1);
        }
        let known: Vec<&str> = self.hub.profiles.iter().map(|p| p.name.as_str()).collect();
        Err(profiles_named(&known))
    }

    /// Why this config may not replace the one a hub runs (`None`: it may): the problems of
    /// its enabled servers (a command not found, an unset variable). A hub that starts runs
    /// without such a server and reports it failed, since an editor's only MCP entry must not
    /// lose every tool over one missing `uvx`; a hub already serving keeps its last good
    /// config instead. Problems of the file itself never get this far ([`load`] fails).
    pub fn refusal(&self) -> Option<String> {
        let problems: Vec<String> = self
            .servers
            .iter()
            .filter(|s| !s.disabled)
            .flat_map(|s| s.unavailable.iter().map(ToString::to_string))
            .collect();
        (!problems.is_empty()).then(|| problems.join("\n"))
    }

    /// Fails with every server-level problem and every ignored key too (what `config check`
    /// reports); the other warnings come along with them.
    pub fn strict(self) -> Result<Config, ConfigError> {
        let problems: Vec<Problem> = self
            .servers
            .iter()
            .flat_map(|s| s.unavailable.iter().cloned())
            .chain(self.ignored.iter().cloned())
            .collect();
        if problems.is_empty() {
            return Ok(self);
        }
        let listed: Vec<String> = self.ignored.iter().map(Problem::to_string).collect();
        let warnings = self
            .warnings
            .into_iter()
            .filter(|w| !listed.contains(w))
            .collect();
        Err(ConfigError { problems, warnings })
    }
}

impl ServerConfig {
    /// The prefix of this server's tool names: the namespace if set, else the name.
    pub fn prefix(&self) -> &str {
        self.namespace.as_deref().unwrap_or(&self.name)
    }
}

/// Which protocol era the hub speaks to a server (`"protocol"` in its entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `initialize` (2024-11-05 … 2025-11-25).
    #[default]
    Handshake,
    /// Probe with `server/discover`, fall back to `initialize`.
    Auto,
    /// The "2026-07-28" protocol revision.
    Stateless,
}

impl Protocol {
    /// The default for a server reached over `transport`: `initialize` for both. Every
    /// server answers `initialize`, while probing a handshake stdio server with
    /// `server/discover` can stall (some never answer an unknown method before
    /// `initialize`). Remote servers are not probed by default either: a dual-era server
    /// (the Python SDK 2.3's) found stateless loses what its tools may rely on in the handshake
    /// era — a tool that asks the client through a server→client request mid-call, or a
    /// resumable SSE stream — so `auto` is an opt-in per server.
    pub fn default_for(transport: &Transport) -> Protocol {
        match transport {
            Transport::Stdio { .. } | Transport::Http { .. } => Protocol::Handshake,
        }
    }

    /// As written in the config.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Handshake => "legacy",
            Protocol::Auto => "auto",
            Protocol::Stateless => "2026-07-28",
        }
    }

    /// What `config check` says of it.
    pub fn plan(self) -> &'static str {
        match self {
            Protocol::Handshake => "legacy (initialize)",
            Protocol::Auto => "auto (server/discover, falling back to initialize)",
            Protocol::Stateless => "2026-07-28 (stateless, no initialize)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        /// As written, after variable and `~` expansion.
        command: String,
        /// The resolved executable; equal to `command` for disabled servers.
        program: PathBuf,
        args: Vec<String>,
        /// Only the variables the config sets (expanded), not the inherited environment.
        env: Vec<(String, String)>,
        /// Absolute.
        cwd: Option<PathBuf>,
        /// (variable, value) pairs substituted into `env` values, for redaction.
        injected: Vec<(String, String)>,
    },
    Http {
        /// After variable expansion; may hold credentials (show it with
        /// [`display_url`]).
        url: String,
        /// Expanded; values may be secrets and are never shown.
        headers: Vec<(String, String)>,
        /// "http" (also what an entry with a `url` and no `type` gets: Streamable HTTP,
        /// falling back to HTTP+SSE), "streamable-http" or "sse".
        kind: String,
        /// The server's `oauth` object; all defaults when absent.
        oauth: OAuthSettings,
    },
}

/// A remote server's `oauth` object: what to use when the server asks for a login.
/// Everything is optional; discovery and dynamic registration fill in the rest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthSettings {
    /// A client id registered with the authorization server beforehand.
    pub client_id: Option<String>,
    /// Its secret (normally `${VAR}`); registered as a secret for redaction.
    pub client_secret: Option<String>,
    /// Scopes to ask for instead of the server's challenge or `scopes_supported`.
    pub scopes: Vec<String>,
    /// A fixed port for the loopback callback (default: any free port).
    pub redirect_port: Option<u16>,
    /// The callback's path (default `/callback`).
    pub callback_path: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolNames {
    /// `server:tool`.
    #[default]
    Qualified,
    Portable,
}

impl ToolNames {
    /// As written in the config.
    pub fn label(self) -> &'static str {
        match self {
            ToolNames::Qualified => "qualified",
            ToolNames::Portable => "portable",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct HubSettings {
    pub tool_names: ToolNames,
    pub max_message_size: usize,
    /// The tools/list page size the hub serves.
    pub page_size: usize,
    /// How long a tools/list may wait for servers that are still starting.
    pub list_wait: Duration,
    pub restart: RestartPolicy,
    pub policy: PolicySettings,
    pub builtins: BuiltinsSettings,
    /// The HTTP face (`openpact.http`); used only by `serve --http`.
    pub http: HttpSettings,
    /// `openpact.sandbox`: the default containment of stdio servers.
    pub sandbox: sandbox::SandboxSettings,
    /// `openpact.toolSearch`: when the catalogue is searched instead of listed.
    pub tool_search: ToolSearch,
    /// `openpact.codeMode`: whether clients get `run_code`, and its limits.
    pub code_mode: CodeMode,
    /// `openpact.profiles`: the catalogue as particular clients see it, in file order.
    pub profiles: Vec<Profile>,
    /// `openpact.reload`: whether `serve` applies changes to the config file as it runs.
    pub reload: bool,
    /// `openpact.shared`: the hub `openpact connect` shares between windows.
    pub shared: SharedSettings,
    /// `openpact.telemetry`: OTLP export of traces and metrics (off by default).
    pub telemetry: TelemetrySettings,
}

/// `openpact.telemetry`: where traces and the `mcp.*` operation-duration histograms go.
/// The standard `OTEL_EXPORTER_OTLP_*` and `OTEL_SERVICE_NAME` variables override it (see
/// `crate::telemetry`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TelemetrySettings {
    /// `otlp`: the OTLP/HTTP base URL (`/v1/traces` and `/v1/metrics` are added); `None`:
    /// off, unless the environment turns it on.
    pub otlp: Option<String>,
    /// `serviceName`: the `service.name` resource attribute (`openpact` when unset).
    pub service_name: Option<String>,
    /// `arguments`: put each call's arguments (redacted) on its span. Off: never exported.
    pub arguments: bool,
}

/// `openpact.shared`: how the hub that `openpact connect` starts behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedSettings {
    /// It exits after its last client has been gone this long.
    pub idle_exit: Duration,
}

impl Default for SharedSettings {
    fn default() -> Self {
        SharedSettings {
            idle_exit: Duration::from_secs(600),
        }
    }
}

/// `openpact.http`: where and how `serve --http` listens.
#[derive(Clone, PartialEq)]
pub struct HttpSettings {
    /// `host:port` to bind when `--http` names none.
    pub address: String,
    /// What guards the face: `openpact.http.token`.
    pub token: HttpToken,
    /// Origins allowed beside http(s)://localhost, 127.0.0.1 and [::1] (any port), as
    /// `scheme://host[:port]`, lower case, without a trailing slash.
    pub allowed_origins: Vec<String>,
    pub max_body_size: usize,
    pub max_sessions: usize,
    /// Requests one session may have in flight at once.
    pub max_in_flight: usize,
    /// A session with no request and no open stream for this long is ended.
    pub session_idle_timeout: Duration,
}

impl HttpSettings {
    pub const DEFAULT_ADDRESS: &str = "127.0.0.1:8765";

    /// `Https://App.Example.com/` → `https://app.example.com`; `None` for anything that is
    /// not `scheme://host[:port]` with an http(s) scheme.
    pub fn normal_origin(text: &str) -> Option<String> {
        let text = text.trim().trim_end_matches('/').to_ascii_lowercase();
        let (scheme, rest) = text.split_once("://")?;
        let ok = matches!(scheme, "http" | "https")
            && !rest.is_empty()
            && !rest.contains(['/', '?', '#', '@', ' ']);
        ok.then_some(text)
    }
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            address: Self::DEFAULT_ADDRESS.to_string(),
            token: HttpToken::None,
            allowed_origins: Vec::new(),
            max_body_size: HubSettings::DEFAULT_MAX_MESSAGE_SIZE,
            max_sessions: 64,
            max_in_flight: 64,
            session_idle_timeout: Duration::from_secs(30 * 60),
        }
    }
}

/// `openpact.http.token`. Serving without a token is never what an empty or unset value
/// silently means: only a config without the key, or with `false`, does that.
#[derive(Clone, PartialEq, Default)]
pub enum HttpToken {
    /// No `token` key: a loopback address serves without one (the default), any other
    /// address refuses to start.
    #[default]
    None,
    /// `"token": false`: no token, on purpose; still loopback only, and said at start.
    Off,
    /// The bearer token every request must carry (expanded from `${VAR}`).
    Bearer(String),
    /// A token was configured but none can be had: its variable is unset, or it is empty.
    /// The HTTP face refuses to start; nothing else needs it.
    Missing {
        /// `FILE: openpact.http.token: ${VAR} is not set`.
        why: String,
        /// The variable the advice tells the user to set, when the value names one.
        variable: Option<String>,
    },
}

impl HttpToken {
    /// The token requests must carry, if any.
    pub fn bearer(&self) -> Option<&str> {
        match self {
            HttpToken::Bearer(t) => Some(t),
            _ => None,
        }
    }
}

// The token stays out of debug output (`config check`, logs).
impl fmt::Debug for HttpToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpToken::None => f.write_str("None"),
            HttpToken::Off => f.write_str("Off"),
            HttpToken::Bearer(_) => f.write_str("Bearer(<set>)"),
            HttpToken::Missing { why, .. } => f.debug_tuple("Missing").field(why).finish(),
        }
    }
}

impl fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSettings")
            .field("address", &self.address)
            .field("token", &self.token)
            .field("allowed_origins", &self.allowed_origins)
            .field("max_body_size", &self.max_body_size)
            .field("max_sessions", &self.max_sessions)
            .field("max_in_flight", &self.max_in_flight)
            .field("session_idle_timeout", &self.session_idle_timeout)
            .finish()
    }
}

/// How a server that crashes is brought back (`openpact.restart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Wait before the first restart; doubles for each further crash in the window.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
    /// Crashes within `window` after which the server is parked as failed.
    pub max_crashes: u32,
    pub window: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_crashes: 5,
            window: Duration::from_secs(60),
        }
    }
}

impl HubSettings {
    pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;
    pub const MIN_MAX_MESSAGE_SIZE: usize = 1024;
    pub const DEFAULT_PAGE_SIZE: usize = 500;
    pub const DEFAULT_LIST_WAIT: Duration = Duration::from_secs(5);
}

impl Default for HubSettings {
    fn default() -> Self {
        Self {
            tool_names: ToolNames::default(),
            max_message_size: Self::DEFAULT_MAX_MESSAGE_SIZE,
            page_size: Self::DEFAULT_PAGE_SIZE,
            list_wait: Self::DEFAULT_LIST_WAIT,
            restart: RestartPolicy::default(),
            policy: PolicySettings::default(),
            // With no config file, `ai-data` goes to the user's data dir (a config file puts
            // it beside itself).
            builtins: BuiltinsSettings::defaults(&data_dir(&|k| std::env::var(k).ok())),
            http: HttpSettings::default(),
            sandbox: sandbox::SandboxSettings::default(),
            tool_search: ToolSearch::default(),
            code_mode: CodeMode::default(),
            profiles: Vec::new(),
            reload: true,
            shared: SharedSettings::default(),
            telemetry: TelemetrySettings::default(),
        }
    }
}

/// The per-request timeout when a server sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One thing wrong with a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The config file as given, or [`EMBEDDED_LABEL`].
    pub file: String,
    /// A JSON path like `mcpServers.github.args[2]`; empty for the whole file; for a
    /// JSON syntax error it is `LINE:COLUMN` and is shown as `FILE:LINE:COLUMN`.
    pub path: String,
    /// What is wrong, then `; ` and how to fix it.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else if self.path.starts_with(|c: char| c.is_ascii_digit()) {
            // JSON paths never start with a digit (such keys are bracketed), so this is LINE:COLUMN.
            write!(f, "{}:{}: {}", self.file, self.path, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.path, self.message)
        }
    }
}

/// Every problem found in one pass over the config, and the warnings found beside them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", lines(.problems, .warnings))]
pub struct ConfigError {
    pub problems: Vec<Problem>,
    /// `FILE: PATH: message`, as in [`Config::warnings`].
    pub warnings: Vec<String>,
}

fn lines(problems: &[Problem], warnings: &[String]) -> String {
    problems
        .iter()
        .map(Problem::to_string)
        .chain(warnings.iter().map(|w| format!("warning: {w}")))
        .collect::<Vec<_>>()
        .join("\n")
}

impl From<Problem> for ConfigError {
    fn from(problem: Problem) -> Self {
        Self {
            problems: vec![problem],
            warnings: Vec::new(),
        }
    }
}

/// No servers, default settings, no source.
pub fn empty() -> Config {
    Config {
        source: None,
        servers: Vec::new(),
        hub: HubSettings::default(),
        warnings: Vec::new(),
        ignored: Vec::new(),
    }
}

/// Locates and reads the config using the real process environment and working
/// directory; no file found gives [`empty`].
pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
    let env = |name: &str| std::env::var(name).ok();
    let cwd = working_dir(explicit)?;
    let Some(path) = locate(explicit, &env, &cwd)? else {
        tracing::debug!("no config file found; starting with no servers");
        return Ok(empty());
    };
    let label = label_for(&path, explicit, &env, &cwd);
    tracing::debug!(config = %path.display(), "reading config");
    let text = std::fs::read_to_string(&path).map_err(|e| Problem {
        file: label.clone(),
        path: String::new(),
        message: format!("cannot read the config file: {e}"),
    })?;
    build::parse(&text, &path, &label, &env)
}

/// The config file [`load`] reads, not read: `openpact connect` finds the shared hub of a
/// file it cannot load by it.
pub fn file(explicit: Option<&Path>) -> Result<Option<PathBuf>, ConfigError> {
    let env = |name: &str| std::env::var(name).ok();
    locate(explicit, &env, &working_dir(explicit)?)
}

fn working_dir(explicit: Option<&Path>) -> Result<PathBuf, ConfigError> {
    Ok(std::env::current_dir().map_err(|e| Problem {
        file: explicit.map_or_else(|| FILE_NAME.to_string(), |p| p.display().to_string()),
        path: String::new(),
        message: format!("cannot determine the current directory: {e}"),
    })?)
}

/// How the file is named in messages: as the user gave it, or relative to the
/// working directory when it was found there.
fn label_for(
    path: &Path,
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
) -> String {
    if let Some(given) = explicit {
        return given.display().to_string();
    }
    if let Some(given) = env("OPENPACT_CONFIG").filter(|v| !v.is_empty()) {
        return given;
    }
    path.strip_prefix(cwd).unwrap_or(path).display().to_string()
}

/// Parses config text as if read from `file` (its label in messages; relative paths
/// are relative to its directory). An empty `file` means embedded text: labelled
/// [`EMBEDDED_LABEL`], relative to the working directory, `source` = `None`.
pub fn parse(
    text: &str,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let label = if file.as_os_str().is_empty() {
        EMBEDDED_LABEL.to_string()
    } else {
        file.display().to_string()
    };
    build::parse(text, file, &label, env)
}

impl Config {
    /// The config file as messages name it; with none loaded, where to create one.
    pub fn label(&self) -> String {
        match &self.source {
            Some(p) => p.display().to_string(),
            None => {
                let user = user_config_file(&|k| std::env::var(k).ok())
                    .map_or_else(|| FILE_NAME.to_string(), |p| p.display().to_string());
                format!("a config file (none is loaded: create {user}, or pass --config)")
            }
        }
    }
}

/// A URL fit to show: no user name or password, query values replaced by `…` (API keys
/// travel there), no fragment; otherwise as written.
pub fn display_url(url: &str) -> String {
    let url = url.split('#').next().unwrap_or("");
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => base.to_string(),
    };
    if let Some(query) = query.filter(|q| !q.is_empty()) {
        let keys: Vec<String> = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| format!("{}=…", pair.split('=').next().unwrap_or("")))
            .collect();
        out.push('?');
        out.push_str(&keys.join("&"));
    }
    out
}
