//! `openpact connect`: an editor's stdio session forwarded to the shared hub of its config
//! (see [`super::socket`]), which it starts when none runs. It reads just enough of each
//! message to stand in for the editor when the hub goes away: it fails the requests that
//! were in flight with an error that says so, starts a new hub, replays the editor's
//! `initialize`, log level and subscriptions, and announces `list_changed` — the editor's
//! pipe stays open throughout.

use super::socket::{self, HELLO};
use crate::jsonrpc::{self, Frame, Kind, Message};
use crate::platform;
use crate::transport::lines::{Outbox, halves, read_frames_paced, spawn_writer};
use crate::transport::stdio;
use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

/// What the in-flight requests of a hub that went away are answered with.
pub const RESTARTED: &str = "the shared openpact hub stopped while this request was in flight, and has been restarted; send the request again";

/// Ids of the requests `connect` makes itself (replays): never an editor's.
const OWN_ID: &str = "\"openpact-connect:";

/// How long a hub that was just started may take to listen.
const START_WAIT: Duration = Duration::from_secs(15);
/// How long a replayed `initialize` may take to be answered.
const REPLAY_WAIT: Duration = Duration::from_secs(30);
/// After the editor closes its end: how long answers to its last requests may take.
const FINISH_GRACE: Duration = Duration::from_millis(1500);

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("could not set up stdio: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Start(String),
}

/// Where the shared hub is and how to start it.
pub struct Target {
    pub socket: PathBuf,
    /// The config file, absolute (`None`: the hub runs without one).
    pub config: Option<PathBuf>,
    /// `--state-dir` as given, passed on to the hub.
    pub state_dir: Option<PathBuf>,
    /// Where the hub's log goes.
    pub log: PathBuf,
    pub profile: Option<String>,
    pub max_message_size: usize,
}

/// What the editor said that a new hub must hear again.
#[derive(Default)]
struct Replay {
    /// `initialize` params.
    initialize: Option<String>,
    initialized: bool,
    /// `logging/setLevel` params.
    level: Option<String>,
    subscriptions: BTreeSet<String>,
}

/// One connection to the hub.
struct Link {
    out: Outbox,
    frames: mpsc::UnboundedReceiver<Frame>,
}

impl Link {
    /// Reads the hub only while `editor` takes what it sends (a window that does not read
    /// makes the hub stop reading it, rather than this process hold its answers).
    fn over(stream: UnixStream, max: usize, editor: &Outbox) -> std::io::Result<Link> {
        let (reader, writer) = halves(stream)?;
        let (out, _) = spawn_writer(writer, "shared hub".into());
        let (tx, frames) = mpsc::unbounded_channel();
        let editor = editor.clone();
        tokio::spawn(async move {
            let room = || paced(Some(editor.clone()), max);
            let _ = read_frames_paced(
                reader,
                max,
                |f| {
                    let _ = tx.send(f);
                },
                room,
            )
            .await;
        });
        Ok(Link { out, frames })
    }
}

/// Waits while more than `limit` bytes wait to be written to `out`.
async fn paced(out: Option<Outbox>, limit: usize) {
    let Some(out) = out else { return };
    loop {
        let Some(wrote) = out.wrote() else { return };
        tokio::pin!(wrote);
        wrote.as_mut().enable();
        if out.backlog() < limit {
            return;
        }
        wrote.await;
    }
}

