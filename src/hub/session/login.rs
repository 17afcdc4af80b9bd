//! Logging in from where the user is: a call for a remote server that waits for a login, from
//! a client that can open URLs (URL-mode elicitation, 2025-11-25), runs the OAuth login with
//! that client — and only that one — asked to open the authorization URL, then proceeds once
//! the server is connected. Other clients keep getting the "how to log in" error. The
//! credentials and the wait for the server are the hub's (`hub/login.rs`).

use super::{Session, lock};
use crate::auth::{self, AuthError, Opener, ServerAuth};
use crate::config::Transport;
use crate::hub::{NameKind, Named, Route, RouteError};
use crate::jsonrpc;
use crate::upstream::{State, Upstream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::sync::oneshot;

/// Why a call could not log in to its server (the call is answered with it).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    #[error("server '{0}' has no OAuth login")]
    NoLogin(String),
    #[error("server '{0}' is not a remote server")]
    NotRemote(String),
    #[error("server '{server}': {why}")]
    Probe { server: String, why: String },
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(
        "the login to server '{0}' was declined; to log in from a terminal instead, run `openpact auth login {0}`"
    )]
    Declined(String),
    #[error("server '{server}' is {state} after the login")]
    NotConnected { server: String, state: String },
}

/// Why a name found no server to call: routing's answer, or a login that did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotRouted {
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    Login(#[from] LoginError),
}

impl Session {
    /// Routes a `tools/call` / `prompts/get` name; when its server waits for a login and this
    /// client can open URLs, logs in through it first.
    pub(super) async fn route_or_login(
        self: &Arc<Self>,
        kind: NameKind,
        name: &str,
    ) -> Result<(Route, Arc<Named>), NotRouted> {
        let hub = &self.hub;
        let e = match hub.route_name(self.view(), kind, name).await {
            Ok(found) => return Ok(found),
            Err(e) => e,
        };
        let up = match &e {
            RouteError::ServerDown { server, .. } if self.can_open_urls() => hub
                .upstreams()
                .iter()
                .find(|u| u.name() == server.as_str())
                .filter(|u| matches!(u.snapshot().state, State::NeedsLogin(_)))
                .filter(|u| hub.seat(u.index).is_some())
                .cloned(),
            _ => None,
        };
        let Some(up) = up else {
            return Err(e.into());
        };
        if let Err(why) = self.login_through(&up).await {
            tracing::warn!(server = %up.name(), "{why}");
            return Err(why.into());
        }
        Ok(hub.route_name(self.view(), kind, name).await?)
    }

    /// Logs in to `up` with this client asked to open the URL, then waits (a while) for the
    /// server to connect.
    async fn login_through(&self, up: &Arc<Upstream>) -> Result<(), LoginError> {
        let Some(seat) = self.hub.seat(up.index) else {
            return Err(LoginError::NoLogin(up.name().to_string()));
        };
        let seen = seat.auth().generation();
        let turn = seat.turn.lock().await;
        // Someone else's login (another client's, `openpact auth login`) may have finished
        // while this call waited for its turn.
        if matches!(up.snapshot().state, State::NeedsLogin(_)) && seat.auth().generation() == seen {
            self.elicited_login(up, seat.auth()).await?;
        }
        drop(turn);
        self.hub.reconnect(up).await;
        match up.snapshot().state {
            State::Ready => Ok(()),
            _ => Err(LoginError::NotConnected {
                server: up.name().to_string(),
                state: up.describe_state(),
            }),
        }
    }

    /// The OAuth login of `up`, its authorization URL sent to this client as a URL
    /// elicitation; `notifications/elicitation/complete` follows a successful login.
    async fn elicited_login(&self, up: &Upstream, auth: &ServerAuth) -> Result<(), LoginError> {
        let name = up.name();
        let Transport::Http { url, headers, .. } = &up.config().transport else {
            return Err(LoginError::NotRemote(name.to_string()));
        };
        let probe = auth::probe(url, headers)
            .await
            .map_err(|why| LoginError::Probe {
                server: name.to_string(),
                why,
            })?;
        if (200..300).contains(&probe.status) {
            // It lets us in now (a login happened elsewhere): reconnecting is enough.
            return Ok(());
        }
        let (tx, rx) = oneshot::channel::<String>();
        let tx = Mutex::new(Some(tx));
        let opener = Opener::Notify(Arc::new(move |url: &str| {
            if let Some(tx) = lock(&tx).take() {
                let _ = tx.send(url.to_string());
            }
        }));
        let elicitation_id = format!(
            "openpact-login-{}-{}",
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros()),
            self.hub.next_token.fetch_add(1, Ordering::Relaxed)
        );
        let login = auth.login(probe.www_authenticate.as_deref(), &[], &opener);
        let consent = async {
            let Ok(url) = rx.await else {
                // The login ended before it had a URL; its own outcome says why.
                return std::future::pending().await;
            };
            let message = format!(
                "Server '{name}' needs you to log in. Open this page to authorize openpact; your request continues once you have."
            );
            if self.open_url(&elicitation_id, &message, &url).await {
                std::future::pending().await
            }
        };
        tokio::select! {
            done = login => {
                done?;
            }
            () = consent => {
                return Err(LoginError::Declined(name.to_string()));
            }
        }
        let params = format!("{{\"elicitationId\":{}}}", jsonrpc::quote(&elicitation_id));
        self.send_unprompted(jsonrpc::notification(
            "notifications/elicitation/complete",
            Some(&params),
        ));
        tracing::info!(server = %name, "logged in through the client");
        Ok(())
    }
}
