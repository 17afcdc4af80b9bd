//! The audit log: one JSON line per call in `audit.jsonl` in the state dir, written by a
//! background thread (a call never waits for the disk), rotated past a size.
//!
//! The thread gathers records for a few milliseconds before writing, so a busy hub wakes it
//! about a hundred times a second rather than once per call; [`AuditLog::flush`] (called on
//! shutdown) writes whatever is waiting at once.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub time: String,
    // What every call of a session or a tool repeats is shared, and the fixed vocabularies
    // are `Cow`s, so that filling a record in costs no allocation: they are freed on the
    // writer's thread, and glibc makes such frees expensive for both threads.
    /// The downstream client's `clientInfo.name`.
    pub client: Arc<str>,
    pub method: Cow<'static, str>,
    /// `server:tool`, `server:prompt` or `server:<uri>`.
    pub target: Arc<str>,
    /// allow / deny.
    pub decision: Cow<'static, str>,
    /// rule / remembered / prompt / default / non-interactive / flows guard.
    pub source: Cow<'static, str>,
    /// hit / miss / off.
    pub cache: Cow<'static, str>,
    pub duration_ms: f64,
    /// ok / isError / error / denied / rateLimited.
    pub outcome: Cow<'static, str>,
    pub result_bytes: usize,
    pub arguments_hash: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub arguments: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// The code-mode program this call was made by (on its inner calls), or that this
    /// record is of (on the program's own record).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub program: Option<Arc<str>>,
    /// The task (MCP Tasks) this call ran as.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub task: Option<Arc<str>>,
    /// On a program's own record: `sha256:` of its code, and the tool calls it made.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub code_hash: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub calls: Option<usize>,
    /// The session's earlier calls that made the data-flow guard decide this one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub guard: Option<super::flows::Trigger>,
    /// The canonical arguments, when `arguments_hash` is still to be computed, and the
    /// moment `time` stands for, when still to be written out: the writer thread does both,
    /// so a call waits for neither SHA-256 nor date formatting.
    #[serde(skip)]
    pub hash_later: Option<Arc<str>>,
    #[serde(skip)]
    pub at: Option<std::time::SystemTime>,
}

/// How long the writer gathers records after the first one arrives.
const GATHER: Duration = Duration::from_millis(10);
/// How long [`AuditLog::flush`] waits for the disk.
const FLUSH_LIMIT: Duration = Duration::from_secs(2);

pub struct AuditLog {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes the writer: the first record of a batch, a flush, or the log's end.
    wake: Condvar,
    /// Tells flushers that a batch reached the file.
    written: Condvar,
}

#[derive(Default)]
struct Queue {
    records: Vec<Record>,
    /// The writer has been woken for the records waiting; later ones need not wake it again.
    woken: bool,
    /// Flush tickets handed out, and the last one the writer has honoured.
    flush_asked: u64,
    flush_done: u64,
    closed: bool,
}

pub fn path_in(state_dir: &Path) -> PathBuf {
    state_dir.join("audit.jsonl")
}

