//! Bad servers and bad input: crashes, hangs, floods, garbage, oversized messages and
//! shutdown. In every case the hub keeps serving everything else.

use crate::support::{Client, FIXTURE, Hub, OPENPACT, Scratch, WAIT, alive, fixture, serve, text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::process::Command;

fn names(tools: &[Value]) -> Vec<String> {
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
async fn wait_for_tools(client: &mut Client, done: impl Fn(&[String]) -> bool, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let tools = names(&client.list_tools().await);
        if done(&tools) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if client
            .wait_for("notifications/tools/list_changed", left)
            .await
            .is_none()
        {
            panic!("the tool list did not change as expected within {limit:?}; tools: {tools:?}");
        }
    }
}

async fn wait_for_tool(client: &mut Client, name: &str, limit: Duration) {
    wait_for_tools(client, |t| t.iter().any(|n| n == name), limit).await;
}

/// `initialize`, then waits until each of `tools` is listed. Requests sent the moment the
/// hub starts can race its catalogue (see `hub::requests_at_startup_see_every_ready_server`);
/// tests about something else start from a settled hub.
async fn ready(c: &mut Client, tools: &[&str]) {
    c.initialize().await;
    for t in tools {
        wait_for_tool(c, t, WAIT).await;
    }
}

/// Polls the hub's stderr (nothing else announces a log line) until it contains `needle`.
async fn wait_for_log(hub: &Hub, needle: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !hub.stderr().contains(needle) {
        assert!(Instant::now() < deadline, "the hub never logged {needle:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn error_message(r: &Value) -> String {
    r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error response: {r}"))
        .to_string()
}

/// Sends `tools/call` with this id without waiting for the answer.
async fn send_call(c: &mut Client, id: &Value, name: &str, arguments: Value) {
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}))
        .await;
}

/// Waits until the fixture behind `server` has received a `tools/call` sent before this
/// (its `calls` counter counts every call, this probe included).
async fn until_received(c: &mut Client, server: &str, earlier_calls: u64) {
    for probes in 1..=100u64 {
        let n: u64 = text(&c.call(&format!("{server}:calls"), json!({})).await)
            .parse()
            .unwrap();
        if n >= earlier_calls + probes {
            return;
        }
    }
    panic!("{server} never received the earlier call");
}

/// `{"pid": N, "grandchild": M|null}` from the fixture's `pids` tool.
async fn pids(c: &mut Client, server: &str) -> (u32, Option<u32>) {
    let r = c.call(&format!("{server}:pids"), json!({})).await;
    let v: Value = serde_json::from_str(&text(&r)).unwrap();
    (
        v["pid"].as_u64().unwrap() as u32,
        v["grandchild"].as_u64().map(|p| p as u32),
    )
}

/// Waits (briefly: they were killed already) until none of `pids` is alive.
async fn all_gone(pids: &[u32], limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let living: Vec<_> = pids.iter().filter(|p| alive(**p)).collect();
        if living.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still alive after {limit:?}: {living:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn run_cli(args: &[&str]) -> (Option<i32>, String, String) {
    let out = tokio::time::timeout(
        WAIT,
        Command::new(OPENPACT)
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the CLI finishes")
    .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---------------------------------------------------------------------------------------
// Crashes
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_fails_the_call_fast_and_others_keep_serving() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"good": fixture(&[]), "bad": {"command": FIXTURE, "timeout": "60s"}}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["good:echo", "bad:echo"]).await;

    // A long call in flight on the server that is about to crash.
    let slow = json!("slow-in-flight");
    send_call(c, &slow, "bad:slow", json!({"ms": 10_000})).await;
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
    let s = Scratch::new();
    let cfg = s.servers(json!({"good": fixture(&[]), "bad": fixture(&[])}), None);
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["good:echo", "bad:echo"]).await;
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
    assert!(
        hub.stderr().contains("restarting in"),
        "the restart was not logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_keeps_crashing_is_parked() {
    // Five crashes within a minute park the server. With the backoff (0.5 s, 1 s, 2 s, 4 s,
    // plus up to a quarter of jitter) this takes about 8 to 10 seconds.
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"good": fixture(&[]), "loop": fixture(&["--crash-after", "1"])}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["good:echo"]).await;
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
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"hang": {"command": FIXTURE, "timeout": "300ms"}, "good": fixture(&[])}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["hang:echo", "good:echo"]).await;

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
    let s = Scratch::new();
    let cfg = s.servers(json!({"a": fixture(&[]), "b": fixture(&[])}), None);
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["a:echo", "b:echo"]).await;

    send_call(c, &json!(77), "a:slow", json!({"ms": 5000})).await;
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

