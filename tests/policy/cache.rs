//! The result cache: hits, misses, expiry, what is never stored, invalidation on list
//! changes and restarts, denials never served from it, and `cache stats` / `cache clear`
//! against a running hub.

use super::{asking, hub, openpact_on, send_call, started, wait_audit_where, with};
use crate::support::{Hub, Scratch, WAIT, is_error, state_dir, text, wait_for_tool};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_hits_misses_expiry_and_what_is_never_stored() {
    let sc = Scratch::new();
    let (mut hub, config) = hub(
        &sc,
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": "off"},
               // First match wins: `calls` (the probe) and `add` are never cached.
               "cache": {"rules": {"fx:calls": "off", "fx:add": "off", "fx:echo": "2s",
                                   "fx:*": "1m"}}}),
    )
    .await;
    let c = &mut hub.client;
    let t0 = Instant::now();

    // Two identical calls: one reaches the server.
    let (n, (a, b)) = upstream_calls!(
        c,
        (
            c.call("fx:echo", json!({"message": "m"})).await,
            c.call("fx:echo", json!({"message": "m"})).await
        )
    );
    assert_eq!(
        n, 1,
        "identical calls within the TTL share one upstream call"
    );
    assert_eq!((text(&a), text(&b)), ("m".into(), "m".into()));
    assert_eq!(a["result"], b["result"]);
    // Other arguments: another entry.
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "other"})).await);
    assert_eq!((n, text(&r)), (1, "other".into()));

    // Key order and 1 vs 1.0 do not matter.
    let (n, (x, y)) = upstream_calls!(
        c,
        (
            c.call(
                "fx:echo_structured",
                json!({"value": {"a": 1, "b": [2.0, {"d": 1, "c": "s"}]}})
            )
            .await,
            c.call(
                "fx:echo_structured",
                json!({"value": {"b": [2, {"c": "s", "d": 1.0}], "a": 1.0}})
            )
            .await
        )
    );
    assert_eq!(n, 1, "canonical arguments share an entry: {x}\n{y}");
    assert_eq!(x["result"], y["result"]);
    // A string "1" is not the number 1.
    let (n, _) = upstream_calls!(
        c,
        c.call("fx:echo_structured", json!({"value": {"a": "1"}}))
            .await
    );
    let (n2, _) = upstream_calls!(
        c,
        c.call("fx:echo_structured", json!({"value": {"a": 1}}))
            .await
    );
    assert_eq!((n, n2), (1, 1));

    // isError results and JSON-RPC errors are never stored.
    let (n, rs) = upstream_calls!(c, {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(c.call("fx:fail", json!({})).await);
        }
        v
    });
    assert_eq!(n, 3, "isError results are not cached");
    assert!(rs.iter().all(is_error), "{rs:?}");
    let (n, rs) = upstream_calls!(c, {
        let mut v = Vec::new();
        for _ in 0..2 {
            v.push(c.call("fx:error_with", json!({"message": "nope"})).await);
        }
        v
    });
    assert_eq!(n, 2, "errors are not cached");
    assert!(rs.iter().all(|r| r["error"]["message"] == "nope"), "{rs:?}");
    // "off" beats the default.
    let (n, _) = upstream_calls!(c, {
        c.call("fx:add", json!({"a": 1, "b": 1})).await;
        c.call("fx:add", json!({"a": 1, "b": 1})).await
    });
    assert_eq!(n, 2, "a rule of \"off\" is never cached");

    // 20 concurrent identical calls: one upstream call, every caller its own answer.
    let (n, rs) = upstream_calls!(c, {
        let mut ids = Vec::new();
        for _ in 0..20 {
            ids.push(send_call(c, "fx:slow", json!({"ms": 300})).await);
        }
        let mut rs = Vec::new();
        for id in &ids {
            rs.push(c.response(id).await);
        }
        rs
    });
    assert_eq!(n, 1, "concurrent identical calls share one upstream call");
    assert!(rs.iter().all(|r| text(r) == "slept 300 ms"), "{rs:?}");

    // Expiry: the echo entry lived 2 s.
    let since = t0.elapsed();
    if since < Duration::from_millis(2600) {
        tokio::time::sleep(Duration::from_millis(2600) - since).await;
    }
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!((n, text(&r)), (1, "m".into()), "an expired entry is a miss");

    // The audit log says hit or miss.
    let echo: Vec<Value> = wait_audit_where(&state_dir(&config), 4, |r| r["target"] == "fx:echo")
        .await
        .iter()
        .map(|r| r["cache"].clone())
        .collect();
    assert_eq!(
        echo,
        ["miss", "hit", "miss", "miss"],
        "fx:echo cache column"
    );
    let fail = wait_audit_where(&state_dir(&config), 3, |r| r["target"] == "fx:fail").await;
    assert!(
        fail.iter()
            .all(|r| r["cache"] == "miss" && r["outcome"] == "isError"),
        "{fail:?}"
    );
    let add = wait_audit_where(&state_dir(&config), 2, |r| r["target"] == "fx:add").await;
    assert!(add.iter().all(|r| r["cache"] == "off"), "{add:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_is_dropped_when_tools_change_or_the_server_restarts() {
    let sc = Scratch::new();
    let (mut hub, _) = hub(
        &sc,
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": "off"},
               "cache": {"rules": {"fx:echo": "1m"}},
               "restart": {"initialBackoff": "100ms"}}),
    )
    .await;
    let c = &mut hub.client;
    let (n, _) = upstream_calls!(c, {
        c.call("fx:echo", json!({"message": "m"})).await;
        c.call("fx:echo", json!({"message": "m"})).await
    });
    assert_eq!(n, 1);

    // list_changed: the server's entries go.
    assert_eq!(text(&c.call("fx:change_tools", json!({})).await), "changed");
    wait_for_tool(c, "fx:late_tool", WAIT).await;
    let (n, _) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(
        n, 1,
        "a changed tool list invalidates the server's cached results"
    );
    let (n, _) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(n, 0, "and the next result is cached again");

    // A crash and restart: the entries go too (the new process has counted nothing).
    let r = c.call("fx:crash", json!({})).await;
    assert!(r.get("error").is_some(), "{r}");
    let deadline = Instant::now() + WAIT;
    loop {
        let r = c.call("fx:calls", json!({})).await;
        if r["result"]["content"][0]["text"].is_string() {
            break;
        }
        assert!(Instant::now() < deadline, "the server never came back: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(
        (n, text(&r)),
        (1, "m".into()),
        "a restart invalidates the server's cached results"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool_is_never_served_from_the_cache() {
    let sc = Scratch::new();
    let (mut hub, config) = hub(
        &sc,
        with(
            asking(json!({"default": "ask", "allow": ["fx:calls"], "deny": ["fx:add"]})),
            "cache",
            json!({"rules": {"fx:echo": "1m", "fx:add": "1m"}}),
        ),
    )
    .await;
    let state = state_dir(&config);
    let ran = openpact_on(&config, &["permissions", "allow", "fx:echo"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stdout.contains("fx:echo is now always allowed"),
        "{ran}"
    );
    let c = &mut hub.client;
    // The running hub sees the decision the CLI wrote.
    let (n, (a, b)) = upstream_calls!(
        c,
        (
            c.call("fx:echo", json!({"message": "m"})).await,
            c.call("fx:echo", json!({"message": "m"})).await
        )
    );
    assert_eq!((n, text(&a), text(&b)), (1, "m".into(), "m".into()));
    // Now denied: the cached result must not come back.
    let ran = openpact_on(&config, &["permissions", "deny", "fx:echo"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(n, 0);
    assert!(
        is_error(&r),
        "served from the cache despite the denial: {r}"
    );
    assert!(text(&r).contains("you chose to deny it"), "{r}");
    // A deny rule with a cache rule: denied every time, never called.
    let (n, r) = upstream_calls!(c, c.call("fx:add", json!({"a": 1, "b": 1})).await);
    assert_eq!(n, 0);
    assert!(is_error(&r), "{r}");
    let rec = wait_audit_where(&state, 1, |r| {
        r["target"] == "fx:echo" && r["outcome"] == "denied"
    })
    .await;
    assert_eq!(rec[0]["source"], "remembered", "{rec:?}");
    assert_ne!(rec[0]["cache"], "hit", "{rec:?}");
}

// ---------------------------------------------------------------------------------------
// cache stats / clear against a running serve

/// A hub caching `fx:echo` for 10 minutes; its config and pid.
async fn caching_echo(sc: &Scratch) -> (Hub, PathBuf, u32) {
    let (hub, config) = hub(sc, caching_settings()).await;
    let pid = hub.child.id().unwrap();
    (hub, config, pid)
}

fn caching_settings() -> Value {
    json!({"permissions": {"default": "allow"},
           "rateLimits": {"default": "off"},
           "cache": {"rules": {"fx:echo": "10m"}}})
}

/// `cache stats --json` of `config`: pid → counters.
async fn stats_of(config: &Path) -> BTreeMap<u64, Value> {
    let ran = openpact_on(config, &["cache", "stats", "--json"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let v: Value = serde_json::from_str(&ran.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|h| (h["pid"].as_u64().unwrap(), h["cache"].clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_stats_and_clear_reach_the_running_hub() {
    let sc = Scratch::new();
    let (mut hub, config, pid) = caching_echo(&sc).await;
    let c = &mut hub.client;
    let (n, _) = upstream_calls!(c, {
        c.call("fx:echo", json!({"message": "m"})).await;
        c.call("fx:echo", json!({"message": "m"})).await
    });
    assert_eq!(n, 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    let stats = loop {
        let ran = openpact_on(&config, &["cache", "stats", "--json"]).await;
        assert_eq!(ran.code, Some(0), "{ran}");
        let v: Value = serde_json::from_str(&ran.stdout).unwrap();
        let mine = v
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["pid"] == pid)
            .cloned();
        if let Some(h) = mine.filter(|h| h["cache"]["hits"].as_u64() >= Some(1)) {
            break h;
        }
        assert!(Instant::now() < deadline, "no hit reported: {ran}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(stats["cache"]["hits"], 1, "{stats}");
    assert_eq!(stats["cache"]["misses"], 1, "{stats}");
    let ran = openpact_on(&config, &["cache", "stats"]).await;
    assert!(
        ran.stdout.contains(&format!("pid {pid}")) && ran.stdout.contains("1 hits"),
        "{ran}"
    );

    let ran = openpact_on(&config, &["cache", "clear"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(ran.stdout.contains("asked 1 running"), "{ran}");
    hub.wait_log("result cache cleared", WAIT).await;
    let c = &mut hub.client;
    let (n, r) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!((n, text(&r)), (1, "m".into()), "cleared: a miss");
    let (n, _) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(n, 0, "and cached again");

    // With no hub running there is nothing to clear.
    hub.close().await;
    let ran = openpact_on(&config, &["cache", "clear"]).await;
    assert!(ran.stdout.contains("no openpact serve is running"), "{ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_stats_count_entries_and_bytes() {
    let sc = Scratch::new();
    let (mut hub, config, pid) = caching_echo(&sc).await;
    hub.client.call("fx:echo", json!({"message": "m"})).await;
    hub.client.call("fx:echo", json!({"message": "m"})).await;
    // The status file is rewritten at least every 5 s; give it two rounds.
    let deadline = Instant::now() + Duration::from_secs(12);
    loop {
        let ran = openpact_on(&config, &["cache", "stats", "--json"]).await;
        let v: Value = serde_json::from_str(&ran.stdout).unwrap();
        let c = v
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["pid"] == pid)
            .map(|h| h["cache"].clone())
            .unwrap_or_default();
        if c["hits"] == 1 && c["entries"] == 1 && c["bytes"].as_u64() > Some(0) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "one cached entry, reported as {c}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_stats_and_clear_keep_to_the_given_config() {
    let sc = Scratch::new();
    let (mut a, config_a, pid_a) = caching_echo(&sc).await;
    // A second config beside the first: the same state dir, so one command sees both hubs.
    let config_b = sc.raw_config(
        "other.json",
        &serde_json::from_slice::<Value>(&std::fs::read(&config_a).unwrap()).unwrap(),
    );
    assert_eq!(state_dir(&config_a), state_dir(&config_b));
    let b = started(&config_b, &[], json!({}), "policy-test").await;
    let pid_b = b.child.id().unwrap();
    a.client.call("fx:echo", json!({"message": "m"})).await;
    a.client.call("fx:echo", json!({"message": "m"})).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = stats_of(&config_a).await;
        assert_eq!(
            stats.keys().collect::<Vec<_>>(),
            [&u64::from(pid_a)],
            "{stats:?}"
        );
        if stats[&u64::from(pid_a)]["hits"] == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "no hit reported: {stats:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let stats = stats_of(&config_b).await;
    assert_eq!(
        stats.keys().collect::<Vec<_>>(),
        [&u64::from(pid_b)],
        "{stats:?}"
    );
    assert_eq!(stats[&u64::from(pid_b)]["hits"], 0, "{stats:?}");

    // Clearing b's cache leaves a's alone.
    let ran = openpact_on(&config_b, &["cache", "clear"]).await;
    assert!(ran.stdout.contains("asked 1 running"), "{ran}");
    b.wait_log("result cache cleared", WAIT).await;
    let c = &mut a.client;
    let (n, _) = upstream_calls!(c, c.call("fx:echo", json!({"message": "m"})).await);
    assert_eq!(n, 0, "a's cache was cleared too");
    assert!(
        !a.stderr().contains("result cache cleared"),
        "{}",
        a.stderr()
    );
}

/// The status file `cache stats` reads is rewritten when the counters change, at most every
/// 100 ms — not only when a server changes or every 5 s, as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_stats_right_after_calls_count_them() {
    let sc = Scratch::new();
    let (mut hub, config, pid) = caching_echo(&sc).await;
    // Past the start, when a burst of changes rewrites the status file anyway.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for round in 1..=3u64 {
        hub.client.call("fx:echo", json!({"message": "m"})).await;
        hub.client.call("fx:echo", json!({"message": "m"})).await;
        let want = (json!(2 * round - 1), json!(1), json!(1));
        let deadline = Instant::now() + Duration::from_millis(500);
        loop {
            let stats = stats_of(&config).await;
            let c = &stats[&u64::from(pid)];
            let got = (c["hits"].clone(), c["misses"].clone(), c["entries"].clone());
            if got == want && c["bytes"].as_u64() > Some(0) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: (hits, misses, entries) {got:?}, not {want:?}, 500 ms after the calls: {c}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
