//! `openpact auth login | logout | status`: logging in to remote servers from the terminal.
//! Output goes through [`super::output`]'s `out!`; token values are never printed, only
//! scopes, expiry and where the tokens are kept.

use super::output::out;
use crate::auth::{self, AuthStatus, Opener, ServerAuth, TokenStore};
use crate::config::{Config, OAuthSettings, Transport};
use anyhow::{Result, bail};
use clap::Subcommand;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Log in to a remote server: opens the browser (and prints the URL to stderr).
    /// Headless: OPENPACT_OAUTH_BROWSER=none only prints; any other value is a command that
    /// gets the URL as its last argument.
    Login {
        /// The server's name in the config.
        server: String,
        /// Scopes to ask for on top of what the server asks for (repeatable, or space-separated).
        #[arg(long = "scope", value_name = "SCOPES")]
        scopes: Vec<String>,
    },
    /// Delete a remote server's stored tokens.
    Logout {
        /// The server's name in the config.
        server: String,
    },
    /// Per remote server: logged in or not, scopes, expiry, and where tokens are stored.
    Status {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one `auth` command.
pub async fn run(config: &Config, state: &Path, command: AuthCommand) -> Result<ExitCode> {
    let store = Arc::new(TokenStore::open(state));
    match command {
        AuthCommand::Login { server, scopes } => login(config, store, &server, &scopes).await,
        AuthCommand::Logout { server } => {
            let (url, _, oauth) = remote(config, &server)?;
            let auth = ServerAuth::new(&server, url, oauth, store.clone(), false);
            if auth.logout()? {
                out!(
                    "Logged out of '{server}': its tokens are deleted from the {}.",
                    store.describe()
                );
            } else {
                out!("'{server}' had no stored login.");
            }
            Ok(ExitCode::SUCCESS)
        }
        AuthCommand::Status { json } => {
            let mut asking = tokio::task::JoinSet::new();
            for (i, s) in config.servers.iter().enumerate() {
                let Transport::Http {
                    url,
                    oauth,
                    headers,
                    ..
                } = &s.transport
                else {
                    continue;
                };
                let mut status = auth::describe(&s.name, url, oauth, store.clone());
                let (url, headers) = (url.clone(), headers.clone());
                asking.spawn(async move {
                    if !status.logged_in {
                        status.login_required = login_required(&url, &headers).await;
                    }
                    (i, status)
                });
            }
            let mut all: Vec<(usize, AuthStatus)> = asking.join_all().await;
            all.sort_by_key(|(i, _)| *i);
            let all: Vec<AuthStatus> = all.into_iter().map(|(_, s)| s).collect();
            if json {
                out!("{}", serde_json::to_string_pretty(&all)?);
            } else if all.is_empty() {
                out!("No remote servers in the config.");
            } else {
                for s in &all {
                    out!("{}", status_line(s));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn login(
    config: &Config,
    store: Arc<TokenStore>,
    server: &str,
    scopes: &[String],
) -> Result<ExitCode> {
    let (url, headers, oauth) = remote(config, server)?;
    let probe = auth::probe(url, headers)
        .await
        .map_err(anyhow::Error::msg)?;
    if (200..300).contains(&probe.status) {
        out!("'{server}' answered without asking for a login; nothing to do.");
        return Ok(ExitCode::SUCCESS);
    }
    if !probe.wants_login() {
        tracing::debug!(
            server,
            status = probe.status,
            "no 401 challenge; discovering from the well-known URLs"
        );
    }
    let auth = ServerAuth::new(server, url, oauth, store, true);
    let status = auth
        .login(
            probe.www_authenticate.as_deref(),
            &auth::scope_list(scopes),
            &Opener::from_env(),
        )
        .await?;
    out!("Logged in to '{server}'. {}", details(&status));
    Ok(ExitCode::SUCCESS)
}

/// Whether the server at `url` wants a login, asked as a client would (a few seconds at
/// most); `None` when it could not be asked. An `Authorization` header in the config means
/// no login is needed.
async fn login_required(url: &str, headers: &[(String, String)]) -> Option<bool> {
    if headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    {
        return Some(false);
    }
    let probe = tokio::time::timeout(Duration::from_secs(5), auth::probe(url, headers));
    match probe.await {
        Ok(Ok(p)) => Some(p.wants_login()),
        Ok(Err(e)) => {
            tracing::debug!(url = %crate::config::display_url(url), "cannot ask whether a login is needed: {e}");
            None
        }
        Err(_) => None,
    }
}

/// A remote server's URL, headers and oauth settings.
type Remote<'a> = (&'a str, &'a [(String, String)], &'a OAuthSettings);

/// The URL, headers and oauth settings of remote server `name`, or a clear error.
fn remote<'a>(config: &'a Config, name: &str) -> Result<Remote<'a>> {
    let Some(server) = config.servers.iter().find(|s| s.name == name) else {
        let remotes: Vec<&str> = config
            .servers
            .iter()
            .filter(|s| matches!(s.transport, Transport::Http { .. }))
            .map(|s| s.name.as_str())
            .collect();
        bail!(
            "no server is named '{name}' in the config (remote servers: {})",
            if remotes.is_empty() {
                "none".to_string()
            } else {
                remotes.join(", ")
            }
        );
    };
    match &server.transport {
        Transport::Http {
            url,
            headers,
            oauth,
            ..
        } => Ok((url, headers, oauth)),
        Transport::Stdio { .. } => {
            bail!("'{name}' is a local (stdio) server; only remote servers (with a `url`) log in")
        }
    }
}

pub(super) fn status_line(s: &AuthStatus) -> String {
    if let Some(e) = &s.error {
        return format!("{}: cannot read the stored login: {e}", s.server);
    }
    if !s.logged_in {
        let name = &s.server;
        return match (s.expired, s.login_required) {
            (true, _) => format!("{name}: login expired (run `openpact auth login {name}`)"),
            (false, Some(true)) => {
                format!("{name}: needs a login (run `openpact auth login {name}`)")
            }
            (false, Some(false)) => format!("{name}: no login needed (it answers without one)"),
            (false, None) => format!(
                "{name}: not logged in (needed only if the server asks for one; then run `openpact auth login {name}`)"
            ),
        };
    }
    format!("{}: logged in. {}", s.server, details(s))
}

fn details(s: &AuthStatus) -> String {
    let scopes = if s.scopes.is_empty() {
        "none".to_string()
    } else {
        s.scopes.join(" ")
    };
    let expiry = match (s.expires_in_secs, &s.expires_at) {
        (Some(secs), Some(at)) if secs > 0 => format!(
            "expires in {} ({at})",
            crate::config::human_duration(Duration::from_secs(secs.unsigned_abs()))
        ),
        (Some(_), Some(at)) if s.refreshable => format!("expired at {at}, will be refreshed"),
        (Some(_), Some(at)) => format!("expired at {at}"),
        _ => "no expiry given".to_string(),
    };
    format!(
        "Scopes: {scopes}; {expiry}; tokens in the {}.",
        s.store_location
    )
}
