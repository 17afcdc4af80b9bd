//! End-to-end tests of config parsing: text in, `Config` or every problem out.

use super::*;
use std::collections::HashMap;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

#[cfg(unix)]
fn executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A temp dir holding `bin/tool` (executable) and `mcp.json`, with an env whose PATH is `bin`.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        #[cfg(unix)]
        executable(&dir.path().join("bin/tool"));
        Self { dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("mcp.json")
    }

    fn bin(&self) -> String {
        self.dir.path().join("bin").to_str().unwrap().to_string()
    }

    fn parse(&self, text: &str, extra: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let bin = self.bin();
        let mut pairs = vec![("PATH", bin.as_str()), ("HOME", "/home/u")];
        pairs.extend_from_slice(extra);
        parse(text, &self.file(), &env_of(&pairs)).and_then(Config::strict)
    }

    fn ok(&self, text: &str, extra: &[(&str, &str)]) -> Config {
        match self.parse(text, extra) {
            Ok(c) => c,
            Err(e) => panic!("expected a valid config, got:\n{e}"),
        }
    }

    fn err(&self, text: &str, extra: &[(&str, &str)]) -> Vec<String> {
        match self.parse(text, extra) {
            Ok(c) => panic!("expected errors, got {c:#?}"),
            Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// Problems with the temp dir's `mcp.json` path shortened to `mcp.json`.
    fn err_short(&self, text: &str, extra: &[(&str, &str)]) -> Vec<String> {
        let long = self.file().display().to_string();
        self.err(text, extra)
            .into_iter()
            .map(|p| p.replacen(&long, "mcp.json", 1))
            .collect()
    }
}

type Pairs = [(String, String)];

/// (command, program, args, env, cwd, injected) of a stdio server.
fn stdio(server: &ServerConfig) -> (&str, &Path, &[String], &Pairs, Option<&Path>, &Pairs) {
    match &server.transport {
        Transport::Stdio {
            command,
            program,
            args,
            env,
            cwd,
            injected,
        } => (command, program, args, env, cwd.as_deref(), injected),
        other => panic!("expected stdio, got {other:?}"),
    }
}

#[cfg(unix)]
#[test]
fn minimal_server_with_defaults() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {"t": {"command": "tool", "args": ["a", "b"]}}}"#,
        &[],
    );
    assert_eq!(c.source, Some(f.file()));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(
        c.hub,
        HubSettings {
            builtins: BuiltinsSettings::defaults(f.dir.path()),
            ..HubSettings::default()
        }
    );
    assert_eq!(c.servers.len(), 1);
    let s = &c.servers[0];
    assert_eq!(s.name, "t");
    assert_eq!(s.prefix(), "t");
    assert_eq!(s.timeout, DEFAULT_TIMEOUT);
    assert_eq!(s.protocol, Protocol::Legacy);
    assert!(!s.disabled);
    let (command, program, args, env, cwd, injected) = stdio(s);
    assert_eq!(command, "tool");
    assert_eq!(program, f.dir.path().join("bin/tool"));
    assert_eq!(args, ["a", "b"]);
    assert!(env.is_empty() && cwd.is_none() && injected.is_empty());
}

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

#[test]
fn tilde_in_command_and_cwd() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {"t": {"command": "~/bin/srv", "cwd": "~/work", "args": ["~/not-expanded"], "disabled": true}}}"#,
        &[],
    );
    let (command, program, args, _, cwd, _) = stdio(&c.servers[0]);
    assert_eq!(command, "/home/u/bin/srv");
    assert_eq!(program, Path::new("/home/u/bin/srv"));
    assert_eq!(args, ["~/not-expanded"]);
    assert_eq!(cwd, Some(Path::new("/home/u/work")));
}

