//! The authorization code flow with PKCE (S256) and the refresh grant, through the `oauth2`
//! crate: the authorization URL (with `state` and RFC 8707 `resource`), the browser step via a
//! loopback [`Listener`], the code exchange and refreshes, each with the client's advertised
//! token endpoint authentication method. Also the scope choice.

use super::browser::Opener;
use super::callback::{Expect, Listener};
use super::challenge::split_scopes;
use super::discovery::Discovered;
use super::http::Http;
use super::register::{self, AuthMethod, ClientIdentity};
use super::store::{StoredTokens, TokenStore, now_secs};
use crate::config::OAuthSettings;
use oauth2::basic::{BasicClient, BasicErrorResponse, BasicTokenResponse};
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet,
    EndpointSet, PkceCodeChallenge, RedirectUrl, RefreshToken, RequestTokenError, Scope,
    TokenResponse, TokenUrl,
};
use std::time::Duration;

/// The scopes to ask for: configured ones win; else the challenge's; else the PRM's
/// `scopes_supported`; else none. `extra` (step-up, `--scope`) is added, and `offline_access`
/// when the authorization server lists it (SEP-2207) and any scope is asked for at all.
pub fn choose_scopes(
    configured: &[String],
    challenged: &[String],
    resource_supported: &[String],
    extra: &[String],
    server_supported: &[String],
) -> Vec<String> {
    let base = if !configured.is_empty() {
        configured
    } else if !challenged.is_empty() {
        challenged
    } else {
        resource_supported
    };
    let mut out: Vec<String> = Vec::new();
    for s in base.iter().chain(extra) {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    let offline = "offline_access";
    if !out.is_empty()
        && configured.is_empty()
        && server_supported.iter().any(|s| s == offline)
        && !out.iter().any(|s| s == offline)
    {
        out.push(offline.to_string());
    }
    out
}

/// What one browser login needs.
pub struct Login<'a> {
    pub server: &'a str,
    pub discovered: &'a Discovered,
    pub settings: &'a OAuthSettings,
    pub store: &'a TokenStore,
    pub scopes: Vec<String>,
    pub opener: &'a Opener,
    pub timeout: Duration,
}

/// Runs the browser login to the end: tokens, or why not.
pub async fn login(http: &Http, l: Login<'_>) -> Result<StoredTokens, String> {
    let auth = &l.discovered.server;
    let path = l
        .settings
        .callback_path
        .as_deref()
        .filter(|p| !p.is_empty())
        .unwrap_or("/callback");
    let listener = listen(l.store, &auth.issuer, l.settings.redirect_port, path)?;
    let redirect_uri = listener.redirect_uri();
    let identity = register::identify(
        http,
        l.store,
        l.server,
        auth,
        l.settings,
        &redirect_uri,
        &l.scopes,
    )
    .await?;
    let client = code_client(&identity, l.discovered, &redirect_uri)?;
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state) = client
        .authorize_url(CsrfToken::new_random)
        .add_scopes(l.scopes.iter().cloned().map(Scope::new))
        .set_pkce_challenge(challenge)
        .add_extra_param("resource", &l.discovered.resource)
        .url();
    l.opener.show(l.server, url.as_str());
    let expect = Expect {
        state: state.secret().clone(),
        issuer: auth.issuer.clone(),
        iss_advertised: auth.iss_parameter_supported,
    };
    let code = listener
        .wait(expect, l.timeout)
        .await
        .map_err(|e| e.to_string())?;
    let mut request = client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .add_extra_param("resource", &l.discovered.resource);
    if identity.auth_method == AuthMethod::Basic {
        // Also in the body: some servers (the Python SDK's) look the client up by it first.
        request = request.add_extra_param("client_id", &identity.client_id);
    }
    let answer = request
        .request_async(&http.for_oauth2())
        .await
        .map_err(|e| token_error(e, auth.token_endpoint.as_str()).1)?;
    stored(&answer, &l.scopes, l.discovered, &identity)
}

