//! The hub's side of a program: a worker process started through the sandbox wrapper (no
//! files, no network, no inherited environment) with memory and CPU-time limits, spoken to
//! over its pipes until the program ends, runs out of time, or the worker dies — whichever
//! comes first, the worker is gone when [`run`] returns.

use super::protocol::{Answer, Answers, CallRequest, FromWorker, MAX_LINE, SUBCOMMAND, Start};
use super::worker;
use crate::builtins::BoxFuture;
use crate::config::CodeMode;
use futures_util::StreamExt;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// How long past the program's own deadline the hub waits before it kills the worker (the
/// worker stops itself at the deadline, with a clearer message).
const GRACE: Duration = Duration::from_millis(500);
/// Lines from a worker up to this size are parsed on the runtime; longer ones off it.
pub const PARSE_HERE: usize = 64 << 10;
/// Bytes of the worker's stderr kept, to say why it died.
const STDERR_KEPT: usize = 8 << 10;
/// Programs running at once in one hub: each is a process with up to `memory` of its own,
/// so a client starting many cannot take the machine.
pub const MAX_RUNNING: usize = 8;

static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A running program's place among [`MAX_RUNNING`], given back when dropped.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        use std::sync::atomic::Ordering::SeqCst;
        let taken = RUNNING.fetch_update(SeqCst, SeqCst, |n| (n < MAX_RUNNING).then_some(n + 1));
        taken.ok().map(|_| Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// What a program reaches through the hub: the calls it asks for, and its session's kept
/// values.
pub trait Host: Send + Sync {
    /// One tool call, through the whole pipeline; its value or error.
    fn call(&self, request: CallRequest) -> BoxFuture<'_, Answer>;
    /// `keep(name, value)`; `size`: the value's size as the worker sent it, in bytes.
    fn keep(&self, name: String, value: Value, size: usize) -> Answer;
    fn kept(&self, name: &str) -> Answer;
    /// `done` tool calls have finished.
    fn progress(&self, done: usize);
}

/// How a program ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Ran {
    pub value: Value,
    pub output: String,
    pub error: Option<String>,
    /// Tool calls it made.
    pub calls: usize,
    /// `Err(why)` when the worker ran without the kernel's confinement.
    pub confined: Result<(), String>,
    pub duration: Duration,
}

/// Why a worker could not run a program.
#[derive(Debug, thiserror::Error)]
enum WorkerError {
    #[error("could not start the code worker: {0}")]
    Start(String),
    /// The worker ended or misbehaved; the text says how, naming the limit it hit.
    #[error("{0}")]
    Ended(String),
}

/// A running worker.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: tokio::task::JoinHandle<String>,
    confined: Result<(), String>,
    /// Its memory limit, bytes (for the message when it runs out).
    memory: u64,
}

/// The files a worker must read to start: its executable and the system's shared libraries
/// (once started, it shuts itself off from those too).
fn startup_reads(exe: &Path) -> Vec<PathBuf> {
    let mut read = vec![exe.to_path_buf()];
    if let Ok(real) = exe.canonicalize()
        && real != exe
    {
        read.push(real);
    }
    for dir in [
        "/lib",
        "/lib64",
        "/usr/lib",
        "/usr/lib64",
        "/etc/ld.so.cache",
    ] {
        let p = Path::new(dir);
        if p.exists() {
            read.push(p.to_path_buf());
        }
    }
    read
}

