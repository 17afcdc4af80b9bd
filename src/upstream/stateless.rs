//! The 2026-07-28 protocol towards one server ("modern", no `initialize`): the `_meta`
//! envelope every request carries, `server/discover` in place of the handshake (also as the
//! probe that tells a stateless server from a handshake one), and the `subscriptions/listen`
//! filter that brings list and resource changes.

use super::connection::{CallError, Connection};
use super::handshake::{HANDSHAKE_VERSIONS, HandshakeError, ServerInfo};
use crate::jsonrpc::{self, Message, RawObject};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::BTreeSet;
use std::time::Duration;

pub use crate::revision::{STATELESS_VERSION, code, meta};

/// What the hub declares to a stateless server on every request: all it can bridge to its
/// clients (form and URL elicitation, sampling, roots — each reaches a client that declared
/// it; for one that did not, the call fails saying so — and MCP Apps views, which a client
/// without the extension is shown tools without). Unlike a handshake `initialize`, these
/// do not depend on which client is connected: a stateless server must not vary its lists per
/// request, and one hub serves many clients.
pub const CLIENT_CAPABILITIES: &str = r#"{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{},"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}"#;

/// How long `auto` waits for a stdio server to answer the `server/discover` probe before
/// taking it for a handshake server. A stateless server answers at once (it has nothing to set
/// up), while some handshake servers never answer a method they do not know before
/// `initialize`: the wait is short so that such a server only costs its start this much.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The hub's `clientInfo`.
fn client_info() -> String {
    format!(
        "{{\"name\":\"openpact\",\"version\":\"{}\"}}",
        env!("CARGO_PKG_VERSION")
    )
}

/// `params` (a JSON object, or none) with the stateless `_meta` envelope: our protocol version
/// and `clientInfo` always; `clientCapabilities` and the log level only where the caller
/// has not put its own (a client's request passed on keeps what that client declared).
pub fn stamp(params: Option<&str>, log_level: Option<&str>) -> String {
    let obj = params
        .and_then(|p| RawObject::parse(p).ok())
        .unwrap_or_default();
    let existing = obj.get("_meta").and_then(|m| RawObject::parse(m).ok());
    let has = |key: &str| existing.as_ref().is_some_and(|m| m.get(key).is_some());
    let version = jsonrpc::quote(STATELESS_VERSION);
    let info = client_info();
    let level = log_level.map(jsonrpc::quote);
    let mut edits: Vec<(&str, Option<&str>)> = vec![
        (meta::PROTOCOL_VERSION, Some(&version)),
        (meta::CLIENT_INFO, Some(&info)),
    ];
    if !has(meta::CLIENT_CAPABILITIES) {
        edits.push((meta::CLIENT_CAPABILITIES, Some(CLIENT_CAPABILITIES)));
    }
    if let Some(level) = &level
        && !has(meta::LOG_LEVEL)
    {
        edits.push((meta::LOG_LEVEL, Some(level)));
    }
    let meta = existing.unwrap_or_default().rewrite(&edits);
    match params {
        Some(p) if RawObject::parse(p).is_ok() => obj.with("_meta", &meta),
        _ => format!("{{\"_meta\":{meta}}}"),
    }
}

/// What the `server/discover` probe found.
#[derive(Debug)]
pub enum Discovery {
    /// A 2026-07-28 server, described as the rest of the hub expects a server to be.
    Stateless(ServerInfo),
    /// Not (or not usably) a stateless server: the reason, for the log.
    Handshake(String),
    /// The server's process or connection ended on the probe.
    Died(String),
}

#[derive(Deserialize)]
struct DiscoverResult<'a> {
    #[serde(rename = "supportedVersions", default)]
    supported_versions: Vec<String>,
    #[serde(borrow, default)]
    capabilities: Option<&'a RawValue>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
}

