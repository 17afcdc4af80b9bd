//! Async line I/O: a reader loop that frames bytes into messages, and outboxes that write
//! lines to a peer, at once when they can and through a batching writer task when they cannot.

use crate::jsonrpc::{Frame, Framer};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What a writer task is asked to do.
#[derive(Debug)]
pub enum Outgoing {
    /// A message without its newline.
    Line(String),
    /// The unwritten end of a line [`Outbox::send`] began to write itself (newline included).
    Rest(Vec<u8>),
    /// Flush and close the pipe (the peer sees EOF).
    Close,
}

/// Reads `r` to the end, handing each frame to `on_frame`. Returns at EOF or on a read error
/// (which is returned so the caller can say why the stream ended).
pub async fn read_frames<R, F>(r: R, max: usize, on_frame: F) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    F: FnMut(Frame),
{
    read_frames_paced(r, max, on_frame, || std::future::ready(())).await
}

/// [`read_frames`], awaiting `room()` before each frame: a reader whose answers cannot be
/// delivered stops reading (the peer's writes then block), which is what bounds the memory a
/// client that does not read its answers can make us hold.
pub async fn read_frames_paced<R, F, Room, Wait>(
    r: R,
    max: usize,
    mut on_frame: F,
    mut room: Room,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    F: FnMut(Frame),
    Room: FnMut() -> Wait,
    Wait: std::future::Future<Output = ()>,
{
    // 8 KiB holds dozens of ordinary messages; larger ones still pass, in several reads.
    // (Every server has one of these, so the size counts fifty times over in a big hub.)
    let mut reader = BufReader::with_capacity(1 << 13, r);
    let mut framer = Framer::new(max);
    loop {
        room().await;
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            if let Some(frame) = framer.eof() {
                on_frame(frame);
            }
            return Ok(());
        }
        let (used, frame) = framer.feed(buf);
        reader.consume(used);
        if let Some(frame) = frame {
            on_frame(frame);
        }
    }
}

/// A Unix stream as two: one to read (with [`read_frames`]) and one to write (with
/// [`spawn_writer`]), each registered with the runtime for its own direction only (see
/// [`super::socket`]).
#[cfg(unix)]
pub fn halves(
    stream: tokio::net::UnixStream,
) -> std::io::Result<(super::socket::SocketReader, super::socket::SocketWriter)> {
    super::socket::split(stream)
}

/// A pipe or socket both the writer task and [`Outbox::send`] write to: `&self` methods
/// only, so the two can share it.
pub trait SharedWrite: Send + Sync + 'static {
    /// One non-blocking write of `bufs` in order; `WouldBlock` when the pipe is full.
    fn try_write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize>;
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>>;
}

// Unix pipes and sockets; a Windows port adds tokio's named pipes (src/platform/mod.rs).
#[cfg(unix)]
impl SharedWrite for tokio::net::unix::pipe::Sender {
    fn try_write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        tokio::net::unix::pipe::Sender::try_write_vectored(self, bufs)
    }
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        tokio::net::unix::pipe::Sender::poll_write_ready(self, cx)
    }
}

/// Where lines for one peer go. Cloneable; the peer's input is closed by [`Outbox::close`],
/// or once every clone is gone.
///
/// When the writer has nothing queued, [`Outbox::send`] writes the line itself, at once, in
/// the caller's task: forwarding a request then costs no hop to the writer task, and what the
/// caller does next (spawning the request's task, bookkeeping) overlaps with the peer's work
/// instead of delaying it. Anything that cannot go out whole right away is queued, and the
/// writer task takes over until the queue is empty again, so lines never overtake each other.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Outgoing>,
    direct: Option<Arc<Direct>>,
}

struct Direct {
    state: Mutex<DirectState>,
    /// Woken whenever the writer task has written a batch (the backlog shrank).
    wrote: tokio::sync::Notify,
}

struct DirectState {
    /// Dropped once nothing more may be written here, so that the writer task's copy is the
    /// last and the peer sees EOF when it ends.
    pipe: Option<Arc<dyn SharedWrite>>,
    /// Lines handed to the writer task and not yet written: while any are, `send` queues too.
    owed: usize,
    /// Their bytes: what a peer that does not read makes us hold ([`Outbox::backlog`]).
    owed_bytes: usize,
    /// [`Outbox::close`] was called: later lines are refused.
    closed: bool,
    /// The runtime turn of the last line written at once (see [`new_turn`]).
    turn: u64,
}

