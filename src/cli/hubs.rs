//! The commands about the running `openpact serve` processes of the config: `servers`
//! (theirs, or freshly started ones), `reload` and `cache`.

use super::{CacheCommand, hubs_of, load, located_config, output, settle};
use crate::config::{self, Config};
use crate::hub::Hub;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `servers`: those of the running hubs; when none runs (or with `--start`), freshly
/// started ones. A config with errors still shows a running hub's.
pub(super) async fn servers(
    config: &Option<PathBuf>,
    state: &Path,
    json: bool,
    start: bool,
) -> Result<ExitCode> {
    match load(config) {
        Ok(loaded) => servers_of(&loaded, state, json, start).await,
        // A running hub serves its last good config: show it, and what is wrong now.
        Err(e) if !start => {
            let live = hubs_of(state, located_config(config).as_deref());
            if live.is_empty() {
                return Err(e);
            }
            tracing::warn!(
                "the config has errors (the running hub serves its last good one):\n{e}"
            );
            live_shown(&live, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => Err(e),
    }
}

fn live_shown(live: &[crate::hub::HubStatus], json: bool) -> Result<()> {
    if json {
        output::hubs_json(live, true)?;
    } else {
        output::live_human(live);
    }
    Ok(())
}

async fn servers_of(
    config: &Config,
    state_dir: &Path,
    json: bool,
    start: bool,
) -> Result<ExitCode> {
    if !start {
        let live = hubs_of(state_dir, config.source.as_deref());
        if !live.is_empty() {
            live_shown(&live, json)?;
            return Ok(ExitCode::SUCCESS);
        }
    }
    let started_at = crate::time::now_rfc3339();
    let hub = Hub::start(config, state_dir);
    hub.declare_client(None);
    settle(&hub).await;
    let status = hub.status();
    hub.shutdown().await;
    if json {
        let fresh = crate::hub::HubStatus {
            pid: std::process::id(),
            config: config.source.as_ref().map(|p| p.display().to_string()),
            started_at,
            updated_at: crate::time::now_rfc3339(),
            servers: status,
            cache: None,
            reload: None,
            socket: None,
            ui: None,
        };
        output::hubs_json(&[fresh], false)?;
    } else {
        output::servers_human(&status);
    }
    Ok(ExitCode::SUCCESS)
}

/// Asks the hubs serving this config to reload (SIGHUP) and waits (a little) for their word.
/// A config with errors is theirs to refuse: they say so and keep serving the last good one;
/// only with no hub to ask are the errors this command's own.
pub(super) async fn reload(config: &Option<PathBuf>, state: &Path) -> Result<ExitCode> {
    let loaded = config::load(config.as_deref());
    let source = match &loaded {
        Ok(c) => c.source.clone(),
        Err(_) => located_config(config),
    };
    if source.is_none() && loaded.is_ok() {
        output::nothing_to_reload();
        return Ok(ExitCode::SUCCESS);
    }
    let before = hubs_of(state, source.as_deref());
    if before.is_empty() {
        loaded?;
    }
    let answers = ask_reload(state, &before).await;
    output::reloaded(&answers);
    let failed = answers
        .iter()
        .any(|(_, r)| r.as_ref().is_some_and(|r| !r.applied));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// What each hub did, once asked to reload (`None`: it had not reported back within 5 s).
pub(super) async fn ask_reload<'h>(
    state: &Path,
    before: &'h [crate::hub::HubStatus],
) -> Vec<(&'h crate::hub::HubStatus, Option<crate::hub::ReloadStatus>)> {
    for h in before {
        if let Err(e) = crate::platform::send(h.pid, crate::platform::HubSignal::Reload) {
            tracing::warn!(pid = h.pid, "could not signal openpact serve: {e}");
        }
    }
    let reported = |h: &crate::hub::HubStatus| {
        let old = before
            .iter()
            .find(|b| b.pid == h.pid)
            .and_then(|b| b.reload.as_ref());
        h.reload.as_ref().filter(|r| Some(*r) != old).cloned()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut answers: Vec<(&crate::hub::HubStatus, Option<crate::hub::ReloadStatus>)>;
    loop {
        let now: Vec<_> = crate::face::status_file::live(state)
            .into_iter()
            .filter(|h| before.iter().any(|b| b.pid == h.pid))
            .collect();
        answers = before
            .iter()
            .map(|b| (b, now.iter().find(|h| h.pid == b.pid).and_then(reported)))
            .collect();
        if answers.iter().all(|(_, r)| r.is_some()) || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    answers
}

/// `ui`: a login link minted by the running hub of this config, opened in the browser when
/// `open` and there is a display to open it on. The hub takes the key from the state dir on
/// a signal, starting its dashboard first if it serves none; the link is printed only once
/// it did, so a printed link works.
pub(super) async fn ui(state: &Path, config: Option<&Path>, open: bool) -> Result<ExitCode> {
    let hubs = hubs_of(state, config);
    // One that serves the dashboard already, else any: it starts one when asked.
    let Some(pid) = hubs
        .iter()
        .find(|h| h.ui.is_some())
        .or(hubs.first())
        .map(|h| h.pid)
    else {
        anyhow::bail!(
            "no openpact hub of this config is running, so there is no dashboard to open: start \
             one (`openpact serve --http`, or an editor's `openpact connect` starts the shared \
             hub), then run `openpact ui` again"
        );
    };
    let (key, request) = crate::face::http::ask_login(state, pid)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let too_late = || {
        anyhow::anyhow!(
            "the hub (pid {pid}) did not answer the dashboard request within 5 s; its log says why"
        )
    };
    while request.exists() {
        if std::time::Instant::now() > deadline {
            let _ = std::fs::remove_file(&request);
            return Err(too_late());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A dashboard just started is named in the hub's status file a moment later.
    let url = loop {
        let url = hubs_of(state, config)
            .into_iter()
            .find(|h| h.pid == pid)
            .and_then(|h| h.ui);
        match url {
            Some(url) => break url,
            None if std::time::Instant::now() > deadline => return Err(too_late()),
            None => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    let link = format!("{url}/login?key={key}");
    output::ui_link(&link);
    if open {
        output::ui_opened(&link, open_browser(&link));
    }
    Ok(ExitCode::SUCCESS)
}

/// Starts the desktop's browser on `link`; `Err` says why not (no display, among others).
fn open_browser(link: &str) -> Result<(), String> {
    // Without a display a terminal browser might take this terminal over.
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
    if cfg!(all(unix, not(target_os = "macos"))) && !display {
        return Err("no display".into());
    }
    open::that_detached(link).map_err(|e| e.to_string())
}

/// `config`: the config file named or found (read or not): only its hubs are reached.
pub(super) fn cache(
    state: &Path,
    config: Option<&Path>,
    command: CacheCommand,
) -> Result<ExitCode> {
    let live = hubs_of(state, config);
    match command {
        CacheCommand::Stats { json } => output::cache_stats(&live, json)?,
        CacheCommand::Clear => {
            for h in &live {
                let clear = crate::platform::HubSignal::ClearCache;
                if let Err(e) = crate::platform::send(h.pid, clear) {
                    tracing::warn!(pid = h.pid, "could not signal openpact serve: {e}");
                }
            }
            output::cache_cleared(live.len());
        }
    }
    Ok(ExitCode::SUCCESS)
}
