//! `openpact serve --http`: the hub over Streamable HTTP on `/mcp` — both the session-based
//! shape of 2025-03-26 … 2025-11-25 and the stateless 2026-07-28 revision (`stateless`) —
//! and on `/mcp/PROFILE` for each profile's view of the catalogue, plus `/health` and
//! `/metrics`, with axum on the hub's runtime.
//!
//! Each `Mcp-Session-Id` is one downstream [`crate::hub::Session`], exactly like the stdio
//! face's. `guard` refuses what must not reach MCP (Origin, Host, token); `session` routes a
//! session's lines to POST replies and its GET stream; `stream` writes them as SSE; `listen`
//! accepts connections under a header deadline and a connection cap.

mod guard;
mod listen;
mod session;
mod stateless;
mod stream;
mod ui;

pub use ui::{ask_login, login_requested};

use crate::config::{HttpSettings, HttpToken};
use crate::hub::Hub;
use crate::jsonrpc::{self, Kind, Message, code, parse_frame};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use session::{HttpSession, Refused};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// Why the HTTP face cannot start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0:?} is not an address to serve HTTP on; use IP:PORT, like 127.0.0.1:8765")]
    Address(String),
    #[error(
        "refusing to serve HTTP on {0} without a token: that address is reachable from other \
         machines, and anyone reaching it could call every tool. Set openpact.http.token \
         (e.g. \"${{OPENPACT_HTTP_TOKEN}}\") or bind 127.0.0.1 (\"token\": false, too, serves \
         loopback only)"
    )]
    NoToken(SocketAddr),
    #[error("refusing to serve HTTP without the configured token: {0}")]
    TokenMissing(String),
    #[error("could not listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
}

/// A bound, not yet serving, listener.
pub struct Bound {
    listener: TcpListener,
    pub addr: SocketAddr,
    loopback: bool,
}

/// Why `serve --http` (on `address`, else `openpact.http.address`) would refuse to start,
/// without binding: also what `config check` reports about the HTTP face. `Ok`: the address
/// and whether it is loopback.
pub fn preflight(
    settings: &HttpSettings,
    address: Option<&str>,
) -> Result<(SocketAddr, bool), HttpError> {
    let text = address.unwrap_or(&settings.address);
    let addr: SocketAddr = text
        .parse()
        .map_err(|_| HttpError::Address(text.to_string()))?;
    let loopback = addr.ip().is_loopback();
    if let HttpToken::Missing { why, variable } = &settings.token {
        return Err(HttpError::TokenMissing(format!(
            "{why}. {}",
            token_advice(variable.as_deref(), loopback)
        )));
    }
    if !loopback && settings.token.bearer().is_none() {
        return Err(HttpError::NoToken(addr));
    }
    Ok((addr, loopback))
}

/// Checks the settings ([`preflight`]) and binds: `address` overrides `openpact.http.address`.
/// Done before the hub starts, so a refusal costs no child process.
pub async fn bind(settings: &HttpSettings, address: Option<&str>) -> Result<Bound, HttpError> {
    let (addr, loopback) = preflight(settings, address)?;
    let (listener, addr) = listen_on(addr).await?;
    Ok(Bound {
        listener,
        addr,
        loopback,
    })
}

/// A listener on `addr`, and the address it got (port 0: the one the system chose).
async fn listen_on(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), HttpError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| HttpError::Bind(addr, e))?;
    let bound = listener
        .local_addr()
        .map_err(|e| HttpError::Bind(addr, e))?;
    Ok((listener, bound))
}

/// What to do about a configured token that cannot be had; each way ends in a face that
/// serves (`"token": false` only where it may: on loopback).
fn token_advice(variable: Option<&str>, loopback: bool) -> String {
    let set = match variable {
        Some(v) => format!(
            "Set {v} (e.g. `export {v}=$(openssl rand -hex 32)`) and give clients the header \
             `Authorization: Bearer <its value>`"
        ),
        None => "Write \"token\": \"${OPENPACT_HTTP_TOKEN}\", set OPENPACT_HTTP_TOKEN (e.g. \
                 `export OPENPACT_HTTP_TOKEN=$(openssl rand -hex 32)`) and give clients the \
                 header `Authorization: Bearer <its value>`"
            .to_string(),
    };
    if loopback {
        format!("{set}; or write \"token\": false to serve on this machine without one")
    } else {
        set
    }
}

