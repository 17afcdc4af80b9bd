//! The shared hub's face: a private Unix socket where each connection is one editor window's
//! MCP session (both eras), served on the editor's own pipes when `openpact connect` handed
//! them over (see [`super::handoff`]), else as newline-delimited JSON-RPC on the connection.
//! Only the user who runs the hub may connect: the socket's directory is 0700, the socket
//! 0600, and every peer's uid is checked.

use super::handoff::{self, Noting};
use crate::hub::{Hub, Session};
use crate::jsonrpc::{self, Frame, Message};
use crate::platform;
use crate::state::{Lock, LockError};
use crate::transport::lines::{halves, read_frames_paced, spawn_writer};
use crate::transport::pollable::{Direction, Pollable};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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

/// The version of what `connect` and the hub say on the socket, in the socket's name: an
/// upgraded `connect` starts its own hub rather than talk to an older one it cannot hand
/// the editor's pipes to (which idles out when its last window goes).
const WIRE: u32 = 2;

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
            format!("hub{WIRE}-{}", &hex[..16.min(hex.len())])
        }
        None => format!("hub{WIRE}-none"),
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

/// One window: its session, from its hello to the end of its connection. A window whose
/// hello brought the editor's pipes is served on them ([`serve_handed`]); one without, on
/// the connection itself.
async fn serve_window(mut stream: UnixStream, hub: Arc<Hub>) -> std::io::Result<()> {
    let (first, rest, fds) = handoff::receive_first_line(&stream).await?;
    if first.is_empty() && rest.is_empty() && fds.is_empty() {
        // Closed without a word: `connect` asking whether a hub listens (see
        // `cli::connect::hub_listens`).
        return Ok(());
    }
    let hello = hello_of(&first);
    let view = match view_of(&hub, hello.as_ref()) {
        Ok(view) => view,
        Err(unknown) => {
            // Never a wider view than asked for: the window gets none.
            tracing::warn!(
                "a window asked for profile \"{unknown}\", which this hub's config does not define; its connection is closed"
            );
            let known = hub.profile_names();
            let known: Vec<&str> = known.iter().map(String::as_str).collect();
            let hint = crate::config::profiles_named(&known);
            // Said, so that `connect` does not take the closed connection for a hub that
            // was exiting and wait for it.
            let why =
                format!("no profile \"{unknown}\" in the config the shared hub serves: {hint}");
            let line = format!("{}\n", handoff::refusal(&why));
            stream.write_all(line.as_bytes()).await?;
            return Ok(());
        }
    };
    let asked = hello.as_ref().map(Asked::of).unwrap_or_default();
    match <[OwnedFd; 2]>::try_from(fds) {
        Ok([input, output]) => {
            tracing::debug!("a window handed over its editor's stdin and stdout");
            serve_handed(stream, hub, view, asked, input, output).await
        }
        Err(fds) if fds.is_empty() => {
            tracing::debug!("a window relays its editor's messages over its connection");
            // Not a hello: the window's first message.
            let first = (hello.is_none() && !first.is_empty()).then_some(first);
            serve_relayed(stream, hub, view, asked, first, rest).await
        }
        Err(fds) => Err(std::io::Error::other(format!(
            "a window passed {} descriptors; a hand-off passes stdin and stdout",
            fds.len()
        ))),
    }
}

/// What a window's hello asks for besides its profile.
#[derive(Default)]
struct Asked {
    /// What the editor told an earlier hub, to be replayed (see [`Session::replay`]).
    replay: Vec<Message>,
    /// The editor's pipes were another hub's, which died: its first bytes may be the end of
    /// a line that hub read the start of.
    resumed: bool,
    /// The start of a line `connect` read from the editor while no hub ran: read first.
    begun: Vec<u8>,
}

impl Asked {
    fn of(hello: &Message) -> Asked {
        let params: serde_json::Value = hello
            .params()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_default();
        let replay = params
            .get("replay")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
            .filter_map(|m| m.as_str())
            .filter_map(|m| Message::parse(m.into()).ok())
            .collect();
        use base64::Engine;
        let begun = params
            .get("begun")
            .and_then(|b| b.as_str())
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .unwrap_or_default();
        Asked {
            replay,
            resumed: params.get("resumed").and_then(|r| r.as_bool()) == Some(true),
            begun,
        }
    }
}

