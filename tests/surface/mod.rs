//! The MCP surface beyond tools, through the hub: resources (merged, paginated, routed by URI
//! and template, subscriptions), prompts, completion, logging, progress, server→client
//! requests (sampling, elicitation, roots), `list_changed`, state replayed after a restart,
//! and the CLI commands for resources and prompts. This module holds what they share: two
//! fixture servers, a client declaring capabilities, and list and update helpers.
//!
//! - `resources`: capabilities and resources.
//! - `prompts`: prompts and completion.
//! - `logging`: log levels and messages, progress.
//! - `server_requests`: sampling, elicitation and roots.
//! - `changes`: subscriptions, list changes, and the state a restarted server gets back.
//! - `cli`: the CLI commands for resources and prompts.

mod changes;
mod cli;
mod logging;
mod prompts;
mod resources;
mod server_requests;

use crate::support::{Client, Hub, Scratch, WAIT, fixture, serve};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long "nothing arrives" is watched for. Notifications caused by a tool call reach the
/// client before its response, so this is a safety margin rather than a race.
const QUIET: Duration = Duration::from_millis(500);

/// Two fixture servers, `a` then `b` (with distinct `serverInfo` names).
fn two_servers(s: &Scratch, openpact: Option<Value>) -> PathBuf {
    s.servers(
        json!({"a": fixture(&["--name", "fa"]), "b": fixture(&["--name", "fb"])}),
        openpact,
    )
}

/// `initialize` declaring `capabilities`, then `notifications/initialized`; the result.
async fn initialize_with(c: &mut Client, capabilities: Value) -> Value {
    let r = c.initialize_as(capabilities, "surface-test").await;
    assert!(r.get("result").is_some(), "initialize failed: {r}");
    r["result"].clone()
}

/// Every server→client capability the hub can bridge.
fn all_client_caps() -> Value {
    json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})
}

/// The names of all tools, following `nextCursor`; None when the list changed between pages
/// (the hub then rejects the stale cursor, as it should).
async fn tool_names(c: &mut Client) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut params = json!({});
    loop {
        let r = c.request("tools/list", params).await;
        if r["error"]["code"] == -32602 {
            return None;
        }
        let tools = r["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in {r}"));
        names.extend(
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(String::from)),
        );
        match r["result"].get("nextCursor").and_then(Value::as_str) {
            Some(cursor) => params = json!({"cursor": cursor}),
            None => return Some(names),
        }
    }
}

/// Lists tools until every name in `want` is served; panics after `WAIT`.
async fn until_tools(c: &mut Client, want: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let names = tool_names(c).await.unwrap_or_default();
        if want.iter().all(|w| names.iter().any(|n| n == w)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{want:?} not all served within {WAIT:?}; tools: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts the hub on `cfg`, initializes with `capabilities` and waits for `want` tools.
async fn ready_hub(cfg: &Path, capabilities: Value, want: &[&str]) -> Hub {
    let mut hub = serve(cfg).await;
    initialize_with(&mut hub.client, capabilities).await;
    until_tools(&mut hub.client, want).await;
    hub
}

/// The hub over [`two_servers`] in a scratch dir of its own, initialized with `capabilities`,
/// once `a:echo` and `b:echo` are served.
async fn two_ready(capabilities: Value) -> Hub {
    let s = Scratch::new();
    let hub = ready_hub(&two_servers(&s, None), capabilities, &["a:echo", "b:echo"]).await;
    hub.owning(s)
}

/// Waits for a `notifications/resources/updated` for `uri`; other updates are failures.
async fn expect_update(c: &mut Client, uri: &str, limit: Duration) {
    let n = c
        .wait_for("notifications/resources/updated", limit)
        .await
        .unwrap_or_else(|| panic!("no resources/updated for {uri} within {limit:?}"));
    assert_eq!(n["params"]["uri"], uri, "{n}");
}

async fn expect_no_update(c: &mut Client, why: &str) {
    if let Some(n) = c.wait_for("notifications/resources/updated", QUIET).await {
        panic!("{why}, yet the client got {n}");
    }
}
