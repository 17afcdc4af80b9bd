//! Notifications from server-everything: simulated log messages filtered by the level, and
//! resource updates reaching only subscribers.

use super::{Peer, QUIET, block_text, compare, rank};
use crate::support::{LOG_LEVELS, Peers, Scratch, WAIT};
use serde_json::{Value, json};

/// server-everything's simulated log messages seen since `mark` (its other messages, about
/// roots and subscriptions, left out).
fn simulated(p: &Peer, mark: usize) -> Vec<Value> {
    p.since(mark, "notifications/message")
        .into_iter()
        .filter(|m| {
            m["data"]
                .as_str()
                .is_some_and(|d| d.contains("-level message") || d.contains("level-message"))
        })
        .collect()
}

/// Turns simulated logging on and off `times` times (each "on" sends one message of a random
/// level, if the level passes) and returns the simulated messages that arrived.
async fn toggle_logging(p: &mut Peer, times: usize) -> Vec<Value> {
    let mark = p.seen.len();
    for _ in 0..times {
        let on = p.call("toggle-simulated-logging", json!({})).await;
        assert!(block_text(&on, 0).starts_with("Started"), "{on}");
        let off = p.call("toggle-simulated-logging", json!({})).await;
        assert!(block_text(&off, 0).starts_with("Stopped"), "{off}");
    }
    p.settle(QUIET).await;
    simulated(p, mark)
}

async fn logging_scenario(p: &mut Peer) {
    let side = p.side;
    for level in LOG_LEVELS {
        let r = p.result("logging/setLevel", json!({"level": level})).await;
        p.record(format!("logging/setLevel {level}"), &r);
    }
    // An unknown level is refused on both sides (server-everything says -32603, the hub
    // -32602: not compared).
    let bad = p
        .request("logging/setLevel", json!({"level": "loud"}))
        .await;
    assert!(bad["error"]["code"].is_i64(), "{side:?}: {bad}");

    // debug: every message passes; the logger says where it came from.
    p.set_level("debug").await;
    let got = toggle_logging(p, 1).await;
    assert_eq!(got.len(), 1, "{side:?}: {got:?}");
    for m in &got {
        assert_eq!(
            m["logger"].as_str(),
            p.logger(None).as_deref(),
            "{side:?}: {m}"
        );
    }

    // error, then emergency: nothing below arrives. Each "on" passes "error" with
    // probability 1/2, so 16 of them miss only once in 65536 runs.
    for (level, times, must_arrive) in [("error", 16, true), ("emergency", 8, false)] {
        p.set_level(level).await;
        let got = toggle_logging(p, times).await;
        if must_arrive {
            assert!(
                !got.is_empty(),
                "{side:?}: nothing at {level} in {times} tries"
            );
        }
        for m in &got {
            let l = m["level"].as_str().unwrap();
            assert!(
                rank(l) >= rank(level),
                "{side:?}: {l} at level {level}: {m}"
            );
            assert_eq!(m["logger"].as_str(), p.logger(None).as_deref(), "{m}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_respect_the_level_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    compare(&peers, &Scratch::new(), logging_scenario).await;
}

// ---------------------------------------------------------------------------------------
// Subscriptions

/// Turns simulated updates on (one round of `resources/updated` for each subscribed URI at
/// once), waits until `want` arrived (or QUIET passed if `want` is empty), turns them off;
/// returns the updated URIs seen, sorted.
async fn updates_round(p: &mut Peer, want: &[&str]) -> Vec<String> {
    let mark = p.seen.len();
    let on = p.call("toggle-subscriber-updates", json!({})).await;
    assert!(block_text(&on, 0).starts_with("Started"), "{on}");
    let all_there = |seen: &[Value]| {
        want.iter().all(|u| {
            seen[mark..].iter().any(|m| {
                m["method"] == "notifications/resources/updated" && m["params"]["uri"] == *u
            })
        })
    };
    let ok = p.pump(WAIT, all_there).await;
    assert!(
        ok,
        "{:?}: no update for {want:?}: {:#?}",
        p.side,
        &p.seen[mark..]
    );
    p.settle(QUIET).await;
    let off = p.call("toggle-subscriber-updates", json!({})).await;
    assert!(block_text(&off, 0).starts_with("Stopped"), "{off}");
    let mut uris: Vec<String> = p
        .since(mark, "notifications/resources/updated")
        .iter()
        .map(|u| u["uri"].as_str().unwrap().to_string())
        .collect();
    uris.sort();
    uris
}

async fn subscriptions_scenario(p: &mut Peer) {
    let side = p.side;
    let features = "demo://resource/static/document/features.md";
    let text3 = "demo://resource/dynamic/text/3";
    let mark = p.seen.len();
    for uri in [features, text3] {
        let r = p.result("resources/subscribe", json!({"uri": uri})).await;
        p.record(format!("resources/subscribe {uri}"), &r);
    }
    // server-everything acknowledges each subscription with a log message.
    let ok = p
        .pump(WAIT, |seen| {
            seen[mark..]
                .iter()
                .filter(|m| {
                    m["params"]["data"]
                        .as_str()
                        .is_some_and(|d| d.starts_with("Received Subscribe"))
                })
                .count()
                == 2
        })
        .await;
    assert!(ok, "{side:?}: {:#?}", &p.seen[mark..]);
    let acks: Vec<Value> = p
        .since(mark, "notifications/message")
        .into_iter()
        .filter(|m| {
            m["data"]
                .as_str()
                .is_some_and(|d| d.starts_with("Received"))
        })
        .collect();
    for a in &acks {
        assert_eq!(a["logger"].as_str(), p.logger(None).as_deref(), "{a}");
    }
    p.record(
        "subscribe acknowledgements",
        &json!(acks.iter().map(|a| a["data"].clone()).collect::<Vec<_>>()),
    );

    let both = updates_round(p, &[features, text3]).await;
    assert_eq!(both, [text3, features], "{side:?}");
    p.record("updates while subscribed to both", &json!(both));

    let r = p
        .result("resources/unsubscribe", json!({"uri": features}))
        .await;
    p.record(format!("resources/unsubscribe {features}"), &r);
    let one = updates_round(p, &[text3]).await;
    assert_eq!(
        one,
        [text3],
        "{side:?}: unsubscribed {features} still updated"
    );
    p.record("updates after unsubscribing one", &json!(one));

    let r = p
        .result("resources/unsubscribe", json!({"uri": text3}))
        .await;
    p.record(format!("resources/unsubscribe {text3}"), &r);
    let none = updates_round(p, &[]).await;
    assert!(none.is_empty(), "{side:?}: {none:?}");
    p.record("updates after unsubscribing all", &json!(none));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_updates_reach_subscribers_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    compare(&peers, &Scratch::new(), subscriptions_scenario).await;
}
