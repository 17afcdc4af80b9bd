//! `enabledTools` / `disabledTools`: a hidden tool is neither listed nor callable, stays hidden
//! when the server's list changes, and is counted where the user looks (`tools`, `servers`);
//! a bad glob is a config problem with its path.

use crate::support::{
    FIXTURE, Scratch, WAIT, error_code, names, ready, serve_config, text, wait_for_tool,
};
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn hidden_tools_are_neither_listed_nor_callable_even_after_a_list_change() {
    let mut hub = serve_config(
        json!({
            "f": {"command": FIXTURE, "enabledTools": ["echo", "change_tools", "late_*", "a*"], "disabledTools": ["args"]},
            "g": {"command": FIXTURE, "disabledTools": ["late_tool"]},
        }),
        None,
    )
    .await;
    ready(&mut hub.client, &["f:echo", "g:echo"]).await;
    let c = &mut hub.client;
    let tools = names(&c.list_tools().await);
    let of_f: Vec<&String> = tools.iter().filter(|t| t.starts_with("f:")).collect();
    assert_eq!(of_f, ["f:echo", "f:add", "f:change_tools"], "{tools:?}");
    assert!(
        tools.contains(&"g:args".to_string()),
        "only f's filter hides args: {tools:?}"
    );
    let r = c.call("f:args", json!({})).await;
    assert_eq!(error_code(&r), -32602, "{r}");
    assert!(r.to_string().contains("Unknown tool: f:args"), "{r}");
    assert_eq!(
        text(&c.call("f:echo", json!({"message": "shown"})).await),
        "shown"
    );

    // A change to the server's list is filtered too: f lets late_tool through, g does not.
    assert_eq!(text(&c.call("f:change_tools", json!({})).await), "changed");
    assert_eq!(text(&c.call("g:change_tools", json!({})).await), "changed");
    let tools = names(&wait_for_tool(c, "f:late_tool", WAIT).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let tools_again = names(&c.list_tools().await);
    for list in [&tools, &tools_again] {
        assert!(!list.contains(&"g:late_tool".to_string()), "{list:?}");
    }
    let r = c.call("g:late_tool", json!({})).await;
    assert_eq!(error_code(&r), -32602, "{r}");
}

#[tokio::test]
async fn the_cli_counts_what_filters_hide_and_config_check_refuses_bad_globs() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"f": {"command": FIXTURE, "enabledTools": ["echo"]}}),
        None,
    );
    let state = sc.state();
    let run = |args: &[&str]| {
        std::process::Command::new(crate::support::OPENPACT)
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(&state)
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["tools"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 tools from 1 server(s)"), "{stdout}");
    assert!(
        stdout.contains("(23 tool(s) of f hidden by its enabledTools/disabledTools)"),
        "{stdout}"
    );
    let out = run(&["servers", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["servers"][0]["hiddenTools"], 23, "{v}");
    assert_eq!(v[0]["servers"][0]["tools"], 1, "{v}");
    let out = run(&["config", "check", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["servers"][0]["enabledTools"], json!(["echo"]), "{v}");

    let bad = sc.servers(
        json!({"f": {"command": FIXTURE, "disabledTools": ["a[", 3], "enabledTool": ["x"]}}),
        None,
    );
    let out = std::process::Command::new(crate::support::OPENPACT)
        .arg("--config")
        .arg(&bad)
        .args(["config", "check", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let problems = String::from_utf8_lossy(&out.stdout);
    assert!(
        problems.contains("mcpServers.f.disabledTools[0]"),
        "{problems}"
    );
    assert!(
        problems.contains("mcpServers.f.disabledTools[1]"),
        "{problems}"
    );
    assert!(
        problems.contains("enabledTools"),
        "did you mean: {problems}"
    );
}

/// Over the HTTP face, too: the hidden tool is not listed and a call to it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_hidden_tools_are_neither_listed_nor_callable() {
    use crate::http_face::{Http, http_hub};
    let h = http_hub(
        json!({"fx": {"command": FIXTURE, "disabledTools": ["a*", "env"]}}),
        None,
        &[],
    )
    .await;
    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    let tools = c.rpc(1, "tools/list", json!({})).await;
    let listed: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(listed.contains(&"fx:echo"), "{listed:?}");
    for hidden in ["fx:add", "fx:args", "fx:env"] {
        assert!(!listed.contains(&hidden), "{hidden} listed: {listed:?}");
        let r = c.call(2, hidden, json!({})).await;
        assert_eq!(error_code(&r), -32602, "{r}");
    }
}
