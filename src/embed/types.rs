//! What the embedding API's calls return: MCP's results as Rust values.

use serde::Deserialize;
use serde_json::Value;

/// What a tool call produced. A tool that failed answers with `is_error` set (and says why
/// in its content); only a call that could not be made at all is an [`crate::Error`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The content blocks (`{"type": "text", "text": …}`, images, resources…), as sent.
    #[serde(default)]
    pub content: Vec<Value>,
    /// The tool's structured result, when it gives one.
    #[serde(default)]
    pub structured_content: Option<Value>,
    /// Whether the tool failed (or the call was refused, e.g. by the policy).
    #[serde(default)]
    pub is_error: bool,
}

impl ToolResult {
    /// The text blocks of [`ToolResult::content`], joined by newlines.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A tool as `tools/list` shows it: its qualified name (`server:tool`, or a bare name for
/// the built-in tools) and its definition.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The name to call it by.
    pub name: String,
    /// What it does, for a model to read.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of its arguments.
    #[serde(default)]
    pub input_schema: Value,
    /// MCP annotations (`readOnlyHint`…), when the server gives any.
    #[serde(default)]
    pub annotations: Option<Value>,
}

/// A tool that a search found, best first.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// The name to call it by.
    pub name: String,
    /// The server that offers it (`openpact` for the built-in tools).
    pub server: String,
    /// What it does.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of its arguments.
    #[serde(default)]
    pub input_schema: Value,
    /// How well it matches the query (higher is better).
    #[serde(default)]
    pub score: f64,
}

/// One of the contents of a resource (`resources/read`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContent {
    /// The URI of this content.
    pub uri: String,
    /// Its media type, when the server says.
    #[serde(default)]
    pub mime_type: Option<String>,
    /// Its text, for a text resource.
    #[serde(default)]
    pub text: Option<String>,
    /// Its bytes in base64, for a binary resource.
    #[serde(default)]
    pub blob: Option<String>,
}

/// A prompt filled in with its arguments (`prompts/get`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Prompt {
    /// What the prompt is for, when the server says.
    #[serde(default)]
    pub description: Option<String>,
    /// The messages it comes to.
    #[serde(default)]
    pub messages: Vec<PromptMessage>,
}

/// One message of a [`Prompt`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// The content block (`{"type": "text", "text": …}` and the like), as sent.
    pub content: Value,
}
