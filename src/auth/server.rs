//! [`ServerAuth`]: one remote server's credentials, the [`Credentials`] the remote transport
//! holds. It serves the bearer header, refreshes ahead of expiry and on 401, re-authorizes
//! with the union of scopes on 403 (a bounded number of times), picks up tokens another
//! openpact process stored, follows a server that moved to another authorization server
//! (registering there, once), and either runs the browser login (interactive) or says exactly
//! how to log in (`serve`).

use super::browser::Opener;
use super::challenge::{Challenge, split_scopes};
use super::discovery::{self, Discovered};
use super::flow::{self, Login, RefreshError};
use super::http::http;
use super::store::{StoreKind, StoredTokens, TokenStore, now_secs};
use super::{AuthError, BoxFuture, Credentials};
use crate::config::OAuthSettings;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// Re-authorizations for `insufficient_scope` before giving up…
const MAX_STEP_UPS: u32 = 3;
/// …within this window (a later 403 starts a new count).
const STEP_UP_WINDOW: Duration = Duration::from_secs(600);
/// A 401 this soon after a login means the new token does not work either.
const FRESH_LOGIN: Duration = Duration::from_secs(10);
/// How long the browser login may take (`OPENPACT_OAUTH_TIMEOUT_SECS`).
const DEFAULT_LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// One remote server's OAuth credentials. Cheap to clone (shared state).
#[derive(Clone)]
pub struct ServerAuth {
    inner: Arc<Inner>,
}

struct Inner {
    server: String,
    /// As configured.
    url: String,
    /// The canonical server URL: with the name, the key of the stored tokens.
    resource_key: String,
    settings: OAuthSettings,
    store: Arc<TokenStore>,
    interactive: bool,
    current: RwLock<Option<StoredTokens>>,
    /// Bumped whenever `current` changes, so waiters see that someone else got new tokens.
    generation: AtomicU64,
    refreshing: AtomicBool,
    flow: tokio::sync::Mutex<FlowState>,
    /// How interactive logins show the URL; None = `OPENPACT_OAUTH_BROWSER`.
    opener: std::sync::Mutex<Option<Opener>>,
    /// Told the secret values whenever new tokens arrive (the hub's redaction).
    watcher: std::sync::Mutex<Option<TokenWatcher>>,
}

/// Receives a server's secret values (see [`ServerAuth::secrets`]) each time they change.
pub type TokenWatcher = Arc<dyn Fn(Vec<String>) + Send + Sync>;

#[derive(Default)]
struct FlowState {
    /// Re-authorizations in a row that asked for no new scope.
    step_ups: u32,
    last_step_up: Option<Instant>,
    /// The scopes the last step-up asked for.
    step_up_scopes: Vec<String>,
    last_login: Option<Instant>,
    last_refresh: Option<Instant>,
    /// When a login last followed the server to another authorization server.
    last_move: Option<Instant>,
}

/// What `openpact auth status` and `config check` show for a server: never a token.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuthStatus {
    pub server: String,
    /// Without credentials (see [`crate::config::display_url`]).
    pub url: String,
    /// Tokens are stored and usable (valid, or refreshable).
    pub logged_in: bool,
    pub expired: bool,
    pub refreshable: bool,
    pub scopes: Vec<String>,
    /// RFC 3339.
    pub expires_at: Option<String>,
    pub expires_in_secs: Option<i64>,
    pub issuer: Option<String>,
    pub client_id: Option<String>,
    pub store: StoreKind,
    /// "OS keyring" or "file store (DIR)".
    pub store_location: String,
    /// The stored login could not be read.
    pub error: Option<String>,
    /// Whether the server asks for a login: known only after asking it (`auth status`
    /// does), or from an `Authorization` header in the config (then `false`).
    pub login_required: Option<bool>,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("server", &self.inner.server)
            .field("url", &self.inner.url)
            .field("interactive", &self.inner.interactive)
            .field("logged_in", &self.current().is_some())
            .finish_non_exhaustive()
    }
}

