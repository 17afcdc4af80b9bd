//! The openpact soak: does the hub hold steady over many sessions and over time?
//!
//! ```text
//! cargo build --release --features internals --bin openpact --bin openpact-fixture
//! cargo run --release --example soak -- --sessions 30000   # session churn, two phases
//! cargo run --release --example soak -- --minutes 15       # mixed traffic (the default)
//! cargo run --release --example soak -- --minutes 1        # the CI run
//! ```
//!
//! Both modes start the release hub (`openpact serve --http 127.0.0.1:0`, a fresh state dir
//! under `target/soak-work/`) with `openpact-fixture` servers, and watch it from outside:
//! its VmRSS, open fds, threads and child processes from `/proc` ([`probe`]), and the
//! `openpact_sessions` and `openpact_runtime_tasks` gauges of its `/metrics`.
//!
//! - [`sessions`] (`--sessions N`): N HTTP sessions that each initialize, make five
//!   `fx:echo` calls and are abandoned, then N more that end with DELETE, 8 clients at a
//!   time, each phase on a fresh hub. PASS when each phase's RSS after N sessions is within
//!   10% of its RSS after the first 1,000.
//! - [`soak`] (`--minutes M`): M minutes of mixed traffic from a stdio client and 24 HTTP
//!   clients of both protocol eras ([`work`]), code-mode programs among it (each a worker
//!   process started and gone), against one hub whose servers crash, flood
//!   stderr, hang, and (a remote one) disappear; every answer is checked. PASS when no
//!   response was lost or cross-delivered, RSS grew under 10% from minute 2 (25% of the run
//!   when shorter than 3 minutes) to the end, and fds, threads, sessions, tasks and children
//!   are back to their baseline once the clients are gone.
//!
//! [`hub`] starts and stops the processes, [`mcp`] holds the MCP clients (handshake HTTP
//! sessions, 2026-07-28 stateless calls over HTTP, and stdio).
//!
//! Exit status: 0 on PASS, 1 on FAIL or an error, 2 on a bad command line.

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod hub;
mod mcp;
mod probe;
mod sessions;
mod soak;
mod work;

use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "usage: cargo run --release --example soak -- [--minutes M | --sessions N]
  --minutes M    mixed traffic for M minutes (default 15), then the leak checks
  --sessions N   N abandoned HTTP sessions, then N DELETEd ones (default 30000), RSS compared
Build the binaries first: cargo build --release --features internals --bin openpact --bin openpact-fixture
exit status: 0 PASS, 1 FAIL or error, 2 bad arguments";

/// What to run.
enum Mode {
    Soak { minutes: f64 },
    Sessions { count: usize },
}

fn parse_args() -> std::result::Result<Option<Mode>, String> {
    let mut args = std::env::args().skip(1);
    let mut mode = None;
    while let Some(arg) = args.next() {
        let mut value = |what: &str| args.next().ok_or_else(|| format!("{what} needs a value"));
        match arg.as_str() {
            "--minutes" => {
                let m = value("--minutes")?
                    .parse::<f64>()
                    .ok()
                    .filter(|m| *m > 0.0)
                    .ok_or("--minutes takes a positive number")?;
                mode = Some(Mode::Soak { minutes: m });
            }
            "--sessions" => {
                let n = value("--sessions")?
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or("--sessions takes a positive whole number")?;
                mode = Some(Mode::Sessions { count: n });
            }
            "--help" | "-h" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(mode.unwrap_or(Mode::Soak { minutes: 15.0 })))
}

fn main() -> ExitCode {
    let mode = match parse_args() {
        Ok(Some(mode)) => mode,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("soak: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let outcome = locate().and_then(|ctx| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("cannot start the runtime")?;
        let pass = rt.block_on(async {
            match mode {
                Mode::Sessions { count } => sessions::run(&ctx, count).await,
                Mode::Soak { minutes } => soak::run(&ctx, minutes).await,
            }
        });
        rt.shutdown_timeout(std::time::Duration::from_secs(2));
        pass
    });
    hub::kill_all();
    match outcome {
        Ok(true) => {
            println!("soak: PASS");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("soak: FAIL");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("soak: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Paths of the run.
pub struct Ctx {
    pub openpact: PathBuf,
    pub fixture: PathBuf,
    /// `target/soak-work/`: configs, state dirs, the processes' stderr logs.
    pub work: PathBuf,
}

fn locate() -> Result<Ctx> {
    let exe = std::env::current_exe().context("cannot find the soak executable's own path")?;
    // target/release/examples/soak → target/release
    let release = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow!("unexpected soak location {}", exe.display()))?
        .to_path_buf();
    let openpact = release.join("openpact");
    let fixture = release.join("openpact-fixture");
    for bin in [&openpact, &fixture] {
        if !bin.is_file() {
            bail!(
                "{} is missing; build the binaries first:\n    cargo build --release --features internals --bin openpact --bin openpact-fixture",
                bin.display()
            );
        }
    }
    let target = release
        .parent()
        .map_or_else(|| release.clone(), Path::to_path_buf);
    let work = target.join("soak-work");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    Ok(Ctx {
        openpact,
        fixture,
        work,
    })
}

/// MiB from KiB, for the tables.
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