#[test]
fn disabled_server_is_kept_unresolved() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {"off": {"command": "no-such-program-anywhere", "args": ["${MISSING}"], "cwd": "gone", "disabled": true}}}"#,
        &[],
    );
    let s = &c.servers[0];
    assert!(s.disabled);
    let (command, program, args, _, cwd, _) = stdio(s);
    assert_eq!(program, Path::new(command));
    assert_eq!(args, ["${MISSING}"]);
    assert_eq!(cwd, Some(f.dir.path().join("gone").as_path()));
}

#[cfg(unix)]
#[test]
fn command_found_on_the_servers_own_path() {
    let f = Fixture::new();
    let custom = f.dir.path().join("custom");
    executable(&custom.join("only-here"));
    let text = format!(
        r#"{{"mcpServers": {{"c": {{"command": "only-here", "env": {{"PATH": "{}:${{PATH}}"}}}}}}}}"#,
        custom.display()
    );
    let c = f.ok(&text, &[]);
    let (_, program, _, env, _, _) = stdio(&c.servers[0]);
    assert_eq!(program, custom.join("only-here"));
    assert_eq!(env[0].1, format!("{}:{}", custom.display(), f.bin()));
    // Without the override it is not found, and the message lists the PATH searched.
    let errs = f.err(r#"{"mcpServers": {"c": {"command": "only-here"}}}"#, &[]);
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].ends_with(&format!(
            "mcpServers.c.command: `only-here` was not found on PATH ({}); install it or give its full path",
            f.bin()
        )),
        "{}",
        errs[0]
    );
}

#[test]
fn command_not_found_lists_path() {
    let problems = parse(
        r#"{"mcpServers": {"fs": {"command": "npx-surely-missing"}}}"#,
        Path::new("mcp.json"),
        &env_of(&[("PATH", "/nonexistent/a:/nonexistent/b")]),
    )
    .and_then(Config::strict)
    .unwrap_err()
    .problems;
    assert_eq!(
        problems[0].to_string(),
        "mcp.json: mcpServers.fs.command: `npx-surely-missing` was not found on PATH (/nonexistent/a:/nonexistent/b); install it or give its full path"
    );
}

#[cfg(unix)]
#[test]
fn relative_command_and_cwd() {
    let f = Fixture::new();
    executable(&f.dir.path().join("srv/run.sh"));
    // The command is relative to cwd, and cwd to the config file's directory.
    let c = f.ok(
        r#"{"mcpServers": {"r": {"command": "./run.sh", "cwd": "srv"}}}"#,
        &[],
    );
    let (_, program, _, _, cwd, _) = stdio(&c.servers[0]);
    assert_eq!(cwd, Some(f.dir.path().join("srv").as_path()));
    assert_eq!(program, f.dir.path().join("srv/run.sh"));
    // Without cwd, relative to the config file's directory.
    let c = f.ok(r#"{"mcpServers": {"r": {"command": "srv/run.sh"}}}"#, &[]);
    assert_eq!(stdio(&c.servers[0]).1, f.dir.path().join("srv/run.sh"));

    let errs = f.err_short(
        r#"{"mcpServers": {"a": {"command": "tool", "cwd": "missing"}, "b": {"command": "./nope.sh"}}}"#,
        &[],
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].starts_with("mcp.json: mcpServers.a.cwd: directory ")
            && errs[0].contains("does not exist"),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].starts_with("mcp.json: mcpServers.b.command: `./nope.sh` does not exist"),
        "{}",
        errs[1]
    );
}

#[test]
fn namespace_collisions_name_both_servers() {
    let f = Fixture::new();
    let errs = f.err_short(
        r#"{"mcpServers": {
            "a": {"command": "/bin/sh", "namespace": "", "disabled": false},
            "b": {"command": "/bin/sh", "namespace": ""},
            "c": {"command": "/bin/sh", "namespace": "d"},
            "d": {"command": "/bin/sh"},
            "e": {"command": "/bin/sh", "namespace": "d", "disabled": true}
        }}"#,
        &[],
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(
        errs[0],
        "mcp.json: mcpServers.b: server \"b\" and server \"a\" (mcpServers.a) both have no tool-name prefix (namespace \"\"); set a distinct `namespace` on one of them"
    );
    assert_eq!(
        errs[1],
        "mcp.json: mcpServers.d: server \"d\" and server \"c\" (mcpServers.c) both use the tool-name prefix \"d\"; set a distinct `namespace` on one of them"
    );
}

