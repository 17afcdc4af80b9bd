//! MCP Apps (the `io.modelcontextprotocol/ui` extension, SEP-1865) through the hub: each
//! server's `ui://` views under a URI of the hub's own (two servers may both serve
//! `ui://widget/main.html`), tools marked for the view only, and the UI metadata a client
//! that did not declare the extension is not shown.

use crate::jsonrpc::{self, MemberProbe, Message, RawObject};
use crate::upstream::CallError;
use serde_json::{Map, Value};
use std::sync::LazyLock;

/// The extension's identifier under `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/ui";
/// The flat `_meta` key older hosts read a tool's view from (the SDK writes both forms).
const FLAT_KEY: &str = "ui/resourceUri";
const SCHEME: &str = "ui://";

/// The hub's form of server `prefix`'s `uri`: `ui://<prefix>/<the rest>`, or `None` for a URI
/// that is not a view or a server without a prefix (its URIs are served as they are). The
/// server becomes the authority, so the URI stays an ordinary `ui://` URI a host fetches
/// with `resources/read` like any other, and a prefix (unique per server) cannot collide.
pub fn hub_uri(prefix: &str, uri: &str) -> Option<String> {
    if prefix.is_empty() {
        return None;
    }
    let rest = uri.strip_prefix(SCHEME)?;
    let mut out = String::with_capacity(uri.len() + prefix.len() + 1);
    out.push_str(SCHEME);
    for b in prefix.bytes() {
        // An authority allows only these unescaped (RFC 3986 unreserved).
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push('/');
    out.push_str(rest);
    Some(out)
}

/// The server's own URI for `uri` when it is server `prefix`'s view in the hub's form.
pub fn upstream_uri(prefix: &str, uri: &str) -> Option<String> {
    let (_, path) = uri.strip_prefix(SCHEME)?.split_once('/')?;
    let own = format!("{SCHEME}{path}");
    (hub_uri(prefix, &own).as_deref() == Some(uri)).then_some(own)
}

/// A server's `notifications/resources/updated` (`text`, for `uri`) as a client subscribed
/// to the hub's form of the URI is told it.
pub fn updated(prefix: &str, uri: &str, text: &str) -> Option<(String, String)> {
    let shown = hub_uri(prefix, uri)?;
    let obj = RawObject::parse(text).ok()?;
    let params = RawObject::parse(obj.get("params")?).ok()?;
    let params = params.with("uri", &jsonrpc::quote(&shown));
    Some((shown, obj.with("params", &params)))
}

/// A server tool's UI metadata as the hub serves it.
pub struct ToolUi {
    /// The tool's `_meta` with its view's URI in the hub's form (`None`: unchanged).
    pub meta: Option<String>,
    /// `_meta.ui.visibility` leaves out `"model"`: the tool is for its view only.
    pub view_only: bool,
}

/// The UI metadata of a tool of server `prefix`, or `None` when it has none.
pub fn tool_ui(prefix: &str, tool: &RawObject) -> Option<ToolUi> {
    static UI: LazyLock<MemberProbe> = LazyLock::new(|| MemberProbe::new("ui"));
    static FLAT: LazyLock<MemberProbe> = LazyLock::new(|| MemberProbe::new(FLAT_KEY));
    let raw = tool.get("_meta")?;
    if !UI.may_have(raw) && !FLAT.may_have(raw) {
        return None;
    }
    let mut meta: Map<String, Value> = serde_json::from_str(raw).ok()?;
    if !meta.contains_key("ui") && !meta.contains_key(FLAT_KEY) {
        return None;
    }
    let mut changed = false;
    let mut rewrite = |v: Option<&mut Value>| {
        if let Some(v) = v
            && let Some(shown) = v.as_str().and_then(|u| hub_uri(prefix, u))
        {
            *v = Value::String(shown);
            changed = true;
        }
    };
    rewrite(meta.get_mut("ui").and_then(|u| u.get_mut("resourceUri")));
    rewrite(meta.get_mut(FLAT_KEY));
    let view_only = meta
        .get("ui")
        .and_then(|u| u.get("visibility"))
        .and_then(Value::as_array)
        .is_some_and(|v| !v.iter().any(|s| s == "model"));
    Some(ToolUi {
        meta: changed.then(|| Value::Object(meta).to_string()),
        view_only,
    })
}

/// `tool` (JSON text) as a server shows it to a client without the extension: no `_meta.ui`
/// and no flat key (`_meta` itself gone if nothing else was in it).
pub fn without_ui(tool: &str) -> Option<String> {
    let mut tool: Map<String, Value> = serde_json::from_str(tool).ok()?;
    let meta = tool.get_mut("_meta")?.as_object_mut()?;
    meta.remove("ui");
    meta.remove(FLAT_KEY);
    if meta.is_empty() {
        tool.remove("_meta");
    }
    Some(Value::Object(tool).to_string())
}

/// Whether `capabilities` (a client's, JSON text) declare the extension.
pub fn declared(capabilities: &str) -> bool {
    carried(capabilities).is_some()
}

/// The client's declaration of the extensions the hub carries (only this one: another
/// extension would promise servers something the hub does not pass on), as the JSON text of
/// an `extensions` member; `None` when it declares none of them.
pub fn carried(capabilities: &str) -> Option<String> {
    let extensions = RawObject::parse(capabilities).ok()?.get("extensions")?;
    let ui = RawObject::parse(extensions)
        .ok()?
        .get(EXTENSION)
        .filter(|v| *v != "null")?;
    Some(format!("{{{}:{ui}}}", jsonrpc::quote(EXTENSION)))
}

/// A request about a view under its hub URI (a read, a subscription, a completion): what the
/// server is asked, and its answer put back under the URI the client used.
pub struct Read {
    /// The URI the client used.
    pub shown: String,
    /// The server's own URI.
    pub upstream: String,
}

impl Read {
    /// The request's params with the server's URI.
    pub fn params(&self, params: &str) -> String {
        match RawObject::parse(params) {
            Ok(obj) => obj.with("uri", &jsonrpc::quote(&self.upstream)),
            Err(_) => params.to_string(),
        }
    }

    /// The server's answer with each content of the server's URI under the hub's.
    pub fn reply(&self, reply: Result<Message, CallError>) -> Result<Message, CallError> {
        let Ok(msg) = &reply else { return reply };
        let Some(mut result) = msg
            .result()
            .and_then(|r| serde_json::from_str::<Value>(r).ok())
        else {
            return reply;
        };
        let mut changed = false;
        for content in result["contents"].as_array_mut().into_iter().flatten() {
            if content["uri"] == *self.upstream {
                content["uri"] = Value::String(self.shown.clone());
                changed = true;
            }
        }
        if !changed {
            return reply;
        }
        let line = jsonrpc::result(msg.id(), &result.to_string());
        Message::parse(line.into_boxed_str()).or(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_view_uri_gets_its_server_as_authority() {
        assert_eq!(
            hub_uri("alpha", "ui://widget/main.html").as_deref(),
            Some("ui://alpha/widget/main.html")
        );
        assert_eq!(
            hub_uri("my app", "ui://w").as_deref(),
            Some("ui://my%20app/w")
        );
        assert_eq!(hub_uri("", "ui://widget/main.html"), None);
        assert_eq!(hub_uri("alpha", "file:///x"), None);
        assert_eq!(
            upstream_uri("alpha", "ui://alpha/widget/main.html").as_deref(),
            Some("ui://widget/main.html")
        );
        assert_eq!(
            upstream_uri("my app", "ui://my%20app/w").as_deref(),
            Some("ui://w")
        );
        assert_eq!(upstream_uri("beta", "ui://alpha/widget/main.html"), None);
        assert_eq!(upstream_uri("", "ui://widget/main.html"), None);
    }

    #[test]
    fn a_tool_view_is_rewritten_in_both_forms_and_its_visibility_read() {
        let tool = json!({"name": "t", "_meta": {"ui": {"resourceUri": "ui://w/m.html",
            "visibility": ["app"]}, "ui/resourceUri": "ui://w/m.html", "x": 1}})
        .to_string();
        let ui = tool_ui("a", &RawObject::parse(&tool).unwrap()).unwrap();
        assert!(ui.view_only);
        let meta: Value = serde_json::from_str(&ui.meta.unwrap()).unwrap();
        assert_eq!(meta["ui"]["resourceUri"], "ui://a/w/m.html");
        assert_eq!(meta["ui/resourceUri"], "ui://a/w/m.html");
        assert_eq!(meta["x"], 1);
        let plain = json!({"name": "t", "_meta": {"ui": {"visibility": ["model", "app"]}}});
        let ui = tool_ui("a", &RawObject::parse(&plain.to_string()).unwrap()).unwrap();
        assert!(!ui.view_only && ui.meta.is_none());
        let none = json!({"name": "t", "_meta": {"x": 1}}).to_string();
        assert!(tool_ui("a", &RawObject::parse(&none).unwrap()).is_none());
    }

    #[test]
    fn a_views_update_names_the_hub_uri() {
        let line = r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"ui://w/m.html"}}"#;
        let (uri, out) = updated("a", "ui://w/m.html", line).unwrap();
        assert_eq!(uri, "ui://a/w/m.html");
        let out: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(out["params"]["uri"], "ui://a/w/m.html");
        assert_eq!(out["method"], "notifications/resources/updated");
        assert!(updated("a", "file:///x", line).is_none());
    }

    #[test]
    fn without_ui_leaves_the_rest() {
        let tool = json!({"name": "t", "_meta": {"ui": {}, "ui/resourceUri": "ui://x", "k": 2}});
        let out: Value = serde_json::from_str(&without_ui(&tool.to_string()).unwrap()).unwrap();
        assert_eq!(out, json!({"name": "t", "_meta": {"k": 2}}));
        let only = json!({"name": "t", "_meta": {"ui": {}}});
        let out: Value = serde_json::from_str(&without_ui(&only.to_string()).unwrap()).unwrap();
        assert_eq!(out, json!({"name": "t"}));
    }

    #[test]
    fn only_the_ui_extension_is_carried() {
        let caps = json!({"extensions": {EXTENSION: {"mimeTypes": ["text/html;profile=mcp-app"]},
            "com.example/other": {}}});
        let carried: Value = serde_json::from_str(&carried(&caps.to_string()).unwrap()).unwrap();
        assert_eq!(
            carried,
            json!({EXTENSION: {"mimeTypes": ["text/html;profile=mcp-app"]}})
        );
        assert!(carried_none(
            json!({"extensions": {"com.example/other": {}}})
        ));
        assert!(carried_none(json!({"roots": {}})));
        // Where the hub declares for all its clients at once, it declares the extension.
        assert!(declared(crate::upstream::stateless::CLIENT_CAPABILITIES));
    }

    fn carried_none(caps: Value) -> bool {
        carried(&caps.to_string()).is_none()
    }
}
