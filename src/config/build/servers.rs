//! One server entry: its keys, `disabled`, `namespace`, `timeout`, `protocol`, and the
//! transport — a stdio command (expanded, `~` and PATH resolved, `env`, `cwd`) or a remote
//! URL with headers; and prefix collisions between servers.

use super::{Builder, get, kind_of};
use crate::config::expand::Unset;
use crate::config::sandbox::SandboxChoice;
use crate::config::suggest::{child, closest_key, index};
use crate::config::{
    DEFAULT_TIMEOUT, Protocol, ServerConfig, ToolFilter, Transport, resolve, units,
};
use serde_json::{Map, Value};
use std::path::PathBuf;

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
    "sandbox",
    "enabledTools",
    "disabledTools",
    "telemetry",
];
const REMOTE_KINDS: &[&str] = &["http", "sse", "streamable-http"];
const TYPES_HINT: &str = r#"use "stdio", "http", "sse" or "streamable-http""#;
/// A numeric timeout above this many seconds was probably meant as milliseconds.
const SUSPICIOUS_TIMEOUT_SECS: f64 = 3600.0;

/// A claim on a tool-name prefix by an enabled server.
pub(super) struct Claim {
    name: String,
    path: String,
    prefix: String,
}

impl Builder<'_> {
    pub(super) fn server(
        &mut self,
        name: &str,
        entry: &Value,
        path: &str,
        claims: &mut Vec<Claim>,
    ) -> Option<ServerConfig> {
        let errors_before = self.problems.len();
        let entry = self.server_entry(name, entry, path)?;
        let disabled = self.disabled_setting(entry, path);
        let namespace = self.namespace_setting(entry, path);
        if !disabled {
            claims.push(Claim {
                name: name.to_string(),
                path: path.to_string(),
                prefix: namespace.clone().unwrap_or_else(|| name.to_string()),
            });
        }
        let timeout = self.timeout(entry, path);
        let protocol = self.protocol_setting(entry, path);
        let transport = self.transport(entry, path, disabled);
        let sandbox = self.server_sandbox(entry, path, transport.as_ref());
        let prefix = namespace.as_deref().unwrap_or(name);
        let tool_filter = self.tool_filter(entry, path, name, prefix);
        let telemetry = self.flag(entry, path, "telemetry", true);
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
        let protocol = protocol.unwrap_or_else(|| Protocol::default_for(&transport));
        Some(ServerConfig {
            name: name.to_string(),
            namespace,
            disabled,
            timeout,
            protocol,
            transport,
            unavailable,
            sandbox,
            tool_filter,
            telemetry,
        })
    }

    /// The entry's object, its name and keys checked; `None` when it is not an object.
    fn server_entry<'v>(
        &mut self,
        name: &str,
        entry: &'v Value,
        path: &str,
    ) -> Option<&'v Map<String, Value>> {
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
                self.ignored(
                    &key_path,
                    "envFile is not supported (ignored); put the variables in `env`",
                );
            } else if !SERVER_KEYS.contains(&key.as_str()) {
                self.unknown(&key_path, closest_key(key, SERVER_KEYS));
            }
        }
        Some(entry)
    }

    /// `disabled`: false unless it says true.
    fn disabled_setting(&mut self, entry: &Map<String, Value>, path: &str) -> bool {
        self.flag(entry, path, "disabled", false)
    }

    /// The boolean `key` of the entry; `default` when absent or not a boolean (an error).
    fn flag(&mut self, entry: &Map<String, Value>, path: &str, key: &str, default: bool) -> bool {
        match get(entry, key) {
            None => default,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                self.error(
                    &child(path, key),
                    format!("{v} is not a boolean; use true or false"),
                );
                default
            }
        }
    }

    /// `namespace`: the tool-name prefix instead of the server's name (`""` for none).
    fn namespace_setting(&mut self, entry: &Map<String, Value>, path: &str) -> Option<String> {
        match get(entry, "namespace") {
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
        }
    }

    /// `protocol`, when the entry pins one.
    fn protocol_setting(&mut self, entry: &Map<String, Value>, path: &str) -> Option<Protocol> {
        let v = get(entry, "protocol")?;
        match v.as_str() {
            Some("legacy") => Some(Protocol::Handshake),
            Some("auto") => Some(Protocol::Auto),
            Some("2026-07-28") => Some(Protocol::Stateless),
            _ => {
                self.error(
                    &child(path, "protocol"),
                    format!("{v} is not a protocol; use \"legacy\", \"auto\" or \"2026-07-28\""),
                );
                None
            }
        }
    }

    /// `sandbox`, refused on a remote server (not a process openpact starts).
    fn server_sandbox(
        &mut self,
        entry: &Map<String, Value>,
        path: &str,
        transport: Option<&Transport>,
    ) -> SandboxChoice {
        let sandbox = match get(entry, "sandbox") {
            None => SandboxChoice::Unset,
            Some(v) => self.sandbox_choice(v, &child(path, "sandbox")),
        };
        if !matches!(sandbox, SandboxChoice::Unset)
            && matches!(transport, Some(Transport::Http { .. }))
        {
            self.error(
                &child(path, "sandbox"),
                "a remote server is not a process openpact starts, so it cannot be sandboxed; remove `sandbox`",
            );
        }
        sandbox
    }

    /// A secret expanded into a command line can be read by every process of the user
    /// (`/proc/PID/cmdline`, `ps`), confined servers included: warned about, with the way to
    /// pass it instead, and redacted like a secret given in `env`.
    fn secret_in_args(
        &mut self,
        path: &str,
        taken: &[(String, String)],
        injected: &mut Vec<(String, String)>,
    ) {
        for (name, value) in taken
            .iter()
            .filter(|(name, _)| crate::config::looks_secret(name))
        {
            self.warn(
                path,
                format!(
                    "puts ${{{name}}}, which looks like a secret, on the server's command line, where every process of yours can read it (/proc/PID/cmdline); pass it in \"env\" instead (a remote server: in \"headers\")"
                ),
            );
            if !injected.iter().any(|(n, _)| n == name) {
                injected.push((name.clone(), value.clone()));
            }
        }
    }

    /// `enabledTools` / `disabledTools`: globs over the server's own tool names. A glob that
    /// starts with the server's name or prefix (`github:get_*`) would never match one of
    /// them: an error that says what to write.
    fn tool_filter(
        &mut self,
        entry: &Map<String, Value>,
        path: &str,
        name: &str,
        prefix: &str,
    ) -> ToolFilter {
        for key in ["enabledTools", "disabledTools"] {
            for glob in get(entry, key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                let own = [name, prefix]
                    .iter()
                    .filter(|p| !p.is_empty())
                    .find_map(|p| glob.strip_prefix(&format!("{p}:")));
                if let Some(tool) = own {
                    self.error(
                        &child(path, key),
                        format!(
                            "\"{glob}\" would never match: {key} names the server's own tools, without a prefix; write \"{tool}\""
                        ),
                    );
                }
            }
        }
        let enabled = get(entry, "enabledTools").map(|v| {
            let p = child(path, "enabledTools");
            let globs = self.globs(v, &p);
            if globs.is_empty() && v.as_array().is_some_and(Vec::is_empty) {
                self.warn(
                    &p,
                    "is empty, so the server's tools are all hidden; remove it to serve them all",
                );
            }
            globs
        });
        let disabled = get(entry, "disabledTools")
            .map(|v| self.globs(v, &child(path, "disabledTools")))
            .unwrap_or_default();
        ToolFilter::new(enabled, disabled)
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
                        self.ignored(&child(path, key), "ignored for a stdio server");
                    }
                }
                self.stdio(entry, path, disabled)
            }
            Some(kind) => {
                for key in ["command", "args", "env", "cwd"] {
                    if get(entry, key).is_some() {
                        self.ignored(&child(path, key), format!("ignored for a {kind} server"));
                    }
                }
                self.remote(entry, path, kind, disabled)
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
                    let arg_path = index(&args_path, i);
                    let taken = discard.len();
                    if let Some(s) = self.expanded(item, &arg_path, unset, &mut discard) {
                        args.push(s);
                    }
                    self.secret_in_args(&arg_path, &discard[taken..], &mut injected);
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

    pub(super) fn collisions(&mut self, claims: &[Claim]) {
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
