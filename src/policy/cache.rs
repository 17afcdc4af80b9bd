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
mod tests;
