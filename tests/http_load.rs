//! `openpact serve --http` under load and faults: 200 clients, each its own session, making
//! mixed calls for a bounded time with every answer checked against its request, while
//! slowloris sockets are dropped and bad requests (oversized, foreign Origin, missing or
//! wrong token, garbage) are refused; and a client that vanishes mid-call has the call
//! cancelled upstream.

use crate::http_face::{Events, Http, HttpHub, JsonText, client, fx, http_hub, sample, text};
use crate::support::WAIT;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CLIENTS: u64 = 200;
/// How long the clients keep calling (each also makes one call of every kind regardless).
const RUN: Duration = Duration::from_secs(6);
/// The hub's header deadline (`src/face/http/listen.rs`).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const TOKEN: &str = "l0ad-t0ken";
/// The kinds of call each client cycles through.
const KINDS: u64 = 5;

fn host(h: &HttpHub) -> &str {
    h.base.trim_start_matches("http://")
}

/// The kind of call `id` is: tools/list, or a tool call.
const LIST: u64 = 3;

/// One client's run: calls until `until` (at least one of each kind), each answer checked
/// against what was asked, and nothing else delivered to it. Each call's kind and duration.
async fn client_run(n: u64, mut c: Http, until: Instant) -> Vec<(u64, Duration)> {
    tokio::time::timeout(WAIT, c.initialize(json!({})))
        .await
        .expect("initialize answered");
    let mut took = Vec::new();
    let mut id = 1;
    while id <= KINDS || Instant::now() < until {
        let t0 = Instant::now();
        // Unique to this client and call: a response delivered to the wrong client or
        // request would not match.
        let tag = format!("c{n}-{id}");
        let k = n + id;
        let (r, want) = match id % KINDS {
            0 => (
                call(&mut c, id, "fx:echo", json!({"message": tag})).await,
                tag.clone(),
            ),
            1 => (
                call(&mut c, id, "fx:add", json!({"a": n, "b": id})).await,
                k.to_string(),
            ),
            2 => {
                let ms = 5 + k % 20;
                let r = call(&mut c, id, "fx:slow", json!({"ms": ms})).await;
                (r, format!("slept {ms} ms"))
            }
            LIST => {
                let r = rpc(&mut c, id, "tools/list", json!({})).await;
                let echo = r["result"]["tools"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["name"] == "fx:echo"));
                assert!(echo, "client {n}, call {id}: {r}");
                (
                    json!({"result": {"content": [{"text": ""}]}}),
                    String::new(),
                )
            }
            _ => {
                let steps = 1 + k % 3;
                let params = json!({"name": "fx:progress", "arguments": {"steps": steps, "ms": 5},
                    "_meta": {"progressToken": tag}});
                let r = rpc(&mut c, id, "tools/call", params).await;
                let progress: Vec<Value> = c.inbox.drain(..).collect();
                assert_eq!(progress.len() as u64, steps, "client {n}: {progress:?}");
                for p in &progress {
                    assert_eq!(p["method"], "notifications/progress", "client {n}: {p}");
                    assert_eq!(
                        p["params"]["progressToken"],
                        tag.as_str(),
                        "client {n}: {p}"
                    );
                }
                (r, format!("done {steps}"))
            }
        };
        assert_eq!(text(&r), want, "client {n}, call {id}: {r}");
        assert!(c.inbox.is_empty(), "client {n}: {:?}", c.inbox);
        took.push((id % KINDS, t0.elapsed()));
        id += 1;
    }
    let bye = c.req(reqwest::Method::DELETE).send().await.unwrap();
    assert_eq!(bye.status(), 204, "client {n}");
    took
}

/// A request answered within `WAIT` (else the response was lost), with the id it was sent.
async fn rpc(c: &mut Http, id: u64, method: &str, params: Value) -> Value {
    let r = tokio::time::timeout(WAIT, c.rpc(id, method, params))
        .await
        .unwrap_or_else(|_| panic!("request {id} ({method}) never answered"));
    assert_eq!(r["id"], id, "{r}");
    r
}

