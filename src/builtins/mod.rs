//! OpenPact's built-in tools, served by the hub in process under their bare names
//! (`workspace_read`), through the same policy pipeline as every server's tools.
//!
//! Each group (workspace, memory, vault, web, GitHub, chat, calendar, scripts) implements
//! [`Group`]; [`Builtins`] collects the groups the config enables.

pub mod calendar;
pub mod chat;
pub mod github;
mod hints;
pub mod net;
pub mod paths;
pub mod scripts;
pub mod vault;
pub mod web;
pub mod workspace;

use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A tool's definition as `tools/list` shows it.
#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: &'static str,
    pub description: String,
    /// JSON Schema of the arguments (root `type: object`).
    pub input_schema: Value,
    /// MCP tool annotations (`readOnlyHint`, `destructiveHint`, …), if any.
    pub annotations: Option<Value>,
}

impl ToolDef {
    /// The tool object for `tools/list`.
    pub fn to_json(&self) -> Value {
        let mut v = serde_json::json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        });
        if let (Some(a), Some(obj)) = (&self.annotations, v.as_object_mut()) {
            obj.insert("annotations".into(), a.clone());
        }
        v
    }
}

/// What a tool call produced: text for the model, optional structured content, and whether
/// it failed (failures are results with `isError`, never protocol errors).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub text: String,
    pub structured: Option<Value>,
    pub is_error: bool,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            structured: None,
            is_error: false,
        }
    }

    /// A result whose text is the JSON of `value`, also given as `structuredContent`.
    pub fn json(value: Value) -> ToolOutput {
        ToolOutput {
            text: value.to_string(),
            structured: Some(value),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            structured: None,
            is_error: true,
        }
    }

    /// The answer to a call naming no tool there is.
    pub fn unknown_tool(tool: &str) -> ToolOutput {
        ToolOutput::error(format!("Unknown tool: {tool}"))
    }

    /// The `tools/call` result object.
    pub fn to_result(&self) -> Value {
        let mut v = serde_json::json!({ "content": [{ "type": "text", "text": self.text }] });
        if let Some(obj) = v.as_object_mut() {
            if let Some(s) = &self.structured {
                obj.insert("structuredContent".into(), s.clone());
            }
            if self.is_error {
                obj.insert("isError".into(), Value::Bool(true));
            }
        }
        v
    }
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One group of built-in tools.
pub trait Group: Send + Sync {
    fn tools(&self) -> Vec<ToolDef>;
    /// Runs `tool` (one of [`Group::tools`]) with arguments already checked against its
    /// schema's required properties and types.
    fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> BoxFuture<'a, ToolOutput>;
}

/// The enabled groups.
#[derive(Default, Clone)]
pub struct Builtins {
    groups: Vec<Arc<dyn Group>>,
    /// Every tool with the index of its group, built once: definitions are fixed at
    /// construction, and a call should not rebuild every schema to find its tool.
    tools: Vec<(ToolDef, usize)>,
}

