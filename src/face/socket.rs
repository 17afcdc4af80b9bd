//! The shared hub's face: a private Unix socket where each connection is one MCP session
//! (newline-delimited JSON-RPC, both eras), which is what `openpact connect` forwards an
//! editor's stdio to. Only the user who runs the hub may connect: the socket's directory
//! is 0700, the socket 0600, and every peer's uid is checked.

use crate::hub::{Hub, Session};
use crate::jsonrpc::{Frame, Message};
use crate::platform;
use crate::state::{Lock, LockError};
use crate::transport::lines::{halves, read_frames_paced, spawn_writer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;

/// The first line `openpact connect` sends: which profile the window asked for.
pub const HELLO: &str = "openpact/connect";

/// How long a window's in-flight requests may still finish after it closes its end (a
/// pipe's end asks for its answers, as on stdio).
const FINISH_GRACE: Duration = Duration::from_millis(1000);

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{0}: another openpact hub is already serving this config there (`openpact servers` shows it)"
    )]
    InUse(String),
    #[error(
        "{0}: the socket path is too long for a Unix socket; set XDG_RUNTIME_DIR to a short directory"
    )]
    TooLong(String),
}

/// Where the shared hub of a config listens: `$XDG_RUNTIME_DIR/openpact/` (else the state
/// dir), one socket per config file, named by a hash of its path.
pub fn path_for(config: Option<&Path>, state_dir: &Path) -> PathBuf {
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(
            || state_dir.join("run"),
            |d| PathBuf::from(d).join("openpact"),
        );
    let key = match config {
        Some(path) => {
            let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            let hash = crate::policy::canonical::sha256(path.to_string_lossy().as_bytes());
            let hex = hash.strip_prefix("sha256:").unwrap_or(&hash);
            format!("hub-{}", &hex[..16.min(hex.len())])
        }
        None => "hub-none".to_string(),
    };
    dir.join(format!("{key}.sock"))
}

/// A bound socket, and the lock that makes its hub the only one for its config.
pub struct Bound {
    listener: UnixListener,
    /// Held for the hub's life: a second hub for the same config (two windows starting one
    /// at once) fails to take it and leaves; a socket file found without it is stale.
    _lock: Lock,
}

/// Binds `path` for this user only, as the one hub of its config. A socket file left by a
/// hub that died is replaced.
pub async fn bind(path: &Path) -> Result<Bound, SocketError> {
    let io = |source| SocketError::Io {
        path: path.display().to_string(),
        source,
    };
    if path.as_os_str().len() > platform::SOCKET_PATH_MAX {
        return Err(SocketError::TooLong(path.display().to_string()));
    }
    if let Some(dir) = path.parent() {
        platform::create_dir_all(dir, 0o700).map_err(io)?;
        platform::set_mode(dir, 0o700).map_err(io)?;
    }
    let lock = match crate::state::try_lock_private(&path.with_extension("lock")) {
        Ok(lock) => lock,
        Err(LockError::Open { source, .. }) => return Err(io(source)),
        Err(LockError::Held { .. } | LockError::Lock { .. }) => {
            return Err(SocketError::InUse(path.display().to_string()));
        }
    };
    if path.exists() {
        std::fs::remove_file(path).map_err(io)?;
    }
    let listener = UnixListener::bind(path).map_err(io)?;
    platform::set_mode(path, 0o600).map_err(io)?;
    Ok(Bound {
        listener,
        _lock: lock,
    })
}

/// The running socket face.
pub struct SocketFace {
    task: tokio::task::JoinHandle<()>,
    _lock: Lock,
    path: PathBuf,
    /// How many windows are connected now.
    pub clients: watch::Receiver<usize>,
}

impl SocketFace {
    /// Stops accepting and removes the socket file; connected windows see their connection
    /// end when the hub stops.
    pub fn stop(&self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for SocketFace {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn start(bound: Bound, path: PathBuf, hub: Arc<Hub>) -> SocketFace {
    let Bound {
        listener,
        _lock: lock,
    } = bound;
    let (count, clients) = watch::channel(0usize);
    let count = Arc::new(count);
    let me = platform::uid();
    let task = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("socket accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            match stream.peer_cred() {
                Ok(cred) if cred.uid() == me => {}
                Ok(cred) => {
                    tracing::warn!(uid = cred.uid(), "refused a connection from another user");
                    continue;
                }
                Err(e) => {
                    tracing::warn!("refused a connection whose user cannot be checked: {e}");
                    continue;
                }
            }
            count.send_modify(|n| *n += 1);
            let (hub, count) = (hub.clone(), count.clone());
            tokio::spawn(async move {
                if let Err(e) = serve_window(stream, hub).await {
                    tracing::debug!("window connection ended: {e}");
                }
                count.send_modify(|n| *n = n.saturating_sub(1));
            });
        }
    });
    SocketFace {
        task,
        _lock: lock,
        path,
        clients,
    }
}

/// One window: its session, from the first line to the end of its connection.
async fn serve_window(stream: UnixStream, hub: Arc<Hub>) -> std::io::Result<()> {
    let (reader, writer) = halves(stream)?;
    let (out, written) = spawn_writer(writer, "window".into());
    let session: std::sync::Mutex<Option<Arc<Session>>> = std::sync::Mutex::new(None);
    let mut refused = false;
    let current = || {
        session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    };
    let room = || {
        let s = current();
        async move {
            if let Some(s) = s {
                s.room().await;
            }
        }
    };
    let result = read_frames_paced(reader, hub.settings.max_message_size, |frame| {
        if refused {
            return;
        }
        if current().is_none() {
            match view_of(&hub, &frame) {
                Ok(view) => {
                    *session.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(Session::new(hub.clone(), out.clone(), view));
                }
                Err(unknown) => {
                    // Never a wider view than asked for: the window gets none.
                    tracing::warn!("a window asked for profile \"{unknown}\", which this hub's config does not define; its connection is closed");
                    refused = true;
                    out.close();
                    return;
                }
            }
        }
        if let Some(s) = current()
            && hello_of(&frame).is_none()
        {
            s.handle_frame(frame);
        }
    }, room)
    .await;
    if let Some(s) = current() {
        let deadline = tokio::time::Instant::now() + FINISH_GRACE;
        while s.in_flight() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        s.abort_all("the editor window closed");
    }
    out.close();
    let _ = tokio::time::timeout(Duration::from_millis(300), written).await;
    result
}

fn hello_of(frame: &Frame) -> Option<Message> {
    let Frame::Line(line) = frame else {
        return None;
    };
    let text = std::str::from_utf8(line).ok()?;
    if !text.contains(HELLO) {
        return None;
    }
    Message::parse(text.into())
        .ok()
        .filter(|m| m.method() == HELLO && m.kind() == crate::jsonrpc::Kind::Notification)
}

/// The view a window's first frame asks for: its hello's profile (`Err` naming one this
/// hub does not know), else the whole catalogue.
fn view_of(hub: &Hub, frame: &Frame) -> Result<usize, String> {
    let profile = hello_of(frame)
        .and_then(|m| m.params().map(String::from))
        .and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
        .and_then(|p| p.get("profile").and_then(|v| v.as_str()).map(String::from));
    match profile {
        None => Ok(0),
        Some(name) => hub.view_named(&name).ok_or(name),
    }
}
