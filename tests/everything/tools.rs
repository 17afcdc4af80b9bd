//! Every server-everything tool called directly and through the hub, and URL elicitation
//! (a client declaring `elicitation.url`).

use super::normalise::{base64_decode, base64_encode};
use super::{
    Peer, QUIET, ROOT_URI, SAMPLED, TOOLS, assert_same, block_text, compare, listed_names, run_all,
    start_all,
};
use crate::support::{Peers, Scratch, WAIT};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;

/// Lists the tools until the conditional ones (registered after `initialized`) are there.
async fn settled_tools(p: &mut Peer) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    loop {
        let tools = p.list_bare("tools/list", "tools").await;
        if tools
            .iter()
            .any(|t| t["name"] == "trigger-sampling-request")
        {
            return tools;
        }
        assert!(
            Instant::now() < deadline,
            "{:?}: conditional tools never listed: {tools:#?}",
            p.side
        );
        p.pump(Duration::from_millis(200), |_| false).await;
    }
}

async fn tools_scenario(p: &mut Peer) {
    let tools = settled_tools(p).await;
    let listed: BTreeSet<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        listed,
        TOOLS.iter().map(|t| t.to_string()).collect(),
        "{:?}",
        p.side
    );
    p.record("tools/list", &json!(tools));
    let mut called = BTreeSet::new();

    let plain: &[(&str, Value)] = &[
        ("echo", json!({"message": "hello from openpact"})),
        ("get-annotated-message", json!({"messageType": "error"})),
        ("get-annotated-message", json!({"messageType": "success"})),
        (
            "get-annotated-message",
            json!({"messageType": "debug", "includeImage": true}),
        ),
        ("get-resource-links", json!({"count": 4})),
        ("get-resource-links", json!({})),
        (
            "get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 1}),
        ),
        (
            "get-resource-reference",
            json!({"resourceType": "Blob", "resourceId": 2}),
        ),
        ("get-structured-content", json!({"location": "Chicago"})),
        ("get-structured-content", json!({"location": "New York"})),
        ("get-sum", json!({"a": 2, "b": 3})),
        ("get-sum", json!({"a": -1.5, "b": 0.25})),
        ("get-tiny-image", json!({})),
        ("get-roots-list", json!({})),
        // On, then off again: the messages and updates they start are the business of the
        // logging and subscription tests.
        ("toggle-simulated-logging", json!({})),
        ("toggle-simulated-logging", json!({})),
        ("toggle-subscriber-updates", json!({})),
        ("toggle-subscriber-updates", json!({})),
    ];
    for (tool, args) in plain {
        let r = p.call(tool, args.clone()).await;
        p.record(format!("tools/call {tool} {args}"), &r);
        called.insert(tool.to_string());
    }
    // Needs task augmentation: called plainly, directly, it is the server's own tool error;
    // the hub runs it as the server's task and answers with the report (tests/tasks/follow.rs).
    let research = p
        .call(
            "simulate-research-query",
            json!({"topic": "python", "ambiguous": false}),
        )
        .await;
    called.insert("simulate-research-query".to_string());
    let side = p.side;
    let find = |step: &str| {
        p.transcript
            .iter()
            .find(|(s, _)| s.starts_with(step))
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    assert_eq!(
        block_text(&find("tools/call echo"), 0),
        "Echo: hello from openpact"
    );
    assert_eq!(
        find("tools/call get-sum {\"a\":2")["content"][0]["text"],
        "The sum of 2 and 3 is 5."
    );
    assert_eq!(
        find("tools/call get-structured-content {\"location\":\"Chicago\"}")["structuredContent"],
        json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82})
    );
    assert!(block_text(&find("tools/call get-roots-list"), 0).contains(ROOT_URI));
    if side.is_hub() {
        assert!(
            block_text(&research, 0).contains("# Research Report: python"),
            "{side:?}: {research}"
        );
    } else {
        assert_eq!(research["isError"], true, "{side:?}: {research}");
        assert!(
            block_text(&research, 0).contains("task augmentation"),
            "{side:?}: {research}"
        );
    }
    let reference = find("tools/call get-resource-reference {\"resourceType\":\"Text\"");
    assert_eq!(
        reference["content"][1]["resource"]["text"],
        "Resource 1: This is a plaintext resource created at <time>",
        "{side:?}: normalisation missed the time: {reference}"
    );

    // get-env: each process has its own environment; only check that it answers one.
    let env = p.call("get-env", json!({})).await;
    let vars: Value = serde_json::from_str(&block_text(&env, 0)).unwrap();
    assert!(
        vars.as_object()
            .is_some_and(|o| !o.is_empty() && o.values().all(Value::is_string)),
        "{side:?}: {env}"
    );
    p.record("tools/call get-env", &json!("<environment: not compared>"));
    called.insert("get-env".into());

    // Progress: with the client's own token (string and number), in order, before the
    // result.
    for token in [json!("everything-progress"), json!(7)] {
        let mark = p.seen.len();
        let name = p.name("trigger-long-running-operation");
        let r = p
            .request(
                "tools/call",
                json!({"name": name, "arguments": {"duration": 0.3, "steps": 3},
                       "_meta": {"progressToken": token}}),
            )
            .await;
        let progress = p.since(mark, "notifications/progress");
        assert_eq!(
            progress,
            (1..=3)
                .map(|i| json!({"progress": i, "total": 3, "progressToken": token}))
                .collect::<Vec<_>>(),
            "{side:?}: progress before the result"
        );
        p.record(
            format!("tools/call trigger-long-running-operation token {token}"),
            &r["result"],
        );
        p.record(
            format!("progress for token {token}"),
            &json!(progress.len()),
        );
    }
    called.insert("trigger-long-running-operation".into());

    // Server→client requests: what the client was asked, and what the tool made of the
    // answer.
    let mark = p.seen.len();
    let r = p
        .call(
            "trigger-sampling-request",
            json!({"prompt": "Say hello", "maxTokens": 20}),
        )
        .await;
    let asked = p.since(mark, "sampling/createMessage");
    assert_eq!(asked.len(), 1, "{side:?}: {asked:?}");
    assert!(block_text(&r, 0).contains(SAMPLED), "{side:?}: {r}");
    p.record("sampling/createMessage asked", &asked[0]);
    p.record("tools/call trigger-sampling-request", &r);
    called.insert("trigger-sampling-request".into());

    let mark = p.seen.len();
    let r = p.call("trigger-elicitation-request", json!({})).await;
    let asked = p.since(mark, "elicitation/create");
    assert_eq!(asked.len(), 1, "{side:?}: {asked:?}");
    let all_text: String = (0..r["content"].as_array().unwrap().len())
        .map(|i| block_text(&r, i))
        .collect();
    assert!(
        all_text.contains("User provided the requested information")
            && all_text.contains("- Name: Ada Lovelace")
            && all_text.contains("- Favorite Integer: 42"),
        "{side:?}: {all_text}"
    );
    p.record("elicitation/create asked", &asked[0]);
    p.record("tools/call trigger-elicitation-request", &r);
    called.insert("trigger-elicitation-request".into());

    // gzip-file-as-resource fetches a URL; a data: URI keeps it off the network. It
    // registers a session resource (announced with resources/list_changed) that must then
    // be listed and readable on both sides.
    let data = format!(
        "data:text/plain;base64,{}",
        base64_encode(b"Hello from the openpact everything test.\n")
    );
    let uri = "demo://resource/session/openpact-test.txt.gz";
    let r = p
        .call(
            "gzip-file-as-resource",
            json!({"name": "openpact-test.txt.gz", "data": data, "outputType": "resourceLink"}),
        )
        .await;
    assert_eq!(r["content"][0]["type"], "resource_link", "{side:?}: {r}");
    assert_eq!(r["content"][0]["uri"], uri, "{side:?}: {r}");
    p.record("tools/call gzip-file-as-resource resourceLink", &r);
    let deadline = Instant::now() + WAIT;
    let listed = loop {
        let resources = p.list_all("resources/list", "resources").await;
        if let Some(found) = resources.iter().find(|r| r["uri"] == uri) {
            break found.clone();
        }
        assert!(
            Instant::now() < deadline,
            "{side:?}: {uri} never listed: {resources:#?}"
        );
        p.pump(Duration::from_millis(200), |_| false).await;
    };
    p.record("resources/list: the session resource", &listed);
    let read = p.result("resources/read", json!({"uri": uri})).await;
    let blob = read["contents"][0]["blob"].as_str().unwrap_or_default();
    let gz = base64_decode(blob).unwrap_or_default();
    assert!(
        gz.starts_with(&[0x1f, 0x8b]),
        "{side:?}: not gzip data: {read}"
    );
    p.record("resources/read session resource", &read);
    let r = p
        .call(
            "gzip-file-as-resource",
            json!({"name": "openpact-inline.txt.gz", "data": data, "outputType": "resource"}),
        )
        .await;
    assert_eq!(
        r["content"][0]["resource"]["blob"], blob,
        "{side:?}: same input, same gzip"
    );
    p.record("tools/call gzip-file-as-resource resource", &r);
    called.insert("gzip-file-as-resource".into());

    // Invalid arguments: the server's own validation, passed on as it is.
    let r = p
        .request(
            "tools/call",
            json!({"name": p.name("get-sum"), "arguments": {"a": "two"}}),
        )
        .await;
    p.record("tools/call get-sum with a string", &r["result"]);
    p.record("tools/call get-sum with a string (error)", &r["error"]);

    // Cancellation: once the client cancels, no response comes for that request (the
    // server may still report progress for a moment; the hub drops it with the token).
    let id = p.client().next_id();
    let name = p.name("trigger-long-running-operation");
    let mark = p.seen.len();
    p.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                  "params": {"name": name, "arguments": {"duration": 3, "steps": 30},
                             "_meta": {"progressToken": "to-be-cancelled"}}}))
        .await;
    let started = p
        .pump(WAIT, |seen| {
            seen[mark..]
                .iter()
                .any(|m| m["params"]["progressToken"] == "to-be-cancelled")
        })
        .await;
    assert!(started, "{side:?}: no progress before the cancel");
    p.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": id, "reason": "test cancels"}}),
    )
    .await;
    // A response to it would make `absorb` panic.
    p.settle(QUIET).await;
    let pong = p.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{side:?}: {pong}");
    p.record(
        "cancelled trigger-long-running-operation",
        &json!("no response"),
    );

    // Every server→client request came under an id of its own.
    let ids: Vec<&Value> = p
        .seen
        .iter()
        .filter(|m| m.get("id").is_some())
        .map(|m| &m["id"])
        .collect();
    let unique: BTreeSet<String> = ids.iter().map(|i| i.to_string()).collect();
    assert_eq!(unique.len(), ids.len(), "{side:?}: ids reused: {ids:?}");
    assert!(
        ids.len() >= 3,
        "{side:?}: roots, sampling, elicitation: {ids:?}"
    );

    assert_eq!(called, listed_names(&tools), "{side:?}: every tool called");

    // The list_changed announcements server-everything sent (and the hub's own) changed
    // nothing: the list is still the same, and the connection still answers.
    let again = p.list_bare("tools/list", "tools").await;
    assert_eq!(again, tools, "{side:?}");
    let pong = p.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}), "{side:?}: {pong}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_answers_the_same_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let (_direct, hubs) = compare(&peers, &sc, tools_scenario).await;
    for mut hub in hubs {
        let side = hub.side;
        let h = hub.hub();
        let (code, _) = h.close().await;
        assert_eq!(code, Some(0), "{side:?}: {}", h.stderr());
    }
}

