//! Part 9: what the default sandbox costs — 50 servers to a complete tool list and a call's
//! p50, with the sandbox on (the default: each fixture started through `openpact __sandbox`,
//! Landlock and seccomp, a filtered environment, an egress proxy of its own) against
//! `openpact.sandbox.default: "off"`, in the same run.
//!
//! The startups alternate on and off, each rep in the opposite order of the one before, so a
//! drift in the machine's load hits both alike; the figures are the fastest and the median
//! run of each side. The call's p50 is measured interleaved ([`paired`]) on fresh hubs, for
//! the reason part 6 gives: sequential p50s on a VM move by tens of µs with whether the CPUs
//! sleep between calls. Both are information against the goals (on ≤ [`GOAL_STARTUP_RATIO`]×
//! off for 50 servers; a call's p50 unchanged within noise), never a gate.
//!
//! On the 2-vCPU VM this was written on, 50 servers took about 510–590 ms sandboxed against
//! 100–175 ms without. The wrapper costs each server about 9.5 ms of CPU: exec'ing `openpact`
//! itself, a large PIE binary with ~113,000 relocations (~4.5 ms, as `openpact --version`),
//! and confining (~600 system calls: canonicalizing the granted and carved paths, dropping
//! the bounding capabilities when run as root, the Landlock rules, the seccomp filter).
//!
//! Every hub's fixtures are checked in `/proc/PID/status`: sandboxed ones must show no new
//! privileges and a seccomp filter beyond the bench's own, unsandboxed ones exactly what the
//! bench has (and so passes on). A machine where the sandbox does not take effect ends the
//! run with an error rather than comparing two unconfined hubs.

use crate::client::{CallTemplate, children, pass_through, start_hub, status_field};
use crate::latency::{Paired, paired};
use crate::startup::{HubRun, HubStartup, direct_together, fixtures, hub_startup};
use crate::{Ctx, Params, median_by, min_by, ratio};
use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::time::Duration;

/// Servers in the startup comparison.
pub const SERVERS: usize = 50;
/// The design goal: 50 servers sandboxed take at most this many times as long as unsandboxed.
pub const GOAL_STARTUP_RATIO: f64 = 1.2;

/// [`pass_through`] with the sandbox turned off for every server.
pub fn sandbox_off() -> Value {
    let mut v = pass_through();
    v["sandbox"] = json!({"default": "off"});
    v
}

/// What `/proc/PID/status` says of a process's confinement.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Guard {
    no_new_privs: u64,
    /// 0 none, 1 strict, 2 filter.
    seccomp: u64,
    /// Filters in force (kernels before 5.9 do not say).
    filters: Option<u64>,
}

impl Guard {
    fn read(pid: u32) -> Option<Guard> {
        Some(Guard {
            no_new_privs: status_field(pid, "NoNewPrivs").ok()?,
            seccomp: status_field(pid, "Seccomp").ok()?,
            filters: status_field(pid, "Seccomp_filters").ok(),
        })
    }

    /// What the wrapper adds: no new privileges and a seccomp filter. Compared with the
    /// filters the bench itself runs under, so that a bench started inside a container that
    /// already filters (Seccomp 2) cannot pass for a sandbox.
    fn sandboxed(&self, bench: &Guard) -> bool {
        let more_filters = match (self.filters, bench.filters) {
            (Some(child), Some(own)) => child > own,
            _ => true,
        };
        self.no_new_privs == 1 && self.seccomp == 2 && more_filters
    }
}

/// The fixtures of one hub, by how they ran.
#[derive(Clone, Copy, Default)]
pub struct Confinement {
    /// Fixture processes found (for servers that are not fixtures: every process below the
    /// hub, [`descendants`]).
    pub fixtures: usize,
    /// With no new privileges and a seccomp filter of their own.
    pub sandboxed: usize,
    /// Exactly as the bench (no confinement added).
    pub as_bench: usize,
}

impl Confinement {
    fn of(pids: &[u32]) -> Confinement {
        let bench = Guard::read(std::process::id());
        let mut c = Confinement {
            fixtures: pids.len(),
            ..Confinement::default()
        };
        for pid in pids {
            let (Some(g), Some(b)) = (Guard::read(*pid), bench) else {
                continue;
            };
            if g.sandboxed(&b) {
                c.sandboxed += 1;
            } else if g == b {
                c.as_bench += 1;
            }
        }
        c
    }

    /// An error unless all `expected` fixtures ran sandboxed (`on`) or unconfined.
    fn check(&self, expected: usize, on: bool, what: &str) -> Result<()> {
        if self.fixtures != expected {
            bail!(
                "{what}: {} fixture processes found under the hub, not {expected}",
                self.fixtures
            );
        }
        if on && self.sandboxed != expected {
            bail!(
                "{what}: {} of {expected} fixtures ran sandboxed (NoNewPrivs 1 and a seccomp filter of their own in /proc/PID/status); \
                 the sandbox part would compare two unconfined hubs (does this kernel have Landlock? see `openpact config check`)",
                self.sandboxed
            );
        }
        if !on && self.as_bench != expected {
            bail!(
                "{what}: with \"sandbox\": {{\"default\": \"off\"}} only {} of {expected} fixtures ran as unconfined as the bench",
                self.as_bench
            );
        }
        Ok(())
    }
}

