//! `openpact serve --http` over real sockets, with reqwest as the client: initialize, lists
//! and calls; progress on a POST's SSE stream; the permission prompt through elicitation on
//! the POST stream and on the GET stream; two sessions kept apart; DELETE cancelling calls;
//! a cancelled call's stream ending (its slot freed);
//! the refusals (unknown session, Origin, token, body size, garbage, non-loopback bind); and
//! `/metrics` counting calls, denials and cache hits. Also the fixture served over HTTP
//! directly (`openpact-fixture --http`, the baseline of the conformance script and the
//! benchmark), a child per session.

use crate::support::{Hub, OPENPACT, Scratch, WAIT, fixture, ready, s, serve_with, state_dir};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// A hub serving stdio and HTTP on a free loopback port, its servers ready.
pub(crate) struct HttpHub {
    pub(crate) hub: Hub,
    pub(crate) base: String,
}

pub(crate) async fn http_hub(
    servers: Value,
    openpact: Option<Value>,
    env: &[(&str, &str)],
) -> HttpHub {
    let sc = Scratch::new();
    let config = sc.servers(servers, openpact);
    let mut hub = serve_with(&config, &["serve", "--http", "127.0.0.1:0"], env)
        .await
        .owning(sc);
    let base = http_base(&mut hub).await;
    HttpHub { base, hub }
}

/// Once the fixture's echo is listed, the `http://HOST:PORT` the hub logged it serves on.
/// The face's `/health` answer.
pub(crate) async fn health(base: &str) -> Value {
    client()
        .get(format!("{base}/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub(crate) async fn http_base(hub: &mut Hub) -> String {
    ready(&mut hub.client, &["fx:echo"]).await;
    hub.http_base().await
}

/// A plain HTTP client (reqwest's TLS here has its crypto provider chosen at run time).
pub(crate) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

pub(crate) fn fx() -> Value {
    json!({"fx": fixture(&[])})
}

/// One MCP client session over HTTP.
pub(crate) struct Http {
    url: String,
    http: reqwest::Client,
    pub(crate) session: Option<String>,
    pub(crate) token: Option<String>,
    /// Messages other than the awaited response that arrived on POST streams.
    pub(crate) inbox: Vec<Value>,
}

impl Http {
    pub(crate) fn new(h: &HttpHub) -> Http {
        Http::at(format!("{}/mcp", h.base))
    }

    pub(crate) fn at(url: String) -> Http {
        Http {
            url,
            http: client(),
            session: None,
            token: None,
            inbox: Vec::new(),
        }
    }

    pub(crate) fn req(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .request(method, &self.url)
            .header("accept", "application/json, text/event-stream");
        if let Some(s) = &self.session {
            r = r.header("mcp-session-id", s);
        }
        if let Some(t) = &self.token {
            r = r.header("authorization", format!("Bearer {t}"));
        }
        r
    }

    pub(crate) async fn post(&self, body: &Value) -> reqwest::Response {
        self.spawn_post(body).await.unwrap()
    }

    /// POSTs on a task of its own: a reply's headers wait for its first message, which may
    /// be a prompt the test must first answer.
    pub(crate) fn spawn_post(&self, body: &Value) -> tokio::task::JoinHandle<reqwest::Response> {
        let send = self
            .req(reqwest::Method::POST)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send();
        tokio::spawn(async move { send.await.unwrap() })
    }

    /// Sends a request and returns its response, keeping whatever came before it.
    pub(crate) async fn rpc(&mut self, id: u64, method: &str, params: Value) -> Value {
        let resp = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        assert_eq!(resp.status(), 200, "{method}");
        let mut events = Events::of(resp).await;
        loop {
            let (_, m) = events.next().await.expect("a response");
            if m["id"] == json!(id) && m.get("method").is_none() {
                return m;
            }
            self.inbox.push(m);
        }
    }

    pub(crate) async fn initialize(&mut self, capabilities: Value) -> Value {
        let resp = self
            .post(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": capabilities,
                "clientInfo": {"name": "http-test", "version": "1"}}}),
            )
            .await;
        assert_eq!(resp.status(), 200);
        let sid = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(
            sid.len() >= 32 && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "{sid}"
        );
        let r: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        self.session = Some(sid);
        let resp = self
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(resp.status(), 202);
        r
    }

    pub(crate) async fn call(&mut self, id: u64, name: &str, arguments: Value) -> Value {
        self.rpc(
            id,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await
    }

    /// Opens the GET stream (resuming after `last` if given).
    pub(crate) async fn listen(&self, last: Option<&str>) -> Events {
        let mut r = self.req(reqwest::Method::GET);
        if let Some(last) = last {
            r = r.header("last-event-id", last);
        }
        let resp = r.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        Events::of(resp).await
    }
}

