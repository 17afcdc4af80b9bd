//! What `config check` prints (the resolved config, or its problems), and what
//! `sandbox allow` wrote into the config file.

use super::out;
use crate::config::{Config, ConfigError, OAuthSettings, Transport, display_url, human_duration};
use crate::policy::flows::{self, Label};
use crate::transport::http::RemoteKind;
use serde_json::{Value, json};
use std::path::Path;

/// `openpact sandbox allow`: what changed, and whether the running hubs took it.
pub fn sandbox_allowed(done: &crate::cli::sandbox::Allowed, json: bool) -> anyhow::Result<()> {
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
    hub_reloads(&done.hubs);
    Ok(())
}

/// What each running hub of the config did with the reload an edit asked for.
pub(super) fn hub_reloads(hubs: &[crate::cli::sandbox::HubReload]) {
    if hubs.is_empty() {
        out!("no openpact serve is running with this config: the servers get it when next started");
    }
    for h in hubs {
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
}

fn source_label(config: &Config) -> String {
    config.source.as_ref().map_or_else(
        || "none found: using the embedded default (no servers)".into(),
        |p| p.display().to_string(),
    )
}

/// `config check`: the hub's settings, then each server as it will be started or reached.
pub fn config_human(config: &Config, state_dir: &Path) {
    hub_settings(config, state_dir);
    for p in &config.hub.profiles {
        profile_line(p);
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
    flows_human(config);
    let mut store = None;
    let plans = crate::sandbox::plans(config, state_dir);
    for (index, s) in config.servers.iter().enumerate() {
        server_human(s, &plans[index], state_dir, &mut store);
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

/// Per label, the config's globs and the built-ins that have it by default (when built-ins
/// are on): what is known without starting the servers.
fn flow_labels(config: &Config) -> Vec<(Label, &[String], Vec<&'static str>)> {
    let f = &config.hub.policy.flows;
    Label::ALL
        .into_iter()
        .map(|label| {
            let globs = match label {
                Label::Private => &f.private,
                Label::Untrusted => &f.untrusted,
                Label::Egress => &f.egress,
            };
            let builtins = flows::BUILTINS
                .iter()
                .filter(|(_, marks)| config.hub.builtins.enabled && marks.has(label))
                .map(|(name, _)| *name)
                .collect();
            (label, globs.as_slice(), builtins)
        })
        .collect()
}

const ANNOTATION_LABELS: &str =
    "labels from the servers' annotations (openWorldHint) are shown by `openpact tools`";

fn flows_human(config: &Config) {
    out!(
        "data-flow guard (openpact.flows.guard): {}",
        config.hub.policy.flows.guard.label()
    );
    for (label, globs, builtins) in flow_labels(config) {
        let mut from = Vec::new();
        if !globs.is_empty() {
            from.push(format!("{} (config)", globs.join(", ")));
        }
        if !builtins.is_empty() {
            from.push(format!("{} (built-in defaults)", builtins.join(", ")));
        }
        if from.is_empty() {
            from.push("none".into());
        }
        out!("  {}: {}", label.name(), from.join("; "));
    }
    out!("  {ANNOTATION_LABELS}");
}

/// The lines about the hub as a whole: where its config and state are, names, search, HTTP.
fn hub_settings(config: &Config, state_dir: &Path) {
    out!("config: {}", source_label(config));
    out!("state dir: {}", state_dir.display());
    out!(
        "tool names: {}, page size {}, list wait {}",
        config.hub.tool_names.label(),
        config.hub.page_size,
        human_duration(config.hub.list_wait)
    );
    out!("tool search: {}", search_label(&config.hub.tool_search));
    out!("code mode: {}", code_label(&config.hub.code_mode));
    match telemetry_export(config) {
        None => out!("telemetry: off"),
        Some(e) => out!(
            "telemetry: OTLP/HTTP traces to {}, metrics to {}, service {}, arguments {} (only `serve` exports)",
            e.traces,
            e.metrics,
            e.service_name,
            if e.arguments { "redacted" } else { "never" }
        ),
    }
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
}

/// One profile: its endpoint, servers, tool patterns, built-ins and search.
fn profile_line(p: &crate::config::Profile) {
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
        "profile {} (/mcp/{}): {servers}; tools {}; built-ins {}; search {}; code mode {}",
        p.name,
        p.name,
        if tools.is_empty() {
            "all".to_string()
        } else {
            tools.join(" ")
        },
        if p.builtins { "in" } else { "out" },
        search_label(&p.tool_search),
        match p.code_mode.mode {
            crate::config::CodeModeSwitch::Off => "off".to_string(),
            _ => code_label(&p.code_mode),
        }
    );
}

/// One server: how it is started (and confined) or reached (and logged in to), its env
/// keys, tool filters, protocol and timeout.
fn server_human(
    s: &crate::config::ServerConfig,
    plan: &crate::sandbox::Plan,
    state_dir: &Path,
    store: &mut Option<std::sync::Arc<crate::auth::TokenStore>>,
) {
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
            for (i, line) in crate::sandbox::describe(&plan.to_json()).iter().enumerate() {
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
                let names: Vec<String> = headers.iter().map(|(k, _)| format!("{k}: …")).collect();
                out!("  headers: {}", names.join(", "));
            }
            out!("  auth: {}", auth_plan(headers, oauth));
            let login = login_status(&s.name, url, oauth, state_dir, store);
            out!("  login: {}", crate::cli::auth::status_line(&login));
        }
    }
    let keys = crate::cli::env_keys(&s.transport);
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
                "env": crate::cli::env_keys(&s.transport),
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
        "codeMode": code_json(&config.hub.code_mode),
        "telemetry": telemetry_export(config).map(|e| json!({
            "traces": e.traces,
            "metrics": e.metrics,
            "serviceName": e.service_name,
            "arguments": e.arguments,
        })),
        "flows": {
            "guard": config.hub.policy.flows.guard.label(),
            "labels": flow_labels(config).into_iter().map(|(label, globs, builtins)| {
                (label.name().to_string(), json!({"config": globs, "builtins": builtins}))
            }).collect::<serde_json::Map<_, _>>(),
            "annotations": ANNOTATION_LABELS,
        },
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
            "codeMode": code_json(&p.code_mode),
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

/// Where `serve` would export telemetry: the config's `openpact.telemetry` with the `OTEL_*`
/// variables of this environment.
fn telemetry_export(config: &Config) -> Option<crate::telemetry::Export> {
    crate::telemetry::Export::resolve(&config.hub.telemetry, &|k| std::env::var(k).ok())
}

fn code_mode_name(c: &crate::config::CodeMode) -> &'static str {
    match c.mode {
        crate::config::CodeModeSwitch::On => "on",
        crate::config::CodeModeSwitch::Off => "off",
        crate::config::CodeModeSwitch::Auto => "auto",
    }
}

/// Code mode's switch and, when it can be on, the limits every program gets and how its
/// worker is confined on this machine.
fn code_label(c: &crate::config::CodeMode) -> String {
    if c.mode == crate::config::CodeModeSwitch::Off {
        return "off (openpact.codeMode.mode turns on run_code)".into();
    }
    let confined = match crate::sandbox::support() {
        crate::sandbox::Support::Missing(why) => {
            format!("unconfined here ({why}), resource limits only")
        }
        _ => format!("confined ({})", crate::sandbox::platform().name()),
    };
    format!(
        "{}{}: run_code with {} per program, {} tool calls, {} at once, {} MiB, {} characters of output; programs run {confined}",
        code_mode_name(c),
        if c.mode == crate::config::CodeModeSwitch::Auto {
            " (where tool search is on)"
        } else {
            ""
        },
        human_duration(c.timeout),
        c.max_calls,
        c.parallel,
        c.memory >> 20,
        c.max_output
    )
}

fn code_json(c: &crate::config::CodeMode) -> Value {
    json!({
        "mode": code_mode_name(c),
        "timeoutMs": c.timeout.as_millis() as u64,
        "maxCalls": c.max_calls,
        "parallel": c.parallel,
        "memory": c.memory,
        "maxOutput": c.max_output,
        "keepValues": c.keep_values,
        "keepBytes": c.keep_bytes,
    })
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
