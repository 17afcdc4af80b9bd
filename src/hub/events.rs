//! The event loop: servers' state and list changes become a rebuilt catalogue (coalesced
//! while servers start), `list_changed` announcements, stale cache entries dropped, and
//! sessions' settings replayed to restarted servers.

use super::{Hub, HubEvent, catalog};
use crate::upstream::{Event, State};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;

/// While servers are still starting for the first time, the catalogue is rebuilt at most
/// this often: each rebuild merges every server's share, so rebuilding once per server as
/// 50 of them come up costs a quadratic amount of work on the CPUs those servers need.
/// The rebuild after the last one settles is immediate. Until then nobody lists (a listing
/// waits for the servers to settle, within `listWait`); only a call to a server that is
/// already up may wait this long for its name to be known.
const STARTUP_REBUILD_EVERY: Duration = Duration::from_millis(25);

/// What the event loop remembers between events.
#[derive(Default)]
struct Seen {
    generations: HashMap<usize, (usize, u64)>,
    tool_lists: HashMap<usize, usize>,
    warned: std::collections::HashSet<catalog::Conflict>,
}

pub(super) async fn event_loop(hub: Weak<Hub>, mut rx: mpsc::UnboundedReceiver<Event>) {
    let mut seen = Seen::default();
    // Highest event sequence number not yet in the catalogue (0: nothing pending).
    let mut dirty = 0;
    let mut last_build: Option<tokio::time::Instant> = None;
    loop {
        let due = last_build.map(|t| t + STARTUP_REBUILD_EVERY);
        let first = tokio::select! {
            ev = rx.recv() => match ev {
                Some(ev) => Some(ev),
                None => return,
            },
            () = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)),
                if dirty > 0 && due.is_some() => None,
        };
        let Some(hub) = hub.upgrade() else { return };
        // Coalesce a burst (50 servers coming up) into one rebuild and one announcement.
        let mut next = first;
        while let Some(ev) = next.take() {
            dirty = dirty.max(on_event(&hub, &mut seen, ev));
            next = rx.try_recv().ok();
        }
        if dirty == 0 {
            continue;
        }
        let starting = hub
            .upstreams()
            .iter()
            .any(|u| u.snapshot().state.is_pending());
        let now = tokio::time::Instant::now();
        if starting && due.is_some_and(|due| now < due) {
            continue;
        }
        rebuild(&hub, &mut seen, dirty, !starting);
        dirty = 0;
        last_build = Some(now);
    }
}

/// Acts on one server event at once; returns its sequence number (the catalogue is rebuilt
/// later).
fn on_event(hub: &Arc<Hub>, seen: &mut Seen, ev: Event) -> u64 {
    let Event::Changed(i, n) = ev;
    let Some(up) = hub.upstreams().get(i).cloned() else {
        return n;
    };
    let snap = up.snapshot();
    if snap.state != State::Ready {
        for s in hub.sessions() {
            s.server_gone(i);
        }
    }

    // A restart or a new tool list makes cached results of that server stale.
    let tools_id = Arc::as_ptr(&snap.tools) as usize;
    if seen
        .tool_lists
        .insert(i, tools_id)
        .is_some_and(|old| old != tools_id)
        || snap.state != State::Ready
    {
        hub.policy().cache.invalidate_server(i);
    }

    // Keyed by the upstream too: one a reload put in this slot starts counting again.
    let generation = (Arc::as_ptr(&up) as usize, snap.generation);
    if snap.state == State::Ready && seen.generations.insert(i, generation) != Some(generation) {
        let h = hub.clone();
        tokio::spawn(async move { h.replay(i).await });
    }
    n
}

/// Rebuilds the catalogue, publishes it and announces what changed. Name conflicts are
/// reported only once no server is on its first start (`warn`): while 50 servers come up in
/// random order, which one wins a contested name keeps changing, and every interim winner
/// would be reported.
/// Rebuilds at once, outside the event loop (a reload changed names, filters or views).
pub(super) fn rebuild_now(hub: &Hub) {
    let upto = hub.seq.load(Ordering::SeqCst);
    let mut seen = Seen::default();
    rebuild(hub, &mut seen, upto, false);
}

fn rebuild(hub: &Hub, seen: &mut Seen, upto: u64, warn: bool) {
    // Servers stopping at shutdown empty the catalogue one by one; nobody needs to see or
    // hear that, and 50 rebuilds would only slow the exit.
    if *hub.shutdown.borrow() {
        hub.rebuilt.fetch_max(upto, Ordering::SeqCst);
        hub.changed.send_modify(|g| *g += 1);
        return;
    }
    let upstreams = hub.upstreams();
    // Held to the end: two builds (the event loop's, a reload's) publish in order.
    let mut builder = super::lock(&hub.builder);
    let fresh = builder.build(&upstreams);
    let new_conflicts: Vec<catalog::Conflict> = if warn {
        fresh
            .conflicts
            .iter()
            .filter(|c| seen.warned.insert((*c).clone()))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let changes = {
        let mut cur = hub
            .catalog
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut changes = Vec::new();
        if cur.tools.fingerprint != fresh.tools.fingerprint {
            changes.push(HubEvent::ToolsChanged);
        }
        if cur.prompts.fingerprint != fresh.prompts.fingerprint {
            changes.push(HubEvent::PromptsChanged);
        }
        if cur.resources_fingerprint != fresh.resources_fingerprint
            || cur.templates_fingerprint != fresh.templates_fingerprint
        {
            changes.push(HubEvent::ResourcesChanged);
        }
        let fresh = Arc::new(fresh);
        let views: Arc<[Arc<catalog::Catalog>]> = super::read(&hub.view_specs)
            .iter()
            .map(|v| v.catalog(&fresh, &upstreams))
            .collect();
        super::views::warm(&views);
        *hub.views
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = views;
        *cur = fresh;
        changes
    };
    hub.rebuilt.fetch_max(upto, Ordering::SeqCst);
    hub.changed.send_modify(|g| *g += 1);
    for c in changes {
        let _ = hub.events.send(c);
    }
    // After publishing: a client waiting for the servers to settle need not wait for these.
    // A target of their own, so a command that calls one tool can leave them out.
    drop(builder);
    for message in catalog::Conflict::messages(&new_conflicts, &upstreams) {
        tracing::warn!(target: "openpact::conflicts", "{message}");
    }
}