/// Forwards stdio until the editor closes it.
pub async fn run(target: Target) -> Result<(), ConnectError> {
    let max = target.max_message_size.saturating_mul(4);
    let stdout = stdio::stdout()?;
    let editor_out = stdout.outgoing.clone();
    let (tx, mut from_editor) = mpsc::unbounded_channel::<Frame>();
    // The editor is read only while the hub takes what it sends.
    let to_hub: Arc<Mutex<Option<Outbox>>> = Arc::default();
    let _closed = {
        let to_hub = to_hub.clone();
        let limit = target.max_message_size;
        stdio::read_stdin(
            max,
            move |f| {
                let _ = tx.send(f);
            },
            move || {
                let out = to_hub
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone();
                paced(out, limit)
            },
        )?
    };
    let mut replay = Replay::default();
    let mut in_flight: HashSet<String> = HashSet::new();
    // The hub is started when the editor first speaks: `connect </dev/null` starts nothing.
    let Some(first) = from_editor.recv().await else {
        editor_out.close();
        return Ok(());
    };
    let mut link = open(&target, max, &editor_out)
        .await
        .map_err(ConnectError::Start)?;
    *to_hub.lock().unwrap_or_else(PoisonError::into_inner) = Some(link.out.clone());
    from_editor_frame(first, &mut replay, &mut in_flight, &link.out, &editor_out);
    loop {
        tokio::select! {
            frame = from_editor.recv() => match frame {
                Some(frame) => from_editor_frame(frame, &mut replay, &mut in_flight, &link.out, &editor_out),
                None => break,
            },
            frame = link.frames.recv() => match frame {
                Some(frame) => from_hub_frame(frame, &mut in_flight, &editor_out),
                None => {
                    tracing::warn!("the shared hub went away; starting a new one");
                    for id in in_flight.drain() {
                        editor_out.send(jsonrpc::error(&id, crate::upstream::code::UNAVAILABLE, RESTARTED, None));
                    }
                    link = reconnect(&target, max, &replay, &mut from_editor, &editor_out).await;
                    *to_hub.lock().unwrap_or_else(PoisonError::into_inner) = Some(link.out.clone());
                    if replay.initialized {
                        for list in ["tools", "prompts", "resources"] {
                            editor_out.send(jsonrpc::notification(&format!("notifications/{list}/list_changed"), None));
                        }
                    }
                }
            },
        }
    }
    // The editor is gone: its last answers may still come.
    link.out.close();
    let deadline = tokio::time::Instant::now() + FINISH_GRACE;
    while !in_flight.is_empty() {
        match tokio::time::timeout_at(deadline, link.frames.recv()).await {
            Ok(Some(frame)) => from_hub_frame(frame, &mut in_flight, &editor_out),
            _ => break,
        }
    }
    editor_out.close();
    let _ = tokio::time::timeout(Duration::from_millis(300), stdout.flushed).await;
    Ok(())
}

/// Notes what the editor's frame means for a replay, then passes it on.
fn from_editor_frame(
    frame: Frame,
    replay: &mut Replay,
    in_flight: &mut HashSet<String>,
    hub: &Outbox,
    editor: &Outbox,
) {
    let line = match frame {
        Frame::Line(line) => line,
        Frame::Oversized { len, edges } => {
            let id =
                jsonrpc::id_in_edges(&edges).map_or_else(|| "null".to_string(), |n| n.to_string());
            editor.send(jsonrpc::error(
                &id,
                jsonrpc::code::INVALID_REQUEST,
                &format!("message of {len} bytes is larger than openpact accepts"),
                None,
            ));
            return;
        }
    };
    // Not text: the hub answers what it makes of it, as it would on stdio.
    let text = String::from_utf8(line)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    if let Ok(messages) = jsonrpc::parse_frame(text.clone().into_bytes()) {
        for m in messages.flatten() {
            note(&m, replay, in_flight);
        }
    }
    hub.send(text);
}

fn note(m: &Message, replay: &mut Replay, in_flight: &mut HashSet<String>) {
    match m.kind() {
        Kind::Request => {
            in_flight.insert(m.id().to_string());
            let params = m.params().map(String::from);
            match m.method() {
                "initialize" => replay.initialize = params,
                "logging/setLevel" => replay.level = params,
                "resources/subscribe" => replay.subscriptions.extend(uri_of(params)),
                "resources/unsubscribe" => {
                    if let Some(uri) = uri_of(params) {
                        replay.subscriptions.remove(&uri);
                    }
                }
                _ => {}
            }
        }
        Kind::Notification => {
            if m.method() == "notifications/initialized" {
                replay.initialized = true;
            }
        }
        Kind::Response => {}
    }
}

fn uri_of(params: Option<String>) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(&params?).ok()?;
    v.get("uri")?.as_str().map(String::from)
}

/// Passes a hub frame on, unless it answers one of `connect`'s own requests.
fn from_hub_frame(frame: Frame, in_flight: &mut HashSet<String>, editor: &Outbox) {
    let Frame::Line(line) = frame else { return };
    let Ok(text) = String::from_utf8(line) else {
        return;
    };
    // Only responses need a look; their `id` is near the start of what the hub writes.
    match Message::parse(text.into_boxed_str()) {
        Ok(m) if m.kind() == Kind::Response => {
            if m.id().starts_with(OWN_ID) {
                return;
            }
            in_flight.remove(m.id());
            editor.send(m.into_text());
        }
        Ok(m) => {
            editor.send(m.into_text());
        }
        Err(_) => {}
    }
}