/// The messages of a reply: one JSON body, or SSE events (id, message).
pub(crate) struct Events {
    resp: Option<reqwest::Response>,
    json: Option<Value>,
    buf: String,
    pub sse: bool,
}

impl Events {
    pub(crate) async fn of(resp: reqwest::Response) -> Events {
        let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
        if ct.starts_with("application/json") {
            let v = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
            return Events {
                resp: None,
                json: Some(v),
                buf: String::new(),
                sse: false,
            };
        }
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        Events {
            resp: Some(resp),
            json: None,
            buf: String::new(),
            sse: true,
        }
    }

    pub(crate) async fn next(&mut self) -> Option<(Option<String>, Value)> {
        if let Some(v) = self.json.take() {
            return Some((None, v));
        }
        let resp = self.resp.as_mut()?;
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                let mut id = None;
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                return Some((id, serde_json::from_str(&data).unwrap()));
            }
            let chunk = resp.chunk().await.ok()??;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next message within `limit`, if any.
    pub(crate) async fn within(&mut self, limit: Duration) -> Option<(Option<String>, Value)> {
        tokio::time::timeout(limit, self.next())
            .await
            .ok()
            .flatten()
    }
}

pub(crate) fn text(r: &Value) -> &str {
    r["result"]["content"][0]["text"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_initialize_list_call_and_health() {
    let h = http_hub(fx(), None, &[]).await;
    let mut c = Http::new(&h);
    let init = c.initialize(json!({})).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    let tools = c.rpc(1, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"fx:echo"), "{names:?}");
    let r = c.call(2, "fx:echo", json!({"message": "over http"})).await;
    assert_eq!(text(&r), "over http", "{r}");
    // A plain call answers with JSON, not a stream.
    let resp = c
        .post(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        .await;
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );

    let health: Value = client()
        .get(format!("{}/health", h.base))
        .send()
        .await
        .unwrap()
        .json_text()
        .await;
    assert_eq!(health["status"], "ok", "{health}");
    assert_eq!(health["servers"][0]["name"], "fx", "{health}");
    assert_eq!(health["servers"][0]["state"], "ready", "{health}");
    assert_eq!(health["sessions"], 1, "{health}");
    // How the server is contained, and what it may touch.
    let sandbox = &health["servers"][0]["sandbox"];
    assert_eq!(sandbox["mode"], "enforced", "{health}");
    assert_eq!(sandbox["enforced"], true, "{health}");
    assert!(
        sandbox["profile"]["network"]["allow"].is_array(),
        "{health}"
    );
    drop(h);
}

/// The value of the sample `series` (name and labels, as written) in a metrics text.
pub(crate) fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_metrics_count_calls_denials_and_cache_hits() {
    let openpact = json!({
        "permissions": {"default": "allow", "deny": ["fx:cwd"]},
        "cache": {"rules": {"fx:echo": "1m"}},
    });
    let h = http_hub(json!({"fx": fixture(&["--hostile"])}), Some(openpact), &[]).await;
    let scrape = || async {
        let resp = client()
            .get(format!("{}/metrics", h.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
        (ct, resp.text().await.unwrap())
    };
    let (ct, before) = scrape().await;
    assert_eq!(
        ct, "application/openmetrics-text; version=1.0.0; charset=utf-8",
        "the Prometheus (OpenMetrics) text type"
    );
    assert!(before.trim_end().ends_with("# EOF"), "{before}");
    assert_eq!(sample(&before, r#"openpact_servers{state="ready"}"#), 1.0);
    let ok = r#"openpact_calls_total{server="fx",outcome="ok"}"#;
    let denied = r#"openpact_calls_total{server="fx",outcome="denied"}"#;
    let hits = r#"openpact_cache_hits_total{server="fx"}"#;
    let took = r#"openpact_call_duration_seconds_count{server="fx"}"#;
    let refused = r#"openpact_sandbox_egress_refused_total{server="fx"}"#;
    assert_eq!(sample(&before, ok), 0.0);
    assert_eq!(sample(&before, refused), 0.0);

    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    let r = c.call(1, "fx:echo", json!({"message": "m"})).await;
    assert_eq!(text(&r), "m", "{r}");
    // The same call again: answered from the cache.
    let r = c.call(2, "fx:echo", json!({"message": "m"})).await;
    assert_eq!(text(&r), "m", "{r}");
    let r = c.call(3, "fx:cwd", json!({})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    // The server's egress proxy refuses a host its sandbox profile does not list.
    let r = c
        .call(4, "fx:try_fetch", json!({"url": "https://evil.example/"}))
        .await;
    // The server's own answer (the proxy's 403) follows the hub's words, which fail the call.
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).contains("may not reach evil.example:443"), "{r}");
    assert!(
        r["result"]["content"][1]["text"]
            .to_string()
            .contains("403"),
        "{r}"
    );

    let (_, after) = scrape().await;
    assert_eq!(sample(&after, refused), 1.0, "{after}");
    assert_eq!(sample(&after, ok), 3.0, "{after}");
    assert_eq!(sample(&after, denied), 1.0, "{after}");
    assert_eq!(
        sample(
            &after,
            r#"openpact_calls_total{server="fx",outcome="error"}"#
        ),
        0.0
    );
    assert_eq!(sample(&after, hits), 1.0, "{after}");
    assert_eq!(sample(&after, took), 4.0, "{after}");
    // Label values are server names, never arguments.
    assert!(!after.contains("\"m\""), "{after}");
    drop(h);
}

/// reqwest here has no `json` feature: parse the text.
pub(crate) trait JsonText {
    async fn json_text(self) -> Value;
}

impl JsonText for reqwest::Response {
    async fn json_text(self) -> Value {
        let t = self.text().await.unwrap();
        serde_json::from_str(&t).unwrap_or_else(|e| panic!("{e}: {t}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_progress_arrives_on_the_posts_sse_stream() {
    let h = http_hub(fx(), None, &[]).await;
    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    let resp = c
        .post(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "fx:progress", "arguments": {"steps": 3, "ms": 20},
            "_meta": {"progressToken": "mine"}}}),
        )
        .await;
    let mut ev = Events::of(resp).await;
    assert!(ev.sse, "progress before the answer makes it a stream");
    let mut progress = 0;
    let mut ids = Vec::new();
    loop {
        let (id, m) = ev.next().await.expect("the stream ends with the response");
        ids.push(id.expect("every event has an id"));
        if m["method"] == "notifications/progress" {
            assert_eq!(m["params"]["progressToken"], "mine", "{m}");
            progress += 1;
        } else {
            assert_eq!(m["id"], 7, "{m}");
            assert!(m["result"].is_object(), "{m}");
            break;
        }
    }
    assert_eq!(progress, 3);
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    assert!(
        ev.next().await.is_none(),
        "the stream closes after the response"
    );
}

fn asking() -> Option<Value> {
    Some(json!({"permissions": {"default": "ask", "allow": ["fx:add", "fx:progress"]}}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_permission_prompt_through_elicitation_on_post_and_get_streams() {
    let h = http_hub(fx(), asking(), &[]).await;
    let mut c = Http::new(&h);
    c.initialize(json!({"elicitation": {}})).await;

    // No GET stream: the prompt comes on the call's own stream.
    let resp = c
        .post(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "fx:echo", "arguments": {"message": "asked on post"}}}),
        )
        .await;
    let mut ev = Events::of(resp).await;
    let (_, ask) = ev.within(WAIT).await.expect("a prompt");
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert!(
        ask["params"]["message"]
            .as_str()
            .unwrap()
            .contains("fx:echo")
    );
    let answer = c
        .post(&json!({"jsonrpc": "2.0", "id": ask["id"], "result":
            {"action": "accept", "content": {"decision": "once"}}}))
        .await;
    assert_eq!(answer.status(), 202);
    let (_, r) = ev.within(WAIT).await.expect("the answer");
    assert_eq!(text(&r), "asked on post", "{r}");

    // With the GET stream open, the prompt comes there.
    let mut get = c.listen(None).await;
    let resp = c.spawn_post(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx:echo", "arguments": {"message": "asked on get"}}}));
    let (id, ask) = get.within(WAIT).await.expect("a prompt on the GET stream");
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert!(id.unwrap().starts_with('g'));
    c.post(&json!({"jsonrpc": "2.0", "id": ask["id"], "result":
        {"action": "accept", "content": {"decision": "once"}}}))
        .await;
    let mut ev = Events::of(resp.await.unwrap()).await;
    let (_, r) = ev.within(WAIT).await.expect("the answer");
    assert_eq!(text(&r), "asked on get", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sessions_are_isolated() {
    let h = http_hub(fx(), asking(), &[]).await;
    let mut a = Http::new(&h);
    let mut b = Http::new(&h);
    a.initialize(json!({"elicitation": {}})).await;
    b.initialize(json!({"elicitation": {}})).await;
    assert_ne!(a.session, b.session);
    let mut a_get = a.listen(None).await;
    let mut b_get = b.listen(None).await;

    // A's prompt is pending; B neither sees it nor waits for it.
    let a_call = a.spawn_post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fx:echo", "arguments": {"message": "from a"}}}));
    let (_, ask) = a_get.within(WAIT).await.expect("A's prompt");
    assert_eq!(ask["method"], "elicitation/create");
    let r = b.call(1, "fx:add", json!({"a": 2, "b": 3})).await;
    assert_eq!(text(&r), "5", "{r}");
    assert!(
        b_get.within(Duration::from_millis(500)).await.is_none(),
        "B saw something of A's"
    );
    // B cannot answer A's prompt: the answer is B's, to no request of B's.
    b.post(&json!({"jsonrpc": "2.0", "id": ask["id"], "result":
        {"action": "accept", "content": {"decision": "once"}}}))
        .await;
    // Same progress token in both sessions at once: each gets its own.
    let progress = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "fx:progress", "arguments": {"steps": 2, "ms": 20},
            "_meta": {"progressToken": "same"}}})
    };
    let (pa, pb) = tokio::join!(a.spawn_post(&progress(5)), b.spawn_post(&progress(5)));
    for resp in [pa, pb] {
        let mut ev = Events::of(resp.unwrap()).await;
        let mut seen = 0;
        while let Some((_, m)) = ev.within(WAIT).await {
            if m["method"] == "notifications/progress" {
                seen += 1;
            } else {
                assert_eq!(m["id"], 5);
                break;
            }
        }
        assert_eq!(seen, 2, "each session gets exactly its own progress");
    }
    a.post(&json!({"jsonrpc": "2.0", "id": ask["id"], "result":
        {"action": "accept", "content": {"decision": "once"}}}))
        .await;
    let mut ev = Events::of(a_call.await.unwrap()).await;
    let (_, r) = ev.within(WAIT).await.expect("A's answer");
    assert_eq!(text(&r), "from a", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_delete_ends_the_session_and_cancels_its_calls() {
    let h = http_hub(fx(), None, &[]).await;
    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    let slow = c.spawn_post(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "fx:slow", "arguments": {"ms": 30000}}}));
    let t0 = Instant::now();
    let deleting = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let resp = c.req(reqwest::Method::DELETE).send().await.unwrap();
        assert_eq!(resp.status(), 204);
    };
    let (resp, ()) = tokio::join!(slow, deleting);
    let r = resp.unwrap().json_text().await;
    assert!(
        r["error"].is_object(),
        "the cancelled call is answered: {r}"
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    h.hub
        .wait_log("HTTP session ended by the client", WAIT)
        .await;
    // The session is gone.
    let resp = c
        .post(&json!({"jsonrpc": "2.0", "id": 10, "method": "ping"}))
        .await;
    assert_eq!(resp.status(), 404);
}

/// A client that cancels a call and goes on reading its POST (as SDK clients read a stream
/// to its end) sees that stream end without an answer, and the call's `maxInFlight` slot is
/// free again. The streams used to stay open for good: with `maxInFlight` calls cancelled a
/// session could call nothing more, and it was never idle, so it never expired (found by
/// `examples/soak`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_a_cancelled_calls_stream_ends_and_frees_its_slot() {
    let h = http_hub(fx(), Some(json!({"http": {"maxInFlight": 2}})), &[]).await;
    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    let slow = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "fx:slow", "arguments": {"ms": 30000}}})
    };
    let posts = [c.spawn_post(&slow(1)), c.spawn_post(&slow(2))];
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in [1, 2] {
        let resp = c
            .post(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "test"}}),
            )
            .await;
        assert_eq!(resp.status(), 202);
    }
    for post in posts {
        let resp = tokio::time::timeout(Duration::from_secs(10), post)
            .await
            .expect("the POST of a cancelled call ends")
            .unwrap();
        assert_eq!(resp.status(), 200);
        let body = tokio::time::timeout(Duration::from_secs(10), resp.text())
            .await
            .expect("its stream ends")
            .unwrap();
        assert!(
            !body.contains("\"id\""),
            "no answer to a cancelled call: {body}"
        );
    }
    let r = c.call(3, "fx:echo", json!({"message": "after"})).await;
    assert_eq!(text(&r), "after", "both slots are free again: {r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refusals_unknown_session_origin_garbage_and_size() {
    let h = http_hub(fx(), Some(json!({"http": {"maxBodySize": "2KiB"}})), &[]).await;
    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});

    // Unknown session → 404; none at all → 400.
    let mut stranger = Http::new(&h);
    stranger.session = Some("0123456789abcdef0123456789abcdef".into());
    assert_eq!(stranger.post(&ping).await.status(), 404);
    stranger.session = None;
    assert_eq!(stranger.post(&ping).await.status(), 400);

    // Origin: a foreign one is refused, a local one is fine.
    let with_origin = |o: &str| {
        c.req(reqwest::Method::POST)
            .header("origin", o)
            .header("content-type", "application/json")
            .body(ping.to_string())
    };
    let r = with_origin("http://evil.example").send().await.unwrap();
    assert_eq!(r.status(), 403);
    let r = with_origin("http://localhost:5173").send().await.unwrap();
    assert_eq!(r.status(), 200);
    // Host: DNS rebinding.
    let r = c
        .req(reqwest::Method::POST)
        .header("host", "rebound.example:8765")
        .body(ping.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    // Garbage → a JSON-RPC parse error.
    let r = c
        .req(reqwest::Method::POST)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let e = r.json_text().await;
    assert_eq!(e["error"]["code"], -32700, "{e}");

    // Oversized → 413, and the session still serves.
    let big = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params":
        {"name": "fx:echo", "arguments": {"message": "x".repeat(4096)}}});
    assert_eq!(c.post(&big).await.status(), 413);
    let r = c.call(3, "fx:echo", json!({"message": "still here"})).await;
    assert_eq!(text(&r), "still here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_bearer_token_is_required_when_configured() {
    let h = http_hub(
        fx(),
        Some(json!({"http": {"token": "${HTTP_FACE_TEST_TOKEN}"}})),
        &[("HTTP_FACE_TEST_TOKEN", "t0ken-for-tests")],
    )
    .await;
    let mut c = Http::new(&h);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let r = c.post(&init).await;
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    c.token = Some("wrong".into());
    assert_eq!(c.post(&init).await.status(), 401);
    let health = client()
        .get(format!("{}/health", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 401);
    c.token = Some("t0ken-for-tests".into());
    c.initialize(json!({})).await;
    let r = c.call(1, "fx:echo", json!({"message": "authorised"})).await;
    assert_eq!(text(&r), "authorised");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_non_loopback_bind_without_token_is_refused() {
    let sc = Scratch::new();
    let config = sc.servers(fx(), None);
    let out = tokio::time::timeout(WAIT, refuse(&config))
        .await
        .expect("exits at once");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to serve HTTP on 0.0.0.0"), "{err}");
    assert!(err.contains("openpact.http.token"), "{err}");
}

async fn refuse(config: &Path) -> std::process::Output {
    tokio::process::Command::new(OPENPACT)
        .args(["--config", s(config), "--state-dir"])
        .arg(state_dir(config))
        .args(["serve", "--http", "0.0.0.0:0", "--no-stdio"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_get_stream_resumes_with_last_event_id() {
    let h = http_hub(fx(), asking(), &[]).await;
    let mut c = Http::new(&h);
    c.initialize(json!({"elicitation": {}})).await;
    let mut get = c.listen(None).await;
    // Two prompts (one per call; they are serialised, so the second comes after the first
    // is answered) make two GET events.
    let first = c.spawn_post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fx:echo", "arguments": {"message": "one"}}}));
    let (id1, ask1) = get.within(WAIT).await.expect("prompt 1");
    drop(get);
    // The stream is gone; resuming after the first event replays nothing yet, and the
    // next prompt arrives on the resumed stream.
    let mut get = c.listen(Some(id1.as_deref().unwrap())).await;
    c.post(&json!({"jsonrpc": "2.0", "id": ask1["id"], "result":
        {"action": "accept", "content": {"decision": "once"}}}))
        .await;
    let _ = Events::of(first.await.unwrap())
        .await
        .within(WAIT)
        .await
        .expect("answer 1");
    let second = c.spawn_post(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx:echo", "arguments": {"message": "two"}}}));
    let (id2, ask2) = get.within(WAIT).await.expect("prompt 2");
    assert_ne!(id1, id2);
    // Resuming from before the second event replays it.
    drop(get);
    let mut again = c.listen(Some(id1.as_deref().unwrap())).await;
    let (id, replayed) = again.within(WAIT).await.expect("replayed");
    assert_eq!(id, id2);
    assert_eq!(replayed, ask2);
    c.post(&json!({"jsonrpc": "2.0", "id": ask2["id"], "result":
        {"action": "accept", "content": {"decision": "once"}}}))
        .await;
    let (_, r) = Events::of(second.await.unwrap())
        .await
        .within(WAIT)
        .await
        .expect("answer 2");
    assert_eq!(text(&r), "two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_a_full_hub_ends_its_idlest_session_and_refuses_only_when_all_are_busy() {
    let h = http_hub(fx(), Some(json!({"http": {"maxSessions": 2}})), &[]).await;
    let (mut a, mut b) = (Http::new(&h), Http::new(&h));
    a.initialize(json!({})).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    b.initialize(json!({})).await;
    // Full, both idle: the newcomer takes the slot of `a`, idle longest.
    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(a.post(&ping).await.status(), 404, "a was ended");
    assert_eq!(b.post(&ping).await.status(), 200, "b kept");
    // Full with every session busy: refused, and nobody's call is lost.
    let slow = |s: &Http, id: u64| {
        s.spawn_post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "fx:slow", "arguments": {"ms": 1500}}}))
    };
    let (sb, sc) = (slow(&b, 7), slow(&c, 8));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut d = Http::new(&h);
    let refused = d
        .post(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "late", "version": "1"}}}),
        )
        .await;
    assert_eq!(refused.status(), 503);
    for done in [sb, sc] {
        let r = done.await.unwrap().json_text().await;
        assert_eq!(text(&r), "slept 1500 ms", "{r}");
    }
    d.initialize(json!({})).await;
}

