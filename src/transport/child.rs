//! A child server process: spawned in its own process group, stderr drained into tracing and a
//! ring buffer, and shut down as the spec asks — close stdin, wait, SIGTERM the whole group,
//! wait, SIGKILL the whole group — so grandchildren (`npx`, `uvx`, shells) die with it.

use crate::platform::{self, GroupSignal};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
// The child's stdin is a pipe we poll (see `Spawned::stdin`); a Windows port needs another
// pollable writer here (src/platform/mod.rs).
#[cfg(unix)]
use tokio::net::unix::pipe;
use tokio::process::{Child, ChildStdout, Command};

/// How to start a child.
#[derive(Clone)]
pub struct ChildSpec {
    /// Used in logs as the `server` field.
    pub label: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Set on top of the inherited environment, or the whole environment when
    /// `inherit_env` is false (a sandboxed server gets only what its profile passes).
    pub env: Vec<(String, String)>,
    pub inherit_env: bool,
    pub cwd: Option<PathBuf>,
    /// Applied to every stderr line before it is logged or kept (secret redaction).
    pub scrub: Option<Scrub>,
    /// Shown every stderr line once redacted (the sandbox's refusals are read off them).
    pub observe: Option<Observe>,
}

/// Something that reads each (redacted) stderr line of a child.
pub type Observe = Arc<dyn Fn(&str) + Send + Sync>;

/// A text filter for what a child writes to stderr.
pub type Scrub = Arc<dyn Fn(&str) -> String + Send + Sync>;

#[derive(Debug, thiserror::Error)]
#[error("could not start `{program}`: {source}")]
pub struct SpawnError {
    pub program: String,
    #[source]
    pub source: std::io::Error,
}

/// A started child with its pipes.
pub struct Spawned {
    pub proc: ChildProc,
    /// As a pipe rather than a `ChildStdin`, which cannot be written through a shared
    /// reference (see [`crate::transport::Outbox`]).
    pub stdin: pipe::Sender,
    pub stdout: ChildStdout,
    pub stderr: Arc<StderrLog>,
}

/// The last lines a child wrote to stderr, for error messages and `openpact servers`; also
/// what it wrote to stdout that was not JSON-RPC (a banner breaks the protocol, and is the
/// first thing to show when a handshake fails).
#[derive(Default)]
pub struct StderrLog {
    lines: Mutex<VecDeque<String>>,
    /// Applied to every line kept or logged (secret redaction).
    scrub: Option<Scrub>,
    observe: Option<Observe>,
    /// Set when the pipe reaches EOF, so a crash report can wait for the last words.
    done: tokio::sync::Notify,
    finished: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for StderrLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StderrLog")
            .field("lines", &self.tail(KEEP_LINES).len())
            .finish_non_exhaustive()
    }
}

const KEEP_LINES: usize = 40;
/// How much of a non-JSON stdout line is logged and kept.
const NOISE_SHOWN: usize = 200;
const MAX_LINE: usize = 2000;
/// Lines per second per server that reach the log; the rest are counted, not written, so a
/// flooding server cannot drown the hub's own log (the ring buffer still sees every line).
const LOG_RATE: u32 = 200;

impl StderrLog {
    pub fn new(scrub: Option<Scrub>, observe: Option<Observe>) -> StderrLog {
        StderrLog {
            scrub,
            observe,
            ..StderrLog::default()
        }
    }

    /// The line with secrets redacted.
    pub fn scrubbed(&self, line: String) -> String {
        match &self.scrub {
            Some(scrub) => scrub(&line),
            None => line,
        }
    }

    /// Records a line the server wrote to stdout that is not JSON-RPC: logged (cut and
    /// redacted) with what is wrong, and kept beside the stderr lines so that a failed
    /// start shows it.
    pub fn push_stdout_noise(&self, server: &str, line: &str) {
        // Redacted before it is cut, so a secret cut in two cannot slip past as a fragment.
        let whole = self.scrubbed(line.trim_end().to_string());
        let mut shown: String = whole.chars().take(NOISE_SHOWN).collect();
        if shown.len() < whole.len() {
            shown.push('…');
        }
        tracing::warn!(
            server,
            "skipped a line on stdout that is not JSON-RPC (stdout must carry only JSON-RPC; the server should write banners and logs to stderr): {shown}"
        );
        self.push(format!("[stdout, not JSON-RPC] {shown}"));
    }

