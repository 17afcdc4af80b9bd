//! Reading `sandbox` (on a server entry) and `openpact.sandbox` (the hub's default): the
//! profile keys, their paths, hosts and variable names.

use super::{Builder, kind_of};
use crate::config::expand::Unset;
use crate::config::hosts::HostPattern;
use crate::config::resolve;
use crate::config::sandbox::{NetworkSpec, SandboxChoice, SandboxSettings, SandboxSpec};
use crate::config::suggest::{child, closest_key, index};
use serde_json::Value;
use std::path::PathBuf;

const PROFILE_KEYS: &[&str] = &["filesystem", "network", "env", "unixSockets", "known"];
const FILESYSTEM_KEYS: &[&str] = &["read", "write", "deny"];
const NETWORK_KEYS: &[&str] = &["allow"];
const HUB_SANDBOX_KEYS: &[&str] = &["default", "profile", "required"];
const PROFILE_EXAMPLE: &str = r#"{"filesystem": {"read": ["~/notes"]}, "network": {"allow": ["example.com"]}, "env": ["LANG"]}"#;

impl Builder<'_> {
    /// A server entry's `sandbox`: `true`, `false` or a profile object.
    pub(super) fn sandbox_choice(&mut self, value: &Value, path: &str) -> SandboxChoice {
        match value {
            Value::Bool(true) => SandboxChoice::On,
            Value::Bool(false) => SandboxChoice::Off,
            Value::Object(_) => SandboxChoice::Profile(self.sandbox_spec(value, path)),
            _ => {
                self.error(
                    path,
                    format!(
                        "is {}; use true (the default profile), false (unconfined) or a profile like {PROFILE_EXAMPLE}",
                        kind_of(value)
                    ),
                );
                SandboxChoice::Unset
            }
        }
    }

    /// `openpact.sandbox`.
    pub(super) fn sandbox_settings(&mut self, value: &Value, path: &str) -> SandboxSettings {
        let mut settings = SandboxSettings::default();
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"default\": \"on\", \"required\": false}}",
                    kind_of(value)
                ),
            );
            return settings;
        };
        for (key, v) in map {
            let p = child(path, key);
            match key.as_str() {
                "default" => match v.as_str() {
                    Some("on") => settings.default_on = true,
                    Some("off") => settings.default_on = false,
                    _ => self.error(&p, format!("{v} is not a default; use \"on\" or \"off\"")),
                },
                "required" => match v {
                    Value::Bool(b) => settings.required = *b,
                    _ => self.error(&p, format!("{v} is not a boolean; use true or false")),
                },
                "profile" => settings.profile = self.sandbox_spec(v, &p),
                _ => self.unknown(&p, closest_key(key, HUB_SANDBOX_KEYS)),
            }
        }
        settings
    }

    fn sandbox_spec(&mut self, value: &Value, path: &str) -> SandboxSpec {
        let mut spec = SandboxSpec::default();
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "is {}; it must be a profile like {PROFILE_EXAMPLE}",
                    kind_of(value)
                ),
            );
            return spec;
        };
        for (key, v) in map {
            let p = child(path, key);
            match key.as_str() {
                "filesystem" => self.sandbox_filesystem(v, &p, &mut spec),
                "network" => spec.network = self.sandbox_network(v, &p),
                "env" => spec.env = self.sandbox_env(v, &p),
                "known" => match v {
                    Value::Bool(b) => spec.known = Some(*b),
                    _ => self.error(
                        &p,
                        format!("{v} is not a boolean; use false to drop the known-servers grants"),
                    ),
                },
                // Not checked for existence: a daemon's socket appears when it starts.
                "unixSockets" => spec.unix_sockets = self.sandbox_paths(v, &p),
                _ => self.unknown(&p, closest_key(key, PROFILE_KEYS)),
            }
        }
        spec
    }

    fn sandbox_filesystem(&mut self, value: &Value, path: &str, spec: &mut SandboxSpec) {
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"read\": [\"~/notes\"], \"write\": [\"~/notes/out\"], \"deny\": [\"~/notes/private\"]}}",
                    kind_of(value)
                ),
            );
            return;
        };
        for (key, v) in map {
            let p = child(path, key);
            let list = match key.as_str() {
                "read" => &mut spec.read,
                "write" => &mut spec.write,
                "deny" => &mut spec.deny,
                _ => {
                    self.unknown(&p, closest_key(key, FILESYSTEM_KEYS));
                    continue;
                }
            };
            let paths = self.sandbox_paths(v, &p);
            if key != "deny" {
                self.check_grants_exist(&paths, &p, key == "write");
            }
            list.extend(paths);
        }
    }

    /// Absolute paths: `~` and variables expanded, relative ones taken from the config's
    /// folder (as `cwd` is). They need not exist.
    fn sandbox_paths(&mut self, value: &Value, path: &str) -> Vec<PathBuf> {
        let Some(items) = self.string_list(value, path, "[\"~/notes\", \"./data\"]") else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = index(path, i);
            let Some(text) = self
                .expanded(item, &p, Unset::Fail, &mut Vec::new())
                .and_then(|s| self.tilde(s, &p))
            else {
                continue;
            };
            if text.is_empty() {
                self.error(&p, "is empty; give a path");
                continue;
            }
            out.push(resolve::beside(&self.base_dir, &text));
        }
        out
    }

    /// A grant of a path that does not exist does nothing (the kernel grants only existing
    /// paths): a folder under the home folder is made at each start (see
    /// [`made_at_start`](crate::config::sandbox::made_at_start)); one elsewhere, or a file
    /// to be, is reported, since making folders outside the user's own is not openpact's to
    /// do, and the contents of a file are not openpact's to choose. Only a write grant is
    /// made: what a server may only read is the user's to create (an empty folder made for
    /// a read of `~/.kube/config` would break kubectl).
    fn check_grants_exist(&mut self, paths: &[PathBuf], path: &str, write: bool) {
        let home = (self.env)("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        for (i, p) in paths.iter().enumerate() {
            let made = write && crate::config::sandbox::made_at_start(p, home.as_deref());
            if p.exists() || made {
                continue;
            }
            let under_home = home.as_deref().is_some_and(|h| p.starts_with(h));
            let message = if !write {
                format!(
                    "{0} does not exist, and the sandbox can only grant a path that exists, so the server runs without this grant (openpact makes a missing folder only for a write grant: what a server only reads is yours to create); create it, or fix the path",
                    p.display()
                )
            } else if under_home && p.extension().is_some() {
                format!(
                    "{0} does not exist, and the sandbox can only grant a path that exists, so the server runs without this grant; openpact makes missing folders under your home folder, but {0} looks like a file: create it (`touch {0}`), or grant the folder it will be in",
                    p.display()
                )
            } else {
                format!(
                    "{0} does not exist, and the sandbox can only grant a path that exists, so the server runs without this grant (openpact makes a missing folder only under your home folder); create it with `mkdir -p {0}`, or fix the path",
                    p.display()
                )
            };
            self.ignored(&index(path, i), message);
        }
    }

    fn sandbox_network(&mut self, value: &Value, path: &str) -> Option<NetworkSpec> {
        const HINT: &str = r#"use true (any host), false (none) or {"allow": ["example.com", "*.github.com:443"]}"#;
        match value {
            Value::Bool(true) => Some(NetworkSpec::Any),
            Value::Bool(false) => Some(NetworkSpec::None),
            Value::Object(map) => {
                let mut hosts = Vec::new();
                for (key, v) in map {
                    let p = child(path, key);
                    if key != "allow" {
                        self.unknown(&p, closest_key(key, NETWORK_KEYS));
                        continue;
                    }
                    let Some(items) =
                        self.string_list(v, &p, "[\"example.com\", \"*.github.com:443\"]")
                    else {
                        continue;
                    };
                    for (i, item) in items.iter().enumerate() {
                        let ip = index(&p, i);
                        let Some(text) = self.expanded(item, &ip, Unset::Fail, &mut Vec::new())
                        else {
                            continue;
                        };
                        match HostPattern::parse(&text) {
                            Ok(h) => hosts.push(h),
                            Err(message) => self.error(&ip, message),
                        }
                    }
                }
                Some(NetworkSpec::Allow(hosts))
            }
            _ => {
                self.error(path, format!("is {}; {HINT}", kind_of(value)));
                None
            }
        }
    }

    fn sandbox_env(&mut self, value: &Value, path: &str) -> Vec<String> {
        let Some(items) = self.string_list(value, path, "[\"LANG\", \"NODE_*\"]") else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = index(path, i);
            match item.as_str() {
                Some(name)
                    if !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '*') =>
                {
                    out.push(name.to_string())
                }
                _ => self.error(
                    &p,
                    format!("{item} is not a variable name; use names like \"LANG\" or globs like \"NODE_*\""),
                ),
            }
        }
        out
    }

    fn string_list<'v>(
        &mut self,
        value: &'v Value,
        path: &str,
        example: &str,
    ) -> Option<&'v [Value]> {
        match value {
            Value::Array(items) => Some(items),
            _ => {
                self.error(
                    path,
                    format!("is {}; it must be an array like {example}", kind_of(value)),
                );
                None
            }
        }
    }
}