impl ServerAuth {
    /// The credentials of server `server` at `url`. `interactive`: a 401 that refreshing cannot
    /// fix runs the browser login (CLI commands with a user at hand); otherwise it ends in
    /// [`AuthError::NeedsLogin`] (`serve`). Stored tokens are loaded now.
    pub fn new(
        server: &str,
        url: &str,
        settings: &OAuthSettings,
        store: Arc<TokenStore>,
        interactive: bool,
    ) -> ServerAuth {
        let resource_key =
            discovery::canonical_resource(url).unwrap_or_else(|_| url.trim().to_string());
        let current = match store.load_tokens(server, &resource_key) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(server, "{e}");
                None
            }
        };
        ServerAuth {
            inner: Arc::new(Inner {
                server: server.to_string(),
                url: url.to_string(),
                resource_key,
                settings: settings.clone(),
                store,
                interactive,
                current: RwLock::new(current),
                generation: AtomicU64::new(0),
                refreshing: AtomicBool::new(false),
                flow: tokio::sync::Mutex::new(FlowState::default()),
                opener: std::sync::Mutex::new(None),
                watcher: std::sync::Mutex::new(None),
            }),
        }
    }

    pub fn server(&self) -> &str {
        &self.inner.server
    }

    /// Changes whenever the tokens in hand do (login, refresh, tokens another process
    /// stored): a caller that saw no usable token can tell whether someone got one since.
    pub fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// How logins started by [`Credentials::challenge`] show the authorization URL (default:
    /// from `OPENPACT_OAUTH_BROWSER`); e.g. [`Opener::Notify`] to hand it to the downstream
    /// client as a URL elicitation. (For tests/auth.rs: the hub's logins take their opener
    /// from the environment.)
    #[cfg(feature = "internals")]
    pub fn set_opener(&self, opener: Opener) {
        *self.inner.opener.lock().unwrap_or_else(|p| p.into_inner()) = Some(opener);
    }

    /// The browser login, whatever `interactive` says (the `auth login` command):
    /// `www_authenticate` is the server's challenge to an unauthenticated request, if any;
    /// `extra_scopes` are asked for on top of the usual choice.
    pub async fn login(
        &self,
        www_authenticate: Option<&str>,
        extra_scopes: &[String],
        opener: &Opener,
    ) -> Result<AuthStatus, AuthError> {
        let mut flow = self.inner.flow.lock().await;
        let challenge = Challenge::parse(www_authenticate);
        self.inner
            .login_locked(&mut flow, &challenge, extra_scopes, opener)
            .await?;
        Ok(self.status())
    }

    /// Forgets the stored tokens (the client registration stays: it holds no user grant).
    /// True when there were some.
    pub fn logout(&self) -> Result<bool, AuthError> {
        let i = &self.inner;
        let existed = i
            .store
            .delete_tokens(&i.server, &i.resource_key)
            .map_err(|e| i.failed(e))?;
        let had = i.set(None);
        Ok(existed || had)
    }

    /// The current secret values (access and refresh token, client secret), for redaction.
    pub fn secrets(&self) -> Vec<String> {
        let mut out = self.current().map(|t| t.secrets()).unwrap_or_default();
        out.extend(self.inner.settings.client_secret.clone());
        out.retain(|s| !s.is_empty());
        out
    }

    /// Calls `watcher` with the new secret values whenever tokens change from now on (a
    /// login, a refresh, tokens another process stored), so they can be redacted at once.
    pub fn watch_tokens(&self, watcher: TokenWatcher) {
        *self.inner.watcher.lock().unwrap_or_else(|p| p.into_inner()) = Some(watcher);
    }

    /// What is stored for this server now (read again from the store).
    pub fn status(&self) -> AuthStatus {
        let i = &self.inner;
        let (tokens, error) = match i.store.load_tokens(&i.server, &i.resource_key) {
            Ok(t) => (t, None),
            Err(e) => (None, Some(e)),
        };
        let now = now_secs();
        let expired = tokens
            .as_ref()
            .is_some_and(|t| t.expires_at.is_some_and(|at| at <= now));
        let refreshable = tokens.as_ref().is_some_and(|t| t.refresh_token.is_some());
        AuthStatus {
            server: i.server.clone(),
            url: crate::config::display_url(&i.url),
            logged_in: tokens.is_some() && (!expired || refreshable),
            expired,
            refreshable,
            scopes: tokens
                .as_ref()
                .map(|t| t.scopes.clone())
                .unwrap_or_default(),
            expires_at: tokens
                .as_ref()
                .and_then(|t| t.expires_at)
                .map(|at| crate::time::rfc3339(SystemTime::UNIX_EPOCH + Duration::from_secs(at))),
            expires_in_secs: tokens
                .as_ref()
                .and_then(|t| t.expires_at)
                .map(|at| at as i64 - now as i64),
            issuer: tokens.as_ref().map(|t| t.issuer.clone()),
            client_id: tokens.as_ref().map(|t| t.client_id.clone()),
            store: i.store.kind(),
            store_location: i.store.describe(),
            error,
            login_required: None,
        }
    }

    fn current(&self) -> Option<StoredTokens> {
        self.inner.current()
    }

    fn refresh_in_background(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.inner.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = self.inner.clone();
        handle.spawn(async move {
            let seen = inner.generation.load(Ordering::Acquire);
            let _flow = inner.flow.lock().await;
            let due = inner.current().is_some_and(|t| t.due_for_refresh());
            if inner.generation.load(Ordering::Acquire) == seen
                && due
                && let Err(e) = inner.refresh_locked().await
            {
                tracing::debug!(server = %inner.server, "refresh ahead of expiry failed: {e:?}");
            }
            inner.refreshing.store(false, Ordering::Release);
        });
    }
}

