//! The 2026-07-28 revision downstream, with the fixture (a handshake server) behind the hub:
//! `server/discover` and stateless requests on stdio next to `initialize`; the revision's
//! errors; input-required results for the permission prompt and for the server's sampling,
//! elicitation and roots requests, resumed through the signed `requestState` (and refused
//! when it is tampered with); over HTTP, the header checks, progress on the request's SSE
//! stream, `subscriptions/listen` with list changes and resource updates, and a closed
//! stream cancelling the call upstream. And the bridge with a real handshake server:
//! server-everything's sampling, elicitation and roots requests reach a 2026-07-28 client as
//! input-required results.

use crate::http_face::http_base;
use crate::support::{Client, Hub, Scratch, WAIT, fixture, serve_config, serve_with};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const V: &str = "2026-07-28";

fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "modern-test", "version": "1"},
    })
}

fn all_caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

/// `params` with the revision's envelope declaring `caps`.
fn with_meta(mut params: Value, caps: Value) -> Value {
    params["_meta"] = meta(caps);
    params
}

/// Polls a stateless `tools/list` until `tool` is listed.
async fn stateless_ready(c: &mut Client, tool: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = c
            .request("tools/list", with_meta(json!({}), json!({})))
            .await;
        let listed = r["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == tool));
        if listed {
            return;
        }
        assert!(Instant::now() < deadline, "{tool} never listed: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ask_permissions() -> Option<Value> {
    Some(json!({"permissions": {"default": "ask"}}))
}

/// The single entry of an input-required result: its key, method and params.
fn only_request(r: &Value) -> (String, String, Value) {
    let result = &r["result"];
    assert_eq!(result["resultType"], "input_required", "{r}");
    let reqs = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(reqs.len(), 1, "{r}");
    let (key, req) = reqs.iter().next().unwrap();
    (
        key.clone(),
        req["method"].as_str().unwrap().to_string(),
        req["params"].clone(),
    )
}

/// Retries `name` with `answer` to the input request `key` of `previous`.
async fn retry(
    c: &mut Client,
    name: &str,
    arguments: &Value,
    previous: &Value,
    key: &str,
    answer: Value,
) -> Value {
    c.request(
        "tools/call",
        with_meta(
            json!({"name": name, "arguments": arguments,
                   "requestState": previous["result"]["requestState"],
                   "inputResponses": {key: answer}}),
            all_caps(),
        ),
    )
    .await
}

#[tokio::test]
async fn stdio_discover_and_stateless_requests_next_to_initialize() {
    let mut hub = serve_config(json!({"fx": fixture(&[])}), None).await;
    let c = &mut hub.client;
    let d = c
        .request("server/discover", json!({"_meta": meta(json!({}))}))
        .await;
    let r = &d["result"];
    assert_eq!(r["resultType"], "complete", "{d}");
    assert!(
        r["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(V))
    );
    assert!(
        r["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25"))
    );
    assert!(r["capabilities"]["tools"].is_object(), "{d}");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "openpact"
    );
    stateless_ready(c, "fx:echo").await;

    let list = c
        .request("tools/list", with_meta(json!({}), json!({})))
        .await;
    for key in ["resultType", "ttlMs", "cacheScope"] {
        assert!(list["result"].get(key).is_some(), "{key} missing: {list}");
    }
    let call = c
        .request(
            "tools/call",
            with_meta(
                json!({"name": "fx:echo", "arguments": {"message": "stateless"}}),
                json!({}),
            ),
        )
        .await;
    assert_eq!(call["result"]["content"][0]["text"], "stateless", "{call}");
    assert_eq!(call["result"]["resultType"], "complete");

    // The revision's errors.
    let ping = c.request("ping", json!({"_meta": meta(json!({}))})).await;
    assert_eq!(ping["error"]["code"], -32601, "{ping}");
    let no_caps = c
        .request(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": V}}),
        )
        .await;
    assert_eq!(no_caps["error"]["code"], -32602, "{no_caps}");
    let future = c
        .request(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01",
                             "io.modelcontextprotocol/clientCapabilities": {}}}),
        )
        .await;
    assert_eq!(future["error"]["code"], -32022, "{future}");
    assert_eq!(future["error"]["data"]["supported"], json!([V]));
    assert_eq!(future["error"]["data"]["requested"], "2099-01-01");

    // The same pipe still takes a handshake client.
    let init = c.initialize().await;
    assert_eq!(init["protocolVersion"], "2025-11-25", "{init}");
    let handshake = c.call("fx:echo", json!({"message": "legacy"})).await;
    assert_eq!(handshake["result"]["content"][0]["text"], "legacy");
    assert!(
        handshake["result"].get("resultType").is_none(),
        "{handshake}"
    );
}

