//! The policy every call passes — permission → rate limit → cache → call → redaction →
//! audit — tested end to end against `openpact serve` and the CLI, real processes over real
//! pipes: permissions with no prompt channel, through elicitation (the harness client, rmcp
//! and the Python SDK) and through a real terminal (util-linux `script` gives the CLI a
//! pty); remembered decisions and their definition hashes; the result cache; rate limits;
//! secret redaction on every way out; the audit log; and the CLI commands around them.
//!
//! Every hub here runs under `setsid`, so it has no controlling terminal even when the
//! tests run from one: "no prompt channel" means the same on a laptop as in CI.

use crate::support::{Client, Hub, OPENPACT, Peers, Scratch, WAIT, fixture, text};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, JsonObject,
};
use rmcp::service::RequestContext;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

// ---------------------------------------------------------------------------------------
// Helpers

fn state_of(config: &Path) -> PathBuf {
    config.parent().unwrap().join("state")
}

/// Collects a child's stderr lines into a shared string.
fn drain_stderr(pipe: tokio::process::ChildStderr) -> Arc<Mutex<String>> {
    let sink = Arc::new(Mutex::new(String::new()));
    let s = sink.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut buf = s.lock().unwrap();
            if buf.len() < 4 << 20 {
                buf.push_str(&line);
                buf.push('\n');
            }
        }
    });
    sink
}

/// `openpact serve` as `support::serve_with` starts it, but in a session of its own
/// (`setsid` execs, so the pid is openpact's): no controlling terminal, whoever runs the
/// tests.
fn serve_command(config: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("setsid");
    cmd.arg(OPENPACT)
        .arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(state_of(config))
        .arg("serve")
        .env("OPENPACT_LOG", "info,openpact=debug")
        .envs(env.iter().copied())
        .kill_on_drop(true);
    cmd
}

async fn serve(config: &Path, env: &[(&str, &str)]) -> Hub {
    let mut cmd = serve_command(config, env);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn setsid openpact serve");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = drain_stderr(child.stderr.take().unwrap());
    Hub {
        child,
        client: Client::over(stdin, stdout),
        stderr,
        _scratch: None,
    }
}

/// `initialize` with these capabilities and client name, then a `tools/list` (which waits
/// for servers still starting), so calls never race the catalogue.
async fn init(c: &mut Client, capabilities: Value, name: &str) {
    let r = c
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                   "clientInfo": {"name": name, "version": "0"}}),
        )
        .await;
    assert!(r["result"]["capabilities"].is_object(), "{r}");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let tools = c.list_tools().await;
    assert!(
        tools.iter().any(|t| t["name"] == "fx:echo"),
        "fx:echo not listed: {tools:?}"
    );
}

/// A hub over `servers` with these `openpact` settings, initialized without elicitation.
async fn hub_with(sc: &Scratch, servers: Value, openpact: Value) -> (Hub, PathBuf) {
    let config = sc.servers(servers, Some(openpact));
    let mut hub = serve(&config, &[]).await;
    init(&mut hub.client, json!({}), "policy-test").await;
    (hub, config)
}

async fn hub(sc: &Scratch, openpact: Value) -> (Hub, PathBuf) {
    hub_with(sc, json!({"fx": fixture(&[])}), openpact).await
}

/// How many `tools/call` the fixture has received (this one included).
async fn calls(c: &mut Client) -> u64 {
    let r = c.call("fx:calls", json!({})).await;
    text(&r)
        .parse()
        .unwrap_or_else(|e| panic!("calls: {e}: {r}"))
}

/// How many calls reached the fixture while `f` ran (the `calls` probes not counted).
macro_rules! upstream_calls {
    ($c:expr, $body:expr) => {{
        let before = calls($c).await;
        let out = $body;
        let after = calls($c).await;
        (after - before - 1, out)
    }};
}

fn is_error(r: &Value) -> bool {
    r["result"]["isError"] == true
}

/// Sends `tools/call` without waiting; returns the id.
async fn start_call(c: &mut Client, name: &str, arguments: Value) -> Value {
    let id = c.next_id();
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}))
        .await;
    json!(id)
}

/// The next `elicitation/create` the hub sends.
async fn prompt(c: &mut Client) -> Value {
    let req = c
        .wait_for("elicitation/create", WAIT)
        .await
        .expect("an elicitation/create request from the hub");
    assert!(req["id"].is_number() || req["id"].is_string(), "{req}");
    req
}

async fn answer(c: &mut Client, req: &Value, result: Value) {
    c.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": result}))
        .await;
}

fn accept(decision: &str) -> Value {
    json!({"action": "accept", "content": {"decision": decision}})
}

