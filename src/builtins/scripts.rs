//! Starlark scripts: `script_list`, `script_run`, `script_exec` (only when
//! `openpact.builtins.scripts.exec` is on) and `script_reload`, plus the library side of
//! `openpact scripts list|show|approve|reject`.
//!
//! A script runs only if it is approved: named in the config allowlist, or approved by an
//! administrator for its exact content (`sha256:` recorded in `approvals.json` in the state
//! dir; an edit needs approval again). Script files are re-read on every call, so there is no
//! stale copy to reload. Results carry `{value, output, error, duration_ms}`; a failed script
//! is an `isError` result, and secret values are replaced by `[REDACTED:NAME]` before
//! anything leaves.
//!
//! - `meta`: script names and `# @key: value` metadata.
//! - `approvals`: the approval store and statuses.
//! - `sandbox`: the evaluator thread, limits and built-ins.
//! - `http`: `http.get` / `http.post` over `builtins::net`.

mod approvals;
mod http;
mod meta;
pub mod sandbox;

use crate::builtins::{BoxFuture, Group, ToolDef, ToolOutput, cap_chars, paths};
use crate::config::{ScriptsSettings, WebSettings};
use crate::policy::redact::Redactor;
use approvals::{Approvals, Decision};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

/// Larger files are not scripts anyone reviewed line by line.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// One script as `openpact scripts list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptInfo {
    /// Without `.star`.
    pub name: String,
    pub description: String,
    /// Every `# @key: value` of the leading comments.
    pub metadata: BTreeMap<String, String>,
    pub required_secrets: Vec<String>,
    /// `approved`, `pending`, `rejected`, `modified` or `allowlisted`.
    pub status: String,
    /// `sha256:<hex>` of the file as it is now.
    pub hash: String,
}

/// A script file as read just now.
struct Script {
    /// `x.star`.
    file: String,
    bytes: Vec<u8>,
}

/// Reads script `name` (`x` or `x.star`) from the scripts folder; refuses paths, and
/// symlinks that lead out of the folder.
fn read_script(s: &ScriptsSettings, name: &str) -> Result<Script, String> {
    let file = meta::file_name(name)?;
    let not_found = || format!("script not found: {file}");
    if !s.dir.is_dir() {
        return Err(not_found());
    }
    let path = paths::resolve(&s.dir, &file, "the scripts folder").map_err(|e| e.to_string())?;
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() && m.len() > MAX_SCRIPT_BYTES => {
            return Err(format!(
                "script {file} is too large ({} bytes; scripts may be at most {MAX_SCRIPT_BYTES})",
                m.len()
            ));
        }
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(not_found()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
        Err(e) => return Err(format!("{file}: {e}")),
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("{file}: {e}"))?;
    Ok(Script { file, bytes })
}

/// Every script in the folder (none if the folder does not exist yet), by name.
fn scan(s: &ScriptsSettings) -> Result<Vec<Script>, String> {
    let entries = match std::fs::read_dir(&s.dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", s.dir.display())),
    };
    let mut out: Vec<Script> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| meta::file_name(n).as_deref() == Ok(n.as_str()))
        // Folders named x.star, escaping symlinks and unreadable files are not scripts.
        .filter_map(|n| read_script(s, &n).ok())
        .collect();
    out.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(out)
}

fn info(
    s: &ScriptsSettings,
    records: &BTreeMap<String, approvals::Record>,
    script: &Script,
) -> ScriptInfo {
    let m = meta::parse(&String::from_utf8_lossy(&script.bytes));
    let hash = approvals::hash(&script.bytes);
    let status = approvals::status_of(&s.allowlist, records.get(&script.file), &script.file, &hash);
    ScriptInfo {
        name: meta::bare(&script.file).to_string(),
        description: m.description(),
        required_secrets: m.required_secrets.clone(),
        metadata: m.fields,
        status: status.as_str().to_string(),
        hash,
    }
}

/// Every script with its approval status.
pub fn list(s: &ScriptsSettings, state_dir: &Path) -> Result<Vec<ScriptInfo>, String> {
    let records = Approvals::new(state_dir).all().map_err(|e| e.to_string())?;
    Ok(scan(s)?.iter().map(|x| info(s, &records, x)).collect())
}

/// A script's source, for review.
pub fn show(s: &ScriptsSettings, name: &str) -> Result<String, String> {
    let script = read_script(s, name)?;
    Ok(String::from_utf8_lossy(&script.bytes).into_owned())
}

