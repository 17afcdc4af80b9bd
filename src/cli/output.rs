//! Everything the CLI prints. The only module allowed to write to stdout, and it is never
//! reached in serve mode.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use super::Listing;
use crate::config::display_url;
use crate::config::human_duration;
use crate::config::{Config, ConfigError, OAuthSettings, Transport};
use crate::hub::{Catalog, Hub, HubStatus, ServerStatus};
use crate::jsonrpc::{Message, RawObject};
use crate::transport::http::RemoteKind;
use crate::upstream::{RemoteStatus, State};
use serde_json::{Value, json};
use std::io::IsTerminal;
use std::path::Path;

/// Writes one line of the CLI's output to stdout. When the reader has gone away (`openpact
/// tools | head`), the command ends quietly with success, as Unix tools do, instead of
/// panicking the way `println!` does on a broken pipe.
macro_rules! out {
    () => { $crate::cli::output::write_out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::output::write_out(format_args!("{}\n", format_args!($($arg)*))) };
}
pub(crate) use out;

/// The body of [`out!`]; also prints text that brings its own line ends.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("openpact: cannot write the output: {e}");
        std::process::exit(1);
    }
}

pub fn help() {
    eprintln!(
        "openpact: say what to do, e.g. `openpact serve`, `openpact tools`, `openpact call SERVER:TOOL '{{}}'`; see `openpact --help`"
    );
}

/// A fatal error at the edge of the program.
pub fn fatal(e: &anyhow::Error) {
    eprintln!("openpact: {e:#}");
}

/// A command's failure as `{"error": {"message": …}}` on stdout, for `--json` callers.
pub fn fatal_json(e: &anyhow::Error) {
    out!("{}", json!({"error": {"message": format!("{e:#}")}}));
}

fn description(json: &str) -> String {
    let d = RawObject::parse(json)
        .ok()
        .and_then(|o| o.get_str("description"))
        .unwrap_or_default();
    let first = d.lines().next().unwrap_or("").trim();
    if first.chars().count() > 100 {
        format!("{}…", first.chars().take(99).collect::<String>())
    } else {
        first.to_string()
    }
}

/// One line per tool / prompt / resource, then a count; failed servers on stderr.
pub fn listing_human(hub: &Hub, catalog: &Catalog, what: Listing) {
    // Which servers the rows came from, for the count (built-ins count as `openpact`).
    let servers: std::collections::BTreeSet<usize> = match what {
        Listing::Tools => catalog.tools.items.iter().map(|t| t.upstream).collect(),
        Listing::Prompts => catalog.prompts.items.iter().map(|p| p.upstream).collect(),
        Listing::Resources => catalog
            .resources
            .iter()
            .chain(catalog.templates.iter())
            .map(|r| r.upstream)
            .collect(),
    };
    let rows: Vec<(String, String)> = match what {
        Listing::Tools => catalog
            .tools
            .items
            .iter()
            .map(|t| (t.qualified.to_string(), description(&t.json)))
            .collect(),
        Listing::Prompts => catalog
            .prompts
            .items
            .iter()
            .map(|p| {
                let args = prompt_arguments(&p.json);
                let label = if args.is_empty() {
                    p.qualified.to_string()
                } else {
                    format!("{} ({args})", p.qualified)
                };
                (label, description(&p.json))
            })
            .collect(),
        Listing::Resources => catalog
            .resources
            .iter()
            .chain(catalog.templates.iter())
            .map(|r| {
                let name = RawObject::parse(&r.json)
                    .ok()
                    .and_then(|o| o.get_str("name"))
                    .unwrap_or_default();
                let server = hub.server_name(r.upstream);
                (
                    r.key.to_string(),
                    format!("[{server}] {name}  {}", description(&r.json))
                        .trim_end()
                        .to_string(),
                )
            })
            .collect(),
    };
    let width = rows
        .iter()
        .map(|(a, _)| a.chars().count())
        .max()
        .unwrap_or(0);
    for (a, b) in &rows {
        out!("{a:width$}  {b}");
    }
    let noun = match what {
        Listing::Tools => "tools",
        Listing::Prompts => "prompts",
        Listing::Resources => "resources and templates",
    };
    out!("{} {noun} from {} server(s)", rows.len(), servers.len());
    if what == Listing::Tools {
        for up in hub.upstreams().iter() {
            let hidden = up.snapshot().hidden_tools;
            if hidden > 0 {
                out!(
                    "({hidden} tool(s) of {} hidden by its enabledTools/disabledTools)",
                    up.name()
                );
            }
        }
    }
    for up in hub.upstreams().iter() {
        if let State::Failed(reason) = &up.snapshot().state {
            eprintln!("server '{}' failed: {reason}", up.name());
        }
    }
}

