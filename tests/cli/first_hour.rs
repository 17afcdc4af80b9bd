//! What a new user trips over in the first hour (issue 24), each walked as a user would:
//! built-in tools in `tools --json`, permission commands a rule overrides, advice that is
//! followed to see that it works, `config check` on typos, an unset HTTP token, a hung or
//! chatty server, `servers` beside another config's hub, and the smaller rough edges.

use super::{Cli, fx_only, openpact, stdout_json, with_servers};
use crate::support::{self, FIXTURE, Scratch, fixture, s};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// With no config at all, built-in tools are listed (server `openpact`), in both forms,
/// and their workspace is the user's data dir, not the working directory.
#[tokio::test]
async fn no_config_lists_builtins_and_keeps_their_files_in_the_data_dir() {
    let sc = Scratch::new();
    let out = openpact(&sc, &["tools", "--json"], &[], None).await;
    out.expect_code(0);
    let tools = stdout_json(&out);
    let read = tools
        .as_array()
        .and_then(|l| l.iter().find(|t| t["name"] == "workspace_read"))
        .unwrap_or_else(|| panic!("workspace_read listed: {tools:#}"));
    assert_eq!(read["server"], "openpact", "{read:#}");
    assert_eq!(read["tool"], "workspace_read", "{read:#}");
    let description = read["definition"]["description"].as_str().unwrap();
    assert!(!description.contains("ai-data"), "{description}");
    openpact(&sc, &["tools"], &[], None).await.expect_code(0);

    let out = openpact(&sc, &["config", "check", "--json"], &[], None).await;
    out.expect_code(0);
    let v = stdout_json(&out);
    let data = sc.path().join("home/.local/share/openpact/ai-data");
    assert_eq!(v["builtins"]["workspace"], s(&data), "{v:#}");
    assert_eq!(v["builtins"]["scripts"], s(&data.join("scripts")), "{v:#}");

    // A denial names where a config would go, not a file that does not exist.
    let out = openpact(&sc, &["call", "workspace_list", "{}", "--json"], &[], None).await;
    out.expect_code(1);
    let result = stdout_json(&out);
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    let user_cfg = sc.path().join("xdg-config/openpact/mcp.json");
    assert!(
        text.contains(&format!("create {}, or pass --config", user_cfg.display()))
            && !text.contains("your mcp.json"),
        "{text}"
    );
    assert!(
        !sc.path().join("cwd/ai-data").exists(),
        "nothing written to the working directory"
    );
}

