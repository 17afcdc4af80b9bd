//! A local server's life: start it, restart it after a crash with backoff and jitter, park
//! it as failed when it keeps crashing, and stop it when the hub does.

use super::sandboxed::RefusedHosts;
use super::{CallError, Connection, HandshakeError, Incoming, State, Upstream};
use crate::config::{RestartPolicy, Transport, human_duration};
use crate::transport::{ChildProc, ChildSpec, read_frames, spawn_writer};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::{Mutex as AsyncMutex, oneshot, watch};

/// Each step of stopping a server that failed its start (after stdin close, after SIGTERM)
/// waits at most this long.
pub const STOP_GRACE: Duration = Duration::from_millis(400);

/// When openpact itself stops, how long a server has to exit after its stdin closes before
/// SIGTERM, and after SIGTERM before SIGKILL. Short: hosts give the whole process little
/// time (Claude Code sends SIGINT, then SIGTERM 100 ms later, and a host may follow with
/// SIGKILL, which would leave servers running in their own process groups). Servers that
/// exit on EOF do so within a few milliseconds; the ones that linger (Python's
/// `mcp-server-time` does) end on SIGTERM.
const SHUTDOWN_EOF_GRACE: Duration = Duration::from_millis(50);
const SHUTDOWN_TERM_GRACE: Duration = Duration::from_millis(250);

/// A process that finished its handshake.
struct Running {
    conn: Arc<Connection>,
    proc: Arc<AsyncMutex<Option<ChildProc>>>,
    /// Fires with the reason when the process's stdout ends.
    exited: oneshot::Receiver<String>,
}

impl Upstream {
    /// Runs the server until `shutdown` turns true: start, supervise, restart, stop.
    pub async fn supervise(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let config = self.config();
        if !config.disabled && !config.unavailable.is_empty() {
            let reason = config
                .unavailable
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            self.not_started(reason);
            return;
        }
        let (spec, _proxy, refused) = match &config.transport {
            _ if config.disabled => return,
            Transport::Stdio {
                program,
                args,
                env,
                cwd,
                ..
            } => match self.launch(program, args).await {
                Ok((launch, proxy, refused)) => (self.child_spec(launch, env, cwd), proxy, refused),
                Err(reason) => {
                    self.not_started(reason);
                    return;
                }
            },
            Transport::Http { .. } => return self.supervise_remote(shutdown).await,
        };
        if self.keep_running(&spec, &refused, &mut shutdown).await == Ended::Stopped {
            return;
        }
        self.set_conn(None);
        self.update(|s| {
            if !matches!(s.state, State::Failed(_)) {
                s.state = State::Stopped;
            }
            s.pid = None;
        });
    }

    /// Publishes a server that cannot be started at all.
    fn not_started(&self, reason: String) {
        tracing::error!(server = %self.name(), "not started: {reason}");
        self.update(|s| {
            s.state = State::Failed(reason.clone());
            s.last_error = Some(reason);
        });
    }

    /// How to spawn the process: its sandboxed command line, and its stderr lines scrubbed
    /// of secrets and read for the sandbox's refusals.
    fn child_spec(
        self: &Arc<Self>,
        launch: crate::sandbox::Launch,
        env: &[(String, String)],
        cwd: &Option<std::path::PathBuf>,
    ) -> ChildSpec {
        ChildSpec {
            label: self.name.to_string(),
            inherit_env: launch.env.is_none(),
            env: launch.env.unwrap_or_else(|| env.to_vec()),
            program: launch.program,
            args: launch.args,
            cwd: cwd.clone(),
            scrub: {
                let sink = self.sink.clone();
                Some(Arc::new(move |line: &str| sink.scrub(line)))
            },
            observe: {
                let me = Arc::downgrade(self);
                Some(Arc::new(move |line: &str| {
                    if let Some(me) = me.upgrade() {
                        me.note_refusals(line);
                    }
                }))
            },
        }
    }

