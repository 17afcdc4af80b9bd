//! MCP Apps (`io.modelcontextprotocol/ui`) through the hub: two servers built with the
//! ext-apps SDK's server helpers (`fixtures/apps/widget_server.mjs`), both serving their view
//! at `ui://widget/main.html`. A client declaring the extension sees each view under
//! `ui://<server>/widget/main.html`, reads each one's HTML from its own server, calls each
//! view's tools by the names the view uses (its server's own), and never sees the view-only
//! tools listed or found by search; the servers hear the extension (and no unknown one). A
//! client that does not declare it sees tools without UI metadata and no view-only tools.
//! With Chromium installed (Debian's `chromium`), each view is rendered headless by the SDK's
//! `AppBridge` (`fixtures/apps/browser_host.mjs`) through the hub, and its button's tool
//! call completes.

use crate::support::{
    Client, Hub, OPENPACT, Peers, Ran, Scratch, WAIT, s, serve_config, state_dir, text,
    wait_for_tool,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const UI: &str = "io.modelcontextprotocol/ui";
const MIME: &str = "text/html;profile=mcp-app";

/// The widget server labelled `label`.
fn widget(peers: &Peers, label: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/apps/widget_server.mjs");
    let dir = peers.vars["OPENPACT_PEERS_DIR"].as_str().unwrap();
    peers.entry("PEER_NODE", &[script.to_str().unwrap(), label, dir])
}

/// A hub over widget servers `alpha` and `beta` with `openpact` settings, initialized by a
/// client declaring `capabilities`, once both servers' tools are listed.
async fn hub(peers: &Peers, openpact: Value, capabilities: Value) -> Hub {
    let servers = json!({"alpha": widget(peers, "alpha"), "beta": widget(peers, "beta")});
    let mut hub = serve_config(servers, Some(openpact)).await;
    hub.client.initialize_as(capabilities, "apps-host").await;
    for server in ["alpha", "beta"] {
        wait_for_tool(&mut hub.client, &format!("{server}:client_caps"), WAIT).await;
    }
    hub
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().filter_map(|t| t["name"].as_str()).collect()
}

/// What `server`'s `client_caps` says the hub declared to it.
async fn declared_to(c: &mut Client, server: &str) -> Value {
    let r = c.call(&format!("{server}:client_caps"), json!({})).await;
    serde_json::from_str(&text(&r)).unwrap()
}

/// No tool of servers with views that is for the view only.
fn assert_no_view_only(listed: &[&str]) {
    for hidden in ["refresh", "reset"] {
        assert!(
            !listed.iter().any(|n| n.ends_with(hidden)),
            "view-only tool listed: {listed:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_views_under_one_uri() {
    let Some(peers) = Peers::get() else { return };
    let caps = json!({"extensions": {UI: {"mimeTypes": [MIME]}, "com.example/other": {}}});
    let mut hub = hub(&peers, json!({"toolSearch": {"mode": "off"}}), caps).await;
    let c = &mut hub.client;

    // The servers heard the extension the client declared, and not the one the hub cannot carry.
    for server in ["alpha", "beta"] {
        let declared = declared_to(c, server).await;
        assert_eq!(
            declared["extensions"][UI]["mimeTypes"],
            json!([MIME]),
            "{declared}"
        );
        assert!(
            declared["extensions"].get("com.example/other").is_none(),
            "{declared}"
        );
    }

    let tools = c.list_tools().await;
    let listed = names(&tools);
    assert_no_view_only(&listed);
    for server in ["alpha", "beta"] {
        let shown = format!("ui://{server}/widget/main.html");
        for tool in ["show_widget", &format!("{server}_data")] {
            let t = tools
                .iter()
                .find(|t| t["name"] == format!("{server}:{tool}"))
                .unwrap_or_else(|| panic!("{server}:{tool} missing from {listed:?}"));
            assert_eq!(t["_meta"]["ui"]["resourceUri"], shown, "{t}");
            assert_eq!(t["_meta"]["ui/resourceUri"], shown, "{t}");
        }
    }

    // Both views are listed, each under its server's URI, and read from that server.
    let r = c.request("resources/list", json!({})).await;
    let uris: Vec<&str> = r["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(
        uris,
        ["ui://alpha/widget/main.html", "ui://beta/widget/main.html"],
        "{r}"
    );
    for server in ["alpha", "beta"] {
        let uri = format!("ui://{server}/widget/main.html");
        let r = c.request("resources/read", json!({"uri": uri})).await;
        let content = &r["result"]["contents"][0];
        assert_eq!(content["uri"], uri, "{r}");
        assert_eq!(content["mimeType"], MIME, "{r}");
        let html = content["text"].as_str().unwrap_or_default();
        assert!(html.contains(&format!("<h1>{server} widget</h1>")), "{r}");
    }
    let r = c.request("resources/templates/list", json!({})).await;
    let templates: Vec<&str> = r["result"]["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["uriTemplate"].as_str())
        .collect();
    assert_eq!(
        templates,
        ["ui://alpha/pages/{name}", "ui://beta/pages/{name}"],
        "{r}"
    );
    // A view served through a template, listed nowhere, is read from its server all the same.
    for server in ["alpha", "beta"] {
        let show = tools
            .iter()
            .find(|t| t["name"] == format!("{server}:show_page"));
        let uri = show.map(|t| t["_meta"]["ui"]["resourceUri"].clone());
        assert_eq!(uri, Some(json!(format!("ui://{server}/pages/about.html"))));
        let r = c
            .request("resources/read", json!({"uri": uri.unwrap()}))
            .await;
        let content = &r["result"]["contents"][0];
        assert_eq!(
            content["text"],
            format!("<p>{server} page about.html</p>"),
            "{r}"
        );
        assert_eq!(
            content["uri"],
            format!("ui://{server}/pages/about.html"),
            "{r}"
        );
    }
    // The server's own URI is not the hub's: no server would be the right one.
    let r = c
        .request("resources/read", json!({"uri": "ui://widget/main.html"}))
        .await;
    assert!(r["error"].is_object(), "{r}");

    // A view calls its server's tools by their own names, view-only ones included.
    for server in ["alpha", "beta"] {
        let r = c.call(&format!("{server}_data"), json!({})).await;
        assert_eq!(text(&r), format!("data from {server}"), "{r}");
        let refresh = format!("{server}_refresh");
        let r = c.call(&refresh, json!({})).await;
        assert_eq!(text(&r), format!("{refresh} on {server}"), "{r}");
    }
    // A name both servers with views have cannot be told apart: the error names both ways.
    let r = c.call("reset", json!({})).await;
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("alpha:reset") && message.contains("beta:reset"),
        "{r}"
    );
    let r = c.call("beta:reset", json!({})).await;
    assert_eq!(text(&r), "reset on beta", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn view_only_tools_are_never_searched() {
    let Some(peers) = Peers::get() else { return };
    let caps = json!({"extensions": {UI: {"mimeTypes": [MIME]}}});
    let servers = json!({"alpha": widget(&peers, "alpha"), "beta": widget(&peers, "beta")});
    let mut hub = serve_config(servers, Some(json!({"toolSearch": {"mode": "on"}}))).await;
    let c = &mut hub.client;
    c.initialize_as(caps, "apps-host").await;
    let mut hits = Vec::new();
    let deadline = std::time::Instant::now() + WAIT;
    // Until both servers are up, the search knows only some of their tools.
    while hits.len() < 4 && std::time::Instant::now() < deadline {
        let r = c
            .call(
                "search_tools",
                json!({"query": "refreshes the widget; widget data; show widget", "limit": 50}),
            )
            .await;
        hits = r["result"]["structuredContent"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"))
            .iter()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let hits: Vec<&str> = hits.iter().map(String::as_str).collect();
    assert!(
        hits.contains(&"alpha:alpha_data") && hits.contains(&"beta:show_widget"),
        "{hits:?}"
    );
    assert_no_view_only(&hits);
    assert_no_view_only(&names(&c.list_tools().await));
    // Callable all the same.
    let r = c
        .call(
            "call_tool",
            json!({"name": "alpha:alpha_refresh", "arguments": {}}),
        )
        .await;
    assert_eq!(text(&r), "alpha_refresh on alpha", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_extension_sees_no_ui_metadata() {
    let Some(peers) = Peers::get() else { return };
    let mut hub = hub(&peers, json!({"toolSearch": {"mode": "off"}}), json!({})).await;
    let c = &mut hub.client;
    assert!(declared_to(c, "alpha").await.get("extensions").is_none());
    let tools = c.list_tools().await;
    let listed = names(&tools);
    assert!(listed.contains(&"alpha:show_widget"), "{listed:?}");
    assert_no_view_only(&listed);
    for t in &tools {
        let meta = &t["_meta"];
        assert!(
            meta.get("ui").is_none() && meta.get("ui/resourceUri").is_none(),
            "{t}"
        );
    }
}

/// A 2026-07-28 `tools/list` declaring `capabilities` in its `_meta`: the tools listed.
async fn list_2026(c: &mut Client, capabilities: Value) -> Vec<Value> {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "modern-host", "version": "1"},
    });
    let r = c.request("tools/list", json!({"_meta": meta})).await;
    r["result"]["tools"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2026_client_declares_the_extension_per_request() {
    let Some(peers) = Peers::get() else { return };
    let servers = json!({"alpha": widget(&peers, "alpha"), "beta": widget(&peers, "beta")});
    let mut hub = serve_config(servers, Some(json!({"toolSearch": {"mode": "off"}}))).await;
    let c = &mut hub.client;
    let apps = json!({"extensions": {UI: {"mimeTypes": [MIME]}}});
    let deadline = std::time::Instant::now() + WAIT;
    let mut tools = list_2026(c, apps.clone()).await;
    while names(&tools).len() < 6 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        tools = list_2026(c, apps.clone()).await;
    }
    let show = tools.iter().find(|t| t["name"] == "beta:show_widget");
    assert_eq!(
        show.map(|t| &t["_meta"]["ui"]["resourceUri"]),
        Some(&json!("ui://beta/widget/main.html")),
        "{tools:?}"
    );
    assert_no_view_only(&names(&tools));
    let plain = list_2026(c, json!({})).await;
    assert_eq!(names(&plain), names(&tools));
    assert!(
        plain.iter().all(|t| t["_meta"].get("ui").is_none()),
        "{plain:?}"
    );
}

/// Chromium, when it is installed (the headless tests skip otherwise).
pub(crate) fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|p| p.is_file())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_view_renders_in_headless_chromium_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let Some(chromium) = chromium() else {
        eprintln!("SKIPPED: no chromium on PATH (Debian: apt-get install chromium)");
        return;
    };
    let sc = Scratch::new();
    let servers = json!({"alpha": widget(&peers, "alpha"), "beta": widget(&peers, "beta")});
    let cfg = sc.servers(servers, Some(json!({"toolSearch": {"mode": "off"}})));
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/apps/browser_host.mjs");
    let dir = peers.vars["OPENPACT_PEERS_DIR"].as_str().unwrap();
    let state = state_dir(&cfg);
    for server in ["alpha", "beta"] {
        let tool = format!("{server}:show_widget");
        let mut cmd = tokio::process::Command::new(&peers.command("PEER_NODE")[0]);
        cmd.args([s(&host), dir, s(&chromium), &tool, "--", OPENPACT])
            .args(["--config", s(&cfg), "--state-dir", s(&state), "serve"])
            .stdin(std::process::Stdio::null());
        let ran = Ran::of(cmd, "browser_host.mjs", Duration::from_secs(120)).await;
        assert_eq!(ran.code, Some(0), "{ran}");
        let v = ran.json();
        assert_eq!(v["uri"], format!("ui://{server}/widget/main.html"), "{v}");
        // The view was handed the result of the tool that opened it, and its button's call,
        // by the name the view knows, came back from its own server.
        assert_eq!(v["view"]["opened"], format!("{server} widget shown"), "{v}");
        assert_eq!(v["view"]["data"], format!("data from {server}"), "{v}");
        assert_eq!(v["calls"], json!([format!("{server}_data")]), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_view_read_names_a_permission_that_works() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let servers = json!({"alpha": widget(&peers, "alpha"), "beta": widget(&peers, "beta")});
    let openpact = json!({"toolSearch": {"mode": "off"}, "permissions": {"default": "deny"}});
    let cfg = sc.servers(servers, Some(openpact));
    let cli = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new(OPENPACT);
        cmd.args(["--config", s(&cfg), "--state-dir", s(&state_dir(&cfg))])
            .args(args);
        Ran::of(cmd, args.join(" "), WAIT)
    };
    // A host's read of alpha's view on a fresh hub of this config.
    let read_view = || async {
        let mut hub = crate::support::serve(&cfg).await;
        let c = &mut hub.client;
        c.initialize_as(
            json!({"extensions": {UI: {"mimeTypes": [MIME]}}}),
            "apps-host",
        )
        .await;
        wait_for_tool(c, "beta:client_caps", WAIT).await;
        let r = c
            .request(
                "resources/read",
                json!({"uri": "ui://alpha/widget/main.html"}),
            )
            .await;
        (hub, r)
    };
    {
        let (_hub, r) = read_view().await;
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("openpact permissions allow alpha:ui://widget/main.html"),
            "{r}"
        );
    }
    // The advice, and the same for a view-only tool (which `openpact tools` does not list).
    for name in ["alpha:ui://widget/main.html", "alpha:alpha_refresh"] {
        let ran = cli(&["permissions", "allow", name]).await;
        assert_eq!(ran.code, Some(0), "{ran}");
    }
    let (mut hub, r) = read_view().await;
    let c = &mut hub.client;
    assert!(
        r["result"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("alpha widget")),
        "{r}"
    );
    let r = c.call("alpha_refresh", json!({})).await;
    assert_eq!(text(&r), "alpha_refresh on alpha", "{r}");
    // Only what was allowed: beta's view under the same own URI is another server's.
    let r = c
        .request(
            "resources/read",
            json!({"uri": "ui://beta/widget/main.html"}),
        )
        .await;
    assert!(r["error"].is_object(), "{r}");
}
