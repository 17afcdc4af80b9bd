//! The proxy end to end: real connections to its listener, to an origin on loopback.

use super::connection::{HEAD_LIMIT, head_end};
use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(10);

/// An HTTP origin on loopback that answers each request with the head (and body) it got.
async fn echo_origin() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                let end = loop {
                    if let Some(end) = head_end(&buf, 0) {
                        break end;
                    }
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let l = l.to_ascii_lowercase();
                        l.strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                while buf.len() < end + length {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let echoed = &buf[..end + length];
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    echoed.len()
                );
                let _ = s.write_all(reply.as_bytes()).await;
                let _ = s.write_all(echoed).await;
                let _ = s.shutdown().await;
            });
        }
    });
    port
}

type Refusals = Arc<Mutex<Vec<Refusal>>>;

/// A gate that answers every host outside the list with `answer` after `delay`, counting
/// the questions and recording the refusals.
struct Recorder {
    seen: Refusals,
    asked: std::sync::atomic::AtomicUsize,
    answer: Decision,
    delay: Duration,
}

impl Gate for Recorder {
    fn decide(&self, _: &str, _: u16) -> Pin<Box<dyn Future<Output = Decision> + Send>> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (answer, delay) = (self.answer.clone(), self.delay);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            answer
        })
    }
    fn refused(&self, r: &Refusal) {
        self.seen.lock().unwrap().push(r.clone());
    }
}

async fn gated(
    allow: &[String],
    answer: Decision,
    delay: Duration,
) -> (EgressProxy, Arc<Recorder>) {
    let gate = Arc::new(Recorder {
        seen: Refusals::default(),
        asked: Default::default(),
        answer,
        delay,
    });
    let allow = allow
        .iter()
        .map(|p| HostPattern::parse(p).unwrap())
        .collect();
    let proxy = EgressProxy::start("srv".into(), None, allow, gate.clone())
        .await
        .unwrap();
    (proxy, gate)
}

async fn proxy(allow: &[String]) -> (EgressProxy, Refusals) {
    let no = Decision::Refuse("nobody to ask".into());
    let (proxy, gate) = gated(allow, no, Duration::ZERO).await;
    (proxy, gate.seen.clone())
}

/// Sends `request` to the proxy and reads until it closes.
async fn exchange(proxy: &EgressProxy, request: &[u8]) -> String {
    exchange_at(proxy.port(), request).await
}

async fn exchange_at(port: u16, request: &[u8]) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    timeout(WAIT, s.read_to_end(&mut out))
        .await
        .expect("the proxy closes")
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test]
async fn connect_tunnels_bytes_both_ways() {
    let origin = echo_origin().await;
    let (proxy, refusals) = proxy(&[format!("127.0.0.1:{origin}")]).await;
    assert_eq!(proxy.url(), format!("http://127.0.0.1:{}", proxy.port()));
    let mut s = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    // Bytes sent with the head go through, and so do bytes sent after the answer.
    let connect = format!(
        "CONNECT 127.0.0.1:{origin} HTTP/1.1\r\nHost: 127.0.0.1:{origin}\r\n\r\nGET /inside HTTP/1.1\r\n"
    );
    s.write_all(connect.as_bytes()).await.unwrap();
    let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
    let mut got = vec![0u8; established.len()];
    timeout(WAIT, s.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, established);
    s.write_all(b"X-Inside: yes\r\n\r\n").await.unwrap();
    let mut out = String::new();
    timeout(WAIT, s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(
        out.contains("GET /inside HTTP/1.1\r\nX-Inside: yes\r\n\r\n"),
        "{out}"
    );
    assert!(refusals.lock().unwrap().is_empty());
}

#[tokio::test]
async fn connect_to_a_port_not_allowed_is_refused_once() {
    let origin = echo_origin().await;
    let (proxy, refusals) = proxy(&[format!("127.0.0.1:{origin}")]).await;
    let other = if origin == 1 { 2 } else { origin - 1 };
    let out = exchange(
        &proxy,
        format!("CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{out}");
    assert!(
        out.ends_with(&format!(
            "\r\n\r\nopenpact: server \"srv\" may not reach 127.0.0.1:{other}: nobody to \
             ask; to allow it: `openpact sandbox allow srv net 127.0.0.1:{other}`\n"
        )),
        "{out}"
    );
    let refusals = refusals.lock().unwrap();
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].server, "srv");
    assert_eq!(refusals[0].host, "127.0.0.1");
    assert_eq!(refusals[0].port, other);
}

