//! Test harness: writes configs, starts `openpact serve` as a real process, and talks
//! JSON-RPC to it over its real stdin/stdout. The hub's stderr is drained into a buffer that
//! tests can read (and that is printed when a test fails, via `Hub::drop`).

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

pub const OPENPACT: &str = env!("CARGO_BIN_EXE_openpact");
pub const FIXTURE: &str = env!("CARGO_BIN_EXE_openpact-fixture");
/// Generous: CI machines are slow and busy; tests that measure speed say so themselves.
pub const WAIT: Duration = Duration::from_secs(30);

/// A fixture server entry for `mcpServers`, with extra flags.
pub fn fixture(args: &[&str]) -> Value {
    json!({ "command": FIXTURE, "args": args })
}

/// A temp dir holding a config; removed on drop.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `mcp.json` with `value` and returns its path. Unless the test sets them itself,
    /// permissions default to `allow`, rate limits are off and built-in tools are off: the
    /// shipped defaults (`ask`, which denies without a prompt channel; 10 calls/s; built-ins
    /// on) are tested on their own, and would otherwise refuse or shift what other tests see.
    pub fn config(&self, value: &Value) -> PathBuf {
        let p = self.dir.path().join("mcp.json");
        let mut value = value.clone();
        if let Some(root) = value.as_object_mut() {
            let op = root.entry("openpact").or_insert_with(|| json!({}));
            if let Some(op) = op.as_object_mut() {
                let perms = op.entry("permissions").or_insert_with(|| json!({}));
                if let Some(perms) = perms.as_object_mut() {
                    perms.entry("default").or_insert_with(|| json!("allow"));
                }
                let limits = op.entry("rateLimits").or_insert_with(|| json!({}));
                if let Some(limits) = limits.as_object_mut() {
                    limits.entry("default").or_insert_with(|| json!("off"));
                }
                // Built-in tools are tested on their own; elsewhere they would only shift
                // every tool list and count.
                op.entry("builtins").or_insert_with(|| json!(false));
            }
        }
        std::fs::write(&p, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        p
    }

    /// Config with these servers (name → entry) and optional `openpact` settings.
    pub fn servers(&self, servers: Value, openpact: Option<Value>) -> PathBuf {
        let mut cfg = json!({ "mcpServers": servers });
        if let Some(o) = openpact {
            cfg["openpact"] = o;
        }
        self.config(&cfg)
    }
}

/// A running `openpact serve` plus a client on its pipes.
pub struct Hub {
    pub child: Child,
    pub client: Client,
    pub stderr: Arc<Mutex<String>>,
    pub _scratch: Option<Scratch>,
}

/// Starts `openpact --config CONFIG serve` with a private state dir.
pub async fn serve(config: &Path) -> Hub {
    serve_with(config, &[], &[]).await
}

pub async fn serve_with(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Hub {
    let state = config.parent().unwrap().join("state");
    let mut cmd = Command::new(OPENPACT);
    cmd.arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(&state)
        .args(args);
    if !args.iter().any(|a| *a == "serve" || *a == "--mcp") {
        cmd.arg("serve");
    }
    cmd.env("OPENPACT_LOG", "info,openpact=debug")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().expect("spawn openpact");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr_pipe = child.stderr.take().unwrap();
    let stderr = Arc::new(Mutex::new(String::new()));
    let sink = stderr.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr_pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut s = sink.lock().unwrap();
            // Keep memory bounded when a test floods stderr on purpose.
            if s.len() < 4 << 20 {
                s.push_str(&line);
                s.push('\n');
            }
        }
    });
    let client = Client::over(stdin, stdout);
    Hub {
        child,
        client,
        stderr,
        _scratch: None,
    }
}

impl Hub {
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes stdin and waits for the process to exit; returns the exit code and how long
    /// it took.
    pub async fn close(&mut self) -> (Option<i32>, Duration) {
        self.client.close_stdin();
        let t0 = std::time::Instant::now();
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("hub exits")
            .unwrap();
        (status.code(), t0.elapsed())
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- openpact stderr ----\n{}", self.stderr());
        }
    }
}

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
        let r = self
            .request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}),
            )
            .await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        r["result"].clone()
    }

    /// All tools, following `nextCursor`.
    pub async fn list_tools(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        let mut params = json!({});
        loop {
            let r = self.request("tools/list", params).await;
            let result = &r["result"];
            out.extend(
                result["tools"]
                    .as_array()
                    .unwrap_or_else(|| panic!("no tools in {r}"))
                    .iter()
                    .cloned(),
            );
            match result.get("nextCursor").and_then(Value::as_str) {
                Some(c) => params = json!({"cursor": c}),
                None => return out,
            }
        }
    }

    /// `tools/call`; returns the whole response message.
    pub async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }
}

/// The text of the first content block of a `tools/call` response.
pub fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {response}"))
        .to_string()
}

/// Real community servers installed by `.ci/peers.sh` (see `target/peers/peers.json`).
pub struct Peers {
    pub vars: serde_json::Map<String, Value>,
}

impl Peers {
    /// The peers, or None (with a note) when they are not installed. With
    /// `OPENPACT_REQUIRE_PEERS=1` (as `.ci/run` sets) their absence fails the test instead.
    pub fn get() -> Option<Peers> {
        let path = std::env::var("OPENPACT_PEERS_JSON")
            .ok()
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/peers.json")
            });
        match std::fs::read(&path) {
            Ok(bytes) => Some(Peers {
                vars: serde_json::from_slice(&bytes).unwrap(),
            }),
            Err(e) => {
                if std::env::var("OPENPACT_REQUIRE_PEERS").as_deref() == Ok("1") {
                    panic!(
                        "real peers are required but {} is unreadable ({e}); run `bash .ci/peers.sh`",
                        path.display()
                    );
                }
                eprintln!(
                    "SKIPPED: real peers not installed ({}); run `bash .ci/peers.sh`",
                    path.display()
                );
                None
            }
        }
    }

    /// A `PEER_*` command line split into words.
    pub fn command(&self, name: &str) -> Vec<String> {
        self.vars[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name} missing in peers.json"))
            .split(' ')
            .map(String::from)
            .collect()
    }

    /// A `mcpServers` entry for a peer, with extra args.
    pub fn entry(&self, name: &str, extra: &[&str]) -> Value {
        let mut words = self.command(name);
        let program = words.remove(0);
        words.extend(extra.iter().map(|s| s.to_string()));
        json!({"command": program, "args": words})
    }
}

/// Whether a process with this pid exists (zombies count as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}
