//! `openpact servers`: each server's state, protocol, tools, start time and failure, as a
//! table and as JSON; and the view of a running `openpact serve` from its state dir.

use super::{Cli, FIXTURE_TOOLS, is_rfc3339_z, now_rfc3339, stdout_json, with_servers};
use crate::support::{self, fixture, s};
use serde_json::{Value, json};
use std::time::Duration;

/// The words of the table row for server `name`.
fn row<'a>(lines: &[&'a str], name: &str) -> Vec<&'a str> {
    lines
        .iter()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no row for {name}"))
        .split_whitespace()
        .collect()
}

#[tokio::test]
async fn servers_shows_state_protocol_tools_times_and_failures() {
    let cli = with_servers(
        json!({ "fx": fixture(&["--tools", "3"]), "bad": fixture(&["--exit-at-start", "9"]) }),
        None,
    );
    let tools = FIXTURE_TOOLS.len() + 3;

    let before = now_rfc3339();
    let out = cli.run(&["servers", "--json"]).await;
    let after = now_rfc3339();
    out.expect_code(0);
    let v = stdout_json(&out);
    // One shape whether or not a hub runs: a list of hubs, here the one started for this.
    assert_eq!(v.as_array().map(Vec::len), Some(1), "{v:#}");
    assert_eq!(v[0]["running"], false, "{v:#}");
    let list = v[0]["servers"].as_array().expect("a JSON array");
    assert_eq!(list.len(), 2, "{v:#}");
    let fx = list.iter().find(|x| x["name"] == "fx").expect("fx listed");
    assert_eq!(fx["state"], "ready", "{fx:#}");
    assert_eq!(fx["protocolVersion"], "2025-11-25", "{fx:#}");
    assert_eq!(fx["tools"], json!(tools), "{fx:#}");
    assert_eq!(fx["serverInfo"]["name"], "fixture", "{fx:#}");
    assert!(fx["reason"].is_null(), "{fx:#}");
    let started = fx["startedAt"].as_str().expect("startedAt is a string");
    assert!(is_rfc3339_z(started), "startedAt {started:?}");
    assert!(
        before.as_str() <= started && started <= after.as_str(),
        "startedAt {started} not within {before}..{after}"
    );
    let ready_ms = fx["readyMs"].as_u64().expect("readyMs is a number");
    assert!(
        ready_ms < support::WAIT.as_millis() as u64,
        "readyMs {ready_ms}"
    );

    let bad = list
        .iter()
        .find(|x| x["name"] == "bad")
        .expect("bad listed");
    assert_eq!(bad["state"], "failed", "{bad:#}");
    let reason = bad["reason"]
        .as_str()
        .expect("a failed server has a reason");
    assert!(reason.contains("exit status: 9"), "{reason}");
    assert!(
        bad["tools"].is_null() && bad["readyMs"].is_null() && bad["protocolVersion"].is_null(),
        "{bad:#}"
    );
    assert!(
        is_rfc3339_z(bad["startedAt"].as_str().unwrap_or("")),
        "{bad:#}"
    );
    let stderr: Vec<&str> = bad["stderr"]
        .as_array()
        .expect("stderr lines")
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        stderr.contains(&"fixture: failing at start as asked"),
        "{stderr:?}"
    );

    // The human table says the same.
    let out = cli.run_after(&["servers"]).await;
    out.expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header[..5],
        ["NAME", "STATE", "PROTOCOL", "TOOLS", "STARTED"],
        "{}",
        out.stdout
    );
    let fx_row = row(&lines, "fx");
    assert_eq!(
        fx_row[1..4],
        ["ready", "2025-11-25", tools.to_string().as_str()],
        "{}",
        out.stdout
    );
    assert!(is_rfc3339_z(fx_row[4]), "{}", out.stdout);
    assert!(
        fx_row[5].ends_with("ms") || fx_row[5].ends_with('s'),
        "READY IN {:?}",
        fx_row[5]
    );
    let bad_row = row(&lines, "bad");
    assert_eq!(bad_row[1..4], ["failed", "-", "-"], "{}", out.stdout);
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("reason: ") && l.contains("exit status: 9")),
        "{}",
        out.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start() == "stderr: fixture: failing at start as asked"),
        "{}",
        out.stdout
    );
}

