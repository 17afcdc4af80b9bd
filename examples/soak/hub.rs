//! The processes the soak starts: the hub (`openpact serve --http 127.0.0.1:0`, its config
//! and a fresh state dir under `target/soak-work/`, its stdio piped for a client or not),
//! and the remote server (`openpact-fixture --http 127.0.0.1:PORT`), which the soak kills
//! and starts again. Every pid is registered, so that an early exit kills them all.

use crate::Ctx;
use anyhow::{Context, Result, anyhow, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

static PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn pids() -> std::sync::MutexGuard<'static, Vec<u32>> {
    PIDS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// SIGKILLs every process the soak started and has not stopped.
pub fn kill_all() {
    for pid in std::mem::take(&mut *pids()) {
        signal(pid, Signal::SIGKILL);
    }
}

fn signal(pid: u32, sig: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = kill(Pid::from_raw(pid), sig);
    }
}

/// What the hub logs (on stderr) before the URL it serves on.
const LISTENING: &str = "serving MCP over HTTP on ";

/// A running hub.
pub struct HubProcess {
    child: Child,
    pub pid: u32,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Its stdio, when started with a stdio client in mind.
    pub stdio: Option<(ChildStdin, ChildStdout)>,
    pub log: PathBuf,
}

/// Starts `openpact --config CONFIG --state-dir STATE serve --http 127.0.0.1:0` with these
/// servers and `openpact` settings; `--no-stdio` unless `stdio`.
pub async fn start(
    ctx: &Ctx,
    label: &str,
    servers: Value,
    settings: Value,
    stdio: bool,
) -> Result<HubProcess> {
    let config = ctx.work.join(format!("{label}.json"));
    let text = serde_json::to_vec_pretty(&json!({"mcpServers": servers, "openpact": settings}))?;
    std::fs::write(&config, text).with_context(|| format!("cannot write {}", config.display()))?;
    let state = ctx.work.join(format!("state-{label}"));
    let _ = std::fs::remove_dir_all(&state);
    let log = ctx.work.join(format!("{label}.stderr.log"));
    let mut cmd = Command::new(&ctx.openpact);
    cmd.arg("--config")
        .arg(&config)
        .arg("--state-dir")
        .arg(&state)
        .args(["serve", "--http", "127.0.0.1:0"]);
    if !stdio {
        cmd.arg("--no-stdio");
    }
    let piped = || if stdio { Stdio::piped() } else { Stdio::null() };
    cmd.env_remove("OPENPACT_LOG")
        .env_remove("RUST_LOG")
        .stdin(piped())
        .stdout(piped())
        .stderr(create(&log)?)
        .kill_on_drop(true);
    let mut child = cmd.spawn().context("cannot start openpact")?;
    let pid = child
        .id()
        .ok_or_else(|| anyhow!("openpact exited at once"))?;
    pids().push(pid);
    let stdio = match (child.stdin.take(), child.stdout.take()) {
        (Some(i), Some(o)) => Some((i, o)),
        _ => None,
    };
    let url = url_from_log(&mut child, &log, "openpact").await?;
    let base = url
        .strip_suffix("/mcp")
        .ok_or_else(|| anyhow!("unexpected URL {url}"))?
        .to_string();
    Ok(HubProcess {
        child,
        pid,
        base,
        stdio,
        log,
    })
}

impl HubProcess {
    pub fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// SIGTERM, then SIGKILL after 10 s; whether it exited by itself with status 0.
    pub async fn stop(mut self) -> bool {
        stop_child(&mut self.child, self.pid, Signal::SIGTERM).await
    }
}

async fn stop_child(child: &mut Child, pid: u32, sig: Signal) -> bool {
    signal(pid, sig);
    let clean = match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
        Ok(Ok(status)) => status.success() || sig == Signal::SIGKILL,
        _ => {
            let _ = child.kill().await;
            false
        }
    };
    pids().retain(|p| *p != pid);
    clean
}

fn create(log: &Path) -> Result<std::fs::File> {
    std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))
}

/// Waits for `child` to log where it listens (the `http://…/mcp` after [`LISTENING`]).
async fn url_from_log(child: &mut Child, log: &Path, label: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let url = text
            .lines()
            .find_map(|l| l.split_once(LISTENING))
            .and_then(|(_, rest)| rest.split_whitespace().next());
        if let Some(url) = url {
            return Ok(url.to_string());
        }
        if !matches!(child.try_wait(), Ok(None)) {
            bail!("{label} exited at start; see {}", log.display());
        }
        if Instant::now() > deadline {
            bail!("{label} never said where it listens; see {}", log.display());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A free loopback port (bound, read, released).
pub fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("cannot bind a loopback port")?;
    Ok(l.local_addr()?.port())
}

/// `openpact-fixture --http 127.0.0.1:PORT`: a remote server for the hub, on a fixed port
/// so that the hub finds it again after a restart.
pub struct Remote {
    child: Child,
    pid: u32,
    pub port: u16,
    /// Starts so far.
    pub starts: u64,
}

impl Remote {
    pub async fn start(ctx: &Ctx, port: u16) -> Result<Remote> {
        let mut child = spawn_remote(ctx, port)?;
        let pid = wait_remote(ctx, &mut child).await?;
        Ok(Remote {
            child,
            pid,
            port,
            starts: 1,
        })
    }

    /// Kills it (SIGKILL when `hard`, else SIGTERM) and starts it again after `down`.
    pub async fn restart(&mut self, ctx: &Ctx, hard: bool, down: Duration) -> Result<()> {
        let sig = if hard {
            Signal::SIGKILL
        } else {
            Signal::SIGTERM
        };
        stop_child(&mut self.child, self.pid, sig).await;
        tokio::time::sleep(down).await;
        // The port may take a moment to be free again after a hard kill.
        let mut tries = 0;
        loop {
            let mut child = spawn_remote(ctx, self.port)?;
            match wait_remote(ctx, &mut child).await {
                Ok(pid) => {
                    self.child = child;
                    self.pid = pid;
                    self.starts += 1;
                    return Ok(());
                }
                Err(e) if tries >= 20 => return Err(e),
                Err(_) => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            }
        }
    }

    pub async fn stop(mut self) {
        stop_child(&mut self.child, self.pid, Signal::SIGTERM).await;
    }
}

fn spawn_remote(ctx: &Ctx, port: u16) -> Result<Child> {
    let log = ctx.work.join("soak-remote.stderr.log");
    Command::new(&ctx.fixture)
        .args(["--name", "remote", "--http", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(create(&log)?)
        .kill_on_drop(true)
        .spawn()
        .context("cannot start the remote fixture")
}

async fn wait_remote(ctx: &Ctx, child: &mut Child) -> Result<u32> {
    let pid = child
        .id()
        .ok_or_else(|| anyhow!("the remote fixture exited at once"))?;
    pids().push(pid);
    let log = ctx.work.join("soak-remote.stderr.log");
    match url_from_log(child, &log, "the remote fixture").await {
        Ok(_) => Ok(pid),
        Err(e) => {
            pids().retain(|p| *p != pid);
            Err(e)
        }
    }
}
