//! Hub settings: protocol, time limits, paging, restarts.

use super::*;

#[test]
fn protocol_and_timeouts() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {
            "a": {"command": "/bin/sh", "protocol": "auto", "timeout": 10},
            "b": {"command": "/bin/sh", "protocol": "2026-07-28", "timeout": "500ms"},
            "c": {"command": "/bin/sh", "protocol": "legacy", "timeout": "2m"},
            "d": {"command": "/bin/sh", "timeout": 60000}
        }}"#,
        &[],
    );
    let got: Vec<(Protocol, std::time::Duration)> =
        c.servers.iter().map(|s| (s.protocol, s.timeout)).collect();
    assert_eq!(
        got,
        [
            (Protocol::Auto, Duration::from_secs(10)),
            (Protocol::Stateless, Duration::from_millis(500)),
            (Protocol::Handshake, Duration::from_secs(120)),
            (Protocol::Handshake, Duration::from_secs(60000)),
        ]
    );
    assert_eq!(c.warnings.len(), 1);
    assert!(
        c.warnings[0].ends_with("mcpServers.d.timeout: 60000 is read as seconds (about 16.7 hours); if you meant milliseconds, write \"60000ms\""),
        "{}",
        c.warnings[0]
    );

    let errs = f.err_short(
        r#"{"mcpServers": {
            "a": {"command": "/bin/sh", "protocol": "2025-06-18"},
            "b": {"command": "/bin/sh", "timeout": 0},
            "c": {"command": "/bin/sh", "timeout": "soon"},
            "d": {"command": "/bin/sh", "disabled": "yes"}
        }}"#,
        &[],
    );
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(
        errs[0].contains("mcpServers.a.protocol: \"2025-06-18\" is not a protocol"),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].contains("mcpServers.b.timeout: 0 is zero"),
        "{}",
        errs[1]
    );
    assert!(
        errs[2].contains("mcpServers.c.timeout: \"soon\" is not a valid duration"),
        "{}",
        errs[2]
    );
    assert!(
        errs[3].contains("mcpServers.d.disabled: \"yes\" is not a boolean"),
        "{}",
        errs[3]
    );
}

#[test]
fn hub_settings() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"openpact": {"toolNames": "portable", "maxMessageSize": "512KiB", "pageSize": 7, "listWait": "250ms"}}"#,
        &[],
    );
    assert_eq!(
        c.hub,
        HubSettings {
            tool_names: ToolNames::Portable,
            max_message_size: 512 * 1024,
            page_size: 7,
            list_wait: Duration::from_millis(250),
            restart: RestartPolicy::default(),
            policy: PolicySettings::default(),
            builtins: BuiltinsSettings::defaults(f.dir.path()),
            http: crate::config::HttpSettings::default(),
            sandbox: Default::default(),
            tool_search: Default::default(),
            code_mode: Default::default(),
            profiles: Vec::new(),
            reload: true,
            shared: Default::default(),
            telemetry: Default::default(),
        }
    );
    let c = f.ok(
        r#"{"openpact": {"reload": false, "shared": {"idleExit": "30s"}}}"#,
        &[],
    );
    assert!(!c.hub.reload);
    assert_eq!(c.hub.shared.idle_exit, Duration::from_secs(30));
    let e = f.err(r#"{"openpact": {"shared": {"idleExit": "soon"}}}"#, &[]);
    assert!(
        e.iter().any(|e| e.contains("openpact.shared.idleExit")),
        "{e:?}"
    );
    let c = f.ok(
        r#"{"openpact": {"maxMessageSize": 1024, "listWait": 0}}"#,
        &[],
    );
    assert_eq!(c.hub.max_message_size, 1024);
    assert_eq!(c.hub.list_wait, Duration::ZERO);
    let c = f.ok(r#"{"openpact": {"maxMessageSize": "1MB"}}"#, &[]);
    assert_eq!(c.hub.max_message_size, 1_000_000);

    let errs = f.err_short(
        r#"{"openpact": {"toolNames": "short", "maxMessageSize": "1000B", "pageSize": 0, "listWait": "forever"}}"#,
        &[],
    );
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(
        errs[0].starts_with("mcp.json: openpact.toolNames: \"short\" is not a tool naming"),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].starts_with("mcp.json: openpact.maxMessageSize: \"1000B\" is below the minimum"),
        "{}",
        errs[1]
    );
    assert!(
        errs[2].starts_with("mcp.json: openpact.pageSize: 0 is not a valid page size"),
        "{}",
        errs[2]
    );
    assert!(
        errs[3].starts_with("mcp.json: openpact.listWait:"),
        "{}",
        errs[3]
    );
}

