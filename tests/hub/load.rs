//! Load and batches: many concurrent calls, batch arrays, `--mcp`, stale cursors,
//! server→client requests without a client capability, and requests at startup.

use super::{fixture_tools, initialize_params};
use crate::support::{
    FIXTURE, Scratch, fixture, ready, serve, serve_fixtures, serve_ready, serve_with, text,
};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_calls_each_get_their_own_answer() {
    let mut hub = serve_fixtures(&["a", "b"]).await;
    let c = &mut hub.client;
    const N: usize = 200;
    let mut batch = String::new();
    for i in 0..N {
        let tool = if i % 2 == 0 { "a:echo" } else { "b:echo" };
        let req = json!({"jsonrpc": "2.0", "id": 10_000 + i, "method": "tools/call",
            "params": {"name": tool, "arguments": {"message": format!("{tool} #{i}")}}});
        batch.push_str(&req.to_string());
        batch.push('\n');
    }
    // One write of all 200 lines: nothing waits for an answer before the next is sent.
    c.send_raw(batch.trim_end()).await;
    let t0 = Instant::now();
    let mut seen = HashSet::new();
    for i in 0..N {
        let r = c.response(&json!(10_000 + i)).await;
        let tool = if i % 2 == 0 { "a:echo" } else { "b:echo" };
        assert_eq!(text(&r), format!("{tool} #{i}"), "{r}");
        seen.insert(i);
    }
    assert_eq!(seen.len(), N);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "200 echoes took {:?}",
        t0.elapsed()
    );
    // Nothing else with an id arrived (no duplicates).
    while let Some(m) = c.recv(Duration::from_millis(100)).await {
        assert!(m.get("id").is_none(), "unexpected extra response {m}");
    }
    assert!(
        c.inbox.iter().all(|m| m.get("id").is_none()),
        "{:?}",
        c.inbox
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_array_gets_every_answer() {
    let mut hub = serve_fixtures(&["a"]).await;
    let c = &mut hub.client;
    let batch = json!([
        {"jsonrpc": "2.0", "id": "one", "method": "tools/call", "params": {"name": "a:echo", "arguments": {"message": "first"}}},
        {"jsonrpc": "2.0", "id": "two", "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "three", "method": "tools/call", "params": {"name": "a:echo", "arguments": {"message": "third"}}}
    ]);
    c.send(&batch).await;
    // JSON-RPC 2.0 answers a batch with one array holding every answer.
    let answers = next_array(c).await;
    let by_id = |id: &str| -> &Value {
        answers
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("no answer for {id}: {answers:?}"))
    };
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(text(by_id("one")), "first");
    assert_eq!(by_id("two")["result"], json!({}));
    assert_eq!(text(by_id("three")), "third");

    // A batch of notifications only is answered with nothing at all.
    c.send(&json!([{"jsonrpc": "2.0", "method": "notifications/initialized"}]))
        .await;
    let r = c.request("ping", json!({})).await;
    assert_eq!(r["result"], json!({}));
    assert!(c.inbox.is_empty(), "{:?}", c.inbox);

    // A bad element is answered in place, in the same array; the rest of the batch runs.
    c.send_raw(r#"[1, {"jsonrpc": "2.0", "id": "four", "method": "ping"}]"#)
        .await;
    let answers = next_array(c).await;
    assert_eq!(answers.len(), 2, "{answers:?}");
    let four = answers.iter().find(|a| a["id"] == "four").unwrap();
    assert_eq!(four["result"], json!({}), "{answers:?}");
    let bad = answers.iter().find(|a| a["id"].is_null()).unwrap();
    assert_eq!(bad["error"]["code"], -32600, "{answers:?}");

    // A batched request the client cancels gets no answer; the array comes without it.
    c.send(&json!([
        {"jsonrpc": "2.0", "id": "long", "method": "tools/call", "params": {"name": "a:slow", "arguments": {"ms": 30000}}},
        {"jsonrpc": "2.0", "id": "five", "method": "ping"}
    ]))
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long"}}))
        .await;
    let answers = next_array(c).await;
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0]["id"], "five", "{answers:?}");
}

