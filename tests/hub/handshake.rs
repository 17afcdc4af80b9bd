//! What a client hears around its handshake: nothing the hub sends on its own before
//! `notifications/initialized`, and `list_changed` only for lists it was given and that
//! changed since.

use crate::support::{WAIT, fixture, names, serve_config, text};
use serde_json::{Value, json};
use std::time::Duration;

/// Messages among `inbox` that announce a list change.
fn announcements(inbox: &std::collections::VecDeque<Value>) -> Vec<&Value> {
    inbox
        .iter()
        .filter(|m| {
            m["method"]
                .as_str()
                .is_some_and(|n| n.ends_with("/list_changed"))
        })
        .collect()
}

/// A server that asks the client something as soon as it is up (server-everything asks for
/// roots) must not reach the client before the client's `initialized`: the request waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_wait_for_the_clients_initialized() {
    let mut hub = serve_config(json!({"a": fixture(&["--roots-at-start"])}), None).await;
    let c = &mut hub.client;
    let init = c
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {"roots": {"listChanged": true}},
                   "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    assert_eq!(init["result"]["serverInfo"]["name"], "openpact", "{init}");
    assert!(
        c.inbox.is_empty(),
        "sent before the initialize reply: {:?}",
        c.inbox
    );
    // The server asks right after its own handshake; give the question time to arrive.
    hub.wait_log("ready server=a", WAIT).await;
    let c = &mut hub.client;
    let early = c.recv(Duration::from_millis(700)).await;
    assert!(
        early.is_none(),
        "sent before notifications/initialized: {early:?}"
    );
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let ask = c
        .wait_for("roots/list", WAIT)
        .await
        .expect("the held request arrives after initialized");
    c.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": []}}))
        .await;
    hub.wait_log("fixture: client answered roots/list", WAIT)
        .await;
}

/// A hub whose `slow` server becomes ready after the `initialize` answer (750 ms at most).
async fn slow_hub() -> crate::support::Hub {
    serve_config(
        json!({"fast": fixture(&[]), "slow": fixture(&["--init-delay-ms", "1500"])}),
        None,
    )
    .await
}

/// A server finishing its start after the handshake changes lists the client has not asked
/// for yet: nothing to announce (Gemini CLI re-lists on every announcement and warns about
/// every tool it sees twice). A change to a list it was given is announced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_list_changed_for_lists_the_client_was_not_given() {
    let mut hub = slow_hub().await;
    let c = &mut hub.client;
    let init = c.initialize().await;
    assert!(init["capabilities"]["prompts"].is_object(), "{init}");
    hub.wait_log("ready server=slow", WAIT).await;
    let c = &mut hub.client;
    let heard = c.recv(Duration::from_millis(700)).await;
    assert!(heard.is_none(), "announced a list never given: {heard:?}");

    let tools = names(&c.list_tools().await);
    assert!(tools.contains(&"slow:echo".to_string()), "{tools:?}");
    assert_eq!(
        text(&c.call("slow:change_tools", json!({})).await),
        "changed"
    );
    assert!(
        c.wait_for("notifications/tools/list_changed", WAIT)
            .await
            .is_some(),
        "a change to the list the client has was not announced"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Some(m) = c.recv(Duration::from_millis(50)).await {
        c.inbox.push_back(m);
    }
    assert!(announcements(&c.inbox).is_empty(), "{:?}", c.inbox);
}

/// A `tools/list` sent while a server is still starting waits for it: its answer already
/// holds that server's tools, so no announcement may come before or after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_that_already_holds_the_change_is_not_announced() {
    let mut hub = slow_hub().await;
    let c = &mut hub.client;
    c.initialize().await;
    let tools = names(&c.list_tools().await);
    assert!(
        tools.contains(&"slow:echo".to_string()) && tools.contains(&"fast:echo".to_string()),
        "{tools:?}"
    );
    while let Some(m) = c.recv(Duration::from_millis(500)).await {
        c.inbox.push_back(m);
    }
    assert!(announcements(&c.inbox).is_empty(), "{:?}", c.inbox);
}
