//! The bench's side of the pipes, shared by every part: spawning the fixture and hubs, a
//! copy-free line reader, the response-id scanner, request templates, `/proc` metering and
//! the small statistics the parts report with.
//!
//! The client is one thread that owns both pipes of a peer: it parses only the `id` of each
//! response, writes the next request into a buffer at once, and flushes only when it is about
//! to block on reading, so it costs a fraction of what the processes it measures do.

use crate::Ctx;
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::io::{BufWriter, Read, Write};
use std::ops::Range;
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

pub const PROTOCOL: &str = "2025-11-25";

/// Set in every hub's environment; the full pipeline declares it a secret, so redaction has
/// a pattern to look for in every line.
pub const SECRET_VAR: &str = "OPENPACT_BENCH_SECRET";

// ---------------------------------------------------------------------------------------------
// Every child pid is registered so that a stuck or failed run can be killed as a whole.

static PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

pub fn pids() -> std::sync::MutexGuard<'static, Vec<u32>> {
    PIDS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// SIGKILLs every registered child (the hubs' own children see EOF and exit).
pub fn kill_all() {
    for pid in std::mem::take(&mut *pids()) {
        // Unix only, as the hub is so far (src/platform/mod.rs).
        #[cfg(unix)]
        if let Ok(pid) = i32::try_from(pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lines in, lines out.

/// A line splitter over a blocking pipe that hands out ranges of its own buffer, so the hot
/// path copies nothing.
pub struct LineReader {
    r: ChildStdout,
    pub buf: Vec<u8>,
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
    pub fn try_line(&mut self) -> Option<Range<usize>> {
        let i = memchr::memchr(b'\n', &self.buf[self.start..self.end])?;
        let line = self.start..self.start + i;
        self.start += i + 1;
        Some(line)
    }

    /// One blocking read. Ranges handed out earlier are invalid afterwards.
    pub fn fill(&mut self) -> Result<()> {
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
    pub fn line(&mut self) -> Result<Range<usize>> {
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
pub struct CallTemplate {
    parts: Vec<Vec<u8>>,
}

pub const ID_MARK: &str = "@ID@";

impl CallTemplate {
    pub fn new(method: &str, params: &Value) -> CallTemplate {
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{ID_MARK},\"method\":{},\"params\":{params}}}\n",
            Value::from(method)
        );
        CallTemplate {
            parts: line.split(ID_MARK).map(|p| p.as_bytes().to_vec()).collect(),
        }
    }

    /// `tools/call TOOL {"message": "hello"}`, the same arguments every time.
    pub fn echo(tool: &str) -> CallTemplate {
        CallTemplate::new(
            "tools/call",
            &json!({"name": tool, "arguments": {"message": "hello"}}),
        )
    }

    pub fn write(&self, w: &mut impl Write, id: u64) -> std::io::Result<()> {
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
/// (a notification or server request); anything else is an error.
pub enum Seen {
    Result(u64),
    Other,
}

pub struct IdScanner {
    finder: memchr::memmem::Finder<'static>,
}

impl IdScanner {
    pub fn new() -> IdScanner {
        IdScanner {
            finder: memchr::memmem::Finder::new(b"\"id\":"),
        }
    }

    /// Both the fixture and the hub write `{"jsonrpc":"2.0","id":N,"result":…`, so the first
    /// `"id":` is the envelope's and `,"result":` must follow the digits.
    pub fn scan(&self, line: &[u8]) -> Result<Seen> {
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

pub struct Peer {
    pub label: String,
    child: Child,
    pub pid: u32,
    pub w: Option<BufWriter<ChildStdin>>,
    pub r: LineReader,
    pub next_id: u64,
    /// `notifications/tools/list_changed` seen so far.
    pub list_changed: u64,
    pub spawned_at: Instant,
}

impl Peer {
    pub fn spawn(label: &str, mut cmd: Command) -> Result<Peer> {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        let spawned_at = Instant::now();
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {label}"))?;
        let pid = child.id();
        pids().push(pid);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            bail!("{label}: no pipes");
        };
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

    pub fn writer(&mut self) -> Result<&mut BufWriter<ChildStdin>> {
        self.w
            .as_mut()
            .ok_or_else(|| anyhow!("{}: stdin already closed", self.label))
    }

    pub fn send_line(&mut self, line: &str) -> Result<()> {
        let label = self.label.clone();
        let w = self.writer()?;
        w.write_all(line.as_bytes())
            .and_then(|()| w.write_all(b"\n"))
            .and_then(|()| w.flush())
            .with_context(|| format!("writing to {label}"))
    }

    pub fn notify(&mut self, method: &str) -> Result<()> {
        self.send_line(&json!({"jsonrpc": "2.0", "method": method}).to_string())
    }

    /// Sends a request without waiting; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )?;
        Ok(id)
    }

    /// Reads until the response to `id`, handling whatever else arrives meanwhile.
    /// `Ok(Err(error))` is a JSON-RPC error. The result stays JSON text: a long list is then
    /// parsed once, into just what the caller needs, and the time measured is the peer's.
    fn reply(&mut self, id: u64) -> Result<std::result::Result<String, Value>> {
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
            let bytes = &self.r.buf[line];
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

    /// The result of request `id`, parsed; a JSON-RPC error is a failure.
    pub fn response(&mut self, id: u64, method: &str) -> Result<Value> {
        let raw = self
            .reply(id)?
            .map_err(|e| anyhow!("{}: {method} failed: {e}", self.label))?;
        serde_json::from_str(&raw).with_context(|| format!("{}: result is not JSON", self.label))
    }

    /// Sends a request and returns its result as the JSON text the peer wrote, byte for byte
    /// (what a client receives); a JSON-RPC error is a failure.
    pub fn call_raw(&mut self, method: &str, params: Value) -> Result<String> {
        let id = self.send_request(method, params)?;
        self.reply(id)?
            .map_err(|e| anyhow!("{}: {method} failed: {e}", self.label))
    }

    /// Sends a request and reads until its response.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.send_request(method, params)?;
        self.response(id, method)
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
    pub fn wait_list_changed(&mut self) -> Result<()> {
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

    pub fn initialize_params() -> Value {
        json!({"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "openpact-bench", "version": "1"}})
    }

    pub fn initialize(&mut self) -> Result<Value> {
        let result = self.call("initialize", Self::initialize_params())?;
        self.notify("notifications/initialized")?;
        Ok(result)
    }

    /// Every tool name, following `nextCursor`. `None` when a cursor went stale because the
    /// list changed meanwhile (the caller lists again).
    pub fn list_tools(&mut self) -> Result<Option<Vec<String>>> {
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let id = self.send_request("tools/list", params)?;
            let page = match self.reply(id)? {
                Ok(page) => page,
                Err(e)
                    if cursor.is_some()
                        && e.get("code").and_then(Value::as_i64) == Some(-32602) =>
                {
                    return Ok(None);
                }
                Err(e) => bail!("{}: tools/list failed: {e}", self.label),
            };
            let page: ToolsPage = serde_json::from_str(&page)
                .with_context(|| format!("{}: tools/list without tools", self.label))?;
            names.extend(page.tools.into_iter().map(|t| t.name));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(Some(names)),
            }
        }
    }

    /// Closes stdin and waits for the exit (killing after `limit`); returns how long it took.
    pub fn close(mut self, limit: Duration) -> Duration {
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
        pids().retain(|p| *p != self.pid);
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

pub fn spawn_fixture(ctx: &Ctx, label: &str) -> Result<Peer> {
    let mut cmd = Command::new(&ctx.fixture);
    cmd.stderr(Stdio::null());
    Peer::spawn(label, cmd)
}

/// Writes a config with `servers` (name → fixture args) and starts `openpact serve` on it.
pub fn spawn_hub(
    ctx: &Ctx,
    label: &str,
    servers: &[(String, Vec<String>)],
    settings: &Value,
) -> Result<Peer> {
    let map = servers
        .iter()
        .map(|(name, args)| (name.clone(), fixture_entry(ctx, args)))
        .collect();
    spawn_hub_on(ctx, label, map, settings)
}

/// The `mcpServers` entry of a fixture started with `args`.
pub fn fixture_entry(ctx: &Ctx, args: &[String]) -> Value {
    json!({"command": ctx.fixture, "args": args})
}

/// Writes a config with these `mcpServers` entries and starts `openpact serve` on it.
pub fn spawn_hub_on(
    ctx: &Ctx,
    label: &str,
    map: serde_json::Map<String, Value>,
    settings: &Value,
) -> Result<Peer> {
    Peer::spawn(label, hub_command(ctx, label, map, settings, &[])?)
}

/// Writes a config with these `mcpServers` entries; the command `openpact serve SERVE_ARGS`
/// on it, its stderr going to `bench-work/LABEL.stderr.log`.
pub fn hub_command(
    ctx: &Ctx,
    label: &str,
    map: serde_json::Map<String, Value>,
    settings: &Value,
    serve_args: &[&str],
) -> Result<Command> {
    let config = write_config(ctx, label, map, settings)?;
    // A fresh state dir each time: no decisions or audit log left from an earlier run.
    let state = ctx.work.join(format!("state-{label}"));
    let _ = std::fs::remove_dir_all(&state);
    let mut words = vec!["serve"];
    words.extend_from_slice(serve_args);
    openpact_command(ctx, label, &config, &state, &words)
}

/// `bench-work/LABEL.json` with these `mcpServers` entries and `openpact` settings.
pub fn write_config(
    ctx: &Ctx,
    label: &str,
    map: serde_json::Map<String, Value>,
    settings: &Value,
) -> Result<std::path::PathBuf> {
    let config = ctx.work.join(format!("{label}.json"));
    let text = serde_json::to_vec_pretty(&json!({"mcpServers": map, "openpact": settings}))?;
    std::fs::write(&config, text).with_context(|| format!("cannot write {}", config.display()))?;
    Ok(config)
}

/// `openpact --config CONFIG --state-dir STATE WORDS` (under the profiling wrapper when one
/// is set), its stderr going to `bench-work/LABEL.stderr.log`.
pub fn openpact_command(
    ctx: &Ctx,
    label: &str,
    config: &Path,
    state: &Path,
    words: &[&str],
) -> Result<Command> {
    let log = stderr_log(ctx, label)?;
    let mut cmd = match ctx.hub_wrapper.split_first() {
        Some((program, args)) => {
            let mut cmd = Command::new(program);
            cmd.args(args).arg(&ctx.openpact);
            cmd
        }
        None => Command::new(&ctx.openpact),
    };
    cmd.arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(state)
        .args(words)
        // The default log level, whatever the caller's environment says.
        .env_remove("OPENPACT_LOG")
        .env_remove("RUST_LOG")
        .env(SECRET_VAR, "bench-secret-0123456789")
        .stderr(Stdio::from(log));
    Ok(cmd)
}

/// A new `bench-work/LABEL.stderr.log`, for a server's stderr.
pub fn stderr_log(ctx: &Ctx, label: &str) -> Result<std::fs::File> {
    let log = stderr_path(ctx, label);
    std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))
}

pub fn stderr_path(ctx: &Ctx, label: &str) -> std::path::PathBuf {
    ctx.work.join(format!("{label}.stderr.log"))
}

/// The hub's `openpact` settings for the main measures: every call allowed by a rule, no rate
/// limit, no cache, no audit — the forwarding path alone. Tool search off: its default
/// ("auto") hides a catalogue of more than 40 tools behind `search_tools`, and the parts that
/// wait for every server's tools in `tools/list` (startup, sandbox) would never see them;
/// part 10 turns it on where it measures it.
pub fn pass_through() -> Value {
    json!({
        "permissions": {"allow": ["*"]},
        "rateLimits": {"default": "off"},
        "cache": {"default": "off"},
        "audit": {"enabled": false},
        "toolSearch": {"mode": "off"},
    })
}

/// Starts a fixture on its own and checks its `echo`.
pub fn start_direct(ctx: &Ctx, label: &str) -> Result<(Peer, Pids)> {
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

/// Starts a hub with one fixture named `fx`, checks `fx:echo` and learns the fixture's pid.
pub fn start_hub(ctx: &Ctx, label: &str, settings: &Value) -> Result<(Peer, Pids)> {
    let mut hub = spawn_hub(ctx, label, &[("fx".to_string(), Vec::new())], settings)?;
    hub.label = format!("hub ({label})");
    hub.initialize()?;
    let tools = hub
        .list_tools()?
        .ok_or_else(|| anyhow!("hub cursor went stale"))?;
    check_echo(&mut hub, &tools, "fx:echo")?;
    let pids = hub.call("tools/call", json!({"name": "fx:pids", "arguments": {}}))?;
    let fixture = fixture_pid(&pids)
        .ok_or_else(|| anyhow!("cannot learn the hub's fixture pid from fx:pids: {pids}"))?;
    let pids = Pids {
        hub: Some(hub.pid),
        fixture,
    };
    Ok((hub, pids))
}

/// The fixture's pid in the result of its `pids` tool, as the bench sees it (a sandboxed
/// fixture reports its PID namespace's).
pub fn fixture_pid(result: &Value) -> Option<u32> {
    let v = result
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .and_then(|t| serde_json::from_str::<Value>(t).ok())?;
    let pid = v.get("pid").and_then(Value::as_u64)?;
    crate::host_pid::host_pid(
        u32::try_from(pid).ok()?,
        v.get("pidns").and_then(Value::as_str).unwrap_or_default(),
    )
}

/// The peers parts 2, 4 and 5 share: a fixture on its own and a pass-through hub with one.
pub struct Shared {
    pub direct: (Peer, Pids),
    pub hub: (Peer, Pids),
}

impl Shared {
    pub fn start(ctx: &Ctx) -> Result<Shared> {
        Ok(Shared {
            direct: start_direct(ctx, "fixture (direct)")?,
            hub: start_hub(ctx, "hub-1", &pass_through())?,
        })
    }
}

/// Checks that `peer` lists `echo` and that it echoes.
pub fn check_echo(peer: &mut Peer, tools: &[String], echo: &str) -> Result<()> {
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

// ---------------------------------------------------------------------------------------------
// /proc readings.

/// CPU seconds the process has used. Summed over its live threads from
/// `/proc/PID/task/TID/sched` (`se.sum_exec_runtime`, nanosecond precision) when the kernel
/// provides it; otherwise utime + stime from `/proc/PID/stat` (every thread, in clock ticks).
/// The processes measured keep their threads for the whole run, so the sum loses nothing.
pub fn cpu_seconds(pid: u32, clk_tck: f64) -> Result<f64> {
    if let Some(secs) = sched_runtime(pid) {
        return Ok(secs);
    }
    Ok(cpu_ticks(pid)? as f64 / clk_tck)
}

pub fn sched_runtime(pid: u32) -> Option<f64> {
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
    // After the command name: utime is field 14 and stime field 15 of the whole line.
    let fields: Vec<u64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|f| f.parse().ok())
        .collect();
    match fields[..] {
        [utime, stime] => Ok(utime + stime),
        _ => bail!("no utime/stime in /proc/{pid}/stat"),
    }
}

/// Voluntary + involuntary context switches summed over the process's live threads.
fn context_switches(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let mut total = 0;
    for task in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        total += status
            .lines()
            .filter(|l| {
                l.starts_with("voluntary_ctxt_switches:")
                    || l.starts_with("nonvoluntary_ctxt_switches:")
            })
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total as f64
}

/// The direct children of a process (from every thread's `children` list).
pub fn children(pid: u32) -> Vec<u32> {
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
pub fn status_field(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("no {field} in /proc/{pid}/status"))
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
pub fn cpu_pressure_us() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
    let some = text.lines().find(|l| l.starts_with("some "))?;
    some.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

/// The processes of one measurement.
#[derive(Clone, Copy)]
pub struct Pids {
    pub hub: Option<u32>,
    pub fixture: u32,
}

/// A figure for each process of a measurement (`hub`: `None` when direct).
#[derive(Clone, Copy, Default)]
pub struct Procs<T> {
    pub client: T,
    pub hub: Option<T>,
    pub fixture: T,
}

impl<T: Copy> Procs<T> {
    pub fn map<U>(&self, f: impl Fn(T) -> U) -> Procs<U> {
        Procs {
            client: f(self.client),
            hub: self.hub.map(&f),
            fixture: f(self.fixture),
        }
    }

    fn zip<U: Copy, V>(&self, other: &Procs<U>, f: impl Fn(T, U) -> V) -> Procs<V> {
        Procs {
            client: f(self.client, other.client),
            hub: self.hub.zip(other.hub).map(|(a, b)| f(a, b)),
            fixture: f(self.fixture, other.fixture),
        }
    }
}

impl Procs<f64> {
    pub fn total(&self) -> f64 {
        self.client + self.hub.unwrap_or(0.0) + self.fixture
    }
}

/// A reading of the measured processes and of the machine's contention counters.
pub struct Meter {
    cpu: Procs<f64>,
    switches: Procs<f64>,
    pressure_us: Option<u64>,
    ipis: Option<u64>,
    at: Instant,
}

/// What was used between two readings.
pub struct Used {
    pub cpu: Procs<f64>,
    pub switches: Procs<f64>,
    /// The share of the time during which some task (ours included) was runnable but waited
    /// for a CPU: well above zero, something else competed for the CPUs.
    pub cpu_pressure: f64,
    /// Rescheduling IPIs on the whole machine.
    pub ipis: f64,
}

impl Meter {
    pub fn read(pids: Pids, clk_tck: f64) -> Result<Meter> {
        let me = Procs {
            client: std::process::id(),
            hub: pids.hub,
            fixture: pids.fixture,
        };
        let cpu = Procs {
            client: cpu_seconds(me.client, clk_tck)?,
            hub: me.hub.map(|h| cpu_seconds(h, clk_tck)).transpose()?,
            fixture: cpu_seconds(me.fixture, clk_tck)?,
        };
        Ok(Meter {
            cpu,
            switches: me.map(context_switches),
            pressure_us: cpu_pressure_us(),
            ipis: reschedule_ipis(),
            at: Instant::now(),
        })
    }

    /// Call with the same `pids` as the earlier reading.
    pub fn since(&self, before: &Meter) -> Used {
        let d = |a: f64, b: f64| (a - b).max(0.0);
        let wall_us = self.at.duration_since(before.at).as_secs_f64() * 1e6;
        let counted = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => a.saturating_sub(b) as f64,
            _ => f64::NAN,
        };
        Used {
            cpu: self.cpu.zip(&before.cpu, d),
            switches: self.switches.zip(&before.switches, d),
            cpu_pressure: counted(self.pressure_us, before.pressure_us) / wall_us,
            ipis: counted(self.ipis, before.ipis),
        }
    }
}

/// One page of a `tools/list` result, as far as the bench reads it.
#[derive(serde::Deserialize)]
pub struct ToolsPage {
    pub tools: Vec<ToolName>,
    #[serde(rename = "nextCursor")]
    pub next_cursor: Option<String>,
}

#[derive(serde::Deserialize)]
pub struct ToolName {
    pub name: String,
}
