//! Server entries: defaults, names and namespaces, the config shapes (Claude, VS Code),
//! transports, and one broken entry among good ones.

use super::*;

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
    assert_eq!(s.protocol, Protocol::Handshake);
    assert!(!s.disabled);
    let (command, program, args, env, cwd, injected) = stdio(s);
    assert_eq!(command, "tool");
    assert_eq!(program, f.dir.path().join("bin/tool"));
    assert_eq!(args, ["a", "b"]);
    assert!(env.is_empty() && cwd.is_none() && injected.is_empty());
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

/// A missing grant is made only when it is a folder under the home folder; a file to be
/// under home is reported with the command that makes it, not made as a folder.
#[test]
fn a_missing_file_grant_under_home_is_reported_not_made() {
    let f = Fixture::new();
    let home = f.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let text = r#"{"mcpServers": {"s": {"command": "tool", "sandbox": {"filesystem": {"write": ["~/.state", "~/app.db"]}}}}}"#;
    let errs = f.err(text, &[("HOME", home.to_str().unwrap())]);
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].contains("write[1]")
            && errs[0].contains("app.db looks like a file: create it (`touch "),
        "{errs:?}"
    );
}
