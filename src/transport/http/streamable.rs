//! The Streamable HTTP client (2025-03-26 … 2025-11-25), and the task that runs a link:
//! every message is POSTed to the one endpoint; a request's answer comes as a JSON body or
//! as an SSE stream (notifications and server requests, then the response), resumed with
//! `Last-Event-ID` when it drops; a GET stream carries the server's own messages. With the
//! transport unknown, the first POST decides: 400, 404 or 405 means the HTTP+SSE
//! transport. Once the handshake says 2026-07-28 (and for the `server/discover` probe
//! before it), requests go the stateless way instead (see [`super::stateless`]).

use super::events::{Events, StreamError, message_data};
use super::shared::{Shared, answers, content_type, status_text};
use super::sse;
use super::stateless;
use super::{Command, LinkEnd, RemoteKind};
use crate::FastMap;
use crate::jsonrpc::RawObject;
use crate::transport::lines::Outgoing;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinSet};
use url::Url;

/// How long the link waits for a notification's POST before sending what follows: the
/// server should see `notifications/initialized` before the requests after it, but a server
/// that hangs must not hold everything up.
const NOTIFY_WAIT: Duration = Duration::from_secs(2);
/// The wait before reopening a stream when the server named none (`retry:`).
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// The longest wait a server's `retry:` can ask for.
const MAX_RETRY: Duration = Duration::from_secs(30);
/// Resumptions of one response stream in a row that bring no message.
const MAX_RESUMES: u32 = 5;

/// One message on its way to the server.
pub(super) struct Outbound {
    pub body: String,
    /// For a request: its id (JSON text), which the answer will carry.
    pub id: Option<String>,
    pub method: Option<String>,
    /// `params.name`, or else `params.uri` (what a stateless POST names in `Mcp-Name`).
    pub name: Option<String>,
    /// For `notifications/cancelled`: the id of the request it cancels (JSON text).
    pub cancels: Option<String>,
}

impl Outbound {
    pub(super) fn new(body: String) -> Outbound {
        let obj = RawObject::parse(&body).unwrap_or_default();
        let method = obj.get_str("method").map(|m| m.into_owned());
        let id = obj
            .get("id")
            .filter(|id| *id != "null" && method.is_some())
            .map(str::to_string);
        // Only the messages that need a member of their params have them parsed.
        let wanted = matches!(
            method.as_deref(),
            Some("tools/call" | "prompts/get" | "resources/read" | "notifications/cancelled")
        );
        let params = obj
            .get("params")
            .filter(|_| wanted)
            .and_then(|p| RawObject::parse(p).ok());
        let param = |key: &str| params.as_ref()?.get_str(key).map(|v| v.into_owned());
        let name = param("name").or_else(|| param("uri"));
        let cancels = (method.as_deref() == Some("notifications/cancelled"))
            .then(|| params.as_ref()?.get("requestId").map(str::to_string))
            .flatten();
        Outbound {
            id,
            method,
            name,
            cancels,
            body,
        }
    }
}

/// What the link does with the next message.
enum Mode {
    /// Transport unknown: the first POST decides.
    Probe,
    Streamable,
    /// Handshake HTTP+SSE, POSTing to this endpoint.
    Sse(Arc<Url>),
    /// 2026-07-28: stateless POSTs with the standard headers.
    Stateless,
}

