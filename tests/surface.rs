//! The MCP surface beyond tools, through the hub: resources (merged, paginated, routed by URI
//! and template, subscriptions), prompts, completion, logging, progress, server→client
//! requests (sampling, elicitation, roots), `list_changed`, state replayed after a restart,
//! and the CLI commands for resources and prompts.

use crate::support::{Client, Hub, OPENPACT, Scratch, WAIT, fixture, serve, text};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::process::Command;

/// How long "nothing arrives" is watched for. Notifications caused by a tool call reach the
/// client before its response, so this is a safety margin rather than a race.
const QUIET: Duration = Duration::from_millis(500);

/// Two fixture servers, `a` then `b` (with distinct `serverInfo` names).
fn two_servers(s: &Scratch, openpact: Option<Value>) -> std::path::PathBuf {
    s.servers(
        json!({"a": fixture(&["--name", "fa"]), "b": fixture(&["--name", "fb"])}),
        openpact,
    )
}

/// `initialize` declaring `capabilities`, then `notifications/initialized`; the result.
async fn initialize_with(c: &mut Client, capabilities: Value) -> Value {
    let r = c
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                   "clientInfo": {"name": "surface-test", "version": "0"}}),
        )
        .await;
    assert!(r.get("result").is_some(), "initialize failed: {r}");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    r["result"].clone()
}

/// Every server→client capability the hub can bridge.
fn all_client_caps() -> Value {
    json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})
}

/// The names of all tools, following `nextCursor`; None when the list changed between pages
/// (the hub then rejects the stale cursor, as it should).
async fn tool_names(c: &mut Client) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let mut params = json!({});
    loop {
        let r = c.request("tools/list", params).await;
        if r["error"]["code"] == -32602 {
            return None;
        }
        let tools = r["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in {r}"));
        names.extend(
            tools
                .iter()
                .filter_map(|t| t["name"].as_str().map(String::from)),
        );
        match r["result"].get("nextCursor").and_then(Value::as_str) {
            Some(cursor) => params = json!({"cursor": cursor}),
            None => return Some(names),
        }
    }
}

