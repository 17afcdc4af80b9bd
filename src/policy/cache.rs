//! The result cache: moka, a TTL per entry, bounded by bytes. Only successful results of
//! tools configured cacheable are kept; concurrent identical calls share one upstream call.
//!
//! A result goes into moka on a thread of its own, a few milliseconds after the call
//! answered: moka's insert cost the call's thread about 3,000 instructions, which delayed
//! the client's next request when it was woken on the same CPU. Until then the result is
//! served from the table of calls in flight, so a repeated call hits all the same.

use crate::{FastHasher as Hasher, FastMap};
use moka::Expiry;
use moka::sync::Cache;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub server: usize,
    pub tool: String,
    /// Canonical JSON of the arguments (shared with the call's audit record).
    pub arguments: Arc<str>,
    /// Of the three fields above, hashed once: a call looks its key up in moka, in the
    /// table of calls in flight and in the presence counts, and the arguments can be long.
    hash: u64,
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl Key {
    #[cfg(test)]
    pub fn new(server: usize, tool: &str, arguments: &str) -> Key {
        Key::from_canonical(server, tool, super::canonical::canonical(arguments).into())
    }

    /// For arguments already in canonical form (see [`super::canonical::canonical`]).
    pub fn from_canonical(server: usize, tool: &str, arguments: Arc<str>) -> Key {
        // Seeded once per process, like the maps' own hashers.
        static SEED: std::sync::LazyLock<Hasher> = std::sync::LazyLock::new(Hasher::default);
        Key {
            hash: std::hash::BuildHasher::hash_one(&*SEED, (server, tool, &*arguments)),
            server,
            tool: tool.to_string(),
            arguments,
        }
    }
}

/// Which keys may be in moka: a count of stored keys per bucket of their hashes, raised
/// before each insert and lowered by moka's eviction listener (which every removal, a
/// replacement included, reaches). A call whose bucket reads zero skips moka's lookup, which
/// cost a miss about 1,200 instructions with its share of moka's bookkeeping. A bucket that
/// reaches the top stays there; a count that is off can only send a call to moka for nothing,
/// or, in a race with a removal, make it miss a result another call just stored.
struct Presence(Box<[AtomicU8]>);

impl Presence {
    /// 16 KiB per hub, written once when the cache is made.
    const BUCKETS: usize = 1 << 14;

    fn new() -> Presence {
        Presence((0..Self::BUCKETS).map(|_| AtomicU8::new(0)).collect())
    }

    fn bucket(&self, key: &Key) -> &AtomicU8 {
        // The low bits of foldhash's output are as mixed as the high ones.
        &self.0[(key.hash as usize) % Self::BUCKETS]
    }

