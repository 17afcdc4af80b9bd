//! The result cache: moka, a TTL per entry, bounded by bytes. Only successful results of
//! tools configured cacheable are kept; concurrent identical calls share one upstream call.

use super::canonical::canonical;
use moka::Expiry;
use moka::sync::Cache;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub server: usize,
    pub tool: String,
    /// Canonical JSON of the arguments.
    pub arguments: String,
}

impl Key {
    pub fn new(server: usize, tool: &str, arguments: &str) -> Key {
        Key::from_canonical(server, tool, canonical(arguments))
    }

    /// For arguments already in canonical form (see [`canonical`]).
    pub fn from_canonical(server: usize, tool: &str, arguments: String) -> Key {
        Key {
            server,
            tool: tool.to_string(),
            arguments,
        }
    }
}

/// A stored result (JSON text) and how long it may live.
#[derive(Debug)]
pub struct Stored {
    pub result: Arc<str>,
    ttl: Duration,
}

struct PerEntry;

impl Expiry<Key, Arc<Stored>> for PerEntry {
    fn expire_after_create(
        &self,
        _key: &Key,
        value: &Arc<Stored>,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// What a call produced, when it must not be stored (errors, `isError`).
#[derive(Debug)]
pub enum NotStored<T> {
    Uncacheable(T),
}

/// How a call that identical callers wait on ended: its stored result, or the outcome that
/// was not stored (a `NotStored<T>`; the table of calls in flight is not generic over `T`).
type Shared = Result<Arc<str>, Arc<dyn std::any::Any + Send + Sync>>;

/// A call in flight: `None` until it ends; a dropped sender means it was cancelled.
type Waiting = watch::Receiver<Option<Shared>>;

type Hasher = foldhash::fast::RandomState;

pub struct ResultCache {
    /// The synchronous moka cache: the asynchronous one wraps the same work in futures
    /// and its own waiter tables, measured at ~3,000 more instructions per stored call.
    /// foldhash rather than std's SipHash: every call hashes its key (arguments included).
    cache: Cache<Key, Arc<Stored>, Hasher>,
    /// Identical calls in progress share one upstream call (moka's single-flight entry API
    /// needs a synchronous closure in the synchronous cache).
    in_flight: std::sync::Mutex<HashMap<Key, Waiting, Hasher>>,
    /// Bumped by every invalidation, so a result whose call raced one is not stored.
    epoch: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Counters for `openpact cache stats` and the status file.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: u64,
    pub bytes: u64,
}

/// The first caller's claim on a key. However the call ends, even cancelled, dropping the
/// claim frees the key; the waiters then see the outcome, or try again themselves.
struct Claim<'c> {
    cache: &'c ResultCache,
    key: Key,
    tx: watch::Sender<Option<Shared>>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.cache.in_flight().remove(&self.key);
    }
}

