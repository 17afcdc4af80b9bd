//! `http.get` / `http.post` for scripts, through the shared [`Fetcher`] of `builtins::net`
//! with its guard on: the same http/https-only rule, private-address rule
//! (`openpact.builtins.web.allowPrivate`), body cap and redirect limit as `web_fetch`.
//!
//! A request gets only the time the script has left (never more than the web timeout), so a
//! slow server cannot hold a script past its deadline.

use crate::builtins::net::{Fetcher, HttpRequest, NetError};
use serde_json::{Map, Value as Json, json};
use starlark::values::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a request may use from the run.
pub struct Budget<'a> {
    /// The fetcher, or why there is none.
    pub fetcher: Result<&'a Fetcher, &'a str>,
    pub web_timeout: Duration,
    pub deadline: Instant,
    pub cancel: &'a AtomicBool,
    pub timeout_message: String,
}

impl Budget<'_> {
    fn expired(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }
}

fn has(headers: &[(String, String)], name: &str) -> bool {
    headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
}

/// Sends one request; the result is the dict scripts see: `{status, body, headers}`, with
/// the first value of each header.
pub fn request(
    b: &Budget<'_>,
    method: &str,
    url: &str,
    headers: Option<Value<'_>>,
    body: Option<(&str, &str)>,
) -> anyhow::Result<Json> {
    let what = format!("http.{}", method.to_ascii_lowercase());
    if b.expired() {
        anyhow::bail!("{}", b.timeout_message);
    }
    let fetcher = b
        .fetcher
        .map_err(|e| anyhow::anyhow!("{what}: HTTP is unavailable: {e}"))?;
    let mut headers = super::sandbox::header_pairs(headers)?;
    if !has(&headers, "user-agent") {
        headers.push(("User-Agent".into(), super::sandbox::USER_AGENT.into()));
    }
    let body = body.map(|(text, content_type)| {
        if !has(&headers, "content-type") {
            headers.push(("Content-Type".into(), content_type.to_string()));
        }
        text.as_bytes().to_vec()
    });
    let left = b.deadline.saturating_duration_since(Instant::now());
    let limited_by_script = left < b.web_timeout;
    let resp = fetcher
        .fetch_blocking(HttpRequest {
            method: method.to_string(),
            url: url.to_string(),
            headers,
            body,
            timeout: Some(left.min(b.web_timeout)),
        })
        .map_err(|e| match e {
            // Cut short by the script's own deadline: say so, not "the server was slow".
            NetError::Timeout(_) if limited_by_script || b.expired() => {
                anyhow::anyhow!("{}", b.timeout_message)
            }
            e => anyhow::anyhow!("{what}: {e}"),
        })?;
    let mut hs = Map::new();
    for (k, v) in resp.headers {
        hs.entry(k).or_insert(Json::String(v));
    }
    Ok(json!({
        "status": resp.status,
        "body": String::from_utf8_lossy(&resp.body),
        "headers": hs,
    }))
}