    fn add(&self, key: &Key) {
        let _ = self
            .bucket(key)
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_add(1));
    }

    fn remove(&self, key: &Key) {
        let _ = self
            .bucket(key)
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n > 0 && n < u8::MAX).then(|| n - 1)
            });
    }

    fn may_hold(&self, key: &Key) -> bool {
        self.bucket(key).load(Ordering::Relaxed) != 0
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

/// How a call that identical callers wait on ended: its stored result, or an outcome that
/// was not stored (the table of calls in flight is not generic over its type).
type Shared = Result<Arc<str>, Arc<dyn std::any::Any + Send + Sync>>;

/// A call in flight, which identical callers wait on. Nearly every call has no such waiter,
/// so settling must cost little when nobody listens: a `watch` channel's eight-way notify on
/// send and again on drop came to about 2,000 instructions a call.
#[derive(Default)]
struct Slot {
    /// Set once: `Some` when the call ended, `None` when it was cancelled.
    outcome: OnceLock<Option<Shared>>,
    settled: Notify,
}

impl Slot {
    /// The first settlement counts; later ones (the drop after a store) do nothing.
    fn settle(&self, outcome: Option<Shared>) {
        if self.outcome.set(outcome).is_ok() {
            self.settled.notify_waiters();
        }
    }

    async fn outcome(&self) -> Option<Shared> {
        loop {
            // Created before the check, so a settlement between the two still wakes it.
            let settled = self.settled.notified();
            if let Some(outcome) = self.outcome.get() {
                return outcome.clone();
            }
            settled.await;
        }
    }
}

/// How long the storing thread gathers results after the first one arrives.
const GATHER: Duration = Duration::from_millis(5);

pub struct ResultCache {
    tables: Arc<Tables>,
    /// Results answered but not yet in moka.
    pending: Arc<Pending>,
    /// Whether the thread that stores them runs (started with the first result).
    storer: OnceLock<bool>,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Told of every count and result handed over, for the one task that publishes the
    /// counters (the status file `openpact cache stats` reads).
    counted: tokio::sync::Notify,
}

/// What the storing thread shares with the calls.
struct Tables {
    /// The synchronous moka cache: the asynchronous one wraps the same work in futures
    /// and its own waiter tables, measured at ~3,000 more instructions per stored call.
    /// foldhash rather than std's SipHash: every call hashes its key (arguments included).
    cache: Cache<Key, Arc<Stored>, Hasher>,
    present: Arc<Presence>,
    /// Identical calls in progress share one upstream call (moka's single-flight entry API
    /// needs a synchronous closure in the synchronous cache); a settled call stays here
    /// until its result is in moka.
    in_flight: Mutex<FastMap<Key, Arc<Slot>>>,
    /// Bumped by every invalidation, so a result whose call raced one is not stored.
    epoch: AtomicU64,
    /// Servers with results put into moka since their last invalidation. Every server is
    /// invalidated as it starts, and moka's invalidation by predicate scans the whole cache
    /// in its bookkeeping: fifty servers starting cost ~1.3M instructions for nothing.
    stored_for: Mutex<std::collections::HashSet<usize, Hasher>>,
}

#[derive(Default)]
struct Pending {
    queue: Mutex<Queue>,
    wake: Condvar,
}

#[derive(Default)]
struct Queue {
    stores: Vec<Store>,
    closed: bool,
}

/// A result to put into moka; the call's slot leaves the table once it is there.
struct Store {
    key: Key,
    slot: Arc<Slot>,
    stored: Arc<Stored>,
    /// The invalidation epoch when the call began.
    epoch: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only single map or queue operations happen under these locks; a panic cannot leave
    // them half-done.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Tables {
    /// Puts results into moka, unless an invalidation since their call began made them stale,
    /// then takes their slots out of the table (unless a newer call has the key by then).
    fn store(&self, stores: Vec<Store>) {
        for s in stores {
            if self.epoch.load(Ordering::SeqCst) == s.epoch {
                // Marked before the insert; an invalidation that misses the mark bumped the
                // epoch first, which the check after the insert sees.
                lock(&self.stored_for).insert(s.key.server);
                self.present.add(&s.key);
                self.cache.insert(s.key.clone(), s.stored);
                if self.epoch.load(Ordering::SeqCst) != s.epoch {
                    self.cache.invalidate(&s.key);
                }
            }
            let mut map = lock(&self.in_flight);
            if map.get(&s.key).is_some_and(|now| Arc::ptr_eq(now, &s.slot)) {
                map.remove(&s.key);
            }
        }
    }

    /// Drops the settled slots an invalidation makes stale (calls still running keep theirs:
    /// the epoch keeps their results out of moka).
    fn forget_settled(&self, stale: impl Fn(&Key) -> bool) {
        lock(&self.in_flight).retain(|k, slot| slot.outcome.get().is_none() || !stale(k));
    }
}

/// The storing thread: waits for a result, gathers for [`GATHER`], stores the batch; stores
/// what is left and ends once the cache is dropped.
fn storer(tables: &Tables, pending: &Pending) {
    loop {
        let mut q = lock(&pending.queue);
        while q.stores.is_empty() && !q.closed {
            q = pending.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
        if q.stores.is_empty() {
            return;
        }
        if !q.closed {
            drop(q);
            std::thread::sleep(GATHER);
            q = lock(&pending.queue);
        }
        let batch = std::mem::take(&mut q.stores);
        drop(q);
        tables.store(batch);
    }
}

/// Counters for `openpact cache stats` and the status file.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub entries: u64,
    pub bytes: u64,
}

/// What [`ResultCache::lookup`] found.
pub enum Lookup<'c, T> {
    /// A stored result, or the result an identical call in flight just stored.
    Hit(Arc<str>),
    /// An identical call in flight ended with an outcome that was not stored.
    Failed(Arc<T>),
    /// Nobody has it: make the call, then [`Claim::store`] or [`Claim::fail`].
    Claimed(Claim<'c>),
}

/// The first caller's claim on a key. Settling it hands the outcome to the identical callers
/// waiting; dropping it unsettled (the call was cancelled) frees the key, and they try again.
/// Settling is separate from the lookup so that a caller can answer its client first.
pub struct Claim<'c> {
    cache: &'c ResultCache,
    /// Taken by [`Claim::store`], which leaves the slot in the table for the storing thread.
    key: Option<Key>,
    /// The invalidation epoch when the call began.
    epoch: u64,
    slot: Arc<Slot>,
}

