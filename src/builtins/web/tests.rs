//! Tests of `web_fetch` against a stand-in server: HTML to text or Markdown, errors, caps,
//! content types, private addresses.

use super::*;
use crate::builtins::test_support::{Stand, reply, web};
use std::time::Duration;

const PAGE: &str = r#"<!DOCTYPE html>
<html><head>
<title>Caf&eacute; &amp; Bar &#8212; Home</title>
<style>body { color: red } .secret-style {}</style>
<script>var secretScript = "do not show";</script>
</head>
<body>
<!-- a hidden comment -->
<h1>Welcome</h1>
<p>Fish &amp; chips &lt;cheap&gt; &quot;today&quot; &euro;5 &#x2603; &nbsp;caf&eacute;</p>
<ul><li>One</li><li>Two <em>very</em> <strong>bold</strong></li></ul>
<p>See <a href="/about">about us</a> and <a href="https://example.org/x">this</a>.</p>
<noscript>enable js</noscript>
<script type="text/javascript">alert("nope")</script>
</body></html>"#;

fn server() -> Stand {
    Stand::start(|rq| match rq.url.as_str() {
        "/page" => reply(200, "text/html; charset=utf-8", PAGE),
        "/long" => reply(200, "text/html", format!("<p>{}</p>", "é".repeat(300))),
        "/json" => reply(200, "application/json", r#"{"a":1,"b":[true,null]}"#),
        "/plain" => reply(200, "text/plain", "just text"),
        "/latin1" => reply(200, "text/plain; charset=iso-8859-1", b"caf\xe9".to_vec()),
        "/png" => reply(200, "image/png", vec![0x89, b'P', b'N', b'G', 0, 0, 0, 13]),
        "/deep" => reply(
            200,
            "text/html",
            format!(
                "{}deep <b>bold</b><script>hidden()</script>{}",
                "<div>".repeat(50_000),
                "</div>".repeat(50_000)
            ),
        ),
        _ => reply(404, "text/html", "<h1>Not here</h1>"),
    })
}

async fn call(g: &Arc<dyn Group>, args: Value) -> ToolOutput {
    let out = g.call("web_fetch", &args).await;
    assert!(crate::builtins::validate(&g.tools()[0].input_schema, &args).is_ok() || out.is_error);
    out
}

#[tokio::test]
async fn html_becomes_text() {
    let s = server();
    let g = group(&web(true)).unwrap();
    let url = format!("{}/page", s.base);
    let out = call(&g, json!({"url": url})).await;
    assert!(!out.is_error, "{}", out.text);
    let t = &out.text;
    for want in [
        "Welcome",
        "Fish & chips <cheap> \"today\" €5 ☃",
        "café",
        "* One",
        "* Two very bold",
        "See about us and this.",
    ] {
        assert!(t.contains(want), "missing {want:?} in {t}");
    }
    for bad in [
        "secretScript",
        "color: red",
        "alert",
        "hidden comment",
        "<p>",
        "&amp;",
        "# Welcome",
    ] {
        assert!(!t.contains(bad), "{bad:?} leaked into {t}");
    }
    let sc = out.structured.unwrap();
    assert_eq!(sc["title"], "Café & Bar — Home");
    assert_eq!(sc["status"], 200);
    assert_eq!(sc["url"], url);
    assert_eq!(sc["final_url"], url);
    assert_eq!(sc["content_type"], "text/html; charset=utf-8");
    assert_eq!(sc["truncated"], false);
    assert_eq!(sc["content"], out.text);
    assert_eq!(
        s.seen()[0].header("user-agent"),
        Some(super::super::net::USER_AGENT)
    );
}

#[tokio::test]
async fn markdown_format() {
    let s = server();
    let g = group(&web(true)).unwrap();
    let out = call(
        &g,
        json!({"url": format!("{}/page", s.base), "format": "markdown"}),
    )
    .await;
    let t = &out.text;
    for want in [
        "# Welcome",
        "* Two *very* **bold**",
        &format!("[about us]({}/about)", s.base),
        "[this](https://example.org/x)",
    ] {
        assert!(t.contains(want), "missing {want:?} in {t}");
    }
}

#[tokio::test]
async fn errors_and_truncation() {
    let s = server();
    let g = group(&web(true)).unwrap();
    let out = call(&g, json!({"url": format!("{}/missing", s.base)})).await;
    assert!(out.is_error);
    assert_eq!(out.text, "HTTP 404: Not Found");

    let out = call(
        &g,
        json!({"url": format!("{}/long", s.base), "max_length": 10}),
    )
    .await;
    assert!(!out.is_error);
    assert!(
        out.text
            .starts_with("éééééééééé\n\n[Content truncated: 10 of 300 characters shown]"),
        "{}",
        out.text
    );
    assert_eq!(out.structured.unwrap()["truncated"], true);

    let out = call(&g, json!({"url": "ftp://example.com/"})).await;
    assert_eq!(
        (out.is_error, out.text.as_str()),
        (true, "URL must start with http:// or https://")
    );
    let out = call(&g, json!({"url": "http://exa mple.com/"})).await;
    assert!(
        out.is_error && out.text.starts_with("invalid URL: "),
        "{}",
        out.text
    );
    let out = call(&g, json!({"url": "http://127.0.0.1:1/"})).await;
    assert!(
        out.is_error && out.text.starts_with("fetch failed: "),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn byte_cap_is_reported() {
    let s = server();
    let mut w = web(true);
    w.max_bytes = 100;
    let g = group(&w).unwrap();
    let out = call(&g, json!({"url": format!("{}/long", s.base)})).await;
    assert!(!out.is_error, "{}", out.text);
    // 100 bytes = `<p>` + 48 two-byte characters + half of one, dropped.
    assert!(out.text.starts_with(&"é".repeat(48)), "{}", out.text);
    assert!(out.text.contains("download limit"), "{}", out.text);
    assert_eq!(out.structured.unwrap()["truncated"], true);
}

#[tokio::test]
async fn other_content_types() {
    let s = server();
    let g = group(&web(true)).unwrap();
    let out = call(&g, json!({"url": format!("{}/json", s.base)})).await;
    assert_eq!(
        out.text,
        "{\n  \"a\": 1,\n  \"b\": [\n    true,\n    null\n  ]\n}"
    );
    assert_eq!(out.structured.unwrap()["title"], Value::Null);
    let out = call(&g, json!({"url": format!("{}/plain", s.base)})).await;
    assert_eq!(out.text, "just text");
    let out = call(&g, json!({"url": format!("{}/latin1", s.base)})).await;
    assert_eq!(out.text, "café");
    let out = call(&g, json!({"url": format!("{}/png", s.base)})).await;
    assert!(out.is_error);
    assert_eq!(out.text, "cannot show binary content (image/png, 8 bytes)");
    let out = call(&g, json!({"url": format!("{}/deep", s.base)})).await;
    assert!(!out.is_error, "{}", out.text);
    assert!(out.text.contains("deep bold"), "{}", out.text);
    assert!(!out.text.contains("hidden"), "{}", out.text);
}

#[tokio::test]
async fn private_addresses_refused_by_default() {
    let s = server();
    let g = group(&web(false)).unwrap();
    let out = call(&g, json!({"url": format!("{}/page", s.base)})).await;
    assert!(out.is_error);
    assert!(
        out.text
            .starts_with("fetch failed: refusing to fetch private address 127.0.0.1")
            && out
                .text
                .ends_with("set openpact.builtins.web.allowPrivate to allow"),
        "{}",
        out.text
    );
    assert!(s.seen().is_empty());
}

#[test]
fn nesting_is_limited_linearly() {
    let page = "<html><body><div><p>a<p>b <a title='x>y' href=\"/z\">c</a></div></body></html>";
    assert!(matches!(
        limit_nesting(page, 256),
        std::borrow::Cow::Borrowed(_)
    ));
    let deep = format!(
        "{}text{}",
        "<div class=\"k\">".repeat(1000),
        "</div>".repeat(1000)
    );
    let cut = limit_nesting(&deep, 3);
    assert_eq!(
        cut,
        format!(
            "{}text{}",
            "<div class=\"k\">".repeat(3),
            "</div>".repeat(3)
        )
    );
    // Tags inside scripts are not markup; unclosed <p>/<li> do not count.
    let s = format!(
        "<div><script>if (a<b) {{ x = '<div>' }}</SCRIPT>{}</div>",
        "<p>x".repeat(50)
    );
    assert!(matches!(
        limit_nesting(&s, 1),
        std::borrow::Cow::Borrowed(_)
    ));
    // Stray quotes do not make the scan quadratic (or lose tags).
    let q = format!("{}<div>z</div>", "<a b='>x</a>".repeat(20_000));
    let t = std::time::Instant::now();
    let _ = limit_nesting(&q, 256);
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn titles() {
    assert_eq!(
        html_title("<TITLE lang=en>\n A  &lt;b&gt; </TITLE>"),
        Some("A <b>".into())
    );
    assert_eq!(html_title("<titlex>no</titlex>"), None);
    assert_eq!(html_title("<title></title>"), None);
    assert_eq!(html_title("<title>a <b> c</title>"), Some("a <b> c".into()));
}
