//! The policy every call passes — permission → rate limit → cache → call → redaction →
//! audit — tested end to end against `openpact serve` and the CLI, real processes over real
//! pipes. This module holds what the topics share: hubs started without a terminal, the
//! elicitation round trip, the upstream call counter, and readers for the state dir.
//!
//! - `no_channel`: permissions when there is no way to ask.
//! - `elicitation`: asking through the client (the harness client), and a changed
//!   definition asked about again.
//! - `hosts`: hosts beyond a sandboxed server's allow list, asked for through the client
//!   or refused with the command that allows them.
//! - `sdk_clients`: rmcp and the Python SDK answering permission prompts.
//! - `terminal`: the CLI's prompt on a real pseudo-terminal (util-linux `script`).
//! - `cache`: the result cache, and `cache stats` / `clear` against a running hub.
//! - `ratelimit`: rate limits per server, per tool, and the shipped default.
//! - `redaction`: secrets kept out of responses, logs and the audit.
//! - `audit`: the audit log and `audit tail`.
//! - `flows`: the data-flow guard — an egress call after a private and an untrusted one.
//! - `commands`: the `permissions` commands from many processes at once, and config
//!   warnings about rules that can never match.
//!
//! Every hub here runs under `setsid`, so it has no controlling terminal even when the
//! tests run from one: "no prompt channel" means the same on a laptop as in CI.

