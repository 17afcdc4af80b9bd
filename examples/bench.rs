//! The openpact benchmark: the hub's forwarding cost against talking to a server directly.
//!
//! ```text
//! cargo build --release --bin openpact --bin openpact-fixture
//! cargo run --release --example bench            # full run, a minute or two
//! cargo run --release --example bench -- --quick # CI-sized, a few seconds
//! cargo run --release --example bench -- --help  # --only PART, --scale F, profiling wrapper
//! ```
//!
//! Every measure is taken twice in the same run: DIRECT, where this program speaks JSON-RPC
//! straight to `openpact-fixture` over pipes, and HUB, where it speaks to
//! `openpact --config CONFIG serve` whose config holds the fixture (tools are then
//! `SERVER:TOOL`). The report gives hub/direct ratios and checks the targets:
//!
//! 1. sequential `tools/call echo` latency, p50 and p99, over several runs on freshly started
//!    processes (hub p50 ≤ 3× direct p50, each side's best run: on a small VM, where the
//!    scheduler puts the threads decides a lot and interference only ever adds), with the CPU
//!    time, context switches and rescheduling IPIs per call;
//! 2. throughput with exactly 32 calls in flight (≥ 50,000 calls/s through the hub, its best
//!    run, for the same reason as latency), over five runs on fresh processes, with the CPU
//!    each process used (client, hub, fixture). The hub runs with a
//!    pass-through policy (every call allowed by a rule, no rate limit, no cache, no audit);
//!    policy features are measured in part 6;
//! 3. startup to a complete tool list with 1, 10 and 50 servers (following `nextCursor`, and
//!    listing again on every `notifications/tools/list_changed` until every tool is there),
//!    against the same number of fixtures started together by this program itself, whose
//!    time is that of the slowest of them (hub(50) ≤ that + 50 ms: what the hub adds to
//!    starting its servers), and, for information, against the slowest of single fixtures
//!    started alone (on two CPUs fifty processes cannot start as fast as one, hub or not);
//! 4. the hub's resident memory (VmRSS) after starting 50 servers (≤ 15 MiB) and after the
//!    throughput runs with one server;
//! 5. `resources/read` and `prompts/get` latency, and progress notifications forwarded per
//!    second (one call streaming thousands; every one must arrive before the answer);
//! 6. the policy pipeline: features one at a time, a cache hit (≤ 1.5× a direct echo) and
//!    every stage on at once, each call a miss that is then stored (adds ≤ 5 µs p50 to the
//!    pass-through hub), each on fresh hubs, best p50 of the runs, with throughput. The
//!    pipeline's target is then measured interleaved — one call to the full-pipeline hub and
//!    one to a pass-through hub in turn, so both meet the machine in the same state — and
//!    judged on the median of the runs.
//!
//! It prints a table and writes every figure to `target/bench.json`. The binaries are taken
//! from the directory above this example's own executable (`target/release/`); build them
//! first. The client is one thread that owns both pipes: it parses only the `id` of each
//! response, writes the next request into a buffer at once, and flushes only when it is
//! about to block on reading, so it costs a fraction of what the processes it measures do.
//!
//! CPU time comes from `/proc/PID/task/*/sched` (nanoseconds; `/proc/PID/stat` ticks where
//! that is missing), memory from `/proc/PID/status`. "Other load" is the machine's busy time
//! from `/proc/stat` that none of the measured processes account for: when it is well above
//! zero, something else ran meanwhile and the figures are skewed (on a 2-CPU machine, badly).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::io::{BufWriter, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

const IN_FLIGHT: usize = 32;
const SERVER_COUNTS: [usize; 3] = [1, 10, 50];
const PROTOCOL: &str = "2025-11-25";

// Targets.
const TARGET_LATENCY_RATIO: f64 = 3.0;
const TARGET_THROUGHPUT: f64 = 50_000.0;
const TARGET_STARTUP_SLACK_MS: f64 = 50.0;
const TARGET_RSS_MIB: f64 = 15.0;
const TARGET_CACHE_HIT_RATIO: f64 = 1.5;
const TARGET_PIPELINE_ADDED_US: f64 = 5.0;
/// Progress notifications the fixture sends for one call in part 5.
const PROGRESS_STEPS: [usize; 2] = [20_000, 5_000];

/// How big each part of the run is.
struct Params {
    mode: &'static str,
    latency_warmup: usize,
    latency_calls: usize,
    /// Sequential runs of each policy variant and of the interleaved pipeline pairs, each
    /// with freshly started processes; the median is reported.
    latency_reps: usize,
    /// Part 1's sequential runs, direct and through the hub, each with freshly started
    /// processes: where a small VM's scheduler puts the two or three processes decides their
    /// latency for their lifetime (on the 2-CPU VM this was written on, a wake-up across CPUs
    /// costs about 45 µs and one on the same CPU a few), so the target, on each side's best
    /// run, needs enough runs for both to meet a good placement.
    latency_runs: usize,
    throughput_warmup: usize,
    throughput_calls: usize,
    throughput_reps: usize,
    direct_startups: usize,
    hub_startup_reps: usize,
    /// Run parts 1 and 2 (latency, throughput, one-server memory).
    calls: bool,
    /// Run part 3 (startup, 50-server memory).
    startup: bool,
}

impl Params {
    fn full() -> Params {
        Params {
            mode: "full",
            latency_warmup: 2_000,
            latency_calls: 20_000,
            latency_reps: 5,
            latency_runs: 8,
            throughput_warmup: 10_000,
            throughput_calls: 200_000,
            throughput_reps: 5,
            direct_startups: 30,
            hub_startup_reps: 5,
            calls: true,
            startup: true,
        }
    }

    fn quick() -> Params {
        Params {
            mode: "quick",
            latency_warmup: 300,
            latency_calls: 10_000,
            latency_reps: 3,
            latency_runs: 6,
            throughput_warmup: 2_000,
            throughput_calls: 30_000,
            throughput_reps: 5,
            direct_startups: 20,
            hub_startup_reps: 3,
            calls: true,
            startup: true,
        }
    }
}

const USAGE: &str = "usage: cargo run --release --example bench [-- OPTIONS]
  --quick                 CI-sized run (a few seconds), every figure still reported
  --only calls            parts 1 and 2 only (latency, throughput, one-server memory)
  --only startup          parts 3 and 4 only (startup, 50-server memory)
  --only latency          part 1 alone (throughput shrinks to a token run), for profiling
  --only throughput       part 2 alone (latency shrinks to a token run), for profiling
  --scale F               multiply the latency and throughput call counts by F
environment: OPENPACT_BENCH_HUB_WRAPPER='strace -f -c -o FILE' (or 'perf record -g -o FILE --')
runs every hub under that command; the hub's CPU and memory figures are then the wrapper's";

fn main() -> ExitCode {
    let mut quick = false;
    let mut only: Option<String> = None;
    let mut scale = 1.0;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--only" => only = args.next(),
            "--scale" => match args
                .next()
                .and_then(|f| f.parse::<f64>().ok())
                .filter(|f| *f > 0.0)
            {
                Some(f) => scale = f,
                None => {
                    eprintln!("bench: --scale takes a positive number\n{USAGE}");
                    return ExitCode::from(2);
                }
            },
            "--help" | "-h" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("bench: unknown argument {other:?}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let mut params = if quick {
        Params::quick()
    } else {
        Params::full()
    };
    let scaled = |n: usize| ((n as f64 * scale).round() as usize).max(1);
    params.latency_calls = scaled(params.latency_calls);
    params.throughput_calls = scaled(params.throughput_calls);
    match only.as_deref() {
        None => {}
        Some("calls") => params.startup = false,
        Some("startup") => params.calls = false,
        // For profiling one hot path: the other part shrinks to a token run.
        Some("latency") => {
            params.startup = false;
            (
                params.throughput_warmup,
                params.throughput_calls,
                params.throughput_reps,
            ) = (100, 1000, 1);
        }
        Some("throughput") => {
            params.startup = false;
            (
                params.latency_warmup,
                params.latency_calls,
                params.latency_runs,
            ) = (10, 10, 1);
        }
        Some(other) => {
            eprintln!(
                "bench: --only takes calls, startup, latency or throughput, not {other:?}\n{USAGE}"
            );
            return ExitCode::from(2);
        }
    }
    let outcome = run(&params);
    reaper::kill_all();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Paths of everything the run uses.
struct Ctx {
    openpact: PathBuf,
    fixture: PathBuf,
    /// `target/`: the JSON report goes here.
    target: PathBuf,
    /// `target/bench-work/`: configs and the hub's stderr logs.
    work: PathBuf,
    clk_tck: f64,
    watchdog: Watchdog,
    /// A command the hub is started under (profiling), from `OPENPACT_BENCH_HUB_WRAPPER`.
    hub_wrapper: Vec<String>,
}

fn locate() -> Result<Ctx> {
    let exe = std::env::current_exe().context("cannot find the bench executable's own path")?;
    // target/release/examples/bench → target/release
    let release = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| anyhow!("unexpected bench location {}", exe.display()))?
        .to_path_buf();
    let openpact = release.join("openpact");
    let fixture = release.join("openpact-fixture");
    for bin in [&openpact, &fixture] {
        if !bin.is_file() {
            bail!(
                "{} is missing; build the binaries first:\n    cargo build --release --bin openpact --bin openpact-fixture",
                bin.display()
            );
        }
    }
    warn_if_stale(&[&openpact, &fixture]);
    let target = release
        .parent()
        .map_or_else(|| release.clone(), Path::to_path_buf);
    let work = target.join("bench-work");
    std::fs::create_dir_all(&work).with_context(|| format!("cannot create {}", work.display()))?;
    let clk_tck = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0);
    Ok(Ctx {
        openpact,
        fixture,
        target,
        work,
        clk_tck,
        watchdog: Watchdog::start(),
        hub_wrapper: std::env::var("OPENPACT_BENCH_HUB_WRAPPER")
            .map(|w| w.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    })
}

/// The binaries are not rebuilt by `cargo run --example`: say so when sources are newer.
fn warn_if_stale(bins: &[&PathBuf]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let newest_source = ["src", "fixtures"]
        .iter()
        .filter_map(|d| newest_mtime(&root.join(d)))
        .max();
    for bin in bins {
        let built = std::fs::metadata(bin).and_then(|m| m.modified()).ok();
        if let (Some(src), Some(built)) = (newest_source, built)
            && src > built
        {
            eprintln!(
                "bench: warning: {} is older than the sources; rebuild with `cargo build --release --bin openpact --bin openpact-fixture`",
                bin.display()
            );
        }
    }
}

fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let t = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        newest = newest.max(t);
    }
    newest
}

// ---------------------------------------------------------------------------------------------
// Safety nets: every child pid is registered so a stuck run can be killed as a whole.

mod reaper {
    use std::sync::Mutex;

    static PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

    pub fn add(pid: u32) {
        PIDS.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(pid);
    }

