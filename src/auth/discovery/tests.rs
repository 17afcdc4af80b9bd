//! Discovery of a server's authorization: the metadata documents, their checks and fallbacks.

use super::*;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A loopback server answering GETs from a table (path → JSON); 404 otherwise. It logs
/// the paths asked for, and stops when dropped.
struct Docs {
    base: String,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Docs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn docs(table: impl FnOnce(&str) -> Vec<(&'static str, Value)>) -> Docs {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let base = format!(
        "http://127.0.0.1:{}",
        server.server_addr().to_ip().unwrap().port()
    );
    let routes = table(&base);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (log, halt) = (asked.clone(), stop.clone());
    std::thread::spawn(move || {
        while !halt.load(Ordering::Relaxed) {
            let Ok(Some(req)) = server.recv_timeout(std::time::Duration::from_millis(50)) else {
                continue;
            };
            let path = req.url().to_string();
            log.lock().unwrap().push(path.clone());
            let response = match routes.iter().find(|(p, _)| *p == path) {
                Some((_, body)) => tiny_http::Response::from_string(body.to_string()),
                None => tiny_http::Response::from_string("no").with_status_code(404),
            };
            let _ = req.respond(response);
        }
    });
    Docs { base, asked, stop }
}

fn as_doc(issuer: &str) -> Value {
    json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "code_challenge_methods_supported": ["S256"],
    })
}

async fn run(d: &Docs, challenge: &Challenge) -> Result<Discovered, String> {
    let server = Url::parse(&format!("{}/mcp", d.base)).unwrap();
    discover(super::super::http::http().unwrap(), &server, challenge).await
}

#[tokio::test]
async fn metadata_for_another_resource_is_refused() {
    let d = docs(|base| {
        vec![(
            "/.well-known/oauth-protected-resource/mcp",
            json!({"resource": format!("{base}/other"), "authorization_servers": [base]}),
        )]
    });
    let e = run(&d, &Challenge::default()).await.unwrap_err();
    assert!(
        e.contains("/other") && e.contains("not for this server"),
        "{e}"
    );
}

#[tokio::test]
async fn no_metadata_at_all_gives_the_2025_03_26_defaults() {
    let d = docs(|_| vec![]);
    let found = run(&d, &Challenge::default()).await.unwrap();
    let a = &found.server;
    assert!(!a.from_metadata);
    assert_eq!(
        a.authorization_endpoint.as_str(),
        format!("{}/authorize", d.base)
    );
    assert_eq!(a.token_endpoint.as_str(), format!("{}/token", d.base));
    assert_eq!(
        a.registration_endpoint.as_ref().map(Url::as_str),
        Some(format!("{}/register", d.base).as_str())
    );
    assert_eq!(found.resource, format!("{}/mcp", d.base));
    assert_eq!(found.metadata_url, None);
    assert_eq!(
        *d.asked.lock().unwrap(),
        [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
        ]
    );
}

#[tokio::test]
async fn without_resource_metadata_the_root_metadata_is_used() {
    let d = docs(|base| vec![("/.well-known/oauth-authorization-server", as_doc(base))]);
    let found = run(&d, &Challenge::default()).await.unwrap();
    assert!(found.server.from_metadata);
    assert_eq!(found.server.issuer, d.base);
}

#[tokio::test]
async fn challenge_url_first_then_the_issuer_path_order() {
    let d = docs(|base| {
        let issuer = format!("{base}/tenant1");
        vec![
            (
                "/custom/prm",
                json!({"resource": format!("{base}/mcp"), "authorization_servers": [issuer],
                           "scopes_supported": ["a", "b"]}),
            ),
            ("/.well-known/openid-configuration/tenant1", as_doc(&issuer)),
        ]
    });
    let challenge = Challenge {
        resource_metadata: Some(format!("{}/custom/prm", d.base)),
        ..Challenge::default()
    };
    let found = run(&d, &challenge).await.unwrap();
    assert_eq!(found.server.issuer, format!("{}/tenant1", d.base));
    assert_eq!(found.scopes_supported, ["a", "b"]);
    assert_eq!(found.resource, format!("{}/mcp", d.base));
    assert_eq!(
        *d.asked.lock().unwrap(),
        [
            "/custom/prm",
            "/.well-known/oauth-authorization-server/tenant1",
            "/.well-known/openid-configuration/tenant1",
        ]
    );
}

#[tokio::test]
async fn metadata_naming_another_issuer_is_not_used() {
    let d = docs(|base| {
        vec![
            (
                "/.well-known/oauth-protected-resource",
                json!({"resource": format!("{base}/mcp"), "authorization_servers": [base]}),
            ),
            (
                "/.well-known/oauth-authorization-server",
                as_doc("http://127.0.0.1:9"),
            ),
        ]
    });
    let e = run(&d, &Challenge::default()).await.unwrap_err();
    assert!(e.contains("names another issuer"), "{e}");
}

fn u(s: &str) -> Url {
    Url::parse(s).unwrap()
}

fn strs(urls: &[Url]) -> Vec<String> {
    urls.iter().map(Url::to_string).collect()
}

