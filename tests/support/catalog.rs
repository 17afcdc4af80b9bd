//! The hub's tool catalogue as tests see it: tool names, waiting until tools are listed,
//! sending requests without waiting, and reading results and errors.

use super::{Client, WAIT};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// RFC 5424 severities in increasing order, as MCP's `logging/setLevel` uses them.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// The text of the first content block of a `tools/call` response.
pub fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {response}"))
        .to_string()
}

/// Whether a `tools/call` response is a tool error (`isError`), not a protocol error.
pub fn is_error(r: &Value) -> bool {
    r["result"]["isError"] == true
}

/// The code of a JSON-RPC error response.
pub fn error_code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected a JSON-RPC error, got {r}"))
}

/// The names of listed tools.
pub fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .unwrap_or_else(|| panic!("tool without a name: {t}"))
                .to_string()
        })
        .collect()
}

/// Lists tools until their names satisfy `done`, waiting for
/// `notifications/tools/list_changed` between attempts; panics after `limit`.
pub async fn wait_for_tools(
    client: &mut Client,
    done: impl Fn(&[String]) -> bool,
    limit: Duration,
) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    loop {
        let tools = client.list_tools().await;
        if done(&names(&tools)) {
            return tools;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if client
            .wait_for("notifications/tools/list_changed", left)
            .await
            .is_none()
        {
            panic!(
                "the tool list did not change as expected within {limit:?}; tools: {:?}",
                names(&tools)
            );
        }
    }
}

pub async fn wait_for_tool(client: &mut Client, name: &str, limit: Duration) -> Vec<Value> {
    wait_for_tools(client, |t| t.iter().any(|n| n == name), limit).await
}

/// `initialize`, then waits until each of `tools` is listed. Requests sent the moment the
/// hub starts can race its catalogue (see `hub::load::requests_at_startup_see_every_ready_server`);
/// tests about something else start from a settled hub.
pub async fn ready(c: &mut Client, tools: &[&str]) {
    c.initialize().await;
    for t in tools {
        wait_for_tool(c, t, WAIT).await;
    }
}

/// `initialize`, then lists tools (every 100 ms) until every name in `want` is there.
pub async fn ready_polling(c: &mut Client, want: &[&str]) -> Vec<Value> {
    c.initialize().await;
    let deadline = Instant::now() + WAIT;
    loop {
        let tools = c.list_tools().await;
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        if want.iter().all(|w| names.contains(w)) {
            return tools;
        }
        assert!(
            Instant::now() < deadline,
            "tools {want:?} not all listed within {WAIT:?}; got {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends a request without waiting; returns its id.
pub async fn send_request(c: &mut Client, method: &str, params: Value) -> Value {
    let id = json!(c.next_id());
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .await;
    id
}

/// Sends a `tools/call` without waiting; returns its id.
pub async fn send_call(c: &mut Client, name: &str, arguments: Value) -> Value {
    send_request(
        c,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await
}
