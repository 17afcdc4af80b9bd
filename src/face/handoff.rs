//! Handing an editor's stdin and stdout from `openpact connect` to the shared hub (unix):
//! the descriptors passed over the hub's socket (`SCM_RIGHTS`), and the notes the hub keeps
//! `connect` so that it can stand in for the editor if the hub dies.
//!
//! Why: relaying every message through `connect` wakes two more processes per call than
//! `serve` does (measured: 5.2 process wake-ups per call against 3), which no tuning of the
//! relay removes. Once the editor's pipes are the hub's, a call wakes the editor, the hub and
//! the server, as with `serve`; `connect` sleeps, reading the hub's notes a few times a second.
//!
//! The notes are JSON-RPC lines on the hub's socket, hub → `connect`: a stub of each request
//! the editor sent (its id and method; the whole message for what a new hub must be told
//! again), a stub response for each answer the editor has been *written* (so an answer is
//! never counted before the editor could read it), [`TORN`] / [`WHOLE`] around a line the
//! kernel took in pieces, [`READY`] once the session is set up and [`END`] when the editor
//! closed its end; or, instead of [`READY`], [`REFUSED`] and the connection's end. A hub that
//! dies leaves `connect` its socket's end-of-file instead of [`END`]: `connect` then ends a
//! torn line, answers the requests that were in flight, and hands the pipes to a new hub.

use crate::jsonrpc::{self, Kind, Message};
use crate::transport::Outbox;
use crate::transport::lines::SharedWrite;
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};
use tokio::io::Interest;
use tokio::net::UnixStream;

/// The hub has the editor's pipes and has replayed what the hello asked: the editor's
/// messages are the hub's from here on.
pub const READY: &str = "openpact/ready";
/// The editor closed its end and the session is over: `connect` may exit.
pub const END: &str = "openpact/end";
/// The editor was written part of a line: if the hub dies now, the line must be ended
/// before anything else is written.
pub const TORN: &str = "openpact/torn";
/// The torn line was finished.
pub const WHOLE: &str = "openpact/whole";
/// The hub will not serve this window (`params.message` says why, such as a profile its
/// config does not define) and closes the connection: not a hub that was exiting.
pub const REFUSED: &str = "openpact/refused";

/// The longest first line (the hello, with the editor's session to replay) accepted.
const MAX_HELLO: usize = 16 << 20;

/// Whether `fd` can be handed to the hub: a pipe or a socket (what editors give the servers
/// they spawn). A terminal or a file stays with `connect`, which relays it.
pub fn passable(fd: BorrowedFd<'_>) -> bool {
    kind(fd).is_some_and(|k| k.is_fifo() || k.is_socket())
}

/// What `fd` is (a pipe, a socket, a terminal…), if it can be asked.
fn kind(fd: BorrowedFd<'_>) -> Option<std::fs::FileType> {
    let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
    file.metadata().ok().map(|m| m.file_type())
}

/// Sends `line` (a hello, newline included) with `fds` attached.
pub async fn send_with_fds(
    stream: &UnixStream,
    line: &[u8],
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut sent = 0;
    while sent < line.len() {
        stream.writable().await?;
        let result = stream.try_io(Interest::WRITABLE, || {
            let mut control = SendAncillaryBuffer::new(&mut space);
            // The descriptors ride with the first bytes only.
            if sent == 0 && !control.push(SendAncillaryMessage::ScmRights(fds)) {
                return Err(std::io::Error::other("too many descriptors to pass"));
            }
            sendmsg(
                stream,
                &[IoSlice::new(&line[sent..])],
                &mut control,
                SendFlags::NOSIGNAL,
            )
            .map_err(std::io::Error::from)
        });
        match result {
            Ok(n) => sent += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The first line a window sends (without its newline), the bytes read past it, and the
/// descriptors that came with it. Received close-on-exec, so that no server the hub starts
/// inherits an editor's pipe.
pub async fn receive_first_line(
    stream: &UnixStream,
) -> std::io::Result<(Vec<u8>, Vec<u8>, Vec<OwnedFd>)> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
    let mut data = Vec::new();
    let mut fds = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(4))];
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    let flags = RecvFlags::CMSG_CLOEXEC;
    // Elsewhere the flag is set just after, which leaves a narrow window for a spawn.
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    let flags = RecvFlags::empty();
    loop {
        if let Some(end) = memchr::memchr(b'\n', &data) {
            let rest = data.split_off(end + 1);
            data.pop();
            return Ok((data, rest, fds));
        }
        if data.len() > MAX_HELLO {
            return Err(std::io::Error::other("the first line is too long"));
        }
        stream.readable().await?;
        let got = stream.try_io(Interest::READABLE, || {
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let msg = recvmsg(
                stream,
                &mut [std::io::IoSliceMut::new(&mut chunk)],
                &mut control,
                flags,
            )
            .map_err(std::io::Error::from)?;
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(received) = message {
                    fds.extend(received);
                }
            }
            Ok(msg.bytes)
        });
        match got {
            Ok(0) => return Ok((std::mem::take(&mut data), Vec::new(), fds)),
            Ok(n) => data.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
        for fd in &fds {
            let _ = rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC);
        }
    }
}

