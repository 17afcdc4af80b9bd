//! How a plan is shown: the JSON of `config check --json`, `servers --json` and `/health`,
//! and the human lines read back from it.

use super::{DATA_VAR, Network, Plan, Profile, UnixRule, env, known, platform};
use serde_json::{Value, json};

impl Profile {
    /// Which mechanism closes each way out, by way out.
    fn closes(&self) -> Value {
        let granted = || {
            self.unix_sockets
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let unix = match &self.unix {
            UnixRule::Landlock(g) if g.is_empty() => {
                "Landlock: only sockets beneath its write grants".to_string()
            }
            UnixRule::Landlock(_) => format!(
                "Landlock: only sockets beneath its write grants and {}",
                granted()
            ),
            UnixRule::Seccomp => "seccomp: no socket(AF_UNIX), socket pairs only".to_string(),
            UnixRule::Open => format!(
                "any (granted {}; limiting to {} needs Landlock ABI 9, Linux 7.1)",
                granted(),
                if self.unix_sockets.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            ),
        };
        let proc = match &self.pid_namespace {
            Ok(()) => "PID namespace: its own processes only".to_string(),
            Err(why) => format!("shared ({why}): other processes' command lines are readable"),
        };
        json!({
            "unixSockets": unix,
            "proc": proc,
            "packageCaches": {"private": self.caches, "sharedReadOnly": self.shared_caches},
        })
    }
}

impl Network {
    fn to_json(&self) -> Value {
        match self {
            Network::Any => json!("any"),
            Network::None => json!("none"),
            Network::Proxy(allow) => {
                json!({"allow": allow.iter().map(|h| h.to_string()).collect::<Vec<_>>()})
            }
        }
    }
}

impl Plan {
    /// For `config check --json`, `servers --json` and `/health`.
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::to_value(&self.mode).unwrap_or_default();
        if let Value::Object(map) = &mut out {
            map.insert("enforced".into(), json!(self.enforced()));
            if let Some(p) = &self.profile {
                map.insert(
                    "profile".into(),
                    json!({
                        "read": p.read,
                        "write": p.write,
                        "deny": p.deny,
                        "private": p.private,
                        "network": p.network.to_json(),
                        "env": p.env,
                        "tmpdir": p.tmpdir,
                        "data": p.data,
                        // Shown while missing: made at the next start.
                        "create": p.create.iter().filter(|d| !d.exists()).collect::<Vec<_>>(),
                        "unixSockets": p.unix_sockets,
                    }),
                );
                if !p.warnings.is_empty() {
                    map.insert("warnings".into(), json!(p.warnings));
                }
                // The ways out this sandbox closes, each with what closes it.
                if self.enforced() {
                    map.insert("closes".into(), p.closes());
                }
            }
            if let Some(recipe) = self.env.as_ref().filter(|_| self.profile.is_none()) {
                map.insert("env".into(), json!(recipe.names));
            }
            if let Some(k) = &self.known {
                map.insert(
                    "known".into(),
                    json!({
                        "name": k.entry.name,
                        "matched": k.launched.to_string(),
                        "table": known::TABLE_PATH,
                        "entry": k.entry,
                    }),
                );
            }
        }
        out
    }
}

/// The human lines for a sandbox as [`Plan::to_json`] gives it (also as read back from a
/// running hub's status): how it runs, then its profile.
pub fn describe(v: &Value) -> Vec<String> {
    let mut out = vec![headline(v)];
    let warnings = v.get("warnings").and_then(Value::as_array);
    out.extend(
        warnings
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|w| format!("warning: {w}")),
    );
    if let Some(k) = v.get("known") {
        out.extend(known_lines(k, text(v, "mode") == "runtime"));
    }
    let Some(p) = v.get("profile") else {
        return out;
    };
    out.extend(profile_lines(v, p));
    out.extend(closes_lines(v));
    out
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The strings of the array at `key`.
fn strings<'a>(v: &'a Value, key: &str) -> Vec<&'a str> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// How it runs.
fn headline(v: &Value) -> String {
    match text(v, "mode") {
        "enforced" => format!("sandboxed ({})", platform().name()),
        "unconfined" => format!("NOT sandboxed: {}", text(v, "reason")),
        "refused" => format!("refused: {}", text(v, "reason")),
        "off" => format!("unconfined ({})", text(v, "reason")),
        "runtime" => format!(
            "contained by {} (environment filtered; its own flags decide files and network)",
            text(v, "runtime")
        ),
        _ => "remote (not a local process)".to_string(),
    }
}

