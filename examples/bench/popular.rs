//! Part 12: what the sandbox costs the popular servers — one hub with the compatibility
//! suite's servers (installed by `.ci/compat.sh`), launched as their READMEs say, from spawn
//! to a tool list holding every server's tools, three ways: the default sandbox on a first
//! start (each server's private package caches and data folder emptied), the default sandbox
//! on a later start (left as the last start made them), and `"sandbox": {"default": "off"}`.
//!
//! The hub runs in a scratch HOME under `bench-work/` with `XDG_CACHE_HOME` and `XDG_DATA_HOME`
//! inside it, so emptying `$XDG_CACHE_HOME/openpact/servers/*` and
//! `$XDG_DATA_HOME/openpact/servers/*` never touches the user's. The three alternate, each
//! rep in the opposite order of the one before; the figures are the fastest and the median
//! run of each. Every process below each hub is checked in `/proc/PID/status`: sandboxed, at
//! least one confined process per server (the wrapper outside each server's PID namespace
//! is not); off, none. Information, never a gate. Left out: mcp-server-kubernetes (needs a kube
//! config and a cluster) and mcp-remote (needs a remote server's URL). Skipped, and said so,
//! when the install is absent.

use crate::client::pass_through;
use crate::sandbox::sandbox_off;
use crate::startup::{HubRun, HubStartup, hub_startup};
use crate::{Ctx, Params, median_by, min_by, ratio};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The npm servers of the suite, as `npx -y PACKAGE`: (name, package).
const NPX: [(&str, &str); 7] = [
    ("everything", "@modelcontextprotocol/server-everything"),
    ("filesystem", "@modelcontextprotocol/server-filesystem"),
    ("memory", "@modelcontextprotocol/server-memory"),
    (
        "thinking",
        "@modelcontextprotocol/server-sequential-thinking",
    ),
    ("playwright", "@playwright/mcp"),
    ("context7", "@upstash/context7-mcp"),
    ("desktop", "@wonderwhy-er/desktop-commander"),
];

/// The suite's servers this part leaves out, and why.
pub const LEFT_OUT: &str =
    "kubernetes (needs a kube config and a cluster), mcp-remote (needs a remote server's URL)";

/// The three ways the hub starts.
#[derive(Clone, Copy, PartialEq)]
enum Start {
    First,
    Later,
    Off,
}

pub struct PopularPart {
    pub servers: Vec<String>,
    pub first: Vec<HubStartup>,
    pub later: Vec<HubStartup>,
    pub off: Vec<HubStartup>,
}

impl PopularPart {
    pub fn median(runs: &[HubStartup]) -> f64 {
        median_by(runs, |h| h.full_ms).map_or(0.0, |h| h.full_ms)
    }

    pub fn fastest(runs: &[HubStartup]) -> f64 {
        min_by(runs, |h| h.full_ms)
    }

    /// `runs` over off: (fastest, median).
    pub fn ratios(&self, runs: &[HubStartup]) -> (f64, f64) {
        (
            ratio(Self::fastest(runs), Self::fastest(&self.off)),
            ratio(Self::median(runs), Self::median(&self.off)),
        )
    }
}

/// `compat.json` of `.ci/compat.sh`: `OPENPACT_COMPAT_JSON`, else `target/compat/compat.json`;
/// `None` when there is none.
fn install_json(ctx: &Ctx) -> Option<PathBuf> {
    let path = std::env::var_os("OPENPACT_COMPAT_JSON")
        .map_or_else(|| ctx.target.join("compat/compat.json"), PathBuf::from);
    path.is_file().then_some(path)
}

/// The servers' entries, as the compatibility suite (tests/compat.rs) launches them.
fn entries(install: &Value, home: &Path) -> Result<Map<String, Value>> {
    let text = |key: &str| {
        install[key]
            .as_str()
            .ok_or_else(|| anyhow!("compat.json has no {key:?}"))
    };
    let (dir, npx) = (PathBuf::from(text("dir")?), text("npx")?);
    // Not the install itself: a server may write in its working directory.
    let cwd = dir.join("run");
    std::fs::create_dir_all(&cwd).with_context(|| format!("cannot create {}", cwd.display()))?;
    let notes = home.join("projects/notes");
    let mut map = Map::new();
    for (name, package) in NPX {
        let mut entry = json!({"command": npx, "args": ["-y", package], "cwd": cwd});
        match name {
            "filesystem" => entry["args"] = json!(["-y", package, notes]),
            "memory" => entry["env"] = json!({"MEMORY_FILE_PATH": notes.join(".memory.jsonl")}),
            _ => {}
        }
        map.insert(name.to_string(), entry);
    }
    let shop_db = home.join("projects/shop/shop.db");
    let uvx: [(&str, &str, Vec<Value>); 7] = [
        ("time", "mcp-server-time", vec![]),
        ("fetch", "mcp-server-fetch", vec![]),
        (
            "git",
            "mcp-server-git",
            vec![json!("--repository"), json!(notes)],
        ),
        (
            "sqlite",
            "mcp-server-sqlite",
            vec![json!("--db-path"), json!(shop_db)],
        ),
        ("arxiv", "arxiv-mcp-server", vec![]),
        ("markitdown", "markitdown-mcp", vec![]),
        (
            "chroma",
            "chroma-mcp",
            vec![json!("--client-type"), json!("ephemeral")],
        ),
    ];
    for (name, script, args) in uvx {
        let program = install["python"][script]
            .as_str()
            .ok_or_else(|| anyhow!("compat.json names no {script}"))?;
        map.insert(name.to_string(), json!({"command": program, "args": args}));
    }
    Ok(map)
}

