//! `subscriptions/listen`: the 2026-07-28 client's stream of list changes and resource
//! updates, each notification tagged with the listen request's id. Resource subscriptions
//! go through a session of the stream's own, so they are routed and counted upstream exactly
//! like a handshake client's `resources/subscribe`, and undone when the stream ends.

use super::envelope::Envelope;
use super::{Out, Status};
use crate::hub::{Hub, HubEvent, Session};
use crate::jsonrpc::{self, Frame, Kind, Message, code};
use crate::transport::{Outbox, Outgoing};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

use crate::revision::meta::SUBSCRIPTION_ID as KEY_SUBSCRIPTION;

/// How long unsubscribing upstream may take once a stream ends.
const UNSUBSCRIBE_WAIT: Duration = Duration::from_secs(5);

/// Which notifications the client asked for.
struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
    /// Tasks (the Tasks extension) whose every change the client wants.
    task_ids: Vec<String>,
}

impl Filter {
    fn read(params: &Value) -> Option<Filter> {
        let n = params.get("notifications")?.as_object()?;
        let flag = |k: &str| n.get(k).and_then(Value::as_bool).unwrap_or(false);
        let strings = |k: &str| -> Vec<String> {
            n.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let uris = strings("resourceSubscriptions");
        let task_ids = strings("taskIds");
        Some(Filter {
            task_ids,
            tools: flag("toolsListChanged"),
            prompts: flag("promptsListChanged"),
            resources: flag("resourcesListChanged"),
            uris,
        })
    }

    /// What the hub agrees to send: all of it (the catalogue changes for every kind).
    fn agreed(&self) -> Value {
        let mut m = Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                m.insert(key.into(), json!(true));
            }
        }
        if !self.uris.is_empty() {
            m.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        if !self.task_ids.is_empty() {
            m.insert("taskIds".into(), json!(self.task_ids));
        }
        Value::Object(m)
    }

    fn wants(&self, ev: HubEvent) -> bool {
        match ev {
            HubEvent::ToolsChanged => self.tools,
            HubEvent::PromptsChanged => self.prompts,
            HubEvent::ResourcesChanged => self.resources,
        }
    }
}

/// `notification` with `params._meta` naming the subscription it belongs to.
fn tagged(method: &str, params: Option<Value>, id: &Value) -> String {
    let mut params = match params {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(KEY_SUBSCRIPTION.into(), id.clone());
    }
    jsonrpc::notification(method, Some(&Value::Object(params).to_string()))
}

pub(super) async fn run(
    hub: Arc<Hub>,
    id: &str,
    params: &Value,
    envelope: &Envelope,
    view: usize,
    tx: &super::Answers,
) {
    let Some(filter) = Filter::read(params) else {
        let _ = tx.send(Out::error(
            id,
            code::INVALID_PARAMS,
            "subscriptions/listen needs params.notifications, an object",
            None,
            Status::BadRequest,
        ));
        return;
    };
    let mut filter = filter;
    let tasks = if crate::hub::session::declares_extension(Some(&envelope.capabilities)) {
        // Only the tasks that exist are agreed to; the acknowledgement says which.
        filter
            .task_ids
            .iter()
            .filter_map(|t| hub.tasks.get(t, crate::hub::tasks::Owner::Bearer).ok())
            .collect()
    } else {
        Vec::new()
    };
    filter.task_ids = tasks.iter().map(|t| t.id.to_string()).collect();
    let mut task_changes = task_changes(tasks);
    let sub_id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
    let mut events = hub.subscribe();
    let (out, mut rx) = Outbox::channel();
    let session = Session::ephemeral(
        hub.clone(),
        out,
        &envelope.capabilities,
        &envelope.client_name,
        None,
        view,
    );
    // What this view's lists were when the stream opened: a change elsewhere in the hub
    // that leaves them as they are is no news to this client.
    let mut seen = Lists::of(&hub.view_catalog(view));
    let _undo = Unsubscribe {
        session: session.clone(),
        uris: filter.uris.clone(),
    };
    for (i, uri) in filter.uris.iter().enumerate() {
        let req = jsonrpc::request(
            &format!("\"listen-{i}\""),
            "resources/subscribe",
            Some(&json!({ "uri": uri }).to_string()),
        );
        session.handle_frame(Frame::Line(req.into_bytes()));
    }
    let ack = tagged(
        "notifications/subscriptions/acknowledged",
        Some(json!({ "notifications": filter.agreed() })),
        &sub_id,
    );
    if tx.send(Out::Notify(ack)).is_err() {
        return;
    }
    loop {
        let line = tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) if filter.wants(ev) && seen.changed(&hub.view_catalog(view), ev) => {
                    Some(tagged(ev.notification(), None, &sub_id))
                }
                Ok(_) => None,
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Missed events only mean lists changed more than once: announce each.
                    for ev in [HubEvent::ToolsChanged, HubEvent::PromptsChanged, HubEvent::ResourcesChanged] {
                        if filter.wants(ev) {
                            let _ = tx.send(Out::Notify(tagged(ev.notification(), None, &sub_id)));
                        }
                    }
                    None
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            out = rx.recv() => match out {
                Some(Outgoing::Line(line)) => from_session(&line, &sub_id),
                Some(_) => None,
                None => break,
            },
            Some(task) = task_changes.recv() => Some(tagged(
                "notifications/tasks",
                serde_json::from_str(&task.extension_notification()).ok(),
                &sub_id,
            )),
            () = tx.closed() => break,
        };
        if let Some(line) = line
            && tx.send(Out::Notify(line)).is_err()
        {
            break;
        }
    }
}