impl Worker {
    /// Starts a worker for a program of `timeout` under `settings`' limits.
    fn start(settings: &CodeMode, timeout: Duration) -> Result<Worker, WorkerError> {
        let exe = std::env::current_exe().map_err(|e| WorkerError::Start(e.to_string()))?;
        let confined = match crate::sandbox::support() {
            crate::sandbox::Support::Missing(why) => Err(why.clone()),
            _ => Ok(()),
        };
        let limits = worker::Limits {
            memory: settings.memory,
            // Whole seconds, rounded up, plus one: the wall-clock deadline is the real limit.
            cpu: timeout.as_secs() + 2,
            confine: confined.is_ok(),
        };
        let mut worker_args = vec![SUBCOMMAND.to_string()];
        worker_args.extend(limits.args());
        let mut cmd = if confined.is_ok() {
            let rules = openpact_confine::Confinement {
                read: startup_reads(&exe),
                write: Vec::new(),
                carve: Vec::new(),
                network: openpact_confine::NetRule::Closed,
                unix: openpact_confine::UnixRule::Seccomp,
                pid_namespace: false,
            };
            let rules =
                serde_json::to_string(&rules).map_err(|e| WorkerError::Start(e.to_string()))?;
            let (wrapper, mut args) = crate::sandbox::wrapper_command()
                .map_err(|e| WorkerError::Start(format!("the sandbox wrapper: {e}")))?;
            args.push(rules);
            args.push("--".into());
            args.push(exe.to_string_lossy().into_owned());
            args.extend(worker_args);
            let mut cmd = tokio::process::Command::new(wrapper);
            cmd.args(args);
            cmd
        } else {
            let mut cmd = tokio::process::Command::new(&exe);
            cmd.args(worker_args);
            cmd
        };
        cmd.env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| WorkerError::Start(e.to_string()))?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(WorkerError::Start("its pipes were not made".into()));
        };
        let stderr = tokio::spawn(async move {
            let mut kept = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let room = STDERR_KEPT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            String::from_utf8_lossy(&kept).into_owned()
        });
        Ok(Worker {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            stderr,
            confined,
            memory: settings.memory,
        })
    }

    /// Sends the line `make` writes out (without its newline): made off the runtime, like a
    /// long line read, since answers may be megabytes.
    async fn send(
        &mut self,
        make: impl FnOnce() -> serde_json::Result<Vec<u8>> + Send + 'static,
    ) -> Result<(), WorkerError> {
        let mut line = tokio::task::spawn_blocking(make)
            .await
            .map_err(|e| WorkerError::Ended(e.to_string()))?
            .map_err(|e| WorkerError::Ended(e.to_string()))?;
        line.push(b'\n');
        if self.stdin.write_all(&line).await.is_err() {
            return Err(self.ended().await);
        }
        Ok(())
    }

    /// The worker's next line, and its length in bytes.
    async fn recv(&mut self) -> Result<(FromWorker, usize), WorkerError> {
        let mut line = Vec::new();
        let read = (&mut self.stdout)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => Err(self.ended().await),
            Ok(n) if n > MAX_LINE => Err(WorkerError::Ended(format!(
                "the program's worker sent more than {MAX_LINE} bytes at once"
            ))),
            Ok(n) if line.len() <= PARSE_HERE => parse(&line).map(|m| (m, n)),
            // The hub runs on one runtime worker (cli/entry.rs): megabytes of a program's
            // JSON parsed there would keep every other client waiting.
            Ok(n) => tokio::task::spawn_blocking(move || parse(&line).map(|m| (m, n)))
                .await
                .unwrap_or_else(|e| {
                    Err(WorkerError::Ended(format!(
                        "reading the program's worker: {e}"
                    )))
                }),
        }
    }

    /// Why the worker is gone, naming the limit it hit where that is what ended it.
    async fn ended(&mut self) -> WorkerError {
        let status = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        let stderr = match tokio::time::timeout(Duration::from_secs(1), &mut self.stderr).await {
            Ok(Ok(text)) => text,
            _ => String::new(),
        };
        WorkerError::Ended(why_ended(
            status.ok().and_then(Result::ok),
            &stderr,
            self.memory,
        ))
    }
}

/// A worker's line.
fn parse(line: &[u8]) -> Result<FromWorker, WorkerError> {
    serde_json::from_slice(line).map_err(|e| {
        WorkerError::Ended(format!("the program's worker sent an unreadable line: {e}"))
    })
}

/// The words for a worker's end.
fn why_ended(status: Option<std::process::ExitStatus>, stderr: &str, memory: u64) -> String {
    let said = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    #[cfg(unix)]
    let signal = {
        use std::os::unix::process::ExitStatusExt;
        status.and_then(|s| s.signal())
    };
    #[cfg(not(unix))]
    let signal: Option<i32> = None;
    if stderr.contains("memory allocation of") || stderr.contains("out of memory") {
        return format!(
            "the program ran out of memory: its worker may use {} MiB (openpact.codeMode.memory)",
            memory >> 20
        );
    }
    if stderr.contains("overflowed its stack") {
        return "the program nested calls or values deeper than the worker's stack allows".into();
    }
    match signal {
        Some(24) => {
            "the program used up its CPU time (the CPU-time limit follows run_code's `timeout`)"
                .into()
        }
        Some(9) => "the program's worker was killed (out of memory or time)".into(),
        Some(s) => format!("the program's worker crashed (signal {s}){}", detail(said)),
        None => match status {
            Some(s) => format!("the program's worker ended ({s}){}", detail(said)),
            None => format!("the program's worker stopped answering{}", detail(said)),
        },
    }
}

fn detail(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else {
        format!(": {said}")
    }
}

/// Runs `start` in a fresh worker; every ask goes to `host`. Never fails: a program that
/// could not run, or died, has its `error` say why.
pub async fn run(settings: &CodeMode, start: Start, host: &dyn Host) -> Ran {
    let t0 = Instant::now();
    let timeout = Duration::from_millis(start.timeout_ms);
    let mut ran = Ran {
        value: Value::Null,
        output: String::new(),
        error: None,
        calls: 0,
        confined: Ok(()),
        duration: Duration::ZERO,
    };
    let Some(_slot) = Slot::take() else {
        ran.error = Some(format!(
            "{MAX_RUNNING} programs are running in this hub already; run it again when one has finished"
        ));
        return ran;
    };
    let mut worker = match Worker::start(settings, timeout) {
        Ok(w) => w,
        Err(e) => {
            ran.error = Some(e.to_string());
            ran.confined = Err("the worker did not start".into());
            return ran;
        }
    };
    ran.confined = worker.confined.clone();
    let deadline = tokio::time::Instant::now() + timeout + GRACE;
    let ended = tokio::time::timeout_at(
        deadline,
        converse(&mut worker, settings, start, host, &mut ran),
    )
    .await;
    match ended {
        Ok(Ok(())) => {}
        Ok(Err(e)) => ran.error = Some(e.to_string()),
        Err(_) => ran.error = Some(worker::timeout_message(timeout)),
    }
    // Whatever happened, the worker does not outlive its program.
    let _ = worker.child.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(2), worker.child.wait()).await;
    ran.duration = t0.elapsed();
    ran
}

