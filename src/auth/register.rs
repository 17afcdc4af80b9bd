//! Who openpact is to an authorization server, in the MCP spec's order: the configured
//! `clientId`/`clientSecret`; a Client ID Metadata Document URL when the server supports it
//! and one is set; else Dynamic Client Registration (RFC 7591), stored per issuer and reused.

use super::discovery::AuthServer;
use super::http::{Http, without_query};
use super::store::{TokenStore, now_secs};
use crate::config::OAuthSettings;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Until the config grows a field for it, the Client ID Metadata Document URL comes from here.
pub const METADATA_URL_VAR: &str = "OPENPACT_OAUTH_CLIENT_METADATA_URL";

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthMethod {
    #[serde(rename = "client_secret_basic")]
    Basic,
    #[serde(rename = "client_secret_post")]
    Post,
    #[serde(rename = "none")]
    None,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Basic => "client_secret_basic",
            AuthMethod::Post => "client_secret_post",
            AuthMethod::None => "none",
        }
    }

    fn parse(s: &str) -> Option<AuthMethod> {
        match s {
            "client_secret_basic" => Some(AuthMethod::Basic),
            "client_secret_post" => Some(AuthMethod::Post),
            "none" => Some(AuthMethod::None),
            _ => None,
        }
    }
}

/// Where a client identity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Configured,
    MetadataDocument,
    Registered,
}

/// A client identity at one authorization server. Its `Debug` shows no secret.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientIdentity {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub auth_method: AuthMethod,
    pub source: Source,
    /// The issuer it belongs to (a registration is never used with another one).
    pub issuer: String,
    /// Registered redirect URIs (DCR), matched exactly before reuse.
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    /// The registered `scope`, when the registration set one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Unix seconds; None or 0 = never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_expires_at: Option<u64>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("auth_method", &self.auth_method)
            .field("source", &self.source)
            .field("issuer", &self.issuer)
            .field("redirect_uris", &self.redirect_uris)
            .finish_non_exhaustive()
    }
}

impl ClientIdentity {
    /// Whether a stored registration can serve this login as it is.
    fn fits(&self, issuer: &str, redirect_uri: &str, scopes: &[String]) -> bool {
        let secret_valid = match self.secret_expires_at {
            Some(at) if at != 0 => at > now_secs() + 60,
            _ => true,
        };
        let scopes_covered = match &self.scope {
            Some(registered) => {
                let have: Vec<&str> = registered.split_ascii_whitespace().collect();
                scopes.iter().all(|s| have.contains(&s.as_str()))
            }
            None => true,
        };
        self.issuer == issuer
            && self.redirect_uris.iter().any(|u| u == redirect_uri)
            && secret_valid
            && scopes_covered
    }
}

/// With a configured secret: the strongest advertised method (RFC 8414's default is basic).
pub fn method_with_secret(advertised: Option<&[String]>) -> AuthMethod {
    let offers = |m: &str| advertised.is_none_or(|a| a.iter().any(|x| x == m));
    if offers("client_secret_basic") {
        AuthMethod::Basic
    } else if offers("client_secret_post") {
        AuthMethod::Post
    } else if offers("none") {
        AuthMethod::None
    } else {
        AuthMethod::Basic
    }
}

/// What to ask for in a registration: a public client (`none`) unless the server only
/// offers methods with a secret.
pub fn method_to_register(advertised: Option<&[String]>) -> AuthMethod {
    match advertised {
        None => AuthMethod::None,
        Some(a) if a.is_empty() || a.iter().any(|m| m == "none") => AuthMethod::None,
        Some(a) if a.iter().any(|m| m == "client_secret_basic") => AuthMethod::Basic,
        Some(a) if a.iter().any(|m| m == "client_secret_post") => AuthMethod::Post,
        Some(_) => AuthMethod::None,
    }
}

/// The client identity to log in with at `auth`, registering one if needed.
pub async fn identify(
    http: &Http,
    store: &TokenStore,
    server_name: &str,
    auth: &AuthServer,
    settings: &OAuthSettings,
    redirect_uri: &str,
    scopes: &[String],
) -> Result<ClientIdentity, String> {
    let metadata_url = metadata_document_url()?;
    let login = LoginClient {
        server_name,
        auth,
        settings,
        redirect_uri,
        scopes,
        metadata_url: metadata_url.as_deref(),
    };
    identify_with(http, store, &login).await
}

/// What [`identify`] decides from.
struct LoginClient<'a> {
    server_name: &'a str,
    auth: &'a AuthServer,
    settings: &'a OAuthSettings,
    redirect_uri: &'a str,
    scopes: &'a [String],
    /// A Client ID Metadata Document URL, if one is set.
    metadata_url: Option<&'a str>,
}

