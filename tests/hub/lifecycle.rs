//! The requests the hub answers itself: `initialize` (version negotiation, instructions),
//! `ping`, `server/discover` and unknown methods.

use super::initialize_params;
use crate::support::{fixture, ready, serve_config};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_negotiates_version_and_describes_the_hub() {
    let mut hub = serve_config(
        json!({"a": fixture(&["--name", "fa"]), "b": fixture(&["--name", "fb"])}),
        None,
    )
    .await;
    let c = &mut hub.client;
    // Let both servers come up so their instructions are known.
    ready(c, &["a:echo", "b:echo"]).await;

    for (asked, expected) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-06-18", "2025-06-18"),
        ("2099-01-01", "2025-11-25"),
    ] {
        let r = c.request("initialize", initialize_params(asked)).await;
        let result = &r["result"];
        assert_eq!(
            result["protocolVersion"], expected,
            "asked for {asked}: {r}"
        );
        assert_eq!(result["serverInfo"]["name"], "openpact", "{r}");
        assert_eq!(result["capabilities"]["tools"]["listChanged"], true, "{r}");
    }
    let r = c
        .request("initialize", initialize_params("2025-11-25"))
        .await;
    let instructions = r["result"]["instructions"]
        .as_str()
        .unwrap_or_else(|| panic!("no instructions: {r}"));
    let a = instructions.find("## a\nFixture server fa: scripted behaviours for tests.");
    let b = instructions.find("## b\nFixture server fb: scripted behaviours for tests.");
    assert!(
        a.is_some() && b.is_some(),
        "instructions do not label each server: {instructions}"
    );
    assert!(a < b, "instructions not in config order: {instructions}");
    // Hosts rename tools (`mcp__openpact__a_echo`, `a_echo`…): the text must not spell a
    // form of the names the model may never see.
    assert!(
        !instructions.contains("SERVER:TOOL") && !instructions.contains("SERVER__TOOL"),
        "{instructions}"
    );
    assert!(
        instructions.contains("starts with the name of the server that provides it"),
        "{instructions}"
    );
}

/// A client initializing while every server is still starting still learns what openpact
/// is (editors read `instructions` from `initialize` only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_while_servers_start_carries_openpacts_own_instructions() {
    let mut hub = serve_config(json!({"slow": fixture(&["--init-delay-ms", "3000"])}), None).await;
    let init = hub.client.initialize().await;
    let instructions = init["instructions"]
        .as_str()
        .unwrap_or_else(|| panic!("no instructions: {init}"));
    assert!(
        instructions.starts_with("openpact is an MCP hub")
            && instructions.contains("the name of the server that provides it"),
        "{instructions}"
    );
    assert!(!instructions.contains("## slow"), "{instructions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_initialize_at_startup_carries_the_instructions() {
    let mut hub = serve_config(json!({"a": fixture(&["--name", "fa"])}), None).await;
    // What every real client does: initialize as soon as the process is up.
    let t0 = Instant::now();
    let init = hub.client.initialize().await;
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "initialize took {:?}",
        t0.elapsed()
    );
    let instructions = init["instructions"]
        .as_str()
        .unwrap_or_else(|| panic!("no instructions: {init}"));
    assert!(
        instructions.contains("## a\nFixture server fa"),
        "{instructions}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_discover_and_unknown_methods() {
    let mut hub = serve_config(json!({"a": fixture(&[])}), None).await;
    let c = &mut hub.client;

    // A dual-era client probes first; the answer offers both eras, and `initialize` still
    // works on this pipe.
    let r = c
        .request(
            "server/discover",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}}}),
        )
        .await;
    let versions = r["result"]["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!("2026-07-28")), "{r}");
    assert!(versions.contains(&json!("2025-11-25")), "{r}");
    let r = c
        .request("initialize", initialize_params("2025-11-25"))
        .await;
    assert_eq!(r["result"]["protocolVersion"], "2025-11-25", "{r}");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    let r = c.request("ping", json!({})).await;
    assert_eq!(r["result"], json!({}), "{r}");
    // `ping` without params is just as valid.
    c.send(&json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}))
        .await;
    let r = c.response(&json!("p")).await;
    assert_eq!(r["result"], json!({}), "{r}");

    let r = c.request("no/such/method", json!({})).await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no/such/method"),
        "{r}"
    );
}
