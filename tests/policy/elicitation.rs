//! Permission prompts through the client's elicitation (the harness client answering by
//! hand): once, always, decline, cancel and deny; one prompt at a time; `ask` rules; the
//! prompt timeout; prompts for prompts and resources; cancellation; and a changed tool
//! definition asked about again.

use super::{
    accept, answer, asking, call_answering, call_prompted, call_unasked, decisions, eliciting_hub,
    fx, prompt,
};
use crate::support::{Scratch, WAIT, fixture, is_error, send_call, state_dir, text};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_once_always_decline_cancel_and_deny() {
    let sc = Scratch::new();
    let (mut hub, config) = eliciting_hub(
        &sc,
        fx(),
        asking(json!({"default": "ask", "allow": ["fx:add"]})),
    )
    .await;
    let state = state_dir(&config);
    let c = &mut hub.client;

    // once: the form, then the call goes through.
    let id = send_call(c, "fx:echo", json!({"message": "first call"})).await;
    let req = prompt(c).await;
    let p = &req["params"];
    let schema = &p["requestedSchema"];
    assert_eq!(schema["type"], "object", "{p}");
    assert_eq!(
        schema["properties"]["decision"]["enum"],
        json!(["always", "once", "deny"]),
        "{p}"
    );
    assert_eq!(schema["properties"]["decision"]["type"], "string", "{p}");
    assert_eq!(schema["required"], json!(["decision"]), "{p}");
    assert_eq!(
        schema["properties"].as_object().unwrap().len(),
        1,
        "exactly one property: {p}"
    );
    let msg = p["message"].as_str().unwrap();
    assert!(msg.contains("fx:echo"), "{msg}");
    assert!(msg.contains("\"message\":\"first call\""), "{msg}");
    assert!(msg.contains("Echo the message back"), "{msg}");
    answer(c, &req, accept("once")).await;
    let r = c.response(&id).await;
    assert!(!is_error(&r), "{r}");
    assert_eq!(text(&r), "first call");
    assert!(
        decisions(&state).get("fx:echo").is_none(),
        "once is not remembered"
    );

    // once is once: asked again; this time always.
    let r = call_answering(c, "fx:echo", json!({"message": "second"}), accept("always")).await;
    assert_eq!(text(&r), "second", "{r}");
    let d = decisions(&state);
    assert_eq!(d["fx:echo"]["decision"], "allow", "{d}");
    let def = d["fx:echo"]["definition"].as_str().unwrap();
    assert!(
        def.starts_with("sha256:") && def.len() == 71,
        "definition hash: {def}"
    );
    // Remembered: not asked again.
    let r = call_unasked(c, "fx:echo", json!({"message": "third"})).await;
    assert_eq!(text(&r), "third", "{r}");

    // decline, cancel and accept+deny all deny, and nothing is remembered.
    for (result, tool) in [
        (json!({"action": "decline"}), "fx:env"),
        (json!({"action": "cancel"}), "fx:env"),
        (accept("deny"), "fx:env"),
        (
            json!({"action": "accept", "content": {"decision": "maybe"}}),
            "fx:env",
        ),
    ] {
        let r = call_answering(c, tool, json!({"name": "HOME"}), result.clone()).await;
        assert!(is_error(&r), "{result}: {r}");
        let t = text(&r);
        assert!(
            t.contains("fx:env") && t.contains("denied at the prompt"),
            "{result}: {t}"
        );
    }
    assert!(decisions(&state).get("fx:env").is_none());
    // An error answer to the elicitation is a denial too.
    let id = send_call(c, "fx:env", json!({"name": "HOME"})).await;
    let req = prompt(c).await;
    c.send(&json!({"jsonrpc": "2.0", "id": req["id"],
                   "error": {"code": -32601, "message": "no forms here"}}))
        .await;
    let r = c.response(&id).await;
    assert!(is_error(&r), "{r}");

    // A pending prompt never blocks calls that need none.
    let pending = send_call(c, "fx:env", json!({"name": "HOME"})).await;
    let req = prompt(c).await;
    let r = c.call("fx:add", json!({"a": 2, "b": 3})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 5}), "{r}");
    let r = call_unasked(c, "fx:echo", json!({"message": "remembered, no prompt"})).await;
    assert_eq!(text(&r), "remembered, no prompt");
    answer(c, &req, json!({"action": "decline"})).await;
    assert!(is_error(&c.response(&pending).await));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_prompts_are_serialised_and_always_answers_the_waiting_ones() {
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(&sc, fx(), asking(json!({"default": "ask"}))).await;
    let c = &mut hub.client;
    let a = send_call(c, "fx:echo", json!({"message": "a"})).await;
    let b = send_call(c, "fx:echo", json!({"message": "b"})).await;
    let req = prompt(c).await;
    // One prompt at a time: the second waits its turn.
    tokio::time::sleep(Duration::from_millis(300)).await;
    while let Some(m) = c.recv(Duration::from_millis(50)).await {
        c.inbox.push_back(m);
    }
    assert!(
        !c.inbox.iter().any(|m| m["method"] == "elicitation/create"),
        "a second prompt while the first is open: {:?}",
        c.inbox
    );
    answer(c, &req, accept("always")).await;
    let (ra, rb) = (c.response(&a).await, c.response(&b).await);
    assert_eq!(text(&ra), "a");
    assert_eq!(text(&rb), "b", "the waiting call sees the \"always\": {rb}");
    assert!(
        !c.inbox.iter().any(|m| m["method"] == "elicitation/create"),
        "asked twice: {:?}",
        c.inbox
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_ask_rule_asks_every_time_and_offers_no_always() {
    let sc = Scratch::new();
    let (mut hub, config) = eliciting_hub(
        &sc,
        fx(),
        asking(json!({"default": "allow", "ask": ["fx:echo"]})),
    )
    .await;
    let state = state_dir(&config);
    let c = &mut hub.client;
    // Nothing remembered would be read: the form offers once or deny, no "always".
    let id = send_call(c, "fx:echo", json!({"message": "one"})).await;
    let req = prompt(c).await;
    let p = &req["params"];
    assert_eq!(
        p["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["once", "deny"]),
        "{p}"
    );
    assert!(
        p["message"].as_str().unwrap().contains("on every call"),
        "{p}"
    );
    // A client answering "always" anyway gets once: nothing is remembered.
    answer(c, &req, accept("always")).await;
    assert_eq!(text(&c.response(&id).await), "one");
    assert!(
        decisions(&state).get("fx:echo").is_none(),
        "{}",
        decisions(&state)
    );
    // The ask rule asks again.
    let id = send_call(c, "fx:echo", json!({"message": "two"})).await;
    let first = c.recv(WAIT).await.expect("a prompt or an answer");
    assert_eq!(
        first["method"], "elicitation/create",
        "an ask rule must ask every time, but the call was answered without a prompt: {first}"
    );
    answer(c, &first, accept("once")).await;
    assert_eq!(text(&c.response(&id).await), "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_without_an_answer_times_out_as_a_denial() {
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(
        &sc,
        fx(),
        asking(json!({"default": "ask", "promptTimeout": "300ms"})),
    )
    .await;
    let c = &mut hub.client;
    let t0 = Instant::now();
    let id = send_call(c, "fx:echo", json!({"message": "m"})).await;
    let req = prompt(c).await;
    let r = c.response(&id).await;
    let took = t0.elapsed();
    assert!(is_error(&r), "{r}");
    let t = text(&r);
    assert!(t.contains("no answer"), "{t}");
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(10),
        "{took:?}"
    );
    // The client is told the prompt is void.
    let cancel = c
        .wait_for("notifications/cancelled", WAIT)
        .await
        .expect("notifications/cancelled for the unanswered prompt");
    assert_eq!(cancel["params"]["requestId"], req["id"], "{cancel}");
    // A late answer is harmless, and the next call asks again.
    answer(c, &req, accept("always")).await;
    assert_eq!(
        text(&call_answering(c, "fx:echo", json!({"message": "again"}), accept("once")).await),
        "again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_for_prompts_and_resources() {
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(&sc, fx(), asking(json!({"default": "ask"}))).await;
    let c = &mut hub.client;
    let id = c.next_id();
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "prompts/get",
                   "params": {"name": "fx:greet", "arguments": {"name": "Ann"}}}))
        .await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(
        msg.contains("prompt fx:greet") && msg.contains("Ann"),
        "{msg}"
    );
    answer(c, &req, json!({"action": "decline"})).await;
    let r = c.response(&json!(id)).await;
    assert_eq!(r["error"]["code"], -32003, "{r}");
    let id = c.next_id();
    c.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "resources/read",
                   "params": {"uri": "fixture://static/2"}}),
    )
    .await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(msg.contains("resource fx:fixture://static/2"), "{msg}");
    answer(c, &req, accept("once")).await;
    let r = c.response(&json!(id)).await;
    assert_eq!(
        r["result"]["contents"][0]["text"], "content of fixture://static/2",
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_withdraws_its_prompt() {
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(&sc, fx(), asking(json!({"default": "ask"}))).await;
    let c = &mut hub.client;
    let id = send_call(c, "fx:echo", json!({"message": "m"})).await;
    let req = prompt(c).await;
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "user gave up"}}),
    )
    .await;
    // The next call is not stuck behind the abandoned prompt.
    let next = send_call(c, "fx:echo", json!({"message": "next"})).await;
    let req2 = prompt(c).await;
    assert_ne!(req2["id"], req["id"]);
    answer(c, &req2, accept("once")).await;
    assert_eq!(text(&c.response(&next).await), "next");
    // And the client was told the first prompt is void.
    let cancel = c
        .wait_for("notifications/cancelled", Duration::from_secs(3))
        .await;
    assert!(
        cancel
            .as_ref()
            .is_some_and(|m| m["params"]["requestId"] == req["id"]),
        "the prompt of the cancelled call was never withdrawn: {cancel:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_made_in_quick_succession_are_all_remembered() {
    let sc = Scratch::new();
    let (mut hub, config) = eliciting_hub(
        &sc,
        json!({"fx": fixture(&["--tools", "30"])}),
        json!({"permissions": {"default": "ask"},
               "rateLimits": {"default": "off"}}),
    )
    .await;
    let c = &mut hub.client;
    for i in 0..30 {
        let tool = format!("fx:tool_{i:04}");
        assert!(
            !is_error(&call_answering(c, &tool, json!({"x": "1"}), accept("always")).await),
            "{tool}"
        );
    }
    let d = decisions(&state_dir(&config));
    assert_eq!(d.as_object().unwrap().len(), 30, "{d}");
    for i in 0..30 {
        let tool = format!("fx:tool_{i:04}");
        let r = call_unasked(c, &tool, json!({"x": "2"})).await;
        assert_eq!(text(&r), format!("tool_{i:04}:2"), "{r}");
    }
}

