//! A refusal of the sandbox followed to its end: a confined hostile fixture under a profile
//! too narrow for what it is asked (a folder, a file, a Unix socket) answers with the one
//! command that allows it, `servers` and `/health` show it, and that command — run as a user
//! would, in a shell — edits the config (keeping its comments), makes the folder, reloads the
//! running hub, and the next call of the same client session works.

use crate::support::{
    FIXTURE, OPENPACT, Scratch, WAIT, non_loopback_address, ready, runner_stand_in, s, serve_with,
    state_dir,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const COMMENT: &str = "// the user's own note, which must survive the edit";

/// A home folder in the scratch dir and a config whose server `h` (the hostile fixture) has
/// no `sandbox` key, written with a comment.
fn setup(sc: &Scratch) -> (PathBuf, PathBuf) {
    let home = sc.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let config = sc.servers(
        json!({"h": {"command": FIXTURE, "args": ["--hostile"]}}),
        None,
    );
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{COMMENT}\n{text}")).unwrap();
    (home, config)
}

/// The command for `rest`: the hub serves a config other than the user's own, so it is named.
fn allow(config: &Path, rest: &str) -> String {
    format!("openpact --config {} sandbox allow {rest}", s(config))
}

/// Every text block of a `tools/call` response.
fn texts(r: &Value) -> Vec<String> {
    r["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content in {r}"))
        .iter()
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .collect()
}

/// The command a refusal names, from `openpact: … to allow it: COMMAND`.
fn fix_in(blocks: &[String]) -> String {
    blocks
        .iter()
        .find_map(|b| {
            b.split_once("; to allow it: ")
                .map(|(_, c)| c.trim_matches('`').to_string())
        })
        .unwrap_or_else(|| panic!("no command in {blocks:?}"))
}

