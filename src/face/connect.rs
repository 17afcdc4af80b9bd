//! `openpact connect`: an editor's stdio session served by the shared hub of its config
//! (see [`super::socket`]), which it starts when none runs. When stdin and stdout are pipes
//! or sockets (what editors give), it hands them to the hub and only watches
//! ([`super::handoff`]); otherwise it relays each message. Either way it keeps just enough of
//! the session to stand in for the editor when the hub goes away: it fails the requests that
//! were in flight with an error that says so, waits for the old hub's process to be gone,
//! starts a new hub, has it replay the editor's `initialize`, log level and subscriptions,
//! and announces `list_changed` — the editor's pipe stays open throughout, and what the
//! editor sends meanwhile waits in it for the new hub.

use super::handoff;
use super::socket::{self, HELLO};
use crate::jsonrpc::{self, Frame, Kind, Message};
use crate::platform;
use crate::transport::lines::{Outbox, halves, read_frames_paced, spawn_writer};
use crate::transport::stdio;
use std::collections::{BTreeSet, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

/// What the in-flight requests of a hub that went away are answered with.
pub const RESTARTED: &str = "the shared openpact hub stopped while this request was in flight, and has been restarted; send the request again";

/// How long a hub that was just started may take to listen.
const START_WAIT: Duration = Duration::from_secs(15);
/// How long a hub may take to take over the editor's pipes (replaying its session first).
const REPLAY_WAIT: Duration = Duration::from_secs(30);
/// How long a hub that went away may take to exit (one asked to stop stops its servers
/// first) before the next one is reached or started anyway.
const EXIT_WAIT: Duration = Duration::from_secs(15);
/// How many hubs in a row may let the connection go before the session is set up (each
/// waited for until it has exited) before `connect` gives up on this try.
const SETUP_TRIES: usize = 5;
/// While the hub has the editor's pipes: how long its notes gather before they are read, so
/// that `connect` wakes a few times a second however many calls go by.
const NOTES_PAUSE: Duration = Duration::from_millis(20);
/// Set (to anything) to relay even pipes that could be handed over.
pub const RELAY_ENV: &str = "OPENPACT_CONNECT_RELAY";
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
    /// The `initialize` request.
    initialize: Option<String>,
    initialized: bool,
    /// The `logging/setLevel` request.
    level: Option<String>,
    subscriptions: BTreeSet<String>,
}

impl Replay {
    /// The messages a new hub replays, in order (see `Session::replay`).
    fn messages(&self) -> Vec<String> {
        let mut all: Vec<String> = self.initialize.iter().cloned().collect();
        if self.initialized {
            all.push(jsonrpc::notification("notifications/initialized", None));
        }
        all.extend(self.level.iter().cloned());
        all.extend(self.subscriptions.iter().map(|uri| {
            jsonrpc::request(
                "0",
                "resources/subscribe",
                Some(&serde_json::json!({ "uri": uri }).to_string()),
            )
        }));
        all
    }
}

/// What `connect` keeps of the session: enough to stand in for the editor.
#[derive(Default)]
struct Kept {
    replay: Replay,
    /// The editor's requests not answered yet (ids as JSON text).
    in_flight: HashSet<String>,
    /// The editor has been written part of a line.
    torn: bool,
}

impl Kept {
    /// What the editor is told when its hub went away: an error for each request in flight
    /// (which are then no longer), and that the lists may have changed.
    fn hub_gone(&mut self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .in_flight
            .drain()
            .map(|id| jsonrpc::error(&id, crate::upstream::code::UNAVAILABLE, RESTARTED, None))
            .collect();
        if self.replay.initialized {
            for list in ["tools", "prompts", "resources"] {
                lines.push(jsonrpc::notification(
                    &format!("notifications/{list}/list_changed"),
                    None,
                ));
            }
        }
        lines
    }
}

/// The answer to request `id` while no hub runs and none could be started (`why`).
fn not_running(id: &str, why: &str) -> String {
    jsonrpc::error(
        id,
        crate::upstream::code::UNAVAILABLE,
        &format!("openpact's shared hub is not running and could not be started: {why}"),
        None,
    )
}

/// One connection to the hub.
struct Link {
    out: Outbox,
    frames: mpsc::UnboundedReceiver<Frame>,
    /// The hub's process, waited for once it lets the connection go.
    hub: Option<platform::ProcessEnd>,
}

