//! Parts 5 and 6: the rest of the MCP surface (`resources/read`, `prompts/get`, progress
//! notifications) direct and through the hub, and the hub with its policy pipeline on —
//! features one at a time, a cache hit, and every stage on at once.
//!
//! The hubs of parts 1 and 2 allow every call by a rule, with no rate limit, cache or audit
//! ([`pass_through`]). Each variant here runs on fresh hubs; its figure is the best p50 of
//! the runs, with throughput on the first hub. The full pipeline's cost is then measured
//! interleaved against a pass-through hub ([`paired`]): on a VM the sequential p50s move by
//! tens of µs with whether the CPUs sleep between calls, and two identical hubs measured
//! sequentially can differ by more than the pipeline's whole cost. Even interleaved, two
//! identical hubs have differed by −17 to +59 µs in the slow regime, so the pipeline's
//! figure is information, never a verdict.
//!
//! The cache hit is compared with a direct echo run by run, not interleaved: interleaved on
//! a 2-CPU VM the bare fixture's calls drop to ~10 µs (the CPUs no longer sleep between
//! them) while the hub's stay near 100 µs, which measures the VM's wake-ups, not the cache.

use crate::client::{
    CallTemplate, ID_MARK, IdScanner, Peer, SECRET_VAR, Seen, Shared, pass_through, start_hub,
};
use crate::latency::{Latency, Paired, measure, median_run, paired};
use crate::throughput::{Throughput, warm_measure};
use crate::{Ctx, Params, median_by, min_by};
use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Progress notifications the fixture sends for one call: full run, quick run.
const PROGRESS_STEPS: [usize; 2] = [20_000, 5_000];
/// Design goals, printed as information.
pub const GOAL_CACHE_HIT_RATIO: f64 = 1.5;
pub const GOAL_PIPELINE_ADDED_US: f64 = 5.0;

/// What a policy variant is there to show.
#[derive(Clone, Copy, PartialEq)]
pub enum Role {
    /// One feature on its own, for the table.
    Feature,
    /// The same call again and again with its tool cached: every call after the first a hit.
    CacheHit,
    /// Every stage doing real work on every call.
    FullPipeline,
}

pub struct Variant {
    pub name: &'static str,
    pub role: Role,
    pub settings: Value,
}

/// Policy features measured on top of [`pass_through`]: one at a time, then everything on.
pub fn variants() -> Vec<Variant> {
    let with = |key: &str, value: Value| {
        let mut v = pass_through();
        v[key] = value;
        v
    };
    let rate_limit = json!({"default": {"perSecond": 1e9, "burst": 1_000_000}});
    let feature = |name, settings| Variant {
        name,
        role: Role::Feature,
        settings,
    };
    vec![
        feature(
            "audit log on (the default)",
            with("audit", json!({"enabled": true})),
        ),
        feature(
            "allowed by permissions.default (no rule)",
            with("permissions", json!({"default": "allow"})),
        ),
        feature(
            "rate limit 1e9/s (a bucket per call)",
            with("rateLimits", rate_limit.clone()),
        ),
        Variant {
            name: "cache hit (fx:echo cached, same arguments)",
            role: Role::CacheHit,
            settings: with(
                "cache",
                json!({"default": "off", "rules": {"fx:echo": "10m"}}),
            ),
        },
        Variant {
            name: "full pipeline (every call a cache miss)",
            role: Role::FullPipeline,
            settings: json!({
                "permissions": {"default": "allow"},
                "rateLimits": rate_limit,
                "cache": {"default": "off", "rules": {"fx:echo": "10m"}},
                "secrets": {"env": [SECRET_VAR]},
                "audit": {"enabled": true},
            }),
        },
    ]
}

impl Variant {
    /// Every call of the full pipeline differs in its arguments, so each one is a cache miss
    /// that is then stored; the others repeat the same call.
    fn template(&self) -> CallTemplate {
        match self.role {
            Role::FullPipeline => CallTemplate::new(
                "tools/call",
                &json!({"name": "fx:echo", "arguments": {"message": format!("hello {ID_MARK}")}}),
            ),
            Role::Feature | Role::CacheHit => CallTemplate::echo("fx:echo"),
        }
    }
}

/// A policy variant's figures: sequential latency on fresh hubs, throughput on the first.
pub struct Measured {
    pub name: &'static str,
    pub role: Role,
    pub runs: Vec<Latency>,
    pub throughput: Vec<Throughput>,
}

impl Measured {
    pub fn median(&self) -> Option<&Latency> {
        median_run(&self.runs)
    }

    pub fn best_p50(&self) -> f64 {
        min_by(&self.runs, |l| l.p50_us)
    }
}

pub struct PolicyPart {
    pub variants: Vec<Measured>,
    /// The pass-through hub (a) against the full-pipeline hub (b), interleaved, fresh hubs.
    pub pairs: Vec<Paired>,
}

impl PolicyPart {
    pub fn variant(&self, role: Role) -> Option<&Measured> {
        self.variants.iter().find(|m| m.role == role)
    }

    /// The interleaved run with the median p50 the full pipeline adds.
    pub fn pair(&self) -> Option<&Paired> {
        median_by(&self.pairs, |p| p.b_p50_us - p.a_p50_us)
    }

    /// What every stage of the pipeline adds to the pass-through hub's p50, interleaved.
    pub fn added_us(&self) -> Option<f64> {
        self.pair().map(|p| p.b_p50_us - p.a_p50_us)
    }
}

