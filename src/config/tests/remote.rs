//! Remote servers: editors' remote entries, `oauth`, URL checks.

use super::*;

/// Parses `text` as `mcp.json` with `vars` as the whole environment.
fn load(text: &str, vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let env = move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    parse(text, Path::new("mcp.json"), &env).and_then(Config::strict)
}

fn problems(text: &str) -> Vec<String> {
    match load(text, &[]) {
        Ok(c) => panic!("expected problems, got {c:#?}"),
        Err(e) => e.problems.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn editor_remote_entries_load_unchanged() {
    // Claude Desktop / Cursor (`mcpServers`, `type: "http"`) and VS Code (`servers`).
    let c = load(
        r#"{"mcpServers": {"linear": {"type": "http", "url": "https://mcp.linear.app/mcp"},
                           "notion": {"url": "https://mcp.notion.com/sse", "headers": {"X-Key": "${KEY}"}}},
            "servers": {"gh": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                               "headers": {"Authorization": "Bearer ${GH}"}},
                        "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
                        "new": {"type": "streamable-http", "url": "http://127.0.0.1:9/mcp"}}}"#,
        &[("KEY", "k"), ("GH", "t")],
    )
    .unwrap();
    let kinds: Vec<(&str, &str)> = c
        .servers
        .iter()
        .map(|s| match &s.transport {
            Transport::Http { kind, .. } => (s.name.as_str(), kind.as_str()),
            Transport::Stdio { .. } => panic!("{} is not remote", s.name),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("linear", "http"),
            ("notion", "http"),
            ("gh", "http"),
            ("old", "sse"),
            ("new", "streamable-http")
        ]
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    let Transport::Http { headers, .. } = &c.servers[2].transport else {
        unreachable!()
    };
    assert_eq!(
        headers,
        &[("Authorization".to_string(), "Bearer t".to_string())]
    );
}

#[test]
fn oauth_settings_are_read_and_expanded() {
    let c = load(
        r#"{"mcpServers": {"r": {"url": "https://example.com/mcp", "oauth": {
            "clientId": "my-app", "clientSecret": "${APP_SECRET}", "scopes": ["read", "write"],
            "redirectPort": 8765, "callbackPath": "/cb"}},
            "s": {"url": "https://example.com/mcp2", "namespace": "s2", "oauth": {"scopes": "a b"}}}}"#,
        &[("APP_SECRET", "shh")],
    )
    .unwrap();
    let Transport::Http { oauth, .. } = &c.servers[0].transport else {
        unreachable!()
    };
    assert_eq!(
        oauth,
        &OAuthSettings {
            client_id: Some("my-app".into()),
            client_secret: Some("shh".into()),
            scopes: vec!["read".into(), "write".into()],
            redirect_port: Some(8765),
            callback_path: Some("/cb".into()),
        }
    );
    let Transport::Http { oauth, .. } = &c.servers[1].transport else {
        unreachable!()
    };
    assert_eq!(oauth.scopes, ["a", "b"]);
}

#[test]
fn oauth_mistakes_name_the_path_and_the_fix() {
    let c = parse(
        r#"{"mcpServers": {"r": {"url": "https://example.com/mcp", "oauth": {
            "clientID": "x", "clientSecret": "literal", "redirectPort": 70000,
            "callbackPath": "callback", "scopes": [1]}}}}"#,
        Path::new("mcp.json"),
        &|_: &str| None,
    )
    .unwrap();
    let problems: Vec<String> = c.servers[0]
        .unavailable
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        problems,
        [
            "mcp.json: mcpServers.r.oauth.redirectPort: 70000 is not a port; use a whole number from 1 to 65535, or leave it out for any free port",
            "mcp.json: mcpServers.r.oauth.callbackPath: \"callback\" is not a URL path; use one like \"/callback\"",
            "mcp.json: mcpServers.r.oauth.scopes[0]: 1 is not a scope; use a string without spaces",
        ]
    );
    assert!(
        c.warnings.contains(&"mcp.json: mcpServers.r.oauth.clientID: unknown key (ignored); did you mean `clientId`?".to_string()),
        "{:?}",
        c.warnings
    );
    assert!(
        c.warnings.iter().any(|w| w.starts_with(
            "mcp.json: mcpServers.r.oauth.clientSecret: a secret written into the config file"
        )),
        "{:?}",
        c.warnings
    );
}