/// `permissions allow|deny` under a rule that decides otherwise is refused with the rule
/// named; following the advice (changing the rule) makes it work; `list` shows a remembered
/// decision a rule overrides.
#[tokio::test]
async fn permission_commands_name_the_rule_that_overrides_them() {
    let sc = Scratch::new();
    let write = |perms: Value| {
        sc.servers(
            json!({ "fx": fixture(&[]) }),
            Some(json!({ "permissions": perms })),
        )
    };
    let cfg = write(json!({"default": "ask", "ask": ["fx:ech*"], "allow": ["fx:*"]}));
    let cli = Cli {
        sc: Scratch::new(),
        cfg: cfg.clone(),
        state: sc.state(),
    };
    let out = cli.run(&["permissions", "allow", "fx:echo"]).await;
    out.expect_code(1);
    assert!(
        out.stderr
            .contains("the rule \"fx:ech*\" in openpact.permissions.ask matches fx:echo"),
        "{}",
        out.stderr
    );
    let listed = cli.run(&["permissions", "list", "--json"]).await;
    listed.expect_code(0);
    assert_eq!(stdout_json(&listed), json!({}), "nothing saved");

    // The call's own advice under the ask rule: no `permissions allow` that cannot work.
    let call = cli.run(&["call", "fx:echo", r#"{"message": "hi"}"#]).await;
    call.expect_code(1);
    assert!(
        call.stderr.contains("openpact.permissions.ask")
            && call.stderr.contains("change that rule")
            && !call.stderr.contains("or add \"fx:echo\""),
        "{}",
        call.stderr
    );

    // Deny under an allow rule: refused too.
    let out = cli.run(&["permissions", "deny", "fx:add"]).await;
    out.expect_code(1);
    assert!(
        out.stderr
            .contains("the rule \"fx:*\" in openpact.permissions.allow"),
        "{}",
        out.stderr
    );
    // Allow under an allow rule agrees: saved, with a note.
    let out = cli.run(&["permissions", "allow", "fx:add"]).await;
    out.expect_code(0);
    assert!(
        out.stdout.contains("note: the rule \"fx:*\""),
        "{}",
        out.stdout
    );

    // Follow the advice: change the rule so it no longer matches, then allow.
    write(json!({"default": "ask"}));
    let out = cli.run(&["permissions", "allow", "fx:echo"]).await;
    out.expect_code(0);
    let call = cli.run(&["call", "fx:echo", r#"{"message": "hi"}"#]).await;
    call.expect_code(0);
    assert_eq!(call.stdout.trim(), "hi");

    // A rule added later overrides the remembered decision, and `list` says so.
    write(json!({"default": "ask", "deny": ["fx:echo"]}));
    let listed = cli.run(&["permissions", "list"]).await;
    listed.expect_code(0);
    assert!(
        listed.stdout.contains(
            "overridden: the rule \"fx:echo\" in openpact.permissions.deny decides instead"
        ),
        "{}",
        listed.stdout
    );
    let listed = cli.run(&["permissions", "list", "--json"]).await;
    let v = stdout_json(&listed);
    assert_eq!(
        v["fx:echo"]["rule"],
        json!({"list": "deny", "glob": "fx:echo", "overrides": true}),
        "{v:#}"
    );
    // The deny message's advice names the rule too.
    let call = cli.run(&["call", "fx:echo", r#"{"message": "hi"}"#]).await;
    call.expect_code(1);
    assert!(
        call.stderr
            .contains("the rule \"fx:echo\" in openpact.permissions.deny matches it"),
        "{}",
        call.stderr
    );
}

/// With no rule, the advice `openpact permissions allow` is followed and works.
#[tokio::test]
async fn the_default_denial_advice_works_when_followed() {
    let cli = with_servers(
        json!({ "fx": fixture(&[]) }),
        Some(json!({"permissions": {"default": "ask"}})),
    );
    let call = cli.run(&["call", "fx:echo", r#"{"message": "hi"}"#]).await;
    call.expect_code(1);
    assert!(
        call.stderr
            .contains("run `openpact permissions allow fx:echo`"),
        "{}",
        call.stderr
    );
    cli.run(&["permissions", "allow", "fx:echo"])
        .await
        .expect_code(0);
    let call = cli.run(&["call", "fx:echo", r#"{"message": "hi"}"#]).await;
    call.expect_code(0);
}

/// `config check` fails on a misspelt key (a server meant to be off would start), with the
/// suggestion, and reports file-level errors and warnings together.
#[tokio::test]
async fn config_check_fails_on_unknown_keys_and_reports_everything_at_once() {
    let sc = Scratch::new();
    let cfg = sc.raw_config(
        "mcp.json",
        &json!({"mcpServers": {"x": {"command": FIXTURE, "disable": true}}}),
    );
    let run = |args: &'static [&'static str]| {
        let cfg = cfg.clone();
        let sc = &sc;
        async move { openpact(sc, &[&["--config", s(&cfg)][..], args].concat(), &[], None).await }
    };
    let out = run(&["config", "check"]).await;
    out.expect_code(1);
    assert!(
        out.stderr
            .contains("mcpServers.x.disable: unknown key (ignored); did you mean `disabled`?"),
        "{}",
        out.stderr
    );
    let out = run(&["config", "check", "--json"]).await;
    out.expect_code(1);
    let v = stdout_json(&out);
    assert_eq!(v["ok"], false, "{v:#}");
    assert_eq!(v["problems"][0]["path"], "mcpServers.x.disable", "{v:#}");
    // Elsewhere it stays a warning: the command runs.
    run(&["tools"]).await.expect_code(0);

    // A file-level error beside it: both are shown.
    std::fs::write(
        &cfg,
        json!({"mcpServers": {"x": {"command": FIXTURE, "disable": true}}, "openpact": {"pageSize": "many"}})
            .to_string(),
    )
    .unwrap();
    let out = run(&["config", "check"]).await;
    out.expect_code(1);
    assert!(
        out.stderr.contains("openpact.pageSize") && out.stderr.contains("did you mean `disabled`"),
        "{}",
        out.stderr
    );
}

/// An unset `${VAR}` in `openpact.http.token` matters only to `serve --http`.
#[tokio::test]
async fn an_unset_http_token_breaks_only_the_http_face() {
    let cli = with_servers(
        json!({ "fx": fixture(&[]) }),
        Some(json!({"http": {"token": "${NOPE_VAR}"}})),
    );
    cli.run(&["tools"]).await.expect_code(0);
    let check = cli.run(&["config", "check"]).await;
    check.expect_code(0);
    assert!(
        check.stdout.contains("${NOPE_VAR} is not set"),
        "{}",
        check.stdout
    );
    let mut hub = support::serve_with(&cli.cfg, &[], &[]).await;
    let init = tokio::time::timeout(support::WAIT, hub.client.initialize())
        .await
        .expect("stdio serve answers");
    assert_eq!(init["serverInfo"]["name"], "openpact");
    hub.close().await;
    let http = cli
        .run(&["serve", "--http", "127.0.0.1:0", "--no-stdio"])
        .await;
    assert_ne!(http.code, Some(0), "{http:#?}");
    assert!(
        http.stderr
            .contains("refusing to serve HTTP without the configured token")
            && http.stderr.contains("${NOPE_VAR} is not set"),
        "{}",
        http.stderr
    );
}

/// A server that never answers `initialize`: after `listWait` a command says which server it
/// waits for and for how long (its `timeout`), then goes on without it, naming it.
#[tokio::test]
async fn a_hung_server_is_named_and_costs_its_timeout_not_more() {
    let cli = with_servers(
        json!({
            "fx": fixture(&[]),
            "hung": {"command": FIXTURE, "args": ["--init-delay-ms", "600000"], "timeout": "3s"},
        }),
        Some(json!({"listWait": "1s"})),
    );
    let t0 = Instant::now();
    let out = cli.run(&["tools"]).await;
    out.expect_code(0);
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    assert!(out.stdout.contains("fx:echo"), "{}", out.stdout);
    assert!(
        out.stderr.contains(
            "waiting for hung: still starting after 1s (a first `npx`/`uvx` run downloads the server); giving up after its timeout (3s)"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("server 'hung' failed"),
        "{}",
        out.stderr
    );
}

/// A server slower than `listWait` (a first `npx` download) is waited for, not cut off: a
/// call to it works the first time.
#[tokio::test]
async fn a_slow_first_start_is_waited_for() {
    let cli = with_servers(
        json!({"fx": {"command": FIXTURE, "args": ["--init-delay-ms", "2500"], "timeout": "20s"}}),
        Some(json!({"listWait": "1s"})),
    );
    let out = cli
        .run(&["call", "fx:echo", r#"{"message": "late"}"#])
        .await;
    out.expect_code(0);
    assert_eq!(out.stdout.trim(), "late");
    assert!(out.stderr.contains("waiting for fx"), "{}", out.stderr);
}

/// A server that prints a banner on stdout: the line is shown in its failure, with what is
/// wrong.
#[tokio::test]
async fn a_banner_on_stdout_is_shown_in_the_failure() {
    let cli = with_servers(
        json!({"chatty": {
            "command": "sh",
            "args": ["-c", "echo \"Welcome to chatty-server v1, key $KEY\"; exec sleep 30"],
            "env": {"KEY": "${BANNER_SECRET}"},
            "timeout": "1s",
        }}),
        None,
    );
    let secret = "banner-secret-0123456789";
    let out = cli
        .run_env(&["servers", "--json"], &[("BANNER_SECRET", secret)])
        .await;
    assert!(
        !out.stdout.contains(secret) && !out.stderr.contains(secret),
        "the secret leaked: {out:#?}"
    );
    out.expect_code(0);
    let v = stdout_json(&out);
    let chatty = &v[0]["servers"][0];
    assert_eq!(chatty["state"], "failed", "{chatty:#}");
    assert!(
        chatty["reason"].as_str().is_some_and(|r| r.contains(
            "[stdout, not JSON-RPC] Welcome to chatty-server v1, key [REDACTED:BANNER_SECRET]"
        )),
        "{chatty:#}"
    );
    assert!(
        out.stderr.contains("stdout must carry only JSON-RPC"),
        "{}",
        out.stderr
    );
}

/// `servers` shows a running hub only when it serves the config asked about.
#[tokio::test]
async fn servers_ignores_a_hub_of_another_config() {
    let a = fx_only();
    let mut hub = support::serve(&a.cfg).await;
    hub.client.initialize().await;
    // Another config, the same state dir.
    let b = Cli {
        sc: Scratch::new(),
        cfg: a.sc.raw_config(
            "other.json",
            &json!({"mcpServers": {"other": {"command": FIXTURE}}, "openpact": {"builtins": false}}),
        ),
        state: support::state_dir(&a.cfg),
    };
    let out = b.run(&["servers", "--json"]).await;
    out.expect_code(0);
    let v = stdout_json(&out);
    assert_eq!(v[0]["running"], false, "{v:#}");
    assert_eq!(v[0]["servers"][0]["name"], "other", "{v:#}");
    // The same config through the same state dir: the running hub.
    let same = Cli {
        sc: Scratch::new(),
        cfg: a.cfg.clone(),
        state: support::state_dir(&a.cfg),
    };
    let deadline = Instant::now() + support::WAIT;
    loop {
        let v = stdout_json(&same.run(&["servers", "--json"]).await);
        if v[0]["running"] == true {
            assert_eq!(v[0]["servers"][0]["name"], "fx", "{v:#}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the running hub never shown: {v:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    hub.close().await;
}

/// `--mcp` is `serve`: it takes serve's flags and no other command.
#[tokio::test]
async fn mcp_flag_is_serve_and_takes_no_command() {
    let cli = fx_only();
    let out = cli.run(&["--mcp", "tools"]).await;
    out.expect_code(2);
    assert!(
        out.stderr.contains("--mcp means `openpact serve`"),
        "{}",
        out.stderr
    );
    let mut hub = support::serve_with(&cli.cfg, &["--mcp", "--http", "127.0.0.1:0"], &[]).await;
    hub.wait_log("serving MCP over HTTP on http://", support::WAIT)
        .await;
    let (code, _) = hub.signal(nix::sys::signal::Signal::SIGTERM).await;
    assert_eq!(code, Some(0), "{}", hub.stderr());
}

/// Login advice only where a login is wanted: a server that answers without one is said to
/// need none; one that cannot be asked gets the conditional advice.
#[tokio::test]
async fn auth_status_asks_whether_a_login_is_needed() {
    let (_server, url) = support::fixture_over_http(&[]).await;
    let cli = with_servers(
        json!({"open": {"url": url}, "gone": {"url": "http://127.0.0.1:1/mcp"}}),
        None,
    );
    let out = cli.run(&["auth", "status"]).await;
    out.expect_code(0);
    assert!(
        out.stdout.contains("open: no login needed"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("gone: not logged in (needed only if the server asks for one"),
        "{}",
        out.stdout
    );
    let out = cli.run(&["auth", "status", "--json"]).await;
    let v = stdout_json(&out);
    let open = v
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["server"] == "open")
        .unwrap();
    assert_eq!(
        (&open["loggedIn"], &open["loginRequired"]),
        (&json!(false), &json!(false)),
        "camelCase keys: {open:#}"
    );
    let check = cli.run(&["config", "check"]).await;
    assert!(
        !check.stdout.contains("(run `openpact auth login open`)"),
        "{}",
        check.stdout
    );
    // An unreachable remote's last error says who is unreachable.
    let servers = cli.run(&["servers", "--json"]).await;
    let v = stdout_json(&servers);
    let gone = v[0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "gone")
        .unwrap();
    assert!(
        gone["lastError"]
            .as_str()
            .is_some_and(|e| e.starts_with("'gone' ")),
        "{gone:#}"
    );
}

/// The smaller rough edges: `--json` failures are JSON, `-` with nothing on stdin says so,
/// `audit tail -n 0` is quiet, `config check` spells settings as the config does, and a
/// prompt's name is under `prompt`.
#[tokio::test]
async fn json_errors_empty_stdin_and_small_spellings() {
    let cli = fx_only();
    let out = cli.run(&["call", "fx:nope", "{}", "--json"]).await;
    out.expect_code(1);
    let v = stdout_json(&out);
    assert!(v["error"]["code"].is_i64(), "{v:#}");
    let out = cli.run(&["call", "fx:echo", "not json", "--json"]).await;
    out.expect_code(2);
    let v = stdout_json(&out);
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not valid JSON")),
        "{v:#}"
    );
    let empty = openpact(
        &cli.sc,
        &[&cli.flags()[..], &["call", "fx:echo", "-"]].concat(),
        &[],
        Some(""),
    )
    .await;
    empty.expect_code(2);
    assert!(
        empty.stderr.contains("stdin, which was empty"),
        "{}",
        empty.stderr
    );
    let tail = cli.run(&["audit", "tail", "-n", "0"]).await;
    tail.expect_code(0);
    assert_eq!(tail.stdout, "");
    let check = cli.run(&["config", "check"]).await;
    assert!(
        check.stdout.contains("tool names: qualified,"),
        "{}",
        check.stdout
    );
    let prompts = with_servers(json!({"fx": fixture(&["--conformance"])}), None);
    let out = prompts.run(&["prompts", "--json"]).await;
    out.expect_code(0);
    let v = stdout_json(&out);
    let first = &v[0];
    assert!(
        first["prompt"].is_string() && first.get("tool").is_none(),
        "{first:#}"
    );
}

/// The example config's filesystem server serves the folder the config is in, whatever the
/// working directory (an editor may start openpact in `/`); paths show without `./`.
#[tokio::test]
async fn the_example_fs_server_serves_the_config_folder() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let sc = Scratch::new();
    let example = root.join("mcp.example.json");
    let out = openpact(
        &sc,
        &["--config", s(&example), "config", "check", "--json"],
        &[],
        None,
    )
    .await;
    let v = stdout_json(&out);
    let servers = v["servers"].as_array().unwrap_or_else(|| panic!("{v:#}"));
    let fs = servers.iter().find(|x| x["name"] == "fs").unwrap();
    assert_eq!(fs["cwd"], s(root), "{fs:#}");
    assert_eq!(fs["args"][2], ".", "{fs:#}");
    assert_eq!(
        v["builtins"]["scripts"],
        s(&root.join("ai-data/scripts")),
        "{v:#}"
    );
}

/// Two servers exposing the same resources: a listing says which one serves them; a call
/// to one tool does not.
#[tokio::test]
async fn a_call_leaves_out_resource_conflicts_a_listing_shows() {
    // A built-in tool's name names no server, so every server starts for the call.
    let cli = with_servers(
        json!({"fx": fixture(&[]), "fy": fixture(&[])}),
        Some(json!({"builtins": {}})),
    );
    let listing = cli.run(&["resources"]).await;
    listing.expect_code(0);
    assert!(
        listing.stderr.contains("servers 'fx' and 'fy' both expose"),
        "{}",
        listing.stderr
    );
    let call = cli.run(&["call", "workspace_list", "{}"]).await;
    call.expect_code(0);
    assert!(!call.stderr.contains("both expose"), "{}", call.stderr);
}
