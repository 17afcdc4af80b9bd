//! Finding a server's command and `cwd`: `~`, PATH (the server's own first), relative
//! paths, disabled servers left as written, and a misspelt `command` key.

use super::*;

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
fn misspelt_command_is_pointed_out_in_the_error() {
    let f = Fixture::new();
    let errs = f.err_short(r#"{"mcpServers": {"t": {"comand": "x"}}}"#, &[]);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[1].ends_with("mcpServers.t.comand: unknown key (ignored); did you mean `command`?"),
        "{}",
        errs[1]
    );
    assert!(
        errs[0].starts_with("mcp.json: mcpServers.t: has no `command`"),
        "{}",
        errs[0]
    );
    assert!(errs[0].contains("`comand`"), "{}", errs[0]);
}
