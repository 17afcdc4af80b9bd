//! A client's side of tasks: a task-augmented `tools/call` starts a hub task (the call, run
//! in the background through every stage of the pipeline, see [`crate::hub::tasks`]), and
//! `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel` (2025-11-25) or `tasks/get`,
//! `tasks/update`, `tasks/cancel` (the 2026-07-28 extension) read and steer it. A client
//! reaches only its own tasks.

use super::calls::Inner;
use super::{Reply, Session, lock};
use crate::hub::NameKind;
use crate::hub::tasks::{EXTENSION, Owner, RELATED_TASK, Snapshot, Status, Task, task_id};
use crate::jsonrpc::{self, Message, RawObject, code};
use std::sync::Arc;
use std::time::Duration;

impl Session {
    /// Who this client's tasks belong to.
    pub(crate) fn task_owner(&self) -> Owner {
        if self.stateless {
            Owner::Bearer
        } else {
            Owner::Session(self.number)
        }
    }

    /// Starts `m` (a `tools/call`) as a hub task of this client, kept for `ttl` once it has
    /// ended: the call runs with `params` (the request's, without what asked for the task).
    pub(super) fn start_task(
        self: &Arc<Self>,
        m: &Message,
        params: &str,
        ttl: Option<Duration>,
    ) -> Result<Arc<Task>, String> {
        let task = self
            .hub
            .tasks
            .create(self.task_owner(), ttl)
            .map_err(|e| e.to_string())?;
        if !self.stateless {
            let me = Arc::downgrade(self);
            task.on_change(move |task, _| {
                if let Some(s) = me.upgrade() {
                    s.send_unprompted(jsonrpc::notification(
                        "notifications/tasks/status",
                        Some(&task.legacy_task()),
                    ));
                }
            });
        }
        // The call's own request: the task's id as its id, so nothing of the client's
        // request ids is reused by a call that outlives the request.
        let line = jsonrpc::request(&jsonrpc::quote(&task.id), m.method(), Some(params));
        let call = Message::parse(line.into_boxed_str()).map_err(|e| e.to_string())?;
        let (me, run) = (self.clone(), task.clone());
        let handle = tokio::spawn(async move {
            let (to, answer) = tokio::sync::oneshot::channel();
            let inner = Inner {
                program: None,
                task: Some(run.clone()),
                to,
            };
            let line = match me.by_name_to(&call, NameKind::Tool, Some(inner)).await {
                Reply::Line(line) => me.hub.policy().redact(&line).into_owned(),
                Reply::Sent => match answer.await {
                    Ok(line) => line,
                    Err(_) => jsonrpc::error(
                        "null",
                        code::INTERNAL_ERROR,
                        "the call ended without an answer",
                        None,
                    ),
                },
            };
            run.finish(&line);
        });
        task.set_run(handle.abort_handle());
        Ok(task)
    }

    /// A 2025-11-25 task-augmented `tools/call`: answered at once with the task.
    pub(super) async fn legacy_task_call(self: &Arc<Self>, m: &Message) -> Reply {
        let obj = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .unwrap_or_default();
        let ttl = obj
            .get("task")
            .and_then(|t| RawObject::parse(t).ok())
            .and_then(|t| t.get("ttl").and_then(|v| v.parse::<u64>().ok()))
            .map(Duration::from_millis);
        let params = obj.rewrite(&[("task", None)]);
        match self.start_task(m, &params, ttl) {
            Ok(task) => {
                jsonrpc::result(m.id(), &format!("{{\"task\":{}}}", task.legacy_task())).into()
            }
            Err(e) => jsonrpc::error(m.id(), code::INTERNAL_ERROR, &e, None).into(),
        }
    }

