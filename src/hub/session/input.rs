//! A 2026-07-28 server's `input_required` results (§5.2), fulfilled for a client that asks
//! through server→client requests (handshake, §5.3 "legacy ↔ modern"): each of the server's
//! input requests becomes a real request to this session's client (only for what the client
//! declared), and the call is retried upstream with the answers and the server's
//! `requestState`, round after round, until the server gives its result.

use super::Session;
use crate::jsonrpc::{self, MemberProbe, Message, RawObject};
use crate::upstream::{CallError, Upstream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// Rounds of input one call may take: a server that keeps asking is cut off with an error
/// rather than looping forever.
pub const MAX_INPUT_ROUNDS: usize = 8;
/// The JSON-RPC code of a call that could not complete because what the server asked for
/// cannot reach the client (the spec's `MissingRequiredClientCapabilityError`).
pub const INPUT_NOT_BRIDGED: i64 = -32021;

/// URL-mode elicitations minted for clients (a handshake client needs an `elicitationId`, which
/// a 2026-07-28 server no longer gives).
static NEXT_ELICITATION: AtomicU64 = AtomicU64::new(1);

/// Why a server's input request cannot be answered by this session's client (the call ends
/// with it, as an error of code [`INPUT_NOT_BRIDGED`]).
#[derive(Debug, thiserror::Error)]
pub(super) enum InputError {
    #[error("server '{server}' sent inputRequests that are not an object: {why}")]
    NotAnObject { server: String, why: String },
    #[error(
        "server '{server}' asked for input by {asked:?}, which openpact cannot pass to a client; the {method} could not complete"
    )]
    NotPassable {
        server: String,
        asked: String,
        method: String,
    },
    #[error(
        "server '{server}' needs the client to answer {asked} ({missing}), which the client connected to openpact did not declare; the {method} could not complete"
    )]
    Undeclared {
        server: String,
        asked: String,
        missing: &'static str,
        method: String,
    },
    #[error("the client did not answer {asked} for server '{server}'")]
    Unanswered { server: String, asked: String },
    #[error("the client refused {asked} for server '{server}': {error}")]
    Refused {
        server: String,
        asked: String,
        error: String,
    },
}

impl Session {
    /// Sends a routed `tools/call`, `prompts/get` or `resources/read` to `up` and, while the
    /// server answers `input_required`, gets the inputs from the client and retries (with a
    /// new id, the same params plus `inputResponses` and the `requestState` as sent). The
    /// final answer comes back as the server gave it; input that cannot reach the client
    /// ends the call with an error that says what could not.
    pub(super) async fn request_upstream(
        self: &Arc<Self>,
        up: &Upstream,
        method: &str,
        params: &str,
    ) -> Result<Message, CallError> {
        self.request_upstream_within(up, method, params, None).await
    }

    /// [`Session::request_upstream`] waiting `timeout` for each answer instead of the server's
    /// configured timeout when given.
    pub(super) async fn request_upstream_within(
        self: &Arc<Self>,
        up: &Upstream,
        method: &str,
        params: &str,
        timeout: Option<Duration>,
    ) -> Result<Message, CallError> {
        let mut reply = self
            .hub
            .request_for_within(self, up, method, params, timeout)
            .await?;
        let mut round = 0;
        loop {
            round += 1;
            let Some(result) = reply.result().filter(|r| asks_for_input(r)) else {
                return Ok(reply);
            };
            let asked = RawObject::parse(result).unwrap_or_default();
            if round > MAX_INPUT_ROUNDS {
                return not_bridged(&format!(
                    "server '{}' still asked for input after {MAX_INPUT_ROUNDS} rounds of answers; the {method} was abandoned",
                    up.name()
                ));
            }
            let responses = match asked.get("inputRequests") {
                Some(requests) => match self.fulfil(up.name(), method, requests).await {
                    Ok(responses) => Some(responses),
                    Err(why) => return not_bridged(&why.to_string()),
                },
                None => None,
            };
            let retry = RawObject::parse(params).unwrap_or_default().rewrite(&[
                ("inputResponses", responses.as_deref()),
                // Echoed byte for byte: the raw JSON text as the server wrote it.
                ("requestState", asked.get("requestState")),
            ]);
            reply = self
                .hub
                .request_for_within(self, up, method, &retry, timeout)
                .await?;
        }
    }

