//! Tool search through independent MCP clients: rmcp (the Rust SDK) over stdio, the Python
//! SDK over stdio and HTTP, the TypeScript SDK (v1, and v2 on 2026-07-28) over HTTP. With
//! `openpact.toolSearch` on, each client's `tools/list` holds only `search_tools`, `call_tool`
//! and the pinned tools; each client finds a fixture tool by describing the task in plain
//! words, then reaches it through `call_tool`, which takes the whole policy pipeline: the
//! permission prompt (answered through the client's elicitation handler, or on 2026-07-28
//! carried by an input-required result) names the real tool, progress comes under the call's
//! own token, the audit and the cache know the real tool, and a cancel reaches the fixture. A
//! profile's endpoint shows only that profile's tools, in its list and in its searches.
//!
//! The scripts (`client.py`, `client.mjs`) live in `search_clients/` beside this file; each
//! prints what it saw as one JSON object, checked here. The real peers come from
//! `.ci/peers.sh`; without them the script tests print SKIPPED and pass, unless
//! `OPENPACT_REQUIRE_PEERS=1`.

use crate::support::rmcp::{Answering, connect, first_text, obj, transport};
use crate::support::{Hub, OPENPACT, Peers, Scratch, WAIT, fixture, openpact_for, s, state_dir};
use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientRequest, ElicitResult,
    ElicitationAction, ServerResult,
};
use rmcp::service::{PeerRequestOptions, RunningService};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::Command;

/// The `_meta` flag on every tool listed while search is on.
const ALWAYS_LOAD: &str = "anthropic/alwaysLoad";

/// The task that must find `fx:echo` ("repeat" is no word of its definition).
const REPEAT: &str = "repeat my message back";

/// A hub that searches, over the fixture as `fx`: listed are the meta-tools and the pinned
/// `fx:add`. Every call asks through the client, except `fx:add` (pinned) and `fx:slow` and
/// `fx:cancelled` (the cancellation probes); `fx:add`'s results are cached.
fn searching(sc: &Scratch) -> PathBuf {
    sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({
            "listWait": "30s",
            "toolSearch": {"mode": "on", "alwaysLoad": ["fx:add"]},
            "permissions": {"default": "ask", "allow": ["fx:add", "fx:slow", "fx:cancelled"]},
            "cache": {"rules": {"fx:add": "1m"}},
        })),
    )
}

/// `openpact serve` on `config` in a session of its own (no controlling terminal, so prompts
/// can only go through the client), with `args` after `serve`.
fn serve_command(config: &Path, args: &[&str]) -> Command {
    let mut cmd = openpact_for(config, Some("setsid"));
    cmd.arg("serve")
        .args(args)
        .env("OPENPACT_LOG", "info,openpact=debug")
        .kill_on_drop(true);
    cmd
}

/// The names of `tools` (tool definitions as JSON).
fn names(tools: &Value) -> Vec<&str> {
    tools
        .as_array()
        .unwrap_or_else(|| panic!("no tool list: {tools}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect()
}

/// A search session's listing: exactly the meta-tools and the pinned `fx:add`, each flagged to
/// load in full; `search_tools` takes a query.
fn assert_listed(tools: &Value, who: &str) {
    let mut listed = names(tools);
    listed.sort_unstable();
    assert_eq!(
        listed,
        ["call_tool", "fx:add", "search_tools"],
        "{who}: {tools:#}"
    );
    for t in tools.as_array().unwrap() {
        assert_eq!(t["_meta"][ALWAYS_LOAD], true, "{who}: {t}");
    }
    let search = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "search_tools")
        .unwrap();
    assert_eq!(search["inputSchema"]["required"], json!(["query"]), "{who}");
    let add = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "fx:add")
        .unwrap();
    assert_eq!(
        add["inputSchema"]["properties"]["a"]["type"], "number",
        "{who}: the pinned tool in full: {add}"
    );
}

