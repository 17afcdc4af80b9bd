//! `${VAR}` expansion: its forms, the fields it applies to, and its errors.

use super::*;

#[cfg(unix)]
#[test]
fn every_expansion_form_in_every_expanded_field() {
    let f = Fixture::new();
    std::fs::create_dir(f.dir.path().join("work-x")).unwrap();
    let text = r#"{"mcpServers": {"t": {
        "command": "${TOOL}",
        "args": ["${A}", "${env:B}", "${U:-dflt}", "${env:U:-d2}", "${E:-empty}", "$$A", "lone $ sign", "${A}$$${A}"],
        "env": {"TOKEN": "${SECRET}", "PLAIN": "x", "BOTH": "${A}-${env:B}"},
        "cwd": "work-${A}"
    }}}"#;
    let c = f.ok(
        text,
        &[
            ("TOOL", "tool"),
            ("A", "x"),
            ("B", "y"),
            ("E", ""),
            ("SECRET", "s3cr3t"),
        ],
    );
    let (command, _, args, env, cwd, injected) = stdio(&c.servers[0]);
    assert_eq!(command, "tool");
    assert_eq!(
        args,
        ["x", "y", "dflt", "d2", "empty", "$A", "lone $ sign", "x$x"]
    );
    assert_eq!(
        env,
        [
            ("TOKEN".to_string(), "s3cr3t".to_string()),
            ("PLAIN".to_string(), "x".to_string()),
            ("BOTH".to_string(), "x-y".to_string()),
        ]
    );
    assert_eq!(cwd, Some(f.dir.path().join("work-x").as_path()));
    assert_eq!(
        injected,
        [
            ("SECRET".to_string(), "s3cr3t".to_string()),
            ("A".to_string(), "x".to_string()),
            ("B".to_string(), "y".to_string()),
        ]
    );
}

#[test]
fn remote_url_and_headers_are_expanded() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"servers": {"r": {"type": "sse", "url": "https://${HOST}/mcp", "headers": {"Authorization": "Bearer ${TOK}"}}},
            "mcpServers": {"h": {"url": "http://localhost:1"}}}"#,
        &[("HOST", "example.com"), ("TOK", "t0k")],
    );
    // mcpServers come first even when written second.
    assert_eq!(c.servers[0].name, "h");
    assert_eq!(
        c.servers[0].transport,
        Transport::Http {
            url: "http://localhost:1".into(),
            headers: vec![],
            kind: "http".into(),
            oauth: Default::default(),
        }
    );
    assert_eq!(
        c.servers[1].transport,
        Transport::Http {
            url: "https://example.com/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer t0k".into())],
            kind: "sse".into(),
            oauth: Default::default(),
        }
    );
}

#[test]
fn expansion_applies_nowhere_else() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {"${X}": {"command": "/bin/sh", "namespace": "${X}", "disabled": true}}}"#,
        &[("X", "expanded")],
    );
    assert_eq!(c.servers[0].name, "${X}");
    assert_eq!(c.servers[0].prefix(), "${X}");
}

#[test]
fn unset_variable_error_text() {
    let f = Fixture::new();
    let text =
        r#"{"mcpServers": {"github": {"command": "tool", "args": ["a", "b", "${GITHUB_TOKEN}"]}}}"#;
    let problems = parse(text, Path::new("mcp.json"), &env_of(&[("PATH", &f.bin())]))
        .and_then(Config::strict)
        .unwrap_err()
        .problems;
    assert_eq!(problems.len(), 1);
    assert_eq!(
        problems[0].to_string(),
        "mcp.json: mcpServers.github.args[2]: ${GITHUB_TOKEN} is not set; export it or use ${GITHUB_TOKEN:-}"
    );
    assert_eq!(problems[0].file, "mcp.json");
    assert_eq!(problems[0].path, "mcpServers.github.args[2]");
}

#[test]
fn input_variables_and_unterminated_references_are_errors() {
    let f = Fixture::new();
    let errs = f.err_short(
        r#"{"servers": {"v": {"type": "stdio", "command": "tool", "env": {"K": "${input:api-key}", "L": "${OPEN"}}}}"#,
        &[],
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].starts_with(
            "mcp.json: servers.v.env.K: ${input:api-key}: input variables are not supported"
        ),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].starts_with("mcp.json: servers.v.env.L: unterminated `${`"),
        "{}",
        errs[1]
    );
}

/// A secret expanded into `args` is on a command line every process of the user can read:
/// warned about with the way to pass it instead, and redacted like one given in `env`. A
/// plain variable in `args` is neither.
#[test]
fn a_secret_expanded_into_args_is_warned_about_and_redacted() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {"remote": {"command": "tool", "args": ["--header", "Authorization: Bearer ${API_TOKEN}", "--dir", "${WORK}"]}}}"#,
        &[("API_TOKEN", "tok-5e3a9c"), ("WORK", "/w")],
    );
    let warned: Vec<&String> = c
        .warnings
        .iter()
        .filter(|w| w.contains("command line"))
        .collect();
    assert_eq!(warned.len(), 1, "{:#?}", c.warnings);
    assert!(
        warned[0]
            .contains("mcpServers.remote.args[1]: puts ${API_TOKEN}, which looks like a secret")
            && warned[0].contains("pass it in \"env\""),
        "{warned:?}"
    );
    let (_, _, _, _, _, injected) = stdio(&c.servers[0]);
    assert_eq!(
        injected,
        [("API_TOKEN".to_string(), "tok-5e3a9c".to_string())]
    );
}
