//! A 2026-07-28 request on a session of its own, and the input it waits for: what the
//! session would ask the client becomes an input-required result, and the request is parked,
//! upstream call and all, under a signed `requestState` until the client retries with the
//! answers.

use super::envelope::{Envelope, inner_request, progress_token, request_digest};
use super::state::{self, Opened, Signer, StateError};
use super::{Answers, Out, RESUMABLE, Status, VERSION, final_line, stamp, status_of};
use crate::hub::{Hub, Session, lock};
use crate::jsonrpc::{self, Frame, Kind, Message, code};
use crate::transport::queue::queue;
use crate::transport::{Outbox, Outgoing};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// How long a request waits for the client to come back with the input it asked for: long
/// enough for a person to answer a prompt. After that its upstream call is cancelled.
const INPUT_WAIT: Duration = Duration::from_secs(600);
/// Requests waiting for input at once, over all clients: each holds an upstream call open.
const MAX_WAITING: usize = 1024;
/// How long after a question further ones may join it in one input-required result.
const GATHER: Duration = Duration::from_millis(25);

/// Requests waiting for their client's input, and the key that signs their handles.
pub(crate) struct Waiting {
    signer: Option<Signer>,
    parked: Mutex<HashMap<String, Parked>>,
}

struct Parked {
    running: Running,
    digest: String,
    timer: AbortHandle,
}

impl Waiting {
    pub(crate) fn new() -> Waiting {
        let signer = Signer::new();
        if signer.is_none() {
            tracing::error!(
                "no random source: 2026-07-28 clients cannot be asked for input (sampling, elicitation, permission prompts)"
            );
        }
        Waiting {
            signer,
            parked: Mutex::new(HashMap::new()),
        }
    }
}

/// A tool call, prompt, read, list or completion, on a session of its own.
pub(super) async fn call(
    hub: Arc<Hub>,
    m: &Message,
    params: Value,
    envelope: Envelope,
    origin: &str,
    view: usize,
    tx: &Answers,
) {
    let id = m.id();
    let method = m.method();
    let resumable = RESUMABLE.contains(&method);
    let digest = request_digest(origin, method, &params);
    let token = progress_token(&params);
    let mut running = None;
    if resumable && let Some(state) = params.get("requestState").and_then(Value::as_str) {
        match resume(&hub, state, &digest) {
            Ok(Some(r)) => running = Some(r),
            // Its wait ended (or the hub restarted): run the request afresh, which asks again.
            Ok(None) => tracing::debug!(id, "requestState of a request no longer waiting"),
            Err(e) => {
                let e = e.to_string();
                let _ = tx.send(Out::error(id, code::INVALID_PARAMS, &e, None, Status::Ok));
                return;
            }
        }
    }
    let mut running = match running {
        Some(mut r) => {
            r.answer(params.get("inputResponses"));
            r
        }
        None => {
            let (out, rx) = Outbox::channel();
            let session = Session::ephemeral(
                hub.clone(),
                out,
                &envelope.capabilities,
                &envelope.client_name,
                envelope.log_rank,
                view,
            );
            let inner_id = id.to_string();
            let line = inner_request(&inner_id, method, &params);
            session.handle_frame(Frame::Line(line.into_bytes()));
            Running {
                session,
                rx,
                inner_id,
                token: token.clone(),
                asked: Vec::new(),
                // Servers SHOULD take answers offered up front and ignore keys they do not know.
                preset: params
                    .get("inputResponses")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
            }
        }
    };
    let next = if running.asked.is_empty() {
        running.until_next(tx, token.as_ref(), resumable).await
    } else {
        // Some questions are still unanswered: the call cannot move on without them.
        Next::Input
    };
    match next {
        Next::Done(line) => {
            if let Some(task) = became_task(&hub, &line) {
                serve_task(task, running);
            }
            let line = final_line(id, method, &line);
            let status = status_of(&line);
            let _ = tx.send(Out::Done { line, status });
        }

        Next::Input => {
            let asked = running.asked_json();
            match park(&hub, running, digest) {
                Ok(state) => {
                    let mut result = json!({
                        "resultType": "input_required",
                        "inputRequests": asked,
                        "requestState": state,
                    });
                    if let Some(obj) = result.as_object_mut() {
                        stamp(obj);
                    }
                    let _ = tx.send(Out::Done {
                        line: jsonrpc::result(id, &result.to_string()),
                        status: Status::Ok,
                    });
                }
                Err(why) => {
                    let why = why.to_string();
                    let _ = tx.send(Out::error(id, code::INTERNAL_ERROR, &why, None, Status::Ok));
                }
            }
        }
    }
}

/// The hub task a call's answer announces (`resultType: "task"`), if it is one.
fn became_task(hub: &Hub, line: &str) -> Option<Arc<crate::hub::tasks::Task>> {
    let m = Message::parse(line.into()).ok()?;
    let result: Value = serde_json::from_str(m.result()?).ok()?;
    if result.get("resultType")? != "task" {
        return None;
    }
    let id = result.get("taskId")?.as_str()?;
    hub.tasks.get(id, crate::hub::tasks::Owner::Bearer).ok()
}

