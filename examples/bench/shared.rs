//! Part 11: one hub for every editor window. A call's p50 through `openpact connect` (the
//! editor's pipes handed to the shared hub, `connect` watching) against `openpact serve` on
//! stdio, interleaved ([`paired`]) on fresh processes, with a direct connection to
//! the fixture measured in the same run for scale; and the resident memory (VmRSS of every
//! process: hubs, `connect`s and servers) of five windows over the pinned real servers —
//! each window with its own `serve`, against all five through `connect`.
//!
//! The memory half needs the peers of `.ci/peers.sh` (the real servers): without them it is
//! skipped with a note. The goal (connect ≤ [`GOAL_RATIO`]× serve) is information, never a
//! gate.

use crate::client::{
    CallTemplate, Peer, check_echo, children, openpact_command, pass_through, spawn_fixture,
    start_hub, status_field, write_config,
};
use crate::latency::{Paired, paired};
use crate::remote::peers_json;
use crate::{Ctx, Params, median_by};
use anyhow::{Result, anyhow, bail};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The design goal: a call through `connect` takes at most this many times a call through
/// `serve` on stdio.
pub const GOAL_RATIO: f64 = 1.5;
/// Editor windows in the memory comparison.
pub const WINDOWS: usize = 5;

pub struct SharedPart {
    /// Interleaved (serve, connect) runs, each on fresh processes.
    pub runs: Vec<Paired>,
    /// Interleaved (direct, serve) once, for scale.
    pub direct: Paired,
    pub memory: Option<Memory>,
}

impl SharedPart {
    /// The run with the median connect/serve ratio.
    pub fn median(&self) -> Option<&Paired> {
        median_by(&self.runs, |r| crate::ratio(r.b_p50_us, r.a_p50_us))
    }
}

/// Five windows' resident memory, in KiB, and how many processes it took.
pub struct Memory {
    pub servers: usize,
    pub separate_kib: u64,
    pub separate_processes: usize,
    pub shared_kib: u64,
    pub shared_processes: usize,
}

pub fn run(ctx: &Ctx, p: &Params) -> Result<SharedPart> {
    let calls = (p.latency_warmup / 2, p.latency_calls / 4);
    let echo = CallTemplate::echo("fx:echo");
    let mut runs = Vec::new();
    for run in 0..p.policy_runs {
        let (mut serve, _) = start_hub(ctx, &format!("shared-serve-{run}"), &pass_through())?;
        let (mut connect, hub) = start_connect(ctx, run)?;
        runs.push(paired((&mut serve, &echo), (&mut connect, &echo), calls)?);
        serve.close(Duration::from_secs(5));
        connect.close(Duration::from_secs(5));
        stop(hub);
    }
    let mut direct = spawn_fixture(ctx, "shared-direct")?;
    direct.initialize()?;
    let (mut serve, _) = start_hub(ctx, "shared-serve-direct", &pass_through())?;
    let direct_pair = paired(
        (&mut direct, &CallTemplate::echo("echo")),
        (&mut serve, &echo),
        calls,
    )?;
    serve.close(Duration::from_secs(5));
    direct.close(Duration::from_secs(5));
    let memory = match peers_json() {
        Some(peers) => Some(memory(ctx, &peers)?),
        None => {
            println!(
                "11. shared hub: memory skipped, the test peers are not installed (run `bash .ci/peers.sh target/peers`)"
            );
            None
        }
    };
    Ok(SharedPart {
        runs,
        direct: direct_pair,
        memory,
    })
}

/// The runtime dir the bench's shared hubs put their sockets in (short: a socket path is
/// limited to 107 bytes).
fn runtime_dir(ctx: &Ctx) -> PathBuf {
    ctx.work.join("run")
}

/// `openpact connect` on the pass-through config with one fixture; its shared hub's pid.
fn start_connect(ctx: &Ctx, run: usize) -> Result<(Peer, u32)> {
    let label = format!("shared-connect-{run}");
    let mut settings = pass_through();
    settings["shared"] = json!({"idleExit": "10s"});
    let map: Map<String, Value> = [("fx".to_string(), json!({"command": ctx.fixture}))]
        .into_iter()
        .collect();
    let config = write_config(ctx, &label, map, &settings)?;
    let state = ctx.work.join(format!("state-{label}"));
    let _ = std::fs::remove_dir_all(&state);
    let mut peer = window(ctx, &label, &config, &state)?;
    let tools = peer
        .list_tools()?
        .ok_or_else(|| anyhow!("connect: cursor went stale"))?;
    check_echo(&mut peer, &tools, "fx:echo")?;
    Ok((peer, shared_hub(&config)?))
}