#[test]
fn restart_policy_is_configurable_and_checked() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"openpact": {"restart": {"initialBackoff": "100ms", "maxBackoff": "2s", "maxCrashes": 3, "window": "10s"}}}"#,
        &[],
    );
    assert_eq!(c.hub.restart.initial_backoff, Duration::from_millis(100));
    assert_eq!(c.hub.restart.max_backoff, Duration::from_secs(2));
    assert_eq!(c.hub.restart.max_crashes, 3);
    assert_eq!(c.hub.restart.window, Duration::from_secs(10));
    let errs = f.err_short(r#"{"openpact": {"restart": {"maxCrashes": 0}}}"#, &[]);
    assert!(errs[0].contains("openpact.restart.maxCrashes"), "{errs:?}");
    let c = f.loose(r#"{"openpact": {"restart": {"maxCrash": 2}}}"#, &[]);
    assert!(c.warnings[0].contains("did you mean"), "{:?}", c.warnings);
    // `config check` (strict) fails on it.
    let errs = f.err_short(r#"{"openpact": {"restart": {"maxCrash": 2}}}"#, &[]);
    assert!(
        errs[0].contains(
            "openpact.restart.maxCrash: unknown key (ignored); did you mean `maxCrashes`?"
        ),
        "{errs:?}"
    );
}

#[test]
fn sandbox_settings_are_read_with_their_profile() {
    use crate::config::sandbox::{NetworkSpec, SandboxSpec};
    let f = Fixture::new();
    // A granted path outside the home folder must exist (tested end to end in tests/sandbox.rs).
    std::fs::create_dir_all(f.dir.path().join("data")).unwrap();
    let c = f.ok(
        r#"{"openpact": {"sandbox": {"default": "off", "required": true,
            "profile": {"env": ["LANG", "NODE_*"], "network": false, "filesystem": {"read": ["data"]},
                "unixSockets": ["~/.gnupg/S.gpg-agent", "${XDG_RUNTIME_DIR}/bus"]}}}}"#,
        &[("XDG_RUNTIME_DIR", "/run/user/7")],
    );
    let s = &c.hub.sandbox;
    assert!(!s.default_on && s.required);
    assert_eq!(
        s.profile,
        SandboxSpec {
            read: vec![f.dir.path().join("data")],
            env: vec!["LANG".into(), "NODE_*".into()],
            network: Some(NetworkSpec::None),
            // Expanded like the filesystem's paths; need not exist yet.
            unix_sockets: vec![
                "/home/u/.gnupg/S.gpg-agent".into(),
                "/run/user/7/bus".into()
            ],
            ..SandboxSpec::default()
        }
    );
    let e = f.err(
        r#"{"openpact": {"sandbox": {"default": "maybe", "requird": true, "profile": {"env": ["A B"]}}}}"#,
        &[],
    )
    .join("\n");
    assert!(
        e.contains("openpact.sandbox.default") && e.contains("\"on\" or \"off\""),
        "{e}"
    );
    assert!(e.contains("openpact.sandbox.profile.env[0]"), "{e}");
}

#[test]
fn known_is_a_boolean_on_either_profile() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {"a": {"command": "/bin/sh", "sandbox": {"known": true}}},
            "openpact": {"sandbox": {"profile": {"known": false}}}}"#,
        &[],
    );
    assert_eq!(c.hub.sandbox.profile.known, Some(false));
    let e = f
        .err(
            r#"{"mcpServers": {"a": {"command": "/bin/sh", "sandbox": {"known": "no"}}}}"#,
            &[],
        )
        .join("\n");
    assert!(
        e.contains("mcpServers.a.sandbox.known") && e.contains("use false"),
        "{e}"
    );
}