fn prompt_arguments(json: &str) -> String {
    let v: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    v.get("arguments")
        .and_then(Value::as_array)
        .map(|args| {
            args.iter()
                .filter_map(|a| {
                    let name = a.get("name")?.as_str()?;
                    let required = a.get("required").and_then(Value::as_bool).unwrap_or(false);
                    Some(if required {
                        name.to_string()
                    } else {
                        format!("{name}?")
                    })
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// `openpact tools --search`: the matches best first (`results` as `search_tools` gives
/// them), of `total` tools.
pub fn search_results(
    query: &str,
    results: &[Value],
    total: usize,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let out = json!({"query": query, "tools": results, "total": total});
        out!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if results.is_empty() {
        out!(
            "No tool matches \"{query}\" among {total} tools; try other words (what the tool does, or its server's name)."
        );
        return Ok(());
    }
    let text = |v: &Value, key: &str| v[key].as_str().unwrap_or("").to_string();
    let width = results
        .iter()
        .map(|r| text(r, "name").chars().count())
        .max()
        .unwrap_or(0);
    for (i, r) in results.iter().enumerate() {
        let description = description(&json!({"description": r["description"]}).to_string());
        out!("{:>2}. {:<width$}  {description}", i + 1, text(r, "name"));
    }
    out!(
        "\n{} of {total} tools, best first; call one with `openpact call NAME '{{…}}'` (`--json` adds each one's arguments)",
        results.len()
    );
    Ok(())
}

pub fn listing_json(hub: &Hub, catalog: &Catalog, what: Listing) -> anyhow::Result<()> {
    // The server's own name for the item: `tool` for tools, `prompt` for prompts.
    let own = match what {
        Listing::Prompts => "prompt",
        _ => "tool",
    };
    let named = |items: &[std::sync::Arc<crate::hub::Named>]| -> Vec<Value> {
        items
            .iter()
            .map(|t| {
                let mut v = json!({
                    "name": t.wire,
                    "qualified": t.qualified,
                    "server": hub.server_name(t.upstream),
                    "definition": serde_json::from_str::<Value>(&t.json).unwrap_or(Value::Null),
                });
                v[own] = json!(t.original);
                v
            })
            .collect()
    };
    let listed = |items: &[std::sync::Arc<crate::hub::catalog::Listed>]| -> Vec<Value> {
        items
            .iter()
            .map(|r| {
                json!({
                    "server": hub.server_name(r.upstream),
                    "definition": serde_json::from_str::<Value>(&r.json).unwrap_or(Value::Null),
                })
            })
            .collect()
    };
    let out = match what {
        Listing::Tools => Value::Array(named(&catalog.tools.items)),
        Listing::Prompts => Value::Array(named(&catalog.prompts.items)),
        Listing::Resources => {
            json!({ "resources": listed(&catalog.resources), "templates": listed(&catalog.templates) })
        }
    };
    out!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// Servers a command goes on waiting for after `openpact.listWait`, and for how long.
pub fn waiting_for(names: &[&str], waited: std::time::Duration, longest: std::time::Duration) {
    eprintln!(
        "openpact: waiting for {}: still starting after {} (a first `npx`/`uvx` run downloads the server); giving up after its timeout ({}). `openpact servers` shows each server's state and stderr.",
        names.join(", "),
        human_duration(waited),
        human_duration(longest)
    );
}

/// Servers a command stopped waiting for.
pub fn still_starting(names: &[&str]) {
    if !names.is_empty() {
        eprintln!(
            "openpact: still starting, so left out: {}",
            names.join(", ")
        );
    }
}

pub fn interrupted() {
    eprintln!("interrupted: the request was cancelled");
}

/// A progress bar on stderr for `notifications/progress`, drawn only on a terminal.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    pub fn new() -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar
        });
        Progress { bar }
    }

    pub fn visible(&self) -> bool {
        self.bar.is_some()
    }

    pub fn update(&self, m: &Message) {
        let Some(bar) = &self.bar else { return };
        if m.method() != "notifications/progress" {
            return;
        }
        let v: Value = m
            .params()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        if let Some(total) = v.get("total").and_then(Value::as_f64) {
            bar.set_length(total as u64);
        }
        if let Some(p) = v.get("progress").and_then(Value::as_f64) {
            bar.set_position(p as u64);
        }
        if let Some(msg) = v.get("message").and_then(Value::as_str) {
            bar.set_message(msg.to_string());
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A JSON-RPC error answer: `error CODE: message` on stderr, or with `--json` the error
/// object as `{"error": …}` on stdout, so a script reads every outcome the same way.
pub fn rpc_error(error: &str, raw: bool) {
    let v: Value = serde_json::from_str(error).unwrap_or(Value::Null);
    if raw {
        let error = if v.is_object() {
            v
        } else {
            json!({"message": error})
        };
        out!("{}", json!({ "error": error }));
        return;
    }
    let code = v.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = v.get("message").and_then(Value::as_str).unwrap_or(error);
    eprintln!("error {code}: {message}");
    if let Some(data) = v.get("data") {
        eprintln!("data: {data}");
    }
}

fn content_text(item: &Value) -> String {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("?");
    let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => item
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        "image" | "audio" => {
            let n = item
                .get("data")
                .and_then(Value::as_str)
                .map_or(0, |d| d.len() * 3 / 4);
            format!("[{kind} {mime}, about {n} bytes]")
        }
        "resource" => {
            let r = item.get("resource").cloned().unwrap_or(Value::Null);
            match r.get("text").and_then(Value::as_str) {
                Some(text) => text.to_string(),
                None => format!(
                    "[resource {}]",
                    r.get("uri").and_then(Value::as_str).unwrap_or("?")
                ),
            }
        }
        "resource_link" => format!(
            "[link {}]",
            item.get("uri").and_then(Value::as_str).unwrap_or("?")
        ),
        other => format!("[{other} content]"),
    }
}

/// Prints a `tools/call` result; returns whether it was an `isError` result.
pub fn call_result(result: &str, raw: bool) -> anyhow::Result<bool> {
    let v: Value = serde_json::from_str(result)?;
    let is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
    if raw {
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(is_error);
    }
    let mut lines: Vec<String> = v
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(content_text)
        .collect();
    if lines.is_empty()
        && let Some(s) = v.get("structuredContent")
    {
        lines.push(serde_json::to_string_pretty(s)?);
    }
    let text = lines.join("\n");
    if is_error {
        eprintln!("error: {text}");
    } else {
        out!("{text}");
    }
    Ok(is_error)
}

/// The result parsed for human output, or None after printing it raw (`--json`).
fn parsed_unless_raw(result: &str, raw: bool) -> anyhow::Result<Option<Value>> {
    let v: Value = serde_json::from_str(result)?;
    if raw {
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(None);
    }
    Ok(Some(v))
}

/// Prints a `prompts/get` result as `role: text` lines.
pub fn prompt_result(result: &str, raw: bool) -> anyhow::Result<bool> {
    let Some(v) = parsed_unless_raw(result, raw)? else {
        return Ok(false);
    };
    if let Some(d) = v.get("description").and_then(Value::as_str) {
        out!("# {d}");
    }
    for m in v
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
        out!(
            "{role}: {}",
            content_text(m.get("content").unwrap_or(&Value::Null))
        );
    }
    Ok(false)
}

/// Prints a `resources/read` result: text contents as they are, blobs summarised.
pub fn read_result(result: &str, raw: bool) -> anyhow::Result<bool> {
    let Some(v) = parsed_unless_raw(result, raw)? else {
        return Ok(false);
    };
    for c in v
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (
            c.get("text").and_then(Value::as_str),
            c.get("blob").and_then(Value::as_str),
        ) {
            (Some(text), _) => out!("{text}"),
            (None, Some(blob)) => {
                let mime = c
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream");
                out!(
                    "[{mime}, about {} bytes; use --json for the base64]",
                    blob.len() * 3 / 4
                );
            }
            _ => {}
        }
    }
    Ok(false)
}

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

/// `openpact sandbox allow`: what changed, and whether the running hubs took it.
pub fn sandbox_allowed(done: &super::sandbox::Allowed, json: bool) -> anyhow::Result<()> {
    if json {
        out!("{}", serde_json::to_string_pretty(done)?);
        return Ok(());
    }
    let (server, kind) = (&done.server, done.kind);
    for v in &done.added {
        out!("{server}: allowed {kind} {v} (added to {})", done.config);
    }
    for v in &done.present {
        out!("{server}: {kind} {v} is allowed already; nothing changed");
    }
    for d in &done.created {
        out!("made the folder {d} (private: 0700)");
    }
    if done.added.is_empty() {
        return Ok(());
    }
    if done.hubs.is_empty() {
        out!("no openpact serve is running with this config: the servers get it when next started");
    }
    for h in &done.hubs {
        match (h.applied, &h.message) {
            (Some(true), m) => out!(
                "openpact serve (pid {}) reloaded: {}",
                h.pid,
                m.as_deref().unwrap_or("")
            ),
            (Some(false), m) => out!(
                "openpact serve (pid {}) did NOT apply it: {}",
                h.pid,
                m.as_deref().unwrap_or("")
            ),
            (None, _) => out!(
                "openpact serve (pid {}): asked to reload; it has not reported back yet",
                h.pid
            ),
        }
    }
    Ok(())
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

fn source_label(config: &Config) -> String {
    config.source.as_ref().map_or_else(
        || "none found: using the embedded default (no servers)".into(),
        |p| p.display().to_string(),
    )
}

pub fn config_human(config: &Config, state_dir: &Path) {
    let mut store = None;
    out!("config: {}", source_label(config));
    out!("state dir: {}", state_dir.display());
    out!(
        "tool names: {}, page size {}, list wait {}",
        config.hub.tool_names.label(),
        config.hub.page_size,
        human_duration(config.hub.list_wait)
    );
    out!("tool search: {}", search_label(&config.hub.tool_search));
    let http = &config.hub.http;
    match crate::face::http::preflight(http, None) {
        Ok(_) => out!(
            "HTTP face (only `serve --http` uses it): http://{}/mcp, {}",
            http.address,
            token_state(&http.token).1
        ),
        Err(e) => out!(
            "HTTP face (only `serve --http` uses it; stdio `serve` and the other commands work): {e}"
        ),
    }
    for p in &config.hub.profiles {
        let servers = p
            .servers
            .as_ref()
            .map_or_else(|| "all servers".to_string(), |s| s.join(", "));
        let mut tools: Vec<&str> = p
            .tools
            .include
            .patterns
            .iter()
            .map(String::as_str)
            .collect();
        let excluded: Vec<String> = p
            .tools
            .exclude
            .patterns
            .iter()
            .map(|g| format!("!{g}"))
            .collect();
        tools.extend(excluded.iter().map(String::as_str));
        out!(
            "profile {} (/mcp/{}): {servers}; tools {}; built-ins {}; search {}",
            p.name,
            p.name,
            if tools.is_empty() {
                "all".to_string()
            } else {
                tools.join(" ")
            },
            if p.builtins { "in" } else { "out" },
            search_label(&p.tool_search)
        );
    }
    let b = &config.hub.builtins;
    if b.enabled {
        out!(
            "built-in tools' workspace: {} (scripts: {})",
            b.workspace_root.display(),
            b.scripts.dir.display()
        );
    } else {
        out!("built-in tools: off");
    }
    let plans = crate::sandbox::plans(config, state_dir);
    for (index, s) in config.servers.iter().enumerate() {
        let flag = if s.disabled { " (disabled)" } else { "" };
        out!("\n{}{flag}", s.name);
        if s.prefix() != s.name {
            out!("  namespace: {:?}", s.prefix());
        }
        match &s.transport {
            Transport::Stdio {
                command,
                program,
                args,
                cwd,
                ..
            } => {
                out!("  command: {command} -> {}", program.display());
                if !args.is_empty() {
                    out!(
                        "  args: {}",
                        serde_json::to_string(args).unwrap_or_default()
                    );
                }
                if let Some(cwd) = cwd {
                    out!("  cwd: {}", cwd.display());
                }
                for (i, line) in crate::sandbox::describe(&plans[index].to_json())
                    .iter()
                    .enumerate()
                {
                    let label = if i == 0 { "sandbox:" } else { "  " };
                    out!("  {label} {line}");
                }
            }
            Transport::Http {
                url,
                kind,
                headers,
                oauth,
            } => {
                out!("  url: {}", display_url(url));
                out!("  transport: {}", transport_plan(kind));
                if !headers.is_empty() {
                    let names: Vec<String> =
                        headers.iter().map(|(k, _)| format!("{k}: …")).collect();
                    out!("  headers: {}", names.join(", "));
                }
                out!("  auth: {}", auth_plan(headers, oauth));
                let login = login_status(&s.name, url, oauth, state_dir, &mut store);
                out!("  login: {}", super::auth::status_line(&login));
            }
        }
        let keys = super::env_keys(&s.transport);
        if !keys.is_empty() && matches!(s.transport, Transport::Stdio { .. }) {
            out!(
                "  env: {}",
                keys.iter()
                    .map(|k| format!("{k}=…"))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
        if let Some(enabled) = &s.tool_filter.enabled {
            out!("  enabledTools: {}", enabled.patterns.join(", "));
        }
        if !s.tool_filter.disabled.is_empty() {
            out!(
                "  disabledTools: {}",
                s.tool_filter.disabled.patterns.join(", ")
            );
        }
        out!("  protocol: {}", s.protocol.plan());
        out!("  timeout: {}", human_duration(s.timeout));
    }
    for w in &config.warnings {
        eprintln!("warning: {w}");
    }
    let n = config.servers.iter().filter(|s| !s.disabled).count();
    out!(
        "\nok: {n} server(s) enabled, {} disabled",
        config.servers.len() - n
    );
}

pub fn config_json(config: &Config, state_dir: &Path) -> anyhow::Result<()> {
    let mut store = None;
    let plans = crate::sandbox::plans(config, state_dir);
    let servers: Vec<Value> = config
        .servers
        .iter()
        .zip(&plans)
        .map(|(s, plan)| {
            let mut v = json!({
                "name": s.name,
                "prefix": s.prefix(),
                "disabled": s.disabled,
                "timeoutMs": s.timeout.as_millis() as u64,
                "protocol": s.protocol.label(),
                "enabledTools": s.tool_filter.enabled.as_ref().map(|g| &g.patterns),
                "disabledTools": s.tool_filter.disabled.patterns,
                "env": super::env_keys(&s.transport),
            });
            match &s.transport {
                Transport::Stdio {
                    command,
                    program,
                    args,
                    cwd,
                    ..
                } => {
                    v["type"] = json!("stdio");
                    v["command"] = json!(command);
                    v["program"] = json!(program);
                    v["args"] = json!(args);
                    v["cwd"] = json!(cwd);
                    v["sandbox"] = plan.to_json();
                }
                Transport::Http {
                    url,
                    kind,
                    headers,
                    oauth,
                } => {
                    v["type"] = json!(kind);
                    v["transport"] = json!(RemoteKind::from_config(kind).label());
                    v["url"] = json!(display_url(url));
                    // Header names only: values are credentials.
                    v["env"] = json!([]);
                    v["headers"] = json!(headers.iter().map(|(k, _)| k).collect::<Vec<_>>());
                    v["auth"] = json!(auth_plan(headers, oauth));
                    v["login"] = json!(login_status(&s.name, url, oauth, state_dir, &mut store));
                    v["oauth"] = json!({
                        "clientId": oauth.client_id,
                        "clientSecretSet": oauth.client_secret.is_some(),
                        "scopes": oauth.scopes,
                        "redirectPort": oauth.redirect_port,
                        "callbackPath": oauth.callback_path,
                    });
                }
            }
            v
        })
        .collect();
    let out = json!({
        "ok": true,
        "config": config.source,
        "stateDir": state_dir,
        "builtins": if config.hub.builtins.enabled {
            json!({"workspace": config.hub.builtins.workspace_root, "scripts": config.hub.builtins.scripts.dir})
        } else {
            Value::Null
        },
        "servers": servers,
        "toolSearch": search_json(&config.hub.tool_search),
        "http": {
            "address": config.hub.http.address,
            "token": token_state(&config.hub.http.token).0,
            "refusal": crate::face::http::preflight(&config.hub.http, None).err().map(|e| e.to_string()),
        },
        "profiles": config.hub.profiles.iter().map(|p| json!({
            "name": p.name,
            "servers": p.servers,
            "tools": p.tools.include.patterns.iter().cloned()
                .chain(p.tools.exclude.patterns.iter().map(|g| format!("!{g}")))
                .collect::<Vec<_>>(),
            "builtins": p.builtins,
            "toolSearch": search_json(&p.tool_search),
        })).collect::<Vec<_>>(),
        "warnings": config.warnings,
    });
    out!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// What guards the HTTP face, as `config check --json` and `config check` say it.
fn token_state(token: &crate::config::HttpToken) -> (&'static str, &'static str) {
    use crate::config::HttpToken;
    match token {
        HttpToken::Bearer(_) => ("required", "bearer token required"),
        HttpToken::None => ("none", "no token (loopback only)"),
        HttpToken::Off => (
            "off",
            "no token (\"token\": false): any program on this machine can call every tool",
        ),
        HttpToken::Missing { .. } => ("missing", "token missing"),
    }
}

/// `auto above 40 tools, 8 results, pinned fs:read_*`.
fn search_label(t: &crate::config::ToolSearch) -> String {
    let mode = match t.mode {
        crate::config::SearchMode::Auto => format!("auto above {} tools", t.threshold),
        crate::config::SearchMode::On => "on".to_string(),
        crate::config::SearchMode::Off => "off".to_string(),
    };
    let mut label = format!("{mode}, {} results", t.limit);
    if !t.always_load.is_empty() {
        label.push_str(&format!(", pinned {}", t.always_load.patterns.join(" ")));
    }
    label
}

fn search_json(t: &crate::config::ToolSearch) -> Value {
    let mode = match t.mode {
        crate::config::SearchMode::Auto => "auto",
        crate::config::SearchMode::On => "on",
        crate::config::SearchMode::Off => "off",
    };
    json!({"mode": mode, "threshold": t.threshold, "alwaysLoad": t.always_load.patterns, "limit": t.limit})
}

/// How a remote server will be reached, from its `type`.
fn transport_plan(kind: &str) -> &'static str {
    match RemoteKind::from_config(kind) {
        RemoteKind::Auto => "Streamable HTTP, falling back to legacy HTTP+SSE (auto)",
        RemoteKind::Streamable => "Streamable HTTP",
        RemoteKind::Sse => "legacy HTTP+SSE",
    }
}

/// What is stored for a remote server's login (never a token); the token store is opened
/// on first use, since opening it probes the OS keyring.
fn login_status(
    name: &str,
    url: &str,
    oauth: &OAuthSettings,
    state_dir: &Path,
    store: &mut Option<std::sync::Arc<crate::auth::TokenStore>>,
) -> crate::auth::AuthStatus {
    let store =
        store.get_or_insert_with(|| std::sync::Arc::new(crate::auth::TokenStore::open(state_dir)));
    crate::auth::describe(name, url, oauth, store.clone())
}

/// How a remote server will be authorized; never a value.
fn auth_plan(headers: &[(String, String)], oauth: &OAuthSettings) -> String {
    if headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    {
        return "Authorization header from the config (OAuth if the server refuses it)".into();
    }
    let mut plan = "OAuth login if the server asks for one".to_string();
    let mut details = Vec::new();
    if let Some(id) = &oauth.client_id {
        details.push(format!("client id {id}"));
    }
    if !oauth.scopes.is_empty() {
        details.push(format!("scopes {}", oauth.scopes.join(" ")));
    }
    if let Some(port) = oauth.redirect_port {
        details.push(format!("callback port {port}"));
    }
    if !details.is_empty() {
        plan.push_str(&format!(" ({})", details.join(", ")));
    }
    plan
}

/// A config that does not pass `config check`: every problem and warning, on stderr, or as
/// one JSON object on stdout with `--json` (`ok: false`).
pub fn config_problems(e: &ConfigError, raw: bool) -> anyhow::Result<()> {
    if !raw {
        eprintln!("{e}");
        return Ok(());
    }
    let problems: Vec<Value> = e
        .problems
        .iter()
        .map(|p| json!({"file": p.file, "path": p.path, "message": p.message}))
        .collect();
    let out = json!({"ok": false, "problems": problems, "warnings": e.warnings});
    out!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// `asked`: how many records were asked for (`-n`); none asked, none shown, nothing said.
pub fn audit(
    records: &[crate::policy::audit::Record],
    asked: usize,
    raw: bool,
) -> anyhow::Result<()> {
    if records.is_empty() && !raw && asked > 0 {
        out!("the audit log is empty");
    }
    for r in records {
        if raw {
            out!("{}", serde_json::to_string(r)?);
            continue;
        }
        let decision = if r.source.is_empty() {
            r.decision.to_string()
        } else {
            format!("{} ({})", r.decision, r.source)
        };
        out!(
            "{}  {:<12} {:<14} {:<32} {:<22} cache {:<4} {:>8.1} ms  {:<11} {} B",
            r.time,
            r.client,
            r.method,
            r.target,
            decision,
            r.cache,
            r.duration_ms,
            r.outcome,
            r.result_bytes
        );
        if let Some(e) = &r.error {
            out!("    {e}");
        }
    }
    Ok(())
}

/// The rule that decides `name` instead of its remembered decision `r`, if any, and
/// whether it agrees with it.
fn ruled(
    name: &str,
    r: &crate::policy::decisions::Remembered,
    rules: &crate::policy::rules::RuleSet,
) -> Option<(crate::policy::rules::Matched, bool)> {
    // Permission rules are about tools, prompts and resources, never a host (`hub::hosts`).
    if r.definition == crate::policy::prompt::HOST {
        return None;
    }
    let m = rules.explain(name)?;
    let agrees = m.agrees_with(r.decision);
    Some((m, agrees))
}

pub fn decisions(
    map: &std::collections::BTreeMap<String, crate::policy::decisions::Remembered>,
    rules: &crate::policy::rules::RuleSet,
    raw: bool,
) -> anyhow::Result<()> {
    if raw {
        let mut out = serde_json::Map::new();
        for (name, r) in map {
            let mut v = serde_json::to_value(r)?;
            if let Some((m, agrees)) = ruled(name, r, rules) {
                v["rule"] = json!({"list": m.rule.label(), "glob": m.glob, "overrides": !agrees});
            }
            out.insert(name.clone(), v);
        }
        out!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if map.is_empty() {
        out!("no remembered decisions");
    }
    for (name, r) in map {
        let d = remember_label(r.decision);
        let definition = match r.definition.get(..r.definition.len().min(19)) {
            Some("") | None => "a resource",
            Some(hash) => hash,
        };
        out!("{name:<40} {d:<6} since {}  ({definition})", r.at);
        match ruled(name, r, rules) {
            Some((m, false)) => out!("    overridden: {} decides instead", m.describe()),
            Some((m, true)) => out!("    (also {} by {})", d, m.describe()),
            None => {}
        }
    }
    Ok(())
}

fn remember_label(d: crate::policy::decisions::Remember) -> &'static str {
    match d {
        crate::policy::decisions::Remember::Allow => "allow",
        crate::policy::decisions::Remember::Deny => "deny",
    }
}

pub fn forgot(name: &str, existed: bool) {
    if existed {
        out!("forgot the decision about {name}; openpact will ask again");
    } else {
        out!("there was no remembered decision about {name}");
    }
}

/// `definition`: what the decision is bound to (empty for a resource, which has none).
pub fn remembered(
    name: &str,
    decision: crate::policy::decisions::Remember,
    rule: Option<&crate::policy::rules::Matched>,
    definition: &str,
) {
    let d = match decision {
        crate::policy::decisions::Remember::Allow => "allowed",
        crate::policy::decisions::Remember::Deny => "denied",
    };
    let until = if definition.is_empty() {
        ""
    } else {
        "until its definition changes; "
    };
    out!("{name} is now always {d} ({until}`openpact permissions forget {name}` undoes this)");
    if let Some(m) = rule {
        out!(
            "note: {} already has it {d}, and decides first",
            m.describe()
        );
    }
}

/// A decision not saved because a rule decides otherwise, with what to do about it.
pub fn overridden(
    name: &str,
    decision: crate::policy::decisions::Remember,
    rule: &crate::policy::rules::Matched,
    config: &str,
) {
    use crate::config::Rule;
    let what = match rule.rule {
        Rule::Ask => "asks on every call",
        Rule::Allow => "allows it",
        Rule::Deny => "denies it",
    };
    eprintln!(
        "openpact: not saved: {} matches {name} and {what}; rules come before remembered decisions, so `openpact permissions {} {name}` would do nothing. Change that rule in {config} so it no longer matches {name}, then run this again.",
        rule.describe(),
        remember_label(decision)
    );
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

pub fn cache_cleared(n: usize) {
    match n {
        0 => out!("no openpact serve is running with this config; nothing to clear"),
        n => out!("asked {n} running openpact serve process(es) to clear their cache"),
    }
}

pub fn scripts(
    list: &[crate::builtins::scripts::ScriptInfo],
    dir: &Path,
    raw: bool,
) -> anyhow::Result<()> {
    if raw {
        let v: Vec<Value> = list
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "status": s.status, "hash": s.hash, "requiredSecrets": s.required_secrets, "metadata": s.metadata}))
            .collect();
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if list.is_empty() {
        out!("no scripts in {}", dir.display());
    }
    let w = list.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for s in list {
        out!("{:w$}  {:<11}  {}", s.name, s.status, s.description);
    }
    Ok(())
}

pub fn script_source(source: &str) {
    write_out(format_args!("{source}"));
    if !source.ends_with('\n') {
        out!();
    }
}

pub fn script_approved(name: &str, hash: &str) {
    out!("approved {name} ({hash}); editing it will need approval again");
}

pub fn script_rejected(name: &str) {
    out!("rejected {name}; script_run will refuse it");
}