async fn identify_with(
    http: &Http,
    store: &TokenStore,
    l: &LoginClient<'_>,
) -> Result<ClientIdentity, String> {
    let LoginClient {
        server_name,
        auth,
        settings,
        redirect_uri,
        scopes,
        metadata_url,
    } = *l;
    let advertised = auth.auth_methods.as_deref();
    if let Some(id) = settings.client_id.as_deref().filter(|s| !s.is_empty()) {
        let secret = settings.client_secret.clone().filter(|s| !s.is_empty());
        return Ok(ClientIdentity {
            client_id: id.to_string(),
            auth_method: if secret.is_some() {
                method_with_secret(advertised)
            } else {
                AuthMethod::None
            },
            client_secret: secret,
            source: Source::Configured,
            issuer: auth.issuer.clone(),
            redirect_uris: vec![redirect_uri.to_string()],
            scope: None,
            secret_expires_at: None,
        });
    }
    if auth.metadata_document_supported
        && let Some(url) = metadata_url
    {
        return Ok(ClientIdentity {
            client_id: url.to_string(),
            client_secret: None,
            auth_method: AuthMethod::None,
            source: Source::MetadataDocument,
            issuer: auth.issuer.clone(),
            redirect_uris: vec![redirect_uri.to_string()],
            scope: None,
            secret_expires_at: None,
        });
    }
    if let Some(stored) = store.load_client::<ClientIdentity>(&auth.issuer)?
        && stored.fits(&auth.issuer, redirect_uri, scopes)
    {
        return Ok(stored);
    }
    let Some(endpoint) = &auth.registration_endpoint else {
        return Err(format!(
            "the authorization server {} offers no dynamic client registration; register openpact there (redirect URI {redirect_uri}) and set `oauth.clientId` (and `clientSecret`) for server '{server_name}' in the config",
            auth.issuer
        ));
    };
    let method = method_to_register(advertised);
    let mut body = json!({
        "client_name": "openpact",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method.as_str(),
        "application_type": "native",
    });
    if !scopes.is_empty() {
        body["scope"] = Value::String(scopes.join(" "));
    }
    let reply = http.post_json(endpoint, &body).await?;
    let doc = reply.json().unwrap_or(Value::Null);
    if !(200..300).contains(&reply.status) {
        return Err(format!(
            "dynamic client registration at {} failed: {} {}",
            without_query(endpoint),
            reply.status,
            oauth_error(&doc)
        ));
    }
    let identity = registered(&doc, method, auth, redirect_uri, scopes).map_err(|e| {
        format!(
            "dynamic client registration at {}: {e}",
            without_query(endpoint)
        )
    })?;
    store.save_client(&auth.issuer, &identity)?;
    Ok(identity)
}