struct Face {
    hub: Arc<Hub>,
    settings: HttpSettings,
    guard: guard::Guard,
    sessions: Mutex<HashMap<String, Arc<HttpSession>>>,
    next_stream: AtomicU64,
    ui: ui::Ui,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The running HTTP face.
pub struct HttpFace {
    face: Arc<Face>,
    server: tokio::task::JoinHandle<()>,
    reaper: tokio::task::JoinHandle<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Starts serving on `bound`.
pub fn start(bound: Bound, hub: Arc<Hub>, settings: &HttpSettings) -> HttpFace {
    let face = new_face(hub, settings, bound.loopback);
    let app = app(&face);
    // A target of its own: shown by default (see `Cli::default_log_filter`), since a person
    // starting `serve --http` needs the address, port 0 above all.
    let profiles: String = face
        .hub
        .profile_names()
        .iter()
        .map(|p| format!(", /mcp/{p}"))
        .collect();
    tracing::info!(
        target: "openpact::listening",
        "serving MCP over HTTP on http://{}/mcp{profiles} (health: /health, metrics: /metrics)",
        bound.addr
    );
    // The login link must reach the person, as the address does: same target. It works
    // once and expires soon, so a log kept on disk gives little away.
    match face.ui.mint_login() {
        Some(key) => tracing::info!(
            target: "openpact::listening",
            "dashboard: http://{}/ui/login?key={key} (this link works once, for ten minutes)",
            bound.addr
        ),
        None => tracing::warn!("no random source: the dashboard has no login link"),
    }
    if settings.token == HttpToken::Off {
        tracing::warn!(
            "openpact.http.token is false: no token guards http://{}/mcp; any program on this \
             machine can call every tool through it",
            bound.addr
        );
    }
    run(bound, face, app)
}

/// The dashboard alone on a port of its own on 127.0.0.1, for a hub that serves no HTTP
/// (a shared hub, an editor's stdio hub) once `openpact ui` asks for it: no `/mcp` there,
/// so it opens no new way to call tools.
pub async fn start_dashboard(
    hub: Arc<Hub>,
    settings: &HttpSettings,
) -> Result<HttpFace, HttpError> {
    let (listener, addr) = listen_on(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let face = new_face(hub, settings, true);
    let app = ui::with_routes(axum::Router::new(), &face)
        .layer(DefaultBodyLimit::max(face.settings.max_body_size))
        .with_state(face.clone());
    tracing::info!(target: "openpact::listening", "dashboard on http://{addr}/ui (`openpact ui` logs you in)");
    let bound = Bound {
        listener,
        addr,
        loopback: true,
    };
    Ok(run(bound, face, app))
}

/// Serves `app` on `bound` until stopped, and names the dashboard's address as where
/// permission questions can be answered.
fn run(bound: Bound, face: Arc<Face>, app: axum::Router) -> HttpFace {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(listen::serve(bound.listener, app, stopped));
    let reaper = tokio::spawn(reap(Arc::downgrade(&face)));
    face.hub
        .policy()
        .desk
        .set_place(format!("http://{}/ui", bound.addr));
    HttpFace {
        face,
        server,
        reaper,
        stop: Some(stop),
    }
}

fn new_face(hub: Arc<Hub>, settings: &HttpSettings, loopback: bool) -> Arc<Face> {
    Arc::new(Face {
        hub,
        guard: guard::Guard::new(settings, loopback),
        settings: settings.clone(),
        sessions: Mutex::new(HashMap::new()),
        next_stream: AtomicU64::new(1),
        ui: ui::Ui::default(),
    })
}

/// The routes, the guard and the body limit: everything a request meets once accepted.
fn app(face: &Arc<Face>) -> axum::Router {
    let mcp = axum::Router::new()
        .route("/mcp", get(get_stream).post(post).delete(delete))
        .route(
            "/mcp/{profile}",
            get(get_stream_in).post(post_in).delete(delete_in),
        )
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        // Behind the guard too: without the token, no path answers anything but 401, so
        // nothing tells what is served.
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(axum::middleware::from_fn_with_state(face.clone(), check));
    // The dashboard's routes are not behind the MCP guard: they have their own (a browser
    // cannot send the bearer token).
    ui::with_routes(mcp, face)
        .layer(DefaultBodyLimit::max(face.settings.max_body_size))
        .with_state(face.clone())
}

/// The router [`start`] serves for `hub`, without a listener, as if bound to a loopback
/// address (`loopback`) or not: for driving requests in process (the fuzz targets in
/// `tests/fuzz`). Idle sessions are not reaped; a full table makes room as usual.
#[cfg(feature = "internals")]
pub fn router(hub: Arc<Hub>, settings: &HttpSettings, loopback: bool) -> axum::Router {
    app(&new_face(hub, settings, loopback))
}

impl HttpFace {
    /// Takes the login keys `openpact ui` left for this hub (see [`ask_login`]).
    pub fn take_login_requests(&self, state_dir: &std::path::Path) {
        self.face.ui.take_requests(state_dir);
    }

    /// Ends every session (their calls cancelled, streams closed) and stops listening.
    pub async fn stop(mut self) {
        let sessions: Vec<_> = lock(&self.face.sessions).drain().map(|(_, s)| s).collect();
        for s in sessions {
            s.end("openpact is shutting down");
        }
        self.reaper.abort();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_millis(500), &mut self.server)
            .await
            .is_err()
        {
            self.server.abort();
        }
    }
}

/// Ends sessions idle longer than `openpact.http.sessionIdleTimeout`: a client that
/// vanished has its calls cancelled this way.
async fn reap(face: std::sync::Weak<Face>) {
    loop {
        let Some(idle) = face.upgrade().map(|f| f.settings.session_idle_timeout) else {
            return;
        };
        tokio::time::sleep((idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30)))
            .await;
        let Some(face) = face.upgrade() else { return };
        let gone: Vec<_> = {
            let mut sessions = lock(&face.sessions);
            let ids: Vec<String> = sessions
                .iter()
                .filter(|(_, s)| s.idle_for(idle))
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| sessions.remove(id)).collect()
        };
        for s in gone {
            tracing::info!(session = %s.id, "HTTP session idle too long; ended");
            s.end("the session expired");
        }
    }
}