#[test]
fn url_errors_never_show_credentials() {
    let errs = problems(
        r#"{"mcpServers": {"a": {"url": "ftp://user:pw@host/x?token=abc"},
                           "b": {"url": "http://"},
                           "c": {"url": "https://${TOKEN_X}@host/mcp"}}}"#,
    );
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert_eq!(
        errs[0],
        "mcp.json: mcpServers.a.url: \"ftp://host/x?token=…\" is not an http:// or https:// URL; give the server's full URL"
    );
    assert!(
        errs[1].starts_with("mcp.json: mcpServers.b.url: \"http://\" is not a valid URL"),
        "{}",
        errs[1]
    );
    assert!(
        errs[2].starts_with("mcp.json: mcpServers.c.url: ${TOKEN_X} is not set"),
        "{}",
        errs[2]
    );
    for e in &errs {
        assert!(!e.contains("pw") && !e.contains("abc"), "{e}");
    }
}

#[test]
fn remote_keys_on_a_stdio_server_are_ignored_with_a_warning() {
    let c = parse(
        r#"{"mcpServers": {"s": {"command": "/bin/sh", "headers": {"A": "b"}, "oauth": {}, "disabled": true}}}"#,
        Path::new("mcp.json"),
        &|_: &str| None,
    )
    .unwrap();
    assert_eq!(
        c.warnings,
        [
            "mcp.json: mcpServers.s.headers: ignored for a stdio server",
            "mcp.json: mcpServers.s.oauth: ignored for a stdio server"
        ]
    );
}

#[test]
fn a_disabled_remote_server_may_use_unset_variables() {
    let c = load(
        r#"{"mcpServers": {"r": {"url": "https://${HOST}/mcp", "headers": {"A": "${TOK}"}, "disabled": true}}}"#,
        &[],
    )
    .unwrap();
    let Transport::Http { url, headers, .. } = &c.servers[0].transport else {
        unreachable!()
    };
    assert_eq!(url, "https://${HOST}/mcp");
    assert_eq!(headers, &[("A".to_string(), "${TOK}".to_string())]);
}

#[test]
fn display_url_hides_credentials() {
    assert_eq!(
        display_url("https://user:pw@mcp.example.com/mcp?key=s3cret&x=1#frag"),
        "https://mcp.example.com/mcp?key=…&x=…"
    );
    assert_eq!(
        display_url("http://127.0.0.1:8080/sse"),
        "http://127.0.0.1:8080/sse"
    );
    assert_eq!(display_url("https://tok@host/x?k=v"), "https://host/x?k=…");
    assert_eq!(display_url("ftp://x"), "ftp://x");
    assert_eq!(display_url("https://h/p?"), "https://h/p");
}

#[test]
fn remote_servers_pick_their_protocol_era() {
    let c = load(
        r#"{"mcpServers": {"plain": {"url": "http://127.0.0.1:9/mcp"},
                           "probed": {"url": "http://127.0.0.1:9/mcp", "protocol": "auto"},
                           "modern": {"url": "http://127.0.0.1:9/mcp", "protocol": "2026-07-28"}}}"#,
        &[],
    )
    .unwrap();
    let eras: Vec<(&str, &str)> = c
        .servers
        .iter()
        .map(|s| (s.name.as_str(), s.protocol.label()))
        .collect();
    assert_eq!(
        eras,
        [
            ("plain", "legacy"),
            ("probed", "auto"),
            ("modern", "2026-07-28")
        ]
    );
    let errs = problems(
        r#"{"mcpServers": {"r": {"url": "http://127.0.0.1:9/mcp", "protocol": "modern"}}}"#,
    );
    assert!(
        errs[0].contains("mcpServers.r.protocol: \"modern\" is not a protocol; use \"legacy\", \"auto\" or \"2026-07-28\""),
        "{errs:?}"
    );
}
