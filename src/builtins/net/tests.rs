//! Tests of the HTTP fetcher.

use super::*;
use crate::builtins::test_support::{Stand, reply, web};
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn address_rules() {
    for a in [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "100.64.0.1",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "::127.0.0.1",
        "64:ff9b::a00:1",
        "2002:7f00:1::1",
        "ff02::1",
    ] {
        assert!(is_private(a.parse().unwrap()), "{a} should be private");
    }
    for a in [
        "93.184.216.34",
        "8.8.8.8",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
        "172.32.0.1",
    ] {
        assert!(!is_private(a.parse().unwrap()), "{a} should be public");
    }
}

#[tokio::test]
async fn literal_private_urls_are_refused_without_traffic() {
    let f = Fetcher::new(&web(false), true).unwrap();
    for u in [
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://[::ffff:127.0.0.1]:9/",
        "http://2130706433/", // 127.0.0.1 as one number
        "http://0x7f.1/",
        "https://[fe80::1]/",
    ] {
        match f.fetch(HttpRequest::get(u)).await {
            Err(NetError::Blocked { .. }) => {}
            other => panic!("{u}: {other:?}"),
        }
    }
    let e = f
        .fetch(HttpRequest::get("http://10.0.0.1/"))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "refusing to fetch private address 10.0.0.1 (10.0.0.1): set openpact.builtins.web.allowPrivate to allow"
    );
}

#[tokio::test]
async fn loopback_refused_with_guard_allowed_with_allow_private() {
    let s = Stand::start(|_| reply(200, "text/plain", "hi"));
    let guarded = Fetcher::new(&web(false), true).unwrap();
    assert!(guarded.guarded());
    let e = guarded
        .fetch(HttpRequest::get(format!("{}/x", s.base)))
        .await
        .unwrap_err();
    assert!(matches!(e, NetError::Blocked { .. }), "{e:?}");
    // A name that resolves to loopback is refused by the resolver.
    let e = guarded
        .fetch(HttpRequest::get(format!("http://localhost:{}/x", s.port)))
        .await
        .unwrap_err();
    assert!(
        matches!(e, NetError::Blocked { ref host, addr } if host == "localhost" && addr.is_loopback()),
        "{e:?}"
    );
    assert!(s.seen().is_empty(), "nothing may reach the server");

    let open = Fetcher::new(&web(true), true).unwrap();
    assert!(!open.guarded());
    let r = open
        .fetch(HttpRequest::get(format!("http://localhost:{}/x", s.port)))
        .await
        .unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"hi"[..]));
    // Unguarded (configured base URLs) ignores the address rules too.
    let r = Fetcher::new(&web(false), false)
        .unwrap()
        .fetch(HttpRequest::get(format!("{}/x", s.base)))
        .await
        .unwrap();
    assert_eq!(r.status, 200);
    let seen = s.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].header("user-agent"), Some(USER_AGENT));
}

#[tokio::test]
async fn redirects_are_rechecked() {
    // `public.test` stands in for a public host (pinned to the loopback stand-in, trusted);
    // its redirects to private targets must be refused before they are followed.
    let s = Stand::start(|rq| {
        let port = rq
            .header("host")
            .and_then(|h| h.rsplit(':').next())
            .unwrap_or("")
            .to_string();
        match rq.url.as_str() {
            "/to-literal" => (
                302,
                vec![("Location".into(), format!("http://127.0.0.1:{port}/secret"))],
                vec![],
            ),
            "/to-name" => (
                301,
                vec![("Location".into(), format!("http://localhost:{port}/secret"))],
                vec![],
            ),
            "/to-metadata" => (
                307,
                vec![(
                    "Location".into(),
                    "http://169.254.169.254/latest/meta-data/".into(),
                )],
                vec![],
            ),
            "/to-mapped" => (
                308,
                vec![(
                    "Location".into(),
                    format!("http://[::ffff:7f00:1]:{port}/secret"),
                )],
                vec![],
            ),
            "/to-file" => (
                302,
                vec![("Location".into(), "file:///etc/passwd".into())],
                vec![],
            ),
            "/hop" => (302, vec![("Location".into(), "/final".into())], vec![]),
            "/final" => reply(200, "text/plain", "landed"),
            _ => reply(500, "text/plain", "should not be reached"),
        }
    });
    let f =
        Fetcher::with_trusted_host(&web(false), "public.test", Ipv4Addr::LOCALHOST.into()).unwrap();
    let base = format!("http://public.test:{}", s.port);
    for path in ["/to-literal", "/to-name", "/to-metadata", "/to-mapped"] {
        let e = f
            .fetch(HttpRequest::get(format!("{base}{path}")))
            .await
            .unwrap_err();
        assert!(matches!(e, NetError::Blocked { .. }), "{path}: {e:?}");
    }
    let e = f
        .fetch(HttpRequest::get(format!("{base}/to-file")))
        .await
        .unwrap_err();
    assert!(matches!(e, NetError::Scheme), "{e:?}");
    // A same-host relative redirect is followed.
    let r = f
        .fetch(HttpRequest::get(format!("{base}/hop")))
        .await
        .unwrap();
    assert_eq!(r.body, b"landed");
    assert_eq!(r.final_url, format!("{base}/final"));
    let paths: Vec<String> = s.seen().into_iter().map(|x| x.url).collect();
    assert!(!paths.iter().any(|p| p == "/secret"), "{paths:?}");
}