/// Sends `server/discover` (waiting at most `timeout`) and reads the answer per §1.4: a
/// `DiscoverResult` or a recognized stateless error means a stateless server, anything else
/// (another error, silence) a handshake one. A stateless server that refuses us outright is an
/// error, not a reason to fall back: it would refuse `initialize` too.
pub async fn discover(conn: &Connection, timeout: Duration) -> Result<Discovery, HandshakeError> {
    const METHOD: &str = "server/discover";
    let params = stamp(None, None);
    let reply = match conn.request(METHOD, Some(&params), timeout).await {
        Ok(reply) => reply,
        Err(CallError::Timeout { after, .. }) => {
            return Ok(Discovery::Handshake(format!(
                "did not answer {METHOD} within {}",
                crate::config::human_duration(after)
            )));
        }
        Err(CallError::Closed { reason, .. }) => return Ok(Discovery::Died(reason)),
        Err(e) => return Err(e.into()),
    };
    if let Some(error) = reply.error() {
        return read_error(error);
    }
    let Some(result) = reply.result() else {
        return Ok(Discovery::Handshake(format!(
            "answered {METHOD} with no result"
        )));
    };
    let Ok(found) = serde_json::from_str::<DiscoverResult<'_>>(result) else {
        return Ok(Discovery::Handshake(format!(
            "answered {METHOD} with something that is not a DiscoverResult"
        )));
    };
    if !found
        .supported_versions
        .iter()
        .any(|v| v == STATELESS_VERSION)
    {
        return match handshake_among(&found.supported_versions) {
            Some(v) => Ok(Discovery::Handshake(format!(
                "offers {} but not {STATELESS_VERSION}; using {v} through initialize",
                found.supported_versions.join(", ")
            ))),
            None => Err(HandshakeError::Version(found.supported_versions.join(", "))),
        };
    }
    let server_info = found
        .meta
        .and_then(|m| RawObject::parse(m.get()).ok()?.get(meta::SERVER_INFO))
        .unwrap_or("{}")
        .to_string();
    Ok(Discovery::Stateless(ServerInfo {
        protocol_version: STATELESS_VERSION.to_string(),
        capabilities: found
            .capabilities
            .map_or_else(|| "{}".to_string(), |c| c.get().to_string()),
        server_info,
        instructions: found.instructions.filter(|s| !s.trim().is_empty()),
    }))
}

/// A JSON-RPC error answering the probe.
fn read_error(error: &str) -> Result<Discovery, HandshakeError> {
    let obj = RawObject::parse(error).unwrap_or_default();
    let code: i64 = obj.get("code").and_then(|c| c.parse().ok()).unwrap_or(0);
    let rejected = || HandshakeError::Rejected {
        method: "server/discover".into(),
        error: error.to_string(),
    };
    match code {
        code::UNSUPPORTED_VERSION => {
            // Stateless: the server names the versions it takes. Ours is not among them (we
            // sent it); a handshake one is usable through `initialize`.
            let supported: Vec<String> = obj
                .get("data")
                .and_then(|d| RawObject::parse(d).ok()?.get("supported"))
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or_default();
            if supported.iter().any(|v| v == STATELESS_VERSION) {
                return Err(rejected());
            }
            match handshake_among(&supported) {
                Some(v) => Ok(Discovery::Handshake(format!(
                    "does not take {STATELESS_VERSION} (it supports {}); using {v} through initialize",
                    supported.join(", ")
                ))),
                None if supported.is_empty() => Err(rejected()),
                None => Err(HandshakeError::Version(supported.join(", "))),
            }
        }
        code::MISSING_CLIENT_CAPABILITY | code::HEADER_MISMATCH => Err(rejected()),
        _ => Ok(Discovery::Handshake(format!(
            "answered server/discover with error {code}"
        ))),
    }
}

/// The newest `initialize`-era version in `versions`, if any.
fn handshake_among(versions: &[String]) -> Option<&'static str> {
    HANDSHAKE_VERSIONS
        .iter()
        .rev()
        .find(|v| versions.iter().any(|s| s == *v))
        .copied()
}

/// The `subscriptions/listen` params for what the server can tell (its list capabilities
/// with `listChanged`) and the resource URIs the hub's clients subscribed to; None when
/// there is nothing to listen for.
pub fn listen_params(info: &ServerInfo, uris: &BTreeSet<String>) -> Option<String> {
    let caps = RawObject::parse(&info.capabilities).unwrap_or_default();
    let flag = |cap: &str, key: &str| {
        caps.get(cap)
            .and_then(|c| RawObject::parse(c).ok()?.get(key).map(|v| v == "true"))
            .unwrap_or(false)
    };
    let mut filter = serde_json::Map::new();
    for (cap, field) in [
        ("tools", "toolsListChanged"),
        ("prompts", "promptsListChanged"),
        ("resources", "resourcesListChanged"),
    ] {
        if flag(cap, "listChanged") {
            filter.insert(field.into(), serde_json::Value::Bool(true));
        }
    }
    if !uris.is_empty() && flag("resources", "subscribe") {
        filter.insert("resourceSubscriptions".into(), serde_json::json!(uris));
    }
    (!filter.is_empty()).then(|| serde_json::json!({ "notifications": filter }).to_string())
}