/// The exchange: the program sent, then each ask answered until it is done.
async fn converse(
    worker: &mut Worker,
    settings: &CodeMode,
    start: Start,
    host: &dyn Host,
    ran: &mut Ran,
) -> Result<(), WorkerError> {
    worker.send(move || serde_json::to_vec(&start)).await?;
    loop {
        let (message, size) = worker.recv().await?;
        let answers = match message {
            FromWorker::Done {
                value,
                output,
                error,
            } => {
                ran.value = value;
                ran.output = output;
                ran.error = error;
                return Ok(());
            }
            FromWorker::Keep { name, value } => vec![host.keep(name, value, size)],
            FromWorker::Kept { name } => vec![host.kept(&name)],
            FromWorker::Call { calls } => {
                if ran.calls + calls.len() > settings.max_calls {
                    return Err(WorkerError::Ended(format!(
                        "the program asked for more than {} tool calls (the limit is openpact.codeMode.maxCalls)",
                        settings.max_calls
                    )));
                }
                let before = ran.calls;
                ran.calls += calls.len();
                let done = std::sync::atomic::AtomicUsize::new(before);
                futures_util::stream::iter(calls)
                    .map(|c| {
                        let done = &done;
                        async move {
                            let answer = host.call(c).await;
                            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                            host.progress(n);
                            answer
                        }
                    })
                    .buffered(settings.parallel.max(1))
                    .collect::<Vec<Answer>>()
                    .await
            }
        };
        worker.send(move || answers_line(answers)).await?;
    }
}

/// The line answering an ask: written out once, and again only when it is over
/// [`MAX_LINE`], after [`fitting`] has made it fit.
fn answers_line(answers: Vec<Answer>) -> serde_json::Result<Vec<u8>> {
    let answers = Answers { answers };
    let line = serde_json::to_vec(&answers)?;
    if line.len() < MAX_LINE {
        return Ok(line);
    }
    serde_json::to_vec(&Answers {
        answers: fitting(answers.answers),
    })
}

/// Bytes of `value` as one JSON line's part.
fn json_len<T: serde::Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// `answers` as one line the worker takes: when together they are over [`MAX_LINE`], the
/// largest become an error saying so until the rest fit. Sent whole, such a line would make
/// the worker stop reading mid-line and the program end with no word of why.
fn fitting(mut answers: Vec<Answer>) -> Vec<Answer> {
    let sizes: Vec<usize> = answers.iter().map(json_len).collect();
    // `{"answers":[`, the commas, `]}` and the newline.
    let mut total = sizes.iter().sum::<usize>() + answers.len() + 16;
    if total <= MAX_LINE {
        return answers;
    }
    let mut largest: Vec<usize> = (0..answers.len()).collect();
    largest.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    for i in largest {
        if total <= MAX_LINE {
            break;
        }
        let error = Answer::Error(format!(
            "the answer is {:.1} MiB, and a program takes in at most {} MiB at once (one call's answer, or one parallel's answers together): ask for less, or for fewer calls per parallel",
            sizes[i] as f64 / f64::from(1 << 20),
            MAX_LINE >> 20
        ));
        total = total - sizes[i] + json_len(&error);
        answers[i] = error;
    }
    answers
}

#[cfg(test)]
mod tests {
    use super::{Answer, Answers, MAX_LINE, answers_line, fitting, json_len};
    use serde_json::json;

    #[test]
    fn answers_over_the_line_limit_become_errors_largest_first_until_the_rest_fit() {
        let small = Answer::Ok(json!("small"));
        let big = |mib: usize| Answer::Ok(json!("x".repeat(mib << 20)));
        let fits = vec![small.clone(), big(10), big(10)];
        assert_eq!(fitting(fits.clone()), fits);

        let got = fitting(vec![big(10), small.clone(), big(12), big(10), big(9)]);
        let line = json_len(&Answers {
            answers: got.clone(),
        }) + 1;
        assert!(line <= MAX_LINE, "{line}");
        let Answer::Error(why) = &got[2] else {
            panic!("the largest stays")
        };
        assert!(
            why.starts_with("the answer is 12.0 MiB, and a program takes in at most 32 MiB"),
            "{why}"
        );
        assert_eq!(got[1], small);
        let errors = got.iter().filter(|a| matches!(a, Answer::Error(_))).count();
        assert_eq!(errors, 1, "only as many as needed");

        // The line sent: as written when it fits, made to fit (with its newline) when not.
        let plain = answers_line(fits.clone()).unwrap();
        assert_eq!(
            plain,
            serde_json::to_vec(&Answers { answers: fits }).unwrap()
        );
        let over = answers_line(vec![big(10), small, big(12), big(10), big(9)]).unwrap();
        assert!(over.len() < MAX_LINE, "{}", over.len());
    }
}