fn lock(m: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl AuditLog {
    pub fn start(state_dir: &Path, max_bytes: u64) -> AuditLog {
        let shared = Arc::new(Shared::default());
        let path = path_in(state_dir);
        let dir = state_dir.to_path_buf();
        let theirs = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("audit".into())
            .spawn(move || writer(&dir, &path, max_bytes, &theirs));
        if let Err(e) = spawned {
            tracing::warn!("audit log disabled: could not start its writer: {e}");
            lock(&shared.queue).closed = true;
        }
        AuditLog { shared }
    }

    pub fn record(&self, r: Record) {
        let mut q = lock(&self.shared.queue);
        if q.closed {
            return;
        }
        q.records.push(r);
        if !q.woken {
            q.woken = true;
            self.shared.wake.notify_one();
        }
    }

    /// Writes every record handed in so far before returning (or after [`FLUSH_LIMIT`]).
    pub fn flush(&self) {
        let mut q = lock(&self.shared.queue);
        if q.closed {
            return;
        }
        q.flush_asked += 1;
        let ticket = q.flush_asked;
        self.shared.wake.notify_one();
        let deadline = Instant::now() + FLUSH_LIMIT;
        while q.flush_done < ticket && !q.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = self
                .shared
                .written
                .wait_timeout(q, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.flush();
        lock(&self.shared.queue).closed = true;
        self.shared.wake.notify_one();
    }
}

/// Waits for records, gathers them for [`GATHER`] (unless a flush is asked for), and takes
/// them with the flush ticket they satisfy. `None` once the log is closed and drained.
fn next_batch(shared: &Shared) -> Option<(Vec<Record>, u64)> {
    let mut q = lock(&shared.queue);
    while q.records.is_empty() && q.flush_asked == q.flush_done && !q.closed {
        q = shared.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
    }
    let deadline = Instant::now() + GATHER;
    while q.flush_asked == q.flush_done && !q.closed {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        q = shared
            .wake
            .wait_timeout(q, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
    if q.closed && q.records.is_empty() {
        return None;
    }
    q.woken = false;
    Some((std::mem::take(&mut q.records), q.flush_asked))
}

fn open(path: &Path) -> std::io::Result<std::fs::File> {
    crate::platform::create_mode(std::fs::OpenOptions::new().create(true).append(true), 0o600)
        .open(path)
}

fn writer(dir: &Path, path: &Path, max_bytes: u64, shared: &Shared) {
    use crate::platform::file_id;
    let mut warned = false;
    // Kept open between batches; reopened when the file was rotated (by us or by another
    // openpact process), which the file's identity (its inode) tells.
    let mut file: Option<(std::fs::File, u64)> = None;
    while let Some((mut batch, ticket)) = next_batch(shared) {
        let result = (|| -> std::io::Result<()> {
            if batch.is_empty() {
                return Ok(());
            }
            let current = std::fs::metadata(path).ok();
            if current.as_ref().is_some_and(|m| m.len() >= max_bytes) {
                // Keep one previous generation; older history goes.
                std::fs::rename(path, path.with_extension("jsonl.1"))?;
                file = None;
            } else if file.as_ref().map(|(_, ino)| *ino) != current.as_ref().map(file_id) {
                file = None;
            }
            let (f, _) = match &mut file {
                Some(open) => open,
                None => {
                    crate::state::ensure_dir(dir)?;
                    let f = open(path)?;
                    let ino = file_id(&f.metadata()?);
                    file.insert((f, ino))
                }
            };
            let mut buf = Vec::with_capacity(batch.len() * 256);
            for r in &mut batch {
                if let Some(canonical) = r.hash_later.take() {
                    r.arguments_hash = super::canonical::sha256(canonical.as_bytes());
                }
                if let Some(at) = r.at.take() {
                    r.time = crate::time::rfc3339(at);
                }
                serde_json::to_writer(&mut buf, &*r)?;
                buf.push(b'\n');
            }
            // One write per batch: with O_APPEND, lines of two processes never interleave.
            f.write_all(&buf)
        })();
        if let Err(e) = result {
            file = None;
            if !warned {
                tracing::warn!(path = %path.display(), "cannot write the audit log: {e}");
                warned = true;
            }
        }
        let mut q = lock(&shared.queue);
        q.flush_done = q.flush_done.max(ticket);
        shared.written.notify_all();
    }
}

/// The last `n` records (of the current and the previous file).
pub fn tail(state_dir: &Path, n: usize) -> std::io::Result<Vec<Record>> {
    let path = path_in(state_dir);
    let mut lines: Vec<String> = Vec::new();
    for p in [path.with_extension("jsonl.1"), path] {
        match std::fs::read_to_string(&p) {
            Ok(text) => lines.extend(text.lines().map(str::to_string)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let start = lines.len().saturating_sub(n);
    Ok(lines[start..]
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: usize) -> Record {
        Record {
            method: "tools/call".into(),
            target: format!("s:t{n}").into(),
            outcome: "ok".into(),
            ..Record::default()
        }
    }

    #[test]
    fn flush_writes_every_record_handed_in_and_drop_loses_none() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::start(dir.path(), 1 << 20);
        for n in 0..500 {
            log.record(record(n));
        }
        log.flush();
        let got = tail(dir.path(), 1000).unwrap();
        assert_eq!(got.len(), 500, "every record is on disk once flush returns");
        assert_eq!(&*got[499].target, "s:t499");
        log.record(record(500));
        drop(log);
        assert_eq!(tail(dir.path(), 1000).unwrap().len(), 501);
    }

    #[test]
    fn records_reach_the_file_without_a_flush() {
        let dir = tempfile::tempdir().unwrap();
        let log = AuditLog::start(dir.path(), 1 << 20);
        log.record(record(1));
        let deadline = Instant::now() + Duration::from_secs(5);
        while tail(dir.path(), 10).unwrap().is_empty() {
            assert!(Instant::now() < deadline, "the writer never wrote");
            std::thread::sleep(Duration::from_millis(5));
        }
        let mode = crate::platform::mode(&std::fs::metadata(path_in(dir.path())).unwrap());
        assert_eq!(mode & 0o777, 0o600);
    }
}
