//! Streamable HTTP in its 2026-07-28 shape (§3.3): every request its own POST carrying the
//! standard headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`), no session, no GET
//! stream; a request is cancelled by aborting its POST; change notifications arrive on the
//! long-lived answer to `subscriptions/listen`.

use super::shared::{Shared, VERSION_HEADER};
use super::streamable::{Outbound, answered, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::RequestBuilder;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::sync::Arc;
use tokio::task::{AbortHandle, JoinSet};

/// The revision whose shape this is.
pub(super) const VERSION: &str = crate::revision::STATELESS_VERSION;
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
/// The methods whose `params.name` (or `params.uri`) goes in `Mcp-Name`.
const NAMED: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// POSTs one stateless request as a task of the link; the handle aborts it (which is how a
/// stateless HTTP request is cancelled). Bounded by the request deadline, except a listen
/// stream, which is meant to stay open.
pub(super) fn spawn(shared: &Arc<Shared>, tasks: &mut JoinSet<()>, out: Outbound) -> AbortHandle {
    let me = shared.clone();
    let deadline =
        (out.method.as_deref() != Some("subscriptions/listen")).then_some(shared.spec.deadline);
    tasks.spawn(async move {
        let exchange = async {
            match me.send("POST", || request(&me, &out)).await {
                Ok(resp) => answered(&me, &out, resp).await,
                Err(end) => me.end(end),
            }
        };
        match deadline {
            Some(limit) => {
                let _ = tokio::time::timeout(limit, exchange).await;
            }
            None => exchange.await,
        }
    })
}

/// The POST of `out` with the stateless headers (set, not added: the link's version header
/// may already be there).
fn request(shared: &Shared, out: &Outbound) -> RequestBuilder {
    let mut headers = HeaderMap::new();
    headers.insert(VERSION_HEADER, HeaderValue::from_static(VERSION));
    if let Some(method) = &out.method
        && let Ok(v) = HeaderValue::from_str(&header_text(method))
    {
        headers.insert(HeaderName::from_static(METHOD_HEADER), v);
    }
    if let Some(name) = &out.name
        && out.method.as_deref().is_some_and(|m| NAMED.contains(&m))
        && let Ok(v) = HeaderValue::from_str(&header_text(name))
    {
        headers.insert(HeaderName::from_static(NAME_HEADER), v);
    }
    post(shared, &out.body).headers(headers)
}

/// `value` as a header value: as it is when that is safe (visible ASCII and inner spaces),
/// else in the `=?base64?…?=` form the spec gives for everything else, and for a value
/// that looks like that form itself.
pub(super) fn header_text(value: &str) -> String {
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !sentinel;
    if plain {
        value.to_string()
    } else {
        format!("=?base64?{}?=", STANDARD.encode(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_plain_only_when_safe() {
        assert_eq!(header_text("get_time"), "get_time");
        assert_eq!(header_text("file:///a b.txt"), "file:///a b.txt");
        assert_eq!(header_text("café"), "=?base64?Y2Fmw6k=?=");
        assert_eq!(header_text(" x"), "=?base64?IHg=?=");
        assert_eq!(header_text("a\nb"), "=?base64?YQpi?=");
        assert_eq!(
            header_text("=?base64?eA==?="),
            "=?base64?PT9iYXNlNjQ/ZUE9PT89?="
        );
    }
}