impl Link {
    /// Reads the hub only while `editor` takes what it sends (a window that does not read
    /// makes the hub stop reading it, rather than this process hold its answers).
    fn over(stream: UnixStream, max: usize, editor: &Outbox) -> std::io::Result<Link> {
        let hub = hub_process(&stream);
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
        Ok(Link { out, frames, hub })
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

/// Serves the editor until it closes its end: hands its pipes to the hub when they can be
/// handed over, relays them otherwise.
pub async fn run(target: Target) -> Result<(), ConnectError> {
    let stdin = std::io::stdin().as_fd().try_clone_to_owned()?;
    let stdout = std::io::stdout().as_fd().try_clone_to_owned()?;
    if std::env::var_os(RELAY_ENV).is_none()
        && handoff::passable(stdin.as_fd())
        && handoff::passable(stdout.as_fd())
    {
        return hand_over(&target, stdin, stdout).await;
    }
    relay(target).await
}

/// How a hub that had the editor's pipes let them go.
#[derive(PartialEq)]
enum Released {
    /// The editor closed its end: the session is over.
    Ended,
    /// The hub went away.
    Died,
}

/// Hands the editor's pipes to the hub, then watches its notes; when it dies, stands in for
/// the editor and hands them to a new one.
async fn hand_over(target: &Target, stdin: OwnedFd, stdout: OwnedFd) -> Result<(), ConnectError> {
    // The hub is started when the editor first speaks: `connect` with a closed stdin starts
    // nothing. Nothing is read, so that every byte is the hub's.
    let probe = stdin.try_clone()?;
    let speaks = tokio::task::spawn_blocking(move || handoff::wait_for_input(probe.as_fd()))
        .await
        .map_err(std::io::Error::other)??;
    if !speaks {
        return Ok(());
    }
    let mut kept = Kept::default();
    let mut restarts = 0u32;
    let mut delay = Duration::from_millis(100);
    // The start of a line read while no hub ran, for the next hub to read first.
    let mut begun = Vec::new();
    loop {
        let passed = pass(target, &kept, restarts > 0, &begun, &stdin, &stdout).await;
        let mut notes = match passed {
            Ok(notes) => notes,
            Err(why) if restarts == 0 => return Err(ConnectError::Start(why)),
            Err(why) => {
                tracing::error!("{why}");
                if !answer_meanwhile(&why, delay, &mut kept, &mut begun, &stdin, &stdout).await? {
                    return Ok(());
                }
                delay = (delay * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        begun.clear();
        delay = Duration::from_millis(100);
        if notes.follow(&mut kept).await == Released::Ended {
            return Ok(());
        }
        tracing::warn!("the shared hub went away; starting a new one");
        stand_in(&stdout, &mut kept).await?;
        // What the editor sends from here on waits in its pipe for the next hub.
        exited(notes.hub.as_ref()).await;
        restarts += 1;
    }
}

/// Tells the editor what a hub that died cannot: the end of a line it was writing, an error
/// for each request it had not answered, and that the lists may have changed.
async fn stand_in(stdout: &OwnedFd, kept: &mut Kept) -> std::io::Result<()> {
    let mut text = String::new();
    if std::mem::take(&mut kept.torn) {
        text.push('\n');
    }
    for line in kept.hub_gone() {
        text.push_str(&line);
        text.push('\n');
    }
    let stdout = stdout.try_clone()?;
    tokio::task::spawn_blocking(move || handoff::write_all(stdout.as_fd(), text.as_bytes()))
        .await
        .map_err(std::io::Error::other)?
}

/// While no hub can be started: for `wait`, answers what the editor asks with `why`, as a
/// relaying `connect` would; the start of a line is kept in `begun` for the next hub.
/// `false` once the editor has closed its end.
async fn answer_meanwhile(
    why: &str,
    wait: Duration,
    kept: &mut Kept,
    begun: &mut Vec<u8>,
    stdin: &OwnedFd,
    stdout: &OwnedFd,
) -> std::io::Result<bool> {
    let input = stdin.try_clone()?;
    let read = tokio::task::spawn_blocking(move || handoff::read_within(input.as_fd(), wait))
        .await
        .map_err(std::io::Error::other)??;
    let Some(bytes) = read else { return Ok(true) };
    if bytes.is_empty() {
        return Ok(false);
    }
    begun.extend_from_slice(&bytes);
    let mut answers = String::new();
    while let Some(end) = memchr::memchr(b'\n', begun) {
        let line: Vec<u8> = begun.drain(..=end).collect();
        // (A line's end whose start the dead hub read is no message: dropped.)
        let Ok(m) = Message::parse(String::from_utf8_lossy(&line).trim_end().into()) else {
            continue;
        };
        // A request is refused, so there is nothing of it to replay; a notification (such
        // as `notifications/initialized`) still counts.
        if m.kind() == Kind::Request {
            answers.push_str(&not_running(m.id(), why));
            answers.push('\n');
        } else {
            note(&m, &mut kept.replay, &mut kept.in_flight);
        }
    }
    if begun.len() > MAX_BEGUN {
        begun.clear();
    }
    let output = stdout.try_clone()?;
    tokio::task::spawn_blocking(move || handoff::write_all(output.as_fd(), answers.as_bytes()))
        .await
        .map_err(std::io::Error::other)??;
    Ok(true)
}

/// The longest line start kept while no hub runs (a larger message is refused by the hub
/// anyway).
const MAX_BEGUN: usize = 64 << 20;

/// Gives the editor's pipes to the hub (starting one if none runs) with the session to
/// replay, and waits until it has taken them. A hub that lets the connection go first has
/// read none of the editor's bytes (it sends [`handoff::READY`] before it reads), so the
/// pipes are offered again once that hub has exited: it is one that was still exiting (a
/// killed process closes its socket's connections before its listener), and the editor's
/// requests wait in its pipe for the next.
async fn pass(
    target: &Target,
    kept: &Kept,
    resumed: bool,
    begun: &[u8],
    stdin: &OwnedFd,
    stdout: &OwnedFd,
) -> Result<Notes, String> {
    for _ in 0..SETUP_TRIES {
        let stream = reach(target).await?;
        let hub = hub_process(&stream);
        let hello = format!("{}\n", hello(target, &kept.replay, resumed, begun));
        match offer(stream, &hello, stdin, stdout).await? {
            Some(mut notes) => {
                notes.hub = hub;
                return Ok(notes);
            }
            None => {
                tracing::info!(
                    "the shared hub closed the connection before taking the editor's pipes (it was exiting); offering them again once it has exited"
                );
                exited(hub.as_ref()).await;
            }
        }
    }
    Err(
        "the shared hub keeps closing the connection before taking the editor's pipes; see its log"
            .into(),
    )
}

/// Sends the hello with the editor's pipes on `stream` and waits for the hub's word that it
/// has taken them: `None` when the hub closed the connection first, `Err` when it refused.
async fn offer(
    stream: UnixStream,
    hello: &str,
    stdin: &OwnedFd,
    stdout: &OwnedFd,
) -> Result<Option<Notes>, String> {
    if let Err(e) =
        handoff::send_with_fds(&stream, hello.as_bytes(), &[stdin.as_fd(), stdout.as_fd()]).await
    {
        tracing::debug!("could not hand the editor's pipes to the shared hub: {e}");
        return Ok(None);
    }
    let socket = stream.into_std().map_err(|e| e.to_string())?;
    let mut notes = Notes {
        reader: handoff::NoteReader::start(socket, NOTES_PAUSE).map_err(|e| e.to_string())?,
        early: Vec::new(),
        hub: None,
    };
    let ready = tokio::time::timeout(REPLAY_WAIT, async {
        while let Some(mut lines) = notes.next().await {
            if let Some(why) = lines.iter().find_map(|l| handoff::refused(l)) {
                return Err(why);
            }
            if let Some(at) = lines.iter().position(|l| l.contains(handoff::READY)) {
                // What came with it is the session's first news.
                notes.early = lines.split_off(at + 1);
                return Ok(true);
            }
        }
        Ok(false)
    })
    .await;
    match ready {
        Ok(Ok(true)) => Ok(Some(notes)),
        Ok(Ok(false)) => Ok(None),
        Ok(Err(why)) => Err(why),
        Err(_) => Err(format!(
            "the shared hub did not take the editor's pipes within {}s; see its log",
            REPLAY_WAIT.as_secs()
        )),
    }
}

/// The hub's notes about a session it has the pipes of.
struct Notes {
    reader: handoff::NoteReader,
    /// Notes read with [`handoff::READY`], not followed yet.
    early: Vec<String>,
    /// The hub's process, waited for once it lets the pipes go.
    hub: Option<platform::ProcessEnd>,
}

impl Notes {
    /// The next batch of note lines; `None` once the hub closed its end.
    async fn next(&mut self) -> Option<Vec<String>> {
        if !self.early.is_empty() {
            return Some(std::mem::take(&mut self.early));
        }
        self.reader.batches.recv().await
    }

    /// Keeps what the notes say until the hub lets the pipes go.
    async fn follow(&mut self, kept: &mut Kept) -> Released {
        while let Some(lines) = self.next().await {
            for line in lines {
                let Ok(m) = Message::parse(line.into_boxed_str()) else {
                    continue;
                };
                match (m.kind(), m.method()) {
                    (Kind::Notification, handoff::END) => return Released::Ended,
                    (Kind::Notification, handoff::TORN) => kept.torn = true,
                    (Kind::Notification, handoff::WHOLE) => kept.torn = false,
                    (Kind::Response, _) => {
                        kept.in_flight.remove(m.id());
                    }
                    _ => note(&m, &mut kept.replay, &mut kept.in_flight),
                }
            }
        }
        Released::Died
    }
}

/// Relays stdio until the editor closes it.
async fn relay(target: Target) -> Result<(), ConnectError> {
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
    let mut kept = Kept::default();
    // The hub is started when the editor first speaks: `connect </dev/null` starts nothing.
    let Some(first) = from_editor.recv().await else {
        editor_out.close();
        return Ok(());
    };
    let mut link = open(&target, max, &editor_out, &kept.replay)
        .await
        .map_err(ConnectError::Start)?;
    *to_hub.lock().unwrap_or_else(PoisonError::into_inner) = Some(link.out.clone());
    from_editor_frame(first, &mut kept, &link.out, &editor_out);
    loop {
        tokio::select! {
            frame = from_editor.recv() => match frame {
                Some(frame) => from_editor_frame(frame, &mut kept, &link.out, &editor_out),
                None => break,
            },
            frame = link.frames.recv() => match frame {
                Some(frame) => from_hub_frame(frame, &mut kept.in_flight, &editor_out),
                None => {
                    tracing::warn!("the shared hub went away; starting a new one");
                    // (A re-list the editor sends at once waits here for the new hub.)
                    for line in kept.hub_gone() {
                        editor_out.send(line);
                    }
                    exited(link.hub.as_ref()).await;
                    link = reconnect(&target, max, &kept.replay, &mut from_editor, &editor_out).await;
                    *to_hub.lock().unwrap_or_else(PoisonError::into_inner) = Some(link.out.clone());
                }
            },
        }
    }
    // The editor is gone: its last answers may still come.
    link.out.close();
    let deadline = tokio::time::Instant::now() + FINISH_GRACE;
    while !kept.in_flight.is_empty() {
        match tokio::time::timeout_at(deadline, link.frames.recv()).await {
            Ok(Some(frame)) => from_hub_frame(frame, &mut kept.in_flight, &editor_out),
            _ => break,
        }
    }
    editor_out.close();
    let _ = tokio::time::timeout(Duration::from_millis(300), stdout.flushed).await;
    Ok(())
}

/// Notes what the editor's frame means for a replay, then passes it on.
fn from_editor_frame(frame: Frame, kept: &mut Kept, hub: &Outbox, editor: &Outbox) {
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
            note(&m, &mut kept.replay, &mut kept.in_flight);
        }
    }
    hub.send(text);
}

/// What an editor's message means for standing in for it: a request is in flight, and some
/// must be replayed to a new hub.
fn note(m: &Message, replay: &mut Replay, in_flight: &mut HashSet<String>) {
    match m.kind() {
        Kind::Request => {
            in_flight.insert(m.id().to_string());
            match m.method() {
                "initialize" => replay.initialize = Some(m.text().to_string()),
                "logging/setLevel" => replay.level = Some(m.text().to_string()),
                "resources/subscribe" => replay.subscriptions.extend(field(m, "uri")),
                "resources/unsubscribe" => {
                    if let Some(uri) = field(m, "uri") {
                        replay.subscriptions.remove(&uri);
                    }
                }
                _ => {}
            }
        }
        Kind::Notification => match m.method() {
            "notifications/initialized" => replay.initialized = true,
            // A cancelled request is not answered.
            "notifications/cancelled" => {
                if let Some(id) = m
                    .params()
                    .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
                    .and_then(|p| p.get("requestId").map(|id| id.to_string()))
                {
                    in_flight.remove(&id);
                }
            }
            _ => {}
        },
        Kind::Response => {}
    }
}

/// A string field of a message's params.
fn field(m: &Message, name: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(m.params()?).ok()?;
    v.get(name)?.as_str().map(String::from)
}

/// Passes a hub frame on, noting the requests it answers.
fn from_hub_frame(frame: Frame, in_flight: &mut HashSet<String>, editor: &Outbox) {
    let Frame::Line(line) = frame else { return };
    let Ok(text) = String::from_utf8(line) else {
        return;
    };
    // Only responses need a look; their `id` is near the start of what the hub writes.
    if let Ok(m) = Message::parse(text.into_boxed_str()) {
        if m.kind() == Kind::Response {
            in_flight.remove(m.id());
        }
        editor.send(m.into_text());
    }
}

/// The first line a window sends: its profile, the session a new hub must replay, and the
/// start of a line `connect` read from the editor (base64), which the hub reads first.
fn hello(target: &Target, replay: &Replay, resumed: bool, begun: &[u8]) -> String {
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
async fn reach(target: &Target) -> Result<UnixStream, String> {
    match UnixStream::connect(&target.socket).await {
        Ok(stream) => Ok(stream),
        Err(_) => start_hub(target).await,
    }
}

/// The process of the hub at the other end of `stream` (the socket's listener).
fn hub_process(stream: &UnixStream) -> Option<platform::ProcessEnd> {
    let pid = stream.peer_cred().ok()?.pid()?;
    platform::ProcessEnd::of(u32::try_from(pid).ok()?)
}

/// Waits until a hub that let its windows go has exited: until then its listener may still
/// take connections it will never serve, and its lock keeps a new hub from starting (which
/// would leave, thinking the old one serves).
async fn exited(hub: Option<&platform::ProcessEnd>) {
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

/// Connects to the hub to relay (starting it when nobody answers), the session to replay
/// in its hello.
async fn open(
    target: &Target,
    max: usize,
    editor: &Outbox,
    replay: &Replay,
) -> Result<Link, String> {
    // A hub that is being killed may still take a connection: only its word that the
    // session is set up counts, and a connection closed before it is tried again once that
    // hub has exited.
    for _ in 0..SETUP_TRIES {
        let link = Link::over(reach(target).await?, max, editor).map_err(|e| e.to_string())?;
        link.out.send(hello(target, replay, false, &[]));
        let hub = match set_up(link, editor).await {
            SetUp::Ready(link) => return Ok(link),
            SetUp::Refused(why) => return Err(why),
            SetUp::Closed(hub) => hub,
        };
        tracing::info!(
            "the shared hub closed the connection before the session was set up (it was exiting); trying again once it has exited"
        );
        exited(hub.as_ref()).await;
    }
    Err(
        "the shared hub keeps closing the connection before the session is set up; see its log"
            .into(),
    )
}

/// How a relayed session's setting up ended.
enum SetUp {
    Ready(Link),
    /// The hub closed the connection first (the hub's process, to wait for).
    Closed(Option<platform::ProcessEnd>),
    /// The hub will not serve this window, for this reason.
    Refused(String),
}

/// Waits for the hub's word that the session is set up.
async fn set_up(mut link: Link, editor: &Outbox) -> SetUp {
    let ready = tokio::time::timeout(REPLAY_WAIT, async {
        while let Some(frame) = link.frames.recv().await {
            let Frame::Line(line) = frame else { continue };
            let line = String::from_utf8_lossy(&line);
            if let Some(why) = handoff::refused(&line) {
                return Err(why);
            }
            match Message::parse(line.into()) {
                Ok(m) if m.method() == handoff::READY => return Ok(true),
                // What the replayed session released (it cannot answer the editor yet).
                Ok(m) => {
                    editor.send(m.into_text());
                }
                Err(_) => {}
            }
        }
        Ok(false)
    })
    .await;
    match ready {
        Ok(Ok(true)) => SetUp::Ready(link),
        Ok(Err(why)) => SetUp::Refused(why),
        _ => SetUp::Closed(link.hub),
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

/// Connects again (starting a hub) until it works, answering what the editor asks in the
/// meantime with why it cannot be served yet.
async fn reconnect(
    target: &Target,
    max: usize,
    replay: &Replay,
    from_editor: &mut mpsc::UnboundedReceiver<Frame>,
    editor: &Outbox,
) -> Link {
    let mut delay = Duration::from_millis(100);
    loop {
        match open(target, max, editor, replay).await {
            Ok(link) => return link,
            Err(why) => {
                tracing::error!("{why}");
                // Whatever the editor sent meanwhile is answered, not left hanging.
                while let Ok(frame) = from_editor.try_recv() {
                    if let Frame::Line(line) = frame
                        && let Ok(m) = Message::parse(String::from_utf8_lossy(&line).into())
                        && m.kind() == Kind::Request
                    {
                        editor.send(not_running(m.id(), &why));
                    }
                }
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

/// Whether a shared hub listens on `target`'s socket now. (It takes the connection closed
/// without a word for the question.)
pub fn hub_listens(target: &Target) -> bool {
    std::os::unix::net::UnixStream::connect(&target.socket).is_ok()
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
