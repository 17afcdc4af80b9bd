//! `openpact serve` against the fixture server: the MCP requests the hub answers itself,
//! the merged catalogue, names, routing and pass-through of ids, arguments and results.
//! This module holds what they share: the fixture run directly, and `openpact` started by
//! hand.
//!
//! - `lifecycle`: `initialize`, `ping`, `server/discover`, unknown methods.
//! - `catalogue`: the merged tool list and its pagination.
//! - `filters`: `enabledTools` / `disabledTools`.
//! - `handshake`: nothing unasked before `initialized`; `list_changed` only for lists given.
//! - `routing`: calls routed and passed through, errors.
//! - `names`: portable names and namespaces.
//! - `startup`: slow and late servers, `list_changed`, empty configs.
//! - `views`: profiles (stdio and HTTP endpoints) and tool search.
//! - `load`: concurrency, batches, `--mcp`, stale cursors, requests at startup.

mod catalogue;
mod filters;
mod handshake;
mod lifecycle;
mod load;
mod names;
mod routing;
mod startup;
mod views;

use crate::support::{Client, FIXTURE, OPENPACT};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The fixture run directly (no hub), initialized.
async fn direct_fixture(args: &[&str]) -> (Child, Client) {
    let mut child = Command::new(FIXTURE)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut client = Client::over(child.stdin.take().unwrap(), child.stdout.take().unwrap());
    client.initialize().await;
    (child, client)
}

/// How many tools the fixture offers without `--tools` and before `late_tool`, asked of
/// the fixture itself so that new fixture tools do not break the counts here.
async fn fixture_tools() -> usize {
    let (_child, mut direct) = direct_fixture(&[]).await;
    direct.list_tools().await.len()
}

/// `openpact serve` started by hand (for what the harness does not cover: another working
/// directory and environment, or reading stdout as raw text).
fn spawn_openpact(
    args: &[&str],
    cwd: &Path,
    env: &[(&str, &str)],
) -> (Child, ChildStdin, ChildStdout) {
    let mut child = Command::new(OPENPACT)
        .args(args)
        .current_dir(cwd)
        .envs(env.iter().copied())
        .env("OPENPACT_LOG", "info,openpact=debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    (child, stdin, stdout)
}

fn portable_ok(n: &str) -> bool {
    (1..=64).contains(&n.len())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn initialize_params(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}})
}
