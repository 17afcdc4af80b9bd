//! `--minutes M`: one hub, five servers and mixed traffic for M minutes, then the leak
//! checks.
//!
//! Servers: `fx` (a plain fixture), `crashy` (made to crash every few seconds; the hub
//! restarts it), `noisy` (floods stderr), `stuck` (its `slow` outlasts a 1 s `timeout`), and
//! `remote`, an `openpact-fixture --http` on a loopback port that is killed and started
//! again every 30 s. Clients: the hub's stdio, and [`HANDSHAKE_CLIENTS`] handshake plus
//! [`STATELESS_CLIENTS`] 2026-07-28 HTTP clients ([`crate::work`]).
//!
//! Every [`SAMPLE_EVERY`] the hub is sampled ([`crate::probe`]); every 30 s a row is
//! printed. At the end the clients stop (handshake sessions DELETEd, except those that
//! vanished: `sessionIdleTimeout` is 8 s here), the run waits up to [`QUIET`] for the hub to
//! settle, and checks:
//!
//! - no failure: no lost, wrong, late or cross-delivered answer ([`crate::work::Tally`]);
//! - VmRSS at the end at most 10% above the sample at minute 2 (at 25% of the run when it
//!   is shorter than 3 minutes);
//! - back to the baseline taken after startup, before the clients: fds ≤ baseline + 2,
//!   threads ≤ baseline + 2, sessions ≤ baseline, runtime tasks ≤ baseline + 5, children ≤
//!   baseline, and all five servers ready.

use crate::hub::{self, Remote};
use crate::mcp::Stdio;
use crate::probe::{Probe, Sample, series};
use crate::sessions::wait_ready;
use crate::work::{self, Env, Tally};
use crate::{Ctx, mib};
use anyhow::{Context, Result, anyhow};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const HANDSHAKE_CLIENTS: u64 = 12;
pub const STATELESS_CLIENTS: u64 = 12;
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
const PRINT_EVERY: Duration = Duration::from_secs(30);
/// How long the hub may take to settle once the clients are gone.
const QUIET: Duration = Duration::from_secs(25);
const SERVERS: u64 = 5;
const RSS_SLACK: f64 = 0.10;
const FD_SLACK: u64 = 2;
const THREAD_SLACK: u64 = 2;
const TASK_SLACK: u64 = 5;