static TURN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Marks a new turn of the runtime: the worker woke up to new events. The binary calls it on
/// every unpark. An outbox writes at most one line at once per turn; the lines that follow in
/// the same turn (a burst: thirty-two answers read in one go) are queued, and the writer task
/// sends them in one write at the end of the turn instead of waking the peer thirty-two times.
/// Without calls to this, only an outbox's first line is written at once.
pub fn new_turn() {
    TURN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

impl Direct {
    fn lock(&self) -> std::sync::MutexGuard<'_, DirectState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Outbox {
    /// An outbox whose lines arrive on `rx` (the CLI's in-process client, the stdout thread).
    pub fn channel() -> (Outbox, mpsc::UnboundedReceiver<Outgoing>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Outbox { tx, direct: None }, rx)
    }

    /// Queues `line` (without its newline), or writes it at once when nothing is queued.
    /// False when the peer's input is closed.
    pub fn send(&self, line: String) -> bool {
        let Some(direct) = &self.direct else {
            return self.tx.send(Outgoing::Line(line)).is_ok();
        };
        let mut st = direct.lock();
        if st.closed {
            return false;
        }
        let Some(pipe) = st.pipe.clone() else {
            return false;
        };
        let mut done = 0;
        let turn = TURN.load(std::sync::atomic::Ordering::Relaxed);
        if st.owed == 0 && st.turn != turn {
            st.turn = turn;
            let bufs = [
                std::io::IoSlice::new(line.as_bytes()),
                std::io::IoSlice::new(b"\n"),
            ];
            match pipe.try_write_vectored(&bufs) {
                Ok(n) if n > line.len() => return true,
                Ok(n) => done = n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    // As with a line the writer task fails to write: this one is lost
                    // quietly and later ones are refused. The reader side sees the peer's
                    // end and reports it with its reason (say, the exit status), which a
                    // refusal here would pre-empt with a vaguer one.
                    tracing::debug!(error = %e, "write failed; closing");
                    st.pipe = None;
                    return true;
                }
            }
        }
        // Cut at a byte count, not a char boundary: the rest goes out as raw bytes.
        let (rest, bytes) = if done == 0 {
            let bytes = line.len() + 1;
            (Outgoing::Line(line), bytes)
        } else {
            let mut rest = line.into_bytes().split_off(done);
            rest.push(b'\n');
            let bytes = rest.len();
            (Outgoing::Rest(rest), bytes)
        };
        if self.tx.send(rest).is_err() {
            return false;
        }
        st.owed += 1;
        st.owed_bytes += bytes;
        true
    }

    /// Bytes queued for the peer and not yet written: they grow while the peer does not
    /// read. Readers of the other side pause while it is high (see [`read_frames_paced`]).
    pub fn backlog(&self) -> usize {
        self.direct.as_ref().map_or(0, |d| d.lock().owed_bytes)
    }

    /// Fires once the writer has written something (the backlog may have shrunk); `None` for
    /// an outbox with no writer of its own. Enable it before checking the backlog.
    pub fn wrote(&self) -> Option<tokio::sync::futures::Notified<'_>> {
        self.direct.as_ref().map(|d| d.wrote.notified())
    }

    /// Closes the peer's input once everything queued is written (the peer sees EOF).
    pub fn close(&self) {
        // The lock is held until Close is queued, so no line can be queued after it.
        let mut st = self.direct.as_ref().map(|d| d.lock());
        if let Some(st) = st.as_mut() {
            st.closed = true;
            if st.owed == 0 {
                st.pipe = None;
            }
        }
        let _ = self.tx.send(Outgoing::Close);
    }
}