/// A call that became a task keeps its session: what the session asks the client from now
/// on becomes the task's `input_required` (with its `inputRequests`), and the client's
/// `tasks/update` answers it, until the task ends.
fn serve_task(task: Arc<crate::hub::tasks::Task>, mut running: Running) {
    use crate::hub::tasks::Status;
    let Some(mut inputs) = task.take_inputs() else {
        return;
    };
    // A task gets no notifications of its call (the extension has none for tasks).
    let (queue, _unread) = queue();
    let quiet = Answers {
        queue,
        dropped: AtomicU64::new(0),
    };
    tokio::spawn(async move {
        let ended = task.ended();
        tokio::pin!(ended);
        loop {
            tokio::select! {
                _ = &mut ended => break,
                next = running.until_next(&quiet, None, true) => match next {
                    Next::Input => {
                        let asked = running.asked_json().to_string();
                        task.progress(Status::InputRequired, None, Some(&asked));
                    }
                    Next::Done(_) => break,
                },
                Some(responses) = inputs.recv() => {
                    let responses: Option<Value> = serde_json::from_str(&responses).ok();
                    running.answer(responses.as_ref());
                    if running.asked.is_empty() {
                        task.progress(Status::Working, None, None);
                    } else {
                        let asked = running.asked_json().to_string();
                        task.progress(Status::InputRequired, None, Some(&asked));
                    }
                }
            }
        }
    });
}

/// Why a request that needs its client's input cannot wait for it.
#[derive(Debug, thiserror::Error)]
enum ParkError {
    #[error(
        "this request needs the client's input, but openpact has no random source to sign the request state with"
    )]
    NoSigner,
    #[error("no random source for a request state handle")]
    NoHandle,
    #[error(
        "{MAX_WAITING} requests are already waiting for their clients' input; answer or drop some first"
    )]
    Full,
}

/// The waiting request `state` leads to, taken out of the table.
fn resume(hub: &Hub, state: &str, digest: &str) -> Result<Option<Running>, StateError> {
    let waiting = &hub.waiting;
    let Some(signer) = &waiting.signer else {
        return Ok(None);
    };
    let handle = match signer.open(state, digest)? {
        Opened::Live(h) => h,
        Opened::Expired => return Ok(None),
    };
    let parked = lock(&waiting.parked).remove(&handle);
    Ok(parked.and_then(|p| {
        p.timer.abort();
        // The signature already binds the digest; this guards against a handle collision.
        (p.digest == digest).then_some(p.running)
    }))
}

/// Puts `running` aside until its client answers, returning the signed state that leads back.
fn park(hub: &Arc<Hub>, running: Running, digest: String) -> Result<String, ParkError> {
    let waiting = &hub.waiting;
    let signer = waiting.signer.as_ref().ok_or(ParkError::NoSigner)?;
    let handle = state::random_handle().ok_or(ParkError::NoHandle)?;
    let expires = state::now() + INPUT_WAIT.as_secs();
    let signed = signer.sign(&handle, expires, &digest);
    let mut parked = lock(&waiting.parked);
    if parked.len() >= MAX_WAITING {
        return Err(ParkError::Full);
    }
    let weak = Arc::downgrade(hub);
    let key = handle.clone();
    let timer = tokio::spawn(async move {
        tokio::time::sleep(INPUT_WAIT).await;
        if let Some(hub) = weak.upgrade() {
            let gone = lock(&hub.waiting.parked).remove(&key);
            if gone.is_some() {
                tracing::debug!("a request waited too long for its client's input; cancelled");
            }
        }
    })
    .abort_handle();
    parked.insert(
        handle,
        Parked {
            running,
            digest,
            timer,
        },
    );
    Ok(signed)
}

/// What stopped a running request.
enum Next {
    Done(String),
    Input,
}

/// A question the session put to the client, waiting for its answer.
struct Asked {
    /// The session's id for it (a number).
    id: String,
    /// Its key in `inputRequests`.
    key: String,
    method: String,
    params: Option<Value>,
}

/// A request in progress on its own session.
struct Running {
    session: Arc<Session>,
    rx: mpsc::UnboundedReceiver<Outgoing>,
    /// The id the session serves the request under (the first attempt's).
    inner_id: String,
    /// The first attempt's progress token, which the session's notifications carry.
    token: Option<Value>,
    asked: Vec<Asked>,
    /// Answers the client sent for questions not asked yet, by key.
    preset: Map<String, Value>,
}

impl Drop for Running {
    fn drop(&mut self) {
        // Abandoned, or done: whatever still runs for it upstream is cancelled.
        self.session.abort_all("the request was cancelled");
    }
}

