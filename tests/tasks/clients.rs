//! Real SDK clients running tool calls as 2025-11-25 tasks through `openpact serve --http`:
//! the TypeScript SDK v1 (`client.experimental.tasks`: callToolStream, getTask, listTasks,
//! cancelTask) and the Python SDK (`mcp` 2.3: its typed task requests), each first against
//! server-everything directly (so the scripts are known right) and then through the hub.
//!
//! - server-everything's `simulate-research-query` (`taskSupport: required`) with an
//!   ambiguous topic: polling shows `working` then `input_required`, the clarification the
//!   server asks during the task is answered by the client, and `tasks/result` gives the
//!   report with the client's answer in it; a second task is listed and cancelled.
//! - A server without tasks (the fixture's `slow`): the hub runs the call as its own task, and
//!   cancelling the task cancels the call at the server.
//! - Two HTTP sessions of one hub, and two `openpact connect` windows of a shared hub, never
//!   see each other's tasks: not in `tasks/list`, and get/result/cancel of the other's id are
//!   `-32602`.
//!
//! The scripts (`client.mjs`, `client.py`, beside this file) take a plan and print what they
//! saw as one JSON object, checked here.

use crate::shared::window;
use crate::support::{
    Hub, Peers, Scratch, WAIT, everything_listening, fixture, free_port, serve_with, text,
    wait_for_tool,
};
use serde_json::{Value, json};
use std::time::Duration;

const RESEARCH: &str = "simulate-research-query";

/// The ambiguous research query (answered "programming", its first interpretation), and a
/// second one to cancel.
fn research_plan(tool: &str) -> Value {
    json!({"tool": tool, "args": {"topic": "python", "ambiguous": true},
           "cancelTool": tool, "cancelArgs": {"topic": "rust"}})
}

/// Runs this folder's `script` with `interpreter` (a peers.json command), `args` after it.
async fn run_script(peers: &Peers, interpreter: &str, script: &str, args: &[&str]) -> Value {
    let ran = peers
        .script(interpreter, "tasks", script, args, Duration::from_secs(120))
        .await;
    assert_eq!(ran.code, Some(0), "{ran}");
    ran.json()
}

/// The TypeScript SDK v1 client at `url` running `plan`.
async fn typescript(peers: &Peers, url: &str, plan: &Value) -> Value {
    let peers_dir = peers.vars["OPENPACT_PEERS_DIR"].as_str().unwrap();
    let plan = plan.to_string();
    run_script(peers, "PEER_NODE", "client.mjs", &[url, peers_dir, &plan]).await
}

/// The Python SDK client at `url` running `plan`.
async fn python(peers: &Peers, url: &str, plan: &Value) -> Value {
    run_script(peers, "PEER_PYTHON", "client.py", &[url, &plan.to_string()]).await
}

/// server-everything over Streamable HTTP on a loopback port, and its URL.
async fn everything_direct(peers: &Peers) -> (crate::support::Listening, String) {
    let port = free_port();
    let l = everything_listening(peers, "streamableHttp", port).await;
    (l, format!("http://127.0.0.1:{port}/mcp"))
}

/// `openpact serve --http` over `servers`, every call allowed, once `ready_tool` is listed;
/// the hub and its MCP URL.
async fn http_hub(servers: Value, ready_tool: &str) -> (Hub, String) {
    let sc = Scratch::new();
    let config = sc.servers(servers, Some(json!({"permissions": {"default": "allow"}})));
    let mut hub = serve_with(&config, &["serve", "--http", "127.0.0.1:0"], &[])
        .await
        .owning(sc);
    // The hub declares upstream what its first client declared: elicitation, without which
    // server-everything never asks its clarification.
    hub.client
        .initialize_as(json!({"elicitation": {}}), "ready")
        .await;
    wait_for_tool(&mut hub.client, ready_tool, Duration::from_secs(30)).await;
    let url = format!("{}/mcp", hub.http_base().await);
    (hub, url)
}

/// The hub over server-everything (stdio) as `everything`.
async fn everything_hub(peers: &Peers) -> (Hub, String) {
    let servers = json!({"everything": peers.entry("PEER_EVERYTHING", &[])});
    http_hub(servers, &format!("everything:{RESEARCH}")).await
}

/// The hub over the fixture as `fx`.
async fn fixture_hub() -> (Hub, String) {
    http_hub(json!({"fx": fixture(&[])}), "fx:slow").await
}

/// The text of a tool result's first content block.
fn body(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or("")
}

fn statuses(v: &Value) -> Vec<&str> {
    v["statuses"]
        .as_array()
        .unwrap_or_else(|| panic!("no statuses: {v:#}"))
        .iter()
        .filter_map(|s| s["status"].as_str())
        .collect()
}

/// A task id the hub minted: "t" and 32 hex digits (the server's own are 32 hex digits).
fn assert_hub_task_id(id: &Value, v: &Value) {
    let id = id.as_str().unwrap_or_else(|| panic!("no task id: {v:#}"));
    assert!(
        id.len() == 33 && id.starts_with('t') && id[1..].chars().all(|c| c.is_ascii_hexdigit()),
        "a hub task id, not the server's: {id}"
    );
}

