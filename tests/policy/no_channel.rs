//! Permissions with no prompt channel: `ask` denies and says how to allow, rules and
//! defaults decide, and denied prompts and resources are JSON-RPC errors -32003.

use super::{asking, hub, wait_audit};
use crate::support::{Scratch, is_error, s, state_dir, text};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_prompt_channel_ask_denies_with_how_to_allow() {
    let sc = Scratch::new();
    let (mut hub, config) = hub(&sc, asking(json!({"default": "ask"}))).await;
    // No controlling terminal (field 7 of /proc/PID/stat): the non-interactive path.
    assert_eq!(controlling_tty(hub.child.id().unwrap()), 0);
    let r = hub.client.call("fx:echo", json!({"message": "hi"})).await;
    assert!(is_error(&r), "{r}");
    assert!(
        r.get("error").is_none(),
        "a denied tool is a result, not an error: {r}"
    );
    let t = text(&r);
    assert!(t.contains("openpact permissions allow fx:echo"), "{t}");
    assert!(t.contains("openpact.permissions.allow"), "{t}");
    assert!(t.contains("\"fx:*\""), "{t}");
    assert!(t.contains(s(&config)), "names the config file: {t}");
    assert!(t.contains("no way to ask"), "{t}");
    let audit = wait_audit(&state_dir(&config), 1).await;
    assert_eq!(
        (
            &audit[0]["decision"],
            &audit[0]["source"],
            &audit[0]["outcome"]
        ),
        (&json!("deny"), &json!("non-interactive"), &json!("denied")),
        "{audit:?}"
    );
}

/// The controlling terminal of a process (0: none).
fn controlling_tty(pid: u32) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    fields[4].parse().unwrap()
}

/// A config with `default: ask` whose `fx:calls` is allowed, for counting upstream calls.
fn ask_settings(extra: Value) -> Value {
    let mut v = asking(json!({"default": "ask", "allow": ["fx:calls"]}));
    merge(&mut v, extra);
    let allow = v["permissions"]["allow"].as_array_mut().unwrap();
    if !allow.contains(&json!("fx:calls")) {
        allow.push(json!("fx:calls"));
    }
    v
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                match b.get_mut(&k) {
                    Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, e) => *b = e,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_prompt_channel_rules_and_defaults_decide() {
    // (settings, tool, allowed?, text the denial must contain)
    let cases: Vec<(Value, &str, bool, &str)> = vec![
        (
            json!({"permissions": {"default": "ask", "allow": ["fx:calls"]}}),
            "fx:echo",
            false,
            "openpact permissions allow fx:echo",
        ),
        (
            json!({"permissions": {"nonInteractive": "allow"}}),
            "fx:echo",
            true,
            "",
        ),
        (
            json!({"permissions": {"allow": ["fx:echo"]}}),
            "fx:echo",
            true,
            "",
        ),
        (
            json!({"permissions": {"allow": ["fx:echo"], "deny": ["fx:*"]}}),
            "fx:echo",
            false,
            "openpact.permissions.deny",
        ),
        (
            json!({"permissions": {"default": "allow", "allow": ["fx:*"], "ask": ["fx:echo"]}}),
            "fx:echo",
            false,
            "no way to ask",
        ),
        (
            json!({"permissions": {"default": "deny"}}),
            "fx:echo",
            false,
            "openpact permissions allow fx:echo",
        ),
        (
            json!({"permissions": {"default": "deny", "nonInteractive": "allow"}}),
            "fx:echo",
            false,
            "openpact.permissions.default is \"deny\"",
        ),
        (
            json!({"permissions": {"default": "allow"}}),
            "fx:echo",
            true,
            "",
        ),
    ];
    for (settings, tool, allowed, needle) in cases {
        let sc = Scratch::new();
        let (mut hub, _) = hub(&sc, ask_settings(settings.clone())).await;
        // `fx:*` denies the `calls` probe too: count only where it is allowed.
        let countable = settings["permissions"]["deny"] != json!(["fx:*"]);
        let (upstream, r) = if countable {
            upstream_calls!(
                &mut hub.client,
                hub.client.call(tool, json!({"message": "m"})).await
            )
        } else {
            (0, hub.client.call(tool, json!({"message": "m"})).await)
        };
        if allowed {
            assert!(!is_error(&r), "{settings}: {r}");
            assert_eq!(text(&r), "m", "{settings}");
            assert_eq!(upstream, u64::from(countable), "{settings}");
        } else {
            assert!(is_error(&r), "{settings}: {r}");
            let t = text(&r);
            assert!(t.contains(needle), "{settings}: {t}");
            assert!(t.contains(tool), "{settings}: {t}");
            assert_eq!(
                upstream, 0,
                "{settings}: a denied call never reaches the server"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_prompts_and_resources_are_errors_32003() {
    let sc = Scratch::new();
    let (mut hub, _) = hub(
        &sc,
        asking(json!({"default": "ask", "allow": ["fx:plain", "fx:fixture://static/2", "fx:fixture://static/1"], "deny": ["fx:fixture://static/1"]})),
    )
    .await;
    let c = &mut hub.client;
    // A prompt no rule covers: default ask, no channel → -32003.
    let r = c
        .request(
            "prompts/get",
            json!({"name": "fx:greet", "arguments": {"name": "x"}}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let m = r["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("fx:greet") && m.contains("openpact permissions allow fx:greet"),
        "{m}"
    );
    // An allowed prompt goes through.
    let r = c.request("prompts/get", json!({"name": "fx:plain"})).await;
    assert!(r["result"]["messages"].is_array(), "{r}");
    // A resource denied by rule (deny beats allow), as server:<uri>.
    let r = c
        .request("resources/read", json!({"uri": "fixture://static/1"}))
        .await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let m = r["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("fx:fixture://static/1") && m.contains("openpact.permissions.deny"),
        "{m}"
    );
    let r = c
        .request("resources/read", json!({"uri": "fixture://static/2"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["text"], "content of fixture://static/2",
        "{r}"
    );
    // No rule, default ask, no channel.
    let r = c
        .request("resources/read", json!({"uri": "fixture://static/3"}))
        .await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
}