/// The hub's notes as `connect` reads them: batches of whole lines, on a thread of their
/// own so that no note wakes `connect`'s runtime. The socket is watched with `poll` only
/// while waiting for the first note of a batch; once [`READY`] has been read, each batch
/// gathers for `pause` first, unwatched. (Registered with the runtime, as tokio registers
/// everything, every note the hub writes would wake `connect`: measured 0.17 wake-ups a call
/// that way, against 0.03–0.07.)
pub struct NoteReader {
    pub batches: tokio::sync::mpsc::UnboundedReceiver<Vec<String>>,
    /// A duplicate of the socket, shut down when this is dropped: the thread's `poll`
    /// returns, and the hub learns that `connect` is gone.
    socket: std::os::unix::net::UnixStream,
}

impl Drop for NoteReader {
    fn drop(&mut self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }
}

impl NoteReader {
    /// Reads `socket` (the connection to the hub, its hello sent) until the hub closes it.
    pub fn start(
        socket: std::os::unix::net::UnixStream,
        pause: std::time::Duration,
    ) -> std::io::Result<NoteReader> {
        let (tx, batches) = tokio::sync::mpsc::unbounded_channel();
        let watched = socket.try_clone()?;
        std::thread::Builder::new()
            .name("hub notes".into())
            .spawn(move || {
                let mut buf = Vec::new();
                let mut paced = false;
                loop {
                    let ended = read_batch(&watched, &mut buf, paced.then_some(pause));
                    let whole = buf.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
                    let lines: Vec<String> = String::from_utf8_lossy(&buf[..whole])
                        .lines()
                        .map(String::from)
                        .collect();
                    buf.drain(..whole);
                    paced = paced || lines.iter().any(|l| l.contains(READY));
                    if (!lines.is_empty() && tx.send(lines).is_err()) || ended {
                        return;
                    }
                }
            })?;
        Ok(NoteReader { batches, socket })
    }
}

/// Waits until `socket` has something, sleeps `pause` if given, then takes all it holds
/// into `buf`. `true` once the socket has ended.
fn read_batch(
    socket: &std::os::unix::net::UnixStream,
    buf: &mut Vec<u8>,
    pause: Option<std::time::Duration>,
) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    use rustix::net::{RecvFlags, recv};
    loop {
        match poll(&mut [PollFd::new(socket, PollFlags::IN)], None) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return true,
            Ok(_) => break,
        }
    }
    if let Some(pause) = pause {
        std::thread::sleep(pause);
    }
    let mut chunk = [0u8; 1 << 14];
    loop {
        match recv(socket, &mut chunk, RecvFlags::DONTWAIT) {
            Ok((0, _)) => return true,
            Ok((n, _)) => buf.extend_from_slice(&chunk[..n]),
            Err(rustix::io::Errno::AGAIN) => return false,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return true,
        }
    }
}

/// The line the hub sends a window it will not serve.
pub fn refusal(why: &str) -> String {
    jsonrpc::notification(
        REFUSED,
        Some(&serde_json::json!({ "message": why }).to_string()),
    )
}

/// Why the hub refused a window, if `line` is its [`REFUSED`].
pub fn refused(line: &str) -> Option<String> {
    if !line.contains(REFUSED) {
        return None;
    }
    let m = Message::parse(line.into()).ok()?;
    if m.method() != REFUSED {
        return None;
    }
    let params: serde_json::Value = serde_json::from_str(m.params()?).ok()?;
    Some(params.get("message")?.as_str()?.to_string())
}

/// What the hub notes for `connect` about a message the editor sent, if anything: the
/// whole message when a new hub must hear it again, a stub when only its id counts.
pub fn note_of(m: &Message) -> Option<String> {
    match (m.kind(), m.method()) {
        (
            Kind::Request,
            "initialize" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe",
        )
        | (Kind::Notification, "notifications/initialized" | "notifications/cancelled") => {
            Some(m.text().to_string())
        }
        (Kind::Request, method) => Some(jsonrpc::request(m.id(), method, None)),
        _ => None,
    }
}

