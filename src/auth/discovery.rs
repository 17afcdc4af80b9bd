//! Finding the authorization server of a protected MCP server: Protected Resource Metadata
//! (RFC 9728) from the challenge's `resource_metadata` or the well-known paths, then the
//! authorization server's metadata (RFC 8414 and OpenID discovery, in the MCP spec's order,
//! `issuer` checked), else the 2025-03-26 defaults (`/authorize`, `/token`, `/register`).

use super::challenge::Challenge;
use super::http::{Http, secure, without_query};
use serde_json::Value;
use url::Url;

/// Everything the login needs to know about where to go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The RFC 8707 `resource` value sent on authorization and token requests.
    pub resource: String,
    /// Where the Protected Resource Metadata was found (None: a 2025-03-26 server).
    pub metadata_url: Option<String>,
    /// The PRM's `scopes_supported` (the scope choice's second source).
    pub scopes_supported: Vec<String>,
    pub server: AuthServer,
}

/// One authorization server, from its metadata or from the 2025-03-26 defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthServer {
    /// The validated `issuer` (the defaults use the server's origin).
    pub issuer: String,
    pub authorization_endpoint: Url,
    pub token_endpoint: Url,
    pub registration_endpoint: Option<Url>,
    /// The AS's `scopes_supported` (for `offline_access`).
    pub scopes_supported: Vec<String>,
    /// `token_endpoint_auth_methods_supported`; None when not advertised.
    pub auth_methods: Option<Vec<String>>,
    /// `client_id_metadata_document_supported`.
    pub metadata_document_supported: bool,
    /// `authorization_response_iss_parameter_supported` (RFC 9207).
    pub iss_parameter_supported: bool,
    /// False for the 2025-03-26 defaults (nothing was published).
    pub from_metadata: bool,
}

/// The canonical form of the server URL (RFC 8707 / MCP): lowercase scheme and host, no
/// fragment, no lone trailing slash.
pub fn canonical_resource(url: &str) -> Result<String, String> {
    let mut u = Url::parse(url.trim()).map_err(|e| format!("\"{url}\" is not a valid URL: {e}"))?;
    u.set_fragment(None);
    let mut s = u.to_string();
    if u.path() == "/" && u.query().is_none() {
        s.pop();
    }
    Ok(s)
}

/// Where to look for Protected Resource Metadata, in order: the challenge's
/// `resource_metadata`, then path-inserted, then root (RFC 9728 §3.1, MCP 2025-11-25).
pub fn metadata_urls(server: &Url, challenge: &Challenge) -> Vec<Url> {
    let mut out = Vec::new();
    if let Some(u) = challenge
        .resource_metadata
        .as_deref()
        .and_then(|s| server.join(s).ok())
    {
        out.push(u);
    }
    let path = server.path().trim_end_matches('/');
    if !path.is_empty() {
        out.push(well_known(
            server,
            &format!("oauth-protected-resource{path}"),
        ));
    }
    out.push(well_known(server, "oauth-protected-resource"));
    // The challenge may name any of the well-known places, not only the next one.
    let mut seen = Vec::with_capacity(out.len());
    out.retain(|u| {
        let first = !seen.contains(u);
        seen.push(u.clone());
        first
    });
    out
}

/// Where to look for an authorization server's metadata, in the MCP spec's order.
pub fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut out = Vec::new();
    if path.is_empty() {
        out.push(well_known(issuer, "oauth-authorization-server"));
        out.push(well_known(issuer, "openid-configuration"));
    } else {
        out.push(well_known(
            issuer,
            &format!("oauth-authorization-server{path}"),
        ));
        out.push(well_known(issuer, &format!("openid-configuration{path}")));
        out.push(at(
            issuer,
            &format!("{path}/.well-known/openid-configuration"),
        ));
    }
    out
}

fn well_known(origin: &Url, rest: &str) -> Url {
    at(origin, &format!("/.well-known/{rest}"))
}

/// `origin` with this path and no query or fragment.
fn at(origin: &Url, path: &str) -> Url {
    let mut u = origin.clone();
    u.set_path(path);
    u.set_query(None);
    u.set_fragment(None);
    u
}

