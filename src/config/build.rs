//! Walking the parsed JSON into a [`Config`]: key and type checks, expansion, resolution, and collecting every problem.

use super::expand::{self, Unset};
use super::suggest::{child, closest, closest_key, index, unknown_key};
use super::{
    Config, ConfigError, DEFAULT_TIMEOUT, HubSettings, Problem, Protocol, ServerConfig, ToolNames,
    Transport, jsonc, resolve, units,
};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

const TOP_KEYS: &[&str] = &["mcpServers", "servers", "inputs", "$schema", "openpact"];
const HUB_KEYS: &[&str] = &[
    "toolNames",
    "maxMessageSize",
    "pageSize",
    "listWait",
    "restart",
    "permissions",
    "cache",
    "rateLimits",
    "secrets",
    "audit",
    "builtins",
];
const RESTART_KEYS: &[&str] = &["initialBackoff", "maxBackoff", "maxCrashes", "window"];
/// Accepted silently: they belong to features that read them later.
const RESERVED_HUB_KEYS: &[&str] = &["builtins", "http", "oauth"];
const SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "cwd",
    "disabled",
    "timeout",
    "namespace",
    "type",
    "url",
    "headers",
    "protocol",
    "envFile",
    "oauth",
];
const REMOTE_KINDS: &[&str] = &["http", "sse", "streamable-http"];
const TYPES_HINT: &str = r#"use "stdio", "http", "sse" or "streamable-http""#;
/// A numeric timeout above this many seconds was probably meant as milliseconds.
const SUSPICIOUS_TIMEOUT_SECS: f64 = 3600.0;

pub(super) fn parse(
    text: &str,
    file: &Path,
    label: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let root: Value = serde_json::from_str(&jsonc::strip(text)).map_err(|e| syntax(label, &e))?;
    let mut b = Builder {
        label,
        env,
        base_dir: base_dir(file),
        problems: Vec::new(),
        local: Vec::new(),
        warnings: Vec::new(),
    };
    let Value::Object(root) = root else {
        b.error(
            "",
            format!(
                "the top level is {}; it must be an object like {{\"mcpServers\": {{…}}}}",
                kind_of(&root)
            ),
        );
        return Err(b.into_error());
    };

    let mut hub = HubSettings {
        builtins: super::BuiltinsSettings::defaults(&b.base_dir),
        ..HubSettings::default()
    };
    for (key, value) in &root {
        match key.as_str() {
            "mcpServers" | "servers" | "inputs" | "$schema" => {}
            "openpact" => hub = b.hub(value),
            "mcp" => b.warn(
                "mcp",
                "ignored: this looks like VS Code settings.json; move the `servers` inside it to the top level",
            ),
            _ => {
                let candidates: Vec<(&str, String)> = TOP_KEYS
                    .iter()
                    .map(|k| (*k, (*k).to_string()))
                    .chain(HUB_KEYS.iter().map(|k| (*k, format!("openpact.{k}"))))
                    .collect();
                let pairs: Vec<(&str, &str)> =
                    candidates.iter().map(|(c, s)| (*c, s.as_str())).collect();
                b.warn(&child("", key), unknown_key(closest(key, &pairs)));
            }
        }
    }

    let mut servers = Vec::new();
    let mut claims = Vec::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    for section in ["mcpServers", "servers"] {
        let Some(value) = root.get(section) else {
            continue;
        };
        let Value::Object(entries) = value else {
            b.error(
                section,
                format!(
                    "is {}; it must be an object mapping server names to entries",
                    kind_of(value)
                ),
            );
            continue;
        };
        for (name, entry) in entries {
            let path = child(section, name);
            if let Some((_, first)) = seen.iter().find(|(n, _)| n == name) {
                b.error(
                    &path,
                    format!("server \"{name}\" is already defined at {first}; rename or remove one of them"),
                );
                continue;
            }
            seen.push((name.clone(), path.clone()));
            if let Some(server) = b.server(name, entry, &path, &mut claims) {
                servers.push(server);
            }
        }
    }
    b.collisions(&claims);
    b.rule_targets(&hub, &servers);

    // Only file-level problems stop the load; when there are any, report everything at once.
    if b.problems.iter().any(|p| !b.local.contains(p)) {
        return Err(b.into_error());
    }
    Ok(Config {
        source: (!file.as_os_str().is_empty()).then(|| file.to_path_buf()),
        servers,
        hub,
        warnings: b.warnings,
    })
}

