//! Servers' tasks followed by the hub for an ordinary client's plain `tools/call`: a tool
//! that needs a task (server-everything's `simulate-research-query`, 2025-11-25
//! `taskSupport: "required"`; the rmcp server's `slow_count` and `ask_name`, which answer a
//! plain call -32021 naming the tasks extension) is run as the server's task and the client
//! gets the final result, input requests during the task included; the per-request `timeout`
//! does not cut a task that runs longer; cancelling the call cancels the server's task.

use crate::support::rmcp::tasks_server;
use crate::support::{Client, Peers, WAIT, send_call, serve_config, text, wait_for_tool};
use serde_json::{Value, json};
use std::time::Duration;

/// Waits for the answer to `id`, answering each `elicitation/create` with `answer` (the
/// elicitations seen are returned too).
async fn answering(c: &mut Client, id: &Value, answer: Value) -> (Value, Vec<Value>) {
    let mut asked = Vec::new();
    loop {
        let m = c
            .recv(WAIT)
            .await
            .unwrap_or_else(|| panic!("no answer to {id} within {WAIT:?}; asked {asked:?}"));
        if m["method"] == "elicitation/create" {
            c.send(&json!({"jsonrpc": "2.0", "id": m["id"], "result": answer}))
                .await;
            asked.push(m["params"].clone());
        } else if m.get("id") == Some(id) && m.get("method").is_none() {
            return (m, asked);
        }
    }
}

/// The ids of the rmcp server's tasks that logged `event` (`started`, `completed`,
/// `cancelled`, `cancel requested`) in the hub's log of its stderr.
fn tasks_that(log: &str, event: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(" task ")?;
            let (id, tail) = rest.split_once(' ')?;
            tail.starts_with(event).then(|| id.to_string())
        })
        .collect()
}

/// A 2025-11-25 task (server-everything): `tools/call` with `task`, then the blocking
/// `tasks/result`, during which the server asks for clarification; the whole takes longer
/// than the server's per-request timeout (3 s), which only each request is held to.
#[tokio::test]
async fn a_tool_that_requires_a_task_answers_a_plain_call_with_its_report() {
    let Some(peers) = Peers::get() else { return };
    let mut entry = peers.entry("PEER_EVERYTHING", &[]);
    entry["timeout"] = json!("3s");
    let mut hub = serve_config(json!({ "everything": entry }), None).await;
    let c = &mut hub.client;
    c.initialize_as(json!({"elicitation": {}}), "test").await;
    wait_for_tool(c, "everything:simulate-research-query", WAIT).await;
    let id = send_call(
        c,
        "everything:simulate-research-query",
        json!({"topic": "python", "ambiguous": true}),
    )
    .await;
    let (r, asked) = answering(
        c,
        &id,
        json!({"action": "accept", "content": {"interpretation": "programming"}}),
    )
    .await;
    assert!(r.get("error").is_none(), "{r}");
    let report = text(&r);
    assert!(
        report.contains("# Research Report: python (programming)"),
        "{r}"
    );
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0]["message"].as_str().unwrap().contains("python"),
        "{asked:?}"
    );
    // The server's own task id stays between the hub and the server.
    assert!(
        r["result"]["_meta"]
            .get("io.modelcontextprotocol/related-task")
            .is_none(),
        "{r}"
    );
}

/// The extension (rmcp, spoken to through `initialize`): a call the server refuses without a
/// task is run as one, polled to its end (3 s of counting under a 1 s per-request timeout); a
/// tool with no task answers as ever.
#[tokio::test]
async fn an_extension_task_is_followed_to_its_result() {
    extension_task_followed("legacy").await;
}

/// The same with the server spoken to in 2026-07-28 (`server/discover`, per-request `_meta`).
#[tokio::test]
async fn an_extension_task_is_followed_to_its_result_in_2026_07_28() {
    extension_task_followed("2026-07-28").await;
}

