//! Reading a `text/event-stream` body with sse-stream, under the message size limit: an event
//! larger than the limit is not buffered whole, the stream is abandoned instead.
//!
//! Public (hidden) only for the fuzz targets in `tests/fuzz`.

use futures_core::Stream;
use hyper::body::Bytes;
use sse_stream::{Sse, SseByteStream};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, ready};

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
/// being taken out (the decoder would otherwise keep buffering one endless event). A chunk is
/// handed over in pieces of at most [`SLACK`] bytes: the decoder asks for the next piece only
/// once it has read the last one, so the count runs at most a piece ahead of the event being
/// read, and a burst of small events in one large chunk is not mistaken for a large one.
struct Counted<S> {
    inner: Pin<Box<S>>,
    /// What is left of the current chunk.
    rest: Bytes,
    pending: Arc<AtomicUsize>,
    limit: usize,
}

impl<S, E> Stream for Counted<S>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.rest.is_empty() {
            match ready!(self.inner.as_mut().poll_next(cx)) {
                None => return Poll::Ready(None),
                Some(Err(e)) => return Poll::Ready(Some(Err(std::io::Error::other(e)))),
                Some(Ok(chunk)) => self.rest = chunk,
            }
        }
        let n = self.rest.len().min(SLACK);
        let piece = self.rest.split_to(n);
        let seen = self.pending.fetch_add(n, Ordering::Relaxed) + n;
        Poll::Ready(Some(if seen > self.limit {
            Err(std::io::Error::other(OverLimit(seen)))
        } else {
            Ok(piece)
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
            rest: Bytes::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn response(body: String) -> reqwest::Response {
        axum::http::Response::builder()
            .header("content-type", "text/event-stream")
            .body(body)
            .unwrap()
            .into()
    }

    /// Found by the fuzzer (tests/fuzz, target `sse`): small events arriving in one chunk
    /// larger than the limit and its slack were refused as one event over the limit.
    #[tokio::test]
    async fn small_events_in_one_large_chunk_are_all_read() {
        let data = r#"{"jsonrpc":"2.0","method":"notifications/progress"}"#;
        let one = format!("data: {data}\n\n");
        let n = 3 * SLACK / one.len();
        let mut events = Events::new(response(one.repeat(n)), 1024);
        for i in 0..n {
            match events.next().await {
                Some(Ok(ev)) => assert_eq!(ev.data.as_deref(), Some(data)),
                other => panic!("event {i}: {other:?}"),
            }
        }
        assert!(events.next().await.is_none());
        // An event over the limit is still refused, before it is read whole.
        let big = format!("data: {}\n\n", "x".repeat(4 * SLACK));
        let mut events = Events::new(response(big), 1024);
        match events.next().await {
            Some(Err(StreamError::TooLarge(n))) => assert!(n < 3 * SLACK, "{n}"),
            other => panic!("{other:?}"),
        }
    }
}
