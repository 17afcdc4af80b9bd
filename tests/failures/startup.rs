//! Servers that do not start: exits at start and missing commands are reported, and the
//! others serve.

use super::{error_message, run_cli};
use crate::support::{
    Scratch, WAIT, fixture, names, ready, serve, serve_config, serve_ready, text,
};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_exits_at_start_is_reported_and_others_serve() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"good": fixture(&[]), "broken": fixture(&["--exit-at-start", "4"])}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["good:echo"]).await;
    let tools = names(&c.list_tools().await);
    assert!(tools.contains(&"good:echo".to_string()), "{tools:?}");
    assert!(!tools.iter().any(|n| n.starts_with("broken:")), "{tools:?}");
    assert_eq!(
        text(&c.call("good:echo", json!({"message": "ok"})).await),
        "ok"
    );
    let r = c.call("broken:echo", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    assert!(error_message(&r).contains("failed"), "{r}");

    let state = s.path().join("state-cli");
    let (code, stdout, stderr) = run_cli(&[
        "--config",
        cfg.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "servers",
    ])
    .await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let broken: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("broken"))
        .collect();
    assert!(!broken.is_empty(), "{stdout}");
    assert!(broken[0].contains("failed"), "{stdout}");
    assert!(
        broken
            .iter()
            .any(|l| l.contains("fixture: failing at start as asked")),
        "no stderr line: {stdout}"
    );
    let good = stdout
        .lines()
        .find(|l| l.starts_with("good"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(good.contains("ready"), "{stdout}");
}

/// A call to a server that has already failed answers at once with its failure; it used to
/// wait, like a call to a server still starting, for the others to finish starting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_to_a_failed_server_answers_at_once_while_others_start() {
    let mut hub = serve_config(
        json!({"broken": fixture(&["--exit-at-start", "4"]), "slow": fixture(&["--init-delay-ms", "10000"])}),
        Some(json!({"listWait": "20s"})),
    )
    .await;
    hub.client.initialize().await;
    hub.wait_log("failed to start", WAIT).await;
    let t0 = Instant::now();
    let r = hub.client.call("broken:echo", json!({})).await;
    let took = t0.elapsed();
    assert_eq!(r["error"]["code"], -32010, "{r}");
    assert!(error_message(&r).contains("failed"), "{r}");
    assert!(took < Duration::from_secs(2), "answered after {took:?}");
    // The prompt routes the same way.
    let t0 = Instant::now();
    let r = hub
        .client
        .request("prompts/get", json!({"name": "broken:greeting"}))
        .await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_command_is_named_by_config_check() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"good": fixture(&[]), "ghost": {"command": "openpact-test-no-such-program"}}),
        None,
    );
    let (code, stdout, stderr) =
        run_cli(&["--config", cfg.to_str().unwrap(), "config", "check"]).await;
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("ghost"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.starts_with(cfg.to_str().unwrap()),
        "the file is not named: {line}"
    );
    assert!(line.contains("mcpServers.ghost.command"), "{line}");
    assert!(
        line.contains("openpact-test-no-such-program") && line.contains("was not found on PATH"),
        "{line}"
    );
    assert!(!stderr.contains("mcpServers.good"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_command_does_not_stop_the_others_from_serving() {
    let mut hub = serve_ready(
        json!({"good": fixture(&[]), "ghost": {"command": "openpact-test-no-such-program"}}),
        None,
        &["good:echo"],
    )
    .await;
    let c = &mut hub.client;
    let tools = names(&c.list_tools().await);
    assert!(tools.contains(&"good:echo".to_string()), "{tools:?}");
    let r = c.call("ghost:anything", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    let msg = error_message(&r);
    assert!(
        msg.contains("'ghost'") && msg.contains("not found"),
        "{msg}"
    );
}
