//! The HTTP side of OAuth: one reqwest client for metadata and registration, one that never
//! follows redirects for the token endpoint (driven by `oauth2` through its closure client),
//! and the rules on which URLs may be used at all (HTTPS, or plain HTTP on loopback only).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Once, OnceLock};
use std::time::Duration;
use url::Url;

/// Per request: metadata, registration and token calls are small and quick.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Metadata documents and token responses are a few KB; refuse anything absurd.
const MAX_BODY: usize = 1 << 20;

/// The two clients, built once per process.
pub(crate) struct Http {
    /// Follows up to 5 redirects, each to HTTPS or loopback only.
    fetch: reqwest::Client,
    /// Never follows a redirect: a token request is not replayed elsewhere.
    token: reqwest::Client,
}

static CRYPTO: Once = Once::new();

/// reqwest is built without a default rustls provider; install ring once (another part of
/// the process may have done it already, which is fine).
fn install_crypto_provider() {
    CRYPTO.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The shared clients, or why they could not be built.
pub(crate) fn http() -> Result<&'static Http, String> {
    static HTTP: OnceLock<Result<Http, String>> = OnceLock::new();
    HTTP.get_or_init(|| {
        install_crypto_provider();
        let agent = concat!("openpact/", env!("CARGO_PKG_VERSION"));
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            if attempt.previous().len() >= 5 || secure(attempt.url()).is_err() {
                attempt.stop()
            } else {
                attempt.follow()
            }
        });
        let fetch = reqwest::Client::builder()
            .user_agent(agent)
            .timeout(TIMEOUT)
            .redirect(redirects)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let token = reqwest::Client::builder()
            .user_agent(agent)
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Http { fetch, token })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// A response reduced to what the OAuth code looks at.
pub(crate) struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

impl Http {
    /// GET a JSON document (metadata).
    pub async fn get(&self, url: &Url) -> Result<Reply, String> {
        let response = self
            .fetch
            .get(url.clone())
            .header("Accept", "application/json")
            .send()
            .await
            .map_err(|e| describe(&e, url))?;
        read(response, url).await
    }

    /// POST a JSON body (dynamic client registration).
    pub async fn post_json(&self, url: &Url, body: &serde_json::Value) -> Result<Reply, String> {
        let response = self
            .token
            .post(url.clone())
            .header("Accept", "application/json")
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| describe(&e, url))?;
        read(response, url).await
    }

    /// The client that follows no redirects, for requests built elsewhere in `auth`.
    pub fn plain(&self) -> &reqwest::Client {
        &self.token
    }

    /// The closure `oauth2` sends its token requests through.
    pub fn for_oauth2(
        &self,
    ) -> impl Fn(oauth2::HttpRequest) -> Pin<Box<dyn Future<Output = OAuthResult> + Send>> + use<>
    {
        let client = self.token.clone();
        move |request| {
            let client = client.clone();
            Box::pin(async move {
                let request = reqwest::Request::try_from(request)
                    .map_err(|e| HttpError(format!("bad token request: {e}")))?;
                let url = request.url().clone();
                let response = client
                    .execute(request)
                    .await
                    .map_err(|e| HttpError(describe(&e, &url)))?;
                let status = response.status();
                let headers = response.headers().clone();
                let body = read(response, &url).await.map_err(HttpError)?.body;
                let mut out = oauth2::http::Response::builder().status(status.as_u16());
                for (name, value) in &headers {
                    out = out.header(name.as_str(), value.as_bytes());
                }
                out.body(body).map_err(|e| HttpError(e.to_string()))
            })
        }
    }
}

type OAuthResult = Result<oauth2::HttpResponse, HttpError>;

/// An HTTP failure under `oauth2` (which needs a `std::error::Error`).
#[derive(Debug)]
pub(crate) struct HttpError(pub String);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

async fn read(mut response: reqwest::Response, url: &Url) -> Result<Reply, String> {
    let status = response.status().as_u16();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| describe(&e, url))? {
        if body.len() + chunk.len() > MAX_BODY {
            return Err(format!(
                "{} answered more than {MAX_BODY} bytes",
                without_query(url)
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Reply { status, body })
}

/// A reqwest error as one line, with its causes (never the query string: it may hold a code).
fn describe(e: &reqwest::Error, url: &Url) -> String {
    let mut text = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "cannot connect".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    format!("{} {text}", without_query(url))
}

/// `url` without query and fragment, for messages.
pub(crate) fn without_query(url: &Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.to_string()
}

/// Whether the host is this machine (`localhost`, 127.0.0.0/8, ::1).
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => {
            d.eq_ignore_ascii_case("localhost") || d.to_ascii_lowercase().ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// HTTPS, or plain HTTP to loopback; never a link-local address (cloud metadata services).
pub(crate) fn secure(url: &Url) -> Result<(), String> {
    let link_local = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_link_local(),
        Some(url::Host::Ipv6(ip)) => (ip.segments()[0] & 0xffc0) == 0xfe80,
        _ => false,
    };
    if link_local {
        return Err(format!(
            "{} is a link-local address; openpact does not send OAuth requests there",
            without_query(url)
        ));
    }
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(url) => Ok(()),
        _ => Err(format!(
            "{} is not HTTPS; OAuth endpoints must use HTTPS (plain HTTP only on loopback)",
            without_query(url)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn https_or_loopback_only() {
        assert!(secure(&u("https://auth.example.com/token")).is_ok());
        assert!(secure(&u("http://127.0.0.1:8080/token")).is_ok());
        assert!(secure(&u("http://localhost:3000/authorize")).is_ok());
        assert!(secure(&u("http://[::1]:3000/authorize")).is_ok());
        let e = secure(&u("http://auth.example.com/token?code=secret")).unwrap_err();
        assert!(e.contains("not HTTPS"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        assert!(secure(&u("https://169.254.169.254/latest")).is_err());
        assert!(secure(&u("https://[fe80::1]/x")).is_err());
        assert!(secure(&u("ftp://localhost/x")).is_err());
    }
}
