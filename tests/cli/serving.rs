//! `--mcp` serving over stdio, the repository's example config, and usage errors.

use super::{LIMIT, fx_only, openpact};
use crate::support::{self, OPENPACT, Scratch, s};
use serde_json::json;
use std::path::Path;
use tokio::process::Command;

#[tokio::test]
async fn mcp_flag_serves_over_stdio() {
    let cli = fx_only();
    let mut hub = support::serve_with(&cli.cfg, &["--mcp"], &[]).await;
    let init = tokio::time::timeout(support::WAIT, hub.client.initialize())
        .await
        .expect("initialize answered");
    assert_eq!(init["serverInfo"]["name"], "openpact", "{init:#}");
    assert_eq!(init["protocolVersion"], "2025-11-25", "{init:#}");
    let tools = hub.client.list_tools().await;
    assert!(tools.iter().any(|t| t["name"] == "fx:echo"), "{tools:?}");
    let r = hub
        .client
        .call("fx:echo", json!({"message": "over --mcp"}))
        .await;
    assert_eq!(support::text(&r), "over --mcp");
    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0), "{}", hub.stderr());
}

/// `serve` with its log filter left alone, or set to `level`.
fn serve_logging(cfg: &Path, level: Option<&str>) -> support::Hub {
    let mut cmd = support::openpact_for(cfg, None);
    cmd.arg("serve")
        .env_remove("OPENPACT_LOG")
        .env_remove("RUST_LOG")
        .kill_on_drop(true);
    if let Some(level) = level {
        cmd.env("OPENPACT_LOG", level);
    }
    support::Hub::spawn(cmd)
}

/// Editors show every stderr line of a server as an error: when all is well, `serve` says
/// nothing there, and its info lines are one setting away.
#[tokio::test]
async fn serve_is_quiet_on_stderr_unless_asked() {
    let cli = fx_only();
    for level in [None, Some("info")] {
        let mut hub = serve_logging(&cli.cfg, level);
        support::ready(&mut hub.client, &["fx:echo"]).await;
        let r = hub.client.call("fx:echo", json!({"message": "hi"})).await;
        assert_eq!(support::text(&r), "hi");
        let (code, _) = hub.close().await;
        assert_eq!(code, Some(0), "{}", hub.stderr());
        let log = hub.stderr();
        match level {
            None => assert_eq!(log, "", "serve wrote to stderr by default"),
            Some(_) => assert!(
                log.contains("INFO") && log.contains("serving MCP on stdio"),
                "{log}"
            ),
        }
    }
}

#[tokio::test]
async fn the_example_config_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(
        root.join("mcp.example.json").is_file(),
        "mcp.example.json is missing at the repository root"
    );
    let sc = Scratch::new();
    let state = sc.path().join("state");
    let out = Command::new(OPENPACT)
        .args([
            "--config",
            "mcp.example.json",
            "--state-dir",
            s(&state),
            "config",
            "check",
        ])
        .current_dir(root)
        .env_remove("OPENPACT_CONFIG")
        .env_remove("OPENPACT_STATE_DIR")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(LIMIT, out)
        .await
        .expect("config check finishes")
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("config: mcp.example.json") || stdout.contains("mcp.example.json"),
        "{stdout}"
    );
    assert!(stdout.contains("ok: "), "{stdout}");
}

#[tokio::test]
async fn no_subcommand_exits_2_with_a_hint_and_help_exits_0() {
    let sc = Scratch::new();
    let state = sc.path().join("state");
    let out = openpact(&sc, &["--state-dir", s(&state)], &[], None).await;
    out.expect_code(2);
    assert!(out.stderr.contains("openpact --help"), "{}", out.stderr);
    assert!(out.stderr.contains("openpact serve"), "{}", out.stderr);
    assert_eq!(out.stdout, "", "stdout stays clean");

    let out = openpact(&sc, &["--help"], &[], None).await;
    out.expect_code(0);
    for cmd in [
        "serve",
        "tools",
        "call",
        "servers",
        "config",
        "--config",
        "--state-dir",
        "--mcp",
    ] {
        assert!(
            out.stdout.contains(cmd),
            "--help mentions {cmd}: {}",
            out.stdout
        );
    }
}
