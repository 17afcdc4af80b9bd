//! Parts 3 and 4: startup to a complete tool list with 1, 10 and 50 servers, and the hub's
//! memory once 50 have started.
//!
//! The hub is spawned with N fixtures in its config (the default sandbox on: part 9 compares
//! it with the sandbox off); the bench answers `initialize`, lists (following `nextCursor`),
//! and lists again on every `notifications/tools/list_changed` until every fixture's tools
//! are there. The direct side is the same N fixtures started by
//! the bench itself, from as many threads as CPUs, handshaken concurrently: the time until
//! the slowest of them has listed its tools, which is what the machine needs to start N
//! processes at all. Runs alternate, so drift in the machine's load hits both alike.
//!
//! The CI gate: the fastest hub run with 50 servers over [`REGRESSION_MS`] fails the run.
//! The design goal (the hub adds at most [`GOAL_SLACK_MS`] to starting its servers) is
//! information: with 50 servers the limit is process creation on a 2-CPU VM (each exec pays
//! glibc's ~75 trapping `cpuid` probes, about 1 ms of CPU), and the bench starting the same
//! 50 fixtures with nothing in between has measured 47–124 ms over sessions.

use crate::client::{
    Peer, children, cpu_seconds, fixture_entry, hub_command, pass_through, spawn_fixture,
    status_field,
};
use crate::sandbox::{Confinement, confinement, descendants};
use crate::{Ctx, Params, median_by, min_by, ms};
use anyhow::{Result, anyhow, bail};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub const SERVER_COUNTS: [usize; 3] = [1, 10, 50];
/// The CI gate: 50 servers to the complete list, in the fastest run.
pub const REGRESSION_MS: f64 = 1000.0;
/// The design goal: hub(50) ≤ the bench starting 50 fixtures itself + this.
pub const GOAL_SLACK_MS: f64 = 50.0;
/// The design goal for the hub's VmRSS with 50 servers.
pub const GOAL_RSS_MIB: f64 = 15.0;
/// How long a started hub sits idle before its settled memory is read.
pub const RSS_SETTLE: Duration = Duration::from_secs(1);

/// `n` fixtures started by this program itself: spawn of the first → every tool list
/// received. Returns the time and the number of tools listed.
pub fn direct_together(ctx: &Ctx, n: usize) -> Result<(f64, usize)> {
    // As many spawning threads as CPUs (the hub spawns from a pool too); each spawns its
    // share one after another, then handshakes them all.
    let threads = std::thread::available_parallelism()
        .map_or(2, std::num::NonZero::get)
        .clamp(1, n.max(1));
    let t0 = Instant::now();
    let results: Vec<Result<(Vec<Peer>, usize)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| scope.spawn(move || start_share(ctx, (t..n).step_by(threads))))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a spawning thread panicked")))
            })
            .collect()
    });
    let took = ms(t0.elapsed());
    let mut all = Vec::new();
    let mut tools = 0;
    for r in results {
        let (peers, t) = r?;
        all.extend(peers);
        tools += t;
    }
    // Close every stdin first so that they all exit at once, then reap them.
    for peer in &mut all {
        peer.w.take();
    }
    drop(all);
    Ok((took, tools))
}

/// One spawning thread's share of [`direct_together`].
fn start_share(ctx: &Ctx, share: impl Iterator<Item = usize>) -> Result<(Vec<Peer>, usize)> {
    let mut peers = Vec::new();
    for i in share {
        let mut peer = spawn_fixture(ctx, &format!("fixture #{i} started together"))?;
        let id = peer.send_request("initialize", Peer::initialize_params())?;
        peers.push((peer, id));
    }
    for (peer, id) in &mut peers {
        peer.response(*id, "initialize")?;
        peer.notify("notifications/initialized")?;
        *id = peer.send_request("tools/list", json!({}))?;
    }
    let mut tools = 0;
    for (peer, id) in &mut peers {
        let page = peer.response(*id, "tools/list")?;
        tools += page
            .get("tools")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
    }
    Ok((peers.into_iter().map(|(p, _)| p).collect(), tools))
}