#[test]
fn namespace_gives_the_prefix() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{"mcpServers": {"a": {"command": "/bin/sh", "namespace": "x"}, "b": {"command": "/bin/sh", "namespace": ""}}}"#,
        &[],
    );
    assert_eq!(c.servers[0].prefix(), "x");
    assert_eq!(c.servers[0].namespace.as_deref(), Some("x"));
    assert_eq!(c.servers[1].prefix(), "");
}

#[test]
fn bad_server_names() {
    let f = Fixture::new();
    let errs = f.err_short(
        r#"{"mcpServers": {"a:b": {"command": "/bin/sh"}, "a b": {"command": "/bin/sh"}, "": {"command": "/bin/sh"}, "ok": {"command": "/bin/sh", "namespace": "x:y"}}}"#,
        &[],
    );
    assert_eq!(errs.len(), 4, "{errs:?}");
    assert!(
        errs[0].starts_with("mcp.json: mcpServers[\"a:b\"]: server name \"a:b\" contains `:`"),
        "{}",
        errs[0]
    );
    assert!(errs[0].contains("\"a-b\""));
    assert!(
        errs[1]
            .starts_with("mcp.json: mcpServers[\"a b\"]: server name \"a b\" contains whitespace"),
        "{}",
        errs[1]
    );
    assert!(
        errs[2].starts_with("mcp.json: mcpServers[\"\"]: server name is empty"),
        "{}",
        errs[2]
    );
    assert!(
        errs[3].starts_with("mcp.json: mcpServers.ok.namespace: namespace \"x:y\" contains `:`"),
        "{}",
        errs[3]
    );
}

#[test]
fn unknown_keys_warn_with_suggestions() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{
            "$schema": "x", "inputs": [],
            "toolNames": "portable",
            "mcpservers": {},
            "whatever": 1,
            "openpact": {"pagesize": 3, "permissions": {}, "cache": {}, "audit": null, "rateLimit": {}},
            "mcpServers": {"t": {"command": "/bin/sh", "comand": "x", "ARGS": [], "envFile": ".env", "zzzzzz": 0}}
        }"#,
        &[],
    );
    let short: Vec<String> = c
        .warnings
        .iter()
        .map(|w| w.replacen(&f.file().display().to_string(), "mcp.json", 1))
        .collect();
    assert_eq!(
        short,
        [
            "mcp.json: toolNames: unknown key (ignored); did you mean `openpact.toolNames`?",
            "mcp.json: mcpservers: unknown key (ignored); did you mean `mcpServers`?",
            "mcp.json: whatever: unknown key (ignored)",
            "mcp.json: openpact.pagesize: unknown key (ignored); did you mean `pageSize`?",
            "mcp.json: openpact.rateLimit: unknown key (ignored); did you mean `rateLimits`?",
            "mcp.json: mcpServers.t.comand: unknown key (ignored); did you mean `command`?",
            "mcp.json: mcpServers.t.ARGS: unknown key (ignored); did you mean `args`?",
            "mcp.json: mcpServers.t.envFile: envFile is not supported (ignored); put the variables in `env`",
            "mcp.json: mcpServers.t.zzzzzz: unknown key (ignored)",
        ]
    );
    // The misspelt top-level key does not take effect.
    assert_eq!(c.hub.tool_names, ToolNames::Qualified);
}

#[test]
fn misspelt_command_is_pointed_out_in_the_error() {
    let f = Fixture::new();
    let errs = f.err_short(r#"{"mcpServers": {"t": {"comand": "x"}}}"#, &[]);
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with("mcp.json: mcpServers.t: has no `command`"),
        "{}",
        errs[0]
    );
    assert!(errs[0].contains("`comand`"), "{}", errs[0]);
}