/// The editor's stdout in the hub: writes pass straight through, and each answer the
/// kernel has taken whole is noted for `connect` (see the module doc).
pub struct Noting<W> {
    inner: W,
    notes: Outbox,
    line: Mutex<LineStart>,
}

/// The start of the line being written, enough to read a response's id from.
#[derive(Default)]
struct LineStart {
    head: Vec<u8>,
    /// Part of it was written and [`TORN`] noted.
    torn: bool,
}

/// How much of a line's start is kept: `{"jsonrpc":"2.0","id":` and an id of any
/// reasonable length.
const HEAD: usize = 256;

impl<W> Noting<W> {
    pub fn new(inner: W, notes: Outbox) -> Noting<W> {
        Noting {
            inner,
            notes,
            line: Mutex::default(),
        }
    }

    /// Follows the `n` bytes of `bufs` the kernel took.
    fn wrote(&self, bufs: &[IoSlice<'_>], mut n: usize) {
        let mut line = self.line.lock().unwrap_or_else(PoisonError::into_inner);
        for buf in bufs {
            if n == 0 {
                break;
            }
            let mut taken = &buf[..n.min(buf.len())];
            n -= taken.len();
            while !taken.is_empty() {
                let end = memchr::memchr(b'\n', taken);
                let part = &taken[..end.unwrap_or(taken.len())];
                // A batch's answers (an array) are read whole; one answer by its start.
                let batch = line.head.first().or(part.first()) == Some(&b'[');
                let room = if batch {
                    part.len()
                } else {
                    HEAD.saturating_sub(line.head.len())
                };
                line.head.extend_from_slice(&part[..room.min(part.len())]);
                let Some(end) = end else { break };
                if batch {
                    let answered = crate::jsonrpc::parse_frame(std::mem::take(&mut line.head));
                    for m in answered.into_iter().flatten().flatten() {
                        if m.kind() == Kind::Response {
                            self.notes.send(jsonrpc::result(m.id(), "{}"));
                        }
                    }
                } else if let Some(id) = answered_id(&line.head) {
                    self.notes.send(jsonrpc::result(id, "{}"));
                }
                if line.torn {
                    self.notes.send(jsonrpc::notification(WHOLE, None));
                }
                line.head.clear();
                line.torn = false;
                taken = &taken[end + 1..];
            }
        }
        if !line.head.is_empty() && !line.torn {
            line.torn = true;
            self.notes.send(jsonrpc::notification(TORN, None));
        }
    }
}

/// The id of a response line as the hub writes them (`{"jsonrpc":"2.0","id":…,"result"` or
/// `"error"`); `None` for anything else (a request or notification to the editor).
fn answered_id(head: &[u8]) -> Option<&str> {
    const START: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";
    let rest = head.strip_prefix(START)?;
    let len = if rest.first() == Some(&b'"') {
        let mut escaped = false;
        let close = rest[1..].iter().position(|&b| {
            let end = b == b'"' && !escaped;
            escaped = b == b'\\' && !escaped;
            end
        })?;
        close + 2
    } else {
        rest.iter().position(|&b| b == b',')?
    };
    let (id, after) = rest.split_at(len);
    (after.starts_with(b",\"result\":") || after.starts_with(b",\"error\":"))
        .then(|| std::str::from_utf8(id).ok())
        .flatten()
}

impl<W: SharedWrite> SharedWrite for Noting<W> {
    fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        let n = self.inner.try_write_vectored(bufs)?;
        self.wrote(bufs, n);
        Ok(n)
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.inner.poll_write_ready(cx)
    }
}

