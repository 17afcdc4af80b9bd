//! Shutdown: every child and grandchild stops on stdin EOF or SIGTERM, answers in flight
//! are given, and servers still starting (or hung at start, or speaking an unknown
//! protocol) are stopped.

use super::{all_gone, error_message, pids, send_call_with_id, until_received};
use crate::support::{
    FIXTURE, Hub, Scratch, WAIT, alive, fixture, names, ready, serve, serve_config, serve_fixtures,
    serve_ready, text, wait_for_tool, wait_for_tools,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

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
    // Its pid there is its PID namespace's (the sandbox's), `grandchild` this test's.
    hub.wait_log("fixture: grandchild pid ", Duration::from_secs(5))
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

/// Stopping is prompt, on stdin EOF, SIGINT and SIGTERM alike (Claude Code sends SIGINT,
/// then SIGTERM 100 ms later): servers that linger after their stdin closes, as Python's
/// `mcp-server-time` does, get SIGTERM after a moment, all at once. Each such server used to
/// be given 400 ms first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_is_prompt_on_stdin_eof_sigint_and_sigterm() {
    use nix::sys::signal::Signal;
    for how in [None, Some(Signal::SIGINT), Some(Signal::SIGTERM)] {
        let mut hub = serve_ready(
            json!({"a": fixture(&["--ignore-stdin-eof"]), "b": fixture(&["--ignore-stdin-eof"]), "c": fixture(&[])}),
            None,
            &["a:echo", "b:echo", "c:echo"],
        )
        .await;
        let mut children = Vec::new();
        for server in ["a", "b", "c"] {
            children.push(pids(&mut hub.client, server).await.0);
        }
        let (code, took) = match how {
            None => hub.close().await,
            Some(signal) => hub.signal(signal).await,
        };
        assert_eq!(code, Some(0), "{how:?}: {}", hub.stderr());
        // Typically under 100 ms; the old way could not be under 400 ms.
        assert!(
            took < Duration::from_millis(350),
            "{how:?}: stopping took {took:?}"
        );
        all_gone(&children, Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piped_one_shot_gets_its_answers_before_exit() {
    let mut hub = serve_config(json!({"a": fixture(&[])}), None).await;
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
    let mut hub = serve_fixtures(&["a"]).await;
    let c = &mut hub.client;
    send_call_with_id(c, &json!("long"), "a:slow", json!({"ms": 10_000})).await;
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
    let mut hub = serve_ready(
        json!({"gc": fixture(&["--spawn-grandchild"])}),
        None,
        &["gc:echo"],
    )
    .await;
    let c = &mut hub.client;
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
    let mut hub = serve_config(json!({"late": fixture(&["--init-delay-ms", "20000", "--spawn-grandchild"]), "a": fixture(&[])}), None).await;
    hub.client.initialize().await;
    hub.wait_log("fixture: grandchild pid", Duration::from_secs(5))
        .await;
    let hub_pid = hub.child.id().unwrap();
    let servers = children_of(hub_pid);
    assert_eq!(
        servers.len(),
        2,
        "expected two servers under openpact: {servers:?}"
    );
    // Every process below them, the grandchild too (the pid it logged is its sandbox's PID
    // namespace's, not this test's).
    let mut all = servers;
    let mut i = 0;
    while let Some(&p) = all.get(i) {
        all.extend(children_of(p));
        i += 1;
    }
    assert!(all.len() >= 3, "no grandchild among {all:?}");
    let (code, took) = hub.close().await;
    assert_eq!(code, Some(0));
    assert!(took < Duration::from_millis(2500), "shutdown took {took:?}");
    all_gone(&all, Duration::from_secs(1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_hangs_at_start_fails_after_its_timeout_and_is_stopped() {
    let mut hub = serve_config(json!({"stuck": {"command": FIXTURE, "args": ["--init-delay-ms", "30000"], "timeout": "500ms"}, "good": fixture(&[])}), None).await;
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
    let mut hub = serve_config(json!({ "future": fixture(&["--protocol", "2099-01-01"]), "old": fixture(&["--protocol", "2024-11-05"]) }), None).await;
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
