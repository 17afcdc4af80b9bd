//! Views of one hub: a profile (`serve --profile`, `/mcp/PROFILE`) sees only its servers and
//! tools, cannot call the others, and hears `list_changed` only for its own lists; tool
//! search replaces a long list with `search_tools`, `call_tool` and the pinned tools.

use crate::http_face::{Http, http_hub};
use crate::support::{FIXTURE, Scratch, WAIT, error_code, fixture, names, ready, serve_with, text};
use serde_json::{Value, json};
use std::time::Duration;

fn profiles() -> Value {
    json!({
        "builtins": true,
        "profiles": {
            "pa": {"servers": ["a"], "tools": ["!a:add"], "builtins": false},
            "pfx": {"servers": ["fx"]},
        }
    })
}

#[tokio::test]
async fn a_stdio_profile_sees_and_calls_only_its_servers_and_tools() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"a": fixture(&[]), "fx": fixture(&[])}),
        Some(profiles()),
    );
    let mut hub = serve_with(&config, &["serve", "--profile", "pa"], &[])
        .await
        .owning(sc);
    ready(&mut hub.client, &["a:echo"]).await;
    let c = &mut hub.client;
    let tools = names(&c.list_tools().await);
    assert!(tools.iter().all(|t| t.starts_with("a:")), "{tools:?}");
    assert!(!tools.contains(&"a:add".to_string()), "{tools:?}");
    assert!(tools.contains(&"a:pids".to_string()), "{tools:?}");
    for hidden in ["a:add", "fx:echo", "workspace_read"] {
        let r = c
            .call(hidden, json!({"a": 1, "b": 2, "message": "x"}))
            .await;
        assert_eq!(error_code(&r), -32602, "{hidden}: {r}");
        assert!(r.to_string().contains("Unknown tool"), "{r}");
    }
    assert_eq!(
        text(&c.call("a:echo", json!({"message": "in"})).await),
        "in"
    );
    // The other server's prompts and instructions are not this client's either.
    let prompts = c.request("prompts/list", json!({})).await;
    let prompt_names: Vec<String> = prompts["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        prompt_names.iter().all(|p| p.starts_with("a:")),
        "{prompt_names:?}"
    );
    assert!(!prompt_names.is_empty(), "a's prompts are in view");
}

#[tokio::test]
async fn serve_with_an_unknown_profile_refuses_to_start_and_names_the_profiles() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"a": fixture(&[]), "fx": fixture(&[])}),
        Some(profiles()),
    );
    let out = std::process::Command::new(crate::support::OPENPACT)
        .arg("--config")
        .arg(&config)
        .args(["serve", "--profile", "nope"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no profile \"nope\"") && stderr.contains("pa, pfx"),
        "{stderr}"
    );
}

#[test]
fn config_check_rejects_a_profile_naming_an_unknown_server_with_its_path() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"github": fixture(&[])}),
        Some(json!({"profiles": {"coding": {"servers": ["github", "githb"]}}})),
    );
    let run = |json: bool| {
        let mut cmd = std::process::Command::new(crate::support::OPENPACT);
        cmd.arg("--config").arg(&config).args(["config", "check"]);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    let out = run(false);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"openpact.profiles.coding.servers[1]: "githb" is not a configured server; did you mean "github"?"#),
        "{stderr}"
    );
    let out = run(true);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(
        v["problems"][0]["path"], "openpact.profiles.coding.servers[1]",
        "{v}"
    );
}

