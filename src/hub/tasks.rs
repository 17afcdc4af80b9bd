//! Tasks the hub runs for its clients (MCP Tasks, both eras): a client's task is always the
//! hub's own — the ordinary call, run in the background through every stage of the policy
//! pipeline — kept here by an unguessable id, with its owner, status and answer, until its
//! TTL has passed. Each era's wire shapes are made from one [`Snapshot`] (`legacy_task`,
//! `extension_task`), so a task started in one era reads the same in the other.

use crate::jsonrpc::{self, RawObject};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::watch;
use tokio::task::AbortHandle;

/// How long a task and its answer are kept when the client does not say.
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);
/// The longest a client may ask a task to be kept.
pub const MAX_TTL: Duration = Duration::from_secs(3600);
/// How often the hub suggests a client polls.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Tasks kept at once, over all clients: each may hold a server's call open and an answer.
pub const MAX_TASKS: usize = 4096;
/// The bytes of ended tasks' answers kept at once: past it, the oldest are forgotten first
/// (a client asking for one then gets "unknown task").
pub const MAX_KEPT_BYTES: usize = 256 << 20;
/// `_meta` key tying a message to its task (2025-11-25).
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The 2026-07-28 Tasks extension's id.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Who may see a task: the handshake session that made it (by its number), or anyone
/// holding the id (a 2026-07-28 client has no session: the unguessable id is the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Session(u64),
    Bearer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }

    /// A server's status word, as far as the hub's own task shows it: a server's terminal
    /// state is only the hub's once its answer is in.
    pub fn of_server(word: &str) -> Status {
        match word {
            "input_required" => Status::InputRequired,
            _ => Status::Working,
        }
    }
}

/// How a task ended: the call's result (a tool error with `isError` included) or the
/// JSON-RPC error it got, both as JSON text, already redacted.
#[derive(Debug, Clone)]
pub enum Answer {
    Result(Arc<str>),
    Error(Arc<str>),
}

/// A task as it is now.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub status: Status,
    pub message: Option<String>,
    pub updated: SystemTime,
    pub answer: Option<Answer>,
    /// What the task waits for from a 2026-07-28 client (`inputRequests`, JSON text).
    pub input_requests: Option<String>,
}

/// What is told of a task's every change.
type OnChange = Box<dyn Fn(&Task, &Snapshot) + Send + Sync>;