/// Approves the script as it is now; returns the `sha256:` recorded.
pub fn approve(s: &ScriptsSettings, state_dir: &Path, name: &str) -> Result<String, String> {
    let script = read_script(s, name)?;
    let hash = approvals::hash(&script.bytes);
    Approvals::new(state_dir)
        .set(&script.file, Decision::Approved, &hash)
        .map_err(|e| e.to_string())?;
    Ok(hash)
}

/// Rejects the script as it is now (an edit makes it pending again).
pub fn reject(s: &ScriptsSettings, state_dir: &Path, name: &str) -> Result<(), String> {
    let script = read_script(s, name)?;
    let hash = approvals::hash(&script.bytes);
    Approvals::new(state_dir)
        .set(&script.file, Decision::Rejected, &hash)
        .map_err(|e| e.to_string())
}

/// The script tools.
pub fn group(
    s: &ScriptsSettings,
    web: &WebSettings,
    secrets: Vec<(String, String)>,
    state_dir: &Path,
) -> Arc<dyn Group> {
    Arc::new(Scripts {
        settings: s.clone(),
        approvals: Approvals::new(state_dir),
        state_dir: state_dir.to_path_buf(),
        redactor: Redactor::new(&secrets),
        env: Arc::new(sandbox::Env::new(secrets, web)),
        running: Arc::new(AtomicUsize::new(0)),
    })
}

struct Scripts {
    settings: ScriptsSettings,
    approvals: Approvals,
    state_dir: std::path::PathBuf,
    redactor: Redactor,
    env: Arc<sandbox::Env>,
    /// Script threads alive now (see `sandbox::MAX_RUNNING`).
    running: Arc<AtomicUsize>,
}

const BUILTINS_HELP: &str = "Built-ins: http.get(url, headers={}), http.post(url, body=\"\", \
headers={}, content_type=\"application/json\") -> {status, body, headers}; json.encode(v), \
json.decode(s); time.now() (RFC 3339 UTC), time.sleep(seconds) (at most 5 per call); \
secrets.get(name), secrets.list(); print(...) (captured in `output`). No load().";

const RETURN_HELP: &str = "The value is main()'s return value if the script defines main, \
else the global `result`, else the globals whose names do not start with a lowercase letter.";

fn text_prop(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

impl Scripts {
    fn limits(&self) -> sandbox::Limits {
        sandbox::Limits::new(self.settings.timeout, self.settings.max_output)
    }

    /// Hides secret values in every string (and key) of `v`.
    fn redact(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                if let std::borrow::Cow::Owned(r) = self.redactor.redact(s) {
                    *s = r;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|x| self.redact(x)),
            Value::Object(m) => {
                let old = std::mem::take(m);
                for (k, mut x) in old {
                    self.redact(&mut x);
                    m.insert(self.redactor.redact(&k).into_owned(), x);
                }
            }
            _ => {}
        }
    }

    /// The tool result of a run: `{value, output, error, duration_ms}`, `isError` when the
    /// script failed. A value larger than `maxOutput` comes back as its cut JSON text.
    fn render(&self, o: sandbox::Outcome) -> ToolOutput {
        let max = self.settings.max_output;
        let mut value = o.value;
        let text = value.to_string();
        if text.len() > max && text.chars().count() > max {
            value = Value::String(cap_chars(&text, max));
        }
        let is_error = o.error.is_some();
        let mut v = json!({
            "value": value,
            "output": o.output,
            "error": o.error,
            "duration_ms": u64::try_from(o.duration.as_millis()).unwrap_or(u64::MAX),
        });
        self.redact(&mut v);
        ToolOutput {
            text: v.to_string(),
            structured: Some(v),
            is_error,
        }
    }

    fn script_list(&self) -> ToolOutput {
        match list(&self.settings, &self.state_dir) {
            Ok(items) => {
                let scripts: Vec<Value> = items
                    .iter()
                    .map(|i| {
                        json!({
                            "name": i.name,
                            "description": i.description,
                            "metadata": i.metadata,
                            "required_secrets": i.required_secrets,
                            "approval_status": i.status,
                        })
                    })
                    .collect();
                ToolOutput::json(json!({"count": scripts.len(), "scripts": scripts}))
            }
            Err(e) => ToolOutput::error(e),
        }
    }

    async fn script_run(&self, args: &Value) -> ToolOutput {
        let name = args.get("name").and_then(Value::as_str).unwrap_or("");
        let function = args
            .get("function")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|f| !f.is_empty());
        let call_args = args.get("args").and_then(Value::as_array);
        if call_args.is_some_and(|a| !a.is_empty()) && function.is_none() {
            return ToolOutput::error("args are passed to `function`; name the function to call");
        }
        let script = match read_script(&self.settings, name) {
            Ok(s) => s,
            Err(e) => return ToolOutput::error(e),
        };
        let record = match self.approvals.get(&script.file) {
            Ok(r) => r,
            Err(e) => return ToolOutput::error(e.to_string()),
        };
        let hash = approvals::hash(&script.bytes);
        let status = approvals::status_of(
            &self.settings.allowlist,
            record.as_ref(),
            &script.file,
            &hash,
        );
        if !status.runnable() {
            let message = status.refusal(&script.file);
            return ToolOutput {
                text: message.clone(),
                structured: Some(json!({
                    "error": "script_not_approved",
                    "message": message,
                    "script": script.file,
                    "status": status.as_str(),
                })),
                is_error: true,
            };
        }
        let Ok(source) = String::from_utf8(script.bytes) else {
            return ToolOutput::error(format!("script {} is not UTF-8 text", script.file));
        };
        let job = sandbox::Job {
            file: script.file,
            source,
            call: function.map(|f| (f.to_string(), call_args.cloned().unwrap_or_default())),
        };
        let outcome =
            sandbox::run(job, self.env.clone(), self.limits(), self.running.clone()).await;
        self.render(outcome)
    }

    async fn script_exec(&self, args: &Value) -> ToolOutput {
        if !self.settings.exec {
            return ToolOutput::error(
                "script_exec is off; set openpact.builtins.scripts.exec to true to allow it",
            );
        }
        let code = args.get("code").and_then(Value::as_str).unwrap_or("");
        let job = sandbox::Job {
            file: "exec.star".into(),
            source: code.to_string(),
            call: None,
        };
        let outcome =
            sandbox::run(job, self.env.clone(), self.limits(), self.running.clone()).await;
        self.render(outcome)
    }

    fn script_reload(&self) -> ToolOutput {
        match scan(&self.settings) {
            Ok(all) => ToolOutput::json(json!({
                "message": "Scripts reloaded successfully",
                "count": all.len(),
            })),
            Err(e) => ToolOutput::error(e),
        }
    }
}

