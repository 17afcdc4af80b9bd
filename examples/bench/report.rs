//! The report: the table printed at the end of a run, the verdict of the two regression
//! gates, and `target/bench.json` with every figure (each run's, not only the medians).
//!
//! Rows read: what, direct, hub, hub/direct, and a note (part 9: what, sandbox off, sandbox
//! on, on/off; part 10: what, tool search off, on, on/off, then a plain call against a
//! search). Design goals appear in the notes as "goal … met / not met" — information,
//! never a failure; only the gates say PASS or FAIL.

use crate::client::{Procs, sched_runtime};
use crate::code::{self, CodePart};
use crate::face::{self, HttpPart, Rate};
use crate::latency::{self, Latency, LatencyPart, Paired, Sequential, best_p50};
use crate::pipeline::{self, PolicyPart, Role, Surface};
use crate::popular::{self, PopularPart};
use crate::remote;
use crate::retrieval::{self, Quality, RetrievalPart};
use crate::sandbox::{self, SandboxPart};
use crate::shared::{self, SharedPart};
use crate::startup::{self, HubStartup, StartupPart};
use crate::throughput::{self, IN_FLIGHT, Throughput, ThroughputPart};
use crate::{Calls, Ctx, Params, ratio};
use anyhow::{Context, Result};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};

/// What the machine was like when the run began.
pub struct Header {
    mode: &'static str,
    cpus: usize,
    load_before: Option<f64>,
}

impl Header {
    pub fn read(p: &Params, ctx: &Ctx) -> Header {
        let h = Header {
            mode: if p.quick { "quick" } else { "full" },
            cpus: std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
            load_before: loadavg(),
        };
        println!(
            "openpact bench ({} run) — {} CPU(s), load average {}; hub: {}",
            h.mode,
            h.cpus,
            show_load(h.load_before),
            ctx.openpact.display()
        );
        if !ctx.hub_wrapper.is_empty() {
            println!(
                "   the hub runs under `{}`: its CPU and memory figures are the wrapper's",
                ctx.hub_wrapper.join(" ")
            );
        }
        h
    }
}

/// The 1-minute load average: other work on the machine skews every figure here.
fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn show_load(l: Option<f64>) -> String {
    l.map_or_else(|| "?".to_string(), |l| format!("{l:.2}"))
}

fn round(x: f64, places: i32) -> f64 {
    let p = 10f64.powi(places);
    (x * p).round() / p
}

fn mark(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

fn goal(met: bool) -> &'static str {
    if met { "met" } else { "not met" }
}

/// A number with two decimals, `-` when unknown.
fn f2(x: f64) -> String {
    if x.is_nan() {
        "-".to_string()
    } else {
        format!("{x:.2}")
    }
}

fn opt_f2(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), f2)
}