pub struct Task {
    pub id: Arc<str>,
    owner: Owner,
    created: SystemTime,
    /// How long the task and its answer are kept once it has ended.
    pub ttl: Duration,
    state: watch::Sender<Snapshot>,
    run: Mutex<Option<AbortHandle>>,
    /// Told of every change (the owner's `notifications/tasks/status`).
    on_change: Mutex<Option<OnChange>>,
    /// `inputResponses` a 2026-07-28 client sent with `tasks/update`, for whatever waits for
    /// them (the server's task the call follows).
    inputs: (
        tokio::sync::mpsc::UnboundedSender<String>,
        Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    ),
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Task {
    pub fn snapshot(&self) -> Snapshot {
        self.state.borrow().clone()
    }

    /// The background run, so that cancelling the task stops it (and its server's call).
    pub fn set_run(&self, run: AbortHandle) {
        *lock(&self.run) = Some(run);
    }

    /// A client's `inputResponses` (`tasks/update`).
    pub fn answer_input(&self, responses: &str) {
        let _ = self.inputs.0.send(responses.to_string());
    }

    /// Where the client's `inputResponses` arrive; given once.
    pub fn take_inputs(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
        lock(&self.inputs.1).take()
    }

    pub fn on_change(&self, f: impl Fn(&Task, &Snapshot) + Send + Sync + 'static) {
        *lock(&self.on_change) = Some(Box::new(f));
    }

    fn change(&self, f: impl FnOnce(&mut Snapshot) -> bool) {
        let mut changed = false;
        self.state.send_if_modified(|s| {
            // Nothing moves a task out of a terminal state.
            if s.status.is_terminal() {
                return false;
            }
            changed = f(s);
            if changed {
                s.updated = SystemTime::now();
            }
            changed
        });
        if changed {
            let now = self.snapshot();
            if let Some(f) = lock(&self.on_change).as_ref() {
                f(self, &now);
            }
        }
    }

    /// The call's server reports progress on its own task.
    pub fn progress(&self, status: Status, message: Option<&str>, input: Option<&str>) {
        self.change(|s| {
            let message = message.map(str::to_string);
            let input = input.map(str::to_string);
            if s.status == status && s.message == message && s.input_requests == input {
                return false;
            }
            s.status = status;
            s.message = message;
            s.input_requests = input;
            true
        });
    }

    /// The server's own task, which the call follows, reports `status` and `message`: shown
    /// as the hub task's (what the client is asked stays as the hub put it).
    pub fn server_progress(&self, status: &str, message: Option<&str>) {
        let status = Status::of_server(status);
        self.change(|s| {
            let message = message.map(str::to_string);
            if s.status == status && s.message == message {
                return false;
            }
            s.status = status;
            s.message = message;
            true
        });
    }

    /// The call is over: its answer line (a JSON-RPC response, already redacted).
    pub fn finish(&self, line: &str) {
        let answer = match crate::jsonrpc::Message::parse(line.into()) {
            Ok(m) => match (m.result(), m.error()) {
                (Some(r), _) => Answer::Result(r.into()),
                (None, Some(e)) => Answer::Error(e.into()),
                (None, None) => Answer::Error(
                    jsonrpc::error_object(jsonrpc::code::INTERNAL_ERROR, "empty answer", None)
                        .into(),
                ),
            },
            Err(e) => Answer::Error(
                jsonrpc::error_object(
                    jsonrpc::code::INTERNAL_ERROR,
                    &format!("unreadable answer: {e}"),
                    None,
                )
                .into(),
            ),
        };
        self.change(|s| {
            s.status = match answer {
                Answer::Result(_) => Status::Completed,
                Answer::Error(_) => Status::Failed,
            };
            s.message = None;
            s.input_requests = None;
            s.answer = Some(answer);
            true
        });
    }

    /// Stops the task's run (its server's call is cancelled with it). False when it had
    /// already ended.
    pub fn cancel(&self) -> bool {
        if self.snapshot().status.is_terminal() {
            return false;
        }
        if let Some(run) = lock(&self.run).take() {
            run.abort();
        }
        self.change(|s| {
            s.status = Status::Cancelled;
            s.message = Some("cancelled by the client".into());
            s.input_requests = None;
            true
        });
        true
    }

    /// Waits until the task has ended, and how.
    pub async fn ended(&self) -> Snapshot {
        let mut rx = self.state.subscribe();
        match rx.wait_for(|s| s.status.is_terminal()).await {
            Ok(s) => s.clone(),
            Err(_) => self.snapshot(),
        }
    }

    /// Waits until the task has ended or `limit` has passed.
    pub async fn ended_within(&self, limit: Duration) -> Option<Snapshot> {
        tokio::time::timeout(limit, self.ended()).await.ok()
    }

    fn expired(&self, now: SystemTime) -> bool {
        let s = self.state.borrow();
        s.status.is_terminal()
            && now
                .duration_since(s.updated)
                .is_ok_and(|since| since > self.ttl)
    }

    /// The 2025-11-25 `Task` object.
    pub fn legacy_task(&self) -> String {
        let mut out = String::from("{");
        self.task_fields(&mut out, &self.snapshot(), ("ttl", "pollInterval"));
        out.push('}');
        out
    }

    /// The fields both eras' task objects have, `names` naming the TTL and the interval.
    fn task_fields(&self, out: &mut String, s: &Snapshot, names: (&str, &str)) {
        out.push_str(&format!(
            "\"taskId\":{},\"status\":\"{}\",\"createdAt\":{},\"lastUpdatedAt\":{},\"{}\":{},\"{}\":{}",
            jsonrpc::quote(&self.id),
            s.status.as_str(),
            jsonrpc::quote(&crate::time::rfc3339(self.created)),
            jsonrpc::quote(&crate::time::rfc3339(s.updated)),
            names.0,
            self.ttl.as_millis(),
            names.1,
            POLL_INTERVAL.as_millis(),
        ));
        if let Some(m) = &s.message {
            out.push_str(",\"statusMessage\":");
            out.push_str(&jsonrpc::quote(m));
        }
    }

    /// The 2026-07-28 extension's task: `CreateTaskResult` (`detailed` false) or the
    /// `DetailedTask` of `tasks/get` (with its input requests, result or error).
    pub fn extension_task(&self, detailed: bool) -> String {
        let kind = if detailed { "complete" } else { "task" };
        self.extension_shape(Some(kind), detailed)
    }

    /// The `DetailedTask` a `notifications/tasks` carries.
    pub fn extension_notification(&self) -> String {
        self.extension_shape(None, true)
    }

    /// Changes of this task, for a stream that reports them.
    pub fn watch(&self) -> watch::Receiver<Snapshot> {
        self.state.subscribe()
    }

    fn extension_shape(&self, result_type: Option<&str>, detailed: bool) -> String {
        let s = self.snapshot();
        let mut out = String::from("{");
        if let Some(kind) = result_type {
            out.push_str(&format!("\"resultType\":\"{kind}\","));
        }
        self.task_fields(&mut out, &s, ("ttlMs", "pollIntervalMs"));
        if detailed {
            match (&s.answer, &s.input_requests) {
                (Some(Answer::Result(r)), _) => {
                    out.push_str(",\"result\":");
                    out.push_str(r);
                }
                (Some(Answer::Error(e)), _) => {
                    out.push_str(",\"error\":");
                    out.push_str(e);
                }
                (None, Some(input)) if s.status == Status::InputRequired => {
                    out.push_str(",\"inputRequests\":");
                    out.push_str(input);
                }
                _ => {}
            }
        }
        out.push('}');
        out
    }
}

/// Why a task id does not lead to a task.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error("no task {0}: it is unknown, expired, or not this client's")]
    Unknown(String),
    #[error("taskId is missing")]
    Missing,
    #[error("too many tasks are kept ({MAX_TASKS}); wait for some to end or expire")]
    Full,
    #[error("no random source to make a task id")]
    NoRandom,
}