/// The research task: polled through working and input_required, the clarification asked once
/// and answered, the report carrying the answer, the task completed afterwards.
fn assert_research(v: &Value, who: &str) {
    assert_eq!(v["created"]["status"], "working", "{who}: {v:#}");
    let seen = statuses(v);
    assert!(
        seen.contains(&"working"),
        "{who}: polled while working: {seen:?}"
    );
    assert!(
        seen.contains(&"input_required"),
        "{who}: polled while it waited for the clarification: {seen:?}"
    );
    let asked = v["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{who}: one clarification: {v:#}");
    let message = asked[0]["message"].as_str().unwrap_or("");
    assert!(message.contains("\"python\""), "{who}: {message}");
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["interpretation"]["oneOf"][0]["const"],
        "programming",
        "{who}: {v:#}"
    );
    assert_ne!(v["result"]["isError"], true, "{who}: {v:#}");
    assert!(
        body(&v["result"]).starts_with("# Research Report: python (programming)"),
        "{who}: the report carries the client's answer: {v:#}"
    );
    assert_eq!(v["afterGet"]["status"], "completed", "{who}: {v:#}");
    assert_eq!(v["afterGet"]["taskId"], v["created"]["taskId"], "{who}");
}

/// The second task: listed while it ran, then cancelled.
fn assert_cancelled(v: &Value, who: &str) {
    let id = &v["cancelCreated"]["task"]["taskId"];
    assert_eq!(
        v["cancelCreated"]["task"]["status"], "working",
        "{who}: {v:#}"
    );
    let listed = v["listed"].as_array().unwrap();
    assert!(
        listed.contains(id),
        "{who}: tasks/list shows {id}: {listed:?}"
    );
    assert!(
        listed.contains(&v["created"]["taskId"]),
        "{who}: and the finished one: {listed:?}"
    );
    assert_eq!(v["cancelAnswer"]["status"], "cancelled", "{who}: {v:#}");
    assert_eq!(v["cancelGet"]["status"], "cancelled", "{who}: {v:#}");
}

