//! The loopback redirect target of a browser login (RFC 8252 §7.3): a tiny_http listener on
//! 127.0.0.1 that accepts one authorization code for one `state`, answers the browser with a
//! small page, and closes. A callback with another `state` is refused and the wait goes on; an
//! `iss` that breaks RFC 9207's rules ends the login.

use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Why a login came back without an authorization code. The authorization server's own
/// refusal keeps its OAuth error code apart from its description (RFC 6749 §4.1.2.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallbackError {
    #[error("cannot listen on 127.0.0.1:{port} for the login callback: {reason}")]
    Bind { port: u16, reason: String },
    #[error("the login callback listener has no TCP port")]
    NoPort,
    #[error("the login callback listener failed: {0}")]
    Listener(String),
    #[error("the login was not completed within {} (set OPENPACT_OAUTH_TIMEOUT_SECS for more time)", seconds(*.0))]
    TimedOut(Duration),
    #[error("the login was abandoned")]
    Abandoned,
    #[error("the authorization server refused the login: {}", shown(.code, .description))]
    Refused { code: String, description: String },
    #[error("the login callback carried no authorization code")]
    NoCode,
    /// RFC 9207: the response names another issuer than the one the request went to.
    #[error(
        "the login response names issuer \"{got}\", not \"{issuer}\"; it was refused (possible mix-up attack)"
    )]
    WrongIssuer { got: String, issuer: String },
    /// RFC 9207: the authorization server promised an `iss` and the response has none.
    #[error(
        "the authorization server {issuer} promises an `iss` in its responses, but the login response has none; it was refused"
    )]
    NoIssuer { issuer: String },
}

/// An OAuth error as shown: `code: description`, or the code alone.
fn shown(code: &str, description: &str) -> String {
    if description.is_empty() {
        code.to_string()
    } else {
        format!("{code}: {description}")
    }
}

/// A bound listener, not yet waiting.
pub struct Listener {
    server: tiny_http::Server,
    port: u16,
    path: String,
}

/// What the callback must carry to be accepted.
#[derive(Debug, Clone)]
pub struct Expect {
    pub state: String,
    /// The validated issuer of the authorization server the request went to.
    pub issuer: String,
    /// `authorization_response_iss_parameter_supported` was true.
    pub iss_advertised: bool,
}

impl Listener {
    /// Listens on `127.0.0.1:port` (0 = any free port) for `path`.
    pub fn bind(port: u16, path: &str) -> Result<Listener, CallbackError> {
        let path = if path.starts_with('/') {
            path.to_string()
        } else {
            format!("/{path}")
        };
        let server =
            tiny_http::Server::http(("127.0.0.1", port)).map_err(|e| CallbackError::Bind {
                port,
                reason: e.to_string(),
            })?;
        let port = server
            .server_addr()
            .to_ip()
            .map(|a| a.port())
            .ok_or(CallbackError::NoPort)?;
        Ok(Listener { server, port, path })
    }

    /// The redirect URI to register and send: the IP literal, as RFC 8252 recommends.
    pub fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.path)
    }

    /// Waits for the callback; the authorization code, or why the login failed. The listener
    /// is closed when this returns or is dropped.
    pub async fn wait(self, expect: Expect, timeout: Duration) -> Result<String, CallbackError> {
        let cancelled = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(cancelled.clone());
        let task = tokio::task::spawn_blocking(move || self.serve(&expect, timeout, &cancelled));
        match task.await {
            Ok(r) => r,
            Err(e) => Err(CallbackError::Listener(e.to_string())),
        }
    }

    fn serve(
        self,
        expect: &Expect,
        timeout: Duration,
        cancelled: &AtomicBool,
    ) -> Result<String, CallbackError> {
        let deadline = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(CallbackError::TimedOut(timeout));
            }
            if cancelled.load(Ordering::Relaxed) {
                return Err(CallbackError::Abandoned);
            }
            let slice = (deadline - now).min(Duration::from_millis(200));
            match self.server.recv_timeout(slice) {
                Ok(Some(request)) => {
                    if let Some(outcome) = self.handle(request, expect) {
                        return outcome;
                    }
                }
                Ok(None) => {}
                Err(e) => return Err(CallbackError::Listener(e.to_string())),
            }
        }
    }

    /// Some(outcome) when this request ends the wait.
    fn handle(
        &self,
        request: tiny_http::Request,
        expect: &Expect,
    ) -> Option<Result<String, CallbackError>> {
        let v = verdict(&self.path, request.url(), expect);
        respond(request, v.status, v.title, &v.text);
        v.outcome
    }
}

/// What one request to the callback gets: the page (status, title, text), and the outcome of
/// the login when the request ends the wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub status: u16,
    pub title: &'static str,
    pub text: String,
    pub outcome: Option<Result<String, CallbackError>>,
}