#[tokio::test]
async fn the_permission_prompt_and_server_requests_become_input_required() {
    let mut hub = serve_config(json!({"fx": fixture(&[])}), ask_permissions()).await;
    let c = &mut hub.client;
    stateless_ready(c, "fx:echo").await;

    // The permission prompt: asked, answered on the retry, remembered with "always".
    let args = json!({"prompt": "Capital of France?"});
    let first = c
        .request(
            "tools/call",
            with_meta(json!({"name": "fx:sample", "arguments": args}), all_caps()),
        )
        .await;
    let (key, method, params) = only_request(&first);
    assert_eq!(method, "elicitation/create");
    assert!(
        params["message"].as_str().unwrap().contains("fx:sample"),
        "{params}"
    );
    assert!(first["result"]["requestState"].is_string());

    // A retry without the answer is asked again, not failed.
    let again = c
        .request(
            "tools/call",
            with_meta(
                json!({"name": "fx:sample", "arguments": args,
                       "requestState": first["result"]["requestState"], "inputResponses": {}}),
                all_caps(),
            ),
        )
        .await;
    let (again_key, again_method, _) = only_request(&again);
    assert_eq!(
        (again_key.as_str(), again_method.as_str()),
        (key.as_str(), "elicitation/create")
    );

    // Then the server's own request: sampling, carried the same way.
    let allowed = retry(
        c,
        "fx:sample",
        &args,
        &again,
        &key,
        json!({"action": "accept", "content": {"decision": "always"}}),
    )
    .await;
    let (skey, smethod, sparams) = only_request(&allowed);
    assert_eq!(smethod, "sampling/createMessage", "{allowed}");
    assert_eq!(
        sparams["messages"][0]["content"]["text"],
        "Capital of France?"
    );
    let done = retry(
        c,
        "fx:sample",
        &args,
        &allowed,
        &skey,
        json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "test"}),
    )
    .await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(done.to_string().contains("Paris"), "{done}");

    // Elicitation and roots from the server; the permission is remembered now for fx:sample
    // only, so each asks once for permission first.
    for (tool, want, answer, expect) in [
        (
            "fx:elicit",
            "elicitation/create",
            json!({"action": "accept", "content": {"answer": "forty-two"}}),
            "forty-two",
        ),
        (
            "fx:roots",
            "roots/list",
            json!({"roots": [{"uri": "file:///modern/root", "name": "r"}]}),
            "file:///modern/root",
        ),
    ] {
        let a = json!({});
        let first = c
            .request(
                "tools/call",
                with_meta(json!({"name": tool, "arguments": a}), all_caps()),
            )
            .await;
        let (k, _, _) = only_request(&first);
        let asked = retry(
            c,
            tool,
            &a,
            &first,
            &k,
            json!({"action": "accept", "content": {"decision": "once"}}),
        )
        .await;
        let (k2, m2, _) = only_request(&asked);
        assert_eq!(m2, want, "{asked}");
        let done = retry(c, tool, &a, &asked, &k2, answer).await;
        assert!(done.to_string().contains(expect), "{tool}: {done}");
    }

    // A tampered state is refused, and so is one echoed with another request.
    let state = allowed["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let mut forged = state.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    let r = c
        .request(
            "tools/call",
            with_meta(
                json!({"name": "fx:sample", "arguments": args, "requestState": forged}),
                all_caps(),
            ),
        )
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("altered"),
        "{r}"
    );
    let r = c
        .request("tools/call", with_meta(
            json!({"name": "fx:sample", "arguments": {"prompt": "other"}, "requestState": state}),
            all_caps()))
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // A client that cannot be asked gets the plain refusal, not a question.
    let r = c
        .request(
            "tools/call",
            with_meta(
                json!({"name": "fx:echo", "arguments": {"message": "x"}}),
                json!({}),
            ),
        )
        .await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(r.to_string().contains("no way to ask"), "{r}");
}

