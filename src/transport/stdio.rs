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
use super::lines::{Outbox, read_frames_paced, spawn_writer};
use crate::jsonrpc::{Frame, Framer};
use crate::platform;
// Unix only: a Windows port starts here (src/platform/mod.rs).
#[cfg(unix)]
use super::pollable::Pollable;
use std::io::{BufRead, Write};
use tokio::sync::oneshot;

/// Our stdout, ready for lines.
pub struct Stdout {
    pub outgoing: Outbox,
    /// Fires once stdout has been flushed (after [`Outbox::close`] or when every outbox is
    /// gone).
    pub flushed: oneshot::Receiver<()>,
}

/// Starts writing stdout. Must be called on the runtime.
pub fn stdout() -> std::io::Result<Stdout> {
    let (done_tx, flushed) = oneshot::channel();
    let outgoing = match Pollable::stdout()? {
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
    Ok(Stdout { outgoing, flushed })
}

/// Starts reading stdin, handing each frame to `on_frame` in the reading task itself: no hop
/// through a queue to another task, and awaiting `room()` before each frame (see
/// [`read_frames_paced`]). The returned receiver fires when stdin reaches its end (or cannot
/// be read any more). Must be called on the runtime.
pub fn read_stdin<Room, Wait>(
    max_message_size: usize,
    on_frame: impl FnMut(Frame) + Send + 'static,
    room: Room,
) -> std::io::Result<oneshot::Receiver<()>>
where
    Room: FnMut() -> Wait + Send + 'static,
    Wait: std::future::Future<Output = ()> + Send,
{
    let (eof_tx, closed) = oneshot::channel();
    match Pollable::stdin()? {
        Some(stdin) => {
            tokio::spawn(async move {
                if let Err(e) = read_frames_paced(stdin, max_message_size, on_frame, room).await {
                    tracing::warn!(error = %e, "reading stdin failed; treating as end of input");
                }
                let _ = eof_tx.send(());
            });
        }
        None => read_on_thread(on_frame, room, eof_tx, max_message_size)?,
    }
    Ok(closed)
}

fn read_on_thread<Room, Wait>(
    mut on_frame: impl FnMut(Frame) + Send + 'static,
    mut room: Room,
    eof_tx: oneshot::Sender<()>,
    max_message_size: usize,
) -> std::io::Result<()>
where
    Room: FnMut() -> Wait + Send + 'static,
    Wait: std::future::Future<Output = ()> + Send,
{
    // The handler spawns tasks and sets timers, which needs the runtime's context.
    let runtime = tokio::runtime::Handle::current();
    std::thread::Builder::new().name("stdin".into()).spawn(move || {
        let _context = runtime.enter();
        // A process in the background reading its terminal is stopped by SIGTTIN, the whole
        // hub with it (`openpact serve --http &` in a shell). With SIGTTIN blocked on this
        // thread the read fails with EIO instead, and the stdio client counts as gone.
        if let Err(e) = platform::fail_background_reads() {
            tracing::debug!(error = %e, "could not block SIGTTIN on the stdin thread");
        }
        let stdin = std::io::stdin();
        let mut reader = std::io::BufReader::with_capacity(1 << 16, stdin.lock());
        let mut framer = Framer::new(max_message_size);
        loop {
            runtime.block_on(room());
            let buf = match reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if platform::is_background_read(&e) && stdin_is_terminal() => {
                    tracing::info!(
                        "stdin is a terminal this process is in the background of; treating as end of input"
                    );
                    break;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading stdin failed; treating as end of input");
                    break;
                }
            };
            if buf.is_empty() {
                if let Some(f) = framer.eof() {
                    on_frame(f);
                }
                break;
            }
            let (used, frame) = framer.feed(buf);
            reader.consume(used);
            if let Some(f) = frame {
                on_frame(f);
            }
        }
        let _ = eof_tx.send(());
    })?;
    Ok(())
}

fn stdin_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal()
}

fn write_on_thread(done_tx: oneshot::Sender<()>) -> std::io::Result<Outbox> {
    let (outgoing, mut out_rx) = Outbox::channel();
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
                        Outgoing::Rest(bytes) => {
                            if w.write_all(&bytes).is_err() {
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
