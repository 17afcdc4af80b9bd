//! Part 8: the hub's HTTP face. DIRECT is `openpact-fixture --http`, which serves the
//! fixture over Streamable HTTP (its own small axum server, as a typical HTTP MCP server)
//! with one fixture child per session; HUB is `openpact serve --http --no-stdio` whose one server is the stdio fixture
//! (pass-through policy), so the two differ only by the hub. The bench is the HTTP client on
//! both sides ([`crate::http`]).
//!
//! - Sequential `tools/call echo`, p50 over several runs, each on fresh processes and a fresh
//!   session; the goal (hub ≤ [`GOAL_RATIO`]× direct) is information only.
//! - Calls/s with [`CLIENTS`] concurrent clients for a fixed time, each client its own
//!   session on its own connection (its own reqwest client), one call in flight at a time.
//!   The clients are tasks on one current-thread tokio runtime: the bench's side never uses
//!   more than one CPU, and its share of the CPU used is reported. Directly the 64 sessions
//!   have 64 fixture children; through the hub they share the hub's one fixture.

use crate::client::{
    self, CallTemplate, Pids, fixture_pid, hub_command, pass_through, stderr_log, stderr_path,
};
use crate::http::{HttpClient, ServerProcess, Session, reqwest_client};
use crate::latency::{Latency, LatencyPart, sample};
use crate::{Ctx, Params, median_by, percentile};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The design goal, printed as information: hub p50 over direct p50.
pub const GOAL_RATIO: f64 = 2.0;
/// Concurrent clients (sessions) in the throughput runs.
pub const CLIENTS: usize = 64;
/// Calls each client makes before the clock starts.
const WARMUP_PER_CLIENT: usize = 20;
/// How long a server may take to listen, and the hub to list its fixture's tools.
const READY: Duration = Duration::from_secs(30);
/// What both servers log (on stderr) before the URL they listen on.
const LISTENING: &str = "serving MCP over HTTP on ";
/// The fixture's name in the hub's config: its tools are `fx:NAME`.
const FX: &str = "fx";

/// The hub's settings: pass-through, and room for every client's session.
fn hub_settings() -> Value {
    let mut settings = pass_through();
    settings["http"] = json!({"maxSessions": 4 * CLIENTS, "maxInFlight": 4 * CLIENTS});
    settings
}

/// A throughput run: calls/s with [`CLIENTS`] sessions.
#[derive(Clone)]
pub struct Rate {
    pub calls: usize,
    pub secs: f64,
    pub per_sec: f64,
    /// Each call's time from sending to its answer, all clients together.
    pub p50_us: f64,
    pub p99_us: f64,
    /// CPU seconds over the run.
    pub cpu: Cpu,
    /// Distinct fixture processes the sessions reached.
    pub fixtures: usize,
    /// Share of the run during which some task waited for a CPU (other work on the machine
    /// shows here).
    pub cpu_pressure: f64,
}

/// CPU seconds of the processes of a throughput run.
#[derive(Clone, Copy, Default)]
pub struct Cpu {
    /// This program (all its clients).
    pub client: f64,
    /// The process serving HTTP: `openpact-fixture --http` or the hub.
    pub face: f64,
    /// The fixture children, together.
    pub fixtures: f64,
}

impl Cpu {
    fn read(face: u32, fixtures: &[u32], clk_tck: f64) -> Result<Cpu> {
        let cpu = |pid| client::cpu_seconds(pid, clk_tck);
        Ok(Cpu {
            client: cpu(std::process::id())?,
            face: cpu(face)?,
            fixtures: fixtures.iter().map(|p| cpu(*p)).sum::<Result<f64>>()?,
        })
    }

    fn since(&self, before: &Cpu) -> Cpu {
        Cpu {
            client: self.client - before.client,
            face: self.face - before.face,
            fixtures: self.fixtures - before.fixtures,
        }
    }

    pub fn total(&self) -> f64 {
        self.client + self.face + self.fixtures
    }
}

