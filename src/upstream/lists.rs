//! Keeping a server's lists current: fetched at the handshake, filtered by its tool filter,
//! refreshed on `list_changed`, and on a stateless server through its listen stream.

use super::{Connection, Entry, HandshakeError, Incoming, ServerInfo, Upstream};
use super::{handshake, stateless};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A stateless listen stream that ends is opened again after this (doubling, up to
/// [`RELISTEN_MAX`], while it keeps ending at once).
const RELISTEN: Duration = Duration::from_millis(500);
const RELISTEN_MAX: Duration = Duration::from_secs(30);
/// A listen request is meant to stay open; it is renewed after this long all the same, so a
/// stream that silently died is noticed.
const LISTEN_RENEW: Duration = Duration::from_secs(3600);

/// The lists a server may offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Prompts,
    Resources,
    Templates,
}

impl ListKind {
    /// (method, result field, identifying member)
    pub fn wire(self) -> (&'static str, &'static str, &'static str) {
        match self {
            ListKind::Tools => ("tools/list", "tools", "name"),
            ListKind::Prompts => ("prompts/list", "prompts", "name"),
            ListKind::Resources => ("resources/list", "resources", "uri"),
            ListKind::Templates => (
                "resources/templates/list",
                "resourceTemplates",
                "uriTemplate",
            ),
        }
    }

    fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources | ListKind::Templates => "resources",
        }
    }

    /// The lists a `notifications/…/list_changed` invalidates.
    fn from_notification(method: &str) -> Option<&'static [ListKind]> {
        match method {
            "notifications/tools/list_changed" => Some(&[ListKind::Tools]),
            "notifications/prompts/list_changed" => Some(&[ListKind::Prompts]),
            "notifications/resources/list_changed" => {
                Some(&[ListKind::Resources, ListKind::Templates])
            }
            _ => None,
        }
    }
}

impl Upstream {
    /// Fetches every list the server's capabilities promise: tools, prompts, resources and
    /// resource templates, concurrently. Only a failing tool list fails the server; the
    /// others are optional features, so a server that declares them but cannot list them
    /// is logged and served without them.
    pub(super) async fn fetch_lists(
        &self,
        conn: &Connection,
        info: &ServerInfo,
    ) -> Result<[Vec<Entry>; 4], HandshakeError> {
        let want = |kind: ListKind| info.has_capability(kind.capability());
        let list = |kind: ListKind| async move {
            if !want(kind) {
                return Ok(Vec::new());
            }
            let (method, field, key) = kind.wire();
            handshake::list_all(conn, self.name(), method, field, key, self.config().timeout).await
        };
        let (tools, prompts, resources, templates) = tokio::join!(
            list(ListKind::Tools),
            list(ListKind::Prompts),
            list(ListKind::Resources),
            list(ListKind::Templates)
        );
        let optional = |kind: ListKind, r: Result<Vec<Entry>, HandshakeError>| {
            r.unwrap_or_else(|e| {
                tracing::warn!(server = %self.name(), "{} failed, serving none: {e}", kind.wire().0);
                Vec::new()
            })
        };
        Ok([
            tools?,
            optional(ListKind::Prompts, prompts),
            optional(ListKind::Resources, resources),
            optional(ListKind::Templates, templates),
        ])
    }

    /// The tools its filter lets the hub serve, and how many it hid: a hidden tool is never
    /// listed, named or routed, so a call to it is a call to an unknown tool.
    pub(super) fn filter_tools(&self, tools: Vec<Entry>) -> (Vec<Entry>, usize) {
        let filter = &self.config().tool_filter;
        if !filter.is_active() {
            return (tools, 0);
        }
        let before = tools.len();
        let kept: Vec<Entry> = tools
            .into_iter()
            .filter(|t| filter.allows(&t.key))
            .collect();
        let hidden = before - kept.len();
        (kept, hidden)
    }