/// The callback listener: on the configured port, else on the port of the stored
/// registration for this issuer (so it can be reused), else on any free port.
fn listen(
    store: &TokenStore,
    issuer: &str,
    configured: Option<u16>,
    path: &str,
) -> Result<Listener, String> {
    if let Some(port) = configured {
        return Listener::bind(port, path).map_err(|e| e.to_string());
    }
    let previous = store
        .load_client::<ClientIdentity>(issuer)
        .ok()
        .flatten()
        .and_then(|c| {
            c.redirect_uris
                .first()
                .and_then(|u| url::Url::parse(u).ok())
        })
        .filter(|u| u.path() == path || format!("/{path}") == u.path())
        .and_then(|u| u.port());
    if let Some(port) = previous
        && let Ok(l) = Listener::bind(port, path)
    {
        return Ok(l);
    }
    Listener::bind(0, path).map_err(|e| e.to_string())
}

type CodeClient =
    BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;
type RefreshClient =
    BasicClient<EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

fn code_client(
    identity: &ClientIdentity,
    discovered: &Discovered,
    redirect_uri: &str,
) -> Result<CodeClient, String> {
    let auth = &discovered.server;
    let client = refresh_client(
        &identity.client_id,
        identity.client_secret.as_deref(),
        identity.auth_method,
        auth.token_endpoint.as_str(),
    )?;
    Ok(client
        .set_auth_uri(AuthUrl::from_url(auth.authorization_endpoint.clone()))
        .set_redirect_uri(
            RedirectUrl::new(redirect_uri.to_string()).map_err(|e| format!("redirect URI: {e}"))?,
        ))
}

fn refresh_client(
    client_id: &str,
    secret: Option<&str>,
    method: AuthMethod,
    token_endpoint: &str,
) -> Result<RefreshClient, String> {
    let token = TokenUrl::new(token_endpoint.to_string())
        .map_err(|e| format!("token endpoint \"{token_endpoint}\": {e}"))?;
    let mut client = BasicClient::new(ClientId::new(client_id.to_string()))
        .set_token_uri(token)
        .set_auth_type(match method {
            AuthMethod::Basic => AuthType::BasicAuth,
            AuthMethod::Post | AuthMethod::None => AuthType::RequestBody,
        });
    if method != AuthMethod::None
        && let Some(secret) = secret
    {
        client = client.set_client_secret(ClientSecret::new(secret.to_string()));
    }
    Ok(client)
}

/// Why a refresh did not work.
#[derive(Debug)]
pub enum RefreshError {
    /// The server refused the refresh token (revoked, expired, rotated elsewhere): log in again.
    Refused(String),
    /// Could not ask (network, garbage): the old tokens may still be good later.
    Failed(String),
}

/// The refresh grant (with `resource` again); a rotated refresh token replaces the old one.
pub async fn refresh(http: &Http, old: &StoredTokens) -> Result<StoredTokens, RefreshError> {
    refresh_with(&http.for_oauth2(), old).await
}

/// [`refresh`] through `send`, which takes the token request and gives the HTTP response:
/// `Http::for_oauth2` in production, a made-up answer in the fuzz targets (`tests/fuzz`).
#[doc(hidden)]
pub async fn refresh_with<F, Fut, E>(
    send: &F,
    old: &StoredTokens,
) -> Result<StoredTokens, RefreshError>
where
    F: Fn(oauth2::HttpRequest) -> Fut,
    Fut: std::future::Future<Output = Result<oauth2::HttpResponse, E>>,
    E: std::error::Error + 'static,
{
    let Some(refresh_token) = &old.refresh_token else {
        return Err(RefreshError::Refused("no refresh token".to_string()));
    };
    let client = refresh_client(
        &old.client_id,
        old.client_secret.as_deref(),
        old.auth_method,
        &old.token_endpoint,
    )
    .map_err(RefreshError::Failed)?;
    let refresh_token = RefreshToken::new(refresh_token.clone());
    let mut request = client
        .exchange_refresh_token(&refresh_token)
        .add_extra_param("resource", &old.resource);
    if old.auth_method == AuthMethod::Basic {
        request = request.add_extra_param("client_id", &old.client_id);
    }
    let answer = request.request_async(send).await.map_err(|e| {
        match token_error(e, &old.token_endpoint) {
            (true, m) => RefreshError::Refused(m),
            (false, m) => RefreshError::Failed(m),
        }
    })?;
    let mut fresh = tokens_from(&answer, &old.scopes).map_err(RefreshError::Failed)?;
    if fresh.refresh_token.is_none() {
        fresh.refresh_token = old.refresh_token.clone();
    }
    Ok(StoredTokens {
        access_token: fresh.access_token,
        refresh_token: fresh.refresh_token,
        expires_at: fresh.expires_at,
        scopes: fresh.scopes,
        obtained_at: now_secs(),
        ..old.clone()
    })
}

