//! Walking the parsed JSON into a [`Config`]: key and type checks, expansion, resolution, and collecting every problem.
//!
//! This file holds the walk over the top level and the `Builder` that collects problems;
//! `servers` builds each server entry; `hub` reads the hub settings (`openpact`); `http` the HTTP face's (`openpact.http`).
//! The policy and built-in tool sections are read in `config::policy` and `config::builtins`.

mod http;
mod hub;
mod remote;
mod sandbox;
mod servers;
mod views;

use super::expand::{self, Unset};
use super::suggest::{child, closest, unknown_key};
use super::{Config, ConfigError, HubSettings, Problem, jsonc, resolve};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

const TOP_KEYS: &[&str] = &["mcpServers", "servers", "inputs", "$schema", "openpact"];
const HUB_KEYS: &[&str] = &[
    "toolNames",
    "shared",
    "reload",
    "maxMessageSize",
    "pageSize",
    "listWait",
    "restart",
    "permissions",
    "cache",
    "rateLimits",
    "secrets",
    "audit",
    "flows",
    "builtins",
    "http",
    "sandbox",
    "toolSearch",
    "codeMode",
    "profiles",
    "telemetry",
];

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
        ignored: Vec::new(),
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

    // Built-in tools' files go beside a config file; embedded text has no place of its own,
    // so they go where they go with no config at all (the user's data dir).
    let builtins_base = if file.as_os_str().is_empty() {
        super::data_dir(env)
    } else {
        b.base_dir.clone()
    };
    let mut hub = HubSettings {
        builtins: super::BuiltinsSettings::defaults(&builtins_base),
        ..HubSettings::default()
    };
    for (key, value) in &root {
        match key.as_str() {
            "mcpServers" | "servers" | "inputs" | "$schema" => {}
            "openpact" => hub = b.hub(value),
            "mcp" => b.ignored(
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
                b.unknown(&child("", key), closest(key, &pairs));
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
    b.profile_targets(&hub.profiles, &servers);

    // Only file-level problems stop the load; when there are any, report everything at once.
    if b.problems.iter().any(|p| !b.local.contains(p)) {
        return Err(b.into_error());
    }
    Ok(Config {
        source: (!file.as_os_str().is_empty()).then(|| file.to_path_buf()),
        servers,
        hub,
        warnings: b.warnings,
        ignored: b.ignored,
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
fn get<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    map.get(key).filter(|v| !v.is_null())
}

pub(super) struct Builder<'a> {
    label: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
    pub(super) base_dir: PathBuf,
    problems: Vec<Problem>,
    /// The subset of `problems` confined to one server's entry (see `server`).
    local: Vec<Problem>,
    warnings: Vec<String>,
    /// Keys that are ignored (unknown, or meaningless where they stand); also in `warnings`.
    ignored: Vec<Problem>,
}

impl Builder<'_> {
    fn problem(&self, path: &str, message: impl Into<String>) -> Problem {
        Problem {
            file: self.label.to_string(),
            path: path.to_string(),
            message: message.into(),
        }
    }

    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) {
        let problem = self.problem(path, message);
        self.problems.push(problem);
    }

    pub(super) fn warn(&mut self, path: &str, message: impl Into<String>) {
        let problem = self.problem(path, message);
        self.warnings.push(problem.to_string());
    }

    /// A key that is ignored: a warning when the config is used, a problem for `config
    /// check` (a misspelt `disabled` must not quietly start a server).
    pub(super) fn ignored(&mut self, path: &str, message: impl Into<String>) {
        let problem = self.problem(path, message);
        self.warnings.push(problem.to_string());
        self.ignored.push(problem);
    }

    /// An unknown key, with the closest known one as a suggestion.
    pub(super) fn unknown(&mut self, path: &str, suggestion: Option<&str>) {
        self.ignored(path, unknown_key(suggestion));
    }

    fn into_error(self) -> ConfigError {
        ConfigError {
            problems: self.problems,
            warnings: self.warnings,
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
}