// ---------------------------------------------------------------------------------------
// Servers that do not start
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_exits_at_start_is_reported_and_others_serve() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"good": fixture(&[]), "broken": fixture(&["--exit-at-start", "4"])}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["good:echo"]).await;
    let tools = names(&c.list_tools().await);
    assert!(tools.contains(&"good:echo".to_string()), "{tools:?}");
    assert!(!tools.iter().any(|n| n.starts_with("broken:")), "{tools:?}");
    assert_eq!(
        text(&c.call("good:echo", json!({"message": "ok"})).await),
        "ok"
    );
    let r = c.call("broken:echo", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    assert!(error_message(&r).contains("failed"), "{r}");

    let state = s.path().join("state-cli");
    let (code, stdout, stderr) = run_cli(&[
        "--config",
        cfg.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "servers",
    ])
    .await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let broken: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("broken"))
        .collect();
    assert!(!broken.is_empty(), "{stdout}");
    assert!(broken[0].contains("failed"), "{stdout}");
    assert!(
        broken
            .iter()
            .any(|l| l.contains("fixture: failing at start as asked")),
        "no stderr line: {stdout}"
    );
    let good = stdout
        .lines()
        .find(|l| l.starts_with("good"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(good.contains("ready"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_command_is_named_by_config_check() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"good": fixture(&[]), "ghost": {"command": "openpact-test-no-such-program"}}),
        None,
    );
    let (code, stdout, stderr) =
        run_cli(&["--config", cfg.to_str().unwrap(), "config", "check"]).await;
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("ghost"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.starts_with(cfg.to_str().unwrap()),
        "the file is not named: {line}"
    );
    assert!(line.contains("mcpServers.ghost.command"), "{line}");
    assert!(
        line.contains("openpact-test-no-such-program") && line.contains("was not found on PATH"),
        "{line}"
    );
    assert!(!stderr.contains("mcpServers.good"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_command_does_not_stop_the_others_from_serving() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"good": fixture(&[]), "ghost": {"command": "openpact-test-no-such-program"}}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["good:echo"]).await;
    let tools = names(&c.list_tools().await);
    assert!(tools.contains(&"good:echo".to_string()), "{tools:?}");
    let r = c.call("ghost:anything", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    let msg = error_message(&r);
    assert!(
        msg.contains("'ghost'") && msg.contains("not found"),
        "{msg}"
    );
}

// ---------------------------------------------------------------------------------------
// Noisy and misbehaving servers
// ---------------------------------------------------------------------------------------

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

    wait_for_log(&hub, "not logged", Duration::from_secs(5)).await;
    let logged = hub.stderr().matches("fixture: flood line").count();
    assert!(
        logged < 5_000,
        "{logged} of 300 000 flood lines reached the hub's log: not rate limited"
    );
    assert!(logged > 0, "none of the server's stderr was logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suppressed_stderr_lines_are_reported_after_a_short_burst() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"noisy": fixture(&["--stderr-flood", "5000"])}), None);
    let mut hub = serve(&cfg).await;
    ready(&mut hub.client, &["noisy:echo"]).await;
    assert_eq!(
        text(&hub.client.call("noisy:echo", json!({"message": "x"})).await),
        "x"
    );
    // 5 000 lines arrive well within a second; 4 800 of them are not logged. Nothing more
    // is written, and the hub must still say so.
    wait_for_log(&hub, "not logged", Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_stdout_is_skipped() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"g": fixture(&["--garbage-every", "2"])}), None);
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["g:echo"]).await;
    for i in 0..10 {
        let msg = format!("message {i}");
        assert_eq!(text(&c.call("g:echo", json!({"message": msg})).await), msg);
    }
    assert_eq!(text(&c.call("g:garbage", json!({})).await), "garbage sent");
    assert_eq!(
        text(&c.call("g:echo", json!({"message": "after"})).await),
        "after"
    );
    wait_for_log(
        &hub,
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
    wait_for_log(
        &hub,
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
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"a": fixture(&[])}),
        Some(json!({"maxMessageSize": "64KiB"})),
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["a:echo"]).await;

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
    let s = Scratch::new();
    let cfg = s.servers(json!({"a": fixture(&[])}), None);
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["a:echo"]).await;

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

