//! What OAuth servers and the browser send openpact, one parser per first byte:
//! `WWW-Authenticate` challenges, Protected Resource Metadata, authorization server metadata,
//! token responses (through the real refresh grant), the login callback's request, and
//! client registration answers. Checked, beyond never panicking:
//! - a challenge gives back exactly the Bearer parameters written into it (quoted or not),
//!   never another scheme's, and its scopes are distinct and without blanks;
//! - metadata is used only for this server: a resource it covers is on its origin, at or
//!   above its path; every endpoint taken is HTTPS, or plain HTTP on loopback, and never a
//!   link-local address in any notation; another issuer's document is not used; S256 is
//!   required; the well-known URLs stay on the server's (issuer's) origin;
//! - a token response gives tokens only from a 200 Bearer answer, keeps the refresh token
//!   when none is rotated in, and no failure message carries a token or the client secret;
//! - the callback yields a code only for the expected path, `state` and `iss`, and a
//!   request with another `state` never ends the wait;
//! - a registration answer gives a client id, and a secret whenever the method needs one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openpact::auth::parsers::{
    Expect, RefreshError, StoredTokens, auth_server, metadata_urls, refresh_with, registered,
    resource_matches, resource_metadata, server_metadata_urls, verdict,
};
use openpact::auth::{AuthMethod, AuthServer, Challenge, canonical_resource};
use serde_json::{Value, json};
use std::sync::OnceLock;
use url::{Host, Url};

/// Reads the input in order; past its end every read is zero or empty.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn piece(&mut self) -> &'a [u8] {
        let n = usize::from(self.byte() % 64).min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }

    fn text(&mut self) -> String {
        String::from_utf8_lossy(self.piece()).into_owned()
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.0)
    }
}

const URLS: [&str; 10] = [
    "https://mcp.example.com/mcp",
    "https://mcp.example.com",
    "http://localhost:3000/mcp/",
    "http://127.0.0.1:8080/a/b",
    "https://auth.example.com/tenant1",
    "https://MCP.Example.com:443/mcp?x=1#f",
    "http://mcp.example.com/mcp",
    "https://[::1]/mcp",
    "https://169.254.169.254/latest",
    "https://[fe80::1]/x",
];

fn a_url(input: &mut Input<'_>) -> String {
    match input.byte() {
        b if b < 200 => URLS[usize::from(b) % URLS.len()].to_string(),
        _ => input.text(),
    }
}

/// HTTPS, or plain HTTP to this machine; never link-local, however the address is written.
fn safe_endpoint(u: &Url) -> bool {
    let link_local = match u.host() {
        Some(Host::Ipv4(ip)) => ip.is_link_local(),
        Some(Host::Ipv6(ip)) => {
            (ip.segments()[0] & 0xffc0) == 0xfe80
                || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_link_local())
        }
        _ => false,
    };
    let loopback = match u.host() {
        Some(Host::Domain(d)) => {
            let d = d.to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    !link_local && (u.scheme() == "https" || (u.scheme() == "http" && loopback))
}

/// A quoted-string holding `s`.
fn quoted(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c))
}

fn challenge(input: &mut Input<'_>) {
    // Arbitrary text first: no panic, and sane scopes.
    let text = input.text();
    let c = Challenge::parse(Some(&text));
    let scopes = c.scopes();
    for (i, s) in scopes.iter().enumerate() {
        assert!(!s.is_empty() && !s.contains(char::is_whitespace), "{s:?}");
        assert!(!scopes[..i].contains(s), "duplicate scope {s:?}");
    }
    // A header written with known Bearer parameters, after another scheme's.
    let names = ["resource_metadata", "scope", "error", "error_description"];
    let values: Vec<String> = names.iter().map(|_| input.text()).collect();
    let order = input.byte();
    let mut header = String::new();
    if order & 1 != 0 {
        header.push_str("Basic realm=\"r\", scope=\"basic-scope\", ");
    }
    if order & 2 != 0 {
        header.push_str("Negotiate abc+/def==, ");
    }
    header.push_str(if order & 4 != 0 { "bearer " } else { "Bearer " });
    if order & 8 != 0 {
        header.push_str("realm=\"mcp\", ");
    }
    let mut written = Vec::new();
    for i in 0..4 {
        let k = (i + usize::from(order >> 4)) % 4;
        if input.byte() & 1 == 0 {
            continue;
        }
        let v = &values[k];
        // A token may go unquoted (when it is one); anything else is quoted.
        let plain = is_token(v) && input.byte() & 1 == 0;
        header.push_str(names[k]);
        header.push('=');
        header.push_str(&if plain { v.clone() } else { quoted(v) });
        header.push_str(", ");
        written.push(k);
    }
    if order & 8 != 0 {
        header.push_str("DPoP algs=\"ES256\", scope=\"dpop-scope\"");
    }
    let c = Challenge::parse(Some(&header));
    let got = [
        &c.resource_metadata,
        &c.scope,
        &c.error,
        &c.error_description,
    ];
    for (k, g) in got.iter().enumerate() {
        if written.contains(&k) {
            assert_eq!(
                g.as_deref(),
                Some(values[k].as_str()),
                "{} in {header:?}",
                names[k]
            );
        } else {
            assert_eq!(**g, None, "{} from nowhere in {header:?}", names[k]);
        }
    }
}

