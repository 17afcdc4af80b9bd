//! `openpact.toolSearch`, `openpact.codeMode` and `openpact.profiles`: reading them, and
//! checking that every server a profile names is configured.

use super::{Builder, kind_of};
use crate::config::suggest::{child, closest_key, index};
use crate::config::units;
use crate::config::{
    CodeMode, CodeModeSwitch, Globs, Profile, SearchMode, ServerConfig, ToolSearch, ToolSelection,
};
use serde_json::{Map, Value};

const SEARCH_KEYS: &[&str] = &["mode", "threshold", "alwaysLoad", "limit"];
const PROFILE_KEYS: &[&str] = &["servers", "tools", "builtins", "toolSearch", "codeMode"];
const CODE_KEYS: &[&str] = &[
    "mode",
    "timeout",
    "maxCalls",
    "parallel",
    "memory",
    "maxOutput",
    "keepValues",
    "keepBytes",
];

impl Builder<'_> {
    /// A `toolSearch` object; the keys it leaves out keep their values in `base`.
    pub(super) fn tool_search(&mut self, v: &Value, path: &str, base: &ToolSearch) -> ToolSearch {
        let mut search = base.clone();
        let Value::Object(map) = v else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"mode\": \"auto\", \"threshold\": 40}}",
                    kind_of(v)
                ),
            );
            return search;
        };
        for (key, v) in map {
            let p = child(path, key);
            match key.as_str() {
                "mode" => match v.as_str() {
                    Some("auto") => search.mode = SearchMode::Auto,
                    Some("on") => search.mode = SearchMode::On,
                    Some("off") => search.mode = SearchMode::Off,
                    _ => self.error(
                        &p,
                        format!("{v} is not a mode; use \"auto\", \"on\" or \"off\""),
                    ),
                },
                "threshold" | "limit" => {
                    let n = v.as_u64().filter(|n| *n >= 1).map(usize::try_from);
                    match n {
                        Some(Ok(n)) if key == "threshold" => search.threshold = n,
                        Some(Ok(n)) if n <= ToolSearch::MAX_LIMIT => search.limit = n,
                        _ if key == "limit" => self.error(
                            &p,
                            format!(
                                "{v} is not a valid limit; use a whole number from 1 to {}",
                                ToolSearch::MAX_LIMIT
                            ),
                        ),
                        _ => self.error(
                            &p,
                            format!("{v} is not a valid count; use a whole number of at least 1"),
                        ),
                    }
                }
                "alwaysLoad" => search.always_load = Globs::new(self.globs(v, &p)),
                _ => self.unknown(&p, closest_key(key, SEARCH_KEYS)),
            }
        }
        search
    }

    /// A `codeMode` object; the keys it leaves out keep their values in `base`.
    pub(super) fn code_mode(&mut self, v: &Value, path: &str, base: &CodeMode) -> CodeMode {
        let mut code = base.clone();
        let Value::Object(map) = v else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"mode\": \"on\", \"timeout\": \"60s\"}}",
                    kind_of(v)
                ),
            );
            return code;
        };
        for (key, v) in map {
            let p = child(path, key);
            let count = |v: &Value| {
                v.as_u64()
                    .filter(|n| *n >= 1)
                    .and_then(|n| usize::try_from(n).ok())
            };
            match key.as_str() {
                "mode" => match v.as_str() {
                    Some("auto") => code.mode = CodeModeSwitch::Auto,
                    Some("on") => code.mode = CodeModeSwitch::On,
                    Some("off") => code.mode = CodeModeSwitch::Off,
                    _ => self.error(
                        &p,
                        format!("{v} is not a mode; use \"on\", \"off\" or \"auto\" (on where tool search is on)"),
                    ),
                },
                "timeout" => match units::duration(v) {
                    Ok(d) if !d.is_zero() => code.timeout = d,
                    Ok(_) => self.error(&p, "must be longer than zero, like \"60s\"".to_string()),
                    Err(message) => self.error(&p, message),
                },
                "memory" => match units::size(v) {
                    Ok(bytes) if bytes >= CodeMode::MIN_MEMORY => code.memory = bytes,
                    Ok(_) => self.error(
                        &p,
                        format!("{v} is too little for the interpreter; use at least \"64MiB\""),
                    ),
                    Err(message) => self.error(&p, message),
                },
                "keepBytes" => match units::size(v).map(usize::try_from) {
                    Ok(Ok(bytes)) => code.keep_bytes = bytes,
                    Ok(Err(_)) => self.error(&p, format!("{v} is too large for this platform")),
                    Err(message) => self.error(&p, message),
                },
                "maxCalls" | "parallel" | "maxOutput" | "keepValues" => match count(v) {
                    Some(n) => match key.as_str() {
                        "maxCalls" => code.max_calls = n,
                        "parallel" => code.parallel = n,
                        "maxOutput" => code.max_output = n,
                        _ => code.keep_values = n,
                    },
                    None => self.error(
                        &p,
                        format!("{v} is not a valid count; use a whole number of at least 1"),
                    ),
                },
                _ => self.unknown(&p, closest_key(key, CODE_KEYS)),
            }
        }
        code
    }

    /// `openpact.profiles`: name → profile, in file order. Names become URL paths
    /// (`/mcp/NAME`), so they are kept to letters, digits, `-` and `_`.
    pub(super) fn profiles(
        &mut self,
        v: &Value,
        path: &str,
        search: &ToolSearch,
        code: &CodeMode,
    ) -> Vec<Profile> {
        let Value::Object(map) = v else {
            self.error(
                path,
                format!(
                    "is {}; it must be an object like {{\"coding\": {{\"servers\": [\"fs\"]}}}}",
                    kind_of(v)
                ),
            );
            return Vec::new();
        };
        let mut profiles = Vec::new();
        for (name, entry) in map {
            let p = child(path, name);
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !valid {
                self.error(
                    &p,
                    format!("\"{name}\" is not a profile name; use letters, digits, - and _ (it becomes the URL path /mcp/{name})"),
                );
                continue;
            }
            let Value::Object(entry) = entry else {
                self.error(
                    &p,
                    format!(
                        "is {}; it must be an object like {{\"servers\": [\"fs\"], \"tools\": [\"!fs:write_*\"]}}",
                        kind_of(entry)
                    ),
                );
                continue;
            };
            profiles.push(self.profile(name, entry, &p, search, code));
        }
        profiles
    }

    fn profile(
        &mut self,
        name: &str,
        entry: &Map<String, Value>,
        path: &str,
        search: &ToolSearch,
        code: &CodeMode,
    ) -> Profile {
        let mut profile = Profile {
            name: name.to_string(),
            servers: None,
            tools: ToolSelection::default(),
            builtins: true,
            tool_search: search.clone(),
            code_mode: code.clone(),
        };
        for (key, v) in entry {
            let p = child(path, key);
            match key.as_str() {
                "servers" => match v.as_array() {
                    Some(items) => {
                        let mut names = Vec::new();
                        for (i, item) in items.iter().enumerate() {
                            match item.as_str() {
                                Some(s) => names.push(s.to_string()),
                                None => self.error(
                                    &index(&p, i),
                                    format!("is {}; it must be a server name", kind_of(item)),
                                ),
                            }
                        }
                        profile.servers = Some(names);
                    }
                    None => self.error(
                        &p,
                        format!(
                            "is {}; it must be an array of server names like [\"fs\", \"github\"]",
                            kind_of(v)
                        ),
                    ),
                },
                "tools" => profile.tools = ToolSelection::from_patterns(&self.globs(v, &p)),
                "builtins" => match v.as_bool() {
                    Some(b) => profile.builtins = b,
                    None => self.error(&p, format!("{v} is not a boolean; use true or false")),
                },
                "toolSearch" => profile.tool_search = self.tool_search(v, &p, search),
                "codeMode" => profile.code_mode = self.code_mode(v, &p, code),
                _ => self.unknown(&p, closest_key(key, PROFILE_KEYS)),
            }
        }
        profile
    }

    /// Every server a profile names must be configured (a typo would hide a server from
    /// the clients of that profile without a word); its tool globs are checked like policy
    /// rules ([`Builder::tool_glob`]).
    pub(super) fn profile_targets(&mut self, profiles: &[Profile], servers: &[ServerConfig]) {
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        for profile in profiles {
            let path = child("openpact.profiles", &profile.name);
            for (i, server) in profile.servers.iter().flatten().enumerate() {
                if !names.contains(&server.as_str()) {
                    let namespace_of = servers.iter().find(|s| s.prefix() == server);
                    let hint = match (namespace_of, closest_key(server, &names)) {
                        (Some(s), _) => format!(
                            " (it is the namespace of server \"{0}\"; a profile names servers as mcpServers does: write \"{0}\")",
                            s.name
                        ),
                        (None, Some(near)) => format!("; did you mean \"{near}\"?"),
                        (None, None) if names.is_empty() => {
                            "; the config defines no servers".into()
                        }
                        (None, None) => {
                            format!("; the configured servers are {}", names.join(", "))
                        }
                    };
                    self.error(
                        &index(&child(&path, "servers"), i),
                        format!("\"{server}\" is not a configured server{hint}"),
                    );
                }
            }
            let tools = child(&path, "tools");
            for glob in &profile.tools.include.patterns {
                self.tool_glob(&tools, glob, servers);
            }
            for glob in &profile.tools.exclude.patterns {
                self.tool_glob(&tools, &format!("!{glob}"), servers);
            }
            for glob in &profile.tool_search.always_load.patterns {
                self.tool_glob(
                    &child(&child(&path, "toolSearch"), "alwaysLoad"),
                    glob,
                    servers,
                );
            }
        }
    }
}