impl Group for Scripts {
    fn tools(&self) -> Vec<ToolDef> {
        let mut tools = vec![
            ToolDef {
                name: "script_list",
                description: "List the Starlark scripts in the scripts folder with their \
                              description, metadata, required secrets and approval status \
                              (approved, pending, rejected, modified, allowlisted)."
                    .into(),
                input_schema: json!({"type": "object", "properties": {}}),
                annotations: Some(json!({"readOnlyHint": true, "openWorldHint": false})),
            },
            ToolDef {
                name: "script_run",
                description: format!(
                    "Run an approved Starlark script from the scripts folder. Only scripts an \
                     administrator approved (or allowlisted) run; an edited script needs \
                     approval again. Without `function` the whole script runs: {RETURN_HELP} \
                     With `function`, the script runs and then that function is called with \
                     `args`. Returns {{value, output, error, duration_ms}}. {BUILTINS_HELP}"
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "name": text_prop("Script name, with or without .star (e.g. weather)"),
                        "function": text_prop("A function of the script to call after it runs"),
                        "args": {
                            "type": "array",
                            "description": "Positional arguments for `function` (JSON values)",
                        },
                    },
                    "required": ["name"],
                }),
                annotations: Some(json!({"readOnlyHint": false, "openWorldHint": true})),
            },
            ToolDef {
                name: "script_reload",
                description: "Re-scan the scripts folder and return how many scripts it holds \
                              (scripts are always read fresh when run)."
                    .into(),
                input_schema: json!({"type": "object", "properties": {}}),
                annotations: Some(json!({"readOnlyHint": true, "openWorldHint": false})),
            },
        ];
        if self.settings.exec {
            tools.insert(
                2,
                ToolDef {
                    name: "script_exec",
                    description: format!(
                        "Run Starlark code given inline (asks permission every time). Set a \
                         global `result` or define `main()`: {RETURN_HELP} Returns {{value, \
                         output, error, duration_ms}}. {BUILTINS_HELP}"
                    ),
                    input_schema: json!({
                        "type": "object",
                        "properties": {"code": text_prop("Starlark source to run")},
                        "required": ["code"],
                    }),
                    annotations: Some(json!({
                        "readOnlyHint": false,
                        "destructiveHint": true,
                        "openWorldHint": true,
                    })),
                },
            );
        }
        tools
    }

    fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match tool {
                "script_list" => self.script_list(),
                "script_run" => self.script_run(args).await,
                "script_exec" => self.script_exec(args).await,
                "script_reload" => self.script_reload(),
                other => ToolOutput::unknown_tool(other),
            }
        })
    }
}

#[cfg(test)]
mod tests;