/// Part 8's figures. In `latency`, each run's `cpu_us_per_call.hub` is the process serving
/// HTTP on both sides (the fixture's HTTP server directly) and `fixture` the session's child.
pub struct HttpPart {
    pub latency: LatencyPart,
    pub direct: Vec<Rate>,
    pub hub: Vec<Rate>,
}

/// The run with the median rate.
pub fn median(runs: &[Rate]) -> Option<&Rate> {
    median_by(runs, |r| r.per_sec)
}

/// The highest rate.
pub fn best(runs: &[Rate]) -> f64 {
    runs.iter().map(|r| r.per_sec).fold(0.0, f64::max)
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Direct,
    Hub,
}

/// A server on a loopback port: the fixture's HTTP mode, or a hub with the fixture.
struct Server {
    process: ServerProcess,
    url: String,
    side: Side,
}

impl Server {
    fn start(ctx: &Ctx, side: Side, label: &str) -> Result<Server> {
        let listen = ["--http", "127.0.0.1:0"];
        let mut cmd = match side {
            Side::Direct => {
                let mut cmd = Command::new(&ctx.fixture);
                cmd.args(listen).stderr(stderr_log(ctx, label)?);
                cmd
            }
            Side::Hub => {
                let mut servers = serde_json::Map::new();
                servers.insert(FX.into(), json!({"command": ctx.fixture}));
                let args = [&listen[..], &["--no-stdio"]].concat();
                hub_command(ctx, label, servers, &hub_settings(), &args)?
            }
        };
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        let mut process = ServerProcess::spawn(label, cmd)?;
        let log = stderr_path(ctx, label);
        let url = process.url_from_log(&log, LISTENING, READY)?;
        Ok(Server { process, url, side })
    }

    /// A fixture tool's name as this server lists it.
    fn tool(&self, name: &str) -> String {
        match self.side {
            Side::Direct => name.to_string(),
            Side::Hub => format!("{FX}:{name}"),
        }
    }

    fn echo(&self) -> CallTemplate {
        CallTemplate::echo(&self.tool("echo"))
    }

