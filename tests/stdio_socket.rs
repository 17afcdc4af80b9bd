//! An editor whose pipes are Unix sockets, as Node's `child_process` (libuv) hands a child
//! its stdin and stdout: answers larger than the socket's buffer still arrive whole and in
//! order once the editor reads, and a call after them is answered.

use crate::support::{FIXTURE, Scratch, WAIT, openpact_for};
use serde_json::{Value, json};
use std::os::fd::OwnedFd;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test]
async fn stdio_over_unix_sockets_carries_answers_larger_than_the_socket_buffer() {
    let sc = Scratch::new();
    let config = sc.servers(json!({"fx": {"command": FIXTURE}}), None);
    let (stdin_ours, stdin_theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let (stdout_ours, stdout_theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut cmd = openpact_for(&config, None);
    cmd.arg("serve")
        .stdin(std::process::Stdio::from(OwnedFd::from(stdin_theirs)))
        .stdout(std::process::Stdio::from(OwnedFd::from(stdout_theirs)))
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut hub = cmd.spawn().unwrap();
    drop(cmd);
    stdin_ours.set_nonblocking(true).unwrap();
    stdout_ours.set_nonblocking(true).unwrap();
    let mut to_hub = tokio::net::UnixStream::from_std(stdin_ours).unwrap();
    let mut from_hub =
        BufReader::new(tokio::net::UnixStream::from_std(stdout_ours).unwrap()).lines();
    let mut send = async |v: Value| {
        to_hub.write_all(format!("{v}\n").as_bytes()).await.unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "node-like", "version": "1"}}}),
    )
    .await;
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    // Twenty answers of 256 KiB, none read until all are asked: the hub's writes block on
    // the full socket and must resume as the editor reads.
    let big = |i: usize| format!("{i}:{}", "x".repeat(256 * 1024));
    for i in 1..=20 {
        send(json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "fx:echo", "arguments": {"message": big(i)}}}))
        .await;
    }
    send(json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call",
        "params": {"name": "fx:echo", "arguments": {"message": "last"}}}))
    .await;
    let mut answered = std::collections::BTreeMap::new();
    tokio::time::timeout(WAIT, async {
        while answered.len() < 22 {
            let line = from_hub
                .next_line()
                .await
                .unwrap()
                .expect("the hub closed stdout");
            let v: Value = serde_json::from_str(&line).unwrap();
            if let Some(id) = v.get("id").and_then(Value::as_u64) {
                answered.insert(id as usize, v);
            }
        }
    })
    .await
    .expect("every answer within 30 s");
    for i in 1..=20 {
        let text = answered[&i]
            .pointer("/result/content/0/text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(text.ends_with(&big(i)), "answer {i} is not its echo");
    }
    assert_eq!(
        answered[&21].pointer("/result/content/0/text"),
        Some(&json!("last"))
    );
    hub.kill().await.unwrap();
}
