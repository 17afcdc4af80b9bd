//! The telemetry of a client's request (see [`crate::telemetry`]): its server span, whose
//! parent is the trace context of the request's `_meta`, entered while the request is
//! served, and its outcome and duration recorded when it ends. Nothing of it runs while
//! telemetry is off.

use super::{Reply, Session};
use crate::jsonrpc::{Message, RawObject};
use crate::telemetry::{self, META_KEYS, Operation, Request, Side};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

tokio::task_local! {
    /// The request being served on this task: where its answer's outcome is noted.
    static CURRENT: Arc<Operation>;
}

/// A request's future with its server span entered at every poll; `op` is `None` when
/// telemetry is off, and then it only polls.
pub(super) struct Traced<F> {
    fut: Pin<Box<F>>,
    op: Option<Arc<Operation>>,
}

impl<F> Traced<F> {
    /// `fut` serving the request of `op` (from [`operation`]).
    pub(super) fn new(op: Option<Arc<Operation>>, fut: Pin<Box<F>>) -> Traced<F> {
        Traced { fut, op }
    }
}

/// The operation of serving `m`; `None` (at the cost of one load) while telemetry is off.
pub(super) fn operation(session: &Session, m: &Message) -> Option<Arc<Operation>> {
    if !telemetry::on() {
        return None;
    }
    server_operation(session, m).map(Arc::new)
}

impl<F> Future for Traced<F>
where
    F: Future,
    F::Output: Into<Reply>,
{
    type Output = Reply;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        let Traced { fut, op } = &mut *self;
        let Some(op) = op else {
            return fut.as_mut().poll(cx).map(Into::into);
        };
        let _entered = op.span.enter();
        let polled = CURRENT.sync_scope(op.clone(), || fut.as_mut().poll(cx).map(Into::into));
        if let Poll::Ready(reply) = &polled {
            if let Reply::Line(line) = reply {
                note(op, line);
            }
            op.end();
        }
        polled
    }
}

/// The answer `line` a request handler sent itself: its outcome noted on the request's
/// operation (no-op while telemetry is off).
pub(super) fn answered(line: &str, policy: &crate::policy::Policy) {
    if !telemetry::on() {
        return;
    }
    let _ = CURRENT.try_with(|op| {
        note(op, line);
        if telemetry::arguments()
            && let Ok(m) = Message::parse(line.into())
            && let Some(result) = m.result()
        {
            let redacted = policy.redact(result);
            op.span.record("gen_ai.tool.call.result", redacted.as_ref());
        }
    });
}

fn note(op: &Operation, line: &str) {
    if let Ok(m) = Message::parse(line.into())
        && let Some(error) = error_type(&m)
    {
        op.failed(&error);
    }
}

/// `error.type` of a reply, per the MCP conventions: the JSON-RPC error code, or
/// `tool_error` for a tool result with `isError: true`.
pub(crate) fn error_type(m: &Message) -> Option<String> {
    if let Some(error) = m.error() {
        let code = RawObject::parse(error)
            .ok()
            .and_then(|e| e.get("code").map(str::to_string));
        return Some(code.unwrap_or_else(|| "error".into()));
    }
    m.result()
        .is_some_and(super::calls::is_error_result)
        .then(|| "tool_error".into())
}

/// What a request acts on, for its span's name and attributes: the tool's or prompt's name,
/// or the resource's URI.
pub(crate) fn target<'p>(
    method: &str,
    params: Option<&RawObject<'p>>,
) -> (
    Option<std::borrow::Cow<'p, str>>,
    Option<std::borrow::Cow<'p, str>>,
) {
    let get = |key: &str| params.and_then(|o| o.get_str(key));
    let tool = matches!(method, "tools/call" | "prompts/get")
        .then(|| get("name"))
        .flatten();
    let uri = method
        .starts_with("resources/")
        .then(|| get("uri"))
        .flatten();
    (tool, uri)
}

/// `m`'s server span, a child of the trace context in its `_meta` when there is one.
fn server_operation(session: &Session, m: &Message) -> Option<Operation> {
    let params = m.params().and_then(|p| RawObject::parse(p).ok());
    let meta = params
        .as_ref()
        .and_then(|o| o.get("_meta"))
        .and_then(|t| RawObject::parse(t).ok());
    let meta_str = |key: &str| meta.as_ref().and_then(|o| o.get_str(key));
    let method = m.method();
    let (tool, uri) = target(method, params.as_ref());
    let id = m.id();
    let version = meta_str(crate::revision::meta::PROTOCOL_VERSION);
    let op = Operation::new(
        Side::Server,
        &Request {
            method,
            tool: tool.as_deref(),
            uri: uri.as_deref(),
            request_id: Some(id.trim_matches('"')),
            protocol_version: version.as_deref(),
            session_id: None,
        },
    )?;
    let carrier: HashMap<String, String> = META_KEYS
        .iter()
        .filter_map(|k| meta_str(k).map(|v| (k.to_string(), v.into_owned())))
        .collect();
    telemetry::adopt(&op.span, &carrier);
    if telemetry::arguments()
        && let Some(arguments) = params.as_ref().and_then(|o| o.get("arguments"))
    {
        let redacted = session.hub.policy().redact(arguments).into_owned();
        op.span
            .record("gen_ai.tool.call.arguments", redacted.as_str());
    }
    Some(op)
}