fn pct(x: f64) -> String {
    if x.is_nan() {
        "-".to_string()
    } else {
        format!("{:.0}%", 100.0 * x)
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// A table row: what, direct, hub, hub/direct, and a note.
fn ratio_row(name: &str, direct: &str, hub: &str, ratio: f64, note: &str) {
    let line = format!("   {name:<42} {direct:>11} {hub:>11} {ratio:>9.2}x  {note}");
    println!("{}", line.trim_end());
}

/// A row of figures in `unit` with their ratio.
fn row(name: &str, d: f64, h: f64, unit: &str, note: &str) {
    ratio_row(
        name,
        &format!("{d:.1} {unit}"),
        &format!("{h:.1} {unit}"),
        ratio(h, d),
        note,
    );
}

/// A row without a ratio.
fn text(name: &str, d: &str, h: &str) {
    println!("   {name:<42} {d:>11} {h:>11}");
}

/// Figures for a line of the table: `1.5, 2.0, 3.1`.
fn figures(values: impl Iterator<Item = f64>, decimals: usize) -> String {
    values
        .map(|v| format!("{v:.decimals$}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The p50 of each run, direct and through the hub.
fn every_p50(l: &LatencyPart) {
    let p50s = |v: &[Latency]| figures(v.iter().map(|l| l.p50_us), 1);
    println!(
        "   {:<42} direct {}; hub {}",
        "p50 of every run (µs)",
        p50s(&l.direct),
        p50s(&l.hub)
    );
}

fn print_latency(p: &Params, s: &Sequential) {
    println!(
        "1. sequential tools/call echo, one at a time ({} calls after {} warm-up, fresh processes each run)",
        p.latency_calls, p.latency_warmup,
    );
    if let Some(pinned) = &s.pinned {
        print_latency_runs(
            &format!(
                "on one CPU (CPU {}: this program, the hub and the fixture; the gate's runs)",
                pinned.cpu
            ),
            &pinned.runs,
        );
    }
    print_latency_runs(
        "as the scheduler places them (information: see examples/bench/main.rs)",
        &s.spread,
    );
}

/// Part 1's rows for one set of runs; `gated` adds the gate's verdict and the design goal.
fn print_latency_runs(heading: &str, l: &LatencyPart) {
    let (Some(ld), Some(lh)) = (l.median_direct(), l.median_hub()) else {
        return;
    };
    let again = if l.measured_again {
        "; the first runs were over the gate: measured again"
    } else {
        ""
    };
    println!("   {heading}, {} runs each{again}", l.hub.len());
    let (bd, bh) = (best_p50(&l.direct), best_p50(&l.hub));
    let (gate, goal_note) = if let Some(limit) = l.limit {
        (
            format!(
                "gate: ≤ {limit}× in either reading   {}",
                mark(!l.regressed())
            ),
            format!(
                "goal ≤ {}×: {}",
                latency::GOAL_RATIO,
                goal(bh <= latency::GOAL_RATIO * bd)
            ),
        )
    } else {
        (String::new(), String::new())
    };
    row("p50 (best run: least disturbed)", bd, bh, "µs", &goal_note);
    row("p50 (median run)", ld.p50_us, lh.p50_us, "µs", &gate);
    row("p99 (median run)", ld.p99_us, lh.p99_us, "µs", "");
    row("mean (median run)", ld.mean_us, lh.mean_us, "µs", "");
    every_p50(l);
    let (cd, ch) = (&ld.cpu_us_per_call, &lh.cpu_us_per_call);
    text("CPU µs per call: hub", "-", &opt_f2(ch.hub));
    text("CPU µs per call: fixture", &f2(cd.fixture), &f2(ch.fixture));
    text(
        "context switches per call: hub",
        "-",
        &opt_f2(lh.switches_per_call.hub),
    );
    text(
        "reschedule IPIs per call (whole machine)",
        &f2(ld.ipis_per_call),
        &f2(lh.ipis_per_call),
    );
    text(
        "CPU pressure (time some task waited)",
        &pct(ld.cpu_pressure),
        &pct(lh.cpu_pressure),
    );
}

fn print_throughput(p: &Params, t: &ThroughputPart) {
    let (Some(d), Some(h)) = (throughput::median(&t.direct), throughput::median(&t.hub)) else {
        return;
    };
    println!(
        "2. throughput, {IN_FLIGHT} calls in flight ({} calls per run, {} runs, fresh processes)",
        p.throughput_calls,
        t.hub.len()
    );
    let rate = |x: f64| format!("{x:.0}");
    ratio_row(
        "calls/s (median run)",
        &rate(d.per_sec),
        &rate(h.per_sec),
        ratio(h.per_sec, d.per_sec),
        "",
    );
    let (bd, bh) = (throughput::best(&t.direct), throughput::best(&t.hub));
    let note = format!(
        "goal ≥ {:.0}/s: {}",
        throughput::GOAL_PER_SEC,
        goal(bh >= throughput::GOAL_PER_SEC)
    );
    ratio_row(
        "calls/s (best run)",
        &rate(bd),
        &rate(bh),
        ratio(bh, bd),
        &note,
    );
    let reps = |v: &[Throughput]| figures(v.iter().map(|t| t.per_sec), 0);
    println!(
        "   {:<42} direct {}; hub {}",
        "every run (calls/s)",
        reps(&t.direct),
        reps(&t.hub)
    );
    row("latency in flight p50", d.p50_us, h.p50_us, "µs", "");
    row("latency in flight p99", d.p99_us, h.p99_us, "µs", "");
    let per_call = |t: &Throughput| t.cpu.map(|c| c / t.calls as f64 * 1e6);
    let (pd, ph) = (per_call(d), per_call(h));
    text(
        "CPU µs per call: client (this program)",
        &f2(pd.client),
        &f2(ph.client),
    );
    text("CPU µs per call: hub", "-", &opt_f2(ph.hub));
    text("CPU µs per call: fixture", &f2(pd.fixture), &f2(ph.fixture));
    let share = |t: &Throughput| pct(ratio(t.cpu.client, t.cpu.total()));
    text("client's share of all CPU used", &share(d), &share(h));
    let sw = |t: &Throughput| t.switches.map(|s| s / t.calls as f64);
    text("context switches per call: hub", "-", &opt_f2(sw(h).hub));
    text(
        "context switches per call: fixture",
        &f2(sw(d).fixture),
        &f2(sw(h).fixture),
    );
    let per = |x: f64, t: &Throughput| f2(x / t.calls as f64);
    text(
        "reschedule IPIs per call (whole machine)",
        &per(d.ipis, d),
        &per(h.ipis, h),
    );
    text(
        "client reads per call",
        &per(d.reads as f64, d),
        &per(h.reads as f64, h),
    );
    text(
        "CPU pressure (time some task waited)",
        &pct(d.cpu_pressure),
        &pct(h.cpu_pressure),
    );
}

fn print_surface(s: &Surface) {
    println!(
        "5. the rest of the surface through the same peers ({} requests each, one at a time)",
        s.read[0].calls
    );
    let [rd, rh] = &s.read;
    row("resources/read p50", rd.p50_us, rh.p50_us, "µs", "");
    row("resources/read p99", rd.p99_us, rh.p99_us, "µs", "");
    let [pd, ph] = &s.prompt;
    row("prompts/get p50", pd.p50_us, ph.p50_us, "µs", "");
    row("prompts/get p99", pd.p99_us, ph.p99_us, "µs", "");
    let [gd, gh] = &s.progress;
    ratio_row(
        "progress notifications forwarded per second",
        &format!("{:.0}", gd.per_sec()),
        &format!("{:.0}", gh.per_sec()),
        ratio(gh.per_sec(), gd.per_sec()),
        &format!("all {} delivered, before the answer", gh.notifications),
    );
}

/// Part 6; `base`: the pass-through hub's best p50 and median throughput from parts 1 and 2.
fn print_policy(c: &PolicyPart, direct_best: f64, base: (f64, f64)) {
    println!("6. the policy pipeline: features on, one at a time, then all of them (best p50 of");
    println!(
        "   the runs on fresh hubs; added µs and throughput ratio against the pass-through hub):"
    );
    println!(
        "   {:<42} {:>13} {:>11} {:>15} {:>11} {:>9}",
        "", "best p50", "p99", "calls/s", "CPU µs/call", "switches"
    );
    for m in &c.variants {
        let Some(lat) = m.median() else { continue };
        let best = m.best_p50();
        let tp = throughput::median(&m.throughput).map_or_else(
            || "-".to_string(),
            |t| format!("{:.0} ({:.2}x)", t.per_sec, ratio(t.per_sec, base.1)),
        );
        println!(
            "   {:<42} {:>13} {:>11} {:>15} {:>11} {:>9}",
            m.name,
            format!("{best:.1} ({:+.1})", best - base.0),
            format!("{:.1}", lat.p99_us),
            tp,
            opt_f2(lat.cpu_us_per_call.hub),
            opt_f2(lat.switches_per_call.hub),
        );
    }
    if let Some(hit) = c.variant(Role::CacheHit) {
        let r = ratio(hit.best_p50(), direct_best);
        ratio_row(
            "cache hit vs a direct echo (best p50)",
            &format!("{direct_best:.1} µs"),
            &format!("{:.1} µs", hit.best_p50()),
            r,
            &format!(
                "goal ≤ {}×: {}",
                pipeline::GOAL_CACHE_HIT_RATIO,
                goal(r <= pipeline::GOAL_CACHE_HIT_RATIO)
            ),
        );
    }
    if let (Some(added), Some(pair)) = (c.added_us(), c.pair()) {
        ratio_row(
            "full pipeline vs pass-through, interleaved",
            &format!("{:.1} µs", pair.a_p50_us),
            &format!("{:.1} µs", pair.b_p50_us),
            ratio(pair.b_p50_us, pair.a_p50_us),
            &format!(
                "{added:+.1} µs (median of {}); goal ≤ {} µs: {}",
                c.pairs.len(),
                pipeline::GOAL_PIPELINE_ADDED_US,
                goal(added <= pipeline::GOAL_PIPELINE_ADDED_US)
            ),
        );
    }
}

fn print_startup(s: &StartupPart) {
    println!(
        "3. startup until the tool list is complete ({} tools per fixture; median of {} runs)",
        s.per_server,
        s.counts.first().map_or(0, |c| c.hub.len())
    );
    println!(
        "   {:<42} {:>11} {:>11}",
        "N servers: direct = N started by the bench", "direct", "hub"
    );
    for c in &s.counts {
        let Some(m) = c.median_hub() else { continue };
        let together = c.median_direct_ms();
        let note = if c.servers == 50 {
            format!(
                "gate: fastest ≤ {:.0} ms   {}; goal ≤ direct + {:.0} ms: {}",
                startup::REGRESSION_MS,
                mark(!s.regressed()),
                startup::GOAL_SLACK_MS,
                goal(m.full_ms <= together + startup::GOAL_SLACK_MS)
            )
        } else {
            String::new()
        };
        let plural = if c.servers == 1 { "" } else { "s" };
        ratio_row(
            &format!("{} server{plural}: complete tool list", c.servers),
            &format!("{together:.1} ms"),
            &format!("{:.1} ms", m.full_ms),
            ratio(m.full_ms, together),
            &note,
        );
        println!(
            "   {:<42} initialize answered at {:.1} ms; first list at {:.1} ms ({} tools); {} listing(s), {} stale",
            "", m.init_ms, m.first_list_ms, m.first_list_tools, m.listings, m.stale_listings
        );
        println!(
            "   {:<42} CPU until complete: hub {:.1} ms, its fixtures {:.1} ms; exit {:.0} ms; hub runs: {} ms",
            "",
            m.hub_cpu_ms,
            m.children_cpu_ms,
            m.shutdown_ms,
            figures(c.hub.iter().map(|r| r.full_ms), 1)
        );
    }
}

fn print_memory(calls: Option<&Calls>, s50: Option<&HubStartup>) {
    let one = calls.filter(|c| c.throughput.is_some());
    if s50.is_none() && one.is_none() {
        return;
    }
    println!("4. hub memory (VmRSS)");
    if let Some(h) = s50 {
        let settled = format!(
            "50 servers, {:.0} s after the complete list",
            startup::RSS_SETTLE.as_secs_f64()
        );
        let kib = h.rss_after_startup_kib();
        println!(
            "   {settled:<42} {:>11} {:>11}             goal ≤ {} MiB: {}",
            "",
            mib(kib),
            startup::GOAL_RSS_MIB,
            goal(kib as f64 / 1024.0 <= startup::GOAL_RSS_MIB)
        );
        text("  at the moment the list was complete", "", &mib(h.rss_kib));
        text("  peak (VmHWM)", "", &mib(h.hwm_kib));
    }
    if let Some(c) = one {
        text(
            "1 server: idle / after the throughput runs",
            "",
            &format!("{} / {}", mib(c.hub_rss_idle_kib), mib(c.hub_rss_after_kib)),
        );
    }
}

/// What the parts measured (`None`: not run, or skipped).
pub struct Parts<'a> {
    pub calls: Option<&'a Calls>,
    pub startup: Option<&'a StartupPart>,
    pub remote: Option<&'a LatencyPart>,
    pub http: Option<&'a HttpPart>,
    pub sandbox: Option<&'a SandboxPart>,
    pub retrieval: Option<&'a RetrievalPart>,
    pub shared: Option<&'a SharedPart>,
    pub popular: Option<&'a PopularPart>,
    pub code: Option<&'a CodePart>,
    pub telemetry: Option<&'a crate::telemetry::TelemetryPart>,
}

fn print_remote(p: &Params, r: &LatencyPart) {
    println!(
        "7. remote: sequential tools/call echo to {} ({} calls after {} warm-up; {} runs each, a fresh session and hub)",
        remote::SERVER,
        p.remote_calls,
        p.remote_warmup,
        r.hub.len()
    );
    let (bd, bh) = (best_p50(&r.direct), best_p50(&r.hub));
    let goal_note = format!(
        "goal ≤ {}×: {}",
        remote::GOAL_RATIO,
        goal(bh <= remote::GOAL_RATIO * bd)
    );
    row("p50 (best run: least disturbed)", bd, bh, "µs", &goal_note);
    if let (Some(d), Some(h)) = (r.median_direct(), r.median_hub()) {
        row("p50 (median run)", d.p50_us, h.p50_us, "µs", "");
        // Direct, the bench is the HTTP client; through the hub, the hub is.
        let cpu = |client: f64, server: f64| format!("{client:.0} / {server:.0}");
        let (dc, hc) = (&d.cpu_us_per_call, &h.cpu_us_per_call);
        text(
            "CPU µs per call: HTTP client / server",
            &cpu(dc.client, dc.fixture),
            &cpu(hc.hub.unwrap_or(f64::NAN), hc.fixture),
        );
    }
    every_p50(r);
}

fn print_http(p: &Params, h: &HttpPart) {
    let l = &h.latency;
    println!(
        "8. HTTP face: sequential tools/call echo over Streamable HTTP ({} calls after {} warm-up; {} runs each, fresh processes and session)",
        p.http_calls,
        p.http_warmup,
        l.hub.len()
    );
    println!(
        "   direct: openpact-fixture --http (its own axum server, a fixture child per session); hub: openpact serve --http --no-stdio"
    );
    let (bd, bh) = (best_p50(&l.direct), best_p50(&l.hub));
    let goal_note = format!(
        "goal ≤ {}×: {}",
        face::GOAL_RATIO,
        goal(bh <= face::GOAL_RATIO * bd)
    );
    row("p50 (best run: least disturbed)", bd, bh, "µs", &goal_note);
    if let (Some(d), Some(hb)) = (l.median_direct(), l.median_hub()) {
        let goal_note = format!(
            "goal ≤ {}×: {}",
            face::GOAL_RATIO,
            goal(hb.p50_us <= face::GOAL_RATIO * d.p50_us)
        );
        row("p50 (median run)", d.p50_us, hb.p50_us, "µs", &goal_note);
        row("p99 (median run)", d.p99_us, hb.p99_us, "µs", "");
        let cpu = |c: &Procs<f64>| {
            format!(
                "{:.0}/{:.0}/{:.0}",
                c.client,
                c.hub.unwrap_or(f64::NAN),
                c.fixture
            )
        };
        text(
            "CPU µs per call: client/HTTP server/fixture",
            &cpu(&d.cpu_us_per_call),
            &cpu(&hb.cpu_us_per_call),
        );
    }
    every_p50(l);
    let (Some(d), Some(hb)) = (face::median(&h.direct), face::median(&h.hub)) else {
        return;
    };
    println!(
        "   {} concurrent clients, a session and connection each, one call in flight each, {:.0} s per run, {} run(s) each;",
        face::CLIENTS,
        p.http_seconds,
        h.hub.len()
    );
    println!(
        "   the clients are tasks on one thread (the bench uses at most one CPU); fixture processes: direct {}, hub {}",
        d.fixtures, hb.fixtures
    );
    let rate = |x: f64| format!("{x:.0}");
    ratio_row(
        "calls/s (median run)",
        &rate(d.per_sec),
        &rate(hb.per_sec),
        ratio(hb.per_sec, d.per_sec),
        "",
    );
    let (bd, bh) = (face::best(&h.direct), face::best(&h.hub));
    ratio_row(
        "calls/s (best run)",
        &rate(bd),
        &rate(bh),
        ratio(bh, bd),
        "",
    );
    let runs = |v: &[Rate]| figures(v.iter().map(|r| r.per_sec), 0);
    println!(
        "   {:<42} direct {}; hub {}",
        "every run (calls/s)",
        runs(&h.direct),
        runs(&h.hub)
    );
    row("latency at 64 clients p50", d.p50_us, hb.p50_us, "µs", "");
    row("latency at 64 clients p99", d.p99_us, hb.p99_us, "µs", "");
    let per_call = |r: &Rate| {
        let us = |s: f64| s / r.calls as f64 * 1e6;
        format!(
            "{:.0}/{:.0}/{:.0}",
            us(r.cpu.client),
            us(r.cpu.face),
            us(r.cpu.fixtures)
        )
    };
    text(
        "CPU µs per call: client/HTTP server/fixtures",
        &per_call(d),
        &per_call(hb),
    );
    let share = |r: &Rate| pct(ratio(r.cpu.client, r.cpu.total()));
    text("client's share of all CPU used", &share(d), &share(hb));
    text(
        "CPU pressure (time some task waited)",
        &pct(d.cpu_pressure),
        &pct(hb.cpu_pressure),
    );
}

/// Part 11: `connect` against `serve` (the "direct" column is `serve`), and five windows'
/// memory separate against shared.
fn print_shared(s: &SharedPart) {
    let Some(m) = s.median() else { return };
    println!(
        "11. one hub for every window: a call through `openpact connect` against `serve` on stdio,"
    );
    println!(
        "   interleaved, {} runs on fresh processes (the \"direct\" column is serve); direct to the fixture {:.1} µs, serve {:.1} µs",
        s.runs.len(),
        s.direct.a_p50_us,
        s.direct.b_p50_us
    );
    let r = ratio(m.b_p50_us, m.a_p50_us);
    row(
        "call p50 through connect (median run)",
        m.a_p50_us,
        m.b_p50_us,
        "µs",
        &format!(
            "goal ≤ {}×: {}",
            shared::GOAL_RATIO,
            goal(r <= shared::GOAL_RATIO)
        ),
    );
    println!(
        "   {:<42} {}",
        "connect/serve of every run",
        figures(s.runs.iter().map(|r| ratio(r.b_p50_us, r.a_p50_us)), 2)
    );
    if let Some(mem) = &s.memory {
        let mib = |k: u64| k as f64 / 1024.0;
        row(
            &format!(
                "{} windows × {} real servers, VmRSS",
                shared::WINDOWS,
                mem.servers
            ),
            mib(mem.separate_kib),
            mib(mem.shared_kib),
            "MiB",
            &format!(
                "separate: {} processes; shared: {}",
                mem.separate_processes, mem.shared_processes
            ),
        );
    }
}

fn shared_json(s: &SharedPart) -> Value {
    let pair = |p: &crate::latency::Paired| json!({"serve_p50_us": round(p.a_p50_us, 1), "connect_p50_us": round(p.b_p50_us, 1)});
    json!({
        "goal_ratio": shared::GOAL_RATIO,
        "runs": s.runs.iter().map(pair).collect::<Vec<_>>(),
        "median_ratio": s.median().map(|m| round(ratio(m.b_p50_us, m.a_p50_us), 3)),
        "direct_p50_us": round(s.direct.a_p50_us, 1),
        "serve_p50_us_beside_direct": round(s.direct.b_p50_us, 1),
        "memory": s.memory.as_ref().map(|m| json!({
            "windows": shared::WINDOWS,
            "servers": m.servers,
            "separate_kib": m.separate_kib,
            "separate_processes": m.separate_processes,
            "shared_kib": m.shared_kib,
            "shared_processes": m.shared_processes,
        })),
    })
}

/// Part 9: the same hub with the sandbox off (the "direct" column) and on (the default).
fn print_sandbox(s: &SandboxPart) {
    let (Some(off), Some(on)) = (SandboxPart::median(&s.off), SandboxPart::median(&s.on)) else {
        return;
    };
    println!(
        "9. the sandbox: {} servers to a complete tool list, \"sandbox\": {{\"default\": \"off\"}} against the default (on);",
        sandbox::SERVERS
    );
    println!(
        "   {} runs each, alternating; every fixture checked in /proc (on: NoNewPrivs 1 and a seccomp filter; off: as the bench)",
        s.on.len()
    );
    println!("   {:<42} {:>11} {:>11} {:>10}", "", "off", "on", "on/off");
    let goal_note = |r: f64| {
        format!(
            "goal ≤ {}×: {}",
            sandbox::GOAL_STARTUP_RATIO,
            goal(r <= sandbox::GOAL_STARTUP_RATIO)
        )
    };
    let (fastest_off, fastest_on) = (
        SandboxPart::fastest_ms(&s.off),
        SandboxPart::fastest_ms(&s.on),
    );
    row(
        "complete tool list (fastest run)",
        fastest_off,
        fastest_on,
        "ms",
        &goal_note(s.ratio_fastest()),
    );
    row(
        "complete tool list (median run)",
        off.full_ms,
        on.full_ms,
        "ms",
        &goal_note(s.ratio_median()),
    );
    let runs = |v: &[HubStartup]| figures(v.iter().map(|h| h.full_ms), 1);
    println!(
        "   {:<42} off {}; on {}",
        "every run (ms)",
        runs(&s.off),
        runs(&s.on)
    );
    let cpu = |h: &HubStartup| format!("{:.0} / {:.0}", h.hub_cpu_ms, h.children_cpu_ms);
    text("CPU ms until complete: hub / fixtures", &cpu(off), &cpu(on));
    // Read in the full run only (the wait costs a second per side).
    let settled = |v: &[HubStartup]| v.iter().find_map(|h| h.rss_settled_kib);
    if let (Some(off_kib), Some(on_kib)) = (settled(&s.off), settled(&s.on)) {
        text(
            &format!(
                "hub VmRSS {:.0} s after the list (first run)",
                startup::RSS_SETTLE.as_secs_f64()
            ),
            &mib(off_kib),
            &mib(on_kib),
        );
    }
    if let (Some(added), Some(pair)) = (s.added_us(), s.pair()) {
        ratio_row(
            "tools/call fx:echo p50, interleaved",
            &format!("{:.1} µs", pair.a_p50_us),
            &format!("{:.1} µs", pair.b_p50_us),
            ratio(pair.b_p50_us, pair.a_p50_us),
            &format!(
                "{added:+.1} µs (median of {} fresh pairs); goal: unchanged within noise",
                s.pairs.len()
            ),
        );
        let p50s = |f: fn(&Paired) -> f64| figures(s.pairs.iter().map(f), 1);
        println!(
            "   {:<42} off {}; on {}",
            "p50 of every pair (µs)",
            p50s(|p| p.a_p50_us),
            p50s(|p| p.b_p50_us)
        );
    }
}

/// Prints the table, writes `target/bench.json`; `Ok(false)` when a gate failed.
pub fn finish(
    ctx: &Ctx,
    p: &Params,
    header: Header,
    parts: &Parts,
    started: Instant,
) -> Result<bool> {
    let Parts {
        calls,
        startup,
        remote,
        http,
        sandbox,
        retrieval,
        shared,
        popular,
        code,
        telemetry,
    } = *parts;
    let load_after = loadavg();
    let s50 = startup
        .and_then(|s| s.count(50))
        .and_then(|c| c.median_hub());
    println!();
    println!(
        "{:<45} {:>11} {:>11} {:>10}  note",
        "", "direct", "hub", "hub/direct"
    );
    let latency = calls.and_then(|c| c.latency.as_ref());
    if let Some(l) = latency {
        print_latency(p, l);
    }
    if let Some(t) = calls.and_then(|c| c.throughput.as_ref()) {
        print_throughput(p, t);
    }
    if let Some(s) = calls.and_then(|c| c.surface.as_ref()) {
        print_surface(s);
    }
    if let (Some(c), Some(l), Some(t)) = (
        calls.and_then(|c| c.policy.as_ref()),
        latency,
        calls.and_then(|c| c.throughput.as_ref()),
    ) {
        let base_tp = throughput::median(&t.hub).map_or(0.0, |t| t.per_sec);
        let l = &l.spread;
        print_policy(c, best_p50(&l.direct), (best_p50(&l.hub), base_tp));
    }
    if let Some(s) = startup {
        print_startup(s);
    }
    print_memory(calls, s50);
    if let Some(r) = remote {
        print_remote(p, r);
    }
    if let Some(h) = http {
        print_http(p, h);
    }
    if let Some(s) = sandbox {
        print_sandbox(s);
    }
    if let Some(r) = retrieval {
        print_retrieval(r);
    }
    if let Some(s) = shared {
        print_shared(s);
    }
    if let Some(s) = popular {
        print_popular(s);
    }
    if let Some(c) = code {
        print_code(c);
    }
    if let Some(t) = telemetry {
        crate::telemetry::print(t);
    }

    let gated = latency.map(Sequential::gated);
    let latency_ok = gated.map(|l| !l.regressed());
    let startup_ok = startup.map(|s| !s.regressed());
    let latency_gate = gated.map_or_else(
        || "not run".to_string(),
        |l| {
            format!(
                "{} (hub/direct p50{} {:.2}× in the best runs, {:.2}× in the median runs; fails over {}× in both)",
                mark(!l.regressed()),
                if latency.is_some_and(|s| s.pinned.is_some()) { " on one CPU" } else { "" },
                l.ratio_best(),
                l.ratio_median(),
                l.limit.unwrap_or(latency::REGRESSION_RATIO)
            )
        },
    );
    let startup_gate = startup.and_then(|s| s.count(50)).map_or_else(
        || "not run".to_string(),
        |c| {
            format!(
                "{} (50 servers in {:.1} ms at fastest; fails over {:.0} ms)",
                mark(c.fastest_hub_ms() <= startup::REGRESSION_MS),
                c.fastest_hub_ms(),
                startup::REGRESSION_MS
            )
        },
    );
    println!();
    println!("regression gates: latency {latency_gate}; startup {startup_gate}");
    println!(
        "{:.1} s; load average {} → {}",
        started.elapsed().as_secs_f64(),
        show_load(header.load_before),
        show_load(load_after)
    );

    let report = json!({
        "mode": header.mode,
        "cpus": header.cpus,
        "load_average_1m": {"before": header.load_before, "after": load_after},
        "unix_time": SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "git": git_describe(),
        "binaries": {"openpact": ctx.openpact, "fixture": ctx.fixture},
        "hub_wrapper": ctx.hub_wrapper,
        "params": {
            "in_flight": IN_FLIGHT,
            "latency_warmup": p.latency_warmup,
            "latency_calls": p.latency_calls,
            "latency_runs": p.latency_runs,
            "policy_runs": p.policy_runs,
            "throughput_warmup": p.throughput_warmup,
            "throughput_calls": p.throughput_calls,
            "throughput_reps": p.throughput_reps,
            "startup_reps": p.startup_reps,
            "remote_warmup": p.remote_warmup,
            "remote_calls": p.remote_calls,
            "remote_runs": p.remote_runs,
            "http_warmup": p.http_warmup,
            "http_calls": p.http_calls,
            "http_runs": p.http_runs,
            "http_rate_runs": p.http_rate_runs,
            "http_seconds": p.http_seconds,
            "http_clients": face::CLIENTS,
            "retrieval_rounds": p.retrieval_rounds,
            "cpu_source": if sched_runtime(std::process::id()).is_some() { "/proc/PID/task/*/sched se.sum_exec_runtime" } else { "/proc/PID/stat utime+stime" },
        },
        "calls": calls.map(calls_json),
        "startup": startup.map(startup_json),
        "remote": remote.map(|r| {
            let mut v = latency_part_json(r);
            v["server"] = json!(remote::SERVER);
            v["goal_ratio"] = json!(remote::GOAL_RATIO);
            v
        }),
        "http_face": http.map(http_json),
        "sandbox": sandbox.map(sandbox_json),
        "retrieval": retrieval.map(retrieval_json),
        "shared": shared.map(shared_json),
        "popular": popular.map(popular_json),
        "code": code.map(code_json),
        "telemetry": telemetry.map(crate::telemetry::json),
        "gates": {
            "latency": gated.map(|l| json!({
                "rule": format!("fails when hub p50 > {} x direct p50 both in the best runs and in the median runs (on one CPU where it can be pinned)", l.limit.unwrap_or(latency::REGRESSION_RATIO)),
                "on_one_cpu": latency.is_some_and(|s| s.pinned.is_some()),
                "ratio_best_runs": round(l.ratio_best(), 3),
                "ratio_median_runs": round(l.ratio_median(), 3),
                "measured_again": l.measured_again,
                "pass": !l.regressed(),
            })),
            "startup": startup.and_then(|s| s.count(50)).map(|c| json!({
                "rule": format!("fails when the fastest start of 50 servers to the complete list > {} ms", startup::REGRESSION_MS),
                "fastest_ms": round(c.fastest_hub_ms(), 2),
                "pass": !startup.is_some_and(StartupPart::regressed),
            })),
        },
        "seconds": round(started.elapsed().as_secs_f64(), 2),
    });
    let out = ctx.target.join("bench.json");
    std::fs::write(&out, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("cannot write {}", out.display()))?;
    println!("figures written to {}", out.display());
    Ok(latency_ok != Some(false) && startup_ok != Some(false))
}

fn rate_json(r: &Rate) -> Value {
    let n = r.calls as f64;
    let cpu = |c: &face::Cpu, f: &dyn Fn(f64) -> f64| json!({"client": round(f(c.client), 3), "http_server": round(f(c.face), 3), "fixtures": round(f(c.fixtures), 3)});
    json!({
        "calls": r.calls,
        "seconds": round(r.secs, 3),
        "calls_per_sec": round(r.per_sec, 0),
        "latency_p50_us": round(r.p50_us, 1),
        "latency_p99_us": round(r.p99_us, 1),
        "fixture_processes": r.fixtures,
        "cpu_pressure": round(r.cpu_pressure, 3),
        "cpu_seconds": cpu(&r.cpu, &|s| s),
        "cpu_us_per_call": cpu(&r.cpu, &|s| s / n * 1e6),
    })
}

/// Part 8: the sequential runs and the throughput runs.
fn http_json(h: &HttpPart) -> Value {
    let runs = |v: &[Rate]| v.iter().map(rate_json).collect::<Vec<_>>();
    let mut latency = latency_part_json(&h.latency);
    latency["note"] = json!(
        "cpu_us_per_call.hub is the process serving HTTP on both sides: openpact-fixture --http directly, openpact through the hub; fixture is the session's fixture child"
    );
    json!({
        "goal_ratio": face::GOAL_RATIO,
        "latency": latency,
        "throughput": {
            "clients": face::CLIENTS,
            "median_calls_per_sec": face::median(&h.direct).zip(face::median(&h.hub)).map(|(d, hb)| versus(d.per_sec, hb.per_sec, 0)),
            "best_calls_per_sec": versus(face::best(&h.direct), face::best(&h.hub), 0),
            "direct_runs": runs(&h.direct),
            "hub_runs": runs(&h.hub),
        },
    })
}

fn procs_json(p: &Procs<f64>, places: i32) -> Value {
    json!({"client": round(p.client, places), "hub": p.hub.map(|h| round(h, places)), "fixture": round(p.fixture, places)})
}

fn latency_json(l: &Latency) -> Value {
    json!({
        "p50_us": round(l.p50_us, 2), "p99_us": round(l.p99_us, 2), "mean_us": round(l.mean_us, 2),
        "min_us": round(l.min_us, 2), "max_us": round(l.max_us, 2),
        "cpu_us_per_call": procs_json(&l.cpu_us_per_call, 3),
        "context_switches_per_call": procs_json(&l.switches_per_call, 3),
        "cpu_pressure": round(l.cpu_pressure, 3),
        "reschedule_ipis_per_call": round(l.ipis_per_call, 3),
    })
}

fn throughput_json(t: &Throughput) -> Value {
    let n = t.calls as f64;
    json!({
        "calls": t.calls,
        "seconds": round(t.secs, 4),
        "calls_per_sec": round(t.per_sec, 0),
        "latency_in_flight_p50_us": round(t.p50_us, 1),
        "latency_in_flight_p99_us": round(t.p99_us, 1),
        "cpu_seconds": procs_json(&t.cpu, 4),
        "cpu_us_per_call": procs_json(&t.cpu.map(|c| c / n * 1e6), 3),
        "cpu_busy_fraction_of_wall": procs_json(&t.cpu.map(|c| c / t.secs), 3),
        "context_switches_per_call": procs_json(&t.switches.map(|c| c / n), 3),
        "client_reads_per_call": round(t.reads as f64 / n, 3),
        "cpu_pressure": round(t.cpu_pressure, 3),
        "reschedule_ipis_per_call": round(t.ipis / n, 3),
    })
}

/// `{direct, hub, ratio}` of two figures.
fn versus(d: f64, h: f64, places: i32) -> Value {
    json!({"direct": round(d, places), "hub": round(h, places), "ratio": round(ratio(h, d), 3)})
}

/// Direct and hub runs of sequential calls: the best p50s, the median runs, every run.
fn latency_part_json(l: &LatencyPart) -> Value {
    let runs = |v: &[Latency]| v.iter().map(latency_json).collect::<Vec<_>>();
    json!({
        "best_p50_us": versus(best_p50(&l.direct), best_p50(&l.hub), 2),
        "median_run": {"direct": l.median_direct().map(latency_json), "hub": l.median_hub().map(latency_json), "ratio_p50": round(l.ratio_median(), 3)},
        "direct_runs": runs(&l.direct),
        "hub_runs": runs(&l.hub),
    })
}

fn calls_json(c: &Calls) -> Value {
    let runs = |v: &[Latency]| v.iter().map(latency_json).collect::<Vec<_>>();
    let tp_runs = |v: &[Throughput]| v.iter().map(throughput_json).collect::<Vec<_>>();
    let latency = c.latency.as_ref().map(|s| json!({
        "one_cpu": s.pinned.as_ref().map(|p| json!({"cpu": p.cpu, "runs": latency_part_json(&p.runs)})),
        "as_scheduled": latency_part_json(&s.spread),
    }));
    let throughput = c.throughput.as_ref().map(|t| json!({
        "best_calls_per_sec": versus(throughput::best(&t.direct), throughput::best(&t.hub), 0),
        "median_run": {"direct": throughput::median(&t.direct).map(throughput_json), "hub": throughput::median(&t.hub).map(throughput_json)},
        "direct_runs": tp_runs(&t.direct),
        "hub_runs": tp_runs(&t.hub),
    }));
    let surface = c.surface.as_ref().map(|s| json!({
        "resources_read": {"direct": latency_json(&s.read[0]), "hub": latency_json(&s.read[1])},
        "prompts_get": {"direct": latency_json(&s.prompt[0]), "hub": latency_json(&s.prompt[1])},
        "progress_notifications_per_sec": versus(s.progress[0].per_sec(), s.progress[1].per_sec(), 0),
        "progress_notifications": s.progress[1].notifications,
    }));
    let policy = c.policy.as_ref().map(|pol| json!({
        "variants": pol.variants.iter().zip(pipeline::variants()).map(|(m, v)| json!({
            "name": m.name,
            "settings": v.settings,
            "best_p50_us": round(m.best_p50(), 2),
            "latency_runs": runs(&m.runs),
            "throughput_runs": tp_runs(&m.throughput),
        })).collect::<Vec<_>>(),
        "cache_hit_to_direct_best_p50": c.latency.as_ref().zip(pol.variant(Role::CacheHit)).map(|(l, hit)| round(ratio(hit.best_p50(), best_p50(&l.spread.direct)), 3)),
        "full_pipeline_interleaved": {
            "added_us_median": pol.added_us().map(|us| round(us, 2)),
            "runs": pol.pairs.iter().map(|p| json!({"pass_through_p50_us": round(p.a_p50_us, 2), "full_p50_us": round(p.b_p50_us, 2)})).collect::<Vec<_>>(),
        },
    }));
    json!({
        "latency": latency,
        "throughput": throughput,
        "surface": surface,
        "policy": policy,
        "hub_settings": crate::client::pass_through(),
        "memory_1_server": {
            "hub_rss_kib_idle": c.hub_rss_idle_kib,
            "hub_rss_kib_after_throughput": c.hub_rss_after_kib,
            "hub_hwm_kib_after_throughput": c.hub_hwm_after_kib,
            "hub_exit_after_stdin_close_ms": round(crate::ms(c.hub_shutdown), 2),
        },
    })
}

fn hub_startup_json(h: &HubStartup) -> Value {
    json!({
        "servers": h.servers,
        "init_ms": round(h.init_ms, 2),
        "first_list_ms": round(h.first_list_ms, 2),
        "first_list_tools": h.first_list_tools,
        "full_list_ms": round(h.full_ms, 2),
        "listings": h.listings,
        "stale_listings": h.stale_listings,
        "list_changed_received": h.list_changed,
        "hub_cpu_ms": round(h.hub_cpu_ms, 2),
        "children_cpu_ms": round(h.children_cpu_ms, 2),
        "rss_kib": h.rss_kib,
        "rss_settled_kib": h.rss_settled_kib,
        "hwm_kib": h.hwm_kib,
        "threads": h.threads,
        "shutdown_ms": round(h.shutdown_ms, 2),
        "fixtures": {
            "found": h.confinement.fixtures,
            "sandboxed": h.confinement.sandboxed,
            "unconfined": h.confinement.as_bench,
        },
    })
}

fn startup_json(s: &StartupPart) -> Value {
    json!({
        "tools_per_fixture": s.per_server,
        "counts": s.counts.iter().map(|c| json!({
            "servers": c.servers,
            "median_ms": c.median_hub().map(|m| versus(c.median_direct_ms(), m.full_ms, 2)),
            "direct_runs_ms": c.direct_ms.iter().map(|x| round(*x, 2)).collect::<Vec<_>>(),
            "hub_median_run": c.median_hub().map(hub_startup_json),
            "hub_runs": c.hub.iter().map(hub_startup_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// Part 9: `{off, on, ratio}` of each startup figure, every run, and the interleaved calls.
fn sandbox_json(s: &SandboxPart) -> Value {
    let runs = |v: &[HubStartup]| v.iter().map(hub_startup_json).collect::<Vec<_>>();
    let off_on = |off: f64, on: f64| json!({"off": round(off, 2), "on": round(on, 2), "ratio": round(ratio(on, off), 3)});
    let median_ms = |v: &[HubStartup]| SandboxPart::median(v).map_or(0.0, |h| h.full_ms);
    json!({
        "servers": sandbox::SERVERS,
        "tools_per_fixture": s.per_server,
        "goal_startup_ratio": sandbox::GOAL_STARTUP_RATIO,
        "settings": {"on": crate::client::pass_through(), "off": sandbox::sandbox_off()},
        "startup": {
            "fastest_ms": off_on(SandboxPart::fastest_ms(&s.off), SandboxPart::fastest_ms(&s.on)),
            "median_ms": off_on(median_ms(&s.off), median_ms(&s.on)),
            "off_runs": runs(&s.off),
            "on_runs": runs(&s.on),
        },
        "call_interleaved": {
            "median_pair_p50_us": s.pair().map(|p| off_on(p.a_p50_us, p.b_p50_us)),
            "added_us_median": s.added_us().map(|us| round(us, 2)),
            "runs": s.pairs.iter().map(|p| json!({"off_p50_us": round(p.a_p50_us, 2), "on_p50_us": round(p.b_p50_us, 2)})).collect::<Vec<_>>(),
        },
    })
}

/// Part 12: the sandbox's first and later starts against off, each over off.
fn print_popular(s: &PopularPart) {
    println!(
        "12. the popular servers: {} in one hub ({}) to a tool list holding every server's tools;",
        s.servers.len(),
        s.servers.join(", ")
    );
    println!(
        "   {} runs each, alternating; first = sandbox default with the private caches and data folders emptied, later = not emptied; left out: {}",
        s.off.len(),
        popular::LEFT_OUT
    );
    let confined = |v: &[HubStartup]| {
        v.first().map_or(String::new(), |h| {
            format!("{} of {}", h.confinement.sandboxed, h.confinement.fixtures)
        })
    };
    println!(
        "   processes below the hub confined in /proc (NoNewPrivs 1 and a seccomp filter), first run: off {}; first {}; later {}",
        confined(&s.off),
        confined(&s.first),
        confined(&s.later)
    );
    println!(
        "   {:<42} {:>11} {:>11} {:>11}  first/off, later/off",
        "", "off", "first", "later"
    );
    let ratios = |pick: fn((f64, f64)) -> f64| {
        format!(
            "{:.2}×, {:.2}×",
            pick(s.ratios(&s.first)),
            pick(s.ratios(&s.later))
        )
    };
    for (what, of, pick) in [
        (
            "complete tool list (fastest run)",
            PopularPart::fastest as fn(&[HubStartup]) -> f64,
            (|r: (f64, f64)| r.0) as fn((f64, f64)) -> f64,
        ),
        (
            "complete tool list (median run)",
            PopularPart::median,
            |r| r.1,
        ),
    ] {
        println!(
            "   {:<42} {:>8.0} ms {:>8.0} ms {:>8.0} ms  {}",
            what,
            of(&s.off),
            of(&s.first),
            of(&s.later),
            ratios(pick)
        );
    }
    let runs = |v: &[HubStartup]| figures(v.iter().map(|h| h.full_ms), 0);
    println!(
        "   {:<42} off {}; first {}; later {}",
        "every run (ms)",
        runs(&s.off),
        runs(&s.first),
        runs(&s.later)
    );
}

fn popular_json(s: &PopularPart) -> Value {
    let runs = |v: &[HubStartup]| v.iter().map(hub_startup_json).collect::<Vec<_>>();
    let of = |f: fn(&[HubStartup]) -> f64, ratio_of: fn((f64, f64)) -> f64| {
        json!({
            "off": round(f(&s.off), 2),
            "first": round(f(&s.first), 2),
            "later": round(f(&s.later), 2),
            "first_over_off": round(ratio_of(s.ratios(&s.first)), 3),
            "later_over_off": round(ratio_of(s.ratios(&s.later)), 3),
        })
    };
    json!({
        "servers": s.servers,
        "left_out": popular::LEFT_OUT,
        "settings": {"on": crate::client::pass_through(), "off": sandbox::sandbox_off()},
        "fastest_ms": of(PopularPart::fastest, |r| r.0),
        "median_ms": of(PopularPart::median, |r| r.1),
        "first_runs": runs(&s.first),
        "later_runs": runs(&s.later),
        "off_runs": runs(&s.off),
    })
}

/// Part 10: the mode off and on in the columns, then a plain call against a search.
fn print_retrieval(r: &RetrievalPart) {
    println!(
        "10. tool search: {} user-phrased tasks over {} tools (filesystem, memory, time, everything live; fixtures github, slack, postgres, browser, git, tracker)",
        r.tasks,
        r.off.names.len()
    );
    println!("   {:<42} {:>11} {:>11} {:>10}", "", "off", "on", "on/off");
    let cut = r.bytes_cut();
    let enough = r.off.names.len() >= 150;
    ratio_row(
        "tools/list, every page (bytes)",
        &r.off.bytes.to_string(),
        &r.on.bytes.to_string(),
        ratio(r.on.bytes as f64, r.off.bytes as f64),
        &format!(
            "cut {}; goal ≥ {} at ≥ 150 tools: {}",
            pct(cut),
            pct(retrieval::GOAL_BYTES_CUT),
            goal(enough && cut >= retrieval::GOAL_BYTES_CUT)
        ),
    );
    text(
        "tools listed",
        &r.off.names.len().to_string(),
        &r.on.names.len().to_string(),
    );
    match &r.quality {
        Some(q) => print_quality(q, r.off.names.len()),
        None => println!("   recall: not measured (the hub has no search_tools)"),
    }
    let b = &r.big;
    println!(
        "   at {} tools ({} fixture servers, first tools/list after {:.0} ms): {} sequential round trips each, interleaved",
        b.tools, b.servers, b.startup_ms, b.call.calls
    );
    println!(
        "   {:<42} {:>11} {:>11} {:>10}",
        "", "tools/call", "search", "search/call"
    );
    let Some(search) = &b.search else {
        row(
            "p50 of a plain tools/call",
            b.call.p50_us,
            f64::NAN,
            "µs",
            "search not measured",
        );
        return;
    };
    let added = search.p50_us - b.call.p50_us;
    row(
        "p50",
        b.call.p50_us,
        search.p50_us,
        "µs",
        // The goal is the search's own work: the round trip around it is the hub's cost
        // for any call, which 496 idle children on two CPUs stretch from run to run.
        &format!(
            "search adds {added:+.1} µs to a call; goal well under {} ms: {}",
            retrieval::GOAL_SEARCH_P50_MS,
            goal(added < retrieval::GOAL_SEARCH_P50_MS * 1e3)
        ),
    );
    row("p99", b.call.p99_us, search.p99_us, "µs", "");
    row("mean", b.call.mean_us, search.mean_us, "µs", "");
}

/// Recall, MRR, per server, and the tasks whose tool the search did not put in the top five.
fn print_quality(q: &Quality, tools: usize) {
    let r5 = q.recall_at(5);
    println!(
        "   {:<42} {:>11}",
        "recall@1",
        format!("{:.3}", q.recall_at(1))
    );
    println!(
        "   {:<42} {:>11}             goal ≥ {}: {}",
        "recall@5",
        format!("{r5:.3}"),
        retrieval::GOAL_RECALL_AT_5,
        goal(r5 >= retrieval::GOAL_RECALL_AT_5)
    );
    println!(
        "   {:<42} {:>11}             tasks whose misses were studied while tuning",
        "  recall@5, even tasks",
        format!("{:.3}", q.recall_at_in(5, retrieval::Half::Studied))
    );
    println!(
        "   {:<42} {:>11}             tasks never looked at",
        "  recall@5, odd tasks (held out)",
        format!("{:.3}", q.recall_at_in(5, retrieval::Half::HeldOut))
    );
    for (i, set) in retrieval::LATER_SETS.iter().enumerate() {
        println!(
            "   {:<42} {:>11}             {} tasks {}",
            format!("recall@5, {} tasks", set.key),
            format!("{:.3}", q.later_recall_at(i, 5)),
            q.later.get(i).map_or(0, Vec::len),
            set.note
        );
    }
    println!(
        "   {:<42} {:>11}",
        format!("MRR (top {})", retrieval::LIMIT),
        format!("{:.3}", q.mrr())
    );
    let servers: Vec<String> = q
        .by_server()
        .iter()
        .map(|(s, n, first, five)| format!("{s} {first}/{five}/{n}"))
        .collect();
    println!("   first / top 5 / tasks: {}", servers.join(", "));
    println!(
        "   {:<42} {:>11}",
        "search_tools result, mean (bytes)",
        format!("{:.0}", q.result_bytes)
    );
    println!(
        "   {:<42} {:>11}",
        format!("search round trip at {tools} tools, p50 / p99"),
        format!("{:.1} / {:.1} µs", q.timing.p50_us, q.timing.p99_us)
    );
    let far: Vec<_> = q
        .ranked
        .iter()
        .filter(|r| r.rank.is_none_or(|n| n > 5))
        .collect();
    let near = q
        .ranked
        .iter()
        .filter(|r| r.rank.is_some_and(|n| (2..=5).contains(&n)))
        .count();
    println!(
        "   not in the top 5: {} task(s) (another {near} at ranks 2-5; every miss is in bench.json):",
        far.len()
    );
    for r in far {
        let rank = r.rank.map_or_else(|| "-".to_string(), |n| n.to_string());
        let top: Vec<&str> = r.got.iter().take(3).map(String::as_str).collect();
        println!(
            "     {:?} → {} (rank {rank}); got {}",
            r.task,
            r.expected,
            top.join(", ")
        );
    }
}

fn timing_json(t: &retrieval::Timing) -> Value {
    json!({"calls": t.calls, "p50_us": round(t.p50_us, 2), "p99_us": round(t.p99_us, 2), "mean_us": round(t.mean_us, 2)})
}

/// Part 10: the listings, recall with every task not ranked first, the 10,000-tool timings.
fn retrieval_json(r: &RetrievalPart) -> Value {
    let listing = |l: &retrieval::Listing| json!({"bytes": l.bytes, "pages": l.pages, "tools": l.names.len()});
    let quality = r.quality.as_ref().map(|q| {
        json!({
            "recall_at_1": round(q.recall_at(1), 4),
            "recall_at_5": round(q.recall_at(5), 4),
            "recall_at_5_studied": round(q.recall_at_in(5, retrieval::Half::Studied), 4),
            "recall_at_5_held_out": round(q.recall_at_in(5, retrieval::Half::HeldOut), 4),
            "later_sets": retrieval::LATER_SETS.iter().enumerate().map(|(i, set)| json!({
                "file": set.file,
                "tasks": q.later.get(i).map_or(0, Vec::len),
                "recall_at_1": round(q.later_recall_at(i, 1), 4),
                "recall_at_5": round(q.later_recall_at(i, 5), 4),
            })).collect::<Vec<_>>(),
            "mrr": round(q.mrr(), 4),
            "result_bytes_mean": round(q.result_bytes, 0),
            "search_round_trip": timing_json(&q.timing),
            "limit": retrieval::LIMIT,
            "goal_recall_at_5": retrieval::GOAL_RECALL_AT_5,
            "by_server": q.by_server().iter().map(|(s, n, first, five)| json!({"server": s, "tasks": n, "first": first, "top5": five})).collect::<Vec<_>>(),
            "misses": q.ranked.iter().filter(|x| x.rank != Some(1)).map(|x| json!({
                "task": x.task,
                "expected": x.expected,
                "rank": x.rank,
                "got_top3": x.got.iter().take(3).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    });
    let b = &r.big;
    json!({
        "tasks": r.tasks,
        "settings": {
            "off": retrieval::settings("off", retrieval::LIST_WAIT),
            "on": retrieval::settings("on", retrieval::LIST_WAIT),
            "at_scale": retrieval::settings("on", retrieval::BIG_LIST_WAIT),
        },
        "tools_list": {
            "off": listing(&r.off),
            "on": listing(&r.on),
            "cut": round(r.bytes_cut(), 4),
            "goal_cut": retrieval::GOAL_BYTES_CUT,
        },
        "quality": quality,
        "at_scale": {
            "servers": b.servers,
            "tools": b.tools,
            "fixtures_running": b.fixtures_running,
            "first_list_ms": round(b.startup_ms, 1),
            "rounds": b.rounds,
            "tools_call": timing_json(&b.call),
            "search_tools": b.search.as_ref().map(timing_json),
            "search_added_p50_us": b.search.as_ref().map(|s| round(s.p50_us - b.call.p50_us, 2)),
            "goal_search_p50_ms": retrieval::GOAL_SEARCH_P50_MS,
        },
    })
}

/// Part 13: per task, the bytes, tokens, calls and time of each way; the totals and the cut;
/// a program's start cost and the hub's memory with a worker running.
fn print_code(c: &CodePart) {
    println!(
        "13. code mode: {} tasks over tracker, github, slack and postgres fixtures with canned data; (a) direct calls with the {}-tool catalogue listed, (b) search_tools + run_code; tokens ≈ bytes / {}; times are medians of {} runs, calls only (no model turns)",
        c.tasks.len(),
        c.tools_direct,
        code::BYTES_PER_TOKEN,
        c.runs
    );
    println!(
        "   {:<24} {:>5} {:>9} {:>8} {:>9} {:>8} {:>6} {:>9} {:>9}  note",
        "task", "calls", "(a) bytes", "(a) tok", "(b) bytes", "(b) tok", "cut", "(a) ms", "(b) ms",
    );
    let list_b = c.list_code.as_ref().map(|(b, _)| *b);
    for t in &c.tasks {
        let a = c.list_direct_bytes + t.direct.result_bytes;
        let b = t
            .code
            .as_ref()
            .zip(list_b)
            .map(|(r, list)| list + r.search_bytes + r.run_bytes);
        let note = match &t.code {
            None => "(b) not run".to_string(),
            Some(r) => {
                let answer = match (&r.error, r.same) {
                    (Some(e), _) => {
                        format!("program failed: {}", e.lines().next().unwrap_or_default())
                    }
                    (None, true) => "same answer".to_string(),
                    (None, false) => format!(
                        "answers differ: (b) {}",
                        r.answer
                            .as_ref()
                            .map_or_else(|| "nothing".to_string(), Value::to_string)
                    ),
                };
                format!(
                    "{answer}; search found {}/{} tools used{}",
                    r.found,
                    t.direct.tools.len(),
                    if r.unconfined { "; ran unconfined" } else { "" }
                )
            }
        };
        println!(
            "   {:<24} {:>5} {:>9} {:>8.0} {:>9} {:>8} {:>6} {:>9.2} {:>9}  {}",
            t.task.key,
            t.direct.calls,
            a,
            code::tokens(a),
            b.map_or_else(|| "-".to_string(), |b| b.to_string()),
            b.map_or_else(|| "-".to_string(), |b| format!("{:.0}", code::tokens(b))),
            b.map_or_else(|| "-".to_string(), |b| pct(1.0 - b as f64 / a as f64)),
            t.direct.ms,
            t.code
                .as_ref()
                .map_or_else(|| "-".to_string(), |r| format!("{:.2}", r.ms)),
            note
        );
    }
    let (a, b) = c.totals();
    let calls: usize = c.tasks.iter().map(|t| t.direct.calls).sum();
    let ms_a: f64 = c.tasks.iter().map(|t| t.direct.ms).sum();
    let ms_b: Option<f64> = c.tasks.iter().map(|t| t.code.as_ref().map(|r| r.ms)).sum();
    println!(
        "   {:<24} {:>5} {:>9} {:>8.0} {:>9} {:>8} {:>6} {:>9.2} {:>9}  goal ≥ {} fewer bytes: {}",
        "total",
        calls,
        a,
        code::tokens(a),
        b.map_or_else(|| "-".to_string(), |b| b.to_string()),
        b.map_or_else(|| "-".to_string(), |b| format!("{:.0}", code::tokens(b))),
        c.cut().map_or_else(|| "-".to_string(), pct),
        ms_a,
        ms_b.map_or_else(|| "-".to_string(), |m| format!("{m:.2}")),
        pct(code::GOAL_BYTES_CUT),
        c.cut()
            .map_or("not measured", |cut| goal(cut >= code::GOAL_BYTES_CUT))
    );
    let results_a: usize = c.tasks.iter().map(|t| t.direct.result_bytes).sum();
    let results_b: Option<usize> = c
        .tasks
        .iter()
        .map(|t| t.code.as_ref().map(|r| r.search_bytes + r.run_bytes))
        .sum();
    println!(
        "   tools/list: (a) {} bytes ({} tools), (b) {}; results alone: (a) {} bytes, (b) {}",
        c.list_direct_bytes,
        c.tools_direct,
        c.list_code.as_ref().map_or_else(
            || "-".to_string(),
            |(b, names)| format!("{b} bytes ({})", names.join(", "))
        ),
        results_a,
        results_b.map_or_else(
            || "-".to_string(),
            |b| format!(
                "{b} bytes (search + program, cut {})",
                pct(1.0 - b as f64 / results_a.max(1) as f64)
            )
        )
    );
    if let Some(s) = &c.start {
        println!(
            "   a program's start: run_code of `1` p50 {:.2} ms against a plain tools/call p50 {:.2} ms ({}), {} runs each, interleaved",
            s.run_code_p50_ms, s.plain_p50_ms, s.plain_on, s.runs
        );
    }
    if let Some(m) = &c.memory {
        println!(
            "   hub memory (VmRSS): idle {}, peak while a worker ran a loop {} (+ {} in {} process(es) below it, fixtures excepted); the loop ended: {}",
            mib(m.hub_idle_kib),
            mib(m.hub_running_kib),
            mib(m.workers_kib),
            m.workers,
            m.ended
        );
    }
}

fn code_json(c: &CodePart) -> Value {
    let (a, b) = c.totals();
    let list_b = c.list_code.as_ref().map(|(b, _)| *b);
    json!({
        "runs": c.runs,
        "bytes_per_token": code::BYTES_PER_TOKEN,
        "token_count": "approximate: bytes / 4",
        "settings": {"direct": crate::retrieval::settings("off", crate::retrieval::LIST_WAIT), "code": code::code_settings()},
        "search_limit": code::SEARCH_LIMIT,
        "tools_list": {
            "direct": {"bytes": c.list_direct_bytes, "tools": c.tools_direct},
            "code": c.list_code.as_ref().map(|(b, names)| json!({"bytes": b, "tools": names})),
        },
        "tasks": c.tasks.iter().map(|t| {
            let a = c.list_direct_bytes + t.direct.result_bytes;
            json!({
                "key": t.task.key,
                "task": t.task.what,
                "query": t.task.query,
                "program": t.task.program,
                "direct": {
                    "calls": t.direct.calls,
                    "tools": t.direct.tools,
                    "result_bytes": t.direct.result_bytes,
                    "bytes": a,
                    "tokens": round(code::tokens(a), 0),
                    "median_ms": round(t.direct.ms, 3),
                    "answer": t.direct.answer,
                },
                "code": t.code.as_ref().zip(list_b).map(|(r, list)| {
                    let b = list + r.search_bytes + r.run_bytes;
                    json!({
                        "calls": 2,
                        "search_bytes": r.search_bytes,
                        "run_code_bytes": r.run_bytes,
                        "bytes": b,
                        "tokens": round(code::tokens(b), 0),
                        "median_ms": round(r.ms, 3),
                        "cut": round(1.0 - b as f64 / a as f64, 4),
                        "search_found_tools_used": r.found,
                        "search_missed": r.missed,
                        "same_answer": r.same,
                        "error": r.error,
                        "answer_if_different": r.answer,
                        "ran_unconfined": r.unconfined,
                    })
                }),
            })
        }).collect::<Vec<_>>(),
        "total": {
            "direct_bytes": a,
            "direct_tokens": round(code::tokens(a), 0),
            "code_bytes": b,
            "code_tokens": b.map(|b| round(code::tokens(b), 0)),
            "cut": c.cut().map(|x| round(x, 4)),
            "goal_cut": code::GOAL_BYTES_CUT,
        },
        "start": c.start.as_ref().map(|s| json!({
            "runs": s.runs,
            "run_code_1_p50_ms": round(s.run_code_p50_ms, 3),
            "plain_call_p50_ms": round(s.plain_p50_ms, 3),
            "plain_call_on": s.plain_on,
        })),
        "memory": c.memory.as_ref().map(|m| json!({
            "hub_idle_kib": m.hub_idle_kib,
            "hub_with_worker_kib": m.hub_running_kib,
            "below_hub_processes": m.workers,
            "below_hub_kib": m.workers_kib,
            "program_ended": m.ended,
        })),
    })
}

fn git_describe() -> Option<String> {
    let out = Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}
