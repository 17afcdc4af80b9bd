//! The merged tool catalogue: servers in config order, tools verbatim, pagination with
//! cursors (the hub's own and the upstream's).

use super::{direct_fixture, fixture_tools};
use crate::support::{Hub, Scratch, fixture, names, ready, serve, serve_ready, text};
use serde_json::{Value, json};
use std::collections::HashSet;

/// A hub over a fixture with 30 extra tools, listed 7 to a page, once the last is listed.
async fn paged_hub() -> Hub {
    serve_ready(
        json!({"a": fixture(&["--tools", "30"])}),
        Some(json!({"pageSize": 7})),
        &["a:tool_0029"],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_merges_servers_in_config_order_and_keeps_tools_verbatim() {
    let base = fixture_tools().await;
    let s = Scratch::new();
    // `b` first: the order must be the config's, not alphabetical.
    let cfg = s.servers(
        json!({"b": fixture(&["--tools", "2"]), "a": fixture(&[])}),
        None,
    );
    let mut hub = serve(&cfg).await;
    ready(&mut hub.client, &["b:echo", "a:echo"]).await;
    let hub_tools = hub.client.list_tools().await;
    let (_fx, mut direct) = direct_fixture(&["--tools", "2"]).await;
    let b_tools = direct.list_tools().await;
    let (_fx2, mut direct2) = direct_fixture(&[]).await;
    let a_tools = direct2.list_tools().await;
    assert_eq!(b_tools.len(), base + 2);
    assert_eq!(a_tools.len(), base);

    let expected: Vec<(String, &Value)> = b_tools
        .iter()
        .map(|t| (format!("b:{}", t["name"].as_str().unwrap()), t))
        .chain(
            a_tools
                .iter()
                .map(|t| (format!("a:{}", t["name"].as_str().unwrap()), t)),
        )
        .collect();
    assert_eq!(
        names(&hub_tools),
        expected.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        "not every tool of b then every tool of a, in the servers' order"
    );
    for (hub_tool, (_, direct_tool)) in hub_tools.iter().zip(&expected) {
        let mut h = hub_tool.clone();
        let mut d = (*direct_tool).clone();
        h.as_object_mut().unwrap().remove("name");
        d.as_object_mut().unwrap().remove("name");
        assert_eq!(h, d, "tool {} changed on the way through", hub_tool["name"]);
    }
    // The add tool has an outputSchema: proof that fields beyond the basics survive.
    let add = hub_tools.iter().find(|t| t["name"] == "a:add").unwrap();
    assert_eq!(add["outputSchema"]["required"], json!(["sum"]), "{add}");
}

/// The hub runs any call as a task and follows a server's own tasks, so each tool's
/// `execution` (task support included) reaches the client as the server wrote it, and the
/// hub declares `tasks`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_keeps_the_task_support_the_hub_honours() {
    let (_fx, mut direct) = direct_fixture(&[]).await;
    let direct_tools = direct.list_tools().await;
    let find = |tools: &[Value], name: &str| -> Value {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    // What the server itself says: both declare task support.
    assert_eq!(
        find(&direct_tools, "slow")["execution"],
        json!({"taskSupport": "optional"})
    );
    assert_eq!(
        find(&direct_tools, "echo_structured")["execution"]["taskSupport"],
        "required"
    );

    let mut hub = serve_ready(json!({"a": fixture(&[])}), None, &["a:echo"]).await;
    let c = &mut hub.client;
    let tools = c.list_tools().await;
    for name in ["slow", "echo_structured"] {
        assert_eq!(
            find(&tools, &format!("a:{name}"))["execution"],
            find(&direct_tools, name)["execution"],
            "{name}"
        );
    }
    let init = c
        .request("initialize", super::initialize_params("2025-11-25"))
        .await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{init}"
    );
    // A tool that says it requires a task, of a server without tasks, still answers a
    // plain call.
    assert_eq!(
        text(&c.call("a:echo_structured", json!({"value": 1})).await),
        "1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_pages_with_cursors_and_rejects_garbage_cursors() {
    let base = fixture_tools().await;
    let mut hub = paged_hub().await;
    let c = &mut hub.client;
    let total = base + 30;
    let mut seen = Vec::new();
    let mut params = json!({});
    let mut pages = 0;
    loop {
        let r = c.request("tools/list", params).await;
        let page = r["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{r}"));
        pages += 1;
        seen.extend(names(page));
        match r["result"].get("nextCursor") {
            Some(cursor) => {
                assert_eq!(page.len(), 7, "a page before the last is not full: {r}");
                params = json!({"cursor": cursor});
            }
            None => {
                assert!(!page.is_empty() && page.len() <= 7, "{r}");
                break;
            }
        }
        assert!(pages <= total, "pagination does not end");
    }
    assert_eq!(pages, total.div_ceil(7));
    assert_eq!(seen.len(), total, "{seen:?}");
    assert_eq!(
        seen.iter().collect::<HashSet<_>>().len(),
        total,
        "a tool was listed twice: {seen:?}"
    );
    for i in 0..30 {
        assert!(
            seen.contains(&format!("a:tool_{i:04}")),
            "a:tool_{i:04} missing"
        );
    }

    for garbage in ["not-a-cursor", "ffffffffffffffff.3", ""] {
        let r = c.request("tools/list", json!({"cursor": garbage})).await;
        assert_eq!(r["error"]["code"], -32602, "cursor {garbage}: {r}");
    }
    // The session goes on.
    assert_eq!(c.list_tools().await.len(), total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_rejects_a_cursor_that_is_not_a_string() {
    let mut hub = paged_hub().await;
    let c = &mut hub.client;
    for garbage in [json!(12), json!({"offset": 7}), json!(["x"])] {
        let r = c.request("tools/list", json!({"cursor": garbage})).await;
        assert_eq!(r["error"]["code"], -32602, "cursor {garbage}: {r}");
    }
    // `null` is the same as no cursor.
    let r = c.request("tools/list", json!({"cursor": null})).await;
    assert_eq!(r["result"]["tools"][0]["name"], "a:echo", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_follows_the_upstreams_own_pagination() {
    let base = fixture_tools().await;
    let mut hub = serve_ready(
        json!({"p": fixture(&["--page-size", "5", "--tools", "23"])}),
        None,
        &["p:echo"],
    )
    .await;
    let tools = names(&hub.client.list_tools().await);
    assert_eq!(tools.len(), base + 23, "{tools:?}");
    assert_eq!(
        tools.iter().collect::<HashSet<_>>().len(),
        tools.len(),
        "{tools:?}"
    );
    for name in ["p:echo", "p:change_tools", "p:tool_0000", "p:tool_0022"] {
        assert!(tools.iter().any(|t| t == name), "{name} missing: {tools:?}");
    }
    // A tool from the last upstream page is callable.
    let r = hub.client.call("p:tool_0022", json!({"x": "last"})).await;
    assert_eq!(text(&r), "tool_0022:last");
}
