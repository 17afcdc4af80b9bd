//! `run_code`: a code-mode program run in a worker (`crate::code`), each of its tool calls
//! this client's own call through every stage (look up in this client's view, permission
//! — asked of this client —, rate limit, cache, dispatch, redaction, audit), its progress
//! reported on the program's progress token, its calls cancelled with it. The program has
//! an audit record of its own; its calls' records name it.

use super::calls::Inner;
use super::{Reply, Session, lock};
use crate::builtins::{BoxFuture, ToolOutput};
use crate::code::process::{self, Host, Ran};
use crate::code::protocol::{Answer, CallRequest, Start};
use crate::config::CodeMode;
use crate::hub::views::{CALL_TOOL, RUN_CODE, SEARCH_TOOLS};
use crate::hub::{Catalog, NameKind};
use crate::jsonrpc::{self, Message, RawObject};
use crate::policy::audit::Record;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The longest program text taken.
const MAX_CODE: usize = 256 << 10;

/// One program's side in the hub: what its calls need.
struct Program<'s> {
    session: &'s Arc<Session>,
    id: Arc<str>,
    settings: &'s CodeMode,
    /// `_meta.progressToken` of the `run_code` call, as JSON text.
    progress: Option<String>,
    next: AtomicU64,
}

impl Host for Program<'_> {
    fn call(&self, request: CallRequest) -> BoxFuture<'_, Answer> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        Box::pin(self.session.inner_call(self.id.clone(), n, request))
    }

    fn keep(&self, name: String, value: Value, size: usize) -> Answer {
        let s = self.settings;
        lock(&self.session.kept).keep(name, value, size, s.keep_values, s.keep_bytes)
    }

    fn kept(&self, name: &str) -> Answer {
        lock(&self.session.kept).get(name)
    }

    fn progress(&self, done: usize) {
        if let Some(token) = &self.progress {
            let params = format!(
                r#"{{"progressToken":{token},"progress":{done},"message":{}}}"#,
                jsonrpc::quote(&match done {
                    1 => "1 tool call done".to_string(),
                    n => format!("{n} tool calls done"),
                })
            );
            self.session.send_droppable(jsonrpc::notification(
                "notifications/progress",
                Some(&params),
            ));
        }
    }
}

impl Session {
    /// `run_code {code, timeout?}` in a view in code mode.
    pub(super) async fn run_code(
        self: &Arc<Self>,
        m: &Message,
        params: &RawObject<'_>,
        view: &Catalog,
        settings: &CodeMode,
    ) -> String {
        let arguments: Value = params
            .get("arguments")
            .and_then(|a| serde_json::from_str(a).ok())
            .unwrap_or(Value::Null);
        let code = match arguments.get("code").and_then(Value::as_str) {
            Some(c) if !c.trim().is_empty() && c.len() <= MAX_CODE => c,
            Some(c) if c.len() > MAX_CODE => {
                let why = format!("{RUN_CODE}: the program is over {} KiB", MAX_CODE >> 10);
                return ToolOutput::error(why).answer(m.id());
            }
            _ => {
                let why = format!("{RUN_CODE} needs `code`: a Starlark program");
                return ToolOutput::error(why).answer(m.id());
            }
        };
        let timeout = match arguments.get("timeout") {
            None | Some(Value::Null) => settings.timeout,
            Some(t) => match t.as_f64().filter(|s| s.is_finite() && *s > 0.0) {
                // A huge number asks for the most there is, not a panic.
                Some(secs) => std::time::Duration::try_from_secs_f64(secs)
                    .map_or(settings.timeout, |d| d.min(settings.timeout)),
                None => {
                    let why =
                        format!("{RUN_CODE}: `timeout` must be a number of seconds above zero");
                    return ToolOutput::error(why).answer(m.id());
                }
            },
        };
        let progress = params
            .get("_meta")
            .and_then(|meta| RawObject::parse(meta).ok())
            .and_then(|meta| meta.get("progressToken").map(str::to_string));
        let t0 = std::time::Instant::now();
        let id: Arc<str> = program_id().into();
        let program = Program {
            session: self,
            id: id.clone(),
            settings,
            progress,
            next: AtomicU64::new(1),
        };
        let start = Start {
            code: code.to_string(),
            prelude: match &view.search {
                Some(search) => search
                    .program(&view.tools.items, &self.hub.upstreams())
                    .prelude
                    .clone(),
                None => String::new(),
            },
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            max_output: settings.max_output,
        };
        let ran = process::run(settings, start, &program).await;
        let (text, is_error) = result_text(&ran, settings.max_output);
        let answer = ToolOutput {
            text,
            structured: None,
            is_error,
        }
        .answer(m.id());
        self.audit_program(&id, code, &ran, answer.len(), t0);
        answer
    }

