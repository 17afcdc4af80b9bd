//! The server side of Tasks ("the follower"): a tool call sent to its server as a task in
//! the server's own style — 2025-11-25 task-augmented `tools/call` + blocking `tasks/result`,
//! or the 2026-07-28 extension (`io.modelcontextprotocol/tasks`: `resultType: "task"`,
//! `tasks/get` polling, `tasks/update` with input responses) — and followed to its end, so
//! that the caller gets the `tools/call` answer as if the call had been plain. Status changes
//! go to a [`TaskSink`] (the hub task); dropping the follow sends the server `tasks/cancel`.

use super::input::not_bridged;
use super::{CallReply, Session};
use crate::jsonrpc::{self, Message, RawObject, code};
use crate::upstream::{CallError, ServerInfo, Upstream, stateless};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The extension's identifier (in capabilities' `extensions` and in -32021 errors).
pub(crate) const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The `_meta` key of the per-request client capabilities (2026-07-28).
const CLIENT_CAPABILITIES: &str = stateless::meta::CLIENT_CAPABILITIES;
/// The `_meta` key servers tie a task's messages and result to.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The TTL asked of a 2025-11-25 server when the call named none (server-everything's own).
const DEFAULT_TTL_MS: u64 = 300_000;
/// Polls no faster than this, whatever the server suggests (a server may say 0)...
const MIN_POLL: Duration = Duration::from_millis(50);
/// ...and no slower: a status change should reach the client within seconds.
const MAX_POLL: Duration = Duration::from_secs(5);
/// A server that gives no interval is polled at this.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// The JSON-RPC code of `MissingRequiredClientCapabilityError`.
const MISSING_CAPABILITY: i64 = -32021;

/// Where a followed task's progress goes (the lead implements it for the hub task).
pub(crate) trait TaskSink: Send + Sync {
    /// The server's task changed: its status ("working", "input_required", ...) and message.
    fn status(&self, status: &str, message: Option<&str>);
}

impl TaskSink for crate::hub::tasks::Task {
    fn status(&self, status: &str, message: Option<&str>) {
        self.server_progress(status, message);
    }
}

/// How a server runs a tool as a task, if it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskStyle {
    /// 2025-11-25: `capabilities.tasks.requests.tools.call` and the tool's
    /// `execution.taskSupport`.
    Legacy,
    /// The 2026-07-28 extension, declared in `capabilities.extensions`.
    Extension,
}

/// How `info`'s server runs the tool `tool_json` (its definition as the server listed it) as a
/// task, and whether the tool requires one; None when it does not. An extension server decides
/// per call (tools carry no `taskSupport` there), so only a tool saying `required` is.
pub(crate) fn task_style(info: &ServerInfo, tool_json: &str) -> Option<(TaskStyle, bool)> {
    let caps = RawObject::parse(&info.capabilities).ok()?;
    let support = RawObject::parse(tool_json)
        .ok()
        .and_then(|t| RawObject::parse(t.get("execution")?).ok())
        .and_then(|e| e.get_str("taskSupport").map(|s| s.into_owned()));
    let required = support.as_deref() == Some("required");
    let declared = |path: &[&str]| {
        let mut at = caps.get(path[0]);
        for key in &path[1..] {
            at = at.and_then(|v| RawObject::parse(v).ok()?.get(key));
        }
        at.is_some_and(|v| v != "null")
    };
    if declared(&["extensions", TASKS_EXTENSION]) {
        return Some((TaskStyle::Extension, required));
    }
    let offered = matches!(support.as_deref(), Some("optional" | "required"));
    (offered && declared(&["tasks", "requests", "tools", "call"]))
        .then_some((TaskStyle::Legacy, required))
}

/// Whether a plain call's error says the server needs a task (-32021 naming
/// io.modelcontextprotocol/tasks).
pub(crate) fn needs_task(reply: &Message) -> bool {
    let Some(error) = reply.error().and_then(|e| RawObject::parse(e).ok()) else {
        return false;
    };
    error.get("code").and_then(|c| c.parse::<i64>().ok()) == Some(MISSING_CAPABILITY)
        && error
            .get("data")
            .is_some_and(|d| d.contains(&format!("\"{TASKS_EXTENSION}\"")))
}

/// What a server says of a task (a 2025-11-25 `task`, or a 2026-07-28 task or DetailedTask).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskView<'a> {
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    status_message: Option<String>,
    /// 2025-11-25 `ttl` / 2026-07-28 `ttlMs` (null: unlimited).
    #[serde(default, alias = "ttlMs")]
    ttl: Option<u64>,
    #[serde(default, alias = "pollIntervalMs")]
    poll_interval: Option<u64>,
    #[serde(borrow, default)]
    input_requests: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