// ---------------------------------------------------------------------------------------
// URL elicitation (a client that declares `elicitation.url`)

/// With `elicitation: {form, url}` server-everything adds `trigger-url-elicitation`: the
/// request path (an `elicitation/create` in URL mode, answered by the client) and the error
/// path (a -32042 error with the elicitation in `data`, then a retry) both look the same
/// through the hub.
async fn url_elicitation_scenario(p: &mut Peer) {
    let side = p.side;
    let tools = settled_tools(p).await;
    assert!(
        tools.iter().any(|t| t["name"] == "trigger-url-elicitation"),
        "{side:?}: {:?}",
        listed_names(&tools)
    );
    p.record("tools/list", &json!(tools));
    let args = json!({"url": "https://example.com/consent", "elicitationId": "openpact-elicit-1"});
    let mark = p.seen.len();
    let r = p.call("trigger-url-elicitation", args.clone()).await;
    let asked = p.since(mark, "elicitation/create");
    assert_eq!(asked.len(), 1, "{side:?}: {asked:?}");
    assert_eq!(asked[0]["mode"], "url", "{side:?}: {asked:?}");
    assert!(
        block_text(&r, 0).contains("completed the URL elicitation"),
        "{side:?}: {r}"
    );
    p.record("elicitation/create asked (url)", &asked[0]);
    p.record("tools/call trigger-url-elicitation", &r);

    let mut with_error = args.clone();
    with_error["errorPath"] = json!(true);
    let name = p.name("trigger-url-elicitation");
    let first = p
        .request("tools/call", json!({"name": name, "arguments": with_error}))
        .await;
    // The prerequisite's elicitationId is a fresh random UUID: not compared.
    let mut error = first["error"].clone();
    assert_eq!(error["code"], -32042, "{side:?}: {first}");
    let elicitations = error["data"]["elicitations"]
        .as_array_mut()
        .unwrap_or_else(|| panic!("{side:?}: no elicitations in {first}"));
    for e in elicitations {
        assert!(e["elicitationId"].is_string(), "{side:?}: {e}");
        e["elicitationId"] = json!("<random>");
    }
    p.record(
        "tools/call trigger-url-elicitation errorPath (error)",
        &error,
    );
    let retry = p
        .request("tools/call", json!({"name": name, "arguments": with_error}))
        .await;
    p.record("retry after -32042", &retry["result"]);
}

async fn initialized(p: &mut Peer, caps: Value) {
    p.initialize(caps).await;
    p.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_elicitation_is_the_same_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let caps = json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}});
    // Each side initializes as soon as it has started: the hub tells server-everything what
    // its client declared only if the client's initialize comes within a second of the
    // hub's start.
    let (mut direct, mut hubs) = start_all(&peers, &sc, async |p: &mut Peer| {
        initialized(p, caps.clone()).await
    })
    .await;
    run_all(&mut direct, &mut hubs, url_elicitation_scenario).await;
    for hub in &hubs {
        assert_same(&direct, hub);
    }
}