/// `openpact-fixture --http`: the fixture served directly over HTTP (its own axum server),
/// each session a child process of its own. DELETE stops a session's child, a child that
/// exits ends its session (its call in flight answered), SIGTERM stops the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_over_http_gives_each_session_a_child_of_its_own() {
    let (mut server, url) = crate::support::fixture_over_http(&["--conformance"]).await;
    let (mut a, mut b) = (Http::at(url.clone()), Http::at(url));
    a.initialize(json!({})).await;
    b.initialize(json!({})).await;
    let pid = |r: Value| -> i32 {
        let pids: Value = serde_json::from_str(text(&r)).unwrap();
        i32::try_from(pids["pid"].as_i64().unwrap()).unwrap()
    };
    let pid_a = pid(a.call(1, "pids", json!({})).await);
    let pid_b = pid(b.call(1, "pids", json!({})).await);
    assert_ne!(pid_a, pid_b, "one child per session");

    // A conformance tool, its progress on the POST's stream.
    let r = a
        .rpc(
            2,
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {},
            "_meta": {"progressToken": "t"}}),
        )
        .await;
    assert_eq!(text(&r), "Progress test completed", "{r}");
    let progress: Vec<&Value> = a
        .inbox
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| &m["params"]["progress"])
        .collect();
    assert_eq!(progress, [&json!(0), &json!(50), &json!(100)]);

    // DELETE stops B's child (and reaps it).
    let resp = b.req(reqwest::Method::DELETE).send().await.unwrap();
    assert_eq!(resp.status(), 204);
    let t0 = Instant::now();
    while Path::new(&format!("/proc/{pid_b}")).exists() {
        assert!(
            t0.elapsed() < WAIT,
            "B's child {pid_b} outlived its session"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        Path::new(&format!("/proc/{pid_a}")).exists(),
        "A's child went too"
    );

    // A's child exiting ends A's session: the call it died on is answered, then 404.
    let r = tokio::time::timeout(WAIT, a.call(3, "crash", json!({})))
        .await
        .expect("the call the child died on is answered");
    let why = r["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("exited"), "{r}");
    let resp = a
        .post(&json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}))
        .await;
    assert_eq!(resp.status(), 404);

    let pid = nix::unistd::Pid::from_raw(i32::try_from(server.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(WAIT, server.wait()).await.unwrap();
    assert!(status.unwrap().success());
}

/// The stdio client leaving ends the stdio session only: HTTP serves on until SIGTERM (a
/// background job, `</dev/null`, a service manager).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_serves_on_after_stdin_closes() {
    use nix::sys::signal::Signal;
    let mut h = http_hub(fx(), None, &[]).await;
    h.hub.client.close_stdin();
    h.hub
        .wait_log("stdin closed: the stdio session ends", WAIT)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        h.hub.child.try_wait().unwrap().is_none(),
        "the hub exited when stdin closed:\n{}",
        h.hub.stderr()
    );
    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    let r = c.call(1, "fx:echo", json!({"message": "still here"})).await;
    assert_eq!(text(&r), "still here", "{r}");

    let (code, _) = h.hub.signal(Signal::SIGTERM).await;
    assert_eq!(code, Some(0), "{}", h.hub.stderr());
}