impl Credentials for ServerAuth {
    fn authorization(&self) -> Option<String> {
        let tokens = self.current()?;
        if tokens.refresh_token.is_some() && tokens.due_for_refresh() {
            self.refresh_in_background();
        }
        Some(format!("Bearer {}", tokens.access_token))
    }

    fn challenge<'a>(
        &'a self,
        status: u16,
        www_authenticate: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            let i = &self.inner;
            let challenge = Challenge::parse(www_authenticate);
            let seen = i.generation.load(Ordering::Acquire);
            let mut flow = i.flow.lock().await;
            if i.generation.load(Ordering::Acquire) != seen {
                // New credentials arrived while this request waited: just retry.
                return Ok(());
            }
            if status == 403 {
                return i.step_up(&mut flow, &challenge).await;
            }
            // Another process (`openpact auth login`, a second hub) may hold newer tokens.
            if let Ok(Some(stored)) = i.store.load_tokens(&i.server, &i.resource_key)
                && i.current().map(|c| c.access_token) != Some(stored.access_token.clone())
                && !stored.expires_within(Duration::ZERO)
            {
                i.set(Some(stored));
                return Ok(());
            }
            let refreshed_just_now = flow
                .last_refresh
                .is_some_and(|at| at.elapsed() < FRESH_LOGIN);
            // A token refreshed seconds ago and refused again will not get better by another
            // refresh (the server may have moved to another authorization server): log in.
            if i.current().is_some_and(|t| t.refresh_token.is_some()) && !refreshed_just_now {
                match i.refresh_locked().await {
                    Ok(()) => {
                        flow.last_refresh = Some(Instant::now());
                        return Ok(());
                    }
                    Err(RefreshError::Refused(e)) => {
                        tracing::info!(server = %i.server, "the refresh token was refused ({e}); a new login is needed");
                    }
                    Err(RefreshError::Failed(e)) => {
                        if !i.interactive {
                            return Err(i.failed(e));
                        }
                        tracing::warn!(server = %i.server, "{e}");
                    }
                }
            }
            let discovered = if flow.last_login.is_some_and(|at| at.elapsed() < FRESH_LOGIN) {
                // Refused right after a login: a broken server, unless it has moved to
                // another authorization server meanwhile (SEP-2352), whose registration and
                // login we then need.
                let discovered = i.discover(&challenge).await?;
                i.moved(&mut flow, &discovered)?;
                Some(discovered)
            } else {
                None
            };
            if !i.interactive {
                return Err(i.needs_login(&[]));
            }
            let opener = i.opener();
            let discovered = match discovered {
                Some(d) => d,
                None => i.discover(&challenge).await?,
            };
            i.login_with(&mut flow, discovered, &challenge, &[], &opener)
                .await
        })
    }
}