fn syntax(label: &str, e: &serde_json::Error) -> ConfigError {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    ConfigError::from(Problem {
        file: label.to_string(),
        path: format!("{}:{}", e.line(), e.column()),
        message,
    })
}

/// The config file's directory, absolute, so children get absolute paths.
fn base_dir(file: &Path) -> PathBuf {
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Optional fields treat `null` like an absent key.
pub(super) fn get<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key).filter(|v| !v.is_null())
}

/// A claim on a tool-name prefix by an enabled server.
struct Claim {
    name: String,
    path: String,
    prefix: String,
}

pub(super) struct Builder<'a> {
    label: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) base_dir: PathBuf,
    problems: Vec<Problem>,
    /// The subset of `problems` confined to one server's entry (see `server`).
    local: Vec<Problem>,
    warnings: Vec<String>,
}

impl Builder<'_> {
    /// Warns about policy rules that name a server no entry defines (a typo would otherwise
    /// silently never match). Tool names are checked once the servers have listed them.
    fn rule_targets(&mut self, hub: &HubSettings, servers: &[ServerConfig]) {
        let known = |prefix: &str| {
            servers
                .iter()
                .any(|s| s.prefix() == prefix || s.name == prefix)
        };
        let literal = |s: &str| !s.contains(['*', '?', '[', '{']);
        let p = &hub.policy;
        let mut globs: Vec<(String, &str)> = Vec::new();
        for (list, key) in [
            (&p.permissions.allow, "allow"),
            (&p.permissions.ask, "ask"),
            (&p.permissions.deny, "deny"),
        ] {
            globs.extend(
                list.iter()
                    .map(|g| (format!("openpact.permissions.{key}"), g.as_str())),
            );
        }
        globs.extend(
            p.cache
                .rules
                .iter()
                .map(|(g, _)| ("openpact.cache.rules".to_string(), g.as_str())),
        );
        globs.extend(
            p.rate_limits
                .tools
                .iter()
                .map(|(g, _)| ("openpact.rateLimits.tools".to_string(), g.as_str())),
        );
        for (path, glob) in globs {
            // A name without `:` is a built-in tool (`workspace_read`), not a server.
            let Some((server, _)) = glob.split_once(':') else {
                continue;
            };
            if literal(server) && !known(server) {
                self.warn(&path, format!("\"{glob}\" names server \"{server}\", which is not configured; the rule will never match"));
            }
        }
        for (name, _) in &p.rate_limits.servers {
            if !known(name) {
                self.warn(
                    "openpact.rateLimits.servers",
                    format!("\"{name}\" is not a configured server; the limit will never apply"),
                );
            }
        }
    }

    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            file: self.label.to_string(),
            path: path.to_string(),
            message: message.into(),
        });
    }

    pub(super) fn warn(&mut self, path: &str, message: impl Into<String>) {
        let problem = Problem {
            file: self.label.to_string(),
            path: path.to_string(),
            message: message.into(),
        };
        self.warnings.push(problem.to_string());
    }

    fn into_error(self) -> ConfigError {
        ConfigError {
            problems: self.problems,
        }
    }

    fn restart(&mut self, value: &Value, path: &str) -> crate::config::RestartPolicy {
        let mut policy = crate::config::RestartPolicy::default();
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"maxCrashes\": 5, \"window\": \"60s\"}}",
                    kind_of(value)
                ),
            );
            return policy;
        };
        for (key, v) in map {
            let p = child(path, key);
            match key.as_str() {
                "initialBackoff" | "maxBackoff" | "window" => match units::duration(v) {
                    Ok(d) if key == "initialBackoff" => policy.initial_backoff = d,
                    Ok(d) if key == "maxBackoff" => policy.max_backoff = d,
                    Ok(d) => policy.window = d,
                    Err(message) => self.error(&p, message),
                },
                "maxCrashes" => match v
                    .as_u64()
                    .filter(|n| *n >= 1)
                    .and_then(|n| u32::try_from(n).ok())
                {
                    Some(n) => policy.max_crashes = n,
                    None => self.error(
                        &p,
                        format!("{v} is not a valid count; use a whole number of at least 1"),
                    ),
                },
                _ => self.warn(&p, unknown_key(closest_key(key, RESTART_KEYS))),
            }
        }
        if policy.max_backoff < policy.initial_backoff {
            policy.max_backoff = policy.initial_backoff;
        }
        policy
    }

    fn hub(&mut self, value: &Value) -> HubSettings {
        let mut hub = HubSettings {
            builtins: super::BuiltinsSettings::defaults(&self.base_dir),
            ..HubSettings::default()
        };
        let Value::Object(map) = value else {
            self.error(
                "openpact",
                format!(
                    "is {}; it must be an object of hub settings",
                    kind_of(value)
                ),
            );
            return hub;
        };
        for (key, v) in map {
            let path = child("openpact", key);
            if v.is_null() && HUB_KEYS.contains(&key.as_str()) {
                continue;
            }
            match key.as_str() {
                "toolNames" => match v.as_str() {
                    Some("qualified") => hub.tool_names = ToolNames::Qualified,
                    Some("portable") => hub.tool_names = ToolNames::Portable,
                    _ => self.error(
                        &path,
                        format!("{v} is not a tool naming; use \"qualified\" or \"portable\""),
                    ),
                },
                "maxMessageSize" => match units::size(v) {
                    Ok(bytes) if bytes < HubSettings::MIN_MAX_MESSAGE_SIZE as u64 => self.error(
                        &path,
                        format!("{v} is below the minimum; use at least \"1KiB\" (1024 bytes)"),
                    ),
                    Ok(bytes) => match usize::try_from(bytes) {
                        Ok(bytes) => hub.max_message_size = bytes,
                        Err(_) => self.error(&path, format!("{v} is too large for this platform")),
                    },
                    Err(message) => self.error(&path, message),
                },
                "pageSize" => match v.as_u64().filter(|n| *n >= 1).map(usize::try_from) {
                    Some(Ok(n)) => hub.page_size = n,
                    _ => self.error(
                        &path,
                        format!("{v} is not a valid page size; use a whole number of at least 1"),
                    ),
                },
                "listWait" => match units::duration(v) {
                    Ok(wait) => hub.list_wait = wait,
                    Err(message) => self.error(&path, message),
                },
                "restart" => hub.restart = self.restart(v, &path),
                "permissions" => hub.policy.permissions = self.permissions(v, &path),
                "cache" => hub.policy.cache = self.cache(v, &path),
                "rateLimits" => hub.policy.rate_limits = self.rate_limits(v, &path),
                "secrets" => hub.policy.secrets = self.secrets(v, &path),
                "audit" => hub.policy.audit = self.audit(v, &path),
                "builtins" => hub.builtins = self.builtins(v, &path),
                k if RESERVED_HUB_KEYS.contains(&k) => {}
                _ => {
                    let known: Vec<&str> =
                        HUB_KEYS.iter().chain(RESERVED_HUB_KEYS).copied().collect();
                    self.warn(&path, unknown_key(closest_key(key, &known)));
                }
            }
        }
        hub
    }

    fn server(
        &mut self,
        name: &str,
        entry: &Value,
        path: &str,
        claims: &mut Vec<Claim>,
    ) -> Option<ServerConfig> {
        let errors_before = self.problems.len();
        if let Err(message) = check_prefix(name, "server name") {
            self.error(path, message);
        }
        let Value::Object(entry) = entry else {
            self.error(
                path,
                format!(
                    "the server entry is {}; it must be an object like {{\"command\": \"…\", \"args\": […]}}",
                    kind_of(entry)
                ),
            );
            return None;
        };
        for key in entry.keys() {
            let key_path = child(path, key);
            if key == "envFile" {
                self.warn(
                    &key_path,
                    "envFile is not supported (ignored); put the variables in `env`",
                );
            } else if !SERVER_KEYS.contains(&key.as_str()) {
                self.warn(&key_path, unknown_key(closest_key(key, SERVER_KEYS)));
            }
        }

        let disabled = match get(entry, "disabled") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                self.error(
                    &child(path, "disabled"),
                    format!("{v} is not a boolean; use true or false"),
                );
                false
            }
        };
        let namespace = match get(entry, "namespace") {
            None => None,
            Some(Value::String(ns)) => {
                if !ns.is_empty()
                    && let Err(message) = check_prefix(ns, "namespace")
                {
                    self.error(&child(path, "namespace"), message);
                }
                Some(ns.clone())
            }
            Some(v) => {
                self.error(
                    &child(path, "namespace"),
                    format!("{v} is not a string; use a prefix like \"gh\", or \"\" for none"),
                );
                None
            }
        };
        if !disabled {
            claims.push(Claim {
                name: name.to_string(),
                path: path.to_string(),
                prefix: namespace.clone().unwrap_or_else(|| name.to_string()),
            });
        }
        let timeout = self.timeout(entry, path);
        let protocol = match get(entry, "protocol") {
            None => Protocol::default(),
            Some(v) => match v.as_str() {
                Some("legacy") => Protocol::Legacy,
                Some("auto") => Protocol::Auto,
                Some("2026-07-28") => Protocol::Modern,
                _ => {
                    self.error(
                        &child(path, "protocol"),
                        format!(
                            "{v} is not a protocol; use \"legacy\", \"auto\" or \"2026-07-28\""
                        ),
                    );
                    Protocol::default()
                }
            },
        };
        let transport = self.transport(entry, path, disabled);
        // Problems inside one entry keep that server from starting, not the whole hub: an
        // editor's only MCP entry must not lose every tool over one missing `uvx`.
        let unavailable = self.problems[errors_before..].to_vec();
        self.local.extend(unavailable.iter().cloned());
        let transport = transport.unwrap_or_else(|| Transport::Stdio {
            command: String::new(),
            program: PathBuf::new(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            injected: Vec::new(),
        });
        Some(ServerConfig {
            name: name.to_string(),
            namespace,
            disabled,
            timeout,
            protocol,
            transport,
            unavailable,
        })
    }

    fn timeout(&mut self, entry: &Map<String, Value>, path: &str) -> std::time::Duration {
        let Some(v) = get(entry, "timeout") else {
            return DEFAULT_TIMEOUT;
        };
        let path = child(path, "timeout");
        match units::duration(v) {
            Ok(t) if t.is_zero() => {
                self.error(&path, format!("{v} is zero; give a timeout like \"30s\""));
                DEFAULT_TIMEOUT
            }
            Ok(t) => {
                if let Value::Number(n) = v
                    && t.as_secs_f64() > SUSPICIOUS_TIMEOUT_SECS
                {
                    self.warn(
                        &path,
                        format!(
                            "{n} is read as seconds (about {:.1} hours); if you meant milliseconds, write \"{n}ms\"",
                            t.as_secs_f64() / 3600.0
                        ),
                    );
                }
                t
            }
            Err(message) => {
                self.error(&path, message);
                DEFAULT_TIMEOUT
            }
        }
    }

    fn transport(
        &mut self,
        entry: &Map<String, Value>,
        path: &str,
        disabled: bool,
    ) -> Option<Transport> {
        let declared = match get(entry, "type") {
            None => None,
            Some(Value::String(t)) => Some(t.as_str()),
            Some(v) => {
                self.error(
                    &child(path, "type"),
                    format!("{v} is not a string; {TYPES_HINT}"),
                );
                return None;
            }
        };
        let has_command = get(entry, "command").is_some();
        let has_url = get(entry, "url").is_some();
        let remote = match declared {
            Some("stdio") => None,
            Some(t) if REMOTE_KINDS.contains(&t) => Some(t.to_string()),
            Some(t) => {
                let mut message = format!("unknown server type \"{t}\"; {TYPES_HINT}");
                let all = ["stdio", "http", "sse", "streamable-http"];
                if let Some(s) = closest_key(t, &all) {
                    message.push_str(&format!(" (did you mean \"{s}\"?)"));
                }
                self.error(&child(path, "type"), message);
                return None;
            }
            None if has_command && has_url => {
                self.error(
                    path,
                    "has both `command` and `url`; set \"type\" to \"stdio\" or \"http\", or remove one",
                );
                return None;
            }
            None if has_command => None,
            None if has_url => Some("http".to_string()),
            None => {
                let mut message =
                    "has no `command` (the program to run) or `url`; add \"command\": \"…\""
                        .to_string();
                if let Some(typo) = entry.keys().find(|k| {
                    !SERVER_KEYS.contains(&k.as_str())
                        && closest_key(k, &["command", "url"]).is_some()
                }) {
                    message.push_str(&format!(" (is `{typo}` a misspelling?)"));
                }
                self.error(path, message);
                return None;
            }
        };
        match remote {
            None => {
                for key in ["url", "headers", "oauth"] {
                    if get(entry, key).is_some() {
                        self.warn(&child(path, key), "ignored for a stdio server");
                    }
                }
                self.stdio(entry, path, disabled)
            }
            Some(kind) => {
                for key in ["command", "args", "env", "cwd"] {
                    if get(entry, key).is_some() {
                        self.warn(&child(path, key), format!("ignored for a {kind} server"));
                    }
                }
                self.remote(entry, path, kind, disabled)
            }
        }
    }

    /// A string field with variables expanded; `None` (after recording why) on failure.
    pub(super) fn expanded(
        &mut self,
        value: &Value,
        path: &str,
        unset: Unset,
        injected: &mut Vec<(String, String)>,
    ) -> Option<String> {
        let Value::String(text) = value else {
            let hint = match value {
                Value::Number(_) | Value::Bool(_) => format!("; quote it: \"{value}\""),
                _ => String::new(),
            };
            self.error(path, format!("{value} is not a string{hint}"));
            return None;
        };
        match expand::expand(text, self.env, unset, injected) {
            Ok(s) => Some(s),
            Err(e) => {
                self.error(path, e.message());
                None
            }
        }
    }

    pub(super) fn tilde(&mut self, text: String, path: &str) -> Option<String> {
        match resolve::tilde(text, (self.env)("HOME")) {
            Ok(s) => Some(s),
            Err(message) => {
                self.error(path, message);
                None
            }
        }
    }

    /// An object of string values, expanded, in file order.
    pub(super) fn string_map(
        &mut self,
        entry: &Map<String, Value>,
        key: &str,
        path: &str,
        unset: Unset,
        injected: &mut Vec<(String, String)>,
        check_name: fn(&str) -> Result<(), String>,
    ) -> Vec<(String, String)> {
        let map_path = child(path, key);
        let Some(value) = get(entry, key) else {
            return Vec::new();
        };
        let Value::Object(map) = value else {
            self.error(
                &map_path,
                format!(
                    "is {}; it must be an object of string values",
                    kind_of(value)
                ),
            );
            return Vec::new();
        };
        let mut out = Vec::with_capacity(map.len());
        for (name, v) in map {
            let item_path = child(&map_path, name);
            if let Err(message) = check_name(name) {
                self.error(&item_path, message);
                continue;
            }
            if let Some(s) = self.expanded(v, &item_path, unset, injected) {
                out.push((name.clone(), s));
            }
        }
        out
    }

    fn stdio(
        &mut self,
        entry: &Map<String, Value>,
        path: &str,
        disabled: bool,
    ) -> Option<Transport> {
        let unset = Unset::for_server(disabled);
        // Only `env` values are recorded: they are what a child may echo back in logs.
        let mut discard = Vec::new();
        let mut injected = Vec::new();

        let command_path = child(path, "command");
        let command = match get(entry, "command") {
            Some(v) => self
                .expanded(v, &command_path, unset, &mut discard)
                .and_then(|s| self.tilde(s, &command_path)),
            None => {
                self.error(
                    path,
                    "\"type\": \"stdio\" needs a `command` (the program to run); add \"command\": \"…\"",
                );
                None
            }
        };

        let args_path = child(path, "args");
        let mut args = Vec::new();
        match get(entry, "args") {
            None => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(s) = self.expanded(item, &index(&args_path, i), unset, &mut discard)
                    {
                        args.push(s);
                    }
                }
            }
            Some(v) => self.error(
                &args_path,
                format!(
                    "is {}; it must be an array of strings like [\"-y\", \"package\"]",
                    kind_of(v)
                ),
            ),
        }

        let env = self.string_map(entry, "env", path, unset, &mut injected, check_env_name);

        let cwd_path = child(path, "cwd");
        let mut cwd_ok = true;
        let cwd = get(entry, "cwd").and_then(|v| {
            let resolved = self
                .expanded(v, &cwd_path, unset, &mut discard)
                .and_then(|s| self.tilde(s, &cwd_path))
                .and_then(|s| match resolve::cwd(&s, &self.base_dir, !disabled) {
                    Ok(p) => Some(p),
                    Err(message) => {
                        self.error(&cwd_path, message);
                        None
                    }
                });
            cwd_ok = resolved.is_some();
            resolved
        });

        let command = command?;
        let program = if disabled || !cwd_ok {
            PathBuf::from(&command)
        } else {
            // The child searches its own PATH, which the config may override.
            let path_var = env
                .iter()
                .find(|(k, _)| is_path_var(k))
                .map(|(_, v)| v.clone())
                .or_else(|| (self.env)("PATH"));
            let dir = cwd.as_deref().unwrap_or(&self.base_dir);
            match resolve::program(&command, path_var.as_deref(), dir) {
                Ok(p) => p,
                Err(message) => {
                    self.error(&command_path, message);
                    return None;
                }
            }
        };
        Some(Transport::Stdio {
            command,
            program,
            args,
            env,
            cwd,
            injected,
        })
    }

    fn collisions(&mut self, claims: &[Claim]) {
        for (i, later) in claims.iter().enumerate() {
            let Some(first) = claims[..i].iter().find(|c| c.prefix == later.prefix) else {
                continue;
            };
            let message = if later.prefix.is_empty() {
                format!(
                    "server \"{}\" and server \"{}\" ({}) both have no tool-name prefix (namespace \"\"); \
                     set a distinct `namespace` on one of them",
                    later.name, first.name, first.path
                )
            } else {
                format!(
                    "server \"{}\" and server \"{}\" ({}) both use the tool-name prefix \"{}\"; \
                     set a distinct `namespace` on one of them",
                    later.name, first.name, first.path, later.prefix
                )
            };
            self.error(&later.path, message);
        }
    }
}

fn is_path_var(name: &str) -> bool {
    if cfg!(windows) {
        name.eq_ignore_ascii_case("PATH")
    } else {
        name == "PATH"
    }
}

/// Names that become part of `server:tool` must keep that split unambiguous.
fn check_prefix(name: &str, what: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{what} is empty; give it a name"));
    }
    let fixed: String = name
        .chars()
        .map(|c| {
            if c == ':' || c.is_whitespace() || c.is_control() {
                '-'
            } else {
                c
            }
        })
        .collect();
    if name.contains(':') {
        return Err(format!(
            "{what} \"{name}\" contains `:`, which separates server and tool in qualified tool names; rename it (e.g. \"{fixed}\")"
        ));
    }
    if fixed != name {
        return Err(format!(
            "{what} {} contains whitespace or control characters; rename it (e.g. \"{fixed}\")",
            Value::String(name.to_string())
        ));
    }
    Ok(())
}

fn check_env_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(
            "is not a valid environment variable name; use letters, digits and `_`".to_string(),
        );
    }
    Ok(())
}

pub(super) fn check_header_name(name: &str) -> Result<(), String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err("is not a valid HTTP header name".to_string());
    }
    Ok(())
}