/// Whether the PRM's `resource` covers the server URL: same origin, and the server's path is
/// the resource's path or below it.
pub fn resource_matches(resource: &str, server: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.scheme() != server.scheme()
        || r.host_str().map(str::to_ascii_lowercase)
            != server.host_str().map(str::to_ascii_lowercase)
        || r.port_or_known_default() != server.port_or_known_default()
    {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let sp = server.path().trim_end_matches('/');
    sp == rp || sp.starts_with(&format!("{rp}/"))
}

/// `issuer` as published vs the one the metadata URL was built from; a lone trailing slash
/// aside, they must be equal.
pub fn same_issuer(published: &str, expected: &str) -> bool {
    published.trim_end_matches('/') == expected.trim_end_matches('/')
}

/// Runs discovery for `server` after it answered with `challenge`.
pub async fn discover(
    http: &Http,
    server: &Url,
    challenge: &Challenge,
) -> Result<Discovered, String> {
    let mut tried = Vec::new();
    for url in metadata_urls(server, challenge) {
        // The server's own origin is as trusted as the server; anywhere else must be HTTPS.
        if url.origin() != server.origin()
            && let Err(e) = secure(&url)
        {
            tried.push(e);
            continue;
        }
        let reply = match http.get(&url).await {
            Ok(r) => r,
            Err(e) => {
                tried.push(e);
                continue;
            }
        };
        if reply.status != 200 {
            tried.push(format!("{} answered {}", without_query(&url), reply.status));
            continue;
        }
        let Some(doc) = reply.json() else {
            tried.push(format!("{} is not JSON", without_query(&url)));
            continue;
        };
        return from_resource_metadata(http, server, &url, &doc).await;
    }
    tracing::debug!(
        server = %without_query(server),
        "no protected resource metadata ({}); trying the 2025-03-26 discovery",
        tried.join("; ")
    );
    handshake(http, server).await
}

/// What a Protected Resource Metadata document says, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceMetadata {
    /// The `resource` (covering the server), or the server's canonical URL when absent.
    pub resource: String,
    /// The first of `authorization_servers`, as written, and parsed (HTTPS or loopback).
    pub issuer: String,
    pub issuer_url: Url,
    pub scopes_supported: Vec<String>,
}

/// Reads the Protected Resource Metadata `doc` found at `url` for `server`: a document for
/// another resource, or naming no usable authorization server, is refused.
pub fn resource_metadata(server: &Url, url: &Url, doc: &Value) -> Result<ResourceMetadata, String> {
    let where_ = without_query(url);
    let resource = match doc.get("resource").and_then(Value::as_str) {
        Some(r) if resource_matches(r, server) => r.to_string(),
        Some(r) => {
            return Err(format!(
                "the protected resource metadata at {where_} is for \"{r}\", not for this server ({}); refusing to get a token for another resource",
                without_query(server)
            ));
        }
        None => canonical_resource(server.as_str())?,
    };
    let servers: Vec<&str> = doc
        .get("authorization_servers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(issuer) = servers.first() else {
        return Err(format!(
            "the protected resource metadata at {where_} names no authorization_servers"
        ));
    };
    // RFC 9728 §7.6: with several, the client picks one; the first is the server's preference.
    let issuer_url = Url::parse(issuer).map_err(|e| {
        format!("the authorization server \"{issuer}\" named at {where_} is not a URL: {e}")
    })?;
    secure(&issuer_url)?;
    Ok(ResourceMetadata {
        resource,
        issuer: issuer.to_string(),
        issuer_url,
        scopes_supported: strings(doc.get("scopes_supported")),
    })
}