/// A home with the projects the servers are pointed at (one a git repository).
fn scratch_home(home: &Path) -> Result<()> {
    let notes = home.join("projects/notes");
    for d in [notes.clone(), home.join("projects/shop")] {
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    if notes.join(".git").is_dir() {
        return Ok(());
    }
    std::fs::write(notes.join("README.md"), "# Notes\n")?;
    for args in [
        &["init", "-q"][..],
        &["add", "README.md"],
        &[
            "-c",
            "user.name=Bench",
            "-c",
            "user.email=bench@example.com",
            "commit",
            "-q",
            "-m",
            "notes",
        ],
    ] {
        let status = std::process::Command::new("git")
            .args(args)
            .current_dir(&notes)
            .env("HOME", home)
            .status()
            .context("cannot run git")?;
        if !status.success() {
            bail!("git {args:?} in {} failed", notes.display());
        }
    }
    Ok(())
}

/// Empties every server's private caches and data folder: the next start is a first one.
fn empty_private(cache: &Path, data: &Path) -> Result<()> {
    for dir in [
        cache.join("openpact/servers"),
        data.join("openpact/servers"),
    ] {
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot empty {}", dir.display()));
            }
            _ => {}
        }
    }
    Ok(())
}

pub fn run(ctx: &Ctx, p: &Params) -> Result<Option<PopularPart>> {
    let Some(path) = install_json(ctx) else {
        println!(
            "12. the popular servers: skipped, the compatibility suite is not installed (run `bash .ci/compat.sh --install-only`, or set OPENPACT_COMPAT_JSON)"
        );
        return Ok(None);
    };
    let install: Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?,
    )
    .with_context(|| format!("{} is not JSON", path.display()))?;
    let home = ctx.work.join("popular-home");
    let (cache, data) = (home.join(".cache"), home.join(".local/share"));
    scratch_home(&home)?;
    let servers = entries(&install, &home)?;
    let env = [
        ("HOME", home.clone()),
        ("XDG_CACHE_HOME", cache.clone()),
        ("XDG_DATA_HOME", data.clone()),
    ];
    let (on_settings, off_settings) = (pass_through(), sandbox_off());
    let mut part = PopularPart {
        servers: servers.keys().cloned().collect(),
        first: Vec::new(),
        later: Vec::new(),
        off: Vec::new(),
    };
    let wd = &ctx.watchdog;
    let reps = if p.quick { 1 } else { 3 };
    for rep in 0..reps {
        let mut order = [Start::First, Start::Later, Start::Off];
        if rep % 2 == 1 {
            order.reverse();
        }
        for start in order {
            let (config, settings) = match start {
                Start::First => {
                    empty_private(&cache, &data)?;
                    ("popular-first", &on_settings)
                }
                Start::Later => ("popular-later", &on_settings),
                Start::Off => ("popular-off", &off_settings),
            };
            wd.arm(
                &format!(
                    "the popular servers: {config} (rep {rep}); a server that never lists its tools is named in bench-work/{config}.stderr.log"
                ),
                Duration::from_secs(180),
            );
            let run = HubRun {
                config,
                settings,
                servers: &servers,
                env: &env,
                rep,
                settle: false,
            };
            let h = hub_startup(ctx, &run, None)?;
            // Sandboxed, each server's wrapper stays outside its PID namespace unconfined and
            // everything it starts is confined; off, nothing is.
            let c = h.confinement;
            let confined = if start == Start::Off {
                c.sandboxed == 0
            } else {
                c.sandboxed >= servers.len()
            };
            if !confined {
                bail!(
                    "hub {config} (rep {rep}): {} of the {} processes below it ran sandboxed (NoNewPrivs 1 and a seccomp filter of their own), which is not what its settings ask for",
                    c.sandboxed,
                    c.fixtures
                );
            }
            match start {
                Start::First => part.first.push(h),
                Start::Later => part.later.push(h),
                Start::Off => part.off.push(h),
            }
        }
    }
    wd.disarm();
    Ok(Some(part))
}
