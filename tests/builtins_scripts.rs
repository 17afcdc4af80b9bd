//! Starlark script tools end to end through `openpact serve` and a real client: listing,
//! the approval gate (an unapproved script is an `isError` result), approval with
//! `openpact scripts approve`, re-approval after an edit, and the time limit.

use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const HELLO: &str = "# @description: Greets the world\n\
                     def main():\n    return 'hello ' + 'world'\n";

/// Never ends on its own (Starlark has no `while`; nested ranges do).
const SPIN: &str = "# @description: Spins\n\
                    def main():\n    n = 0\n    for i in range(2147483647):\n        \
                    for j in range(2147483647):\n            n += 1\n    return n\n";

fn setup(scratch: &Scratch) -> (PathBuf, PathBuf) {
    let dir = scratch.path().join("scripts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hello.star"), HELLO).unwrap();
    std::fs::write(dir.join("spin.star"), SPIN).unwrap();
    let config = scratch.config(&json!({
        "mcpServers": {},
        "openpact": {"builtins": {"scripts": {"dir": "scripts", "timeout": "1s"}}},
    }));
    (config, dir)
}

/// Approves a script the way an administrator does: `openpact scripts approve NAME` against
/// the hub's config and state dir.
fn approve(config: &Path, name: &str) {
    let state = state_dir(config);
    let out = std::process::Command::new(OPENPACT)
        .arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(&state)
        .args(["scripts", "approve", name])
        .env_remove("OPENPACT_CONFIG")
        .env_remove("OPENPACT_STATE_DIR")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "openpact scripts approve {name} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("approved") && stdout.contains("sha256:"),
        "{stdout}"
    );
}

fn result(response: &Value) -> &Value {
    response
        .get("result")
        .unwrap_or_else(|| panic!("not a result: {response}"))
}

fn is_error(response: &Value) -> bool {
    result(response)["isError"] == json!(true)
}

#[tokio::test]
async fn approval_gate_and_time_limit_through_the_hub() {
    let scratch = Scratch::new();
    let (config, dir) = setup(&scratch);
    let mut hub = serve(&config).await;
    hub.client.initialize().await;

    let tools = hub.client.list_tools().await;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for t in ["script_list", "script_run", "script_reload"] {
        assert!(names.contains(&t), "{t} missing from {names:?}");
    }
    // Arbitrary code is off unless the config turns it on.
    assert!(!names.contains(&"script_exec"), "{names:?}");

    let listed = hub.client.call("script_list", json!({})).await;
    assert!(!is_error(&listed), "{listed}");
    let listed: Value = serde_json::from_str(&text(&listed)).unwrap();
    assert_eq!(listed["count"], 2);
    assert_eq!(listed["scripts"][0]["name"], "hello");
    assert_eq!(listed["scripts"][0]["description"], "Greets the world");
    assert_eq!(listed["scripts"][0]["approval_status"], "pending");

    let refused = hub
        .client
        .call("script_run", json!({"name": "hello"}))
        .await;
    assert!(is_error(&refused), "{refused}");
    assert!(
        text(&refused).starts_with(
            "Script 'hello.star' is pending approval. An administrator must review and approve this script before it can be executed."
        ),
        "{refused}"
    );

    approve(&config, "hello");
    let ran = hub
        .client
        .call("script_run", json!({"name": "hello"}))
        .await;
    assert!(!is_error(&ran), "{ran}");
    let body: Value = serde_json::from_str(&text(&ran)).unwrap();
    assert_eq!(body["value"], "hello world");
    assert_eq!(body["error"], Value::Null);
    assert_eq!(result(&ran)["structuredContent"]["value"], "hello world");

    // An edit is not covered by the approval given for the old content.
    std::fs::write(dir.join("hello.star"), HELLO.replace("world", "moon")).unwrap();
    let refused = hub
        .client
        .call("script_run", json!({"name": "hello.star"}))
        .await;
    assert!(is_error(&refused), "{refused}");
    assert!(
        text(&refused).contains("has been modified since approval"),
        "{refused}"
    );
    approve(&config, "hello.star");
    let ran = hub
        .client
        .call("script_run", json!({"name": "hello"}))
        .await;
    let body: Value = serde_json::from_str(&text(&ran)).unwrap();
    assert_eq!(body["value"], "hello moon", "{ran}");

    // A script that never ends is stopped at the configured limit.
    approve(&config, "spin");
    let t0 = Instant::now();
    let spun = hub.client.call("script_run", json!({"name": "spin"})).await;
    let took = t0.elapsed();
    assert!(is_error(&spun), "{spun}");
    let body: Value = serde_json::from_str(&text(&spun)).unwrap();
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("script timed out after 1s")),
        "{spun}"
    );
    assert!(took < Duration::from_secs(3), "took {took:?}");

    // Names are file names in the scripts folder, nothing else.
    let bad = hub
        .client
        .call("script_run", json!({"name": "../mcp.json"}))
        .await;
    assert!(is_error(&bad), "{bad}");
    assert!(text(&bad).starts_with("invalid script name"), "{bad}");

    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0));
}
