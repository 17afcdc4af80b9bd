//! Startup and catalogue changes: a slow server joins later, `listWait`, upstream
//! `list_changed` and pings, and hubs with no servers.

use super::{fixture_tools, spawn_openpact};
use crate::support::{
    Client, Scratch, WAIT, fixture, names, ready, serve, serve_config, serve_ready, text,
    wait_for_tool,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// `initialize`, which the hub must answer within a second whatever its servers are doing;
/// the result.
async fn initialize_at_once(c: &mut Client) -> Value {
    let t0 = Instant::now();
    let init = c.initialize().await;
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "initialize took {:?}",
        t0.elapsed()
    );
    init
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_server_does_not_hold_up_initialize_and_joins_later() {
    let base = fixture_tools().await;
    let mut hub = serve_config(
        json!({"slow": fixture(&["--init-delay-ms", "2500"]), "fast": fixture(&[])}),
        Some(json!({"listWait": "200ms"})),
    )
    .await;
    let started = Instant::now();
    let c = &mut hub.client;
    let init = initialize_at_once(c).await;
    assert_eq!(init["serverInfo"]["name"], "openpact");

    let t0 = Instant::now();
    let mut tools = names(&c.list_tools().await);
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "tools/list waited {:?} with listWait 200ms",
        t0.elapsed()
    );
    assert!(
        !tools.iter().any(|n| n.starts_with("slow:")),
        "slow server listed before it is ready: {tools:?}"
    );
    // The fast server is normally in that first list; on a very busy machine it may come a
    // moment later, announced like any change.
    while !tools.contains(&"fast:echo".to_string()) {
        assert!(
            c.wait_for("notifications/tools/list_changed", WAIT)
                .await
                .is_some(),
            "fast server never listed"
        );
        tools = names(&c.list_tools().await);
    }
    if started.elapsed() < Duration::from_secs(2) {
        assert!(!tools.iter().any(|n| n.starts_with("slow:")), "{tools:?}");
    }

    let tools = names(&wait_for_tool(c, "slow:echo", Duration::from_secs(15)).await);
    assert!(
        started.elapsed() >= Duration::from_millis(2400),
        "the slow server was ready too early?"
    );
    assert!(tools.contains(&"fast:echo".to_string()), "{tools:?}");
    assert_eq!(tools.len(), 2 * base, "{tools:?}");
    assert_eq!(
        text(&c.call("slow:echo", json!({"message": "late"})).await),
        "late"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_list_wait_includes_a_server_that_takes_a_moment() {
    let mut hub = serve_config(
        json!({"slow": fixture(&["--init-delay-ms", "2500"]), "fast": fixture(&[])}),
        None,
    )
    .await;
    let started = Instant::now();
    let c = &mut hub.client;
    let t0 = Instant::now();
    c.initialize().await;
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "initialize took {:?}",
        t0.elapsed()
    );
    // A call to the server still starting waits for it, like the list does.
    let early = json!("early");
    c.send(
        &json!({"jsonrpc": "2.0", "id": early, "method": "tools/call",
        "params": {"name": "slow:echo", "arguments": {"message": "waited"}}}),
    )
    .await;
    let tools = names(&c.list_tools().await);
    assert!(
        tools.contains(&"slow:echo".to_string()) && tools.contains(&"fast:echo".to_string()),
        "{tools:?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(2400),
        "listed before the slow server was ready"
    );
    assert_eq!(text(&c.response(&early).await), "waited");
    assert!(
        started.elapsed() < Duration::from_secs(5) + Duration::from_millis(1500),
        "waited {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_list_changed_reaches_the_client() {
    let mut hub = serve_ready(
        json!({"a": fixture(&["--list-changed-after-ms", "300"]), "b": fixture(&[])}),
        None,
        &["b:echo"],
    )
    .await;
    let c = &mut hub.client;
    // The notification is the only way the client learns of it: wait_for_tool relists only
    // after one arrives.
    let tools = names(&wait_for_tool(c, "a:late_tool", Duration::from_secs(10)).await);
    assert!(!tools.contains(&"b:late_tool".to_string()), "{tools:?}");
    let r = c.call("a:late_tool", json!({})).await;
    assert_eq!(text(&r), "late");

    // A change made by a tool call works the same way.
    assert_eq!(text(&c.call("b:change_tools", json!({})).await), "changed");
    assert!(
        c.wait_for("notifications/tools/list_changed", Duration::from_secs(5))
            .await
            .is_some(),
        "no list_changed"
    );
    wait_for_tool(c, "b:late_tool", Duration::from_secs(5)).await;
    assert_eq!(text(&c.call("b:late_tool", json!({})).await), "late");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_answers_the_upstreams_ping() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"a": fixture(&["--ping-client"])}), None);
    let mut hub = serve(&cfg).await;
    ready(&mut hub.client, &["a:echo"]).await;
    assert_eq!(
        text(&hub.client.call("a:echo", json!({"message": "x"})).await),
        "x"
    );
    // Only the fixture's stderr (logged by the hub) tells whether the ping was answered.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !hub.stderr().contains("fixture: client answered ping") {
        assert!(
            Instant::now() < deadline,
            "the fixture's ping was not answered"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_config_serves_no_tools() {
    let s = Scratch::new();
    let cfg = s.config(&json!({}));
    let mut hub = serve(&cfg).await;
    let init = hub.client.initialize().await;
    assert_eq!(init["serverInfo"]["name"], "openpact", "{init}");
    // Only openpact's own words: no server has any.
    let instructions = init["instructions"].as_str().unwrap_or_default();
    assert!(
        instructions.starts_with("openpact is an MCP hub") && !instructions.contains("##"),
        "{init}"
    );
    assert_eq!(hub.client.list_tools().await, Vec::<Value>::new());
    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_config_anywhere_serves_only_the_builtins() {
    let s = Scratch::new();
    let cwd = s.path().join("cwd");
    let xdg = s.path().join("xdg");
    let home = s.path().join("home");
    for d in [&cwd, &xdg, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    let state = s.path().join("state");
    let (mut child, stdin, stdout) = spawn_openpact(
        &["--state-dir", state.to_str().unwrap(), "serve"],
        &cwd,
        &[
            ("OPENPACT_CONFIG", ""),
            ("XDG_CONFIG_HOME", xdg.to_str().unwrap()),
            ("HOME", home.to_str().unwrap()),
        ],
    );
    let mut client = Client::over(stdin, stdout);
    let init = initialize_at_once(&mut client).await;
    assert_eq!(init["serverInfo"]["name"], "openpact", "{init}");
    // No servers, so only OpenPact's own tools, under their bare names.
    let names: Vec<String> = client
        .list_tools()
        .await
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        names.iter().any(|n| n == "workspace_read") && names.iter().any(|n| n == "web_fetch"),
        "{names:?}"
    );
    assert!(names.iter().all(|n| !n.contains(':')), "{names:?}");
    client.close_stdin();
    let mut stderr = String::new();
    let mut pipe = child.stderr.take().unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::io::AsyncReadExt::read_to_string(&mut pipe, &mut stderr)
            .await
            .unwrap();
        child.wait().await.unwrap()
    })
    .await
    .unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("<none: empty hub>"),
        "did not run without a config: {stderr}"
    );
}