/// With an `openpact serve` running on the same state dir, `servers` shows that hub's servers
/// (restarts included) instead of starting its own; `--start` starts fresh ones; once the
/// hub has exited its status file is gone.
#[tokio::test]
async fn servers_shows_a_running_serve_from_the_state_dir() {
    // The harness's state dir for this config, which the CLI is pointed at too.
    let cli = with_servers(
        json!({ "fx": fixture(&[]) }),
        Some(json!({"restart": {"initialBackoff": "50ms"}})),
    );
    let Cli { cfg, state, .. } = &cli;
    let mut hub = support::serve(cfg).await;
    hub.client.initialize().await;
    assert!(
        hub.client
            .list_tools()
            .await
            .iter()
            .any(|t| t["name"] == "fx:echo")
    );
    let hub_pid = hub.child.id().expect("hub running");
    // One crash, so the running hub has something a fresh start would not show.
    let crashed = hub.client.call("fx:crash", json!({})).await;
    assert!(
        crashed.get("error").is_some() || crashed["result"]["isError"] == true,
        "{crashed}"
    );

    let args = ["servers", "--json"];
    let deadline = std::time::Instant::now() + support::WAIT;
    let live = loop {
        let out = cli.run(&args).await;
        out.expect_code(0);
        let v = stdout_json(&out);
        let fx = &v[0]["servers"][0];
        if fx["restarts"] == 1 && fx["state"] == "ready" {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the running hub never showed fx restarted once: {v:#}\n{}",
            hub.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let hubs = live.as_array().expect("a list of running hubs");
    assert_eq!(hubs.len(), 1, "{live:#}");
    assert_eq!(hubs[0]["running"], true, "{live:#}");
    assert_eq!(hubs[0]["pid"], hub_pid, "{live:#}");
    assert!(
        hubs[0]["config"]
            .as_str()
            .is_some_and(|c| c.contains(s(cfg))),
        "{live:#}"
    );
    assert!(
        is_rfc3339_z(hubs[0]["startedAt"].as_str().unwrap_or("")),
        "{live:#}"
    );
    let fx = &hubs[0]["servers"][0];
    assert_eq!(fx["name"], "fx");
    assert_eq!(fx["tools"], FIXTURE_TOOLS.len());
    assert!(
        fx["lastError"].as_str().is_some_and(|e| !e.is_empty()),
        "the crash is remembered: {fx:#}"
    );

    let human = cli.run(&["servers"]).await;
    human.expect_code(0);
    assert!(
        human
            .stdout
            .contains(&format!("openpact serve (pid {hub_pid}")),
        "{}",
        human.stdout
    );

    // --start: servers started for the occasion, never restarted.
    let fresh = cli.run(&["servers", "--json", "--start"]).await;
    fresh.expect_code(0);
    let v: Value = serde_json::from_str(&fresh.stdout).unwrap();
    assert_eq!(v[0]["running"], false, "started for the occasion: {v:#}");
    assert_eq!(v[0]["servers"][0]["name"], "fx", "{v:#}");
    assert_eq!(v[0]["servers"][0]["restarts"], 0, "{v:#}");
    assert_ne!(v[0]["servers"][0]["pid"], fx["pid"], "{v:#}");

    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0));
    let left: Vec<_> = std::fs::read_dir(state)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("serve-"))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "status files left behind: {left:?}");
    let after = cli.run(&args).await;
    after.expect_code(0);
    let v: Value = serde_json::from_str(&after.stdout).unwrap();
    assert_eq!(
        (&v[0]["running"], &v[0]["servers"][0]["name"]),
        (&json!(false), &json!("fx")),
        "after the hub exited, servers starts its own: {v:#}"
    );
    assert_eq!(v[0]["servers"][0]["restarts"], 0, "{v:#}");
}