/// Another session's task, invisible to this one: not listed, and unknown to get, result and
/// cancel (-32602), which leave it running for its owner.
fn assert_isolated(v: &Value) {
    let id = &v["otherTaskId"];
    assert_ne!(v["otherSessionId"], v["sessionId"], "two sessions: {v:#}");
    assert!(
        v["otherListed"].as_array().unwrap().contains(id),
        "the owner lists it: {v:#}"
    );
    assert!(
        !v["mineListed"].as_array().unwrap().contains(id),
        "the other session does not: {v:#}"
    );
    for what in ["foreignGet", "foreignResult", "foreignCancel"] {
        assert_eq!(v[what]["error"]["code"], -32602, "{what}: {v:#}");
    }
    assert_eq!(v["ownerGet"]["status"], "working", "{v:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_runs_the_research_query_as_a_task_directly() {
    let Some(peers) = Peers::get() else { return };
    let (_everything, url) = everything_direct(&peers).await;
    let mut plan = research_plan(RESEARCH);
    plan["isolation"] = json!({"tool": RESEARCH, "args": {"topic": "go"}});
    let v = typescript(&peers, &url, &plan).await;
    assert_eq!(v["taskSupport"][RESEARCH], "required", "{v:#}");
    assert_research(&v, "ts direct");
    assert_cancelled(&v, "ts direct");
    assert_isolated(&v);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_runs_the_research_query_as_a_task_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let (hub, url) = everything_hub(&peers).await;
    let tool = format!("everything:{RESEARCH}");
    let v = typescript(&peers, &url, &research_plan(&tool)).await;
    assert_eq!(
        v["serverCapabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{v:#}\nhub:\n{}",
        hub.stderr()
    );
    assert_eq!(v["taskSupport"][&tool], "required", "{v:#}");
    assert_research(&v, "ts hub");
    assert_hub_task_id(&v["created"]["taskId"], &v);
    assert_cancelled(&v, "ts hub");
    // The stored answer, again, once the task is over.
    assert_eq!(body(&v["resultAgain"]), body(&v["result"]), "{v:#}");
    assert!(
        v["statusNotes"]
            .as_array()
            .unwrap()
            .contains(&json!("completed")),
        "notifications/tasks/status reached the client: {v:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_runs_the_research_query_as_a_task_directly() {
    let Some(peers) = Peers::get() else { return };
    let (_everything, url) = everything_direct(&peers).await;
    let v = python(&peers, &url, &research_plan(RESEARCH)).await;
    assert_eq!(v["protocolVersion"], "2025-11-25", "{v:#}");
    assert_research(&v, "py direct");
    assert_cancelled(&v, "py direct");
}

/// The Python SDK builds its capabilities itself and has no `tasks` to declare: the hub takes
/// its task-augmented call all the same (a requestor needs only the receiver's capability).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_runs_the_research_query_as_a_task_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let (_hub, url) = everything_hub(&peers).await;
    let tool = format!("everything:{RESEARCH}");
    let v = python(&peers, &url, &research_plan(&tool)).await;
    assert_research(&v, "py hub");
    assert_hub_task_id(&v["created"]["taskId"], &v);
    assert_cancelled(&v, "py hub");
}

/// The fixture has no tasks: the hub offers its tools as `optional` and runs the call as a
/// task itself; the cancelled task's call is cancelled at the fixture.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tasks_is_run_as_a_task_by_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let (mut hub, url) = fixture_hub().await;
    let plan = json!({"tool": "fx:slow", "args": {"ms": 1500},
                      "cancelTool": "fx:slow", "cancelArgs": {"ms": 60000}});
    let v = typescript(&peers, &url, &plan).await;
    assert_eq!(
        v["taskSupport"]["fx:slow"],
        "optional",
        "{v:#}\nhub:\n{}",
        hub.stderr()
    );
    assert_hub_task_id(&v["created"]["taskId"], &v);
    assert_eq!(v["created"]["status"], "working", "{v:#}");
    assert!(statuses(&v).contains(&"working"), "{v:#}");
    assert_eq!(body(&v["result"]), "slept 1500 ms", "{v:#}");
    assert_eq!(
        v["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        v["created"]["taskId"],
        "{v:#}"
    );
    assert_eq!(v["afterGet"]["status"], "completed", "{v:#}");
    assert_eq!(body(&v["resultAgain"]), "slept 1500 ms", "{v:#}");
    assert!(
        v["ms"].as_u64().unwrap() >= 1500,
        "the result waited for the call: {v:#}"
    );
    assert_cancelled(&v, "fixture");
    // The fixture lists the request ids it was told were cancelled: the one slow call.
    let mut cancelled: Vec<Value> = Vec::new();
    for _ in 0..100 {
        let r = hub.client.call("fx:cancelled", json!({})).await;
        cancelled = serde_json::from_str(&text(&r)).unwrap_or_default();
        if !cancelled.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        cancelled.len(),
        1,
        "the task's cancel reached the server: {cancelled:?}"
    );
}

/// Two HTTP sessions of one hub: each sees only its own tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_http_sessions_never_see_each_others_tasks() {
    let Some(peers) = Peers::get() else { return };
    let (_hub, url) = fixture_hub().await;
    let plan = json!({"isolation": {"tool": "fx:slow", "args": {"ms": 60000}}});
    let v = typescript(&peers, &url, &plan).await;
    assert_hub_task_id(&v["otherTaskId"], &v);
    assert_isolated(&v);
}

/// One JSON-RPC request on a window; its answer.
async fn ask(w: &mut Hub, method: &str, params: Value) -> Value {
    let c = &mut w.client;
    let id = c.next_id();
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .await;
    c.response(&json!(id)).await
}

/// Two `openpact connect` windows of one shared hub: each sees only its own tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connect_windows_never_see_each_others_tasks() {
    let sc = Scratch::new();
    let marker = format!("tasks-windows-{}", std::process::id());
    let config = sc.servers(
        json!({"fx": fixture(&["--name", &marker])}),
        Some(json!({"permissions": {"default": "allow"}, "shared": {"idleExit": "2s"}})),
    );
    let runtime = sc.path().join("run");
    let mut windows = Vec::new();
    for n in 0..2 {
        let mut w = window(&config, &runtime);
        w.client
            .initialize_as(
                json!({"tasks": {"list": {}, "cancel": {}}}),
                &format!("w{n}"),
            )
            .await;
        wait_for_tool(&mut w.client, "fx:slow", WAIT).await;
        windows.push(w);
    }
    let created = ask(
        &mut windows[0],
        "tools/call",
        json!({"name": "fx:slow", "arguments": {"ms": 60000}, "task": {"ttl": 60000}}),
    )
    .await;
    let id = created["result"]["task"]["taskId"].clone();
    assert_hub_task_id(&id, &created);

    let mine = ask(&mut windows[0], "tasks/list", json!({})).await;
    let ids = |r: &Value| -> Vec<Value> {
        r["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .map(|t| t["taskId"].clone())
            .collect()
    };
    assert!(ids(&mine).contains(&id), "{mine}");
    let theirs = ask(&mut windows[1], "tasks/list", json!({})).await;
    assert!(!ids(&theirs).contains(&id), "{theirs}");
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let r = ask(&mut windows[1], method, json!({"taskId": id})).await;
        assert_eq!(
            r["error"]["code"], -32602,
            "{method} from the other window: {r}"
        );
    }
    let still = ask(&mut windows[0], "tasks/get", json!({"taskId": id})).await;
    assert_eq!(still["result"]["status"], "working", "{still}");
    let cancelled = ask(&mut windows[0], "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    for w in &mut windows {
        w.close().await;
    }
}
