//! The result cache: moka, a TTL per entry, bounded by bytes. Only successful results of
//! tools configured cacheable are kept; concurrent identical calls share one upstream call.

use super::canonical::canonical;
use moka::Expiry;
use moka::future::Cache;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

pub struct ResultCache {
    /// foldhash rather than std's SipHash: every call hashes its key (arguments included).
    cache: Cache<Key, Arc<Stored>, foldhash::fast::RandomState>,
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
            .build_with_hasher(foldhash::fast::RandomState::default());
        ResultCache {
            cache,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Returns the cached result, or runs `call` (once, however many callers ask at the same
    /// time) and stores what it returns when `call` says it may be stored.
    /// `Ok((result, hit))`; `Err` carries an outcome that was not stored.
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
        let entry = self
            .cache
            .entry(key)
            .or_try_insert_with(
                async move { call.await.map(|result| Arc::new(Stored { result, ttl })) },
            )
            .await?;
        let hit = !entry.is_fresh();
        let counter = if hit { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        Ok((entry.into_value().result.clone(), hit))
    }

    /// Drops every entry of one server (it restarted or its tools changed).
    pub fn invalidate_server(&self, server: usize) {
        let _ = self
            .cache
            .invalidate_entries_if(move |k, _| k.server == server);
    }

    pub fn clear(&self) {
        self.cache.invalidate_all();
    }

    /// Counters, after applying moka's pending bookkeeping so entries and bytes are current.
    pub async fn stats(&self) -> CacheStats {
        self.cache.run_pending_tasks().await;
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.cache.entry_count(),
            bytes: self.cache.weighted_size(),
        }
    }
}
