//! The HTTP face (`serve --http`) in process: arbitrary methods, paths, headers
//! (`Host`, `Origin`, `Authorization`, `Mcp-Session-Id`, `MCP-Protocol-Version`,
//! `Last-Event-ID`, `Mcp-Method`, `Mcp-Name`) and bodies (both protocol eras, well-formed or
//! not) through the real router, over a hub with no servers, built once. Checked:
//! - every request is answered, within 5 s, with a status the face gives (no 5xx but the 503
//!   of a full session table), and never a panic;
//! - a foreign `Origin` is always 403, a wrong or missing token always 401, a `Host` that is
//!   not this machine (on a loopback bind) always 403; a request the guard lets through is
//!   never 401 or 403; the dashboard (`/ui…`, a guard of its own) serves nothing to a
//!   caller with neither its session nor the token;
//! - a JSON answer is one JSON-RPC response, and a 200 one answers the id it was asked with;
//!   202 has no body; an SSE answer says `text/event-stream`;
//! - only a successful `initialize` hands out a session id; a 2026-07-28 request without its
//!   `Mcp-Method` header is a 400.
#![no_main]

use axum::body::Body;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use libfuzzer_sys::fuzz_target;
use openpact::hub::Hub;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tower::ServiceExt;

const TOKEN: &str = "fuzz-token-0123456789";
const STATELESS: &str = "2026-07-28";

struct World {
    rt: tokio::runtime::Runtime,
    /// Bound to loopback, no token; and bound wide, with a token.
    local: axum::Router,
    wide: axum::Router,
    /// Session ids the faces handed out, newest last.
    sessions: Mutex<Vec<String>>,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let state = std::env::temp_dir().join(format!("openpact-fuzz-http-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&state);
        let text = format!(
            r#"{{"mcpServers": {{}},
                "openpact": {{
                  "builtins": false,
                  "audit": {{"enabled": false}},
                  "profiles": {{"files": {{"servers": [], "builtins": false}}}},
                  "http": {{"allowedOrigins": ["https://app.example.com"], "maxSessions": 6,
                            "maxInFlight": 4, "maxBodySize": "64KiB", "token": "{TOKEN}"}}
                }}}}"#
        );
        let file = state.join("mcp.json");
        let config = openpact::config::parse(&text, &file, &|_| None).expect("config");
        let mut settings = config.hub.http.clone();
        let (local, wide) = rt.block_on(async {
            let hub: Arc<Hub> = Hub::start(&config, &state);
            let wide = openpact::face::http::router(hub.clone(), &settings, false);
            settings.token = openpact::config::HttpToken::None;
            let local = openpact::face::http::router(hub, &settings, true);
            (local, wide)
        });
        World {
            rt,
            local,
            wide,
            sessions: Mutex::new(Vec::new()),
        }
    })
}

/// Reads the input in order; past its end every read is zero or empty.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    /// A length-prefixed piece.
    fn piece(&mut self) -> &'a [u8] {
        let n = usize::from(self.byte() % 64).min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }

    fn text(&mut self) -> String {
        String::from_utf8_lossy(self.piece()).into_owned()
    }
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                char::from(A[(n >> (18 - 6 * i)) as usize & 63])
            } else {
                '='
            });
        }
    }
    out
}

/// The JSON-RPC body: made from templates (so requests get far) or the input's bytes.
struct Rpc {
    bytes: Vec<u8>,
    method: String,
    name: Option<String>,
}