    pub fn push(&self, mut line: String) {
        if line.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        if let Ok(mut q) = self.lines.lock() {
            if q.len() == KEEP_LINES {
                q.pop_front();
            }
            q.push_back(line);
        }
    }

    /// The most recent `n` lines, oldest first.
    pub fn tail(&self, n: usize) -> Vec<String> {
        match self.lines.lock() {
            Ok(q) => q.iter().skip(q.len().saturating_sub(n)).cloned().collect(),
            Err(_) => Vec::new(),
        }
    }

    fn mark_done(&self) {
        self.finished
            .store(true, std::sync::atomic::Ordering::Release);
        self.done.notify_waiters();
    }

    /// Waits (at most `limit`) until the child's stderr is closed and fully read.
    pub async fn wait_done(&self, limit: Duration) {
        let notified = self.done.notified();
        if self.finished.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let _ = tokio::time::timeout(limit, notified).await;
    }

    /// A short suffix for error messages: `; last stderr: a | b | c`, or empty.
    pub fn summary(&self, n: usize) -> String {
        let tail = self.tail(n);
        if tail.is_empty() {
            String::new()
        } else {
            format!("; last stderr: {}", tail.join(" | "))
        }
    }
}

/// The running process (not its pipes).
pub struct ChildProc {
    child: Child,
    pid: Option<u32>,
    label: String,
}

impl ChildSpec {
    /// Starts the child. The fork and exec run on the blocking pool: the runtime has a single
    /// worker (see `main.rs`), and a hub starting fifty servers would otherwise make them one
    /// after another on it while the second CPU idles.
    pub async fn spawn(&self) -> Result<Spawned, SpawnError> {
        // A few at a time: more would only add idle threads to the pool, not speed.
        static SPAWNING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);
        let _turn = SPAWNING.acquire().await;
        let spec = self.clone();
        match tokio::task::spawn_blocking(move || spec.spawn_now()).await {
            Ok(spawned) => spawned,
            Err(e) => Err(SpawnError {
                program: self.program.display().to_string(),
                source: std::io::Error::other(e),
            }),
        }
    }

    fn spawn_now(&self) -> Result<Spawned, SpawnError> {
        let err = |source| SpawnError {
            program: self.program.display().to_string(),
            source,
        };
        // Our own pipe for stdin: tokio would register a `ChildStdin` with the reactor, and
        // turning that into a `pipe::Sender` takes it out and puts it back (six syscalls more
        // per server, fifty servers at once).
        let (stdin_theirs, stdin_ours) = std::io::pipe().map_err(err)?;
        let mut cmd = Command::new(&self.program);
        if !self.inherit_env {
            cmd.env_clear();
        }
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::from(stdin_theirs))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Own group: signals reach grandchildren, and a Ctrl-C in our terminal does not hit
        // the children before we get to shut them down in order.
        platform::new_process_group(cmd.as_std_mut());
        if let Some(cwd) = &self.cwd {
            cmd.current_dir(cwd);
        }
        let spawned = cmd.spawn();
        // The command holds the child's end of the stdin pipe; only the child keeps it.
        drop(cmd);
        let mut child = spawned.map_err(err)?;
        let stdin = pipe::Sender::from_owned_fd(stdin_ours.into()).map_err(err)?;
        let missing = || err(std::io::Error::other("pipe missing"));
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stderr_pipe = child.stderr.take().ok_or_else(missing)?;
        let stderr = Arc::new(StderrLog::new(self.scrub.clone(), self.observe.clone()));
        tokio::spawn(drain_stderr(
            stderr_pipe,
            self.label.clone(),
            stderr.clone(),
        ));

        let pid = child.id();
        Ok(Spawned {
            proc: ChildProc {
                child,
                pid,
                label: self.label.clone(),
            },
            stdin,
            stdout,
            stderr,
        })
    }
}

