//! Progress and cancellation of a program: `run_code` with a progress token hears one
//! `notifications/progress` per inner call done; cancelling `run_code` while its program
//! waits on `fx:slow` kills the worker at once and cancels the call at the fixture; cancelling
//! it while its call is being asked about frees the prompt for the next call.

use super::{a_worker, and_code_on, code_on, no_workers_within, program, run_ok};
use crate::policy::{call_prompted, calls, prompt, started};
use crate::support::{
    Scratch, WAIT, accept, answer, fixture, send_call, send_request, serve_ready, text,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_inner_call_reports_progress_on_run_codes_token() {
    let mut hub = serve_ready(
        json!({"fx": fixture(&[])}),
        Some(code_on(json!({}))),
        &["fx:echo"],
    )
    .await;
    let c = &mut hub.client;
    let code = "for m in [\"a\", \"b\", \"c\"]:\n    call(\"fx:echo\", {\"message\": m})\n\
                parallel([[\"fx:add\", {\"a\": 1, \"b\": 2}], [\"fx:echo\", {\"message\": \"d\"}]])\n\
                \"done\"\n";
    let id = send_request(
        c,
        "tools/call",
        json!({"name": "run_code", "arguments": {"code": code},
               "_meta": {"progressToken": "code-progress"}}),
    )
    .await;
    let r = c.response(&id).await;
    assert_eq!(text(&r), "\"done\"", "{r}");
    let progress: Vec<Value> = c
        .inbox
        .drain(..)
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"].clone())
        .collect();
    assert!(
        progress
            .iter()
            .all(|p| p["progressToken"] == "code-progress"),
        "{progress:#?}"
    );
    let done: Vec<u64> = progress
        .iter()
        .map(|p| p["progress"].as_u64().unwrap())
        .collect();
    assert_eq!(done, [1, 2, 3, 4, 5], "one per inner call: {progress:#?}");
    assert_eq!(progress[2]["message"], "3 tool calls done", "{progress:#?}");

    // Without a token, none.
    run_ok(c, "call(\"fx:echo\", {\"message\": \"quiet\"})\n").await;
    while let Some(m) = c.recv(Duration::from_millis(200)).await {
        c.inbox.push_back(m);
    }
    assert!(
        !c.inbox
            .iter()
            .any(|m| m["method"] == "notifications/progress"),
        "{:?}",
        c.inbox
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_run_code_kills_the_worker_and_cancels_the_call_upstream() {
    let mut hub = serve_ready(
        json!({"fx": fixture(&[])}),
        Some(code_on(json!({}))),
        &["fx:echo"],
    )
    .await;
    let hub_pid = hub.child.id().unwrap();
    let c = &mut hub.client;
    let before = calls(c).await;
    let id = send_call(
        c,
        "run_code",
        program("call(\"fx:slow\", {\"ms\": 30000})\n\"never\"\n", None),
    )
    .await;
    // Until the slow call has reached the fixture (each probe counts itself too).
    let deadline = Instant::now() + WAIT;
    for probes in 1.. {
        let now = calls(c).await;
        if now - before - probes == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "fx:slow never reached the fixture"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let worker = a_worker(hub_pid).await;
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "the user changed their mind"}}),
    )
    .await;
    no_workers_within(hub_pid, Duration::from_secs(1)).await;
    // A killed process leaves /proc a moment after its command line (a loaded machine).
    let deadline = Instant::now() + Duration::from_secs(5);
    while crate::support::alive(worker) {
        assert!(
            Instant::now() < deadline,
            "the worker {worker} outlived its program"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The fixture heard the cancel of its slow call.
    let deadline = Instant::now() + WAIT;
    loop {
        let r = c.call("fx:cancelled", json!({})).await;
        let ids: Vec<Value> = serde_json::from_str(&text(&r)).unwrap();
        if !ids.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the fixture never heard a cancel"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The cancelled request is not answered, and the hub runs the next program.
    assert_eq!(run_ok(c, "1 + 2\n").await, "3");
    while let Some(m) = c.recv(Duration::from_millis(300)).await {
        c.inbox.push_back(m);
    }
    let answered: Vec<&Value> = c
        .inbox
        .iter()
        .filter(|m| m["id"] == id && m.get("method").is_none())
        .collect();
    assert!(
        answered.is_empty(),
        "a cancelled program answered: {answered:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_run_code_while_its_call_is_asked_about_frees_the_prompt() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(and_code_on(
            json!({"permissions": {"default": "allow", "ask": ["fx:add"]}}),
        )),
    );
    let mut hub = started(&cfg, &[], json!({"elicitation": {}}), "code-cancel-ask").await;
    let hub_pid = hub.child.id().unwrap();
    let c = &mut hub.client;
    let before = calls(c).await;
    let id = send_call(
        c,
        "run_code",
        program("call(\"fx:add\", {\"a\": 1, \"b\": 2})\n", None),
    )
    .await;
    let asked = prompt(c).await;
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id}}),
    )
    .await;
    no_workers_within(hub_pid, Duration::from_secs(1)).await;
    // A late answer to the dropped prompt allows nothing.
    answer(c, &asked, accept("once")).await;
    // The next call that needs a prompt gets one of its own, answered as usual.
    let r = call_prompted(
        c,
        "fx:add",
        json!({"a": 2, "b": 2}),
        &["fx:add"],
        accept("once"),
    )
    .await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 4}), "{r}");
    assert_eq!(
        calls(c).await - before,
        2,
        "only the direct add and the counter"
    );
}
