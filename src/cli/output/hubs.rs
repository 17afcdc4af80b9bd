//! What the commands about running hubs print: each server's state (`servers`), the
//! running hubs, how their reload went, and their caches.

use super::out;
use crate::config::human_duration;
use crate::hub::{HubStatus, ServerStatus};
use crate::upstream::{RemoteStatus, State};
use serde_json::{Value, json};

pub fn servers_human(servers: &[ServerStatus]) {
    if servers.is_empty() {
        out!("no servers configured");
        return;
    }
    let w = servers
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    out!(
        "{:w$}  {:12}  {:10}  {:>5}  {:20}  {:>8}  RESTARTS",
        "NAME",
        "STATE",
        "PROTOCOL",
        "TOOLS",
        "STARTED",
        "READY IN"
    );
    for s in servers {
        let dash = || "-".to_string();
        out!(
            "{:w$}  {:12}  {:10}  {:>5}  {:20}  {:>8}  {}",
            s.name,
            s.state,
            s.protocol_version.clone().unwrap_or_else(dash),
            s.tools.map_or_else(dash, |n| n.to_string()),
            s.started_at.clone().unwrap_or_else(dash),
            s.ready_ms
                .map_or_else(dash, |ms| human_duration(std::time::Duration::from_millis(
                    ms
                ))),
            s.restarts
        );
        if let Some(r) = remote_of(s) {
            out!("{:w$}  url: {} ({})", "", r.url, r.transport);
        }
        if s.hidden_tools > 0 {
            out!(
                "{:w$}  {} tool(s) hidden by enabledTools/disabledTools",
                "",
                s.hidden_tools
            );
        }
        if let Some(sandbox) = &s.sandbox {
            for (i, line) in crate::sandbox::describe(sandbox).iter().enumerate() {
                let label = if i == 0 { "sandbox:" } else { "  " };
                out!("{:w$}  {label} {line}", "");
            }
        }
        sandbox_answers(s, w);
        if s.state == State::NeedsLogin(String::new()).label() {
            out!("{:w$}  login: run `openpact auth login {}`", "", s.name);
        }
        if let Some(reason) = &s.reason {
            out!("{:w$}  reason: {reason}", "");
        } else if let Some(e) = &s.last_error {
            out!("{:w$}  last error: {e}", "");
        }
        if s.state != "ready" {
            for line in s.stderr.iter().rev().take(5).rev() {
                out!("{:w$}  stderr: {line}", "");
            }
        }
    }
}

/// What the sandbox refused a server lately, with what allows it, and the hosts the user
/// answered about for good, with what undoes that.
fn sandbox_answers(s: &ServerStatus, w: usize) {
    let text = |v: &serde_json::Value, key: &str| v[key].as_str().unwrap_or("").to_string();
    for r in &s.refusals {
        let fix = match r["fix"].as_str() {
            Some(fix) => format!("; allow it: `{fix}`"),
            None => String::new(),
        };
        out!(
            "{:w$}  refused: {} {} at {}{fix}",
            "",
            text(r, "kind"),
            text(r, "what"),
            text(r, "at")
        );
    }
    for h in &s.asked_hosts {
        out!(
            "{:w$}  host {}: {} (answered at {}; `{}` undoes it)",
            "",
            text(h, "host"),
            text(h, "decision"),
            text(h, "at"),
            text(h, "forget")
        );
    }
}

/// A remote server's URL (without credentials) and transport, from the status's `remote`
/// member (read through serde, so this works whether or not the hub's status carries it).
fn remote_of(s: &ServerStatus) -> Option<RemoteStatus> {
    let v = serde_json::to_value(s).ok()?;
    serde_json::from_value(v.get("remote")?.clone()).ok()
}

/// What a running hub is: the shared hub of its config (`serve --shared`, which `connect`
/// starts; only it publishes a socket) or an `openpact serve` of its own.
fn hub_kind(h: &HubStatus) -> &'static str {
    if h.socket.is_some() {
        "shared hub"
    } else {
        "openpact serve"
    }
}

