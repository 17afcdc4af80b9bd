//! The dashboard's desk: permission questions that neither the calling client nor a terminal
//! can put to the user, waiting for an answer on the dashboard page while one is open.
//!
//! The policy puts a question here and waits; the page lists what waits (and hears when the
//! list changes) and answers by id. A question nobody answers in time is taken off again, so
//! the list never shows a call that is no longer waiting.

use super::prompt::{Answer, Question};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// One waiting question as the page shows it: everything the terminal prompt shows, and who
/// asked and until when. The arguments are the prompt's own preview (cut and redacted).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    pub id: String,
    /// `tool`, `resource`, `prompt` or `host`.
    pub kind: &'static str,
    /// The qualified name asked about (`server:tool`), or the `host:port` for `host`.
    pub name: String,
    pub server: String,
    pub client: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub arguments: String,
    /// Why openpact asks again or asks about this very call, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Whether "always" is offered (see [`Question::rememberable`]).
    pub rememberable: bool,
    pub asked_at: String,
    /// When the call stops waiting and is denied.
    pub until: String,
}

struct Entry {
    shown: Waiting,
    answer: tokio::sync::oneshot::Sender<Answer>,
}

/// The questions waiting on the dashboard, and whether anyone is looking.
#[derive(Default)]
pub struct Desk {
    waiting: Mutex<BTreeMap<String, Entry>>,
    /// Bumped on every change of `waiting`, for the page's live view.
    changes: tokio::sync::watch::Sender<u64>,
    /// Dashboard pages connected now (their live streams); questions wait only while one is.
    watchers: AtomicUsize,
    /// Where the dashboard is (`http://…/ui`), once a face serves it: named in denials and
    /// in the status file, which follows it.
    place: tokio::sync::watch::Sender<Option<String>>,
    /// Whether this process is a hub `openpact ui` can reach (a `serve`): only then is
    /// "run `openpact ui`" advice that works.
    served: std::sync::atomic::AtomicBool,
}

/// Counts a page as watching while it lives (see [`Desk::watch`]).
pub struct Watching(Arc<Desk>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug, thiserror::Error)]
#[error("no question {0} is waiting: it was answered, or its call stopped waiting")]
pub struct NotWaiting(pub String);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Desk {
    /// A page is watching until the returned guard is dropped.
    pub fn watch(self: &Arc<Self>) -> Watching {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        Watching(self.clone())
    }

    pub fn is_watched(&self) -> bool {
        self.watchers.load(Ordering::SeqCst) > 0
    }

    /// Says this process is a running hub (`openpact serve`), whose dashboard `openpact ui`
    /// can open.
    pub fn set_served(&self) {
        self.served.store(true, Ordering::SeqCst);
    }

    /// Names the dashboard's address.
    pub fn set_place(&self, url: String) {
        self.place.send_replace(Some(url));
    }

    /// The dashboard's address, once served.
    pub fn place(&self) -> Option<String> {
        self.place.borrow().clone()
    }

    /// Wakes when the dashboard's address is named.
    pub fn place_changes(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.place.subscribe()
    }

    /// Where to answer, for a denial: the page's address when known, else how to open it;
    /// `None` in a process `openpact ui` cannot reach.
    pub fn where_to_answer(&self) -> Option<String> {
        if !self.served.load(Ordering::SeqCst) {
            return None;
        }
        Some(match &*self.place.borrow() {
            Some(url) => format!("the dashboard at {url} (`openpact ui` logs you in)"),
            None => "the dashboard (`openpact ui` opens it)".to_string(),
        })
    }