/// One window: `openpact connect`, initialized.
fn window(ctx: &Ctx, label: &str, config: &Path, state: &Path) -> Result<Peer> {
    let mut cmd = openpact_command(ctx, label, config, state, &["connect"])?;
    cmd.env("XDG_RUNTIME_DIR", runtime_dir(ctx));
    let mut peer = Peer::spawn(label, cmd)?;
    peer.initialize()?;
    Ok(peer)
}

/// The pid of the shared hub serving `config`.
fn shared_hub(config: &Path) -> Result<u32> {
    let config = config.to_string_lossy();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<u32> = std::fs::read_dir("/proc")?
            .flatten()
            .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                    let c = String::from_utf8_lossy(&c).replace('\0', " ");
                    c.contains("serve --shared") && c.contains(config.as_ref())
                })
            })
            .collect();
        match found.as_slice() {
            [pid] => {
                crate::client::pids().push(*pid);
                return Ok(*pid);
            }
            [] if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => bail!("{} shared hubs serve {config}, not one", found.len()),
        }
    }
}

/// Stops a shared hub now rather than after its idle time.
fn stop(pid: u32) {
    // Unix only, as the hub is so far (src/platform/mod.rs).
    #[cfg(unix)]
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(0)),
        nix::sys::signal::Signal::SIGTERM,
    );
}

/// `pid` and all its descendants.
fn tree(pid: u32) -> Vec<u32> {
    let mut all = vec![pid];
    let mut i = 0;
    while i < all.len() {
        all.extend(children(all[i]));
        i += 1;
    }
    all
}

fn rss_kib(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| status_field(*p, "VmRSS").ok())
        .sum()
}

/// Lists until every one of `servers` has tools listed (real servers take seconds to start).
fn wait_for_servers(peer: &mut Peer, servers: &[String]) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let tools = peer.list_tools()?.unwrap_or_default();
        let missing: Vec<&String> = servers
            .iter()
            .filter(|s| !tools.iter().any(|t| t.starts_with(&format!("{s}:"))))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{}: no tools of {missing:?} after 120 s", peer.label);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Five windows over the real servers: separate `serve`s, then one shared hub.
fn memory(ctx: &Ctx, peers: &Path) -> Result<Memory> {
    let map = crate::retrieval::real_servers(ctx, peers)?;
    let names: Vec<String> = map.keys().cloned().collect();
    let settings = pass_through();
    // Each window's own hub and servers.
    let mut hubs = Vec::new();
    for w in 0..WINDOWS {
        let label = format!("windows-serve-{w}");
        let mut hub = Peer::spawn(
            &label,
            crate::client::hub_command(ctx, &label, map.clone(), &settings, &[])?,
        )?;
        hub.initialize()?;
        hubs.push(hub);
    }
    for hub in &mut hubs {
        wait_for_servers(hub, &names)?;
    }
    std::thread::sleep(SETTLE);
    let separate: Vec<u32> = hubs.iter().flat_map(|h| tree(h.pid)).collect();
    let separate_kib = rss_kib(&separate);
    for hub in hubs {
        hub.close(Duration::from_secs(5));
    }
    // The same five windows through `connect`.
    let label = "windows-shared";
    let mut shared_settings = settings.clone();
    shared_settings["shared"] = json!({"idleExit": "10s"});
    let config = write_config(ctx, label, map, &shared_settings)?;
    let state = ctx.work.join(format!("state-{label}"));
    let _ = std::fs::remove_dir_all(&state);
    let mut windows = Vec::new();
    for w in 0..WINDOWS {
        windows.push(window(ctx, &format!("{label}-{w}"), &config, &state)?);
    }
    for w in &mut windows {
        wait_for_servers(w, &names)?;
    }
    let hub = shared_hub(&config)?;
    std::thread::sleep(SETTLE);
    let mut shared: Vec<u32> = windows.iter().map(|w| w.pid).collect();
    shared.extend(tree(hub));
    let shared_kib = rss_kib(&shared);
    for w in windows {
        w.close(Duration::from_secs(5));
    }
    stop(hub);
    Ok(Memory {
        servers: names.len(),
        separate_kib,
        separate_processes: separate.len(),
        shared_kib,
        shared_processes: shared.len(),
    })
}

/// How long the processes sit idle before their memory is read (servers finish starting up).
const SETTLE: Duration = Duration::from_secs(2);
