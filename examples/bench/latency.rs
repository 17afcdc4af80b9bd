//! Part 1: sequential latency — one request written, its answer read, the next written —
//! direct and through the hub, over several runs on freshly started processes. Also the
//! measuring loops the other parts reuse: [`measure`] for any request one at a time and
//! [`paired`] for two peers interleaved call by call.
//!
//! The runs are made twice: first with this program, the hub and the fixture held on one CPU
//! ([`crate::pin`]), then as the scheduler places them. On a small VM the placement decides
//! a run's latency for its lifetime: a pipe hop to a process on the same CPU costs about
//! 1.5 µs, one that wakes a halted CPU tens of µs. A direct pair of processes is often put
//! on one CPU (a 3 µs echo); the hub's three rarely are, so the unpinned ratio compares
//! placements, not code — it read 1.5× or 25× on the same binary. On one CPU both sides pay
//! the same kind of hop and the ratio is the software's cost; it varies by a few percent
//! from run to run.
//!
//! The CI gate lives here: the hub slower than [`ONE_CPU_REGRESSION_RATIO`]× a direct call
//! on one CPU fails the run, but only when both readings agree — the best runs' p50s and the median
//! runs' p50s; when both are over the line the runs are doubled before the verdict. Where
//! nothing can be pinned (one CPU, not Linux), the gate reads the unpinned runs, over
//! [`REGRESSION_RATIO`]×.

use crate::client::{
    CallTemplate, IdScanner, Meter, Peer, Pids, Procs, Seen, pass_through, start_direct, start_hub,
};
use crate::pin::OneCpu;
use crate::{Ctx, Params, median_by, min_by, percentile, ratio};
use anyhow::{Result, bail};
use std::io::Write;
use std::time::{Duration, Instant};

/// The CI gate on one CPU: hub p50 over this many times direct p50 (in both readings)
/// fails the run. There the ratio is the software's cost, 3.4–3.6× on a quiet host and up
/// to 4.3× when the host is busy (the hub's parsing and routing slow more than a bare
/// echo's two switches); 6× fails a hub doing about twice today's work, not a busy host.
pub const ONE_CPU_REGRESSION_RATIO: f64 = 6.0;
/// The gate where nothing can be pinned: unpinned, the ratio reads 1.3–1.5× when both
/// sides wake a halted CPU, so 5× is far above it.
pub const REGRESSION_RATIO: f64 = 5.0;
/// The design goal (on one CPU), printed as information.
pub const GOAL_RATIO: f64 = 3.0;

#[derive(Clone)]
pub struct Latency {
    pub calls: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    /// Over the measured calls: CPU and context switches per call.
    pub cpu_us_per_call: Procs<f64>,
    pub switches_per_call: Procs<f64>,
    pub cpu_pressure: f64,
    /// Machine-wide rescheduling IPIs per call.
    pub ipis_per_call: f64,
}

/// One request, written and answered; nanoseconds from write to answer.
pub fn one_call(peer: &mut Peer, scanner: &IdScanner, template: &CallTemplate) -> Result<u64> {
    let id = peer.next_id;
    peer.next_id += 1;
    let t = Instant::now();
    let w = peer.writer()?;
    template.write(w, id)?;
    w.flush()?;
    loop {
        let line = peer.r.line()?;
        match scanner.scan(&peer.r.buf[line])? {
            Seen::Result(got) if got == id => break,
            Seen::Result(got) => {
                bail!("{}: answer to id {got} while waiting for {id}", peer.label)
            }
            Seen::Other => {}
        }
    }
    Ok(t.elapsed().as_nanos() as u64)
}

/// `warmup + calls` requests one at a time; the figures cover the last `calls`.
pub fn measure(
    peer: &mut Peer,
    template: &CallTemplate,
    counts: (usize, usize),
    pids: Pids,
    clk_tck: f64,
) -> Result<Latency> {
    let scanner = IdScanner::new();
    sample(counts, pids, clk_tck, || one_call(peer, &scanner, template))
}

/// `warmup + calls` runs of `call`, which returns the nanoseconds one call took; the figures
/// (and the CPU `pids` used) cover the last `calls`.
pub fn sample(
    (warmup, calls): (usize, usize),
    pids: Pids,
    clk_tck: f64,
    mut call: impl FnMut() -> Result<u64>,
) -> Result<Latency> {
    for _ in 0..warmup {
        call()?;
    }
    let mut samples = Vec::with_capacity(calls);
    let before = Meter::read(pids, clk_tck)?;
    for _ in 0..calls {
        samples.push(call()?);
    }
    let used = Meter::read(pids, clk_tck)?.since(&before);
    samples.sort_unstable();
    let n = samples.len().max(1) as f64;
    let us = |ns: u64| ns as f64 / 1e3;
    Ok(Latency {
        calls,
        p50_us: us(percentile(&samples, 0.50)),
        p99_us: us(percentile(&samples, 0.99)),
        mean_us: samples.iter().sum::<u64>() as f64 / n / 1e3,
        min_us: us(samples.first().copied().unwrap_or(0)),
        max_us: us(samples.last().copied().unwrap_or(0)),
        cpu_us_per_call: used.cpu.map(|c| c / n * 1e6),
        switches_per_call: used.switches.map(|c| c / n),
        cpu_pressure: used.cpu_pressure,
        ipis_per_call: used.ipis / n,
    })
}