#[test]
fn resource_metadata_order() {
    let server = u("https://mcp.example.com/public/mcp");
    assert_eq!(
        strs(&metadata_urls(&server, &Challenge::default())),
        [
            "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
            "https://mcp.example.com/.well-known/oauth-protected-resource",
        ]
    );
    let challenge = Challenge {
        resource_metadata: Some("https://mcp.example.com/custom/prm".into()),
        ..Challenge::default()
    };
    assert_eq!(
        strs(&metadata_urls(&server, &challenge))[0],
        "https://mcp.example.com/custom/prm"
    );
    assert_eq!(metadata_urls(&server, &challenge).len(), 3);
    // A challenge naming the root well-known place: each place is tried once, in the
    // challenge's turn (fuzz: oauth found it listed twice).
    let root = Challenge {
        resource_metadata: Some("/.well-known/oauth-protected-resource".into()),
        ..Challenge::default()
    };
    assert_eq!(
        strs(&metadata_urls(&server, &root)),
        [
            "https://mcp.example.com/.well-known/oauth-protected-resource",
            "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
        ]
    );
    // No path: only the root form; a trailing slash is dropped before insertion.
    assert_eq!(
        strs(&metadata_urls(
            &u("http://localhost:3000"),
            &Challenge::default()
        )),
        ["http://localhost:3000/.well-known/oauth-protected-resource"]
    );
    assert_eq!(
        strs(&metadata_urls(
            &u("http://localhost:3000/mcp/"),
            &Challenge::default()
        ))[0],
        "http://localhost:3000/.well-known/oauth-protected-resource/mcp"
    );
}

#[test]
fn server_metadata_order() {
    assert_eq!(
        strs(&server_metadata_urls(&u(
            "https://auth.example.com/tenant1"
        ))),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
            "https://auth.example.com/.well-known/openid-configuration/tenant1",
            "https://auth.example.com/tenant1/.well-known/openid-configuration",
        ]
    );
    assert_eq!(
        strs(&server_metadata_urls(&u("https://auth.example.com/"))),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com/.well-known/openid-configuration",
        ]
    );
}

#[test]
fn canonical_and_matching_resources() {
    assert_eq!(
        canonical_resource("HTTPS://MCP.Example.com/mcp#frag").unwrap(),
        "https://mcp.example.com/mcp"
    );
    assert_eq!(
        canonical_resource("http://localhost:3000").unwrap(),
        "http://localhost:3000"
    );
    let server = u("https://mcp.example.com/mcp");
    assert!(resource_matches("https://mcp.example.com/mcp", &server));
    assert!(resource_matches(
        "https://MCP.example.com:443/mcp/",
        &server
    ));
    assert!(resource_matches("https://mcp.example.com", &server));
    assert!(!resource_matches("https://mcp.example.com/other", &server));
    assert!(!resource_matches("https://mcp.example.com/mc", &server));
    assert!(!resource_matches("https://evil.example.com/mcp", &server));
    assert!(!resource_matches("http://mcp.example.com/mcp", &server));
    assert!(!resource_matches("not a url", &server));
}

fn doc(extra: Value) -> Value {
    let mut d = json!({
        "issuer": "https://auth.example.com",
        "authorization_endpoint": "https://auth.example.com/authorize",
        "token_endpoint": "https://auth.example.com/token",
        "code_challenge_methods_supported": ["S256"],
    });
    for (k, v) in extra.as_object().unwrap() {
        d[k] = v.clone();
    }
    d
}

#[test]
fn metadata_validation() {
    let at = u("https://auth.example.com/.well-known/oauth-authorization-server");
    let a = auth_server(&doc(json!({})), "https://auth.example.com/", &at)
        .unwrap()
        .unwrap();
    assert_eq!(a.issuer, "https://auth.example.com");
    assert!(a.from_metadata && !a.iss_parameter_supported && a.auth_methods.is_none());
    // Another issuer: not used.
    assert!(
        auth_server(&doc(json!({})), "https://other.example.com", &at)
            .unwrap()
            .is_none()
    );
    // No S256, or no list at all: refused with a clear reason.
    let e = auth_server(
        &doc(json!({"code_challenge_methods_supported": ["plain"]})),
        "https://auth.example.com",
        &at,
    )
    .unwrap_err();
    assert!(e.contains("S256") && e.contains("plain"), "{e}");
    let mut no_list = doc(json!({}));
    no_list
        .as_object_mut()
        .unwrap()
        .remove("code_challenge_methods_supported");
    let e = auth_server(&no_list, "https://auth.example.com", &at).unwrap_err();
    assert!(e.contains("not published"), "{e}");
    // Plain HTTP endpoints off loopback: refused.
    let e = auth_server(
        &doc(json!({"token_endpoint": "http://auth.example.com/token"})),
        "https://auth.example.com",
        &at,
    )
    .unwrap_err();
    assert!(e.contains("HTTPS"), "{e}");
    let a = auth_server(
        &doc(json!({
            "authorization_response_iss_parameter_supported": true,
            "client_id_metadata_document_supported": true,
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
        })),
        "https://auth.example.com",
        &at,
    )
    .unwrap()
    .unwrap();
    assert!(a.iss_parameter_supported && a.metadata_document_supported);
    assert_eq!(a.auth_methods, Some(vec!["client_secret_post".to_string()]));
}
