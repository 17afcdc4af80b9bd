//! Remote servers behind the hub, next to a stdio child: server-everything in its
//! `streamableHttp` and `sse` modes and a Python SDK (`mcp` 2.x) server over Streamable HTTP,
//! each a real process on a loopback port. Tools, resources, prompts, progress, cancellation,
//! sampling and elicitation go through the hub; the transport (Streamable HTTP or, after
//! the first POST fails, HTTP+SSE) is found on its own.
//!
//! The helpers here (the Python peer, a hub with a client that declares sampling and
//! elicitation) serve `remote_faults` too; ports and server processes are in `support`.

pub(crate) use crate::support::free_port;
use crate::support::{
    Client, Hub, Listening, Peers, Scratch, WAIT, everything_listening as everything, fixture,
    serve, text,
};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// Watched for "nothing (more) arrives".
pub(crate) const QUIET: Duration = Duration::from_millis(500);

/// The Python SDK fixture (`fixtures/remote/python_server.py`) on `port`.
pub(crate) async fn python(peers: &Peers, port: u16) -> Listening {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/remote/python_server.py");
    let cmd = vec![
        peers.command("PEER_PYTHON")[0].clone(),
        script.display().to_string(),
        port.to_string(),
    ];
    Listening::start("python server", &cmd, &[], port).await
}

/// What the test client declares: the hub then declares it upstream.
pub(crate) fn client_caps() -> Value {
    json!({"sampling": {}, "elicitation": {}})
}

/// `openpact serve` on these servers (quick reconnects), initialized by a client that
/// declares sampling and elicitation, with every tool in `want` listed.
pub(crate) async fn hub_with(s: &Scratch, servers: Value, want: &[&str]) -> Hub {
    let cfg = s.servers(
        servers,
        Some(json!({"restart": {"initialBackoff": "100ms", "maxBackoff": "400ms"}})),
    );
    let mut hub = serve(&cfg).await;
    let r = hub
        .client
        .request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": client_caps(),
                   "clientInfo": {"name": "remote-test", "version": "0"}}),
        )
        .await;
    assert!(r.get("result").is_some(), "initialize: {r}");
    hub.client
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    listed(&mut hub.client, want).await;
    hub
}

/// Lists tools until every one in `want` is there; panics after `WAIT`.
pub(crate) async fn listed(c: &mut Client, want: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let names: Vec<String> = c
            .list_tools()
            .await
            .iter()
            .filter_map(|t| t["name"].as_str().map(String::from))
            .collect();
        if want.iter().all(|w| names.iter().any(|n| n == w)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not all of {want:?} listed within {WAIT:?}: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sends a request without waiting for it; its id.
pub(crate) async fn start(c: &mut Client, method: &str, params: Value) -> Value {
    let id = json!(c.next_id());
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .await;
    id
}

/// The message of a JSON-RPC error response.
pub(crate) fn error_text(r: &Value) -> String {
    r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error, got {r}"))
        .to_string()
}

/// Calls `tool` with a progress token: the progress the client saw for it, then the response.
async fn with_progress(c: &mut Client, tool: &str, arguments: Value) -> (Vec<Value>, Value) {
    let token = format!("tok-{tool}");
    let id = start(
        c,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": token}}),
    )
    .await;
    let r = c.response(&id).await;
    let mine: Vec<Value> = c
        .inbox
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .filter(|m| m["params"]["progressToken"] == token.as_str())
        .map(|m| m["params"].clone())
        .collect();
    c.inbox
        .retain(|m| m["params"]["progressToken"] != token.as_str());
    (mine, r)
}

/// Calls `tool`, answers the one server→client request `method` it causes with `answer`;
/// the request as the client saw it, and the call's response.
pub(crate) async fn answered_call(
    c: &mut Client,
    tool: &str,
    arguments: Value,
    method: &str,
    answer: Value,
) -> (Value, Value) {
    let id = start(
        c,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
    .await;
    let asked = c
        .wait_for(method, WAIT)
        .await
        .unwrap_or_else(|| panic!("{tool}: no {method} reached the client"));
    c.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer}))
        .await;
    (asked, c.response(&id).await)
}

pub(crate) fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text},
           "model": "remote-test-model", "stopReason": "endTurn"})
}