impl TaskError {
    pub fn code(&self) -> i64 {
        match self {
            TaskError::Unknown(_) | TaskError::Missing => jsonrpc::code::INVALID_PARAMS,
            TaskError::Full | TaskError::NoRandom => jsonrpc::code::INTERNAL_ERROR,
        }
    }
}

/// Every task the hub keeps, by id.
#[derive(Default)]
pub struct Tasks {
    map: Mutex<HashMap<Arc<str>, Arc<Task>>>,
}

impl Tasks {
    /// A new working task for `owner`, kept for `ttl` once it ends.
    pub fn create(&self, owner: Owner, ttl: Option<Duration>) -> Result<Arc<Task>, TaskError> {
        let id = new_id().ok_or(TaskError::NoRandom)?;
        let now = SystemTime::now();
        let ttl = ttl.unwrap_or(DEFAULT_TTL).min(MAX_TTL);
        let task = Arc::new(Task {
            id: id.into(),
            owner,
            created: now,
            ttl,
            state: watch::channel(Snapshot {
                status: Status::Working,
                message: None,
                updated: now,
                answer: None,
                input_requests: None,
            })
            .0,
            run: Mutex::new(None),
            on_change: Mutex::new(None),
            inputs: {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                (tx, Mutex::new(Some(rx)))
            },
        });
        let mut map = lock(&self.map);
        // Expired answers go as new tasks come: what is kept stays bounded without a timer.
        map.retain(|_, t| !t.expired(now));
        drop_oldest_answers(&mut map, MAX_KEPT_BYTES);
        if map.len() >= MAX_TASKS {
            return Err(TaskError::Full);
        }
        map.insert(task.id.clone(), task.clone());
        Ok(task)
    }

    /// The task `id` as `owner` may see it: a session's tasks only to that session; a
    /// bearer task to whoever has its id.
    pub fn get(&self, id: &str, owner: Owner) -> Result<Arc<Task>, TaskError> {
        let now = SystemTime::now();
        let mut map = lock(&self.map);
        match map.get(id) {
            Some(t) if t.expired(now) => {
                map.remove(id);
                Err(TaskError::Unknown(id.to_string()))
            }
            Some(t) if t.owner == Owner::Bearer || t.owner == owner => Ok(t.clone()),
            _ => Err(TaskError::Unknown(id.to_string())),
        }
    }

    /// Forgets task `id` (one answered in full without being shown to its client).
    pub fn remove(&self, id: &str) {
        lock(&self.map).remove(id);
    }

