//! Clients that do not read: the hub stops reading from them instead of holding their
//! answers, drops only progress and log notifications for them, and loses no answer once
//! they read again (stdio); over HTTP, unread POST answers, an unread GET stream under a log
//! flood and an unread progress flood stay bounded while another client is served. Clients
//! that come and go: nothing of a session outlives it.

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

/// One echo call's round trip, in milliseconds.
async fn echo_ms(client: &mut Http) -> f64 {
    let t = Instant::now();
    let r = client.call(1, "fy:echo", json!({"message": "m"})).await;
    assert_eq!(text(&r), "m");
    t.elapsed().as_secs_f64() * 1000.0
}

/// Writes one raw HTTP/1.1 POST to the hub's `/mcp` and returns the connection, unread.
async fn raw_post(base: &str, session: &str, body: &Value) -> tokio::net::TcpStream {
    let addr = base.trim_start_matches("http://");
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = body.to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-session-id: {session}\r\n\
         mcp-protocol-version: 2025-06-18\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp
}

/// The same over HTTP: POSTs whose answers nobody reads, a GET stream nobody reads while a
/// server floods it with log messages, and a progress flood on a POST nobody reads. The
/// hub stays within a bound and keeps answering another client meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_clients_that_do_not_read_cannot_grow_the_hub_or_slow_the_others() {
    // The floods come from fx; the other client calls fy (fx's own answers queue behind its
    // flood in its pipe, whatever the hub does).
    let h = http_hub(
        json!({"fx": {"command": FIXTURE}, "fy": {"command": FIXTURE}}),
        Some(json!({"http": {"maxInFlight": 256}})),
        &[],
    )
    .await;
    let pid = h.hub.child.id().unwrap();
    let mut good = Http::at(format!("{}/mcp", h.base));
    good.initialize(json!({})).await;
    let mut before = Vec::new();
    for _ in 0..20 {
        before.push(echo_ms(&mut good).await);
    }
    let rss_before = rss_mib(pid);

    let mut bad = Http::at(format!("{}/mcp", h.base));
    bad.initialize(json!({})).await;
    let sid = bad.session.clone().unwrap();
    bad.rpc(1, "logging/setLevel", json!({"level": "debug"}))
        .await;
    let mut held = Vec::new();
    // A progress flood of 400 MB on a POST nobody reads.
    let flood = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "fx:progress", "arguments": {"steps": 100_000, "ms": 0, "pad": 4000},
        "_meta": {"progressToken": "p"}}});
    held.push(raw_post(&h.base, &sid, &flood).await);
    // 100 answers of 1 MiB nobody reads.
    for id in 0..100 {
        let call = json!({"jsonrpc": "2.0", "id": 100 + id, "method": "tools/call",
            "params": {"name": "fx:huge", "arguments": {"bytes": 1 << 20}}});
        held.push(raw_post(&h.base, &sid, &call).await);
    }
    // A GET stream nobody reads, and 64 KiB log messages for it.
    let addr = h.base.trim_start_matches("http://").to_string();
    let mut get = tokio::net::TcpStream::connect(&addr).await.unwrap();
    get.write_all(
        format!(
            "GET /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: text/event-stream\r\n\
             mcp-session-id: {sid}\r\nmcp-protocol-version: 2025-06-18\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    held.push(get);
    let logger = {
        let mut logger = Http::at(format!("{}/mcp", h.base));
        logger.session = Some(sid.clone());
        tokio::spawn(async move {
            let big = "l".repeat(64 << 10);
            for id in 0..300 {
                logger
                    .call(
                        1000 + id,
                        "fx:log",
                        json!({"level": "info", "message": big}),
                    )
                    .await;
            }
        })
    };

    let mut during = Vec::new();
    let mut peak = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(15) {
        during.push(echo_ms(&mut good).await);
        peak = peak.max(rss_mib(pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    logger.await.unwrap();
    peak = peak.max(rss_mib(pid));
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (b, d) = (median(&mut before), median(&mut during));
    eprintln!(
        "hub RSS {rss_before} MiB before, peak {peak} MiB; echo p50 {b:.1} ms before, {d:.1} ms during"
    );
    assert!(
        peak < rss_before + 128,
        "the hub grew from {rss_before} to {peak} MiB for clients that do not read"
    );
    // Alone on 2 cores the other client's p50 stays within tens of ms; the bound leaves room
    // for a machine busy with other work (a hub held up by the flood would take seconds).
    assert!(
        d < b * 10.0 + 500.0,
        "another client's calls slowed from {b:.1} ms to {d:.1} ms"
    );
    drop(held);
}

/// A server that stops reading its input: requests to it wait in the hub only up to a bound
/// (32 MiB unread); beyond it they are refused with a clear error instead of held, so the
/// hub stops growing, every request gets an answer, and the other servers are served
/// meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_read_cannot_grow_the_hub() {
    let h = http_hub(
        // (A long timeout: on a busy machine 32 MiB of echoes in a debug build take a while.)
        json!({"fx": {"command": FIXTURE, "timeout": "5m"}, "fy": {"command": FIXTURE}}),
        Some(json!({"http": {"maxInFlight": 256}})),
        &[],
    )
    .await;
    let pid = h.hub.child.id().unwrap();
    let mut client = Http::at(format!("{}/mcp", h.base));
    client.initialize(json!({})).await;
    let sid = client.session.clone().unwrap();
    let session = |n: u64| {
        let mut c = Http::at(format!("{}/mcp", h.base));
        c.session = Some(sid.clone());
        (c, n)
    };
    let rss_before = rss_mib(pid);
    let (mut staller, _) = session(0);
    let stall = tokio::spawn(async move {
        staller
            .call(1, "fx:slow", json!({"ms": 8_000, "block": true}))
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // 160 requests of 1 MiB for a server that reads nothing, one every 20 ms. Each call
    // waiting costs the hub a few copies of its request; past the bound no more wait, so
    // the hub stops growing however many more come.
    let big = "b".repeat(1 << 20);
    let mut calls = Vec::new();
    let mut peak = 0;
    let mut at_60 = 0;
    for i in 0..160 {
        if i == 60 {
            at_60 = rss_mib(pid);
        }
        let (mut c, n) = session(100 + i);
        let big = big.clone();
        calls.push(tokio::spawn(async move {
            c.call(n, "fx:echo", json!({"message": big})).await
        }));
        tokio::time::sleep(Duration::from_millis(20)).await;
        peak = peak.max(rss_mib(pid));
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        let r = client
            .call(2, "fy:echo", json!({"message": "still here"}))
            .await;
        assert_eq!(text(&r), "still here");
        peak = peak.max(rss_mib(pid));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (mut echoed, mut refused) = (0, 0);
    for call in calls {
        let r = call.await.unwrap();
        if r.get("error").is_some() {
            let message = r["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("is not reading its input"), "{r}");
            refused += 1;
        } else {
            assert_eq!(text(&r).len(), 1 << 20, "a whole echo");
            echoed += 1;
        }
    }
    let r = stall.await.unwrap();
    assert_eq!(text(&r), "slept 8000 ms");
    eprintln!(
        "hub RSS {rss_before} MiB before, {at_60} MiB after 60 requests, peak {peak} MiB; \
         {echoed} echoed, {refused} refused"
    );
    assert!(
        refused > 0 && echoed > 0,
        "{echoed} echoed, {refused} refused"
    );
    assert!(
        peak < at_60 + 64,
        "the hub kept growing for a server that does not read: {at_60} MiB after 60 \
         requests, {peak} MiB after 160"
    );
}