fn resource(input: &mut Input<'_>) {
    let server_text = a_url(input);
    // Remote MCP servers are http(s) URLs (the config refuses others).
    let Ok(server) = Url::parse(&server_text) else {
        return;
    };
    if !matches!(server.scheme(), "http" | "https") {
        return;
    }
    let r = a_url(input);
    if resource_matches(&r, &server) {
        let r = Url::parse(&r).expect("matched a resource that is not a URL");
        assert_eq!(r.origin(), server.origin(), "{r} covers {server}?");
        let (rp, sp) = (
            r.path().trim_end_matches('/'),
            server.path().trim_end_matches('/'),
        );
        assert!(
            sp == rp || sp.starts_with(&format!("{rp}/")),
            "{r} covers {server}?"
        );
    }
    let canon = canonical_resource(&server_text).expect("canonical form");
    assert!(
        resource_matches(&canon, &server),
        "{canon} does not cover {server}"
    );
    assert_eq!(
        canonical_resource(&canon).as_deref(),
        Ok(canon.as_str()),
        "not idempotent"
    );
    let challenge = Challenge {
        resource_metadata: Some(input.text()),
        ..Challenge::default()
    };
    let urls = metadata_urls(&server, &challenge);
    for (i, u) in urls.iter().enumerate() {
        assert!(!urls[..i].contains(u), "{u} twice");
        if i > 0
            || challenge
                .resource_metadata
                .as_deref()
                .is_some_and(|m| server.join(m).is_err())
        {
            assert_eq!(u.origin(), server.origin(), "{u} for {server}");
            assert!(
                u.path()
                    .starts_with("/.well-known/oauth-protected-resource"),
                "{u}"
            );
        }
    }
    // The document.
    let doc: Value = match input.byte() % 3 {
        0 => serde_json::from_slice(input.rest()).unwrap_or(Value::Null),
        _ => json!({
            "resource": a_url(input),
            "authorization_servers": [a_url(input), a_url(input)],
            "scopes_supported": [input.text()],
        }),
    };
    let at =
        Url::parse("https://mcp.example.com/.well-known/oauth-protected-resource").expect("url");
    if let Ok(prm) = resource_metadata(&server, &at, &doc) {
        match doc.get("resource").and_then(Value::as_str) {
            Some(r) => assert!(resource_matches(r, &server) && prm.resource == r),
            None => assert_eq!(
                prm.resource,
                canonical_resource(server.as_str()).expect("canonical")
            ),
        }
        assert!(
            safe_endpoint(&prm.issuer_url),
            "issuer {} taken",
            prm.issuer_url
        );
        let first = doc["authorization_servers"]
            .as_array()
            .and_then(|a| a.iter().find_map(Value::as_str));
        assert_eq!(Some(prm.issuer.as_str()), first);
        for u in server_metadata_urls(&prm.issuer_url) {
            assert_eq!(u.origin(), prm.issuer_url.origin(), "{u}");
        }
    }
}