async fn from_resource_metadata(
    http: &Http,
    server: &Url,
    url: &Url,
    doc: &Value,
) -> Result<Discovered, String> {
    let prm = resource_metadata(server, url, doc)?;
    let Some(auth) = server_metadata(http, &prm.issuer_url, &prm.issuer).await? else {
        return Err(format!(
            "the authorization server {} publishes no metadata (tried {})",
            prm.issuer,
            server_metadata_urls(&prm.issuer_url)
                .iter()
                .map(without_query)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    Ok(Discovered {
        resource: prm.resource,
        metadata_url: Some(without_query(url)),
        scopes_supported: prm.scopes_supported,
        server: auth,
    })
}

/// 2025-03-26: the server's origin is the authorization base; its metadata if published, else
/// the default endpoints.
async fn handshake(http: &Http, server: &Url) -> Result<Discovered, String> {
    let base = at(server, "/");
    let issuer = canonical_resource(base.as_str())?;
    let auth = match server_metadata(http, &base, &issuer).await? {
        Some(a) => a,
        None => {
            let auth = AuthServer {
                issuer,
                authorization_endpoint: at(&base, "/authorize"),
                token_endpoint: at(&base, "/token"),
                registration_endpoint: Some(at(&base, "/register")),
                scopes_supported: Vec::new(),
                auth_methods: None,
                metadata_document_supported: false,
                iss_parameter_supported: false,
                from_metadata: false,
            };
            secure(&auth.authorization_endpoint)?;
            auth
        }
    };
    Ok(Discovered {
        resource: canonical_resource(server.as_str())?,
        metadata_url: None,
        scopes_supported: Vec::new(),
        server: auth,
    })
}

/// The first valid metadata document of `issuer`; None when none is published. A document
/// whose `issuer` differs is not used (mix-up defence); one without S256 is an error.
async fn server_metadata(
    http: &Http,
    issuer_url: &Url,
    issuer: &str,
) -> Result<Option<AuthServer>, String> {
    let mut mismatched = None;
    for url in server_metadata_urls(issuer_url) {
        let Ok(reply) = http.get(&url).await else {
            continue;
        };
        if reply.status != 200 {
            continue;
        }
        let Some(doc) = reply.json() else {
            continue;
        };
        match auth_server(&doc, issuer, &url)? {
            Some(a) => return Ok(Some(a)),
            None => mismatched = Some(without_query(&url)),
        }
    }
    match mismatched {
        Some(at) => Err(format!(
            "the authorization server metadata at {at} names another issuer than {issuer}; refusing to use it"
        )),
        None => Ok(None),
    }
}

/// Validates one metadata document; None when its `issuer` is not `expected`.
pub fn auth_server(doc: &Value, expected: &str, url: &Url) -> Result<Option<AuthServer>, String> {
    let where_ = without_query(url);
    let published = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
    if !same_issuer(published, expected) {
        return Ok(None);
    }
    let endpoint = |key: &str| -> Result<Option<Url>, String> {
        match doc.get(key).and_then(Value::as_str) {
            None => Ok(None),
            Some(s) => {
                let u = Url::parse(s).map_err(|e| format!("{key} \"{s}\" at {where_}: {e}"))?;
                secure(&u)?;
                Ok(Some(u))
            }
        }
    };
    let required = |key: &str| -> Result<Url, String> {
        endpoint(key)?.ok_or_else(|| format!("the metadata at {where_} has no {key}"))
    };
    let methods = strings(doc.get("code_challenge_methods_supported"));
    if !methods.iter().any(|m| m == "S256") {
        return Err(format!(
            "the authorization server {published} does not support PKCE with S256 (code_challenge_methods_supported: {}); openpact only logs in with S256",
            if methods.is_empty() {
                "not published".to_string()
            } else {
                methods.join(", ")
            }
        ));
    }
    Ok(Some(AuthServer {
        issuer: published.to_string(),
        authorization_endpoint: required("authorization_endpoint")?,
        token_endpoint: required("token_endpoint")?,
        registration_endpoint: endpoint("registration_endpoint")?,
        scopes_supported: strings(doc.get("scopes_supported")),
        auth_methods: doc
            .get("token_endpoint_auth_methods_supported")
            .map(|v| strings(Some(v))),
        metadata_document_supported: doc
            .get("client_id_metadata_document_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        iss_parameter_supported: doc
            .get("authorization_response_iss_parameter_supported")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        from_metadata: true,
    }))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