    pub fn remove(pid: u32) {
        PIDS.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|p| *p != pid);
    }

    /// SIGKILLs every registered child (the hub's own children see EOF and exit).
    pub fn kill_all() {
        let pids = std::mem::take(
            &mut *PIDS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for pid in pids {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Ends the run if a phase takes far longer than it should (a hung peer would otherwise
/// block a read forever).
#[derive(Clone)]
struct Watchdog {
    phase: Arc<Mutex<String>>,
    /// Milliseconds since `origin` after which the run is aborted; 0 = disarmed.
    deadline_ms: Arc<AtomicU64>,
    origin: Instant,
}

impl Watchdog {
    fn start() -> Watchdog {
        let w = Watchdog {
            phase: Arc::new(Mutex::new(String::new())),
            deadline_ms: Arc::new(AtomicU64::new(0)),
            origin: Instant::now(),
        };
        let me = w.clone();
        std::thread::spawn(move || {
            loop {
                std::thread::sleep(Duration::from_millis(200));
                let deadline = me.deadline_ms.load(Ordering::Relaxed);
                if deadline != 0 && me.origin.elapsed().as_millis() as u64 > deadline {
                    let phase = me
                        .phase
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    eprintln!("bench: error: timed out during {phase}; killing the children");
                    reaper::kill_all();
                    std::process::exit(1);
                }
            }
        });
        w
    }

    fn arm(&self, phase: &str, limit: Duration) {
        *self.phase.lock().unwrap_or_else(PoisonError::into_inner) = phase.to_string();
        let at = self.origin.elapsed() + limit;
        self.deadline_ms
            .store(at.as_millis() as u64, Ordering::Relaxed);
    }

    fn disarm(&self) {
        self.deadline_ms.store(0, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------------
// Lines in, lines out.

/// A line splitter over a blocking pipe that hands out ranges of its own buffer, so the hot
/// path copies nothing.
struct LineReader {
    r: ChildStdout,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl LineReader {
    fn new(r: ChildStdout) -> LineReader {
        LineReader {
            r,
            buf: vec![0; 1 << 14],
            start: 0,
            end: 0,
        }
    }

    /// The next complete line already buffered (without its newline), if any.
    fn try_line(&mut self) -> Option<Range<usize>> {
        let i = memchr::memchr(b'\n', &self.buf[self.start..self.end])?;
        let line = self.start..self.start + i;
        self.start += i + 1;
        Some(line)
    }

    /// One blocking read. Ranges handed out earlier are invalid afterwards.
    fn fill(&mut self) -> Result<()> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                let len = self.buf.len();
                self.buf.resize(len * 2, 0);
            }
        }
        let n = loop {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("reading the peer's stdout"),
            }
        };
        if n == 0 {
            bail!("the peer closed its stdout");
        }
        self.end += n;
        Ok(())
    }

    /// The next line, reading as needed.
    fn line(&mut self) -> Result<Range<usize>> {
        loop {
            if let Some(line) = self.try_line() {
                return Ok(line);
            }
            self.fill()?;
        }
    }
}

/// A request written with a fresh id each time: the line is cut at every `@ID@` (in the
/// params too, when each call must differ, e.g. to miss the cache) and the id goes in between.
struct CallTemplate {
    parts: Vec<Vec<u8>>,
}

const ID_MARK: &str = "@ID@";

impl CallTemplate {
    fn new(method: &str, params: &Value) -> CallTemplate {
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{ID_MARK},\"method\":{},\"params\":{params}}}\n",
            Value::from(method)
        );
        CallTemplate {
            parts: line.split(ID_MARK).map(|p| p.as_bytes().to_vec()).collect(),
        }
    }

    /// `tools/call TOOL {"message": "hello"}`, the same arguments every time.
    fn echo(tool: &str) -> CallTemplate {
        CallTemplate::new(
            "tools/call",
            &json!({"name": tool, "arguments": {"message": "hello"}}),
        )
    }

    fn write(&self, w: &mut impl Write, id: u64) -> std::io::Result<()> {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        let mut n = id;
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for (n, part) in self.parts.iter().enumerate() {
            if n > 0 {
                w.write_all(&digits[i..])?;
            }
            w.write_all(part)?;
        }
        Ok(())
    }
}

/// What the hot loops need from a line: the numeric id of a success response, or nothing
/// (a notification or server request), or an error for anything else.
enum Seen {
    Result(u64),
    Other,
}

struct IdScanner {
    finder: memchr::memmem::Finder<'static>,
}

impl IdScanner {
    fn new() -> IdScanner {
        IdScanner {
            finder: memchr::memmem::Finder::new(b"\"id\":"),
        }
    }

    /// Both the fixture and the hub write `{"jsonrpc":"2.0","id":N,"result":…`, so the first
    /// `"id":` is the envelope's and `,"result":` must follow the digits.
    fn scan(&self, line: &[u8]) -> Result<Seen> {
        let Some(at) = self.finder.find(line) else {
            return Ok(Seen::Other);
        };
        let rest = &line[at + 5..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let tail = &rest[digits..];
        if digits == 0 || !tail.starts_with(b",\"result\":") {
            if tail.starts_with(b",\"method\":") {
                return Ok(Seen::Other);
            }
            bail!(
                "unexpected message: {}",
                String::from_utf8_lossy(&line[..line.len().min(400)])
            );
        }
        let mut id = 0u64;
        for d in &rest[..digits] {
            id = id.wrapping_mul(10).wrapping_add(u64::from(d - b'0'));
        }
        Ok(Seen::Result(id))
    }
}

// ---------------------------------------------------------------------------------------------
// A peer process spoken to over its pipes.

struct Peer {
    label: String,
    child: Child,
    pid: u32,
    w: Option<BufWriter<ChildStdin>>,
    r: LineReader,
    next_id: u64,
    /// `notifications/tools/list_changed` seen so far.
    list_changed: u64,
    spawned_at: Instant,
}

impl Peer {
    fn spawn(label: &str, mut cmd: Command) -> Result<Peer> {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let spawned_at = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {label}"))?;
        let pid = child.id();
        reaper::add(pid);
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| anyhow!("{label}: no stdin pipe"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("{label}: no stdout pipe"))?;
        Ok(Peer {
            label: label.to_string(),
            child,
            pid,
            w: Some(BufWriter::with_capacity(1 << 16, stdin)),
            r: LineReader::new(stdout),
            next_id: 1,
            list_changed: 0,
            spawned_at,
        })
    }

    fn writer(&mut self) -> Result<&mut BufWriter<ChildStdin>> {
        self.w
            .as_mut()
            .ok_or_else(|| anyhow!("{}: stdin already closed", self.label))
    }

    fn send_line(&mut self, line: &str) -> Result<()> {
        let label = self.label.clone();
        let w = self.writer()?;
        w.write_all(line.as_bytes())
            .and_then(|()| w.write_all(b"\n"))
            .and_then(|()| w.flush())
            .with_context(|| format!("writing to {label}"))
    }

    fn notify(&mut self, method: &str) -> Result<()> {
        self.send_line(&json!({"jsonrpc": "2.0", "method": method}).to_string())
    }

    /// Sends a request and reads until its response. `Ok(Err(error))` is a JSON-RPC error.
    fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> Result<std::result::Result<Value, Value>> {
        let id = self.send_request(method, params)?;
        self.response(id)
    }

    /// Sends a request without waiting; returns its id.
    fn send_request(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )?;
        Ok(id)
    }

    /// Reads until the response to `id`, handling whatever else arrives meanwhile.
    fn response(&mut self, id: u64) -> Result<std::result::Result<Value, Value>> {
        Ok(match self.response_raw(id)? {
            Ok(raw) => Ok(serde_json::from_str(&raw)
                .with_context(|| format!("{}: result is not JSON", self.label))?),
            Err(e) => Err(e),
        })
    }

    /// [`Peer::response`] with the result left as JSON text: a long list is then parsed once,
    /// into just what the caller needs, and the time measured is the peer's, not the bench's.
    fn response_raw(&mut self, id: u64) -> Result<std::result::Result<String, Value>> {
        #[derive(serde::Deserialize)]
        struct Reply<'a> {
            #[serde(borrow)]
            id: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow)]
            method: Option<&'a serde_json::value::RawValue>,
            #[serde(borrow)]
            result: Option<&'a serde_json::value::RawValue>,
            error: Option<Value>,
        }
        let want = id.to_string();
        loop {
            let line = self.r.line()?;
            let bytes = &self.r.buf[line.clone()];
            let reply: Reply = serde_json::from_slice(bytes).with_context(|| {
                format!(
                    "{}: not JSON: {}",
                    self.label,
                    String::from_utf8_lossy(bytes)
                )
            })?;
            if reply.method.is_some() {
                let msg: Value = serde_json::from_slice(bytes)?;
                self.handle_other(&msg)?;
                continue;
            }
            if reply.id.map(|r| r.get()) == Some(want.as_str()) {
                return Ok(match (reply.result, reply.error) {
                    (Some(result), _) => Ok(result.get().to_string()),
                    (None, error) => Err(error.unwrap_or(Value::Null)),
                });
            }
        }
    }

    /// Like [`Peer::request`], treating a JSON-RPC error as a failure.
    fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let label = self.label.clone();
        self.request(method, params)?
            .map_err(|e| anyhow!("{label}: {method} failed: {e}"))
    }

    /// Handles a notification or server request; true if `msg` was one.
    fn handle_other(&mut self, msg: &Value) -> Result<bool> {
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            return Ok(false);
        };
        match msg.get("id") {
            None => {
                if method == "notifications/tools/list_changed" {
                    self.list_changed += 1;
                }
            }
            Some(id) => {
                // A server request (ping): answer so the peer is never left waiting.
                let reply = if method == "ping" {
                    json!({"jsonrpc": "2.0", "id": id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not supported by the bench"}})
                };
                self.send_line(&reply.to_string())?;
            }
        }
        Ok(true)
    }

    /// Reads until a `notifications/tools/list_changed` arrives.
    fn wait_list_changed(&mut self) -> Result<()> {
        let before = self.list_changed;
        while self.list_changed == before {
            let line = self.r.line()?;
            let msg: Value = serde_json::from_slice(&self.r.buf[line])
                .with_context(|| format!("{}: not JSON", self.label))?;
            if !self.handle_other(&msg)? {
                bail!(
                    "{}: unexpected response while waiting for list_changed: {msg}",
                    self.label
                );
            }
        }
        Ok(())
    }

    fn initialize_params() -> Value {
        json!({"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "openpact-bench", "version": "1"}})
    }

    fn initialize(&mut self) -> Result<Value> {
        let result = self.call("initialize", Self::initialize_params())?;
        self.notify("notifications/initialized")?;
        Ok(result)
    }

    /// Every tool name, following `nextCursor`. `None` when a cursor went stale because the
    /// list changed meanwhile (the caller lists again).
    fn list_tools(&mut self) -> Result<Option<Vec<String>>> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            #[derive(serde::Deserialize)]
            struct Page {
                tools: Vec<Tool>,
                #[serde(rename = "nextCursor")]
                next_cursor: Option<String>,
            }
            #[derive(serde::Deserialize)]
            struct Tool {
                name: String,
            }
            let id = self.send_request("tools/list", params)?;
            let page = match self.response_raw(id)? {
                Ok(page) => page,
                Err(e)
                    if cursor.is_some()
                        && e.get("code").and_then(Value::as_i64) == Some(-32602) =>
                {
                    return Ok(None);
                }
                Err(e) => bail!("{}: tools/list failed: {e}", self.label),
            };
            let page: Page = serde_json::from_str(&page)
                .with_context(|| format!("{}: tools/list without tools", self.label))?;
            names.extend(page.tools.into_iter().map(|t| t.name));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(Some(names)),
            }
        }
    }

    /// Closes stdin and waits for the exit (killing after `limit`); returns how long it took.
    fn close(mut self, limit: Duration) -> Duration {
        self.shutdown(limit)
    }

    fn shutdown(&mut self, limit: Duration) -> Duration {
        let t = Instant::now();
        if let Some(mut w) = self.w.take() {
            let _ = w.flush();
        }
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if t.elapsed() > limit => {
                    eprintln!(
                        "bench: {} did not exit {} ms after stdin closed; killing it",
                        self.label,
                        limit.as_millis()
                    );
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        reaper::remove(self.pid);
        t.elapsed()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.shutdown(Duration::from_secs(5));
        }
    }
}

fn spawn_fixture(ctx: &Ctx, label: &str) -> Result<Peer> {
    let mut cmd = Command::new(&ctx.fixture);
    cmd.stderr(Stdio::null());
    Peer::spawn(label, cmd)
}

