//! Serving MCP over our own stdin/stdout until stdin closes or a signal arrives, then
//! finishing in-flight work briefly and stopping every child — all within about two seconds.

use crate::config::Config;
use crate::hub::{Hub, Session};
use crate::transport::stdio;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

/// How long in-flight requests may still finish after stdin closes, so that
/// `printf '…' | openpact serve` gets its answers.
const FINISH_GRACE: Duration = Duration::from_millis(1000);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not set up stdio or signal handling: {0}")]
    Io(#[from] std::io::Error),
}

/// Runs the hub behind a stdio MCP face. Returns when the client is gone.
pub async fn serve(config: &Config, state_dir: &std::path::Path) -> Result<(), ServeError> {
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sigint = signal(SignalKind::interrupt())?;
    // `openpact cache clear` asks running hubs to drop their cached results this way.
    let mut sigusr1 = signal(SignalKind::user_defined1())?;
    let stdout = stdio::stdout()?;
    let hub = Hub::start(config, state_dir);
    // Let the servers' supervisors queue their spawns before the rest of the setup: with one
    // worker they would otherwise wait for this task's next await.
    tokio::task::yield_now().await;
    let session = Session::new(hub.clone(), stdout.outgoing.clone());
    let mut stdin_closed = {
        let session = session.clone();
        stdio::read_stdin(config.hub.max_message_size, move |frame| {
            session.handle_frame(frame)
        })?
    };
    {
        let hub = hub.clone();
        tokio::spawn(async move {
            hub.settled(std::time::Duration::from_secs(120)).await;
            hub.check_rule_targets();
        });
    }
    let _status = super::status_file::publish(
        hub.clone(),
        state_dir,
        config.source.as_ref().map(|p| p.display().to_string()),
    );
    tracing::info!(
        servers = hub.upstreams().iter().filter(|u| !u.config.disabled).count(),
        config = %config.source.as_ref().map_or_else(|| "<none: empty hub>".to_string(), |p| p.display().to_string()),
        "serving MCP on stdio"
    );
    let why = loop {
        tokio::select! {
            _ = &mut stdin_closed => break "stdin closed",
            _ = sigterm.recv() => break "SIGTERM",
            _ = sigint.recv() => break "SIGINT",
            _ = sigusr1.recv() => {
                hub.policy.cache.clear();
                tracing::info!("result cache cleared (SIGUSR1)");
            }
        }
    };
    tracing::info!("shutting down ({why})");
    let deadline = tokio::time::Instant::now() + FINISH_GRACE;
    while session.in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    session.abort_all("openpact is shutting down");
    hub.shutdown().await;
    stdout.outgoing.close();
    let _ = tokio::time::timeout(Duration::from_millis(300), stdout.flushed).await;
    Ok(())
}