/// Lists tools until every name in `want` is served; panics after `WAIT`.
async fn until_tools(c: &mut Client, want: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let names = tool_names(c).await.unwrap_or_default();
        if want.iter().all(|w| names.iter().any(|n| n == w)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{want:?} not all served within {WAIT:?}; tools: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts the hub on `cfg`, initializes with `capabilities` and waits for `want` tools.
async fn ready_hub(cfg: &Path, capabilities: Value, want: &[&str]) -> Hub {
    let mut hub = serve(cfg).await;
    initialize_with(&mut hub.client, capabilities).await;
    until_tools(&mut hub.client, want).await;
    hub
}

/// Sends a request without waiting; returns its id.
async fn send_request(c: &mut Client, method: &str, params: Value) -> Value {
    let id = json!(c.next_id());
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .await;
    id
}

/// Sends a `tools/call` without waiting; returns its id.
async fn send_call(c: &mut Client, name: &str, arguments: Value) -> Value {
    send_request(
        c,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await
}

fn error_code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected a JSON-RPC error, got {r}"))
}

fn is_tool_error(r: &Value) -> bool {
    r["result"]["isError"] == json!(true)
}

/// All resources (or templates), following `nextCursor`; also the number of pages.
async fn list_all(c: &mut Client, method: &str, field: &str) -> (Vec<Value>, usize) {
    let mut out = Vec::new();
    let mut params = json!({});
    let mut pages = 0;
    loop {
        let r = c.request(method, params).await;
        pages += 1;
        let items = r["result"][field]
            .as_array()
            .unwrap_or_else(|| panic!("no {field} in {r}"));
        out.extend(items.iter().cloned());
        match r["result"].get("nextCursor").and_then(Value::as_str) {
            Some(cursor) => params = json!({"cursor": cursor}),
            None => return (out, pages),
        }
        assert!(pages < 100, "{method} never ends");
    }
}

/// Waits for a `notifications/resources/updated` for `uri`; other updates are failures.
async fn expect_update(c: &mut Client, uri: &str, limit: Duration) {
    let n = c
        .wait_for("notifications/resources/updated", limit)
        .await
        .unwrap_or_else(|| panic!("no resources/updated for {uri} within {limit:?}"));
    assert_eq!(n["params"]["uri"], uri, "{n}");
}

async fn expect_no_update(c: &mut Client, why: &str) {
    if let Some(n) = c.wait_for("notifications/resources/updated", QUIET).await {
        panic!("{why}, yet the client got {n}");
    }
}

// ---------------------------------------------------------------------------------------
// initialize
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_cover_the_surface_of_ready_servers() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    // Both servers are ready now: what the hub declares comes from what they offer.
    let caps = initialize_with(&mut hub.client, json!({})).await["capabilities"].clone();
    assert_eq!(caps["tools"]["listChanged"], true, "{caps}");
    assert_eq!(caps["resources"]["subscribe"], true, "{caps}");
    assert_eq!(caps["resources"]["listChanged"], true, "{caps}");
    assert_eq!(caps["prompts"]["listChanged"], true, "{caps}");
    assert!(caps["completions"].is_object(), "{caps}");
    assert!(caps["logging"].is_object(), "{caps}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_of_an_empty_hub_are_tools_only() {
    let s = Scratch::new();
    let cfg = s.servers(json!({}), None);
    let mut hub = serve(&cfg).await;
    let caps = initialize_with(&mut hub.client, json!({})).await["capabilities"].clone();
    assert!(caps["tools"].is_object(), "{caps}");
    for absent in ["resources", "prompts", "completions", "logging"] {
        assert!(caps.get(absent).is_none(), "{absent} declared: {caps}");
    }
    // And the lists it does not declare are simply empty, not errors.
    let r = hub.client.request("resources/list", json!({})).await;
    assert_eq!(r["result"]["resources"], json!([]), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_once_the_only_server_failed_are_tools_only() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"bad": fixture(&["--exit-at-start", "1"])}), None);
    let mut hub = serve(&cfg).await;
    initialize_with(&mut hub.client, json!({})).await;
    // `tools/list` waits until no server is starting any more.
    assert_eq!(hub.client.list_tools().await, Vec::<Value>::new());
    let deadline = Instant::now() + WAIT;
    while !hub.stderr().contains("failed to start") {
        assert!(Instant::now() < deadline, "{}", hub.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let caps = initialize_with(&mut hub.client, json!({})).await["capabilities"].clone();
    assert!(caps["tools"].is_object(), "{caps}");
    for absent in ["resources", "prompts", "completions", "logging"] {
        assert!(caps.get(absent).is_none(), "{absent} declared: {caps}");
    }
}

// ---------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_are_merged_paginated_and_a_shared_uri_is_warned_about_once() {
    let s = Scratch::new();
    let cfg = two_servers(&s, Some(json!({"pageSize": 2})));
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    let (resources, pages) = list_all(c, "resources/list", "resources").await;
    let uris: Vec<&str> = resources.iter().filter_map(|r| r["uri"].as_str()).collect();
    // Each server lists static/1..3; a URI is served once, by the first server.
    assert_eq!(
        uris,
        [
            "fixture://static/1",
            "fixture://static/2",
            "fixture://static/3"
        ],
        "{resources:?}"
    );
    assert_eq!(pages, 2, "3 resources at 2 per page");
    // Entries are passed through verbatim.
    assert_eq!(
        resources[0],
        json!({"uri": "fixture://static/1", "name": "static-1", "mimeType": "text/plain"})
    );

    let first = c.request("resources/list", json!({})).await;
    assert_eq!(first["result"]["resources"].as_array().unwrap().len(), 2);
    let r = c
        .request("resources/list", json!({"cursor": "not-a-cursor"}))
        .await;
    assert_eq!(error_code(&r), -32602, "{r}");

    let (templates, _) = list_all(c, "resources/templates/list", "resourceTemplates").await;
    assert_eq!(
        templates,
        [json!({"uriTemplate": "fixture://item/{id}", "name": "item"})]
    );

    // A later rebuild of the catalogue (a tool list change) does not warn again.
    assert_eq!(text(&c.call("b:change_tools", json!({})).await), "changed");
    until_tools(c, &["b:late_tool"]).await;

    let log = hub.stderr();
    // One line per kind for the pair of servers, naming every shared key.
    for warning in [
        "servers 'a' and 'b' both expose 3 resources ('fixture://static/1', 'fixture://static/2', 'fixture://static/3'); 'a' serves them",
        "servers 'a' and 'b' both expose resource template 'fixture://item/{id}'; 'a' serves it",
    ] {
        assert_eq!(
            log.matches(&warning).count(),
            1,
            "expected one warning {warning:?}; hub log:\n{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_is_reported_once_servers_have_started_with_its_final_winner() {
    // `slow` comes first in config order but is ready last: until it is, `b` serves the
    // shared URIs. That interim winner must not be reported, only the final one.
    let s = Scratch::new();
    let mut servers = serde_json::Map::new();
    servers.insert("slow".into(), fixture(&["--init-delay-ms", "400"]));
    servers.insert("b".into(), fixture(&[]));
    servers.insert("c".into(), fixture(&[]));
    let cfg = s.servers(Value::Object(servers), None);
    let hub = ready_hub(&cfg, json!({}), &["slow:echo", "b:echo", "c:echo"]).await;
    let key = "both expose 3 resources ('fixture://static/1'";
    let deadline = Instant::now() + WAIT;
    while hub.stderr().matches(key).count() < 2 {
        assert!(Instant::now() < deadline, "{}", hub.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let log = hub.stderr();
    for other in ["b", "c"] {
        let warning = format!(
            "servers 'slow' and '{other}' both expose 3 resources ('fixture://static/1', 'fixture://static/2', 'fixture://static/3'); 'slow' serves them"
        );
        assert_eq!(
            log.matches(&warning).count(),
            1,
            "{warning:?}; hub log:\n{log}"
        );
    }
    assert!(
        !log.contains("'b' serves it"),
        "interim winner reported; hub log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_uri_goes_to_the_first_server_in_config_order() {
    // The fixtures serve identical resources, so which server got a request is seen through
    // subscriptions: only the server that was subscribed announces updates.
    for (first, second) in [("a", "b"), ("b", "a")] {
        let s = Scratch::new();
        let mut servers = serde_json::Map::new();
        servers.insert(first.into(), fixture(&[]));
        servers.insert(second.into(), fixture(&[]));
        let cfg = s.servers(Value::Object(servers), None);
        let want = [format!("{first}:echo"), format!("{second}:echo")];
        let want: Vec<&str> = want.iter().map(String::as_str).collect();
        let mut hub = ready_hub(&cfg, json!({}), &want).await;
        let c = &mut hub.client;

        for uri in ["fixture://static/1", "fixture://item/42"] {
            let r = c.request("resources/subscribe", json!({"uri": uri})).await;
            assert_eq!(r["result"], json!({}), "{r}");
            let t = c
                .call(&format!("{second}:touch"), json!({"uri": uri}))
                .await;
            assert_eq!(text(&t), "touched");
            expect_no_update(
                c,
                &format!("{uri} belongs to '{first}' (first in config order)"),
            )
            .await;
            c.call(&format!("{first}:touch"), json!({"uri": uri})).await;
            expect_update(c, uri, WAIT).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_read_routes_by_uri_and_by_template() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    for uri in ["fixture://static/2", "fixture://item/42"] {
        let r = c.request("resources/read", json!({"uri": uri})).await;
        assert_eq!(
            r["result"]["contents"],
            json!([{"uri": uri, "mimeType": "text/plain", "text": format!("content of {uri}")}]),
            "{r}"
        );
    }
    // Two servers offer resources and none lists or templates this URI: the hub says so.
    let r = c
        .request("resources/read", json!({"uri": "nope://x"}))
        .await;
    assert_eq!(error_code(&r), -32002, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("nope://x"),
        "{r}"
    );
    let r = c.request("resources/read", json!({})).await;
    assert_eq!(error_code(&r), -32602, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_only_resource_server_gets_every_uri() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"b": fixture(&[])}), None);
    let mut hub = ready_hub(&cfg, json!({}), &["b:echo"]).await;
    let c = &mut hub.client;
    let r = c
        .request("resources/read", json!({"uri": "fixture://item/7"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["text"], "content of fixture://item/7",
        "{r}"
    );
    // Unknown to the catalogue, so it goes to the only server, whose own error (with its
    // `data`) comes back untouched.
    let r = c
        .request("resources/read", json!({"uri": "nope://x"}))
        .await;
    assert_eq!(error_code(&r), -32002, "{r}");
    assert_eq!(r["error"]["data"], json!({"uri": "nope://x"}), "{r}");
}

// ---------------------------------------------------------------------------------------
// Prompts and completion
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_are_namespaced_and_routed_by_name() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    let r = c.request("prompts/list", json!({})).await;
    let prompts = r["result"]["prompts"].as_array().unwrap();
    let names: Vec<&str> = prompts.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["a:greet", "a:plain", "b:greet", "b:plain"], "{r}");
    // Everything but the name is the server's own.
    assert_eq!(
        prompts[2]["arguments"],
        json!([{"name": "name", "description": "Who to greet", "required": true}])
    );

    let r = c
        .request(
            "prompts/get",
            json!({"name": "b:greet", "arguments": {"name": "Bo"}}),
        )
        .await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"], "Hello, Bo!",
        "{r}"
    );
    let r = c.request("prompts/get", json!({"name": "a:plain"})).await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"], "This is a plain prompt.",
        "{r}"
    );
    for unknown in ["c:greet", "a:nope", "greet"] {
        let r = c
            .request(
                "prompts/get",
                json!({"name": unknown, "arguments": {"name": "x"}}),
            )
            .await;
        assert_eq!(error_code(&r), -32602, "{unknown}: {r}");
    }
    // The server's own invalid-params error passes through.
    let r = c
        .request("prompts/get", json!({"name": "a:greet", "arguments": {}}))
        .await;
    assert_eq!(error_code(&r), -32602, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("name"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portable_prompt_names_are_listed_and_both_forms_work() {
    let s = Scratch::new();
    let cfg = two_servers(&s, Some(json!({"toolNames": "portable"})));
    let mut hub = ready_hub(&cfg, json!({}), &["a__echo", "b__echo"]).await;
    let c = &mut hub.client;

    let r = c.request("prompts/list", json!({})).await;
    let names: Vec<&str> = r["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["a__greet", "a__plain", "b__greet", "b__plain"]);
    for name in ["a__greet", "a:greet"] {
        let r = c
            .request(
                "prompts/get",
                json!({"name": name, "arguments": {"name": "Pat"}}),
            )
            .await;
        assert_eq!(
            r["result"]["messages"][0]["content"]["text"], "Hello, Pat!",
            "{name}: {r}"
        );
        let r = c
            .request(
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": name},
                       "argument": {"name": "name", "value": "c"}}),
            )
            .await;
        assert_eq!(
            r["result"]["completion"]["values"],
            json!(["carol"]),
            "{name}: {r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_routes_prompts_by_name_and_resources_by_template() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    let complete = |reference: Value, value: &str| json!({"ref": reference, "argument": {"name": "name", "value": value}});
    let r = c
        .request(
            "completion/complete",
            complete(json!({"type": "ref/prompt", "name": "a:greet"}), "b"),
        )
        .await;
    assert_eq!(r["result"]["completion"]["values"], json!(["bob"]), "{r}");
    let r = c
        .request(
            "completion/complete",
            complete(json!({"type": "ref/prompt", "name": "b:greet"}), ""),
        )
        .await;
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["alice", "bob", "carol"]),
        "{r}"
    );
    let r = c
        .request(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "fixture://item/{id}"},
                   "argument": {"name": "id", "value": ""}}),
        )
        .await;
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["1", "2", "3"]),
        "{r}"
    );

    let r = c
        .request(
            "completion/complete",
            complete(json!({"type": "ref/prompt", "name": "zz:greet"}), ""),
        )
        .await;
    assert_eq!(error_code(&r), -32602, "{r}");
    let r = c
        .request(
            "completion/complete",
            complete(json!({"type": "ref/nothing"}), ""),
        )
        .await;
    assert_eq!(error_code(&r), -32602, "{r}");
}

// ---------------------------------------------------------------------------------------
// Logging
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_level_filters_log_messages_and_loggers_name_the_server() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    let r = c
        .request("logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");

    c.call(
        "a:log",
        json!({"level": "error", "message": "disk on fire"}),
    )
    .await;
    let n = c
        .wait_for("notifications/message", WAIT)
        .await
        .expect("an error-level log message");
    assert_eq!(
        n["params"],
        json!({"level": "error", "logger": "a/fixture", "data": "disk on fire"}),
        "{n}"
    );
    c.call("b:log", json!({"level": "critical", "message": "from b"}))
        .await;
    let n = c
        .wait_for("notifications/message", WAIT)
        .await
        .expect("a critical log message");
    assert_eq!(n["params"]["logger"], "b/fixture", "{n}");
    assert_eq!(n["params"]["level"], "critical", "{n}");

    c.call("a:log", json!({"level": "info", "message": "chatter"}))
        .await;
    c.call("b:log", json!({"level": "debug", "message": "chatter"}))
        .await;
    if let Some(n) = c.wait_for("notifications/message", QUIET).await {
        panic!("below the level, yet delivered: {n}");
    }

    for bad in [json!({"level": "loud"}), json!({}), json!({"level": 3})] {
        let r = c.request("logging/setLevel", bad.clone()).await;
        assert_eq!(error_code(&r), -32602, "{bad}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_debug_every_level_arrives() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;
    let r = c
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    let levels = [
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    for level in levels {
        c.call(
            "a:log",
            json!({"level": level, "message": format!("at {level}")}),
        )
        .await;
        let n = c
            .wait_for("notifications/message", WAIT)
            .await
            .unwrap_or_else(|| panic!("no {level} message"));
        assert_eq!(
            n["params"],
            json!({"level": level, "logger": "a/fixture", "data": format!("at {level}")}),
            "{n}"
        );
    }
    assert!(
        c.inbox
            .iter()
            .all(|m| m["method"] != "notifications/message")
    );
}

// ---------------------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reaches_the_requester_under_its_own_token() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    let args = json!({"steps": 4, "ms": 20});
    let progress_call = |server: &str, token: Option<Value>| {
        let mut params = json!({"name": format!("{server}:progress"), "arguments": args});
        if let Some(t) = token {
            params["_meta"] = json!({"progressToken": t});
        }
        params
    };
    // (id, token) of every call, all in flight at once.
    let mut calls: Vec<(Value, Option<Value>)> = Vec::new();
    for (server, token) in [
        ("a", Some(json!("x"))),
        ("b", Some(json!("y"))),
        ("a", Some(json!(7))),
        ("a", Some(json!("same"))),
        ("b", Some(json!("same"))),
        ("b", None),
    ] {
        let id = send_request(c, "tools/call", progress_call(server, token.clone())).await;
        calls.push((id, token));
    }

    // Everything in arrival order until the last response.
    let mut seen: Vec<Value> = c.inbox.drain(..).collect();
    let deadline = Instant::now() + WAIT;
    let answered =
        |seen: &[Value], id: &Value| seen.iter().any(|m| m["id"] == *id && m["method"].is_null());
    while !calls.iter().all(|(id, _)| answered(&seen, id)) {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = c
            .recv(left)
            .await
            .unwrap_or_else(|| panic!("not every call answered; got {seen:?}"));
        seen.push(m);
    }

    let response_at = |id: &Value| {
        seen.iter()
            .position(|m| m["id"] == *id && m["method"].is_null())
            .unwrap()
    };
    for (id, _) in &calls {
        let r = &seen[response_at(id)];
        assert_eq!(text(r), "done 4", "{r}");
    }
    let progress: Vec<(usize, &Value)> = seen
        .iter()
        .enumerate()
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .map(|(i, m)| (i, &m["params"]))
        .collect();
    // Only tokens the client used come back, with their JSON type intact.
    for (_, p) in &progress {
        let t = &p["progressToken"];
        assert!(
            [json!("x"), json!("y"), json!(7), json!("same")].contains(t),
            "a token the client never used: {p}"
        );
    }
    for (id, token) in &calls[..3] {
        let token = token.as_ref().unwrap();
        let mine: Vec<&(usize, &Value)> = progress
            .iter()
            .filter(|(_, p)| p["progressToken"] == *token)
            .collect();
        let values: Vec<u64> = mine
            .iter()
            .map(|(_, p)| p["progress"].as_u64().unwrap())
            .collect();
        assert_eq!(values, [1, 2, 3, 4], "token {token}: {mine:?}");
        assert!(
            mine.iter().all(|(_, p)| p["total"] == 4),
            "token {token}: {mine:?}"
        );
        let answer = response_at(id);
        assert!(
            mine.iter().all(|(i, _)| *i < answer),
            "progress for {token} after its response: {seen:?}"
        );
    }
    // Two requests shared a token: each still got its own four, before its answer.
    let same: Vec<usize> = progress
        .iter()
        .filter(|(_, p)| p["progressToken"] == "same")
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(same.len(), 8, "{seen:?}");
    let last_answer = response_at(&calls[3].0).max(response_at(&calls[4].0));
    let first_answer = response_at(&calls[3].0).min(response_at(&calls[4].0));
    assert!(same.iter().all(|i| *i < last_answer), "{seen:?}");
    assert!(
        same.iter().filter(|i| **i < first_answer).count() >= 4,
        "{seen:?}"
    );
    assert_eq!(
        progress.len(),
        4 * 5,
        "the call without a token got progress"
    );
}

// ---------------------------------------------------------------------------------------
// Server→client requests
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_is_forwarded_and_the_answer_routed_back() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, all_client_caps(), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    let call = send_call(c, "a:sample", json!({"prompt": "hi"})).await;
    let req = c
        .wait_for("sampling/createMessage", WAIT)
        .await
        .expect("the sampling request reaches the client");
    assert_eq!(
        req["params"]["messages"][0]["content"]["text"], "hi",
        "{req}"
    );
    assert_eq!(req["params"]["maxTokens"], 100, "{req}");
    // The hub's own id, not the server's ("srv-N" from the fixture).
    assert!(req["id"].is_number() || req["id"].is_string(), "{req}");
    assert!(
        !req["id"].as_str().unwrap_or("").starts_with("srv-"),
        "{req}"
    );
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "hello from the client"},
                        "model": "test-model", "stopReason": "endTurn"});
    c.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": answer}))
        .await;
    let r = c.response(&call).await;
    assert!(!is_tool_error(&r), "{r}");
    let got: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(got, answer, "the server sees the client's answer verbatim");

    // An answer to no request of the hub's is dropped, and harms nothing.
    c.send(&json!({"jsonrpc": "2.0", "id": 987_654, "result": {}}))
        .await;
    // An error answer reaches the server as an error.
    let call = send_call(c, "a:sample", json!({"prompt": "again"})).await;
    let req = c.wait_for("sampling/createMessage", WAIT).await.unwrap();
    c.send(&json!({"jsonrpc": "2.0", "id": req["id"],
                   "error": {"code": -1, "message": "the user declined"}}))
        .await;
    let r = c.response(&call).await;
    assert!(is_tool_error(&r), "{r}");
    assert_eq!(text(&r), "the user declined");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_and_roots_are_forwarded() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, all_client_caps(), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    let call = send_call(c, "b:elicit", json!({"message": "Proceed?"})).await;
    let req = c
        .wait_for("elicitation/create", WAIT)
        .await
        .expect("the elicitation request reaches the client");
    assert_eq!(req["params"]["message"], "Proceed?", "{req}");
    assert_eq!(
        req["params"]["requestedSchema"]["required"],
        json!(["answer"])
    );
    let answer = json!({"action": "accept", "content": {"answer": "yes"}});
    c.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": answer}))
        .await;
    let r = c.response(&call).await;
    assert!(!is_tool_error(&r), "{r}");
    assert_eq!(serde_json::from_str::<Value>(&text(&r)).unwrap(), answer);

    let call = send_call(c, "a:roots", json!({})).await;
    let req = c
        .wait_for("roots/list", WAIT)
        .await
        .expect("the roots request reaches the client");
    let answer = json!({"roots": [{"uri": "file:///tmp", "name": "tmp"}]});
    c.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": answer}))
        .await;
    let r = c.response(&call).await;
    assert!(!is_tool_error(&r), "{r}");
    assert_eq!(serde_json::from_str::<Value>(&text(&r)).unwrap(), answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_capability_servers_are_refused_and_the_client_is_not_asked() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;
    for (tool, args, cap) in [
        ("a:sample", json!({"prompt": "hi"}), "sampling"),
        ("b:elicit", json!({"message": "ok?"}), "elicitation"),
        ("a:roots", json!({}), "roots"),
    ] {
        let r = c.call(tool, args).await;
        assert!(is_tool_error(&r), "{tool}: {r}");
        let msg = text(&r);
        assert!(msg.contains(cap), "{tool}: {msg}");
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    while let Some(m) = c.recv(Duration::from_millis(50)).await {
        c.inbox.push_back(m);
    }
    for method in ["sampling/createMessage", "elicitation/create", "roots/list"] {
        assert!(
            c.inbox.iter().all(|m| m["method"] != method),
            "the client was asked {method} without declaring it: {:?}",
            c.inbox
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sampling_from_two_servers_gets_each_its_own_answer() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, all_client_caps(), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    // Both fixtures number their requests srv-1, srv-2…: the ids collide upstream.
    let call_a = send_call(c, "a:sample", json!({"prompt": "from-a"})).await;
    let call_b = send_call(c, "b:sample", json!({"prompt": "from-b"})).await;
    let mut asked: HashMap<String, Value> = HashMap::new();
    for _ in 0..2 {
        let req = c
            .wait_for("sampling/createMessage", WAIT)
            .await
            .expect("two sampling requests");
        let prompt = req["params"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(asked.insert(prompt, req["id"].clone()).is_none(), "{req}");
    }
    assert_ne!(asked["from-a"], asked["from-b"], "the hub reused an id");
    // Answer in the other order, each with text naming the request it answers.
    for prompt in ["from-b", "from-a"] {
        let answer = json!({"role": "assistant", "model": "m",
                            "content": {"type": "text", "text": format!("answer to {prompt}")}});
        c.send(&json!({"jsonrpc": "2.0", "id": asked[prompt], "result": answer}))
            .await;
    }
    for (call, prompt) in [(call_a, "from-a"), (call_b, "from-b")] {
        let r = c.response(&call).await;
        let got: Value = serde_json::from_str(&text(&r)).unwrap();
        assert_eq!(got["content"]["text"], format!("answer to {prompt}"), "{r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_answer_meant_for_a_crashed_server_does_not_reach_its_successor() {
    let s = Scratch::new();
    let cfg = two_servers(
        &s,
        Some(json!({"restart": {"initialBackoff": "50ms", "maxBackoff": "200ms"}})),
    );
    let mut hub = ready_hub(&cfg, all_client_caps(), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    // The first process of `a` asks (its id srv-1); the client has not answered yet when
    // `a` crashes.
    let first = send_call(c, "a:sample", json!({"prompt": "first"})).await;
    let stale = c.wait_for("sampling/createMessage", WAIT).await.unwrap();
    let r = c.call("a:crash", json!({})).await;
    assert_eq!(error_code(&r), -32010, "{r}");
    let r = c.response(&first).await;
    assert_eq!(error_code(&r), -32010, "the call died with its server: {r}");
    let deadline = Instant::now() + WAIT;
    while c.call("a:echo", json!({"message": "x"})).await["result"].is_null() {
        assert!(Instant::now() < deadline, "a never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The new process asks too — under the same upstream id srv-1.
    let second = send_call(c, "a:sample", json!({"prompt": "second"})).await;
    let fresh = c.wait_for("sampling/createMessage", WAIT).await.unwrap();
    assert_eq!(
        fresh["params"]["messages"][0]["content"]["text"], "second",
        "{fresh}"
    );
    assert_ne!(fresh["id"], stale["id"], "the hub reused an id");
    let answer = |t: &str| json!({"role": "assistant", "model": "m", "content": {"type": "text", "text": t}});
    // The answer to the dead process's question arrives late; it must go nowhere.
    c.send(&json!({"jsonrpc": "2.0", "id": stale["id"], "result": answer("stale")}))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.send(&json!({"jsonrpc": "2.0", "id": fresh["id"], "result": answer("fresh")}))
        .await;
    let r = c.response(&second).await;
    let got: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(
        got["content"]["text"], "fresh",
        "the new process got the answer meant for the crashed one: {r}"
    );
}

// ---------------------------------------------------------------------------------------
// Subscriptions and list changes
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_reach_the_client_only_while_it_is_subscribed() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;
    let uri = "fixture://static/1";

    let r = c.request("resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(r["result"], json!({}), "{r}");
    c.call("a:touch", json!({"uri": uri})).await;
    expect_update(c, uri, WAIT).await;

    c.call("a:touch", json!({"uri": "fixture://static/2"}))
        .await;
    expect_no_update(c, "static/2 was never subscribed").await;

    // Subscribing twice is one subscription: one unsubscribe ends it.
    let r = c.request("resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(r["result"], json!({}), "{r}");
    let r = c
        .request("resources/unsubscribe", json!({"uri": uri}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    c.call("a:touch", json!({"uri": uri})).await;
    expect_no_update(c, "unsubscribed").await;

    // A URI no server offers cannot be subscribed to.
    let r = c
        .request("resources/subscribe", json!({"uri": "nope://x"}))
        .await;
    assert_eq!(error_code(&r), -32002, "{r}");

    // And subscribing again works again.
    c.request("resources/subscribe", json!({"uri": uri})).await;
    c.call("a:touch", json!({"uri": uri})).await;
    expect_update(c, uri, WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_adding_a_tool_is_announced_and_the_tool_works() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;
    // Let any announcements from start-up pass first.
    while c.recv(Duration::from_millis(200)).await.is_some() {}
    c.inbox.clear();

    assert_eq!(text(&c.call("a:change_tools", json!({})).await), "changed");
    assert!(
        c.wait_for("notifications/tools/list_changed", WAIT)
            .await
            .is_some(),
        "no tools/list_changed"
    );
    until_tools(c, &["a:late_tool"]).await;
    let tools = c.list_tools().await;
    assert!(
        !tools.iter().any(|t| t["name"] == "b:late_tool"),
        "b never changed"
    );
    assert_eq!(text(&c.call("a:late_tool", json!({})).await), "late");
    let r = c.call("b:late_tool", json!({})).await;
    assert_eq!(error_code(&r), -32602, "{r}");
}

// ---------------------------------------------------------------------------------------
// Restart
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_gets_the_log_level_and_subscriptions_back() {
    let s = Scratch::new();
    let cfg = two_servers(
        &s,
        Some(json!({"restart": {"initialBackoff": "50ms", "maxBackoff": "200ms"}})),
    );
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;
    let uri = "fixture://static/1";

    c.request("logging/setLevel", json!({"level": "warning"}))
        .await;
    let r = c.request("resources/subscribe", json!({"uri": uri})).await;
    assert_eq!(r["result"], json!({}), "{r}");
    c.call("a:touch", json!({"uri": uri})).await;
    expect_update(c, uri, WAIT).await;

    let r = c.call("a:crash", json!({})).await;
    assert_eq!(error_code(&r), -32010, "{r}");
    let deadline = Instant::now() + WAIT;
    loop {
        let r = c.call("a:echo", json!({"message": "back?"})).await;
        if r["result"]["content"][0]["text"] == "back?" {
            break;
        }
        assert!(Instant::now() < deadline, "a never came back: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The subscription is restored upstream (the replay may trail the server's first answer
    // by a moment, so allow a few touches).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        c.call("a:touch", json!({"uri": uri})).await;
        if let Some(n) = c
            .wait_for(
                "notifications/resources/updated",
                Duration::from_millis(200),
            )
            .await
        {
            assert_eq!(n["params"]["uri"], uri, "{n}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no resources/updated after the restart: the subscription was not replayed"
        );
    }
    c.call("a:log", json!({"level": "info", "message": "quiet"}))
        .await;
    c.call("a:log", json!({"level": "error", "message": "loud"}))
        .await;
    let n = c
        .wait_for("notifications/message", WAIT)
        .await
        .expect("the error message");
    assert_eq!(n["params"]["data"], "loud", "{n}");
    assert_eq!(n["params"]["logger"], "a/fixture", "{n}");
    if let Some(n) = c.wait_for("notifications/message", QUIET).await {
        panic!("below the level after the restart, yet delivered: {n}");
    }
}

// ---------------------------------------------------------------------------------------
// CLI
// ---------------------------------------------------------------------------------------

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `openpact --config CFG --state-dir … ARGS` with stdin, stdout and stderr not terminals.
async fn cli(s: &Scratch, cfg: &Path, args: &[&str]) -> Out {
    let mut cmd = Command::new(OPENPACT);
    cmd.arg("--config")
        .arg(cfg)
        .arg("--state-dir")
        .arg(s.path().join("state"))
        .args(args)
        .current_dir(s.path())
        .env_remove("OPENPACT_LOG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = tokio::time::timeout(WAIT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("openpact {args:?} did not finish within {WAIT:?}"))
        .unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_lists_resources_and_prompts() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);

    let out = cli(&s, &cfg, &["resources"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    for (line, uri) in lines.iter().zip([
        "fixture://static/1",
        "fixture://static/2",
        "fixture://static/3",
        "fixture://item/{id}",
    ]) {
        assert!(line.starts_with(uri), "{line:?} should list {uri}");
        assert!(line.contains("[a]"), "{line:?}: served by a");
    }
    assert_eq!(lines[4], "4 resources and templates from 2 server(s)");

    let out = cli(&s, &cfg, &["resources", "--json"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["resources"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(
        v["templates"],
        json!([{"server": "a", "definition": {"uriTemplate": "fixture://item/{id}", "name": "item"}}])
    );

    let out = cli(&s, &cfg, &["prompts"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    for (line, label) in
        lines
            .iter()
            .zip(["a:greet (name)", "a:plain", "b:greet (name)", "b:plain"])
    {
        assert!(line.starts_with(label), "{line:?} should start {label:?}");
    }
    assert!(lines[0].contains("Greet someone by name"), "{}", lines[0]);
    assert_eq!(lines[4], "4 prompts from 2 server(s)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_reads_resources_and_gets_prompts() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);

    let out = cli(&s, &cfg, &["read", "fixture://item/5"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "content of fixture://item/5\n");

    let out = cli(&s, &cfg, &["read", "fixture://static/2", "--json"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["contents"][0]["text"], "content of fixture://static/2");

    let out = cli(&s, &cfg, &["prompt", "a:greet", r#"{"name":"Z"}"#]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "# Greet someone by name\nuser: Hello, Z!\n");

    let out = cli(&s, &cfg, &["prompt", "b:nope"]).await;
    assert_eq!(out.code, Some(1), "{} / {}", out.stdout, out.stderr);
    assert!(out.stderr.contains("error -32602"), "{}", out.stderr);

    let out = cli(&s, &cfg, &["read", "nope://x"]).await;
    assert_eq!(out.code, Some(1), "{} / {}", out.stdout, out.stderr);
    assert!(out.stderr.contains("error -32002"), "{}", out.stderr);
    assert!(out.stderr.contains("nope://x"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_call_with_progress_off_a_terminal_prints_just_the_result() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let out = cli(&s, &cfg, &["call", "a:progress", r#"{"steps":3,"ms":10}"#]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "done 3\n");
    // No progress bar (or its escape codes) on a stderr that is not a terminal.
    assert!(
        !out.stderr.contains("step") && !out.stderr.contains('\u{1b}'),
        "{:?}",
        out.stderr
    );
}