/// p50s of two peers measured by [`paired`].
#[derive(Clone, Copy)]
pub struct Paired {
    pub a_p50_us: f64,
    pub b_p50_us: f64,
}

/// Sequential calls alternating between two peers, one call each in turn (A B, B A, …). Both
/// then meet the machine in the same state at the same moments (on a VM, whether CPUs sleep
/// between calls moves every p50 by tens of µs), so the difference is theirs, not drift.
pub fn paired(
    a: (&mut Peer, &CallTemplate),
    b: (&mut Peer, &CallTemplate),
    (warmup, calls): (usize, usize),
) -> Result<Paired> {
    let scanner = IdScanner::new();
    let (mut sa, mut sb) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for i in 0..warmup + calls {
        // Whichever goes second finds the CPUs awake, a bias the alternation cancels.
        let (ta, tb) = if i % 2 == 0 {
            let ta = one_call(a.0, &scanner, a.1)?;
            (ta, one_call(b.0, &scanner, b.1)?)
        } else {
            let tb = one_call(b.0, &scanner, b.1)?;
            (one_call(a.0, &scanner, a.1)?, tb)
        };
        if i >= warmup {
            sa.push(ta);
            sb.push(tb);
        }
    }
    sa.sort_unstable();
    sb.sort_unstable();
    Ok(Paired {
        a_p50_us: percentile(&sa, 0.50) as f64 / 1e3,
        b_p50_us: percentile(&sb, 0.50) as f64 / 1e3,
    })
}

/// The run with the median p50.
pub fn median_run(runs: &[Latency]) -> Option<&Latency> {
    median_by(runs, |l| l.p50_us)
}

/// The lowest p50 among `runs`: on a shared or virtual machine, interference only adds.
pub fn best_p50(runs: &[Latency]) -> f64 {
    min_by(runs, |l| l.p50_us)
}

/// Part 1's runs, each direct run followed by a hub run, both on fresh processes.
pub struct LatencyPart {
    pub direct: Vec<Latency>,
    pub hub: Vec<Latency>,
    /// Whether the first runs were over the gate and more runs were made.
    pub measured_again: bool,
    /// The gate's line for these runs (`None`: not gated).
    pub limit: Option<f64>,
}

impl LatencyPart {
    pub fn median_direct(&self) -> Option<&Latency> {
        median_run(&self.direct)
    }

    pub fn median_hub(&self) -> Option<&Latency> {
        median_run(&self.hub)
    }

    /// Hub over direct, each side's best run.
    pub fn ratio_best(&self) -> f64 {
        ratio(best_p50(&self.hub), best_p50(&self.direct))
    }

    /// Hub over direct, each side's median run.
    pub fn ratio_median(&self) -> f64 {
        let p50 = |l: Option<&Latency>| l.map_or(0.0, |l| l.p50_us);
        ratio(p50(self.median_hub()), p50(self.median_direct()))
    }

    /// The gate: the hub over [`LatencyPart::limit`]× direct in both readings.
    pub fn regressed(&self) -> bool {
        self.limit
            .is_some_and(|limit| self.ratio_best().min(self.ratio_median()) > limit)
    }
}

/// Part 1: the runs on one CPU (`None` where nothing could be pinned) and as scheduled.
pub struct Sequential {
    pub pinned: Option<Pinned>,
    pub spread: LatencyPart,
}

pub struct Pinned {
    pub cpu: usize,
    pub runs: LatencyPart,
}

impl Sequential {
    /// The runs the gate reads.
    pub fn gated(&self) -> &LatencyPart {
        self.pinned.as_ref().map_or(&self.spread, |p| &p.runs)
    }
}

pub fn run(ctx: &Ctx, p: &Params) -> Result<Sequential> {
    let pinned = match OneCpu::hold() {
        Some(held) => Some(Pinned {
            cpu: held.cpu,
            runs: runs(ctx, p, "one-cpu", Some(ONE_CPU_REGRESSION_RATIO))?,
        }),
        None => None,
    };
    let spread = runs(
        ctx,
        p,
        "spread",
        pinned.is_none().then_some(REGRESSION_RATIO),
    )?;
    Ok(Sequential { pinned, spread })
}

/// Runs on fresh processes, each direct run followed by a hub run; with a gate (`limit`),
/// as many again when the first are over it.
fn runs(ctx: &Ctx, p: &Params, label: &str, limit: Option<f64>) -> Result<LatencyPart> {
    let (echo, fx_echo) = (CallTemplate::echo("echo"), CallTemplate::echo("fx:echo"));
    let counts = (p.latency_warmup, p.latency_calls);
    let mut part = LatencyPart {
        direct: Vec::new(),
        hub: Vec::new(),
        measured_again: false,
        limit,
    };
    let runs = p.latency_runs.max(1);
    let tck = ctx.clk_tck;
    for rep in 0..2 * runs {
        if rep == runs && !part.regressed() {
            break;
        }
        part.measured_again = rep >= runs;
        let (mut d, dp) = start_direct(ctx, &format!("fixture (latency run {label} {rep})"))?;
        part.direct.push(measure(&mut d, &echo, counts, dp, tck)?);
        d.close(Duration::from_secs(5));
        let (mut h, hp) = start_hub(ctx, &format!("hub-latency-{label}-{rep}"), &pass_through())?;
        part.hub.push(measure(&mut h, &fx_echo, counts, hp, tck)?);
        h.close(Duration::from_secs(10));
    }
    Ok(part)
}
