//! What every request of one link shares: the client, the headers (configured, session,
//! protocol version, authorization), the retry on an authorization challenge, and the ways
//! back to the JSON-RPC client (a message, a synthesized error, the end of the link).

use super::{Deliver, LinkEnd, RemoteKind, RemoteSpec, describe};
use crate::auth::AuthError;
use crate::jsonrpc::{self, Frame, RawObject};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::oneshot;
use url::Url;

pub(super) const SESSION_HEADER: &str = "mcp-session-id";
pub(super) const VERSION_HEADER: &str = "mcp-protocol-version";
/// Headers the transport sets itself; configured ones of these names are dropped.
const MANAGED: [&str; 6] = [
    "accept",
    "content-type",
    "content-length",
    SESSION_HEADER,
    VERSION_HEADER,
    "last-event-id",
];
/// How many times one request is retried after the credentials answered a challenge
/// (a refresh, a step-up to more scopes); a server that keeps refusing gets its answer back.
const MAX_CHALLENGES: usize = 3;
/// The code of errors made up for a request the server answered with an HTTP error.
pub(super) const HTTP_ERROR: i64 = jsonrpc::code::INTERNAL_ERROR;
/// How much of an error body goes into a message.
const BODY_SNIPPET: usize = 200;

pub(super) struct Shared {
    pub spec: Arc<RemoteSpec>,
    pub client: reqwest::Client,
    /// The configured headers, checked once.
    headers: HeaderMap,
    deliver: Deliver,
    session: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    learned: Arc<Mutex<Option<RemoteKind>>>,
    ended: Mutex<Option<oneshot::Sender<LinkEnd>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub fn new(
        spec: Arc<RemoteSpec>,
        client: reqwest::Client,
        deliver: Deliver,
        learned: Arc<Mutex<Option<RemoteKind>>>,
        ended: oneshot::Sender<LinkEnd>,
    ) -> Result<Shared, String> {
        let mut headers = HeaderMap::new();
        for (name, value) in &spec.headers {
            if MANAGED.iter().any(|m| m.eq_ignore_ascii_case(name)) {
                tracing::warn!(server = %spec.label, header = %name, "configured header ignored: openpact sets it itself");
                continue;
            }
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("header `{name}` is not a valid HTTP header name"))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                format!("the value of header `{name}` is not valid in HTTP (control characters or non-ASCII text)")
            })?;
            value.set_sensitive(true);
            headers.append(name, value);
        }
        if spec.kind != RemoteKind::Auto {
            *lock(&learned) = Some(spec.kind);
        }
        Ok(Shared {
            spec,
            client,
            headers,
            deliver,
            session: Mutex::new(None),
            version: Mutex::new(None),
            learned,
            ended: Mutex::new(Some(ended)),
        })
    }

    pub fn label(&self) -> &str {
        &self.spec.label
    }

    pub fn learned(&self) -> Option<RemoteKind> {
        *lock(&self.learned)
    }

    pub fn learn(&self, kind: RemoteKind) {
        *lock(&self.learned) = Some(kind);
    }

    /// Reports why the link cannot go on; only the first report counts.
    pub fn end(&self, why: LinkEnd) {
        if let Some(tx) = lock(&self.ended).take() {
            tracing::debug!(server = %self.label(), reason = %why.reason(), "link ended");
            let _ = tx.send(why);
        }
    }

    pub fn has_ended(&self) -> bool {
        lock(&self.ended).is_none()
    }

    pub fn set_version(&self, version: &str) {
        *lock(&self.version) = HeaderValue::from_str(version).ok();
    }

    pub fn has_session(&self) -> bool {
        lock(&self.session).is_some()
    }

    /// Keeps the session id the server handed out (on the answer to `initialize`).
    pub fn note_session(&self, resp: &Response) {
        if let Some(id) = resp.headers().get(SESSION_HEADER) {
            let mut s = lock(&self.session);
            if s.is_none() {
                let mut id = id.clone();
                id.set_sensitive(true);
                *s = Some(id);
            }
        }
    }

    /// A message from the server, for the JSON-RPC client.
    pub fn deliver(&self, line: Vec<u8>) {
        (self.deliver)(Frame::Line(line));
    }

    /// Answers our request `id` with an error of our own making.
    pub fn fail(&self, id: &str, message: &str) {
        let text = format!("server '{}' {message}", self.label());
        self.deliver(jsonrpc::error(id, HTTP_ERROR, &text, None).into_bytes());
    }

    /// A message over the size limit was dropped; if it answered our request `id`, the
    /// client fails that request with the reason.
    pub fn oversized(&self, id: Option<&str>, len: usize) {
        let edges = id.map_or_else(Vec::new, |id| format!("{{\"id\":{id}}}").into_bytes());
        (self.deliver)(Frame::Oversized { len, edges });
    }

    /// A request to `url` with the configured headers, the session and the protocol
    /// version (and the credentials' `Authorization`, added when sent).
    pub fn request(&self, method: Method, url: &Url) -> RequestBuilder {
        let mut headers = self.headers.clone();
        if let Some(id) = lock(&self.session).clone() {
            headers.insert(SESSION_HEADER, id);
        }
        if let Some(v) = lock(&self.version).clone() {
            headers.insert(VERSION_HEADER, v);
        }
        self.client.request(method, url.clone()).headers(headers)
    }

    /// Sends what `build` makes, with the credentials' `Authorization`. A 401 (or a 403
    /// asking for more scope) goes to the credentials, and the request is made again once
    /// they are renewed, a bounded number of times. Network failures end the link.
    pub async fn send(
        &self,
        what: &str,
        build: impl Fn() -> RequestBuilder,
    ) -> Result<Response, LinkEnd> {
        for attempt in 0..=MAX_CHALLENGES {
            let mut req = build();
            if let Some(creds) = &self.spec.credentials
                && let Some(auth) = creds.authorization()
                && let Ok(mut value) = HeaderValue::from_str(&auth)
            {
                value.set_sensitive(true);
                // `headers` replaces a configured Authorization; `header` would add a second.
                let mut auth = HeaderMap::new();
                auth.insert(AUTHORIZATION, value);
                req = req.headers(auth);
            }
            let resp = req
                .send()
                .await
                .map_err(|e| LinkEnd::Lost(format!("is unreachable ({what} {})", describe(&e))))?;
            let status = resp.status();
            let challenge = resp
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let challenged = status == StatusCode::UNAUTHORIZED
                || (status == StatusCode::FORBIDDEN
                    && challenge
                        .as_deref()
                        .is_some_and(|c| c.contains("insufficient_scope")));
            if !challenged {
                return Ok(resp);
            }
            let Some(creds) = &self.spec.credentials else {
                return Err(LinkEnd::NeedsLogin {
                    detail: format!("it answered HTTP {}", status_text(status)),
                    how: None,
                });
            };
            if attempt == MAX_CHALLENGES {
                if status == StatusCode::UNAUTHORIZED {
                    return Err(LinkEnd::NeedsLogin {
                        detail: format!(
                            "it still answered HTTP {} after {MAX_CHALLENGES} renewed authorizations",
                            status_text(status)
                        ),
                        how: None,
                    });
                }
                return Ok(resp);
            }
            match creds.challenge(status.as_u16(), challenge.as_deref()).await {
                Ok(()) => {}
                Err(AuthError::NeedsLogin { hint, .. }) => {
                    return Err(LinkEnd::NeedsLogin {
                        detail: format!("it answered HTTP {}", status_text(status)),
                        how: Some(hint),
                    });
                }
                Err(AuthError::Failed { reason, .. }) => {
                    return Err(LinkEnd::Lost(format!("could not be authorized: {reason}")));
                }
            }
        }
        Err(LinkEnd::Lost("could not be authorized".into()))
    }

    /// Reads a whole body, at most the size limit: `Err(Some(len))` when it is larger,
    /// `Err(None)` (after ending the link) when the network fails.
    pub async fn body(&self, resp: &mut Response) -> Result<Vec<u8>, Option<usize>> {
        let max = self.spec.max_message_size;
        if let Some(len) = resp.content_length()
            && len > max as u64
        {
            return Err(Some(usize::try_from(len).unwrap_or(usize::MAX)));
        }
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > max {
                        return Err(Some(body.len() + chunk.len()));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(body),
                Err(e) => {
                    self.end(LinkEnd::Lost(format!(
                        "broke off an answer: {}",
                        describe(&e)
                    )));
                    return Err(None);
                }
            }
        }
    }

    /// The answer to request `id` when the server said `status` instead: the server's own
    /// JSON-RPC error when the body is one, else one naming the status. The body is read
    /// within a short time, as a server in trouble may never finish it.
    pub async fn http_error(&self, id: &str, mut resp: Response) {
        let status = resp.status();
        let body = tokio::time::timeout(Duration::from_secs(5), self.body(&mut resp))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        if let Some(error) = rpc_error(&text) {
            self.deliver(jsonrpc::error_raw(id, error).into_bytes());
            return;
        }
        let mut message = format!("answered HTTP {}", status_text(status));
        let snippet: String = text
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(BODY_SNIPPET)
            .collect();
        if !snippet.is_empty() {
            message.push_str(": ");
            message.push_str(&snippet);
        }
        self.fail(id, &message);
    }

    /// Handles a refusal (any status but 2xx) of a message: a request gets an error answer
    /// (the server's, or one naming the status); a 5xx also ends the link.
    pub async fn refused(&self, id: Option<&str>, resp: Response) {
        let status = resp.status();
        if status.is_server_error() {
            if let Some(id) = id {
                self.http_error(id, resp).await;
            }
            return self.end(LinkEnd::Lost(format!(
                "answered HTTP {}",
                status_text(status)
            )));
        }
        match id {
            Some(id) if status.is_redirection() => self.fail(id, &redirected(&resp)),
            Some(id) => self.http_error(id, resp).await,
            None => {
                tracing::warn!(server = %self.label(), status = status.as_u16(), "the server refused a notification or response")
            }
        }
    }

    /// Ends the server's session: DELETE with the session id, when there is one.
    pub async fn end_session(&self) {
        if !self.has_session() || self.learned() != Some(RemoteKind::Streamable) {
            return;
        }
        let url = self.spec.url.clone();
        let sent = tokio::time::timeout(
            Duration::from_secs(2),
            self.send("DELETE", || self.request(Method::DELETE, &url)),
        )
        .await;
        match sent {
            Ok(Ok(resp)) => {
                tracing::debug!(server = %self.label(), status = resp.status().as_u16(), "session ended")
            }
            Ok(Err(e)) => {
                tracing::debug!(server = %self.label(), reason = %e.reason(), "could not end the session")
            }
            Err(_) => {
                tracing::debug!(server = %self.label(), "ending the session timed out")
            }
        }
    }
}