impl Claim<'_> {
    /// Stores `result` for `ttl`, unless an invalidation (restart, new tool list, `cache
    /// clear`) since the call began made it stale, and hands it to the callers waiting.
    pub fn store(mut self, result: Arc<str>, ttl: Duration) {
        self.slot.settle(Some(Ok(result.clone())));
        // Settled first: an invalidation from here on finds the slot settled and drops it.
        if self.cache.tables.epoch.load(Ordering::SeqCst) != self.epoch {
            return; // stale already: dropping the claim takes it out of the table
        }
        let Some(key) = self.key.take() else { return };
        let store = Store {
            key,
            slot: self.slot.clone(),
            stored: Arc::new(Stored { result, ttl }),
            epoch: self.epoch,
        };
        self.cache.defer(store);
    }

    /// Hands an outcome that must not be stored (an error, `isError`) to the callers waiting.
    pub fn fail<T: Send + Sync + 'static>(self, outcome: Arc<T>) {
        self.slot.settle(Some(Err(outcome)));
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let Some(key) = self.key.take() else { return };
        // Out of the table first: a waiter woken by a cancellation must not find it again.
        self.cache.in_flight().remove(&key);
        self.slot.settle(None);
    }
}

impl ResultCache {
    pub fn new(max_bytes: u64) -> ResultCache {
        let present = Arc::new(Presence::new());
        let evicted = present.clone();
        let cache = Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|k: &Key, v: &Arc<Stored>| {
                u32::try_from(k.tool.len() + k.arguments.len() + v.result.len() + 64)
                    .unwrap_or(u32::MAX)
            })
            .expire_after(PerEntry)
            .support_invalidation_closures()
            .eviction_listener(move |key: Arc<Key>, _, _| evicted.remove(&key))
            .build_with_hasher(Hasher::default());
        ResultCache {
            tables: Arc::new(Tables {
                cache,
                present,
                in_flight: Mutex::default(),
                epoch: AtomicU64::new(0),
                stored_for: Mutex::default(),
            }),
            pending: Arc::default(),
            storer: OnceLock::new(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            counted: tokio::sync::Notify::new(),
        }
    }

    /// Returns once a call was counted, a result handed over to be stored, or the cache
    /// cleared since the last return (at once if that happened meanwhile). One waiter only.
    pub async fn counted(&self) {
        self.counted.notified().await;
    }

    fn miss(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
        self.counted.notify_one();
    }