/// Sends SIGKILL to a process when dropped (a test failing half-way leaves nothing behind).
struct KillOnDrop(Option<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// `openpact serve --http &` from an interactive shell: a background job reading its
/// terminal is stopped by SIGTTIN, and HTTP would stop with it. The stdio session ends
/// instead and HTTP serves on. Runs a job-control shell on a pseudo-terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_background_job_on_a_terminal_keeps_serving() {
    use std::process::Stdio;
    let sc = Scratch::new();
    let config = sc.servers(fx(), None);
    let pty = nix::pty::openpty(None, None).unwrap();
    let tty = |fd: &std::os::fd::OwnedFd| Stdio::from(fd.try_clone().unwrap());
    let log = sc.path().join("hub.log");
    let pidfile = sc.path().join("hub.pid");
    // `set -m`: job control, so the job gets a process group of its own, in the background,
    // and keeps the terminal as its stdin.
    let script = r#"set -m; "$@" >/dev/null 2>"$LOG" & echo $! >"$PIDFILE"; wait"#;
    let state = state_dir(&config);
    let mut shell = tokio::process::Command::new("setsid")
        .args(["-c", "bash", "-c", script, "bash", OPENPACT, "--config"])
        .arg(&config)
        .arg("--state-dir")
        .arg(&state)
        .args(["serve", "--http", "127.0.0.1:0"])
        .env("LOG", &log)
        .env("PIDFILE", &pidfile)
        .env("OPENPACT_LOG", "info")
        .stdin(tty(&pty.slave))
        .stdout(tty(&pty.slave))
        .stderr(tty(&pty.slave))
        .kill_on_drop(true)
        .spawn()
        .expect("setsid and bash");
    let mut guard = KillOnDrop(None);
    let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(15);
    let (pid, base) = loop {
        let pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok());
        guard.0 = guard.0.or(pid);
        let text = read_log();
        if let (Some(pid), Some(start)) = (pid, text.find("http://"))
            && let Some(len) = text[start..].find("/mcp")
        {
            break (pid, text[start..start + len].to_string());
        }
        assert!(
            Instant::now() < deadline,
            "the hub never served HTTP (stopped by SIGTTIN?):\n{}",
            read_log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Time to read the terminal, and be stopped if it were going to be.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let state = stat.rsplit(')').next().unwrap().split_whitespace().next();
    assert_ne!(state, Some("T"), "the background hub was stopped: {stat}");
    let health = tokio::time::timeout(
        Duration::from_secs(5),
        client().get(format!("{base}/health")).send(),
    )
    .await
    .expect("/health answered")
    .unwrap();
    assert_eq!(health.status(), 200);
    assert!(
        read_log().contains("stdin is a terminal this process is in the background of"),
        "{}",
        read_log()
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), shell.wait())
        .await
        .expect("the shell's job ends on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
    guard.0 = None;
    drop(pty.master);
}