pub fn run(ctx: &Ctx, p: &Params) -> Result<PolicyPart> {
    let wd = &ctx.watchdog;
    let counts = (p.latency_warmup, p.latency_calls);
    let tp_counts = (p.throughput_warmup, p.throughput_calls);
    let tck = ctx.clk_tck;
    let mut measured = Vec::new();
    for (i, variant) in variants().into_iter().enumerate() {
        wd.arm(
            &format!("hub with {}", variant.name),
            Duration::from_secs(600),
        );
        let template = variant.template();
        let (mut runs, mut throughput) = (Vec::new(), Vec::new());
        for rep in 0..p.policy_runs.max(1) {
            let label = format!("hub-policy-{i}-run-{rep}");
            let (mut hub, pids) = start_hub(ctx, &label, &variant.settings)?;
            runs.push(measure(&mut hub, &template, counts, pids, tck)?);
            if rep == 0 {
                throughput.push(warm_measure(&mut hub, &template, tp_counts, pids, tck)?);
            }
            hub.close(Duration::from_secs(10));
        }
        measured.push(Measured {
            name: variant.name,
            role: variant.role,
            runs,
            throughput,
        });
    }

    wd.arm("interleaved pipeline", Duration::from_secs(600));
    let mut pairs = Vec::new();
    let full = variants()
        .into_iter()
        .find(|v| v.role == Role::FullPipeline);
    let fx_echo = CallTemplate::echo("fx:echo");
    for rep in 0..p.policy_runs.max(1) {
        let Some(full) = &full else { break };
        let (mut a, _) = start_hub(ctx, &format!("hub-pass-paired-{rep}"), &pass_through())?;
        let (mut b, _) = start_hub(ctx, &format!("hub-full-paired-{rep}"), &full.settings)?;
        pairs.push(paired(
            (&mut a, &fx_echo),
            (&mut b, &full.template()),
            counts,
        )?);
        a.close(Duration::from_secs(10));
        b.close(Duration::from_secs(10));
    }
    wd.disarm();
    Ok(PolicyPart {
        variants: measured,
        pairs,
    })
}

/// Part 5: `[direct, hub]` figures of the rest of the surface.
pub struct Surface {
    pub read: [Latency; 2],
    pub prompt: [Latency; 2],
    pub progress: [Progress; 2],
}

/// One `tools/call progress` with a progress token: notifications forwarded per second.
pub struct Progress {
    pub notifications: usize,
    pub secs: f64,
}

impl Progress {
    pub fn per_sec(&self) -> f64 {
        self.notifications as f64 / self.secs
    }
}

/// `resources/read` and `prompts/get` one at a time, and progress notifications streamed
/// through one call, on the shared peers.
pub fn surface(ctx: &Ctx, p: &Params, shared: &mut Shared) -> Result<Surface> {
    let counts = (p.latency_warmup / 2, p.latency_calls / 2);
    let tck = ctx.clk_tck;
    let (direct, hub) = (&mut shared.direct, &mut shared.hub);
    let read = CallTemplate::new("resources/read", &json!({"uri": "fixture://static/1"}));
    let prompt = |name: &str| {
        CallTemplate::new(
            "prompts/get",
            &json!({"name": name, "arguments": {"name": "bench"}}),
        )
    };
    let steps = PROGRESS_STEPS[usize::from(p.quick)];
    Ok(Surface {
        read: [
            measure(&mut direct.0, &read, counts, direct.1, tck)?,
            measure(&mut hub.0, &read, counts, hub.1, tck)?,
        ],
        prompt: [
            measure(&mut direct.0, &prompt("greet"), counts, direct.1, tck)?,
            measure(&mut hub.0, &prompt("fx:greet"), counts, hub.1, tck)?,
        ],
        progress: [
            progress(&mut direct.0, "progress", steps)?,
            progress(&mut hub.0, "fx:progress", steps)?,
        ],
    })
}

/// Calls `tool` (the fixture's `progress`) for `steps` notifications sent as fast as the
/// fixture can, and times them from the request to the last one. Every notification must
/// arrive, under the token this client chose, before the answer.
fn progress(peer: &mut Peer, tool: &str, steps: usize) -> Result<Progress> {
    let id = peer.next_id;
    peer.next_id += 1;
    let request = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": {"steps": steps, "ms": 0},
            "_meta": {"progressToken": "bench-progress"},
        },
    });
    let scanner = IdScanner::new();
    let token = memchr::memmem::Finder::new(b"\"progressToken\":\"bench-progress\"");
    let t0 = Instant::now();
    peer.send_line(&request.to_string())?;
    let mut seen = 0usize;
    let mut last = t0;
    loop {
        let line = peer.r.line()?;
        let text = &peer.r.buf[line];
        match scanner.scan(text)? {
            Seen::Result(got) if got == id => break,
            Seen::Result(got) => bail!("{}: answer to id {got} during progress", peer.label),
            Seen::Other => {
                if token.find(text).is_some() {
                    seen += 1;
                    last = Instant::now();
                }
            }
        }
    }
    if seen != steps {
        bail!(
            "{}: {seen} of {steps} progress notifications arrived",
            peer.label
        );
    }
    Ok(Progress {
        notifications: seen,
        secs: (last - t0).as_secs_f64(),
    })
}
