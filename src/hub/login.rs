//! Logging in from where the user is: a call for a remote server that waits for a login, from
//! a client that can open URLs (URL-mode elicitation, 2025-11-25), runs the OAuth login with
//! that client — and only that one — asked to open the authorization URL, then proceeds once
//! the server is connected. Other clients keep getting the "how to log in" error.

use super::{Hub, NameKind, Named, Route, RouteError, Session, lock};
use crate::auth::{self, Opener, ServerAuth};
use crate::config::Transport;
use crate::jsonrpc::{self, Message};
use crate::upstream::{State, Upstream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::oneshot;

/// Once logged in, how long the call waits for its server to connect and list its tools.
const CONNECT_WAIT: Duration = Duration::from_secs(30);

/// One remote server's credentials as the hub drives logins for it.
pub(super) struct LoginSeat {
    auth: ServerAuth,
    /// One elicited login per server at a time; later callers reuse its outcome.
    turn: tokio::sync::Mutex<()>,
}

impl LoginSeat {
    pub(super) fn auth(&self) -> &ServerAuth {
        &self.auth
    }

    pub(super) fn new(auth: ServerAuth) -> LoginSeat {
        LoginSeat {
            auth,
            turn: tokio::sync::Mutex::new(()),
        }
    }
}

impl Session {
    /// Routes a `tools/call` / `prompts/get` name; when its server waits for a login and this
    /// client can open URLs, logs in through it first. `Err` is the line to answer with.
    pub(super) async fn route_or_login(
        self: &Arc<Self>,
        m: &Message,
        kind: NameKind,
        name: &str,
    ) -> Result<(Route, Arc<Named>), String> {
        let hub = self.hub.clone();
        let error = |e: RouteError| jsonrpc::error(m.id(), e.code(), &e.to_string(), None);
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
            return Err(error(e));
        };
        if let Err(why) = hub.login_through(self, &up).await {
            tracing::warn!(server = %up.name(), "{why}");
            return Err(if m.method() == "tools/call" {
                // A tool error the model can read and relay, as for a refusal.
                crate::builtins::ToolOutput::error(why).answer(m.id())
            } else {
                jsonrpc::error(m.id(), crate::upstream::code::UNAVAILABLE, &why, None)
            });
        }
        hub.route_name(self.view(), kind, name).await.map_err(error)
    }
}

impl Hub {
    fn seat(&self, i: usize) -> Option<Arc<LoginSeat>> {
        super::read(&self.logins).get(i).cloned().flatten()
    }

    /// Logs in to `up` with `session` asked to open the URL, then waits (a while) for the
    /// server to connect. `Err` says why the call cannot proceed.
    async fn login_through(&self, session: &Session, up: &Arc<Upstream>) -> Result<(), String> {
        let Some(seat) = self.seat(up.index) else {
            return Err(format!("server '{}' has no OAuth login", up.name()));
        };
        let seen = seat.auth.generation();
        let turn = seat.turn.lock().await;
        // Someone else's login (another client's, `openpact auth login`) may have finished
        // while this call waited for its turn.
        if matches!(up.snapshot().state, State::NeedsLogin(_)) && seat.auth.generation() == seen {
            self.elicited_login(session, up, &seat.auth).await?;
        }
        drop(turn);
        up.retry_now();
        let connected = || match up.snapshot().state {
            State::Ready => self.rebuilt.load(Ordering::SeqCst) >= self.seq.load(Ordering::SeqCst),
            State::NeedsLogin(_) | State::Failed(_) | State::Stopped => true,
            _ => false,
        };
        self.wait_until(CONNECT_WAIT, connected).await;
        match up.snapshot().state {
            State::Ready => Ok(()),
            _ => Err(format!(
                "server '{}' is {} after the login",
                up.name(),
                up.describe_state()
            )),
        }
    }

    /// The OAuth login of `up`, its authorization URL sent to `session` as a URL elicitation;
    /// `notifications/elicitation/complete` follows a successful login.
    async fn elicited_login(
        &self,
        session: &Session,
        up: &Upstream,
        auth: &ServerAuth,
    ) -> Result<(), String> {
        let name = up.name();
        let Transport::Http { url, headers, .. } = &up.config().transport else {
            return Err(format!("server '{name}' is not a remote server"));
        };
        let probe = auth::probe(url, headers)
            .await
            .map_err(|e| format!("server '{name}': {e}"))?;
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
            self.next_token.fetch_add(1, Ordering::Relaxed)
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
            if session.open_url(&elicitation_id, &message, &url).await {
                std::future::pending().await
            }
        };
        tokio::select! {
            done = login => {
                done.map_err(|e| e.to_string())?;
            }
            () = consent => {
                return Err(format!(
                    "the login to server '{name}' was declined; to log in from a terminal instead, run `openpact auth login {name}`"
                ));
            }
        }
        let params = format!("{{\"elicitationId\":{}}}", jsonrpc::quote(&elicitation_id));
        session.send_unprompted(jsonrpc::notification(
            "notifications/elicitation/complete",
            Some(&params),
        ));
        tracing::info!(server = %name, "logged in through the client");
        Ok(())
    }
}