impl Running {
    /// Runs until the answer, or until the client must be asked something.
    async fn until_next(&mut self, tx: &Answers, token: Option<&Value>, resumable: bool) -> Next {
        loop {
            let Some(out) = self.rx.recv().await else {
                return Next::Done(jsonrpc::error(
                    &self.inner_id,
                    code::INTERNAL_ERROR,
                    "the request ended without an answer",
                    None,
                ));
            };
            let Outgoing::Line(line) = out else { continue };
            if let Some(next) = self.take(line, tx, token, resumable) {
                return next;
            }
            if self.asked.is_empty() {
                continue;
            }
            // Questions sent together are asked together: a server sending several at once
            // has them on their way within moments of each other.
            while let Ok(Some(Outgoing::Line(line))) =
                tokio::time::timeout(GATHER, self.rx.recv()).await
            {
                if let Some(next) = self.take(line, tx, token, resumable) {
                    return next;
                }
            }
            return Next::Input;
        }
    }

    /// Handles one line of the session: the answer is returned; questions are noted;
    /// notifications go to the client.
    fn take(
        &mut self,
        line: String,
        tx: &Answers,
        token: Option<&Value>,
        resumable: bool,
    ) -> Option<Next> {
        let m = Message::parse(line.as_str().into()).ok()?;
        match m.kind() {
            Kind::Response => (m.id() == self.inner_id).then_some(Next::Done(line)),
            Kind::Request => {
                let params = m.params().and_then(|p| serde_json::from_str(p).ok());
                if let Some(answer) = self.preset.remove(&self.key_for(m.id())) {
                    // The client answered before being asked (it knew the question).
                    let line = jsonrpc::result(m.id(), &answer.to_string());
                    self.session.handle_frame(Frame::Line(line.into_bytes()));
                    return None;
                }
                if resumable {
                    let key = self.key_for(m.id());
                    self.asked.push(Asked {
                        id: m.id().to_string(),
                        key,
                        method: m.method().to_string(),
                        params,
                    });
                } else {
                    let refusal = jsonrpc::error(
                        m.id(),
                        code::METHOD_NOT_FOUND,
                        &format!(
                            "a {VERSION} client can be asked for input only during tools/call, prompts/get and resources/read"
                        ),
                        None,
                    );
                    self.session.handle_frame(Frame::Line(refusal.into_bytes()));
                }
                None
            }
            Kind::Notification => {
                match m.method() {
                    // The session withdrew a question (it timed out, or its server gave up).
                    "notifications/cancelled" => {
                        let withdrawn = m
                            .params()
                            .and_then(|p| serde_json::from_str::<Value>(p).ok())
                            .and_then(|p| p.get("requestId").map(Value::to_string));
                        if let Some(w) = withdrawn {
                            self.asked.retain(|a| a.id != w);
                        }
                    }
                    "notifications/progress" => {
                        tx.droppable(self.retoken(line, token));
                    }
                    "notifications/message" => tx.droppable(line),
                    _ => {
                        let _ = tx.send(Out::Notify(line));
                    }
                }
                None
            }
        }
    }

    /// The `inputRequests` key for the session's request `id`: the server's own id for it
    /// when that is a string (servers name what they ask, e.g. `user_name`), else ours.
    fn key_for(&self, id: &str) -> String {
        let theirs = self
            .session
            .forwarded_id(id)
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|t| t.as_str().map(str::to_string))
            .filter(|k| !k.is_empty() && !self.asked.iter().any(|a| a.key == *k));
        theirs.unwrap_or_else(|| format!("openpact-{id}"))
    }

    /// Progress under the token of the attempt the client is waiting on now.
    fn retoken(&self, line: String, current: Option<&Value>) -> String {
        let (Some(current), Some(first)) = (current, &self.token) else {
            return line;
        };
        if current == first {
            return line;
        }
        let Ok(mut v) = serde_json::from_str::<Value>(&line) else {
            return line;
        };
        if let Some(params) = v.get_mut("params").and_then(Value::as_object_mut) {
            params.insert("progressToken".into(), current.clone());
        }
        v.to_string()
    }

    /// The `inputRequests` of the questions still open.
    fn asked_json(&self) -> Value {
        let mut map = Map::new();
        for a in &self.asked {
            let mut params = a.params.clone().unwrap_or_else(|| json!({}));
            if a.method == "elicitation/create"
                && let Some(p) = params.as_object_mut()
            {
                // URL-mode elicitation has no id in this revision: the retry is the answer.
                p.remove("elicitationId");
            }
            let mut entry = Map::new();
            entry.insert("method".into(), json!(a.method));
            if a.method != "roots/list" || params.as_object().is_some_and(|p| !p.is_empty()) {
                entry.insert("params".into(), params);
            }
            map.insert(a.key.clone(), Value::Object(entry));
        }
        Value::Object(map)
    }

    /// Hands the client's answers to the session; unanswered questions stay open, and
    /// answers to questions not asked yet are kept for when they are.
    fn answer(&mut self, responses: Option<&Value>) {
        let mut responses = responses
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut open = Vec::new();
        for a in std::mem::take(&mut self.asked) {
            match responses.remove(&a.key) {
                Some(result) => {
                    let line = jsonrpc::result(&a.id, &result.to_string());
                    self.session.handle_frame(Frame::Line(line.into_bytes()));
                }
                None => open.push(a),
            }
        }
        self.asked = open;
        self.preset = responses;
    }
}