/// Two HTTP clients on two profile endpoints of one hub: different catalogues from the same
/// children, and a list change reaches only the view it changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_profile_endpoints_see_their_own_catalogues_and_list_changes() {
    let h = http_hub(
        json!({"fx": fixture(&[]), "a": fixture(&[])}),
        Some(profiles()),
        &[],
    )
    .await;
    let mut pa = Http::at(format!("{}/mcp/pa", h.base));
    let mut pfx = Http::at(format!("{}/mcp/pfx", h.base));
    let mut whole = Http::new(&h);
    for c in [&mut pa, &mut pfx, &mut whole] {
        c.initialize(json!({})).await;
    }
    let list = |r: Value| names(r["result"]["tools"].as_array().unwrap());
    let pa_tools = list(pa.rpc(1, "tools/list", json!({})).await);
    let pfx_tools = list(pfx.rpc(1, "tools/list", json!({})).await);
    let all = list(whole.rpc(1, "tools/list", json!({})).await);
    assert!(pa_tools.iter().all(|t| t.starts_with("a:")), "{pa_tools:?}");
    assert!(pfx_tools.iter().any(|t| t == "fx:echo"), "{pfx_tools:?}");
    assert!(
        pfx_tools.iter().all(|t| !t.starts_with("a:")),
        "{pfx_tools:?}"
    );
    assert!(
        pfx_tools.contains(&"workspace_read".to_string()),
        "pfx keeps built-ins"
    );
    assert!(all.contains(&"a:add".to_string()) && all.contains(&"fx:add".to_string()));

    // The same children: a's process answers both the profile's session and the whole one.
    let pid = |r: Value| text(&r);
    let via_profile = pid(pa.call(2, "a:pids", json!({})).await);
    let via_whole = pid(whole.call(2, "a:pids", json!({})).await);
    assert_eq!(via_profile, via_whole);
    let r = pfx.call(3, "a:pids", json!({})).await;
    assert_eq!(error_code(&r), -32602, "outside the profile: {r}");

    // a changes its list: pa (and the whole view) hear of it, pfx does not.
    let mut pa_events = pa.listen(None).await;
    let mut pfx_events = pfx.listen(None).await;
    assert_eq!(
        text(&pa.call(4, "a:change_tools", json!({})).await),
        "changed"
    );
    let heard = loop {
        let (_, m) = pa_events.within(WAIT).await.expect("pa hears the change");
        if m["method"] == "notifications/tools/list_changed" {
            break m;
        }
    };
    assert_eq!(heard["method"], "notifications/tools/list_changed");
    while let Some((_, m)) = pfx_events.within(Duration::from_millis(800)).await {
        assert_ne!(m["method"], "notifications/tools/list_changed", "pfx: {m}");
    }
    let pa_tools = list(pa.rpc(5, "tools/list", json!({})).await);
    assert!(
        pa_tools.contains(&"a:late_tool".to_string()),
        "{pa_tools:?}"
    );

    // A session belongs to its endpoint; an unknown profile is named as such.
    let mut stray = Http::at(format!("{}/mcp", h.base));
    stray.session = pa.session.clone();
    let resp = stray
        .post(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .await;
    assert_eq!(resp.status(), 404);
    let nobody = Http::at(format!("{}/mcp/nope", h.base));
    let resp = nobody
        .post(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
        )
        .await;
    assert_eq!(resp.status(), 404);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains("no profile \\\"nope\\\"") && body.contains("pa, pfx"),
        "{body}"
    );
}

fn searching(extra: Value) -> Value {
    let mut search = json!({"mode": "on", "alwaysLoad": ["fx:echo"]});
    if let (Some(s), Some(e)) = (search.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    json!({"toolSearch": search})
}

fn found(r: &Value) -> Vec<String> {
    r["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no structured tools: {r}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn with_search_on_the_list_is_the_meta_tools_and_the_pinned_ones() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[]), "b": {"command": FIXTURE}}),
        Some(searching(json!({}))),
    );
    let mut hub = serve_with(&config, &["serve"], &[]).await.owning(sc);
    let c = &mut hub.client;
    let init = c.initialize().await;
    crate::support::wait_for_tool(c, "fx:echo", WAIT).await;
    let tools = c.list_tools().await;
    assert_eq!(names(&tools), ["search_tools", "call_tool", "fx:echo"]);
    for t in &tools {
        assert_eq!(t["_meta"]["anthropic/alwaysLoad"], true, "{t}");
    }
    assert!(
        init["instructions"]
            .as_str()
            .unwrap()
            .contains("search_tools"),
        "{init}"
    );

    let r = c
        .call("search_tools", json!({"query": "add two numbers together"}))
        .await;
    let hits = found(&r);
    assert!(hits[0].ends_with(":add"), "{hits:?}");
    let first = &r["result"]["structuredContent"]["tools"][0];
    assert!(
        first["inputSchema"]["properties"]["a"].is_object(),
        "{first}"
    );
    assert!(
        text(&r).contains("inputSchema") || text(&r).contains("input:"),
        "{r}"
    );
    let r = c
        .call(
            "search_tools",
            json!({"query": "add numbers", "server": "b", "limit": 1}),
        )
        .await;
    assert_eq!(found(&r), ["b:add"]);
    let r = c
        .call("search_tools", json!({"query": "add", "server": "zz"}))
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("fx, b"), "{r}");
    let r = c.call("search_tools", json!({"query": "  "})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");

    let r = c
        .call(
            "call_tool",
            json!({"name": "b:add", "arguments": {"a": 2, "b": 3}}),
        )
        .await;
    assert_eq!(text(&r), "5", "{r}");
    // A found tool is still a tool of the hub, callable by its own name.
    assert_eq!(text(&c.call("fx:add", json!({"a": 1, "b": 1})).await), "2");
    let r = c.call("call_tool", json!({"name": "fx:nope"})).await;
    assert_eq!(error_code(&r), -32602, "{r}");
    let r = c.call("call_tool", json!({"arguments": {}})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    let r = c
        .call(
            "call_tool",
            json!({"name": "search_tools", "arguments": {"query": "x"}}),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
}

#[tokio::test]
async fn auto_mode_searches_only_above_the_threshold() {
    for (threshold, searched) in [(1000, false), (10, true)] {
        let mut hub = crate::support::serve_ready(
            json!({"fx": fixture(&[])}),
            Some(json!({"toolSearch": {"threshold": threshold, "alwaysLoad": ["fx:echo"]}})),
            &["fx:echo"],
        )
        .await;
        let tools = names(&hub.client.list_tools().await);
        assert_eq!(
            tools.contains(&"search_tools".to_string()),
            searched,
            "threshold {threshold}: {tools:?}"
        );
        assert_eq!(
            tools.contains(&"fx:add".to_string()),
            !searched,
            "{tools:?}"
        );
        let r = hub
            .client
            .call("search_tools", json!({"query": "echo"}))
            .await;
        if searched {
            assert!(found(&r).contains(&"fx:echo".to_string()), "{r}");
        } else {
            assert_eq!(error_code(&r), -32602, "no search below the threshold: {r}");
        }
    }
}

#[tokio::test]
async fn a_profile_searches_only_its_own_tools() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[]), "a": fixture(&[])}),
        Some(
            json!({"profiles": {"pfx": {"servers": ["fx"], "builtins": false,
            "toolSearch": {"mode": "on", "alwaysLoad": ["fx:echo"]}}}}),
        ),
    );
    let mut hub = serve_with(&config, &["serve", "--profile", "pfx"], &[])
        .await
        .owning(sc);
    ready(&mut hub.client, &["fx:echo"]).await;
    let r = hub
        .client
        .call(
            "search_tools",
            json!({"query": "add two numbers", "limit": 50}),
        )
        .await;
    let hits = found(&r);
    assert!(hits.iter().all(|t| t.starts_with("fx:")), "{hits:?}");
    assert_eq!(r["result"]["structuredContent"]["total"], 24, "{r}");
    let r = hub
        .client
        .call(
            "call_tool",
            json!({"name": "a:add", "arguments": {"a": 1, "b": 1}}),
        )
        .await;
    assert_eq!(error_code(&r), -32602, "outside the profile: {r}");
}