// ---------------------------------------------------------------------------------------
// Shutdown
// ---------------------------------------------------------------------------------------

/// A hub with a server that leaves a grandchild, one that ignores stdin EOF (needs SIGTERM)
/// and one that also blocks SIGTERM (needs SIGKILL); returns it with every pid involved.
async fn stubborn_hub(s: &Scratch) -> (Hub, Vec<u32>) {
    let cfg = s.servers(
        json!({
            "gc": fixture(&["--spawn-grandchild"]),
            "stubborn": fixture(&["--ignore-stdin-eof"]),
            "immortal": fixture(&["--ignore-stdin-eof", "--ignore-sigterm"])
        }),
        None,
    );
    let mut hub = serve(&cfg).await;
    ready(
        &mut hub.client,
        &["gc:echo", "stubborn:echo", "immortal:echo"],
    )
    .await;
    let (gc, grandchild) = pids(&mut hub.client, "gc").await;
    let grandchild = grandchild.expect("the fixture spawned a grandchild");
    wait_for_log(
        &hub,
        &format!("fixture: grandchild pid {grandchild}"),
        Duration::from_secs(5),
    )
    .await;
    let (stubborn, _) = pids(&mut hub.client, "stubborn").await;
    let (immortal, _) = pids(&mut hub.client, "immortal").await;
    let all = vec![gc, grandchild, stubborn, immortal];
    for p in &all {
        assert!(alive(*p), "{p} is not running to begin with");
    }
    (hub, all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_stops_every_child_and_grandchild() {
    let s = Scratch::new();
    let (mut hub, all) = stubborn_hub(&s).await;
    let (code, took) = hub.close().await;
    assert_eq!(code, Some(0), "exit code");
    assert!(took < Duration::from_millis(2500), "shutdown took {took:?}");
    all_gone(&all, Duration::from_secs(1)).await;
    let log = hub.stderr();
    assert!(
        log.contains("SIGTERM") && log.contains("SIGKILL"),
        "escalation not logged:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_every_child_and_grandchild() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let s = Scratch::new();
    let (mut hub, all) = stubborn_hub(&s).await;
    let pid = hub.child.id().expect("running");
    let t0 = Instant::now();
    kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), hub.child.wait())
        .await
        .expect("openpact exits")
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(took < Duration::from_millis(2500), "shutdown took {took:?}");
    all_gone(&all, Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_one_shot_gets_its_answers_before_exit() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"a": fixture(&[])}), None);
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "sh", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "a:echo", "arguments": {"message": "one shot"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
    ];
    let all: Vec<String> = lines.iter().map(Value::to_string).collect();
    c.send_raw(&all.join("\n")).await;
    let (code, took) = hub.close().await;
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_millis(2500), "{took:?}");
    let c = &mut hub.client;
    assert_eq!(
        c.response(&json!(1)).await["result"]["protocolVersion"],
        "2025-06-18"
    );
    assert_eq!(text(&c.response(&json!(2)).await), "one shot");
    let r = c.response(&json!(3)).await;
    assert!(
        names(r["result"]["tools"].as_array().unwrap()).contains(&"a:echo".to_string()),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_still_running_at_exit_is_answered_with_an_error() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"a": fixture(&[])}), None);
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["a:echo"]).await;
    send_call(c, &json!("long"), "a:slow", json!({"ms": 10_000})).await;
    until_received(c, "a", 1).await;
    let (code, took) = hub.close().await;
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_millis(2500), "{took:?}");
    // Silence would leave a client that is still reading waiting forever.
    let r = hub.client.response(&json!("long")).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    assert!(error_message(&r).contains("shutting down"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_servers_grandchild_does_not_outlive_it() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"gc": fixture(&["--spawn-grandchild"])}), None);
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["gc:echo"]).await;
    let (pid, grandchild) = pids(c, "gc").await;
    let grandchild = grandchild.expect("the fixture spawned a grandchild");
    let r = c.call("gc:crash", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    wait_for_tools(
        c,
        |t| !t.iter().any(|n| n == "gc:echo"),
        Duration::from_secs(5),
    )
    .await;
    wait_for_tool(c, "gc:echo", Duration::from_secs(5)).await;
    let (new_pid, new_grandchild) = pids(c, "gc").await;
    assert_ne!(pid, new_pid);
    all_gone(&[pid, grandchild], Duration::from_secs(2)).await;
    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0));
    all_gone(&[new_pid, new_grandchild.unwrap()], Duration::from_secs(1)).await;
}