fn metadata(input: &mut Input<'_>) {
    let expected = a_url(input);
    let endpoint = |input: &mut Input<'_>| -> Value {
        match input.byte() % 4 {
            0 => Value::Null,
            1 => json!(format!("{expected}/authorize")),
            _ => json!(a_url(input)),
        }
    };
    let mut doc = json!({
        "issuer": if input.byte() & 1 == 0 { json!(expected.clone()) } else { json!(a_url(input)) },
        "authorization_endpoint": endpoint(input),
        "token_endpoint": endpoint(input),
        "registration_endpoint": endpoint(input),
        "code_challenge_methods_supported": match input.byte() % 4 {
            0 => json!(["S256"]),
            1 => json!(["plain", "S256"]),
            2 => json!(["plain"]),
            _ => json!(input.text()),
        },
        "token_endpoint_auth_methods_supported": [input.text()],
        "authorization_response_iss_parameter_supported": input.byte() & 1 == 0,
    });
    if input.byte() & 1 == 0 {
        doc = serde_json::from_slice(input.rest()).unwrap_or(doc);
    }
    let at =
        Url::parse("https://auth.example.com/.well-known/oauth-authorization-server").expect("url");
    match auth_server(&doc, &expected, &at) {
        Ok(Some(a)) => {
            let published = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
            assert_eq!(
                published.trim_end_matches('/'),
                expected.trim_end_matches('/')
            );
            assert_eq!(a.issuer, published);
            for u in [
                Some(&a.authorization_endpoint),
                Some(&a.token_endpoint),
                a.registration_endpoint.as_ref(),
            ]
            .into_iter()
            .flatten()
            {
                assert!(safe_endpoint(u), "endpoint {u} taken");
            }
            let methods = doc["code_challenge_methods_supported"].as_array();
            assert!(
                methods.is_some_and(|m| m.iter().any(|x| x == "S256")),
                "no S256"
            );
        }
        Ok(None) => {
            let published = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
            assert_ne!(
                published.trim_end_matches('/'),
                expected.trim_end_matches('/')
            );
        }
        Err(_) => {}
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    })
}

const OLD_REFRESH: &str = "old-refresh-token-0123456789";
const CLIENT_SECRET: &str = "client-secret-9876543210";

