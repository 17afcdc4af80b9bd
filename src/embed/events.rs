//! What happens in the hub while it runs, for the host to follow: servers' states and the
//! merged lists changing.

use crate::hub::HubEvent;
use crate::upstream::State;
use std::collections::VecDeque;
use std::sync::Weak;
use tokio::sync::{broadcast, watch};

/// A server's state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// Disabled in the config.
    Disabled,
    /// On its way to its first answer.
    Starting,
    /// Serving.
    Ready,
    /// Crashed after having been ready; it will be started again.
    Restarting,
    /// A remote server that lost its connection; trying again.
    Reconnecting,
    /// A remote server that wants a login first; the text says how.
    NeedsLogin(String),
    /// Could not start; the text says why.
    Failed(String),
    /// Stopped (the hub is shutting down, or the server was removed).
    Stopped,
}

impl From<&State> for ServerState {
    fn from(state: &State) -> ServerState {
        match state {
            State::Disabled => ServerState::Disabled,
            State::Starting => ServerState::Starting,
            State::Ready => ServerState::Ready,
            State::Restarting => ServerState::Restarting,
            State::Reconnecting => ServerState::Reconnecting,
            State::NeedsLogin(how) => ServerState::NeedsLogin(how.clone()),
            State::Failed(why) => ServerState::Failed(why.clone()),
            State::Stopped => ServerState::Stopped,
        }
    }
}

/// Something that changed in the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A server's state changed.
    ServerState {
        /// The server's name in the config.
        server: String,
        /// Its state now.
        state: ServerState,
    },
    /// The merged tool list changed.
    ToolsChanged,
    /// The merged prompt list changed.
    PromptsChanged,
    /// The merged resource list changed.
    ResourcesChanged,
}

/// The hub's events from the moment [`crate::Hub::events`] was called, in order; ends when
/// the hub is gone.
pub struct Events {
    hub: Weak<crate::hub::Hub>,
    lists: broadcast::Receiver<HubEvent>,
    changes: watch::Receiver<u64>,
    /// Each server's state as last reported.
    seen: Vec<(String, ServerState)>,
    queue: VecDeque<Event>,
}

/// Every server's name and state now, removed ones left out.
pub(super) fn states(hub: &crate::hub::Hub) -> Vec<(String, ServerState)> {
    hub.upstreams()
        .iter()
        .filter(|u| !u.is_removed())
        .map(|u| (u.name().to_string(), ServerState::from(&u.snapshot().state)))
        .collect()
}

impl Events {
    pub(super) fn new(hub: &std::sync::Arc<crate::hub::Hub>) -> Events {
        let mut changes = hub.watch_changes();
        changes.mark_unchanged();
        Events {
            lists: hub.subscribe(),
            changes,
            seen: states(hub),
            hub: std::sync::Arc::downgrade(hub),
            queue: VecDeque::new(),
        }
    }

    /// The next event; `None` once the hub is gone.
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            tokio::select! {
                list = self.lists.recv() => match list {
                    Ok(e) => self.queue.push_back(match e {
                        HubEvent::ToolsChanged => Event::ToolsChanged,
                        HubEvent::PromptsChanged => Event::PromptsChanged,
                        HubEvent::ResourcesChanged => Event::ResourcesChanged,
                    }),
                    // Which lists changed is lost with the missed events: any may have.
                    Err(broadcast::error::RecvError::Lagged(_)) => self.queue.extend([
                        Event::ToolsChanged,
                        Event::PromptsChanged,
                        Event::ResourcesChanged,
                    ]),
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                    self.diff();
                }
            }
        }
    }

    /// Queues a [`Event::ServerState`] for each server whose state differs from the last
    /// one reported (the hub's change counter says only that something changed).
    fn diff(&mut self) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        for (name, state) in states(&hub) {
            match self.seen.iter_mut().find(|(n, _)| *n == name) {
                Some((_, old)) if *old == state => continue,
                Some((_, old)) => *old = state.clone(),
                None => self.seen.push((name.clone(), state.clone())),
            }
            self.queue.push_back(Event::ServerState {
                server: name,
                state,
            });
        }
    }
}