/// A hub on stdio and HTTP, its fixture ready; the `http://host:port`.
async fn http_hub(openpact: Option<Value>) -> (Hub, String) {
    let sc = Scratch::new();
    let config = sc.servers(json!({"fx": fixture(&[])}), openpact);
    let mut hub = serve_with(&config, &["serve", "--http", "127.0.0.1:0"], &[])
        .await
        .owning(sc);
    let base = http_base(&mut hub).await;
    (hub, base)
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// A 2026-07-28 POST with the revision's headers for `method` (and `name`, when given).
fn post(
    c: &reqwest::Client,
    base: &str,
    id: u64,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> reqwest::RequestBuilder {
    let mut r = c
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V)
        .header("mcp-method", method);
    if let Some(n) = name {
        r = r.header("mcp-name", n);
    }
    r.body(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
}

async fn body_json(r: reqwest::Response) -> Value {
    serde_json::from_str(&r.text().await.unwrap()).unwrap()
}

/// The `data:` messages of an SSE body read so far.
fn sse_messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// Reads an SSE response until `done` says so (or the time is up); the messages read.
async fn read_until(resp: &mut reqwest::Response, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut body = String::new();
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, resp.chunk()).await {
            Ok(Ok(Some(chunk))) => body.push_str(&String::from_utf8_lossy(&chunk)),
            _ => break,
        }
        let msgs = sse_messages(&body);
        if done(&msgs) {
            return msgs;
        }
    }
    sse_messages(&body)
}