fn token(input: &mut Input<'_>) {
    let status = [200u16, 200, 400, 401, 500, 302][usize::from(input.byte()) % 6];
    let content_type = [
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("Application/JSON"),
        None,
        Some("text/html"),
    ][usize::from(input.byte()) % 5];
    let method =
        [AuthMethod::Basic, AuthMethod::Post, AuthMethod::None][usize::from(input.byte()) % 3];
    let body: Vec<u8> = match input.byte() % 3 {
        0 => input.rest().to_vec(),
        _ => {
            let mut doc = serde_json::Map::new();
            let f = input.byte();
            if f & 1 != 0 {
                doc.insert("access_token".into(), json!(input.text()));
            }
            if f & 2 != 0 {
                doc.insert(
                    "token_type".into(),
                    json!(["Bearer", "bearer", "DPoP", "mac"][usize::from(input.byte()) % 4]),
                );
            }
            if f & 4 != 0 {
                doc.insert("refresh_token".into(), json!(input.text()));
            }
            if f & 8 != 0 {
                doc.insert("expires_in".into(), json!(u64::from(input.byte()) * 1000));
            }
            if f & 16 != 0 {
                doc.insert("scope".into(), json!(input.text()));
            }
            if f & 32 != 0 {
                doc.insert("error".into(), json!(input.text()));
            }
            if f & 64 != 0 {
                doc.insert("error_description".into(), json!(input.text()));
            }
            if f & 128 != 0 {
                doc.insert(input.text(), json!(input.text()));
            }
            serde_json::to_vec(&doc).unwrap_or_default()
        }
    };
    let old = StoredTokens {
        access_token: "old-access-token-0123456789".into(),
        refresh_token: Some(OLD_REFRESH.into()),
        expires_at: Some(1),
        scopes: vec!["read".into()],
        resource: "https://mcp.example.com/mcp".into(),
        issuer: "https://auth.example.com".into(),
        token_endpoint: "https://auth.example.com/token".into(),
        client_id: "client-1".into(),
        client_secret: Some(CLIENT_SECRET.into()),
        auth_method: method,
        obtained_at: 0,
    };
    // The refresh against a token endpoint answering `body`.
    let refresh = |body: Vec<u8>| {
        let answer = move |_req: http::Request<Vec<u8>>| {
            let mut b = http::Response::builder().status(status);
            if let Some(ct) = content_type {
                b = b.header("content-type", ct);
            }
            let r = b.body(body.clone()).map_err(std::io::Error::other);
            async move { r }
        };
        runtime().block_on(refresh_with(&answer, &old))
    };
    let result = refresh(body.clone());
    // The first JSON value of the body, as `oauth2` reads it (it ignores what follows).
    // (Members it ignores may hold bytes that are not UTF-8: serde_json skips them unread.)
    let text = String::from_utf8_lossy(&body);
    let doc: Option<Value> = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok);
    let field = |k: &str| {
        doc.as_ref()
            .and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    match result {
        Ok(fresh) => {
            assert_eq!(status, 200, "tokens from HTTP {status}");
            let kind = field("token_type").unwrap_or_default();
            assert!(
                kind.eq_ignore_ascii_case("bearer"),
                "a {kind:?} token taken"
            );
            assert_eq!(Some(fresh.access_token.clone()), field("access_token"));
            assert!(
                !fresh.access_token.is_empty(),
                "an empty access token taken"
            );
            let rotated = field("refresh_token");
            assert_eq!(fresh.refresh_token, rotated.or(Some(OLD_REFRESH.into())));
            match field("scope") {
                // Scope tokens hold no whitespace (RFC 6749 §3.3): the words, first occurrences.
                Some(s) => {
                    let mut want: Vec<String> = Vec::new();
                    for w in s.split(char::is_whitespace).filter(|w| !w.is_empty()) {
                        if !want.iter().any(|x| x == w) {
                            want.push(w.to_string());
                        }
                    }
                    assert_eq!(fresh.scopes, want, "scopes from {s:?}");
                }
                None => assert_eq!(fresh.scopes, old.scopes),
            }
            assert_eq!(
                (
                    &fresh.resource,
                    &fresh.issuer,
                    &fresh.token_endpoint,
                    &fresh.client_id,
                    &fresh.client_secret
                ),
                (
                    &old.resource,
                    &old.issuer,
                    &old.token_endpoint,
                    &old.client_id,
                    &old.client_secret
                )
            );
        }
        Err(RefreshError::Refused(m) | RefreshError::Failed(m)) => {
            let shown = [field("error"), field("error_description")];
            let shown_contains = |v: &str| shown.iter().flatten().any(|s| s.contains(v));
            let ep = &old.token_endpoint;
            // Our own secrets never appear, unless the server chose to show them.
            for secret in [OLD_REFRESH, CLIENT_SECRET] {
                assert!(
                    !m.contains(secret) || shown_contains(secret),
                    "a secret in the message: {m}"
                );
            }
            // A token the server sent may be spelled like words of the message (ours or
            // oauth2's, which the fuzzer learns): it leaks only if the message changes when
            // the token does, so the body is asked again with the token masked.
            for token in [field("access_token"), field("refresh_token")]
                .into_iter()
                .flatten()
                .filter(|s| s.len() >= 12 && !shown_contains(s) && !ep.contains(s.as_str()))
                .filter(|s| m.contains(s.as_str()))
            {
                let again = match refresh(mask(&body, token.as_bytes())) {
                    Err(RefreshError::Refused(m) | RefreshError::Failed(m)) => m,
                    Ok(_) => String::new(),
                };
                assert!(again.contains(token.as_str()), "a token in the message: {m}");
            }
        }
    }
}

/// `body` with every occurrence of `token` overwritten by as many `Q`s.
fn mask(body: &[u8], token: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    let mut at = 0;
    while let Some(i) = out[at..].windows(token.len()).position(|w| w == token) {
        let start = at + i;
        out[start..start + token.len()].fill(b'Q');
        at = start + token.len();
    }
    out
}