/// How the fixtures below `hub` ran: its children, or deeper when the hub runs under a
/// profiling wrapper (`OPENPACT_BENCH_HUB_WRAPPER`) or the sandbox gives each server a PID
/// namespace (wrapper, the namespace's first process, fixture). A fixture is a process whose
/// executable is `openpact-fixture`.
pub fn confinement(ctx: &Ctx, hub: u32) -> Confinement {
    let fixture = ctx
        .fixture
        .canonicalize()
        .unwrap_or_else(|_| ctx.fixture.clone());
    let is_fixture =
        |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == fixture);
    let (mut found, mut level) = (Vec::new(), vec![hub]);
    for _ in 0..4 {
        let (fixtures, others): (Vec<u32>, Vec<u32>) = level
            .iter()
            .flat_map(|p| children(*p))
            .partition(|c| is_fixture(*c));
        found.extend(fixtures);
        level = others;
    }
    Confinement::of(&found)
}

/// How every process below `hub` ran (four levels deep: the servers, their interpreters and
/// the processes those start), for servers that are not fixtures.
pub fn descendants(hub: u32) -> Confinement {
    let (mut found, mut level) = (Vec::new(), vec![hub]);
    for _ in 0..4 {
        level = level.iter().flat_map(|p| children(*p)).collect();
        found.extend(&level);
    }
    Confinement::of(&found)
}

pub struct SandboxPart {
    pub per_server: usize,
    /// 50-server startups with the default settings (sandbox on) and with it off.
    pub on: Vec<HubStartup>,
    pub off: Vec<HubStartup>,
    /// `fx:echo` interleaved on fresh hubs: a = sandbox off, b = on.
    pub pairs: Vec<Paired>,
}

impl SandboxPart {
    pub fn median(runs: &[HubStartup]) -> Option<&HubStartup> {
        median_by(runs, |h| h.full_ms)
    }

    pub fn fastest_ms(runs: &[HubStartup]) -> f64 {
        min_by(runs, |h| h.full_ms)
    }

    /// On over off, fastest runs.
    pub fn ratio_fastest(&self) -> f64 {
        ratio(Self::fastest_ms(&self.on), Self::fastest_ms(&self.off))
    }

    /// On over off, median runs.
    pub fn ratio_median(&self) -> f64 {
        let full = |runs| Self::median(runs).map_or(0.0, |h| h.full_ms);
        ratio(full(&self.on), full(&self.off))
    }

    /// The interleaved run with the median difference.
    pub fn pair(&self) -> Option<&Paired> {
        median_by(&self.pairs, |p| p.b_p50_us - p.a_p50_us)
    }

    /// What the sandbox adds to a call's p50, interleaved.
    pub fn added_us(&self) -> Option<f64> {
        self.pair().map(|p| p.b_p50_us - p.a_p50_us)
    }
}

pub fn run(ctx: &Ctx, p: &Params) -> Result<SandboxPart> {
    let wd = &ctx.watchdog;
    wd.arm("the sandbox: one fixture's tools", Duration::from_secs(30));
    let (_, per_server) = direct_together(ctx, 1)?;
    let (on_settings, off_settings) = (pass_through(), sandbox_off());
    let servers = fixtures(ctx, SERVERS);
    let mut part = SandboxPart {
        per_server,
        on: Vec::new(),
        off: Vec::new(),
        pairs: Vec::new(),
    };
    for rep in 0..p.startup_reps.max(1) {
        wd.arm(
            &format!("the sandbox: {SERVERS} servers on and off (rep {rep})"),
            Duration::from_secs(120),
        );
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for on in order {
            let (config, settings) = if on {
                ("sandbox-on-50", &on_settings)
            } else {
                ("sandbox-off-50", &off_settings)
            };
            let run = HubRun {
                config,
                settings,
                servers: &servers,
                env: &[],
                rep,
                // The hub's memory with 50 proxies against none, read once per side; the
                // second it costs is left out of --quick.
                settle: rep == 0 && !p.quick,
            };
            let h = hub_startup(ctx, &run, Some(per_server))?;
            h.confinement
                .check(SERVERS, on, &format!("hub {config} (rep {rep})"))?;
            if on {
                part.on.push(h);
            } else {
                part.off.push(h);
            }
        }
    }

    wd.arm("the sandbox: interleaved calls", Duration::from_secs(600));
    let fx_echo = CallTemplate::echo("fx:echo");
    for rep in 0..p.policy_runs.max(1) {
        let off_label = format!("hub-sandbox-off-paired-{rep}");
        let on_label = format!("hub-sandbox-on-paired-{rep}");
        let (mut a, a_pids) = start_hub(ctx, &off_label, &off_settings)?;
        let (mut b, b_pids) = start_hub(ctx, &on_label, &on_settings)?;
        Confinement::of(&[a_pids.fixture]).check(1, false, &off_label)?;
        Confinement::of(&[b_pids.fixture]).check(1, true, &on_label)?;
        part.pairs.push(paired(
            (&mut a, &fx_echo),
            (&mut b, &fx_echo),
            (p.latency_warmup, p.latency_calls),
        )?);
        a.close(Duration::from_secs(10));
        b.close(Duration::from_secs(10));
    }
    wd.disarm();
    Ok(part)
}
