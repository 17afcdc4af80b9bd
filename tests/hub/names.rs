//! Tool names: portable names, namespaces that rename or drop the prefix, and two servers
//! with one namespace refused.

use super::{fixture_tools, portable_ok};
use crate::support::{
    FIXTURE, OPENPACT, Scratch, WAIT, fixture, names, ready, serve, text, wait_for_tools,
};
use serde_json::{Value, json};
use std::collections::HashSet;
use tokio::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portable_names_are_valid_distinct_and_callable() {
    let base = fixture_tools().await;
    let s = Scratch::new();
    let long = "a-server-whose-name-goes-on-and-on-far-beyond-what-model-apis-accept";
    let mut servers = serde_json::Map::new();
    servers.insert("a".into(), fixture(&[]));
    servers.insert("my.server".into(), fixture(&[]));
    servers.insert(long.into(), fixture(&[]));
    let cfg = s.servers(
        Value::Object(servers),
        Some(json!({"toolNames": "portable"})),
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    c.initialize().await;
    let all = |t: &[String]| t.len() >= 3 * base;
    let tools = names(&wait_for_tools(c, all, WAIT).await);
    assert_eq!(tools.len(), 3 * base, "{tools:?}");
    for n in &tools {
        assert!(
            portable_ok(n),
            "{n:?} does not match ^[A-Za-z0-9_-]{{1,64}}$"
        );
    }
    assert_eq!(
        tools.iter().collect::<HashSet<_>>().len(),
        tools.len(),
        "names collide: {tools:?}"
    );
    assert!(tools.contains(&"a__echo".to_string()), "{tools:?}");

    // Both spellings reach the same tool.
    assert_eq!(
        text(&c.call("a__echo", json!({"message": "portable"})).await),
        "portable"
    );
    assert_eq!(
        text(&c.call("a:echo", json!({"message": "qualified"})).await),
        "qualified"
    );

    // The dotted and the long server got hashed names; whatever they are, they work.
    // Tools keep the server's order, so each server's first name is its `echo`.
    let dotted = tools
        .iter()
        .find(|n| n.starts_with("my_server__"))
        .unwrap_or_else(|| panic!("no name for the dotted server: {tools:?}"));
    assert!(dotted.starts_with("my_server__echo_"), "{dotted}");
    assert_eq!(
        text(&c.call(dotted, json!({"message": "dotted"})).await),
        "dotted"
    );
    assert_eq!(
        text(
            &c.call("my.server:echo", json!({"message": "dotted q"}))
                .await
        ),
        "dotted q"
    );
    let long_echo = tools
        .iter()
        .find(|n| n.starts_with("a-server-whose-name"))
        .unwrap_or_else(|| panic!("no name for the long server: {tools:?}"));
    assert_eq!(long_echo.len(), 64, "{long_echo}");
    assert_eq!(
        text(&c.call(long_echo, json!({"message": "long"})).await),
        "long"
    );
    assert_eq!(
        text(
            &c.call(&format!("{long}:echo"), json!({"message": "long q"}))
                .await
        ),
        "long q"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_rename_or_drop_the_prefix() {
    let s = Scratch::new();
    let x = json!({"command": FIXTURE, "namespace": "x"});
    let bare = json!({"command": FIXTURE, "args": ["--tools", "1"], "namespace": ""});
    let cfg = s.servers(json!({"server-x": x, "plain": bare}), None);
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["x:echo", "echo"]).await;
    let tools = names(&c.list_tools().await);
    assert!(tools.contains(&"x:echo".to_string()), "{tools:?}");
    assert!(
        tools.contains(&"echo".to_string()) && tools.contains(&"tool_0000".to_string()),
        "{tools:?}"
    );
    assert!(
        !tools
            .iter()
            .any(|n| n.starts_with("server-x:") || n.starts_with("plain:")),
        "{tools:?}"
    );
    assert_eq!(
        text(&c.call("x:echo", json!({"message": "ns"})).await),
        "ns"
    );
    assert_eq!(
        text(&c.call("echo", json!({"message": "bare"})).await),
        "bare"
    );
    assert_eq!(
        text(&c.call("tool_0000", json!({"x": "y"})).await),
        "tool_0000:y"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_rejects_two_servers_with_one_namespace() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({
            "first": {"command": FIXTURE, "namespace": "same"},
            "second": {"command": FIXTURE, "namespace": "same"},
            "other": {"command": FIXTURE}
        }),
        None,
    );
    let out = tokio::time::timeout(
        WAIT,
        Command::new(OPENPACT)
            .arg("--config")
            .arg(&cfg)
            .args(["config", "check"])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("\"first\"") && stderr.contains("\"second\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("mcpServers.second") && stderr.contains("\"same\""),
        "{stderr}"
    );
    assert!(!stderr.contains("\"other\""), "{stderr}");

    // The same holds for two servers with no prefix at all.
    let cfg = s.servers(
        json!({"p": {"command": FIXTURE, "namespace": ""}, "q": {"command": FIXTURE, "namespace": ""}}),
        None,
    );
    let out = Command::new(OPENPACT)
        .arg("--config")
        .arg(&cfg)
        .args(["config", "check"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("\"p\"") && stderr.contains("\"q\""),
        "{stderr}"
    );
}