fn callback(input: &mut Input<'_>) {
    let path = ["/callback", "/cb", "/"][usize::from(input.byte()) % 3];
    let expect = Expect {
        state: ["s7a7e-0123456789", "", "x"][usize::from(input.byte()) % 3].to_string(),
        issuer: "https://auth.example.com".to_string(),
        iss_advertised: input.byte() & 1 == 0,
    };
    let url = match input.byte() % 2 {
        0 => input.text(),
        _ => {
            let mut u = String::from(if input.byte() & 1 == 0 {
                path
            } else {
                "/other"
            });
            let n = input.byte() % 6;
            for i in 0..n {
                u.push(if i == 0 { '?' } else { '&' });
                let key = ["code", "state", "iss", "error", "error_description", "x"]
                    [usize::from(input.byte()) % 6];
                let value = match input.byte() % 4 {
                    0 => expect.state.clone(),
                    1 => expect.issuer.clone(),
                    _ => input.text(),
                };
                u.push_str(key);
                u.push('=');
                u.extend(url::form_urlencoded::byte_serialize(value.as_bytes()));
            }
            u
        }
    };
    let v = verdict(path, &url, &expect);
    let (asked, query) = url.split_once('?').unwrap_or((&url, ""));
    let mut first = std::collections::HashMap::new();
    for (k, val) in url::form_urlencoded::parse(query.as_bytes()) {
        first
            .entry(k.into_owned())
            .or_insert_with(|| val.into_owned());
    }
    let state_ok = first.get("state").map_or("", String::as_str) == expect.state;
    if asked != path {
        assert_eq!((v.status, &v.outcome), (404, &None));
    } else if !state_ok {
        assert_eq!(v.outcome, None, "another login's callback ended the wait");
        assert_eq!(v.status, 400);
    }
    if let Some(Ok(code)) = &v.outcome {
        assert_eq!(v.status, 200);
        assert!(asked == path && state_ok);
        assert_eq!(first.get("code"), Some(code));
        assert!(!code.is_empty() && !first.contains_key("error"));
        match first.get("iss") {
            Some(iss) => assert_eq!(iss, &expect.issuer),
            None => assert!(!expect.iss_advertised),
        }
    } else {
        assert_ne!(v.status, 200);
    }
}

fn registration(input: &mut Input<'_>) {
    let asked =
        [AuthMethod::Basic, AuthMethod::Post, AuthMethod::None][usize::from(input.byte()) % 3];
    let doc: Value = match input.byte() % 3 {
        0 => serde_json::from_slice(input.rest()).unwrap_or(Value::Null),
        _ => {
            let mut d = serde_json::Map::new();
            let f = input.byte();
            if f & 1 != 0 {
                d.insert("client_id".into(), json!(input.text()));
            }
            if f & 2 != 0 {
                d.insert("client_secret".into(), json!(input.text()));
            }
            if f & 4 != 0 {
                let m = [
                    "client_secret_basic",
                    "client_secret_post",
                    "none",
                    "private_key_jwt",
                ];
                d.insert(
                    "token_endpoint_auth_method".into(),
                    json!(m[usize::from(input.byte()) % 4]),
                );
            }
            if f & 8 != 0 {
                d.insert("client_secret_expires_at".into(), json!(input.byte()));
            }
            Value::Object(d)
        }
    };
    let auth = AuthServer {
        issuer: "https://auth.example.com".into(),
        authorization_endpoint: Url::parse("https://auth.example.com/authorize").expect("url"),
        token_endpoint: Url::parse("https://auth.example.com/token").expect("url"),
        registration_endpoint: None,
        scopes_supported: Vec::new(),
        auth_methods: None,
        metadata_document_supported: false,
        iss_parameter_supported: false,
        from_metadata: true,
    };
    if let Ok(id) = registered(
        &doc,
        asked,
        &auth,
        "http://127.0.0.1:1/callback",
        &["read".into()],
    ) {
        assert!(!id.client_id.is_empty());
        assert_eq!(
            doc.get("client_id").and_then(Value::as_str),
            Some(id.client_id.as_str())
        );
        if id.auth_method != AuthMethod::None {
            assert!(
                id.client_secret.as_deref().is_some_and(|s| !s.is_empty()),
                "no secret for {:?}",
                id.auth_method
            );
        }
        let method = doc
            .get("token_endpoint_auth_method")
            .and_then(Value::as_str);
        assert_eq!(method.unwrap_or(asked.as_str()), id.auth_method.as_str());
        assert_eq!(id.issuer, auth.issuer);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    match input.byte() % 6 {
        0 => challenge(&mut input),
        1 => resource(&mut input),
        2 => metadata(&mut input),
        3 => token(&mut input),
        4 => callback(&mut input),
        _ => registration(&mut input),
    }
});