async fn check(State(face): State<Arc<Face>>, req: Request, next: Next) -> Response {
    match face.guard.check(req.headers()) {
        Ok(()) => next.run(req).await,
        Err((status, why)) => {
            tracing::debug!(%status, "HTTP request refused: {why}");
            let mut resp = rpc_error(status, "null", code::INVALID_REQUEST, &why);
            if status == StatusCode::UNAUTHORIZED {
                resp.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            resp
        }
    }
}

fn json(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

fn rpc_error(status: StatusCode, id: &str, code: i64, message: &str) -> Response {
    json(status, jsonrpc::error(id, code, message, None))
}

/// The view of endpoint `/mcp/PROFILE`, or the reply saying there is no such profile.
fn view_of(face: &Face, profile: &str) -> Result<usize, Box<Response>> {
    if let Some(view) = face.hub.view_named(profile) {
        return Ok(view);
    }
    let known = face.hub.profile_names();
    let hint = if known.is_empty() {
        "no profiles are configured (openpact.profiles); use /mcp".to_string()
    } else {
        format!("the profiles are {}", known.join(", "))
    };
    Err(Box::new(rpc_error(
        StatusCode::NOT_FOUND,
        "null",
        code::INVALID_REQUEST,
        &format!("no profile \"{profile}\": {hint}"),
    )))
}

async fn post_in(
    State(face): State<Arc<Face>>,
    Path(profile): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match view_of(&face, &profile) {
        Ok(view) => serve_post(face, view, headers, body).await,
        Err(resp) => *resp,
    }
}

async fn get_stream_in(
    State(face): State<Arc<Face>>,
    Path(profile): Path<String>,
    headers: HeaderMap,
) -> Response {
    match view_of(&face, &profile) {
        Ok(view) => serve_get(face, view, headers).await,
        Err(resp) => *resp,
    }
}

async fn delete_in(
    State(face): State<Arc<Face>>,
    Path(profile): Path<String>,
    headers: HeaderMap,
) -> Response {
    match view_of(&face, &profile) {
        Ok(view) => serve_delete(face, view, headers).await,
        Err(resp) => *resp,
    }
}

async fn post(State(face): State<Arc<Face>>, headers: HeaderMap, body: Bytes) -> Response {
    serve_post(face, 0, headers, body).await
}

async fn get_stream(State(face): State<Arc<Face>>, headers: HeaderMap) -> Response {
    serve_get(face, 0, headers).await
}

async fn delete(State(face): State<Arc<Face>>, headers: HeaderMap) -> Response {
    serve_delete(face, 0, headers).await
}

/// The session a request to view `view`'s endpoint names, or the reply saying why there is
/// none (a session opened on another endpoint is not this one's).
fn session_of(
    face: &Face,
    headers: &HeaderMap,
    view: usize,
) -> Result<Arc<HttpSession>, Box<Response>> {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            "null",
            code::INVALID_REQUEST,
            "Mcp-Session-Id header missing: send initialize first",
        )));
    };
    lock(&face.sessions)
        .get(id)
        .filter(|s| s.view == view)
        .cloned()
        .ok_or_else(|| Box::new(unknown_session("null")))
}

