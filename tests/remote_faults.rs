//! Remote servers that misbehave, and what the hub makes of it: a server killed mid-call or
//! down at start, a hanging one, HTTP errors (4xx, 500), a garbage event stream, answers over
//! the size limit, a redirect to another host, a forgotten session, a server that wants a
//! login; and the wire details of a well-behaved one (session and version headers, the
//! configured headers, the GET stream, DELETE at shutdown).
//!
//! Most use a small scripted Streamable HTTP server (tiny_http) that records every request;
//! the process faults use the Python SDK server.

use crate::remote::{QUIET, error_text, free_port, hub_with, listed, python, start};
use crate::support::{OPENPACT, Peers, Scratch, WAIT, fixture, text};
use serde_json::{Value, json};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// One request the scripted server received.
#[derive(Debug, Clone)]
struct Seen {
    http: String,
    /// The JSON-RPC method, for a POSTed request or notification.
    rpc: Option<String>,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
struct Options {
    /// Answer everything with 401.
    unauthorized: bool,
    /// Offer a GET stream for the server's own messages.
    get_stream: bool,
    /// Where the `redirect` tool sends the request.
    redirect_to: Option<u16>,
}

#[derive(Default)]
struct State {
    sessions: Vec<String>,
    started: u32,
    grown: bool,
    /// Open GET streams.
    listeners: Vec<mpsc::Sender<Vec<u8>>>,
    /// Requests never answered.
    hung: Vec<tiny_http::Request>,
}

/// A Streamable HTTP MCP server on 127.0.0.1 whose tools fail in scripted ways.
struct Scripted {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Scripted {
    fn start(opts: Options) -> Scripted {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let port = server.server_addr().to_ip().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, halt) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut state = State::default();
            while !halt.load(Ordering::Relaxed) {
                if let Ok(Some(req)) = server.recv_timeout(Duration::from_millis(50)) {
                    handle(req, &mut state, &opts, &log);
                }
            }
        });
        Scripted {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn count(&self, rpc: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.rpc.as_deref() == Some(rpc))
            .count()
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn header(name: &str, value: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()).unwrap()
}

fn json_reply(value: &Value) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    tiny_http::Response::from_string(value.to_string())
        .with_header(header("Content-Type", "application/json"))
}

fn sse_reply(body: String) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    tiny_http::Response::from_string(body).with_header(header("Content-Type", "text/event-stream"))
}

fn tools(grown: bool) -> Value {
    let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});
    let mut list: Vec<Value> = [
        "echo", "hang", "boom", "teapot", "garbage", "huge", "huge_sse", "redirect", "forget",
        "grow",
    ]
    .iter()
    .map(|n| tool(n))
    .collect();
    if grown {
        list.push(tool("grown"));
    }
    json!({"tools": list})
}

