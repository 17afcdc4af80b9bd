//! The handshake-era handshake with one server (`initialize`, `notifications/initialized`) and
//! fetching complete lists across pages.

use super::connection::{CallError, Connection};
use crate::jsonrpc::{self, RawObject};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashSet;
use std::time::Duration;

/// Protocol versions of the `initialize` era that we accept from a server, oldest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// What we offer in `initialize`.
pub const OFFERED_VERSION: &str = "2025-11-25";

/// What a server told us about itself.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub protocol_version: String,
    /// `capabilities` as JSON text.
    pub capabilities: String,
    /// `serverInfo` as JSON text.
    pub server_info: String,
    pub instructions: Option<String>,
}

impl ServerInfo {
    /// Whether the server declared capability `name` (e.g. `tools`).
    pub fn has_capability(&self, name: &str) -> bool {
        RawObject::parse(&self.capabilities)
            .map(|o| o.get(name).is_some_and(|v| v != "null"))
            .unwrap_or(false)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("answered {method} with error: {error}")]
    Rejected { method: String, error: String },
    #[error("answered {method} with something that is not a valid result: {detail}")]
    Malformed { method: String, detail: String },
    #[error("speaks protocol version {0}, which openpact does not (it speaks {versions}, {stateless})", versions = HANDSHAKE_VERSIONS.join(", "), stateless = super::stateless::STATELESS_VERSION)]
    Version(String),
    #[error(
        "does not speak protocol 2026-07-28: it {0}; set \"protocol\": \"legacy\" or \"auto\" for this server"
    )]
    NotStateless(String),
    /// The server ended on the `server/discover` probe (the caller starts it afresh and
    /// uses `initialize`).
    #[error("ended on the server/discover probe: {0}")]
    ProbeDied(String),
}

#[derive(Deserialize)]
struct InitResult<'a> {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
    #[serde(borrow, default)]
    capabilities: Option<&'a RawValue>,
    #[serde(rename = "serverInfo", borrow, default)]
    server_info: Option<&'a RawValue>,
    #[serde(default)]
    instructions: Option<String>,
}

/// Runs `initialize` and sends `notifications/initialized`.
pub async fn initialize(
    conn: &Connection,
    capabilities: &str,
    timeout: Duration,
) -> Result<ServerInfo, HandshakeError> {
    let params = format!(
        "{{\"protocolVersion\":\"{OFFERED_VERSION}\",\"capabilities\":{capabilities},\"clientInfo\":{{\"name\":\"openpact\",\"version\":\"{}\"}}}}",
        env!("CARGO_PKG_VERSION")
    );
    let reply = conn.request("initialize", Some(&params), timeout).await?;
    let result = result_of("initialize", &reply)?;
    let init: InitResult<'_> =
        serde_json::from_str(result).map_err(|e| HandshakeError::Malformed {
            method: "initialize".into(),
            detail: e.to_string(),
        })?;
    if !HANDSHAKE_VERSIONS.contains(&init.protocol_version.as_str()) {
        return Err(HandshakeError::Version(init.protocol_version));
    }
    conn.notify("notifications/initialized", None);
    Ok(ServerInfo {
        protocol_version: init.protocol_version,
        capabilities: init
            .capabilities
            .map_or_else(|| "{}".to_string(), |c| c.get().to_string()),
        server_info: init
            .server_info
            .map_or_else(|| "{}".to_string(), |c| c.get().to_string()),
        instructions: init.instructions.filter(|s| !s.trim().is_empty()),
    })
}

fn result_of<'m>(method: &str, reply: &'m jsonrpc::Message) -> Result<&'m str, HandshakeError> {
    if let Some(e) = reply.error() {
        return Err(HandshakeError::Rejected {
            method: method.into(),
            error: e.to_string(),
        });
    }
    reply.result().ok_or_else(|| HandshakeError::Malformed {
        method: method.into(),
        detail: "no result".into(),
    })
}

/// One entry of a list (`tools`, `prompts`, `resources`, …) kept as the server sent it.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The entry's identifying member (`name`, or `uri` / `uriTemplate` for resources).
    pub key: String,
    /// The whole entry object as JSON text.
    pub json: Box<str>,
}

/// Limits a server cannot push past, however its cursors behave.
const MAX_PAGES: usize = 1000;

/// Fetches every page of `method`, collecting the array under `field`, keyed by `key_field`.
/// Entries that are not objects with a non-empty string key, and duplicates, are skipped with
/// a warning: one bad entry from a server must not hide the rest.
pub async fn list_all(
    conn: &Connection,
    server: &str,
    method: &str,
    field: &str,
    key_field: &str,
    timeout: Duration,
) -> Result<Vec<Entry>, HandshakeError> {
    let mut out = Vec::new();
    let mut seen_keys = HashSet::new();
    let mut seen_cursors = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .as_ref()
            .map(|c| format!("{{\"cursor\":{}}}", jsonrpc::quote(c)));
        let reply = conn.request(method, params.as_deref(), timeout).await?;
        let result = result_of(method, &reply)?;
        let page = RawObject::parse(result).map_err(|e| HandshakeError::Malformed {
            method: method.into(),
            detail: e.to_string(),
        })?;
        let items = match page.get(field) {
            Some(text) => jsonrpc::scan::array(text).map_err(|e| HandshakeError::Malformed {
                method: method.into(),
                detail: format!("`{field}` is not an array: {e}"),
            })?,
            None => Vec::new(),
        };
        for item in items {
            let key = RawObject::parse(item)
                .ok()
                .and_then(|o| o.get_str(key_field).map(Cow::into_owned));
            match key {
                Some(k) if !k.is_empty() => {
                    if seen_keys.insert(k.clone()) {
                        out.push(Entry {
                            key: k,
                            json: item.into(),
                        });
                    } else {
                        tracing::warn!(server, method, key = %k, "server listed the same entry twice; keeping the first");
                    }
                }
                _ => {
                    tracing::warn!(server, method, entry = %truncate(item, 200), "skipped an entry without a valid `{key_field}`")
                }
            }
        }
        match page.get_str("nextCursor").map(Cow::into_owned) {
            Some(next) => {
                if !seen_cursors.insert(next.clone()) {
                    tracing::warn!(
                        server,
                        method,
                        "server repeated a cursor; stopping pagination"
                    );
                    return Ok(out);
                }
                cursor = Some(next);
            }
            None => return Ok(out),
        }
    }
    tracing::warn!(server, method, "stopped after {MAX_PAGES} pages");
    Ok(out)
}

fn truncate(s: &str, n: usize) -> &str {
    let mut end = s.len().min(n);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