    /// Puts `q` (from `client`) on the desk and waits up to `wait` for the page's answer.
    /// `None`: no answer in time, or the hub is going away.
    pub async fn ask(&self, q: &Question, client: &str, wait: Duration) -> Option<Answer> {
        let id = crate::platform::random_hex(16)?;
        let now = SystemTime::now();
        let why = match (&q.changed, &q.guard) {
            (_, Some(guard)) => Some(format!("{guard}, so openpact.flows asks about this call")),
            (Some(changed), None) => Some(changed.clone()),
            (None, None) => None,
        };
        let shown = Waiting {
            id: id.clone(),
            kind: q.kind,
            name: q.qualified.clone(),
            server: q.server.clone(),
            client: client.to_string(),
            description: q.description.clone(),
            arguments: q.arguments.clone(),
            why,
            rememberable: q.rememberable,
            asked_at: crate::time::rfc3339(now),
            until: crate::time::rfc3339(now + wait),
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        lock(&self.waiting).insert(id.clone(), Entry { shown, answer: tx });
        self.changed();
        // Taken off however this ends: answered, timed out, or the call dropped.
        let _off = Off { desk: self, id };
        let answer = tokio::time::timeout(wait, rx).await.ok()?.ok()?;
        Some(q.effective(answer))
    }

    /// What waits now, oldest first.
    pub fn list(&self) -> Vec<Waiting> {
        let mut all: Vec<_> = lock(&self.waiting)
            .values()
            .map(|e| e.shown.clone())
            .collect();
        all.sort_by(|a, b| a.asked_at.cmp(&b.asked_at));
        all
    }

    /// Answers question `id`.
    pub fn answer(&self, id: &str, answer: Answer) -> Result<(), NotWaiting> {
        let Some(entry) = lock(&self.waiting).remove(id) else {
            return Err(NotWaiting(id.to_string()));
        };
        self.changed();
        if entry.answer.send(answer).is_ok() {
            Ok(())
        } else {
            Err(NotWaiting(id.to_string()))
        }
    }

    /// Wakes on every change of what waits.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

struct Off<'d> {
    desk: &'d Desk,
    id: String,
}

impl Drop for Off<'_> {
    fn drop(&mut self) {
        if lock(&self.desk.waiting).remove(&self.id).is_some() {
            self.desk.changed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(rememberable: bool) -> Question {
        Question {
            kind: "tool",
            qualified: "fx:echo".into(),
            server: "fx".into(),
            description: "Echoes".into(),
            arguments: "{\"text\":\"hi\"}".into(),
            changed: None,
            guard: None,
            rememberable,
        }
    }

    #[tokio::test]
    async fn an_answer_reaches_the_waiting_call_and_the_list_empties() {
        let desk = Arc::new(Desk::default());
        let asking = {
            let desk = desk.clone();
            tokio::spawn(async move {
                desk.ask(&question(true), "an agent", Duration::from_secs(10))
                    .await
            })
        };
        let mut changes = desk.changes();
        while desk.list().is_empty() {
            changes.changed().await.unwrap();
        }
        let shown = desk.list();
        assert_eq!(shown[0].name, "fx:echo");
        assert_eq!(shown[0].client, "an agent");
        desk.answer(&shown[0].id, Answer::Always).unwrap();
        assert_eq!(asking.await.unwrap(), Some(Answer::Always));
        assert!(desk.list().is_empty());
        assert!(
            desk.answer(&shown[0].id, Answer::Once).is_err(),
            "answered twice"
        );
    }

    #[tokio::test]
    async fn an_unanswered_question_is_taken_off_and_always_is_once_when_nothing_is_kept() {
        let desk = Arc::new(Desk::default());
        let none = desk
            .ask(&question(true), "c", Duration::from_millis(20))
            .await;
        assert_eq!(none, None);
        assert!(desk.list().is_empty(), "a timed-out question stays listed");
        let asking = {
            let desk = desk.clone();
            tokio::spawn(async move {
                desk.ask(&question(false), "c", Duration::from_secs(10))
                    .await
            })
        };
        let mut changes = desk.changes();
        while desk.list().is_empty() {
            changes.changed().await.unwrap();
        }
        desk.answer(&desk.list()[0].id, Answer::Always).unwrap();
        assert_eq!(asking.await.unwrap(), Some(Answer::Once));
    }

    #[test]
    fn watchers_count_while_their_guards_live() {
        let desk = Arc::new(Desk::default());
        assert!(!desk.is_watched());
        let a = desk.watch();
        let b = desk.watch();
        drop(a);
        assert!(desk.is_watched());
        drop(b);
        assert!(!desk.is_watched());
        assert_eq!(desk.where_to_answer(), None, "not a served hub");
        desk.set_served();
        assert!(desk.where_to_answer().unwrap().contains("openpact ui"));
        desk.set_place("http://127.0.0.1:1/ui".into());
        assert!(
            desk.where_to_answer()
                .unwrap()
                .contains("http://127.0.0.1:1/ui")
        );
    }
}