fn stored(
    answer: &BasicTokenResponse,
    requested: &[String],
    discovered: &Discovered,
    identity: &ClientIdentity,
) -> Result<StoredTokens, String> {
    let t = tokens_from(answer, requested)?;
    Ok(StoredTokens {
        access_token: t.access_token,
        refresh_token: t.refresh_token,
        expires_at: t.expires_at,
        scopes: t.scopes,
        resource: discovered.resource.clone(),
        issuer: discovered.server.issuer.clone(),
        token_endpoint: discovered.server.token_endpoint.to_string(),
        client_id: identity.client_id.clone(),
        client_secret: identity.client_secret.clone(),
        auth_method: identity.auth_method,
        obtained_at: now_secs(),
    })
}

struct Tokens {
    access_token: String,
    refresh_token: Option<String>,
    expires_at: Option<u64>,
    scopes: Vec<String>,
}

fn tokens_from(answer: &BasicTokenResponse, requested: &[String]) -> Result<Tokens, String> {
    let kind = answer.token_type().as_ref();
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(format!(
            "the authorization server issued a \"{kind}\" token; openpact only uses Bearer tokens"
        ));
    }
    let access_token = answer.access_token().secret();
    if access_token.is_empty() {
        return Err("the authorization server issued an empty access token".to_string());
    }
    Ok(Tokens {
        access_token: access_token.clone(),
        refresh_token: answer.refresh_token().map(|r| r.secret().clone()),
        expires_at: answer
            .expires_in()
            .map(|d| now_secs().saturating_add(d.as_secs())),
        // `oauth2` splits the granted `scope` at each space, so "a  b" has an empty scope.
        scopes: match answer.scopes() {
            Some(granted) => split_scopes(
                &granted
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            None => requested.to_vec(),
        },
    })
}

/// The members of token and error responses (RFC 6749 §5.1, §5.2), and `.` for the whole
/// answer: where a parse failed, when it is one of these.
const PARSED_MEMBERS: [&str; 9] = [
    ".",
    "access_token",
    "token_type",
    "expires_in",
    "refresh_token",
    "scope",
    "error",
    "error_description",
    "error_uri",
];

