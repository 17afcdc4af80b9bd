//! Where the config and the state dir come from: the global flags before or after the
//! subcommand, `OPENPACT_CONFIG`, `./mcp.json`, the XDG config dir, the embedded default,
//! `OPENPACT_STATE_DIR` and the XDG state dir.

use crate::support::fixture;

use super::{fx_only, openpact, run, run_after};
use crate::support::{Scratch, s};
use serde_json::{Value, json};

#[tokio::test]
async fn global_flags_work_before_and_after_the_subcommand() {
    let (sc, cfg, state) = fx_only();
    let before = run(&sc, &cfg, &state, &["config", "check"]).await;
    let after = run_after(&sc, &cfg, &state, &["config", "check"]).await;
    let mixed = openpact(
        &sc,
        &[
            "--state-dir",
            s(&state),
            "config",
            "check",
            "--config",
            s(&cfg),
        ],
        &[],
        None,
    )
    .await;
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
    assert!(
        before.stdout.lines().any(|l| l == "fx"),
        "{}",
        before.stdout
    );
    assert_eq!(before.stdout, after.stdout);
    assert_eq!(before.stdout, mixed.stdout);
    assert_eq!((after.code, mixed.code), (Some(0), Some(0)));
}

#[tokio::test]
async fn openpact_config_variable_is_honoured() {
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[("OPENPACT_CONFIG", s(&cfg))],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout.contains(&format!("config: {}", cfg.display())),
        "{}",
        out.stdout
    );
    assert!(out.stdout.lines().any(|l| l == "fx"), "{}", out.stdout);

    // It also feeds the other commands.
    let out = openpact(
        &sc,
        &[
            "--state-dir",
            s(&state),
            "call",
            "fx:echo",
            r#"{"message":"via env"}"#,
        ],
        &[("OPENPACT_CONFIG", s(&cfg))],
        None,
    )
    .await;
    out.expect_code(0);
    assert_eq!(out.stdout, "via env\n");

    // --config wins over it.
    let other = sc.path().join("other.json");
    std::fs::write(
        &other,
        json!({"mcpServers": {"other": fixture(&[])}}).to_string(),
    )
    .unwrap();
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&other),
            "--state-dir",
            s(&state),
            "config",
            "check",
        ],
        &[("OPENPACT_CONFIG", s(&cfg))],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout.lines().any(|l| l == "other") && !out.stdout.lines().any(|l| l == "fx"),
        "{}",
        out.stdout
    );

    // A variable naming a missing file is an error, not a silent fallback.
    let missing = sc.path().join("missing.json");
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[("OPENPACT_CONFIG", s(&missing))],
        None,
    )
    .await;
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
    let state = sc.path().join("state");
    // The helper gives an empty cwd and an empty XDG_CONFIG_HOME, and unsets OPENPACT_CONFIG.
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(out.stdout.contains("embedded default"), "{}", out.stdout);
    assert!(
        out.stdout.contains("ok: 0 server(s) enabled"),
        "{}",
        out.stdout
    );

    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check", "--json"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(v["config"].is_null(), "{v:#}");
    assert_eq!(v["servers"], json!([]));

    // Control: a ./mcp.json in the working directory is picked up...
    let local = sc.path().join("cwd").join("mcp.json");
    std::fs::write(
        &local,
        json!({"mcpServers": {"local": fixture(&[])}}).to_string(),
    )
    .unwrap();
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(out.stdout.lines().any(|l| l == "local"), "{}", out.stdout);
    std::fs::remove_file(&local).unwrap();
    // ...and so is $XDG_CONFIG_HOME/openpact/mcp.json.
    let user = sc
        .path()
        .join("xdg-config")
        .join("openpact")
        .join("mcp.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(
        &user,
        json!({"mcpServers": {"user": fixture(&[])}}).to_string(),
    )
    .unwrap();
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(out.stdout.lines().any(|l| l == "user"), "{}", out.stdout);
}

#[tokio::test]
async fn state_dir_comes_from_the_flag_then_the_variable() {
    let (sc, cfg, state) = fx_only();
    let from_env = sc.path().join("env-state");
    let out = openpact(
        &sc,
        &["--config", s(&cfg), "config", "check"],
        &[("OPENPACT_STATE_DIR", s(&from_env))],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout
            .contains(&format!("state dir: {}", from_env.display())),
        "{}",
        out.stdout
    );

    let out = openpact(
        &sc,
        &["--config", s(&cfg), "config", "check", "--json"],
        &[("OPENPACT_STATE_DIR", s(&from_env))],
        None,
    )
    .await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["stateDir"], s(&from_env));

    // The flag wins over the variable.
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "config",
            "check",
            "--state-dir",
            s(&state),
        ],
        &[("OPENPACT_STATE_DIR", s(&from_env))],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout
            .contains(&format!("state dir: {}", state.display())),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("env-state"), "{}", out.stdout);

    // Neither: $XDG_STATE_HOME/openpact (the helper points it into the scratch dir).
    let out = openpact(&sc, &["--config", s(&cfg), "config", "check"], &[], None).await;
    out.expect_code(0);
    let xdg = sc.path().join("xdg-state").join("openpact");
    assert!(
        out.stdout
            .contains(&format!("state dir: {}", xdg.display())),
        "{}",
        out.stdout
    );
}