    /// Re-fetches one list (after its `notifications/…/list_changed`).
    pub async fn refresh(&self, kind: ListKind) {
        let Some(conn) = self.connection() else {
            return;
        };
        let (method, field, key) = kind.wire();
        match handshake::list_all(
            &conn,
            self.name(),
            method,
            field,
            key,
            self.config().timeout,
        )
        .await
        {
            Ok(items) => {
                tracing::info!(server = %self.name(), count = items.len(), "{method}: list changed");
                let (items, hidden) = match kind {
                    ListKind::Tools => self.filter_tools(items),
                    _ => (items, 0),
                };
                let items = Arc::new(items);
                self.update(|s| match kind {
                    ListKind::Tools => {
                        s.tools = items;
                        s.hidden_tools = hidden;
                    }
                    ListKind::Prompts => s.prompts = items,
                    ListKind::Resources => s.resources = items,
                    ListKind::Templates => s.templates = items,
                });
            }
            Err(e) => {
                tracing::warn!(server = %self.name(), "could not refresh after list_changed ({method}): {e}")
            }
        }
    }

    /// A server's own notification or request (never a response). Runs on the reader task.
    pub(super) fn on_incoming(
        self: &Arc<Self>,
        item: Incoming,
        from: &std::sync::Weak<Connection>,
    ) {
        match item {
            Incoming::Notification(m) => match ListKind::from_notification(m.method()) {
                Some(kinds) => {
                    for &kind in kinds {
                        let me = self.clone();
                        tokio::spawn(async move { me.refresh(kind).await });
                    }
                }
                None => self.sink.notification(self.index, m),
            },
            Incoming::Request(m) => self.sink.request(self.index, m, from.clone()),
        }
    }

    /// Keeps a `subscriptions/listen` stream open on a stateless server's connection for as
    /// long as it lives: its list-change notifications refresh the lists like handshake
    /// `list_changed` ones, and its resource updates reach the subscribed clients. Opened
    /// again after it ends (then the lists are fetched afresh: changes may have been
    /// missed) and whenever the set of subscribed resources changes.
    pub(super) async fn listen(self: Arc<Self>, conn: Arc<Connection>, info: ServerInfo) {
        let mut uris = self.listen_uris.subscribe();
        let mut quick_ends = 0u32;
        let mut missed = false;
        loop {
            let wanted = uris.borrow_and_update().clone();
            let Some(params) = stateless::listen_params(&info, &wanted) else {
                tokio::select! {
                    _ = uris.changed() => continue,
                    _ = conn.closed() => return,
                }
            };
            if missed {
                for kind in [
                    ListKind::Tools,
                    ListKind::Prompts,
                    ListKind::Resources,
                    ListKind::Templates,
                ] {
                    if info.has_capability(kind.capability()) {
                        self.refresh(kind).await;
                    }
                }
            }
            let opened = Instant::now();
            tokio::select! {
                ended = conn.request("subscriptions/listen", Some(&params), LISTEN_RENEW) => {
                    if conn.is_closed() {
                        return;
                    }
                    match ended {
                        Ok(m) if m.error().is_some() => tracing::warn!(server = %self.name(), error = m.error().unwrap_or_default(), "subscriptions/listen refused"),
                        Ok(_) => tracing::debug!(server = %self.name(), "listen stream ended by the server"),
                        Err(e) => tracing::debug!(server = %self.name(), "listen stream ended: {e}"),
                    }
                    quick_ends = if opened.elapsed() < Duration::from_secs(2) { quick_ends + 1 } else { 0 };
                    missed = true;
                    let wait = RELISTEN.saturating_mul(1 << quick_ends.min(6)).min(RELISTEN_MAX);
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = conn.closed() => return,
                    }
                }
                // Dropping the request cancels it (stdio: notifications/cancelled; HTTP:
                // the POST is aborted), and the next one carries the new filter.
                _ = uris.changed() => {}
                _ = conn.closed() => return,
            }
        }
    }
}
