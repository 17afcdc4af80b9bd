//! Secret redaction on every way out: responses, the hub's log, notifications, the
//! permission prompt, the audit log and the state dir.

use super::{
    accept, answer, asking, fx_config, prompt, send_call, serve_command, started, wait_audit, with,
};
use crate::support::{Scratch, WAIT, fixture, spawn_piped, state_dir, text};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

/// A hub whose stdout is read line by line as raw text, so a test sees exactly the bytes
/// that leave openpact.
struct RawHub {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::UnboundedReceiver<String>,
    lines: Vec<String>,
    stderr: Arc<Mutex<String>>,
    next: i64,
}

impl RawHub {
    fn start(config: &Path, env: &[(&str, &str)]) -> RawHub {
        let (child, stdin, stdout, stderr) = spawn_piped(serve_command(config, env));
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        RawHub {
            child,
            stdin,
            rx,
            lines: Vec::new(),
            stderr,
            next: 0,
        }
    }

    async fn send(&mut self, v: &Value) {
        self.stdin
            .write_all(format!("{v}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = json!(self.next);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = tokio::time::timeout(WAIT, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method} within {WAIT:?}"))
                .expect("hub stdout open");
            self.lines.push(line.clone());
            let v: Value = serde_json::from_str(&line).expect("JSON line");
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    /// `initialize` (as client `redaction`) and `notifications/initialized`; the response.
    async fn initialize(&mut self) -> Value {
        let r = self
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "redaction", "version": "0"}}),
            )
            .await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        r
    }

    /// `tools/call`; the whole response.
    async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// Collects whatever else arrives within `d`.
    async fn drain(&mut self, d: Duration) {
        while let Ok(Some(line)) = tokio::time::timeout(d, self.rx.recv()).await {
            self.lines.push(line);
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for RawHub {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- openpact stderr ----\n{}", self.stderr());
        }
        let _ = self.child.start_kill();
    }
}