#[test]
fn vscode_servers_shape() {
    let f = Fixture::new();
    let c = f.ok(
        r#"{
            // VS Code's mcp.json is JSONC.
            "inputs": [{"type": "promptString", "id": "k"}],
            "servers": {
                "fs": {"type": "stdio", "command": "/bin/sh", "args": ["-c", "true"],},
            },
        }"#,
        &[],
    );
    assert_eq!(c.servers.len(), 1);
    assert_eq!(c.servers[0].name, "fs");
    assert_eq!(stdio(&c.servers[0]).2, ["-c", "true"]);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

#[test]
fn duplicate_names_across_shapes() {
    let f = Fixture::new();
    let errs = f.err_short(
        r#"{"mcpServers": {"gh": {"command": "/bin/sh"}}, "servers": {"gh": {"type": "stdio", "command": "/bin/sh"}}}"#,
        &[],
    );
    assert_eq!(
        errs,
        [
            "mcp.json: servers.gh: server \"gh\" is already defined at mcpServers.gh; rename or remove one of them"
        ]
    );
}

#[test]
fn types_and_transport_shapes() {
    let f = Fixture::new();
    let errs = f.err_short(
        r#"{"mcpServers": {
            "a": {"type": "stdoi", "command": "/bin/sh"},
            "b": {"type": "http"},
            "c": {"command": "/bin/sh", "url": "http://x"},
            "d": {},
            "e": {"type": "stdio", "url": "http://x"},
            "f": {"url": "ftp://x"},
            "g": "npx foo",
            "h": {"command": "/bin/sh", "args": "-y foo"},
            "i": {"command": "/bin/sh", "env": {"N": 1}}
        }}"#,
        &[],
    );
    assert_eq!(errs.len(), 9, "{errs:#?}");
    assert!(
        errs[0].contains("mcpServers.a.type: unknown server type \"stdoi\"")
            && errs[0].contains("did you mean \"stdio\""),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].contains("mcpServers.b: \"type\": \"http\" needs a `url`"),
        "{}",
        errs[1]
    );
    assert!(
        errs[2].contains("mcpServers.c: has both `command` and `url`"),
        "{}",
        errs[2]
    );
    assert!(
        errs[3].contains("mcpServers.d: has no `command`"),
        "{}",
        errs[3]
    );
    assert!(
        errs[4].contains("mcpServers.e: \"type\": \"stdio\" needs a `command`"),
        "{}",
        errs[4]
    );
    assert!(
        errs[5].contains("mcpServers.f.url: \"ftp://x\" is not an http:// or https:// URL"),
        "{}",
        errs[5]
    );
    assert!(
        errs[6].contains("mcpServers.g: the server entry is a string; it must be an object"),
        "{}",
        errs[6]
    );
    assert!(
        errs[7].contains("mcpServers.h.args: is a string; it must be an array of strings"),
        "{}",
        errs[7]
    );
    assert!(
        errs[8].contains("mcpServers.i.env.N: 1 is not a string; quote it: \"1\""),
        "{}",
        errs[8]
    );
}

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
            (Protocol::Modern, Duration::from_millis(500)),
            (Protocol::Legacy, Duration::from_secs(120)),
            (Protocol::Legacy, Duration::from_secs(60000)),
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
        }
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
fn multiple_errors_are_collected_at_once() {
    let f = Fixture::new();
    let errs = f.err_short(
        r#"{
            "mcpServers": {
                "a": {"command": "/bin/sh", "args": ["${NOPE1}", "${NOPE2}"]},
                "b:c": {"command": "/bin/sh"},
                "x": {"command": "/bin/sh", "namespace": "a"}
            },
            "openpact": {"pageSize": -1}
        }"#,
        &[],
    );
    assert_eq!(
        errs,
        [
            "mcp.json: openpact.pageSize: -1 is not a valid page size; use a whole number of at least 1",
            "mcp.json: mcpServers.a.args[0]: ${NOPE1} is not set; export it or use ${NOPE1:-}",
            "mcp.json: mcpServers.a.args[1]: ${NOPE2} is not set; export it or use ${NOPE2:-}",
            "mcp.json: mcpServers[\"b:c\"]: server name \"b:c\" contains `:`, which separates server and tool in qualified tool names; rename it (e.g. \"b-c\")",
            "mcp.json: mcpServers.x: server \"x\" and server \"a\" (mcpServers.a) both use the tool-name prefix \"a\"; set a distinct `namespace` on one of them",
        ]
    );
    // The Display of the whole error is one problem per line.
    let whole = f
        .parse(r#"{"mcpServers": {"a": 1, "b": 2}}"#, &[])
        .unwrap_err()
        .to_string();
    assert_eq!(whole.lines().count(), 2);
}