    /// `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel` and `tasks/update`, in this
    /// client's era.
    pub(super) async fn task_request(self: &Arc<Self>, m: &Message) -> Reply {
        let id = m.id();
        let obj = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .unwrap_or_default();
        let owner = self.task_owner();
        if m.method() == "tasks/list" {
            if self.stateless {
                return not_found(m);
            }
            let tasks: Vec<String> = self
                .hub
                .tasks
                .of(owner)
                .iter()
                .map(|t| t.legacy_task())
                .collect();
            return jsonrpc::result(id, &format!("{{\"tasks\":[{}]}}", tasks.join(","))).into();
        }
        let task = match task_id(&obj).and_then(|t| self.hub.tasks.get(&t, owner)) {
            Ok(task) => task,
            Err(e) => return jsonrpc::error(id, e.code(), &e.to_string(), None).into(),
        };
        let modern = self.stateless;
        match m.method() {
            "tasks/get" if modern => jsonrpc::result(id, &task.extension_task(true)).into(),
            "tasks/get" => jsonrpc::result(id, &task.legacy_task()).into(),
            "tasks/result" if !modern => {
                let ended = task.ended().await;
                result_line(id, &task, &ended).into()
            }
            "tasks/cancel" => {
                // The extension acknowledges a cancel of an ended task like any other (it is
                // cooperative and idempotent); 2025-11-25 refuses it.
                if !task.cancel() && !modern {
                    return jsonrpc::error(
                        id,
                        code::INVALID_PARAMS,
                        &format!(
                            "task {} has already ended ({}); it cannot be cancelled",
                            task.id,
                            task.snapshot().status.as_str()
                        ),
                        None,
                    )
                    .into();
                }
                if modern {
                    jsonrpc::result(id, "{\"resultType\":\"complete\"}").into()
                } else {
                    jsonrpc::result(id, &task.legacy_task()).into()
                }
            }
            "tasks/update" if modern => {
                task.answer_input(obj.get("inputResponses").unwrap_or("{}"));
                jsonrpc::result(id, "{\"resultType\":\"complete\"}").into()
            }
            _ => not_found(m),
        }
    }
}

fn not_found(m: &Message) -> Reply {
    jsonrpc::error(
        m.id(),
        code::METHOD_NOT_FOUND,
        &format!(
            "Method not found: {} (not in this protocol revision's tasks)",
            m.method()
        ),
        None,
    )
    .into()
}

/// `tasks/result`'s answer: the call's own result (tied to its task in `_meta`) or error.
fn result_line(id: &str, task: &Task, ended: &Snapshot) -> String {
    use crate::hub::tasks::Answer;
    match &ended.answer {
        Some(Answer::Result(result)) => {
            let obj = RawObject::parse(result).unwrap_or_default();
            let meta = obj
                .get("_meta")
                .and_then(|m| RawObject::parse(m).ok())
                .unwrap_or_default();
            let related = format!("{{\"taskId\":{}}}", jsonrpc::quote(&task.id));
            let meta = meta.rewrite(&[(RELATED_TASK, Some(&related))]);
            jsonrpc::result(id, &obj.with("_meta", &meta))
        }
        Some(Answer::Error(error)) => jsonrpc::error_raw(id, error),
        None => jsonrpc::error(
            id,
            code::INVALID_PARAMS,
            &format!(
                "task {} was {} and has no result",
                task.id,
                ended.status.as_str()
            ),
            None,
        ),
    }
}

/// Whether a `tools/call`'s `_meta` declares the 2026-07-28 Tasks extension.
pub(crate) fn declares_extension(capabilities: Option<&str>) -> bool {
    capabilities
        .and_then(|c| RawObject::parse(c).ok())
        .and_then(|c| c.get("extensions").and_then(|e| RawObject::parse(e).ok()))
        .is_some_and(|e| e.get(EXTENSION).is_some_and(|v| v != "null"))
}

impl Session {
    /// Whether this client declared it reads tasks: `capabilities.tasks` (2025-11-25) or the
    /// extension (2026-07-28).
    pub(crate) fn client_has_tasks(&self) -> bool {
        let caps = lock(&self.capabilities);
        if self.stateless {
            declares_extension(caps.as_deref())
        } else {
            caps.as_deref()
                .and_then(|c| RawObject::parse(c).ok())
                .is_some_and(|c| c.get("tasks").is_some_and(|v| v != "null"))
        }
    }

    /// A 2026-07-28 `tools/call` of a client declaring the extension: the call runs as a
    /// task; answered with its result if it ends within `wait`, else with the task.
    pub(super) async fn extension_task_call(
        self: &Arc<Self>,
        m: &Message,
        wait: Duration,
    ) -> Reply {
        let params = m.params().unwrap_or("{}");
        let task = match self.start_task(m, params, None) {
            Ok(task) => task,
            Err(e) => return jsonrpc::error(m.id(), code::INTERNAL_ERROR, &e, None).into(),
        };
        match task.ended_within(wait).await {
            Some(ended) if ended.status != Status::Cancelled => {
                // Done at once: the plain answer, and nothing left to poll for.
                self.hub.tasks.remove(&task.id);
                match ended.answer {
                    Some(crate::hub::tasks::Answer::Result(r)) => jsonrpc::result(m.id(), &r),
                    Some(crate::hub::tasks::Answer::Error(e)) => jsonrpc::error_raw(m.id(), &e),
                    None => jsonrpc::error(m.id(), code::INTERNAL_ERROR, "no answer", None),
                }
                .into()
            }
            _ => jsonrpc::result(m.id(), &task.extension_task(false)).into(),
        }
    }
}