/// Writes a config with `servers` (name → fixture args) and starts `openpact serve` on it.
fn spawn_hub(
    ctx: &Ctx,
    label: &str,
    servers: &[(String, Vec<String>)],
    settings: &Value,
) -> Result<Peer> {
    let mut map = serde_json::Map::new();
    for (name, args) in servers {
        map.insert(name.clone(), json!({"command": ctx.fixture, "args": args}));
    }
    let config = ctx.work.join(format!("{label}.json"));
    let text = serde_json::to_vec_pretty(&json!({"mcpServers": map, "openpact": settings}))?;
    std::fs::write(&config, text).with_context(|| format!("cannot write {}", config.display()))?;
    let log = ctx.work.join(format!("{label}.stderr.log"));
    let log =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let mut cmd = match ctx.hub_wrapper.split_first() {
        Some((program, args)) => {
            let mut cmd = Command::new(program);
            cmd.args(args).arg(&ctx.openpact);
            cmd
        }
        None => Command::new(&ctx.openpact),
    };
    // A fresh state dir each time: no decisions or audit log left from an earlier run.
    let state = ctx.work.join(format!("state-{label}"));
    let _ = std::fs::remove_dir_all(&state);
    cmd.arg("--config")
        .arg(&config)
        .arg("--state-dir")
        .arg(&state)
        .arg("serve")
        // The default log level, whatever the caller's environment says.
        .env_remove("OPENPACT_LOG")
        .env_remove("RUST_LOG")
        .env(SECRET_VAR, "bench-secret-0123456789")
        .stderr(Stdio::from(log));
    Peer::spawn(label, cmd)
}

// ---------------------------------------------------------------------------------------------
// /proc readings.

/// CPU seconds the process has used. Summed over its live threads from
/// `/proc/PID/task/TID/sched` (`se.sum_exec_runtime`, nanosecond precision) when the kernel
/// provides it; otherwise utime + stime from `/proc/PID/stat` (every thread, in clock ticks).
/// The processes measured keep their threads for the whole run, so the sum loses nothing.
fn cpu_seconds(pid: u32, clk_tck: f64) -> Result<f64> {
    if let Some(secs) = sched_runtime(pid) {
        return Ok(secs);
    }
    Ok(cpu_ticks(pid)? as f64 / clk_tck)
}

fn sched_runtime(pid: u32) -> Option<f64> {
    let mut total_ms = 0.0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let sched = std::fs::read_to_string(task.path().join("sched")).ok()?;
        let value = sched
            .lines()
            .find_map(|l| l.strip_prefix("se.sum_exec_runtime"))?;
        total_ms += value
            .trim_start_matches([' ', ':'])
            .trim()
            .parse::<f64>()
            .ok()?;
    }
    Some(total_ms / 1e3)
}

/// utime + stime of the whole process (every thread, dead ones included), in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    let after = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| anyhow!("odd /proc/{pid}/stat"))?;
    // After the command name: state is field 3, utime field 14, stime field 15.
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = fields
        .get(11)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| anyhow!("no utime for {pid}"))?;
    let stime: u64 = fields
        .get(12)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| anyhow!("no stime for {pid}"))?;
    Ok(utime + stime)
}

/// Voluntary + involuntary context switches summed over the process's live threads.
fn context_switches(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    let mut total = 0;
    for task in tasks.flatten() {
        if let Ok(status) = std::fs::read_to_string(task.path().join("status")) {
            for line in status.lines() {
                if line.starts_with("voluntary_ctxt_switches:")
                    || line.starts_with("nonvoluntary_ctxt_switches:")
                {
                    total += line
                        .split_whitespace()
                        .nth(1)
                        .and_then(|n| n.parse::<u64>().ok())
                        .unwrap_or(0);
                }
            }
        }
    }
    total
}

/// The direct children of a process (from every thread's `children` list).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// A `/proc/PID/status` field in kB (VmRSS, VmHWM, Threads…).
fn status_field(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("no {field} in /proc/{pid}/status"))
}

/// The processes of one measurement.
#[derive(Clone, Copy)]
struct Pids {
    hub: Option<u32>,
    fixture: u32,
}

/// A figure for each process of a measurement.
#[derive(Clone, Copy, Default)]
struct Procs<T> {
    client: T,
    hub: Option<T>,
    fixture: T,
}

impl<T: Copy> Procs<T> {
    fn map<U>(&self, f: impl Fn(T) -> U) -> Procs<U> {
        Procs {
            client: f(self.client),
            hub: self.hub.map(&f),
            fixture: f(self.fixture),
        }
    }
}

impl Procs<f64> {
    fn total(&self) -> f64 {
        self.client + self.hub.unwrap_or(0.0) + self.fixture
    }

    fn json(&self, places: i32) -> Value {
        json!({"client": round(self.client, places), "hub": self.hub.map(|h| round(h, places)), "fixture": round(self.fixture, places)})
    }
}

/// CPU ticks (utime + stime) of every process on the machine except `exclude`, by pid.
fn other_processes(exclude: &[u32]) -> std::collections::HashMap<u32, u64> {
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if exclude.contains(&pid) {
            continue;
        }
        if let Ok(ticks) = cpu_ticks(pid) {
            out.insert(pid, ticks);
        }
    }
    out
}

/// CPUs' worth of other work over `secs`; NaN (shown as "-") when the interval is too short
/// for the clock-tick resolution of `/proc/PID/stat`.
fn other_load(other_cpu: f64, secs: f64) -> f64 {
    if secs < 0.5 {
        f64::NAN
    } else {
        other_cpu / secs
    }
}

/// Rescheduling interrupts (IPIs that wake a thread on another CPU), all CPUs together, from
/// `/proc/interrupts`. On a virtual machine each one is costly.
fn reschedule_ipis() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    let line = text.lines().find(|l| l.trim_start().starts_with("RES:"))?;
    Some(
        line.split_whitespace()
            .skip(1)
            .map_while(|f| f.parse::<u64>().ok())
            .sum(),
    )
}

/// Microseconds during which some runnable task waited for a CPU (`/proc/pressure/cpu`).
fn cpu_pressure_us() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// A reading of the measured processes and of the rest of the machine.
struct Meter {
    cpu: Procs<f64>,
    switches: Procs<f64>,
    others: std::collections::HashMap<u32, u64>,
    pressure_us: Option<u64>,
    ipis: Option<u64>,
    at: Instant,
}

/// What was used between two readings. `other_cpu`: CPU seconds used meanwhile by every other
/// process (processes that ended meanwhile are missed); `cpu_pressure`: the share of the time
/// during which some task (ours included) was runnable but waited for a CPU.
struct Used {
    cpu: Procs<f64>,
    switches: Procs<f64>,
    other_cpu: f64,
    cpu_pressure: f64,
    /// Rescheduling IPIs on the whole machine.
    ipis: f64,
}

impl Meter {
    fn read(pids: Pids, clk_tck: f64) -> Result<Meter> {
        let me = std::process::id();
        let cpu = Procs {
            client: cpu_seconds(me, clk_tck)?,
            hub: pids.hub.map(|h| cpu_seconds(h, clk_tck)).transpose()?,
            fixture: cpu_seconds(pids.fixture, clk_tck)?,
        };
        let switches = Procs {
            client: context_switches(me) as f64,
            hub: pids.hub.map(|h| context_switches(h) as f64),
            fixture: context_switches(pids.fixture) as f64,
        };
        let mut ours = vec![me, pids.fixture];
        ours.extend(pids.hub);
        Ok(Meter {
            cpu,
            switches,
            others: other_processes(&ours),
            pressure_us: cpu_pressure_us(),
            ipis: reschedule_ipis(),
            at: Instant::now(),
        })
    }

