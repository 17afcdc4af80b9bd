//! Part 14: what `openpact.telemetry` costs a call — `fx:echo` with a `_meta.traceparent`,
//! interleaved ([`paired`]) on two fresh hubs of the same run: telemetry off (the default)
//! against on, exporting every span and the operation-duration histograms over OTLP/HTTP to
//! a receiver on loopback in this process (it answers each export `200` and counts it, so
//! "on" is checked to have exported). Information against the goal (on ≤
//! [`GOAL_RATIO`]× off), never a gate.

use crate::client::{CallTemplate, pass_through, start_hub};
use crate::latency::{Paired, paired};
use crate::{Ctx, Params, median_by, ratio};
use anyhow::{Result, anyhow, bail};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The design goal: a call's p50 with telemetry exporting at most this many times off's.
pub const GOAL_RATIO: f64 = 1.10;

pub struct TelemetryPart {
    /// a = off, b = on; one pair per fresh pair of hubs.
    pub pairs: Vec<Paired>,
    /// OTLP requests the receiver answered (traces and metrics).
    pub exports: usize,
}

impl TelemetryPart {
    /// The interleaved run with the median ratio.
    pub fn pair(&self) -> Option<&Paired> {
        median_by(&self.pairs, |p| ratio(p.b_p50_us, p.a_p50_us))
    }

    pub fn ratio(&self) -> f64 {
        self.pair().map_or(0.0, |p| ratio(p.b_p50_us, p.a_p50_us))
    }
}

/// A loopback OTLP/HTTP receiver: answers every request `200` (an empty export response).
struct Receiver {
    url: String,
    exports: Arc<AtomicUsize>,
    server: Arc<tiny_http::Server>,
}

impl Receiver {
    fn start() -> Result<Receiver> {
        let server = Arc::new(
            tiny_http::Server::http("127.0.0.1:0").map_err(|e| anyhow!("OTLP receiver: {e}"))?,
        );
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| anyhow!("OTLP receiver: no IP address"))?;
        let exports = Arc::new(AtomicUsize::new(0));
        let (srv, n) = (server.clone(), exports.clone());
        std::thread::spawn(move || {
            for mut request in srv.incoming_requests() {
                let _ = std::io::copy(request.as_reader(), &mut std::io::sink());
                n.fetch_add(1, Ordering::Relaxed);
                let _ = request.respond(tiny_http::Response::empty(200));
            }
        });
        Ok(Receiver {
            url: format!("http://{addr}"),
            exports,
            server,
        })
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.server.unblock();
    }
}

pub fn run(ctx: &Ctx, p: &Params) -> Result<TelemetryPart> {
    let receiver = Receiver::start()?;
    let off = pass_through();
    let mut on = pass_through();
    on["telemetry"] = json!({"otlp": receiver.url});
    let call = CallTemplate::new(
        "tools/call",
        &json!({
            "name": "fx:echo",
            "arguments": {"message": "hello"},
            "_meta": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
        }),
    );
    ctx.watchdog
        .arm("telemetry: interleaved calls", Duration::from_secs(600));
    let mut pairs = Vec::new();
    for rep in 0..p.policy_runs.max(1) {
        let (mut a, _) = start_hub(ctx, &format!("hub-telemetry-off-{rep}"), &off)?;
        let (mut b, _) = start_hub(ctx, &format!("hub-telemetry-on-{rep}"), &on)?;
        pairs.push(paired(
            (&mut a, &call),
            (&mut b, &call),
            (p.latency_warmup, p.latency_calls),
        )?);
        a.close(Duration::from_secs(10));
        // Closing flushes what the hub still holds.
        b.close(Duration::from_secs(10));
    }
    ctx.watchdog.disarm();
    let exports = receiver.exports.load(Ordering::Relaxed);
    if exports == 0 {
        bail!("telemetry on exported nothing to {}", receiver.url);
    }
    Ok(TelemetryPart { pairs, exports })
}

pub fn print(t: &TelemetryPart) {
    let Some(pair) = t.pair() else { return };
    println!(
        "14. telemetry: tools/call fx:echo with a traceparent, interleaved on fresh hubs, off against on (OTLP/HTTP to a loopback receiver, {} exports);",
        t.exports
    );
    println!("   {} pairs; the pair with the median ratio", t.pairs.len());
    println!("   {:<42} {:>11} {:>11} {:>10}", "", "off", "on", "on/off");
    let r = t.ratio();
    println!(
        "   {:<42} {:>9.1}µs {:>9.1}µs {:>9.2}×  goal ≤ {GOAL_RATIO}×: {}",
        "tools/call p50",
        pair.a_p50_us,
        pair.b_p50_us,
        r,
        if r <= GOAL_RATIO { "met" } else { "missed" }
    );
}

pub fn json(t: &TelemetryPart) -> Value {
    json!({
        "goal_ratio": GOAL_RATIO,
        "exports": t.exports,
        "ratio_median_pair": t.ratio(),
        "pairs": t.pairs.iter().map(|p| json!({"off_p50_us": p.a_p50_us, "on_p50_us": p.b_p50_us})).collect::<Vec<_>>(),
    })
}
