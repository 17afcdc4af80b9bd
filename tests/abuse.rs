//! Clients that do not read: the hub stops reading from them instead of holding their
//! answers, drops only progress and log notifications for them, and loses no answer once
//! they read again. Clients that come and go: nothing of a session outlives it.

use crate::http_face::{Http, http_hub};
use crate::support::{FIXTURE, Scratch, WAIT, openpact_for, text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_its_answers_cannot_grow_the_hub() {
    let sc = Scratch::new();
    // The answers that may wait for the client are bounded by one largest message.
    let config = sc.servers(
        json!({"fx": {"command": FIXTURE}}),
        Some(json!({"maxMessageSize": "2MiB"})),
    );
    let mut cmd = openpact_for(&config, None);
    cmd.arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut hub = cmd.spawn().unwrap();
    let pid = hub.id().unwrap();
    let mut stdin = hub.stdin.take().unwrap();
    let stdout = hub.stdout.take().unwrap();
    let stderr = crate::support::collect_lines(hub.stderr.take().unwrap(), 1 << 20);
    let mut lines = BufReader::with_capacity(1 << 20, stdout).lines();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    lines.next_line().await.unwrap().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    // Until the fixture is up.
    let deadline = Instant::now() + WAIT;
    for id in 1.. {
        let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        stdin
            .write_all(format!("{list}\n").as_bytes())
            .await
            .unwrap();
        let line = lines.next_line().await.unwrap().unwrap();
        if line.contains("fx:echo") {
            break;
        }
        assert!(Instant::now() < deadline, "fx never listed: {line}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // 2,000 small calls (more than the pipe holds), each answered with 64 KiB, and nothing
    // read: a hub that kept reading would take them all at once and hold 128 MiB of answers.
    const CALLS: usize = 2000;
    const ANSWER: usize = 64 << 10;
    let writer = tokio::spawn(async move {
        for i in 0..CALLS {
            let call = json!({"jsonrpc": "2.0", "id": i + 10, "method": "tools/call",
                "params": {"name": "fx:huge", "arguments": {"bytes": ANSWER}}});
            stdin
                .write_all(format!("{call}\n").as_bytes())
                .await
                .unwrap();
        }
        stdin
    });
    let mut peak = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(8) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        peak = peak.max(rss_mib(pid));
    }
    assert!(
        !writer.is_finished(),
        "the hub kept reading a client that reads nothing"
    );
    assert!(
        peak < 80,
        "the hub grew to {peak} MiB for a client that does not read"
    );

    // It reads now: every answer arrives, whole and in full.
    let mut answered = 0;
    let deadline = Instant::now() + WAIT * 2;
    while answered < CALLS {
        let line = tokio::time::timeout_at(deadline.into(), lines.next_line())
            .await
            .expect("answers keep coming")
            .unwrap()
            .expect("stdout open");
        // (Parsed whole only now and then: JSON is slow to parse in a debug build.)
        if line.len() > ANSWER {
            if answered % 100 == 0 {
                let v: Value = serde_json::from_str(&line).unwrap();
                assert_eq!(text(&v).len(), ANSWER, "a whole answer");
            }
            answered += 1;
        }
    }
    let stdin = writer.await.unwrap();
    drop(stdin);
    let status = tokio::time::timeout(WAIT, hub.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}\n{}", stderr.lock().unwrap());
}

/// A gauge's value in the hub's `/metrics`.
async fn gauge(base: &str, name: &str) -> i64 {
    let text = crate::http_face::client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
}

/// One HTTP client session: initialize, two calls, then DELETE or (`abandon`) nothing.
async fn session(base: &str, abandon: bool) {
    let mut h = Http::at(format!("{base}/mcp"));
    h.initialize(json!({})).await;
    for id in 1..=2 {
        let r = h.call(id, "fx:echo", json!({"message": "m"})).await;
        assert_eq!(text(&r), "m");
    }
    if !abandon {
        let r = h.req(reqwest::Method::DELETE).send().await.unwrap();
        assert!(r.status().is_success(), "{}", r.status());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_of_an_http_session_outlives_it_deleted_or_abandoned() {
    let h = http_hub(
        json!({"fx": {"command": FIXTURE}}),
        Some(json!({"http": {"sessionIdleTimeout": "1s"}})),
        &[],
    )
    .await;
    for _ in 0..10 {
        session(&h.base, false).await;
    }
    let (tasks, sessions) = (
        gauge(&h.base, "openpact_runtime_tasks").await,
        gauge(&h.base, "openpact_sessions").await,
    );
    for _ in 0..150 {
        session(&h.base, false).await;
    }
    for _ in 0..150 {
        session(&h.base, true).await;
    }
    // Abandoned ones end when idle for a second; give their ends a moment.
    let deadline = Instant::now() + WAIT;
    loop {
        let (t, s) = (
            gauge(&h.base, "openpact_runtime_tasks").await,
            gauge(&h.base, "openpact_sessions").await,
        );
        if s <= sessions && t <= tasks + 5 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "300 sessions later: {t} tasks (was {tasks}), {s} sessions (was {sessions})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