    /// Asks the client each of `requests` (an `inputRequests` object) in turn; the
    /// `inputResponses` object, or why it cannot be had.
    pub(super) async fn fulfil(
        &self,
        server: &str,
        method: &str,
        requests: &str,
    ) -> Result<String, InputError> {
        let server = server.to_string();
        let requests = RawObject::parse(requests).map_err(|e| InputError::NotAnObject {
            server: server.clone(),
            why: e.to_string(),
        })?;
        let mut responses: Vec<(String, String)> = Vec::new();
        for key in requests.keys() {
            let entry = requests
                .get(key)
                .and_then(|e| RawObject::parse(e).ok())
                .unwrap_or_default();
            let asked = entry.get_str("method").unwrap_or_default();
            let params = entry.get("params").unwrap_or("{}");
            let Some((params, needs)) = for_client(&asked, params) else {
                return Err(InputError::NotPassable {
                    server,
                    asked: asked.into_owned(),
                    method: method.to_string(),
                });
            };
            if let Some(missing) = needs.iter().find(|n| !self.declared(n)) {
                return Err(InputError::Undeclared {
                    server,
                    asked: asked.into_owned(),
                    missing,
                    method: method.to_string(),
                });
            }
            let Some(reply) = self
                .ask_client(&asked, &params, None, "the call ended")
                .await
            else {
                return Err(InputError::Unanswered {
                    server,
                    asked: asked.into_owned(),
                });
            };
            if let Some(error) = reply.error() {
                return Err(InputError::Refused {
                    server,
                    asked: asked.into_owned(),
                    error: error.to_string(),
                });
            }
            let result = reply.result().unwrap_or("{}");
            let plain = RawObject::parse(result)
                .map(|r| r.rewrite(&[("resultType", None), ("_meta", None)]))
                .unwrap_or_else(|_| result.to_string());
            responses.push((jsonrpc::quote(key), plain));
        }
        let members: Vec<String> = responses.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        Ok(format!("{{{}}}", members.join(",")))
    }

    /// Whether the client declared `capability` (`elicitation.url` for URL elicitation).
    fn declared(&self, capability: &str) -> bool {
        match capability {
            "elicitation.url" => self.can_open_urls(),
            cap => self.client_has(cap),
        }
    }
}

/// The params to send the client for an input request of `method`, and the client
/// capabilities that takes (`elicitation.url` for URL mode, which gets the `elicitationId`
/// a handshake client expects); None for a method no client answers.
fn for_client(method: &str, params: &str) -> Option<(String, Vec<&'static str>)> {
    let capability = crate::hub::client_capability(method)?;
    if method == "elicitation/create" {
        let obj = RawObject::parse(params).ok()?;
        if obj.get_str("mode").as_deref() == Some("url") {
            let id = format!(
                "openpact-{}-{}",
                std::process::id(),
                NEXT_ELICITATION.fetch_add(1, Ordering::Relaxed)
            );
            let params = obj.with("elicitationId", &jsonrpc::quote(&id));
            return Some((params, vec![capability, "elicitation.url"]));
        }
    }
    Some((params.to_string(), vec![capability]))
}

/// Whether a result is an `input_required` one (cheaply ruling out the usual result).
fn asks_for_input(result: &str) -> bool {
    static PROBE: LazyLock<MemberProbe> = LazyLock::new(|| MemberProbe::new("resultType"));
    PROBE.may_have(result)
        && RawObject::parse(result)
            .ok()
            .and_then(|o| o.get_str("resultType").map(|t| t == "input_required"))
            .unwrap_or(false)
}

/// The call's answer when the server's input cannot be had.
pub(super) fn not_bridged(message: &str) -> Result<Message, CallError> {
    tracing::info!("{message}");
    let line = jsonrpc::error("0", INPUT_NOT_BRIDGED, message, None);
    Message::parse(line.into_boxed_str()).map_err(|e| CallError::Closed {
        server: String::new(),
        reason: format!("made an unreadable reply: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::{asks_for_input, for_client};

    #[test]
    fn each_input_request_needs_its_capability() {
        let form = r#"{"mode":"form","message":"Name?","requestedSchema":{"type":"object"}}"#;
        assert_eq!(
            for_client("elicitation/create", form),
            Some((form.to_string(), vec!["elicitation"]))
        );
        let (params, needs) = for_client(
            "elicitation/create",
            r#"{"mode":"url","message":"Log in","url":"https://example.com/a"}"#,
        )
        .unwrap();
        assert_eq!(needs, ["elicitation", "elicitation.url"]);
        let params: serde_json::Value = serde_json::from_str(&params).unwrap();
        assert!(
            params["elicitationId"]
                .as_str()
                .is_some_and(|id| id.starts_with("openpact-")),
            "{params}"
        );
        assert_eq!(params["url"], "https://example.com/a");
        assert_eq!(for_client("roots/list", "{}").unwrap().1, ["roots"]);
        assert_eq!(
            for_client("sampling/createMessage", "{}").unwrap().1,
            ["sampling"]
        );
        assert_eq!(for_client("tools/call", "{}"), None);
    }

    #[test]
    fn only_input_required_results_ask() {
        assert!(asks_for_input(
            r#"{"resultType":"input_required","inputRequests":{}}"#
        ));
        assert!(!asks_for_input(r#"{"resultType":"complete","content":[]}"#));
        assert!(!asks_for_input(r#"{"content":[]}"#));
        assert!(!asks_for_input(
            r#"{"content":[{"type":"text","text":"\"resultType\":\"input_required\""}]}"#
        ));
    }
}