    /// Call with the same `pids` as the earlier reading.
    fn since(&self, before: &Meter, clk_tck: f64) -> Used {
        let d = |a: f64, b: f64| (a - b).max(0.0);
        let cpu = Procs {
            client: d(self.cpu.client, before.cpu.client),
            hub: self.cpu.hub.zip(before.cpu.hub).map(|(a, b)| d(a, b)),
            fixture: d(self.cpu.fixture, before.cpu.fixture),
        };
        let switches = Procs {
            client: d(self.switches.client, before.switches.client),
            hub: self
                .switches
                .hub
                .zip(before.switches.hub)
                .map(|(a, b)| d(a, b)),
            fixture: d(self.switches.fixture, before.switches.fixture),
        };
        // Processes that appeared meanwhile count whole.
        let other_ticks: u64 = self
            .others
            .iter()
            .map(|(pid, now)| now.saturating_sub(before.others.get(pid).copied().unwrap_or(0)))
            .sum();
        let wall_us = self.at.duration_since(before.at).as_secs_f64() * 1e6;
        let cpu_pressure = match (self.pressure_us, before.pressure_us) {
            (Some(a), Some(b)) if wall_us > 0.0 => a.saturating_sub(b) as f64 / wall_us,
            _ => f64::NAN,
        };
        let ipis = match (self.ipis, before.ipis) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64,
            _ => f64::NAN,
        };
        Used {
            cpu,
            switches,
            other_cpu: other_ticks as f64 / clk_tck,
            cpu_pressure,
            ipis,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics.

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn median_f64(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn round(x: f64, places: i32) -> f64 {
    let p = 10f64.powi(places);
    (x * p).round() / p
}

// ---------------------------------------------------------------------------------------------
// 1. Sequential latency.

#[derive(Clone)]
struct Latency {
    calls: usize,
    p50_us: f64,
    p99_us: f64,
    mean_us: f64,
    min_us: f64,
    max_us: f64,
    /// Over the measured calls: CPU and context switches per call (hub: `None` when direct),
    /// and the CPU the rest of the machine used meanwhile, in CPUs.
    cpu_us_per_call: Procs<f64>,
    switches_per_call: Procs<f64>,
    other_cpus: f64,
    cpu_pressure: f64,
    /// Machine-wide rescheduling IPIs per call.
    ipis_per_call: f64,
}

/// One request, written and answered; nanoseconds from write to answer.
fn one_call(peer: &mut Peer, scanner: &IdScanner, template: &CallTemplate) -> Result<u64> {
    let id = peer.next_id;
    peer.next_id += 1;
    let t = Instant::now();
    let w = peer.w.as_mut().ok_or_else(|| anyhow!("stdin closed"))?;
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

/// Sequential calls alternating between two peers, one call each in turn (A B, B A, …). Both
/// then meet the machine in the same state at the same moments (on a VM, whether CPUs sleep
/// between calls moves every p50 by tens of µs), so the difference is theirs, not drift.
fn paired(
    a: (&mut Peer, &CallTemplate),
    b: (&mut Peer, &CallTemplate),
    warmup: usize,
    calls: usize,
) -> Result<Paired> {
    let scanner = IdScanner::new();
    let (mut sa, mut sb) = (Vec::with_capacity(calls), Vec::with_capacity(calls));
    for i in 0..warmup + calls {
        // A then B, then B then A: whichever goes second finds the CPUs awake, a bias of
        // up to 20 µs on a VM that the alternation cancels.
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

/// p50s of two peers measured by [`paired`].
#[derive(Clone, Copy)]
struct Paired {
    a_p50_us: f64,
    b_p50_us: f64,
}

/// The run whose `key` is the median.
fn median_paired(runs: &[Paired], key: impl Fn(&Paired) -> f64) -> Option<Paired> {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|x, y| key(x).total_cmp(&key(y)));
    sorted.get(sorted.len() / 2).copied()
}

fn latency(
    peer: &mut Peer,
    template: &CallTemplate,
    warmup: usize,
    calls: usize,
    pids: Pids,
    clk_tck: f64,
) -> Result<Latency> {
    let scanner = IdScanner::new();
    let mut samples = Vec::with_capacity(calls);
    let mut before = None;
    let mut t0 = Instant::now();
    for i in 0..warmup + calls {
        if i == warmup {
            before = Some(Meter::read(pids, clk_tck)?);
            t0 = Instant::now();
        }
        let took = one_call(peer, &scanner, template)?;
        if i >= warmup {
            samples.push(took);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let after = Meter::read(pids, clk_tck)?;
    let used = before.map(|b| after.since(&b, clk_tck));
    samples.sort_unstable();
    let n = samples.len().max(1) as f64;
    let mean = samples.iter().sum::<u64>() as f64 / n;
    Ok(Latency {
        calls,
        p50_us: percentile(&samples, 0.50) as f64 / 1e3,
        p99_us: percentile(&samples, 0.99) as f64 / 1e3,
        mean_us: mean / 1e3,
        min_us: samples.first().copied().unwrap_or(0) as f64 / 1e3,
        max_us: samples.last().copied().unwrap_or(0) as f64 / 1e3,
        cpu_us_per_call: used
            .as_ref()
            .map_or_else(Procs::default, |u| u.cpu.map(|c| c / n * 1e6)),
        switches_per_call: used
            .as_ref()
            .map_or_else(Procs::default, |u| u.switches.map(|c| c / n)),
        other_cpus: used
            .as_ref()
            .map_or(f64::NAN, |u| other_load(u.other_cpu, secs)),
        ipis_per_call: used.as_ref().map_or(f64::NAN, |u| u.ipis / n),
        cpu_pressure: used.map_or(f64::NAN, |u| u.cpu_pressure),
    })
}

// ---------------------------------------------------------------------------------------------
// 2. Throughput with a fixed number of calls in flight.

#[derive(Clone)]
struct Throughput {
    calls: usize,
    secs: f64,
    per_sec: f64,
    /// Time from writing a request (into the batch flushed right after) to reading its answer.
    p50_us: f64,
    p99_us: f64,
    /// CPU seconds and context switches of each process over the run.
    cpu: Procs<f64>,
    switches: Procs<f64>,
    /// CPU seconds the rest of the machine used meanwhile.
    other_cpu: f64,
    /// Share of the run during which some task waited for a CPU.
    cpu_pressure: f64,
    /// Machine-wide rescheduling IPIs over the run.
    ipis: f64,
    /// Reads the client made (each one returned at least one byte).
    reads: u64,
}

fn throughput(
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
    let before = Meter::read(pids, clk_tck)?;

    let t0 = Instant::now();
    let w = peer.w.as_mut().ok_or_else(|| anyhow!("stdin closed"))?;
    let r = &mut peer.r;
    let mut sent = 0usize;
    let mut received = 0usize;
    let mut reads = 0u64;
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
                bail!("{}: unexpected or repeated answer to id {id}", peer.label);
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
    let used = Meter::read(pids, clk_tck)?.since(&before, clk_tck);
    lat.sort_unstable();
    Ok(Throughput {
        calls: total,
        secs,
        per_sec: total as f64 / secs,
        p50_us: percentile(&lat, 0.50) as f64 / 1e3,
        p99_us: percentile(&lat, 0.99) as f64 / 1e3,
        cpu: used.cpu,
        switches: used.switches,
        other_cpu: other_load(used.other_cpu, secs) * secs,
        cpu_pressure: used.cpu_pressure,
        ipis: used.ipis,
        reads,
    })
}

impl Throughput {
    fn json(&self) -> Value {
        let n = self.calls as f64;
        let total_cpu = self.cpu.total();
        json!({
            "calls": self.calls,
            "seconds": round(self.secs, 4),
            "calls_per_sec": round(self.per_sec, 0),
            "latency_in_flight_p50_us": round(self.p50_us, 1),
            "latency_in_flight_p99_us": round(self.p99_us, 1),
            "cpu_seconds": self.cpu.json(4),
            "cpu_us_per_call": self.cpu.map(|c| c / n * 1e6).json(3),
            "cpu_busy_fraction_of_wall": self.cpu.map(|c| c / self.secs).json(3),
            "client_share_of_all_cpu": round(if total_cpu > 0.0 { self.cpu.client / total_cpu } else { 0.0 }, 3),
            "context_switches_per_call": self.switches.map(|c| c / n).json(3),
            "client_reads_per_call": round(self.reads as f64 / n, 3),
                        "other_processes_cpus": round(self.other_cpu / self.secs, 3),
                        "cpu_pressure": round(self.cpu_pressure, 3),
            "reschedule_ipis_per_call": round(self.ipis / n, 3),
        })
    }
}

/// The highest rate among `reps`: as with latency, interference only ever takes away.
fn best_rep(reps: &[Throughput]) -> f64 {
    reps.iter().map(|t| t.per_sec).fold(0.0, f64::max)
}

/// The repetition with the median rate.
fn median_rep(reps: &[Throughput]) -> Option<Throughput> {
    let mut sorted: Vec<&Throughput> = reps.iter().collect();
    sorted.sort_by(|a, b| a.per_sec.total_cmp(&b.per_sec));
    sorted.get(sorted.len() / 2).map(|t| (*t).clone())
}

// ---------------------------------------------------------------------------------------------
// 3. Startup.

/// One fixture on its own: spawn → initialize → tools/list complete.
fn direct_startup(ctx: &Ctx, i: usize) -> Result<(Duration, usize)> {
    let mut peer = spawn_fixture(ctx, &format!("fixture startup #{i}"))?;
    peer.initialize()?;
    let tools = peer
        .list_tools()?
        .ok_or_else(|| anyhow!("fixture cursor went stale"))?;
    let took = peer.spawned_at.elapsed();
    peer.close(Duration::from_secs(5));
    Ok((took, tools.len()))
}

/// `n` fixtures started by this program itself, one spawn after another from one thread,
/// handshaken concurrently: spawn of the first → every tool list received. This is what the
/// machine needs to start `n` processes at all, with no hub in between.
fn direct_parallel_startup(ctx: &Ctx, n: usize) -> Result<(Duration, usize)> {
    // As many spawning threads as CPUs (the hub spawns from its worker threads too); each
    // spawns its share one after another, then handshakes them all.
    let threads = std::thread::available_parallelism()
        .map_or(2, std::num::NonZero::get)
        .clamp(1, n.max(1));
    let t0 = Instant::now();
    let results: Vec<Result<(Vec<Peer>, usize)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || -> Result<(Vec<Peer>, usize)> {
                    let mut peers = Vec::new();
                    for i in (t..n).step_by(threads) {
                        let mut peer = spawn_fixture(ctx, &format!("parallel fixture #{i}"))?;
                        let id = peer.send_request("initialize", Peer::initialize_params())?;
                        peers.push((peer, id));
                    }
                    for (peer, id) in &mut peers {
                        let label = peer.label.clone();
                        peer.response(*id)?
                            .map_err(|e| anyhow!("{label}: initialize failed: {e}"))?;
                        peer.notify("notifications/initialized")?;
                        *id = peer.send_request("tools/list", json!({}))?;
                    }
                    let mut tools = 0;
                    for (peer, id) in &mut peers {
                        let label = peer.label.clone();
                        let page = peer
                            .response(*id)?
                            .map_err(|e| anyhow!("{label}: tools/list failed: {e}"))?;
                        tools += page
                            .get("tools")
                            .and_then(Value::as_array)
                            .map_or(0, Vec::len);
                    }
                    Ok((peers.into_iter().map(|(p, _)| p).collect(), tools))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a spawning thread panicked")))
            })
            .collect()
    });
    let took = t0.elapsed();
    let mut all = Vec::new();
    let mut tools = 0;
    for r in results {
        let (peers, t) = r?;
        all.extend(peers);
        tools += t;
    }
    // Close every stdin first so that they all exit at once, then reap them.
    for peer in &mut all {
        peer.w.take();
    }
    drop(all);
    Ok((took, tools))
}

struct HubStartup {
    servers: usize,
    /// Spawn → `initialize` answered.
    init_ms: f64,
    /// Spawn → the first complete listing (all pages) and how many tools it had.
    first_list_ms: f64,
    first_list_tools: usize,
    /// Spawn → a listing with every server's tools.
    full_ms: f64,
    listings: usize,
    /// Listings abandoned because a cursor went stale (the list changed between pages).
    stale_listings: usize,
    /// Every listing: when it ended (ms after spawn) and how many tools (`null`: stale).
    listing_log: Vec<(f64, Option<usize>)>,
    /// CPU used until the list was complete: the hub, and its children together.
    hub_cpu_ms: f64,
    children_cpu_ms: f64,
    list_changed: u64,
    rss_kib: u64,
    /// VmRSS once the hub has sat idle for [`RSS_SETTLE`] after the complete list (largest
    /// server count only: memory keeps growing for a moment after startup).
    rss_settled_kib: Option<u64>,
    hwm_kib: u64,
    threads: u64,
    shutdown_ms: f64,
}

fn hub_startup(ctx: &Ctx, servers: usize, per_server: usize, rep: usize) -> Result<HubStartup> {
    let names: Vec<(String, Vec<String>)> = (0..servers)
        .map(|i| (format!("s{i}"), Vec::new()))
        .collect();
    let mut hub = spawn_hub(ctx, &format!("startup-{servers}"), &names, &pass_through())?;
    hub.label = format!("hub startup with {servers} servers (rep {rep})");
    hub.initialize()?;
    let init = hub.spawned_at.elapsed();
    let expected = servers * per_server;
    let mut first = None;
    let mut listings = 0;
    let mut stale_listings = 0;
    let mut listing_log = Vec::new();
    let mut seen_changes = hub.list_changed;
    loop {
        listings += 1;
        // Only the fixtures' tools count (`sN:…`): a hub may add tools of its own.
        let listed = hub.list_tools()?.map(|all| {
            all.into_iter()
                .filter(|t| {
                    t.split_once(':')
                        .is_some_and(|(server, _)| names.iter().any(|(n, _)| n == server))
                })
                .collect::<Vec<_>>()
        });
        let now = hub.spawned_at.elapsed();
        listing_log.push((ms(now), listed.as_ref().map(Vec::len)));
        let Some(tools) = listed else {
            stale_listings += 1;
            continue;
        };
        if first.is_none() {
            first = Some((now, tools.len()));
        }
        if tools.len() >= expected {
            break;
        }
        // Not all there yet: list again on the next list_changed (or now, if one came
        // while we were listing).
        if hub.list_changed == seen_changes {
            hub.wait_list_changed()?;
        }
        seen_changes = hub.list_changed;
    }
    let full = hub.spawned_at.elapsed();
    let hub_cpu_ms = cpu_seconds(hub.pid, ctx.clk_tck)? * 1e3;
    let children_cpu_ms = children(hub.pid)
        .iter()
        .filter_map(|c| cpu_seconds(*c, ctx.clk_tck).ok())
        .sum::<f64>()
        * 1e3;
    let (first_at, first_count) = first.unwrap_or((full, expected));
    let rss_kib = status_field(hub.pid, "VmRSS")?;
    let rss_settled_kib = if servers == SERVER_COUNTS[SERVER_COUNTS.len() - 1] {
        std::thread::sleep(RSS_SETTLE);
        Some(status_field(hub.pid, "VmRSS")?)
    } else {
        None
    };
    let hwm_kib = status_field(hub.pid, "VmHWM")?;
    let threads = status_field(hub.pid, "Threads")?;
    let list_changed = hub.list_changed;
    let shutdown = hub.close(Duration::from_secs(10));
    Ok(HubStartup {
        servers,
        init_ms: ms(init),
        first_list_ms: ms(first_at),
        first_list_tools: first_count,
        full_ms: ms(full),
        listings,
        stale_listings,
        listing_log,
        hub_cpu_ms,
        children_cpu_ms,
        list_changed,
        rss_kib,
        rss_settled_kib,
        hwm_kib,
        threads,
        shutdown_ms: ms(shutdown),
    })
}

/// How long a started hub sits idle before its settled memory is read.
const RSS_SETTLE: Duration = Duration::from_secs(1);

impl HubStartup {
    /// The memory figure the target is checked on: the larger of the two readings.
    fn rss_after_startup_kib(&self) -> u64 {
        self.rss_kib.max(self.rss_settled_kib.unwrap_or(0))
    }

    fn json(&self) -> Value {
        json!({
            "servers": self.servers,
            "init_ms": round(self.init_ms, 2),
            "first_list_ms": round(self.first_list_ms, 2),
            "first_list_tools": self.first_list_tools,
            "full_list_ms": round(self.full_ms, 2),
            "listings": self.listings,
            "stale_listings": self.stale_listings,
            "listing_log": self.listing_log.iter().map(|(t, n)| json!({"ms": round(*t, 2), "tools": n})).collect::<Vec<_>>(),
            "list_changed_received": self.list_changed,
                        "hub_cpu_ms": round(self.hub_cpu_ms, 2),
            "children_cpu_ms": round(self.children_cpu_ms, 2),
                        "rss_kib": self.rss_kib,
            "rss_settled_kib": self.rss_settled_kib,
            "hwm_kib": self.hwm_kib,
            "threads": self.threads,
            "shutdown_ms": round(self.shutdown_ms, 2),
        })
    }
}

/// The repetition with the median time to the full list.
fn median_startup(reps: &[HubStartup]) -> Option<&HubStartup> {
    let mut sorted: Vec<&HubStartup> = reps.iter().collect();
    sorted.sort_by(|a, b| a.full_ms.total_cmp(&b.full_ms));
    sorted.get(sorted.len() / 2).copied()
}

// ---------------------------------------------------------------------------------------------
// The run.

fn mark(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

fn ratio(h: f64, d: f64) -> f64 {
    if d > 0.0 { h / d } else { 0.0 }
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

/// Parts 1, 2 and the one-server memory figures.
struct Calls {
    lat_direct: Latency,
    lat_hub: Latency,
    lat_direct_runs: Vec<Latency>,
    lat_hub_runs: Vec<Latency>,
    tp_direct: Vec<Throughput>,
    tp_hub: Vec<Throughput>,
    tpd: Throughput,
    tph: Throughput,
    hub_rss_idle: u64,
    hub_rss_after: u64,
    hub_hwm_after: u64,
    hub_shutdown: Duration,
    /// The same measures with policy features on.
    variants: Vec<Measured>,
    /// The pass-through hub (a) against the full-pipeline hub (b), interleaved, fresh hubs.
    pipeline_pairs: Vec<Paired>,
    surface: Surface,
}

/// What a policy variant is there to show.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    /// One feature on its own, for the table.
    Feature,
    /// The same call again and again with its tool cached: every call after the first a hit.
    CacheHit,
    /// Every stage doing real work on every call.
    FullPipeline,
}

struct Variant {
    name: &'static str,
    role: Role,
    settings: Value,
}

/// A policy variant's figures: sequential latency on fresh hubs, throughput on the first.
struct Measured {
    name: &'static str,
    role: Role,
    runs: Vec<Latency>,
    throughput: Vec<Throughput>,
}

impl Measured {
    fn median(&self) -> Option<Latency> {
        median_latency(&self.runs)
    }

    fn best_p50(&self) -> f64 {
        self.runs
            .iter()
            .map(|l| l.p50_us)
            .fold(f64::INFINITY, f64::min)
    }
}

/// Part 5: the rest of the surface, on the peers of parts 1 and 2.
struct Surface {
    read: [Latency; 2],
    prompt: [Latency; 2],
    progress: [Progress; 2],
}

/// One `tools/call progress` with a progress token: notifications forwarded per second.
#[derive(Clone)]
struct Progress {
    notifications: usize,
    secs: f64,
}

impl Progress {
    fn per_sec(&self) -> f64 {
        self.notifications as f64 / self.secs
    }
}

/// The hub's `openpact` settings for the main measures: every call allowed by a rule, no rate
/// limit, no cache, no audit — the forwarding path alone. (Builds that predate these settings
/// accept the keys silently.)
fn pass_through() -> Value {
    json!({
        "permissions": {"allow": ["*"]},
        "rateLimits": {"default": "off"},
        "cache": {"default": "off"},
        "audit": {"enabled": false},
    })
}

/// Policy features measured on top of [`pass_through`]: one at a time, then everything on.
fn variants() -> Vec<Variant> {
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

/// Set in every hub's environment; the full pipeline declares it a secret, so redaction has
/// a pattern to look for in every line.
const SECRET_VAR: &str = "OPENPACT_BENCH_SECRET";

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

impl Calls {
    /// The lowest p50 among `runs`: on a shared or virtual machine, interference only adds.
    fn best_p50(&self, runs: &[Latency]) -> f64 {
        runs.iter().map(|l| l.p50_us).fold(f64::INFINITY, f64::min)
    }

    fn variant(&self, role: Role) -> Option<&Measured> {
        self.variants.iter().find(|m| m.role == role)
    }

    /// Best cache-hit p50 over best direct p50: each peer on its own, fresh processes. (Not
    /// interleaved like the pipeline: measured that way on a 2-CPU VM, the bare fixture's
    /// calls drop to ~10 µs — the CPUs no longer sleep between them — while the hub's stay
    /// near 100 µs, which measures the VM's wake-ups rather than the cache.)
    fn cache_hit_ratio(&self) -> Option<f64> {
        let hit = self.variant(Role::CacheHit)?;
        Some(ratio(hit.best_p50(), self.best_p50(&self.lat_direct_runs)))
    }

    /// The interleaved run with the median p50 the full pipeline adds.
    fn pipeline_pair(&self) -> Option<Paired> {
        median_paired(&self.pipeline_pairs, |p| p.b_p50_us - p.a_p50_us)
    }

    /// What every stage of the pipeline on adds to the pass-through hub's p50, measured
    /// interleaved (median of the runs).
    fn pipeline_added_us(&self) -> Option<f64> {
        self.pipeline_pair().map(|p| p.b_p50_us - p.a_p50_us)
    }
}

/// Starts a fixture on its own and checks its `echo`.
fn start_direct_peer(ctx: &Ctx, label: &str) -> Result<(Peer, Pids)> {
    let mut direct = spawn_fixture(ctx, label)?;
    direct.initialize()?;
    let tools = direct
        .list_tools()?
        .ok_or_else(|| anyhow!("fixture cursor went stale"))?;
    check_echo(&mut direct, &tools, "echo")?;
    let pids = Pids {
        hub: None,
        fixture: direct.pid,
    };
    Ok((direct, pids))
}

/// Checks that `peer` lists `echo` and that it echoes.
fn check_echo(peer: &mut Peer, tools: &[String], echo: &str) -> Result<()> {
    if !tools.iter().any(|t| t == echo) {
        bail!(
            "{} does not list {echo} (it lists {} tools)",
            peer.label,
            tools.len()
        );
    }
    let check = peer.call(
        "tools/call",
        json!({"name": echo, "arguments": {"message": "hello"}}),
    )?;
    if check.pointer("/content/0/text").and_then(Value::as_str) != Some("hello") {
        bail!("{}: {echo} answered {check}", peer.label);
    }
    Ok(())
}

/// The run with the median p50.
fn median_latency(runs: &[Latency]) -> Option<Latency> {
    let mut sorted: Vec<&Latency> = runs.iter().collect();
    sorted.sort_by(|a, b| a.p50_us.total_cmp(&b.p50_us));
    sorted.get(sorted.len() / 2).map(|l| (*l).clone())
}

/// Starts a hub with one fixture named `fx`, checks `fx:echo` and learns the fixture's pid.
fn start_hub_peer(ctx: &Ctx, label: &str, settings: &Value) -> Result<(Peer, Pids)> {
    let mut hub = spawn_hub(ctx, label, &[("fx".to_string(), Vec::new())], settings)?;
    hub.label = format!("hub ({label})");
    hub.initialize()?;
    let tools = hub
        .list_tools()?
        .ok_or_else(|| anyhow!("hub cursor went stale"))?;
    check_echo(&mut hub, &tools, "fx:echo")?;
    let pids = hub.call("tools/call", json!({"name": "fx:pids", "arguments": {}}))?;
    let fixture = pids
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
        .and_then(|v| v.get("pid").and_then(Value::as_u64))
        .and_then(|p| u32::try_from(p).ok())
        .ok_or_else(|| anyhow!("cannot learn the hub's fixture pid from fx:pids: {pids}"))?;
    let pids = Pids {
        hub: Some(hub.pid),
        fixture,
    };
    Ok((hub, pids))
}

fn run_calls(ctx: &Ctx, p: &Params) -> Result<Calls> {
    let wd = &ctx.watchdog;
    // A fixture on its own, and a hub with one fixture named `fx`.
    wd.arm("starting the peers", Duration::from_secs(30));
    let (mut direct, direct_pids) = start_direct_peer(ctx, "fixture (direct)")?;
    let (mut hub, hub_pids) = start_hub_peer(ctx, "hub-1", &pass_through())?;
    let hub_rss_idle = status_field(hub.pid, "VmRSS")?;

    // 1. Sequential latency: the first run on these peers, later ones on fresh processes.
    wd.arm("sequential latency", Duration::from_secs(300));
    let (lw, lc, tck) = (p.latency_warmup, p.latency_calls, ctx.clk_tck);
    let (echo, fx_echo) = (CallTemplate::echo("echo"), CallTemplate::echo("fx:echo"));
    let mut lat_direct_runs = Vec::new();
    let mut lat_hub_runs = Vec::new();
    for rep in 0..p.latency_runs.max(1) {
        if rep == 0 {
            lat_direct_runs.push(latency(&mut direct, &echo, lw, lc, direct_pids, tck)?);
            lat_hub_runs.push(latency(&mut hub, &fx_echo, lw, lc, hub_pids, tck)?);
        } else {
            let (mut d, dp) = start_direct_peer(ctx, &format!("fixture (direct, run {rep})"))?;
            lat_direct_runs.push(latency(&mut d, &echo, lw, lc, dp, tck)?);
            d.close(Duration::from_secs(5));
            let (mut h, hp) = start_hub_peer(ctx, &format!("hub-1-run-{rep}"), &pass_through())?;
            lat_hub_runs.push(latency(&mut h, &fx_echo, lw, lc, hp, tck)?);
            h.close(Duration::from_secs(10));
        }
    }
    let lat_direct = median_latency(&lat_direct_runs).ok_or_else(|| anyhow!("no latency runs"))?;
    let lat_hub = median_latency(&lat_hub_runs).ok_or_else(|| anyhow!("no latency runs"))?;

    // 2. Throughput: the first run on these peers (whose memory is read after it), later ones
    // on fresh processes, as for latency, interleaved so that drift hits both alike.
    wd.arm("throughput", Duration::from_secs(600));
    let (tw, tc) = (p.throughput_warmup, p.throughput_calls);
    let mut tp_direct = Vec::new();
    let mut tp_hub = Vec::new();
    for rep in 0..p.throughput_reps.max(1) {
        if rep == 0 {
            throughput(&mut direct, &echo, tw, direct_pids, tck)?;
            tp_direct.push(throughput(&mut direct, &echo, tc, direct_pids, tck)?);
            throughput(&mut hub, &fx_echo, tw, hub_pids, tck)?;
            tp_hub.push(throughput(&mut hub, &fx_echo, tc, hub_pids, tck)?);
        } else {
            let (mut d, dp) = start_direct_peer(ctx, &format!("fixture (throughput run {rep})"))?;
            throughput(&mut d, &echo, tw, dp, tck)?;
            tp_direct.push(throughput(&mut d, &echo, tc, dp, tck)?);
            d.close(Duration::from_secs(5));
            let label = format!("hub-1-throughput-run-{rep}");
            let (mut h, hp) = start_hub_peer(ctx, &label, &pass_through())?;
            throughput(&mut h, &fx_echo, tw, hp, tck)?;
            tp_hub.push(throughput(&mut h, &fx_echo, tc, hp, tck)?);
            h.close(Duration::from_secs(10));
        }
    }
    let tpd = median_rep(&tp_direct).ok_or_else(|| anyhow!("no throughput runs"))?;
    let tph = median_rep(&tp_hub).ok_or_else(|| anyhow!("no throughput runs"))?;
    let hub_rss_after = status_field(hub.pid, "VmRSS")?;
    let hub_hwm_after = status_field(hub.pid, "VmHWM")?;

    // 5. The rest of the surface, on the same peers.
    wd.arm("resources, prompts and progress", Duration::from_secs(300));
    let surface = run_surface(p, &mut direct, direct_pids, &mut hub, hub_pids, tck)?;
    wd.arm("closing the peers", Duration::from_secs(30));
    let hub_shutdown = hub.close(Duration::from_secs(10));
    direct.close(Duration::from_secs(5));

    // 6. The same with policy features on: sequential runs on fresh hubs, throughput on the
    // first.
    let mut measured = Vec::new();
    for (i, variant) in variants().into_iter().enumerate() {
        wd.arm(
            &format!("hub with {}", variant.name),
            Duration::from_secs(600),
        );
        let template = variant.template();
        let mut runs = Vec::new();
        let mut tp = Vec::new();
        for rep in 0..p.latency_reps.max(1) {
            let label = format!("hub-1-policy-{i}-run-{rep}");
            let (mut hub, pids) = start_hub_peer(ctx, &label, &variant.settings)?;
            runs.push(latency(&mut hub, &template, lw, lc, pids, tck)?);
            if rep == 0 {
                throughput(&mut hub, &template, tw, pids, tck)?;
                for _ in 0..p.throughput_reps {
                    tp.push(throughput(&mut hub, &template, tc, pids, tck)?);
                }
            }
            hub.close(Duration::from_secs(10));
        }
        measured.push(Measured {
            name: variant.name,
            role: variant.role,
            runs,
            throughput: tp,
        });
    }

    // The pipeline's target, measured against the pass-through hub interleaved.
    wd.arm("interleaved pipeline target", Duration::from_secs(600));
    let full = variants()
        .into_iter()
        .find(|v| v.role == Role::FullPipeline)
        .map(|v| (v.template(), v.settings));
    let mut pipeline_pairs = Vec::new();
    for rep in 0..p.latency_reps.max(1) {
        if let Some((template, settings)) = &full {
            let (mut a, _) =
                start_hub_peer(ctx, &format!("hub-pass-paired-{rep}"), &pass_through())?;
            let (mut b, _) = start_hub_peer(ctx, &format!("hub-full-paired-{rep}"), settings)?;
            pipeline_pairs.push(paired((&mut a, &fx_echo), (&mut b, template), lw, lc)?);
            a.close(Duration::from_secs(10));
            b.close(Duration::from_secs(10));
        }
    }
    wd.disarm();
    Ok(Calls {
        pipeline_pairs,
        lat_direct,
        lat_hub,
        lat_direct_runs,
        lat_hub_runs,
        tp_direct,
        tp_hub,
        tpd,
        tph,
        hub_rss_idle,
        hub_rss_after,
        hub_hwm_after,
        hub_shutdown,
        variants: measured,
        surface,
    })
}

/// `resources/read` and `prompts/get` one at a time, and progress notifications streamed
/// through one call, direct and through the hub.
fn run_surface(
    p: &Params,
    direct: &mut Peer,
    direct_pids: Pids,
    hub: &mut Peer,
    hub_pids: Pids,
    tck: f64,
) -> Result<Surface> {
    let (lw, lc) = (p.latency_warmup / 2, p.latency_calls / 2);
    let read = CallTemplate::new("resources/read", &json!({"uri": "fixture://static/1"}));
    let prompt = |name: &str| {
        CallTemplate::new(
            "prompts/get",
            &json!({"name": name, "arguments": {"name": "bench"}}),
        )
    };
    let steps = if p.mode == "quick" {
        PROGRESS_STEPS[1]
    } else {
        PROGRESS_STEPS[0]
    };
    Ok(Surface {
        read: [
            latency(direct, &read, lw, lc, direct_pids, tck)?,
            latency(hub, &read, lw, lc, hub_pids, tck)?,
        ],
        prompt: [
            latency(direct, &prompt("greet"), lw, lc, direct_pids, tck)?,
            latency(hub, &prompt("fx:greet"), lw, lc, hub_pids, tck)?,
        ],
        progress: [
            progress(direct, "progress", steps)?,
            progress(hub, "fx:progress", steps)?,
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

/// Part 3 and the 50-server memory figure.
struct Startup {
    per_server: usize,
    singles: Vec<f64>,
    single_median: f64,
    single_max: f64,
    single_min: f64,
    /// Per server count: the bench starting that many fixtures itself, in ms per run.
    parallel: Vec<(usize, Vec<f64>)>,
    hubs: Vec<(usize, Vec<HubStartup>)>,
}

impl Startup {
    fn hub(&self, servers: usize) -> Option<&HubStartup> {
        self.hubs
            .iter()
            .find(|(n, _)| *n == servers)
            .and_then(|(_, reps)| median_startup(reps))
    }

    /// Median time for `servers` fixtures started together by the bench until the slowest
    /// of them has listed its tools.
    fn together(&self, servers: usize) -> Option<f64> {
        self.parallel
            .iter()
            .find(|(n, _)| *n == servers)
            .map(|(_, runs)| median_f64(runs))
    }
}

fn run_startup(ctx: &Ctx, p: &Params) -> Result<Startup> {
    let wd = &ctx.watchdog;
    wd.arm("single fixture startups", Duration::from_secs(120));
    let mut singles = Vec::new();
    let mut per_server = 0;
    for i in 0..p.direct_startups {
        let (took, n) = direct_startup(ctx, i)?;
        if per_server != 0 && n != per_server {
            bail!("one fixture listed {n} tools, another {per_server}");
        }
        per_server = n;
        singles.push(ms(took));
    }
    let mut hubs = Vec::new();
    let mut parallel = Vec::new();
    for &n in &SERVER_COUNTS {
        wd.arm(
            &format!("startup with {n} servers"),
            Duration::from_secs(120),
        );
        let mut reps = Vec::new();
        let mut direct = Vec::new();
        // Alternate, so that drift in the machine's load hits both alike.
        for rep in 0..p.hub_startup_reps {
            let (took, tools) = direct_parallel_startup(ctx, n)?;
            if tools != n * per_server {
                bail!(
                    "{n} fixtures started together listed {tools} tools, not {}",
                    n * per_server
                );
            }
            direct.push(ms(took));
            reps.push(hub_startup(ctx, n, per_server, rep)?);
        }
        hubs.push((n, reps));
        parallel.push((n, direct));
    }
    wd.disarm();
    Ok(Startup {
        per_server,
        single_median: median_f64(&singles),
        single_max: singles.iter().copied().fold(0.0, f64::max),
        single_min: singles.iter().copied().fold(f64::INFINITY, f64::min),
        singles,
        parallel,
        hubs,
    })
}

/// Pass/fail of the four targets (`None`: not measured in this run).
struct Verdicts {
    latency: Option<bool>,
    throughput: Option<bool>,
    startup: Option<bool>,
    /// The stricter reading of the startup rule, against a fixture started alone (reported,
    /// not a target: see [`print_startup`]).
    startup_alone: Option<bool>,
    memory: Option<bool>,
    cache_hit: Option<bool>,
    pipeline: Option<bool>,
}

fn verdicts(calls: Option<&Calls>, startup: Option<&Startup>) -> Verdicts {
    let s50 = startup.and_then(|s| s.hub(50).map(|h| (s, h)));
    Verdicts {
        latency: calls.map(|c| {
            c.best_p50(&c.lat_hub_runs) <= TARGET_LATENCY_RATIO * c.best_p50(&c.lat_direct_runs)
        }),
        throughput: calls.map(|c| best_rep(&c.tp_hub) >= TARGET_THROUGHPUT),
        startup: s50.and_then(|(s, h)| {
            s.together(50)
                .map(|t| h.full_ms <= t + TARGET_STARTUP_SLACK_MS)
        }),
        startup_alone: s50.map(|(s, h)| h.full_ms <= s.single_max + TARGET_STARTUP_SLACK_MS),
        memory: s50.map(|(_, h)| h.rss_after_startup_kib() as f64 / 1024.0 <= TARGET_RSS_MIB),
        cache_hit: calls
            .and_then(Calls::cache_hit_ratio)
            .map(|r| r <= TARGET_CACHE_HIT_RATIO),
        pipeline: calls
            .and_then(Calls::pipeline_added_us)
            .map(|us| us <= TARGET_PIPELINE_ADDED_US),
    }
}

fn print_calls(p: &Params, c: &Calls, v: &Verdicts) {
    let row = |name: &str, d: f64, h: f64, unit: &str, target: &str| {
        ratio_row(
            name,
            &format!("{d:.1} {unit}"),
            &format!("{h:.1} {unit}"),
            ratio(h, d),
            target,
        );
    };
    let text = |name: &str, d: String, h: String| println!("   {name:<42} {d:>11} {h:>11}");
    let f2 = |x: f64| {
        if x.is_nan() {
            "-".to_string()
        } else {
            format!("{x:.2}")
        }
    };
    let hub_f2 = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{x:.2}"));
    let (ld, lh) = (&c.lat_direct, &c.lat_hub);
    println!(
        "1. sequential tools/call echo, one at a time ({} calls after {} warm-up; median of {} runs)",
        p.latency_calls, p.latency_warmup, p.latency_runs
    );
    let target = format!(
        "hub ≤ {TARGET_LATENCY_RATIO}× direct   {}",
        mark(v.latency == Some(true))
    );
    row("p50 (median run)", ld.p50_us, lh.p50_us, "µs", "");
    row(
        "p50 (best run: least disturbed)",
        c.best_p50(&c.lat_direct_runs),
        c.best_p50(&c.lat_hub_runs),
        "µs",
        &target,
    );
    row("p99", ld.p99_us, lh.p99_us, "µs", "");
    row("mean", ld.mean_us, lh.mean_us, "µs", "");
    let p50s = |v: &[Latency]| figures(v.iter().map(|l| l.p50_us), 1);
    println!(
        "   {:<42} direct {}; hub {}",
        format!(
            "p50 of every run ({}, fresh processes)",
            c.lat_hub_runs.len()
        ),
        p50s(&c.lat_direct_runs),
        p50s(&c.lat_hub_runs)
    );
    text(
        "CPU µs per call: hub",
        "-".into(),
        hub_f2(lh.cpu_us_per_call.hub),
    );
    text(
        "CPU µs per call: fixture",
        f2(ld.cpu_us_per_call.fixture),
        f2(lh.cpu_us_per_call.fixture),
    );
    text(
        "context switches per call: hub",
        "-".into(),
        hub_f2(lh.switches_per_call.hub),
    );
    text(
        "reschedule IPIs per call (whole machine)",
        f2(ld.ipis_per_call),
        f2(lh.ipis_per_call),
    );
    text(
        "other processes' CPU meanwhile (CPUs)",
        f2(ld.other_cpus),
        f2(lh.other_cpus),
    );
    let share_pct = |x: f64| {
        if x.is_nan() {
            "-".to_string()
        } else {
            format!("{:.0}%", 100.0 * x)
        }
    };
    text(
        "CPU pressure (time some task waited)",
        share_pct(ld.cpu_pressure),
        share_pct(lh.cpu_pressure),
    );
    println!(
        "2. throughput, {IN_FLIGHT} calls in flight ({} calls per run, median of {} runs, fresh processes)",
        p.throughput_calls, p.throughput_reps
    );
    let (d, h) = (&c.tpd, &c.tph);
    ratio_row(
        "calls/s (median run)",
        &format!("{:.0}", d.per_sec),
        &format!("{:.0}", h.per_sec),
        ratio(h.per_sec, d.per_sec),
        "",
    );
    let (bd, bh) = (best_rep(&c.tp_direct), best_rep(&c.tp_hub));
    ratio_row(
        "calls/s (best run: least disturbed)",
        &format!("{bd:.0}"),
        &format!("{bh:.0}"),
        ratio(bh, bd),
        &format!(
            "hub ≥ {TARGET_THROUGHPUT:.0}/s   {}",
            mark(v.throughput == Some(true))
        ),
    );
    let reps = |v: &[Throughput]| figures(v.iter().map(|t| t.per_sec), 0);
    println!(
        "   {:<42} direct {}; hub {}",
        "every run (calls/s)",
        reps(&c.tp_direct),
        reps(&c.tp_hub)
    );
    row("latency in flight p50", d.p50_us, h.p50_us, "µs", "");
    row("latency in flight p99", d.p99_us, h.p99_us, "µs", "");
    let per_call = |t: &Throughput| t.cpu.map(|c| c / t.calls as f64 * 1e6);
    let (pd, ph) = (per_call(d), per_call(h));
    text(
        "CPU µs per call: client (this program)",
        f2(pd.client),
        f2(ph.client),
    );
    text("CPU µs per call: hub", "-".into(), hub_f2(ph.hub));
    text("CPU µs per call: fixture", f2(pd.fixture), f2(ph.fixture));
    let busy = |t: &Throughput| t.cpu.map(|c| 100.0 * c / t.secs);
    let (bd, bh) = (busy(d), busy(h));
    let pct = |x: f64| format!("{x:.0}%");
    text(
        "CPU busy over the run: client",
        pct(bd.client),
        pct(bh.client),
    );
    text(
        "CPU busy over the run: hub",
        "-".into(),
        bh.hub.map_or_else(|| "-".to_string(), pct),
    );
    text(
        "CPU busy over the run: fixture",
        pct(bd.fixture),
        pct(bh.fixture),
    );
    let share = |t: &Throughput| {
        let all = t.cpu.total();
        format!(
            "{:.1}%",
            if all > 0.0 {
                100.0 * t.cpu.client / all
            } else {
                0.0
            }
        )
    };
    text("client's share of all CPU used", share(d), share(h));
    let sw = |t: &Throughput| t.switches.map(|s| s / t.calls as f64);
    text(
        "context switches per call: hub",
        "-".into(),
        hub_f2(sw(h).hub),
    );
    let ipis = |t: &Throughput| t.ipis / t.calls as f64;
    text(
        "reschedule IPIs per call (whole machine)",
        f2(ipis(d)),
        f2(ipis(h)),
    );
    text(
        "context switches per call: fixture",
        f2(sw(d).fixture),
        f2(sw(h).fixture),
    );
    text(
        "client reads per call",
        f2(d.reads as f64 / d.calls as f64),
        f2(h.reads as f64 / h.calls as f64),
    );
    text(
        "other processes' CPU meanwhile (CPUs)",
        f2(d.other_cpu / d.secs),
        f2(h.other_cpu / h.secs),
    );
    text(
        "CPU pressure (time some task waited)",
        share_pct(d.cpu_pressure),
        share_pct(h.cpu_pressure),
    );
    print_surface(&c.surface, &row, &text, &f2);
    print_policy(c, v, &f2);
}

fn print_surface(
    s: &Surface,
    row: &dyn Fn(&str, f64, f64, &str, &str),
    text: &dyn Fn(&str, String, String),
    f2: &dyn Fn(f64) -> String,
) {
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
        &format!(
            "all {} delivered, in order, before the answer",
            gh.notifications
        ),
    );
    text(
        "CPU µs per read: hub",
        "-".into(),
        rh.cpu_us_per_call.hub.map_or_else(|| "-".into(), f2),
    );
}

fn print_policy(c: &Calls, v: &Verdicts, f2: &dyn Fn(f64) -> String) {
    if c.variants.is_empty() {
        return;
    }
    println!(
        "6. the policy pipeline: the hubs above allow every call by a rule, with no rate limit,"
    );
    println!(
        "   cache or audit; here features are on, one at a time, then all of them (best p50 of {}",
        c.lat_hub_runs.len()
    );
    println!("   fresh hubs each; ratios are to that pass-through hub, added µs to its best p50):");
    println!(
        "   {:<42} {:>11} {:>11} {:>11} {:>11} {:>11}",
        "", "best p50", "p99", "calls/s", "CPU µs/call", "switches"
    );
    let base = c.best_p50(&c.lat_hub_runs);
    for m in &c.variants {
        let Some(lat) = m.median() else { continue };
        let best = m.best_p50();
        let tp = median_rep(&m.throughput).map_or_else(
            || "-".to_string(),
            |t| format!("{:.0} ({:.2}x)", t.per_sec, ratio(t.per_sec, c.tph.per_sec)),
        );
        println!(
            "   {:<42} {:>11} {:>11} {:>11} {:>11} {:>11}",
            m.name,
            format!("{best:.1} ({:+.1})", best - base),
            format!("{:.1}", lat.p99_us),
            tp,
            lat.cpu_us_per_call.hub.map_or_else(|| "-".into(), f2),
            lat.switches_per_call.hub.map_or_else(|| "-".into(), f2),
        );
    }
    if let Some(r) = c.cache_hit_ratio() {
        ratio_row(
            "cache hit vs a direct echo (best p50)",
            &format!("{:.1} µs", c.best_p50(&c.lat_direct_runs)),
            &c.variant(Role::CacheHit)
                .map_or_else(String::new, |m| format!("{:.1} µs", m.best_p50())),
            r,
            &format!(
                "hit ≤ {TARGET_CACHE_HIT_RATIO}× direct echo   {}",
                mark(v.cache_hit == Some(true))
            ),
        );
    }
    if let (Some(added), Some(pair)) = (c.pipeline_added_us(), c.pipeline_pair()) {
        ratio_row(
            "full pipeline vs pass-through (interleaved)",
            &format!("{:.1} µs", pair.a_p50_us),
            &format!("{:.1} µs", pair.b_p50_us),
            ratio(pair.b_p50_us, pair.a_p50_us),
            &format!(
                "adds ≤ {TARGET_PIPELINE_ADDED_US} µs p50: {added:+.1} µs   {}",
                mark(v.pipeline == Some(true))
            ),
        );
    }
    println!(
        "   (interleaved: one call to each hub in turn, so both meet the machine in the same state; median of {} runs on fresh hubs)",
        c.pipeline_pairs.len()
    );
}

/// A table row: what, direct, hub, hub/direct, and the target or a note.
fn ratio_row(name: &str, direct: &str, hub: &str, ratio: f64, note: &str) {
    let line = format!("   {name:<42} {direct:>11} {hub:>11} {ratio:>9.2}x  {note}");
    println!("{}", line.trim_end());
}

/// Figures for a line of the table: `1.5, 2.0, 3.1`.
fn figures(values: impl Iterator<Item = f64>, decimals: usize) -> String {
    values
        .map(|v| format!("{v:.decimals$}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether one of the single-fixture starts was held up far past the others.
fn singles_disturbed(s: &Startup) -> bool {
    s.single_max > 3.0 * s.single_median
}

fn print_startup(p: &Params, s: &Startup, v: &Verdicts) {
    println!(
        "3. startup until the tool list is complete ({} tools per fixture; median of {} runs)",
        s.per_server, p.hub_startup_reps
    );
    println!(
        "   {:<42} median {:.2} ms, slowest {:.2} ms, fastest {:.2} ms ({} runs)",
        "one fixture alone: spawn → initialize → list",
        s.single_median,
        s.single_max,
        s.single_min,
        p.direct_startups
    );
    if singles_disturbed(s) {
        println!(
            "   note: the slowest single start is over 3× their median (a disturbed run), so the\n   \
             stricter reading's limit below is looser than this machine's usual"
        );
    }
    println!(
        "   {:<42} {:>11} {:>11}",
        "N servers: direct = N started together", "direct", "hub"
    );
    for (n, reps) in &s.hubs {
        let Some(m) = median_startup(reps) else {
            continue;
        };
        let plural = if *n == 1 { "" } else { "s" };
        if let Some(together) = s.together(*n) {
            // Started together, the slowest of them is the last to list its tools: what
            // "the slowest single server's startup" is when all of them start at once.
            let target = if *n == 50 {
                format!(
                    "hub ≤ slowest of them + {TARGET_STARTUP_SLACK_MS:.0} ms = {:.1} ms   {}",
                    together + TARGET_STARTUP_SLACK_MS,
                    mark(v.startup == Some(true))
                )
            } else {
                String::new()
            };
            ratio_row(
                &format!("{n} server{plural}: complete tool list"),
                &format!("{together:.2} ms"),
                &format!("{:.2} ms", m.full_ms),
                ratio(m.full_ms, together),
                &target,
            );
        }
        let alone = if *n == 50 {
            format!(
                "stricter reading: ≤ {:.1} ms   {}",
                s.single_max + TARGET_STARTUP_SLACK_MS,
                mark(v.startup_alone == Some(true))
            )
        } else {
            String::new()
        };
        ratio_row(
            "  vs the slowest fixture started alone",
            &format!("{:.2} ms", s.single_max),
            &format!("{:.2} ms", m.full_ms),
            ratio(m.full_ms, s.single_max),
            &alone,
        );
        let all = figures(reps.iter().map(|r| r.full_ms), 1);
        println!(
            "   {:<42} initialize answered at {:.1} ms; first list at {:.1} ms ({} tools); {} listing(s), {} stale",
            "", m.init_ms, m.first_list_ms, m.first_list_tools, m.listings, m.stale_listings
        );
        println!(
            "   {:<42} CPU until complete: hub {:.1} ms, its fixtures {:.1} ms; exit {:.0} ms; runs: {all} ms",
            "", m.hub_cpu_ms, m.children_cpu_ms, m.shutdown_ms
        );
    }
}

fn print_memory(calls: Option<&Calls>, startup: Option<&Startup>, v: &Verdicts) {
    println!("4. hub memory (VmRSS)");
    if let Some(h) = startup.and_then(|s| s.hub(50)) {
        println!(
            "   {:<42} {:>11} {:>11}             ≤ {TARGET_RSS_MIB} MiB   {}",
            format!(
                "50 servers, {:.0} s after the complete list",
                RSS_SETTLE.as_secs_f64()
            ),
            "",
            format!("{:.1} MiB", h.rss_after_startup_kib() as f64 / 1024.0),
            mark(v.memory == Some(true))
        );
        println!(
            "   {:<42} {:>11} {:>11}",
            "  at the moment the list was complete",
            "",
            format!("{:.1} MiB", h.rss_kib as f64 / 1024.0)
        );
        println!(
            "   {:<42} {:>11} {:>11}",
            "  peak (VmHWM)",
            "",
            format!("{:.1} MiB", h.hwm_kib as f64 / 1024.0)
        );
    }
    if let Some(c) = calls {
        println!(
            "   {:<42} {:>11} {:>11}",
            "1 server: idle / after the throughput runs",
            "",
            format!(
                "{:.1} / {:.1} MiB",
                c.hub_rss_idle as f64 / 1024.0,
                c.hub_rss_after as f64 / 1024.0
            )
        );
    }
}

fn calls_json(c: &Calls) -> Value {
    let lat = |l: &Latency| json!({"p50_us": round(l.p50_us, 2), "p99_us": round(l.p99_us, 2), "mean_us": round(l.mean_us, 2), "min_us": round(l.min_us, 2), "max_us": round(l.max_us, 2), "cpu_us_per_call": l.cpu_us_per_call.json(3), "context_switches_per_call": l.switches_per_call.json(3), "other_processes_cpus": round(l.other_cpus, 3), "cpu_pressure": round(l.cpu_pressure, 3), "reschedule_ipis_per_call": round(l.ipis_per_call, 3)});
    json!({
        "latency": {
            "direct": lat(&c.lat_direct),
            "hub": lat(&c.lat_hub),
            "ratio_p50": round(ratio(c.lat_hub.p50_us, c.lat_direct.p50_us), 3),
                        "ratio_p99": round(ratio(c.lat_hub.p99_us, c.lat_direct.p99_us), 3),
            "best_p50_us": {"direct": round(c.best_p50(&c.lat_direct_runs), 2), "hub": round(c.best_p50(&c.lat_hub_runs), 2)},
            "ratio_best_p50": round(ratio(c.best_p50(&c.lat_hub_runs), c.best_p50(&c.lat_direct_runs)), 3),
            "direct_runs": c.lat_direct_runs.iter().map(lat).collect::<Vec<_>>(),
            "hub_runs": c.lat_hub_runs.iter().map(lat).collect::<Vec<_>>(),
        },
        "throughput": {
            "direct": c.tpd.json(),
            "hub": c.tph.json(),
            "ratio": round(ratio(c.tph.per_sec, c.tpd.per_sec), 3),
            "direct_runs": c.tp_direct.iter().map(Throughput::json).collect::<Vec<_>>(),
            "hub_runs": c.tp_hub.iter().map(Throughput::json).collect::<Vec<_>>(),
        },
        "policy_variants": c.variants.iter().map(|m| json!({
            "name": m.name,
            "best_p50_us": round(m.best_p50(), 2),
            "added_to_pass_through_best_p50_us": round(m.best_p50() - c.best_p50(&c.lat_hub_runs), 2),
            "latency_median_run": m.median().as_ref().map(lat),
            "latency_runs": m.runs.iter().map(lat).collect::<Vec<_>>(),
            "throughput": median_rep(&m.throughput).map(|t| t.json()),
            "throughput_runs": m.throughput.iter().map(Throughput::json).collect::<Vec<_>>(),
            "ratio_throughput_to_pass_through_hub": median_rep(&m.throughput).map(|t| round(ratio(t.per_sec, c.tph.per_sec), 3)),
        })).collect::<Vec<_>>(),
        "policy_variant_settings": variants().into_iter().map(|v| json!({"name": v.name, "settings": v.settings})).collect::<Vec<_>>(),
        "surface": {
            "resources_read": {"direct": lat(&c.surface.read[0]), "hub": lat(&c.surface.read[1]), "ratio_p50": round(ratio(c.surface.read[1].p50_us, c.surface.read[0].p50_us), 3)},
            "prompts_get": {"direct": lat(&c.surface.prompt[0]), "hub": lat(&c.surface.prompt[1]), "ratio_p50": round(ratio(c.surface.prompt[1].p50_us, c.surface.prompt[0].p50_us), 3)},
            "progress_notifications_per_sec": {
                "notifications": c.surface.progress[1].notifications,
                "direct": round(c.surface.progress[0].per_sec(), 0),
                "hub": round(c.surface.progress[1].per_sec(), 0),
                "ratio": round(ratio(c.surface.progress[1].per_sec(), c.surface.progress[0].per_sec()), 3),
            },
        },
        "hub_settings": pass_through(),
        "memory_1_server": {
            "hub_rss_kib_idle": c.hub_rss_idle,
            "hub_rss_kib_after_throughput": c.hub_rss_after,
            "hub_hwm_kib_after_throughput": c.hub_hwm_after,
            "hub_exit_after_stdin_close_ms": round(ms(c.hub_shutdown), 2),
        },
    })
}

fn startup_json(s: &Startup) -> Value {
    json!({
        "tools_per_fixture": s.per_server,
        "direct_single_ms": {
            "median": round(s.single_median, 3),
            "slowest": round(s.single_max, 3),
            "slowest_disturbed": singles_disturbed(s),
            "fastest": round(s.single_min, 3),
            "all": s.singles.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
        },
        "direct_parallel_ms": s.parallel.iter().map(|(n, runs)| json!({
            "servers": n,
            "median": round(median_f64(runs), 3),
            "runs": runs.iter().map(|x| round(*x, 3)).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "hub": s.hubs.iter().map(|(n, reps)| json!({
            "servers": n,
            "median": median_startup(reps).map(HubStartup::json),
            "ratio_to_slowest_single": median_startup(reps).map(|m| round(ratio(m.full_ms, s.single_max), 3)),
            "ratio_to_direct_parallel": median_startup(reps).zip(s.together(*n)).map(|(m, t)| round(ratio(m.full_ms, t), 3)),
            "runs": reps.iter().map(HubStartup::json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn run(p: &Params) -> Result<()> {
    let ctx = locate()?;
    let started = Instant::now();
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let load_before = loadavg();
    println!(
        "openpact bench ({} run) — {cpus} CPU(s), load average {}; hub: {}",
        p.mode,
        load_before.map_or_else(|| "?".to_string(), |l| format!("{l:.2}")),
        ctx.openpact.display()
    );
    if !ctx.hub_wrapper.is_empty() {
        println!(
            "   the hub runs under `{}`: its CPU and memory figures are the wrapper's",
            ctx.hub_wrapper.join(" ")
        );
    }
    let calls = if p.calls {
        Some(run_calls(&ctx, p)?)
    } else {
        None
    };
    let startup = if p.startup {
        Some(run_startup(&ctx, p)?)
    } else {
        None
    };
    let load_after = loadavg();
    let v = verdicts(calls.as_ref(), startup.as_ref());

    println!();
    println!(
        "{:<45} {:>11} {:>11} {:>10}  target",
        "", "direct", "hub", "hub/direct"
    );
    if let Some(c) = &calls {
        print_calls(p, c, &v);
    }
    if let Some(s) = &startup {
        print_startup(p, s, &v);
    }
    print_memory(calls.as_ref(), startup.as_ref(), &v);
    println!();
    let show = |ok: Option<bool>| ok.map_or("not run", mark);
    println!(
        "targets: latency {}, throughput {}, startup {}, memory {}, cache hit {}, pipeline {}   ({:.1} s; load average {} → {}; startup's stricter reading {})",
        show(v.latency),
        show(v.throughput),
        show(v.startup),
        show(v.memory),
        show(v.cache_hit),
        show(v.pipeline),
        started.elapsed().as_secs_f64(),
        load_before.map_or_else(|| "?".to_string(), |l| format!("{l:.2}")),
        load_after.map_or_else(|| "?".to_string(), |l| format!("{l:.2}")),
        show(v.startup_alone),
    );

    let s50 = startup.as_ref().and_then(|s| s.hub(50).map(|h| (s, h)));
    let report = json!({
        "mode": p.mode,
        "cpus": cpus,
        "load_average_1m": {"before": load_before, "after": load_after},
        "unix_time": SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        "git": git_describe(),
        "binaries": {"openpact": ctx.openpact, "fixture": ctx.fixture},
        "hub_wrapper": ctx.hub_wrapper,
        "params": {
            "in_flight": IN_FLIGHT,
            "latency_warmup": p.latency_warmup,
            "latency_calls": p.latency_calls,
            "latency_reps": p.latency_reps,
            "latency_runs": p.latency_runs,
            "throughput_warmup": p.throughput_warmup,
            "throughput_calls": p.throughput_calls,
            "throughput_reps": p.throughput_reps,
            "direct_startups": p.direct_startups,
            "hub_startup_reps": p.hub_startup_reps,
            "cpu_source": if sched_runtime(std::process::id()).is_some() { "/proc/PID/task/*/sched se.sum_exec_runtime" } else { "/proc/PID/stat utime+stime" },
        },
        "calls": calls.as_ref().map(calls_json),
        "startup": startup.as_ref().map(startup_json),
        "targets": {
            "latency": {
                "rule": format!("hub p50 <= {TARGET_LATENCY_RATIO} x direct p50, each the best of its runs (interference only ever adds)"),
                "hub_p50_us": calls.as_ref().map(|c| round(c.best_p50(&c.lat_hub_runs), 2)),
                "limit_us": calls.as_ref().map(|c| round(TARGET_LATENCY_RATIO * c.best_p50(&c.lat_direct_runs), 2)),
                "median_run_ratio": calls.as_ref().map(|c| round(ratio(c.lat_hub.p50_us, c.lat_direct.p50_us), 3)),
                "pass": v.latency,
            },
            "throughput": {
                "rule": format!("hub >= {TARGET_THROUGHPUT} calls/s with {IN_FLIGHT} in flight, the best of its runs on fresh processes (interference only ever takes away)"),
                "hub_calls_per_sec": calls.as_ref().map(|c| round(best_rep(&c.tp_hub), 0)),
                "median_run_calls_per_sec": calls.as_ref().map(|c| round(c.tph.per_sec, 0)),
                "pass": v.throughput,
            },
            "startup": {
                "rule": format!("hub with 50 servers <= 50 fixtures started together by the bench (the slowest of them) + {TARGET_STARTUP_SLACK_MS} ms, medians of interleaved runs"),
                "hub_50_ms": s50.map(|(_, h)| round(h.full_ms, 2)),
                "limit_ms": startup.as_ref().and_then(|s| s.together(50)).map(|t| round(t + TARGET_STARTUP_SLACK_MS, 2)),
                "pass": v.startup,
                "stricter_reading": {
                    "rule": format!("hub with 50 servers <= slowest single fixture started alone + {TARGET_STARTUP_SLACK_MS} ms"),
                    "limit_ms": s50.map(|(s, _)| round(s.single_max + TARGET_STARTUP_SLACK_MS, 2)),
                    "pass": v.startup_alone,
                },
            },
            "cache_hit": {
                "rule": format!("cache-hit p50 <= {TARGET_CACHE_HIT_RATIO} x direct echo p50, best runs"),
                "ratio": calls.as_ref().and_then(Calls::cache_hit_ratio).map(|r| round(r, 3)),
                "pass": v.cache_hit,
            },
            "pipeline": {
                "rule": format!("full pipeline p50 - pass-through hub p50 <= {TARGET_PIPELINE_ADDED_US} us, interleaved, median of runs"),
                "added_us": calls.as_ref().and_then(Calls::pipeline_added_us).map(|us| round(us, 2)),
                "runs": calls.as_ref().map(|c| c.pipeline_pairs.iter().map(|p| json!({"pass_through_p50_us": round(p.a_p50_us, 2), "full_p50_us": round(p.b_p50_us, 2)})).collect::<Vec<_>>()),
                "pass": v.pipeline,
            },
            "memory": {
                                "rule": format!("hub VmRSS after starting 50 servers (the larger of: when the list is complete, {} s later) <= {TARGET_RSS_MIB} MiB", RSS_SETTLE.as_secs()),
                                "hub_50_mib": s50.map(|(_, h)| round(h.rss_after_startup_kib() as f64 / 1024.0, 2)),
                "pass": v.memory,
            },
        },
        "seconds": round(started.elapsed().as_secs_f64(), 2),
    });
    let out = ctx.target.join("bench.json");
    std::fs::write(&out, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("cannot write {}", out.display()))?;
    println!("figures written to {}", out.display());
    Ok(())
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