#[tokio::test]
async fn redirect_limit_and_method_rules() {
    let n = Arc::new(AtomicUsize::new(0));
    let count = n.clone();
    let s = Stand::start(move |rq| {
        if rq.url.starts_with("/loop") {
            count.fetch_add(1, Ordering::SeqCst);
            return (302, vec![("Location".into(), "/loop".into())], vec![]);
        }
        if rq.url == "/post303" {
            return (303, vec![("Location".into(), "/echo".into())], vec![]);
        }
        if rq.url == "/post307" {
            return (307, vec![("Location".into(), "/echo".into())], vec![]);
        }
        reply(200, "text/plain", format!("{} {}", rq.method, rq.body))
    });
    let mut w = web(true);
    w.max_redirects = 3;
    let f = Fetcher::new(&w, true).unwrap();
    let e = f
        .fetch(HttpRequest::get(format!("{}/loop", s.base)))
        .await
        .unwrap_err();
    assert!(matches!(e, NetError::TooManyRedirects(3)), "{e:?}");
    assert_eq!(e.to_string(), "too many redirects (more than 3)");
    assert_eq!(
        n.load(Ordering::SeqCst),
        4,
        "the first request and three hops"
    );

    let post = |path: &str| HttpRequest {
        method: "POST".into(),
        url: format!("{}{path}", s.base),
        headers: vec![("Content-Type".into(), "text/plain".into())],
        body: Some(b"payload".to_vec()),
        timeout: None,
    };
    let r = f.fetch(post("/post303")).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&r.body), "GET ");
    let r = f.fetch(post("/post307")).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&r.body), "POST payload");
}

#[tokio::test]
async fn size_cap_truncates() {
    let s = Stand::start(|_| reply(200, "text/plain", vec![b'a'; 100_000]));
    let mut w = web(true);
    w.max_bytes = 1000;
    let r = Fetcher::new(&w, true)
        .unwrap()
        .fetch(HttpRequest::get(&s.base))
        .await
        .unwrap();
    assert!(r.truncated);
    assert_eq!(r.body.len(), 1000);
    w.max_bytes = 100_000;
    let r = Fetcher::new(&w, true)
        .unwrap()
        .fetch(HttpRequest::get(&s.base))
        .await
        .unwrap();
    assert!(!r.truncated);
    assert_eq!(r.body.len(), 100_000);
}

#[tokio::test]
async fn timeout_covers_the_whole_request() {
    let s = Stand::start(|_| {
        std::thread::sleep(Duration::from_secs(3));
        reply(200, "text/plain", "late")
    });
    let f = Fetcher::new(&web(true), true).unwrap();
    let t = std::time::Instant::now();
    let mut req = HttpRequest::get(&s.base);
    req.timeout = Some(Duration::from_millis(300));
    let e = f.fetch(req).await.unwrap_err();
    assert!(matches!(e, NetError::Timeout(_)), "{e:?}");
    assert_eq!(e.to_string(), "timed out after 300ms");
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn bad_urls() {
    let f = Fetcher::new(&web(false), true).unwrap();
    for (u, want) in [
        ("ftp://x/", "URL must start with http:// or https://"),
        (
            "file:///etc/passwd",
            "URL must start with http:// or https://",
        ),
        ("http://", "invalid URL"),
        ("http://exa mple.com/", "invalid URL"),
    ] {
        let e = f.fetch(HttpRequest::get(u)).await.unwrap_err().to_string();
        assert!(e.starts_with(want), "{u}: {e}");
    }
}

#[test]
fn blocking_fetch_from_a_plain_thread() {
    let s = Stand::start(|rq| reply(200, "text/plain", format!("{} {}", rq.method, rq.body)));
    let f = Fetcher::new(&web(true), true).unwrap();
    let r = f
        .fetch_blocking(HttpRequest {
            method: "post".into(),
            url: s.base.clone(),
            headers: vec![("User-Agent".into(), "custom/1".into())],
            body: Some(b"x=1".to_vec()),
            timeout: None,
        })
        .unwrap();
    assert_eq!(r.body, b"POST x=1");
    assert_eq!(s.seen()[0].header("user-agent"), Some("custom/1"));
    let e = Fetcher::new(&web(false), true)
        .unwrap()
        .fetch_blocking(HttpRequest::get(&s.base))
        .unwrap_err();
    assert!(matches!(e, NetError::Blocked { .. }));
}

#[tokio::test]
async fn blocking_fetch_from_spawn_blocking_and_drop_in_async() {
    let s = Stand::start(|_| reply(200, "text/plain", "ok"));
    let f = Fetcher::new(&web(true), true).unwrap();
    let g = f.clone();
    let base = s.base.clone();
    let r = tokio::task::spawn_blocking(move || g.fetch_blocking(HttpRequest::get(base)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.body, b"ok");
    // Dropping the last fetcher (with its private runtime) here must not panic.
    drop(f);
}