    /// Starts the process and starts it again after each crash, until `shutdown` or until it
    /// is parked as failed.
    async fn keep_running(
        self: &Arc<Self>,
        spec: &ChildSpec,
        refused: &RefusedHosts,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Ended {
        let mut crashes: VecDeque<Instant> = VecDeque::new();
        let mut ever_ready = false;
        loop {
            if *shutdown.borrow() {
                return Ended::Left;
            }
            let attempt = tokio::select! {
                r = self.start_once(spec) => r,
                _ = shutdown.changed() => return Ended::Left,
            };
            let reason = match attempt {
                Err(reason) if !ever_ready => {
                    self.failed_start(reason, refused);
                    // Nothing to restart: a server that never came up needs the user to act.
                    let _ = shutdown.changed().await;
                    return Ended::Left;
                }
                Err(reason) => reason,
                Ok(mut running) => {
                    ever_ready = true;
                    tokio::select! {
                        reason = &mut running.exited => {
                            let reason = reason.unwrap_or_else(|_| "stopped answering".into());
                            self.set_conn(None);
                            reason
                        }
                        _ = shutdown.changed() => {
                            self.stop(running).await;
                            return Ended::Stopped;
                        }
                    }
                }
            };
            let Some(delay) = self.after_crash(&mut crashes, reason) else {
                let _ = shutdown.changed().await;
                return Ended::Left;
            };
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = shutdown.changed() => return Ended::Left,
            }
        }
    }

    /// Publishes a first start that failed, with what the sandbox may have had to do with it.
    fn failed_start(&self, reason: String, refused: &RefusedHosts) {
        let reason = self.with_sandbox_hint(reason, refused);
        tracing::error!(server = %self.name(), "failed to start: {reason}");
        self.update(|s| {
            s.state = State::Failed(reason.clone());
            s.last_error = Some(reason);
        });
    }

    /// Counts a crash of a server that had been ready: the wait before it starts again, or
    /// None when it crashed too often within the window and is parked as failed.
    fn after_crash(&self, crashes: &mut VecDeque<Instant>, reason: String) -> Option<Duration> {
        let now = Instant::now();
        crashes.push_back(now);
        while crashes
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.restart.window)
        {
            crashes.pop_front();
        }
        if crashes.len() >= self.restart.max_crashes as usize {
            let parked = format!(
                "crashed {} times within {}; not restarting (last: {reason}). Fix the server and restart openpact",
                crashes.len(),
                human_duration(self.restart.window)
            );
            tracing::error!(server = %self.name(), "{parked}");
            self.update(|s| {
                s.state = State::Failed(parked.clone());
                s.last_error = Some(reason);
                s.pid = None;
            });
            return None;
        }
        let delay = backoff(&self.restart, crashes.len() as u32);
        tracing::warn!(server = %self.name(), "crashed: {reason}; restarting in {}", human_duration(delay));
        self.update(|s| {
            s.state = State::Restarting;
            s.last_error = Some(reason);
            s.restarts += 1;
            s.pid = None;
        });
        Some(delay)
    }

    async fn stop(&self, running: Running) {
        self.set_conn(None);
        running.conn.close_input();
        let proc = running.proc.lock().await.take();
        if let Some(proc) = proc {
            proc.terminate(SHUTDOWN_EOF_GRACE, SHUTDOWN_TERM_GRACE)
                .await;
        }
        running.conn.fail_all(&self.stop_reason());
        self.update(|s| {
            s.state = State::Stopped;
            s.pid = None;
        });
    }

    /// Spawns the process and runs the handshake. On failure the process is stopped and the
    /// reason (with the server's last stderr lines) returned.
    async fn start_once(self: &Arc<Self>, spec: &ChildSpec) -> Result<Running, String> {
        match self.spawn_and_handshake(spec).await {
            Err(StartError::ProbeDied(reason)) => {
                // `auto` asked with `server/discover` and the server ended: a handshake server
                // that takes any unknown first message badly. Start it afresh and initialize.
                tracing::info!(server = %self.name(), "ended on the server/discover probe ({reason}); starting it again with initialize");
                self.spawn_and_handshake(spec)
                    .await
                    .map_err(StartError::into_reason)
            }
            other => other.map_err(StartError::into_reason),
        }
    }

    async fn spawn_and_handshake(
        self: &Arc<Self>,
        spec: &ChildSpec,
    ) -> Result<Running, StartError> {
        let t0 = Instant::now();
        let spawned = spec
            .spawn()
            .await
            .map_err(|e| StartError::Failed(e.to_string()))?;
        let stderr = spawned.stderr.clone();
        let pid = spawned.proc.pid();
        self.update(|s| {
            s.state = if s.restarts > 0 {
                State::Restarting
            } else {
                State::Starting
            };
            s.started_at = Some(SystemTime::now());
            s.pid = pid;
            s.stderr = Some(stderr.clone());
        });
        let (out, _) = spawn_writer(spawned.stdin, self.name.to_string());
        let conn = Connection::new(self.name.to_string(), out, stderr.clone());
        let proc = Arc::new(AsyncMutex::new(Some(spawned.proc)));
        let (exit_tx, exited) = oneshot::channel();
        let me = Arc::downgrade(self);
        let this_conn = Arc::downgrade(&conn);
        let incoming = move |item: Incoming| {
            if let Some(me) = me.upgrade() {
                me.on_incoming(item, &this_conn);
            }
        };
        tokio::spawn(read_until_exit(
            conn.clone(),
            spawned.stdout,
            self.max_message_size,
            incoming,
            proc.clone(),
            exit_tx,
        ));

        match self.handshake(&conn, t0, |_| {}).await {
            Ok(()) => Ok(Running { conn, proc, exited }),
            Err(e) => {
                let mut reason = e.to_string();
                // Unwrap our own "server 'x'" prefix: the caller names the server already.
                if let HandshakeError::Call(CallError::Closed { reason: r, .. }) = &e {
                    reason = r.clone();
                } else {
                    reason.push_str(&stderr.summary(5));
                }
                conn.close_input();
                let proc = proc.lock().await.take();
                if let Some(proc) = proc {
                    proc.terminate(STOP_GRACE, STOP_GRACE).await;
                }
                Err(match e {
                    HandshakeError::ProbeDied(why) => StartError::ProbeDied(why),
                    _ => StartError::Failed(reason),
                })
            }
        }
    }
}