/// Runs `command` in a shell as the user would: `openpact` on the PATH, in the config's
/// folder (where a plain `openpact` finds it), `~` being the test's home.
pub(crate) fn run_in_shell(command: &str, config: &Path, home: &Path) -> (i32, String) {
    let bin = Path::new(OPENPACT).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(config.parent().unwrap())
        .env("PATH", path)
        .env("HOME", home)
        .env("OPENPACT_STATE_DIR", state_dir(config))
        .env_remove("OPENPACT_CONFIG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Calls `tool` until it is refused; follows the command its result names; calls it again in
/// the same session. Returns the command and the refused result's blocks.
async fn refused_then_allowed(
    tool: &str,
    args: Value,
    home: &Path,
    config: &Path,
    want_fix: &str,
) -> Vec<String> {
    let mut hub = serve_with(config, &[], &[("HOME", s(home))]).await;
    ready(&mut hub.client, &[tool]).await;
    let r = hub.client.call(tool, args.clone()).await;
    let blocks = texts(&r);
    // The refusal first, then the server's own words.
    assert!(blocks.last().unwrap().starts_with("failed: "), "{blocks:?}");
    let fix = fix_in(&blocks);
    assert_eq!(fix, want_fix, "{blocks:?}");

    let (code, out) = run_in_shell(&fix, config, home);
    assert_eq!(code, 0, "{fix}: {out}");
    assert!(out.contains("reloaded"), "{out}");
    let text = std::fs::read_to_string(config).unwrap();
    assert!(text.starts_with(COMMENT), "the comment was lost: {text}");
    hub.wait_log("reload", WAIT).await;

    // The reload restarts the server with its grant; the same session calls it again.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let r = hub.client.call(tool, args.clone()).await;
        let restarting = r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not ready"));
        let now = if restarting {
            vec![r.to_string()]
        } else {
            texts(&r)
        };
        if now[0].starts_with("ok: ") {
            assert_eq!(now.len(), 1, "nothing refused now: {now:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still refused after `{fix}`: {now:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    blocks
}

/// A folder a server makes in the home folder on its first run (desktop-commander's
/// `~/.claude-server-commander`): the result names the folder, the command makes it.
#[tokio::test]
async fn a_refused_folder_names_the_command_and_following_it_works() {
    let sc = Scratch::new();
    let (home, config) = setup(&sc);
    let folder = home.join(".app-state");
    let blocks = refused_then_allowed(
        "h:try_mkdir",
        json!({"path": s(&folder.join("cache"))}),
        &home,
        &config,
        &allow(&config, "h write ~/.app-state"),
    )
    .await;
    assert!(
        blocks[0].starts_with("openpact: the sandbox refused writing ~/.app-state/cache;"),
        "{blocks:?}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(folder.join("cache").is_dir());
}

/// A file the server writes, whose refusal only its stderr names (the result says
/// `Permission denied` alone, as Rust's io errors do); `servers` and `/health` show it too.
#[tokio::test]
async fn a_refused_file_named_on_stderr_names_the_command_and_following_it_works() {
    let sc = Scratch::new();
    let (home, config) = setup(&sc);
    let notes = home.join("notes.txt");
    std::fs::write(&notes, "old").unwrap();
    let want = &allow(&config, "h write ~/notes.txt");

    // Recorded on the server, as the running hub publishes it (status file and /health).
    let mut hub = serve_with(
        &config,
        &["serve", "--http", "127.0.0.1:0"],
        &[("HOME", s(&home))],
    )
    .await;
    ready(&mut hub.client, &["h:try_write"]).await;
    let base = &hub.http_base().await;
    let r = hub
        .client
        .call("h:try_write", json!({"path": s(&notes), "text": "new"}))
        .await;
    assert_eq!(&fix_in(&texts(&r)), want);
    let deadline = std::time::Instant::now() + WAIT;
    let shown = loop {
        let out = std::process::Command::new(OPENPACT)
            .args([
                "--config",
                s(&config),
                "--state-dir",
                s(&state_dir(&config)),
            ])
            .args(["servers", "--json"])
            .env("HOME", &home)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let refusals = v[0]["servers"]
            .as_array()
            .and_then(|l| l.iter().find(|s| s["name"] == "h"))
            .map(|h| h["refusals"].clone())
            .unwrap_or(Value::Null);
        if refusals.is_array() || std::time::Instant::now() > deadline {
            break refusals;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(shown[0]["what"], "~/notes.txt", "{shown}");
    assert_eq!(shown[0]["kind"], "write");
    assert_eq!(shown[0]["fix"], *want);
    assert!(shown[0]["at"].as_str().is_some_and(|t| t.contains('T')));
    let health = crate::http_face::health(base).await;
    assert_eq!(
        health["servers"][0]["refusals"][0]["fix"], *want,
        "{health}"
    );
    let human = std::process::Command::new(OPENPACT)
        .args([
            "--config",
            s(&config),
            "--state-dir",
            s(&state_dir(&config)),
        ])
        .arg("servers")
        .env("HOME", &home)
        .output()
        .unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("refused: write ~/notes.txt at ")
            && human.contains(&format!("allow it: `{want}`")),
        "{human}"
    );
    drop(hub);

    refused_then_allowed(
        "h:try_write",
        json!({"path": s(&notes), "text": "new"}),
        &home,
        &config,
        want,
    )
    .await;
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "new");
}

/// A Unix socket the server connects to (an agent's, a docker socket), refused by the
/// sandbox's socket rule until `sandbox.unixSockets` grants it. A machine where no socket
/// rule can be in force lets the first connect through: the test says so and stops there.
#[tokio::test]
async fn a_refused_socket_names_the_command_and_following_it_works() {
    let sc = Scratch::new();
    let (home, config) = setup(&sc);
    let socket = sc.path().join("agent.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let args = json!({"path": s(&socket)});
    {
        let mut hub = serve_with(&config, &[], &[("HOME", s(&home))]).await;
        ready(&mut hub.client, &["h:try_unix"]).await;
        let r = hub.client.call("h:try_unix", args.clone()).await;
        if texts(&r)[0].starts_with("ok: ") {
            eprintln!("skipped: no Unix socket rule is in force on this machine");
            return;
        }
    }
    refused_then_allowed(
        "h:try_unix",
        args,
        &home,
        &config,
        &allow(&config, &format!("h socket {}", s(&socket))),
    )
    .await;
}

/// A server that makes its folder before it answers at all fails its start; the start error
/// (in `servers`) names the folder and the command, and following it brings the server up
/// for the client already connected.
#[tokio::test]
async fn a_start_refused_names_the_command_and_following_it_starts_the_server() {
    let sc = Scratch::new();
    let home = sc.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let script = format!("mkdir -p \"$HOME/.boot-state\" && exec {FIXTURE} --hostile");
    let config = sc.servers(
        json!({"h": {"command": "/bin/sh", "args": ["-c", script]}}),
        None,
    );
    let mut hub = serve_with(&config, &[], &[("HOME", s(&home))]).await;
    let want = &allow(&config, "h write ~/.boot-state");
    let deadline = std::time::Instant::now() + WAIT;
    let reason = loop {
        let out = std::process::Command::new(OPENPACT)
            .args([
                "--config",
                s(&config),
                "--state-dir",
                s(&state_dir(&config)),
            ])
            .args(["servers", "--json"])
            .env("HOME", &home)
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let reason = v[0]["servers"][0]["reason"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if !reason.is_empty() || std::time::Instant::now() > deadline {
            break reason;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(
        reason.contains(&format!(
            "the sandbox refused writing ~/.boot-state; to allow it: {want}"
        )),
        "{reason}"
    );
    let (code, out) = run_in_shell(want, &config, &home);
    assert_eq!(code, 0, "{out}");
    ready(&mut hub.client, &["h:try_read"]).await;
    assert!(home.join(".boot-state").is_dir());
}

/// A host outside the allow list, with nobody to ask (this client has no elicitation): the
/// proxy's refusal names `sandbox allow … net HOST`, and following it lets the next call of
/// the same session through.
#[tokio::test]
async fn a_refused_host_names_the_command_and_following_it_works() {
    let sc = Scratch::new();
    let (home, config) = setup(&sc);
    let stand = crate::support::Stand::start(|_| crate::support::reply(200, "text/plain", "hi"));
    let host = format!("127.0.0.1:{}", stand.port);
    refused_then_allowed(
        "h:try_fetch",
        json!({"url": format!("{}/", stand.base)}),
        &home,
        &config,
        &allow(&config, &format!("h net {host}")),
    )
    .await;
    assert_eq!(stand.seen().len(), 1, "reached once, after the grant");
}

/// A server whose job is any URL (a known fetch server: "any public host") and a page on this
/// machine's own private address, as a LAN service would be: refused, with nobody to ask,
/// as a private address with `sandbox allow … net HOST:PORT`, and following it lets the next
/// call through. Skipped where the machine has no private address to serve on.
#[tokio::test]
async fn a_private_address_any_public_host_refuses_names_the_command_and_following_it_works() {
    let ip = non_loopback_address();
    if !openpact::config::hosts::is_private_address(ip) {
        eprintln!("skipped: {ip} is not a private address");
        return;
    }
    let sc = Scratch::new();
    let home = sc.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let uvx = runner_stand_in(&sc, "uvx");
    let config = sc.servers(
        json!({"fetch": {"command": uvx, "args": ["mcp-server-fetch"]}}),
        None,
    );
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{COMMENT}\n{text}")).unwrap();
    let stand = crate::support::Stand::start_on(ip, |_| {
        crate::support::reply(200, "text/plain", "from the LAN")
    });
    let what = stand.base.trim_start_matches("http://").to_string();
    let blocks = refused_then_allowed(
        "fetch:try_fetch",
        json!({"url": format!("{}/", stand.base)}),
        &home,
        &config,
        &allow(&config, &format!("fetch net {what}")),
    )
    .await;
    assert!(
        blocks[0].contains("a private address"),
        "the refusal says why: {blocks:?}"
    );
    assert_eq!(stand.seen().len(), 1, "reached once, after the grant");
}