/// Cancels a long call once it reports progress: no response comes for it, and the server
/// keeps answering.
async fn cancel_midway(c: &mut Client, tool: &str, arguments: Value, after: &str) {
    let token = format!("cancel-{tool}");
    let id = start(
        c,
        "tools/call",
        json!({"name": tool, "arguments": arguments, "_meta": {"progressToken": token}}),
    )
    .await;
    let progress = c
        .wait_for("notifications/progress", WAIT)
        .await
        .expect("progress before the cancel");
    assert_eq!(progress["params"]["progressToken"], token.as_str());
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "the test cancels"}}),
    )
    .await;
    let deadline = Instant::now() + QUIET * 2;
    while let Some(m) = c
        .recv(deadline.saturating_duration_since(Instant::now()))
        .await
    {
        assert!(m["id"] != id, "a response to a cancelled call: {m}");
    }
    let r = c
        .request(
            "tools/call",
            json!({"name": after, "arguments": {"a": 1, "b": 2}}),
        )
        .await;
    assert!(r.get("result").is_some(), "after the cancel: {r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http_and_sse_next_to_a_stdio_child() {
    let Some(peers) = Peers::get() else { return };
    let web = everything(&peers, "streamableHttp", free_port()).await;
    let old = everything(&peers, "sse", free_port()).await;
    let s = Scratch::new();
    // No `type`: Streamable HTTP is tried first; /sse answers the POST with 404.
    let mut hub = hub_with(
        &s,
        json!({
            "web": {"url": format!("http://127.0.0.1:{}/mcp", web.port)},
            "old": {"url": format!("http://127.0.0.1:{}/sse", old.port)},
            "local": fixture(&[]),
        }),
        &[
            "web:get-sum",
            "old:get-sum",
            "local:echo",
            "web:trigger-sampling-request",
        ],
    )
    .await;
    let c = &mut hub.client;

    for server in ["web", "old"] {
        let r = c
            .call(&format!("{server}:get-sum"), json!({"a": 2, "b": 3}))
            .await;
        assert_eq!(text(&r), "The sum of 2 and 3 is 5.", "{server}: {r}");

        let r = c
            .request(
                "prompts/get",
                json!({"name": format!("{server}:args-prompt"), "arguments": {"city": "Paris"}}),
            )
            .await;
        let said = r["result"]["messages"][0]["content"]["text"].to_string();
        assert!(said.contains("Paris"), "{server}: {r}");

        let (progress, r) = with_progress(
            c,
            &format!("{server}:trigger-long-running-operation"),
            json!({"duration": 0.3, "steps": 3}),
        )
        .await;
        assert!(text(&r).contains("Long running operation completed"), "{r}");
        let steps: Vec<&Value> = progress.iter().map(|p| &p["progress"]).collect();
        assert_eq!(
            steps,
            [&json!(1), &json!(2), &json!(3)],
            "{server}: {progress:?}"
        );

        let (asked, r) = answered_call(
            c,
            &format!("{server}:trigger-sampling-request"),
            json!({"prompt": "Say hello", "maxTokens": 20}),
            "sampling/createMessage",
            sampled(&format!("hello via {server}")),
        )
        .await;
        assert!(asked["params"]["messages"].is_array(), "{asked}");
        assert!(
            r["result"]
                .to_string()
                .contains(&format!("hello via {server}")),
            "{server}: {r}"
        );

        let (asked, r) = answered_call(
            c,
            &format!("{server}:trigger-elicitation-request"),
            json!({}),
            "elicitation/create",
            json!({"action": "decline"}),
        )
        .await;
        assert!(asked["params"]["requestedSchema"].is_object(), "{asked}");
        assert!(
            text(&r).contains("User declined to provide the requested information"),
            "{server}: {r}"
        );

        cancel_midway(
            c,
            &format!("{server}:trigger-long-running-operation"),
            json!({"duration": 5, "steps": 50}),
            &format!("{server}:get-sum"),
        )
        .await;
    }

    // Resources: the same URIs on both; the first server in config order serves them.
    let r = c
        .request(
            "resources/read",
            json!({"uri": "demo://resource/static/document/features.md"}),
        )
        .await;
    assert!(
        r["result"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{r}"
    );
    let r = c.call("local:echo", json!({"message": "still here"})).await;
    assert_eq!(text(&r), "still here");
    hub.wait_log("using the legacy HTTP+SSE transport", WAIT)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_server_over_streamable_http() {
    let Some(peers) = Peers::get() else { return };
    let py = python(&peers, free_port()).await;
    let s = Scratch::new();
    let mut hub = hub_with(
        &s,
        json!({
            "py": {"type": "streamable-http", "url": format!("http://127.0.0.1:{}/mcp", py.port)},
            "local": fixture(&[]),
        }),
        &["py:add", "py:resumable", "local:echo"],
    )
    .await;
    let c = &mut hub.client;

    let r = c.call("py:add", json!({"a": 20, "b": 22})).await;
    assert_eq!(text(&r), "42", "{r}");

    let (progress, r) = with_progress(c, "py:steps", json!({"n": 3})).await;
    assert_eq!(text(&r), "done 3", "{r}");
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert_eq!(progress[2]["message"], "step 3", "{progress:?}");

    let (asked, r) = answered_call(
        c,
        "py:sample",
        json!({"prompt": "Say hi"}),
        "sampling/createMessage",
        sampled("hi from the client"),
    )
    .await;
    assert_eq!(asked["params"]["messages"][0]["content"]["text"], "Say hi");
    assert_eq!(text(&r), "hi from the client", "{r}");

    let (_, r) = answered_call(
        c,
        "py:ask_name",
        json!({}),
        "elicitation/create",
        json!({"action": "accept", "content": {"name": "Ada"}}),
    )
    .await;
    assert_eq!(text(&r), "hello Ada", "{r}");

    // The server drops its own response stream mid-call; the hub resumes it with
    // Last-Event-ID after the server's `retry:` and gets the answer and the later progress.
    let (progress, r) = with_progress(c, "py:resumable", json!({})).await;
    assert_eq!(text(&r), "resumed", "{r}");
    let messages: Vec<&Value> = progress.iter().map(|p| &p["message"]).collect();
    assert_eq!(
        messages,
        [&json!("before the break"), &json!("after the break")],
        "{progress:?}"
    );

    let r = c
        .request("resources/read", json!({"uri": "fixture://greeting"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["text"], "hello from python",
        "{r}"
    );
    let r = c
        .request(
            "prompts/get",
            json!({"name": "py:greet", "arguments": {"name": "Bob"}}),
        )
        .await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"], "Please greet Bob.",
        "{r}"
    );

    cancel_midway(c, "py:steps", json!({"n": 200}), "py:add").await;
    let r = c.call("local:echo", json!({"message": "ok"})).await;
    assert_eq!(text(&r), "ok");
}
