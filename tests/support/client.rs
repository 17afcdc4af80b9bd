//! A JSON-RPC client over a child's stdin/stdout: requests with fresh ids, and every other
//! message kept in an inbox for later assertions.

use super::WAIT;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

/// A JSON-RPC client over a pair of pipes. Messages that are not the awaited response are
/// kept in `inbox` for later assertions.
pub struct Client {
    stdin: Option<ChildStdin>,
    rx: mpsc::UnboundedReceiver<Value>,
    pub inbox: VecDeque<Value>,
    next_id: i64,
}

impl Client {
    pub fn over(stdin: ChildStdin, stdout: tokio::process::ChildStdout) -> Client {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::with_capacity(1 << 16, stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("hub wrote non-JSON to stdout ({e}): {line}"));
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Client {
            stdin: Some(stdin),
            rx,
            inbox: VecDeque::new(),
            next_id: 1,
        }
    }

    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, v: &Value) {
        self.send_raw(&v.to_string()).await;
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    pub fn next_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends a request with a fresh numeric id and waits for its response (the whole message).
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.response(&json!(id)).await
    }

    /// Waits for the response with this id, stashing everything else in `inbox`.
    pub async fn response(&mut self, id: &Value) -> Value {
        if let Some(pos) = self
            .inbox
            .iter()
            .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        {
            return self.inbox.remove(pos).unwrap();
        }
        loop {
            let m = self
                .recv(WAIT)
                .await
                .unwrap_or_else(|| panic!("no response to id {id} within {WAIT:?}"));
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return m;
            }
            self.inbox.push_back(m);
        }
    }

    /// The next message from the hub, or None after `limit`.
    pub async fn recv(&mut self, limit: Duration) -> Option<Value> {
        tokio::time::timeout(limit, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// Waits for a notification (or server→client request) with `method`, looking in the
    /// inbox first.
    pub async fn wait_for(&mut self, method: &str, limit: Duration) -> Option<Value> {
        if let Some(pos) = self.inbox.iter().position(|m| m["method"] == method) {
            return self.inbox.remove(pos);
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let m = self.recv(left).await?;
            if m["method"] == method {
                return Some(m);
            }
            self.inbox.push_back(m);
        }
    }

    /// `initialize` + `notifications/initialized`; returns the initialize result.
    pub async fn initialize(&mut self) -> Value {
        self.initialize_as(json!({}), "test").await["result"].clone()
    }

    /// `initialize` declaring `capabilities` as client `name`, then
    /// `notifications/initialized`; returns the whole `initialize` response.
    pub async fn initialize_as(&mut self, capabilities: Value, name: &str) -> Value {
        let r = self
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                       "clientInfo": {"name": name, "version": "0"}}),
            )
            .await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        r
    }

    /// All tools, following `nextCursor`.
    pub async fn list_tools(&mut self) -> Vec<Value> {
        self.list_pages("tools/list", "tools").await.0
    }

    /// Every item of a paginated list (`field` of each page's result), following
    /// `nextCursor`; also the number of pages.
    pub async fn list_pages(&mut self, method: &str, field: &str) -> (Vec<Value>, usize) {
        let mut out = Vec::new();
        let mut params = json!({});
        let mut pages = 0;
        loop {
            let r = self.request(method, params).await;
            pages += 1;
            let items = r["result"][field]
                .as_array()
                .unwrap_or_else(|| panic!("no {field} in {r}"));
            out.extend(items.iter().cloned());
            match r["result"].get("nextCursor").and_then(Value::as_str) {
                Some(cursor) => params = json!({"cursor": cursor}),
                None => return (out, pages),
            }
            assert!(pages < 100, "{method} never ends");
        }
    }

    /// `completion/complete` of `argument`, typed so far as `value`, for `reference` (a prompt
    /// or a resource template); the whole response.
    pub async fn complete(&mut self, reference: Value, argument: &str, value: &str) -> Value {
        self.request(
            "completion/complete",
            json!({"ref": reference, "argument": {"name": argument, "value": value}}),
        )
        .await
    }

    /// `tools/call`; returns the whole response message.
    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }
}
