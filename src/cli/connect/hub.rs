//! Reaching the shared hub: its socket, or a new hub started detached when nobody answers;
//! the wait for one that went away to exit; the hello a window opens with.

use super::kept::Replay;
use super::{EXIT_WAIT, START_WAIT, Target};
use crate::face::socket::HELLO;
use crate::jsonrpc;
use crate::platform;
use std::path::Path;
use std::time::Duration;
use tokio::net::UnixStream;

/// The first line a window sends: its profile, the session a new hub must replay, and the
/// start of a line `connect` read from the editor (base64), which the hub reads first.
pub(super) fn hello(target: &Target, replay: &Replay, resumed: bool, begun: &[u8]) -> String {
    use base64::Engine;
    jsonrpc::notification(
        HELLO,
        Some(
            &serde_json::json!({
                "profile": target.profile,
                "pid": std::process::id(),
                "replay": replay.messages(),
                "resumed": resumed,
                "begun": base64::engine::general_purpose::STANDARD.encode(begun),
            })
            .to_string(),
        ),
    )
}

/// Connects to the hub, starting it when nobody answers.
pub(super) async fn reach(target: &Target) -> Result<UnixStream, String> {
    match UnixStream::connect(&target.socket).await {
        Ok(stream) => Ok(stream),
        Err(_) => start_hub(target).await,
    }
}

/// The process of the hub at the other end of `stream` (the socket's listener).
pub(super) fn hub_process(stream: &UnixStream) -> Option<platform::ProcessEnd> {
    let pid = stream.peer_cred().ok()?.pid()?;
    platform::ProcessEnd::of(u32::try_from(pid).ok()?)
}

/// Waits until a hub that let its windows go has exited: until then its listener may still
/// take connections it will never serve, and its lock keeps a new hub from starting (which
/// would leave, thinking the old one serves).
pub(super) async fn exited(hub: Option<&platform::ProcessEnd>) {
    match hub {
        Some(hub) => {
            if !hub.exited(EXIT_WAIT).await {
                tracing::warn!(
                    "the shared hub that went away is still running after {}s; trying the socket anyway",
                    EXIT_WAIT.as_secs()
                );
            }
        }
        // Its process unknown: a pause, so that trying again does not spin.
        None => tokio::time::sleep(Duration::from_millis(100)).await,
    }
}

/// Starts `openpact serve --shared` detached (its own session, its log in the state dir)
/// and waits for its socket. Two windows starting at once both try; one binds, and the
/// other's hub sees the socket taken and exits, while both windows connect to the winner.
async fn start_hub(target: &Target) -> Result<UnixStream, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the openpact binary: {e}"))?;
    if let Some(dir) = target.log.parent() {
        crate::state::ensure_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let log = platform::create_mode(std::fs::OpenOptions::new().create(true).append(true), 0o600)
        .open(&target.log)
        .map_err(|e| format!("{}: {e}", target.log.display()))?;
    let mut cmd = std::process::Command::new(exe);
    if let Some(config) = &target.config {
        cmd.arg("--config").arg(config);
        // Relative paths in the config are its directory's business; the hub's own should
        // not depend on which window started it.
        if let Some(dir) = config.parent() {
            cmd.current_dir(dir);
        }
    }
    if let Some(state) = &target.state_dir {
        cmd.arg("--state-dir").arg(state);
    }
    cmd.args(["serve", "--shared"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    // Out of the window's process group: what is sent to that group (a Ctrl-C in the editor's
    // terminal) does not reach the hub the other windows share.
    platform::new_process_group(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("could not start the shared hub: {e}"))?;
    tracing::info!(pid = child.id(), log = %target.log.display(), "started the shared hub");
    let deadline = tokio::time::Instant::now() + START_WAIT;
    loop {
        if let Ok(stream) = UnixStream::connect(&target.socket).await {
            // The hub usually outlives this process (init adopts it then); if it ends first,
            // it is reaped here rather than left a zombie.
            std::thread::spawn(move || {
                let _ = child.wait();
            });
            return Ok(stream);
        }
        if let Ok(Some(status)) = child.try_wait()
            && !status.success()
        {
            // (Success means it lost a race to another window's hub: wait for that one.)
            return Err(format!(
                "the shared hub exited at once ({status}); its log, {}, says:\n{}",
                target.log.display(),
                log_tail(&target.log)
            ));
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the shared hub did not open {} within {}s; see its log, {}",
                target.socket.display(),
                START_WAIT.as_secs(),
                target.log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}