use crate::support::{
    Client, Hub, OPENPACT, Ran, Scratch, WAIT, accept, answer, fixture, openpact_for, s, send_call,
    state_dir, text,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::Command;

/// How many calls reached the fixture while `$body` ran (the `calls` probes not counted).
macro_rules! upstream_calls {
    ($c:expr, $body:expr) => {{
        let before = $crate::policy::calls($c).await;
        let out = $body;
        let after = $crate::policy::calls($c).await;
        (after - before - 1, out)
    }};
}

mod audit;
mod cache;
mod commands;
mod elicitation;
pub(crate) mod flows;
mod hosts;
mod no_channel;
mod ratelimit;
mod redaction;
mod sdk_clients;
mod terminal;

/// `openpact serve` as `support::serve_with` starts it, but in a session of its own
/// (`setsid` execs, so the pid is openpact's): no controlling terminal, whoever runs the
/// tests.
fn serve_command(config: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = openpact_for(config, Some("setsid"));
    cmd.arg("serve")
        .env("OPENPACT_LOG", "info,openpact=debug")
        .envs(env.iter().copied())
        .kill_on_drop(true);
    cmd
}

fn serve(config: &Path, env: &[(&str, &str)]) -> Hub {
    Hub::spawn(serve_command(config, env))
}

/// `openpact` settings with these permissions and the shipped rate limit (10 calls/s, burst
/// 20), which `Scratch::config` would otherwise switch off.
pub(crate) fn asking(permissions: Value) -> Value {
    json!({"permissions": permissions,
           "rateLimits": {"default": {"perSecond": 10, "burst": 20}}})
}

/// `settings` with `key` set to `value`.
pub(crate) fn with(mut settings: Value, key: &str, value: Value) -> Value {
    settings[key] = value;
    settings
}

/// The fixture as `fx`, the only server.
fn fx() -> Value {
    json!({"fx": fixture(&[])})
}

/// A config with the fixture as `fx` and these `openpact` settings.
fn fx_config(sc: &Scratch, openpact: Value) -> PathBuf {
    sc.servers(fx(), Some(openpact))
}

/// `initialize` with these capabilities and client name, then a `tools/list` (which waits
/// for servers still starting), so calls never race the catalogue.
pub(crate) async fn init(c: &mut Client, capabilities: Value, name: &str) {
    let r = c.initialize_as(capabilities, name).await;
    assert!(r["result"]["capabilities"].is_object(), "{r}");
    let tools = c.list_tools().await;
    assert!(
        tools.iter().any(|t| t["name"] == "fx:echo"),
        "fx:echo not listed: {tools:?}"
    );
}

/// A hub on `config` (with `env`), initialized with these capabilities and client name.
pub(crate) async fn started(
    config: &Path,
    env: &[(&str, &str)],
    capabilities: Value,
    name: &str,
) -> Hub {
    let mut hub = serve(config, env);
    init(&mut hub.client, capabilities, name).await;
    hub
}

/// A hub over `servers` with these `openpact` settings, initialized without elicitation.
async fn hub_with(sc: &Scratch, servers: Value, openpact: Value) -> (Hub, PathBuf) {
    let config = sc.servers(servers, Some(openpact));
    let hub = started(&config, &[], json!({}), "policy-test").await;
    (hub, config)
}

async fn hub(sc: &Scratch, openpact: Value) -> (Hub, PathBuf) {
    hub_with(sc, fx(), openpact).await
}

/// A hub over `servers` with these `openpact` settings, initialized declaring elicitation.
async fn eliciting_hub(sc: &Scratch, servers: Value, openpact: Value) -> (Hub, PathBuf) {
    let config = sc.servers(servers, Some(openpact));
    let hub = started(&config, &[], json!({"elicitation": {}}), "policy-eliciting").await;
    (hub, config)
}

/// How many `tools/call` the fixture has received (this one included).
pub(crate) async fn calls(c: &mut Client) -> u64 {
    let r = c.call("fx:calls", json!({})).await;
    text(&r)
        .parse()
        .unwrap_or_else(|e| panic!("calls: {e}: {r}"))
}

/// The next `elicitation/create` the hub sends.
pub(crate) async fn prompt(c: &mut Client) -> Value {
    let req = c
        .wait_for("elicitation/create", WAIT)
        .await
        .expect("an elicitation/create request from the hub");
    assert!(req["id"].is_number() || req["id"].is_string(), "{req}");
    req
}

/// Calls `name`, answers the permission prompt it raises with `result`; the call's response.
async fn call_answering(c: &mut Client, name: &str, arguments: Value, result: Value) -> Value {
    call_prompted(c, name, arguments, &[], result).await
}

/// [`call_answering`], checking first that the prompt's message holds each of `needles`.
pub(crate) async fn call_prompted(
    c: &mut Client,
    name: &str,
    arguments: Value,
    needles: &[&str],
    result: Value,
) -> Value {
    let id = send_call(c, name, arguments).await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    for needle in needles {
        assert!(msg.contains(needle), "{needle:?} not in {msg}");
    }
    answer(c, &req, result).await;
    c.response(&id).await
}

/// Calls a tool and asserts the hub answers without asking the client first.
pub(crate) async fn call_unasked(c: &mut Client, name: &str, arguments: Value) -> Value {
    let id = send_call(c, name, arguments).await;
    loop {
        let m = c
            .recv(WAIT)
            .await
            .unwrap_or_else(|| panic!("no answer to {name} within {WAIT:?}"));
        assert_ne!(
            m["method"], "elicitation/create",
            "{name} was prompted for, but must not be: {m}"
        );
        if m["id"] == id && m.get("method").is_none() {
            return m;
        }
        c.inbox.push_back(m);
    }
}

/// The remembered decisions in the state dir.
fn decisions(state: &Path) -> Value {
    match std::fs::read(state.join("permissions.json")) {
        Ok(bytes) => {
            let v: Value = serde_json::from_slice(&bytes).expect("permissions.json parses");
            v["decisions"].clone()
        }
        Err(_) => json!({}),
    }
}

pub(crate) fn audit_records(state: &Path) -> Vec<Value> {
    std::fs::read_to_string(state.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line ({e}): {l}")))
        .collect()
}

/// Waits until the audit log holds at least `n` records (it is written in the background).
async fn wait_audit(state: &Path, n: usize) -> Vec<Value> {
    wait_audit_where(state, n, |_| true).await
}

/// Waits until at least `n` audit records satisfy `pred`; returns those.
pub(crate) async fn wait_audit_where(
    state: &Path,
    n: usize,
    pred: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let all = audit_records(state);
        let found: Vec<Value> = all.iter().filter(|r| pred(r)).cloned().collect();
        if found.len() >= n {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "expected {n} matching audit records, found {}: {all:#?}",
            found.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `sha256:` hash as openpact writes them: 64 hex digits.
pub(crate) fn hash_ok(h: &Value) -> bool {
    h.as_str().is_some_and(|h| {
        h.len() == 71 && h.starts_with("sha256:") && h[7..].chars().all(|c| c.is_ascii_hexdigit())
    })
}

/// Runs `openpact ARGS` in a session of its own (no terminal) and waits for it.
async fn openpact(args: &[&str]) -> Ran {
    let mut cmd = Command::new("setsid");
    cmd.arg(OPENPACT).args(args).stdin(Stdio::null());
    Ran::of(cmd, args, Duration::from_secs(60)).await
}

/// `openpact --state-dir STATE ARGS`, as [`openpact`] runs it.
async fn openpact_in(state: &Path, args: &[&str]) -> Ran {
    let mut all = vec!["--state-dir", s(state)];
    all.extend(args);
    openpact(&all).await
}

/// `openpact --config CONFIG --state-dir STATE ARGS`, as [`openpact`] runs it.
async fn openpact_on(config: &Path, args: &[&str]) -> Ran {
    let state = state_dir(config);
    let mut all = vec!["--config", s(config), "--state-dir", s(&state)];
    all.extend(args);
    openpact(&all).await
}