#[test]
fn json_syntax_error_has_line_and_column() {
    let err = parse(
        "{\n  \"mcpServers\": {\n    \"a\": nope\n  }\n}",
        Path::new("mcp.json"),
        &env_of(&[]),
    )
    .unwrap_err();
    assert_eq!(err.problems.len(), 1);
    assert_eq!(err.problems[0].path, "3:11");
    assert_eq!(err.to_string(), "mcp.json:3:11: expected ident");
    let err = parse("", Path::new("mcp.json"), &env_of(&[])).unwrap_err();
    assert_eq!(err.to_string(), "mcp.json:1:0: EOF while parsing a value");
}

#[test]
fn top_level_must_be_an_object() {
    let err = parse("[1]", Path::new("c.json"), &env_of(&[])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "c.json: the top level is an array; it must be an object like {\"mcpServers\": {…}}"
    );
    let err = parse(r#"{"mcpServers": []}"#, Path::new("c.json"), &env_of(&[])).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("c.json: mcpServers: is an array"),
        "{err}"
    );
}

#[test]
fn embedded_text_and_empty() {
    let err = parse("{\"openpact\": 3}", Path::new(""), &env_of(&[])).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("<embedded default>: openpact: is a number"),
        "{err}"
    );
    let c = parse("{}", Path::new(""), &env_of(&[])).unwrap();
    assert_eq!(c, empty());
    assert_eq!(empty().source, None);
    assert!(empty().servers.is_empty());
}