impl ResultCache {
    pub fn new(max_bytes: u64) -> ResultCache {
        let cache = Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|k: &Key, v: &Arc<Stored>| {
                u32::try_from(k.tool.len() + k.arguments.len() + v.result.len() + 64)
                    .unwrap_or(u32::MAX)
            })
            .expire_after(PerEntry)
            .support_invalidation_closures()
            .build_with_hasher(Hasher::default());
        ResultCache {
            cache,
            in_flight: std::sync::Mutex::default(),
            epoch: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Waiting, Hasher>> {
        // Only single map operations happen under this lock; a panic cannot leave it
        // half-done.
        self.in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Returns the cached result, or runs `call` (once, however many callers ask at the same
    /// time) and stores what it returns when `call` says it may be stored.
    /// `Ok((result, hit))`; `Err` carries an outcome that was not stored, shared by the
    /// callers that waited on it.
    pub async fn get_or_call<F, T>(
        &self,
        key: Key,
        ttl: Duration,
        call: F,
    ) -> Result<(Arc<str>, bool), Arc<NotStored<T>>>
    where
        F: std::future::Future<Output = Result<Arc<str>, NotStored<T>>>,
        T: Send + Sync + 'static,
    {
        let claim = loop {
            if let Some(found) = self.cache.get(&key) {
                return Ok(self.counted(found.result.clone(), true));
            }
            let mut waiting = {
                let mut map = self.in_flight();
                match map.get(&key) {
                    Some(rx) => rx.clone(),
                    None => {
                        let (tx, rx) = watch::channel(None);
                        map.insert(key.clone(), rx);
                        break Claim {
                            cache: self,
                            key,
                            tx,
                        };
                    }
                }
            };
            let shared = waiting
                .wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|v| v.clone());
            match shared {
                Some(Ok(result)) => return Ok(self.counted(result, true)),
                Some(Err(other)) => {
                    self.misses.fetch_add(1, Ordering::Relaxed);
                    return match other.downcast::<NotStored<T>>() {
                        Ok(not_stored) => Err(not_stored),
                        // Another caller's kind of outcome: nothing to share; our own call.
                        Err(_) => call.await.map(|result| (result, false)).map_err(Arc::new),
                    };
                }
                // The first caller went away (cancelled): try again, perhaps as the first.
                None => {}
            }
        };
        let epoch = self.epoch.load(Ordering::SeqCst);
        let outcome = match call.await {
            Ok(result) => {
                // An invalidation (restart, new tool list, `cache clear`) since the call
                // began makes this result stale: hand it over, but do not keep it.
                if self.epoch.load(Ordering::SeqCst) == epoch {
                    let stored = Arc::new(Stored {
                        result: result.clone(),
                        ttl,
                    });
                    self.cache.insert(claim.key.clone(), stored);
                    if self.epoch.load(Ordering::SeqCst) != epoch {
                        self.cache.invalidate(&claim.key);
                    }
                }
                Ok(result)
            }
            Err(not_stored) => Err(Arc::new(not_stored)),
        };
        self.misses.fetch_add(1, Ordering::Relaxed);
        let shared: Shared = match &outcome {
            Ok(result) => Ok(result.clone()),
            Err(not_stored) => Err(not_stored.clone()),
        };
        claim.tx.send_replace(Some(shared));
        drop(claim);
        outcome.map(|result| (result, false))
    }

    fn counted(&self, result: Arc<str>, hit: bool) -> (Arc<str>, bool) {
        let counter = if hit { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        (result, hit)
    }

    /// Drops every entry of one server (it restarted or its tools changed).
    pub fn invalidate_server(&self, server: usize) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        let _ = self
            .cache
            .invalidate_entries_if(move |k, _| k.server == server);
    }

    pub fn clear(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.cache.invalidate_all();
    }

    /// Counters, after applying moka's pending bookkeeping so entries and bytes are current.
    pub async fn stats(&self) -> CacheStats {
        self.cache.run_pending_tasks();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.cache.entry_count(),
            bytes: self.cache.weighted_size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::task::Poll;
    use tokio::sync::Notify;

    const TTL: Duration = Duration::from_secs(60);

    fn key() -> Key {
        Key::new(0, "tool", "{}")
    }

    type Answer = Result<(Arc<str>, bool), Arc<NotStored<&'static str>>>;

    /// A call that counts itself, waits for `go`, then answers `result` (or fails).
    async fn call(
        calls: &AtomicUsize,
        go: &Notify,
        result: Option<&str>,
    ) -> Result<Arc<str>, NotStored<&'static str>> {
        calls.fetch_add(1, Ordering::SeqCst);
        go.notified().await;
        result
            .map(Arc::from)
            .ok_or(NotStored::Uncacheable("failed"))
    }

    /// `n` identical callers at once; the call is let go once all of them are waiting.
    async fn together(cache: &ResultCache, n: usize, result: Option<&str>) -> (usize, Vec<Answer>) {
        let (calls, go) = (AtomicUsize::new(0), Notify::new());
        let mut all: Vec<_> = (0..n)
            .map(|_| Box::pin(cache.get_or_call(key(), TTL, call(&calls, &go, result))))
            .collect();
        let mut out: Vec<Option<Answer>> = (0..n).map(|_| None).collect();
        std::future::poll_fn(|cx| {
            for (f, o) in all.iter_mut().zip(out.iter_mut()) {
                if o.is_none()
                    && let Poll::Ready(v) = f.as_mut().poll(cx)
                {
                    *o = Some(v);
                }
            }
            if out.iter().all(Option::is_some) {
                return Poll::Ready(());
            }
            go.notify_waiters();
            cx.waker().wake_by_ref();
            Poll::Pending
        })
        .await;
        (
            calls.load(Ordering::SeqCst),
            out.into_iter().flatten().collect(),
        )
    }

    /// Polls once; true if it finished.
    async fn finished_at_first_poll<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> bool {
        let mut f = Some(f);
        std::future::poll_fn(|cx| Poll::Ready(f.take().is_some_and(|f| f.poll(cx).is_ready())))
            .await
    }

    #[tokio::test]
    async fn identical_callers_share_one_call_and_the_result_is_stored() {
        let cache = ResultCache::new(1 << 20);
        let (calls, all) = together(&cache, 5, Some("r")).await;
        assert_eq!(calls, 1);
        let hits = all.iter().filter(|r| matches!(r, Ok((_, true)))).count();
        assert_eq!(
            hits, 4,
            "the first caller misses, the others share its call"
        );
        assert!(cache.in_flight().is_empty());
        let (calls, again) = together(&cache, 1, None).await;
        assert_eq!(calls, 0, "served from the cache");
        assert!(matches!(&again[0], Ok((r, true)) if &**r == "r"));
    }

    #[tokio::test]
    async fn an_outcome_not_stored_is_shared_by_the_waiters_and_not_kept() {
        let cache = ResultCache::new(1 << 20);
        let (calls, all) = together(&cache, 3, None).await;
        assert_eq!(calls, 1);
        assert!(
            all.iter()
                .all(|r| matches!(r, Err(e) if matches!(**e, NotStored::Uncacheable("failed"))))
        );
        assert!(cache.in_flight().is_empty());
        assert!(cache.cache.get(&key()).is_none());
    }

    #[tokio::test]
    async fn a_cancelled_first_call_frees_its_key() {
        let cache = ResultCache::new(1 << 20);
        let (calls, go) = (AtomicUsize::new(0), Notify::new());
        {
            let first = std::pin::pin!(cache.get_or_call(key(), TTL, call(&calls, &go, Some("a"))));
            assert!(!finished_at_first_poll(first).await);
            assert_eq!(cache.in_flight().len(), 1);
        }
        assert!(cache.in_flight().is_empty(), "the claim went with it");
        let (calls, second) = together(&cache, 1, Some("b")).await;
        assert_eq!(calls, 1);
        assert!(matches!(&second[0], Ok((r, false)) if &**r == "b"));
    }

    #[tokio::test]
    async fn a_result_that_raced_an_invalidation_is_returned_but_not_kept() {
        let cache = ResultCache::new(1 << 20);
        let (calls, go) = (AtomicUsize::new(0), Notify::new());
        let mut pending =
            std::pin::pin!(cache.get_or_call(key(), TTL, call(&calls, &go, Some("stale"))));
        assert!(!finished_at_first_poll(pending.as_mut()).await);
        cache.invalidate_server(0);
        go.notify_one();
        assert!(matches!(pending.await, Ok((r, false)) if &*r == "stale"));
        assert!(cache.cache.get(&key()).is_none(), "stale result stored");
    }
}