async fn call(c: &mut Http, id: u64, name: &str, arguments: Value) -> Value {
    rpc(
        c,
        id,
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await
}

/// Opens a connection that sends `prefix` and then one byte every 250 ms, never ending its
/// headers; how long until the hub closed it.
async fn slowloris(addr: String, prefix: &'static str) -> Duration {
    let t0 = Instant::now();
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    tcp.write_all(prefix.as_bytes()).await.unwrap();
    let mut buf = [0u8; 256];
    let limit = HEADER_READ_TIMEOUT + Duration::from_secs(10);
    while t0.elapsed() < limit {
        tokio::select! {
            read = tcp.read(&mut buf) => match read {
                Ok(0) | Err(_) => return t0.elapsed(),
                Ok(n) => panic!("the hub answered a request it never got: {:?}",
                    String::from_utf8_lossy(&buf[..n])),
            },
            () = tokio::time::sleep(Duration::from_millis(250)) => {
                if !prefix.is_empty() && tcp.write_all(b"a").await.is_err() {
                    return t0.elapsed();
                }
            }
        }
    }
    panic!("a connection that never finished its headers was kept {limit:?}");
}

/// Bad requests sent over and over until `until`, each refused as it must be.
async fn faults(h: &HttpHub, until: Instant) -> u64 {
    let mut c = Http::new(h);
    c.token = Some(TOKEN.into());
    c.initialize(json!({})).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let big = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params":
        {"name": "fx:echo", "arguments": {"message": "x".repeat(32 * 1024)}}})
    .to_string();
    let post = |body: Vec<u8>| {
        c.req(reqwest::Method::POST)
            .header("content-type", "application/json")
            .body(body)
    };
    let mut refused = 0;
    loop {
        let r = post(big.clone().into_bytes()).send().await.unwrap();
        assert_eq!(r.status(), 413, "oversized body");
        let r = post(ping.clone().into_bytes())
            .header("origin", "http://evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "foreign Origin");
        for auth in [None, Some("Bearer wrong"), Some("Basic l0ad-t0ken")] {
            let mut r = client()
                .post(format!("{}/mcp", h.base))
                .header("content-type", "application/json")
                .header("mcp-session-id", c.session.as_deref().unwrap())
                .body(ping.clone());
            if let Some(a) = auth {
                r = r.header("authorization", a);
            }
            let r = r.send().await.unwrap();
            assert_eq!(r.status(), 401, "token {auth:?}");
        }
        for (garbage, code) in [
            (b"{\"jsonrpc\": \"2.0\", \"id\": 3, \"meth".to_vec(), -32700),
            (vec![0xff, 0xfe, b'{', 0x80], -32700),
            (b"[]".to_vec(), -32600),
            (b"{\"id\": 4}".to_vec(), -32600),
        ] {
            let r = post(garbage.clone()).send().await.unwrap();
            assert_eq!(r.status(), 400, "{:?}", String::from_utf8_lossy(&garbage));
            let e = r.json_text().await;
            assert_eq!(e["error"]["code"], code, "{e}");
        }
        refused += 9;
        if Instant::now() >= until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its own session was never disturbed.
    let r = call(&mut c, 5, "fx:echo", json!({"message": "faults done"})).await;
    assert_eq!(text(&r), "faults done");
    refused
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_load_200_clients_while_faults_are_refused() {
    let openpact = json!({"http": {
        "maxSessions": CLIENTS + 8,
        "maxBodySize": "16KiB",
        "token": "${HTTP_LOAD_TOKEN}",
    }});
    let h = http_hub(fx(), Some(openpact), &[("HTTP_LOAD_TOKEN", TOKEN)]).await;
    let addr = host(&h).to_string();
    // Slowloris: one socket that never sends a byte, one that trickles its headers.
    let silent = tokio::spawn(slowloris(addr.clone(), ""));
    let trickle = tokio::spawn(slowloris(
        addr.clone(),
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
    ));

    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let mut c = Http::new(&h);
            c.token = Some(TOKEN.into());
            c
        })
        .collect();
    let t0 = Instant::now();
    let until = t0 + RUN;
    let runs: Vec<_> = clients
        .into_iter()
        .zip(0..)
        .map(|(c, n)| tokio::spawn(client_run(n, c, until)))
        .collect();
    let refused = faults(&h, until).await;
    let mut took = Vec::new();
    for run in runs {
        took.extend(run.await.expect("a client's run"));
    }
    let elapsed = t0.elapsed();

    for (what, held) in [("silent", silent), ("trickling", trickle)] {
        let held = held.await.unwrap();
        assert!(
            held >= HEADER_READ_TIMEOUT - Duration::from_secs(1),
            "the {what} socket was dropped after {held:?}, before the deadline"
        );
    }

    // The hub counted exactly the tool calls made (and the faults client's one): none lost,
    // none doubled, none failed.
    let tool_calls = took.iter().filter(|(kind, _)| *kind != LIST).count() as f64;
    let metrics = client()
        .get(format!("{}/metrics", h.base))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let counted = |outcome: &str| {
        sample(
            &metrics,
            &format!(r#"openpact_calls_total{{server="fx",outcome="{outcome}"}}"#),
        )
    };
    assert_eq!(counted("ok"), tool_calls + 1.0);
    assert_eq!(counted("error"), 0.0);

    // Still serving: a fresh client, and health shows every load session ended.
    let mut last = Http::new(&h);
    last.token = Some(TOKEN.into());
    last.initialize(json!({})).await;
    let r = call(&mut last, 1, "fx:echo", json!({"message": "after"})).await;
    assert_eq!(text(&r), "after");
    let health = client()
        .get(format!("{}/health", h.base))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap()
        .json_text()
        .await;
    assert_eq!(health["sessions"], 2, "{health}");

    let calls = took.len();
    let mut took: Vec<Duration> = took.into_iter().map(|(_, d)| d).collect();
    took.sort();
    println!(
        "http load: {CLIENTS} clients, {calls} calls in {:.1} s = {:.0} calls/s; \
         p50 {:.1} ms, p99 {:.1} ms; {refused} bad requests refused meanwhile",
        elapsed.as_secs_f64(),
        calls as f64 / elapsed.as_secs_f64(),
        percentile(&took, 0.5).as_secs_f64() * 1e3,
        percentile(&took, 0.99).as_secs_f64() * 1e3,
    );
}

/// The upstream request ids the fixture has seen cancelled, once there are `n` of them
/// (checked with calls on `c`, ids from `id`); panics after `limit`.
async fn cancelled_upstream(c: &mut Http, id: &mut u64, n: usize, limit: Duration) -> Vec<Value> {
    let t0 = Instant::now();
    loop {
        *id += 1;
        let r = call(c, *id, "fx:cancelled", json!({})).await;
        let seen: Vec<Value> = serde_json::from_str(text(&r)).unwrap();
        if seen.len() >= n {
            return seen;
        }
        assert!(
            t0.elapsed() < limit,
            "the upstream saw {} cancellations, not {n}, after {limit:?}",
            seen.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_client_vanishing_mid_call_has_it_cancelled_upstream() {
    let h = http_hub(fx(), None, &[]).await;
    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    let mut id = 10;
    assert!(
        cancelled_upstream(&mut c, &mut id, 0, WAIT)
            .await
            .is_empty()
    );

    // Mid-stream: the call's SSE stream has begun (progress), then the client goes away.
    let resp = c
        .post(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "fx:progress", "arguments": {"steps": 600, "ms": 50},
            "_meta": {"progressToken": "vanishing"}}}),
        )
        .await;
    let mut stream = Events::of(resp).await;
    assert!(stream.sse);
    let (_, first) = stream.within(WAIT).await.expect("progress first");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    drop(stream);
    cancelled_upstream(&mut c, &mut id, 1, Duration::from_secs(2)).await;

    // Before any answer: the request is sent whole on a raw socket, which then closes
    // while the hub is still waiting for the server.
    let session = c.session.clone().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx:slow", "arguments": {"ms": 60000}}})
    .to_string();
    let mut tcp = TcpStream::connect(host(&h)).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         Content-Length: {}\r\n\r\n",
        host(&h),
        body.len()
    );
    tcp.write_all(format!("{head}{body}").as_bytes())
        .await
        .unwrap();
    // The call reaches the server (the answer would take a minute)...
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut buf = [0u8; 64];
    let early = tokio::time::timeout(Duration::from_millis(10), tcp.read(&mut buf)).await;
    assert!(early.is_err(), "no answer yet");
    drop(tcp);
    let seen = cancelled_upstream(&mut c, &mut id, 2, Duration::from_secs(2)).await;
    assert_eq!(seen.len(), 2, "{seen:?}");

    // The session, and the hub, still serve.
    id += 1;
    let r = call(&mut c, id, "fx:echo", json!({"message": "still here"})).await;
    assert_eq!(text(&r), "still here");
    let mut other = Http::new(&h);
    other.initialize(json!({})).await;
    let r = call(&mut other, 1, "fx:add", json!({"a": 2, "b": 2})).await;
    assert_eq!(text(&r), "4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_stop_is_prompt_with_connections_open() {
    let mut h = http_hub(fx(), None, &[]).await;
    let mut c = Http::new(&h);
    c.initialize(json!({})).await;
    // A socket that never sends a byte, an open GET stream, a call waiting on the server.
    let mut silent = TcpStream::connect(host(&h)).await.unwrap();
    let mut get = c.listen(None).await;
    let slow = c.spawn_post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "fx:slow", "arguments": {"ms": 60000}}}));
    tokio::time::sleep(Duration::from_millis(300)).await;

    // With HTTP served, stdin EOF ends only the stdio session: the hub stops on a signal.
    let (code, took) = h.hub.signal(nix::sys::signal::Signal::SIGTERM).await;
    assert_eq!(code, Some(0), "{}", h.hub.stderr());
    assert!(took < Duration::from_secs(5), "stopping took {took:?}");
    // The waiting call was answered, the stream ended, the idle socket was closed.
    let r = slow.await.unwrap().json_text().await;
    assert!(r["error"]["message"].is_string(), "{r}");
    assert!(get.within(WAIT).await.is_none(), "the GET stream ends");
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(WAIT, silent.read(&mut buf)).await;
    assert!(matches!(n, Ok(Ok(0) | Err(_))), "{n:?}");
}