#[test]
fn tool_search_and_profiles_are_read_with_profiles_inheriting_the_search() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {"fs": {"command": "tool"}, "github": {"command": "tool"}},
            "openpact": {
              "profiles": {
                "coding": {"servers": ["fs", "github"], "tools": ["!github:delete_*"]},
                "research": {"servers": ["fs"], "builtins": false, "toolSearch": {"mode": "on"}}
              },
              "toolSearch": {"mode": "auto", "threshold": 20, "alwaysLoad": ["fs:read_*"], "limit": 5}
            }}"#,
        &[],
    );
    let search = &c.hub.tool_search;
    assert_eq!(search.mode, crate::config::SearchMode::Auto);
    assert_eq!((search.threshold, search.limit), (20, 5));
    assert!(search.always_load.matches("fs:read_text_file"));
    assert!(!search.active(20) && search.active(21));
    let [coding, research] = &c.hub.profiles[..] else {
        panic!("two profiles expected: {:?}", c.hub.profiles)
    };
    assert_eq!(coding.name, "coding");
    assert!(coding.has_server("github") && !research.has_server("github"));
    assert!(coding.tools.allows("github:create_issue"));
    assert!(!coding.tools.allows("github:delete_repo"));
    assert!(coding.builtins && !research.builtins);
    // A profile's own toolSearch starts from the hub's, whatever the key order.
    assert_eq!(coding.tool_search, *search);
    assert_eq!(research.tool_search.mode, crate::config::SearchMode::On);
    assert_eq!(research.tool_search.threshold, 20);
}

#[test]
fn code_mode_is_read_checked_and_inherited_by_profiles() {
    use crate::config::{CodeMode, CodeModeSwitch};
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {"fs": {"command": "tool"}},
            "openpact": {
              "profiles": {"plain": {"servers": ["fs"]},
                           "coder": {"codeMode": {"mode": "on", "maxCalls": 20}}},
              "codeMode": {"mode": "auto", "timeout": "90s", "memory": "256MiB", "parallel": 4,
                           "maxOutput": 5000, "keepValues": 3, "keepBytes": "1MiB"}
            }}"#,
        &[],
    );
    let code = &c.hub.code_mode;
    assert_eq!(code.mode, CodeModeSwitch::Auto);
    assert_eq!(code.timeout, Duration::from_secs(90));
    assert_eq!(
        (code.memory, code.parallel, code.max_output),
        (256 << 20, 4, 5000)
    );
    assert_eq!((code.keep_values, code.keep_bytes), (3, 1 << 20));
    assert_eq!(code.max_calls, CodeMode::DEFAULT_MAX_CALLS);
    // Auto follows tool search; a profile starts from the hub's settings.
    assert!(code.active(true) && !code.active(false));
    let [plain, coder] = &c.hub.profiles[..] else {
        panic!("two profiles")
    };
    assert_eq!(plain.code_mode, *code);
    assert_eq!(coder.code_mode.mode, CodeModeSwitch::On);
    assert_eq!(
        (coder.code_mode.max_calls, coder.code_mode.parallel),
        (20, 4)
    );
    assert_eq!(
        CodeMode::default().mode,
        CodeModeSwitch::Off,
        "off until asked for"
    );
    let all = f
        .err_short(
            r#"{"openpact": {"codeMode": {"mode": "maybe", "memory": "1MiB", "timeout": "0s",
                                          "parallel": 0}}}"#,
            &[],
        )
        .join("\n");
    for want in [
        "openpact.codeMode.mode",
        "use \"on\", \"off\" or \"auto\"",
        "openpact.codeMode.memory: \"1MiB\" is too little",
        "openpact.codeMode.timeout",
        "openpact.codeMode.parallel",
    ] {
        assert!(all.contains(want), "{want} in {all}");
    }
}

#[test]
fn a_profile_naming_an_unknown_server_is_an_error_at_its_json_path() {
    let f = Fixture::new();
    let problems = f.err_short(
        r#"{"mcpServers": {"github": {"command": "tool"}},
            "openpact": {"profiles": {"coding": {"servers": ["github", "githb"]},
                                      "bad name": {}},
                         "toolSearch": {"mode": "sometimes", "limit": 500}}}"#,
        &[],
    );
    let all = problems.join("\n");
    assert!(
        all.contains(r#"mcp.json: openpact.profiles.coding.servers[1]: "githb" is not a configured server; did you mean "github"?"#),
        "{all}"
    );
    assert!(all.contains("not a profile name"), "{all}");
    assert!(all.contains("openpact.toolSearch.mode"), "{all}");
    assert!(all.contains("openpact.toolSearch.limit"), "{all}");
}

