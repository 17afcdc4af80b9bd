//! rmcp's streamable HTTP client (the Rust SDK) against `openpact serve --http`, in either
//! era: the same steps as the scripted SDKs, gathered into the same JSON shape so that the
//! same assertions judge it.

use super::{STATELESS, assert_handshake, assert_session, assert_stateless, http_hub, text};
use crate::support::WAIT;
use crate::support::rmcp::obj;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, ClientConfig, ClientRequest,
    ElicitRequestParams, ElicitResult, ElicitationAction, ProgressNotificationParam,
    ProtocolVersion, ResourceUpdatedNotificationParam, ServerResult, SubscribeRequestParams,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, PeerRequestOptions, RequestContext,
    RunningService,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An rmcp client that declares elicitation, answers the permission prompt "once", and
/// records what it was asked and which notifications came.
#[derive(Clone, Default)]
struct Seen {
    asked: Arc<Mutex<Vec<Value>>>,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    updated: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Seen {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "once"})))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }

    fn get_info(&self) -> ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "rmcp-http", "version": "0"},
        }))
        .unwrap()
    }
}

type Running = RunningService<RoleClient, Seen>;

/// `fut` answered within [`WAIT`], or the test fails naming `what`.
async fn within<T, E: std::fmt::Display>(what: &str, fut: impl Future<Output = Result<T, E>>) -> T {
    tokio::time::timeout(WAIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {WAIT:?}"))
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// A `tools/call` request as rmcp sends it.
fn call_request(name: &'static str, args: Value) -> ClientRequest {
    ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new(name).with_arguments(obj(args)),
    ))
}

async fn call(client: &Running, name: &'static str, args: Value) -> Value {
    let r = within(
        name,
        client.call_tool(CallToolRequestParams::new(name).with_arguments(obj(args))),
    )
    .await;
    serde_json::to_value(r).unwrap()
}

/// Polls `cond` every 20 ms for up to `limit`; whether it came true.
async fn eventually(limit: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !cond() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// One rmcp session against a fresh HTTP hub in `mode` (handshake or 2026-07-28): what it saw,
/// in the scripts' shape.
async fn rmcp_session(mode: &str) -> Value {
    let stateless = mode != "legacy";
    let h = http_hub().await;
    // reqwest is built without a TLS provider of its own; plain http:// needs none, but the
    // client builder wants one chosen.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let transport = StreamableHttpClientTransport::from_uri(h.url.clone());
    let lifecycle = if stateless {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    let seen = Seen::default();
    let client = within(
        "connect",
        seen.clone().serve_with_lifecycle(transport, lifecycle),
    )
    .await;
    let mut out = json!({"mode": mode});
    let info = client.peer().peer_info().expect("the hub's info");
    out["protocolVersion"] = json!(info.protocol_version.to_string());
    out["server"] = serde_json::to_value(&info.server_info).unwrap();

    let tools = within("tools/list", client.list_all_tools()).await;
    out["tools"] = json!(tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>());
    out["echo"] = call(&client, "fx:echo", json!({"message": "rmcp over http"})).await;

    // Progress: rmcp gives every request a token; the notifications must carry this one's.
    let handle = within(
        "fx:progress",
        client.send_cancellable_request(
            call_request("fx:progress", json!({"steps": 3, "ms": 20})),
            PeerRequestOptions::with_timeout(WAIT),
        ),
    )
    .await;
    let token = handle.progress_token.clone();
    match within("fx:progress", handle.await_response()).await {
        ServerResult::CallToolResult(r) => out["progress"] = serde_json::to_value(r).unwrap(),
        other => panic!("fx:progress: {other:?}"),
    }
    // rmcp runs notification handlers on tasks of their own: the last one may still be on
    // its way when the response is in.
    let ours = || -> Vec<Value> {
        seen.progress
            .lock()
            .unwrap()
            .iter()
            .filter(|p| p.progress_token == token)
            .map(|p| json!({"progress": p.progress, "total": p.total}))
            .collect()
    };
    eventually(Duration::from_secs(5), || ours().len() >= 3).await;
    out["progressSeen"] = json!(ours());

    if stateless {
        // The prompt as it comes: an input-required result, left unanswered here.
        let add = CallToolRequestParams::new("fx:add").with_arguments(obj(json!({"a": 2, "b": 3})));
        out["inputRequired"] = match within("fx:add once", client.call_tool_once(add)).await {
            CallToolResponse::InputRequired(r) => serde_json::to_value(r).unwrap(),
            other => panic!("fx:add: not input-required: {other:?}"),
        };
    }
    out["add"] = call(&client, "fx:add", json!({"a": 2, "b": 3})).await;
    out["asked"] = json!(*seen.asked.lock().unwrap());

    if !stateless {
        let resources = within("resources/list", client.list_all_resources()).await;
        let uris: Vec<String> = resources.iter().map(|r| r.uri.clone()).collect();
        let uri = uris
            .iter()
            .find(|u| u.ends_with("/static/1"))
            .unwrap_or_else(|| panic!("no static/1 in {uris:?}"))
            .clone();
        out["resources"] = json!(uris);
        // resources/subscribe is the handshake era's way (2026-07-28 listens instead).
        #[allow(deprecated)]
        let subscribe = client.subscribe(SubscribeRequestParams::new(&uri));
        within("subscribe", subscribe).await;
        out["touch"] = call(&client, "fx:touch", json!({"uri": uri})).await;
        eventually(Duration::from_secs(10), || {
            seen.updated.lock().unwrap().contains(&uri)
        })
        .await;
        out["subscribed"] = json!(uri);
        out["updated"] = json!(*seen.updated.lock().unwrap());
    }

    let slow = within(
        "fx:slow",
        client.send_cancellable_request(
            call_request("fx:slow", json!({"ms": 30000})),
            PeerRequestOptions::no_options(),
        ),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = Instant::now();
    within("cancel", slow.cancel(Some("the test cancels".into()))).await;
    out["cancelMs"] = json!(t0.elapsed().as_millis() as u64);
    // The fixture lists the request ids it was told were cancelled: the hub passed it on.
    for _ in 0..250 {
        let listed = call(&client, "fx:cancelled", json!({})).await;
        out["upstreamCancelled"] = serde_json::from_str(text(&listed)).unwrap_or(json!([]));
        if out["upstreamCancelled"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    out["after"] = call(&client, "fx:echo", json!({"message": "rmcp still served"})).await;
    within("close", client.cancel()).await;
    if !stateless {
        h.hub
            .wait_log("request cancelled by the client", WAIT)
            .await;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_streamable_http_client_over_http() {
    let v = rmcp_session("legacy").await;
    assert_eq!(v["server"]["name"], "openpact", "{v:#}");
    assert_session(&v, "rmcp");
    assert_handshake(&v, "rmcp");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_streamable_http_client_over_http_2026() {
    let v = rmcp_session(STATELESS).await;
    assert_session(&v, "rmcp");
    assert_stateless(&v, "rmcp");
}
