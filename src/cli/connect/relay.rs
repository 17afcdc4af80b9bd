//! Relaying: the editor's stdio read and passed to the hub message by message, for pipes
//! that cannot be handed over (a terminal, or `OPENPACT_CONNECT_RELAY`), and the relayed
//! session set up again on a new hub when the old one goes away.

use super::hub::{exited, hello, hub_process, reach};
use super::kept::{Kept, Replay, not_running, note};
use super::{ConnectError, FINISH_GRACE, REPLAY_WAIT, SETUP_TRIES, Target};
use crate::face::handoff;
use crate::jsonrpc::{self, Frame, Kind, Message};
use crate::platform;
use crate::transport::lines::{Outbox, halves, read_frames_paced, spawn_writer};
use crate::transport::stdio;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::UnixStream;
use tokio::sync::mpsc;

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

/// Relays stdio until the editor closes it.
pub(super) async fn relay(target: Target) -> Result<(), ConnectError> {
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