/// `openpact.http.token`: a token that cannot be had is `Missing` (the HTTP face refuses),
/// never no token; it is no warning either, since only `serve --http` needs it. `false` is
/// the one way to say "no token" on purpose.
#[test]
fn http_token_forms() {
    use crate::config::HttpToken;
    let f = Fixture::new();
    let token = |value: &str, env: &[(&str, &str)]| {
        let c = f.ok(
            &format!(r#"{{"mcpServers": {{}}, "openpact": {{"http": {{"token": {value}}}}}}}"#),
            env,
        );
        assert!(c.warnings.is_empty(), "{value}: {:?}", c.warnings);
        c.hub.http.token
    };
    let missing = |value: &str, env: &[(&str, &str)]| match token(value, env) {
        HttpToken::Missing { why, variable } => (
            why.replacen(&f.file().display().to_string(), "mcp.json", 1),
            variable,
        ),
        other => panic!("{value}: {other:?}"),
    };
    assert_eq!(
        token(r#""${T}""#, &[("T", "s3cret")]),
        HttpToken::Bearer("s3cret".into())
    );
    assert_eq!(token("false", &[]), HttpToken::Off);
    assert_eq!(token("null", &[]), HttpToken::None);
    let x = Some("T".to_string());
    assert_eq!(
        missing(r#""${T}""#, &[]),
        (
            "mcp.json: openpact.http.token: ${T} is not set".into(),
            x.clone()
        )
    );
    for (value, env) in [(r#""${T:-}""#, &[][..]), (r#""${env:T}""#, &[("T", "")])] {
        let (why, variable) = missing(value, env);
        assert!(why.contains("is empty (its variable is unset or empty), and an empty token would let every request in"), "{why}");
        assert_eq!(variable, x);
    }
    assert_eq!(
        missing(r#""""#, &[]),
        ("mcp.json: openpact.http.token: is empty, and an empty token would let every request in".into(), None)
    );
    for bad in ["true", "1"] {
        let errs = f.err_short(
            &format!(r#"{{"mcpServers": {{}}, "openpact": {{"http": {{"token": {bad}}}}}}}"#),
            &[],
        );
        assert_eq!(
            errs,
            [format!(
                "mcp.json: openpact.http.token: {bad} is not a token; write \"${{OPENPACT_HTTP_TOKEN}}\" (the variable holding it), or false to serve without one"
            )]
        );
    }
}

/// `openpact.telemetry`: the collector's base URL, a service name and the arguments opt-in;
/// a bad URL and a misspelt key are named with what to write; a server entry may keep the
/// trace context out of its requests.
#[test]
fn telemetry_settings() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"openpact": {"telemetry": {"otlp": "http://127.0.0.1:4318/", "serviceName": "hub", "arguments": true}}}"#,
        &[],
    );
    assert_eq!(
        c.hub.telemetry,
        crate::config::TelemetrySettings {
            otlp: Some("http://127.0.0.1:4318".into()),
            service_name: Some("hub".into()),
            arguments: true,
        }
    );
    let e = f.err(
        r#"{"openpact": {"telemetry": {"otlp": "127.0.0.1:4318"}}}"#,
        &[],
    );
    assert!(
        e.iter()
            .any(|e| e.contains("openpact.telemetry.otlp") && e.contains("http://127.0.0.1:4318")),
        "{e:?}"
    );
    let e = f.err(r#"{"openpact": {"telemetry": {"servicename": "x"}}}"#, &[]);
    assert!(
        e.iter().any(|w| w.contains("did you mean `serviceName`")),
        "{e:?}"
    );
    let c = f.ok(
        r#"{"mcpServers": {"a": {"command": "tool", "telemetry": false}, "b": {"command": "tool"}}}"#,
        &[],
    );
    assert!(!c.servers[0].telemetry);
    assert!(c.servers[1].telemetry);
}