fn unknown_session(id: &str) -> Response {
    rpc_error(
        StatusCode::NOT_FOUND,
        id,
        code::INVALID_REQUEST,
        "unknown or ended session: initialize again",
    )
}

async fn serve_post(face: Arc<Face>, view: usize, headers: HeaderMap, body: Bytes) -> Response {
    let mut messages: Vec<_> = match parse_frame(body.to_vec()) {
        Ok(messages) => messages.collect(),
        Err(e) => {
            let what = if e.code() == code::PARSE_ERROR {
                "Parse error"
            } else {
                "Invalid request"
            };
            return rpc_error(
                StatusCode::BAD_REQUEST,
                "null",
                e.code(),
                &format!("{what}: {e}"),
            );
        }
    };
    if messages.len() != 1 {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            "null",
            code::INVALID_REQUEST,
            "one JSON-RPC message per POST (batches are not supported)",
        );
    }
    let m = match messages.pop() {
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                "null",
                e.code(),
                &format!("Invalid request: {e}"),
            );
        }
        None => return StatusCode::BAD_REQUEST.into_response(),
    };
    // No session: the 2026-07-28 revision, stateless (a session id means a handshake client).
    // Checked before `initialize`, which that revision does not have.
    if !headers.contains_key(SESSION_HEADER) && stateless::speaks_stateless(&headers, &m) {
        return match m.kind() {
            Kind::Request => stateless::post(&face.hub, view, &headers, m).await,
            // The revision defines no client notification over HTTP (closing a stream
            // cancels); accepted and dropped.
            Kind::Notification => StatusCode::ACCEPTED.into_response(),
            Kind::Response => rpc_error(
                StatusCode::BAD_REQUEST,
                "null",
                code::INVALID_REQUEST,
                "2026-07-28 clients never send responses: input comes back with the retried request",
            ),
        };
    }
    if m.kind() == Kind::Request && m.method() == "initialize" {
        return initialize(&face, m, view).await;
    }
    let hs = match session_of(&face, &headers, view) {
        Ok(hs) => hs,
        Err(resp) => return *resp,
    };
    if let Some(v) = headers.get(VERSION_HEADER) {
        let v = v.to_str().unwrap_or("");
        if !crate::upstream::HANDSHAKE_VERSIONS.contains(&v) {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                if m.kind() == Kind::Request {
                    m.id()
                } else {
                    "null"
                },
                code::INVALID_REQUEST,
                &format!("unsupported MCP-Protocol-Version {v:?}"),
            );
        }
    }
    match m.kind() {
        Kind::Request => answer(&face, &hs, &m).await,
        Kind::Notification | Kind::Response => {
            hs.feed(m.text().as_bytes().to_vec());
            if m.kind() == Kind::Notification && m.method() == "notifications/cancelled" {
                hs.cancelled(&m);
            }
            StatusCode::ACCEPTED.into_response()
        }
    }
}

