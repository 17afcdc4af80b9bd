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
#[cfg(test)]
mod test_support;
pub mod vault;
pub mod web;
pub mod workspace;

use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

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

    /// The JSON-RPC response answering request `id` with this result: the one place a
    /// `tools/call` result line is built, for built-in tools and for the hub's own refusals
    /// (a denial, a failed login, a meta-tool's answer), which the model reads alike.
    pub fn answer(&self, id: &str) -> String {
        crate::jsonrpc::result(id, &self.to_result().to_string())
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
    /// Every tool with the index of its group and its argument check: definitions are fixed
    /// at construction, and a call should not rebuild every schema to find its tool.
    tools: Vec<Entry>,
    /// Tools not served because an earlier one had their name.
    left_out: Vec<&'static str>,
}

/// One built-in tool as [`Builtins`] holds it.
#[derive(Clone)]
struct Entry {
    def: ToolDef,
    group: usize,
    /// Compiled at the tool's first call: a hub whose clients never call it should not
    /// carry the validator (its code and its compiled schemas stay out of memory).
    check: Arc<OnceLock<Result<ArgsCheck, String>>>,
}

impl Entry {
    fn check(&self) -> &Result<ArgsCheck, String> {
        self.check.get_or_init(|| {
            let check = ArgsCheck::new(&self.def.input_schema);
            if let Err(e) = &check {
                tracing::error!("built-in tool {}: {e}", self.def.name);
            }
            check
        })
    }
}

impl Builtins {
    /// The tools of `groups`, in order. A name already taken by an earlier tool is not served
    /// twice: the first keeps it, and the later one is left out with a warning.
    pub fn new(groups: Vec<Arc<dyn Group>>) -> Builtins {
        let (mut tools, mut left_out): (Vec<Entry>, Vec<&'static str>) = Default::default();
        let offered = groups
            .iter()
            .enumerate()
            .flat_map(|(i, g)| g.tools().into_iter().map(move |t| (t, i)));
        for (def, group) in offered {
            if tools.iter().any(|e| e.def.name == def.name) {
                tracing::warn!(
                    tool = def.name,
                    "a built-in tool of that name is served already; this one is left out"
                );
                left_out.push(def.name);
                continue;
            }
            tools.push(Entry {
                def,
                group,
                check: Arc::default(),
            });
        }
        Builtins {
            groups,
            tools,
            left_out,
        }
    }

    /// The tools left out because an earlier tool had taken their name.
    pub fn left_out(&self) -> &[&'static str] {
        &self.left_out
    }

    /// These groups and `more` after them (an embedding program's tools).
    pub fn joined(self, more: &[Arc<dyn Group>]) -> Builtins {
        if more.is_empty() {
            return self;
        }
        let mut groups = self.groups;
        groups.extend(more.iter().cloned());
        Builtins::new(groups)
    }

    /// Every tool, in group order.
    pub fn tools(&self) -> Vec<ToolDef> {
        self.tools.iter().map(|e| e.def.clone()).collect()
    }

    /// Validates the arguments against the tool's schema, then runs it.
    pub async fn call(&self, tool: &str, args: &Value) -> Option<ToolOutput> {
        let entry = self.tools.iter().find(|e| e.def.name == tool)?;
        let verdict = match entry.check() {
            Ok(check) => check.check(args),
            Err(e) => Err(e.clone()),
        };
        if let Err(message) = verdict {
            return Some(ToolOutput::error(message));
        }
        Some(self.groups[entry.group].call(tool, args).await)
    }
}

/// A tool's argument schema, compiled once (JSON Schema 2020-12, by the `jsonschema` crate).
pub struct ArgsCheck {
    validator: jsonschema::Validator,
    /// Kept for the wording of range errors, which names both bounds.
    schema: Value,
}

impl ArgsCheck {
    /// Fails when `schema` is not a schema the validator accepts.
    pub fn new(schema: &Value) -> Result<ArgsCheck, String> {
        jsonschema::validator_for(schema)
            .map(|validator| ArgsCheck {
                validator,
                schema: schema.clone(),
            })
            .map_err(|e| format!("the tool's input schema is invalid: {e}"))
    }