/// A reply made by the hub itself for a request a stateless server has no method for
/// (`ping`, `logging/setLevel`, `resources/subscribe`: the hub does their job another way).
pub fn local_reply(result: &str) -> Result<Message, CallError> {
    Message::parse(jsonrpc::result("0", result).into_boxed_str()).map_err(|e| CallError::Closed {
        server: String::new(),
        reason: format!("made an unreadable reply: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn parsed(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn stamps_the_envelope_and_keeps_the_rest() {
        let p = parsed(&stamp(None, None));
        assert_eq!(p["_meta"][meta::PROTOCOL_VERSION], STATELESS_VERSION);
        assert_eq!(p["_meta"][meta::CLIENT_INFO]["name"], "openpact");
        assert!(p["_meta"][meta::CLIENT_CAPABILITIES]["elicitation"]["url"].is_object());
        assert!(p["_meta"].get(meta::LOG_LEVEL).is_none());

        let p = parsed(&stamp(
            Some(r#"{"name":"t","arguments":{"a":1},"_meta":{"progressToken":"x"}}"#),
            Some("debug"),
        ));
        assert_eq!(p["name"], "t");
        assert_eq!(p["arguments"], json!({"a": 1}));
        assert_eq!(p["_meta"]["progressToken"], "x");
        assert_eq!(p["_meta"][meta::LOG_LEVEL], "debug");

        // A client's own capabilities and level, passed on, win over the hub's.
        let own = r#"{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"error"}}"#;
        let p = parsed(&stamp(Some(own), Some("debug")));
        assert_eq!(p["_meta"][meta::CLIENT_CAPABILITIES], json!({}));
        assert_eq!(p["_meta"][meta::LOG_LEVEL], "error");
    }

    #[test]
    fn reads_probe_errors_by_code_not_by_hope() {
        let handshake = read_error(r#"{"code":-32601,"message":"Method not found"}"#).unwrap();
        assert!(
            matches!(handshake, Discovery::Handshake(_)),
            "{handshake:?}"
        );
        let older = read_error(
            r#"{"code":-32022,"message":"v","data":{"supported":["2025-06-18"],"requested":"2026-07-28"}}"#,
        )
        .unwrap();
        assert!(matches!(older, Discovery::Handshake(ref w) if w.contains("2025-06-18")));
        let future = read_error(
            r#"{"code":-32022,"message":"v","data":{"supported":["2027-01-01"],"requested":"2026-07-28"}}"#,
        );
        assert!(matches!(future, Err(HandshakeError::Version(ref v)) if v == "2027-01-01"));
        let refused = read_error(r#"{"code":-32021,"message":"needs roots"}"#);
        assert!(matches!(refused, Err(HandshakeError::Rejected { .. })));
    }

    #[test]
    fn listens_for_what_the_server_can_tell() {
        let info = ServerInfo {
            protocol_version: STATELESS_VERSION.into(),
            capabilities: r#"{"tools":{"listChanged":true},"resources":{"subscribe":true}}"#.into(),
            server_info: "{}".into(),
            instructions: None,
        };
        let none = BTreeSet::new();
        assert_eq!(
            parsed(&listen_params(&info, &none).unwrap()),
            json!({"notifications": {"toolsListChanged": true}})
        );
        let uris: BTreeSet<String> = ["a://x".to_string()].into();
        assert_eq!(
            parsed(&listen_params(&info, &uris).unwrap())["notifications"]["resourceSubscriptions"],
            json!(["a://x"])
        );
        let quiet = ServerInfo {
            capabilities: r#"{"tools":{}}"#.into(),
            ..info
        };
        assert!(listen_params(&quiet, &none).is_none());
    }
}