const SECRET: &str = "s3cr3t-v4lue-123456";
const TOKEN: &str = "tok-abcdefgh-98765";
const SHORT: &str = "abc1234";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_leave_in_responses_logs_or_the_audit() {
    let sc = Scratch::new();
    let mut entry = fixture(&[]);
    entry["env"] = json!({"TOKEN": "${OPENPACT_TEST_TOKEN}"});
    // A secret the server is given by name (it would withhold one that looks like a secret).
    entry["sandbox"] = json!({"env": ["OPENPACT_TEST_SECRET"]});
    let config = sc.servers(
        json!({"fx": entry}),
        Some(json!({
            "permissions": {"default": "allow"},
            "rateLimits": {"default": "off"},
            "secrets": {"env": ["OPENPACT_TEST_SECRET", "OPENPACT_TEST_SHORT"]},
            "audit": {"arguments": true},
            "cache": {"rules": {"fx:echo": "1m"}},
        })),
    );
    let state = state_dir(&config);
    let mut hub = RawHub::start(
        &config,
        &[
            ("OPENPACT_TEST_SECRET", SECRET),
            ("OPENPACT_TEST_TOKEN", TOKEN),
            ("OPENPACT_TEST_SHORT", SHORT),
        ],
    );
    let r = hub.initialize().await;
    assert!(r["result"].is_object(), "{r}");
    hub.request("tools/list", json!({})).await;
    hub.request("logging/setLevel", json!({"level": "debug"}))
        .await;
    let red = "[REDACTED:OPENPACT_TEST_SECRET]";
    let red_token = "[REDACTED:OPENPACT_TEST_TOKEN]";

    for _ in 0..2 {
        // (the second time from the cache)
        let r = hub.call("fx:echo", json!({"message": SECRET})).await;
        assert_eq!(r["result"]["content"][0]["text"], red, "{r}");
    }
    let r = hub
        .call(
            "fx:echo",
            json!({"message": format!("before {SECRET} after")}),
        )
        .await;
    assert_eq!(
        r["result"]["content"][0]["text"],
        format!("before {red} after"),
        "{r}"
    );
    let r = hub
        .call("fx:echo_structured", json!({"value": {"k": SECRET}}))
        .await;
    assert_eq!(r["result"]["structuredContent"]["value"]["k"], red, "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(red),
        "{r}"
    );
    let r = hub
        .call("fx:error_with", json!({"message": format!("x {SECRET} y")}))
        .await;
    assert_eq!(r["error"]["message"], format!("x {red} y"), "{r}");
    // A value openpact injected into the child's environment.
    let r = hub.call("fx:env", json!({"name": "TOKEN"})).await;
    assert_eq!(r["result"]["content"][0]["text"], red_token, "{r}");
    let r = hub
        .call("fx:env", json!({"name": "OPENPACT_TEST_SECRET"}))
        .await;
    assert_eq!(r["result"]["content"][0]["text"], red, "{r}");
    // Short values are not secrets worth hiding.
    let r = hub.call("fx:echo", json!({"message": SHORT})).await;
    assert_eq!(r["result"]["content"][0]["text"], SHORT, "{r}");
    // The server's stderr, logged by the hub.
    let r = hub
        .call("fx:stderr", json!({"text": format!("leak {TOKEN}")}))
        .await;
    assert_eq!(r["result"]["content"][0]["text"], "written", "{r}");
    // A log notification.
    hub.call(
        "fx:log",
        json!({"level": "error", "message": format!("log {SECRET}")}),
    )
    .await;
    // Prompts and resources.
    let r = hub
        .request(
            "prompts/get",
            json!({"name": "fx:greet", "arguments": {"name": SECRET}}),
        )
        .await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"],
        format!("Hello, {red}!"),
        "{r}"
    );
    let r = hub
        .request("resources/read", json!({"uri": "fixture://static/1"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["text"],
        "content of fixture://static/1"
    );
    hub.drain(Duration::from_millis(300)).await;

    // The log line arrives, redacted.
    let deadline = Instant::now() + WAIT;
    while !hub.stderr().contains(&format!("leak {red_token}")) {
        assert!(
            Instant::now() < deadline,
            "the stderr line never arrived:\n{}",
            hub.stderr()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        hub.lines
            .iter()
            .any(|l| l.contains("notifications/message") && l.contains(&format!("log {red}"))),
        "{:#?}",
        hub.lines
    );
    for (name, value) in [("secret", SECRET), ("token", TOKEN)] {
        for line in &hub.lines {
            assert!(
                !line.contains(value),
                "the {name} left in a response: {line}"
            );
        }
        assert!(
            !hub.stderr().contains(value),
            "the {name} is in the hub's log:\n{}",
            hub.stderr()
        );
    }
    // Nothing in the state dir holds them: the audit log (with arguments), the status file.
    let records = wait_audit(&state, 12).await;
    assert!(
        records.iter().any(|r| r["arguments"]["message"] == red),
        "arguments are recorded, redacted: {records:#?}"
    );
    for entry in std::fs::read_dir(&state).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap_or_default();
        let content = String::from_utf8_lossy(&bytes);
        for value in [SECRET, TOKEN] {
            assert!(
                !content.contains(value),
                "{} holds a secret:\n{content}",
                path.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_the_arguments_is_hidden_in_the_permission_prompt() {
    let sc = Scratch::new();
    let config = fx_config(
        &sc,
        with(
            asking(json!({"default": "ask"})),
            "secrets",
            json!({"env": ["OPENPACT_TEST_SECRET"]}),
        ),
    );
    let mut hub = started(
        &config,
        &[("OPENPACT_TEST_SECRET", SECRET)],
        json!({"elicitation": {}}),
        "policy-eliciting",
    )
    .await;
    let c = &mut hub.client;
    let long = "y".repeat(500);
    let id = send_call(c, "fx:echo", json!({"message": format!("{SECRET} {long}")})).await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(!msg.contains(SECRET), "{msg}");
    assert!(msg.contains("[REDACTED:OPENPACT_TEST_SECRET]"), "{msg}");
    assert!(msg.len() < 1000, "long arguments are shortened: {msg}");
    answer(c, &req, accept("once")).await;
    let r = c.response(&id).await;
    assert!(
        text(&r).starts_with("[REDACTED:OPENPACT_TEST_SECRET] yyy"),
        "{r}"
    );
}

/// A resource URI is the one place a secret can sit in what openpact itself writes about a
/// call: the permission target `server:<uri>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_resource_uri_stays_out_of_the_log_and_the_audit() {
    let sc = Scratch::new();
    let config = fx_config(
        &sc,
        json!({
            "permissions": {"default": "allow", "deny": ["fx:fixture://item/denied-*"]},
            "rateLimits": {"default": "off"},
            "secrets": {"env": ["OPENPACT_TEST_SECRET"]},
        }),
    );
    let state = state_dir(&config);
    let mut hub = RawHub::start(&config, &[("OPENPACT_TEST_SECRET", SECRET)]);
    hub.initialize().await;
    hub.request("resources/list", json!({})).await;
    let red = "[REDACTED:OPENPACT_TEST_SECRET]";
    let r = hub
        .request(
            "resources/read",
            json!({"uri": format!("fixture://item/{SECRET}")}),
        )
        .await;
    assert_eq!(
        r["result"]["contents"][0]["text"],
        format!("content of fixture://item/{red}"),
        "{r}"
    );
    let r = hub
        .request(
            "resources/read",
            json!({"uri": format!("fixture://item/denied-{SECRET}")}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
    assert!(!r.to_string().contains(SECRET), "{r}");
    let records = wait_audit(&state, 2).await;
    // Give the log a moment to show what it will.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut leaks: Vec<String> = hub
        .stderr()
        .lines()
        .filter(|l| l.contains(SECRET))
        .map(|l| format!("hub log: {l}"))
        .collect();
    leaks.extend(
        records
            .iter()
            .filter(|r| r.to_string().contains(SECRET))
            .map(|r| format!("audit: {r}")),
    );
    assert!(leaks.is_empty(), "the secret leaked:\n{}", leaks.join("\n"));
}