    /// One call a program made, as this client's own call; its value for the program.
    async fn inner_call(
        self: &Arc<Self>,
        program: Arc<str>,
        n: u64,
        request: CallRequest,
    ) -> Answer {
        if [SEARCH_TOOLS, CALL_TOOL, RUN_CODE].contains(&request.name.as_str()) {
            return Answer::Error(format!(
                "{} cannot be called from a program; call the tools themselves",
                request.name
            ));
        }
        let params = json!({"name": request.name, "arguments": request.arguments}).to_string();
        let id = jsonrpc::quote(&format!("{program}-{n}"));
        let line = jsonrpc::request(&id, "tools/call", Some(&params));
        let m = match Message::parse(line.into_boxed_str()) {
            Ok(m) => m,
            Err(e) => return Answer::Error(format!("the call could not be made: {e}")),
        };
        let (to, answer) = tokio::sync::oneshot::channel();
        let inner = Inner {
            program: Some(program),
            task: None,
            to,
        };
        let line = match self
            .call_by_name(&m, NameKind::Tool, &params, Some(inner))
            .await
        {
            Reply::Line(line) => self.hub.policy().redact(&line).into_owned(),
            Reply::Sent => match answer.await {
                Ok(line) => line,
                Err(_) => return Answer::Error("the call ended without an answer".into()),
            },
        };
        if line.len() <= crate::code::process::PARSE_HERE {
            return value_of(&line, request.raw);
        }
        // A big answer is read off the runtime, which serves every other client.
        let raw = request.raw;
        tokio::task::spawn_blocking(move || value_of(&line, raw))
            .await
            .unwrap_or_else(|e| Answer::Error(format!("reading the tool's answer: {e}")))
    }

    /// The program's own audit record: its code's hash, its calls and its outcome; its result
    /// the `answer` bytes the client was sent, as for a direct call.
    fn audit_program(
        &self,
        id: &Arc<str>,
        code: &str,
        ran: &Ran,
        answer: usize,
        t0: std::time::Instant,
    ) {
        let policy = self.hub.policy();
        if !policy.audit_enabled() {
            return;
        }
        let record = Record {
            at: Some(std::time::SystemTime::now()),
            client: lock(&self.client_name).clone(),
            method: Cow::Borrowed("tools/call"),
            target: RUN_CODE.into(),
            decision: Cow::Borrowed("allow"),
            source: Cow::Borrowed("code mode"),
            cache: Cow::Borrowed("off"),
            duration_ms: (t0.elapsed().as_secs_f64() * 1e6).round() / 1e3,
            outcome: Cow::Borrowed(if ran.error.is_some() { "isError" } else { "ok" }),
            result_bytes: answer,
            error: ran.error.as_deref().map(|e| policy.redact(e).into_owned()),
            program: Some(id.clone()),
            code_hash: Some(crate::policy::canonical::sha256(code)),
            calls: Some(ran.calls),
            hash_later: Some(
                crate::policy::canonical::canonical(&json!({"code": code}).to_string()).into(),
            ),
            ..Record::default()
        };
        policy.audit(record);
    }
}