fn handle(mut req: tiny_http::Request, st: &mut State, opts: &Options, log: &Mutex<Vec<Seen>>) {
    let mut raw = String::new();
    let _ = req.as_reader().read_to_string(&mut raw);
    let body: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
    let seen = Seen {
        http: req.method().as_str().to_string(),
        rpc: body["method"].as_str().map(String::from),
        headers: req
            .headers()
            .iter()
            .map(|h| (h.field.as_str().as_str().to_string(), h.value.to_string()))
            .collect(),
        body: body.clone(),
    };
    log.lock().unwrap().push(seen.clone());
    if opts.unauthorized {
        let _ = req.respond(
            tiny_http::Response::from_string("unauthorized")
                .with_status_code(401)
                .with_header(header("WWW-Authenticate", "Bearer realm=\"scripted\"")),
        );
        return;
    }
    let session = seen.header("mcp-session-id").map(String::from);
    let known = session.as_ref().is_some_and(|s| st.sessions.contains(s));
    match seen.http.as_str() {
        "DELETE" => {
            st.sessions.retain(|s| Some(s) != session.as_ref());
            let _ = req.respond(tiny_http::Response::empty(200));
            return;
        }
        "GET" if opts.get_stream && known => {
            // Written by hand, flushed event by event (tiny_http's responses buffer), the
            // body ending when the connection closes.
            let (tx, rx) = mpsc::channel::<Vec<u8>>();
            st.listeners.push(tx);
            let mut out = req.into_writer();
            std::thread::spawn(move || {
                let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n: open\n\n";
                let mut ok = out
                    .write_all(head.as_bytes())
                    .and_then(|()| out.flush())
                    .is_ok();
                while ok && let Ok(event) = rx.recv() {
                    ok = out.write_all(&event).and_then(|()| out.flush()).is_ok();
                }
            });
            return;
        }
        "GET" => {
            let _ = req.respond(tiny_http::Response::empty(405));
            return;
        }
        _ => {}
    }
    let id = body.get("id").cloned();
    let method = seen.rpc.clone().unwrap_or_default();
    if method == "initialize" {
        st.started += 1;
        let sid = format!("s-{}", st.started);
        st.sessions.push(sid.clone());
        let result = json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": true}},
                            "serverInfo": {"name": "scripted", "version": "1"}});
        let _ = req.respond(
            json_reply(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
                .with_header(header("Mcp-Session-Id", &sid)),
        );
        return;
    }
    if !known {
        let status = if session.is_some() { 404 } else { 400 };
        let _ = req
            .respond(tiny_http::Response::from_string("no such session").with_status_code(status));
        return;
    }
    let Some(id) = id.filter(|_| !method.is_empty()) else {
        let _ = req.respond(tiny_http::Response::empty(202));
        return;
    };
    let answer = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    let says = |text: &str| answer(json!({"content": [{"type": "text", "text": text}]}));
    if method == "tools/list" {
        let _ = req.respond(json_reply(&answer(tools(st.grown))));
        return;
    }
    if method != "tools/call" {
        let _ = req.respond(json_reply(&answer(json!({}))));
        return;
    }
    let big = "x".repeat(200 * 1024);
    let _ = match body["params"]["name"].as_str().unwrap_or_default() {
        "echo" => req.respond(json_reply(&says(
            body["params"]["arguments"]["message"]
                .as_str()
                .unwrap_or(""),
        ))),
        "hang" => {
            st.hung.push(req);
            Ok(())
        }
        "boom" => req.respond(
            tiny_http::Response::from_string("Internal Server Error").with_status_code(500),
        ),
        "teapot" => {
            req.respond(tiny_http::Response::from_string("short and stout").with_status_code(418))
        }
        "garbage" => req.respond(sse_reply(
            "this is not an event stream\n\n: a comment\n\ndata: {not json\n\n".into(),
        )),
        "huge" => req.respond(json_reply(&says(&big))),
        "huge_sse" => req.respond(sse_reply(format!("data: {}\n\n", says(&big)))),
        "redirect" => req.respond(tiny_http::Response::empty(307).with_header(header(
            "Location",
            &format!("http://localhost:{}/mcp", opts.redirect_to.unwrap_or(9)),
        ))),
        "forget" => {
            st.sessions.clear();
            req.respond(json_reply(&says("forgotten")))
        }
        "grow" => {
            st.grown = true;
            let event =
                "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
            st.listeners
                .retain(|l| l.send(event.as_bytes().to_vec()).is_ok());
            req.respond(json_reply(&says("grown")))
        }
        other => req.respond(json_reply(&says(&format!("unknown tool {other}")))),
    };
}