/// The next message, which must be a batch answer (an array).
async fn next_array(c: &mut crate::support::Client) -> Vec<Value> {
    let m = c.recv(crate::support::WAIT).await.expect("an answer");
    m.as_array()
        .unwrap_or_else(|| panic!("not one array for the batch: {m}"))
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_flag_serves_like_serve() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"a": fixture(&[])}), None);
    let mut hub = serve_with(&cfg, &["--mcp"], &[]).await;
    ready(&mut hub.client, &["a:echo"]).await;
    assert_eq!(
        text(
            &hub.client
                .call("a:echo", json!({"message": "mcp flag"}))
                .await
        ),
        "mcp flag"
    );
    let (code, took) = hub.close().await;
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_millis(2500), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_from_before_a_change_is_rejected() {
    let base = fixture_tools().await;
    let mut hub = serve_ready(
        json!({"a": fixture(&[])}),
        Some(json!({"pageSize": 7})),
        &["a:change_tools"],
    )
    .await;
    let c = &mut hub.client;
    let eighth = c.list_tools().await[7]["name"].clone();
    let r = c.request("tools/list", json!({})).await;
    let cursor = r["result"]["nextCursor"].clone();
    assert!(cursor.is_string(), "{r}");
    let r = c.request("tools/list", json!({"cursor": cursor})).await;
    assert_eq!(
        r["result"]["tools"][0]["name"], eighth,
        "the cursor does not work to begin with: {r}"
    );

    assert_eq!(text(&c.call("a:change_tools", json!({})).await), "changed");
    // Some list_changed (the one from startup may come first) is followed by the rejection.
    loop {
        let changed = c
            .wait_for("notifications/tools/list_changed", Duration::from_secs(5))
            .await;
        assert!(
            changed.is_some(),
            "the old cursor still works after the list changed"
        );
        let r = c.request("tools/list", json!({"cursor": cursor})).await;
        if r.get("error").is_some() {
            assert_eq!(r["error"]["code"], -32602, "{r}");
            break;
        }
    }
    assert_eq!(c.list_tools().await.len(), base + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_to_client_requests_are_refused_not_left_hanging() {
    // This client declares no sampling, elicitation or roots capability, so a server asking
    // for them must hear "no" at once and its tool call end instead of waiting forever.
    let mut hub = serve_ready(
        json!({"a": {"command": FIXTURE, "timeout": "60s"}}),
        None,
        &["a:echo"],
    )
    .await;
    let c = &mut hub.client;
    for tool in ["a:sample", "a:elicit", "a:roots"] {
        let t0 = Instant::now();
        let r = c.call(tool, json!({})).await;
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{tool} took {:?}",
            t0.elapsed()
        );
        assert_eq!(r["result"]["isError"], true, "{tool}: {r}");
    }
    // Nothing was sent to this client that it did not ask for.
    while let Some(m) = c.recv(Duration::from_millis(200)).await {
        assert!(m.get("id").is_none(), "unexpected request or response: {m}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_at_startup_see_every_ready_server() {
    let base = fixture_tools().await;
    // What `printf '…' | openpact serve` and every editor do: send requests the moment the
    // hub is up. A call or list that waited for startup must see every server that is ready
    // by then. Racy by nature, so repeated: when readiness was read from the servers while
    // the catalogue was rebuilt later, about half the rounds failed.
    const SERVERS: usize = 12;
    for round in 0..20 {
        let s = Scratch::new();
        let servers: serde_json::Map<String, Value> = (0..SERVERS)
            .map(|i| (format!("s{i}"), fixture(&[])))
            .collect();
        let cfg = s.servers(Value::Object(servers), None);
        let mut hub = serve(&cfg).await;
        let c = &mut hub.client;
        let mut lines = vec![
            json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": initialize_params("2025-11-25")})
                .to_string(),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        ];
        for i in 0..SERVERS {
            let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": format!("s{i}:echo"), "arguments": {"message": format!("s{i}")}}});
            lines.push(call.to_string());
        }
        lines.push(json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}).to_string());
        c.send_raw(&lines.join("\n")).await;
        for i in 0..SERVERS {
            let r = c.response(&json!(i)).await;
            assert_eq!(
                r["result"]["content"][0]["text"],
                format!("s{i}"),
                "round {round}: {r}"
            );
        }
        let r = c.response(&json!("list")).await;
        let listed = r["result"]["tools"].as_array().map_or(0, Vec::len);
        assert_eq!(
            listed,
            SERVERS * base,
            "round {round}: a ready server is missing from the list"
        );
    }
}
