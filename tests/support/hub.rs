//! `openpact serve` as a real process with a [`Client`] on its stdin/stdout. The hub's
//! stderr is drained into a buffer that tests can read (and that is printed when a test
//! fails, via `Hub::drop`).

use super::{Client, OPENPACT, Scratch, fixture, ready, state_dir};
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// A running `openpact serve` plus a client on its pipes.
pub struct Hub {
    pub child: Child,
    pub client: Client,
    pub stderr: Arc<Mutex<String>>,
    /// The scratch dir holding the config, when the hub owns it; removed after the hub is
    /// stopped.
    scratch: Option<Scratch>,
}

/// Starts `openpact --config CONFIG serve` with a private state dir.
pub async fn serve(config: &Path) -> Hub {
    serve_with(config, &[], &[]).await
}

/// Starts a hub over `servers` (with `openpact` settings) in a scratch dir of its own.
pub async fn serve_config(servers: Value, openpact: Option<Value>) -> Hub {
    let sc = Scratch::new();
    serve(&sc.servers(servers, openpact)).await.owning(sc)
}

/// [`serve_config`], then `initialize` and wait until each of `tools` is listed.
pub async fn serve_ready(servers: Value, openpact: Option<Value>, tools: &[&str]) -> Hub {
    let mut hub = serve_config(servers, openpact).await;
    ready(&mut hub.client, tools).await;
    hub
}

/// A hub over plain fixture servers called `names`, in that order, once each one's `echo` is
/// listed.
pub async fn serve_fixtures(names: &[&str]) -> Hub {
    let servers: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| (n.to_string(), fixture(&[])))
        .collect();
    let echoes: Vec<String> = names.iter().map(|n| format!("{n}:echo")).collect();
    let echoes: Vec<&str> = echoes.iter().map(String::as_str).collect();
    serve_ready(Value::Object(servers), None, &echoes).await
}

pub async fn serve_with(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Hub {
    let mut cmd = openpact_for(config, None);
    cmd.args(args);
    if !args.iter().any(|a| *a == "serve" || *a == "--mcp") {
        cmd.arg("serve");
    }
    cmd.env("OPENPACT_LOG", "info,openpact=debug")
        .envs(env.iter().copied())
        .kill_on_drop(true);
    Hub::spawn(cmd)
}

/// `openpact --config CONFIG --state-dir STATE`, STATE being the harness's state dir for
/// that config; run through `wrapper` (such as `setsid`) if given.
pub fn openpact_for(config: &Path, wrapper: Option<&str>) -> Command {
    let mut cmd = match wrapper {
        Some(w) => {
            let mut cmd = Command::new(w);
            cmd.arg(OPENPACT);
            cmd
        }
        None => Command::new(OPENPACT),
    };
    cmd.arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(state_dir(config));
    cmd
}

/// Collects a child's output lines into a shared string, up to about `cap` bytes (a test
/// that floods stderr on purpose must not exhaust memory).
pub fn collect_lines(
    pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    cap: usize,
) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(pipe).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let mut s = sink.lock().unwrap();
            if s.len() < cap {
                s.push_str(&line);
                s.push('\n');
            }
        }
    });
    text
}

/// Spawns `cmd` with all three pipes; its stderr is collected in the background.
pub fn spawn_piped(mut cmd: Command) -> (Child, ChildStdin, ChildStdout, Arc<Mutex<String>>) {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn openpact");
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = collect_lines(child.stderr.take().unwrap(), 4 << 20);
    (child, stdin, stdout, stderr)
}

impl Hub {
    /// Runs `cmd` (an `openpact` serving over stdio) with a client on its pipes.
    pub fn spawn(cmd: Command) -> Hub {
        let (child, stdin, stdout, stderr) = spawn_piped(cmd);
        Hub {
            child,
            client: Client::over(stdin, stdout),
            stderr,
            scratch: None,
        }
    }

    /// The hub, now also owning `sc` (its config's scratch dir), which goes when it does.
    pub fn owning(mut self, sc: Scratch) -> Hub {
        self.scratch = Some(sc);
        self
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Polls the hub's stderr (nothing else announces a log line) until it contains `needle`.
    pub async fn wait_log(&self, needle: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.stderr().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "the hub never logged {needle:?}:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The base URL of the HTTP face (`http://127.0.0.1:PORT`), once the hub has logged
    /// where it serves.
    pub async fn http_base(&self) -> String {
        let logged = "serving MCP over HTTP on http://";
        self.wait_log(logged, super::WAIT).await;
        let log = self.stderr();
        let start = log.find(logged).unwrap() + logged.len() - "http://".len();
        let end = start + log[start..].find("/mcp").unwrap();
        log[start..end].to_string()
    }

    /// Closes stdin and waits for the process to exit; returns the exit code and how long
    /// it took.
    pub async fn close(&mut self) -> (Option<i32>, Duration) {
        self.client.close_stdin();
        self.exit().await
    }

    /// Sends `signal` and waits for the process to exit; returns the exit code and how long
    /// it took.
    pub async fn signal(&mut self, signal: nix::sys::signal::Signal) -> (Option<i32>, Duration) {
        let pid = self.child.id().expect("running");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
        self.exit().await
    }

    async fn exit(&mut self) -> (Option<i32>, Duration) {
        let t0 = Instant::now();
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
