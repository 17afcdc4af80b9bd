//! The `openpact` policy settings — permissions, cache, rate limits, secrets, audit — as typed,
//! validated values. Globs are checked here so a typo fails at load, not at the first call.

use super::build::{Builder, kind_of as kind};
use super::suggest::{child, closest_key, index};
use super::units;
use serde_json::{Map, Value};
use std::time::Duration;

/// What a permission rule (or the default) says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Allow,
    Ask,
    Deny,
}

impl Rule {
    pub fn label(self) -> &'static str {
        match self {
            Rule::Allow => "allow",
            Rule::Ask => "ask",
            Rule::Deny => "deny",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Permissions {
    /// For calls no rule matches and no remembered decision covers.
    pub default: Rule,
    /// Globs over qualified names (`github:*`, `*:delete_*`). Deny beats ask beats allow.
    pub allow: Vec<String>,
    pub ask: Vec<String>,
    pub deny: Vec<String>,
    /// The answer when a prompt is needed but no channel can show one (Allow or Deny).
    pub non_interactive: Rule,
    pub prompt_timeout: Duration,
    /// How long a call nobody else can ask about waits for an answer on the dashboard
    /// while a dashboard page is open; zero: never.
    pub dashboard_wait: Duration,
}

impl Default for Permissions {
    fn default() -> Self {
        Permissions {
            default: Rule::Ask,
            allow: Vec::new(),
            ask: Vec::new(),
            deny: Vec::new(),
            non_interactive: Rule::Deny,
            prompt_timeout: Duration::from_secs(120),
            dashboard_wait: Duration::from_secs(120),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct CacheSettings {
    /// TTL for tools no rule names; `None` = not cached.
    pub default: Option<Duration>,
    /// Glob → TTL (`None` = never cache), first match wins.
    pub rules: Vec<(String, Option<Duration>)>,
    /// Cache tools annotated `readOnlyHint: true` for [`CacheSettings::READ_ONLY_TTL`].
    pub trust_read_only_hint: bool,
    pub max_bytes: u64,
}

impl CacheSettings {
    pub const READ_ONLY_TTL: Duration = Duration::from_secs(60);
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            default: None,
            rules: Vec::new(),
            trust_read_only_hint: false,
            max_bytes: 64 * 1024 * 1024,
        }
    }
}

/// A token bucket: `per_second` sustained, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub per_second: f64,
    pub burst: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RateLimits {
    /// Applies to every server without its own entry; `None` = unlimited.
    pub default: Option<Limit>,
    pub servers: Vec<(String, Option<Limit>)>,
    /// Qualified tool name → limit.
    pub tools: Vec<(String, Option<Limit>)>,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits {
            default: Some(Limit {
                per_second: 10.0,
                burst: 20,
            }),
            servers: Vec::new(),
            tools: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Secrets {
    /// Environment variables whose values are secrets.
    pub env: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AuditSettings {
    pub enabled: bool,
    /// Record the arguments themselves (redacted), not just their hash.
    pub arguments: bool,
    /// Rotate the log past this size.
    pub max_bytes: u64,
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            enabled: true,
            arguments: false,
            max_bytes: 32 * 1024 * 1024,
        }
    }
}

/// What the data-flow guard does with an egress call once a session has called both a
/// private and an untrusted tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowGuard {
    /// Ask for that call (never remembered); denied when nobody can be asked.
    #[default]
    Ask,
    Deny,
    Off,
}

impl FlowGuard {
    pub fn label(self) -> &'static str {
        match self {
            FlowGuard::Ask => "ask",
            FlowGuard::Deny => "deny",
            FlowGuard::Off => "off",
        }
    }
}

/// `openpact.flows`: tool labels from the config (globs over qualified names, built-ins by
/// bare name) and the guard's setting. Added to the built-ins' defaults and what tools'
/// annotations say (`crate::policy::flows`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Flows {
    /// Tools that read the user's data.
    pub private: Vec<String>,
    /// Tools that take in content others wrote.
    pub untrusted: Vec<String>,
    /// Tools that can send data out.
    pub egress: Vec<String>,
    pub guard: FlowGuard,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicySettings {
    pub permissions: Permissions,
    pub cache: CacheSettings,
    pub rate_limits: RateLimits,
    pub secrets: Secrets,
    pub audit: AuditSettings,
    pub flows: Flows,
}

impl Builder<'_> {
    fn object<'v>(
        &mut self,
        v: &'v Value,
        path: &str,
        example: &str,
    ) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            other => {
                self.error(
                    path,
                    format!("is {}; it must be an object like {example}", kind(other)),
                );
                None
            }
        }
    }

    fn known_keys(&mut self, m: &Map<String, Value>, path: &str, keys: &[&str]) {
        for k in m.keys() {
            if !keys.contains(&k.as_str()) {
                self.unknown(&child(path, k), closest_key(k, keys));
            }
        }
    }

    /// A glob over qualified names; invalid ones are errors.
    fn glob(&mut self, v: &Value, path: &str) -> Option<String> {
        let Some(s) = v.as_str() else {
            self.error(
                path,
                format!("is {}; it must be a glob string like \"github:*\"", kind(v)),
            );
            return None;
        };
        match globset::Glob::new(s) {
            Ok(_) => Some(s.to_string()),
            Err(e) => {
                self.error(path, format!("{s:?} is not a valid glob: {e}"));
                None
            }
        }
    }

    pub(super) fn globs(&mut self, v: &Value, path: &str) -> Vec<String> {
        match v {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .filter_map(|(i, it)| self.glob(it, &index(path, i)))
                .collect(),
            other => {
                self.error(
                    path,
                    format!(
                        "is {}; it must be an array of globs like [\"github:*\"]",
                        kind(other)
                    ),
                );
                Vec::new()
            }
        }
    }

    fn boolean(&mut self, v: &Value, path: &str) -> Option<bool> {
        let b = v.as_bool();
        if b.is_none() {
            self.error(path, format!("{v} is not a boolean; use true or false"));
        }
        b
    }

    fn duration_or_off(&mut self, v: &Value, path: &str) -> Option<Option<Duration>> {
        if v.as_str() == Some("off") {
            return Some(None);
        }
        match units::duration(v) {
            Ok(d) => Some(Some(d)),
            Err(message) => {
                self.error(path, format!("{message}; or \"off\""));
                None
            }
        }
    }

    fn limit(&mut self, v: &Value, path: &str) -> Option<Option<Limit>> {
        if v.as_str() == Some("off") {
            return Some(None);
        }
        let m = self.object(v, path, r#"{"perSecond": 10, "burst": 20}, or "off""#)?;
        self.known_keys(m, path, &["perSecond", "burst"]);
        let per_second = match m.get("perSecond").and_then(Value::as_f64) {
            Some(r) if r > 0.0 && r.is_finite() => r,
            _ => {
                self.error(
                    &child(path, "perSecond"),
                    "needs a number above 0 (calls per second; 0.2 = one every 5 s)",
                );
                return None;
            }
        };
        let burst = match m.get("burst") {
            None => per_second.ceil().max(1.0) as u32,
            Some(b) => match b
                .as_u64()
                .filter(|n| *n >= 1)
                .and_then(|n| u32::try_from(n).ok())
            {
                Some(n) => n,
                None => {
                    self.error(
                        &child(path, "burst"),
                        format!("{b} is not a valid burst; use a whole number of at least 1"),
                    );
                    return None;
                }
            },
        };
        Some(Some(Limit { per_second, burst }))
    }

    pub(super) fn permissions(&mut self, v: &Value, path: &str) -> Permissions {
        let mut p = Permissions::default();
        let Some(m) = self.object(v, path, r#"{"default": "ask", "allow": ["time:*"]}"#) else {
            return p;
        };
        self.known_keys(
            m,
            path,
            &[
                "default",
                "allow",
                "ask",
                "deny",
                "nonInteractive",
                "promptTimeout",
                "dashboardWait",
            ],
        );
        let rule = |b: &mut Self, v: &Value, path: &str, choices: &[Rule]| -> Option<Rule> {
            let r = match v.as_str() {
                Some("allow") => Some(Rule::Allow),
                Some("ask") => Some(Rule::Ask),
                Some("deny") => Some(Rule::Deny),
                _ => None,
            };
            match r.filter(|r| choices.contains(r)) {
                Some(r) => Some(r),
                None => {
                    let names: Vec<_> = choices
                        .iter()
                        .map(|c| format!("\"{}\"", c.label()))
                        .collect();
                    b.error(path, format!("{v} is not one of {}", names.join(", ")));
                    None
                }
            }
        };
        for (k, val) in m {
            let kp = child(path, k);
            match k.as_str() {
                "default" => {
                    p.default = rule(self, val, &kp, &[Rule::Allow, Rule::Ask, Rule::Deny])
                        .unwrap_or(p.default)
                }
                "nonInteractive" => {
                    p.non_interactive = rule(self, val, &kp, &[Rule::Allow, Rule::Deny])
                        .unwrap_or(p.non_interactive)
                }
                "allow" => p.allow = self.globs(val, &kp),
                "ask" => p.ask = self.globs(val, &kp),
                "deny" => p.deny = self.globs(val, &kp),
                "promptTimeout" => match units::duration(val) {
                    Ok(d) => p.prompt_timeout = d,
                    Err(message) => self.error(&kp, message),
                },
                "dashboardWait" => match units::duration(val) {
                    Ok(d) => p.dashboard_wait = d,
                    Err(message) => self.error(&kp, message),
                },
                _ => {}
            }
        }
        p
    }

    pub(super) fn cache(&mut self, v: &Value, path: &str) -> CacheSettings {
        let mut c = CacheSettings::default();
        let Some(m) = self.object(v, path, r#"{"rules": {"time:*": "30s"}}"#) else {
            return c;
        };
        self.known_keys(
            m,
            path,
            &["default", "rules", "trustReadOnlyHint", "maxBytes"],
        );
        for (k, val) in m {
            let kp = child(path, k);
            match k.as_str() {
                "default" => c.default = self.duration_or_off(val, &kp).unwrap_or(None),
                "trustReadOnlyHint" => {
                    c.trust_read_only_hint = self.boolean(val, &kp).unwrap_or(false)
                }
                "maxBytes" => match units::size(val) {
                    Ok(n) => c.max_bytes = n,
                    Err(message) => self.error(&kp, message),
                },
                "rules" => {
                    if let Some(rules) = self.object(val, &kp, r#"{"time:*": "30s"}"#) {
                        for (glob, ttl) in rules {
                            let rp = child(&kp, glob);
                            if self.glob(&Value::String(glob.clone()), &rp).is_some()
                                && let Some(ttl) = self.duration_or_off(ttl, &rp)
                            {
                                c.rules.push((glob.clone(), ttl));
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        c
    }

    pub(super) fn rate_limits(&mut self, v: &Value, path: &str) -> RateLimits {
        let mut r = RateLimits::default();
        let Some(m) = self.object(v, path, r#"{"default": {"perSecond": 10, "burst": 20}}"#) else {
            return r;
        };
        self.known_keys(m, path, &["default", "servers", "tools"]);
        for (k, val) in m {
            let kp = child(path, k);
            match k.as_str() {
                "default" => {
                    if let Some(l) = self.limit(val, &kp) {
                        r.default = l;
                    }
                }
                "servers" | "tools" => {
                    if let Some(entries) =
                        self.object(val, &kp, r#"{"github": {"perSecond": 2, "burst": 5}}"#)
                    {
                        for (name, lim) in entries {
                            if let Some(l) = self.limit(lim, &child(&kp, name)) {
                                if k == "servers" {
                                    r.servers.push((name.clone(), l));
                                } else {
                                    r.tools.push((name.clone(), l));
                                }
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        r
    }

    pub(super) fn secrets(&mut self, v: &Value, path: &str) -> Secrets {
        let mut s = Secrets::default();
        let Some(m) = self.object(v, path, r#"{"env": ["GITHUB_TOKEN"]}"#) else {
            return s;
        };
        self.known_keys(m, path, &["env"]);
        if let Some(list) = m.get("env") {
            let kp = child(path, "env");
            match list {
                Value::Array(items) => {
                    for (i, it) in items.iter().enumerate() {
                        match it.as_str() {
                            Some(name) if !name.is_empty() => s.env.push(name.to_string()),
                            _ => self.error(&index(&kp, i), format!("{it} is not a variable name")),
                        }
                    }
                }
                other => self.error(
                    &kp,
                    format!("is {}; it must be an array of variable names", kind(other)),
                ),
            }
        }
        s
    }

    pub(super) fn audit(&mut self, v: &Value, path: &str) -> AuditSettings {
        let mut a = AuditSettings::default();
        let Some(m) = self.object(v, path, r#"{"enabled": true, "arguments": false}"#) else {
            return a;
        };
        self.known_keys(m, path, &["enabled", "arguments", "maxBytes"]);
        for (k, val) in m {
            let kp = child(path, k);
            match k.as_str() {
                "enabled" => a.enabled = self.boolean(val, &kp).unwrap_or(a.enabled),
                "arguments" => a.arguments = self.boolean(val, &kp).unwrap_or(a.arguments),
                "maxBytes" => match units::size(val) {
                    Ok(n) if n >= 1024 => a.max_bytes = n,
                    Ok(_) => self.error(&kp, "is below the minimum; use at least \"1KiB\""),
                    Err(message) => self.error(&kp, message),
                },
                _ => {}
            }
        }
        a
    }

    pub(super) fn flows(&mut self, v: &Value, path: &str) -> Flows {
        let mut f = Flows::default();
        let Some(m) = self.object(
            v,
            path,
            r#"{"private": ["fs:read_*"], "egress": ["slack:post_*"], "guard": "ask"}"#,
        ) else {
            return f;
        };
        self.known_keys(m, path, &["private", "untrusted", "egress", "guard"]);
        for (k, val) in m {
            let kp = child(path, k);
            match k.as_str() {
                "private" => f.private = self.globs(val, &kp),
                "untrusted" => f.untrusted = self.globs(val, &kp),
                "egress" => f.egress = self.globs(val, &kp),
                "guard" => match val.as_str() {
                    Some("ask") => f.guard = FlowGuard::Ask,
                    Some("deny") => f.guard = FlowGuard::Deny,
                    Some("off") => f.guard = FlowGuard::Off,
                    _ => self.error(
                        &kp,
                        format!("{val} is not one of \"ask\", \"deny\", \"off\""),
                    ),
                },
                _ => {}
            }
        }
        f
    }
}