/// A fresh session for `initialize`; kept only if the hub answers with a result.
async fn initialize(face: &Arc<Face>, m: Message, view: usize) -> Response {
    if !make_room(face) {
        return rpc_error(
            StatusCode::SERVICE_UNAVAILABLE,
            m.id(),
            code::INTERNAL_ERROR,
            &format!(
                "too many sessions ({}, openpact.http.maxSessions), all of them busy; end one with DELETE",
                face.settings.max_sessions
            ),
        );
    }
    let Some(id) = new_session_id() else {
        return rpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            m.id(),
            code::INTERNAL_ERROR,
            "no random source for a session id",
        );
    };
    let hs = HttpSession::open(&face.hub, id.clone(), view);
    lock(&face.sessions).insert(id.clone(), hs.clone());
    let mut resp = answer(face, &hs, &m).await;
    let ok = resp.status() == StatusCode::OK && resp.extensions().get::<Failed>().is_none();
    if ok {
        if let Ok(v) = HeaderValue::from_str(&id) {
            resp.headers_mut().insert(SESSION_HEADER, v);
        }
        tracing::debug!(session = %id, "HTTP session started");
    } else {
        lock(&face.sessions).remove(&id);
        hs.end("initialize failed");
    }
    resp
}

/// Whether a new session fits. When the hub is full, the session idle longest (nothing in
/// flight, no stream open) makes way: many clients never send DELETE, and their sessions
/// would otherwise hold every slot until `sessionIdleTimeout`.
fn make_room(face: &Face) -> bool {
    let evicted = {
        let mut sessions = lock(&face.sessions);
        if sessions.len() < face.settings.max_sessions {
            return true;
        }
        let idlest = sessions
            .iter()
            .filter_map(|(id, s)| s.idle_since().map(|t| (t, id.clone())))
            .min()
            .map(|(_, id)| id);
        match idlest.and_then(|id| sessions.remove(&id)) {
            Some(s) => s,
            None => return false,
        }
    };
    tracing::info!(session = %evicted.id, "HTTP sessions full: the one idle longest was ended");
    evicted.end("openpact needed the slot of this idle session (openpact.http.maxSessions)");
    true
}

/// Marks a JSON reply that carries a JSON-RPC error.
#[derive(Clone, Copy)]
struct Failed;

/// 128 bits from the OS's random source, as hex (visible ASCII, as the spec asks).
fn new_session_id() -> Option<String> {
    crate::platform::random_hex(16)
}

