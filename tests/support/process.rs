//! Processes other than the harness's hub: a child's stderr kept for the failure report, and
//! commands (the CLI, external clients) run to their end.

use super::{Client, collect_lines};
use serde_json::Value;
use std::fmt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::{Child, Command};

/// How long a whole external client run (Inspector, Python) may take; they finish in a
/// second or two.
const CLIENT_LIMIT: Duration = Duration::from_secs(90);

/// `openpact-fixture --http 127.0.0.1:0 ARGS`, and the URL it serves MCP on once it has
/// said so on stderr.
pub async fn fixture_over_http(args: &[&str]) -> (Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut server = Command::new(super::FIXTURE)
        .args(["--http", "127.0.0.1:0"])
        .args(args)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(server.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(super::WAIT, async {
        loop {
            let line = lines.next_line().await.unwrap().expect("the address");
            if let Some((_, url)) = line.split_once("serving MCP over HTTP on ") {
                return url.to_string();
            }
        }
    })
    .await
    .unwrap();
    (server, url)
}

/// A child's stderr, collected in the background and printed if the test fails.
pub struct StderrLog {
    what: String,
    text: Arc<Mutex<String>>,
}

impl StderrLog {
    pub fn drain(what: &str, pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Self {
        StderrLog {
            what: what.to_string(),
            text: collect_lines(pipe, 1 << 20),
        }
    }

    /// What the child has written so far.
    pub fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }
}

impl Drop for StderrLog {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- {} stderr ----\n{}",
                self.what,
                self.text.lock().unwrap()
            );
        }
    }
}

/// What a finished command left behind.
#[derive(Debug)]
pub struct Ran {
    /// The command, for failure messages.
    pub what: String,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Runs `cmd` to its end (stdin from /dev/null unless the command says otherwise);
    /// panics if it takes longer than `limit`. `what` names it in failure messages.
    pub async fn of(mut cmd: Command, what: impl fmt::Debug, limit: Duration) -> Ran {
        let what = format!("{what:?}");
        let out = tokio::time::timeout(limit, cmd.kill_on_drop(true).output())
            .await
            .unwrap_or_else(|_| panic!("{what} did not finish within {limit:?}"))
            .unwrap_or_else(|e| panic!("run {what}: {e}"));
        Ran::from_output(what, &out)
    }

    pub fn from_output(what: String, out: &std::process::Output) -> Ran {
        Ran {
            what,
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Panics with everything the run printed unless it exited with `code`.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code; run was {self:#?}"
        );
        self
    }

    /// Stdout as one JSON value, of a run that must have succeeded.
    pub fn json(&self) -> Value {
        assert_eq!(self.code, Some(0), "{self}");
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{self}"))
    }

    /// The `result` of a successful JSON-RPC exchange printed on stdout.
    pub fn result(&self) -> Value {
        let v = self.json();
        assert!(v["result"].is_object(), "{}: {v}", self.what);
        v["result"].clone()
    }
}

impl fmt::Display for Ran {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.what, self.code, self.stdout, self.stderr
        )
    }
}

/// Runs the program `words[0]` with the other words as arguments in `cwd`, with `env` added,
/// to its end within [`CLIENT_LIMIT`].
pub async fn run_in(words: &[String], cwd: &Path, env: &[(&str, &Path)]) -> Ran {
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..])
        .current_dir(cwd)
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    Ran::of(cmd, words, CLIENT_LIMIT).await
}

/// A server (`words`) run directly in `cwd`, no hub, with the harness client on its pipes;
/// its stderr is kept as `what`'s log.
pub fn spawn_direct(what: &str, words: &[String], cwd: &Path) -> (Child, Client, StderrLog) {
    let mut child = Command::new(&words[0])
        .args(&words[1..])
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {words:?}: {e}"));
    let log = StderrLog::drain(what, child.stderr.take().unwrap());
    let client = Client::over(child.stdin.take().unwrap(), child.stdout.take().unwrap());
    (child, client, log)
}

/// The fixture's own pid and its grandchild's from its `pids` answer, as this test process
/// sees them (see [`host_pid`](super::host_pid)).
pub fn server_pids(answer: &str) -> (u32, Option<u32>) {
    let v: Value = serde_json::from_str(answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
    let pidns = v["pidns"].as_str().unwrap_or_default();
    let host = |pid: u64| {
        let pid = u32::try_from(pid).unwrap();
        super::host_pid::host_pid(pid, pidns)
            .unwrap_or_else(|| panic!("no process {pid} in {pidns}"))
    };
    (
        host(v["pid"].as_u64().unwrap()),
        v["grandchild"].as_u64().map(host),
    )
}
