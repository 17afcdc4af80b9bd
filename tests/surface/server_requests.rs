//! Server→client requests (sampling, elicitation, roots): forwarded and answered, refused
//! without the capability, kept apart between servers and across a restart.

use super::{all_client_caps, ready_hub, two_ready, two_servers};
use crate::support::{Scratch, WAIT, error_code, is_error, send_call, text};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::{Duration, Instant};

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
    assert!(!is_error(&r), "{r}");
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
    assert!(is_error(&r), "{r}");
    assert_eq!(text(&r), "the user declined");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_and_roots_are_forwarded() {
    let mut hub = two_ready(all_client_caps()).await;
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
    assert!(!is_error(&r), "{r}");
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
    assert!(!is_error(&r), "{r}");
    assert_eq!(serde_json::from_str::<Value>(&text(&r)).unwrap(), answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_capability_servers_are_refused_and_the_client_is_not_asked() {
    let mut hub = two_ready(json!({})).await;
    let c = &mut hub.client;
    for (tool, args, cap) in [
        ("a:sample", json!({"prompt": "hi"}), "sampling"),
        ("b:elicit", json!({"message": "ok?"}), "elicitation"),
        ("a:roots", json!({}), "roots"),
    ] {
        let r = c.call(tool, args).await;
        assert!(is_error(&r), "{tool}: {r}");
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
    let mut hub = two_ready(all_client_caps()).await;
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