/// A window relayed over its connection: `connect` passes the editor's lines on.
async fn serve_relayed(
    stream: UnixStream,
    hub: Arc<Hub>,
    view: usize,
    asked: Asked,
    first: Option<Vec<u8>>,
    rest: Vec<u8>,
) -> std::io::Result<()> {
    let (reader, writer) = halves(stream)?;
    let (out, written) = spawn_writer(writer, "window".into());
    let session = Session::new(hub.clone(), out.clone(), view);
    session.replay(asked.replay).await;
    out.send(jsonrpc::notification(handoff::READY, None));
    if let Some(first) = first {
        session.handle_frame(Frame::Line(first));
    }
    let room = || {
        let s = session.clone();
        async move { s.room().await }
    };
    let reader = std::io::Cursor::new(rest).chain(reader);
    let result = read_frames_paced(
        reader,
        hub.settings.max_message_size,
        |frame| session.handle_frame(frame),
        room,
    )
    .await;
    session
        .finish(FINISH_GRACE, "the editor window closed")
        .await;
    out.close();
    let _ = tokio::time::timeout(Duration::from_millis(300), written).await;
    result
}

/// A window whose editor's stdin and stdout were handed over: the session reads and writes
/// them itself and keeps `connect` notes on the connection (see [`handoff`]). The session ends
/// when the editor closes its end, or when `connect` exits (its end of the connection closes;
/// it writes nothing after its hello).
async fn serve_handed(
    stream: UnixStream,
    hub: Arc<Hub>,
    view: usize,
    asked: Asked,
    input: OwnedFd,
    output: OwnedFd,
) -> std::io::Result<()> {
    let (mut from_connect, to_connect) = halves(stream)?;
    let (notes, notes_written) = spawn_writer(to_connect, "window notes".into());
    let (Some(input), Some(output)) = (
        Pollable::open(input, Direction::In)?,
        Pollable::open(output, Direction::Out)?,
    ) else {
        return Err(std::io::Error::other(
            "the editor's pipes cannot be polled; `connect` should have relayed them",
        ));
    };
    let (out, written) = spawn_writer(Noting::new(output, notes.clone()), "window".into());
    let session = Session::new(hub.clone(), out.clone(), view);
    session.replay(asked.replay).await;
    notes.send(jsonrpc::notification(handoff::READY, None));
    // What `connect` read of a line goes first.
    let mut resumed = asked.resumed;
    let input = std::io::Cursor::new(asked.begun).chain(input);
    let room = || {
        let s = session.clone();
        async move { s.room().await }
    };
    let read = read_frames_paced(
        input,
        hub.settings.max_message_size,
        |frame| {
            if std::mem::take(&mut resumed)
                && let Frame::Line(line) = &frame
                && crate::jsonrpc::parse_frame(line.clone()).is_err()
            {
                tracing::debug!("dropped the end of a line the previous hub had begun to read");
                return;
            }
            session.handle_frame_seen(frame, |m| {
                if let Some(note) = handoff::note_of(m) {
                    notes.send(note);
                }
            });
        },
        room,
    );
    let connect_exited = async {
        let mut buf = [0u8; 256];
        while let Ok(n) = from_connect.read(&mut buf).await
            && n > 0
        {}
    };
    let editor_closed = tokio::select! {
        _ = read => true,
        () = connect_exited => false,
    };
    if editor_closed {
        session
            .finish(FINISH_GRACE, "the editor window closed")
            .await;
    } else {
        session
            .finish(Duration::ZERO, "openpact connect exited")
            .await;
    }
    out.close();
    let _ = tokio::time::timeout(Duration::from_millis(300), written).await;
    if editor_closed {
        notes.send(jsonrpc::notification(handoff::END, None));
    }
    notes.close();
    let _ = tokio::time::timeout(Duration::from_millis(300), notes_written).await;
    Ok(())
}

fn hello_of(line: &[u8]) -> Option<Message> {
    let text = std::str::from_utf8(line).ok()?;
    if !text.contains(HELLO) {
        return None;
    }
    Message::parse(text.into())
        .ok()
        .filter(|m| m.method() == HELLO && m.kind() == crate::jsonrpc::Kind::Notification)
}

/// The view a window's hello asks for (`Err` naming a profile this hub does not know); the
/// whole catalogue without one.
fn view_of(hub: &Hub, hello: Option<&Message>) -> Result<usize, String> {
    let profile = hello
        .and_then(|m| m.params().map(String::from))
        .and_then(|p| serde_json::from_str::<serde_json::Value>(&p).ok())
        .and_then(|p| p.get("profile").and_then(|v| v.as_str()).map(String::from));
    match profile {
        None => Ok(0),
        Some(name) => hub.view_named(&name).ok_or(name),
    }
}