/// Why a redirect was not followed (the client follows them only within the origin).
fn redirected(resp: &Response) -> String {
    let target = resp
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|l| l.to_str().ok())
        .and_then(|l| resp.url().join(l).ok())
        .map_or_else(
            || "elsewhere".to_string(),
            |u| u.origin().ascii_serialization(),
        );
    format!(
        "redirected the request (HTTP {}) to {target}, another origin; openpact does not follow redirects that would take the credentials elsewhere: put the final URL in the config",
        status_text(resp.status())
    )
}

/// `404 Not Found`: the code and its reason phrase.
pub(super) fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// The `error` object of a body that is a JSON-RPC error response.
fn rpc_error(body: &str) -> Option<&str> {
    let obj = RawObject::parse(body.trim()).ok()?;
    obj.get("method").is_none().then_some(())?;
    obj.get("error").filter(|e| e.starts_with('{'))
}

/// Whether `data` (one message or a batch) holds the response to our request `id`.
pub(super) fn answers(data: &str, id: &str) -> bool {
    let is_answer = |text: &str| {
        RawObject::parse(text).is_ok_and(|o| {
            o.get("method").is_none()
                && o.get("id") == Some(id)
                && (o.get("result").is_some() || o.get("error").is_some())
        })
    };
    let data = data.trim_start();
    if data.starts_with('[') {
        jsonrpc::scan::array(data).is_ok_and(|items| items.into_iter().any(is_answer))
    } else {
        is_answer(data)
    }
}

/// The `Content-Type` of a response, lower-cased, without parameters.
pub(super) fn content_type(resp: &Response) -> String {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_answer_to_an_id() {
        assert!(answers(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, "7"));
        assert!(answers(
            r#"[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m"}}]"#,
            "7"
        ));
        assert!(!answers(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#, "7"));
        assert!(!answers(r#"{"jsonrpc":"2.0","id":8,"result":{}}"#, "7"));
        assert!(!answers("not json", "7"));
    }

    #[test]
    fn recognises_json_rpc_error_bodies() {
        assert_eq!(
            rpc_error(r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad"},"id":null}"#),
            Some(r#"{"code":-32000,"message":"Bad"}"#)
        );
        assert_eq!(rpc_error("Internal Server Error"), None);
        assert_eq!(rpc_error(r#"{"error":"text"}"#), None);
    }
}
