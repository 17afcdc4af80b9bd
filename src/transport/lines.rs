//! Async line I/O: a reader loop that frames bytes into messages, and a writer task that
//! batches queued lines into as few writes as possible.

use crate::jsonrpc::{Frame, Framer};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What a writer task is asked to do.
#[derive(Debug)]
pub enum Outgoing {
    /// A message without its newline.
    Line(String),
    /// Flush and close the pipe (the peer sees EOF).
    Close,
}

/// Reads `r` to the end, handing each frame to `on_frame`. Returns at EOF or on a read error
/// (which is returned so the caller can say why the stream ended).
pub async fn read_frames<R, F>(r: R, max: usize, mut on_frame: F) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    F: FnMut(Frame),
{
    // 8 KiB holds dozens of ordinary messages; larger ones still pass, in several reads.
    // (Every server has one of these, so the size counts fifty times over in a big hub.)
    let mut reader = BufReader::with_capacity(1 << 13, r);
    let mut framer = Framer::new(max);
    loop {
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

/// Spawns a task that writes queued lines to `w`. It drains everything already queued before
/// flushing, so pipelined traffic costs few syscalls. It ends on [`Outgoing::Close`], when every
/// sender is gone, or on a write error (logged at debug: the reader side reports the peer's end).
/// The handle finishes once the last line has been flushed.
pub fn spawn_writer<W>(w: W, label: String) -> (mpsc::UnboundedSender<Outgoing>, JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
    let done = tokio::spawn(async move {
        let mut w = BufWriter::with_capacity(1 << 13, w);
        'outer: while let Some(first) = rx.recv().await {
            let mut next = Some(first);
            while let Some(item) = next.take() {
                match item {
                    Outgoing::Line(line) => {
                        if let Err(e) = write_line(&mut w, &line).await {
                            tracing::debug!(peer = %label, error = %e, "write failed; closing");
                            break 'outer;
                        }
                    }
                    Outgoing::Close => break 'outer,
                }
                next = rx.try_recv().ok();
            }
            if let Err(e) = w.flush().await {
                tracing::debug!(peer = %label, error = %e, "flush failed; closing");
                break;
            }
        }
        let _ = w.flush().await;
        let _ = w.shutdown().await;
    });
    (tx, done)
}

async fn write_line<W: AsyncWrite + Unpin>(
    w: &mut BufWriter<W>,
    line: &str,
) -> std::io::Result<()> {
    w.write_all(line.as_bytes()).await?;
    w.write_all(b"\n").await
}