/// The identity in a registration response (RFC 7591 §3.2.1): the server may have changed
/// the method it was asked for.
pub fn registered(
    doc: &Value,
    asked: AuthMethod,
    auth: &AuthServer,
    redirect_uri: &str,
    scopes: &[String],
) -> Result<ClientIdentity, String> {
    let client_id = doc
        .get("client_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or("the answer has no client_id")?;
    let secret = doc
        .get("client_secret")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let method = match doc.get("token_endpoint_auth_method").and_then(Value::as_str) {
        None => asked,
        Some(m) => AuthMethod::parse(m)
            .ok_or_else(|| format!("the server assigned token_endpoint_auth_method \"{m}\", which openpact does not support"))?,
    };
    if method != AuthMethod::None && secret.is_none() {
        return Err(format!(
            "the server assigned {} but no client_secret",
            method.as_str()
        ));
    }
    Ok(ClientIdentity {
        client_id: client_id.to_string(),
        client_secret: secret,
        auth_method: method,
        source: Source::Registered,
        issuer: auth.issuer.clone(),
        redirect_uris: vec![redirect_uri.to_string()],
        scope: doc
            .get("scope")
            .and_then(Value::as_str)
            .map(String::from)
            .or_else(|| (!scopes.is_empty()).then(|| scopes.join(" "))),
        secret_expires_at: doc.get("client_secret_expires_at").and_then(Value::as_u64),
    })
}

/// `OPENPACT_OAUTH_CLIENT_METADATA_URL`, checked: an HTTPS URL with a path (the spec's rule
/// for a client id that is a metadata document).
fn metadata_document_url() -> Result<Option<String>, String> {
    let Some(raw) = std::env::var(METADATA_URL_VAR)
        .ok()
        .filter(|s| !s.is_empty())
    else {
        return Ok(None);
    };
    let url = url::Url::parse(&raw)
        .map_err(|e| format!("{METADATA_URL_VAR} \"{raw}\" is not a URL: {e}"))?;
    if url.scheme() != "https" || url.path() == "/" {
        return Err(format!(
            "{METADATA_URL_VAR} must be an https:// URL with a path (the client metadata document), not \"{raw}\""
        ));
    }
    Ok(Some(raw))
}

/// `error: error_description` of an OAuth error body (RFC 6749 §5.2), for messages.
pub fn oauth_error(doc: &Value) -> String {
    let error = doc.get("error").and_then(Value::as_str).unwrap_or("");
    let description = doc
        .get("error_description")
        .and_then(Value::as_str)
        .unwrap_or("");
    match (error.is_empty(), description.is_empty()) {
        (true, true) => String::new(),
        (false, true) => error.to_string(),
        (true, false) => description.to_string(),
        (false, false) => format!("{error}: {description}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn method_choice() {
        assert_eq!(method_to_register(None), AuthMethod::None);
        assert_eq!(
            method_to_register(Some(&list(&["none", "client_secret_basic"]))),
            AuthMethod::None
        );
        assert_eq!(
            method_to_register(Some(&list(&["client_secret_post", "client_secret_basic"]))),
            AuthMethod::Basic
        );
        assert_eq!(
            method_to_register(Some(&list(&["client_secret_post"]))),
            AuthMethod::Post
        );
        assert_eq!(method_with_secret(None), AuthMethod::Basic);
        assert_eq!(
            method_with_secret(Some(&list(&["client_secret_post"]))),
            AuthMethod::Post
        );
        assert_eq!(method_with_secret(Some(&list(&["none"]))), AuthMethod::None);
    }

    fn auth() -> AuthServer {
        let u = |s: &str| url::Url::parse(s).unwrap();
        AuthServer {
            issuer: "https://as.example".into(),
            authorization_endpoint: u("https://as.example/authorize"),
            token_endpoint: u("https://as.example/token"),
            registration_endpoint: Some(u("https://as.example/register")),
            scopes_supported: vec![],
            auth_methods: None,
            metadata_document_supported: false,
            iss_parameter_supported: false,
            from_metadata: true,
        }
    }

    #[tokio::test]
    async fn identity_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::file(dir.path());
        let http = super::super::http::http().unwrap();
        let uri = "http://127.0.0.1:5000/callback";
        let mut auth = auth();
        auth.metadata_document_supported = true;
        auth.auth_methods = Some(list(&["client_secret_post"]));
        let cimd = "https://openpact.example/client.json";
        let configured = OAuthSettings {
            client_id: Some("pre".into()),
            client_secret: Some("pre-secret".into()),
            ..OAuthSettings::default()
        };
        let login = |settings, metadata_url| LoginClient {
            server_name: "s",
            auth: &auth,
            settings,
            redirect_uri: uri,
            scopes: &[],
            metadata_url,
        };
        // Configured credentials first, with the advertised method.
        let c = identify_with(http, &store, &login(&configured, Some(cimd)))
            .await
            .unwrap();
        assert_eq!(
            (c.client_id.as_str(), c.source),
            ("pre", Source::Configured)
        );
        assert_eq!(c.auth_method, AuthMethod::Post);
        // Then the metadata document, when the server supports it and one is set.
        let none = OAuthSettings::default();
        let c = identify_with(http, &store, &login(&none, Some(cimd)))
            .await
            .unwrap();
        assert_eq!(
            (c.client_id.as_str(), c.source),
            (cimd, Source::MetadataDocument)
        );
        assert_eq!(c.auth_method, AuthMethod::None);
        // Then a stored registration that fits.
        let stored = ClientIdentity {
            client_id: "dcr".into(),
            client_secret: None,
            auth_method: AuthMethod::None,
            source: Source::Registered,
            issuer: auth.issuer.clone(),
            redirect_uris: vec![uri.into()],
            scope: None,
            secret_expires_at: None,
        };
        store.save_client(&auth.issuer, &stored).unwrap();
        let c = identify_with(http, &store, &login(&none, None))
            .await
            .unwrap();
        assert_eq!(c, stored);
        // Nothing fits and the server cannot register: say how to configure one.
        let closed = AuthServer {
            registration_endpoint: None,
            ..auth.clone()
        };
        let other_uri = LoginClient {
            auth: &closed,
            redirect_uri: "http://127.0.0.1:5001/callback",
            ..login(&none, None)
        };
        let e = identify_with(http, &store, &other_uri).await.unwrap_err();
        assert!(e.contains("oauth.clientId") && e.contains("'s'"), "{e}");
    }

    #[test]
    fn registration_answers() {
        let uri = "http://127.0.0.1:5000/callback";
        let r = registered(
            &json!({"client_id": "abc", "client_secret": "xyz", "token_endpoint_auth_method": "client_secret_post", "scope": "a b"}),
            AuthMethod::None,
            &auth(),
            uri,
            &[],
        )
        .unwrap();
        assert_eq!(r.auth_method, AuthMethod::Post);
        assert!(r.fits("https://as.example", uri, &list(&["a"])));
        assert!(!r.fits("https://as.example", uri, &list(&["c"])));
        assert!(!r.fits("https://as.example", "http://127.0.0.1:5001/callback", &[]));
        assert!(!r.fits("https://other.example", uri, &[]));
        assert!(!format!("{r:?}").contains("xyz"));
        let e = registered(
            &json!({"client_id": "abc", "token_endpoint_auth_method": "client_secret_basic"}),
            AuthMethod::None,
            &auth(),
            uri,
            &[],
        )
        .unwrap_err();
        assert!(e.contains("no client_secret"), "{e}");
        assert!(registered(&json!({}), AuthMethod::None, &auth(), uri, &[]).is_err());
        let expired = ClientIdentity {
            secret_expires_at: Some(1),
            ..r
        };
        assert!(!expired.fits("https://as.example", uri, &[]));
    }
}
