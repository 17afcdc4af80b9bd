//! A pipe or socket we were given (our stdin and stdout, or an editor's handed to the shared
//! hub by `openpact connect`) polled by the runtime: unix only. Windows' anonymous pipes
//! cannot be polled; a port answers `Ok(None)` here (the threads of [`super::stdio`] then
//! serve) or opens named pipes (src/platform/mod.rs).

use crate::transport::lines::SharedWrite;
use crate::transport::socket::{self, SocketReader, SocketWriter};
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::unix::pipe;

/// A pipe or socket switched to non-blocking mode and registered with the runtime.
///
/// The non-blocking flag belongs to the open file description, which we share with whoever
/// gave us the descriptor (a shell running `openpact serve | tee log; next-command` hands the
/// same pipe to the next command), so dropping this puts the flag back as it was.
pub struct Pollable {
    io: Io,
    /// A duplicate of the descriptor, kept to restore the flags through.
    original: File,
    restore: Option<OFlag>,
}

enum Io {
    PipeIn(pipe::Receiver),
    PipeOut(pipe::Sender),
    SocketIn(SocketReader),
    SocketOut(SocketWriter),
}

/// Which way a [`Pollable`] carries data.
#[derive(Clone, Copy)]
pub enum Direction {
    In,
    Out,
}

impl Pollable {
    /// Our stdin, or `Ok(None)` when it cannot be polled (see [`Pollable::open`]).
    pub fn stdin() -> std::io::Result<Option<Pollable>> {
        Pollable::open(
            std::io::stdin().as_fd().try_clone_to_owned()?,
            Direction::In,
        )
    }

    /// Our stdout, or `Ok(None)` when it cannot be polled.
    pub fn stdout() -> std::io::Result<Option<Pollable>> {
        Pollable::open(
            std::io::stdout().as_fd().try_clone_to_owned()?,
            Direction::Out,
        )
    }

    /// `Ok(None)` when `fd` is something epoll cannot watch usefully (a terminal, a regular
    /// file, `/dev/null`): the caller then uses a thread.
    pub fn open(fd: OwnedFd, direction: Direction) -> std::io::Result<Option<Pollable>> {
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
            socket.set_nonblocking(true).and_then(|()| match direction {
                Direction::In => socket::reader(socket).map(Io::SocketIn),
                Direction::Out => Ok(Io::SocketOut(SocketWriter::new(socket))),
            })
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
            Io::SocketIn(s) => Pin::new(s).poll_read(cx, buf),
            Io::PipeOut(_) | Io::SocketOut(_) => Poll::Ready(Err(wrong_way())),
        }
    }
}

impl SharedWrite for Pollable {
    fn try_write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        match &self.io {
            Io::PipeOut(w) => w.try_write_vectored(bufs),
            Io::SocketOut(s) => s.try_write_vectored(bufs),
            Io::PipeIn(_) | Io::SocketIn(_) => Err(wrong_way()),
        }
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &self.io {
            Io::PipeOut(w) => w.poll_write_ready(cx),
            Io::SocketOut(s) => s.poll_write_ready(cx),
            Io::PipeIn(_) | Io::SocketIn(_) => Poll::Ready(Err(wrong_way())),
        }
    }
}