    /// `owner`'s tasks, oldest first.
    pub fn of(&self, owner: Owner) -> Vec<Arc<Task>> {
        let now = SystemTime::now();
        let mut map = lock(&self.map);
        map.retain(|_, t| !t.expired(now));
        let mut mine: Vec<_> = map.values().filter(|t| t.owner == owner).cloned().collect();
        mine.sort_by_key(|t| t.created);
        mine
    }

    /// A session is gone: its tasks can never be read again, so those still running stop.
    pub fn forget(&self, owner: Owner) {
        let gone: Vec<_> = {
            let mut map = lock(&self.map);
            let gone = map.values().filter(|t| t.owner == owner).cloned().collect();
            map.retain(|_, t| t.owner != owner);
            gone
        };
        for task in gone {
            task.cancel();
        }
    }
}

/// Forgets ended tasks, oldest first, until their answers hold at most `limit` bytes.
fn drop_oldest_answers(map: &mut HashMap<Arc<str>, Arc<Task>>, limit: usize) {
    let mut ended: Vec<(SystemTime, usize, Arc<str>)> = map
        .values()
        .filter_map(|t| {
            let s = t.state.borrow();
            let bytes = match s.answer.as_ref()? {
                Answer::Result(a) | Answer::Error(a) => a.len(),
            };
            Some((s.updated, bytes, t.id.clone()))
        })
        .collect();
    let mut total: usize = ended.iter().map(|(_, b, _)| b).sum();
    if total <= limit {
        return;
    }
    ended.sort_by_key(|(at, _, _)| *at);
    for (_, bytes, id) in ended {
        if total <= limit {
            break;
        }
        map.remove(&id);
        total -= bytes;
    }
}

/// `taskId` from a request's params.
pub fn task_id<'a>(params: &'a RawObject<'_>) -> Result<std::borrow::Cow<'a, str>, TaskError> {
    params.get_str("taskId").ok_or(TaskError::Missing)
}

fn new_id() -> Option<String> {
    Some(format!("t{}", crate::platform::random_hex(16)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_task_is_seen_only_by_its_owner_and_ends_once() {
        let tasks = Tasks::default();
        let t = tasks.create(Owner::Session(1), None).unwrap();
        assert!(tasks.get(&t.id, Owner::Session(1)).is_ok());
        assert!(tasks.get(&t.id, Owner::Session(2)).is_err());
        assert!(tasks.get(&t.id, Owner::Bearer).is_err());
        assert_eq!(tasks.of(Owner::Session(2)).len(), 0);
        t.finish(r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#);
        assert_eq!(t.ended().await.status, Status::Completed);
        // A late cancel changes nothing.
        assert!(!t.cancel());
        assert_eq!(t.snapshot().status, Status::Completed);
        let wire: serde_json::Value = serde_json::from_str(&t.extension_task(true)).unwrap();
        assert_eq!(wire["result"]["content"], serde_json::json!([]));
        assert_eq!(wire["resultType"], "complete");
        let legacy: serde_json::Value = serde_json::from_str(&t.legacy_task()).unwrap();
        assert_eq!(legacy["status"], "completed");
        assert_eq!(legacy["ttl"], 600_000);
    }

    #[test]
    fn the_oldest_answers_go_first_past_the_limit() {
        let tasks = Tasks::default();
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"t":"{}"}}}}"#,
            "x".repeat(100)
        );
        let first = tasks.create(Owner::Bearer, None).unwrap();
        first.finish(&big);
        std::thread::sleep(std::time::Duration::from_millis(5));
        let second = tasks.create(Owner::Bearer, None).unwrap();
        second.finish(&big);
        let running = tasks.create(Owner::Bearer, None).unwrap();
        drop_oldest_answers(&mut lock(&tasks.map), 150);
        assert!(tasks.get(&first.id, Owner::Bearer).is_err());
        assert!(tasks.get(&second.id, Owner::Bearer).is_ok());
        assert!(tasks.get(&running.id, Owner::Bearer).is_ok());
    }

    #[test]
    fn a_bearer_task_is_read_by_its_id_alone() {
        let tasks = Tasks::default();
        let t = tasks.create(Owner::Bearer, Some(MAX_TTL * 2)).unwrap();
        assert_eq!(t.ttl, MAX_TTL);
        assert!(tasks.get(&t.id, Owner::Session(7)).is_ok());
        assert!(tasks.get("t00", Owner::Bearer).is_err());
        assert!(t.cancel());
        assert_eq!(t.snapshot().status, Status::Cancelled);
    }
}
