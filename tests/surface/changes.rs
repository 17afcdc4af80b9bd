//! Resource subscriptions, `list_changed`, and the state (log level, subscriptions) a
//! restarted server gets back.

use super::{
    QUIET, expect_no_update, expect_update, ready_hub, two_ready, two_servers, until_tools,
};
use crate::support::{Scratch, WAIT, error_code, text};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_reach_the_client_only_while_it_is_subscribed() {
    let mut hub = two_ready(json!({})).await;
    let c = &mut hub.client;
    let uri = "fixture://static/1";

    let r = c.request("resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(r["result"], json!({}), "{r}");
    c.call("a:touch", json!({"uri": uri})).await;
    expect_update(c, uri, WAIT).await;

    c.call("a:touch", json!({"uri": "fixture://static/2"}))
        .await;
    expect_no_update(c, "static/2 was never subscribed").await;

    // Subscribing twice is one subscription: one unsubscribe ends it.
    let r = c.request("resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(r["result"], json!({}), "{r}");
    let r = c
        .request("resources/unsubscribe", json!({"uri": uri}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    c.call("a:touch", json!({"uri": uri})).await;
    expect_no_update(c, "unsubscribed").await;

    // A URI no server offers cannot be subscribed to.
    let r = c
        .request("resources/subscribe", json!({"uri": "nope://x"}))
        .await;
    assert_eq!(error_code(&r), -32002, "{r}");

    // And subscribing again works again.
    c.request("resources/subscribe", json!({"uri": uri})).await;
    c.call("a:touch", json!({"uri": uri})).await;
    expect_update(c, uri, WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_adding_a_tool_is_announced_and_the_tool_works() {
    let mut hub = two_ready(json!({})).await;
    let c = &mut hub.client;
    // Let any announcements from start-up pass first.
    while c.recv(Duration::from_millis(200)).await.is_some() {}
    c.inbox.clear();

    assert_eq!(text(&c.call("a:change_tools", json!({})).await), "changed");
    assert!(
        c.wait_for("notifications/tools/list_changed", WAIT)
            .await
            .is_some(),
        "no tools/list_changed"
    );
    until_tools(c, &["a:late_tool"]).await;
    let tools = c.list_tools().await;
    assert!(
        !tools.iter().any(|t| t["name"] == "b:late_tool"),
        "b never changed"
    );
    assert_eq!(text(&c.call("a:late_tool", json!({})).await), "late");
    let r = c.call("b:late_tool", json!({})).await;
    assert_eq!(error_code(&r), -32602, "{r}");
}

// ---------------------------------------------------------------------------------------
// Restart
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_gets_the_log_level_and_subscriptions_back() {
    let s = Scratch::new();
    let cfg = two_servers(
        &s,
        Some(json!({"restart": {"initialBackoff": "50ms", "maxBackoff": "200ms"}})),
    );
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;
    let uri = "fixture://static/1";

    c.request("logging/setLevel", json!({"level": "warning"}))
        .await;
    let r = c.request("resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(r["result"], json!({}), "{r}");
    c.call("a:touch", json!({"uri": uri})).await;
    expect_update(c, uri, WAIT).await;

    let r = c.call("a:crash", json!({})).await;
    assert_eq!(error_code(&r), -32010, "{r}");
    let deadline = Instant::now() + WAIT;
    loop {
        let r = c.call("a:echo", json!({"message": "back?"})).await;
        if r["result"]["content"][0]["text"] == "back?" {
            break;
        }
        assert!(Instant::now() < deadline, "a never came back: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The subscription is restored upstream (the replay may trail the server's first answer
    // by a moment, so allow a few touches).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        c.call("a:touch", json!({"uri": uri})).await;
        if let Some(n) = c
            .wait_for(
                "notifications/resources/updated",
                Duration::from_millis(200),
            )
            .await
        {
            assert_eq!(n["params"]["uri"], uri, "{n}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no resources/updated after the restart: the subscription was not replayed"
        );
    }
    c.call("a:log", json!({"level": "info", "message": "quiet"}))
        .await;
    c.call("a:log", json!({"level": "error", "message": "loud"}))
        .await;
    let n = c
        .wait_for("notifications/message", WAIT)
        .await
        .expect("the error message");
    assert_eq!(n["params"]["data"], "loud", "{n}");
    assert_eq!(n["params"]["logger"], "a/fixture", "{n}");
    if let Some(n) = c.wait_for("notifications/message", QUIET).await {
        panic!("below the level after the restart, yet delivered: {n}");
    }
}
