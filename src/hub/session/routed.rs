//! Requests passed on to the server they belong to, with this session's bookkeeping:
//! resource subscriptions (counted across sessions by the hub), completions (routed by
//! prompt name or URI), and `logging/setLevel`.

use super::{Session, lock, relay};
use crate::hub::{LOG_LEVELS, NameKind, Route, RouteError, log_rank};
use crate::jsonrpc::{self, Message, RawObject, code};
use std::sync::Arc;

impl Session {
    pub(super) async fn subscription(&self, m: &Message) -> String {
        let (up, uri) = match self.resource_of(m).await {
            Ok(found) => found,
            Err(e) => return e.line(m),
        };
        let params = m.params().unwrap_or("{}");
        // A view under the hub's URI is subscribed to, upstream, by the server's own.
        let (upstream_uri, upstream_params) = match self.hub.view_read(&up, &uri) {
            Some(view) => (view.upstream.clone(), view.params(params)),
            None => (uri.clone(), params.to_string()),
        };
        let subscribe = m.method() == "resources/subscribe";
        let changed = if subscribe {
            lock(&self.subscriptions).insert(uri.clone())
        } else {
            lock(&self.subscriptions).remove(&uri)
        };
        if !changed {
            // Already in that state for this client: nothing to tell the server.
            return jsonrpc::result(m.id(), "{}");
        }
        let reply = if subscribe {
            (self.hub)
                .subscribe_uri(&up, &upstream_uri, &upstream_params)
                .await
        } else {
            (self.hub)
                .unsubscribe_uri(&up, &upstream_uri, &upstream_params)
                .await
        };
        match reply {
            Ok(None) => jsonrpc::result(m.id(), "{}"),
            Ok(Some(reply)) => {
                if subscribe && reply.error().is_some() {
                    lock(&self.subscriptions).remove(&uri);
                }
                relay(m.id(), &Ok(reply))
            }
            Err(e) => {
                if subscribe {
                    lock(&self.subscriptions).remove(&uri);
                }
                relay(m.id(), &Err(e))
            }
        }
    }

    /// `completion/complete`: prompts by (namespaced) name, resources by URI template.
    pub(super) async fn complete(self: &Arc<Self>, m: &Message) -> String {
        let params = m.params().unwrap_or("{}");
        let parsed = RawObject::parse(params).ok().and_then(|o| {
            let r = o.get("ref")?;
            let reference = RawObject::parse(r).ok()?;
            Some((o, reference))
        });
        let Some((obj, reference)) = parsed else {
            return jsonrpc::error(
                m.id(),
                code::INVALID_PARAMS,
                "completion/complete needs a `ref` object",
                None,
            );
        };
        let routed = match reference.get_str("type").as_deref() {
            Some("ref/prompt") => match reference.get_str("name") {
                Some(name) => {
                    self.hub
                        .route_name(self.view, NameKind::Prompt, &name)
                        .await
                        .and_then(|(route, named)| {
                            // Built-ins have no prompts; a prompt name always routes to a server.
                            let Route::Server(up) = route else {
                                return Err(RouteError::Unknown {
                                    kind: "prompt",
                                    name: named.wire.to_string(),
                                });
                            };
                            let new_ref = reference.with("name", &named.original_json);
                            Ok((up, obj.with("ref", &new_ref)))
                        })
                }
                None => {
                    return jsonrpc::error(
                        m.id(),
                        code::INVALID_PARAMS,
                        "ref/prompt needs a `name`",
                        None,
                    );
                }
            },
            Some("ref/resource") => match reference.get_str("uri") {
                Some(uri) => self.hub.route_uri(self.view, &uri).await.map(|up| {
                    let params = match self.hub.view_read(&up, &uri) {
                        Some(view) => obj.with("ref", &view.params(&reference.rewrite(&[]))),
                        None => params.to_string(),
                    };
                    (up, params)
                }),
                None => {
                    return jsonrpc::error(
                        m.id(),
                        code::INVALID_PARAMS,
                        "ref/resource needs a `uri`",
                        None,
                    );
                }
            },
            _ => {
                return jsonrpc::error(
                    m.id(),
                    code::INVALID_PARAMS,
                    "ref.type must be ref/prompt or ref/resource",
                    None,
                );
            }
        };
        match routed {
            Ok((up, params)) => relay(
                m.id(),
                &self.hub.request_for(self, &up, m.method(), &params).await,
            ),
            Err(e) => jsonrpc::error(m.id(), e.code(), &e.to_string(), None),
        }
    }

    pub(super) async fn set_level(&self, m: &Message) -> String {
        let level = m
            .params()
            .and_then(|p| RawObject::parse(p).ok())
            .and_then(|o| o.get_str("level"));
        let Some(rank) = level.as_deref().and_then(log_rank) else {
            return jsonrpc::error(
                m.id(),
                code::INVALID_PARAMS,
                &format!("unknown log level; use one of {}", LOG_LEVELS.join(", ")),
                None,
            );
        };
        *lock(&self.log_rank) = Some(rank);
        self.hub.set_log_level().await;
        jsonrpc::result(m.id(), "{}")
    }
}