    /// Checks `args`; the error names the argument. A top-level argument given as `null`
    /// counts as absent, as models send `null` for optional arguments they leave out.
    pub fn check(&self, args: &Value) -> Result<(), String> {
        let Some(obj) = args.as_object() else {
            return Err("the arguments must be a JSON object".into());
        };
        let given: serde_json::Map<String, Value> = obj
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let given = Value::Object(given);
        match self.validator.iter_errors(&given).next() {
            None => Ok(()),
            Some(e) => Err(describe(&e, &self.schema)),
        }
    }
}

/// A validation error in words that name the argument (`path is required`, `n must be an
/// integer`, `limit must be between 1 and 100`); other keywords keep the validator's own
/// wording after the argument's name.
fn describe(e: &jsonschema::ValidationError, schema: &Value) -> String {
    use jsonschema::error::{TypeKind, ValidationErrorKind};
    let arg = e
        .instance_path()
        .segments()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(".");
    match e.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_string);
            if arg.is_empty() {
                format!("{name} is required")
            } else {
                format!("{arg}.{name} is required")
            }
        }
        ValidationErrorKind::Type {
            kind: TypeKind::Single(ty),
        } if !arg.is_empty() => {
            let ty = ty.to_string();
            let article = if ty.starts_with(['a', 'i', 'o']) {
                "an"
            } else {
                "a"
            };
            format!("{arg} must be {article} {ty}")
        }
        ValidationErrorKind::Enum { options } if !arg.is_empty() => {
            let list: Vec<String> = options
                .as_array()
                .map(|a| a.iter().map(Value::to_string).collect())
                .unwrap_or_default();
            format!("{arg} must be one of {}", list.join(", "))
        }
        ValidationErrorKind::Minimum { .. } | ValidationErrorKind::Maximum { .. }
            if !arg.is_empty() =>
        {
            let prop = schema.pointer(&format!("/properties/{arg}"));
            let bound = |key| prop.and_then(|p| p.get(key)).filter(|v| v.is_number());
            match (bound("minimum"), bound("maximum")) {
                (Some(min), Some(max)) => format!("{arg} must be between {min} and {max}"),
                (Some(min), None) => format!("{arg} must be at least {min}"),
                (None, Some(max)) => format!("{arg} must be at most {max}"),
                (None, None) => format!("{arg}: {e}"),
            }
        }
        _ if arg.is_empty() => format!("the arguments: {e}"),
        _ => format!("{arg}: {e}"),
    }
}

/// Checks `args` against `schema` once (compiling it); a tool call uses its compiled
/// [`ArgsCheck`].
#[cfg(test)]
pub fn validate(schema: &Value, args: &Value) -> Result<(), String> {
    ArgsCheck::new(schema)?.check(args)
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
    fn a_tool_error_answers_with_its_text_and_is_error() {
        let line = ToolOutput::error("no \"way\"").answer("7");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc": "2.0", "id": 7, "result": {
                "content": [{"type": "text", "text": "no \"way\""}], "isError": true}})
        );
        let ok = ToolOutput {
            structured: Some(json!({"n": 1})),
            ..ToolOutput::ok("fine")
        };
        let v: Value = serde_json::from_str(&ok.answer("\"a\"")).unwrap();
        assert_eq!(
            v["result"],
            json!({"content": [{"type": "text", "text": "fine"}], "structuredContent": {"n": 1}})
        );
    }

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
        // null is an argument left out: fine when optional, missing when required.
        assert!(validate(&schema, &json!({"path": "a", "n": null})).is_ok());
        assert_eq!(
            validate(&schema, &json!({"path": null})),
            Err("path is required".into())
        );
    }

    #[test]
    fn validation_checks_what_the_schemas_say_beyond_types() {
        let schema = json!({"type":"object","properties":{
            "limit":{"type":"integer","minimum":1,"maximum":100},
            "labels":{"type":"array","items":{"type":"string"}}}});
        assert!(validate(&schema, &json!({"limit": 100, "labels": ["a"]})).is_ok());
        assert_eq!(
            validate(&schema, &json!({"limit": 101})),
            Err("limit must be between 1 and 100".into())
        );
        assert_eq!(
            validate(&schema, &json!({"labels": ["a", 2]})),
            Err("labels.1 must be a string".into())
        );
    }

    #[test]
    fn every_built_in_schema_compiles() {
        use crate::config::{CalendarFeed, CalendarSource, GithubSettings, VaultSettings};
        let dir = tempfile::tempdir().unwrap();
        let mut settings = crate::config::BuiltinsSettings::defaults(dir.path());
        settings.vault = Some(VaultSettings {
            path: dir.path().to_path_buf(),
            git_sync: false,
            max_bytes: 1000,
            git_timeout: std::time::Duration::from_secs(1),
        });
        settings.github = Some(GithubSettings {
            // Any variable that is set: the group is enabled only with a token.
            token_env: "PATH".into(),
            base_url: "http://127.0.0.1:9".into(),
        });
        settings.chat.webhook = Some("http://127.0.0.1:9/hook".into());
        settings.calendars = vec![CalendarSource {
            name: "home".into(),
            feed: CalendarFeed::File(dir.path().join("home.ics")),
        }];
        settings.scripts.exec = true;
        let builtins = from_settings(&settings, &[], dir.path());
        assert!(builtins.tools.len() >= 18, "{}", builtins.tools.len());
        for e in &builtins.tools {
            let error = e.check().as_ref().err();
            assert!(error.is_none(), "{}: {error:?}", e.def.name);
        }
    }

    /// A hub serves the built-ins' definitions from its start, but compiles a tool's schema
    /// only when the tool is called: the validator's code and data stay out of its memory.
    #[tokio::test]
    async fn a_tools_schema_is_compiled_at_its_first_call_only() {
        let dir = tempfile::tempdir().unwrap();
        let builtins = from_settings(
            &crate::config::BuiltinsSettings::defaults(dir.path()),
            &[],
            dir.path(),
        );
        assert!(!builtins.tools.is_empty());
        assert!(
            builtins.tools.iter().all(|e| e.check.get().is_none()),
            "no schema compiled before a call"
        );
        let first = builtins.tools[0].def.name;
        let out = builtins.call(first, &json!(7)).await.unwrap();
        assert!(out.is_error, "not an object: refused by the check");
        let compiled: Vec<&str> = builtins
            .tools
            .iter()
            .filter(|e| e.check.get().is_some())
            .map(|e| e.def.name)
            .collect();
        assert_eq!(compiled, [first]);
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