#[tokio::test]
async fn plain_http_goes_upstream_in_origin_form_without_proxy_headers() {
    let origin = echo_origin().await;
    let (proxy, refusals) = proxy(&[format!("127.0.0.1:{origin}")]).await;
    let request = format!(
        "POST http://127.0.0.1:{origin}/path?q=1 HTTP/1.1\r\nHost: elsewhere\r\n\
         Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\
         Connection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\nX-Hop: 1\r\n\
         X-Test: kept\r\nContent-Length: 5\r\n\r\nhello"
    );
    let out = exchange(&proxy, request.as_bytes()).await;
    let (_, echoed) = out.split_once("\r\n\r\n").unwrap();
    assert_eq!(
        echoed,
        format!(
            "POST /path?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{origin}\r\nX-Test: kept\r\n\
             Content-Length: 5\r\nConnection: close\r\n\r\nhello"
        )
    );
    // No path at all is `/`.
    let out = exchange(
        &proxy,
        format!("GET http://127.0.0.1:{origin} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(out.contains("\r\n\r\nGET / HTTP/1.1\r\n"), "{out}");
    assert!(refusals.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_name_not_listed_is_refused_before_it_is_resolved() {
    let (proxy, refusals) = proxy(&["*.example.com".into(), "127.0.0.1".into()]).await;
    let out = exchange(&proxy, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 403 "), "{out}");
    assert!(out.contains("may not reach evil.example:443"), "{out}");
    let out = exchange(
        &proxy,
        b"GET http://EVIL.example/x HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    )
    .await;
    assert!(out.contains("may not reach evil.example:80"), "{out}");
    let refusals = refusals.lock().unwrap();
    assert_eq!(refusals.len(), 2);
    for r in refusals.iter() {
        assert_eq!(r.host, "evil.example");
        // The gate's reason: it comes before any lookup.
        assert_eq!(r.reason, "nobody to ask");
    }
    assert_eq!(
        refusals[0].fix().unwrap(),
        "openpact sandbox allow srv net evil.example"
    );
}

#[tokio::test]
async fn localhost_works_when_an_entry_names_it() {
    let origin = echo_origin().await;
    let (proxy, refusals) = proxy(&[format!("localhost:{origin}")]).await;
    let out = exchange(
        &proxy,
        format!("CONNECT localhost:{origin} HTTP/1.1\r\n\r\nGET /local HTTP/1.1\r\n\r\n")
            .as_bytes(),
    )
    .await;
    assert!(
        out.starts_with("HTTP/1.1 200 Connection established\r\n\r\n"),
        "{out}"
    );
    assert!(out.contains("GET /local HTTP/1.1"), "{out}");
    assert!(refusals.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_wildcard_does_not_allow_localhost() {
    let origin = echo_origin().await;
    let (proxy, refusals) = proxy(&["*.example.com".into()]).await;
    let out = exchange(
        &proxy,
        format!("CONNECT localhost:{origin} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 403 "), "{out}");
    assert_eq!(refusals.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn an_allowed_host_that_does_not_answer_gets_502_not_a_refusal() {
    let closed = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap().port()
    };
    let (proxy, refusals) = proxy(&["127.0.0.1".into()]).await;
    let out = exchange(
        &proxy,
        format!("CONNECT 127.0.0.1:{closed} HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{out}");
    assert!(
        out.contains(&format!("cannot reach 127.0.0.1:{closed}")),
        "{out}"
    );
    assert!(refusals.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_host_the_gate_allows_goes_through_and_a_burst_asks_once() {
    let origin = echo_origin().await;
    // Long enough for the whole burst to arrive while the first is being decided.
    let slow = Duration::from_secs(2);
    let (proxy, gate) = gated(&["*.example.com".into()], Decision::Allow, slow).await;
    let request = format!("GET http://127.0.0.1:{origin}/held HTTP/1.1\r\n\r\n");
    let burst: Vec<_> = (0..5)
        .map(|_| {
            let (port, request) = (proxy.port(), request.clone());
            tokio::spawn(async move { exchange_at(port, request.as_bytes()).await })
        })
        .collect();
    for one in burst {
        let out = one.await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.contains("GET /held HTTP/1.1"), "{out}");
    }
    let asked = || gate.asked.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(asked(), 1, "one question for the burst");
    assert!(gate.seen.lock().unwrap().is_empty());
    // Decided, so the next one is asked about afresh.
    exchange(&proxy, request.as_bytes()).await;
    assert_eq!(asked(), 2);
}

#[tokio::test]
async fn any_public_host_asks_about_a_private_address_and_names_the_fix() {
    let gate = Arc::new(Recorder {
        seen: Refusals::default(),
        asked: Default::default(),
        answer: Decision::Refuse("nobody to ask".into()),
        delay: Duration::ZERO,
    });
    let allow = vec![HostPattern::any_public()];
    let proxy = EgressProxy::start("srv".into(), None, allow, gate.clone())
        .await
        .unwrap();
    let out = exchange(&proxy, b"CONNECT 192.168.1.1:8080 HTTP/1.1\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    assert!(out.contains("192.168.1.1, a private address"), "{out}");
    assert!(
        out.contains("openpact sandbox allow srv net 192.168.1.1:8080"),
        "{out}"
    );
    assert_eq!(gate.asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    let seen = gate.seen.lock().unwrap().clone();
    assert!(seen.len() == 1 && seen[0].listable, "{seen:?}");
    // Loopback stays local: refused without asking, and no entry of this kind fixes it.
    let out = exchange(&proxy, b"CONNECT 127.0.0.1:8080 HTTP/1.1\r\n\r\n").await;
    assert!(out.contains("a local address"), "{out}");
    assert_eq!(gate.asked.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn malformed_heads_get_400_and_a_close() {
    let (proxy, refusals) = proxy(&["127.0.0.1".into()]).await;
    for bad in [
        "NONSENSE\r\n\r\n",
        "GET http://127.0.0.1/ HTTP/9.9\r\n\r\n",
        "GET  http://127.0.0.1/ HTTP/1.1\r\n\r\n",
        "CONNECT 127.0.0.1 HTTP/1.1\r\n\r\n",
        "CONNECT 127.0.0.1:0 HTTP/1.1\r\n\r\n",
        "CONNECT 127.0.0.1:99999 HTTP/1.1\r\n\r\n",
        "CONNECT [::1 HTTP/1.1\r\n\r\n",
        "CONNECT user@127.0.0.1:80 HTTP/1.1\r\n\r\n",
        "GET http://127.0.0.1/ HTTP/1.1\r\nNo colon\r\n\r\n",
        "GET http://127.0.0.1/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
        "GET https://127.0.0.1/ HTTP/1.1\r\n\r\n",
        "GET ftp://127.0.0.1/ HTTP/1.1\r\n\r\n",
    ] {
        let out = exchange(&proxy, bad.as_bytes()).await;
        assert!(
            out.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{bad:?}: {out}"
        );
        assert!(out.contains("malformed"), "{bad:?}: {out}");
    }
    assert!(refusals.lock().unwrap().is_empty());
}

#[tokio::test]
async fn origin_form_requests_are_told_this_is_a_proxy() {
    let (proxy, _) = proxy(&["127.0.0.1".into()]).await;
    let out = exchange(&proxy, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
    assert!(out.contains("egress proxy"), "{out}");
}

#[tokio::test]
async fn an_oversized_head_gets_431_and_a_close() {
    let (proxy, _) = proxy(&["127.0.0.1".into()]).await;
    let mut request = b"GET http://127.0.0.1/ HTTP/1.1\r\nX-Big: ".to_vec();
    request.resize(HEAD_LIMIT + 4096, b'a');
    let out = exchange(&proxy, &request).await;
    assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
}

#[tokio::test]
async fn a_silent_client_does_not_hold_up_others() {
    let origin = echo_origin().await;
    let (proxy, _) = proxy(&[format!("127.0.0.1:{origin}")]).await;
    let _silent = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    let out = exchange(
        &proxy,
        format!("GET http://127.0.0.1:{origin}/ HTTP/1.1\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_port_and_its_tunnels() {
    let origin = echo_origin().await;
    let (proxy, _) = proxy(&[format!("127.0.0.1:{origin}")]).await;
    let port = proxy.port();
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    s.write_all(format!("CONNECT 127.0.0.1:{origin} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = [0u8; 39];
    timeout(WAIT, s.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    drop(proxy);
    // The tunnel is open (the origin waits for a request) until the proxy goes.
    let mut rest = Vec::new();
    let closed = timeout(WAIT, s.read_to_end(&mut rest)).await.unwrap();
    assert!(closed.is_err() || rest.is_empty(), "{closed:?} {rest:?}");
    assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
}