/// A fresh program id (for the audit log: unique across restarts).
fn program_id() -> String {
    let Some(random) = crate::platform::random_hex(6) else {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        return format!("prog-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    };
    format!("prog-{random}")
}

/// What the model reads: the program's output, then its value (or its error), and a note
/// when it ran unconfined; the whole capped at `max_output` characters.
fn result_text(ran: &Ran, max_output: usize) -> (String, bool) {
    let mut text = ran.output.trim_end_matches('\n').to_string();
    let mut push = |part: &str| {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(part);
    };
    match &ran.error {
        Some(error) => push(&format!(
            "The program failed: {}",
            error.trim_start_matches("error: ")
        )),
        None if !ran.value.is_null() => push(&ran.value.to_string()),
        None => {}
    }
    if let Err(why) = &ran.confined {
        push(&format!(
            "(The program ran unconfined, with its memory and time limits only: {why}.)"
        ));
    }
    if text.is_empty() {
        text = "(The program printed nothing and its last expression was None.)".into();
    }
    let total = text.chars().count();
    if total > max_output {
        text = text.chars().take(max_output).collect();
        text.push_str(&format!(
            "\n\n[Output truncated: {max_output} of {total} characters shown (openpact.codeMode.maxOutput)]"
        ));
    }
    (text, ran.error.is_some())
}

/// A tool's answer (a JSON-RPC response line) as the program's value: its structured
/// content when present, else its text parsed as JSON when it is JSON, else its text;
/// images and other blocks as small descriptors. `raw`: the whole result.
fn value_of(line: &str, raw: bool) -> Answer {
    let Ok(response) = serde_json::from_str::<Value>(line) else {
        return Answer::Error("the tool's answer was not JSON".into());
    };
    if let Some(error) = response.get("error") {
        let message = error["message"].as_str().unwrap_or("the call failed");
        return Answer::Error(message.to_string());
    }
    let result = response.get("result").cloned().unwrap_or(Value::Null);
    let blocks = result["content"].as_array().cloned().unwrap_or_default();
    let texts: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
    if result["isError"] == json!(true) {
        let text = texts.join("\n");
        return Answer::Error(if text.is_empty() {
            "the tool reported an error".into()
        } else {
            text
        });
    }
    if raw {
        return Answer::Ok(result);
    }
    if let Some(structured) = result.get("structuredContent") {
        return Answer::Ok(structured.clone());
    }
    if texts.len() == blocks.len() {
        let text = texts.join("\n");
        return Answer::Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)));
    }
    let items = blocks
        .iter()
        .map(|b| match b["text"].as_str() {
            Some(t) => Value::String(t.to_string()),
            None => descriptor(b),
        })
        .collect();
    Answer::Ok(Value::Array(items))
}

/// An image, audio or resource block, without its data: what it is and how big.
fn descriptor(block: &Value) -> Value {
    let mut d = serde_json::Map::new();
    for key in ["type", "mimeType", "uri", "name"] {
        if let Some(v) = block.get(key) {
            d.insert(key.into(), v.clone());
        }
    }
    if let Some(resource) = block.get("resource") {
        for key in ["uri", "mimeType"] {
            if let Some(v) = resource.get(key) {
                d.insert(key.into(), v.clone());
            }
        }
    }
    if let Some(data) = block.get("data").and_then(Value::as_str) {
        d.insert("bytes".into(), json!(data.len() / 4 * 3));
        d.insert(
            "note".into(),
            json!("data left out; call(..., raw=True) gives it"),
        );
    }
    Value::Object(d)
}

#[cfg(test)]
mod tests {
    use super::{Answer, value_of};
    use serde_json::json;

    fn answer(result: serde_json::Value) -> String {
        json!({"jsonrpc": "2.0", "id": 1, "result": result}).to_string()
    }

    #[test]
    fn a_result_becomes_the_programs_value_by_the_documented_rule() {
        let structured = answer(
            json!({"content": [{"type": "text", "text": "x"}], "structuredContent": {"a": 1}}),
        );
        assert_eq!(value_of(&structured, false), Answer::Ok(json!({"a": 1})));
        let json_text = answer(json!({"content": [{"type": "text", "text": "[1, 2]"}]}));
        assert_eq!(value_of(&json_text, false), Answer::Ok(json!([1, 2])));
        let text = answer(json!({"content": [{"type": "text", "text": "hello"}]}));
        assert_eq!(value_of(&text, false), Answer::Ok(json!("hello")));
        let image = answer(
            json!({"content": [{"type": "text", "text": "see"}, {"type": "image", "mimeType": "image/png", "data": "AAAA"}]}),
        );
        let Answer::Ok(v) = value_of(&image, false) else {
            panic!()
        };
        assert_eq!(v[0], json!("see"));
        assert_eq!(v[1]["type"], json!("image"));
        assert_eq!(v[1]["bytes"], json!(3));
        assert!(v[1].get("data").is_none(), "no base64 unless asked");
        let Answer::Ok(raw) = value_of(&image, true) else {
            panic!()
        };
        assert_eq!(raw["content"][1]["data"], json!("AAAA"));
        let failed =
            answer(json!({"content": [{"type": "text", "text": "denied"}], "isError": true}));
        assert_eq!(value_of(&failed, false), Answer::Error("denied".into()));
        let error = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "Rate limit exceeded."}}).to_string();
        assert_eq!(
            value_of(&error, false),
            Answer::Error("Rate limit exceeded.".into())
        );
    }
}
