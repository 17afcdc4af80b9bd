//! The outside world's way in: `openpact serve` as one MCP server on stdio, over HTTP, or
//! both from one hub (one set of children).
//!
//! Stdout belongs to the protocol when stdio is served: nothing in this module (or below it)
//! prints.

// The shared hub speaks over a unix socket: a Windows port needs named pipes there (or leaves
// shared mode out), see src/platform/mod.rs.
#[cfg(unix)]
pub mod handoff;
pub mod http;
pub mod reload;
#[cfg(unix)]
pub mod socket;
pub mod status_file;
pub mod stdio;

use crate::config::Config;
use crate::hub::Hub;
use crate::platform::{self, HubSignal};
use std::time::Duration;

/// Which faces `serve` shows.
#[derive(Debug, Clone, Default)]
pub struct Faces {
    pub stdio: bool,
    /// `Some(address)` serves HTTP; `Some(None)` on `openpact.http.address`.
    pub http: Option<Option<String>>,
    /// The profile the stdio session sees (`serve --profile`); HTTP serves every profile on
    /// an endpoint of its own whatever this says.
    pub profile: Option<String>,
    /// `Some(path)` serves windows of `openpact connect` on this Unix socket; such a hub
    /// (without stdio or HTTP) exits once no window has been connected for
    /// `openpact.shared.idleExit`.
    pub socket: Option<std::path::PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("no profile \"{0}\" in the config: {1}")]
    UnknownProfile(String, String),
    #[error("could not set up stdio or signal handling: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Http(#[from] http::HttpError),
    #[error(transparent)]
    Socket(#[from] socket::SocketError),
}

