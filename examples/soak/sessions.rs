//! `--sessions N`: session churn over the HTTP face. Phase A: N handshake sessions that each
//! initialize, send `notifications/initialized`, make five `fx:echo` calls (each answer
//! checked) and are abandoned (never DELETEd: the hub ends the idlest when `maxSessions`,
//! 64, are open). Phase B: the same, each ended with DELETE. [`CLIENTS`] clients at a time,
//! each phase on a fresh hub. The hub's VmRSS is read after the first 1,000 sessions and
//! after all N; a phase passes when the second is at most 10% above the first and every
//! call was answered right.

use crate::hub;
use crate::mcp::{Handshake, Strays, http_client};
use crate::probe::{Probe, Sample};
use crate::{Ctx, mib};
use anyhow::{Result, anyhow, bail};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Clients making sessions at once.
pub const CLIENTS: usize = 8;
/// The RSS reference: after this many sessions.
const FIRST: usize = 1_000;
/// Allowed RSS growth from the reference to the end.
const SLACK: f64 = 0.10;
const CALLS: usize = 5;

struct Phase {
    name: &'static str,
    rss_first_kib: u64,
    rss_all_kib: u64,
    secs: f64,
    end: Sample,
    failures: u64,
    notes: Vec<String>,
}

impl Phase {
    fn growth(&self) -> f64 {
        self.rss_all_kib as f64 / self.rss_first_kib.max(1) as f64 - 1.0
    }

    fn pass(&self) -> bool {
        self.growth() <= SLACK && self.failures == 0
    }
}

pub async fn run(ctx: &Ctx, count: usize) -> Result<bool> {
    let first = FIRST.min(count);
    println!(
        "soak --sessions {count}: {CLIENTS} clients, {CALLS} fx:echo calls per session, RSS after {first} and after {count}"
    );
    let mut phases = Vec::new();
    for (name, delete) in [("A abandoned", false), ("B DELETEd", true)] {
        phases.push(phase(ctx, name, count, first, delete).await?);
    }
    println!();
    println!(
        "{:<12} {:>14} {:>14} {:>8} {:>10} {:>10} {:>9} {:>9} {:>6}",
        "phase",
        format!("RSS@{first}"),
        format!("RSS@{count}"),
        "growth",
        "sessions/s",
        "seconds",
        "sessions",
        "tasks",
        "result"
    );
    for p in &phases {
        println!(
            "{:<12} {:>10.1} MiB {:>10.1} MiB {:>+7.1}% {:>10.0} {:>10.1} {:>9} {:>9} {:>6}",
            p.name,
            mib(p.rss_first_kib),
            mib(p.rss_all_kib),
            p.growth() * 100.0,
            count as f64 / p.secs,
            p.secs,
            p.end.sessions,
            p.end.tasks,
            if p.pass() { "PASS" } else { "FAIL" }
        );
    }
    println!(
        "(sessions, tasks: the openpact_sessions and openpact_runtime_tasks gauges at the end of the phase; PASS: RSS growth <= {:.0}% and every call answered right)",
        SLACK * 100.0
    );
    for p in &phases {
        if p.failures > 0 {
            println!("phase {}: {} failed sessions or calls:", p.name, p.failures);
            for n in &p.notes {
                println!("  {n}");
            }
        }
    }
    Ok(phases.iter().all(Phase::pass))
}

async fn phase(
    ctx: &Ctx,
    name: &'static str,
    count: usize,
    first: usize,
    delete: bool,
) -> Result<Phase> {
    let label = if delete {
        "sessions-deleted"
    } else {
        "sessions-abandoned"
    };
    let servers = json!({"fx": {"command": ctx.fixture}});
    let settings = json!({
        "permissions": {"allow": ["*"]},
        "rateLimits": {"default": "off"},
        "audit": {"enabled": false},
        "toolSearch": {"mode": "off"},
    });
    let hub = hub::start(ctx, label, servers, settings, false).await?;
    let probe = Probe::new(hub.pid, &hub.base)?;
    wait_ready(&probe, 1).await?;
    let strays = Arc::new(Strays::default());
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let notes = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let rss_first = Arc::new(AtomicU64::new(0));
    let url = hub.url();
    let t0 = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let (next, done, failures, notes, rss_first, strays) = (
            next.clone(),
            done.clone(),
            failures.clone(),
            notes.clone(),
            rss_first.clone(),
            strays.clone(),
        );
        let (url, pid) = (url.clone(), hub.pid);
        let http = http_client()?;
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return;
                }
                if let Err(e) = session(&http, &url, &strays, i, delete).await {
                    failures.fetch_add(1, Ordering::Relaxed);
                    let mut n = crate::mcp::lock(&notes);
                    if n.len() < 10 {
                        n.push(format!("session {i}: {e:#}"));
                    }
                }
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if d == first {
                    rss_first.store(
                        crate::probe::status_field(pid, "VmRSS").unwrap_or(0),
                        Ordering::Relaxed,
                    );
                }
                if d % 5_000 == 0 {
                    println!(
                        "  phase {name}: {d} sessions, {:.0} s",
                        t0.elapsed().as_secs_f64()
                    );
                }
            }
        });
    }
    while workers.join_next().await.is_some() {}
    let secs = t0.elapsed().as_secs_f64();
    let rss_all_kib = probe.rss_kib()?;
    // The gauges once the last calls' tasks are done.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let end = probe.sample(secs).await?;
    println!(
        "phase {name}: {count} sessions in {secs:.1} s; RSS {:.1} MiB after {first}, {:.1} MiB after {count}; openpact_sessions {} openpact_runtime_tasks {}",
        mib(rss_first.load(Ordering::Relaxed)),
        mib(rss_all_kib),
        end.sessions,
        end.tasks
    );
    let clean = hub.stop().await;
    let mut notes = crate::mcp::lock(&notes).clone();
    let mut failures = failures.load(Ordering::Relaxed) + strays.count();
    notes.extend(strays.notes());
    if !clean {
        failures += 1;
        notes.push("the hub did not exit cleanly on SIGTERM".into());
    }
    Ok(Phase {
        name,
        rss_first_kib: rss_first.load(Ordering::Relaxed),
        rss_all_kib,
        secs,
        end,
        failures,
        notes,
    })
}

/// One session: initialize, five checked echoes, then DELETE or walk away.
async fn session(
    http: &reqwest::Client,
    url: &str,
    strays: &Arc<Strays>,
    i: usize,
    delete: bool,
) -> Result<()> {
    let limit = Duration::from_secs(30);
    let mut s = Handshake::connect(http.clone(), url, strays.clone(), false).await?;
    for k in 0..CALLS {
        let message = format!("session {i} call {k}");
        let r = s
            .call("fx:echo", json!({"message": message}), None, limit)
            .await?;
        if r.text() != Some(message.as_str()) {
            bail!("fx:echo {message:?} answered {}", r.brief());
        }
    }
    if delete {
        let status = s.delete().await?;
        if status != 204 {
            return Err(anyhow!("DELETE answered {status}"));
        }
    }
    Ok(())
}

/// Waits until `servers` servers are ready (`openpact_servers{state="ready"}`).
pub async fn wait_ready(probe: &Probe, servers: u64) -> Result<Sample> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = probe.sample(0.0).await?;
        if s.ready >= servers {
            return Ok(s);
        }
        if Instant::now() > deadline {
            bail!("only {} of {servers} servers ready after 30 s", s.ready);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
