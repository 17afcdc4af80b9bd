//! `openpact.builtins`: which of OpenPact's own tool groups are on and how they reach the
//! world. Relative paths are relative to the config file; `"builtins": false` turns them all
//! off. A group whose required setting is missing simply does not appear.

use super::build::{Builder, kind_of};
use super::expand::Unset;
use super::suggest::{child, closest_key, index};
use super::units;
use serde_json::{Map, Value};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq)]
pub struct BuiltinsSettings {
    pub enabled: bool,
    /// Workspace and memory root (`ai-data` beside the config by default; created on first write).
    pub workspace_root: PathBuf,
    /// Largest file a workspace or memory read returns (the rest is cut, visibly).
    pub workspace_max_bytes: u64,
    pub vault: Option<VaultSettings>,
    pub web: WebSettings,
    pub github: Option<GithubSettings>,
    pub chat: ChatSettings,
    pub calendars: Vec<CalendarSource>,
    pub scripts: ScriptsSettings,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VaultSettings {
    pub path: PathBuf,
    /// `git pull --rebase` before reads, commit + push after writes.
    pub git_sync: bool,
    /// Largest note a read returns.
    pub max_bytes: u64,
    /// Longest any one git command may run.
    pub git_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WebSettings {
    pub enabled: bool,
    /// Allow fetching private, loopback and link-local addresses (off: SSRF guard).
    pub allow_private: bool,
    pub max_bytes: u64,
    pub timeout: Duration,
    pub max_redirects: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GithubSettings {
    pub token_env: String,
    pub base_url: String,
}

/// A chat provider: the environment variable holding its token, and its API base URL.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatProvider {
    pub token_env: String,
    pub base_url: String,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatSettings {
    pub discord: Option<ChatProvider>,
    pub telegram: Option<ChatProvider>,
    pub slack: Option<ChatProvider>,
    /// A generic webhook: messages are POSTed as JSON to this URL.
    pub webhook: Option<String>,
}

impl ChatSettings {
    #[cfg(test)]
    pub fn any(&self) -> bool {
        self.discord.is_some()
            || self.telegram.is_some()
            || self.slack.is_some()
            || self.webhook.is_some()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum CalendarFeed {
    Url(String),
    File(PathBuf),
}

#[derive(Debug, Clone, PartialEq)]
pub struct CalendarSource {
    pub name: String,
    pub feed: CalendarFeed,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScriptsSettings {
    pub dir: PathBuf,
    /// Script file names always approved (`weather.star`).
    pub allowlist: Vec<String>,
    /// Allow `script_exec` (arbitrary code; still asks permission on every call).
    pub exec: bool,
    pub timeout: Duration,
    /// Largest script output (characters) returned.
    pub max_output: usize,
}

impl BuiltinsSettings {
    pub fn defaults(base: &std::path::Path) -> BuiltinsSettings {
        let root = base.join("ai-data");
        BuiltinsSettings {
            enabled: true,
            scripts: ScriptsSettings {
                dir: root.join("scripts"),
                allowlist: Vec::new(),
                exec: false,
                timeout: Duration::from_secs(30),
                max_output: 100_000,
            },
            workspace_root: root,
            workspace_max_bytes: 1024 * 1024,
            vault: None,
            web: WebSettings {
                enabled: true,
                allow_private: false,
                max_bytes: 2 * 1024 * 1024,
                timeout: Duration::from_secs(30),
                max_redirects: 5,
            },
            github: None,
            chat: ChatSettings::default(),
            calendars: Vec::new(),
        }
    }
}

impl Builder<'_> {
    fn path_setting(&mut self, v: &Value, path: &str) -> Option<PathBuf> {
        let mut discard = Vec::new();
        let s = self.expanded(v, path, Unset::Fail, &mut discard)?;
        let s = self.tilde(s, path)?;
        Some(super::resolve::beside(&self.base_dir, &s))
    }

    fn string_setting(&mut self, v: &Value, path: &str) -> Option<String> {
        match v.as_str() {
            Some(s) if !s.is_empty() => Some(s.to_string()),
            _ => {
                self.error(path, format!("{v} is not a non-empty string"));
                None
            }
        }
    }

    fn section<'v>(
        &mut self,
        v: &'v Value,
        path: &str,
        keys: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => {
                for k in m.keys() {
                    if !keys.contains(&k.as_str()) {
                        self.unknown(&child(path, k), closest_key(k, keys));
                    }
                }
                Some(m)
            }
            other => {
                self.error(path, format!("is {}; it must be an object", kind_of(other)));
                None
            }
        }
    }

    fn provider(
        &mut self,
        v: &Value,
        path: &str,
        default_env: &str,
        default_base: &str,
    ) -> Option<ChatProvider> {
        let m = self.section(v, path, &["tokenEnv", "baseUrl"])?;
        let token_env = match m.get("tokenEnv") {
            Some(t) => self.string_setting(t, &child(path, "tokenEnv"))?,
            None => default_env.to_string(),
        };
        let base_url = match m.get("baseUrl") {
            Some(b) => self.string_setting(b, &child(path, "baseUrl"))?,
            None => default_base.to_string(),
        };
        Some(ChatProvider {
            token_env,
            base_url: base_url.trim_end_matches('/').to_string(),
        })
    }

    pub(super) fn builtins(&mut self, v: &Value, path: &str) -> BuiltinsSettings {
        let mut b = BuiltinsSettings::defaults(&self.base_dir);
        if v == &Value::Bool(false) {
            b.enabled = false;
            return b;
        }
        if v == &Value::Bool(true) {
            return b;
        }
        let keys = [
            "workspace",
            "vault",
            "web",
            "github",
            "chat",
            "calendars",
            "scripts",
        ];
        let Some(m) = self.section(v, path, &keys) else {
            return b;
        };
        // In this order: the workspace's root places the scripts folder, which `scripts.dir`
        // may then move.
        if let Some(w) = m.get("workspace") {
            self.workspace_group(w, &child(path, "workspace"), &mut b);
        }
        if let Some(v) = m.get("vault") {
            self.vault_group(v, &child(path, "vault"), &mut b);
        }
        if let Some(w) = m.get("web") {
            self.web_group(w, &child(path, "web"), &mut b.web);
        }
        if let Some(g) = m.get("github") {
            self.github_group(g, &child(path, "github"), &mut b);
        }
        if let Some(c) = m.get("chat") {
            self.chat_group(c, &child(path, "chat"), &mut b.chat);
        }
        if let Some(c) = m.get("calendars") {
            self.calendars_group(c, &child(path, "calendars"), &mut b.calendars);
        }
        if let Some(s) = m.get("scripts") {
            self.scripts_group(s, &child(path, "scripts"), &mut b.scripts);
        }
        b
    }

    /// `workspace.root`, which also places the scripts folder.
    fn workspace_group(&mut self, w: &Value, wp: &str, b: &mut BuiltinsSettings) {
        if let Some(root) = self.section(w, wp, &["root"]).and_then(|w| w.get("root"))
            && let Some(p) = self.path_setting(root, &child(wp, "root"))
        {
            b.scripts.dir = p.join("scripts");
            b.workspace_root = p;
        }
    }

    /// `vault`: on once it names its folder.
    fn vault_group(&mut self, v: &Value, vp: &str, b: &mut BuiltinsSettings) {
        let Some(vm) = self.section(v, vp, &["path", "git", "maxBytes"]) else {
            return;
        };
        let (mut git_sync, mut git_timeout) = (false, Duration::from_secs(30));
        if let Some(g) = vm.get("git") {
            let gp = child(vp, "git");
            if let Some(gm) = self.section(g, &gp, &["sync", "timeout"]) {
                git_sync = gm.get("sync").and_then(Value::as_bool).unwrap_or(false);
                if let Some(t) = gm.get("timeout") {
                    match units::duration(t) {
                        Ok(d) => git_timeout = d,
                        Err(e) => self.error(&child(&gp, "timeout"), e),
                    }
                }
            }
        }
        let mut max_bytes = 1024 * 1024;
        if let Some(mb) = vm.get("maxBytes") {
            match units::size(mb) {
                Ok(n) => max_bytes = n,
                Err(e) => self.error(&child(vp, "maxBytes"), e),
            }
        }
        match vm.get("path") {
            Some(p) => {
                if let Some(p) = self.path_setting(p, &child(vp, "path")) {
                    b.vault = Some(VaultSettings {
                        path: p,
                        git_sync,
                        max_bytes,
                        git_timeout,
                    });
                }
            }
            None => self.error(vp, "needs a `path` (the vault folder)"),
        }
    }

    /// `web`: its switches and limits.
    fn web_group(&mut self, w: &Value, wp: &str, web: &mut WebSettings) {
        let keys = [
            "enabled",
            "allowPrivate",
            "maxBytes",
            "timeout",
            "maxRedirects",
        ];
        let Some(wm) = self.section(w, wp, &keys) else {
            return;
        };
        for (k, val) in wm {
            let kp = child(wp, k);
            match k.as_str() {
                "enabled" | "allowPrivate" => match val.as_bool() {
                    Some(x) if k == "enabled" => web.enabled = x,
                    Some(x) => web.allow_private = x,
                    None => self.error(&kp, format!("{val} is not a boolean")),
                },
                "maxBytes" => match units::size(val) {
                    Ok(n) => web.max_bytes = n,
                    Err(e) => self.error(&kp, e),
                },
                "timeout" => match units::duration(val) {
                    Ok(d) => web.timeout = d,
                    Err(e) => self.error(&kp, e),
                },
                "maxRedirects" => match val.as_u64() {
                    Some(n) => web.max_redirects = n as usize,
                    None => self.error(&kp, format!("{val} is not a whole number")),
                },
                _ => {}
            }
        }
    }

    /// `github`: on once it names the variable holding its token.
    fn github_group(&mut self, g: &Value, gp: &str, b: &mut BuiltinsSettings) {
        let Some(gm) = self.section(g, gp, &["tokenEnv", "baseUrl"]) else {
            return;
        };
        let token_env = gm
            .get("tokenEnv")
            .and_then(|t| self.string_setting(t, &child(gp, "tokenEnv")));
        let base_url = match gm.get("baseUrl") {
            Some(u) => self.string_setting(u, &child(gp, "baseUrl")),
            None => Some("https://api.github.com".to_string()),
        };
        match (token_env, base_url) {
            (Some(token_env), Some(base_url)) => {
                b.github = Some(GithubSettings {
                    token_env,
                    base_url: base_url.trim_end_matches('/').to_string(),
                })
            }
            (None, _) if gm.get("tokenEnv").is_none() => self.error(
                gp,
                "needs `tokenEnv`, the variable holding the token (e.g. \"GITHUB_TOKEN\")",
            ),
            _ => {}
        }
    }

    /// `chat`: its providers, and the webhook.
    fn chat_group(&mut self, c: &Value, cp: &str, chat: &mut ChatSettings) {
        let Some(cm) = self.section(c, cp, &["discord", "telegram", "slack", "webhook"]) else {
            return;
        };
        if let Some(v) = cm.get("discord") {
            chat.discord = self.provider(
                v,
                &child(cp, "discord"),
                "DISCORD_TOKEN",
                "https://discord.com/api/v10",
            );
        }
        if let Some(v) = cm.get("telegram") {
            chat.telegram = self.provider(
                v,
                &child(cp, "telegram"),
                "TELEGRAM_BOT_TOKEN",
                "https://api.telegram.org",
            );
        }
        if let Some(v) = cm.get("slack") {
            chat.slack = self.provider(
                v,
                &child(cp, "slack"),
                "SLACK_BOT_TOKEN",
                "https://slack.com/api",
            );
        }
        if let Some(v) = cm.get("webhook") {
            let hp = child(cp, "webhook");
            if let Some(url) = self.section(v, &hp, &["url"]).and_then(|h| h.get("url")) {
                let mut discard = Vec::new();
                // An unset ${VAR} here switches the webhook off rather than failing the load.
                if let Some(u) =
                    self.expanded(url, &child(&hp, "url"), Unset::KeepAsWritten, &mut discard)
                {
                    if u.contains("${") || u.is_empty() {
                        self.warn(
                            &child(&hp, "url"),
                            "is not set (its variable is unset); the webhook provider is off",
                        );
                    } else {
                        chat.webhook = Some(u);
                    }
                }
            }
        }
    }

    /// `calendars`: each a name and one feed, a URL or a file.
    fn calendars_group(&mut self, c: &Value, cp: &str, calendars: &mut Vec<CalendarSource>) {
        let items = match c {
            Value::Array(items) => items,
            other => {
                return self.error(
                    cp,
                    format!(
                        "is {}; it must be an array of {{\"name\", \"url\" | \"file\"}}",
                        kind_of(other)
                    ),
                );
            }
        };
        for (i, item) in items.iter().enumerate() {
            let ip = index(cp, i);
            let Some(im) = self.section(item, &ip, &["name", "url", "file"]) else {
                continue;
            };
            let name = im
                .get("name")
                .and_then(|n| self.string_setting(n, &child(&ip, "name")));
            let feed = match (im.get("url"), im.get("file")) {
                (Some(u), None) => {
                    let mut discard = Vec::new();
                    self.expanded(u, &child(&ip, "url"), Unset::Fail, &mut discard)
                        .map(CalendarFeed::Url)
                }
                (None, Some(f)) => self
                    .path_setting(f, &child(&ip, "file"))
                    .map(CalendarFeed::File),
                _ => {
                    self.error(&ip, "needs exactly one of `url` or `file`");
                    None
                }
            };
            match (name, feed) {
                (Some(name), Some(feed)) => calendars.push(CalendarSource { name, feed }),
                (None, _) if im.get("name").is_none() => self.error(&ip, "needs a `name`"),
                _ => {}
            }
        }
    }

    /// `scripts`: its folder, allowlist, and limits.
    fn scripts_group(&mut self, s: &Value, sp: &str, scripts: &mut ScriptsSettings) {
        let keys = ["dir", "allowlist", "exec", "timeout", "maxOutput"];
        let Some(sm) = self.section(s, sp, &keys) else {
            return;
        };
        for (k, val) in sm {
            let kp = child(sp, k);
            match k.as_str() {
                "dir" => {
                    if let Some(p) = self.path_setting(val, &kp) {
                        scripts.dir = p;
                    }
                }
                "allowlist" => match val.as_array() {
                    Some(items) => {
                        scripts.allowlist = items
                            .iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    }
                    None => self.error(&kp, "must be an array of script file names"),
                },
                "exec" => match val.as_bool() {
                    Some(x) => scripts.exec = x,
                    None => self.error(&kp, format!("{val} is not a boolean")),
                },
                "timeout" => match units::duration(val) {
                    Ok(d) => scripts.timeout = d,
                    Err(e) => self.error(&kp, e),
                },
                "maxOutput" => match val.as_u64() {
                    Some(n) => scripts.max_output = n as usize,
                    None => self.error(&kp, format!("{val} is not a whole number")),
                },
                _ => {}
            }
        }
    }
}
