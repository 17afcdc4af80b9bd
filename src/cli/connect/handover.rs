//! Handing over: the editor's pipes given to the hub (see [`crate::face::handoff`]), its
//! notes followed while it serves them, and standing in for the editor when it dies until a
//! new hub takes them.

use super::hub::{exited, hello, hub_process, reach};
use super::kept::{Kept, not_running, note};
use super::{ConnectError, NOTES_PAUSE, REPLAY_WAIT, SETUP_TRIES, Target};
use crate::face::handoff;
use crate::jsonrpc::{Kind, Message};
use crate::platform;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;
use tokio::net::UnixStream;

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
pub(super) async fn hand_over(
    target: &Target,
    stdin: OwnedFd,
    stdout: OwnedFd,
) -> Result<(), ConnectError> {
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