fn body(input: &mut Input<'_>) -> Rpc {
    let choice = input.byte();
    if choice < 32 {
        let bytes = input.0.to_vec();
        input.0 = &[];
        return Rpc {
            bytes,
            method: String::new(),
            name: None,
        };
    }
    const METHODS: [&str; 16] = [
        "initialize",
        "tools/list",
        "tools/call",
        "ping",
        "server/discover",
        "resources/read",
        "prompts/get",
        "notifications/initialized",
        "subscriptions/listen",
        "completion/complete",
        "logging/setLevel",
        "resources/subscribe",
        "prompts/list",
        "resources/templates/list",
        "notifications/cancelled",
        "fuzz/unknown",
    ];
    let method = match input.byte() {
        b if b < 240 => METHODS[usize::from(b) % METHODS.len()].to_string(),
        _ => input.text(),
    };
    let id = match input.byte() % 8 {
        0 => None,
        1 => Some("null".to_string()),
        2 => Some(format!("\"{}\"", input.byte())),
        3 => Some(serde_json::to_string(&input.text()).unwrap_or_default()),
        _ => Some(input.byte().to_string()),
    };
    let name = match input.byte() % 4 {
        0 => None,
        1 => Some("echo".to_string()),
        _ => Some(input.text()),
    };
    let mut params = serde_json::Map::new();
    if let Some(n) = &name {
        let key = if method == "resources/read" || method == "resources/subscribe" {
            "uri"
        } else {
            "name"
        };
        params.insert(key.into(), n.clone().into());
    }
    let shape = input.byte();
    if shape & 1 != 0 {
        let mut meta = serde_json::Map::new();
        meta.insert(
            "io.modelcontextprotocol/protocolVersion".into(),
            if shape & 2 != 0 {
                STATELESS.into()
            } else {
                input.text().into()
            },
        );
        if shape & 4 != 0 {
            meta.insert(
                "io.modelcontextprotocol/clientCapabilities".into(),
                serde_json::json!({"elicitation": {}}),
            );
        }
        if shape & 8 != 0 {
            meta.insert(
                "io.modelcontextprotocol/clientInfo".into(),
                serde_json::json!({"name": "fuzz", "version": "1"}),
            );
        }
        if shape & 16 != 0 {
            meta.insert(
                "io.modelcontextprotocol/logLevel".into(),
                input.text().into(),
            );
        }
        if shape & 32 != 0 {
            meta.insert("progressToken".into(), input.byte().into());
        }
        params.insert("_meta".into(), meta.into());
    }
    if shape & 64 != 0 {
        params.insert("requestState".into(), input.text().into());
        params.insert(
            "inputResponses".into(),
            serde_json::json!({"openpact-1": {"action": "decline"}}),
        );
    }
    if method == "initialize" {
        params.insert("protocolVersion".into(), "2025-06-18".into());
        params.insert("capabilities".into(), serde_json::json!({}));
        params.insert(
            "clientInfo".into(),
            serde_json::json!({"name": "fuzz", "version": "1"}),
        );
    }
    if method == "logging/setLevel" {
        params.insert("level".into(), input.text().into());
    }
    let mut text = String::from(r#"{"jsonrpc":"2.0""#);
    if let Some(id) = &id {
        text.push_str(r#","id":"#);
        text.push_str(id);
    }
    text.push_str(r#","method":"#);
    text.push_str(&serde_json::to_string(&method).unwrap_or_default());
    if shape & 128 == 0 {
        text.push_str(r#","params":"#);
        text.push_str(&serde_json::Value::Object(params).to_string());
    }
    text.push('}');
    if choice < 48 {
        // A stray tail: trailing garbage, or a second message.
        text.push_str(&String::from_utf8_lossy(input.piece()));
    }
    Rpc {
        bytes: text.into_bytes(),
        method,
        name,
    }
}

/// A header value from the input, when it is one.
fn value(text: &[u8]) -> Option<HeaderValue> {
    HeaderValue::from_bytes(text).ok()
}

fn is_local_origin(origin: &str) -> bool {
    origin.is_ascii()
        && openpact::config::HttpSettings::normal_origin(origin).is_some_and(|o| {
            let authority = o.split_once("://").map_or("", |(_, a)| a);
            let host = if authority.starts_with('[') {
                authority.find(']').map_or(authority, |e| &authority[..=e])
            } else {
                authority.split(':').next().unwrap_or("")
            };
            matches!(host, "localhost" | "127.0.0.1" | "[::1]") || o == "https://app.example.com"
        })
}

fn is_local_host(host: &str) -> bool {
    if !host.is_ascii() {
        return false;
    }
    let h = host.trim().to_ascii_lowercase();
    let h = if h.starts_with('[') {
        h.find(']').map_or(h.clone(), |e| h[..=e].to_string())
    } else {
        h.split(':').next().unwrap_or("").to_string()
    };
    matches!(
        h.as_str(),
        "localhost" | "127.0.0.1" | "[::1]" | "app.example.com"
    )
}

fuzz_target!(|data: &[u8]| {
    let w = world();
    let mut input = Input(data);
    let head = input.byte();
    let wide = head & 1 != 0;
    let method = [
        Method::POST,
        Method::POST,
        Method::POST,
        Method::GET,
        Method::DELETE,
        Method::PUT,
        Method::OPTIONS,
        Method::HEAD,
    ][usize::from(head >> 1) % 8]
        .clone();
    let path = match input.byte() % 12 {
        0..=5 => "/mcp".to_string(),
        6 => "/mcp/files".to_string(),
        7 => "/mcp/nope".to_string(),
        8 => "/health".to_string(),
        9 => "/metrics".to_string(),
        10 => "/mcp/%FF".to_string(),
        _ => {
            let t: String = input
                .text()
                .chars()
                .filter(|c| c.is_ascii_graphic() && *c != '#' && *c != '?')
                .collect();
            format!("/{t}")
        }
    };

    let mut headers = HeaderMap::new();
    let mut put = |name: &'static str, v: Option<HeaderValue>| {
        if let Some(v) = v {
            headers.insert(HeaderName::from_static(name), v);
        }
    };
    // Host (a request always has one on the wire; hyper passes it as a header).
    let host: Option<String> = match input.byte() % 8 {
        0..=2 => Some("localhost:8765".into()),
        3 => Some("127.0.0.1".into()),
        4 => Some("[::1]:1".into()),
        5 => Some("evil.example".into()),
        6 => None,
        _ => Some(input.text()),
    };
    let host = host.filter(|h| value(h.as_bytes()).is_some());
    put("host", host.as_deref().and_then(|h| value(h.as_bytes())));
    let origin: Option<String> = match input.byte() % 8 {
        0..=2 => None,
        3 => Some("http://localhost:3000".into()),
        4 => Some("https://app.example.com".into()),
        5 => Some("http://evil.example".into()),
        6 => Some("null".into()),
        _ => Some(input.text()),
    };
    let origin = origin.filter(|o| value(o.as_bytes()).is_some());
    put(
        "origin",
        origin.as_deref().and_then(|o| value(o.as_bytes())),
    );
    let auth: Option<String> = match input.byte() % 4 {
        0 => None,
        1 => Some(format!("Bearer {TOKEN}")),
        2 => Some("Bearer wrong".into()),
        _ => Some(input.text()),
    };
    let auth = auth.filter(|a| value(a.as_bytes()).is_some());
    put(
        "authorization",
        auth.as_deref().and_then(|a| value(a.as_bytes())),
    );
    let session: Option<String> = match input.byte() % 6 {
        0 | 1 => None,
        2 | 3 => {
            let known = w.sessions.lock().expect("lock");
            let n = usize::from(input.byte());
            known.get(n % known.len().max(1)).cloned()
        }
        4 => Some("deadbeef".into()),
        _ => Some(input.text()),
    };
    let has_session = session
        .as_deref()
        .and_then(|s| value(s.as_bytes()))
        .is_some();
    put(
        "mcp-session-id",
        session.as_deref().and_then(|s| value(s.as_bytes())),
    );
    let version: Option<String> = match input.byte() % 8 {
        0 | 1 => None,
        2 => Some("2025-06-18".into()),
        3 => Some("2025-03-26".into()),
        4 => Some("2025-11-25".into()),
        5 | 6 => Some(STATELESS.into()),
        _ => Some(input.text()),
    };
    put(
        "mcp-protocol-version",
        version.as_deref().and_then(|v| value(v.as_bytes())),
    );
    let last_event = match input.byte() % 6 {
        0..=2 => None,
        3 => Some("g0".to_string()),
        4 => Some("p1-1".to_string()),
        _ => Some(input.text()),
    };
    put(
        "last-event-id",
        last_event.as_deref().and_then(|v| value(v.as_bytes())),
    );
    let kinds = input.byte();
    put(
        "content-type",
        match kinds & 3 {
            0 | 1 => Some(HeaderValue::from_static("application/json")),
            2 => None,
            _ => Some(HeaderValue::from_static("text/plain")),
        },
    );
    put(
        "accept",
        (kinds & 4 != 0).then(|| HeaderValue::from_static("application/json, text/event-stream")),
    );

    let b = body(&mut input);
    let mcp_method = match kinds >> 3 & 3 {
        0 => None,
        1 | 2 => Some(b.method.clone()),
        _ => Some(input.text()),
    };
    let has_mcp_method = mcp_method
        .as_deref()
        .and_then(|v| value(v.as_bytes()))
        .is_some();
    put(
        "mcp-method",
        mcp_method.as_deref().and_then(|v| value(v.as_bytes())),
    );
    let mcp_name = match kinds >> 5 {
        0..=3 => None,
        4 | 5 => b.name.clone(),
        6 => b
            .name
            .as_ref()
            .map(|n| format!("=?base64?{}?=", base64(n.as_bytes()))),
        _ => Some(input.text()),
    };
    put(
        "mcp-name",
        mcp_name.as_deref().and_then(|v| value(v.as_bytes())),
    );

    // What the guard must decide.
    let foreign_origin = origin.as_deref().is_some_and(|o| !is_local_origin(o));
    let bad_host = !wide && !host.as_deref().is_some_and(is_local_host);
    let bad_token = wide
        && auth.as_deref().is_none_or(|a| {
            !a.is_ascii()
                || !a
                    .split_once(' ')
                    .is_some_and(|(s, t)| s.eq_ignore_ascii_case("bearer") && t.trim() == TOKEN)
        });

    // What the body asks, as serde_json reads it.
    let parsed: Option<serde_json::Value> = serde_json::from_slice(&b.bytes).ok();
    let request_id = parsed
        .as_ref()
        .filter(|v| v.get("method").is_some_and(|m| m.is_string()))
        .and_then(|v| v.get("id"))
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let is_initialize = parsed
        .as_ref()
        .and_then(|v| v.get("method"))
        .is_some_and(|m| m == "initialize");

    // Paths the client could not send (not a URI) never reach the face.
    let Ok(uri) = http::Uri::try_from(path.as_str()) else {
        return;
    };
    let mut req = Request::builder().method(method.clone()).uri(uri);
    if let Some(h) = req.headers_mut() {
        *h = headers;
    }
    let req = req.body(Body::from(b.bytes.clone())).expect("request");
    let router = if wide { &w.wide } else { &w.local };
    let (status, resp_headers, body) = w.rt.block_on(async {
        let resp = tokio::time::timeout(Duration::from_secs(5), router.clone().oneshot(req))
            .await
            .expect("the face did not answer within 5 s")
            .expect("infallible");
        let status = resp.status();
        let headers = resp.headers().clone();
        let sse = headers
            .get("content-type")
            .is_some_and(|c| c.as_bytes().starts_with(b"text/event-stream"));
        // An SSE body may never end: it is dropped unread, which closes the stream.
        let body = if sse {
            None
        } else {
            Some(
                axum::body::to_bytes(resp.into_body(), 1 << 20)
                    .await
                    .expect("body"),
            )
        };
        (status, headers, body)
    });

    let s = status.as_u16();
    assert!(
        matches!(
            s,
            200 | 202 | 204 | 400 | 401 | 403 | 404 | 405 | 413 | 429 | 503
        ),
        "status {s} for {method} {path}"
    );
    if foreign_origin {
        assert_eq!(
            status,
            StatusCode::FORBIDDEN,
            "foreign Origin {origin:?} let through to {method} {path}"
        );
    } else if bad_host {
        assert_eq!(status, StatusCode::FORBIDDEN, "Host {host:?} let through");
    } else if path == "/ui" || path.starts_with("/ui/") {
        // The dashboard's guard is its own: a session cookie (none is ever sent here) or the
        // token, and its login link is a credential of its own (no key here works). So no
        // page or action is served to a caller without the token.
        assert!(
            !matches!(s, 200 | 204) || (wide && !bad_token),
            "{s} for {method} {path} with neither a session nor the token"
        );
    } else if bad_token {
        assert_eq!(status, StatusCode::UNAUTHORIZED, "no token, yet {s}");
        assert_eq!(
            resp_headers.get("www-authenticate").map(|v| v.as_bytes()),
            Some(&b"Bearer"[..])
        );
    } else {
        assert!(s != 401 && s != 403, "{s} for a request the guard passes");
    }
    if s == 503 {
        assert!(is_initialize, "503 for something other than initialize");
    }
    let content_type = resp_headers
        .get("content-type")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    if let Some(body) = &body {
        if s == 202 {
            assert!(body.is_empty(), "a 202 with a body");
        }
        if content_type == "application/json" && method != Method::HEAD && path.starts_with("/mcp")
        {
            let v: serde_json::Value =
                serde_json::from_slice(body).expect("a JSON answer that is not JSON");
            assert_eq!(
                v.get("jsonrpc").and_then(|j| j.as_str()),
                Some("2.0"),
                "{v}"
            );
            assert!(
                v.get("result").is_some() != v.get("error").is_some(),
                "neither result nor error (or both): {v}"
            );
            assert!(v.get("id").is_some(), "an answer without id: {v}");
            if s == 200 && path.starts_with("/mcp") && method == Method::POST {
                if let Some(id) = &request_id {
                    assert_eq!(v.get("id"), Some(id), "answered another id");
                }
            }
        }
    }
    let session_out = resp_headers.get("mcp-session-id");
    if session_out.is_some() {
        assert!(
            is_initialize && s == 200 && method == Method::POST,
            "a session id handed out for {s} {method} {path}"
        );
    }
    if let Some(id) = session_out.and_then(|v| v.to_str().ok()) {
        let mut known = w.sessions.lock().expect("lock");
        if known.len() >= 8 {
            known.remove(0);
        }
        known.push(id.to_string());
    }
    let stateless_post = method == Method::POST
        && (path == "/mcp" || path == "/mcp/files")
        && !has_session
        && version.as_deref() == Some(STATELESS)
        && request_id.is_some()
        && !foreign_origin
        && !bad_host
        && !bad_token
        && parsed.as_ref().is_some_and(|v| v.is_object())
        && b.bytes.len() <= 64 * 1024;
    if stateless_post && !has_mcp_method {
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "a 2026-07-28 request without Mcp-Method"
        );
    }
    if content_type.starts_with("text/event-stream") {
        assert_eq!(s, 200, "an SSE answer with {s}");
    }
});