impl Inner {
    fn current(&self) -> Option<StoredTokens> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces the tokens in memory; true when there were some.
    fn set(&self, tokens: Option<StoredTokens>) -> bool {
        let fresh = tokens.as_ref().map(StoredTokens::secrets);
        let had = {
            let mut cur = self.current.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *cur, tokens).is_some()
        };
        self.generation.fetch_add(1, Ordering::AcqRel);
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let (Some(watch), Some(values)) = (watcher, fresh) {
            watch(values);
        }
        had
    }

    fn failed(&self, reason: String) -> AuthError {
        AuthError::Failed {
            server: self.server.clone(),
            reason,
        }
    }

    fn needs_login(&self, scopes: &[String]) -> AuthError {
        let hint = if scopes.is_empty() {
            format!("run `openpact auth login {}`", self.server)
        } else {
            format!(
                "run `openpact auth login {} --scope '{}'`",
                self.server,
                scopes.join(" ")
            )
        };
        AuthError::NeedsLogin {
            server: self.server.clone(),
            hint,
        }
    }

    fn opener(&self) -> Opener {
        self.opener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(Opener::from_env)
    }

    /// 403: re-authorize with the union of what was asked for before and what is asked now;
    /// at most [`MAX_STEP_UPS`] times in a row for the same scopes.
    async fn step_up(&self, flow: &mut FlowState, challenge: &Challenge) -> Result<(), AuthError> {
        let mut wanted: Vec<String> = self.current().map(|t| t.scopes).unwrap_or_default();
        for s in flow
            .step_up_scopes
            .iter()
            .cloned()
            .chain(challenge.scopes())
        {
            if !wanted.contains(&s) {
                wanted.push(s);
            }
        }
        let asks_more = wanted.iter().any(|s| !flow.step_up_scopes.contains(s));
        if asks_more
            || flow
                .last_step_up
                .is_none_or(|at| at.elapsed() > STEP_UP_WINDOW)
        {
            flow.step_ups = 0;
        }
        if flow.step_ups >= MAX_STEP_UPS {
            return Err(self.failed(format!(
                "the server still answers 403 insufficient_scope after {MAX_STEP_UPS} re-authorizations (scopes asked for: {}); check the scopes the server and your account allow",
                if wanted.is_empty() { "none".to_string() } else { wanted.join(" ") }
            )));
        }
        flow.step_ups += 1;
        flow.last_step_up = Some(Instant::now());
        flow.step_up_scopes = wanted.clone();
        if !self.interactive {
            return Err(self.needs_login(&wanted));
        }
        let opener = self.opener();
        self.login_locked(flow, challenge, &wanted, &opener).await
    }

    /// Discovery runs afresh for every login: the server may have moved to another
    /// authorization server since the last one (whose registration must not be reused).
    async fn discover(&self, challenge: &Challenge) -> Result<Discovered, AuthError> {
        let url = url::Url::parse(&self.url)
            .map_err(|e| self.failed(format!("the server URL is not valid: {e}")))?;
        let http = http().map_err(|e| self.failed(e))?;
        let d = discovery::discover(http, &url, challenge)
            .await
            .map_err(|e| self.failed(e))?;
        Ok(d)
    }

    /// After a 401 right after a login, with discovery run again: Ok when the server now
    /// names another authorization server than the one that issued the refused token (once
    /// within [`FRESH_LOGIN`]: a server that keeps moving is refused like one that refuses
    /// its tokens).
    fn moved(&self, flow: &mut FlowState, discovered: &Discovered) -> Result<(), AuthError> {
        let was = self.current().map(|t| t.issuer).unwrap_or_default();
        let now = &discovered.server.issuer;
        if discovery::same_issuer(now, &was) {
            return Err(self.failed(
                "the server refuses the token it just issued (401 right after a login)".into(),
            ));
        }
        if flow.last_move.is_some_and(|at| at.elapsed() < FRESH_LOGIN) {
            return Err(self.failed(format!(
                "the server moved to another authorization server twice in a row ({was} to {now}); not logging in again"
            )));
        }
        flow.last_move = Some(Instant::now());
        tracing::info!(server = %self.server, from = %was, to = %now,
            "the server moved to another authorization server; registering and logging in there");
        Ok(())
    }

    async fn login_locked(
        &self,
        flow: &mut FlowState,
        challenge: &Challenge,
        extra: &[String],
        opener: &Opener,
    ) -> Result<(), AuthError> {
        let discovered = self.discover(challenge).await?;
        self.login_with(flow, discovered, challenge, extra, opener)
            .await
    }

    /// The browser login against what discovery found.
    async fn login_with(
        &self,
        flow: &mut FlowState,
        discovered: Discovered,
        challenge: &Challenge,
        extra: &[String],
        opener: &Opener,
    ) -> Result<(), AuthError> {
        let scopes = flow::choose_scopes(
            &self.settings.scopes,
            &challenge.scopes(),
            &discovered.scopes_supported,
            extra,
            &discovered.server.scopes_supported,
        );
        let http = http().map_err(|e| self.failed(e))?;
        let tokens = flow::login(
            http,
            Login {
                server: &self.server,
                discovered: &discovered,
                settings: &self.settings,
                store: &self.store,
                scopes,
                opener,
                timeout: login_timeout(),
            },
        )
        .await
        .map_err(|e| self.failed(e))?;
        self.store
            .save_tokens(&self.server, &tokens, &self.resource_key)
            .map_err(|e| self.failed(e))?;
        flow.last_login = Some(Instant::now());
        self.set(Some(tokens));
        Ok(())
    }

    /// The refresh grant under the cross-process lock; tokens another process refreshed in
    /// the meantime are taken instead of spending the (rotated) refresh token again.
    async fn refresh_locked(&self) -> Result<(), RefreshError> {
        let Some(mine) = self.current() else {
            return Err(RefreshError::Refused("not logged in".into()));
        };
        let store = self.store.clone();
        let (server, key) = (self.server.clone(), self.resource_key.clone());
        let lock = tokio::task::spawn_blocking(move || store.lock(&server, &key))
            .await
            .map_err(|e| RefreshError::Failed(e.to_string()))?
            .map_err(RefreshError::Failed)?;
        let stored = self
            .store
            .load_tokens(&self.server, &self.resource_key)
            .map_err(RefreshError::Failed)?;
        if let Some(s) = &stored
            && s.access_token != mine.access_token
            && !s.due_for_refresh()
        {
            self.set(stored);
            drop(lock);
            return Ok(());
        }
        // The stored copy holds the newest refresh token if another process rotated it.
        let base = stored.unwrap_or(mine);
        let http = http().map_err(RefreshError::Failed)?;
        let fresh = flow::refresh(http, &base).await?;
        self.store
            .save_tokens(&self.server, &fresh, &self.resource_key)
            .map_err(RefreshError::Failed)?;
        drop(lock);
        tracing::debug!(server = %self.server, "access token refreshed");
        self.set(Some(fresh));
        Ok(())
    }
}

fn login_timeout() -> Duration {
    std::env::var("OPENPACT_OAUTH_TIMEOUT_SECS")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map_or(DEFAULT_LOGIN_TIMEOUT, Duration::from_secs)
}

/// The status of `server` without keeping anything around (`config check`, `auth status`).
pub fn describe(
    server: &str,
    url: &str,
    settings: &OAuthSettings,
    store: Arc<TokenStore>,
) -> AuthStatus {
    ServerAuth::new(server, url, settings, store, false).status()
}

/// Scopes given as `--scope 'a b' --scope c`, split and deduplicated.
pub fn scope_list(args: &[String]) -> Vec<String> {
    split_scopes(&args.join(" "))
}
