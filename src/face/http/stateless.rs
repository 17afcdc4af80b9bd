//! 2026-07-28 requests over HTTP: no session; the revision's headers checked against the
//! body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`); the answer as JSON, or as an SSE
//! stream when notifications come first. Closing that stream cancels the request.

use super::{VERSION_HEADER, json, rpc_error, sse};
use crate::hub::Hub;
use crate::hub::stateless::{self, Call, Out, Status};
use crate::jsonrpc::Message;
use crate::revision::code::HEADER_MISMATCH;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use futures_core::Stream;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A header value too awkward for plain text travels as `=?base64?…?=`.
const B64_START: &str = "=?base64?";
const B64_END: &str = "?=";

/// Whether a session-less POST speaks the revision: its header or its envelope says so.
pub(super) fn speaks_stateless(headers: &HeaderMap, m: &Message) -> bool {
    header(headers, VERSION_HEADER).as_deref() == Some(stateless::VERSION)
        || stateless::wants_stateless(m)
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// A header value as the sender meant it.
fn decoded(value: &str) -> Option<String> {
    match value
        .strip_prefix(B64_START)
        .and_then(|v| v.strip_suffix(B64_END))
    {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_string()),
    }
}

/// Why the headers do not match the body, if they do not.
fn mismatch(headers: &HeaderMap, m: &Message) -> Option<String> {
    let version = header(headers, VERSION_HEADER);
    let in_body = stateless::envelope_version(m);
    match (&version, &in_body) {
        (None, _) => return Some("the MCP-Protocol-Version header is missing".into()),
        (Some(h), Some(b)) if h != b => {
            return Some(format!(
                "MCP-Protocol-Version header says {h:?} but params._meta says {b:?}"
            ));
        }
        _ => {}
    }
    match header(headers, "mcp-method") {
        None => return Some("the Mcp-Method header is missing".into()),
        Some(h) if h != m.method() => {
            return Some(format!(
                "Mcp-Method header says {h:?} but the body's method is {:?}",
                m.method()
            ));
        }
        _ => {}
    }
    let named = match m.method() {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        // The Tasks extension: intermediaries route a task's requests by its id.
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    let in_body = m
        .params()
        .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
        .and_then(|p| p.get(named)?.as_str().map(str::to_string));
    match header(headers, "mcp-name") {
        None => Some("the Mcp-Name header is missing".into()),
        Some(h) => {
            let h = decoded(&h);
            (h != in_body).then(|| {
                format!(
                    "Mcp-Name header says {:?} but params.{named} is {:?}",
                    h.unwrap_or_default(),
                    in_body.unwrap_or_default()
                )
            })
        }
    }
}

/// Serves one 2026-07-28 request.
pub(super) async fn post(hub: &Arc<Hub>, view: usize, headers: &HeaderMap, m: Message) -> Response {
    if let Some(why) = mismatch(headers, &m) {
        return rpc_error(StatusCode::BAD_REQUEST, m.id(), HEADER_MISMATCH, &why);
    }
    let mut call = stateless::start(hub.clone(), m, "http".into(), view);
    match call.next().await {
        Some(Out::Done { line, status }) => json(http_status(status), line),
        Some(Out::Notify(line)) => sse(Sse::new(StatelessStream {
            first: Some(line),
            call,
            done: false,
        })
        .keep_alive(KeepAlive::default())
        .into_response()),
        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn http_status(status: Status) -> StatusCode {
    match status {
        Status::Ok => StatusCode::OK,
        Status::BadRequest => StatusCode::BAD_REQUEST,
        Status::NotFound => StatusCode::NOT_FOUND,
    }
}

/// A request's notifications then its answer; no event ids, since the revision has no
/// resuming. Dropped early (the client closed it), it drops the call, which cancels it.
struct StatelessStream {
    first: Option<String>,
    call: Call,
    done: bool,
}

impl Stream for StatelessStream {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(line) = self.first.take() {
            return Poll::Ready(Some(Ok(Event::default().data(line))));
        }
        if self.done {
            return Poll::Ready(None);
        }
        match self.call.poll_next(cx) {
            Poll::Ready(Some(Out::Notify(line))) => {
                Poll::Ready(Some(Ok(Event::default().data(line))))
            }
            Poll::Ready(Some(Out::Done { line, .. })) => {
                self.done = true;
                Poll::Ready(Some(Ok(Event::default().data(line))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::decoded;

    #[test]
    fn header_values_decode_from_the_base64_sentinel() {
        assert_eq!(decoded("echo").as_deref(), Some("echo"));
        assert_eq!(decoded("=?base64?w6l0w6k=?=").as_deref(), Some("été"));
        assert_eq!(decoded("=?base64?!!?="), None);
    }
}
