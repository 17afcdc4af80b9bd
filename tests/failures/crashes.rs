//! Crashes and hangs: a crashed call fails fast, the server is restarted (or parked when it
//! keeps crashing), hung calls time out and cancellation reaches the server.

use super::{error_message, pids, send_call_with_id, until_received};
use crate::support::{
    FIXTURE, WAIT, alive, fixture, serve_fixtures, serve_ready, text, wait_for_tool, wait_for_tools,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_fails_the_call_fast_and_others_keep_serving() {
    let mut hub = serve_ready(
        json!({"good": fixture(&[]), "bad": {"command": FIXTURE, "timeout": "60s"}}),
        None,
        &["good:echo", "bad:echo"],
    )
    .await;
    let c = &mut hub.client;

    // A long call in flight on the server that is about to crash.
    let slow = json!("slow-in-flight");
    send_call_with_id(c, &slow, "bad:slow", json!({"ms": 10_000})).await;
    until_received(c, "bad", 1).await;

    let t0 = Instant::now();
    let r = c.call("bad:crash", json!({})).await;
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "crash reported after {took:?} (timeout is 60s)"
    );
    assert_eq!(r["error"]["code"], -32010, "{r}");
    let msg = error_message(&r);
    assert!(msg.contains("'bad'"), "{msg}");
    assert!(msg.contains("exited"), "{msg}");
    assert!(
        msg.contains("fixture: crashing on request"),
        "no last stderr line in: {msg}"
    );

    let r = c.response(&slow).await;
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "the in-flight call failed only after {:?}",
        t0.elapsed()
    );
    assert_eq!(r["error"]["code"], -32010, "{r}");
    assert!(error_message(&r).contains("exited"), "{r}");

    assert_eq!(
        text(&c.call("good:echo", json!({"message": "alive"})).await),
        "alive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_server_is_restarted_and_announced() {
    let mut hub = serve_fixtures(&["good", "bad"]).await;
    let c = &mut hub.client;
    let (old_pid, _) = pids(c, "bad").await;

    let r = c.call("bad:crash", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    let crashed = Instant::now();
    // Until it is back, its tools fail at once rather than hang.
    let r = c.call("bad:echo", json!({"message": "too soon"})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    assert!(
        crashed.elapsed() < Duration::from_secs(1),
        "{:?}",
        crashed.elapsed()
    );

    // Its tools go away and come back, and the client hears of both: these waits relist
    // only when a list_changed arrives.
    let gone = |t: &[String]| !t.iter().any(|n| n == "bad:echo");
    wait_for_tools(c, gone, Duration::from_secs(5)).await;
    wait_for_tool(c, "bad:echo", Duration::from_secs(5)).await;
    assert!(
        crashed.elapsed() < Duration::from_secs(5),
        "restart took {:?}",
        crashed.elapsed()
    );
    assert_eq!(
        text(&c.call("bad:echo", json!({"message": "back"})).await),
        "back"
    );
    let (new_pid, _) = pids(c, "bad").await;
    assert_ne!(old_pid, new_pid, "not a new process");
    assert!(!alive(old_pid), "the crashed process is still there");
    hub.wait_log("restarting in", WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_keeps_crashing_is_parked() {
    // Five crashes within a minute park the server. With the backoff (0.5 s, 1 s, 2 s, 4 s,
    // plus up to a quarter of jitter) this takes about 8 to 10 seconds.
    let mut hub = serve_ready(
        json!({"good": fixture(&[]), "loop": fixture(&["--crash-after", "1"])}),
        None,
        &["good:echo"],
    )
    .await;
    let c = &mut hub.client;
    let t0 = Instant::now();
    for crash in 1..=5 {
        wait_for_tool(c, "loop:echo", Duration::from_secs(10)).await;
        let r = c.call("loop:echo", json!({"message": "x"})).await;
        assert_eq!(r["error"]["code"], -32010, "crash {crash}: {r}");
        assert!(error_message(&r).contains("exited"), "crash {crash}: {r}");
        // Its tools leave the list before it can be called (and crash) again.
        wait_for_tools(
            c,
            |t| !t.iter().any(|n| n == "loop:echo"),
            Duration::from_secs(5),
        )
        .await;
    }
    // The fifth crash parks it: the error says so.
    let r = c.call("loop:echo", json!({"message": "x"})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    let msg = error_message(&r);
    assert!(msg.contains("not restarting"), "{msg}");
    assert!(msg.contains("'loop'") && msg.contains("failed"), "{msg}");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_eq!(
        text(&c.call("good:echo", json!({"message": "fine"})).await),
        "fine"
    );
}

// ---------------------------------------------------------------------------------------
// Hangs and cancellation
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_call_times_out_and_is_cancelled_upstream() {
    let mut hub = serve_ready(
        json!({"hang": {"command": FIXTURE, "timeout": "300ms"}, "good": fixture(&[])}),
        None,
        &["hang:echo", "good:echo"],
    )
    .await;
    let c = &mut hub.client;

    let t0 = Instant::now();
    let r = c.call("hang:slow", json!({"ms": 5000})).await;
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(250),
        "gave up after {took:?}, before the 300ms timeout"
    );
    assert!(
        took < Duration::from_secs(2),
        "timeout reported after {took:?}"
    );
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let msg = error_message(&r);
    assert!(
        msg.contains("'hang'") && msg.contains("did not answer") && msg.contains("300ms"),
        "{msg}"
    );

    // The hub told the server to stop working on it.
    let cancelled: Vec<Value> =
        serde_json::from_str(&text(&c.call("hang:cancelled", json!({})).await)).unwrap();
    assert!(
        !cancelled.is_empty(),
        "no notifications/cancelled reached the server"
    );
    assert_eq!(
        text(&c.call("hang:echo", json!({"message": "still here"})).await),
        "still here"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_cancellation_reaches_the_server_and_silences_the_answer() {
    let mut hub = serve_fixtures(&["a", "b"]).await;
    let c = &mut hub.client;

    send_call_with_id(c, &json!(77), "a:slow", json!({"ms": 5000})).await;
    until_received(c, "a", 1).await;
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77, "reason": "user"}})).await;

    // Other work goes on meanwhile.
    assert_eq!(text(&c.call("b:echo", json!({"message": "b"})).await), "b");
    // The hub tells the server soon (the aborted call sends it as it unwinds).
    let deadline = Instant::now() + Duration::from_secs(2);
    let cancelled = loop {
        let cancelled: Vec<Value> =
            serde_json::from_str(&text(&c.call("a:cancelled", json!({})).await)).unwrap();
        if !cancelled.is_empty() || Instant::now() > deadline {
            break cancelled;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        cancelled.len(),
        1,
        "the server was not told, or told twice: {cancelled:?}"
    );
    assert_eq!(text(&c.call("a:echo", json!({"message": "a"})).await), "a");

    // No answer to a cancelled request.
    let quiet_until = Instant::now() + Duration::from_secs(1);
    while let Some(m) = c
        .recv(quiet_until.saturating_duration_since(Instant::now()))
        .await
    {
        assert_ne!(
            m.get("id"),
            Some(&json!(77)),
            "answered a cancelled request: {m}"
        );
    }
    assert!(
        c.inbox.iter().all(|m| m.get("id") != Some(&json!(77))),
        "{:?}",
        c.inbox
    );

    // Cancelling something unknown or finished is harmless.
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}})).await;
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}))
        .await;
    assert_eq!(
        text(&c.call("a:echo", json!({"message": "after"})).await),
        "after"
    );
}
