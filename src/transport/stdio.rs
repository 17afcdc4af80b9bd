//! Our own stdin and stdout: on the runtime when they are pipes or sockets (what every editor
//! gives a server it spawns), on dedicated threads otherwise.
//!
//! On the runtime, a request goes from stdin to the child server and its answer back to
//! stdout without a single thread hand-off in the hub, which is what keeps forwarding close
//! to a direct connection. A terminal or a regular file cannot be polled (and a terminal's
//! non-blocking flag would leak into the shell), so those are read and written by plain
//! threads, which we simply abandon at exit: tokio's own stdin would block shutdown on a
//! read it cannot cancel.

use super::Outgoing;
use super::lines::{read_frames, spawn_writer};
use crate::jsonrpc::{Frame, Framer};
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use std::fs::File;
use std::io::{BufRead, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;
use tokio::sync::{mpsc, oneshot};

/// The two halves handed to the serve face.
pub struct StdioPipes {
    /// Frames read from stdin; closes at EOF.
    pub incoming: mpsc::UnboundedReceiver<Frame>,
    /// Lines to write to stdout.
    pub outgoing: mpsc::UnboundedSender<Outgoing>,
    /// Fires once stdout has been flushed (after `Outgoing::Close` or all senders are
    /// dropped).
    pub flushed: oneshot::Receiver<()>,
}

/// Starts reading stdin and writing stdout. Must be called on the runtime.
pub fn start(max_message_size: usize) -> std::io::Result<StdioPipes> {
    let (in_tx, incoming) = mpsc::unbounded_channel();
    match Pollable::open(
        std::io::stdin().as_fd().try_clone_to_owned()?,
        Direction::In,
    )? {
        Some(stdin) => {
            tokio::spawn(async move {
                let read = read_frames(stdin, max_message_size, |f| {
                    let _ = in_tx.send(f);
                });
                if let Err(e) = read.await {
                    tracing::warn!(error = %e, "reading stdin failed; treating as end of input");
                }
            });
        }
        None => read_on_thread(in_tx, max_message_size)?,
    }

    let (done_tx, flushed) = oneshot::channel();
    let outgoing = match Pollable::open(
        std::io::stdout().as_fd().try_clone_to_owned()?,
        Direction::Out,
    )? {
        Some(stdout) => {
            let (tx, done) = spawn_writer(stdout, "stdout".into());
            tokio::spawn(async move {
                let _ = done.await;
                let _ = done_tx.send(());
            });
            tx
        }
        None => write_on_thread(done_tx)?,
    };
    Ok(StdioPipes {
        incoming,
        outgoing,
        flushed,
    })
}

/// A pipe or socket switched to non-blocking mode and registered with the runtime.
///
/// The non-blocking flag belongs to the open file description, which we share with whoever
/// gave us the descriptor (a shell running `openpact serve | tee log; next-command` hands the
/// same pipe to the next command), so dropping this puts the flag back as it was.
struct Pollable {
    io: Io,
    /// A duplicate of the descriptor, kept to restore the flags through.
    original: File,
    restore: Option<OFlag>,
}

enum Io {
    PipeIn(pipe::Receiver),
    PipeOut(pipe::Sender),
    Socket(UnixStream),
}

/// Which way a [`Pollable`] carries data.
#[derive(Clone, Copy)]
enum Direction {
    In,
    Out,
}

impl Pollable {
    /// `Ok(None)` when `fd` is something epoll cannot watch usefully (a terminal, a regular
    /// file, `/dev/null`): the caller then uses a thread.
    fn open(fd: OwnedFd, direction: Direction) -> std::io::Result<Option<Pollable>> {
        let original = File::from(fd.try_clone()?);
        let kind = original.metadata()?.file_type();
        let flags = OFlag::from_bits_truncate(fcntl(&original, FcntlArg::F_GETFL)?);
        let restore = (!flags.contains(OFlag::O_NONBLOCK)).then_some(flags);
        let io = if kind.is_fifo() {
            match direction {
                Direction::In => pipe::Receiver::from_owned_fd(fd).map(Io::PipeIn),
                Direction::Out => pipe::Sender::from_owned_fd(fd).map(Io::PipeOut),
            }
        } else if kind.is_socket() {
            let socket = std::os::unix::net::UnixStream::from(fd);
            socket
                .set_nonblocking(true)
                .and_then(|()| UnixStream::from_std(socket))
                .map(Io::Socket)
        } else {
            return Ok(None);
        };
        match io {
            Ok(io) => Ok(Some(Pollable {
                io,
                original,
                restore,
            })),
            Err(e) => {
                if let Some(flags) = restore {
                    let _ = fcntl(&original, FcntlArg::F_SETFL(flags));
                }
                tracing::debug!(error = %e, "stdio cannot be polled; using a thread");
                Ok(None)
            }
        }
    }
}

impl Drop for Pollable {
    fn drop(&mut self) {
        if let Some(flags) = self.restore {
            let _ = fcntl(&self.original, FcntlArg::F_SETFL(flags));
        }
    }
}

fn wrong_way() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Unsupported, "stdio used the wrong way")
}

impl AsyncRead for Pollable {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match &mut self.get_mut().io {
            Io::PipeIn(r) => Pin::new(r).poll_read(cx, buf),
            Io::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Io::PipeOut(_) => Poll::Ready(Err(wrong_way())),
        }
    }
}

impl AsyncWrite for Pollable {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::PipeOut(w) => Pin::new(w).poll_write(cx, data),
            Io::Socket(s) => Pin::new(s).poll_write(cx, data),
            Io::PipeIn(_) => Poll::Ready(Err(wrong_way())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Not a socket shutdown: stdout stays open until we exit, as with a blocking stdout.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn read_on_thread(
    in_tx: mpsc::UnboundedSender<Frame>,
    max_message_size: usize,
) -> std::io::Result<()> {
    std::thread::Builder::new().name("stdin".into()).spawn(move || {
        let stdin = std::io::stdin();
        let mut reader = std::io::BufReader::with_capacity(1 << 16, stdin.lock());
        let mut framer = Framer::new(max_message_size);
        loop {
            let buf = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "reading stdin failed; treating as end of input");
                    break;
                }
            };
            if buf.is_empty() {
                if let Some(f) = framer.eof() {
                    let _ = in_tx.send(f);
                }
                break;
            }
            let (used, frame) = framer.feed(buf);
            reader.consume(used);
            if let Some(f) = frame
                && in_tx.send(f).is_err()
            {
                break;
            }
        }
    })?;
    Ok(())
}

fn write_on_thread(
    done_tx: oneshot::Sender<()>,
) -> std::io::Result<mpsc::UnboundedSender<Outgoing>> {
    let (outgoing, mut out_rx) = mpsc::unbounded_channel::<Outgoing>();
    std::thread::Builder::new()
        .name("stdout".into())
        .spawn(move || {
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
            'outer: while let Some(first) = out_rx.blocking_recv() {
                let mut next = Some(first);
                while let Some(item) = next.take() {
                    match item {
                        Outgoing::Line(line) => {
                            if w.write_all(line.as_bytes())
                                .and_then(|()| w.write_all(b"\n"))
                                .is_err()
                            {
                                break 'outer;
                            }
                        }
                        Outgoing::Close => break 'outer,
                    }
                    next = out_rx.try_recv().ok();
                }
                if w.flush().is_err() {
                    break;
                }
            }
            let _ = w.flush();
            let _ = done_tx.send(());
        })?;
    Ok(outgoing)
}