async fn extension_task_followed(protocol: &str) {
    let mut entry = tasks_server("1s");
    entry["protocol"] = json!(protocol);
    let mut hub = serve_config(json!({ "tasks": entry }), None).await;
    let c = &mut hub.client;
    c.initialize().await;
    wait_for_tool(c, "tasks:slow_count", WAIT).await;
    let r = c.call("tasks:slow_count", json!({"seconds": 3})).await;
    assert_eq!(text(&r), "counted to 3", "{r}");
    let r = c.call("tasks:quick", json!({})).await;
    assert_eq!(text(&r), "quick", "{r}");
    hub.wait_log("completed", WAIT).await;
    let log = hub.stderr();
    assert_eq!(tasks_that(&log, "started").len(), 1, "{log}");
    assert_eq!(tasks_that(&log, "started"), tasks_that(&log, "completed"));
}

/// The extension's `input_required`: the task's elicitation reaches the client as a request,
/// and its answer goes back with `tasks/update`.
#[tokio::test]
async fn an_extension_tasks_input_request_is_answered_by_the_client() {
    extension_input_answered("legacy").await;
}

#[tokio::test]
async fn an_extension_tasks_input_request_is_answered_by_the_client_in_2026_07_28() {
    extension_input_answered("2026-07-28").await;
}

async fn extension_input_answered(protocol: &str) {
    let mut entry = tasks_server("10s");
    entry["protocol"] = json!(protocol);
    let mut hub = serve_config(json!({ "tasks": entry }), None).await;
    let c = &mut hub.client;
    c.initialize_as(json!({"elicitation": {}}), "test").await;
    wait_for_tool(c, "tasks:ask_name", WAIT).await;
    let id = send_call(c, "tasks:ask_name", json!({})).await;
    let (r, asked) = answering(
        c,
        &id,
        json!({"action": "accept", "content": {"name": "Ada"}}),
    )
    .await;
    assert_eq!(text(&r), "Hello, Ada!", "{r}");
    assert_eq!(asked.len(), 1, "asked once, not on every poll: {asked:?}");
    assert_eq!(asked[0]["message"], "What is your name?");
}

/// Cancelling the client's call cancels the server's task: the server hears `tasks/cancel`
/// and the task ends cancelled.
#[tokio::test]
async fn cancelling_the_call_cancels_the_servers_task() {
    let mut hub = serve_config(json!({ "tasks": tasks_server("10s") }), None).await;
    let c = &mut hub.client;
    c.initialize().await;
    wait_for_tool(c, "tasks:slow_count", WAIT).await;
    let id = send_call(c, "tasks:slow_count", json!({"seconds": 60})).await;
    hub.wait_log("started", WAIT).await;
    hub.client
        .send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": id, "reason": "the user gave up"}}),
        )
        .await;
    let started = tasks_that(&hub.stderr(), "started");
    assert_eq!(started.len(), 1);
    hub.wait_log(&format!("task {} cancelled", started[0]), WAIT)
        .await;
    let log = hub.stderr();
    assert_eq!(tasks_that(&log, "cancel requested"), started, "{log}");
    assert!(tasks_that(&log, "completed").is_empty(), "{log}");
    hub.wait_log(&format!("task={} ok=true", started[0]), WAIT)
        .await;
}

/// The same with a 2025-11-25 server (server-everything), which accepts the `tasks/cancel`.
#[tokio::test]
async fn cancelling_the_call_cancels_a_2025_11_25_task() {
    let Some(peers) = Peers::get() else { return };
    let entry = peers.entry("PEER_EVERYTHING", &[]);
    let mut hub = serve_config(json!({ "everything": entry }), None).await;
    let c = &mut hub.client;
    c.initialize().await;
    wait_for_tool(c, "everything:simulate-research-query", WAIT).await;
    let id = send_call(
        c,
        "everything:simulate-research-query",
        json!({"topic": "rust"}),
    )
    .await;
    hub.wait_log("following the server's task", WAIT).await;
    hub.client
        .send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": id, "reason": "the user gave up"}}),
        )
        .await;
    hub.wait_log("cancelled the server's task", WAIT).await;
    let log = hub.stderr();
    let line = log
        .lines()
        .find(|l| l.contains("cancelled the server's task"))
        .unwrap();
    assert!(line.contains("ok=true"), "{line}");
    // The call was cancelled: no answer comes (the research would have ended by now).
    while let Some(m) = hub.client.recv(Duration::from_secs(5)).await {
        assert_ne!(m.get("id"), Some(&id), "{m}");
    }
}
