//! Hot reload of a serving hub: the config file is watched (its directory, so a save by
//! rename is seen), changes are debounced, and `SIGHUP` (what `openpact reload` sends) asks
//! for one too. A config with errors is never applied: the hub keeps the last good one and
//! says why, in the log and in its status (`openpact servers`, `/health`).

use crate::config::{self, Config};
use crate::hub::{Hub, NEEDS_RESTART};
use crate::platform::HubSignal;
use notify::{RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Editors write a file in several steps (truncate, write, rename): one reload after the
/// last of them.
const DEBOUNCE: Duration = Duration::from_millis(150);

/// Keeps reloading until dropped.
pub struct Reloader {
    task: tokio::task::JoinHandle<()>,
    /// Kept alive for as long as the task: dropping it stops the watch.
    _watcher: Option<notify::RecommendedWatcher>,
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts reloading `hub` from `config`'s file: on its changes when `openpact.reload` is
/// on, and on SIGHUP always (with no file, SIGHUP is logged and ignored).
pub fn start(hub: &Arc<Hub>, config: &Config) -> std::io::Result<Reloader> {
    let path = config.source.clone();
    let (tx, rx) = mpsc::unbounded_channel::<&'static str>();
    let watcher = match &path {
        Some(path) if config.hub.reload => match watch(path, tx.clone()) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(config = %path.display(), "cannot watch the config for changes ({e}); `openpact reload` or SIGHUP still reloads it");
                None
            }
        },
        _ => None,
    };
    let mut hup = crate::platform::listen(HubSignal::Reload)?;
    let sighup = tx.clone();
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            if sighup.send(HubSignal::Reload.name()).is_err() {
                return;
            }
        }
    });
    let task = tokio::spawn(run(Arc::downgrade(hub), path, rx));
    Ok(Reloader {
        task,
        _watcher: watcher,
    })
}

/// Watches the directory of `path` and reports events that touch the file itself.
fn watch(
    path: &Path,
    tx: mpsc::UnboundedSender<&'static str>,
) -> notify::Result<notify::RecommendedWatcher> {
    let absolute = std::path::absolute(path)?;
    let dir = absolute
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let name = absolute.file_name().map(ToOwned::to_owned);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if event.kind.is_access() {
            return;
        }
        if event.paths.iter().any(|p| p.file_name() == name.as_deref()) {
            let _ = tx.send("the file changed");
        }
    })?;
    watcher.watch(&dir, RecursiveMode::NonRecursive)?;
    Ok(watcher)
}

async fn run(
    hub: std::sync::Weak<Hub>,
    path: Option<PathBuf>,
    mut rx: mpsc::UnboundedReceiver<&'static str>,
) {
    while let Some(mut why) = rx.recv().await {
        let Some(path) = &path else {
            tracing::info!("{why}: no config file to reload (openpact runs without one)");
            continue;
        };
        // Settle: take every event of the burst, then read the file once.
        loop {
            match tokio::time::timeout(DEBOUNCE, rx.recv()).await {
                Ok(Some(next)) => {
                    if next == HubSignal::Reload.name() {
                        why = next;
                    }
                }
                Ok(None) => return,
                Err(_) => break,
            }
        }
        let Some(hub) = hub.upgrade() else { return };
        let loaded = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || load(&path)).await
        };
        match loaded {
            Ok(Ok(config)) => {
                for w in &config.warnings {
                    tracing::warn!("{w}");
                }
                let report = hub.reload(config).await;
                tracing::info!(config = %path.display(), "reloaded ({why}): {}", report.summary());
                for setting in &report.needs_restart {
                    tracing::warn!("{setting} changed; {NEEDS_RESTART}");
                }
            }
            Ok(Err(errors)) => {
                for line in errors.lines() {
                    tracing::error!("{line}");
                }
                tracing::error!(config = %path.display(), "reload ({why}) not applied: the config has errors; still serving the last good one");
                hub.reload_refused(&errors);
            }
            Err(e) => tracing::error!("reload failed: {e}"),
        }
    }
}

/// Reads `path` again. Errors are what keeps a reload from applying: the file cannot be
/// read or parsed, or [`Config::refusal`] says no. Unknown keys stay warnings, as when
/// `serve` starts.
fn load(path: &Path) -> Result<Config, String> {
    let config = config::load(Some(path)).map_err(|e| e.to_string())?;
    match config.refusal() {
        None => Ok(config),
        Some(why) => Err(why),
    }
}