/// Calls a tool and asserts the hub answers without asking the client first.
async fn call_unasked(c: &mut Client, name: &str, arguments: Value) -> Value {
    let id = start_call(c, name, arguments).await;
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

fn decisions(state: &Path) -> Value {
    match std::fs::read(state.join("permissions.json")) {
        Ok(bytes) => {
            let v: Value = serde_json::from_slice(&bytes).expect("permissions.json parses");
            v["decisions"].clone()
        }
        Err(_) => json!({}),
    }
}

fn audit_records(state: &Path) -> Vec<Value> {
    std::fs::read_to_string(state.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line ({e}): {l}")))
        .collect()
}

/// Waits until the audit log holds at least `n` records (it is written in the background).
async fn wait_audit(state: &Path, n: usize) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let records = audit_records(state);
        if records.len() >= n {
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "the audit log has {} records, expected {n}: {records:#?}",
            records.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until at least `n` audit records satisfy `pred`; returns those.
async fn wait_audit_where(state: &Path, n: usize, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
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

async fn wait_stderr(hub: &Hub, needle: &str) {
    let deadline = Instant::now() + WAIT;
    while !hub.stderr().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "hub stderr never showed {needle:?}:\n{}",
            hub.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `openpact ARGS` in a session of its own (no terminal) and waits for it.
async fn openpact(args: &[&str]) -> Ran {
    let out = Command::new("setsid")
        .arg(OPENPACT)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .unwrap_or_else(|_| panic!("openpact {args:?} did not finish within 60 s"))
        .unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---------------------------------------------------------------------------------------
// 1. Permissions without a prompt channel

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_prompt_channel_ask_denies_with_how_to_allow() {
    let sc = Scratch::new();
    let (mut hub, config) = hub(
        &sc,
        json!({"permissions": {"default": "ask"},
               "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
    )
    .await;
    // No controlling terminal (field 7 of /proc/PID/stat): the non-interactive path.
    assert_eq!(controlling_tty(hub.child.id().unwrap()), 0);
    let r = hub.client.call("fx:echo", json!({"message": "hi"})).await;
    assert!(is_error(&r), "{r}");
    assert!(
        r.get("error").is_none(),
        "a denied tool is a result, not an error: {r}"
    );
    let t = text(&r);
    assert!(t.contains("openpact permissions allow fx:echo"), "{t}");
    assert!(t.contains("openpact.permissions.allow"), "{t}");
    assert!(t.contains("\"fx:*\""), "{t}");
    assert!(t.contains(s(&config)), "names the config file: {t}");
    assert!(t.contains("no way to ask"), "{t}");
    let audit = wait_audit(&state_of(&config), 1).await;
    assert_eq!(
        (
            &audit[0]["decision"],
            &audit[0]["source"],
            &audit[0]["outcome"]
        ),
        (&json!("deny"), &json!("non-interactive"), &json!("denied")),
        "{audit:?}"
    );
}

/// The controlling terminal of a process (0: none).
fn controlling_tty(pid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    fields[4].parse().unwrap()
}

/// A config with `default: ask` whose `fx:calls` is allowed, for counting upstream calls.
fn ask_settings(extra: Value) -> Value {
    let mut v = json!({
        "permissions": {"default": "ask", "allow": ["fx:calls"]},
        "rateLimits": {"default": {"perSecond": 10, "burst": 20}},
    });
    merge(&mut v, extra);
    let allow = v["permissions"]["allow"].as_array_mut().unwrap();
    if !allow.contains(&json!("fx:calls")) {
        allow.push(json!("fx:calls"));
    }
    v
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                match b.get_mut(&k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, e) => *b = e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_prompt_channel_rules_and_defaults_decide() {
    // (settings, tool, allowed?, text the denial must contain)
    let cases: Vec<(Value, &str, bool, &str)> = vec![
        (
            json!({"permissions": {"default": "ask", "allow": ["fx:calls"]}}),
            "fx:echo",
            false,
            "openpact permissions allow fx:echo",
        ),
        (
            json!({"permissions": {"nonInteractive": "allow"}}),
            "fx:echo",
            true,
            "",
        ),
        (
            json!({"permissions": {"allow": ["fx:echo"]}}),
            "fx:echo",
            true,
            "",
        ),
        (
            json!({"permissions": {"allow": ["fx:echo"], "deny": ["fx:*"]}}),
            "fx:echo",
            false,
            "openpact.permissions.deny",
        ),
        (
            json!({"permissions": {"default": "allow", "allow": ["fx:*"], "ask": ["fx:echo"]}}),
            "fx:echo",
            false,
            "no way to ask",
        ),
        (
            json!({"permissions": {"default": "deny"}}),
            "fx:echo",
            false,
            "openpact permissions allow fx:echo",
        ),
        (
            json!({"permissions": {"default": "deny", "nonInteractive": "allow"}}),
            "fx:echo",
            false,
            "openpact.permissions.default is \"deny\"",
        ),
        (
            json!({"permissions": {"default": "allow"}}),
            "fx:echo",
            true,
            "",
        ),
    ];
    for (settings, tool, allowed, needle) in cases {
        let sc = Scratch::new();
        let (mut hub, _) = hub(&sc, ask_settings(settings.clone())).await;
        // `fx:*` denies the `calls` probe too: count only where it is allowed.
        let countable = settings["permissions"]["deny"] != json!(["fx:*"]);
        let (upstream, r) = if countable {
            upstream_calls!(
                &mut hub.client,
                hub.client.call(tool, json!({"message": "m"})).await
            )
        } else {
            (0, hub.client.call(tool, json!({"message": "m"})).await)
        };
        if allowed {
            assert!(!is_error(&r), "{settings}: {r}");
            assert_eq!(text(&r), "m", "{settings}");
            assert_eq!(upstream, u64::from(countable), "{settings}");
        } else {
            assert!(is_error(&r), "{settings}: {r}");
            let t = text(&r);
            assert!(t.contains(needle), "{settings}: {t}");
            assert!(t.contains(tool), "{settings}: {t}");
            assert_eq!(
                upstream, 0,
                "{settings}: a denied call never reaches the server"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_prompts_and_resources_are_errors_32003() {
    let sc = Scratch::new();
    let (mut hub, _) = hub(
        &sc,
        json!({"permissions": {"default": "ask",
                               "allow": ["fx:plain", "fx:fixture://static/2", "fx:fixture://static/1"],
                               "deny": ["fx:fixture://static/1"]},
               "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
    )
    .await;
    let c = &mut hub.client;
    // A prompt no rule covers: default ask, no channel → -32003.
    let r = c
        .request(
            "prompts/get",
            json!({"name": "fx:greet", "arguments": {"name": "x"}}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let m = r["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("fx:greet") && m.contains("openpact permissions allow fx:greet"),
        "{m}"
    );
    // An allowed prompt goes through.
    let r = c.request("prompts/get", json!({"name": "fx:plain"})).await;
    assert!(r["result"]["messages"].is_array(), "{r}");
    // A resource denied by rule (deny beats allow), as server:<uri>.
    let r = c
        .request("resources/read", json!({"uri": "fixture://static/1"}))
        .await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let m = r["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("fx:fixture://static/1") && m.contains("openpact.permissions.deny"),
        "{m}"
    );
    let r = c
        .request("resources/read", json!({"uri": "fixture://static/2"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["text"], "content of fixture://static/2",
        "{r}"
    );
    // No rule, default ask, no channel.
    let r = c
        .request("resources/read", json!({"uri": "fixture://static/3"}))
        .await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
}

// ---------------------------------------------------------------------------------------
// 2. Elicitation through the harness client

async fn eliciting_hub(sc: &Scratch, servers: Value, openpact: Value) -> (Hub, PathBuf) {
    let config = sc.servers(servers, Some(openpact));
    let mut hub = serve(&config, &[]).await;
    init(
        &mut hub.client,
        json!({"elicitation": {}}),
        "policy-eliciting",
    )
    .await;
    (hub, config)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_once_always_decline_cancel_and_deny() {
    let sc = Scratch::new();
    let (mut hub, config) = eliciting_hub(
        &sc,
        json!({"fx": fixture(&[])}),
        json!({"permissions": {"default": "ask", "allow": ["fx:add"]},
               "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
    )
    .await;
    let state = state_of(&config);
    let c = &mut hub.client;

    // once: the form, then the call goes through.
    let id = start_call(c, "fx:echo", json!({"message": "first call"})).await;
    let req = prompt(c).await;
    let p = &req["params"];
    let schema = &p["requestedSchema"];
    assert_eq!(schema["type"], "object", "{p}");
    assert_eq!(
        schema["properties"]["decision"]["enum"],
        json!(["always", "once", "deny"]),
        "{p}"
    );
    assert_eq!(schema["properties"]["decision"]["type"], "string", "{p}");
    assert_eq!(schema["required"], json!(["decision"]), "{p}");
    assert_eq!(
        schema["properties"].as_object().unwrap().len(),
        1,
        "exactly one property: {p}"
    );
    let msg = p["message"].as_str().unwrap();
    assert!(msg.contains("fx:echo"), "{msg}");
    assert!(msg.contains("\"message\":\"first call\""), "{msg}");
    assert!(msg.contains("Echo the message back"), "{msg}");
    answer(c, &req, accept("once")).await;
    let r = c.response(&id).await;
    assert!(!is_error(&r), "{r}");
    assert_eq!(text(&r), "first call");
    assert!(
        decisions(&state).get("fx:echo").is_none(),
        "once is not remembered"
    );

    // once is once: asked again; this time always.
    let id = start_call(c, "fx:echo", json!({"message": "second"})).await;
    let req = prompt(c).await;
    answer(c, &req, accept("always")).await;
    let r = c.response(&id).await;
    assert_eq!(text(&r), "second", "{r}");
    let d = decisions(&state);
    assert_eq!(d["fx:echo"]["decision"], "allow", "{d}");
    let def = d["fx:echo"]["definition"].as_str().unwrap();
    assert!(
        def.starts_with("sha256:") && def.len() == 71,
        "definition hash: {def}"
    );
    // Remembered: not asked again.
    let r = call_unasked(c, "fx:echo", json!({"message": "third"})).await;
    assert_eq!(text(&r), "third", "{r}");

    // decline, cancel and accept+deny all deny, and nothing is remembered.
    for (result, tool) in [
        (json!({"action": "decline"}), "fx:env"),
        (json!({"action": "cancel"}), "fx:env"),
        (accept("deny"), "fx:env"),
        (
            json!({"action": "accept", "content": {"decision": "maybe"}}),
            "fx:env",
        ),
    ] {
        let id = start_call(c, tool, json!({"name": "HOME"})).await;
        let req = prompt(c).await;
        answer(c, &req, result.clone()).await;
        let r = c.response(&id).await;
        assert!(is_error(&r), "{result}: {r}");
        let t = text(&r);
        assert!(
            t.contains("fx:env") && t.contains("denied at the prompt"),
            "{result}: {t}"
        );
    }
    assert!(decisions(&state).get("fx:env").is_none());
    // An error answer to the elicitation is a denial too.
    let id = start_call(c, "fx:env", json!({"name": "HOME"})).await;
    let req = prompt(c).await;
    c.send(&json!({"jsonrpc": "2.0", "id": req["id"],
                   "error": {"code": -32601, "message": "no forms here"}}))
        .await;
    let r = c.response(&id).await;
    assert!(is_error(&r), "{r}");

    // A pending prompt never blocks calls that need none.
    let pending = start_call(c, "fx:env", json!({"name": "HOME"})).await;
    let req = prompt(c).await;
    let r = c.call("fx:add", json!({"a": 2, "b": 3})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 5}), "{r}");
    let r = call_unasked(c, "fx:echo", json!({"message": "remembered, no prompt"})).await;
    assert_eq!(text(&r), "remembered, no prompt");
    answer(c, &req, json!({"action": "decline"})).await;
    assert!(is_error(&c.response(&pending).await));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_prompts_are_serialised_and_always_answers_the_waiting_ones() {
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(
        &sc,
        json!({"fx": fixture(&[])}),
        json!({"permissions": {"default": "ask"},
               "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
    )
    .await;
    let c = &mut hub.client;
    let a = start_call(c, "fx:echo", json!({"message": "a"})).await;
    let b = start_call(c, "fx:echo", json!({"message": "b"})).await;
    let req = prompt(c).await;
    // One prompt at a time: the second waits its turn.
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Some(m) = c.recv(Duration::from_millis(50)).await {
        c.inbox.push_back(m);
    }
    assert!(
        !c.inbox.iter().any(|m| m["method"] == "elicitation/create"),
        "a second prompt while the first is open: {:?}",
        c.inbox
    );
    answer(c, &req, accept("always")).await;
    let (ra, rb) = (c.response(&a).await, c.response(&b).await);
    assert_eq!(text(&ra), "a");
    assert_eq!(text(&rb), "b", "the waiting call sees the \"always\": {rb}");
    assert!(
        !c.inbox.iter().any(|m| m["method"] == "elicitation/create"),
        "asked twice: {:?}",
        c.inbox
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_ask_rule_asks_every_time_even_after_always() {
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(
        &sc,
        json!({"fx": fixture(&[])}),
        json!({"permissions": {"default": "allow", "ask": ["fx:echo"]},
               "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
    )
    .await;
    let c = &mut hub.client;
    let id = start_call(c, "fx:echo", json!({"message": "one"})).await;
    let req = prompt(c).await;
    answer(c, &req, accept("always")).await;
    assert_eq!(text(&c.response(&id).await), "one");
    // Remembered, but the ask rule asks anyway.
    let id = start_call(c, "fx:echo", json!({"message": "two"})).await;
    let first = c.recv(WAIT).await.expect("a prompt or an answer");
    assert_eq!(
        first["method"], "elicitation/create",
        "an ask rule must ask every time, but the call was answered without a prompt: {first}"
    );
    answer(c, &first, accept("once")).await;
    assert_eq!(text(&c.response(&id).await), "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_without_an_answer_times_out_as_a_denial() {
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(
        &sc,
        json!({"fx": fixture(&[])}),
        json!({"permissions": {"default": "ask", "promptTimeout": "300ms"},
               "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
    )
    .await;
    let c = &mut hub.client;
    let t0 = Instant::now();
    let id = start_call(c, "fx:echo", json!({"message": "m"})).await;
    let req = prompt(c).await;
    let r = c.response(&id).await;
    let took = t0.elapsed();
    assert!(is_error(&r), "{r}");
    let t = text(&r);
    assert!(t.contains("no answer"), "{t}");
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(10),
        "{took:?}"
    );
    // The client is told the prompt is void.
    let cancel = c
        .wait_for("notifications/cancelled", WAIT)
        .await
        .expect("notifications/cancelled for the unanswered prompt");
    assert_eq!(cancel["params"]["requestId"], req["id"], "{cancel}");
    // A late answer is harmless, and the next call asks again.
    answer(c, &req, accept("always")).await;
    let id = start_call(c, "fx:echo", json!({"message": "again"})).await;
    let req = prompt(c).await;
    answer(c, &req, accept("once")).await;
    assert_eq!(text(&c.response(&id).await), "again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_for_prompts_and_resources() {
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(
        &sc,
        json!({"fx": fixture(&[])}),
        json!({"permissions": {"default": "ask"},
               "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
    )
    .await;
    let c = &mut hub.client;
    let id = c.next_id();
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "prompts/get",
                   "params": {"name": "fx:greet", "arguments": {"name": "Ann"}}}))
        .await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(
        msg.contains("prompt fx:greet") && msg.contains("Ann"),
        "{msg}"
    );
    answer(c, &req, json!({"action": "decline"})).await;
    let r = c.response(&json!(id)).await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let id = c.next_id();
    c.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "resources/read",
                   "params": {"uri": "fixture://static/2"}}),
    )
    .await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(msg.contains("resource fx:fixture://static/2"), "{msg}");
    answer(c, &req, accept("once")).await;
    let r = c.response(&json!(id)).await;
    assert_eq!(
        r["result"]["contents"][0]["text"], "content of fixture://static/2",
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_withdraws_its_prompt() {
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(
        &sc,
        json!({"fx": fixture(&[])}),
        json!({"permissions": {"default": "ask"},
               "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
    )
    .await;
    let c = &mut hub.client;
    let id = start_call(c, "fx:echo", json!({"message": "m"})).await;
    let req = prompt(c).await;
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "user gave up"}}),
    )
    .await;
    // The next call is not stuck behind the abandoned prompt.
    let next = start_call(c, "fx:echo", json!({"message": "next"})).await;
    let req2 = prompt(c).await;
    assert_ne!(req2["id"], req["id"]);
    answer(c, &req2, accept("once")).await;
    assert_eq!(text(&c.response(&next).await), "next");
    // And the client was told the first prompt is void.
    let cancel = c
        .wait_for("notifications/cancelled", Duration::from_secs(3))
        .await;
    assert!(
        cancel
            .as_ref()
            .is_some_and(|m| m["params"]["requestId"] == req["id"]),
        "the prompt of the cancelled call was never withdrawn: {cancel:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_made_in_quick_succession_are_all_remembered() {
    let sc = Scratch::new();
    let (mut hub, config) = eliciting_hub(
        &sc,
        json!({"fx": fixture(&["--tools", "30"])}),
        json!({"permissions": {"default": "ask"},
               "rateLimits": {"default": "off"}}),
    )
    .await;
    let c = &mut hub.client;
    for i in 0..30 {
        let tool = format!("fx:tool_{i:04}");
        let id = start_call(c, &tool, json!({"x": "1"})).await;
        let req = prompt(c).await;
        answer(c, &req, accept("always")).await;
        assert!(!is_error(&c.response(&id).await), "{tool}");
    }
    let d = decisions(&state_of(&config));
    assert_eq!(d.as_object().unwrap().len(), 30, "{d}");
    for i in 0..30 {
        let tool = format!("fx:tool_{i:04}");
        let r = call_unasked(c, &tool, json!({"x": "2"})).await;
        assert_eq!(text(&r), format!("tool_{i:04}:2"), "{r}");
    }
}

// ---------------------------------------------------------------------------------------
// 3. Elicitation with independent clients

/// An rmcp client that declares elicitation and answers each prompt with the next queued
/// answer, recording what it was asked.
#[derive(Clone, Default)]
struct Answering {
    answers: Arc<Mutex<VecDeque<ElicitResult>>>,
    asked: Arc<Mutex<Vec<Value>>>,
}

impl ClientHandler for Answering {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        Ok(self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(ElicitResult::new(ElicitationAction::Cancel)))
    }

    fn get_info(&self) -> ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "policy-rmcp", "version": "0"},
        }))
        .unwrap()
    }
}

fn obj(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

fn first_text(r: &CallToolResult) -> String {
    let content = serde_json::to_value(&r.content).unwrap();
    content[0]["text"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_answers_permission_prompts() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({"permissions": {"default": "ask"},
                    "rateLimits": {"default": {"perSecond": 10, "burst": 20}}})),
    );
    let (transport, stderr) = TokioChildProcess::builder(serve_command(&config, &[]))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn openpact");
    let log = drain_stderr(stderr.unwrap());
    let handler = Answering::default();
    handler.answers.lock().unwrap().extend([
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "once"})),
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "always"})),
        ElicitResult::new(ElicitationAction::Decline),
        ElicitResult::new(ElicitationAction::Cancel),
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "deny"})),
    ]);
    let client = tokio::time::timeout(WAIT, handler.clone().serve(transport))
        .await
        .expect("handshake in time")
        .expect("rmcp initialize");
    let (client, log) = (&client, &log);
    let call = |name: &'static str, args: Value| async move {
        tokio::time::timeout(
            WAIT,
            client.call_tool(CallToolRequestParams::new(name).with_arguments(obj(args))),
        )
        .await
        .expect("answer in time")
        .unwrap_or_else(|e| panic!("{name}: {e}\n{}", log.lock().unwrap()))
    };
    let asked = || handler.asked.lock().unwrap().len();

    let r = call("fx:echo", json!({"message": "once"})).await;
    assert_eq!(first_text(&r), "once");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(asked(), 1);
    let r = call("fx:echo", json!({"message": "always"})).await;
    assert_eq!(first_text(&r), "always");
    assert_eq!(asked(), 2, "once is once");
    let r = call("fx:echo", json!({"message": "remembered"})).await;
    assert_eq!(first_text(&r), "remembered");
    assert_eq!(asked(), 2, "always is remembered");
    for (i, what) in ["decline", "cancel", "deny"].iter().enumerate() {
        let r = call("fx:add", json!({"a": 1, "b": 2})).await;
        assert_eq!(r.is_error, Some(true), "{what}: {r:?}");
        assert!(first_text(&r).contains("denied at the prompt"), "{what}");
        assert_eq!(asked(), 3 + i, "{what}");
    }
    let asked = handler.asked.lock().unwrap().clone();
    for a in &asked {
        assert_eq!(
            a["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["always", "once", "deny"]),
            "{a}"
        );
        assert_eq!(a["requestedSchema"]["required"], json!(["decision"]), "{a}");
    }
    assert!(asked[0]["message"].as_str().unwrap().contains("fx:echo"));
    assert!(asked[2]["message"].as_str().unwrap().contains("fx:add"));
    let d = decisions(&state_of(&config));
    assert_eq!(d["fx:echo"]["decision"], "allow", "{d}");
    assert!(d.get("fx:add").is_none(), "{d}");
}

/// A Python SDK client whose elicitation callback answers from a queue; prints what it
/// saw as one JSON object.
const PY_ELICITING: &str = r#"
import asyncio, json, sys
from mcp import Client, StdioServerParameters
import mcp.types as types

async def main():
    command, args = sys.argv[1], json.loads(sys.argv[2])
    answers = [
        {"action": "accept", "content": {"decision": "once"}},
        {"action": "accept", "content": {"decision": "always"}},
        {"action": "decline"},
        {"action": "cancel"},
    ]
    asked = []
    async def on_elicit(context, params):
        asked.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(**answers.pop(0))
    dump = lambda r: r.model_dump(mode="json", by_alias=True, exclude_none=True)
    out = {}
    async with Client(StdioServerParameters(command=command, args=args), mode="legacy",
                      read_timeout_seconds=60, elicitation_callback=on_elicit) as client:
        out["once"] = dump(await client.call_tool("fx:echo", {"message": "py once"}))
        out["always"] = dump(await client.call_tool("fx:echo", {"message": "py always"}))
        out["remembered"] = dump(await client.call_tool("fx:echo", {"message": "py again"}))
        out["asked_before_add"] = len(asked)
        out["declined"] = dump(await client.call_tool("fx:add", {"a": 1, "b": 2}))
        out["cancelled"] = dump(await client.call_tool("fx:add", {"a": 1, "b": 2}))
    out["asked"] = asked
    print(json.dumps(out))

asyncio.run(main())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_answers_permission_prompts() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({"permissions": {"default": "ask"},
                    "rateLimits": {"default": {"perSecond": 10, "burst": 20}}})),
    );
    let script = sc.path().join("eliciting.py");
    std::fs::write(&script, PY_ELICITING).unwrap();
    let state = state_of(&config);
    let hub_args = json!([
        OPENPACT,
        "--config",
        s(&config),
        "--state-dir",
        s(&state),
        "serve"
    ]);
    let python = peers.command("PEER_PYTHON");
    let out = Command::new(&python[0])
        .args(&python[1..])
        .arg(&script)
        .arg("setsid")
        .arg(hub_args.to_string())
        .current_dir(sc.path())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(90), out)
        .await
        .expect("the Python client finishes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let v: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let t = |k: &str| {
        v[k]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(t("once"), "py once", "{v:#}");
    assert_eq!(t("always"), "py always", "{v:#}");
    assert_eq!(t("remembered"), "py again", "{v:#}");
    assert_eq!(v["asked_before_add"], 2, "always is remembered: {v:#}");
    for k in ["declined", "cancelled"] {
        assert_eq!(v[k]["isError"], true, "{k}: {v:#}");
        assert!(t(k).contains("denied at the prompt"), "{k}: {v:#}");
    }
    let asked = v["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 4, "{v:#}");
    for a in asked {
        assert_eq!(
            a["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["always", "once", "deny"]),
            "{a}"
        );
    }
    assert_eq!(decisions(&state)["fx:echo"]["decision"], "allow");
}

// ---------------------------------------------------------------------------------------
// 4. A changed definition asks again

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_definition_is_asked_about_again() {
    let sc = Scratch::new();
    let settings = json!({"permissions": {"default": "ask"},
                          "rateLimits": {"default": {"perSecond": 10, "burst": 20}}});
    let servers = |desc: &str| json!({"fx": fixture(&["--echo-description", desc])});

    // A: always.
    let (mut hub, config) = eliciting_hub(&sc, servers("Version A"), settings.clone()).await;
    let id = start_call(&mut hub.client, "fx:echo", json!({"message": "a"})).await;
    let req = prompt(&mut hub.client).await;
    assert!(
        req["params"]["message"]
            .as_str()
            .unwrap()
            .contains("Version A"),
        "{req}"
    );
    answer(&mut hub.client, &req, accept("always")).await;
    assert_eq!(text(&hub.client.response(&id).await), "a");
    hub.close().await;
    let def_a = decisions(&state_of(&config))["fx:echo"]["definition"].clone();

    // Same definition, new hub: not asked.
    let (mut hub, _) = eliciting_hub(&sc, servers("Version A"), settings.clone()).await;
    let r = call_unasked(&mut hub.client, "fx:echo", json!({"message": "a2"})).await;
    assert_eq!(text(&r), "a2");
    hub.close().await;

    // B: the description changed, so openpact asks again and says why.
    let (mut hub, config) = eliciting_hub(&sc, servers("Version B"), settings.clone()).await;
    let id = start_call(&mut hub.client, "fx:echo", json!({"message": "b"})).await;
    let req = prompt(&mut hub.client).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(msg.contains("changed"), "{msg}");
    assert!(msg.contains("definition"), "{msg}");
    assert!(msg.contains("\"always\""), "{msg}");
    assert!(msg.contains("Version B"), "{msg}");
    answer(&mut hub.client, &req, accept("always")).await;
    assert_eq!(text(&hub.client.response(&id).await), "b");
    let def_b = decisions(&state_of(&config))["fx:echo"]["definition"].clone();
    assert_ne!(def_a, def_b);
    // And remembered for B.
    let r = call_unasked(&mut hub.client, "fx:echo", json!({"message": "b2"})).await;
    assert_eq!(text(&r), "b2");
    hub.close().await;

    // A remembered denial is re-asked on a change too (the other way round: back to A).
    let (mut hub, _) = eliciting_hub(&sc, servers("Version A"), settings).await;
    let id = start_call(&mut hub.client, "fx:echo", json!({"message": "a3"})).await;
    let req = prompt(&mut hub.client).await;
    assert!(
        req["params"]["message"]
            .as_str()
            .unwrap()
            .contains("changed"),
        "{req}"
    );
    answer(&mut hub.client, &req, accept("once")).await;
    assert_eq!(text(&hub.client.response(&id).await), "a3");
}

// ---------------------------------------------------------------------------------------
// 5. The terminal prompt, through a real pseudo-terminal

/// A command running under `script` on a fresh pty: what it prints, and keys to type.
struct Pty {
    child: Child,
    stdin: ChildStdin,
    out: Arc<Mutex<Vec<u8>>>,
    seen: usize,
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn quote_words(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| sh_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Pty {
    fn spawn(words: &[&str]) -> Pty {
        Pty::shell(&format!("exec {}", quote_words(words)))
    }

    /// A shell command line on the pty.
    fn shell(line: &str) -> Pty {
        let mut child = Command::new("script")
            .args(["-qfec", line, "/dev/null"])
            .env("SHELL", "/bin/sh")
            .env("TERM", "xterm")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn script (util-linux)");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        let mut err = child.stderr.take().unwrap();
        let sink = out.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            child,
            stdin,
            out,
            seen: 0,
        }
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// Waits until `needle` appears after what was already waited for.
    async fn expect(&mut self, needle: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let out = self.output();
            if let Some(pos) = out.get(self.seen..).and_then(|rest| rest.find(needle)) {
                self.seen += pos + needle.len();
                // Let the prompt switch the terminal to raw mode before typing.
                tokio::time::sleep(Duration::from_millis(300)).await;
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} never appeared on the terminal:\n{out}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn keys(&mut self, keys: &[&str]) {
        for k in keys {
            self.stdin.write_all(k.as_bytes()).await.unwrap();
            self.stdin.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// Waits for the command to end; its exit code and everything it showed.
    async fn finish(mut self) -> (Option<i32>, String) {
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("still running; the terminal shows:\n{}", self.output()))
            .unwrap();
        // The readers may still be copying the last bytes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        (status.code(), self.output())
    }
}

const UP: &str = "\x1b[A";
const ENTER: &str = "\r";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_prompt_through_a_real_pty() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({"permissions": {"default": "ask"},
                    "rateLimits": {"default": {"perSecond": 10, "burst": 20}}})),
    );
    let state = state_of(&config);
    let call = |tool: &str, message: &str| {
        let args = json!({"message": message}).to_string();
        Pty::spawn(&[
            OPENPACT,
            "--config",
            s(&config),
            "--state-dir",
            s(&state),
            "call",
            tool,
            &args,
        ])
    };

    // Enter on the default (deny), then "n": denied, not remembered.
    let mut t = call("fx:echo", "hi");
    t.expect("openpact: allow tool fx:echo?").await;
    t.expect("Allow?").await;
    t.keys(&[ENTER]).await;
    t.expect("Remember this denial?").await;
    t.keys(&["n"]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("denied at the prompt"), "{out}");
    assert!(decisions(&state).get("fx:echo").is_none());

    // Deny, then Enter on the Confirm (default no): not remembered either.
    let mut t = call("fx:echo", "hi");
    t.expect("Allow?").await;
    t.keys(&[ENTER]).await;
    t.expect("Remember this denial?").await;
    t.keys(&[ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(decisions(&state).get("fx:echo").is_none());

    // Up, Enter: once.
    let mut t = call("fx:echo", "hi once");
    t.expect("Allow?").await;
    t.keys(&[UP, ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("hi once"), "{out}");
    assert!(decisions(&state).get("fx:echo").is_none());

    // Up, Up, Enter: always — remembered, and the next call asks nothing.
    let mut t = call("fx:echo", "hi always");
    t.expect("Allow?").await;
    t.keys(&[UP, UP, ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("hi always"), "{out}");
    assert_eq!(decisions(&state)["fx:echo"]["decision"], "allow");
    let (code, out) = call("fx:echo", "no prompt").finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("no prompt") && !out.contains("Allow?"),
        "{out}"
    );

    // Deny + "y": a remembered denial; the next call is denied without a prompt.
    let mut t = call("fx:add", "x");
    t.expect("Allow?").await;
    t.keys(&[ENTER]).await;
    t.expect("Remember this denial?").await;
    t.keys(&["y"]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(decisions(&state)["fx:add"]["decision"], "deny");
    let (code, out) = call("fx:add", "x").finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(!out.contains("Allow?"), "{out}");
    assert!(out.contains("openpact permissions forget fx:add"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_prompt_times_out_and_the_cli_still_exits() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(
            json!({"permissions": {"default": "ask", "promptTimeout": "1s"},
                    "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
        ),
    );
    let state = state_of(&config);
    let t0 = Instant::now();
    let mut t = Pty::spawn(&[
        OPENPACT,
        "--config",
        s(&config),
        "--state-dir",
        s(&state),
        "call",
        "fx:echo",
        r#"{"message":"m"}"#,
    ]);
    t.expect("Allow?").await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("no answer"), "{out}");
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_is_restored_after_a_prompt_times_out() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(
            json!({"permissions": {"default": "ask", "promptTimeout": "1s"},
                    "rateLimits": {"default": {"perSecond": 10, "burst": 20}}}),
        ),
    );
    let state = state_of(&config);
    let call = quote_words(&[
        OPENPACT,
        "--config",
        s(&config),
        "--state-dir",
        s(&state),
        "call",
        "fx:echo",
        r#"{"message":"m"}"#,
    ]);
    // Modes before and after, on the same terminal.
    let mut t = Pty::shell(&format!(
        "echo BEFORE; stty -a; {call}; echo AFTER; stty -a; echo END"
    ));
    t.expect("Allow?").await;
    t.expect("END").await;
    let (_, out) = t.finish().await;
    let modes = |from: &str| -> (bool, bool) {
        let part = &out[out.find(from).unwrap()..];
        let words: Vec<&str> = part.split_whitespace().collect();
        (words.contains(&"icanon"), words.contains(&"echo"))
    };
    assert_eq!(modes("BEFORE"), (true, true), "{out}");
    assert_eq!(
        modes("AFTER"),
        (true, true),
        "the terminal is left in raw mode:\n{out}"
    );
}

// ---------------------------------------------------------------------------------------
// 6. Cache

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_hits_misses_expiry_and_what_is_never_stored() {
    let sc = Scratch::new();
    let (mut hub, config) = hub(
        &sc,
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": "off"},
               // First match wins: `calls` (the probe) and `add` are never cached.
               "cache": {"rules": {"fx:calls": "off", "fx:add": "off", "fx:echo": "2s",
                                   "fx:*": "1m"}}}),
    )
    .await;
    let c = &mut hub.client;
    let t0 = Instant::now();

    // Two identical calls: one reaches the server.
    let (n, (a, b)) = upstream_calls!(
        c,
        (
            c.call("fx:echo", json!({"message": "m"})).await,
            c.call("fx:echo", json!({"message": "m"})).await
        )
    );
    assert_eq!(
        n, 1,
        "identical calls within the TTL share one upstream call"
    );
    assert_eq!((text(&a), text(&b)), ("m".into(), "m".into()));
    assert_eq!(a["result"], b["result"]);
    // Other arguments: another entry.
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "other"})).await);
    assert_eq!((n, text(&r)), (1, "other".into()));

    // Key order and 1 vs 1.0 do not matter.
    let (n, (x, y)) = upstream_calls!(
        c,
        (
            c.call(
                "fx:echo_structured",
                json!({"value": {"a": 1, "b": [2.0, {"d": 1, "c": "s"}]}})
            )
            .await,
            c.call(
                "fx:echo_structured",
                json!({"value": {"b": [2, {"c": "s", "d": 1.0}], "a": 1.0}})
            )
            .await
        )
    );
    assert_eq!(n, 1, "canonical arguments share an entry: {x}\n{y}");
    assert_eq!(x["result"], y["result"]);
    // A string "1" is not the number 1.
    let (n, _) = upstream_calls!(
        c,
        c.call("fx:echo_structured", json!({"value": {"a": "1"}}))
            .await
    );
    let (n2, _) = upstream_calls!(
        c,
        c.call("fx:echo_structured", json!({"value": {"a": 1}}))
            .await
    );
    assert_eq!((n, n2), (1, 1));

    // isError results and JSON-RPC errors are never stored.
    let (n, rs) = upstream_calls!(c, {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(c.call("fx:fail", json!({})).await);
        }
        v
    });
    assert_eq!(n, 3, "isError results are not cached");
    assert!(rs.iter().all(is_error), "{rs:?}");
    let (n, rs) = upstream_calls!(c, {
        let mut v = Vec::new();
        for _ in 0..2 {
            v.push(c.call("fx:error_with", json!({"message": "nope"})).await);
        }
        v
    });
    assert_eq!(n, 2, "errors are not cached");
    assert!(rs.iter().all(|r| r["error"]["message"] == "nope"), "{rs:?}");
    // "off" beats the default.
    let (n, _) = upstream_calls!(c, {
        c.call("fx:add", json!({"a": 1, "b": 1})).await;
        c.call("fx:add", json!({"a": 1, "b": 1})).await
    });
    assert_eq!(n, 2, "a rule of \"off\" is never cached");

    // 20 concurrent identical calls: one upstream call, every caller its own answer.
    let (n, rs) = upstream_calls!(c, {
        let mut ids = Vec::new();
        for _ in 0..20 {
            ids.push(start_call(c, "fx:slow", json!({"ms": 300})).await);
        }
        let mut rs = Vec::new();
        for id in &ids {
            rs.push(c.response(id).await);
        }
        rs
    });
    assert_eq!(n, 1, "concurrent identical calls share one upstream call");
    assert!(rs.iter().all(|r| text(r) == "slept 300 ms"), "{rs:?}");

    // Expiry: the echo entry lived 2 s.
    let since = t0.elapsed();
    if since < Duration::from_millis(2600) {
        tokio::time::sleep(Duration::from_millis(2600) - since).await;
    }
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!((n, text(&r)), (1, "m".into()), "an expired entry is a miss");

    // The audit log says hit or miss.
    let echo: Vec<Value> = wait_audit_where(&state_of(&config), 4, |r| r["target"] == "fx:echo")
        .await
        .iter()
        .map(|r| r["cache"].clone())
        .collect();
    assert_eq!(
        echo,
        ["miss", "hit", "miss", "miss"],
        "fx:echo cache column"
    );
    let fail = wait_audit_where(&state_of(&config), 3, |r| r["target"] == "fx:fail").await;
    assert!(
        fail.iter()
            .all(|r| r["cache"] == "miss" && r["outcome"] == "isError"),
        "{fail:?}"
    );
    let add = wait_audit_where(&state_of(&config), 2, |r| r["target"] == "fx:add").await;
    assert!(add.iter().all(|r| r["cache"] == "off"), "{add:?}");
}

/// Waits until `fx:late_tool` is listed (the hub re-listed the server after its
/// `list_changed`).
async fn wait_for_late_tool(c: &mut Client) {
    let deadline = Instant::now() + WAIT;
    loop {
        if c.list_tools()
            .await
            .iter()
            .any(|t| t["name"] == "fx:late_tool")
        {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            c.wait_for("notifications/tools/list_changed", left)
                .await
                .is_some(),
            "fx:late_tool never appeared"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_is_dropped_when_tools_change_or_the_server_restarts() {
    let sc = Scratch::new();
    let (mut hub, _) = hub(
        &sc,
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": "off"},
               "cache": {"rules": {"fx:echo": "1m"}},
               "restart": {"initialBackoff": "100ms"}}),
    )
    .await;
    let c = &mut hub.client;
    let (n, _) = upstream_calls!(c, {
        c.call("fx:echo", json!({"message": "m"})).await;
        c.call("fx:echo", json!({"message": "m"})).await
    });
    assert_eq!(n, 1);

    // list_changed: the server's entries go.
    assert_eq!(text(&c.call("fx:change_tools", json!({})).await), "changed");
    wait_for_late_tool(c).await;
    let (n, _) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(
        n, 1,
        "a changed tool list invalidates the server's cached results"
    );
    let (n, _) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(n, 0, "and the next result is cached again");

    // A crash and restart: the entries go too (the new process has counted nothing).
    let r = c.call("fx:crash", json!({})).await;
    assert!(r.get("error").is_some(), "{r}");
    let deadline = Instant::now() + WAIT;
    loop {
        let r = c.call("fx:calls", json!({})).await;
        if r["result"]["content"][0]["text"].is_string() {
            break;
        }
        assert!(Instant::now() < deadline, "the server never came back: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(
        (n, text(&r)),
        (1, "m".into()),
        "a restart invalidates the server's cached results"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool_is_never_served_from_the_cache() {
    let sc = Scratch::new();
    let (mut hub, config) = hub(
        &sc,
        json!({"permissions": {"default": "ask", "allow": ["fx:calls"], "deny": ["fx:add"]},
               "rateLimits": {"default": {"perSecond": 10, "burst": 20}},
               "cache": {"rules": {"fx:echo": "1m", "fx:add": "1m"}}}),
    )
    .await;
    let state = state_of(&config);
    let cli = |verb: &'static str, name: &'static str| {
        let (config, state) = (config.clone(), state.clone());
        async move {
            openpact(&[
                "--config",
                s(&config),
                "--state-dir",
                s(&state),
                "permissions",
                verb,
                name,
            ])
            .await
        }
    };
    let ran = cli("allow", "fx:echo").await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stdout.contains("fx:echo is now always allowed"),
        "{ran}"
    );
    let c = &mut hub.client;
    // The running hub sees the decision the CLI wrote.
    let (n, (a, b)) = upstream_calls!(
        c,
        (
            c.call("fx:echo", json!({"message": "m"})).await,
            c.call("fx:echo", json!({"message": "m"})).await
        )
    );
    assert_eq!((n, text(&a), text(&b)), (1, "m".into(), "m".into()));
    // Now denied: the cached result must not come back.
    let ran = cli("deny", "fx:echo").await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(n, 0);
    assert!(
        is_error(&r),
        "served from the cache despite the denial: {r}"
    );
    assert!(text(&r).contains("you chose to deny it"), "{r}");
    // A deny rule with a cache rule: denied every time, never called.
    let (n, r) = upstream_calls!(c, c.call("fx:add", json!({"a": 1, "b": 1})).await);
    assert_eq!(n, 0);
    assert!(is_error(&r), "{r}");
    let rec = wait_audit_where(&state, 1, |r| {
        r["target"] == "fx:echo" && r["outcome"] == "denied"
    })
    .await;
    assert_eq!(rec[0]["source"], "remembered", "{rec:?}");
    assert_ne!(rec[0]["cache"], "hit", "{rec:?}");
}

// ---------------------------------------------------------------------------------------
// 7. Rate limits

/// Sends `n` calls at once and returns the responses in order.
async fn burst(c: &mut Client, n: usize, name: &str, arguments: Value) -> Vec<Value> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(start_call(c, name, arguments.clone()).await);
    }
    let mut out = Vec::new();
    for id in &ids {
        out.push(c.response(id).await);
    }
    out
}

fn rate_limited(r: &Value) -> bool {
    r["error"]["code"] == -32000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_per_server_refuses_the_call_over_the_burst() {
    let sc = Scratch::new();
    let (mut hub, config) = hub_with(
        &sc,
        json!({"fx": fixture(&[]), "other": fixture(&[])}),
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": {"perSecond": 1, "burst": 20}}}),
    )
    .await;
    let c = &mut hub.client;
    let rs = burst(c, 21, "fx:echo", json!({"message": "m"})).await;
    let refused: Vec<&Value> = rs.iter().filter(|r| rate_limited(r)).collect();
    assert_eq!(
        (rs.len() - refused.len(), refused.len()),
        (20, 1),
        "{rs:#?}"
    );
    let e = &refused[0]["error"];
    assert_eq!(e["message"], "Rate limit exceeded. Please try again later.");
    assert_eq!(e["data"]["limit"], "server fx", "{e}");
    assert_eq!(e["data"]["perSecond"].as_f64(), Some(1.0), "{e}");
    assert_eq!(e["data"]["burst"], 20, "{e}");
    let retry = e["data"]["retryAfterMs"].as_u64().unwrap();
    assert!(retry > 0 && retry <= 1000, "{e}");
    // Another server has its own bucket.
    let r = c.call("other:echo", json!({"message": "o"})).await;
    assert_eq!(text(&r), "o", "{r}");
    // After the wait it asks for, fx answers again.
    tokio::time::sleep(Duration::from_millis(retry + 50)).await;
    let r = c.call("fx:echo", json!({"message": "later"})).await;
    assert_eq!(text(&r), "later", "{r}");
    let rec = wait_audit_where(&state_of(&config), 1, |r| r["outcome"] == "rateLimited").await;
    assert_eq!(rec[0]["target"], "fx:echo", "{rec:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_per_tool() {
    let sc = Scratch::new();
    let (mut hub, _) = hub(
        &sc,
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": "off",
                              "tools": {"fx:add": {"perSecond": 0.2, "burst": 1}}}}),
    )
    .await;
    let c = &mut hub.client;
    let r = c.call("fx:add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 3}), "{r}");
    let r = c.call("fx:add", json!({"a": 1, "b": 2})).await;
    assert!(rate_limited(&r), "{r}");
    let d = &r["error"]["data"];
    assert_eq!(d["limit"], "tool fx:add", "{r}");
    assert_eq!(d["perSecond"].as_f64(), Some(0.2), "{r}");
    assert_eq!(d["burst"], 1, "{r}");
    let retry = d["retryAfterMs"].as_u64().unwrap();
    assert!(retry > 0 && retry <= 5000, "{r}");
    // Other tools of the server are not limited.
    for _ in 0..30 {
        assert!(!rate_limited(
            &c.call("fx:echo", json!({"message": "e"})).await
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_shipped_default_is_ten_per_second_burst_twenty() {
    let sc = Scratch::new();
    // Written directly: `Scratch::config` would switch rate limits off.
    let config = sc.path().join("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"fx": fixture(&[])},
               "openpact": {"permissions": {"default": "allow"}}})
        .to_string(),
    )
    .unwrap();
    let mut hub = serve(&config, &[]).await;
    init(&mut hub.client, json!({}), "policy-test").await;
    let rs = burst(&mut hub.client, 30, "fx:echo", json!({"message": "m"})).await;
    let refused: Vec<&Value> = rs.iter().filter(|r| rate_limited(r)).collect();
    let ok = rs.len() - refused.len();
    // 20 at once, plus at most what refills (10/s) while the burst is under way.
    assert!((20..=23).contains(&ok), "{ok} succeeded: {rs:#?}");
    let d = &refused[0]["error"]["data"];
    assert_eq!(
        (&d["limit"], d["perSecond"].as_f64(), &d["burst"]),
        (&json!("server fx"), Some(10.0), &json!(20)),
        "{d}"
    );
}

// ---------------------------------------------------------------------------------------
// 8. Redaction

/// A hub whose stdout is read line by line as raw text, so a test sees exactly the bytes
/// that leave openpact.
struct RawHub {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::UnboundedReceiver<String>,
    lines: Vec<String>,
    stderr: Arc<Mutex<String>>,
    next: i64,
}

impl RawHub {
    fn start(config: &Path, env: &[(&str, &str)]) -> RawHub {
        let mut cmd = serve_command(config, env);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn openpact");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = drain_stderr(child.stderr.take().unwrap());
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        RawHub {
            child,
            stdin,
            rx,
            lines: Vec::new(),
            stderr,
            next: 0,
        }
    }

    async fn send(&mut self, v: &Value) {
        self.stdin
            .write_all(format!("{v}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = json!(self.next);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = tokio::time::timeout(WAIT, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method} within {WAIT:?}"))
                .expect("hub stdout open");
            self.lines.push(line.clone());
            let v: Value = serde_json::from_str(&line).expect("JSON line");
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// Collects whatever else arrives within `d`.
    async fn drain(&mut self, d: Duration) {
        while let Ok(Some(line)) = tokio::time::timeout(d, self.rx.recv()).await {
            self.lines.push(line);
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for RawHub {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- openpact stderr ----\n{}", self.stderr());
        }
        let _ = self.child.start_kill();
    }
}

const SECRET: &str = "s3cr3t-v4lue-123456";
const TOKEN: &str = "tok-abcdefgh-98765";
const SHORT: &str = "abc1234";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_leave_in_responses_logs_or_the_audit() {
    let sc = Scratch::new();
    let mut entry = fixture(&[]);
    entry["env"] = json!({"TOKEN": "${OPENPACT_TEST_TOKEN}"});
    let config = sc.servers(
        json!({"fx": entry}),
        Some(json!({
            "permissions": {"default": "allow"},
            "rateLimits": {"default": "off"},
            "secrets": {"env": ["OPENPACT_TEST_SECRET", "OPENPACT_TEST_SHORT"]},
            "audit": {"arguments": true},
            "cache": {"rules": {"fx:echo": "1m"}},
        })),
    );
    let state = state_of(&config);
    let mut hub = RawHub::start(
        &config,
        &[
            ("OPENPACT_TEST_SECRET", SECRET),
            ("OPENPACT_TEST_TOKEN", TOKEN),
            ("OPENPACT_TEST_SHORT", SHORT),
        ],
    );
    let r = hub
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "redaction", "version": "0"}}),
        )
        .await;
    assert!(r["result"].is_object(), "{r}");
    hub.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    hub.request("tools/list", json!({})).await;
    hub.request("logging/setLevel", json!({"level": "debug"}))
        .await;
    let red = "[REDACTED:OPENPACT_TEST_SECRET]";
    let red_token = "[REDACTED:OPENPACT_TEST_TOKEN]";
    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});

    for _ in 0..2 {
        // (the second time from the cache)
        let r = hub
            .request("tools/call", call("fx:echo", json!({"message": SECRET})))
            .await;
        assert_eq!(r["result"]["content"][0]["text"], red, "{r}");
    }
    let r = hub
        .request(
            "tools/call",
            call(
                "fx:echo",
                json!({"message": format!("before {SECRET} after")}),
            ),
        )
        .await;
    assert_eq!(
        r["result"]["content"][0]["text"],
        format!("before {red} after"),
        "{r}"
    );
    let r = hub
        .request(
            "tools/call",
            call("fx:echo_structured", json!({"value": {"k": SECRET}})),
        )
        .await;
    assert_eq!(r["result"]["structuredContent"]["value"]["k"], red, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(red),
        "{r}"
    );
    let r = hub
        .request(
            "tools/call",
            call("fx:error_with", json!({"message": format!("x {SECRET} y")})),
        )
        .await;
    assert_eq!(r["error"]["message"], format!("x {red} y"), "{r}");
    // A value openpact injected into the child's environment.
    let r = hub
        .request("tools/call", call("fx:env", json!({"name": "TOKEN"})))
        .await;
    assert_eq!(r["result"]["content"][0]["text"], red_token, "{r}");
    let r = hub
        .request(
            "tools/call",
            call("fx:env", json!({"name": "OPENPACT_TEST_SECRET"})),
        )
        .await;
    assert_eq!(r["result"]["content"][0]["text"], red, "{r}");
    // Short values are not secrets worth hiding.
    let r = hub
        .request("tools/call", call("fx:echo", json!({"message": SHORT})))
        .await;
    assert_eq!(r["result"]["content"][0]["text"], SHORT, "{r}");
    // The server's stderr, logged by the hub.
    let r = hub
        .request(
            "tools/call",
            call("fx:stderr", json!({"text": format!("leak {TOKEN}")})),
        )
        .await;
    assert_eq!(r["result"]["content"][0]["text"], "written", "{r}");
    // A log notification.
    hub.request(
        "tools/call",
        call(
            "fx:log",
            json!({"level": "error", "message": format!("log {SECRET}")}),
        ),
    )
    .await;
    // Prompts and resources.
    let r = hub
        .request(
            "prompts/get",
            json!({"name": "fx:greet", "arguments": {"name": SECRET}}),
        )
        .await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"],
        format!("Hello, {red}!"),
        "{r}"
    );
    let r = hub
        .request("resources/read", json!({"uri": "fixture://static/1"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["text"],
        "content of fixture://static/1"
    );
    hub.drain(Duration::from_millis(300)).await;

    // The log line arrives, redacted.
    let deadline = Instant::now() + WAIT;
    while !hub.stderr().contains(&format!("leak {red_token}")) {
        assert!(
            Instant::now() < deadline,
            "the stderr line never arrived:\n{}",
            hub.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        hub.lines
            .iter()
            .any(|l| l.contains("notifications/message") && l.contains(&format!("log {red}"))),
        "{:#?}",
        hub.lines
    );
    for (name, value) in [("secret", SECRET), ("token", TOKEN)] {
        for line in &hub.lines {
            assert!(
                !line.contains(value),
                "the {name} left in a response: {line}"
            );
        }
        assert!(
            !hub.stderr().contains(value),
            "the {name} is in the hub's log:\n{}",
            hub.stderr()
        );
    }
    // Nothing in the state dir holds them: the audit log (with arguments), the status file.
    let records = wait_audit(&state, 12).await;
    assert!(
        records.iter().any(|r| r["arguments"]["message"] == red),
        "arguments are recorded, redacted: {records:#?}"
    );
    for entry in std::fs::read_dir(&state).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap_or_default();
        let content = String::from_utf8_lossy(&bytes);
        for value in [SECRET, TOKEN] {
            assert!(
                !content.contains(value),
                "{} holds a secret:\n{content}",
                path.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_the_arguments_is_hidden_in_the_permission_prompt() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({"permissions": {"default": "ask"},
                    "rateLimits": {"default": {"perSecond": 10, "burst": 20}},
                    "secrets": {"env": ["OPENPACT_TEST_SECRET"]}})),
    );
    let mut hub = serve(&config, &[("OPENPACT_TEST_SECRET", SECRET)]).await;
    init(
        &mut hub.client,
        json!({"elicitation": {}}),
        "policy-eliciting",
    )
    .await;
    let c = &mut hub.client;
    let long = "y".repeat(500);
    let id = start_call(c, "fx:echo", json!({"message": format!("{SECRET} {long}")})).await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(!msg.contains(SECRET), "{msg}");
    assert!(msg.contains("[REDACTED:OPENPACT_TEST_SECRET]"), "{msg}");
    assert!(msg.len() < 1000, "long arguments are shortened: {msg}");
    answer(c, &req, accept("once")).await;
    let r = c.response(&id).await;
    assert!(
        text(&r).starts_with("[REDACTED:OPENPACT_TEST_SECRET] yyy"),
        "{r}"
    );
}

/// A resource URI is the one place a secret can sit in what openpact itself writes about a
/// call: the permission target `server:<uri>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_resource_uri_stays_out_of_the_log_and_the_audit() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({
            "permissions": {"default": "allow", "deny": ["fx:fixture://item/denied-*"]},
            "rateLimits": {"default": "off"},
            "secrets": {"env": ["OPENPACT_TEST_SECRET"]},
        })),
    );
    let state = state_of(&config);
    let mut hub = RawHub::start(&config, &[("OPENPACT_TEST_SECRET", SECRET)]);
    hub.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "redaction", "version": "0"}}),
    )
    .await;
    hub.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    hub.request("resources/list", json!({})).await;
    let red = "[REDACTED:OPENPACT_TEST_SECRET]";
    let r = hub
        .request(
            "resources/read",
            json!({"uri": format!("fixture://item/{SECRET}")}),
        )
        .await;
    assert_eq!(
        r["result"]["contents"][0]["text"],
        format!("content of fixture://item/{red}"),
        "{r}"
    );
    let r = hub
        .request(
            "resources/read",
            json!({"uri": format!("fixture://item/denied-{SECRET}")}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
    assert!(!r.to_string().contains(SECRET), "{r}");
    let records = wait_audit(&state, 2).await;
    // Give the log a moment to show what it will.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut leaks: Vec<String> = hub
        .stderr()
        .lines()
        .filter(|l| l.contains(SECRET))
        .map(|l| format!("hub log: {l}"))
        .collect();
    leaks.extend(
        records
            .iter()
            .filter(|r| r.to_string().contains(SECRET))
            .map(|r| format!("audit: {r}")),
    );
    assert!(leaks.is_empty(), "the secret leaked:\n{}", leaks.join("\n"));
}

// ---------------------------------------------------------------------------------------
// 9. Audit

fn hash_ok(h: &Value) -> bool {
    h.as_str().is_some_and(|h| {
        h.len() == 71 && h.starts_with("sha256:") && h[7..].chars().all(|c| c.is_ascii_hexdigit())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_records_every_call_and_the_cli_shows_them() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({
            "permissions": {"default": "allow", "deny": ["fx:cwd"]},
            "rateLimits": {"default": "off", "tools": {"fx:args": {"perSecond": 0.2, "burst": 1}}},
            "cache": {"rules": {"fx:echo": "1m"}},
        })),
    );
    let state = state_of(&config);
    let mut hub = serve(&config, &[]).await;
    init(&mut hub.client, json!({}), "audit-client").await;
    let c = &mut hub.client;
    c.call("fx:echo", json!({"message": "a"})).await;
    c.call("fx:echo", json!({"message": "a"})).await;
    c.call("fx:fail", json!({})).await;
    c.call("fx:error_with", json!({"message": "boom"})).await;
    c.call("fx:cwd", json!({})).await;
    c.call("fx:args", json!({})).await;
    c.call("fx:args", json!({})).await;
    c.call("fx:add", json!({"a": 1, "b": 2})).await;
    c.call("fx:add", json!({"b": 2.0, "a": 1})).await;
    c.request("prompts/get", json!({"name": "fx:plain"})).await;
    c.request("resources/read", json!({"uri": "fixture://static/1"}))
        .await;
    let records = wait_audit(&state, 11).await;
    assert_eq!(records.len(), 11, "{records:#?}");
    // (target, decision, source, cache, outcome)
    let want = [
        ("fx:echo", "allow", "default", "miss", "ok"),
        ("fx:echo", "allow", "default", "hit", "ok"),
        ("fx:fail", "allow", "default", "off", "isError"),
        ("fx:error_with", "allow", "default", "off", "error"),
        ("fx:cwd", "deny", "rule", "off", "denied"),
        ("fx:args", "allow", "default", "off", "ok"),
        ("fx:args", "allow", "default", "off", "rateLimited"),
        ("fx:add", "allow", "default", "off", "ok"),
        ("fx:add", "allow", "default", "off", "ok"),
        ("fx:plain", "allow", "default", "off", "ok"),
        ("fx:fixture://static/1", "allow", "default", "off", "ok"),
    ];
    for (r, (target, decision, source, cache, outcome)) in records.iter().zip(want) {
        let got = (
            r["target"].as_str().unwrap(),
            r["decision"].as_str().unwrap(),
            r["source"].as_str().unwrap(),
            r["cache"].as_str().unwrap(),
            r["outcome"].as_str().unwrap(),
        );
        assert_eq!(got, (target, decision, source, cache, outcome), "{r}");
        assert_eq!(r["client"], "audit-client", "{r}");
        let time = r["time"].as_str().unwrap();
        assert!(time.starts_with("20") && time.contains('T'), "{r}");
        assert!(r["durationMs"].as_f64().is_some_and(|d| d >= 0.0), "{r}");
        assert!(r["resultBytes"].as_u64().is_some_and(|b| b > 0), "{r}");
        assert!(hash_ok(&r["argumentsHash"]), "{r}");
        assert!(
            r.get("arguments").is_none(),
            "arguments are off by default: {r}"
        );
    }
    let methods: Vec<&str> = records
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods[0], "tools/call");
    assert_eq!(methods[9], "prompts/get");
    assert_eq!(methods[10], "resources/read");
    assert_eq!(records[0]["argumentsHash"], records[1]["argumentsHash"]);
    assert_eq!(
        records[7]["argumentsHash"], records[8]["argumentsHash"],
        "key order and 2 vs 2.0 hash alike"
    );
    assert_ne!(records[0]["argumentsHash"], records[7]["argumentsHash"]);
    assert!(
        records[4]["error"]
            .as_str()
            .is_some_and(|e| e.contains("openpact.permissions.deny")),
        "{}",
        records[4]
    );
    assert!(
        records[3]["error"]
            .as_str()
            .is_some_and(|e| e.contains("boom")),
        "{}",
        records[3]
    );

    // Private to the user.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(state.join("audit.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");

    // The CLI: readable lines, or the JSON records themselves.
    let ran = openpact(&["--state-dir", s(&state), "audit", "tail"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let lines: Vec<&str> = ran.stdout.lines().filter(|l| l.starts_with("20")).collect();
    assert_eq!(lines.len(), 11, "{ran}");
    assert!(
        lines[0].contains("audit-client")
            && lines[0].contains("tools/call")
            && lines[0].contains("fx:echo")
            && lines[0].contains("allow (default)")
            && lines[0].contains("cache miss"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("cache hit"), "{}", lines[1]);
    assert!(
        lines[4].contains("deny (rule)") && lines[4].contains("denied"),
        "{}",
        lines[4]
    );
    assert!(lines[6].contains("rateLimited"), "{}", lines[6]);
    assert!(ran.stdout.contains("openpact.permissions.deny"), "{ran}");
    let ran = openpact(&["--state-dir", s(&state), "audit", "tail", "--json"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let json: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json, records);
    let ran = openpact(&[
        "--state-dir",
        s(&state),
        "audit",
        "tail",
        "-n",
        "2",
        "--json",
    ])
    .await;
    let json: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json, records[9..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_with_arguments_prompt_sources_and_rotation() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({
            "permissions": {"default": "ask", "allow": ["fx:add"], "deny": ["fx:fail"]},
            "rateLimits": {"default": "off"},
            "audit": {"arguments": true, "maxBytes": "1KiB"},
        })),
    );
    let state = state_of(&config);
    let mut hub = serve(&config, &[]).await;
    init(&mut hub.client, json!({"elicitation": {}}), "rotating").await;
    let c = &mut hub.client;
    // Prompted: allow (prompt), then remembered.
    let id = start_call(c, "fx:echo", json!({"message": "m"})).await;
    let req = prompt(c).await;
    answer(c, &req, accept("always")).await;
    c.response(&id).await;
    c.call("fx:echo", json!({"message": "m"})).await;
    let id = start_call(c, "fx:env", json!({"name": "HOME"})).await;
    let req = prompt(c).await;
    answer(c, &req, json!({"action": "decline"})).await;
    c.response(&id).await;
    let first = wait_audit(&state, 3).await;
    let got: Vec<(&str, &str, &str)> = first
        .iter()
        .map(|r| {
            (
                r["decision"].as_str().unwrap(),
                r["source"].as_str().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("allow", "prompt", "ok"),
            ("allow", "remembered", "ok"),
            ("deny", "prompt", "denied")
        ]
    );
    assert_eq!(first[0]["arguments"], json!({"message": "m"}));
    assert_eq!(first[2]["arguments"], json!({"name": "HOME"}));
    assert_eq!(first[0]["client"], "rotating");

    // Past 1 KiB the log rotates; `audit tail` reads both generations.
    for i in 0..40 {
        c.call("fx:add", json!({"a": i, "b": 1})).await;
        if i % 4 == 0 {
            // Let the writer take separate batches, so rotation happens between them.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let current = audit_records(&state);
        if current.last().is_some_and(|r| r["arguments"]["a"] == 39) {
            break;
        }
        assert!(Instant::now() < deadline, "{current:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let old =
        std::fs::read_to_string(state.join("audit.jsonl.1")).expect("audit.jsonl.1 after rotation");
    let current = std::fs::read_to_string(state.join("audit.jsonl")).unwrap();
    assert!(
        current.len() < 4096,
        "the current file stays small: {}",
        current.len()
    );
    let (n_old, n_cur) = (old.lines().count(), current.lines().count());
    assert!(n_old > 0 && n_cur > 0);
    let ran = openpact(&[
        "--state-dir",
        s(&state),
        "audit",
        "tail",
        "-n",
        "1000",
        "--json",
    ])
    .await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let tail: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(tail.len(), n_old + n_cur, "{ran}");
    assert_eq!(tail.last().unwrap()["arguments"]["a"], 39);
    // In order across the two files.
    let a: Vec<i64> = tail
        .iter()
        .filter(|r| r["target"] == "fx:add")
        .map(|r| r["arguments"]["a"].as_i64().unwrap())
        .collect();
    assert!(a.windows(2).all(|w| w[1] == w[0] + 1), "{a:?}");
    use std::os::unix::fs::PermissionsExt;
    for f in ["audit.jsonl", "audit.jsonl.1"] {
        let mode = std::fs::metadata(state.join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{f}: {mode:o}");
    }
}

// ---------------------------------------------------------------------------------------
// 10. Decisions written by many processes at once; the permissions commands

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_processes_remember_decisions_at_once() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&["--tools", "40"])}),
        Some(json!({"permissions": {"default": "ask"},
                    "rateLimits": {"default": {"perSecond": 10, "burst": 20}}})),
    );
    let state = state_of(&config);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..40 {
        let (config, state) = (config.clone(), state.clone());
        set.spawn(async move {
            let name = format!("fx:tool_{i:04}");
            let ran = openpact(&[
                "--config",
                s(&config),
                "--state-dir",
                s(&state),
                "permissions",
                "allow",
                &name,
            ])
            .await;
            (name, ran)
        });
    }
    while let Some(done) = set.join_next().await {
        let (name, ran) = done.unwrap();
        assert_eq!(ran.code, Some(0), "{name}: {ran}");
        assert!(ran.stdout.contains(&name), "{name}: {ran}");
    }
    let ran = openpact(&["--state-dir", s(&state), "permissions", "list", "--json"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let listed: Value = serde_json::from_str(&ran.stdout).expect("list --json parses");
    let listed = listed.as_object().unwrap();
    assert_eq!(listed.len(), 40, "{listed:#?}");
    for i in 0..40 {
        let r = &listed[&format!("fx:tool_{i:04}")];
        assert_eq!(r["decision"], "allow", "{r}");
        assert!(hash_ok(&r["definition"]), "{r}");
    }
    let file: Value =
        serde_json::from_slice(&std::fs::read(state.join("permissions.json")).unwrap()).unwrap();
    assert_eq!(file["decisions"].as_object().unwrap().len(), 40);
    let leftovers: Vec<String> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // forget, then deny, round trip.
    let cli = |args: Vec<&str>| {
        let mut all = vec!["--config", s(&config), "--state-dir", s(&state)];
        all.extend(args);
        let all: Vec<String> = all.into_iter().map(String::from).collect();
        async move {
            let refs: Vec<&str> = all.iter().map(String::as_str).collect();
            openpact(&refs).await
        }
    };
    let ran = cli(vec!["permissions", "forget", "fx:tool_0000"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(ran.stdout.contains("forgot"), "{ran}");
    let ran = cli(vec!["permissions", "forget", "fx:tool_0000"]).await;
    assert!(ran.stdout.contains("no remembered decision"), "{ran}");
    let ran = cli(vec!["permissions", "deny", "fx:tool_0001"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stdout.contains("fx:tool_0001 is now always denied"),
        "{ran}"
    );
    let ran = cli(vec!["permissions", "allow", "fx:no_such_tool"]).await;
    assert_ne!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stderr
            .contains("no tool or prompt is named fx:no_such_tool"),
        "{ran}"
    );
    let ran = cli(vec!["permissions", "list"]).await;
    assert!(!ran.stdout.contains("fx:tool_0000 "), "{ran}");
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("fx:tool_0001") && l.contains("deny")),
        "{ran}"
    );
    let d = decisions(&state);
    assert_eq!(d.as_object().unwrap().len(), 39);
    assert_eq!(d["fx:tool_0001"]["decision"], "deny");

    // A hub honours them: remembered allow, remembered deny, forgotten (asks → no channel).
    let mut hub = serve(&config, &[]).await;
    init(&mut hub.client, json!({}), "policy-test").await;
    let c = &mut hub.client;
    assert_eq!(
        text(&c.call("fx:tool_0002", json!({"x": "y"})).await),
        "tool_0002:y"
    );
    let r = c.call("fx:tool_0001", json!({"x": "y"})).await;
    assert!(
        is_error(&r) && text(&r).contains("openpact permissions forget fx:tool_0001"),
        "{r}"
    );
    let r = c.call("fx:tool_0000", json!({"x": "y"})).await;
    assert!(is_error(&r) && text(&r).contains("no way to ask"), "{r}");
}

// ---------------------------------------------------------------------------------------
// 11. cache stats / clear against a running serve

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_stats_and_clear_reach_the_running_hub() {
    let sc = Scratch::new();
    let (mut hub, config) = hub(
        &sc,
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": "off"},
               "cache": {"rules": {"fx:echo": "10m"}}}),
    )
    .await;
    let state = state_of(&config);
    let pid = hub.child.id().unwrap();
    let c = &mut hub.client;
    let (n, _) = upstream_calls!(c, {
        c.call("fx:echo", json!({"message": "m"})).await;
        c.call("fx:echo", json!({"message": "m"})).await
    });
    assert_eq!(n, 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    let stats = loop {
        let ran = openpact(&["--state-dir", s(&state), "cache", "stats", "--json"]).await;
        assert_eq!(ran.code, Some(0), "{ran}");
        let v: Value = serde_json::from_str(&ran.stdout).unwrap();
        let mine = v
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["pid"] == pid)
            .cloned();
        if let Some(h) = mine.filter(|h| h["cache"]["hits"].as_u64() >= Some(1)) {
            break h;
        }
        assert!(Instant::now() < deadline, "no hit reported: {ran}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(stats["cache"]["hits"], 1, "{stats}");
    assert_eq!(stats["cache"]["misses"], 1, "{stats}");
    let ran = openpact(&["--state-dir", s(&state), "cache", "stats"]).await;
    assert!(
        ran.stdout.contains(&format!("pid {pid}")) && ran.stdout.contains("1 hits"),
        "{ran}"
    );

    let ran = openpact(&["--state-dir", s(&state), "cache", "clear"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(ran.stdout.contains("asked 1 running"), "{ran}");
    wait_stderr(&hub, "result cache cleared").await;
    let c = &mut hub.client;
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!((n, text(&r)), (1, "m".into()), "cleared: a miss");
    let (n, _) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(n, 0, "and cached again");

    // With no hub running there is nothing to clear.
    hub.close().await;
    let ran = openpact(&["--state-dir", s(&state), "cache", "clear"]).await;
    assert!(ran.stdout.contains("no openpact serve is running"), "{ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_stats_count_entries_and_bytes() {
    let sc = Scratch::new();
    let (mut hub, config) = hub(
        &sc,
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": "off"},
               "cache": {"rules": {"fx:echo": "10m"}}}),
    )
    .await;
    let state = state_of(&config);
    let pid = hub.child.id().unwrap();
    hub.client.call("fx:echo", json!({"message": "m"})).await;
    hub.client.call("fx:echo", json!({"message": "m"})).await;
    // The status file is rewritten at least every 5 s; give it two rounds.
    let deadline = Instant::now() + Duration::from_secs(12);
    loop {
        let ran = openpact(&["--state-dir", s(&state), "cache", "stats", "--json"]).await;
        let v: Value = serde_json::from_str(&ran.stdout).unwrap();
        let c = v
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["pid"] == pid)
            .map(|h| h["cache"].clone())
            .unwrap_or_default();
        if c["hits"] == 1 && c["entries"] == 1 && c["bytes"].as_u64() > Some(0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "one cached entry, reported as {c}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

// ---------------------------------------------------------------------------------------
// 12. Config warnings about rules that can never match

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_naming_unknown_servers_or_tools_are_warned_about() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({
            "permissions": {"default": "allow", "allow": ["nosuch:echo"], "deny": ["fx:no_such_tool"]},
            "rateLimits": {"default": "off", "servers": {"phantom": {"perSecond": 1}}},
            "cache": {"rules": {"ghost:*": "1m", "fx:echo": "1m"}},
        })),
    );
    let ran = openpact(&["--config", s(&config), "config", "check"]).await;
    assert_eq!(ran.code, Some(0), "warnings are not errors: {ran}");
    for needle in [
        "openpact.permissions.allow",
        "\"nosuch:echo\" names server \"nosuch\", which is not configured",
        "\"ghost:*\" names server \"ghost\"",
        "\"phantom\" is not a configured server",
    ] {
        assert!(ran.stderr.contains(needle), "{needle}: {ran}");
    }
    assert!(
        !ran.stderr.contains("fx:echo\" names"),
        "a rule for a configured server is fine: {ran}"
    );
    let ran = openpact(&["--config", s(&config), "config", "check", "--json"]).await;
    let v: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("nosuch")),
        "{ran}"
    );
    // `serve` logs them at startup, and, once the server listed its tools, the rule naming a
    // tool it does not have.
    let mut hub = serve(&config, &[]).await;
    init(&mut hub.client, json!({}), "policy-test").await;
    wait_stderr(&hub, "which is not configured").await;
    wait_stderr(
        &hub,
        "\"fx:no_such_tool\" names no tool or prompt of server \"fx\"",
    )
    .await;
    assert!(
        !hub.stderr().contains("\"fx:echo\" names no tool"),
        "{}",
        hub.stderr()
    );
}