/// Waits (blocking) until `fd` has something to read: `false` when it reached its end
/// first. Reads nothing, so that every byte the editor sends is the hub's to read.
pub fn wait_for_input(fd: BorrowedFd<'_>) -> std::io::Result<bool> {
    use rustix::event::{PollFd, PollFlags, poll};
    let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
    loop {
        match poll(&mut fds, None) {
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    if kind(fd).is_some_and(|k| k.is_socket()) {
        // A socket at its end is readable too: look without taking.
        let mut byte = [0u8; 1];
        loop {
            match rustix::net::recv(fd, &mut byte, rustix::net::RecvFlags::PEEK) {
                Ok((n, _)) => return Ok(n > 0),
                Err(rustix::io::Errno::INTR) => continue,
                Err(rustix::io::Errno::AGAIN) => return Ok(true),
                Err(e) => return Err(e.into()),
            }
        }
    }
    // A pipe whose writers are gone and that holds nothing says only HUP.
    Ok(fds[0].revents().contains(PollFlags::IN))
}

/// What `fd` has to read within `limit` (blocking): `None` when nothing came, an empty
/// vector at its end.
pub fn read_within(
    fd: BorrowedFd<'_>,
    limit: std::time::Duration,
) -> std::io::Result<Option<Vec<u8>>> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let timeout = Timespec::try_from(limit).map_err(|_| std::io::Error::other("bad timeout"))?;
    match poll(
        &mut [PollFd::from_borrowed_fd(fd, PollFlags::IN)],
        Some(&timeout),
    ) {
        Ok(0) | Err(rustix::io::Errno::INTR) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(e.into()),
    }
    let mut buf = vec![0u8; 1 << 16];
    match rustix::io::read(fd, &mut buf) {
        Ok(n) => {
            buf.truncate(n);
            Ok(Some(buf))
        }
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Writes all of `bytes` to `fd` (blocking, whether or not the descriptor is in
/// non-blocking mode, as a hub that died leaves it).
pub fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> std::io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                let _ = poll(&mut [PollFd::from_borrowed_fd(fd, PollFlags::OUT)], None);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Outgoing;

    /// A pipe that takes at most `per_write` bytes a write.
    struct Narrow {
        per_write: usize,
        got: Mutex<Vec<u8>>,
    }

    impl SharedWrite for Narrow {
        fn try_write_vectored(&self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
            let all: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            let n = all.len().min(self.per_write);
            self.got.lock().unwrap().extend_from_slice(&all[..n]);
            Ok(n)
        }
        fn poll_write_ready(&self, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Writes `lines` through a [`Noting`] over a pipe taking `per_write` bytes at a time,
    /// as the writer task would, and returns the notes.
    fn notes_for(lines: &[&str], per_write: usize) -> Vec<String> {
        let (notes, mut rx) = Outbox::channel();
        let w = Noting::new(
            Narrow {
                per_write,
                got: Mutex::default(),
            },
            notes,
        );
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let mut rest = text.as_bytes();
        while !rest.is_empty() {
            let (a, b) = rest.split_at(rest.len() / 2);
            let n = w
                .try_write_vectored(&[IoSlice::new(a), IoSlice::new(b)])
                .unwrap();
            rest = &rest[n..];
        }
        assert_eq!(*w.inner.got.lock().unwrap(), text.as_bytes());
        let mut out = Vec::new();
        while let Ok(Outgoing::Line(line)) = rx.try_recv() {
            out.push(line);
        }
        out
    }

    #[test]
    fn answers_are_noted_once_written_whole_and_a_line_in_pieces_is_marked_torn() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":"b","error":{"code":1,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{}}"#,
        ];
        let whole = notes_for(&lines, usize::MAX);
        // `connect` reads each note as a message: an answer's stub must be a response.
        for note in &whole {
            let m = Message::parse(note.as_str().into()).unwrap();
            assert_eq!(m.kind(), Kind::Response, "{note}");
        }
        assert_eq!(
            whole,
            [
                r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
                r#"{"jsonrpc":"2.0","id":"b","result":{}}"#
            ]
        );
        // A batch's answers, each noted, however the pipe takes the array.
        let batch = [
            r#"[{"jsonrpc":"2.0","id":3,"result":{}},{"jsonrpc":"2.0","id":4,"error":{"code":1,"message":"x"}}]"#,
        ];
        for per_write in [usize::MAX, 5] {
            let notes = notes_for(&batch, per_write);
            let ids: Vec<&String> = notes
                .iter()
                .filter(|n| n.contains("\"result\":{}"))
                .collect();
            assert_eq!(
                ids,
                [
                    r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
                    r#"{"jsonrpc":"2.0","id":4,"result":{}}"#
                ]
            );
        }
        // Seven bytes a write: every line is torn before it is whole, and each answer is
        // noted only after its last byte.
        let narrow = notes_for(&lines, 7);
        let torn = jsonrpc::notification(TORN, None);
        let mended = jsonrpc::notification(WHOLE, None);
        assert_eq!(
            narrow,
            [
                torn.clone(),
                whole[0].clone(),
                mended.clone(),
                torn.clone(),
                mended.clone(),
                torn.clone(),
                whole[1].clone(),
                mended.clone(),
                torn,
                mended
            ]
        );
    }

    #[test]
    fn only_a_response_lines_id_is_read() {
        assert_eq!(
            answered_id(br#"{"jsonrpc":"2.0","id":12,"result":{}}"#),
            Some("12")
        );
        assert_eq!(
            answered_id(br#"{"jsonrpc":"2.0","id":"a\"b,c","error":{}}"#),
            Some(r#""a\"b,c""#)
        );
        assert_eq!(
            answered_id(br#"{"jsonrpc":"2.0","id":3,"method":"elicitation/create"}"#),
            None
        );
        assert_eq!(
            answered_id(br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#),
            None
        );
    }
}
