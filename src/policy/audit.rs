//! The audit log: one JSON line per call in `audit.jsonl` in the state dir, written by a
//! background thread (a call never waits for the disk), rotated past a size.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub time: String,
    /// The downstream client's `clientInfo.name`.
    pub client: String,
    pub method: String,
    /// `server:tool`, `server:prompt` or `server:<uri>`.
    pub target: String,
    /// allow / deny.
    pub decision: String,
    /// rule / remembered / prompt / default / non-interactive.
    pub source: String,
    /// hit / miss / off.
    pub cache: String,
    pub duration_ms: f64,
    /// ok / isError / error / denied / rateLimited.
    pub outcome: String,
    pub result_bytes: usize,
    pub arguments_hash: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub arguments: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

pub struct AuditLog {
    tx: mpsc::Sender<Record>,
}

pub fn path_in(state_dir: &Path) -> PathBuf {
    state_dir.join("audit.jsonl")
}

impl AuditLog {
    pub fn start(state_dir: &Path, max_bytes: u64) -> AuditLog {
        let (tx, rx) = mpsc::channel::<Record>();
        let path = path_in(state_dir);
        let dir = state_dir.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("audit".into())
            .spawn(move || writer(&dir, &path, max_bytes, rx));
        if let Err(e) = spawned {
            tracing::warn!("audit log disabled: could not start its writer: {e}");
        }
        AuditLog { tx }
    }

    pub fn record(&self, r: Record) {
        let _ = self.tx.send(r);
    }
}

fn open(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

fn writer(dir: &Path, path: &Path, max_bytes: u64, rx: mpsc::Receiver<Record>) {
    use std::os::unix::fs::MetadataExt;
    let mut warned = false;
    // Kept open between batches; reopened when the file was rotated (by us or by another
    // openpact process), which the inode tells.
    let mut file: Option<(std::fs::File, u64)> = None;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let result = (|| -> std::io::Result<()> {
            let current = std::fs::metadata(path).ok();
            if current.as_ref().is_some_and(|m| m.len() >= max_bytes) {
                // Keep one previous generation; older history goes.
                std::fs::rename(path, path.with_extension("jsonl.1"))?;
                file = None;
            } else if file.as_ref().map(|(_, ino)| *ino) != current.as_ref().map(MetadataExt::ino) {
                file = None;
            }
            let (f, _) = match &mut file {
                Some(open) => open,
                None => {
                    crate::state::ensure_dir(dir)?;
                    let f = open(path)?;
                    let ino = f.metadata()?.ino();
                    file.insert((f, ino))
                }
            };
            let mut buf = Vec::with_capacity(batch.len() * 256);
            for r in &batch {
                serde_json::to_writer(&mut buf, r)?;
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
