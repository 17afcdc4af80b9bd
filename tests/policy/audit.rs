//! The audit log: a record per call with its decision, source, cache and outcome;
//! arguments when asked for; rotation; and `openpact audit tail`.

use super::{
    accept, audit_records, call_answering, fx_config, hash_ok, openpact_in, started, wait_audit,
};
use crate::support::{Scratch, WAIT, state_dir};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_records_every_call_and_the_cli_shows_them() {
    let sc = Scratch::new();
    let config = fx_config(
        &sc,
        json!({
            "permissions": {"default": "allow", "deny": ["fx:cwd"]},
            "rateLimits": {"default": "off", "tools": {"fx:args": {"perSecond": 0.2, "burst": 1}}},
            "cache": {"rules": {"fx:echo": "1m"}},
        }),
    );
    let state = state_dir(&config);
    let mut hub = started(&config, &[], json!({}), "audit-client").await;
    let c = &mut hub.client;
    c.call("fx:echo", json!({"message": "a"})).await;
    c.call("fx:echo", json!({"message": "a"})).await;
    c.call("fx:fail", json!({})).await;
    c.call("fx:error_with", json!({"message": "boom"})).await;
    c.call("fx:cwd", json!({})).await;
    c.call("fx:args", json!({})).await;
    c.call("fx:args", json!({})).await;
    c.call("fx:add", json!({"a": 1, "b": 2})).await;
    c.call("fx:add", json!({"b": 2.0, "a": 1})).await;
    c.request("prompts/get", json!({"name": "fx:plain"})).await;
    c.request("resources/read", json!({"uri": "fixture://static/1"}))
        .await;
    let records = wait_audit(&state, 11).await;
    assert_eq!(records.len(), 11, "{records:#?}");
    // (target, decision, source, cache, outcome)
    let want = [
        ("fx:echo", "allow", "default", "miss", "ok"),
        ("fx:echo", "allow", "default", "hit", "ok"),
        ("fx:fail", "allow", "default", "off", "isError"),
        ("fx:error_with", "allow", "default", "off", "error"),
        ("fx:cwd", "deny", "rule", "off", "denied"),
        ("fx:args", "allow", "default", "off", "ok"),
        ("fx:args", "allow", "default", "off", "rateLimited"),
        ("fx:add", "allow", "default", "off", "ok"),
        ("fx:add", "allow", "default", "off", "ok"),
        ("fx:plain", "allow", "default", "off", "ok"),
        ("fx:fixture://static/1", "allow", "default", "off", "ok"),
    ];
    for (r, (target, decision, source, cache, outcome)) in records.iter().zip(want) {
        let got = (
            r["target"].as_str().unwrap(),
            r["decision"].as_str().unwrap(),
            r["source"].as_str().unwrap(),
            r["cache"].as_str().unwrap(),
            r["outcome"].as_str().unwrap(),
        );
        assert_eq!(got, (target, decision, source, cache, outcome), "{r}");
        assert_eq!(r["client"], "audit-client", "{r}");
        let time = r["time"].as_str().unwrap();
        assert!(time.starts_with("20") && time.contains('T'), "{r}");
        assert!(r["durationMs"].as_f64().is_some_and(|d| d >= 0.0), "{r}");
        assert!(r["resultBytes"].as_u64().is_some_and(|b| b > 0), "{r}");
        assert!(hash_ok(&r["argumentsHash"]), "{r}");
        assert!(
            r.get("arguments").is_none(),
            "arguments are off by default: {r}"
        );
    }
    let methods: Vec<&str> = records
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods[0], "tools/call");
    assert_eq!(methods[9], "prompts/get");
    assert_eq!(methods[10], "resources/read");
    assert_eq!(records[0]["argumentsHash"], records[1]["argumentsHash"]);
    assert_eq!(
        records[7]["argumentsHash"], records[8]["argumentsHash"],
        "key order and 2 vs 2.0 hash alike"
    );
    assert_ne!(records[0]["argumentsHash"], records[7]["argumentsHash"]);
    assert!(
        records[4]["error"]
            .as_str()
            .is_some_and(|e| e.contains("openpact.permissions.deny")),
        "{}",
        records[4]
    );
    assert!(
        records[3]["error"]
            .as_str()
            .is_some_and(|e| e.contains("boom")),
        "{}",
        records[3]
    );

    // Private to the user.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(state.join("audit.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");

    // The CLI: readable lines, or the JSON records themselves.
    let ran = openpact_in(&state, &["audit", "tail"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let lines: Vec<&str> = ran.stdout.lines().filter(|l| l.starts_with("20")).collect();
    assert_eq!(lines.len(), 11, "{ran}");
    assert!(
        lines[0].contains("audit-client")
            && lines[0].contains("tools/call")
            && lines[0].contains("fx:echo")
            && lines[0].contains("allow (default)")
            && lines[0].contains("cache miss"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("cache hit"), "{}", lines[1]);
    assert!(
        lines[4].contains("deny (rule)") && lines[4].contains("denied"),
        "{}",
        lines[4]
    );
    assert!(lines[6].contains("rateLimited"), "{}", lines[6]);
    assert!(ran.stdout.contains("openpact.permissions.deny"), "{ran}");
    let ran = openpact_in(&state, &["audit", "tail", "--json"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let json: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json, records);
    let ran = openpact_in(&state, &["audit", "tail", "-n", "2", "--json"]).await;
    let json: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json, records[9..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_with_arguments_prompt_sources_and_rotation() {
    let sc = Scratch::new();
    let config = fx_config(
        &sc,
        json!({
            "permissions": {"default": "ask", "allow": ["fx:add"], "deny": ["fx:fail"]},
            "rateLimits": {"default": "off"},
            "audit": {"arguments": true, "maxBytes": "1KiB"},
        }),
    );
    let state = state_dir(&config);
    let mut hub = started(&config, &[], json!({"elicitation": {}}), "rotating").await;
    let c = &mut hub.client;
    // Prompted: allow (prompt), then remembered.
    call_answering(c, "fx:echo", json!({"message": "m"}), accept("always")).await;
    c.call("fx:echo", json!({"message": "m"})).await;
    call_answering(
        c,
        "fx:env",
        json!({"name": "HOME"}),
        json!({"action": "decline"}),
    )
    .await;
    let first = wait_audit(&state, 3).await;
    let got: Vec<(&str, &str, &str)> = first
        .iter()
        .map(|r| {
            (
                r["decision"].as_str().unwrap(),
                r["source"].as_str().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("allow", "prompt", "ok"),
            ("allow", "remembered", "ok"),
            ("deny", "prompt", "denied")
        ]
    );
    assert_eq!(first[0]["arguments"], json!({"message": "m"}));
    assert_eq!(first[2]["arguments"], json!({"name": "HOME"}));
    assert_eq!(first[0]["client"], "rotating");

    // Past 1 KiB the log rotates; `audit tail` reads both generations.
    for i in 0..40 {
        c.call("fx:add", json!({"a": i, "b": 1})).await;
        if i % 4 == 0 {
            // Let the writer take separate batches, so rotation happens between them.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    let deadline = Instant::now() + WAIT;
    loop {
        let current = audit_records(&state);
        if current.last().is_some_and(|r| r["arguments"]["a"] == 39) {
            break;
        }
        assert!(Instant::now() < deadline, "{current:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let old =
        std::fs::read_to_string(state.join("audit.jsonl.1")).expect("audit.jsonl.1 after rotation");
    let current = std::fs::read_to_string(state.join("audit.jsonl")).unwrap();
    assert!(
        current.len() < 4096,
        "the current file stays small: {}",
        current.len()
    );
    let (n_old, n_cur) = (old.lines().count(), current.lines().count());
    assert!(n_old > 0 && n_cur > 0);
    let ran = openpact_in(&state, &["audit", "tail", "-n", "1000", "--json"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let tail: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(tail.len(), n_old + n_cur, "{ran}");
    assert_eq!(tail.last().unwrap()["arguments"]["a"], 39);
    // In order across the two files.
    let a: Vec<i64> = tail
        .iter()
        .filter(|r| r["target"] == "fx:add")
        .map(|r| r["arguments"]["a"].as_i64().unwrap())
        .collect();
    assert!(a.windows(2).all(|w| w[1] == w[0] + 1), "{a:?}");
    use std::os::unix::fs::PermissionsExt;
    for f in ["audit.jsonl", "audit.jsonl.1"] {
        let mode = std::fs::metadata(state.join(f))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{f}: {mode:o}");
    }
}