/// Each change of `tasks`, until each has ended (the last change is its end).
fn task_changes(
    tasks: Vec<Arc<crate::hub::tasks::Task>>,
) -> tokio::sync::mpsc::UnboundedReceiver<Arc<crate::hub::tasks::Task>> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for task in tasks {
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut changes = task.watch();
            // The stream starts with where each task is now.
            changes.mark_changed();
            while changes.changed().await.is_ok() {
                let ended = changes.borrow_and_update().status.is_terminal();
                if tx.send(task.clone()).is_err() || ended {
                    break;
                }
            }
        });
    }
    rx
}

/// The fingerprints of a view's lists as a stream last announced them.
struct Lists([u64; 3]);

impl Lists {
    fn of(catalog: &crate::hub::Catalog) -> Lists {
        Lists([
            catalog.listed_tools().fingerprint,
            catalog.prompts.fingerprint,
            catalog.resources_fingerprint ^ catalog.templates_fingerprint.rotate_left(1),
        ])
    }

    /// Whether the list `ev` is about has changed since last seen; notes it seen.
    fn changed(&mut self, catalog: &crate::hub::Catalog, ev: HubEvent) -> bool {
        let now = Lists::of(catalog).0;
        let i = match ev {
            HubEvent::ToolsChanged => 0,
            HubEvent::PromptsChanged => 1,
            HubEvent::ResourcesChanged => 2,
        };
        let changed = self.0[i] != now[i];
        self.0[i] = now[i];
        changed
    }
}

/// A resource update for the stream; a failed subscription is logged (the client asked for a
/// URI no server serves, or its server refused).
fn from_session(line: &str, sub_id: &Value) -> Option<String> {
    let m = Message::parse(line.into()).ok()?;
    match m.kind() {
        Kind::Notification if m.method() == "notifications/resources/updated" => {
            let params = m.params().and_then(|p| serde_json::from_str(p).ok());
            Some(tagged(m.method(), params, sub_id))
        }
        Kind::Response if m.error().is_some() => {
            tracing::debug!(
                error = m.error(),
                "a listen stream's resource subscription failed"
            );
            None
        }
        _ => None,
    }
}

/// Undoes a stream's resource subscriptions when it ends, however it ends.
struct Unsubscribe {
    session: Arc<Session>,
    uris: Vec<String>,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        if self.uris.is_empty() {
            return;
        }
        let session = self.session.clone();
        let uris = std::mem::take(&mut self.uris);
        tokio::spawn(async move {
            for (i, uri) in uris.iter().enumerate() {
                let req = jsonrpc::request(
                    &format!("\"unlisten-{i}\""),
                    "resources/unsubscribe",
                    Some(&json!({ "uri": uri }).to_string()),
                );
                session.handle_frame(Frame::Line(req.into_bytes()));
            }
            // The session must live until its unsubscribe requests are through.
            let _ = tokio::time::timeout(UNSUBSCRIBE_WAIT, async {
                while session.in_flight() > 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await;
        });
    }
}
