//! The hub's own task face: any call run as a task for a 2025-11-25 client that asks
//! (`params.task`), and for a 2026-07-28 client declaring the Tasks extension whose call
//! outlasts a second; status, results, cancelling, `notifications/tasks` and input asked
//! during a task — over a fixture server that has no tasks of its own.

use crate::support::{Client, fixture, serve_ready};
use serde_json::{Value, json};
use std::time::Duration;

const EXT: &str = "io.modelcontextprotocol/tasks";

async fn legacy_hub() -> crate::support::Hub {
    serve_ready(
        json!({"a": fixture(&[])}),
        Some(json!({"permissions": {"allow": ["a:*"]}})),
        &["a:slow"],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_runs_a_call_of_a_server_without_tasks_as_a_task() {
    let mut hub = legacy_hub().await;
    let c = &mut hub.client;
    let init = c
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
        "capabilities": {"tasks": {}}, "clientInfo": {"name": "t", "version": "0"}}),
        )
        .await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{init}"
    );
    let created = c
        .request(
            "tools/call",
            json!({"name": "a:slow", "arguments": {"ms": 1200}, "task": {"ttl": 60000}}),
        )
        .await;
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    assert_eq!(task["ttl"], 60000, "{created}");
    let id = task["taskId"].as_str().unwrap().to_string();
    let got = c.request("tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    let listed = c.request("tasks/list", json!({})).await;
    assert_eq!(
        listed["result"]["tasks"][0]["taskId"],
        id.as_str(),
        "{listed}"
    );
    // Blocks until the call is done: the server's own result, tied to the task.
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert_eq!(
        result["result"]["content"][0]["text"], "slept 1200 ms",
        "{result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    let status = c
        .wait_for("notifications/tasks/status", Duration::from_secs(5))
        .await
        .expect("a status notification");
    assert_eq!(status["params"]["taskId"], id.as_str(), "{status}");

    // Cancelled: no result, and a second cancel is refused.
    let created = c
        .request(
            "tools/call",
            json!({"name": "a:slow", "arguments": {"ms": 20000}, "task": {}}),
        )
        .await;
    let second = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let cancelled = c.request("tasks/cancel", json!({"taskId": second})).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    let result = c.request("tasks/result", json!({"taskId": second})).await;
    assert_eq!(result["error"]["code"], -32602, "{result}");
    let again = c.request("tasks/cancel", json!({"taskId": second})).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    let unknown = c.request("tasks/get", json!({"taskId": "t0000"})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    // A plain call still answers plainly.
    let plain = c.call("a:slow", json!({"ms": 10})).await;
    assert_eq!(
        plain["result"]["content"][0]["text"], "slept 10 ms",
        "{plain}"
    );
}

/// A 2026-07-28 request's `params` with its `_meta` envelope; `caps` its client capabilities.
fn modern(mut params: Value, caps: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "m", "version": "0"},
    });
    params
}

fn with_ext() -> Value {
    json!({"extensions": {EXT: {}}, "elicitation": {"form": {}}})
}

async fn poll_until(c: &mut Client, id: &str, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = c
            .request("tasks/get", modern(json!({"taskId": id}), with_ext()))
            .await;
        if got["result"]["status"] == status {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {status}: {got}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_gets_a_task_when_a_call_outlasts_a_second() {
    let mut hub = legacy_hub().await;
    let c = &mut hub.client;
    let discover = c
        .request("server/discover", modern(json!({}), with_ext()))
        .await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"][EXT],
        json!({}),
        "{discover}"
    );
    let quick = c
        .request(
            "tools/call",
            modern(
                json!({"name": "a:slow", "arguments": {"ms": 10}}),
                with_ext(),
            ),
        )
        .await;
    assert_eq!(quick["result"]["resultType"], "complete", "{quick}");
    let slow = c
        .request(
            "tools/call",
            modern(
                json!({"name": "a:slow", "arguments": {"ms": 2500}}),
                with_ext(),
            ),
        )
        .await;
    assert_eq!(slow["result"]["resultType"], "task", "{slow}");
    assert_eq!(slow["result"]["status"], "working", "{slow}");
    let id = slow["result"]["taskId"].as_str().unwrap().to_string();
    // A stream of the task's changes: where it is now, then its end.
    c.send(
        &json!({"jsonrpc": "2.0", "id": "listen", "method": "subscriptions/listen",
        "params": modern(json!({"notifications": {"taskIds": [id, "t-none"]}}), with_ext())}),
    )
    .await;
    let ack = c
        .wait_for(
            "notifications/subscriptions/acknowledged",
            Duration::from_secs(5),
        )
        .await
        .expect("an acknowledgement");
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([id]),
        "{ack}"
    );
    let done = poll_until(c, &id, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "slept 2500 ms",
        "{done}"
    );
    let mut last = Value::Null;
    while let Some(n) = c
        .wait_for("notifications/tasks", Duration::from_secs(5))
        .await
    {
        last = n;
        if last["params"]["status"] == "completed" {
            break;
        }
    }
    assert_eq!(last["params"]["status"], "completed", "{last}");
    assert_eq!(
        last["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen"
    );

    // Without the extension declared, its methods are refused saying what is missing; the
    // 2025-11-25 tasks/list is not part of this revision.
    let refused = c
        .request("tasks/get", modern(json!({"taskId": id}), json!({})))
        .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    let list = c.request("tasks/list", modern(json!({}), with_ext())).await;
    assert_eq!(list["error"]["code"], -32601, "{list}");

    let slow = c
        .request(
            "tools/call",
            modern(
                json!({"name": "a:slow", "arguments": {"ms": 20000}}),
                with_ext(),
            ),
        )
        .await;
    let id = slow["result"]["taskId"].as_str().unwrap().to_string();
    let cancel = c
        .request("tasks/cancel", modern(json!({"taskId": id}), with_ext()))
        .await;
    assert_eq!(cancel["result"]["resultType"], "complete", "{cancel}");
    poll_until(c, &id, "cancelled").await;
    // Cancelling an ended task is acknowledged the same way (SEP-2663), and changes nothing.
    let again = c
        .request("tasks/cancel", modern(json!({"taskId": id}), with_ext()))
        .await;
    assert_eq!(again["result"]["resultType"], "complete", "{again}");
    poll_until(c, &id, "cancelled").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_asked_during_a_2026_task_is_answered_with_tasks_update() {
    let mut hub = legacy_hub().await;
    let c = &mut hub.client;
    let call = c
        .request(
            "tools/call",
            modern(
                json!({"name": "a:elicit", "arguments": {"message": "Which?", "after_ms": 1500}}),
                with_ext(),
            ),
        )
        .await;
    assert_eq!(call["result"]["resultType"], "task", "{call}");
    let id = call["result"]["taskId"].as_str().unwrap().to_string();
    let asking = poll_until(c, &id, "input_required").await;
    let requests = asking["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .clone();
    assert_eq!(requests.len(), 1, "{asking}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create", "{asking}");
    assert_eq!(request["params"]["message"], "Which?", "{asking}");
    let update = c
        .request(
            "tasks/update",
            modern(
                json!({"taskId": id, "inputResponses":
                    {key.clone(): {"action": "accept", "content": {"answer": "the blue one"}}}}),
                with_ext(),
            ),
        )
        .await;
    assert_eq!(update["result"]["resultType"], "complete", "{update}");
    let done = poll_until(c, &id, "completed").await;
    let text = done["result"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("the blue one"), "{done}");
}