/// Pids whose parent is `parent`, from /proc.
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the `(comm)`: state, ppid, …
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_while_a_server_is_still_starting_stops_it() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"late": fixture(&["--init-delay-ms", "20000", "--spawn-grandchild"]), "a": fixture(&[])}), None);
    let mut hub = serve(&cfg).await;
    hub.client.initialize().await;
    wait_for_log(&hub, "fixture: grandchild pid", Duration::from_secs(5)).await;
    let log = hub.stderr();
    let grandchild: u32 = log
        .split("fixture: grandchild pid ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{log}"));
    let hub_pid = hub.child.id().unwrap();
    let mut all = children_of(hub_pid);
    assert_eq!(all.len(), 2, "expected two servers under openpact: {all:?}");
    all.push(grandchild);
    let (code, took) = hub.close().await;
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_millis(2500), "shutdown took {took:?}");
    all_gone(&all, Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_hangs_at_start_fails_after_its_timeout_and_is_stopped() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"stuck": {"command": FIXTURE, "args": ["--init-delay-ms", "30000"], "timeout": "500ms"}, "good": fixture(&[])}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let hub_pid = hub.child.id().unwrap();
    let c = &mut hub.client;
    c.initialize().await;
    let t0 = Instant::now();
    let tools = names(&c.list_tools().await);
    // The list waits for the stuck server only until its handshake times out.
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "tools/list took {:?}",
        t0.elapsed()
    );
    assert!(!tools.iter().any(|n| n.starts_with("stuck:")), "{tools:?}");
    wait_for_tool(c, "good:echo", WAIT).await;
    let r = c.call("stuck:echo", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    let msg = error_message(&r);
    assert!(
        msg.contains("'stuck'") && msg.contains("failed") && msg.contains("initialize"),
        "{msg}"
    );
    // Its process was stopped: only the good server is left under openpact.
    let deadline = Instant::now() + Duration::from_secs(3);
    while children_of(hub_pid).len() != 1 {
        assert!(
            Instant::now() < deadline,
            "the stuck server was not stopped: {:?}",
            children_of(hub_pid)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_speaking_an_unknown_protocol_version_is_failed_with_a_reason() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({
            "future": fixture(&["--protocol", "2099-01-01"]),
            "old": fixture(&["--protocol", "2024-11-05"])
        }),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    // An older version the hub speaks works.
    ready(c, &["old:echo"]).await;
    assert_eq!(
        text(&c.call("old:echo", json!({"message": "2024"})).await),
        "2024"
    );
    let r = c.call("future:echo", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    let msg = error_message(&r);
    assert!(
        msg.contains("failed") && msg.contains("2099-01-01"),
        "{msg}"
    );
}