impl Verdict {
    fn page(status: u16, title: &'static str, text: &str) -> Verdict {
        Verdict {
            status,
            title,
            text: text.to_string(),
            outcome: None,
        }
    }

    fn ends(mut self, outcome: Result<String, CallbackError>) -> Verdict {
        self.outcome = Some(outcome);
        self
    }
}

/// The answer to a request for `url` (path and query, as the browser sent it) at a callback
/// listening on `path` for the login `expect` describes.
pub fn verdict(path: &str, url: &str, expect: &Expect) -> Verdict {
    let (asked, query) = url.split_once('?').unwrap_or((url, ""));
    if asked != path {
        return Verdict::page(
            404,
            "Not found",
            "This is openpact's login callback; nothing is here.",
        );
    }
    let params = Params::parse(query);
    if !same_secret(params.state.as_deref().unwrap_or(""), &expect.state) {
        tracing::warn!("refused a login callback whose state is not the one in progress");
        return Verdict::page(
            400,
            "Login not accepted",
            "This response does not belong to the login openpact is waiting for (the state does not match). Start the login again from openpact.",
        );
    }
    if let Err(e) = check_iss(expect.iss_advertised, &expect.issuer, params.iss.as_deref()) {
        // RFC 9207: on a mismatch, nothing else in the response is acted on or shown.
        return Verdict::page(
            400,
            "Login failed",
            "The response came from an unexpected authorization server.",
        )
        .ends(Err(e));
    }
    if let Some(code) = params.error {
        let description = params.error_description.unwrap_or_default();
        return Verdict::page(
            400,
            "Login failed",
            &format!(
                "The authorization server said: {}",
                shown(&code, &description)
            ),
        )
        .ends(Err(CallbackError::Refused { code, description }));
    }
    let Some(code) = params.code.filter(|c| !c.is_empty()) else {
        return Verdict::page(
            400,
            "Login failed",
            "The response carries no authorization code.",
        )
        .ends(Err(CallbackError::NoCode));
    };
    Verdict::page(
        200,
        "Logged in",
        "openpact is logged in. You can close this tab.",
    )
    .ends(Ok(code))
}