/// Runs a link: sends every line in order until the client closes its side, and owns every
/// request and stream task (stopped with it).
pub(super) async fn run(
    shared: Arc<Shared>,
    mut lines: mpsc::UnboundedReceiver<Outgoing>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let mut tasks = JoinSet::new();
    // Stateless requests in flight, by id: aborting the POST is how they are cancelled.
    let mut stateless_requests: FastMap<String, AbortHandle> = FastMap::default();
    let mut mode = match shared.learned() {
        Some(RemoteKind::Streamable) => Mode::Streamable,
        Some(RemoteKind::Sse) => match sse::open(&shared, &mut tasks).await {
            Ok(endpoint) => Mode::Sse(endpoint),
            Err(end) => return shared.end(end),
        },
        Some(RemoteKind::Auto) | None => Mode::Probe,
    };
    loop {
        tokio::select! {
            biased;
            Some(command) = commands.recv() => match command {
                Command::Established(version) => {
                    shared.set_version(&version);
                    if version == stateless::VERSION {
                        shared.learn(RemoteKind::Streamable);
                        mode = Mode::Stateless;
                    } else if matches!(mode, Mode::Streamable) {
                        tasks.spawn(listen(shared.clone()));
                    }
                }
            },
            line = lines.recv() => {
                let Some(Outgoing::Line(line)) = line else { break };
                let out = Outbound::new(line);
                if let Some(cancelled) = &out.cancels
                    && let Some(request) = stateless_requests.remove(cancelled)
                {
                    request.abort();
                    continue;
                }
                let is_stateless = matches!(mode, Mode::Stateless);
                // The probe is a stateless request whatever the transport turns out to be.
                if is_stateless || out.method.as_deref() == Some("server/discover") {
                    match out.id.clone() {
                        Some(id) => {
                            let handle = stateless::spawn(&shared, &mut tasks, out);
                            if stateless_requests.len() >= 64 {
                                stateless_requests.retain(|_, h| !h.is_finished());
                            }
                            stateless_requests.insert(id, handle);
                        }
                        None => tracing::debug!(server = %shared.label(), method = ?out.method, "not sent: 2026-07-28 over HTTP has no such notification"),
                    }
                    continue;
                }
                match &mode {
                    Mode::Stateless => {}
                    Mode::Streamable => send(&shared, &mut tasks, out).await,
                    Mode::Sse(endpoint) => sse::send(&shared, &mut tasks, endpoint, out).await,
                    Mode::Probe => match probe(&shared, &out).await {
                        Probe::Streamable => mode = Mode::Streamable,
                        Probe::Ended => break,
                        Probe::Fallback(status) => match sse::open(&shared, &mut tasks).await {
                            Ok(endpoint) => {
                                tracing::info!(server = %shared.label(), "the POST was answered with HTTP {}: using the legacy HTTP+SSE transport", status.as_u16());
                                sse::send(&shared, &mut tasks, &endpoint, out).await;
                                mode = Mode::Sse(endpoint);
                            }
                            Err(LinkEnd::Lost(why)) => {
                                shared.end(LinkEnd::Lost(format!(
                                    "answered the POST with HTTP {} and, tried as a legacy SSE server, {why}",
                                    status_text(status)
                                )));
                                break;
                            }
                            Err(end) => {
                                shared.end(end);
                                break;
                            }
                        },
                    },
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

/// Runs `exchange` as a task of the link, bounded by the request deadline. A request's
/// exchange runs alongside the rest; a notification's or response's is waited for (a
/// moment), so the server sees them in the order they were sent.
pub(super) async fn spawn_exchange(
    shared: &Shared,
    tasks: &mut JoinSet<()>,
    is_request: bool,
    exchange: impl Future<Output = ()> + Send + 'static,
) {
    let deadline = shared.spec.deadline;
    let bounded = async move {
        let _ = tokio::time::timeout(deadline, exchange).await;
    };
    if is_request {
        tasks.spawn(bounded);
        return;
    }
    let (done, finished) = oneshot::channel();
    tasks.spawn(async move {
        bounded.await;
        let _ = done.send(());
    });
    let _ = tokio::time::timeout(NOTIFY_WAIT, finished).await;
}

pub(super) fn post(shared: &Shared, body: &str) -> RequestBuilder {
    shared
        .request(Method::POST, &shared.spec.url)
        .header(ACCEPT, "application/json, text/event-stream")
        .header(CONTENT_TYPE, "application/json")
        .body(body.to_string())
}

async fn send(shared: &Arc<Shared>, tasks: &mut JoinSet<()>, out: Outbound) {
    let is_request = out.id.is_some();
    let me = shared.clone();
    spawn_exchange(shared, tasks, is_request, async move {
        match me.send("POST", || post(&me, &out.body)).await {
            Ok(resp) => answered(&me, &out, resp).await,
            Err(end) => me.end(end),
        }
    })
    .await;
}

enum Probe {
    Streamable,
    /// Answered with this status, which the spec reads as "a legacy HTTP+SSE server".
    Fallback(StatusCode),
    Ended,
}

/// POSTs the first message, in line: its answer says which transport the server speaks.
async fn probe(shared: &Arc<Shared>, out: &Outbound) -> Probe {
    let resp = match shared.send("POST", || post(shared, &out.body)).await {
        Ok(resp) => resp,
        Err(end) => {
            shared.end(end);
            return Probe::Ended;
        }
    };
    let status = resp.status();
    if matches!(status.as_u16(), 400 | 404 | 405) {
        return Probe::Fallback(status);
    }
    shared.learn(RemoteKind::Streamable);
    let _ = tokio::time::timeout(shared.spec.deadline, answered(shared, out, resp)).await;
    Probe::Streamable
}

/// Handles the server's answer to one POST.
pub(super) async fn answered(shared: &Arc<Shared>, out: &Outbound, mut resp: Response) {
    shared.note_session(&resp);
    let status = resp.status();
    let id = out.id.as_deref();
    if status.is_success() {
        if content_type(&resp) == "text/event-stream" {
            return stream(shared, resp, id).await;
        }
        match shared.body(&mut resp).await {
            Ok(body) if body.iter().all(u8::is_ascii_whitespace) => {
                if let Some(id) = id {
                    shared.fail(
                        id,
                        &format!(
                            "accepted the request (HTTP {}) without answering it",
                            status_text(status)
                        ),
                    );
                }
            }
            Ok(body) => {
                let Some(id) = id else {
                    // A notification's answer has no body; a stray one is passed on only if
                    // it could be JSON-RPC, not a courtesy "Accepted".
                    let first = body.iter().find(|b| !b.is_ascii_whitespace());
                    if matches!(first, Some(b'{' | b'[')) {
                        shared.deliver(body);
                    }
                    return;
                };
                // This body is the only answer the request can get: one that does not carry
                // its response (the client reads only UTF-8) fails it now rather than at its
                // timeout.
                let done = std::str::from_utf8(&body).is_ok_and(|text| answers(text, id));
                shared.deliver(body);
                if !done {
                    shared.fail(
                        id,
                        &format!(
                            "answered the request (HTTP {}) with JSON that is not its response",
                            status_text(status)
                        ),
                    );
                }
            }
            Err(Some(len)) => shared.oversized(id, len),
            Err(None) => {}
        }
        return;
    }
    if status == StatusCode::NOT_FOUND && shared.has_session() {
        return shared.end(LinkEnd::SessionExpired);
    }
    shared.refused(id, resp).await;
}

/// Reads a POST's SSE answer until the response to `id` is in, resuming the stream with a
/// GET and `Last-Event-ID` when it ends early (after the server's `retry:` wait).
async fn stream(shared: &Arc<Shared>, resp: Response, id: Option<&str>) {
    let max = shared.spec.max_message_size;
    let mut events = Events::new(resp, max);
    let mut last_event: Option<String> = None;
    let mut retry = DEFAULT_RETRY;
    let mut resumes = 0;
    loop {
        let why = loop {
            match events.next().await {
                None => break "the server closed it".to_string(),
                Some(Err(StreamError::TooLarge(len))) => return shared.oversized(id, len),
                Some(Err(StreamError::Broken(e))) => break e,
                Some(Ok(mut ev)) => {
                    if let Some(event_id) = ev.id.take() {
                        last_event = Some(event_id);
                    }
                    if let Some(ms) = ev.retry {
                        retry = Duration::from_millis(ms).min(MAX_RETRY);
                    }
                    if let Some(data) = message_data(&ev) {
                        resumes = 0;
                        let done = id.is_some_and(|id| answers(data, id));
                        shared.deliver(ev.data.take().unwrap_or_default().into_bytes());
                        if done {
                            return;
                        }
                    }
                }
            }
        };
        let Some(id) = id else { return };
        if shared.has_ended() {
            return;
        }
        let Some(last) = &last_event else {
            return shared.fail(
                id,
                &format!("ended the response stream before answering ({why}), with no event id to resume it from"),
            );
        };
        resumes += 1;
        if resumes > MAX_RESUMES {
            return shared.fail(
                id,
                &format!("ended the response stream {MAX_RESUMES} times without answering ({why})"),
            );
        }
        tracing::debug!(server = %shared.label(), reason = %why, "response stream ended early; resuming");
        tokio::time::sleep(retry).await;
        match get_stream(shared, Some(last)).await {
            Ok(Some(resp)) => events = Events::new(resp, max),
            Ok(None) => {
                return shared.fail(
                    id,
                    &format!("ended the response stream before answering ({why}) and refused to resume it"),
                );
            }
            Err(end) => return shared.end(end),
        }
    }
}

/// Opens the GET stream (resuming after `last_event` when given). `Ok(None)`: the server
/// offers none (405, or another refusal).
async fn get_stream(
    shared: &Arc<Shared>,
    last_event: Option<&str>,
) -> Result<Option<Response>, LinkEnd> {
    let url = &shared.spec.url;
    let resp = shared
        .send("GET", || {
            let req = shared
                .request(Method::GET, url)
                .header(ACCEPT, "text/event-stream");
            match last_event {
                Some(last) => req.header("last-event-id", last),
                None => req,
            }
        })
        .await?;
    shared.note_session(&resp);
    let status = resp.status();
    if status.is_success() && content_type(&resp) == "text/event-stream" {
        return Ok(Some(resp));
    }
    if status == StatusCode::NOT_FOUND && shared.has_session() {
        return Err(LinkEnd::SessionExpired);
    }
    if status.is_server_error() {
        return Err(LinkEnd::Lost(format!(
            "answered the GET for its event stream with HTTP {}",
            status_text(status)
        )));
    }
    if status != StatusCode::METHOD_NOT_ALLOWED {
        tracing::debug!(server = %shared.label(), status = status.as_u16(), "no event stream on GET");
    }
    Ok(None)
}

/// The GET stream for the server's own messages, reopened (with `Last-Event-ID`) whenever
/// it ends, for as long as the link lives; a stream that keeps ending at once is reopened
/// less and less often.
async fn listen(shared: Arc<Shared>) {
    let max = shared.spec.max_message_size;
    let mut last_event: Option<String> = None;
    let mut retry = DEFAULT_RETRY;
    let mut quick_ends = 0u32;
    loop {
        let resp = match get_stream(&shared, last_event.as_deref()).await {
            Ok(Some(resp)) => resp,
            Ok(None) => return,
            Err(end) => return shared.end(end),
        };
        let opened = Instant::now();
        let mut events = Events::new(resp, max);
        loop {
            match events.next().await {
                None => break,
                Some(Err(StreamError::TooLarge(len))) => {
                    shared.oversized(None, len);
                    break;
                }
                Some(Err(StreamError::Broken(e))) => {
                    tracing::debug!(server = %shared.label(), reason = %e, "event stream broke off");
                    break;
                }
                Some(Ok(mut ev)) => {
                    if let Some(event_id) = ev.id.take() {
                        last_event = Some(event_id);
                    }
                    if let Some(ms) = ev.retry {
                        retry = Duration::from_millis(ms).min(MAX_RETRY);
                    }
                    if message_data(&ev).is_some() {
                        shared.deliver(ev.data.take().unwrap_or_default().into_bytes());
                    }
                }
            }
        }
        quick_ends = if opened.elapsed() < Duration::from_secs(1) {
            quick_ends + 1
        } else {
            0
        };
        let wait = retry.saturating_mul(1 << quick_ends.min(5)).min(MAX_RETRY);
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Deliver, RemoteKind, RemoteSpec, answer_post};
    use crate::jsonrpc::Frame;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    /// What the link delivers for a POST of `line` answered with a JSON `body`.
    async fn delivered_bytes(line: &str, body: &'static [u8]) -> Vec<Vec<u8>> {
        let spec = Arc::new(RemoteSpec {
            label: "t".into(),
            url: url::Url::parse("http://127.0.0.1:9/mcp").unwrap(),
            headers: Vec::new(),
            kind: RemoteKind::Streamable,
            max_message_size: 1 << 20,
            deadline: Duration::from_secs(5),
            credentials: None,
        });
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let deliver: Deliver = Arc::new(move |f| match f {
            Frame::Line(l) => sink.lock().unwrap().push(l),
            Frame::Oversized { .. } => panic!("oversized"),
        });
        let resp = axum::http::Response::builder()
            .status(200)
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        let end = answer_post(spec, line.into(), resp.into(), deliver)
            .await
            .unwrap();
        assert_eq!(end, None);
        seen.lock().unwrap().clone()
    }

    async fn delivered(line: &str, body: &'static str) -> Vec<String> {
        delivered_bytes(line, body.as_bytes())
            .await
            .into_iter()
            .map(|l| String::from_utf8(l).unwrap())
            .collect()
    }

    const REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;

    /// Found by the fuzzer (tests/fuzz, target `sse`): a JSON answer that was not the
    /// request's response left the request waiting for its timeout.
    #[tokio::test]
    async fn a_json_answer_without_the_response_fails_the_request() {
        let ok = r#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert_eq!(delivered(REQUEST, ok).await, [ok]);
        let batch = r#"[{"jsonrpc":"2.0","method":"notifications/message"},{"jsonrpc":"2.0","id":1,"result":{}}]"#;
        assert_eq!(delivered(REQUEST, batch).await, [batch]);
        for stray in [
            r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message"}"#,
            "jsonrpc:2.0",
        ] {
            let got = delivered(REQUEST, stray).await;
            assert_eq!(got.len(), 2, "{got:?}");
            assert_eq!(got[0], stray);
            assert!(
                got[1].contains(r#""id":1"#) && got[1].contains("not its response"),
                "{}",
                got[1]
            );
        }
        // A notification's answer is passed on only when it could be JSON-RPC.
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(delivered(note, "Accepted").await.is_empty());
    }

    /// Found by the fuzzer (tests/fuzz, target `sse`): the response in a body that is not
    /// UTF-8 counted as answered, though the client, which reads only UTF-8, drops it.
    #[tokio::test]
    async fn a_json_answer_that_is_not_utf8_fails_the_request() {
        let got = delivered_bytes(
            REQUEST,
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xff\"}",
        )
        .await;
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(String::from_utf8_lossy(&got[1]).contains("not its response"));
        let text = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\u{fffd}\"}";
        assert_eq!(delivered(REQUEST, text).await, [text]);
    }
}
