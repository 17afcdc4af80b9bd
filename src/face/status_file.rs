//! The live status file of a running `openpact serve`: `serve-<pid>.json` in the state dir,
//! rewritten (atomically) whenever a server changes state, removed at exit. `openpact servers`
//! reads it to show restarts and errors of the hub an editor is using right now.

use crate::hub::{Hub, HubStatus, status::rfc3339};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

pub fn path_for(state_dir: &Path, pid: u32) -> PathBuf {
    state_dir.join(format!("serve-{pid}.json"))
}

/// Keeps the status file current until the returned guard is dropped.
/// `socket`: where a shared hub (`serve --shared`) takes its windows. The dashboard's
/// address is the policy desk's, once a face serves it.
pub fn publish(
    hub: Arc<Hub>,
    state_dir: &Path,
    config: Option<String>,
    socket: Option<String>,
) -> StatusFile {
    let path = path_for(state_dir, std::process::id());
    let started_at = rfc3339(SystemTime::now());
    let task_path = path.clone();
    let closed = Arc::new(Mutex::new(false));
    let task_closed = closed.clone();
    let task = tokio::spawn(async move {
        let mut changes = hub.watch_changes();
        let mut dashboard = hub.policy().desk.place_changes();
        // The same cache across reloads (its size bound needs a restart).
        let cache = hub.policy().cache.clone();
        loop {
            let status = HubStatus {
                pid: std::process::id(),
                config: config.clone(),
                started_at: started_at.clone(),
                updated_at: rfc3339(SystemTime::now()),
                servers: hub.status(),
                cache: Some(cache.stats().await),
                reload: hub.last_reload(),
                socket: socket.clone(),
                ui: hub.policy().desk.place(),
            };
            match serde_json::to_vec_pretty(&status) {
                Ok(bytes) => {
                    // File I/O off the runtime's workers, which are busy starting servers.
                    let path = task_path.clone();
                    let closed = task_closed.clone();
                    let written = tokio::task::spawn_blocking(move || {
                        // Aborting the task does not stop a write under way: the guard's
                        // removal and a write take turns, and none comes after the removal.
                        let closed = closed.lock().unwrap_or_else(PoisonError::into_inner);
                        if *closed {
                            return Ok(());
                        }
                        crate::state::write_volatile(&path, &bytes)
                    })
                    .await;
                    if let Ok(Err(e)) = written {
                        tracing::debug!(path = %task_path.display(), "could not write the status file: {e}");
                    }
                }
                Err(e) => tracing::debug!("could not encode the status: {e}"),
            }
            // At most one write per 100 ms: a burst of changes (a restart is several, calls
            // under load many) is one write, and the first change after a quiet spell is
            // written at once, so `cache stats` right after a call counts it.
            tokio::time::sleep(Duration::from_millis(100)).await;
            // Rewritten on every change of a server or of the cache counters, and every few
            // seconds (entries expire without a word).
            tokio::select! {
                changed = changes.changed() => if changed.is_err() {
                    return;
                },
                () = cache.counted() => {}
                changed = dashboard.changed() => if changed.is_err() {
                    return;
                },
                () = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            changes.borrow_and_update();
        }
    });
    StatusFile { path, task, closed }
}

pub struct StatusFile {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
    /// Set when the file is removed, under the lock each write holds.
    closed: Arc<Mutex<bool>>,
}

impl Drop for StatusFile {
    fn drop(&mut self) {
        self.task.abort();
        let mut closed = self.closed.lock().unwrap_or_else(PoisonError::into_inner);
        *closed = true;
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The status files of `serve` processes that are still running; stale ones are removed.
pub fn live(state_dir: &Path) -> Vec<HubStatus> {
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("serve-")
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A pid another user's process has now is as stale as one no process has.
        if crate::platform::liveness(pid) != crate::platform::Liveness::Running {
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        if let Ok(status) = std::fs::read(entry.path())
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<HubStatus>(&b).map_err(|e| e.to_string()))
        {
            out.push(status);
        }
    }
    out.sort_by_key(|s| s.pid);
    out
}