pub struct HubStartup {
    pub servers: usize,
    /// Spawn → `initialize` answered.
    pub init_ms: f64,
    /// Spawn → the first complete listing (all pages) and how many tools it had.
    pub first_list_ms: f64,
    pub first_list_tools: usize,
    /// Spawn → a listing with every server's tools.
    pub full_ms: f64,
    pub listings: usize,
    /// Listings abandoned because a cursor went stale (the list changed between pages).
    pub stale_listings: usize,
    /// CPU used until the list was complete: the hub, and its children together.
    pub hub_cpu_ms: f64,
    pub children_cpu_ms: f64,
    pub list_changed: u64,
    pub rss_kib: u64,
    /// VmRSS once the hub has sat idle for [`RSS_SETTLE`] after the complete list, when the
    /// run asked for it (memory keeps growing for a moment after startup).
    pub rss_settled_kib: Option<u64>,
    pub hwm_kib: u64,
    pub threads: u64,
    pub shutdown_ms: f64,
    /// How the hub's fixtures ran, read once the list was complete (after the timing):
    /// part 9 checks that its "on" hubs really were sandboxed and its "off" hubs not.
    pub confinement: Confinement,
}

impl HubStartup {
    /// The memory figure of the goal: the larger of the two readings.
    pub fn rss_after_startup_kib(&self) -> u64 {
        self.rss_kib.max(self.rss_settled_kib.unwrap_or(0))
    }
}

/// One start of the hub measured by [`hub_startup`].
pub struct HubRun<'a> {
    /// Names the config and the stderr log in `bench-work/`.
    pub config: &'a str,
    /// The config's `openpact` settings.
    pub settings: &'a Value,
    /// The config's `mcpServers`: name → entry.
    pub servers: &'a Map<String, Value>,
    /// Set in the hub's environment (and so its servers'): part 12's scratch HOME.
    pub env: &'a [(&'a str, PathBuf)],
    pub rep: usize,
    /// Read VmRSS again after [`RSS_SETTLE`] idle (it costs that second).
    pub settle: bool,
}

/// `n` fixtures named `s0` … `sN-1`.
pub fn fixtures(ctx: &Ctx, n: usize) -> Map<String, Value> {
    (0..n)
        .map(|i| (format!("s{i}"), fixture_entry(ctx, &[])))
        .collect()
}

/// Starts a hub with `run.servers` and times it to a tool list holding every server's tools:
/// `per_server` each when every server is a fixture, else at least one from each (a server's
/// tools enter the hub's list together).
pub fn hub_startup(ctx: &Ctx, run: &HubRun, per_server: Option<usize>) -> Result<HubStartup> {
    let servers = run.servers.len();
    let mut cmd = hub_command(ctx, run.config, run.servers.clone(), run.settings, &[])?;
    cmd.envs(run.env.iter().map(|(k, v)| (k, v)));
    let mut hub = Peer::spawn(run.config, cmd)?;
    hub.label = format!(
        "hub {} with {servers} servers (rep {})",
        run.config, run.rep
    );
    hub.initialize()?;
    let init = hub.spawned_at.elapsed();
    let expected = servers * per_server.unwrap_or(1);
    let mut first = None;
    let (mut listings, mut stale_listings) = (0, 0);
    let mut seen_changes = hub.list_changed;
    loop {
        listings += 1;
        // Only the servers' tools count (`NAME:…`): the hub adds tools of its own.
        let listed = hub.list_tools()?.map(|all| {
            let ours: Vec<&str> = all
                .iter()
                .filter_map(|t| t.split_once(':').map(|(server, _)| server))
                .filter(|server| run.servers.contains_key(*server))
                .collect();
            let from: HashSet<&str> = ours.iter().copied().collect();
            (ours.len(), from.len())
        });
        let now = hub.spawned_at.elapsed();
        let Some((tools, from)) = listed else {
            stale_listings += 1;
            continue;
        };
        first.get_or_insert((now, tools));
        if tools >= expected && from == servers {
            break;
        }
        // Not all there yet: list again on the next list_changed (or now, if one came
        // while we were listing).
        if hub.list_changed == seen_changes {
            hub.wait_list_changed()?;
        }
        seen_changes = hub.list_changed;
    }
    let full = hub.spawned_at.elapsed();
    let hub_cpu_ms = cpu_seconds(hub.pid, ctx.clk_tck)? * 1e3;
    let children_cpu_ms = children(hub.pid)
        .iter()
        .filter_map(|c| cpu_seconds(*c, ctx.clk_tck).ok())
        .sum::<f64>()
        * 1e3;
    let confinement = match per_server {
        Some(_) => confinement(ctx, hub.pid),
        None => descendants(hub.pid),
    };
    let (first_at, first_count) = first.unwrap_or((full, expected));
    let rss_kib = status_field(hub.pid, "VmRSS")?;
    let rss_settled_kib = if run.settle {
        std::thread::sleep(RSS_SETTLE);
        Some(status_field(hub.pid, "VmRSS")?)
    } else {
        None
    };
    Ok(HubStartup {
        servers,
        init_ms: ms(init),
        first_list_ms: ms(first_at),
        first_list_tools: first_count,
        full_ms: ms(full),
        listings,
        stale_listings,
        hub_cpu_ms,
        children_cpu_ms,
        list_changed: hub.list_changed,
        rss_kib,
        rss_settled_kib,
        hwm_kib: status_field(hub.pid, "VmHWM")?,
        threads: status_field(hub.pid, "Threads")?,
        shutdown_ms: ms(hub.close(Duration::from_secs(10))),
        confinement,
    })
}