/// Connects to the hub, starting it when nobody answers.
async fn open(target: &Target, max: usize, editor: &Outbox) -> Result<Link, String> {
    let hello = jsonrpc::notification(
        HELLO,
        Some(
            &serde_json::json!({ "profile": target.profile, "pid": std::process::id() })
                .to_string(),
        ),
    );
    let stream = match UnixStream::connect(&target.socket).await {
        Ok(stream) => stream,
        Err(_) => start_hub(target).await?,
    };
    let link = Link::over(stream, max, editor).map_err(|e| e.to_string())?;
    link.out.send(hello);
    Ok(link)
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

/// Connects again (starting a hub) until it works, answering what the editor asks in the
/// meantime with why it cannot be served yet; then replays the editor's session.
async fn reconnect(
    target: &Target,
    max: usize,
    replay: &Replay,
    from_editor: &mut mpsc::UnboundedReceiver<Frame>,
    editor: &Outbox,
) -> Link {
    let mut delay = Duration::from_millis(100);
    loop {
        match open(target, max, editor).await {
            Ok(mut link) => match replay_on(&mut link, replay).await {
                Ok(()) => return link,
                Err(why) => {
                    tracing::info!("{why} (the old hub may still have been exiting); trying again")
                }
            },
            Err(why) => {
                tracing::error!("{why}");
                // Whatever the editor sent meanwhile is answered, not left hanging.
                while let Ok(frame) = from_editor.try_recv() {
                    if let Frame::Line(line) = frame
                        && let Ok(m) = Message::parse(String::from_utf8_lossy(&line).into())
                        && m.kind() == Kind::Request
                    {
                        editor.send(jsonrpc::error(
                            m.id(),
                            crate::upstream::code::UNAVAILABLE,
                            &format!("openpact's shared hub is not running and could not be started: {why}"),
                            None,
                        ));
                    }
                }
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Tells a new hub what the editor told the old one, waiting for `initialize`'s answer first
/// as a client would.
async fn replay_on(link: &mut Link, replay: &Replay) -> Result<(), String> {
    let Some(init) = &replay.initialize else {
        return Ok(());
    };
    let id = format!("{OWN_ID}initialize\"");
    link.out
        .send(jsonrpc::request(&id, "initialize", Some(init)));
    let answered = tokio::time::timeout(REPLAY_WAIT, async {
        while let Some(frame) = link.frames.recv().await {
            if let Frame::Line(line) = frame
                && let Ok(m) = Message::parse(String::from_utf8_lossy(&line).into())
                && m.kind() == Kind::Response
                && m.id() == id
            {
                return true;
            }
        }
        false
    })
    .await;
    if answered != Ok(true) {
        return Err("the new connection closed before the session was replayed".into());
    }
    if replay.initialized {
        link.out
            .send(jsonrpc::notification("notifications/initialized", None));
    }
    if let Some(level) = &replay.level {
        link.out.send(jsonrpc::request(
            &format!("{OWN_ID}setLevel\""),
            "logging/setLevel",
            Some(level),
        ));
    }
    for (n, uri) in replay.subscriptions.iter().enumerate() {
        link.out.send(jsonrpc::request(
            &format!("{OWN_ID}subscribe-{n}\""),
            "resources/subscribe",
            Some(&serde_json::json!({ "uri": uri }).to_string()),
        ));
    }
    Ok(())
}

/// The hub's socket and log for `config` (as loaded) and `state_dir`.
pub fn target_for(
    config: Option<&Path>,
    state_dir: &Path,
    state_dir_arg: Option<PathBuf>,
    profile: Option<String>,
    max_message_size: usize,
) -> Target {
    let socket = socket::path_for(config, state_dir);
    let stem = socket
        .file_stem()
        .map_or_else(|| "hub".into(), |s| s.to_string_lossy().into_owned());
    Target {
        log: state_dir.join(format!("shared-{stem}.log")),
        socket,
        config: config.map(|c| std::path::absolute(c).unwrap_or_else(|_| c.to_path_buf())),
        state_dir: state_dir_arg.map(|s| std::path::absolute(&s).unwrap_or(s)),
        profile,
        max_message_size,
    }
}
