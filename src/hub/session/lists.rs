//! What the session answers from the hub alone: `initialize` (taking note of the client
//! first) and pages of the merged lists, with the hub's own cursors.

use super::{Session, lock};
use crate::jsonrpc::{self, Message, RawObject, code};
use crate::upstream::{HANDSHAKE_VERSIONS, OFFERED_VERSION};
use std::time::Duration;

/// How long `initialize` may wait for servers still starting.
const INITIALIZE_GRACE: Duration = Duration::from_millis(750);

impl Session {
    /// Takes note of the client (synchronously, so requests right behind `initialize` already
    /// see its capabilities) and tells the servers what it supports.
    pub(super) fn accept_client(&self, m: &Message) {
        let params = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .unwrap_or_default();
        if let Some(name) = params
            .get("clientInfo")
            .and_then(|c| RawObject::parse(c).ok())
            .and_then(|c| c.get_str("name"))
        {
            *lock(&self.client_name) = name.into();
        }
        let caps = params.get("capabilities");
        *lock(&self.capabilities) = caps.map(str::to_string);
        self.hub.declare_client(caps);
    }

    /// The `initialize` result. Servers that come up quickly (most do, once they know the
    /// client's capabilities) get a moment to, so their instructions and capabilities are in
    /// it; a slow server is never waited for beyond that.
    pub(super) async fn initialize(&self, m: &Message) -> String {
        self.hub.settled(INITIALIZE_GRACE).await;
        let params = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .unwrap_or_default();
        let version = match params.get_str("protocolVersion") {
            Some(v) if HANDSHAKE_VERSIONS.contains(&v.as_ref()) => v.into_owned(),
            _ => OFFERED_VERSION.to_string(),
        };
        let mut result = format!(
            "{{\"protocolVersion\":\"{version}\",\"capabilities\":{},\"serverInfo\":{{\"name\":\"openpact\",\"title\":\"openpact MCP hub\",\"version\":\"{}\"}}",
            self.hub.capabilities(),
            env!("CARGO_PKG_VERSION")
        );
        result.push_str(",\"instructions\":");
        result.push_str(&jsonrpc::quote(&self.hub.instructions(self.view())));
        result.push('}');
        jsonrpc::result(m.id(), &result)
    }

    /// One page of a merged list, with the hub's own cursors.
    pub(super) async fn list(&self, m: &Message) -> String {
        self.hub.startup_grace().await;
        let catalog = self.catalog();
        let tools = catalog.listed_tools();
        let (field, fingerprint, items): (&str, u64, Vec<&str>) = match m.method() {
            "tools/list" => (
                "tools",
                tools.fingerprint,
                tools.jsons_for(self.shows_apps()).collect(),
            ),
            "prompts/list" => (
                "prompts",
                catalog.prompts.fingerprint,
                catalog.prompts.jsons().collect(),
            ),
            "resources/list" => (
                "resources",
                catalog.resources_fingerprint,
                catalog.resources.iter().map(|r| &*r.json).collect(),
            ),
            _ => (
                "resourceTemplates",
                catalog.templates_fingerprint,
                catalog.templates.iter().map(|r| &*r.json).collect(),
            ),
        };
        let cursor_raw = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .and_then(|o| o.get("cursor").map(str::to_string));
        let cursor = match cursor_raw.as_deref() {
            None | Some("null") => None,
            Some(raw) => match serde_json::from_str::<String>(raw) {
                Ok(c) => Some(c),
                Err(_) => {
                    return jsonrpc::error(
                        m.id(),
                        code::INVALID_PARAMS,
                        "Invalid cursor: it must be a string from nextCursor",
                        None,
                    );
                }
            },
        };

        let start = match cursor {
            None => 0,
            Some(c) => match parse_cursor(&c, fingerprint) {
                Some(offset) if offset <= items.len() => offset,
                _ => {
                    return jsonrpc::error(
                        m.id(),
                        code::INVALID_PARAMS,
                        "Invalid or stale cursor: the list changed; list again from the start",
                        None,
                    );
                }
            },
        };
        self.given(m.method(), fingerprint);
        let end = (start + self.hub.settings.page_size).min(items.len());
        let page = &items[start..end];
        let mut result =
            String::with_capacity(32 + page.iter().map(|t| t.len() + 1).sum::<usize>());
        result.push_str("{\"");
        result.push_str(field);
        result.push_str("\":[");
        for (i, t) in page.iter().enumerate() {
            if i > 0 {
                result.push(',');
            }
            result.push_str(t);
        }
        result.push(']');
        if end < items.len() {
            result.push_str(",\"nextCursor\":");
            result.push_str(&jsonrpc::quote(&format!("{fingerprint:016x}.{end}")));
        }
        result.push('}');
        jsonrpc::result(m.id(), &result)
    }
}

fn parse_cursor(cursor: &str, fingerprint: u64) -> Option<usize> {
    let (fp, offset) = cursor.split_once('.')?;
    if u64::from_str_radix(fp, 16).ok()? != fingerprint {
        return None;
    }
    offset.parse().ok()
}
