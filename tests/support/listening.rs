//! Server processes on a loopback port (remote MCP servers for the hub to reach over HTTP):
//! a free port, the process killed on drop, and server-everything in its HTTP modes.

use super::{Peers, StderrLog, WAIT};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

/// A port nobody listens on (just now).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process on a loopback port, killed on drop; its output is kept for failures.
pub struct Listening {
    pub child: Child,
    pub port: u16,
    _out: StderrLog,
    _err: StderrLog,
}

impl Listening {
    /// Starts `words` with `env` and waits until the port accepts connections.
    pub async fn start(
        what: &str,
        words: &[String],
        env: &[(&str, String)],
        port: u16,
    ) -> Listening {
        let mut child = Command::new(&words[0])
            .args(&words[1..])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {words:?}: {e}"));
        let out = StderrLog::drain(&format!("{what} stdout"), child.stdout.take().unwrap());
        let err = StderrLog::drain(what, child.stderr.take().unwrap());
        let deadline = Instant::now() + WAIT;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < deadline, "{what} never listened on {port}");
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{what} exited at start: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Listening {
            child,
            port,
            _out: out,
            _err: err,
        }
    }

    /// Kills the process and waits for it to be gone.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}

/// The project's preload that keeps host-less `listen()` on 127.0.0.1.
fn localhost_shim() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/remote/localhost.cjs")
}

/// server-everything in `mode` (`streamableHttp` or `sse`) on `port`, loopback only.
pub async fn everything_listening(peers: &Peers, mode: &str, port: u16) -> Listening {
    // PEER_EVERYTHING is `node …/dist/index.js stdio`.
    let words = peers.command("PEER_EVERYTHING");
    let shim = localhost_shim().display().to_string();
    let cmd = vec![
        words[0].clone(),
        "--require".into(),
        shim,
        words[1].clone(),
        mode.into(),
    ];
    Listening::start(
        &format!("server-everything {mode}"),
        &cmd,
        &[("PORT", port.to_string())],
        port,
    )
    .await
}