pub async fn run(ctx: &Ctx, minutes: f64) -> Result<bool> {
    let ctx = Arc::new(Ctx {
        openpact: ctx.openpact.clone(),
        fixture: ctx.fixture.clone(),
        work: ctx.work.clone(),
    });
    let port = hub::free_port()?;
    let remote = Remote::start(&ctx, port).await?;
    let fixture = |extra: serde_json::Value| {
        let mut entry = json!({"command": ctx.fixture});
        if let (Some(e), Some(x)) = (entry.as_object_mut(), extra.as_object()) {
            e.extend(x.clone());
        }
        entry
    };
    let servers = json!({
        "fx": fixture(json!({})),
        "crashy": fixture(json!({"args": ["--name", "crashy"], "timeout": "10s"})),
        "noisy": fixture(json!({"args": ["--name", "noisy"]})),
        "stuck": fixture(json!({"args": ["--name", "stuck"], "timeout": "1s"})),
        "remote": {"url": format!("http://127.0.0.1:{port}/mcp"), "timeout": "5s"},
    });
    let settings = json!({
        "permissions": {"allow": ["*"], "ask": ["fx:echo_structured"]},
        "rateLimits": {"default": "off"},
        "cache": {"rules": {"fx:add": "30s"}},
        // Code mode, with fx:echo still listed for the listing check.
        "toolSearch": {"mode": "off", "alwaysLoad": ["fx:echo"]},
        "codeMode": {"mode": "on"},
        "restart": {"initialBackoff": "200ms", "maxBackoff": "1s", "maxCrashes": 100000, "window": "60s"},
        "http": {"maxSessions": 256, "sessionIdleTimeout": "8s"},
    });
    let mut hub = hub::start(&ctx, "soak", servers, settings, true).await?;
    let (stdin, stdout) = hub
        .stdio
        .take()
        .ok_or_else(|| anyhow!("the hub's stdio is not piped"))?;
    let tally = Arc::new(Tally::default());
    let stdio = Arc::new(Stdio::start(stdin, stdout, tally.strays.clone()));
    work::stdio_initialize(&stdio).await?;
    let probe = Probe::new(hub.pid, &hub.base)?;
    wait_ready(&probe, SERVERS)
        .await
        .with_context(|| format!("see {}", hub.log.display()))?;
    // Let the startup settle (the stdio client's capabilities, first lists) before the baseline.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = probe.sample(0.0).await?;
    println!(
        "soak --minutes {minutes}: hub pid {} at {}; baseline RSS {:.1} MiB, fds {}, threads {}, sessions {}, tasks {}, children {}",
        hub.pid,
        hub.base,
        mib(baseline.rss_kib),
        baseline.fds,
        baseline.threads,
        baseline.sessions,
        baseline.tasks,
        baseline.children
    );
    println!(
        "clients: stdio + {HANDSHAKE_CLIENTS} handshake-era HTTP + {STATELESS_CLIENTS} 2026-07-28 HTTP; servers fx, crashy (crash every 3 s), noisy (stderr flood), stuck (1 s timeout), remote (restarted every 30 s)"
    );
    let env = Env {
        url: hub.url(),
        stop: Arc::new(AtomicBool::new(false)),
        tally: tally.clone(),
    };
    let t0 = Instant::now();
    let mut clients = tokio::task::JoinSet::new();
    clients.spawn(work::stdio_client(env.clone(), stdio.clone()));
    for n in 0..HANDSHAKE_CLIENTS {
        clients.spawn(work::handshake_client(env.clone(), n));
    }
    for n in 0..STATELESS_CLIENTS {
        clients.spawn(work::stateless_client(env.clone(), n));
    }
    let mut drivers = tokio::task::JoinSet::new();
    drivers.spawn(work::crash_driver(env.clone(), Duration::from_secs(3)));
    drivers.spawn(work::flood_driver(
        env.clone(),
        Duration::from_secs(1),
        3_000,
    ));
    drivers.spawn(work::stuck_driver(env.clone(), Duration::from_secs(2)));
    let remote_task = tokio::spawn(work::remote_driver(
        env.clone(),
        ctx.clone(),
        remote,
        Duration::from_secs(30),
    ));

    // Sampling until the time is up.
    let run_for = Duration::from_secs_f64(minutes * 60.0);
    let mut samples: Vec<Sample> = Vec::new();
    let mut sample_errors = 0;
    print_header();
    let mut next_print = PRINT_EVERY;
    while t0.elapsed() < run_for {
        let left = run_for.saturating_sub(t0.elapsed());
        tokio::time::sleep(SAMPLE_EVERY.min(left)).await;
        match probe.sample(t0.elapsed().as_secs_f64()).await {
            Ok(s) => samples.push(s),
            Err(e) => {
                sample_errors += 1;
                eprintln!("soak: sampling failed: {e:#}");
            }
        }
        if t0.elapsed() >= next_print
            && let Some(s) = samples.last()
        {
            print_row(s, &tally);
            next_print += PRINT_EVERY;
        }
    }

    // Stop: clients finish their action (handshake ones DELETE their session), drivers stop.
    env.stop.store(true, Ordering::Relaxed);
    let stopping = Instant::now();
    let mut stuck_clients = 0;
    for set in [&mut clients, &mut drivers] {
        while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(45), set.join_next()).await
        {
        }
        stuck_clients += set.len();
        set.abort_all();
    }
    let remote = remote_task.await.ok();
    let in_flight = stdio.in_flight();
    println!(
        "clients stopped in {:.1} s; waiting up to {} s for the hub to settle",
        stopping.elapsed().as_secs_f64(),
        QUIET.as_secs()
    );

    // Quiescence: every figure back within its slack, or the time is up.
    let settle = Instant::now();
    let mut last = probe.sample(t0.elapsed().as_secs_f64()).await?;
    while !settled(&baseline, &last) && settle.elapsed() < QUIET {
        tokio::time::sleep(Duration::from_millis(500)).await;
        last = probe.sample(t0.elapsed().as_secs_f64()).await?;
    }
    let settled_in = settle.elapsed().as_secs_f64();
    let metrics = probe.metrics().await.unwrap_or_default();
    let cache_hits = series(&metrics, "openpact_cache_hits_total").unwrap_or(0.0);
    let calls = series(&metrics, "openpact_calls_total").unwrap_or(0.0);

    // The checks.
    let mut failed: Vec<String> = Vec::new();
    let failures = tally.failures();
    if failures > 0 {
        failed.push(format!(
            "{failures} lost, wrong or cross-delivered answers (listed above)"
        ));
    }
    if stuck_clients > 0 {
        failed.push(format!(
            "{stuck_clients} clients or drivers did not stop within 45 s"
        ));
    }
    if in_flight > 0 {
        failed.push(format!("{in_flight} stdio requests never answered"));
    }
    if sample_errors > 0 {
        failed.push(format!("{sample_errors} samples could not be taken"));
    }
    if cache_hits < 1.0 {
        failed.push("no cache hit (openpact_cache_hits_total)".into());
    }
    let reference_at = if minutes >= 3.0 {
        120.0
    } else {
        minutes * 60.0 * 0.25
    };
    let reference = samples.iter().find(|s| s.secs >= reference_at).copied();
    let growth = reference.map(|r| last.rss_kib as f64 / r.rss_kib.max(1) as f64 - 1.0);
    match (reference, growth) {
        (Some(r), Some(g)) if g >= RSS_SLACK => failed.push(format!(
            "RSS grew {:.1}% from {:.1} MiB at {:.0} s to {:.1} MiB at the end (limit {:.0}%)",
            g * 100.0,
            mib(r.rss_kib),
            r.secs,
            mib(last.rss_kib),
            RSS_SLACK * 100.0
        )),
        (None, _) => failed.push("no sample to compare RSS with".into()),
        _ => {}
    }
    failed.extend(unsettled(&baseline, &last));

    // The report.
    print_minutes(&baseline, &samples, &last);
    println!();
    println!(
        "calls by kind ({} by the clients; the hub counted {calls:.0} tool calls, {cache_hits:.0} cache hits):",
        tally.calls()
    );
    println!("  {:<16} {:>8} {:>8} {:>8}", "kind", "ok", "down", "failed");
    for (kind, c) in tally.kinds() {
        println!("  {kind:<16} {:>8} {:>8} {:>8}", c.ok, c.soft, c.fail);
    }
    println!("  (down: an error from crashy or remote while it was down on purpose)");
    for note in tally.notes() {
        println!("  failure: {note}");
    }
    if let Some(r) = reference {
        println!(
            "RSS {:.1} MiB at {:.0} s, {:.1} MiB at the end: {:+.1}% (limit +{:.0}%)",
            mib(r.rss_kib),
            r.secs,
            mib(last.rss_kib),
            growth.unwrap_or(0.0) * 100.0,
            RSS_SLACK * 100.0
        );
    }
    println!(
        "after the clients (settled in {settled_in:.1} s): fds {} (baseline {}, slack +{FD_SLACK}), threads {} ({}, +{THREAD_SLACK}), sessions {} ({}), runtime tasks {} ({}, +{TASK_SLACK}), children {} ({}), servers ready {}/{SERVERS}",
        last.fds,
        baseline.fds,
        last.threads,
        baseline.threads,
        last.sessions,
        baseline.sessions,
        last.tasks,
        baseline.tasks,
        last.children,
        baseline.children,
        last.ready
    );

    if let Some(remote) = remote {
        remote.stop().await;
    }
    drop(stdio);
    if !hub.stop().await {
        failed.push("the hub did not exit with status 0 on SIGTERM".into());
    }
    for f in &failed {
        println!("FAIL: {f}");
    }
    Ok(failed.is_empty())
}