async fn drain_stderr(pipe: tokio::process::ChildStderr, label: String, log: Arc<StderrLog>) {
    // Stderr lines are cut at MAX_LINE anyway; a small buffer keeps 50 idle servers cheap.
    let mut reader = BufReader::with_capacity(1 << 12, pipe);
    let mut buf = Vec::with_capacity(256);
    let mut window = Instant::now();
    let (mut logged, mut suppressed) = (0u32, 0u64);
    loop {
        buf.clear();
        // Bounded read: a line without a newline cannot grow past what we keep.
        match read_bounded_line(&mut reader, &mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = log.scrubbed(String::from_utf8_lossy(&buf).trim_end().to_string());
        if window.elapsed() >= Duration::from_secs(1) {
            if suppressed > 0 {
                tracing::warn!(server = %label, suppressed, "stderr lines not logged (server is flooding stderr)");
            }
            window = Instant::now();
            logged = 0;
            suppressed = 0;
        }
        if logged < LOG_RATE {
            logged += 1;
            tracing::info!(target: "openpact::server", server = %label, "{line}");
        } else {
            if suppressed == 0 {
                tracing::warn!(server = %label, "server is flooding stderr: lines past {LOG_RATE}/s are not logged (suppressed lines are counted)");
            }
            suppressed += 1;
        }
        if let Some(observe) = &log.observe {
            observe(&line);
        }
        log.push(line);
    }
    if suppressed > 0 {
        tracing::warn!(server = %label, suppressed, "stderr lines not logged (server was flooding stderr)");
    }
    log.mark_done();
}

async fn read_bounded_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    out: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(total);
        }
        let (used, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let room = (MAX_LINE + 8).saturating_sub(out.len());
        out.extend_from_slice(&buf[..used.min(room)]);
        r.consume(used);
        total += used;
        if done {
            return Ok(total);
        }
    }
}

impl ChildProc {
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Waits for the process to exit on its own.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Stops the process and its group. The caller must have closed stdin already (that is
    /// step one: most servers exit on EOF). SIGTERM follows after `after_eof`, SIGKILL after
    /// `grace` more.
    pub async fn terminate(mut self, after_eof: Duration, grace: Duration) -> Option<ExitStatus> {
        let status = match tokio::time::timeout(after_eof, self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => {
                tracing::debug!(server = %self.label, "did not exit after stdin closed; sending SIGTERM");
                self.signal_group(GroupSignal::Terminate);
                match tokio::time::timeout(grace, self.child.wait()).await {
                    Ok(Ok(status)) => Some(status),
                    _ => {
                        tracing::warn!(server = %self.label, "did not exit after SIGTERM; sending SIGKILL");
                        self.signal_group(GroupSignal::Kill);
                        tokio::time::timeout(grace, self.child.wait())
                            .await
                            .ok()
                            .and_then(Result::ok)
                    }
                }
            }
        };
        // The leader is gone, but grandchildren it left in the group may live on.
        self.signal_group(GroupSignal::Kill);
        status
    }

    /// Kills whatever is left of the process group after the leader died on its own (a crash
    /// leaves `npx`/shell grandchildren behind otherwise).
    pub fn kill_group(&self) {
        self.signal_group(GroupSignal::Kill);
    }

    fn signal_group(&self, sig: GroupSignal) {
        let Some(pid) = self.pid else {
            return;
        };
        // ESRCH (group already empty) is the normal case after a clean exit.
        let _ = platform::signal_group(pid, sig);
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        // Last resort when a connection is dropped without `terminate` (e.g. the runtime is
        // going away): kill_on_drop only reaches the leader, so hit the group as well.
        if self.pid.is_some()
            && let Ok(None) = self.child.try_wait()
        {
            self.signal_group(GroupSignal::Kill);
        }
    }
}