/// Hands request `m` to the session and answers with JSON when the response comes first,
/// else with an SSE stream of what relates to the request, ending with the response.
async fn answer(face: &Arc<Face>, hs: &Arc<HttpSession>, m: &Message) -> Response {
    let body = m.text().as_bytes().to_vec();
    let (mut rx, guard) = match hs.request(m, body, face.settings.max_in_flight) {
        Ok(waiting) => waiting,
        Err(Refused::DuplicateId) => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                m.id(),
                code::INVALID_REQUEST,
                "a request with this id is already in flight in this session",
            );
        }
        Err(Refused::TooMany) => {
            return rpc_error(
                StatusCode::TOO_MANY_REQUESTS,
                m.id(),
                code::INVALID_REQUEST,
                &format!(
                    "too many requests in flight in this session ({}, openpact.http.maxInFlight)",
                    face.settings.max_in_flight
                ),
            );
        }
        Err(Refused::Ended) => return unknown_session(m.id()),
    };
    let stream = face.next_stream.fetch_add(1, Ordering::Relaxed);
    let Some(first) = rx.recv().await else {
        if !hs.is_ended() {
            // The client cancelled the request before anything came for it: its stream
            // ends empty, as no answer will come.
            let empty = stream::PostStream {
                first: None,
                rx,
                stream,
                sent: 0,
                done: true,
                _guard: guard,
            };
            return sse(Sse::new(empty).into_response());
        }
        return rpc_error(
            StatusCode::NOT_FOUND,
            m.id(),
            code::INVALID_REQUEST,
            "the session ended before answering",
        );
    };
    if first.last {
        drop(guard);
        let failed = Message::parse(first.line.as_str().into())
            .map(|r| r.error().is_some())
            .unwrap_or(true);
        let mut resp = json(StatusCode::OK, first.line);
        if failed {
            resp.extensions_mut().insert(Failed);
        }
        return resp;
    }
    let stream = stream::PostStream {
        first: Some(first),
        rx,
        stream,
        sent: 0,
        done: false,
        _guard: guard,
    };
    sse(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// SSE through proxies: no buffering.
fn sse(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// GET: the session's stream for messages unrelated to a request, resumable with
/// `Last-Event-ID`.
async fn serve_get(face: Arc<Face>, view: usize, headers: HeaderMap) -> Response {
    let hs = match session_of(&face, &headers, view) {
        Ok(hs) => hs,
        Err(resp) => return *resp,
    };
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(stream::parse_get_event_id);
    let Some(open) = hs.open_get(after) else {
        return unknown_session("null");
    };
    let stream = stream::GetStream {
        replay: open.replay.into(),
        rx: open.rx,
        _guard: open.guard,
    };
    sse(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// DELETE: the client is done; its calls in flight are cancelled.
async fn serve_delete(face: Arc<Face>, view: usize, headers: HeaderMap) -> Response {
    let hs = match session_of(&face, &headers, view) {
        Ok(hs) => hs,
        Err(resp) => return *resp,
    };
    lock(&face.sessions).remove(&hs.id);
    hs.end("the client ended its session");
    tracing::debug!(session = %hs.id, "HTTP session ended by the client");
    StatusCode::NO_CONTENT.into_response()
}

/// Liveness and each server's state, from the same status `openpact servers` shows.
async fn health(State(face): State<Arc<Face>>) -> Response {
    let hub = &face.hub;
    let servers: Vec<serde_json::Value> = hub
        .status()
        .into_iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "state": s.state,
                "reason": s.reason,
                "protocolVersion": s.protocol_version,
                "tools": s.tools,
                "restarts": s.restarts,
                "sandbox": s.sandbox,
                "refusals": s.refusals,
                "askedHosts": s.asked_hosts,
            })
        })
        .collect();
    let mut body = serde_json::json!({
        "status": "ok",
        "sessions": lock(&face.sessions).len(),
        "servers": servers,
    });
    if let Some(reload) = hub.last_reload() {
        body["reload"] = serde_json::to_value(reload).unwrap_or_default();
    }
    json(
        StatusCode::OK,
        hub.policy().redact(&body.to_string()).into_owned(),
    )
}

/// The hub's metrics as Prometheus scrapes them; the servers gauge is read at scrape time.
async fn metrics(State(face): State<Arc<Face>>) -> Response {
    let hub = &face.hub;
    let upstreams = hub.upstreams();
    let states = upstreams
        .iter()
        .filter(|up| !up.is_removed())
        .map(|up| up.snapshot().state.label());
    let live = crate::metrics::Live {
        sessions: hub.session_count(),
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
    };
    let body = hub.metrics.encode(states, live);
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
        )],
        body,
    )
        .into_response()
}