impl Builtins {
    pub fn new(groups: Vec<Arc<dyn Group>>) -> Builtins {
        let tools = groups
            .iter()
            .enumerate()
            .flat_map(|(i, g)| g.tools().into_iter().map(move |t| (t, i)))
            .collect();
        Builtins { groups, tools }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Every tool, in group order.
    pub fn tools(&self) -> Vec<ToolDef> {
        self.tools.iter().map(|(t, _)| t.clone()).collect()
    }

    /// Validates the arguments against the tool's schema, then runs it.
    pub async fn call(&self, tool: &str, args: &Value) -> Option<ToolOutput> {
        let (def, group) = self.tools.iter().find(|(t, _)| t.name == tool)?;
        if let Err(message) = validate(&def.input_schema, args) {
            return Some(ToolOutput::error(message));
        }
        Some(self.groups[*group].call(tool, args).await)
    }
}

/// Checks the arguments against the parts of a JSON Schema the built-ins use: an object with
/// `required` properties and per-property `type` (string, integer, number, boolean, array,
/// object) and `enum`. Errors name the argument.
pub fn validate(schema: &Value, args: &Value) -> Result<(), String> {
    let Some(obj) = args.as_object() else {
        return Err("the arguments must be a JSON object".into());
    };
    for req in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if obj.get(req).is_none_or(Value::is_null) {
            return Err(format!("{req} is required"));
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    for (name, value) in obj {
        let Some(prop) = props.and_then(|p| p.get(name)) else {
            continue;
        };
        if value.is_null() {
            continue;
        }
        if let Some(ty) = prop.get("type").and_then(Value::as_str) {
            let ok = match ty {
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                "array" => value.is_array(),
                "object" => value.is_object(),
                _ => true,
            };
            if !ok {
                return Err(format!(
                    "{name} must be {} {ty}",
                    if ty.starts_with(['a', 'i', 'o']) {
                        "an"
                    } else {
                        "a"
                    }
                ));
            }
        }
        if let Some(choices) = prop.get("enum").and_then(Value::as_array)
            && !choices.contains(value)
        {
            let list: Vec<String> = choices.iter().map(Value::to_string).collect();
            return Err(format!("{name} must be one of {}", list.join(", ")));
        }
    }
    Ok(())
}

/// Cuts `text` to at most `max` characters on a character boundary, with a visible marker.
pub fn cap_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((cut, _)) => format!(
            "{}\n\n[Content truncated: {} of {} characters shown]",
            &text[..cut],
            max,
            text.chars().count()
        ),
    }
}

/// Tools that ask permission on every call, whatever rules or remembered answers say.
pub const ASK_EVERY_TIME: &[&str] = &["script_exec"];

/// The groups the settings enable. A group whose setting is missing (no vault path, no
/// GitHub token…) is simply absent.
pub fn from_settings(
    settings: &crate::config::BuiltinsSettings,
    secrets: &[(String, String)],
    state_dir: &std::path::Path,
) -> Builtins {
    let mut groups: Vec<Arc<dyn Group>> = vec![workspace::group(settings)];
    if let Some(v) = &settings.vault {
        groups.push(vault::group(v));
    }
    if settings.web.enabled {
        match web::group(&settings.web) {
            Ok(g) => groups.push(g),
            Err(e) => tracing::warn!("web_fetch is unavailable: {e}"),
        }
    }
    if let Some(g) = &settings.github {
        groups.extend(github::group(g, &settings.web));
    }
    groups.extend(chat::group(&settings.chat, &settings.web));
    groups.extend(calendar::group(&settings.calendars, &settings.web));
    groups.push(scripts::group(
        &settings.scripts,
        &settings.web,
        secrets.to_vec(),
        state_dir,
    ));
    Builtins::new(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validation_names_the_argument() {
        let schema = json!({"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"},"state":{"type":"string","enum":["open","closed"]}},"required":["path"]});
        assert_eq!(
            validate(&schema, &json!({})),
            Err("path is required".into())
        );
        assert_eq!(
            validate(&schema, &json!({"path": 1})),
            Err("path must be a string".into())
        );
        assert_eq!(
            validate(&schema, &json!({"path": "a", "n": 1.5})),
            Err("n must be an integer".into())
        );
        assert!(
            validate(&schema, &json!({"path": "a", "state": "x"}))
                .unwrap_err()
                .starts_with("state must be one of")
        );
        assert!(
            validate(
                &schema,
                &json!({"path": "a", "n": 3, "state": "open", "extra": true})
            )
            .is_ok()
        );
        assert!(validate(&schema, &json!([1])).is_err());
    }

    #[test]
    fn capping_keeps_characters_whole() {
        assert_eq!(cap_chars("héllo", 10), "héllo");
        let cut = cap_chars("héllo wörld", 4);
        assert!(
            cut.starts_with("héll\n\n[Content truncated: 4 of 11"),
            "{cut}"
        );
    }
}
