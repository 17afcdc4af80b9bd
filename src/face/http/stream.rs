//! The SSE bodies: a POST's stream (what relates to its request, ending with the response)
//! and the session's GET stream (replay first, then live events), each event with an id.

use super::session::{GetGuard, ToPost, WaiterGuard};
use crate::transport::queue::QueueRx;
use axum::response::sse::Event;
use futures_core::Stream;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The GET stream's event ids are `g<sequence>`, which `Last-Event-ID` names to resume.
pub fn get_event_id(seq: u64) -> String {
    format!("g{seq}")
}

pub fn parse_get_event_id(id: &str) -> Option<u64> {
    id.strip_prefix('g')?.parse().ok()
}

pub struct PostStream {
    pub first: Option<ToPost>,
    pub rx: QueueRx<ToPost>,
    /// Distinguishes this stream's event ids (`p<stream>-<n>`) from every other's.
    pub stream: u64,
    pub sent: u64,
    pub done: bool,
    pub _guard: WaiterGuard,
}

impl Stream for PostStream {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let next = match self.first.take() {
            Some(first) => first,
            None => match self.rx.poll_recv(cx) {
                Poll::Ready(Some(next)) => next,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            },
        };
        self.done = next.last;
        self.sent += 1;
        let id = format!("p{}-{}", self.stream, self.sent);
        Poll::Ready(Some(Ok(Event::default().id(id).data(next.line))))
    }
}

pub struct GetStream {
    pub replay: VecDeque<(u64, String)>,
    pub rx: QueueRx<(u64, String)>,
    pub _guard: GetGuard,
}

impl Stream for GetStream {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let (seq, line) = match self.replay.pop_front() {
            Some(next) => next,
            None => match self.rx.poll_recv(cx) {
                Poll::Ready(Some(next)) => next,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            },
        };
        Poll::Ready(Some(Ok(Event::default().id(get_event_id(seq)).data(line))))
    }
}