#[test]
fn load_reads_an_explicit_file() {
    let f = Fixture::new();
    std::fs::write(f.file(), r#"{"openpact": {"pageSize": 9}}"#).unwrap();
    let c = load(Some(&f.file())).unwrap();
    assert_eq!(c.hub.page_size, 9);
    assert_eq!(c.source, Some(f.file()));
    let missing = f.dir.path().join("missing.json");
    let err = load(Some(&missing)).unwrap_err();
    assert_eq!(err.problems[0].file, missing.display().to_string());
}

#[test]
fn relative_file_gives_absolute_paths() {
    // A bare file name means "in the working directory"; children still get absolute paths.
    let c = parse(
        r#"{"mcpServers": {"t": {"command": "x", "cwd": "sub", "disabled": true}}}"#,
        Path::new("mcp.json"),
        &env_of(&[]),
    )
    .unwrap();
    let cwd = stdio(&c.servers[0]).4.unwrap();
    assert!(cwd.is_absolute(), "{}", cwd.display());
    assert_eq!(cwd, std::env::current_dir().unwrap().join("sub"));
    assert_eq!(c.source, Some(PathBuf::from("mcp.json")));
}

#[test]
fn a_broken_server_entry_does_not_stop_the_others() {
    let f = Fixture::new();
    let c = f
        .parse(
            r#"{"mcpServers": {"ok": {"command": "tool"}, "gone": {"command": "surely-missing-cmd"}, "tok": {"command": "tool", "env": {"T": "${NOPE_TOKEN}"}}}}"#,
            &[],
        )
        .err()
        .map(|e| e.problems.len());
    assert_eq!(c, Some(2), "strict parsing reports both broken servers");
    let bin = f.bin();
    let lenient = parse(
        r#"{"mcpServers": {"ok": {"command": "tool"}, "gone": {"command": "surely-missing-cmd"}, "tok": {"command": "tool", "env": {"T": "${NOPE_TOKEN}"}}}}"#,
        &f.file(),
        &env_of(&[("PATH", bin.as_str())]),
    )
    .unwrap();
    assert!(lenient.servers[0].unavailable.is_empty());
    assert!(
        lenient.servers[1].unavailable[0]
            .to_string()
            .contains("mcpServers.gone.command: `surely-missing-cmd` was not found")
    );
    assert!(
        lenient.servers[2].unavailable[0]
            .to_string()
            .contains("${NOPE_TOKEN} is not set")
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
    let c = f.ok(r#"{"openpact": {"restart": {"maxCrash": 2}}}"#, &[]);
    assert!(c.warnings[0].contains("did you mean"), "{:?}", c.warnings);
}

#[test]
fn policy_settings_parse_with_defaults_and_checks() {
    let f = Fixture::new();
    let c = f.ok(r#"{"mcpServers": {"time": {"command": "tool"}}}"#, &[]);
    let p = &c.hub.policy;
    assert_eq!(p.permissions.default, Rule::Ask);
    assert_eq!(p.permissions.non_interactive, Rule::Deny);
    assert_eq!(
        p.rate_limits.default,
        Some(Limit {
            per_second: 10.0,
            burst: 20
        })
    );
    assert!(p.audit.enabled && !p.audit.arguments);
    assert_eq!(p.cache.default, None);

    let c = f.ok(
        r#"{
          "mcpServers": {"time": {"command": "tool"}, "github": {"command": "tool"}},
          "openpact": {
            "permissions": {"default": "deny", "allow": ["time:*"], "ask": [], "deny": ["*:delete_*"], "nonInteractive": "allow", "promptTimeout": "5s"},
            "cache": {"default": "off", "rules": {"time:*": "30s", "github:x": "off"}, "trustReadOnlyHint": true, "maxBytes": "1MiB"},
            "rateLimits": {"default": "off", "servers": {"github": {"perSecond": 2, "burst": 5}}, "tools": {"github:create_issue": {"perSecond": 0.2, "burst": 1}}},
            "secrets": {"env": ["GITHUB_TOKEN"]},
            "audit": {"enabled": false, "arguments": true, "maxBytes": "32MiB"}
          }
        }"#,
        &[],
    );
    let p = &c.hub.policy;
    assert_eq!(p.permissions.default, Rule::Deny);
    assert_eq!(p.permissions.allow, ["time:*"]);
    assert_eq!(p.permissions.non_interactive, Rule::Allow);
    assert_eq!(p.permissions.prompt_timeout, Duration::from_secs(5));
    assert_eq!(
        p.cache.rules,
        [
            ("time:*".to_string(), Some(Duration::from_secs(30))),
            ("github:x".to_string(), None)
        ]
    );
    assert!(p.cache.trust_read_only_hint);
    assert_eq!(p.cache.max_bytes, 1024 * 1024);
    assert_eq!(p.rate_limits.default, None);
    assert_eq!(
        p.rate_limits.tools[0].1,
        Some(Limit {
            per_second: 0.2,
            burst: 1
        })
    );
    assert_eq!(p.secrets.env, ["GITHUB_TOKEN"]);
    assert!(!p.audit.enabled && p.audit.arguments);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);

    let errs = f.err_short(r#"{"openpact": {"permissions": {"default": "maybe", "allow": ["a:[x"]}, "rateLimits": {"default": {"perSecond": 0}}}}"#, &[]);
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(
        errs[0].contains("openpact.permissions.default")
            && errs[0].contains("\"allow\", \"ask\", \"deny\"")
    );
    assert!(
        errs[1].contains("openpact.permissions.allow[0]") && errs[1].contains("not a valid glob")
    );
    assert!(errs[2].contains("openpact.rateLimits.default.perSecond"));

    let c = f.ok(r#"{"mcpServers": {"time": {"command": "tool"}}, "openpact": {"permissions": {"allow": ["tiem:*", "*:x"]}}}"#, &[]);
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(c.warnings[0].contains("\"tiem:*\" names server \"tiem\", which is not configured"));
}

#[test]
fn builtins_settings_parse_relative_to_the_config() {
    let f = Fixture::new();
    let base = f.dir.path();
    let c = f.ok(r#"{}"#, &[]);
    let b = &c.hub.builtins;
    assert!(b.enabled && b.web.enabled && !b.web.allow_private);
    assert_eq!(b.workspace_root, base.join("ai-data"));
    assert_eq!(b.scripts.dir, base.join("ai-data/scripts"));
    assert!(b.vault.is_none() && b.github.is_none() && !b.chat.any() && b.calendars.is_empty());

    let c = f.ok(
        r#"{"openpact": {"builtins": {
            "workspace": {"root": "./data"},
            "vault": {"path": "~/notes", "git": {"sync": true}},
            "web": {"enabled": true, "allowPrivate": true, "maxBytes": "1MiB", "timeout": "5s"},
            "github": {"tokenEnv": "GH_TOKEN", "baseUrl": "http://127.0.0.1:9/"},
            "chat": {"discord": {"tokenEnv": "D"}, "slack": {}, "webhook": {"url": "${HOOK}"}},
            "calendars": [{"name": "work", "url": "http://127.0.0.1:9/w.ics"}, {"name": "home", "file": "home.ics"}],
            "scripts": {"dir": "./s", "allowlist": ["weather.star"], "exec": true, "timeout": "2s"}
        }}}"#,
        &[("HOOK", "http://127.0.0.1:9/hook")],
    );
    let b = &c.hub.builtins;
    assert_eq!(b.workspace_root, base.join("./data"));
    assert_eq!(
        b.vault,
        Some(VaultSettings {
            path: PathBuf::from("/home/u/notes"),
            git_sync: true,
            max_bytes: 1024 * 1024,
            git_timeout: Duration::from_secs(30),
        })
    );
    assert!(
        b.web.allow_private
            && b.web.max_bytes == 1024 * 1024
            && b.web.timeout == Duration::from_secs(5)
    );
    assert_eq!(
        b.github,
        Some(GithubSettings {
            token_env: "GH_TOKEN".into(),
            base_url: "http://127.0.0.1:9".into()
        })
    );
    assert_eq!(b.chat.discord.as_ref().unwrap().token_env, "D");
    assert_eq!(
        b.chat.slack.as_ref().unwrap().base_url,
        "https://slack.com/api"
    );
    assert_eq!(b.chat.webhook.as_deref(), Some("http://127.0.0.1:9/hook"));
    assert_eq!(
        b.calendars[1].feed,
        CalendarFeed::File(base.join("home.ics"))
    );
    assert_eq!(
        (b.scripts.dir.clone(), b.scripts.exec),
        (base.join("./s"), true)
    );
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);

    let c = f.ok(r#"{"openpact": {"builtins": false}}"#, &[]);
    assert!(!c.hub.builtins.enabled);
    let c = f.ok(
        r#"{"openpact": {"builtins": {"chat": {"webhook": {"url": "${NOPE_HOOK}"}}}}}"#,
        &[],
    );
    assert!(c.hub.builtins.chat.webhook.is_none());
    assert!(
        c.warnings[0].contains("webhook provider is off"),
        "{:?}",
        c.warnings
    );
    let errs = f.err_short(
        r#"{"openpact": {"builtins": {"calendars": [{"name": "x"}], "github": {}}}}"#,
        &[],
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
}