/// How [`Upstream::keep_running`] ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The process was stopped and published as stopped.
    Stopped,
    /// The loop was left (shutdown, or parked as failed): the supervisor publishes the end.
    Left,
}

/// Why a process could not be started.
enum StartError {
    /// The reason, with the server's last stderr lines.
    Failed(String),
    /// It ended on the `server/discover` probe.
    ProbeDied(String),
}

impl StartError {
    fn into_reason(self) -> String {
        match self {
            StartError::Failed(reason) | StartError::ProbeDied(reason) => reason,
        }
    }
}

/// Reads the server's stdout until it ends, then works out why (exit status, last stderr
/// lines), fails every in-flight request with that reason and reports it.
async fn read_until_exit(
    conn: Arc<Connection>,
    stdout: tokio::process::ChildStdout,
    max: usize,
    incoming: impl Fn(Incoming),
    proc: Arc<AsyncMutex<Option<ChildProc>>>,
    exit_tx: oneshot::Sender<String>,
) {
    let read = read_frames(stdout, max, |frame| conn.on_frame(frame, &incoming)).await;
    // Stdout closing almost always means the process is exiting; give it and its stderr a
    // moment so the report can say how it ended and what it said last.
    let status = {
        let mut guard = proc.lock().await;
        match guard.as_mut() {
            Some(p) => {
                let status = tokio::time::timeout(Duration::from_millis(500), p.wait())
                    .await
                    .ok()
                    .and_then(Result::ok);
                if status.is_some() {
                    p.kill_group();
                }
                status
            }
            None => None,
        }
    };
    conn.stderr.wait_done(Duration::from_millis(200)).await;
    let mut reason = match (status, read) {
        (Some(status), _) => format!("exited ({status})"),
        (None, Err(e)) => format!("stdout failed: {e}"),
        (None, Ok(())) => "closed its stdout".to_string(),
    };
    reason.push_str(&conn.stderr.summary(5));
    conn.fail_all(&reason);
    let _ = exit_tx.send(reason);
}

pub(super) fn backoff(policy: &RestartPolicy, crash_count: u32) -> Duration {
    let exp = policy
        .initial_backoff
        .saturating_mul(1u32 << crash_count.saturating_sub(1).min(16));
    let base = exp.min(policy.max_backoff);
    // Jitter of up to a quarter, so servers that crashed together do not restart in lockstep.
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    base + base.mul_f64(f64::from(nanos % 1000) / 4000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_bounded_jitter() {
        let p = RestartPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..Default::default()
        };
        for (n, base) in [(1, 100), (2, 200), (3, 350), (20, 350)] {
            let d = backoff(&p, n).as_millis();
            assert!(
                d >= base && d <= base + base / 4,
                "crash {n}: {d}ms not in [{base}, {}]",
                base + base / 4
            );
        }
    }
}
