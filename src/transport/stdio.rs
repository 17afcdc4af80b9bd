//! Our own stdin and stdout, each served by a dedicated thread.
//!
//! tokio's stdin reads on a blocking thread that cannot be cancelled, which can hang shutdown;
//! a plain thread that we simply abandon at exit cannot. Stdout gets its own thread so a
//! slow reader on the other end never stalls the runtime.

use super::Outgoing;
use crate::jsonrpc::{Frame, Framer};
use std::io::{BufRead, Write};
use tokio::sync::{mpsc, oneshot};

/// The two halves handed to the serve face.
pub struct StdioPipes {
    /// Frames read from stdin; closes at EOF.
    pub incoming: mpsc::UnboundedReceiver<Frame>,
    /// Lines to write to stdout.
    pub outgoing: mpsc::UnboundedSender<Outgoing>,
    /// Fires once stdout has been flushed and closed (after `Outgoing::Close` or all senders
    /// are dropped).
    pub flushed: oneshot::Receiver<()>,
}

/// Starts the stdin reader and stdout writer threads.
pub fn start(max_message_size: usize) -> std::io::Result<StdioPipes> {
    let (in_tx, incoming) = mpsc::unbounded_channel();
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
                && in_tx.send(f).is_err() {
                    break;
                }
        }
    })?;

    let (outgoing, mut out_rx) = mpsc::unbounded_channel::<Outgoing>();
    let (done_tx, flushed) = oneshot::channel();
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
    Ok(StdioPipes {
        incoming,
        outgoing,
        flushed,
    })
}