#[tokio::test]
async fn http_headers_progress_listen_and_a_closed_stream() {
    let (mut hub, base) = http_hub(None).await;
    let c = http();
    let echo = with_meta(
        json!({"name": "fx:echo", "arguments": {"message": "over http"}}),
        json!({}),
    );

    let ok = post(&c, &base, 1, "tools/call", Some("fx:echo"), echo.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert!(
        ok.headers().get("mcp-session-id").is_none(),
        "stateless: no session"
    );
    let v = body_json(ok).await;
    assert_eq!(v["result"]["content"][0]["text"], "over http", "{v}");

    // Headers that disagree with the body, or are missing: 400 with -32020.
    let mismatched_method = c
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V)
        .header("mcp-method", "tools/list")
        .header("mcp-name", "fx:echo")
        .body(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": echo}).to_string(),
        );
    for (what, req) in [
        (
            "wrong name",
            post(&c, &base, 2, "tools/call", Some("fx:other"), echo.clone()),
        ),
        (
            "no name",
            post(&c, &base, 2, "tools/call", None, echo.clone()),
        ),
        ("wrong method", mismatched_method),
    ] {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), 400, "{what}");
        let v = body_json(r).await;
        assert_eq!(v["error"]["code"], -32020, "{what}: {v}");
    }
    let encoded = post(
        &c,
        &base,
        3,
        "tools/call",
        Some("=?base64?Zng6ZWNobw==?="),
        echo.clone(),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(encoded.status(), 200, "a base64-encoded Mcp-Name matches");
    let unknown = post(
        &c,
        &base,
        4,
        "ping",
        None,
        json!({"_meta": meta(json!({}))}),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(unknown.status(), 404);
    let bad_version = c
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", V)
        .header("mcp-method", "tools/list")
        .body(
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2099-01-01",
            "io.modelcontextprotocol/clientCapabilities": {}}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(bad_version.status(), 400);

    // Progress comes on the request's own stream, under the client's token.
    let mut p = with_meta(
        json!({"name": "fx:progress", "arguments": {"steps": 3, "ms": 20}}),
        json!({}),
    );
    p["_meta"]["progressToken"] = json!("tok-1");
    let mut resp = post(&c, &base, 6, "tools/call", Some("fx:progress"), p)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let msgs = read_until(&mut resp, |m| m.iter().any(|m| m["id"] == 6)).await;
    let progress: Vec<_> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "{msgs:?}");
    assert!(
        progress
            .iter()
            .all(|m| m["params"]["progressToken"] == "tok-1"),
        "{msgs:?}"
    );
    assert_eq!(msgs.last().unwrap()["result"]["resultType"], "complete");

    // listen: acknowledged, then a list change and a resource update, tagged with its id.
    let uri = "fixture://static/1";
    let listen = with_meta(
        json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": [uri]}}),
        json!({}),
    );
    let mut stream = post(&c, &base, 77, "subscriptions/listen", None, listen)
        .send()
        .await
        .unwrap();
    let acked = read_until(&mut stream, |m| !m.is_empty()).await;
    assert_eq!(
        acked[0]["method"], "notifications/subscriptions/acknowledged",
        "{acked:?}"
    );
    assert_eq!(
        acked[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        77
    );
    assert_eq!(
        acked[0]["params"]["notifications"]["resourceSubscriptions"],
        json!([uri])
    );
    // The subscription reaches the server before the touch.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (id, tool, args) in [
        (8, "fx:touch", json!({"uri": uri})),
        (9, "fx:change_tools", json!({})),
    ] {
        let r = post(
            &c,
            &base,
            id,
            "tools/call",
            Some(tool),
            with_meta(json!({"name": tool, "arguments": args}), json!({})),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(r.status(), 200);
    }
    let seen = read_until(&mut stream, |m| {
        m.iter()
            .any(|m| m["method"] == "notifications/resources/updated")
            && m.iter()
                .any(|m| m["method"] == "notifications/tools/list_changed")
    })
    .await;
    let updated = seen
        .iter()
        .find(|m| m["method"] == "notifications/resources/updated")
        .expect("update");
    assert_eq!(updated["params"]["uri"], uri);
    for m in &seen {
        assert_eq!(
            m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 77,
            "{m}"
        );
    }
    drop(stream);

    // A closed stream cancels its call upstream.
    let mut slow = with_meta(
        json!({"name": "fx:slow", "arguments": {"ms": 20000}}),
        json!({}),
    );
    slow["_meta"]["progressToken"] = json!("t");
    let pending = tokio::spawn(post(&c, &base, 10, "tools/call", Some("fx:slow"), slow).send());
    tokio::time::sleep(Duration::from_millis(500)).await;
    pending.abort();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = hub.client.call("fx:cancelled", json!({})).await;
        let text = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if text != "[]" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the fixture never saw the cancel"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Serves every input request of `r` the way the everything suite's client answers them.
fn fulfil(r: &Value) -> Value {
    let reqs = r["result"]["inputRequests"]
        .as_object()
        .expect("inputRequests");
    reqs.iter()
        .map(|(k, req)| {
            (
                k.clone(),
                crate::everything::answer(req).expect("an answer"),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[tokio::test]
async fn a_handshake_server_everything_behind_a_stateless_client() {
    let Some(peers) = crate::support::Peers::get() else {
        return;
    };
    let mut hub = serve_config(
        json!({"everything": peers.entry("PEER_EVERYTHING", &[])}),
        Some(json!({"permissions": {"default": "allow"}})),
    )
    .await;
    let c = &mut hub.client;
    // The stateless client speaks first: its capabilities are what the server is told.
    let d = c
        .request("server/discover", json!({"_meta": meta(all_caps())}))
        .await;
    assert_eq!(d["result"]["resultType"], "complete", "{d}");
    stateless_ready(c, "everything:trigger-sampling-request").await;
    for (tool, args, expect) in [
        (
            "everything:trigger-sampling-request",
            json!({"prompt": "Say hello", "maxTokens": 20}),
            crate::everything::SAMPLED,
        ),
        (
            "everything:trigger-elicitation-request",
            json!({}),
            "User provided the requested information",
        ),
        (
            "everything:get-roots-list",
            json!({}),
            crate::everything::ROOT_URI,
        ),
    ] {
        let mut r = c
            .request(
                "tools/call",
                with_meta(json!({"name": tool, "arguments": args}), all_caps()),
            )
            .await;
        let mut rounds = 0;
        while r["result"]["resultType"] == "input_required" {
            rounds += 1;
            assert!(rounds <= 3, "{tool}: too many rounds: {r}");
            let answers = fulfil(&r);
            r = c
                .request(
                    "tools/call",
                    with_meta(
                        json!({"name": tool, "arguments": args,
                           "requestState": r["result"]["requestState"], "inputResponses": answers}),
                        all_caps(),
                    ),
                )
                .await;
        }
        assert_eq!(rounds, 1, "{tool}: one question, one retry: {r}");
        assert_eq!(r["result"]["resultType"], "complete", "{tool}: {r}");
        assert!(r.to_string().contains(expect), "{tool}: {r}");
    }
}

#[tokio::test]
async fn a_2026_server_behind_a_2026_client() {
    let Some(peers) = crate::support::Peers::get() else {
        return;
    };
    let py = crate::stateless_upstream::stateless_stdio(&peers, "2026-07-28");
    let mut hub = serve_config(
        json!({"py": py}),
        Some(json!({"permissions": {"default": "allow"}})),
    )
    .await;
    let c = &mut hub.client;
    stateless_ready(c, "py:both").await;
    // `both` asks for a name (elicitation) and a completion (sampling) in one round.
    let args = json!({"prompt": "Say hi"});
    let first = c
        .request(
            "tools/call",
            with_meta(json!({"name": "py:both", "arguments": args}), all_caps()),
        )
        .await;
    let mut r = first;
    let mut methods = Vec::new();
    for _ in 0..3 {
        if r["result"]["resultType"] != "input_required" {
            break;
        }
        let reqs = r["result"]["inputRequests"].as_object().unwrap().clone();
        let mut answers = serde_json::Map::new();
        for (k, req) in reqs {
            let m = req["method"].as_str().unwrap().to_string();
            let a = match m.as_str() {
                "elicitation/create" => json!({"action": "accept", "content": {"name": "Ada"}}),
                "sampling/createMessage" => json!({"role": "assistant", "model": "m",
                    "content": {"type": "text", "text": "hi there"}}),
                other => panic!("unexpected {other}"),
            };
            methods.push(m);
            answers.insert(k, a);
        }
        r = c
            .request(
                "tools/call",
                with_meta(
                    json!({"name": "py:both", "arguments": args,
                       "requestState": r["result"]["requestState"], "inputResponses": answers}),
                    all_caps(),
                ),
            )
            .await;
    }
    methods.sort();
    assert_eq!(
        methods,
        ["elicitation/create", "sampling/createMessage"],
        "{r}"
    );
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["content"][0]["text"], "Ada: hi there", "{r}");
}

/// Over HTTP a task's requests carry its id in `Mcp-Name`, so that an intermediary can route
/// them; the hub checks it like any other name header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_requests_carry_its_id_in_mcp_name_over_http() {
    let (_hub, base) = http_hub(Some(json!({"permissions": {"allow": ["fx:*"]}}))).await;
    let c = http();
    let caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let call = with_meta(
        json!({"name": "fx:slow", "arguments": {"ms": 2000}}),
        caps.clone(),
    );
    let created = body_json(
        post(&c, &base, 1, "tools/call", Some("fx:slow"), call)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_string();
    let get = with_meta(json!({"taskId": id}), caps.clone());
    let named = post(&c, &base, 2, "tasks/get", Some(&id), get.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(named.status(), 200);
    let named = body_json(named).await;
    assert_eq!(named["result"]["taskId"], id.as_str(), "{named}");
    let wrong = post(&c, &base, 3, "tasks/get", Some("t-other"), get.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 400);
    assert_eq!(body_json(wrong).await["error"]["code"], -32020);
    let missing = post(&c, &base, 4, "tasks/get", None, get)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 400);
}
