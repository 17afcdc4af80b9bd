//! `logging/setLevel` and log messages naming their server, and progress notifications
//! reaching the requester under its own token.

use super::{QUIET, two_ready};
use crate::support::{LOG_LEVELS, WAIT, error_code, send_request, text};
use serde_json::{Value, json};
use std::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_level_filters_log_messages_and_loggers_name_the_server() {
    let mut hub = two_ready(json!({})).await;
    let c = &mut hub.client;

    let r = c
        .request("logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");

    c.call(
        "a:log",
        json!({"level": "error", "message": "disk on fire"}),
    )
    .await;
    let n = c
        .wait_for("notifications/message", WAIT)
        .await
        .expect("an error-level log message");
    assert_eq!(
        n["params"],
        json!({"level": "error", "logger": "a/fixture", "data": "disk on fire"}),
        "{n}"
    );
    c.call("b:log", json!({"level": "critical", "message": "from b"}))
        .await;
    let n = c
        .wait_for("notifications/message", WAIT)
        .await
        .expect("a critical log message");
    assert_eq!(n["params"]["logger"], "b/fixture", "{n}");
    assert_eq!(n["params"]["level"], "critical", "{n}");

    c.call("a:log", json!({"level": "info", "message": "chatter"}))
        .await;
    c.call("b:log", json!({"level": "debug", "message": "chatter"}))
        .await;
    if let Some(n) = c.wait_for("notifications/message", QUIET).await {
        panic!("below the level, yet delivered: {n}");
    }

    for bad in [json!({"level": "loud"}), json!({}), json!({"level": 3})] {
        let r = c.request("logging/setLevel", bad.clone()).await;
        assert_eq!(error_code(&r), -32602, "{bad}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_debug_every_level_arrives() {
    let mut hub = two_ready(json!({})).await;
    let c = &mut hub.client;
    let r = c
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    for level in LOG_LEVELS {
        c.call(
            "a:log",
            json!({"level": level, "message": format!("at {level}")}),
        )
        .await;
        let n = c
            .wait_for("notifications/message", WAIT)
            .await
            .unwrap_or_else(|| panic!("no {level} message"));
        assert_eq!(
            n["params"],
            json!({"level": level, "logger": "a/fixture", "data": format!("at {level}")}),
            "{n}"
        );
    }
    assert!(
        c.inbox
            .iter()
            .all(|m| m["method"] != "notifications/message")
    );
}

// ---------------------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_requester_under_its_own_token() {
    let mut hub = two_ready(json!({})).await;
    let c = &mut hub.client;

    let args = json!({"steps": 4, "ms": 20});
    let progress_call = |server: &str, token: Option<Value>| {
        let mut params = json!({"name": format!("{server}:progress"), "arguments": args});
        if let Some(t) = token {
            params["_meta"] = json!({"progressToken": t});
        }
        params
    };
    // (id, token) of every call, all in flight at once.
    let mut calls: Vec<(Value, Option<Value>)> = Vec::new();
    for (server, token) in [
        ("a", Some(json!("x"))),
        ("b", Some(json!("y"))),
        ("a", Some(json!(7))),
        ("a", Some(json!("same"))),
        ("b", Some(json!("same"))),
        ("b", None),
    ] {
        let id = send_request(c, "tools/call", progress_call(server, token.clone())).await;
        calls.push((id, token));
    }

    // Everything in arrival order until the last response.
    let mut seen: Vec<Value> = c.inbox.drain(..).collect();
    let deadline = Instant::now() + WAIT;
    let answered =
        |seen: &[Value], id: &Value| seen.iter().any(|m| m["id"] == *id && m["method"].is_null());
    while !calls.iter().all(|(id, _)| answered(&seen, id)) {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = c
            .recv(left)
            .await
            .unwrap_or_else(|| panic!("not every call answered; got {seen:?}"));
        seen.push(m);
    }

    let response_at = |id: &Value| {
        seen.iter()
            .position(|m| m["id"] == *id && m["method"].is_null())
            .unwrap()
    };
    for (id, _) in &calls {
        let r = &seen[response_at(id)];
        assert_eq!(text(r), "done 4", "{r}");
    }
    let progress: Vec<(usize, &Value)> = seen
        .iter()
        .enumerate()
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .map(|(i, m)| (i, &m["params"]))
        .collect();
    // Only tokens the client used come back, with their JSON type intact.
    for (_, p) in &progress {
        let t = &p["progressToken"];
        assert!(
            [json!("x"), json!("y"), json!(7), json!("same")].contains(t),
            "a token the client never used: {p}"
        );
    }
    for (id, token) in &calls[..3] {
        let token = token.as_ref().unwrap();
        let mine: Vec<&(usize, &Value)> = progress
            .iter()
            .filter(|(_, p)| p["progressToken"] == *token)
            .collect();
        let values: Vec<u64> = mine
            .iter()
            .map(|(_, p)| p["progress"].as_u64().unwrap())
            .collect();
        assert_eq!(values, [1, 2, 3, 4], "token {token}: {mine:?}");
        assert!(
            mine.iter().all(|(_, p)| p["total"] == 4),
            "token {token}: {mine:?}"
        );
        let answer = response_at(id);
        assert!(
            mine.iter().all(|(i, _)| *i < answer),
            "progress for {token} after its response: {seen:?}"
        );
    }
    // Two requests shared a token: each still got its own four, before its answer.
    let same: Vec<usize> = progress
        .iter()
        .filter(|(_, p)| p["progressToken"] == "same")
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(same.len(), 8, "{seen:?}");
    let last_answer = response_at(&calls[3].0).max(response_at(&calls[4].0));
    let first_answer = response_at(&calls[3].0).min(response_at(&calls[4].0));
    assert!(same.iter().all(|i| *i < last_answer), "{seen:?}");
    assert!(
        same.iter().filter(|i| **i < first_answer).count() >= 4,
        "{seen:?}"
    );
    assert_eq!(
        progress.len(),
        4 * 5,
        "the call without a token got progress"
    );
}