/// (refused by the server, message). Never includes the response body: it may hold tokens.
fn token_error<E: std::error::Error + 'static>(
    e: RequestTokenError<E, BasicErrorResponse>,
    endpoint: &str,
) -> (bool, String) {
    match e {
        RequestTokenError::ServerResponse(r) => {
            let mut text = format!("the token endpoint {endpoint} refused: {}", r.error());
            if let Some(d) = r.error_description() {
                text.push_str(": ");
                text.push_str(d);
            }
            (true, text)
        }
        RequestTokenError::Request(e) => (false, format!("the token request failed: {e}")),
        RequestTokenError::Parse(e, _) => {
            // The path is made of the answer's member names: the standard ones are shown,
            // the server's own (which may echo anything) are not.
            let path = e.path().to_string();
            let at = if PARSED_MEMBERS.contains(&path.as_str()) {
                format!(" (at `{path}`)")
            } else {
                String::new()
            };
            (
                false,
                format!(
                    "the token endpoint {endpoint} answered something that is not a token response{at}"
                ),
            )
        }
        RequestTokenError::Other(m) => (false, format!("the token endpoint {endpoint}: {m}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn scope_choice_order() {
        let none: Vec<String> = vec![];
        // Challenge first, then PRM scopes_supported, then nothing.
        assert_eq!(
            choose_scopes(&none, &v(&["a"]), &v(&["x", "y"]), &none, &none),
            v(&["a"])
        );
        assert_eq!(
            choose_scopes(&none, &none, &v(&["x", "y"]), &none, &none),
            v(&["x", "y"])
        );
        assert!(choose_scopes(&none, &none, &none, &none, &v(&["offline_access"])).is_empty());
        // Configured scopes override everything, and get no offline_access added.
        assert_eq!(
            choose_scopes(
                &v(&["c"]),
                &v(&["a"]),
                &v(&["x"]),
                &none,
                &v(&["offline_access"])
            ),
            v(&["c"])
        );
        // Step-up: the union, in order, no duplicates.
        assert_eq!(
            choose_scopes(&none, &v(&["a", "b"]), &none, &v(&["b", "c"]), &none),
            v(&["a", "b", "c"])
        );
        // offline_access only when the authorization server lists it.
        assert_eq!(
            choose_scopes(
                &none,
                &v(&["a"]),
                &none,
                &none,
                &v(&["a", "offline_access"])
            ),
            v(&["a", "offline_access"])
        );
        assert_eq!(
            choose_scopes(&none, &v(&["a"]), &none, &none, &v(&["a"])),
            v(&["a"])
        );
    }

    /// Refreshes `old` against a token endpoint that answers `body` with HTTP 200.
    async fn refreshed(body: &str) -> Result<StoredTokens, String> {
        let old = StoredTokens {
            access_token: "old-access".into(),
            refresh_token: Some("old-refresh".into()),
            expires_at: None,
            scopes: v(&["requested"]),
            resource: "https://mcp.example.com/mcp".into(),
            issuer: "https://auth.example.com".into(),
            token_endpoint: "https://auth.example.com/token".into(),
            client_id: "c".into(),
            client_secret: None,
            auth_method: AuthMethod::None,
            obtained_at: 0,
        };
        let body = body.as_bytes().to_vec();
        let answer = move |_: oauth2::HttpRequest| {
            let r = oauth2::http::Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(body.clone())
                .map_err(std::io::Error::other);
            async move { r }
        };
        refresh_with(&answer, &old).await.map_err(|e| match e {
            RefreshError::Refused(m) | RefreshError::Failed(m) => m,
        })
    }

    /// Found by the fuzzer (tests/fuzz, target `oauth`): a granted `scope` with two spaces in a
    /// row gave an empty scope, and an empty access token was taken.
    #[tokio::test]
    async fn granted_scopes_are_words_and_an_access_token_is_required() {
        let t =
            refreshed(r#"{"access_token":"at","token_type":"Bearer","scope":"read  write read "}"#)
                .await
                .unwrap();
        assert_eq!(t.scopes, v(&["read", "write"]));
        assert_eq!(t.refresh_token.as_deref(), Some("old-refresh"));
        let t = refreshed(r#"{"access_token":"at","token_type":"bearer"}"#)
            .await
            .unwrap();
        assert_eq!(t.scopes, v(&["requested"]));
        let e = refreshed(r#"{"access_token":"","token_type":"Bearer"}"#)
            .await
            .unwrap_err();
        assert!(e.contains("empty access token"), "{e}");
    }

    /// Found by the fuzzer (tests/fuzz, target `oauth`): a parse failure named the member it
    /// failed at, whatever the server called it, so a member named after a token showed it.
    #[tokio::test]
    async fn a_parse_failure_names_only_standard_members() {
        let e = refreshed(r#"{"access_token":"at","token_type":"Bearer","expires_in":"soon"}"#)
            .await
            .unwrap_err();
        assert!(e.ends_with("not a token response (at `expires_in`)"), "{e}");
        // Broken JSON inside a member whose name echoes the refresh token.
        let e = refreshed(r#"{"access_token":"at","old-refresh": nope}"#)
            .await
            .unwrap_err();
        assert!(e.ends_with("not a token response"), "{e}");
        let e = refreshed(r#"[1]"#).await.unwrap_err();
        assert!(!e.contains("[1]"), "{e}");
    }
}
