//! The file as a whole: JSON syntax, the top level, unknown keys, every problem at once,
//! and loading from a path.

use super::*;

#[test]
fn unknown_keys_warn_with_suggestions() {
    let f = Fixture::new();
    let c = f.loose(
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
