//! Reading a `text/event-stream` body with sse-stream, under the message size limit: an event
//! larger than the limit is not buffered whole, the stream is abandoned instead.
//!
//! Public (hidden) only for the fuzz targets in `tests/fuzz`.

use futures_core::Stream;
use sse_stream::{Sse, SseByteStream};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

/// Why an event stream stopped early.
#[derive(Debug)]
pub enum StreamError {
    /// An event (or the bytes read towards one) passed the size limit; the length seen.
    TooLarge(usize),
    /// The connection broke, or the bytes were not an event stream.
    Broken(String),
}

/// The events of one SSE response, in order.
pub struct Events {
    inner: Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>,
    /// Bytes read since the last event was handed out.
    pending: Arc<AtomicUsize>,
    max: usize,
}

/// The marker error [`Counted`] stops with.
#[derive(Debug)]
struct OverLimit(usize);

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes without the end of an event", self.0)
    }
}

impl std::error::Error for OverLimit {}

/// The body's chunks, counted, failing once more than `limit` bytes arrived without an event
/// being taken out (the decoder would otherwise keep buffering one endless event).
struct Counted<S> {
    inner: Pin<Box<S>>,
    pending: Arc<AtomicUsize>,
    limit: usize,
}

impl<S, B, E> Stream for Counted<S>
where
    S: Stream<Item = Result<B, E>>,
    B: AsRef<[u8]>,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<B, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = match self.inner.as_mut().poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(item) => item,
        };
        Poll::Ready(item.map(|r| match r {
            Ok(chunk) => {
                let seen = self
                    .pending
                    .fetch_add(chunk.as_ref().len(), Ordering::Relaxed)
                    + chunk.as_ref().len();
                if seen > self.limit {
                    Err(std::io::Error::other(OverLimit(seen)))
                } else {
                    Ok(chunk)
                }
            }
            Err(e) => Err(std::io::Error::other(e)),
        }))
    }
}

/// Room above the limit for the bytes the decoder reads ahead of an event's end.
const SLACK: usize = 64 * 1024;

impl Events {
    pub fn new(resp: reqwest::Response, max: usize) -> Events {
        let pending = Arc::new(AtomicUsize::new(0));
        let counted = Counted {
            inner: Box::pin(resp.bytes_stream()),
            pending: pending.clone(),
            limit: max.saturating_add(SLACK),
        };
        Events {
            inner: Box::pin(SseByteStream::new(counted)),
            pending,
            max,
        }
    }

    /// The next event; `None` when the stream ended cleanly.
    pub async fn next(&mut self) -> Option<Result<Sse, StreamError>> {
        let item = std::future::poll_fn(|cx| self.inner.as_mut().poll_next(cx)).await?;
        self.pending.store(0, Ordering::Relaxed);
        Some(match item {
            Ok(ev) => match &ev.data {
                Some(data) if data.len() > self.max => Err(StreamError::TooLarge(data.len())),
                _ => Ok(ev),
            },
            Err(sse_stream::Error::Body(e)) => {
                let over = e
                    .downcast_ref::<std::io::Error>()
                    .and_then(|io| io.get_ref())
                    .and_then(|inner| inner.downcast_ref::<OverLimit>());
                match over {
                    Some(OverLimit(n)) => Err(StreamError::TooLarge(*n)),
                    None => Err(StreamError::Broken(broken(e.as_ref()))),
                }
            }
            Err(e) => Err(StreamError::Broken(e.to_string())),
        })
    }
}

/// The innermost cause of a broken body, which is the informative one.
fn broken(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    let text = last.to_string();
    if text.is_empty() {
        "the stream broke off".into()
    } else {
        text
    }
}

/// Whether an event carries a JSON-RPC message: the default event type or `message`,
/// with data (the 2025-11-25 priming event has an empty one).
pub fn message_data(ev: &Sse) -> Option<&str> {
    match ev.event.as_deref() {
        None | Some("message") => ev.data.as_deref().filter(|d| !d.trim().is_empty()),
        _ => None,
    }
}
