//! The result cache: identical calls shared, cancellation, invalidation, keys and counts.

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
    std::future::poll_fn(|cx| Poll::Ready(f.take().is_some_and(|f| f.poll(cx).is_ready()))).await
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
