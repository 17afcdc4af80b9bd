//! Unix stream sockets split into a reader and a writer, each registered with the runtime
//! for its own direction only, and the writer only while a write waits (unix only).
//!
//! Why not tokio's `UnixStream`: it registers for reading and writing at once, and a Unix
//! socket wakes everyone registered for writing each time its peer reads (the kernel calls
//! `unix_write_space` for every message consumed), so a forwarding process woke once more
//! per message than it had work: three wake-ups per call through `openpact connect` where
//! two carry the request and the answer (strace: 1,467 `epoll_wait`s for 500 calls). Pipes
//! wake a writer only when they were full, which is why stdio over pipes never showed it.

use crate::transport::lines::SharedWrite;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use tokio::net::unix::pipe;

/// The reading side, registered for readability alone. tokio's pipe types are the safe way
/// to register a descriptor one way: they only `read(2)` and `write(2)` it, which a socket
/// answers as a pipe does.
pub type SocketReader = pipe::Receiver;

/// The writing side: writes go straight to the socket; only when one would block is a
/// duplicate of the descriptor registered for writability, until the socket takes data again.
#[derive(Debug)]
pub struct SocketWriter {
    socket: UnixStream,
    waiting: Mutex<Option<pipe::Sender>>,
}

/// `stream` as a reader and a writer (see the module doc). Needs a runtime.
pub fn split(stream: tokio::net::UnixStream) -> std::io::Result<(SocketReader, SocketWriter)> {
    // `into_std` leaves the socket non-blocking, as both halves need it.
    let socket = stream.into_std()?;
    Ok((reader(socket.try_clone()?)?, SocketWriter::new(socket)))
}

/// A reader for `socket`, which must be non-blocking. Needs a runtime.
pub fn reader(socket: UnixStream) -> std::io::Result<SocketReader> {
    pipe::Receiver::from_owned_fd_unchecked(OwnedFd::from(socket))
}

impl SocketWriter {
    /// A writer for `socket`, which must be non-blocking.
    pub fn new(socket: UnixStream) -> SocketWriter {
        SocketWriter {
            socket,
            waiting: Mutex::new(None),
        }
    }
}

impl SharedWrite for SocketWriter {
    fn try_write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        (&self.socket).write_vectored(bufs)
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let fd = match waiting.as_mut() {
            Some(fd) => fd,
            // Registering reports the socket's state at once, so a socket that drained in
            // between is seen as writable: no wake-up is lost.
            None => waiting.insert(pipe::Sender::from_owned_fd_unchecked(
                self.socket.as_fd().try_clone_to_owned()?,
            )?),
        };
        let ready = ready!(fd.poll_write_ready(cx));
        // Writable: unregister, so that the peer's reads stop waking us until a write blocks.
        *waiting = None;
        Poll::Ready(ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// More than a socket buffer holds goes through, in order, while the peer reads slowly:
    /// the writer waits for room and is woken when there is some.
    #[tokio::test]
    async fn a_blocked_writer_is_woken_when_the_peer_reads() {
        let (a, b) = tokio::net::UnixStream::pair().unwrap();
        let (_, writer) = split(a).unwrap();
        let (mut reader, _keep) = split(b).unwrap();
        let data: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let write = tokio::spawn(async move {
            let mut rest = &sent[..];
            while !rest.is_empty() {
                match writer.try_write_vectored(&[std::io::IoSlice::new(rest)]) {
                    Ok(n) => rest = &rest[n..],
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::future::poll_fn(|cx| writer.poll_write_ready(cx))
                            .await
                            .unwrap();
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        });
        let mut got = vec![0u8; data.len()];
        let mut at = 0;
        while at < got.len() {
            let end = (at + 65_536).min(got.len());
            let n = reader.read(&mut got[at..end]).await.unwrap();
            assert!(n > 0, "EOF at {at}");
            at += n;
            tokio::task::yield_now().await;
        }
        write.await.unwrap();
        assert!(got == data, "the bytes arrived changed");
    }
}
