//! The capabilities the hub declares for its servers, and resources: merged and paginated,
//! a URI two servers share, and reads routed by URI and by template.

use super::{
    expect_no_update, expect_update, initialize_with, ready_hub, two_ready, two_servers,
    until_tools,
};
use crate::support::{Scratch, WAIT, error_code, fixture, serve_config, text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_cover_the_surface_of_ready_servers() {
    let mut hub = two_ready(json!({})).await;
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
    let mut hub = serve_config(json!({}), None).await;
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
    let mut hub = serve_config(json!({"bad": fixture(&["--exit-at-start", "1"])}), None).await;
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

    let (resources, pages) = c.list_pages("resources/list", "resources").await;
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

    let (templates, _) = c
        .list_pages("resources/templates/list", "resourceTemplates")
        .await;
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
    let mut hub = two_ready(json!({})).await;
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