// ---------------------------------------------------------------------------------------
// A changed definition asks again

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_definition_is_asked_about_again() {
    let sc = Scratch::new();
    let settings = asking(json!({"default": "ask"}));
    let servers = |desc: &str| json!({"fx": fixture(&["--echo-description", desc])});
    let echo = |message: &str| json!({"message": message});

    // A: always.
    let (mut hub, config) = eliciting_hub(&sc, servers("Version A"), settings.clone()).await;
    let c = &mut hub.client;
    let r = call_prompted(c, "fx:echo", echo("a"), &["Version A"], accept("always")).await;
    assert_eq!(text(&r), "a");
    hub.close().await;
    let def_a = decisions(&state_dir(&config))["fx:echo"]["definition"].clone();

    // Same definition, new hub: not asked.
    let (mut hub, _) = eliciting_hub(&sc, servers("Version A"), settings.clone()).await;
    let r = call_unasked(&mut hub.client, "fx:echo", json!({"message": "a2"})).await;
    assert_eq!(text(&r), "a2");
    hub.close().await;

    // B: the description changed, so openpact asks again.
    let (mut hub, config) = eliciting_hub(&sc, servers("Version B"), settings.clone()).await;
    // It says why.
    let why = ["changed", "definition", "\"always\"", "Version B"];
    let c = &mut hub.client;
    let r = call_prompted(c, "fx:echo", echo("b"), &why, accept("always")).await;
    assert_eq!(text(&r), "b");
    let def_b = decisions(&state_dir(&config))["fx:echo"]["definition"].clone();
    assert_ne!(def_a, def_b);
    // And remembered for B.
    let r = call_unasked(&mut hub.client, "fx:echo", json!({"message": "b2"})).await;
    assert_eq!(text(&r), "b2");
    hub.close().await;

    // A remembered denial is re-asked on a change too (the other way round: back to A).
    let (mut hub, _) = eliciting_hub(&sc, servers("Version A"), settings).await;
    let c = &mut hub.client;
    let r = call_prompted(c, "fx:echo", echo("a3"), &["changed"], accept("once")).await;
    assert_eq!(text(&r), "a3");
}