/// The scripted server as `sc` (with `extra` entry keys) next to a fixture child `local`.
fn servers(sc: &Scripted, extra: Value) -> Value {
    let mut entry = json!({"url": sc.url(), "headers": {"Authorization": "Bearer test-token"}});
    if let (Some(e), Some(x)) = (entry.as_object_mut(), extra.as_object()) {
        e.extend(x.clone());
    }
    json!({"sc": entry, "local": fixture(&[])})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_sends_session_version_and_headers_listens_and_ends_the_session() {
    let sc = Scripted::start(Options {
        get_stream: true,
        ..Options::default()
    });
    let s = Scratch::new();
    let mut hub = hub_with(&s, servers(&sc, json!({})), &["sc:echo", "local:echo"]).await;
    let r = hub.client.call("sc:echo", json!({"message": "hi"})).await;
    assert_eq!(text(&r), "hi");

    // The server announces a new tool on its GET stream.
    let r = hub.client.call("sc:grow", json!({})).await;
    assert_eq!(text(&r), "grown");
    hub.client
        .wait_for("notifications/tools/list_changed", WAIT)
        .await
        .expect("the change announced on the GET stream reaches the client");
    listed(&mut hub.client, &["sc:grown"]).await;
    hub.close().await;

    let seen = sc.seen();
    let init = &seen[0];
    assert_eq!(init.rpc.as_deref(), Some("initialize"));
    let accept = init.header("accept").unwrap_or_default();
    assert!(
        accept.contains("application/json") && accept.contains("text/event-stream"),
        "{accept}"
    );
    assert_eq!(init.header("mcp-session-id"), None);
    for s in &seen {
        assert_eq!(
            s.header("authorization"),
            Some("Bearer test-token"),
            "{s:?}"
        );
    }
    for s in &seen[1..] {
        assert_eq!(s.header("mcp-session-id"), Some("s-1"), "{s:?}");
        assert_eq!(
            s.header("mcp-protocol-version"),
            Some("2025-11-25"),
            "{s:?}"
        );
    }
    let order: Vec<&str> = seen.iter().filter_map(|s| s.rpc.as_deref()).collect();
    let initialized = order
        .iter()
        .position(|m| *m == "notifications/initialized")
        .unwrap();
    let first_list = order.iter().position(|m| *m == "tools/list").unwrap();
    assert!(initialized < first_list, "{order:?}");
    let get = seen.iter().find(|s| s.http == "GET").expect("a GET stream");
    assert_eq!(get.header("accept"), Some("text/event-stream"));
    let last = seen.last().unwrap();
    assert_eq!(
        last.http, "DELETE",
        "the session is ended at shutdown: {seen:?}"
    );
    assert_eq!(last.header("mcp-session-id"), Some("s-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_remote_server_times_out_and_is_told_to_cancel() {
    let sc = Scripted::start(Options::default());
    let s = Scratch::new();
    let mut hub = hub_with(
        &s,
        servers(&sc, json!({"timeout": "1s"})),
        &["sc:hang", "local:echo"],
    )
    .await;
    let c = &mut hub.client;
    let t0 = Instant::now();
    let id = start(c, "tools/call", json!({"name": "sc:hang", "arguments": {}})).await;
    let r = c.call("local:echo", json!({"message": "meanwhile"})).await;
    assert_eq!(text(&r), "meanwhile");
    let r = c.response(&id).await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    assert!(
        error_text(&r).contains("did not answer tools/call within 1s"),
        "{r}"
    );
    assert!(t0.elapsed() < Duration::from_secs(10));
    let deadline = Instant::now() + WAIT;
    while sc.count("notifications/cancelled") == 0 {
        assert!(
            Instant::now() < deadline,
            "no notifications/cancelled POSTed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = sc.seen();
    let hung = seen
        .iter()
        .find(|s| s.body["params"]["name"] == "hang")
        .unwrap();
    let cancel = seen
        .iter()
        .find(|s| s.rpc.as_deref() == Some("notifications/cancelled"))
        .unwrap();
    assert_eq!(
        cancel.body["params"]["requestId"], hung.body["id"],
        "{cancel:?}"
    );
    let r = c.call("sc:echo", json!({"message": "after"})).await;
    assert_eq!(text(&r), "after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_fail_the_call_with_the_status_and_a_500_reconnects() {
    let sc = Scripted::start(Options::default());
    let s = Scratch::new();
    let mut hub = hub_with(&s, servers(&sc, json!({})), &["sc:boom", "local:echo"]).await;
    let c = &mut hub.client;

    // A 4xx answers that call only.
    let r = c.call("sc:teapot", json!({})).await;
    assert_eq!(
        error_text(&r),
        "server 'sc' answered HTTP 418 I'm a teapot: short and stout",
        "{r}"
    );
    assert_eq!(sc.count("initialize"), 1);

    // A 5xx answers the call, then the server is reconnected (a new session).
    let r = c.call("sc:boom", json!({})).await;
    assert_eq!(
        error_text(&r),
        "server 'sc' answered HTTP 500 Internal Server Error: Internal Server Error",
        "{r}"
    );
    let deadline = Instant::now() + WAIT;
    while sc.count("initialize") < 2 {
        assert!(Instant::now() < deadline, "no reconnect after the 500");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    listed(c, &["sc:echo"]).await;
    let r = c.call("sc:echo", json!({"message": "back"})).await;
    assert_eq!(text(&r), "back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_streams_and_oversized_answers_fail_only_their_call() {
    let sc = Scripted::start(Options::default());
    let s = Scratch::new();
    let cfg = s.servers(
        servers(&sc, json!({})),
        Some(json!({"maxMessageSize": "64KiB"})),
    );
    let mut hub = crate::support::serve(&cfg).await;
    hub.client.initialize().await;
    listed(&mut hub.client, &["sc:garbage", "local:echo"]).await;
    let c = &mut hub.client;

    let r = c.call("sc:garbage", json!({})).await;
    assert!(
        error_text(&r).starts_with("server 'sc' ended the response stream before answering"),
        "{r}"
    );
    for tool in ["sc:huge", "sc:huge_sse"] {
        let r = c.call(tool, json!({})).await;
        assert!(
            error_text(&r).contains("over the limit (openpact.maxMessageSize)"),
            "{tool}: {r}"
        );
    }
    let r = c.call("sc:echo", json!({"message": "fine"})).await;
    assert_eq!(text(&r), "fine");
    assert_eq!(sc.count("initialize"), 1, "none of these ends the session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_another_host_is_not_followed_with_the_credentials() {
    let elsewhere = Scripted::start(Options::default());
    let sc = Scripted::start(Options {
        redirect_to: Some(elsewhere.port),
        ..Options::default()
    });
    let s = Scratch::new();
    let mut hub = hub_with(&s, servers(&sc, json!({})), &["sc:redirect"]).await;
    let r = hub.client.call("sc:redirect", json!({})).await;
    let message = error_text(&r);
    assert!(
        message.contains(&format!(
            "redirected the request (HTTP 307 Temporary Redirect) to http://localhost:{}",
            elsewhere.port
        )) && message.contains("another origin"),
        "{r}"
    );
    tokio::time::sleep(QUIET).await;
    assert!(
        elsewhere
            .seen()
            .iter()
            .all(|s| s.header("authorization").is_none()),
        "the token went to the other host: {:?}",
        elsewhere.seen()
    );
    assert!(elsewhere.seen().is_empty(), "{:?}", elsewhere.seen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_session_is_started_afresh() {
    let sc = Scripted::start(Options::default());
    let s = Scratch::new();
    let mut hub = hub_with(&s, servers(&sc, json!({})), &["sc:forget"]).await;
    let c = &mut hub.client;
    let r = c.call("sc:forget", json!({})).await;
    assert_eq!(text(&r), "forgotten");
    // The next request meets a 404 and fails; the hub starts a new session at once.
    let r = c.call("sc:echo", json!({"message": "lost"})).await;
    assert!(error_text(&r).contains("ended our session"), "{r}");
    let deadline = Instant::now() + WAIT;
    while sc.count("initialize") < 2 {
        assert!(Instant::now() < deadline, "no new session");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    listed(c, &["sc:echo"]).await;
    let r = c.call("sc:echo", json!({"message": "found"})).await;
    assert_eq!(text(&r), "found");
    let inits: Vec<Seen> = sc
        .seen()
        .into_iter()
        .filter(|s| s.rpc.as_deref() == Some("initialize"))
        .collect();
    assert_eq!(inits[1].header("mcp-session-id"), None, "{inits:?}");
    let again: Vec<&str> = sc
        .seen()
        .iter()
        .filter(|s| s.header("mcp-session-id") == Some("s-2"))
        .filter_map(|s| s.rpc.as_deref())
        .map(|m| {
            if m == "tools/list" {
                "tools/list"
            } else {
                "other"
            }
        })
        .collect();
    assert!(again.contains(&"tools/list"), "re-listed: {again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_wants_a_login_says_how_and_others_serve() {
    let sc = Scripted::start(Options {
        unauthorized: true,
        ..Options::default()
    });
    let s = Scratch::new();
    let mut hub = hub_with(&s, servers(&sc, json!({})), &["local:echo"]).await;
    let r = hub.client.call("sc:echo", json!({"message": "x"})).await;
    let message = error_text(&r);
    assert!(
        message.contains("belongs to server 'sc'")
            && message.contains("waiting for a login; run `openpact auth login sc`")
            && message.contains("401"),
        "{r}"
    );
    assert!(!hub.stderr().contains("test-token"), "{}", hub.stderr());

    // `openpact servers` tells the same, without the token.
    let cfg = s.path().join("mcp.json");
    let out = tokio::process::Command::new(OPENPACT)
        .arg("--config")
        .arg(&cfg)
        .arg("--state-dir")
        .arg(s.path().join("cli-state"))
        .args(["servers", "--start"])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("needs login") && stdout.contains("login: run `openpact auth login sc`"),
        "{stdout}"
    );
    let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(!all.contains("test-token"), "{all}");
    assert!(
        stdout.contains(&format!("url: {} (auto)", sc.url())),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_shows_remote_servers_without_secrets() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"r": {"url": "https://user:pw-s3cret@mcp.example.com/mcp?api_key=k3y-s3cret",
                     "headers": {"Authorization": "Bearer t0ken"},
                     "oauth": {"clientId": "app", "scopes": ["read"]}},
               "o": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}),
        None,
    );
    for json_out in [false, true] {
        let mut cmd = tokio::process::Command::new(OPENPACT);
        cmd.arg("--config")
            .arg(&cfg)
            .arg("--state-dir")
            .arg(s.path());
        // The file store whatever the machine has, so the answer does not depend on a keyring.
        cmd.env("OPENPACT_TOKEN_STORE", "file")
            .args(["config", "check"]);
        if json_out {
            cmd.arg("--json");
        }
        let out = cmd.output().await.unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{stdout}");
        // Secrets that no temp dir's random name can hold by chance (`.tmpwX…` holds "pw").
        for secret in ["pw-s3cret", "k3y-s3cret", "t0ken"] {
            assert!(!stdout.contains(secret), "{secret} shown: {stdout}");
        }
        assert!(
            stdout.contains("https://mcp.example.com/mcp?api_key=…"),
            "{stdout}"
        );
        if json_out {
            let v: Value = serde_json::from_str(&stdout).unwrap();
            assert_eq!(v["servers"][0]["transport"], "auto", "{v}");
            assert_eq!(v["servers"][1]["transport"], "sse", "{v}");
            assert_eq!(v["servers"][0]["headers"], json!(["Authorization"]), "{v}");
            assert_eq!(v["servers"][0]["oauth"]["clientId"], "app", "{v}");
            assert_eq!(v["servers"][0]["login"]["loggedIn"], false, "{v}");
            assert_eq!(v["servers"][0]["login"]["store"], "file", "{v}");
        } else {
            assert!(
                stdout.contains("transport: Streamable HTTP, falling back to legacy HTTP+SSE")
                    && stdout.contains("transport: legacy HTTP+SSE")
                    && stdout.contains("headers: Authorization: …")
                    && stdout.contains("login: r: not logged in (needed only if the server asks for one; then run `openpact auth login r`)"),
                "{stdout}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_down_at_start_is_retried_while_others_serve() {
    let Some(peers) = Peers::get() else { return };
    let port = free_port();
    let s = Scratch::new();
    let mut hub = hub_with(
        &s,
        json!({"py": {"url": format!("http://127.0.0.1:{port}/mcp")}, "local": fixture(&[])}),
        &["local:echo"],
    )
    .await;
    let r = hub.client.call("py:add", json!({"a": 1, "b": 1})).await;
    let message = error_text(&r);
    assert!(
        message.contains(
            "belongs to server 'py', which is reconnecting (last error: 'py' is unreachable"
        ),
        "{r}"
    );
    let _py = python(&peers, port).await;
    listed(&mut hub.client, &["py:add"]).await;
    let r = hub.client.call("py:add", json!({"a": 1, "b": 1})).await;
    assert_eq!(text(&r), "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_killed_mid_call_fails_that_call_fast_and_comes_back() {
    let Some(peers) = Peers::get() else { return };
    let mut py = python(&peers, free_port()).await;
    let port = py.port;
    let s = Scratch::new();
    let mut hub = hub_with(
        &s,
        json!({"py": {"url": format!("http://127.0.0.1:{port}/mcp")}, "local": fixture(&[])}),
        &["py:sleep", "local:echo"],
    )
    .await;
    let c = &mut hub.client;
    let id = start(
        c,
        "tools/call",
        json!({"name": "py:sleep", "arguments": {"seconds": 60}}),
    )
    .await;
    tokio::time::sleep(QUIET).await;
    let t0 = Instant::now();
    py.kill().await;
    let r = c.response(&id).await;
    assert!(error_text(&r).starts_with("server 'py' "), "{r}");
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    let r = c.call("local:echo", json!({"message": "unaffected"})).await;
    assert_eq!(text(&r), "unaffected");

    let _again = python(&peers, port).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let r = c.call("py:add", json!({"a": 2, "b": 2})).await;
        if r.get("result").is_some() {
            assert_eq!(text(&r), "4");
            break;
        }
        assert!(Instant::now() < deadline, "never reconnected: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
