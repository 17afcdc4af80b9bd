//! The `permissions` commands, with decisions written by forty processes at once, and
//! config warnings about rules that can never match.

use super::{asking, decisions, fx_config, hash_ok, openpact, openpact_in, openpact_on, started};
use crate::support::{Scratch, WAIT, fixture, is_error, s, state_dir, text};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_processes_remember_decisions_at_once() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&["--tools", "40"])}),
        Some(asking(json!({"default": "ask"}))),
    );
    let state = state_dir(&config);
    let mut set = tokio::task::JoinSet::new();
    for i in 0..40 {
        let config = config.clone();
        set.spawn(async move {
            let name = format!("fx:tool_{i:04}");
            let ran = openpact_on(&config, &["permissions", "allow", &name]).await;
            (name, ran)
        });
    }
    while let Some(done) = set.join_next().await {
        let (name, ran) = done.unwrap();
        assert_eq!(ran.code, Some(0), "{name}: {ran}");
        assert!(ran.stdout.contains(&name), "{name}: {ran}");
    }
    let ran = openpact_in(&state, &["permissions", "list", "--json"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let listed: Value = serde_json::from_str(&ran.stdout).expect("list --json parses");
    let listed = listed.as_object().unwrap();
    assert_eq!(listed.len(), 40, "{listed:#?}");
    for i in 0..40 {
        let r = &listed[&format!("fx:tool_{i:04}")];
        assert_eq!(r["decision"], "allow", "{r}");
        assert!(hash_ok(&r["definition"]), "{r}");
    }
    let file: Value =
        serde_json::from_slice(&std::fs::read(state.join("permissions.json")).unwrap()).unwrap();
    assert_eq!(file["decisions"].as_object().unwrap().len(), 40);
    let leftovers: Vec<String> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // forget, then deny, round trip.
    let ran = openpact_on(&config, &["permissions", "forget", "fx:tool_0000"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(ran.stdout.contains("forgot"), "{ran}");
    let ran = openpact_on(&config, &["permissions", "forget", "fx:tool_0000"]).await;
    assert!(ran.stdout.contains("no remembered decision"), "{ran}");
    let ran = openpact_on(&config, &["permissions", "deny", "fx:tool_0001"]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stdout.contains("fx:tool_0001 is now always denied"),
        "{ran}"
    );
    let ran = openpact_on(&config, &["permissions", "allow", "fx:no_such_tool"]).await;
    assert_ne!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stderr
            .contains("no tool, prompt or resource is named fx:no_such_tool"),
        "{ran}"
    );
    let ran = openpact_on(&config, &["permissions", "list"]).await;
    assert!(!ran.stdout.contains("fx:tool_0000 "), "{ran}");
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("fx:tool_0001") && l.contains("deny")),
        "{ran}"
    );
    let d = decisions(&state);
    assert_eq!(d.as_object().unwrap().len(), 39);
    assert_eq!(d["fx:tool_0001"]["decision"], "deny");

    // A hub honours them: remembered allow, remembered deny, forgotten (asks → no channel).
    let mut hub = started(&config, &[], json!({}), "policy-test").await;
    let c = &mut hub.client;
    assert_eq!(
        text(&c.call("fx:tool_0002", json!({"x": "y"})).await),
        "tool_0002:y"
    );
    let r = c.call("fx:tool_0001", json!({"x": "y"})).await;
    assert!(
        is_error(&r) && text(&r).contains("openpact permissions forget fx:tool_0001"),
        "{r}"
    );
    let r = c.call("fx:tool_0000", json!({"x": "y"})).await;
    assert!(is_error(&r) && text(&r).contains("no way to ask"), "{r}");
}

/// The command a denial advises, as the words after `openpact`.
fn advised(message: &str) -> Vec<String> {
    let start = message
        .find("`openpact permissions allow ")
        .unwrap_or_else(|| panic!("no `openpact permissions allow` advised: {message}"));
    let rest = &message[start + "`openpact ".len()..];
    let end = rest.find('`').unwrap();
    rest[..end].split(' ').map(String::from).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_resource_read_is_allowed_by_the_command_its_denial_advises() {
    let sc = Scratch::new();
    let config = fx_config(&sc, asking(json!({"default": "ask"})));
    // A listed resource and one of a template.
    for (uri, content) in [
        ("fixture://static/3", "content of fixture://static/3"),
        ("fixture://item/7", "content of fixture://item/7"),
    ] {
        let ran = openpact_on(&config, &["read", uri]).await;
        assert_eq!(ran.code, Some(1), "{ran}");
        let words = advised(&ran.stderr);
        assert_eq!(
            words,
            ["permissions", "allow", &format!("fx:{uri}")],
            "{ran}"
        );
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let ran = openpact_on(&config, &words).await;
        assert_eq!(ran.code, Some(0), "the advice fails: {ran}");
        assert!(ran.stdout.contains("is now always allowed"), "{ran}");
        let ran = openpact_on(&config, &["read", uri]).await;
        assert_eq!(ran.code, Some(0), "the advice was followed: {ran}");
        assert!(ran.stdout.contains(content), "{ran}");
    }
    let ran = openpact_on(&config, &["permissions", "list"]).await;
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("fx:fixture://item/7") && l.contains("a resource")),
        "{ran}"
    );
    // A URI under a name that is not its server's is no resource.
    let ran = openpact_on(
        &config,
        &["permissions", "deny", "nosuch:fixture://static/3"],
    )
    .await;
    assert_ne!(ran.code, Some(0), "{ran}");
    assert!(
        ran.stderr
            .contains("no tool, prompt or resource is named nosuch:fixture://static/3"),
        "{ran}"
    );
}

// ---------------------------------------------------------------------------------------
// Config warnings about rules that can never match

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_naming_unknown_servers_or_tools_are_warned_about() {
    let sc = Scratch::new();
    let config = fx_config(
        &sc,
        json!({
            "permissions": {"default": "allow", "allow": ["nosuch:echo"], "deny": ["fx:no_such_tool"]},
            "rateLimits": {"default": "off", "servers": {"phantom": {"perSecond": 1}}},
            "cache": {"rules": {"ghost:*": "1m", "fx:echo": "1m"}},
        }),
    );
    let ran = openpact(&["--config", s(&config), "config", "check"]).await;
    assert_eq!(ran.code, Some(0), "warnings are not errors: {ran}");
    for needle in [
        "openpact.permissions.allow",
        "\"nosuch:echo\" names server \"nosuch\", which is not configured",
        "\"ghost:*\" names server \"ghost\"",
        "\"phantom\" is not a configured server",
    ] {
        assert!(ran.stderr.contains(needle), "{needle}: {ran}");
    }
    assert!(
        !ran.stderr.contains("fx:echo\" names"),
        "a rule for a configured server is fine: {ran}"
    );
    let ran = openpact(&["--config", s(&config), "config", "check", "--json"]).await;
    let v: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("nosuch")),
        "{ran}"
    );
    // `serve` logs them at startup, and, once the server listed its tools, the rule naming a
    // tool it does not have.
    let hub = started(&config, &[], json!({}), "policy-test").await;
    hub.wait_log("which is not configured", WAIT).await;
    hub.wait_log(
        "\"fx:no_such_tool\" names no tool or prompt of server \"fx\"",
        WAIT,
    )
    .await;
    assert!(
        !hub.stderr().contains("\"fx:echo\" names no tool"),
        "{}",
        hub.stderr()
    );
}
