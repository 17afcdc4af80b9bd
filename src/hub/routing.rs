//! Routing: which server serves a tool or prompt name (of any accepted form) or a resource
//! URI, waiting for servers still starting; and why a request could not be routed.

use super::{Hub, Named};
use crate::jsonrpc;
use crate::upstream::{State, Upstream};
use std::sync::Arc;

/// Why a request could not be routed to a server.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("Unknown {kind}: {name}")]
    Unknown { kind: &'static str, name: String },
    #[error("{kind} '{name}' belongs to server '{server}', which is {state}")]
    ServerDown {
        kind: &'static str,
        name: String,
        server: String,
        state: String,
        /// Still on its way up (the name may yet be served), not failed or stopped.
        starting: bool,
    },
    #[error("Resource not found: no server offers {0}")]
    NoServerForUri(String),
    #[error(
        "Tool '{name}' is offered by several servers with MCP Apps views ({}); call it by one of those names",
        .servers.join(", ")
    )]
    Ambiguous {
        name: String,
        servers: Vec<Arc<str>>,
    },
}

impl RouteError {
    pub fn code(&self) -> i64 {
        match self {
            RouteError::Unknown { .. } | RouteError::Ambiguous { .. } => {
                jsonrpc::code::INVALID_PARAMS
            }
            RouteError::ServerDown { .. } => crate::upstream::code::UNAVAILABLE,
            RouteError::NoServerForUri(_) => RESOURCE_NOT_FOUND,
        }
    }
}

/// The 2024-11-05 … 2025-11-25 "resource not found" code.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// Where a tool or prompt is served.
#[derive(Clone)]
pub enum Route {
    Server(Arc<Upstream>),
    /// OpenPact's own tools, in process.
    Builtin,
}

/// Which namespaced list a name is looked up in.
#[derive(Debug, Clone, Copy)]
pub enum NameKind {
    Tool,
    Prompt,
}

impl Hub {
    /// Resolves a tool or prompt name of any accepted form to its server and upstream name.
    /// A name whose server is still starting waits for it (within `list_wait`); a name of a
    /// server that has already failed (or is otherwise down) is answered at once, whatever
    /// other servers are still doing.
    /// Only view `view`'s names are known (see [`super::views`]).
    pub async fn route_name(
        &self,
        view: usize,
        kind: NameKind,
        name: &str,
    ) -> Result<(Route, Arc<Named>), RouteError> {
        // Worth waiting for: a name nobody offers yet, or one of a server still starting.
        let may_come = |r: &Result<_, RouteError>| {
            matches!(
                r,
                Err(RouteError::Unknown { .. } | RouteError::ServerDown { starting: true, .. })
            )
        };
        let first = self.try_route_name(view, kind, name);
        if !may_come(&first) || !self.starting() {
            return first;
        }
        let left = self
            .settings
            .list_wait
            .saturating_sub(self.started.elapsed());
        self.wait_until(left, || {
            !may_come(&self.try_route_name(view, kind, name)) || !self.starting()
        })
        .await;
        self.try_route_name(view, kind, name)
    }

    fn try_route_name(
        &self,
        view: usize,
        kind: NameKind,
        name: &str,
    ) -> Result<(Route, Arc<Named>), RouteError> {
        let catalog = self.view_catalog(view);
        let (found, label) = match kind {
            NameKind::Tool => (
                catalog
                    .find_tool(name)
                    .map_err(|servers| RouteError::Ambiguous {
                        name: name.into(),
                        servers,
                    })?,
                "tool",
            ),
            NameKind::Prompt => (catalog.prompts.find(name), "prompt"),
        };
        if let Some(t) = found {
            // Fill the catalogue entry's lazy definition hash before cloning it, so the hash
            // is computed once per catalogue, not once per call.
            let _ = t.definition();
            let route = match self.upstreams().get(t.upstream) {
                Some(up) => Route::Server(up.clone()),
                None => Route::Builtin,
            };
            return Ok((route, t.clone()));
        }
        // Not served: if the name points at a known server in view, say what is wrong with it.
        let in_view = |i: usize| self.in_view(view, i);
        for up in self
            .upstreams()
            .iter()
            .filter(|u| !u.is_removed() && in_view(u.index))
        {
            let config = up.config();
            let prefix = config.prefix();
            let matches = !prefix.is_empty()
                && (name
                    .strip_prefix(prefix)
                    .is_some_and(|rest| rest.starts_with(':') || rest.starts_with("__")));
            let state = up.snapshot().state.clone();
            if matches && state != State::Ready {
                return Err(RouteError::ServerDown {
                    kind: label,
                    name: name.into(),
                    server: up.name().into(),
                    state: up.describe_state(),
                    starting: state.is_pending(),
                });
            }
        }
        Err(RouteError::Unknown {
            kind: label,
            name: name.into(),
        })
    }

    /// A request to `up` about `uri` when that is one of its views under the hub's URI.
    pub fn view_read(&self, up: &Upstream, uri: &str) -> Option<super::apps::Read> {
        let upstream = super::apps::upstream_uri(up.config().prefix(), uri)?;
        Some(super::apps::Read {
            shown: uri.to_string(),
            upstream,
        })
    }

    /// The server in view `view` whose view `uri` is in the hub's form, listed or not (a
    /// server may serve a view it does not list, or through a template).
    pub fn view_server(&self, view: usize, uri: &str) -> Option<usize> {
        self.upstreams()
            .iter()
            .filter(|u| !u.is_removed() && self.in_view(view, u.index))
            .find(|u| super::apps::upstream_uri(u.config().prefix(), uri).is_some())
            .map(|u| u.index)
    }

    /// The server serving a resource URI (or a URI template, for completion).
    pub async fn route_uri(&self, view: usize, uri: &str) -> Result<Arc<Upstream>, RouteError> {
        // A URI no ready server lists may belong to one still starting: wait for it before
        // falling back to "the only server with resources", which could be the wrong one.
        if self.view_catalog(view).route_uri_listed(uri).is_none()
            && self.view_server(view, uri).is_none()
            && self.starting()
        {
            let left = self
                .settings
                .list_wait
                .saturating_sub(self.started.elapsed());
            self.wait_until(left, || {
                self.view_catalog(view).route_uri_listed(uri).is_some() || !self.starting()
            })
            .await;
        }
        let in_view = |i: usize| self.in_view(view, i);
        let catalog = self.view_catalog(view);
        match catalog
            .route_uri_listed(uri)
            .or_else(|| self.view_server(view, uri))
            .or_else(|| catalog.route_uri(uri, &self.upstreams(), in_view))
        {
            Some(i) => Ok(self.upstreams()[i].clone()),
            None => Err(RouteError::NoServerForUri(uri.into())),
        }
    }
}
