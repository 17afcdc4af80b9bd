//! OAuth 2.1 for remote servers: discovery, client registration, the PKCE login through a
//! loopback callback, refresh, and the token store (OS keyring, else a 0600 file).
//!
//! A leaf used from above: the remote transport asks a [`Credentials`] for the
//! `Authorization` header and reports 401/403 challenges to it; the CLI's `auth` commands
//! and the hub drive logins.

mod browser;
mod callback;
mod challenge;
mod discovery;
mod flow;
pub(crate) mod http;
mod probe;
mod register;
mod server;
mod store;

pub use browser::Opener;
pub use probe::probe;
pub use server::{AuthStatus, ServerAuth, describe, scope_list};
pub use store::TokenStore;
// What the fuzz targets (tests/fuzz) and tests/auth.rs drive directly.
#[cfg(feature = "internals")]
pub use {
    challenge::Challenge,
    discovery::{AuthServer, canonical_resource},
    probe::Probe,
    register::{AuthMethod, METADATA_URL_VAR},
};

/// The parsers of what servers and browsers send, for the fuzz targets in `tests/fuzz`.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod parsers {
    pub use super::callback::{Expect, Verdict, verdict};
    pub use super::discovery::{
        ResourceMetadata, auth_server, metadata_urls, resource_matches, resource_metadata,
        server_metadata_urls,
    };
    pub use super::flow::{RefreshError, refresh_with};
    pub use super::register::registered;
    pub use super::store::StoredTokens;
}

use std::future::Future;
use std::pin::Pin;

/// Why a remote server's credentials could not be had.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuthError {
    /// No usable token, and getting one needs the user (a browser login).
    #[error("server '{server}' needs a login: {hint}")]
    NeedsLogin { server: String, hint: String },
    /// The authorization server or the flow failed; the text says where and why.
    #[error("server '{server}': {reason}")]
    Failed { server: String, reason: String },
}

/// A boxed future, so [`Credentials`] stays object safe without an extra crate.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a remote transport needs from whoever holds one server's credentials.
pub trait Credentials: Send + Sync + 'static {
    /// The `Authorization` header value for the next request (`Bearer …`), if any.
    fn authorization(&self) -> Option<String>;

    /// The server answered `status` (401, or 403 with `insufficient_scope`) carrying this
    /// `WWW-Authenticate` value. Resolves once fresh credentials are in place, after which
    /// the transport retries the request (a bounded number of times), or with an error that
    /// says what the user must do.
    fn challenge<'a>(
        &'a self,
        status: u16,
        www_authenticate: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), AuthError>>;
}