fn seconds(d: Duration) -> String {
    if d.as_secs() >= 1 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// The RFC 9207 table (MCP 2026-07-28 §issuer identification): advertised + present →
/// compare; advertised + absent → reject; not advertised + present → compare; neither →
/// proceed. Simple string comparison, no normalisation.
pub fn check_iss(advertised: bool, issuer: &str, iss: Option<&str>) -> Result<(), CallbackError> {
    match (advertised, iss) {
        (_, Some(got)) if got == issuer => Ok(()),
        (_, Some(got)) => Err(CallbackError::WrongIssuer {
            got: got.to_string(),
            issuer: issuer.to_string(),
        }),
        (true, None) => Err(CallbackError::NoIssuer {
            issuer: issuer.to_string(),
        }),
        (false, None) => Ok(()),
    }
}

#[derive(Default)]
struct Params {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

impl Params {
    fn parse(query: &str) -> Params {
        let mut p = Params::default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            let slot = match k.as_ref() {
                "code" => &mut p.code,
                "state" => &mut p.state,
                "iss" => &mut p.iss,
                "error" => &mut p.error,
                "error_description" => &mut p.error_description,
                _ => continue,
            };
            // A repeated parameter is ambiguous; the first wins, as in most servers.
            slot.get_or_insert_with(|| v.into_owned());
        }
        p
    }
}

/// Compares through a hash, so the time taken says nothing about the expected value.
fn same_secret(a: &str, b: &str) -> bool {
    Sha256::digest(a.as_bytes()) == Sha256::digest(b.as_bytes())
}

struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn respond(request: tiny_http::Request, status: u16, title: &str, text: &str) {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>openpact: {t}</title></head><body style=\"font-family:sans-serif;margin:3em\"><h1>{t}</h1><p>{x}</p></body></html>",
        t = escape(title),
        x = escape(text)
    );
    let mut response = tiny_http::Response::from_string(body).with_status_code(status);
    for (name, value) in [
        ("Content-Type", "text/html; charset=utf-8"),
        ("Cache-Control", "no-store"),
        ("Referrer-Policy", "no-referrer"),
    ] {
        if let Ok(h) = tiny_http::Header::from_bytes(name, value) {
            response = response.with_header(h);
        }
    }
    // The browser may have gone away; the outcome is decided either way.
    let _ = request.respond(response);
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iss_table() {
        let i = "https://as.example.com";
        assert!(check_iss(true, i, Some(i)).is_ok());
        let missing = check_iss(true, i, None).unwrap_err();
        assert_eq!(missing, CallbackError::NoIssuer { issuer: i.into() });
        assert!(missing.to_string().contains("has none"));
        assert!(check_iss(false, i, Some(i)).is_ok());
        assert!(check_iss(false, i, None).is_ok());
        // No normalisation: a trailing slash or case change is a mismatch.
        assert!(check_iss(true, i, Some("https://as.example.com/")).is_err());
        assert!(check_iss(false, i, Some("https://AS.example.com")).is_err());
    }

    /// (status, whole response); status 0 when nothing answered.
    fn get(url: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let u = url::Url::parse(url).unwrap();
        let Ok(mut s) = std::net::TcpStream::connect((u.host_str().unwrap(), u.port().unwrap()))
        else {
            return (0, String::new());
        };
        let target = match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        };
        let mut out = String::new();
        let _ = write!(
            s,
            "GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .and_then(|()| s.read_to_string(&mut out));
        let status = out
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, out)
    }

    /// Nothing on `url`'s port takes this code and state any more. (Parallel tests may get
    /// the freed port, so "nothing listens" would be a race; "not accepted" is not.)
    async fn closed(url: String) {
        let (status, _) = tokio::task::spawn_blocking(move || get(&url))
            .await
            .unwrap();
        assert_ne!(status, 200);
    }

    fn expect(state: &str) -> Expect {
        Expect {
            state: state.into(),
            issuer: "http://127.0.0.1:9".into(),
            iss_advertised: false,
        }
    }

    #[tokio::test]
    async fn one_code_for_one_state_then_closed() {
        let l = Listener::bind(0, "/callback").unwrap();
        let base = l.redirect_uri();
        assert!(base.starts_with("http://127.0.0.1:") && base.ends_with("/callback"));
        let waiting = tokio::spawn(l.wait(expect("s1"), Duration::from_secs(10)));
        let b = base.clone();
        let (wrong, page) =
            tokio::task::spawn_blocking(move || get(&format!("{b}?code=evil&state=s2")))
                .await
                .unwrap();
        assert_eq!(wrong, 400);
        assert!(page.contains("does not match"));
        let b = base.clone();
        let (other, _) =
            tokio::task::spawn_blocking(move || get(&b.replace("/callback", "/other")))
                .await
                .unwrap();
        assert_eq!(other, 404);
        let b = base.clone();
        let (ok, page) =
            tokio::task::spawn_blocking(move || get(&format!("{b}?code=good&state=s1")))
                .await
                .unwrap();
        assert_eq!(ok, 200);
        assert!(page.contains("close this tab"));
        assert_eq!(waiting.await.unwrap().unwrap(), "good");
        // Closed: the same answer is not taken twice.
        closed(format!("{base}?code=good&state=s1")).await;
    }

    #[tokio::test]
    async fn error_page_and_timeout() {
        let l = Listener::bind(0, "cb").unwrap();
        let base = l.redirect_uri();
        assert!(base.ends_with("/cb"));
        let waiting = tokio::spawn(l.wait(expect("s"), Duration::from_secs(10)));
        let (status, page) = tokio::task::spawn_blocking(move || {
            get(&format!(
                "{base}?state=s&error=access_denied&error_description=%3Cb%3Eno%3C%2Fb%3E"
            ))
        })
        .await
        .unwrap();
        assert_eq!(status, 400);
        assert!(
            page.contains("access_denied: &lt;b&gt;no&lt;/b&gt;"),
            "{page}"
        );
        let e = waiting.await.unwrap().unwrap_err();
        assert_eq!(
            e,
            CallbackError::Refused {
                code: "access_denied".into(),
                description: "<b>no</b>".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "the authorization server refused the login: access_denied: <b>no</b>"
        );

        let l = Listener::bind(0, "/callback").unwrap();
        let base = l.redirect_uri();
        let e = l
            .wait(expect("late"), Duration::from_millis(300))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("not completed within"), "{e}");
        closed(format!("{base}?code=late&state=late")).await;
    }

    #[tokio::test]
    async fn wrong_iss_ends_the_login() {
        let l = Listener::bind(0, "/callback").unwrap();
        let base = l.redirect_uri();
        let e = Expect {
            iss_advertised: true,
            ..expect("s")
        };
        let waiting = tokio::spawn(l.wait(e, Duration::from_secs(10)));
        let (status, page) = tokio::task::spawn_blocking(move || {
            get(&format!(
                "{base}?state=s&code=c&iss=https%3A%2F%2Fevil.example&error=shown"
            ))
        })
        .await
        .unwrap();
        assert_eq!(status, 400);
        assert!(!page.contains("shown"));
        assert!(matches!(
            waiting.await.unwrap().unwrap_err(),
            CallbackError::WrongIssuer { got, .. } if got == "https://evil.example"
        ));
    }
}