/// Returns once no client has been connected for `limit` in a row.
async fn idle_for(mut clients: tokio::sync::watch::Receiver<usize>, limit: Duration) {
    loop {
        while *clients.borrow_and_update() > 0 {
            if clients.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
        match tokio::time::timeout(limit, clients.changed()).await {
            Err(_) if *clients.borrow() == 0 => return,
            Ok(Err(_)) => return std::future::pending().await,
            _ => {}
        }
    }
}

/// Runs the hub behind `faces`. Returns on SIGTERM/SIGINT, or when the stdio client is gone
/// (stdin closed or unreadable) and no HTTP is served: an editor's stdio server lives as long
/// as its editor, while the HTTP face serves on (`serve --http </dev/null`, a background job
/// or a service manager) and only the stdio session ends.
pub async fn serve(
    config: &Config,
    state_dir: &std::path::Path,
    faces: Faces,
) -> Result<(), ServeError> {
    // Checked before anything starts: a typo must not serve the whole catalogue instead.
    let view = match &faces.profile {
        None => 0,
        Some(name) => config
            .profile_view(name)
            .map_err(|hint| ServeError::UnknownProfile(name.clone(), hint))?,
    };
    let mut signals = Signals::listen()?;
    let bound = match &faces.http {
        Some(address) => Some(http::bind(&config.hub.http, address.as_deref()).await?),
        None => None,
    };
    let listener = match &faces.socket {
        Some(path) => match socket::bind(path).await {
            Ok(bound) => Some(bound),
            // Two windows started a hub at once: the other one serves them both.
            Err(socket::SocketError::InUse(at)) if !faces.stdio && faces.http.is_none() => {
                tracing::info!(
                    "{at}: another openpact hub already serves this config; leaving it to that one"
                );
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        },
        None => None,
    };
    let stdout = if faces.stdio {
        Some(stdio::open_stdout()?)
    } else {
        None
    };
    let hub = Hub::start(config, state_dir);
    if !faces.stdio {
        // Many HTTP clients and no editor whose `initialize` speaks for them all: servers are
        // told at once everything the hub can pass on (a question then reaches the calling
        // client only if that client declared it; otherwise the server hears "no").
        hub.declare_client(Some(crate::upstream::stateless::CLIENT_CAPABILITIES));
    }
    // Let the servers' supervisors queue their spawns before the rest of the setup: with one
    // worker they would otherwise wait for this task's next await.
    tokio::task::yield_now().await;
    let stdio_face = match stdout {
        Some(stdout) => Some(stdio::start(&hub, stdout, view)?),
        None => None,
    };
    let http_face = bound.map(|b| http::start(b, hub.clone(), &config.hub.http));
    let socket_face = match (listener, &faces.socket) {
        (Some(listener), Some(path)) => Some(socket::start(listener, path.clone(), hub.clone())),
        _ => None,
    };
    // Only a hub that serves nothing but windows ends on its own.
    let idle_exit = (socket_face.is_some() && stdio_face.is_none() && http_face.is_none())
        .then_some(config.hub.shared.idle_exit);
    let mut running = Running {
        hub,
        stdio: stdio_face,
        http: http_face,
        socket: socket_face,
        dashboard: None,
        http_settings: config.hub.http.clone(),
        idle_exit,
    };
    running.hub.policy().desk.set_served();
    {
        let hub = running.hub.clone();
        tokio::spawn(async move {
            hub.settled(Duration::from_secs(120)).await;
            hub.check_rule_targets();
        });
    }
    let _reloader = reload::start(&running.hub, config)?;
    let _status = status_file::publish(
        running.hub.clone(),
        state_dir,
        config.source.as_ref().map(|p| p.display().to_string()),
        faces.socket.as_ref().map(|p| p.display().to_string()),
    );
    running.announce(config, faces.socket.as_deref());
    let why = running.until_done(&mut signals, state_dir).await;
    tracing::info!("shutting down ({why})");
    running.stop(why).await;
    Ok(())
}

/// The signals a serving hub takes.
struct Signals {
    terminate: platform::SignalStream,
    interrupt: platform::SignalStream,
    /// `openpact cache clear` asks running hubs to drop their cached results this way.
    clear_cache: platform::SignalStream,
    /// `openpact ui` asks for a dashboard login link this way.
    ui_login: platform::SignalStream,
}

impl Signals {
    fn listen() -> std::io::Result<Signals> {
        Ok(Signals {
            terminate: platform::listen(HubSignal::Terminate)?,
            interrupt: platform::listen(HubSignal::Interrupt)?,
            clear_cache: platform::listen(HubSignal::ClearCache)?,
            ui_login: platform::listen(HubSignal::UiLogin)?,
        })
    }
}

/// The hub and the faces it shows, once started.
struct Running {
    hub: std::sync::Arc<Hub>,
    stdio: Option<stdio::StdioFace>,
    http: Option<http::HttpFace>,
    socket: Option<socket::SocketFace>,
    /// The dashboard on a port of its own, once `openpact ui` asked a hub without HTTP.
    dashboard: Option<http::HttpFace>,
    http_settings: crate::config::HttpSettings,
    /// How long a hub that serves only windows waits for one before it exits.
    idle_exit: Option<Duration>,
}

impl Running {
    /// The one line at start: how many servers, which config, on which faces.
    fn announce(&self, config: &Config, socket: Option<&std::path::Path>) {
        tracing::info!(
            servers = self.hub.upstreams().iter().filter(|u| !u.config().disabled).count(),
            config = %config.source.as_ref().map_or_else(|| "<none: empty hub>".to_string(), |p| p.display().to_string()),
            "serving MCP on {}",
            [
                self.stdio.as_ref().map(|_| "stdio".to_string()),
                self.http.as_ref().map(|_| "HTTP".to_string()),
                socket.map(|p| format!("the socket {}", p.display())),
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" and ")
        );
    }

    /// Serves until a reason to stop, and says which: a signal, stdin closed with no HTTP
    /// served, or no window connected for `idle_exit`. A closed stdin beside HTTP only ends
    /// the stdio session.
    async fn until_done(
        &mut self,
        signals: &mut Signals,
        state_dir: &std::path::Path,
    ) -> &'static str {
        loop {
            let stdin_closed = async {
                match self.stdio.as_mut() {
                    Some(face) => {
                        let _ = (&mut face.stdin_closed).await;
                    }
                    None => std::future::pending().await,
                }
            };
            let idle = async {
                match (&self.socket, self.idle_exit) {
                    (Some(face), Some(limit)) => idle_for(face.clients.clone(), limit).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                () = idle => break "no window connected for openpact.shared.idleExit",
                _ = stdin_closed => {
                    if self.http.is_none() {
                        break "stdin closed";
                    }
                    tracing::info!("stdin closed: the stdio session ends; HTTP serves on until SIGTERM or SIGINT");
                    // Servers waiting for the stdio client's capabilities hear HTTP's instead
                    // (a no-op if that client declared its own already).
                    self.hub.declare_client(Some(crate::upstream::stateless::CLIENT_CAPABILITIES));
                    if let Some(face) = self.stdio.take() {
                        tokio::spawn(async move {
                            face.finish(true).await;
                            face.close().await;
                        });
                    }
                }
                _ = signals.terminate.recv() => break HubSignal::Terminate.name(),
                _ = signals.interrupt.recv() => break HubSignal::Interrupt.name(),
                _ = signals.clear_cache.recv() => {
                    self.hub.policy().cache.clear();
                    tracing::info!("result cache cleared ({})", HubSignal::ClearCache.name());
                }
                _ = signals.ui_login.recv() => self.log_in(state_dir).await,
            }
        }
    }

    /// Hands out the dashboard logins `openpact ui` asked for, starting the dashboard on a
    /// port of its own first when no HTTP face serves it.
    async fn log_in(&mut self, state_dir: &std::path::Path) {
        if self.http.is_none() && self.dashboard.is_none() && http::login_requested(state_dir) {
            match http::start_dashboard(self.hub.clone(), &self.http_settings).await {
                Ok(face) => self.dashboard = Some(face),
                Err(e) => tracing::warn!("could not start the dashboard: {e}"),
            }
        }
        for face in self.http.iter().chain(self.dashboard.iter()) {
            face.take_login_requests(state_dir);
        }
    }

    /// Stops the faces, then the hub; `why` decides whether the stdio session's last
    /// answers are waited for.
    async fn stop(self, why: &str) {
        if let Some(face) = &self.stdio {
            // A pipe's end asks for its answers (`printf … | openpact serve`); a signal asks to
            // stop now: a host sends SIGTERM 100 ms after SIGINT, and SIGKILL may follow.
            face.finish(why == "stdin closed").await;
        }
        for face in self.http.into_iter().chain(self.dashboard) {
            face.stop().await;
        }
        if let Some(face) = &self.socket {
            face.stop();
        }
        self.hub.shutdown().await;
        if let Some(face) = self.stdio {
            face.close().await;
        }
    }
}
