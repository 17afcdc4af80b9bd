//! Where the config and the state dir come from: the global flags before or after the
//! subcommand, `OPENPACT_CONFIG`, `./mcp.json`, the XDG config dir, the embedded default,
//! `OPENPACT_STATE_DIR` and the XDG state dir.

use super::{Cli, fx_only, openpact};
use crate::support::{Ran, Scratch, fixture, s};
use serde_json::{Value, json};
use std::path::Path;

/// `openpact ARGS` isolated in `sc` with `env`, no stdin.
async fn run_env(sc: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Ran {
    openpact(sc, args, env, None).await
}

/// Writes a config at `path` whose one server, the fixture, is called `name`.
fn write_config(path: &Path, name: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        json!({"mcpServers": {name: fixture(&[])}}).to_string(),
    )
    .unwrap();
}

/// Whether `out` printed `line` as a line of its own (as `config check` lists servers).
fn has_line(out: &Ran, line: &str) -> bool {
    out.stdout.lines().any(|l| l == line)
}

#[tokio::test]
async fn global_flags_work_before_and_after_the_subcommand() {
    let cli = fx_only();
    let Cli { sc, cfg, state } = &cli;
    let before = cli.run(&["config", "check"]).await;
    let after = cli.run_after(&["config", "check"]).await;
    let mixed = [
        "--state-dir",
        s(state),
        "config",
        "check",
        "--config",
        s(cfg),
    ];
    let mixed = run_env(sc, &mixed, &[]).await;
    before.expect_code(0);
    assert!(
        before
            .stdout
            .contains(&format!("config: {}", cfg.display())),
        "{}",
        before.stdout
    );
    assert!(
        before
            .stdout
            .contains(&format!("state dir: {}", state.display())),
        "{}",
        before.stdout
    );
    assert!(has_line(&before, "fx"), "{}", before.stdout);
    assert_eq!(before.stdout, after.stdout);
    assert_eq!(before.stdout, mixed.stdout);
    assert_eq!((after.code, mixed.code), (Some(0), Some(0)));
}

#[tokio::test]
async fn openpact_config_variable_is_honoured() {
    let cli = fx_only();
    let Cli { sc, cfg, state } = &cli;
    let check = ["--state-dir", s(state), "config", "check"];
    let via_env = [("OPENPACT_CONFIG", s(cfg))];
    let out = run_env(sc, &check, &via_env).await;
    out.expect_code(0);
    assert!(
        out.stdout.contains(&format!("config: {}", cfg.display())),
        "{}",
        out.stdout
    );
    assert!(has_line(&out, "fx"), "{}", out.stdout);

    // It also feeds the other commands.
    let call = [
        "--state-dir",
        s(state),
        "call",
        "fx:echo",
        r#"{"message":"via env"}"#,
    ];
    let out = run_env(sc, &call, &via_env).await;
    out.expect_code(0);
    assert_eq!(out.stdout, "via env\n");

    // --config wins over it.
    let other = sc.path().join("other.json");
    write_config(&other, "other");
    let explicit = [
        "--config",
        s(&other),
        "--state-dir",
        s(state),
        "config",
        "check",
    ];
    let out = run_env(sc, &explicit, &via_env).await;
    out.expect_code(0);
    assert!(
        has_line(&out, "other") && !has_line(&out, "fx"),
        "{}",
        out.stdout
    );

    // A variable naming a missing file is an error, not a silent fallback.
    let missing = sc.path().join("missing.json");
    let out = run_env(sc, &check, &[("OPENPACT_CONFIG", s(&missing))]).await;
    out.expect_code(1);
    assert!(
        out.stderr.contains("config file not found") && out.stderr.contains("OPENPACT_CONFIG"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn without_any_config_the_embedded_default_is_used() {
    let sc = Scratch::new();
    let state = sc.state();
    let check = ["--state-dir", s(&state), "config", "check"];
    // The helper gives an empty cwd and an empty XDG_CONFIG_HOME, and unsets OPENPACT_CONFIG.
    let out = run_env(&sc, &check, &[]).await;
    out.expect_code(0);
    assert!(out.stdout.contains("embedded default"), "{}", out.stdout);
    assert!(
        out.stdout.contains("ok: 0 server(s) enabled"),
        "{}",
        out.stdout
    );

    let out = run_env(&sc, &[&check[..], &["--json"]].concat(), &[]).await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(v["config"].is_null(), "{v:#}");
    assert_eq!(v["servers"], json!([]));

    // Control: a ./mcp.json in the working directory is picked up...
    let local = sc.path().join("cwd").join("mcp.json");
    write_config(&local, "local");
    let out = run_env(&sc, &check, &[]).await;
    out.expect_code(0);
    assert!(has_line(&out, "local"), "{}", out.stdout);
    std::fs::remove_file(&local).unwrap();
    // ...and so is $XDG_CONFIG_HOME/openpact/mcp.json.
    let user = sc
        .path()
        .join("xdg-config")
        .join("openpact")
        .join("mcp.json");
    write_config(&user, "user");
    let out = run_env(&sc, &check, &[]).await;
    out.expect_code(0);
    assert!(has_line(&out, "user"), "{}", out.stdout);
}

#[tokio::test]
async fn state_dir_comes_from_the_flag_then_the_variable() {
    let cli = fx_only();
    let Cli { sc, cfg, state } = &cli;
    let from_env = sc.path().join("env-state");
    let via_env = [("OPENPACT_STATE_DIR", s(&from_env))];
    let check = ["--config", s(cfg), "config", "check"];
    let out = run_env(sc, &check, &via_env).await;
    out.expect_code(0);
    assert!(
        out.stdout
            .contains(&format!("state dir: {}", from_env.display())),
        "{}",
        out.stdout
    );

    let out = run_env(sc, &[&check[..], &["--json"]].concat(), &via_env).await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["stateDir"], s(&from_env));

    // The flag wins over the variable.
    let flagged = [&check[..], &["--state-dir", s(state)]].concat();
    let out = run_env(sc, &flagged, &via_env).await;
    out.expect_code(0);
    assert!(
        out.stdout
            .contains(&format!("state dir: {}", state.display())),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("env-state"), "{}", out.stdout);

    // Neither: $XDG_STATE_HOME/openpact (the helper points it into the scratch dir).
    let out = run_env(sc, &check, &[]).await;
    out.expect_code(0);
    let xdg = sc.path().join("xdg-state").join("openpact");
    assert!(
        out.stdout
            .contains(&format!("state dir: {}", xdg.display())),
        "{}",
        out.stdout
    );
}