    fn in_flight(&self) -> MutexGuard<'_, FastMap<Key, Arc<Slot>>> {
        lock(&self.tables.in_flight)
    }

    /// Hands a result to the storing thread (started on first use), or stores it here if
    /// that thread could not be started.
    fn defer(&self, store: Store) {
        self.counted.notify_one();
        let running = *self.storer.get_or_init(|| {
            let (tables, pending) = (self.tables.clone(), self.pending.clone());
            let spawned = std::thread::Builder::new()
                .name("cache-store".into())
                .spawn(move || storer(&tables, &pending));
            if let Err(e) = &spawned {
                tracing::warn!("cache results are stored on the calls' thread: {e}");
            }
            spawned.is_ok()
        });
        if !running {
            return self.tables.store(vec![store]);
        }
        let mut q = lock(&self.pending.queue);
        q.stores.push(store);
        // The first of a batch wakes the thread; it gathers the rest while it waits.
        if q.stores.len() == 1 {
            self.pending.wake.notify_one();
        }
    }

    /// Stores every result handed over so far, here and now.
    fn store_pending(&self) {
        let batch = std::mem::take(&mut lock(&self.pending.queue).stores);
        self.tables.store(batch);
    }

    /// Looks `key` up: a stored result, the outcome of an identical call in flight (waited
    /// for), or the claim to make the call. `T` is the type of outcomes that are not stored.
    pub async fn lookup<T: Send + Sync + 'static>(&self, key: Key) -> Lookup<'_, T> {
        loop {
            if self.tables.present.may_hold(&key)
                && let Some(found) = self.tables.cache.get(&key)
            {
                return Lookup::Hit(self.hit(found.result.clone()));
            }
            let waiting = {
                let mut map = self.in_flight();
                match map.get(&key) {
                    Some(slot) => slot.clone(),
                    None => {
                        let slot = Arc::new(Slot::default());
                        map.insert(key.clone(), slot.clone());
                        drop(map);
                        self.miss();
                        return Lookup::Claimed(Claim {
                            cache: self,
                            key: Some(key),
                            epoch: self.tables.epoch.load(Ordering::SeqCst),
                            slot,
                        });
                    }
                }
            };
            match waiting.outcome().await {
                Some(Ok(result)) => return Lookup::Hit(self.hit(result)),
                Some(Err(other)) => {
                    if let Ok(outcome) = other.downcast::<T>() {
                        self.miss();
                        return Lookup::Failed(outcome);
                    }
                    // Another kind of outcome: nothing to share; try again, perhaps first.
                }
                // The first caller went away (cancelled): try again, perhaps as the first.
                None => {}
            }
        }
    }

    fn hit(&self, result: Arc<str>) -> Arc<str> {
        self.hits.fetch_add(1, Ordering::Relaxed);
        self.counted.notify_one();
        result
    }

    /// Drops every entry of one server (it restarted or its tools changed).
    pub fn invalidate_server(&self, server: usize) {
        let tables = &self.tables;
        tables.epoch.fetch_add(1, Ordering::SeqCst);
        tables.forget_settled(|k| k.server == server);
        if lock(&tables.stored_for).remove(&server) {
            let _ = tables
                .cache
                .invalidate_entries_if(move |k, _| k.server == server);
        }
    }

    pub fn clear(&self) {
        let tables = &self.tables;
        tables.epoch.fetch_add(1, Ordering::SeqCst);
        tables.forget_settled(|_| true);
        lock(&tables.stored_for).clear();
        tables.cache.invalidate_all();
        self.counted.notify_one();
    }

    /// Counters, after storing what waits to be stored and applying moka's pending
    /// bookkeeping, so entries and bytes are current.
    pub async fn stats(&self) -> CacheStats {
        self.store_pending();
        let cache = &self.tables.cache;
        cache.run_pending_tasks();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: cache.entry_count(),
            bytes: cache.weighted_size(),
        }
    }
}

impl Drop for ResultCache {
    fn drop(&mut self) {
        lock(&self.pending.queue).closed = true;
        self.pending.wake.notify_one();
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

    /// The result and whether it came from the cache (or another caller), or the failure.
    type Answer = Result<(Arc<str>, bool), Arc<&'static str>>;

    /// A call that counts itself, waits for `go`, then answers `result` (or fails).
    async fn call(
        calls: &AtomicUsize,
        go: &Notify,
        result: Option<&str>,
    ) -> Result<Arc<str>, &'static str> {
        calls.fetch_add(1, Ordering::SeqCst);
        go.notified().await;
        result.map(Arc::from).ok_or("failed")
    }

