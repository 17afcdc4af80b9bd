//! Part 2: throughput with exactly [`IN_FLIGHT`] calls in flight, direct and through the
//! hub, over several runs on fresh processes (the first on the shared peers, whose memory is
//! read afterwards), with the CPU each process used.
//!
//! Information only: runs within one bench run mostly agree, but bench runs minutes apart
//! have differed by up to 6× on a 2-CPU VM. In the slow periods the client reads about 0.45
//! times per call (0.03 direct): the calls in flight travel in small groups, and each group
//! costs every process a wake-up. `client reads per call` in the report shows which kind of
//! period a run met.

use crate::client::{
    CallTemplate, IdScanner, Meter, Peer, Pids, Procs, Seen, Shared, pass_through, start_direct,
    start_hub,
};
use crate::{Ctx, Params, median_by, percentile};
use anyhow::{Result, bail};
use std::io::Write;
use std::time::{Duration, Instant};

pub const IN_FLIGHT: usize = 32;
/// The design goal for the hub, printed as information.
pub const GOAL_PER_SEC: f64 = 50_000.0;

#[derive(Clone)]
pub struct Throughput {
    pub calls: usize,
    pub secs: f64,
    pub per_sec: f64,
    /// Time from writing a request (into the batch flushed right after) to reading its answer.
    pub p50_us: f64,
    pub p99_us: f64,
    /// CPU seconds and context switches of each process over the run.
    pub cpu: Procs<f64>,
    pub switches: Procs<f64>,
    /// Share of the run during which some task waited for a CPU.
    pub cpu_pressure: f64,
    /// Machine-wide rescheduling IPIs over the run.
    pub ipis: f64,
    /// Reads the client made (each one returned at least one byte).
    pub reads: u64,
}

/// `total` calls, [`IN_FLIGHT`] at a time: each answer read lets the next request go.
pub fn measure(
    peer: &mut Peer,
    template: &CallTemplate,
    total: usize,
    pids: Pids,
    clk_tck: f64,
) -> Result<Throughput> {
    let scanner = IdScanner::new();
    let base = peer.next_id;
    peer.next_id += total as u64;
    let mut sent_at: Vec<Instant> = Vec::with_capacity(total);
    let mut answered = vec![false; total];
    let mut lat: Vec<u64> = Vec::with_capacity(total);
    let label = peer.label.clone();
    let before = Meter::read(pids, clk_tck)?;

    let t0 = Instant::now();
    let w = peer
        .w
        .as_mut()
        .ok_or_else(|| anyhow::anyhow!("stdin closed"))?;
    let r = &mut peer.r;
    let (mut sent, mut received, mut reads) = (0usize, 0usize, 0u64);
    while sent < total.min(IN_FLIGHT) {
        template.write(w, base + sent as u64)?;
        sent_at.push(t0);
        sent += 1;
    }
    w.flush()?;
    while received < total {
        r.fill()?;
        reads += 1;
        let now = Instant::now();
        while let Some(line) = r.try_line() {
            let Seen::Result(id) = scanner.scan(&r.buf[line])? else {
                continue;
            };
            let idx = id.wrapping_sub(base) as usize;
            if idx >= sent || answered[idx] {
                bail!("{label}: unexpected or repeated answer to id {id}");
            }
            answered[idx] = true;
            lat.push((now - sent_at[idx]).as_nanos() as u64);
            received += 1;
            if sent < total {
                template.write(w, base + sent as u64)?;
                sent_at.push(now);
                sent += 1;
            }
        }
        // About to block on the next read: everything we can send now goes out in one write.
        w.flush()?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let used = Meter::read(pids, clk_tck)?.since(&before);
    lat.sort_unstable();
    Ok(Throughput {
        calls: total,
        secs,
        per_sec: total as f64 / secs,
        p50_us: percentile(&lat, 0.50) as f64 / 1e3,
        p99_us: percentile(&lat, 0.99) as f64 / 1e3,
        cpu: used.cpu,
        switches: used.switches,
        cpu_pressure: used.cpu_pressure,
        ipis: used.ipis,
        reads,
    })
}

/// A warm-up of `warmup` calls, then the measured run.
pub fn warm_measure(
    peer: &mut Peer,
    template: &CallTemplate,
    (warmup, calls): (usize, usize),
    pids: Pids,
    clk_tck: f64,
) -> Result<Throughput> {
    measure(peer, template, warmup, pids, clk_tck)?;
    measure(peer, template, calls, pids, clk_tck)
}

/// The highest rate among `reps`: as with latency, interference only ever takes away.
pub fn best(reps: &[Throughput]) -> f64 {
    reps.iter().map(|t| t.per_sec).fold(0.0, f64::max)
}

/// The repetition with the median rate.
pub fn median(reps: &[Throughput]) -> Option<&Throughput> {
    median_by(reps, |t| t.per_sec)
}

pub struct ThroughputPart {
    pub direct: Vec<Throughput>,
    pub hub: Vec<Throughput>,
}

/// The first run on `shared`, later ones on fresh processes, direct and hub alternating so
/// that drift in the machine's load hits both alike.
pub fn run(ctx: &Ctx, p: &Params, shared: &mut Shared) -> Result<ThroughputPart> {
    let (echo, fx_echo) = (CallTemplate::echo("echo"), CallTemplate::echo("fx:echo"));
    let counts = (p.throughput_warmup, p.throughput_calls);
    let tck = ctx.clk_tck;
    let mut part = ThroughputPart {
        direct: Vec::new(),
        hub: Vec::new(),
    };
    for rep in 0..p.throughput_reps.max(1) {
        if rep == 0 {
            let (d, h) = (&mut shared.direct, &mut shared.hub);
            part.direct
                .push(warm_measure(&mut d.0, &echo, counts, d.1, tck)?);
            part.hub
                .push(warm_measure(&mut h.0, &fx_echo, counts, h.1, tck)?);
            continue;
        }
        let (mut d, dp) = start_direct(ctx, &format!("fixture (throughput run {rep})"))?;
        part.direct
            .push(warm_measure(&mut d, &echo, counts, dp, tck)?);
        d.close(Duration::from_secs(5));
        let label = format!("hub-throughput-{rep}");
        let (mut h, hp) = start_hub(ctx, &label, &pass_through())?;
        part.hub
            .push(warm_measure(&mut h, &fx_echo, counts, hp, tck)?);
        h.close(Duration::from_secs(10));
    }
    Ok(part)
}
