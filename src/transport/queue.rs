//! A channel that counts the messages and bytes it holds, so its sender can apply a bound
//! and a drop policy to a reader that does not keep up (the HTTP face's SSE bodies, a
//! 2026-07-28 call's notifications).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Bytes a reader may leave unread before messages that may be dropped (progress and log
/// messages) are dropped for it.
pub const DROPPABLE_BACKLOG: usize = 1 << 20;

/// What a queue holds now: messages and bytes handed to it and not yet taken by its reader.
#[derive(Default)]
struct Held {
    events: AtomicUsize,
    bytes: AtomicUsize,
}

pub struct QueueTx<T> {
    tx: mpsc::UnboundedSender<(T, usize)>,
    held: Arc<Held>,
}

pub struct QueueRx<T> {
    rx: mpsc::UnboundedReceiver<(T, usize)>,
    held: Arc<Held>,
}

pub fn queue<T>() -> (QueueTx<T>, QueueRx<T>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let held = Arc::new(Held::default());
    (
        QueueTx {
            tx,
            held: held.clone(),
        },
        QueueRx { rx, held },
    )
}

impl<T> QueueTx<T> {
    /// Queues `item`, which weighs `bytes`; false when the reader is gone.
    pub fn send(&self, item: T, bytes: usize) -> bool {
        self.held.events.fetch_add(1, Ordering::Relaxed);
        self.held.bytes.fetch_add(bytes, Ordering::Relaxed);
        if self.tx.send((item, bytes)).is_ok() {
            return true;
        }
        self.taken(bytes);
        false
    }

    /// Messages and bytes waiting for the reader to take them.
    pub fn held(&self) -> (usize, usize) {
        (
            self.held.events.load(Ordering::Relaxed),
            self.held.bytes.load(Ordering::Relaxed),
        )
    }

    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Resolves when the reader is gone.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }

    fn taken(&self, bytes: usize) {
        taken(&self.held, bytes);
    }
}

fn taken(held: &Held, bytes: usize) {
    held.events.fetch_sub(1, Ordering::Relaxed);
    held.bytes.fetch_sub(bytes, Ordering::Relaxed);
}

impl<T> QueueRx<T> {
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.rx.poll_recv(cx).map(|next| {
            next.map(|(item, bytes)| {
                taken(&self.held, bytes);
                item
            })
        })
    }

    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_what_waits_and_forgets_what_was_taken() {
        let (tx, mut rx) = queue::<&str>();
        assert!(tx.send("a", 10));
        assert!(tx.send("b", 5));
        assert_eq!(tx.held(), (2, 15));
        assert_eq!(rx.recv().await, Some("a"));
        assert_eq!(tx.held(), (1, 5));
        drop(rx);
        assert!(!tx.send("c", 7));
        assert_eq!(tx.held(), (1, 5));
    }
}