fn settled(b: &Sample, s: &Sample) -> bool {
    unsettled(b, s).is_empty()
}

/// What is not back to the baseline.
fn unsettled(b: &Sample, s: &Sample) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |what: &str, now: u64, base: u64, slack: u64| {
        if now > base + slack {
            out.push(format!("{what} {now}, baseline {base} (+{slack} allowed)"));
        }
    };
    check("fds", s.fds, b.fds, FD_SLACK);
    check("threads", s.threads, b.threads, THREAD_SLACK);
    check("sessions", s.sessions, b.sessions, 0);
    check("runtime tasks", s.tasks, b.tasks, TASK_SLACK);
    check("child processes", s.children, b.children, 0);
    if s.ready < SERVERS {
        out.push(format!("only {} of {SERVERS} servers ready", s.ready));
    }
    out
}

fn print_header() {
    println!(
        "{:>6} {:>9} {:>5} {:>7} {:>8} {:>6} {:>8} {:>8} {:>8}",
        "t (s)", "RSS MiB", "fds", "threads", "sessions", "tasks", "children", "calls", "failures"
    );
}

fn print_row(s: &Sample, tally: &Tally) {
    println!(
        "{:>6.0} {:>9.1} {:>5} {:>7} {:>8} {:>6} {:>8} {:>8} {:>8}",
        s.secs,
        mib(s.rss_kib),
        s.fds,
        s.threads,
        s.sessions,
        s.tasks,
        s.children,
        tally.calls(),
        tally.failures()
    );
}

/// The baseline, the sample at each whole minute, and the final one.
fn print_minutes(baseline: &Sample, samples: &[Sample], last: &Sample) {
    println!();
    println!(
        "{:>10} {:>9} {:>5} {:>7} {:>6} {:>8} {:>8}",
        "minute", "RSS MiB", "fds", "threads", "tasks", "sessions", "children"
    );
    let row = |label: String, s: &Sample| {
        println!(
            "{label:>10} {:>9.1} {:>5} {:>7} {:>6} {:>8} {:>8}",
            mib(s.rss_kib),
            s.fds,
            s.threads,
            s.tasks,
            s.sessions,
            s.children
        );
    };
    row("baseline".into(), baseline);
    let mut minute = 1.0;
    for s in samples {
        if s.secs + 2.5 >= minute * 60.0 {
            row(format!("{minute:.0}"), s);
            minute += 1.0;
        }
    }
    row("end".into(), last);
}