/// Per server count: the bench's own starts and the hub's, in the order they ran.
pub struct Count {
    pub servers: usize,
    /// The bench starting `servers` fixtures together, ms per run.
    pub direct_ms: Vec<f64>,
    pub hub: Vec<HubStartup>,
}

impl Count {
    pub fn median_direct_ms(&self) -> f64 {
        median_by(&self.direct_ms, |x| *x).copied().unwrap_or(0.0)
    }

    /// The run with the median time to the full list.
    pub fn median_hub(&self) -> Option<&HubStartup> {
        median_by(&self.hub, |h| h.full_ms)
    }

    pub fn fastest_hub_ms(&self) -> f64 {
        min_by(&self.hub, |h| h.full_ms)
    }
}

pub struct StartupPart {
    pub per_server: usize,
    pub counts: Vec<Count>,
}

impl StartupPart {
    pub fn count(&self, servers: usize) -> Option<&Count> {
        self.counts.iter().find(|c| c.servers == servers)
    }

    /// The gate: even the fastest run with 50 servers took over [`REGRESSION_MS`].
    pub fn regressed(&self) -> bool {
        self.count(50)
            .is_some_and(|c| c.fastest_hub_ms() > REGRESSION_MS)
    }
}

pub fn run(ctx: &Ctx, p: &Params) -> Result<StartupPart> {
    let wd = &ctx.watchdog;
    wd.arm("startup of one fixture", Duration::from_secs(30));
    let (_, per_server) = direct_together(ctx, 1)?;
    let mut counts = Vec::new();
    for &n in &SERVER_COUNTS {
        wd.arm(
            &format!("startup with {n} servers"),
            Duration::from_secs(120),
        );
        let mut count = Count {
            servers: n,
            direct_ms: Vec::new(),
            hub: Vec::new(),
        };
        for rep in 0..p.startup_reps.max(1) {
            let (took, tools) = direct_together(ctx, n)?;
            if tools != n * per_server {
                bail!(
                    "{n} fixtures started together listed {tools} tools, not {}",
                    n * per_server
                );
            }
            count.direct_ms.push(took);
            let settings = pass_through();
            let run = HubRun {
                config: &format!("startup-{n}"),
                settings: &settings,
                servers: &fixtures(ctx, n),
                env: &[],
                rep,
                settle: n == SERVER_COUNTS[SERVER_COUNTS.len() - 1],
            };
            count.hub.push(hub_startup(ctx, &run, Some(per_server))?);
        }
        counts.push(count);
    }
    wd.disarm();
    Ok(StartupPart { per_server, counts })
}