impl TaskView<'_> {
    fn poll(&self) -> Duration {
        self.poll_interval
            .map_or(DEFAULT_POLL, Duration::from_millis)
            .clamp(MIN_POLL, MAX_POLL)
    }
}

/// Sends the server `tasks/cancel` for its task when the follow is dropped before the task
/// ended (the client cancelled, the call was abandoned, the hub task was cancelled).
struct CancelOnDrop {
    session: Arc<Session>,
    up: Arc<Upstream>,
    task: String,
    /// The `tasks/cancel` params; None once the task ended.
    params: Option<String>,
}

impl CancelOnDrop {
    /// The task ended on its own: nothing to cancel.
    fn disarm(&mut self) {
        self.params = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(params) = self.params.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (session, up) = (self.session.clone(), self.up.clone());
        let task = std::mem::take(&mut self.task);
        runtime.spawn(async move {
            let reply = session.request_upstream(&up, "tasks/cancel", &params).await;
            let ok = reply.as_ref().is_ok_and(|r| r.error().is_none());
            tracing::info!(
                server = up.name(),
                %task,
                ok,
                "cancelled the server's task"
            );
        });
    }
}

impl Session {
    /// A routed `tools/call` of the server's tool `tool` sent to `up`: as a task when the
    /// server requires one for it (or answers a plain call saying it needs one), or when the
    /// call runs as a hub task (`sink`) and the server offers tasks for the tool — its status
    /// then shown on the hub's task — else plainly.
    pub(super) async fn call_tool_upstream(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        tool: &str,
        params: &str,
        sink: Option<&dyn TaskSink>,
    ) -> CallReply {
        let snapshot = up.snapshot();
        // Most servers have no tasks: their calls skip the look-up of the tool's definition.
        let style = snapshot
            .info
            .as_ref()
            .filter(|info| info.capabilities.contains("tasks"))
            .and_then(|info| {
                let listed = snapshot.tools.iter().find(|t| t.key == tool)?;
                task_style(info, &listed.json)
            });
        drop(snapshot);
        match style {
            Some((style, true)) => return self.call_as_task(up, params, style, sink).await,
            Some((style, false)) if sink.is_some() => {
                return self.call_as_task(up, params, style, sink).await;
            }
            _ => {}
        }
        let reply = self.request_upstream(up, "tools/call", params).await;
        match &reply {
            // A server that says it needs the extension has it, whatever it listed.
            Ok(m) if needs_task(m) => {
                let style = style.map_or(TaskStyle::Extension, |(s, _)| s);
                self.call_as_task(up, params, style, sink).await
            }
            _ => reply,
        }
    }

    /// Sends the routed `tools/call` params (name already the server's own) to `up` as a task
    /// in `style` and follows it to its end: the reply is the tools/call answer as if the
    /// call had been plain. Dropping the future cancels the server's task (`tasks/cancel`).
    pub(super) async fn call_as_task(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        params: &str,
        style: TaskStyle,
        sink: Option<&dyn TaskSink>,
    ) -> CallReply {
        match style {
            TaskStyle::Legacy => self.follow_legacy(up, params, sink).await,
            TaskStyle::Extension => self.follow_extension(up, params, sink).await,
        }
    }