/// A `search_tools` result for [`REPEAT`]: `fx:echo` first, with what calling it takes.
fn assert_found_echo(r: &Value, who: &str) {
    assert_ne!(r["isError"], true, "{who}: {r:#}");
    let found = &r["structuredContent"];
    assert_eq!(found["query"], REPEAT, "{who}: {r:#}");
    let tools = found["tools"].as_array().unwrap();
    assert!(!tools.is_empty() && tools.len() <= 8, "{who}: {r:#}");
    let echo = &tools[0];
    assert_eq!(echo["name"], "fx:echo", "{who}: {r:#}");
    assert_eq!(echo["server"], "fx", "{who}: {r:#}");
    assert_eq!(echo["description"], "Echo the message back", "{who}");
    assert_eq!(
        echo["inputSchema"]["properties"]["message"]["type"], "string",
        "{who}: {echo}"
    );
    assert!(echo["score"].as_f64().is_some_and(|s| s > 0.0), "{echo}");
    // Every fixture tool is searched, though none but fx:add is listed.
    assert!(found["total"].as_u64().unwrap() >= 20, "{who}: {r:#}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("fx:echo") && text.contains("call_tool"),
        "{text}"
    );
}

/// The permission prompts a session answered: `tools` in order, each naming the real tool
/// (never the meta-tool it was reached through), in the hub's form.
fn assert_asked(asked: &Value, tools: &[&str], who: &str) {
    let asked = asked.as_array().unwrap();
    assert_eq!(asked.len(), tools.len(), "{who}: {asked:#?}");
    for (a, tool) in asked.iter().zip(tools) {
        let msg = a["message"].as_str().unwrap();
        assert!(msg.contains(tool), "{who}: {tool} not in {msg:?}");
        assert!(!msg.contains("call_tool"), "{who}: {msg:?}");
        assert_eq!(
            a["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["always", "once", "deny"]),
            "{who}: {a}"
        );
    }
}

/// One notification per step, rising to the total.
fn assert_progress(seen: &[(f64, Option<f64>)], who: &str) {
    assert_eq!(seen.len(), 3, "{who}: one notification per step: {seen:?}");
    assert!(
        seen.windows(2).all(|w| w[0].0 < w[1].0),
        "{who}: progress rises: {seen:?}"
    );
    assert_eq!(seen[2], (3.0, Some(3.0)), "{who}: {seen:?}");
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or("")
}

/// The audit log's records (written in the background: waits for at least `n`).
async fn audit(config: &Path, n: usize) -> Vec<Value> {
    let path = state_dir(config).join("audit.jsonl");
    let deadline = Instant::now() + WAIT;
    loop {
        let records: Vec<Value> = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if records.len() >= n || Instant::now() > deadline {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The audited calls as (target, outcome): the real tools, never the meta-tools.
fn audited(records: &[Value]) -> Vec<(String, String)> {
    records
        .iter()
        .map(|r| {
            let target = r["target"].as_str().unwrap().to_string();
            assert!(
                target != "call_tool" && target != "search_tools",
                "the audit names the real tool: {r}"
            );
            (target, r["outcome"].as_str().unwrap().to_string())
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// rmcp over stdio

fn decision(d: &str) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": d}))
}

/// `tools/call` of `name` as rmcp sends it.
fn call_request(name: &str, args: Value) -> ClientRequest {
    ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(name.to_string()).with_arguments(obj(args)),
    ))
}

/// `call_tool` of `name` with `arguments`, as rmcp sends it.
fn via_call_tool(name: &str, arguments: Value) -> ClientRequest {
    call_request("call_tool", json!({"name": name, "arguments": arguments}))
}

async fn answered(client: &RunningService<RoleClient, Answering>, req: ClientRequest) -> Value {
    let what = format!("{req:?}");
    let r = tokio::time::timeout(
        WAIT,
        client.send_cancellable_request(req, PeerRequestOptions::no_options()),
    )
    .await
    .unwrap_or_else(|_| panic!("no answer within {WAIT:?} to {what}"))
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let r = tokio::time::timeout(WAIT, r.await_response())
        .await
        .unwrap_or_else(|_| panic!("no answer within {WAIT:?} to {what}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    match r {
        ServerResult::CallToolResult(r) => serde_json::to_value::<CallToolResult>(r).unwrap(),
        other => panic!("{what}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_lists_searches_and_calls_through_call_tool() {
    let sc = Scratch::new();
    let config = searching(&sc);
    let (transport, log) = transport(serve_command(&config, &[]));
    let handler = Answering::default();
    handler
        .answers
        .lock()
        .unwrap()
        .extend([decision("once"), decision("deny"), decision("once")]);
    let client = connect(handler.clone(), transport).await;
    let asked = || handler.asked.lock().unwrap().len();

    let tools = tokio::time::timeout(WAIT, client.list_all_tools())
        .await
        .expect("tools/list in time")
        .unwrap_or_else(|e| panic!("tools/list: {e}\n{}", log.text()));
    assert_listed(&serde_json::to_value(&tools).unwrap(), "rmcp");

    let found = answered(
        &client,
        call_request("search_tools", json!({"query": REPEAT})),
    )
    .await;
    assert_found_echo(&found, "rmcp");
    let one = answered(
        &client,
        call_request(
            "search_tools",
            json!({"query": "add two numbers", "limit": 1}),
        ),
    )
    .await;
    assert_eq!(
        names(&one["structuredContent"]["tools"]),
        ["fx:add"],
        "{one:#}"
    );
    let nowhere = answered(
        &client,
        call_request("search_tools", json!({"query": "echo", "server": "nope"})),
    )
    .await;
    assert_eq!(nowhere["isError"], true, "{nowhere:#}");
    assert!(text(&nowhere).contains("no server \"nope\""), "{nowhere:#}");
    assert_eq!(asked(), 0, "searching asks no permission");

    // The prompt names the real tool; "once" lets the call run.
    let echo = found["structuredContent"]["tools"][0]["name"]
        .as_str()
        .unwrap();
    let r = answered(
        &client,
        via_call_tool(echo, json!({"message": "rmcp reached it"})),
    )
    .await;
    assert_eq!(text(&r), "rmcp reached it", "{r:#}");
    assert_ne!(r["isError"], true, "{r:#}");
    assert_eq!(asked(), 1);

    // "deny" refuses it, without reaching the fixture.
    let r = answered(&client, via_call_tool(echo, json!({"message": "refused"}))).await;
    assert_eq!(r["isError"], true, "{r:#}");
    assert!(text(&r).contains("denied at the prompt"), "{r:#}");
    assert!(text(&r).contains("fx:echo"), "{r:#}");
    assert_eq!(asked(), 2);

    // Progress under the token of the call_tool request itself.
    let handle = tokio::time::timeout(
        WAIT,
        client.send_cancellable_request(
            via_call_tool("fx:progress", json!({"steps": 3, "ms": 20})),
            PeerRequestOptions::with_timeout(WAIT),
        ),
    )
    .await
    .expect("sent in time")
    .unwrap();
    let token = handle.progress_token.clone();
    let r = match tokio::time::timeout(WAIT, handle.await_response())
        .await
        .expect("fx:progress in time")
        .unwrap_or_else(|e| panic!("fx:progress: {e}\n{}", log.text()))
    {
        ServerResult::CallToolResult(r) => r,
        other => panic!("fx:progress: {other:?}"),
    };
    assert_eq!(first_text(&r), "done 3", "{r:?}");
    assert_eq!(asked(), 3);
    // rmcp runs notification handlers on tasks of their own: the last may still be on its
    // way when the response is in.
    let ours = || -> Vec<(f64, Option<f64>)> {
        handler
            .progress
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.progress_token == token)
            .map(|p| (p.progress, p.total))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while ours().len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_progress(&ours(), "rmcp");
    assert_eq!(
        handler.progress.lock().unwrap().len(),
        3,
        "no progress but this call's"
    );

    // A cancelled call_tool reaches the fixture as a cancel of the real call.
    let slow = client
        .send_cancellable_request(
            via_call_tool("fx:slow", json!({"ms": 30000})),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    tokio::time::timeout(WAIT, slow.cancel(Some("the test cancels".into())))
        .await
        .expect("cancel in time")
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10));
    let mut cancelled = json!([]);
    let mut probes = 0;
    for _ in 0..250 {
        probes += 1;
        let r = answered(&client, via_call_tool("fx:cancelled", json!({}))).await;
        cancelled = serde_json::from_str(text(&r)).unwrap_or(json!([]));
        if cancelled.as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        cancelled.as_array().map(Vec::len),
        Some(1),
        "the fixture saw one cancel"
    );

    // The pinned tool through call_tool, then by its own name: allowed, so not asked; one
    // result cached under the real tool, whichever way it was called.
    let r = answered(&client, via_call_tool("fx:add", json!({"a": 2, "b": 3}))).await;
    assert_eq!(text(&r), "5", "{r:#}");
    assert_eq!(r["structuredContent"]["sum"], 5, "{r:#}");
    let r = answered(&client, call_request("fx:add", json!({"b": 3, "a": 2}))).await;
    assert_eq!(text(&r), "5", "{r:#}");
    assert_eq!(asked(), 3);

    let asked = json!(*handler.asked.lock().unwrap());
    assert_asked(&asked, &["fx:echo", "fx:echo", "fx:progress"], "rmcp");
    let records = audit(&config, 3 + probes + 2).await;
    let calls = audited(&records);
    let want = [
        ("fx:echo", "ok"),
        ("fx:echo", "denied"),
        ("fx:progress", "ok"),
    ];
    let got: Vec<(&str, &str)> = calls
        .iter()
        .filter(|(t, _)| t == "fx:echo" || t == "fx:progress")
        .map(|(t, o)| (t.as_str(), o.as_str()))
        .collect();
    assert_eq!(got, want, "{records:#?}");
    let adds: Vec<&str> = records
        .iter()
        .filter(|r| r["target"] == "fx:add")
        .map(|r| r["cache"].as_str().unwrap())
        .collect();
    assert_eq!(adds, ["miss", "hit"], "{records:#?}");

    tokio::time::timeout(WAIT, client.cancel())
        .await
        .expect("close in time")
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// The Python SDK, over stdio and over HTTP

/// The words that start the hub on `config` over stdio, for a client that spawns it.
fn hub_words(config: &Path) -> Value {
    let state = state_dir(config);
    json!([
        OPENPACT,
        "--config",
        s(config),
        "--state-dir",
        s(&state),
        "serve"
    ])
}

/// `openpact serve --http 127.0.0.1:0 --no-stdio` on `config`, and the base of its URL.
async fn http_only(config: &Path) -> (Hub, String) {
    let hub = Hub::spawn(serve_command(
        config,
        &["--http", "127.0.0.1:0", "--no-stdio"],
    ));
    let base = hub.http_base().await;
    (hub, base)
}

/// The progress a script saw, as (progress, total): the hub's own notifications, not the
/// SDK's note on fulfilling an input-required result (the TypeScript SDK v2 reports one).
fn progress_seen(v: &Value) -> Vec<(f64, Option<f64>)> {
    v["progressSeen"]
        .as_array()
        .unwrap_or_else(|| panic!("no progress recorded: {v:#}"))
        .iter()
        .filter(|p| {
            !p["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Fulfilling input required"))
        })
        .map(|p| (p["progress"].as_f64().unwrap(), p["total"].as_f64()))
        .collect()
}

/// Runs this folder's `script` with `interpreter` (a peers.json command) and `args`; its JSON.
async fn run_script(
    peers: &Peers,
    interpreter: &str,
    script: &str,
    args: &[&str],
    hub: Option<&Hub>,
) -> Value {
    let ran = peers
        .script(
            interpreter,
            "search_clients",
            script,
            args,
            Duration::from_secs(60),
        )
        .await;
    let hub = hub.map(Hub::stderr).unwrap_or_default();
    assert_eq!(ran.code, Some(0), "{ran}\nhub:\n{hub}");
    ran.json()
}

/// The Python client in `mode` against a searching hub it starts over stdio.
async fn python_over_stdio(peers: &Peers, mode: &str) -> (Value, PathBuf, Scratch) {
    let sc = Scratch::new();
    let config = searching(&sc);
    let hub = hub_words(&config).to_string();
    let args = [mode, "stdio", "setsid", &hub];
    let v = run_script(peers, "PEER_PYTHON", "client.py", &args, None).await;
    (v, config, sc)
}

/// What the Python client must have seen, in either era, and what the audit holds of it.
async fn assert_python(v: &Value, config: &Path, who: &str) {
    assert_listed(&v["tools"], who);
    assert_found_echo(&v["search"], who);
    assert_eq!(
        names(&v["searchAdd"]["structuredContent"]["tools"]),
        ["fx:add"],
        "{who}: {v:#}"
    );
    assert_eq!(v["askedAfterSearch"], 0, "{who}: searching asks nothing");
    assert_eq!(text(&v["once"]), "py reached it", "{who}: {v:#}");
    assert_ne!(v["once"]["isError"], true, "{who}: {v:#}");
    assert_eq!(v["denied"]["isError"], true, "{who}: {v:#}");
    assert!(
        text(&v["denied"]).contains("denied at the prompt"),
        "{who}: {v:#}"
    );
    assert_eq!(text(&v["progress"]), "done 3", "{who}: {v:#}");
    assert_progress(&progress_seen(v), who);
    assert_eq!(text(&v["add"]), "5", "{who}: {v:#}");
    assert_asked(&v["asked"], &["fx:echo", "fx:echo", "fx:progress"], who);
    assert_audited(
        config,
        4,
        &[
            ("fx:echo", "ok"),
            ("fx:echo", "denied"),
            ("fx:progress", "ok"),
            ("fx:add", "ok"),
        ],
        who,
    )
    .await;
}

/// The audit log holds `want` (tool, outcome), in order, once it has `n` records.
async fn assert_audited(config: &Path, n: usize, want: &[(&str, &str)], who: &str) {
    let records = audit(config, n).await;
    let calls = audited(&records);
    let got: Vec<(&str, &str)> = calls
        .iter()
        .map(|(t, o)| (t.as_str(), o.as_str()))
        .collect();
    assert_eq!(got, want, "{who}: {records:#?}");
}

/// A 2026-07-28 exchange: the first call_tool of echo, left unanswered, came back as an
/// input-required result carrying the permission prompt for the real tool.
fn assert_input_required(v: &Value, who: &str) {
    assert_eq!(v["protocolVersion"], "2026-07-28", "{who}: {v:#}");
    let ir = &v["inputRequired"];
    assert_eq!(ir["resultType"], "input_required", "{who}: {v:#}");
    let requests: Vec<&Value> = match &ir["inputRequests"] {
        Value::Object(m) => m.values().collect(),
        Value::Array(a) => a.iter().collect(),
        _ => Vec::new(),
    };
    assert_eq!(requests.len(), 1, "{who}: one input request: {v:#}");
    assert_eq!(requests[0]["method"], "elicitation/create", "{who}: {v:#}");
    let msg = requests[0]["params"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("fx:echo"), "{who}: {v:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_lists_searches_and_calls_through_call_tool() {
    let Some(peers) = Peers::get() else { return };
    let (v, config, _sc) = python_over_stdio(&peers, "legacy").await;
    assert_eq!(v["protocolVersion"], "2025-11-25", "{v:#}");
    assert_python(&v, &config, "py").await;
}

/// The same on 2026-07-28: the prompt for the tool behind call_tool comes as an input-required
/// result, which the SDK fulfils through its elicitation callback and sends again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_searches_and_calls_through_call_tool_on_2026() {
    let Some(peers) = Peers::get() else { return };
    let (v, config, _sc) = python_over_stdio(&peers, "auto").await;
    assert_input_required(&v, "py-2026");
    assert_python(&v, &config, "py-2026").await;
}

/// The Python client over stateless HTTP on 2026-07-28: the input-required round trip of
/// call_tool with no session to hold it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_http_searches_and_calls_through_call_tool_on_2026() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = searching(&sc);
    let (hub, base) = http_only(&config).await;
    let url = format!("{base}/mcp");
    let args = ["2026-07-28", "http", &url];
    let v = run_script(&peers, "PEER_PYTHON", "client.py", &args, Some(&hub)).await;
    assert_input_required(&v, "py-http-2026");
    assert_python(&v, &config, "py-http-2026").await;
}

// ---------------------------------------------------------------------------------------
// The TypeScript SDK over HTTP

/// The TypeScript SDK `sdk` (v1 or v2) in `era` (handshake or 2026-07-28), in `mode` against
/// `url`.
async fn typescript(peers: &Peers, url: &str, mode: &str, sdk_era: [&str; 2], hub: &Hub) -> Value {
    let peers_dir = peers.vars["OPENPACT_PEERS_DIR"].as_str().unwrap();
    let [sdk, era] = sdk_era;
    let args = [url, peers_dir, mode, sdk, era];
    run_script(peers, "PEER_NODE", "client.mjs", &args, Some(hub)).await
}

/// The TypeScript SDK's search session against a fresh searching hub on HTTP: what it saw,
/// checked, and what the audit holds of it.
async fn typescript_search(sdk_era: [&str; 2]) {
    let Some(peers) = Peers::get() else { return };
    let who = format!("ts-{}", sdk_era.join("-"));
    let sc = Scratch::new();
    let config = searching(&sc);
    let (hub, base) = http_only(&config).await;
    let v = typescript(&peers, &format!("{base}/mcp"), "search", sdk_era, &hub).await;
    let stateless = sdk_era[1] != "legacy";
    if stateless {
        assert_eq!(v["protocolVersion"], sdk_era[1], "{who}: {v:#}");
        assert_eq!(v["sessionId"], Value::Null, "{who}: stateless: {v:#}");
        // The SDK notes each input-required round it fulfils: progress's prompt came so.
        let rounds = v["progressSeen"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| {
                p["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("Fulfilling input required"))
            })
            .count();
        assert_eq!(rounds, 1, "{who}: {v:#}");
    } else {
        assert!(
            v["sessionId"].as_str().is_some_and(|s| s.len() >= 32),
            "{who}: {v:#}"
        );
    }
    assert_listed(&v["tools"], &who);
    assert_found_echo(&v["search"], &who);
    assert_eq!(v["askedAfterSearch"], 0, "{who}: searching asks nothing");
    assert_eq!(text(&v["once"]), "ts reached it", "{who}: {v:#}");
    assert_ne!(v["once"]["isError"], true, "{who}: {v:#}");
    assert_eq!(text(&v["progress"]), "done 3", "{who}: {v:#}");
    assert_progress(&progress_seen(&v), &who);
    assert_eq!(v["denied"]["isError"], true, "{who}: {v:#}");
    assert!(
        text(&v["denied"]).contains("denied at the prompt"),
        "{who}: {v:#}"
    );
    assert_asked(&v["asked"], &["fx:echo", "fx:progress", "fx:echo"], &who);
    assert_audited(
        &config,
        3,
        &[
            ("fx:echo", "ok"),
            ("fx:progress", "ok"),
            ("fx:echo", "denied"),
        ],
        &who,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_over_http_lists_searches_and_calls_through_call_tool() {
    typescript_search(["v1", "legacy"]).await;
}

/// The TypeScript SDK v2 on 2026-07-28: stateless HTTP, the prompt for the tool behind
/// call_tool an input-required result the SDK fulfils through its elicitation handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_v2_over_http_searches_and_calls_through_call_tool_on_2026() {
    typescript_search(["v2", "2026-07-28"]).await;
}

/// A call of `fx:echo` refused as an unknown tool (a JSON-RPC error the SDK threw).
fn assert_unknown_fx_echo(r: &Value, why: &str) {
    assert_eq!(r["code"], -32602, "{why}: {r:#}");
    let thrown = r["thrown"].as_str().unwrap_or("");
    assert!(thrown.contains("Unknown tool: fx:echo"), "{why}: {r:#}");
}

/// Profiles on HTTP: `/mcp/listed` lists only its server's tools; `/mcp/searched` searches
/// only them, and `call_tool` reaches nothing outside it. The default `/mcp` still sees all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_endpoint_lists_and_searches_only_its_tools() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[]), "other": fixture(&[])}),
        Some(json!({
            "listWait": "30s",
            "toolSearch": {"mode": "on", "alwaysLoad": ["fx:add"]},
            "profiles": {
                "listed": {"servers": ["other"], "toolSearch": {"mode": "off"}},
                "searched": {"servers": ["other"]},
            },
        })),
    );
    let (hub, base) = http_only(&config).await;

    let listed = typescript(
        &peers,
        &format!("{base}/mcp/listed"),
        "profile",
        ["v1", "legacy"],
        &hub,
    )
    .await;
    let tools = names(&listed["tools"]);
    assert!(tools.contains(&"other:echo"), "{listed:#}");
    assert!(tools.len() >= 20, "every tool of other: {listed:#}");
    assert!(
        tools.iter().all(|t| t.starts_with("other:")),
        "only the profile's server: {tools:?}"
    );
    assert_eq!(
        text(&listed["direct"]),
        "listed in the profile",
        "{listed:#}"
    );
    assert_unknown_fx_echo(&listed["directFx"], "fx:echo is outside the profile");

    let searched = typescript(
        &peers,
        &format!("{base}/mcp/searched"),
        "profile",
        ["v1", "legacy"],
        &hub,
    )
    .await;
    let mut tools = names(&searched["tools"]);
    tools.sort_unstable();
    assert_eq!(
        tools,
        ["call_tool", "search_tools"],
        "fx:add is pinned, but not in this profile: {searched:#}"
    );
    let search_def = searched["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "search_tools")
        .unwrap();
    let description = search_def["description"].as_str().unwrap();
    assert!(
        description.contains("other") && !description.contains("fx"),
        "{description}"
    );
    let found = &searched["search"]["structuredContent"];
    assert_eq!(found["tools"][0]["name"], "other:echo", "{searched:#}");
    assert!(
        found["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["server"] == "other"),
        "{searched:#}"
    );
    let other_total = found["total"].as_u64().unwrap();
    assert_eq!(
        other_total as usize,
        listed["tools"].as_array().unwrap().len()
    );
    let fx = &searched["searchFx"];
    assert_eq!(fx["isError"], true, "{searched:#}");
    assert!(text(fx).contains("no server \"fx\""), "{searched:#}");
    assert_eq!(
        text(&searched["callOther"]),
        "in the profile",
        "{searched:#}"
    );
    assert_unknown_fx_echo(
        &searched["callFx"],
        "call_tool reaches nothing outside the profile",
    );

    // The default endpoint: both servers behind the search, fx:add pinned.
    let whole = typescript(
        &peers,
        &format!("{base}/mcp"),
        "profile",
        ["v1", "legacy"],
        &hub,
    )
    .await;
    let mut tools = names(&whole["tools"]);
    tools.sort_unstable();
    assert_eq!(tools, ["call_tool", "fx:add", "search_tools"], "{whole:#}");
    assert_eq!(
        whole["search"]["structuredContent"]["total"].as_u64(),
        Some(2 * other_total),
        "{whole:#}"
    );
    assert_eq!(text(&whole["callFx"]), "outside it", "{whole:#}");
}