/// The known-servers entry it matched: what it gets from it, the secrets it reads that the
/// table does not pass, and the entry's notes.
fn known_lines(k: &Value, runtime: bool) -> Vec<String> {
    let name = k.get("name").and_then(Value::as_str).unwrap_or_default();
    let matched = k.get("matched").and_then(Value::as_str).unwrap_or_default();
    let what = if runtime {
        "its variables from"
    } else {
        "the default profile plus its grants in"
    };
    let mut out = vec![format!(
        "profile: known ({name}), matched as {matched}: {what} {} (a \"sandbox\" object adds to them; \"known\": false in it drops them)",
        known::TABLE_PATH
    )];
    let secrets: Vec<&str> = k
        .pointer("/entry/env")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let secrets: Vec<&str> = secrets
        .into_iter()
        .filter(|n| env::looks_secret(n))
        .collect();
    if !secrets.is_empty() {
        out.push(format!(
            "secrets it reads, not passed by the table: {} (give them in its \"env\", or name them in sandbox.env)",
            secrets.join(", ")
        ));
    }
    if let Some(notes) = k
        .pointer("/entry/notes")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        out.push(format!("notes: {notes}"));
    }
    out
}

/// What the profile `p` grants and denies, its network and variables, and its data folder.
fn profile_lines(v: &Value, p: &Value) -> Vec<String> {
    let tmpdir = text(p, "tmpdir");
    let data = text(p, "data");
    let caches = v
        .pointer("/closes/packageCaches/private")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let create = strings(p, "create");
    // The temp dir's path holds the hub's pid: shown by what it is, as are the data folder
    // and the package caches (on lines of their own); a folder still to be made says so.
    let list = |key: &str| -> String {
        strings(p, key)
            .into_iter()
            .map(|s| {
                if s == tmpdir {
                    "its own TMPDIR".to_string()
                } else if s == data {
                    "its data folder".to_string()
                } else if s == caches {
                    "its package caches".to_string()
                } else if create.contains(&s) {
                    format!("{s} (missing: made at start)")
                } else {
                    s.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let denied = p.get("deny").and_then(Value::as_array).map_or(0, Vec::len);
    let mut out = vec![
        format!("read: {} (except what is denied)", list("read")),
        format!("write: {}", list("write")),
        format!(
            "deny: {denied} places, credentials first: {}",
            first_few(&list("deny"))
        ),
        format!("network: {}", network_line(p)),
        format!("env: {}", list("env")),
    ];
    if !data.is_empty() {
        out.push(format!(
            "data: {data} (its own, kept across restarts; ${DATA_VAR})"
        ));
    }
    out
}

/// Where the profile `p` lets the server's network go.
fn network_line(p: &Value) -> String {
    match p.get("network") {
        Some(Value::String(s)) if s == "any" => "any host".to_string(),
        Some(Value::String(_)) => "none".to_string(),
        Some(n) => format!(
            "only through the egress proxy, to {}",
            n.get("allow")
                .and_then(Value::as_array)
                .map(|a| a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        ),
        None => String::new(),
    }
}

/// What closes each way out beyond files and the network, and its package caches.
fn closes_lines(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let closes = |key: &str| v["closes"].get(key).and_then(Value::as_str);
    for (key, label) in [("unixSockets", "Unix sockets"), ("proc", "/proc")] {
        if let Some(how) = closes(key) {
            out.push(format!("{label}: {how}"));
        }
    }
    if let Some(caches) = v.pointer("/closes/packageCaches") {
        let shared = strings(caches, "sharedReadOnly");
        let shared = match shared.is_empty() {
            true => "none here".to_string(),
            false => shared.join(", "),
        };
        out.push(format!(
            "package caches: its own at {} (npm/npx, uv/uvx, pip, pipx, yarn, pnpm, bun); the shared ones read-only: {shared}",
            caches.get("private").and_then(Value::as_str).unwrap_or_default()
        ));
    }
    out
}

fn first_few(list: &str) -> String {
    let items: Vec<&str> = list.split(", ").collect();
    if items.len() <= 4 {
        return list.to_string();
    }
    format!("{}, … (--json lists all)", items[..4].join(", "))
}
