//! rmcp's client (the Rust SDK, 2026-07-28, declaring the Tasks extension) through the hub to
//! the rmcp task server: its call becomes a task it polls with `tasks/get`, whose status
//! message is the server's own; a question the server asks during its task is answered; a
//! cancel reaches the server's task.

use crate::support::rmcp::{obj, tasks_server, transport};
use crate::support::{Scratch, WAIT, openpact_for};
use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetTaskParams, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use serde_json::{Value, json};
use std::time::Duration;

/// Declares the Tasks extension and form elicitation, answering each question with "Ada".
#[derive(Clone, Default)]
struct TaskClient;

impl rmcp::ClientHandler for TaskClient {
    async fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        Ok(
            serde_json::from_value(json!({"action": "accept", "content": {"name": "Ada"}}))
                .unwrap(),
        )
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2026-07-28",
            "capabilities": {
                "elicitation": {"form": {}},
                "extensions": {"io.modelcontextprotocol/tasks": {}},
            },
            "clientInfo": {"name": "rmcp-tasks", "version": "0"},
        }))
        .unwrap()
    }
}

async fn client(
    sc: &Scratch,
) -> (
    RunningService<RoleClient, TaskClient>,
    crate::support::StderrLog,
) {
    let config = sc.servers(
        json!({"rt": tasks_server("5s")}),
        Some(json!({"permissions": {"allow": ["rt:*"]}})),
    );
    let mut cmd = openpact_for(&config, None);
    // Servers' stderr lines reach the hub's log at debug.
    cmd.arg("serve").env("OPENPACT_LOG", "info,openpact=debug");
    let (transport, log) = transport(cmd);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = tokio::time::timeout(WAIT, TaskClient.serve_with_lifecycle(transport, lifecycle))
        .await
        .expect("discover in time")
        .expect("rmcp discover");
    (client, log)
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_string()).with_arguments(obj(args))
}

/// `tasks/get` until the task is `status`, with every status message seen on the way.
async fn until(
    c: &RunningService<RoleClient, TaskClient>,
    id: &str,
    status: &str,
) -> (Value, Vec<String>) {
    let mut messages = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = c
            .peer()
            .get_task(GetTaskParams::new(id))
            .await
            .expect("tasks/get");
        let got = serde_json::to_value(got).unwrap();
        if let Some(m) = got["statusMessage"].as_str() {
            messages.push(m.to_string());
        }
        if got["status"] == status {
            return (got, messages);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {status}: {got}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcps_2026_client_runs_the_rmcp_servers_tasks_through_the_hub() {
    let sc = Scratch::new();
    let (c, log) = client(&sc).await;
    let tools = c.peer().list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "rt:slow_count"), "{tools:?}");

    // A long count: a task, whose status message is the server's own, then its result.
    let created = c
        .peer()
        .call_tool_once(call("rt:slow_count", json!({"seconds": 3})))
        .await
        .expect("tools/call");
    let CallToolResponse::Task(task) = created else {
        panic!("not a task: {created:?}");
    };
    let (done, messages) = until(&c, &task.task.task_id, "completed").await;
    assert!(
        messages.iter().any(|m| m.starts_with("counted ")),
        "the server's status messages: {messages:?}; {}",
        log.text()
    );
    let result = done["result"].to_string();
    assert!(result.contains('3'), "{done}");

    // The server asks for a name during its task: asked of the client as the hub's own
    // input-required result (the task is not the client's yet), answered, then the task's
    // end.
    let mut params = serde_json::to_value(call("rt:ask_name", json!({}))).unwrap();
    let mut rounds = 0;
    let text = loop {
        let p = serde_json::from_value(params.clone()).unwrap();
        match c
            .peer()
            .call_tool_once(p)
            .await
            .expect("tools/call ask_name")
        {
            CallToolResponse::InputRequired(r) => {
                let r = serde_json::to_value(r).unwrap();
                let keys = r["inputRequests"].as_object().unwrap().keys();
                let answers: serde_json::Map<String, Value> = keys
                    .map(|k| {
                        (
                            k.clone(),
                            json!({"action": "accept", "content": {"name": "Ada"}}),
                        )
                    })
                    .collect();
                params["inputResponses"] = Value::Object(answers);
                params["requestState"] = r["requestState"].clone();
                rounds += 1;
                assert!(rounds < 4, "asked again and again: {r}");
            }
            CallToolResponse::Task(task) => {
                break until(&c, &task.task.task_id, "completed").await.0["result"].to_string();
            }
            CallToolResponse::Complete(r) => break serde_json::to_value(r).unwrap().to_string(),
            other => panic!("ask_name: {other:?}"),
        }
    };
    assert!(text.contains("Hello, Ada!"), "{text}");
    assert_eq!(rounds, 1, "the question is asked once");

    // Cancelled by the client: the server's own task is cancelled.
    let created = c
        .peer()
        .call_tool_once(call("rt:slow_count", json!({"seconds": 30})))
        .await
        .expect("tools/call");
    let CallToolResponse::Task(task) = created else {
        panic!("not a task: {created:?}");
    };
    c.peer()
        .cancel_task(CancelTaskParams::new(task.task.task_id.clone()))
        .await
        .expect("tasks/cancel");
    until(&c, &task.task.task_id, "cancelled").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !log.text().contains("cancel requested") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server's task was not cancelled: {}",
            log.text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.cancel().await.ok();
}

/// A 2025-11-25 client asks for a task of the rmcp server's (2026-07-28 extension) tool: the
/// two tasks models meet in the hub's task, which shows the server's status messages and
/// gives the server's result through `tasks/result`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_client_asks_a_task_of_an_extension_servers_tool() {
    let mut hub = crate::support::serve_ready(
        json!({"rt": tasks_server("5s")}),
        Some(json!({"permissions": {"allow": ["rt:*"]}})),
        &["rt:slow_count"],
    )
    .await;
    let c = &mut hub.client;
    let created = c
        .request(
            "tools/call",
            json!({"name": "rt:slow_count", "arguments": {"seconds": 3}, "task": {}}),
        )
        .await;
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let mut messages = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = c.request("tasks/get", json!({"taskId": id})).await;
        if let Some(m) = got["result"]["statusMessage"].as_str() {
            messages.push(m.to_string());
        }
        if got["result"]["status"] == "completed" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{got}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        messages.iter().any(|m| m.starts_with("counted ")),
        "{messages:?}"
    );
    let result = c.request("tasks/result", json!({"taskId": id})).await;
    assert!(result["result"]["content"].is_array(), "{result}");
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
}