pub fn live_human(hubs: &[HubStatus]) {
    for (i, h) in hubs.iter().enumerate() {
        if i > 0 {
            out!();
        }
        out!(
            "{} (pid {}, config {}, since {}, updated {}):",
            hub_kind(h),
            h.pid,
            h.config.as_deref().unwrap_or("none"),
            h.started_at,
            h.updated_at
        );
        if let Some(r) = &h.reload {
            reload_line(h.pid, r);
        }
        if let Some(ui) = &h.ui {
            out!("  dashboard: {ui} (`openpact ui` logs you in)");
        }
        servers_human(&h.servers);
    }
    out!("\n(`openpact servers --start` starts the configured servers afresh instead)");
}

/// How a hub's last reload went, one line (more when it failed: the config's errors).
pub fn reload_line(pid: u32, r: &crate::hub::ReloadStatus) {
    if r.applied {
        out!("  last reload {}: applied ({})", r.at, r.message);
        for setting in &r.needs_restart {
            out!("    {setting} changed: applies when this hub restarts");
        }
        for w in &r.warnings {
            out!("    warning: {w}");
        }
    } else {
        out!(
            "  last reload {}: NOT applied, the config has errors; pid {pid} serves the last good config:",
            r.at
        );
        for line in r.message.lines() {
            out!("    {line}");
        }
    }
}

pub fn nothing_to_reload() {
    out!("no config file here (openpact runs on its built-in tools alone); nothing to reload");
}

/// `openpact reload`: what each hub did.
pub fn reloaded(asked: &[(&HubStatus, Option<crate::hub::ReloadStatus>)]) {
    if asked.is_empty() {
        out!("no openpact serve is running with this config; nothing to reload");
        return;
    }
    for (hub, status) in asked {
        let (kind, pid) = (hub_kind(hub), hub.pid);
        match status {
            Some(r) => {
                out!("{kind} (pid {pid}):");
                reload_line(pid, r);
            }
            None => {
                out!("{kind} (pid {pid}): asked to reload; it has not reported back yet")
            }
        }
    }
}

/// `servers --json`: always a list of hubs, each with its servers; `running` tells a
/// running `openpact serve` (true) from servers started for this command (false).
pub fn hubs_json(hubs: &[HubStatus], running: bool) -> anyhow::Result<()> {
    let mut list = Vec::with_capacity(hubs.len());
    for h in hubs {
        let mut v = serde_json::to_value(h)?;
        v["running"] = json!(running);
        list.push(v);
    }
    out!("{}", serde_json::to_string_pretty(&list)?);
    Ok(())
}

pub fn cache_stats(hubs: &[HubStatus], raw: bool) -> anyhow::Result<()> {
    if raw {
        let v: Vec<Value> = hubs
            .iter()
            .map(|h| json!({"pid": h.pid, "cache": h.cache}))
            .collect();
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if hubs.is_empty() {
        out!("no openpact serve is running with this config (the cache lives in its process)");
    }
    for h in hubs {
        let c = h.cache.unwrap_or_default();
        let total = c.hits + c.misses;
        let rate = if total == 0 {
            0.0
        } else {
            c.hits as f64 * 100.0 / total as f64
        };
        out!(
            "{} (pid {}): {} hits, {} misses ({rate:.0}% hits), {} entries, {} bytes",
            hub_kind(h),
            h.pid,
            c.hits,
            c.misses,
            c.entries,
            c.bytes
        );
    }
    Ok(())
}

/// `openpact ui`: the login link, alone on stdout (for `xdg-open "$(openpact ui --no-open)"`).
pub fn ui_link(link: &str) {
    out!("{link}");
}

/// Whether the browser took the link, on stderr (stdout keeps the link alone).
pub fn ui_opened(link: &str, opened: Result<(), String>) {
    match opened {
        Ok(()) => eprintln!("openpact: opened the dashboard in your browser (the link works once)"),
        Err(why) => eprintln!(
            "openpact: could not start a browser ({why}): open the link above in one; it works \
             once, for ten minutes{}",
            match link
                .strip_prefix("http://127.0.0.1:")
                .and_then(|rest| rest.split('/').next())
            {
                Some(port) => format!(
                    ", on this machine (from another, forward its port first: `ssh -L {port}:127.0.0.1:{port} HOST`)"
                ),
                None => String::new(),
            }
        ),
    }
}

pub fn cache_cleared(n: usize) {
    match n {
        0 => out!("no openpact serve is running with this config; nothing to clear"),
        n => out!("asked {n} running openpact serve process(es) to clear their cache"),
    }
}
