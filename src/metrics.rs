//! The hub's Prometheus metrics — calls by server and outcome, call latency per server, cache
//! hits, refused egress connections, and servers by state — and their text exposition for the HTTP face's `/metrics`.
//!
//! A leaf: it knows server names and state labels, not the hub. Every label value comes from
//! the configuration (server names) or a fixed set (outcomes, states), never from a request,
//! so the number of series stays bounded. Each server's counters and histogram are created
//! up front, so counting a call is an index, an atomic increment and a histogram observe.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Mutex;
use std::time::Duration;

/// The content type of what `prometheus-client` writes: OpenMetrics text, which Prometheus
/// scrapes natively (its counters end in `_total` and the text in `# EOF`).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Call latency bucket bounds, in seconds: from an in-process built-in to a slow remote tool.
const LATENCY_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];

/// What a call came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with a result (a tool's own `isError` result included: the call worked).
    Ok,
    /// No answer, or a JSON-RPC error.
    Error,
    /// Refused by the permission policy.
    Denied,
    /// Refused by the rate limit.
    RateLimited,
}

const OUTCOMES: [(Outcome, &str); 4] = [
    (Outcome::Ok, "ok"),
    (Outcome::Error, "error"),
    (Outcome::Denied, "denied"),
    (Outcome::RateLimited, "rate_limited"),
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// What the process holds at the moment of a scrape.
#[derive(Debug, Clone, Copy, Default)]
pub struct Live {
    pub sessions: usize,
    pub tasks: usize,
}

/// The metric families, where each server's series come from.
struct Families {
    calls: Family<CallLabels, Counter>,
    latency: Family<ServerLabel, Histogram>,
    cache_hits: Family<ServerLabel, Counter>,
    egress_refused: Family<ServerLabel, Counter>,
}

impl Families {
    fn series(&self, name: &str) -> PerServer {
        let server = ServerLabel {
            server: name.to_string(),
        };
        PerServer {
            calls: OUTCOMES.map(|(_, outcome)| {
                self.calls
                    .get_or_create(&CallLabels {
                        server: name.to_string(),
                        outcome,
                    })
                    .clone()
            }),
            latency: self.latency.get_or_create(&server).clone(),
            cache_hits: self.cache_hits.get_or_create(&server).clone(),
            egress_refused: self.egress_refused.get_or_create(&server).clone(),
        }
    }
}

/// One server's series, created when the hub starts (or a reload adds it).
#[derive(Clone)]
struct PerServer {
    calls: [Counter; OUTCOMES.len()],
    latency: Histogram,
    cache_hits: Counter,
    egress_refused: Counter,
}

pub struct Metrics {
    registry: Registry,
    families: Families,
    /// Indexed like the hub's servers.
    servers: std::sync::RwLock<Vec<PerServer>>,
    builtins: PerServer,
    states: Family<StateLabel, Gauge>,
    /// What the process holds now, read at scrape time ([`Live`]).
    sessions: Gauge,
    tasks: Gauge,
    /// Serialises scrapes: each resets the state gauges before setting them.
    scrape: Mutex<()>,
}

impl Metrics {
    /// Series for each of `servers` (the configured ones in order, then the built-ins').
    pub fn new(servers: &[String]) -> Metrics {
        let mut registry = Registry::with_prefix("openpact");
        let calls = Family::<CallLabels, Counter>::default();
        let latency = Family::<ServerLabel, Histogram>::new_with_constructor(
            (|| Histogram::new(LATENCY_BUCKETS)) as fn() -> Histogram,
        );
        let cache_hits = Family::<ServerLabel, Counter>::default();
        let egress_refused = Family::<ServerLabel, Counter>::default();
        let states = Family::<StateLabel, Gauge>::default();
        registry.register(
            "calls",
            "Tool calls, prompt gets and resource reads, by server and outcome",
            calls.clone(),
        );
        registry.register(
            "call_duration_seconds",
            "Time from a call's arrival to its answer, by server",
            latency.clone(),
        );
        registry.register(
            "cache_hits",
            "Calls answered from the result cache, by server",
            cache_hits.clone(),
        );
        registry.register(
            "sandbox_egress_refused",
            "Connections the egress proxy refused, by server",
            egress_refused.clone(),
        );
        registry.register("servers", "Configured servers by state", states.clone());
        let sessions = Gauge::default();
        registry.register(
            "sessions",
            "Client sessions alive in the hub (stdio, HTTP, shared-hub windows)",
            sessions.clone(),
        );
        let tasks = Gauge::default();
        registry.register(
            "runtime_tasks",
            "Tasks alive on the hub's runtime: flat while clients come and go, or something outlives them",
            tasks.clone(),
        );
        let families = Families {
            calls,
            latency,
            cache_hits,
            egress_refused,
        };
        let mut servers: Vec<PerServer> = servers.iter().map(|n| families.series(n)).collect();
        let builtins = servers
            .pop()
            .unwrap_or_else(|| families.series(crate::config::BUILTIN_SERVER));
        Metrics {
            registry,
            families,
            servers: std::sync::RwLock::new(servers),
            builtins,
            states,
            sessions,
            tasks,
            scrape: Mutex::new(()),
        }
    }

    /// Names server `i`'s series (a reload added or replaced it).
    pub fn name_server(&self, i: usize, name: &str) {
        let mut servers = self
            .servers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let series = self.families.series(name);
        if i < servers.len() {
            servers[i] = series;
        } else {
            while servers.len() < i {
                servers.push(series.clone());
            }
            servers.push(series);
        }
    }

    /// Counts a call to server `server` (its index; out of range for the built-ins).
    pub fn call(&self, server: usize, outcome: Outcome, took: Duration) {
        let Some(s) = self.per_server(server) else {
            return;
        };
        let i = OUTCOMES
            .iter()
            .position(|(o, _)| *o == outcome)
            .unwrap_or(0);
        s.calls[i].inc();
        s.latency.observe(took.as_secs_f64());
    }

    pub fn cache_hit(&self, server: usize) {
        if let Some(s) = self.per_server(server) {
            s.cache_hits.inc();
        }
    }

    /// Counts a connection that server `server`'s egress proxy refused.
    pub fn egress_refused(&self, server: usize) {
        if let Some(s) = self.per_server(server) {
            s.egress_refused.inc();
        }
    }

    /// Any index past the configured servers is the built-ins' series.
    fn per_server(&self, server: usize) -> Option<PerServer> {
        let servers = self
            .servers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(servers.get(server).unwrap_or(&self.builtins).clone())
    }

    /// The text exposition, with `states` (each server's state label) as the servers gauge;
    /// `ready` always appears, so "servers up" reads 0 rather than nothing.
    pub fn encode(&self, states: impl IntoIterator<Item = &'static str>, live: Live) -> String {
        let _one_at_a_time = self
            .scrape
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.sessions
            .set(i64::try_from(live.sessions).unwrap_or(i64::MAX));
        self.tasks
            .set(i64::try_from(live.tasks).unwrap_or(i64::MAX));
        self.states.clear();
        self.states
            .get_or_create(&StateLabel { state: "ready" })
            .set(0);
        for state in states {
            self.states.get_or_create(&StateLabel { state }).inc();
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        in_label_order(&text)
    }
}

/// The exposition with each family's series sorted by their labels (`le` aside, so a
/// histogram's lines stay together and in order): families keep series in a hash map, and
/// a scrape that reorders its lines every time is hard to read and to diff.
fn in_label_order(text: &str) -> String {
    fn key(line: &str) -> String {
        let labels = line
            .split_once('{')
            .and_then(|(_, rest)| rest.split_once('}'))
            .map_or("", |(labels, _)| labels);
        labels
            .split(',')
            .filter(|l| !l.starts_with("le="))
            .collect::<Vec<_>>()
            .join(",")
    }
    let mut out = String::with_capacity(text.len());
    let mut samples: Vec<&str> = Vec::new();
    let flush = |samples: &mut Vec<&str>, out: &mut String| {
        samples.sort_by_key(|l| key(l));
        for l in samples.drain(..) {
            out.push_str(l);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut samples, &mut out);
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut samples, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_server_and_outcome_and_reports_states() {
        let m = Metrics::new(&["a".into(), "openpact".into()]);
        m.call(0, Outcome::Ok, Duration::from_millis(2));
        m.call(0, Outcome::Denied, Duration::from_millis(1));
        m.call(usize::MAX, Outcome::Error, Duration::from_millis(1));
        m.cache_hit(0);
        m.egress_refused(0);
        m.egress_refused(0);
        let text = m.encode(["ready", "failed", "ready"], Live::default());
        assert!(text.contains(r#"openpact_calls_total{server="a",outcome="ok"} 1"#));
        assert!(text.contains(r#"openpact_calls_total{server="a",outcome="denied"} 1"#));
        assert!(text.contains(r#"openpact_calls_total{server="openpact",outcome="error"} 1"#));
        assert!(text.contains(r#"openpact_cache_hits_total{server="a"} 1"#));
        assert!(text.contains(r#"openpact_sandbox_egress_refused_total{server="a"} 2"#));
        assert!(text.contains(r#"openpact_sandbox_egress_refused_total{server="openpact"} 0"#));
        assert!(text.contains(r#"openpact_call_duration_seconds_count{server="a"} 2"#));
        assert!(text.contains(r#"openpact_servers{state="ready"} 2"#));
        assert!(text.contains(r#"openpact_servers{state="failed"} 1"#));
        // Series in label order, the same on every scrape.
        let calls: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("openpact_calls_total"))
            .collect();
        let mut sorted = calls.clone();
        sorted.sort();
        assert_eq!(calls, sorted);
        assert_eq!(
            text,
            m.encode(["ready", "failed", "ready"], Live::default())
        );
        // A later scrape reflects only the states then.
        let text = m.encode(["starting"], Live::default());
        assert!(text.contains(r#"openpact_servers{state="ready"} 0"#));
        assert!(!text.contains(r#"state="failed""#));
    }
}
