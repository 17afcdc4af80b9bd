//! The hub's half of logging in from where the user is: each remote server's credentials
//! (its seat, one login at a time), and waiting for a server to connect once logged in. The
//! session's half — which call waits for a login, and asking its client to open the URL — is
//! `session/login.rs`.

use super::Hub;
use crate::auth::ServerAuth;
use crate::upstream::{State, Upstream};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Once logged in, how long the call waits for its server to connect and list its tools.
const CONNECT_WAIT: Duration = Duration::from_secs(30);

/// One remote server's credentials as the hub drives logins for it.
pub(super) struct LoginSeat {
    auth: ServerAuth,
    /// One elicited login per server at a time; later callers reuse its outcome.
    pub(super) turn: tokio::sync::Mutex<()>,
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

impl Hub {
    /// Server `i`'s login seat; `None` for a server without an OAuth login.
    pub(super) fn seat(&self, i: usize) -> Option<Arc<LoginSeat>> {
        super::read(&self.logins).get(i).cloned().flatten()
    }

    /// Reconnects `up` after a login and waits (a while) until it is ready and in the
    /// catalogue, or has failed again.
    pub(super) async fn reconnect(&self, up: &Upstream) {
        up.retry_now();
        let connected = || match up.snapshot().state {
            State::Ready => self.rebuilt.load(Ordering::SeqCst) >= self.seq.load(Ordering::SeqCst),
            State::NeedsLogin(_) | State::Failed(_) | State::Stopped => true,
            _ => false,
        };
        self.wait_until(CONNECT_WAIT, connected).await;
    }
}
