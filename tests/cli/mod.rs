//! The command line, run as a real process: `tools`, `call`, `servers`, `config check`,
//! `--mcp`, the global flags and where the config and state dir come from. This module
//! holds the isolated runner and the shared configs.
//!
//! - `tools`, `call`, `servers`, `config`, `sandbox`: one subcommand each.
//! - `locations`: the global flags and where the config and the state dir come from.
//! - `serving`: `--mcp`, the example config, usage.
//! - `readme`: every command README.md shows, walked as a user with the example config and
//!   with none.
//!
//! Every run gets its own scratch dir as working directory, `HOME` and XDG dirs, so the
//! real user's config and state are never read or written.

mod call;
mod config;
mod first_hour;
mod http_token;
mod locations;
mod readme;
mod sandbox;
mod servers;
mod serving;
mod tools;

use crate::support::{OPENPACT, Ran, Scratch, fixture, s};
use serde_json::json;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// No CLI command here should take more than a second or two; this only stops a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// `openpact ARGS` as [`openpact`] runs it, stdout and stderr piped, not yet started.
fn isolated(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Command {
    let root = scratch.path();
    for d in ["cwd", "home", "xdg-config", "xdg-state"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let mut cmd = Command::new(OPENPACT);
    cmd.args(args)
        .current_dir(root.join("cwd"))
        .env_remove("OPENPACT_CONFIG")
        .env_remove("OPENPACT_STATE_DIR")
        .env_remove("OPENPACT_LOG")
        .env_remove("RUST_LOG")
        .env_remove("NOPE_VAR")
        .env_remove("OPENPACT_HTTP_TOKEN")
        .env_remove("OPENPACT_REGISTRY_URL")
        .env("HOME", root.join("home"))
        .env("XDG_CONFIG_HOME", root.join("xdg-config"))
        .env("XDG_STATE_HOME", root.join("xdg-state"))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs `openpact ARGS` isolated in `scratch`: its working directory is an empty
/// `scratch/cwd`, `HOME` and the XDG dirs point into the scratch dir, and no `OPENPACT_*`,
/// log, `NOPE_VAR` or `OPENPACT_HTTP_TOKEN` variables leak in from the test's environment.
/// `env` is applied last.
async fn openpact(
    scratch: &Scratch,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> Ran {
    let mut cmd = isolated(scratch, args, env);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().expect("spawn openpact");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).await.unwrap();
        drop(pipe);
    }
    let out = tokio::time::timeout(LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("openpact {args:?} did not finish within {LIMIT:?}"))
        .unwrap();
    Ran::from_output(format!("openpact {args:?}"), &out)
}

/// A scratch dir with a config and the state dir beside it: what most runs point at.
struct Cli {
    sc: Scratch,
    cfg: PathBuf,
    state: PathBuf,
}

impl Cli {
    /// `--config CFG --state-dir STATE`.
    fn flags(&self) -> [&str; 4] {
        ["--config", s(&self.cfg), "--state-dir", s(&self.state)]
    }

    /// `openpact --config CFG --state-dir STATE ARGS` as [`openpact`] runs it, with no extra
    /// environment and no stdin.
    async fn run(&self, args: &[&str]) -> Ran {
        self.run_env(args, &[]).await
    }

    /// [`Cli::run`] with `env`.
    async fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        openpact(&self.sc, &[&self.flags()[..], args].concat(), env, None).await
    }

    /// [`Cli::run`] with the global flags after `ARGS`.
    async fn run_after(&self, args: &[&str]) -> Ran {
        openpact(&self.sc, &[args, &self.flags()[..]].concat(), &[], None).await
    }
}

/// Stdout as one JSON value.
fn stdout_json(out: &Ran) -> serde_json::Value {
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout))
}

/// A scratch dir with a config holding these servers (and `openpact` settings), plus the
/// state dir beside it.
fn with_servers(servers: serde_json::Value, openpact: Option<serde_json::Value>) -> Cli {
    let sc = Scratch::new();
    let cfg = sc.servers(servers, openpact);
    let state = sc.state();
    Cli { sc, cfg, state }
}

/// A scratch dir with a config holding the fixture as `fx`, plus its state dir. The fixture
/// answers in milliseconds; the short timeout makes a lost request fail the test quickly.
fn fx_only() -> Cli {
    with_servers(
        json!({ "fx": {"command": crate::support::FIXTURE, "timeout": "20s"} }),
        None,
    )
}

/// The fixture as `fx` and a server that exits with 9 before reading anything as `bad`.
fn fx_and_bad() -> Cli {
    with_servers(
        json!({ "fx": fixture(&[]), "bad": fixture(&["--exit-at-start", "9"]) }),
        None,
    )
}

/// The names of the fixture's built-in tools (see its header).
const FIXTURE_TOOLS: [&str; 24] = [
    "echo",
    "add",
    "slow",
    "fail",
    "echo_structured",
    "error_with",
    "stderr",
    "crash",
    "huge",
    "flood",
    "garbage",
    "progress",
    "sample",
    "elicit",
    "roots",
    "log",
    "env",
    "cwd",
    "args",
    "pids",
    "touch",
    "cancelled",
    "calls",
    "change_tools",
];

/// Now as `YYYY-MM-DDTHH:MM:SSZ` (these sort like the times they stand for), written by
/// chrono rather than `openpact::time`, so a check never grades the hub's formatter by itself.
fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `2026-11-21T06:40:01Z`: exactly this shape, digits where digits go.
fn is_rfc3339_z(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}