#[tokio::test]
async fn the_cli_searches_the_catalogue_in_both_outputs() {
    let sc = Scratch::new();
    let config = sc.servers(json!({"fx": fixture(&[])}), None);
    let run = |args: &[&str]| {
        std::process::Command::new(crate::support::OPENPACT)
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(sc.state())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["tools", "--search", "add two numbers", "--limit", "3"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.lines().next().unwrap_or("");
    assert!(first.contains("1.") && first.contains("fx:add"), "{stdout}");
    assert!(stdout.contains("best first"), "{stdout}");
    let out = run(&["tools", "--search", "add two numbers", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tools"][0]["name"], "fx:add", "{v}");
    assert!(
        v["tools"][0]["inputSchema"]["properties"]["b"].is_object(),
        "{v}"
    );
    assert!(v["total"].as_u64().unwrap() >= 24, "{v}");
    let out = run(&["tools", "--search", "zebra giraffe"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("No tool matches"));
    // A limit the search cannot honour is refused, as in the config (toolSearch.limit), not
    // silently made 1 or 50.
    for limit in ["0", "51"] {
        let out = run(&["tools", "--search", "add two numbers", "--limit", limit]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--limit {limit}: {out:?}");
        assert!(
            stderr.contains(&format!("invalid value '{limit}' for '--limit <N>'"))
                && stderr.contains("1..=50"),
            "{stderr}"
        );
        assert!(out.stdout.is_empty(), "{out:?}");
    }
    let out = run(&[
        "tools",
        "--search",
        "add two numbers",
        "--limit",
        "50",
        "--json",
    ]);
    assert!(out.status.success(), "{out:?}");
}

/// The search model (3.8 MB embedded in the binary) is read only by a hub whose views search:
/// with search off, listing and calling never touch it, so it stays out of the hub's memory.
#[tokio::test]
async fn the_search_model_is_read_only_where_a_view_searches() {
    const READ: &str = "tool search: the embedded model is read";
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&[])}),
        Some(json!({"toolSearch": {"mode": "off"}})),
    );
    let mut hub = serve_with(&config, &["serve"], &[]).await.owning(sc);
    ready(&mut hub.client, &["fx:echo"]).await;
    let r = hub.client.call("fx:echo", json!({"message": "m"})).await;
    assert_eq!(text(&r), "m");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!hub.stderr().contains(READ), "{}", hub.stderr());

    let sc = Scratch::new();
    let config = sc.servers(json!({"fx": fixture(&[])}), Some(searching(json!({}))));
    let mut hub = serve_with(&config, &["serve"], &[]).await.owning(sc);
    ready(&mut hub.client, &["fx:echo"]).await;
    hub.wait_log(READ, WAIT).await;
}