    /// 2025-11-25: `tools/call` with `task`, then `tasks/result` (which blocks until the end,
    /// and during which the server delivers its queued requests such as `elicitation/create`)
    /// while `tasks/get` is polled for the status.
    async fn follow_legacy(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        params: &str,
        sink: Option<&dyn TaskSink>,
    ) -> CallReply {
        let obj = RawObject::parse(params).unwrap_or_default();
        let asked_ttl = obj
            .get("task")
            .and_then(|t| serde_json::from_str::<TaskView<'_>>(t).ok())
            .and_then(|t| t.ttl)
            .unwrap_or(DEFAULT_TTL_MS);
        let created = self
            .request_upstream(
                up,
                "tools/call",
                &obj.with("task", &format!("{{\"ttl\":{asked_ttl}}}")),
            )
            .await?;
        let Some(task) = created
            .result()
            .and_then(|r| RawObject::parse(r).ok()?.get("task"))
            .and_then(|t| serde_json::from_str::<TaskView<'_>>(t).ok())
        else {
            // An error, or a server that answered plainly after all.
            return Ok(created);
        };
        let Some(task_id) = task.task_id.clone() else {
            return Ok(created);
        };
        let id_params = format!("{{\"taskId\":{}}}", jsonrpc::quote(&task_id));
        let mut guard = self.following(up, &task_id, TaskStyle::Legacy, &id_params);
        let mut seen = Seen::default();
        seen.report(sink, &task);
        let lifetime = Duration::from_millis(task.ttl.unwrap_or(asked_ttl));
        let mut poll = task.poll();
        let result = self.request_upstream_within(up, "tasks/result", &id_params, Some(lifetime));
        tokio::pin!(result);
        let reply = loop {
            tokio::select! {
                reply = &mut result => break reply,
                () = tokio::time::sleep(poll) => {
                    // Only for the status: a failed poll is no reason to stop waiting.
                    let got = self.request_upstream(up, "tasks/get", &id_params).await;
                    if let Some(task) = got.as_ref().ok().and_then(view) {
                        seen.report(sink, &task);
                        poll = task.poll();
                    }
                }
            }
        };
        let reply = reply?;
        guard.disarm();
        Ok(match reply.result() {
            Some(result) => result_message(&without_related_task(result))?,
            None => reply,
        })
    }

    /// 2026-07-28: `tools/call` declaring the extension; a `resultType: "task"` answer is
    /// polled with `tasks/get` until terminal, its input requests answered by the client and
    /// sent back with `tasks/update`.
    async fn follow_extension(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        params: &str,
        sink: Option<&dyn TaskSink>,
    ) -> CallReply {
        let caps = self.declaring_tasks(up, params);
        let created = self
            .request_upstream(up, "tools/call", &with_capabilities(params, &caps))
            .await?;
        let Some(first) = created
            .result()
            .filter(|r| {
                RawObject::parse(r)
                    .ok()
                    .and_then(|o| o.get_str("resultType"))
                    .as_deref()
                    == Some("task")
            })
            .and_then(|r| serde_json::from_str::<TaskView<'_>>(r).ok())
        else {
            return Ok(created);
        };
        let Some(task_id) = first.task_id.clone() else {
            return Ok(created);
        };
        let id = jsonrpc::quote(&task_id);
        let get_params = with_capabilities(&format!("{{\"taskId\":{id}}}"), &caps);
        let mut guard = self.following(up, &task_id, TaskStyle::Extension, &get_params);
        let deadline = first
            .ttl
            .map(|ms| Instant::now() + Duration::from_millis(ms));
        let mut seen = Seen::default();
        seen.report(sink, &first);
        let mut poll = first.poll();
        let mut answered: HashSet<String> = HashSet::new();
        loop {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(CallError::Timeout {
                    server: up.name().to_string(),
                    method: "tools/call (as a task)".into(),
                    after: Duration::from_millis(first.ttl.unwrap_or_default()),
                });
            }
            tokio::time::sleep(poll).await;
            let got = self.request_upstream(up, "tasks/get", &get_params).await?;
            if got.result().is_none() {
                // The task is gone or unknown: the server's error is the call's.
                guard.disarm();
                return Ok(got);
            }
            let Some(task) = view(&got) else {
                continue;
            };
            seen.report(sink, &task);
            poll = task.poll();
            match task.status.as_deref() {
                Some("completed") => {
                    guard.disarm();
                    return result_message(task.result.map_or("{}", RawValue::get));
                }
                Some("failed") => {
                    guard.disarm();
                    let error = task.error.map_or_else(
                        || {
                            jsonrpc::error_object(
                                code::INTERNAL_ERROR,
                                "the server's task failed",
                                None,
                            )
                        },
                        |e| e.get().to_string(),
                    );
                    return message(&jsonrpc::error_raw("0", &error));
                }
                Some("cancelled") => {
                    guard.disarm();
                    return message(&jsonrpc::error(
                        "0",
                        code::INTERNAL_ERROR,
                        &format!("server '{}' cancelled the task", up.name()),
                        None,
                    ));
                }
                Some("input_required") => {
                    let Some(requests) = task.input_requests.map(RawValue::get) else {
                        continue;
                    };
                    let Some(fresh) = unanswered(requests, &answered) else {
                        continue;
                    };
                    let responses = match self.fulfil(up.name(), "tools/call", &fresh.1).await {
                        Ok(responses) => responses,
                        // The guard cancels the server's task: it cannot go on without input.
                        Err(why) => return not_bridged(&why.to_string()),
                    };
                    answered.extend(fresh.0);
                    let update = with_capabilities(
                        &format!("{{\"taskId\":{id},\"inputResponses\":{responses}}}"),
                        &caps,
                    );
                    let ack = self.request_upstream(up, "tasks/update", &update).await?;
                    if ack.error().is_some() {
                        guard.disarm();
                        return Ok(ack);
                    }
                }
                _ => {}
            }
        }
    }

    /// Notes that the server's task `task_id` is followed from now on; the guard returned
    /// cancels it (with `params`, its id as the server wants it) unless disarmed.
    fn following(
        self: &Arc<Self>,
        up: &Arc<Upstream>,
        task_id: &str,
        style: TaskStyle,
        params: &str,
    ) -> CancelOnDrop {
        tracing::debug!(server = up.name(), task = %task_id, ?style, "following the server's task");
        CancelOnDrop {
            session: self.clone(),
            up: up.clone(),
            task: task_id.to_string(),
            params: Some(params.to_string()),
        }
    }

    /// The client capabilities to put in the `_meta` of the follower's own requests to `up`:
    /// those the call carries (a 2026-07-28 client's), else those the hub declares to the
    /// server, with the tasks extension added.
    fn declaring_tasks(&self, up: &Upstream, params: &str) -> String {
        let carried = RawObject::parse(params).ok().and_then(|p| {
            RawObject::parse(p.get("_meta")?)
                .ok()?
                .get(CLIENT_CAPABILITIES)
        });
        let declared;
        let base = match carried {
            Some(caps) => caps,
            None if up.connection().is_some_and(|c| c.is_stateless()) => {
                stateless::CLIENT_CAPABILITIES
            }
            None => {
                declared = self.hub.client_caps.borrow().clone().unwrap_or_default();
                if declared.is_empty() { "{}" } else { &declared }
            }
        };
        let caps = RawObject::parse(base).unwrap_or_default();
        let extensions = caps
            .get("extensions")
            .and_then(|e| RawObject::parse(e).ok())
            .unwrap_or_default()
            .with(TASKS_EXTENSION, "{}");
        caps.with("extensions", &extensions)
    }
}

/// `params` with `caps` as its `_meta` client capabilities.
fn with_capabilities(params: &str, caps: &str) -> String {
    let obj = RawObject::parse(params).unwrap_or_default();
    let meta = obj
        .get("_meta")
        .and_then(|m| RawObject::parse(m).ok())
        .unwrap_or_default()
        .with(CLIENT_CAPABILITIES, caps);
    obj.with("_meta", &meta)
}

/// The entries of an `inputRequests` object not answered yet (their keys, and the object
/// of them); None when every one was.
fn unanswered(requests: &str, answered: &HashSet<String>) -> Option<(Vec<String>, String)> {
    let obj = RawObject::parse(requests).ok()?;
    let fresh: Vec<(String, &str)> = obj
        .keys()
        .filter(|k| !answered.contains(*k))
        .filter_map(|k| Some((k.to_string(), obj.get(k)?)))
        .collect();
    if fresh.is_empty() {
        return None;
    }
    let members: Vec<String> = fresh
        .iter()
        .map(|(k, v)| format!("{}:{v}", jsonrpc::quote(k)))
        .collect();
    Some((
        fresh.into_iter().map(|(k, _)| k).collect(),
        format!("{{{}}}", members.join(",")),
    ))
}

/// A result without the server's `related-task` mark (its task id means nothing to the
/// client; the hub marks its own tasks' results itself).
fn without_related_task(result: &str) -> String {
    let Ok(obj) = RawObject::parse(result) else {
        return result.to_string();
    };
    let Some(meta) = obj.get("_meta").and_then(|m| RawObject::parse(m).ok()) else {
        return result.to_string();
    };
    if meta.get(RELATED_TASK).is_none() {
        return result.to_string();
    }
    let rest = meta.rewrite(&[(RELATED_TASK, None)]);
    obj.rewrite(&[("_meta", (rest != "{}").then_some(rest.as_str()))])
}

/// The task a `tasks/get` answer describes.
fn view(reply: &Message) -> Option<TaskView<'_>> {
    serde_json::from_str(reply.result()?).ok()
}

/// The status last reported, so the sink hears only changes.
#[derive(Default)]
struct Seen {
    last: Option<(String, Option<String>)>,
}

impl Seen {
    fn report(&mut self, sink: Option<&dyn TaskSink>, task: &TaskView<'_>) {
        let Some(status) = &task.status else {
            return;
        };
        let now = (status.clone(), task.status_message.clone());
        if self.last.as_ref() == Some(&now) {
            return;
        }
        if let Some(sink) = sink {
            sink.status(status, task.status_message.as_deref());
        }
        self.last = Some(now);
    }
}

/// A reply carrying `result`, as if the server had answered so.
fn result_message(result: &str) -> CallReply {
    message(&jsonrpc::result("0", result))
}

fn message(line: &str) -> CallReply {
    Message::parse(line.into()).map_err(|e| CallError::Closed {
        server: String::new(),
        reason: format!("made an unreadable reply: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(capabilities: &str) -> ServerInfo {
        ServerInfo {
            protocol_version: "2025-11-25".into(),
            capabilities: capabilities.into(),
            server_info: "{}".into(),
            instructions: None,
        }
    }

    fn reply(line: &str) -> Message {
        Message::parse(line.into()).unwrap()
    }

    #[test]
    fn legacy_servers_run_the_tools_that_say_so_as_tasks() {
        let everything = info(
            r#"{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}"#,
        );
        let tool = |support: &str| {
            format!(
                r#"{{"name":"t","inputSchema":{{}},"execution":{{"taskSupport":"{support}"}}}}"#
            )
        };
        assert_eq!(
            task_style(&everything, &tool("required")),
            Some((TaskStyle::Legacy, true))
        );
        assert_eq!(
            task_style(&everything, &tool("optional")),
            Some((TaskStyle::Legacy, false))
        );
        assert_eq!(task_style(&everything, &tool("forbidden")), None);
        assert_eq!(
            task_style(&everything, r#"{"name":"t","inputSchema":{}}"#),
            None
        );
        // A tool may say so, but a server that cannot take task-augmented calls cannot.
        let no_tasks = info(r#"{"tools":{},"tasks":{"list":{}}}"#);
        assert_eq!(task_style(&no_tasks, &tool("required")), None);
        assert_eq!(
            task_style(&info(r#"{"tools":{}}"#), &tool("optional")),
            None
        );
    }

    #[test]
    fn extension_servers_decide_per_call() {
        let rmcp = info(r#"{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}"#);
        assert_eq!(
            task_style(&rmcp, r#"{"name":"t"}"#),
            Some((TaskStyle::Extension, false))
        );
        assert_eq!(
            task_style(
                &rmcp,
                r#"{"name":"t","execution":{"taskSupport":"required"}}"#
            ),
            Some((TaskStyle::Extension, true))
        );
        let other = info(r#"{"tools":{},"extensions":{"io.modelcontextprotocol/ui":{}}}"#);
        assert_eq!(task_style(&other, r#"{"name":"t"}"#), None);
    }

    #[test]
    fn only_a_missing_tasks_capability_needs_a_task() {
        assert!(needs_task(&reply(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"Missing required client capability","data":{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#
        )));
        // Another capability missing, another error, a result: no.
        assert!(!needs_task(&reply(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"m","data":{"requiredCapabilities":{"elicitation":{}}}}}"#
        )));
        assert!(!needs_task(&reply(
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"io.modelcontextprotocol/tasks","data":"\"io.modelcontextprotocol/tasks\""}}"#
        )));
        assert!(!needs_task(&reply(
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\"io.modelcontextprotocol/tasks\" -32021"}]}}"#
        )));
    }

    #[test]
    fn the_servers_task_mark_is_taken_off_the_result() {
        assert_eq!(
            without_related_task(
                r#"{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"}}}"#
            ),
            r#"{"content":[]}"#
        );
        assert_eq!(
            without_related_task(
                r#"{"content":[],"_meta":{"a":1,"io.modelcontextprotocol/related-task":{"taskId":"x"}}}"#
            ),
            r#"{"content":[],"_meta":{"a":1}}"#
        );
        assert_eq!(
            without_related_task(r#"{"content":[]}"#),
            r#"{"content":[]}"#
        );
    }

    #[test]
    fn requests_already_answered_are_not_asked_again() {
        let requests =
            r#"{"a":{"method":"elicitation/create","params":{}},"b":{"method":"roots/list"}}"#;
        let mut answered = HashSet::new();
        let (keys, fresh) = unanswered(requests, &answered).unwrap();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(fresh, requests);
        answered.insert("a".to_string());
        let (keys, fresh) = unanswered(requests, &answered).unwrap();
        assert_eq!(keys, ["b"]);
        assert_eq!(fresh, r#"{"b":{"method":"roots/list"}}"#);
        answered.insert("b".to_string());
        assert!(unanswered(requests, &answered).is_none());
    }

    #[test]
    fn the_follower_declares_the_extension_beside_what_the_call_carries() {
        let params = r#"{"name":"t","_meta":{"progressToken":1}}"#;
        let p: serde_json::Value = serde_json::from_str(&with_capabilities(
            params,
            r#"{"extensions":{"io.modelcontextprotocol/tasks":{}}}"#,
        ))
        .unwrap();
        assert_eq!(p["_meta"]["progressToken"], 1);
        assert!(p["_meta"][CLIENT_CAPABILITIES]["extensions"][TASKS_EXTENSION].is_object());
    }
}
