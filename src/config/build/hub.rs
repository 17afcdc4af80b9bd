//! The hub settings (`openpact`): naming, message and page sizes, list wait, restarts,
//! handing the policy and built-in sections to their readers; and the check of the server
//! each tool glob names.

use super::{Builder, HUB_KEYS, kind_of};
use crate::config::suggest::{child, closest_key};
use crate::config::{HubSettings, ServerConfig, ToolNames, units};
use serde_json::Value;

const RESTART_KEYS: &[&str] = &["initialBackoff", "maxBackoff", "maxCrashes", "window"];
/// Accepted silently: they belong to features that read them later.
const RESERVED_HUB_KEYS: &[&str] = &["builtins", "oauth"];

impl Builder<'_> {
    /// Checks the server each tool glob of the hub settings names. A tool's name starts
    /// with its server's prefix (its `namespace`, else its name), so that is what a glob
    /// must name: one written with the name of a server whose tools go by another prefix
    /// would silently never match — a deny rule that denies nothing — so it is an error that
    /// says what to write. A name no server has is only warned about (a server may be
    /// added later). Tool names themselves are checked once the servers have listed them.
    pub(super) fn rule_targets(&mut self, hub: &HubSettings, servers: &[ServerConfig]) {
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
        globs.extend(
            hub.tool_search
                .always_load
                .patterns
                .iter()
                .map(|g| ("openpact.toolSearch.alwaysLoad".to_string(), g.as_str())),
        );
        for (list, key) in [
            (&p.flows.private, "private"),
            (&p.flows.untrusted, "untrusted"),
            (&p.flows.egress, "egress"),
        ] {
            globs.extend(
                list.iter()
                    .map(|g| (format!("openpact.flows.{key}"), g.as_str())),
            );
        }
        for (path, glob) in globs {
            self.tool_glob(&path, glob, servers);
        }
        for (name, _) in &p.rate_limits.servers {
            if servers.iter().any(|s| s.name == *name) {
                continue;
            }
            match servers.iter().find(|s| s.prefix() == name) {
                // Server buckets are kept by the server's name, as `mcpServers` has it.
                Some(s) => self.error(
                    "openpact.rateLimits.servers",
                    format!(
                        "\"{name}\" is the namespace of server \"{}\"; limits per server name the server as mcpServers does: write \"{}\"",
                        s.name, s.name
                    ),
                ),
                None => self.warn(
                    "openpact.rateLimits.servers",
                    format!("\"{name}\" is not a configured server; the limit will never apply"),
                ),
            }
        }
    }

    /// Checks the server a tool glob (`server:tool`, `!server:tool` in a profile) names:
    /// an error when it is the name of a server whose tools go by another prefix, a warning
    /// when no server has it. Globs without `:` (built-ins, servers without a prefix) and
    /// globs whose server part is itself a pattern are left alone.
    pub(super) fn tool_glob(&mut self, path: &str, glob: &str, servers: &[ServerConfig]) {
        let bare = glob.trim_start_matches('!');
        let Some((server, tool)) = bare.split_once(':') else {
            return;
        };
        if server.contains(['*', '?', '[', '{']) || servers.iter().any(|s| s.prefix() == server) {
            return;
        }
        let negated = &glob[..glob.len() - bare.len()];
        match servers.iter().find(|s| s.name == server) {
            Some(s) => {
                let (fix, named) = match s.prefix() {
                    "" => (format!("{negated}{tool}"), "have no prefix (namespace \"\")".to_string()),
                    prefix => (
                        format!("{negated}{prefix}:{tool}"),
                        format!("are named \"{prefix}:…\" (its namespace)"),
                    ),
                };
                self.error(
                    path,
                    format!(
                        "\"{glob}\" names server \"{server}\" by its config name, but its tools {named}, so it would never match; write \"{fix}\""
                    ),
                );
            }
            None => self.warn(
                path,
                format!("\"{glob}\" names server \"{server}\", which is not configured; it will never match"),
            ),
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
                _ => self.unknown(&p, closest_key(key, RESTART_KEYS)),
            }
        }
        if policy.max_backoff < policy.initial_backoff {
            policy.max_backoff = policy.initial_backoff;
        }
        policy
    }

    fn shared(&mut self, value: &Value, path: &str) -> crate::config::SharedSettings {
        let mut shared = crate::config::SharedSettings::default();
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"idleExit\": \"10m\"}}",
                    kind_of(value)
                ),
            );
            return shared;
        };
        for (key, v) in map {
            let p = child(path, key);
            match key.as_str() {
                "idleExit" => match units::duration(v) {
                    Ok(d) => shared.idle_exit = d,
                    Err(message) => self.error(&p, message),
                },
                _ => self.unknown(&p, closest_key(key, &["idleExit"])),
            }
        }
        shared
    }

    fn telemetry(&mut self, value: &Value, path: &str) -> crate::config::TelemetrySettings {
        const KEYS: &[&str] = &["otlp", "serviceName", "arguments"];
        let mut telemetry = crate::config::TelemetrySettings::default();
        let Value::Object(map) = value else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"otlp\": \"http://127.0.0.1:4318\"}}",
                    kind_of(value)
                ),
            );
            return telemetry;
        };
        for (key, v) in map {
            let p = child(path, key);
            match (key.as_str(), v) {
                ("otlp", Value::String(url))
                    if url::Url::parse(url)
                        .is_ok_and(|u| matches!(u.scheme(), "http" | "https")) =>
                {
                    telemetry.otlp = Some(url.trim_end_matches('/').to_string());
                }
                ("otlp", _) => self.error(
                    &p,
                    format!("{v} is not an http(s) URL; give the collector's OTLP/HTTP base, like \"http://127.0.0.1:4318\""),
                ),
                ("serviceName", Value::String(name)) if !name.is_empty() => {
                    telemetry.service_name = Some(name.clone());
                }
                ("serviceName", _) => self.error(&p, format!("{v} is not a non-empty string")),
                ("arguments", Value::Bool(on)) => telemetry.arguments = *on,
                ("arguments", _) => self.error(&p, format!("{v} is not true or false")),
                _ => self.unknown(&p, closest_key(key, KEYS)),
            }
        }
        telemetry
    }

    pub(super) fn hub(&mut self, value: &Value) -> HubSettings {
        let mut hub = HubSettings {
            builtins: crate::config::BuiltinsSettings::defaults(&self.base_dir),
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
        let mut profiles = None;
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
                "reload" => match v.as_bool() {
                    Some(on) => hub.reload = on,
                    None => self.error(&path, format!("{v} is not true or false")),
                },
                "shared" => hub.shared = self.shared(v, &path),
                "telemetry" => hub.telemetry = self.telemetry(v, &path),
                "permissions" => hub.policy.permissions = self.permissions(v, &path),
                "cache" => hub.policy.cache = self.cache(v, &path),
                "rateLimits" => hub.policy.rate_limits = self.rate_limits(v, &path),
                "secrets" => hub.policy.secrets = self.secrets(v, &path),
                "audit" => hub.policy.audit = self.audit(v, &path),
                "flows" => hub.policy.flows = self.flows(v, &path),
                "builtins" => hub.builtins = self.builtins(v, &path),
                "http" => hub.http = self.http(v, &path),
                "sandbox" => hub.sandbox = self.sandbox_settings(v, &path),
                "toolSearch" => hub.tool_search = self.tool_search(v, &path, &hub.tool_search),
                "codeMode" => hub.code_mode = self.code_mode(v, &path, &hub.code_mode),
                // After the loop: a profile's `toolSearch` and `codeMode` start from the hub's.
                "profiles" => profiles = Some((v, path)),
                k if RESERVED_HUB_KEYS.contains(&k) => {}
                _ => {
                    let known: Vec<&str> =
                        HUB_KEYS.iter().chain(RESERVED_HUB_KEYS).copied().collect();
                    self.unknown(&path, closest_key(key, &known));
                }
            }
        }
        if let Some((v, path)) = profiles {
            hub.profiles = self.profiles(v, &path, &hub.tool_search, &hub.code_mode);
        }
        hub
    }
}