/// Spawns the task that writes what [`Outbox::send`] could not write at once. It drains
/// everything queued into one write, so pipelined traffic costs few syscalls. It ends on
/// [`Outbox::close`], when every outbox is gone, or on a write error (logged at debug: the
/// reader side reports the peer's end). The handle finishes once the last line is written.
pub fn spawn_writer<W: SharedWrite>(w: W, label: String) -> (Outbox, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
    let pipe: Arc<dyn SharedWrite> = Arc::new(w);
    let direct = Arc::new(Direct {
        state: Mutex::new(DirectState {
            pipe: Some(pipe.clone()),
            owed: 0,
            owed_bytes: 0,
            closed: false,
            turn: 0,
        }),
        wrote: tokio::sync::Notify::new(),
    });
    let theirs = direct.clone();
    let done = tokio::spawn(async move {
        let mut batch = Vec::with_capacity(1 << 13);
        'outer: while let Some(first) = rx.recv().await {
            let mut next = Some(first);
            let mut lines = 0;
            let mut close = false;
            batch.clear();
            while let Some(item) = next.take() {
                match item {
                    Outgoing::Line(line) => {
                        batch.extend_from_slice(line.as_bytes());
                        batch.push(b'\n');
                    }
                    Outgoing::Rest(bytes) => batch.extend_from_slice(&bytes),
                    Outgoing::Close => {
                        close = true;
                        break;
                    }
                }
                lines += 1;
                next = rx.try_recv().ok();
            }
            if let Err(e) = write_all(&*pipe, &batch).await {
                tracing::debug!(peer = %label, error = %e, "write failed; closing");
                break 'outer;
            }
            {
                let mut st = theirs.lock();
                st.owed -= lines.min(st.owed);
                st.owed_bytes -= batch.len().min(st.owed_bytes);
            }
            theirs.wrote.notify_waiters();
            if close {
                break;
            }
        }
        theirs.lock().pipe = None;
    });
    (
        Outbox {
            tx,
            direct: Some(direct),
        },
        done,
    )
}

async fn write_all(pipe: &dyn SharedWrite, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        std::future::poll_fn(|cx| pipe.poll_write_ready(cx)).await?;
        match pipe.try_write_vectored(&[std::io::IoSlice::new(buf)]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

// The tests write through unix pipes.
#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    type Outcome = Result<(), Box<dyn std::error::Error>>;
    use tokio::io::AsyncReadExt;
    use tokio::net::unix::pipe;

    /// A line larger than the pipe's buffer goes out partly at once and partly through the
    /// writer task; lines sent meanwhile must queue behind it, and `close` must let all of
    /// them out before the reader sees EOF.
    #[tokio::test]
    async fn lines_keep_their_order_across_partial_writes_and_close() -> Outcome {
        let (tx, mut rx) = pipe::pipe()?;
        let (out, done) = spawn_writer(tx, "test".into());
        let big = "x".repeat(300_000);
        assert!(out.send("first".into()));
        // Once the runtime has seen the new pipe writable, `send` writes itself: the big line
        // then goes out partly at once, and its rest through the writer task.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        new_turn();
        assert!(out.send(big.clone()));
        assert!(
            direct_owed(&out) > 0,
            "the big line should have been cut: its rest is owed to the writer task"
        );
        let other = out.clone();
        for i in 0..100 {
            assert!(other.send(format!("after {i}")));
        }
        out.close();
        assert!(
            !out.send("too late".into()),
            "a closed outbox refuses lines"
        );
        let mut got = String::new();
        rx.read_to_string(&mut got).await?;
        done.await?;
        let lines: Vec<&str> = got.lines().collect();
        assert_eq!(lines.len(), 102);
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1], big);
        for (i, line) in lines[2..].iter().enumerate() {
            assert_eq!(*line, format!("after {i}"));
        }
        Ok(())
    }

    fn direct_owed(out: &Outbox) -> usize {
        out.direct.as_ref().map_or(0, |d| d.lock().owed)
    }

    /// Dropping every outbox closes the peer's input, as a dropped channel sender did.
    #[tokio::test]
    async fn the_peer_sees_eof_once_every_outbox_is_gone() -> Outcome {
        let (tx, mut rx) = pipe::pipe()?;
        let (out, done) = spawn_writer(tx, "test".into());
        let copy = out.clone();
        assert!(out.send("one".into()));
        drop(out);
        assert!(copy.send("two".into()));
        drop(copy);
        let mut got = String::new();
        rx.read_to_string(&mut got).await?;
        done.await?;
        assert_eq!(got, "one\ntwo\n");
        Ok(())
    }
}