    /// What a caller does: look up, and on a claim make the call and settle the claim.
    async fn get_or_call(
        cache: &ResultCache,
        call: impl std::future::Future<Output = Result<Arc<str>, &'static str>>,
    ) -> Answer {
        match cache.lookup::<&'static str>(key()).await {
            Lookup::Hit(result) => Ok((result, true)),
            Lookup::Failed(failure) => Err(failure),
            Lookup::Claimed(claim) => match call.await {
                Ok(result) => {
                    claim.store(result.clone(), TTL);
                    Ok((result, false))
                }
                Err(failure) => {
                    let failure = Arc::new(failure);
                    claim.fail(failure.clone());
                    Err(failure)
                }
            },
        }
    }

    /// `n` identical callers at once; the call is let go once all of them are waiting.
    async fn together(cache: &ResultCache, n: usize, result: Option<&str>) -> (usize, Vec<Answer>) {
        let (calls, go) = (AtomicUsize::new(0), Notify::new());
        let mut all: Vec<_> = (0..n)
            .map(|_| Box::pin(get_or_call(cache, call(&calls, &go, result))))
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
        // Answered but not yet in moka: served from the table of calls in flight.
        let (calls, again) = together(&cache, 1, None).await;
        assert_eq!(calls, 0, "served from the settled call");
        assert!(matches!(&again[0], Ok((r, true)) if &**r == "r"));
        // The storing thread moves it into moka and out of the table.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !cache.in_flight().is_empty() {
            assert!(Instant::now() < deadline, "never stored");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert!(cache.tables.cache.get(&key()).is_some());
        let (calls, again) = together(&cache, 1, None).await;
        assert_eq!(calls, 0, "served from the cache");
        assert!(matches!(&again[0], Ok((r, true)) if &**r == "r"));
    }

    #[tokio::test]
    async fn an_outcome_not_stored_is_shared_by_the_waiters_and_not_kept() {
        let cache = ResultCache::new(1 << 20);
        let (calls, all) = together(&cache, 3, None).await;
        assert_eq!(calls, 1);
        assert!(all.iter().all(|r| matches!(r, Err(e) if **e == "failed")));
        assert!(cache.in_flight().is_empty());
        assert!(cache.tables.cache.get(&key()).is_none());
    }

    #[tokio::test]
    async fn a_cancelled_first_call_frees_its_key() {
        let cache = ResultCache::new(1 << 20);
        let (calls, go) = (AtomicUsize::new(0), Notify::new());
        {
            let first = std::pin::pin!(get_or_call(&cache, call(&calls, &go, Some("a"))));
            assert!(!finished_at_first_poll(first).await);
            assert_eq!(cache.in_flight().len(), 1);
        }
        assert!(cache.in_flight().is_empty(), "the claim went with it");
        let (calls, second) = together(&cache, 1, Some("b")).await;
        assert_eq!(calls, 1);
        assert!(matches!(&second[0], Ok((r, false)) if &**r == "b"));
    }

    #[tokio::test]
    async fn a_waiter_takes_over_when_the_first_call_is_cancelled() {
        let cache = ResultCache::new(1 << 20);
        let (calls, go) = (AtomicUsize::new(0), Notify::new());
        let mut second = Box::pin(get_or_call(&cache, call(&calls, &go, Some("b"))));
        {
            let first = std::pin::pin!(get_or_call(&cache, call(&calls, &go, Some("a"))));
            assert!(!finished_at_first_poll(first).await);
            assert!(!finished_at_first_poll(second.as_mut()).await);
            assert_eq!(
                calls.load(Ordering::SeqCst),
                1,
                "the second waits on the first"
            );
        }
        // The first is gone unsettled: the waiter wakes, claims the key, makes its own call.
        assert!(!finished_at_first_poll(second.as_mut()).await);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        go.notify_one();
        assert!(matches!(second.await, Ok((r, false)) if &*r == "b"));
        cache.store_pending();
        assert!(cache.in_flight().is_empty());
    }

    #[tokio::test]
    async fn a_result_that_raced_an_invalidation_is_returned_but_not_kept() {
        let cache = ResultCache::new(1 << 20);
        let (calls, go) = (AtomicUsize::new(0), Notify::new());
        let mut pending = std::pin::pin!(get_or_call(&cache, call(&calls, &go, Some("stale"))));
        assert!(!finished_at_first_poll(pending.as_mut()).await);
        cache.invalidate_server(0);
        go.notify_one();
        assert!(matches!(pending.await, Ok((r, false)) if &*r == "stale"));
        let (calls, _) = together(&cache, 1, Some("fresh")).await;
        assert_eq!(calls, 1, "the stale result was served");
        cache.store_pending();
        let kept = cache.tables.cache.get(&key());
        assert!(
            kept.is_some_and(|s| &*s.result == "fresh"),
            "stale result stored"
        );
    }

    #[tokio::test]
    async fn presence_counts_follow_moka_through_replacement_and_invalidation() {
        let cache = ResultCache::new(1 << 20);
        let present = || cache.tables.present.may_hold(&key());
        assert!(!present(), "an empty cache sends no call to moka");
        let (calls, _) = together(&cache, 1, Some("a")).await;
        assert_eq!(calls, 1);
        cache.store_pending();
        assert!(present());
        // Stored again under the same key: moka reports the replaced value, the count stays.
        cache.tables.store(vec![Store {
            key: key(),
            slot: Arc::default(),
            stored: Arc::new(Stored {
                result: "b".into(),
                ttl: TTL,
            }),
            epoch: cache.tables.epoch.load(Ordering::SeqCst),
        }]);
        cache.tables.cache.run_pending_tasks();
        assert!(present(), "a replacement lost the key");
        let (calls, again) = together(&cache, 1, None).await;
        assert_eq!(calls, 0);
        assert!(matches!(&again[0], Ok((r, true)) if &**r == "b"));
        // Invalidated: the count falls back to zero once moka has let the entry go.
        cache.invalidate_server(0);
        cache.tables.cache.run_pending_tasks();
        assert!(!present(), "the count outlived the entry");
        let (calls, _) = together(&cache, 1, Some("c")).await;
        assert_eq!(calls, 1);
        cache.store_pending();
        let (calls, again) = together(&cache, 1, None).await;
        assert_eq!(calls, 0, "stored again after an invalidation, and found");
        assert!(matches!(&again[0], Ok((r, true)) if &**r == "c"));
    }

    #[test]
    fn invalidating_a_server_drops_its_results_every_time_and_keeps_the_others() {
        let cache = ResultCache::new(1 << 20);
        let key = |server: usize| Key::new(server, "tool", "{}");
        let put = |server: usize, result: &str| {
            cache.tables.store(vec![Store {
                key: key(server),
                slot: Arc::default(),
                stored: Arc::new(Stored {
                    result: result.into(),
                    ttl: TTL,
                }),
                epoch: cache.tables.epoch.load(Ordering::SeqCst),
            }]);
        };
        let held = |server: usize| {
            cache.tables.cache.run_pending_tasks();
            cache.tables.cache.get(&key(server)).is_some()
        };
        // A server with nothing stored (every server as it starts) is skipped.
        cache.invalidate_server(0);
        put(0, "a");
        put(1, "b");
        cache.invalidate_server(0);
        assert!(!held(0), "the server's result outlived its invalidation");
        assert!(held(1), "another server's result was dropped");
        put(0, "c");
        cache.invalidate_server(0);
        assert!(
            !held(0),
            "a result stored after an invalidation outlived the next one"
        );
        assert!(held(1));
    }

    #[test]
    fn equal_keys_hash_alike_and_others_apart() {
        assert_eq!(
            Key::new(0, "t", r#"{"b":1,"a":2}"#),
            Key::new(0, "t", r#"{"a":2,"b":1}"#)
        );
        assert_ne!(key(), Key::new(1, "tool", "{}"));
        assert_ne!(key().hash, Key::new(0, "tool", r#"{"a":1}"#).hash);
    }

    #[tokio::test]
    async fn an_invalidation_drops_results_not_yet_in_moka() {
        let cache = ResultCache::new(1 << 20);
        let (calls, _) = together(&cache, 1, Some("old")).await;
        assert_eq!(calls, 1);
        cache.clear();
        assert!(cache.in_flight().is_empty());
        let (calls, again) = together(&cache, 1, Some("new")).await;
        assert_eq!(calls, 1, "the cleared result was served");
        assert!(matches!(&again[0], Ok((r, false)) if &**r == "new"));
        cache.store_pending();
        assert!(
            cache
                .tables
                .cache
                .get(&key())
                .is_some_and(|s| &*s.result == "new")
        );
    }
}