    /// Checks a new session's echo (retrying while the hub's fixture starts) and returns the
    /// pid of the fixture behind the session.
    async fn check(&self, session: &mut Session) -> Result<u32> {
        let echo = json!({"name": self.tool("echo"), "arguments": {"message": "hello"}});
        let deadline = Instant::now() + READY;
        loop {
            match session.call("tools/call", echo.clone()).await {
                Ok(r) if r.pointer("/content/0/text").and_then(Value::as_str) == Some("hello") => {
                    break;
                }
                Ok(r) => bail!("{}: echo answered {r}", self.process.label),
                Err(e) if Instant::now() > deadline => {
                    return Err(e.context(format!("{}: echo never answered", self.process.label)));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        let pids = json!({"name": self.tool("pids"), "arguments": {}});
        let result = session.call("tools/call", pids).await?;
        fixture_pid(&result).ok_or_else(|| {
            anyhow!(
                "{}: cannot learn the fixture's pid from {result}",
                self.process.label
            )
        })
    }
}

/// Part 8: the latency runs, then the throughput runs, direct and hub alternating.
pub fn run(ctx: &Ctx, p: &Params) -> Result<HttpPart> {
    let mut part = HttpPart {
        latency: LatencyPart {
            direct: Vec::new(),
            hub: Vec::new(),
            measured_again: false,
            limit: None,
        },
        direct: Vec::new(),
        hub: Vec::new(),
    };
    let counts = (p.http_warmup, p.http_calls);
    for rep in 0..p.http_runs.max(1) {
        part.latency.direct.push(latency(
            ctx,
            Side::Direct,
            &format!("fixture-http-{rep}"),
            counts,
        )?);
        part.latency
            .hub
            .push(latency(ctx, Side::Hub, &format!("hub-http-{rep}"), counts)?);
    }
    let time = Duration::from_secs_f64(p.http_seconds);
    for rep in 0..p.http_rate_runs.max(1) {
        let label = format!("fixture-http-rate-{rep}");
        part.direct
            .push(throughput(ctx, Side::Direct, &label, time)?);
        let label = format!("hub-http-rate-{rep}");
        part.hub.push(throughput(ctx, Side::Hub, &label, time)?);
    }
    Ok(part)
}

/// One run of sequential calls on a fresh server and session.
fn latency(ctx: &Ctx, side: Side, label: &str, counts: (usize, usize)) -> Result<Latency> {
    let server = Server::start(ctx, side, label)?;
    let mut http = HttpClient::connect(&server.url)?;
    let (rt, session) = http.parts();
    let fixture = rt.block_on(server.check(session))?;
    let pids = Pids {
        hub: Some(server.process.pid),
        fixture,
    };
    let echo = server.echo();
    let lat = sample(counts, pids, ctx.clk_tck, || http.timed(&echo))?;
    http.close();
    server.process.stop(Duration::from_secs(10));
    Ok(lat)
}

/// [`CLIENTS`] sessions on a fresh server, each calling echo one call at a time for `time`.
fn throughput(ctx: &Ctx, side: Side, label: &str, time: Duration) -> Result<Rate> {
    let server = Server::start(ctx, side, label)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let rate = rt.block_on(async {
        let mut sessions = Vec::with_capacity(CLIENTS);
        let mut fixtures = Vec::new();
        for _ in 0..CLIENTS {
            let mut s = Session::connect(reqwest_client()?, &server.url).await?;
            fixtures.push(server.check(&mut s).await?);
            sessions.push(s);
        }
        fixtures.sort_unstable();
        fixtures.dedup();
        let echo = std::sync::Arc::new(server.echo());
        // Warm-up, all clients at once (connections, the hub's and fixtures' buffers).
        sessions = all_clients(sessions, &echo, Bound::Calls(WARMUP_PER_CLIENT))
            .await?
            .0;
        let before = Cpu::read(server.process.pid, &fixtures, ctx.clk_tck)?;
        let pressure = client::cpu_pressure_us();
        let t0 = Instant::now();
        let (sessions, mut lat) = all_clients(sessions, &echo, Bound::Until(t0 + time)).await?;
        let secs = t0.elapsed().as_secs_f64();
        let cpu_pressure = match (pressure, client::cpu_pressure_us()) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e6 / secs,
            _ => f64::NAN,
        };
        let cpu = Cpu::read(server.process.pid, &fixtures, ctx.clk_tck)?.since(&before);
        for s in sessions {
            s.close().await;
        }
        lat.sort_unstable();
        let us = |q| percentile(&lat, q) as f64 / 1e3;
        anyhow::Ok(Rate {
            calls: lat.len(),
            secs,
            per_sec: lat.len() as f64 / secs,
            p50_us: us(0.50),
            p99_us: us(0.99),
            cpu,
            fixtures: fixtures.len(),
            cpu_pressure,
        })
    })?;
    server.process.stop(Duration::from_secs(10));
    Ok(rate)
}

#[derive(Clone, Copy)]
enum Bound {
    Calls(usize),
    Until(Instant),
}

/// Every session calls `echo` one call at a time until `bound`; the sessions back and every
/// call's time. Each answer's id is checked against its request's ([`Session::timed`]).
async fn all_clients(
    sessions: Vec<Session>,
    echo: &std::sync::Arc<CallTemplate>,
    bound: Bound,
) -> Result<(Vec<Session>, Vec<u64>)> {
    let mut tasks = tokio::task::JoinSet::new();
    for (n, mut s) in sessions.into_iter().enumerate() {
        let echo = echo.clone();
        tasks.spawn(async move {
            let mut lat = Vec::new();
            loop {
                let more = match bound {
                    Bound::Calls(c) => lat.len() < c,
                    Bound::Until(t) => Instant::now() < t,
                };
                if !more {
                    break;
                }
                lat.push(
                    s.timed(&echo)
                        .await
                        .with_context(|| format!("client {n}"))?,
                );
            }
            anyhow::Ok((n, s, lat))
        });
    }
    let mut back: Vec<Option<Session>> = Vec::new();
    back.resize_with(tasks.len(), || None);
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        let (n, s, lat) = done??;
        back[n] = Some(s);
        all.extend(lat);
    }
    Ok((back.into_iter().flatten().collect(), all))
}
