//! Noisy and misbehaving servers and clients: stderr floods, garbage on stdout, oversized
//! messages both ways and malformed client input.

use super::error_message;
use crate::support::{FIXTURE, Scratch, fixture, ready, serve, serve_fixtures, serve_ready, text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_flood_does_not_stall_the_hub() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"noisy": fixture(&["--stderr-flood", "200000"]), "quiet": fixture(&[])}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["noisy:echo", "quiet:echo"]).await;

    for server in ["quiet", "noisy"] {
        let t0 = Instant::now();
        assert_eq!(
            text(
                &c.call(&format!("{server}:echo"), json!({"message": server}))
                    .await
            ),
            server
        );
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "{server}:echo took {:?} during the flood",
            t0.elapsed()
        );
    }
    // 100 000 more lines (10 MB) written while the call is in progress.
    let t0 = Instant::now();
    assert_eq!(
        text(&c.call("noisy:flood", json!({"lines": 100_000})).await),
        "flooded"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "flood call took {:?}",
        t0.elapsed()
    );
    let t0 = Instant::now();
    assert_eq!(
        text(&c.call("quiet:echo", json!({"message": "q"})).await),
        "q"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());

    hub.wait_log("not logged", Duration::from_secs(5)).await;
    let logged = hub.stderr().matches("fixture: flood line").count();
    assert!(
        logged < 5_000,
        "{logged} of 300 000 flood lines reached the hub's log: not rate limited"
    );
    assert!(logged > 0, "none of the server's stderr was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suppressed_stderr_lines_are_reported_after_a_short_burst() {
    let mut hub = serve_ready(
        json!({"noisy": fixture(&["--stderr-flood", "5000"])}),
        None,
        &["noisy:echo"],
    )
    .await;
    assert_eq!(
        text(&hub.client.call("noisy:echo", json!({"message": "x"})).await),
        "x"
    );
    // 5 000 lines arrive well within a second; 4 800 of them are not logged. Nothing more
    // is written, and the hub must still say so.
    hub.wait_log("not logged", Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_stdout_is_skipped() {
    let mut hub = serve_ready(
        json!({"g": fixture(&["--garbage-every", "2"])}),
        None,
        &["g:echo"],
    )
    .await;
    let c = &mut hub.client;
    for i in 0..10 {
        let msg = format!("message {i}");
        assert_eq!(text(&c.call("g:echo", json!({"message": msg})).await), msg);
    }
    assert_eq!(text(&c.call("g:garbage", json!({})).await), "garbage sent");
    assert_eq!(
        text(&c.call("g:echo", json!({"message": "after"})).await),
        "after"
    );
    hub.wait_log(
        "skipped a line on stdout that is not JSON-RPC",
        Duration::from_secs(5),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_reply_is_dropped_and_the_server_still_works() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"big": {"command": FIXTURE, "timeout": "60s"}}),
        Some(json!({"maxMessageSize": "64KiB"})),
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["big:echo"]).await;

    // Under the limit passes.
    let r = c.call("big:huge", json!({"bytes": 30_000})).await;
    assert_eq!(text(&r).len(), 30_000);

    // The server's timeout is 60 s: the failure must come from the dropped reply itself,
    // named as such, not from waiting it out.
    let t0 = Instant::now();
    let r = c.call("big:huge", json!({"bytes": 200_000})).await;
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(
        r.get("result").is_none(),
        "an oversized reply got through: {} bytes",
        r.to_string().len()
    );
    assert_eq!(r["error"]["code"], -32603, "{r}");
    let msg = error_message(&r);
    assert!(
        msg.contains("'big'") && msg.contains("openpact.maxMessageSize"),
        "{r}"
    );
    hub.wait_log(
        "dropped a message over the size limit",
        Duration::from_secs(5),
    )
    .await;

    assert_eq!(
        text(
            &hub.client
                .call("big:echo", json!({"message": "next"}))
                .await
        ),
        "next"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_request_is_rejected_and_the_session_goes_on() {
    let mut hub = serve_ready(
        json!({"a": fixture(&[])}),
        Some(json!({"maxMessageSize": "64KiB"})),
        &["a:echo"],
    )
    .await;
    let c = &mut hub.client;

    let big = json!({"jsonrpc": "2.0", "id": "too-big", "method": "tools/call",
        "params": {"name": "a:echo", "arguments": {"message": "x".repeat(100 * 1024)}}});
    c.send(&big).await;
    let r = c.response(&Value::Null).await;
    assert_eq!(r["error"]["code"], -32600, "{r}");
    let msg = error_message(&r);
    assert!(
        msg.contains("65536") && msg.contains("maxMessageSize"),
        "{msg}"
    );

    // A message just under the limit still passes.
    let r = c
        .call("a:echo", json!({"message": "y".repeat(60 * 1024)}))
        .await;
    assert_eq!(text(&r).len(), 60 * 1024);
    assert_eq!(
        text(&c.call("a:echo", json!({"message": "next"})).await),
        "next"
    );
    assert!(
        c.inbox
            .iter()
            .all(|m| m.get("id") != Some(&json!("too-big"))),
        "{:?}",
        c.inbox
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_client_input_gets_errors_and_the_session_goes_on() {
    let mut hub = serve_fixtures(&["a"]).await;
    let c = &mut hub.client;

    c.send_raw("this is not json").await;
    let r = c.response(&Value::Null).await;
    assert_eq!(r["error"]["code"], -32700, "{r}");
    assert_eq!(r["id"], Value::Null, "{r}");

    c.send_raw(r#"{"foo":1}"#).await;
    let r = c.response(&Value::Null).await;
    assert_eq!(r["error"]["code"], -32600, "{r}");

    c.send_raw(r#"{"jsonrpc":"2.0","id":5,"method":"ping""#)
        .await;
    let r = c.response(&Value::Null).await;
    assert_eq!(r["error"]["code"], -32700, "truncated JSON: {r}");

    c.send_raw("[]").await;
    let r = c.response(&Value::Null).await;
    assert_eq!(r["error"]["code"], -32600, "empty batch: {r}");

    // Blank lines, unknown notifications and responses to nothing get no answer.
    c.send_raw("").await;
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}}))
        .await;
    c.send(&json!({"jsonrpc": "2.0", "id": 99, "result": {}}))
        .await;
    let r = c.request("ping", json!({})).await;
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(
        text(&c.call("a:echo", json!({"message": "fine"})).await),
        "fine"
    );
    assert!(
        c.inbox.iter().all(|m| m.get("id").is_none()),
        "unexpected extra answers: {:?}",
        c.inbox
    );
}
