//! The dashboard on `/ui`: a page (HTML, CSS and a little JavaScript embedded in the
//! binary, no CDN) showing the servers, the catalogue's search and the calls as they happen,
//! fed by JSON endpoints under `/ui/api` and an SSE stream of audit records.
//!
//! A browser cannot send the bearer token, so the page has its own guard: a one-time login
//! link (minted at start and logged) sets an HttpOnly, SameSite=Strict cookie holding a
//! random session key, never the token; every page and endpoint refuses without it (or the
//! bearer token, for scripts), refuses any `Origin` but the page's own, and actions (POST)
//! need the session's CSRF token in a header. Every answer carries a strict
//! Content-Security-Policy: no inline script, nothing from elsewhere.

use super::Face;
use crate::policy::audit::Record;
use crate::policy::desk::Watching;
use crate::policy::prompt::Answer;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::collections::HashMap;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

const PAGE: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/style.css");

const COOKIE: &str = "openpact_ui";
/// The state-dir files `openpact ui` leaves a login key in: `ui-login-<hub pid>-<nonce>`.
const REQUEST_PREFIX: &str = "ui-login-";
/// The header a page's action carries its session's CSRF token in.
const CSRF_HEADER: &str = "x-openpact-csrf";
/// How long a login link may wait to be opened.
const LOGIN_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a dashboard session lasts from its login.
const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);
/// Sessions kept at once; a login beyond this ends the oldest.
const MAX_SESSIONS: usize = 32;
/// Nothing but the page's own files; no inline script or style, no framing, no forms
/// posting elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

struct Session {
    csrf: String,
    until: Instant,
}

/// The dashboard's logins and sessions.
#[derive(Default)]
pub(super) struct Ui {
    /// Unused login keys and when each stops working.
    logins: Mutex<HashMap<String, Instant>>,
    sessions: Mutex<HashMap<String, Session>>,
}

fn random_key() -> Option<String> {
    crate::platform::random_hex(16)
}

/// Looks `given` up among `keys` comparing in constant time, so timing tells nothing of a
/// key's prefix.
fn find<'a, V>(keys: &'a HashMap<String, V>, given: &str) -> Option<(&'a String, &'a V)> {
    keys.iter()
        .find(|(k, _)| bool::from(k.as_bytes().ct_eq(given.as_bytes())))
}

impl Ui {
    /// A fresh one-time login key, or `None` without a random source.
    pub(super) fn mint_login(&self) -> Option<String> {
        let key = random_key()?;
        self.add_login(key.clone());
        Some(key)
    }

    fn add_login(&self, key: String) {
        let now = Instant::now();
        let mut logins = super::lock(&self.logins);
        logins.retain(|_, until| *until > now);
        logins.insert(key, now + LOGIN_TTL);
    }

    /// Takes (and deletes) every login key [`ask_login`] left for this process in
    /// `state_dir`: the state dir is the user's alone (0700), so whoever could write there
    /// could read the config's secrets anyway.
    pub(super) fn take_requests(&self, state_dir: &Path) {
        for path in requests(state_dir) {
            let key = std::fs::read_to_string(&path).unwrap_or_default();
            let _ = std::fs::remove_file(&path);
            let key = key.trim();
            if key.len() == 32 && key.bytes().all(|b| b.is_ascii_hexdigit()) {
                self.add_login(key.to_string());
                tracing::info!("a dashboard login link was handed out (openpact ui)");
            }
        }
    }

    /// Spends login key `key`: a new session's (cookie key, CSRF token) if it was valid.
    fn log_in(&self, key: &str) -> Option<(String, String)> {
        let now = Instant::now();
        let valid = {
            let mut logins = super::lock(&self.logins);
            let found = find(&logins, key).map(|(k, until)| (k.clone(), *until));
            found.and_then(|(k, until)| logins.remove(&k).filter(|_| until > now))
        };
        valid?;
        let (cookie, csrf) = (random_key()?, random_key()?);
        let mut sessions = super::lock(&self.sessions);
        sessions.retain(|_, s| s.until > now);
        if sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.until)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                sessions.remove(&k);
            }
        }
        sessions.insert(
            cookie.clone(),
            Session {
                csrf: csrf.clone(),
                until: now + SESSION_TTL,
            },
        );
        Some((cookie, csrf))
    }

    /// The CSRF token of the live session whose key `cookie` is.
    fn session(&self, cookie: &str) -> Option<String> {
        let sessions = super::lock(&self.sessions);
        find(&sessions, cookie)
            .filter(|(_, s)| s.until > Instant::now())
            .map(|(_, s)| s.csrf.clone())
    }

    fn log_out(&self, cookie: &str) {
        let mut sessions = super::lock(&self.sessions);
        let key = find(&sessions, cookie).map(|(k, _)| k.clone());
        if let Some(k) = key {
            sessions.remove(&k);
        }
    }
}

/// The login requests [`ask_login`] left for this process in `state_dir`.
fn requests(state_dir: &Path) -> Vec<PathBuf> {
    let prefix = format!("{REQUEST_PREFIX}{}-", std::process::id());
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Whether `openpact ui` asked this process for a login: a hub without a dashboard starts
/// one only then (any program of this user may send the signal).
pub fn login_requested(state_dir: &Path) -> bool {
    !requests(state_dir).is_empty()
}

/// Asks the hub `hub_pid` (its state dir `state_dir`) for a dashboard login: leaves a fresh
/// key where only this user can read it and signals the hub, which takes the file away once
/// the key works. Returns the key and the file (gone: the hub took it).
pub fn ask_login(state_dir: &Path, hub_pid: u32) -> std::io::Result<(String, PathBuf)> {
    let no_random = || std::io::Error::other("no random source for a login key");
    let key = random_key().ok_or_else(no_random)?;
    let nonce = random_key().ok_or_else(no_random)?;
    let path = state_dir.join(format!("{REQUEST_PREFIX}{hub_pid}-{nonce}"));
    crate::state::write_volatile(&path, key.as_bytes())?;
    if let Err(e) = crate::platform::send(hub_pid, crate::platform::HubSignal::UiLogin) {
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    Ok((key, path))
}

/// Who a request is, once admitted.
#[derive(Clone)]
enum Caller {
    /// A browser session: its cookie key and CSRF token.
    Session { cookie: String, csrf: String },
    /// A script with the bearer token (no cookie, so no CSRF to fear).
    Bearer,
}

/// `router` with the `/ui` routes added, and every request to a `/ui` path guarded by
/// [`gate`] — a method a route does not take and a path under `/ui` that is not one included,
/// so that nothing is told to a caller the dashboard does not know.
pub(super) fn with_routes(
    router: axum::Router<Arc<Face>>,
    face: &Arc<Face>,
) -> axum::Router<Arc<Face>> {
    router
        .merge(routes())
        .layer(axum::middleware::from_fn_with_state(face.clone(), gate))
}

fn routes() -> axum::Router<Arc<Face>> {
    axum::Router::new()
        .route("/ui", get(page))
        .route("/ui/", get(page))
        .route("/ui/app.js", get(script))
        .route("/ui/style.css", get(style))
        .route("/ui/login", get(login))
        .route("/ui/logout", post(logout))
        .route("/ui/api/servers", get(servers))
        .route("/ui/api/tools", get(tools))
        .route("/ui/api/events", get(events))
        .route("/ui/api/prompts", get(prompts))
        .route("/ui/api/prompts/{id}", post(answer))
}

fn is_dashboard(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/")
}

fn refused(status: StatusCode, why: &str) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        format!("{why}\n"),
    )
        .into_response()
}

fn cookie_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_string())
}

/// Host, Origin, then who: a session cookie or the bearer token (the login link needs
/// neither), and for actions the session's CSRF token. Adds the security headers to every
/// answer, refusals included.
async fn gate(State(face): State<Arc<Face>>, mut req: Request, next: Next) -> Response {
    if !is_dashboard(req.uri().path()) {
        return next.run(req).await;
    }
    let mut resp = match admit(&face, &mut req) {
        Ok(()) => next.run(req).await,
        Err((status, why)) => {
            tracing::debug!(%status, path = req.uri().path(), "dashboard request refused: {why}");
            refused(status, &why)
        }
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

fn admit(face: &Face, req: &mut Request) -> Result<(), (StatusCode, String)> {
    let headers = req.headers();
    face.guard.check_host(headers)?;
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !face.guard.same_origin(origin, host) {
            return Err((
                StatusCode::FORBIDDEN,
                format!("Origin {origin:?} is not this dashboard's"),
            ));
        }
    }
    if req.uri().path() == "/ui/login" {
        return Ok(());
    }
    let caller = if face.guard.bearer_matches(headers) {
        Caller::Bearer
    } else {
        let session = cookie_of(headers)
            .and_then(|cookie| face.ui.session(&cookie).map(|csrf| (cookie, csrf)));
        let Some((cookie, csrf)) = session else {
            return Err((
                StatusCode::UNAUTHORIZED,
                "not logged in: run `openpact ui` for a login link (each works once), or \
                 send Authorization: Bearer <openpact.http.token>"
                    .to_string(),
            ));
        };
        Caller::Session { cookie, csrf }
    };
    let action = req.method() != Method::GET && req.method() != Method::HEAD;
    if let (true, Caller::Session { csrf, .. }) = (action, &caller) {
        let given = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !bool::from(given.as_bytes().ct_eq(csrf.as_bytes())) {
            return Err((
                StatusCode::FORBIDDEN,
                format!("this action needs the page's CSRF token in {CSRF_HEADER}"),
            ));
        }
    }
    req.extensions_mut().insert(caller);
    Ok(())
}

fn with_type(content_type: &'static str, body: String) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

/// The page, with the session's CSRF token in a meta tag for the script's actions.
async fn page(req: Request) -> Response {
    let csrf = match req.extensions().get::<Caller>() {
        Some(Caller::Session { csrf, .. }) => csrf.clone(),
        _ => String::new(),
    };
    with_type("text/html; charset=utf-8", PAGE.replace("{{csrf}}", &csrf))
}

async fn script() -> Response {
    with_type("text/javascript; charset=utf-8", SCRIPT.to_string())
}

async fn style() -> Response {
    with_type("text/css; charset=utf-8", STYLE.to_string())
}

/// The value of `name` in the request's query, form-decoded (`+` is a space).
fn query_param(req: &Request, name: &str) -> Option<String> {
    query_value(req.uri().query()?, name)
}

fn query_value(query: &str, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// `/ui/login?key=…`: spends the key, sets the session cookie and goes to the page.
async fn login(State(face): State<Arc<Face>>, req: Request) -> Response {
    let key = query_param(&req, "key").unwrap_or_default();
    let Some((cookie, _)) = face.ui.log_in(&key) else {
        return refused(
            StatusCode::FORBIDDEN,
            "this login link is not valid: each works once and for ten minutes; run \
             `openpact ui` for a new one",
        );
    };
    let set = format!("{COOKIE}={cookie}; HttpOnly; SameSite=Strict; Path=/ui");
    let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&set) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// Ends the browser's session (an action: CSRF-checked by [`gate`]).
async fn logout(State(face): State<Arc<Face>>, req: Request) -> Response {
    if let Some(Caller::Session { cookie, .. }) = req.extensions().get::<Caller>() {
        face.ui.log_out(cookie);
    }
    let mut resp = StatusCode::NO_CONTENT.into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("openpact_ui=; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=0"),
    );
    resp
}

fn json_body(face: &Face, body: &serde_json::Value) -> Response {
    // Redacted as `/health` is: a server's stderr may echo a secret.
    super::json(
        StatusCode::OK,
        face.hub.policy().redact(&body.to_string()).into_owned(),
    )
}

/// Every server as `openpact servers --json` shows it, with its sandbox also in the words
/// `openpact servers` uses (`sandboxLines`), and the last reload.
async fn servers(State(face): State<Arc<Face>>) -> Response {
    let servers: Vec<serde_json::Value> = face
        .hub
        .status()
        .into_iter()
        .filter_map(|s| serde_json::to_value(s).ok())
        .map(|mut s| {
            if let Some(sandbox) = s.get("sandbox").filter(|v| !v.is_null()) {
                s["sandboxLines"] = serde_json::json!(crate::sandbox::describe(sandbox));
            }
            s
        })
        .collect();
    let mut body = serde_json::json!({ "servers": servers });
    if let Some(reload) = face.hub.last_reload() {
        body["reload"] = serde_json::to_value(reload).unwrap_or_default();
    }
    json_body(&face, &body)
}

/// The catalogue's best matches for `q`, ranked as `search_tools` ranks them.
async fn tools(State(face): State<Arc<Face>>, req: Request) -> Response {
    let query = query_param(&req, "q").unwrap_or_default();
    let found = if query.trim().is_empty() {
        Vec::new()
    } else {
        crate::hub::views::search_catalog(&face.hub, query.trim(), 20).await
    };
    json_body(
        &face,
        &serde_json::json!({ "query": query, "tools": found }),
    )
}

/// What the page shows of a call: no arguments (the log may keep them; the page need not).
fn call_of(r: &Record) -> serde_json::Value {
    let time = match r.at {
        Some(at) => crate::time::rfc3339(at),
        None => r.time.clone(),
    };
    serde_json::json!({
        "time": time,
        "client": &*r.client,
        "method": r.method,
        "target": &*r.target,
        "decision": r.decision,
        "source": r.source,
        "cache": r.cache,
        "durationMs": r.duration_ms,
        "outcome": r.outcome,
        "error": r.error,
    })
}

/// The questions waiting on the dashboard, redacted once more (a server's description is
/// shown as it gave it).
fn waiting(face: &Face) -> String {
    let policy = face.hub.policy();
    let list = serde_json::to_string(&policy.desk.list()).unwrap_or_else(|_| "[]".into());
    policy.redact(&list).into_owned()
}

/// The permission questions waiting for an answer here, oldest first.
async fn prompts(State(face): State<Arc<Face>>) -> Response {
    super::json(
        StatusCode::OK,
        format!("{{\"prompts\":{}}}", waiting(&face)),
    )
}

/// Answers a waiting question: `{"decision": "always" | "once" | "deny" | "never"}`
/// (`never`: deny and remember, as "Remember this denial?" on the terminal) — an action,
/// CSRF-checked by [`gate`].
async fn answer(
    State(face): State<Arc<Face>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let decision = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("decision")?.as_str().map(str::to_string));
    let answer = match decision.as_deref() {
        Some("always") => Answer::Always,
        Some("once") => Answer::Once,
        Some("deny") => Answer::Deny { remember: false },
        Some("never") => Answer::Deny { remember: true },
        _ => {
            return refused(
                StatusCode::BAD_REQUEST,
                "send {\"decision\": \"always\" | \"once\" | \"deny\" | \"never\"}",
            );
        }
    };
    match face.hub.policy().desk.answer(&id, answer) {
        Ok(()) => {
            tracing::info!(
                decision = decision.as_deref(),
                "a permission question was answered on the dashboard"
            );
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => refused(StatusCode::NOT_FOUND, &e.to_string()),
    }
}

/// What an events stream follows: calls as they are filed, and changes of the questions
/// waiting; while it is open, questions wait for this page (see [`Desk::watch`]).
struct Feed {
    calls: tokio::sync::broadcast::Receiver<Record>,
    questions: tokio::sync::watch::Receiver<u64>,
    face: Arc<Face>,
    _watching: Watching,
}

/// SSE: each call as its audit record is filed (`call`), and the questions waiting here
/// whenever they change, starting with those waiting now (`prompts`).
async fn events(State(face): State<Arc<Face>>) -> Response {
    let policy = face.hub.policy();
    let mut questions = policy.desk.changes();
    questions.mark_changed();
    let feed = Feed {
        calls: policy.watch_audit(),
        questions,
        _watching: policy.desk.watch(),
        face: face.clone(),
    };
    let stream = futures_util::stream::unfold(feed, |mut f| async move {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            let event = tokio::select! {
                call = f.calls.recv() => match call {
                    Ok(r) => Event::default().event("call").data(call_of(&r).to_string()),
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return None,
                },
                changed = f.questions.changed() => match changed {
                    Ok(()) => Event::default().event("prompts").data(waiting(&f.face)),
                    Err(_) => return None,
                },
            };
            return Some((Ok::<_, Infallible>(event), f));
        }
    });
    super::sse(
        Sse::new(stream)
            .keep_alive(KeepAlive::default())
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_keys_work_once() {
        let ui = Ui::default();
        let key = ui.mint_login().unwrap();
        let (cookie, csrf) = ui.log_in(&key).unwrap();
        assert!(ui.log_in(&key).is_none(), "a second use");
        assert!(ui.log_in("").is_none());
        assert_eq!(ui.session(&cookie), Some(csrf));
        assert_ne!(cookie, key, "the cookie is not the login key");
        ui.log_out(&cookie);
        assert_eq!(ui.session(&cookie), None);
    }

    #[test]
    fn form_decoding() {
        let q = |query: &str| query_value(query, "q").unwrap();
        assert_eq!(q("q=read+a%20file%2F"), "read a file/");
        assert_eq!(q("q=100%"), "100%");
        assert_eq!(q("q=%zz"), "%zz");
        assert_eq!(query_value("key=ab&q=x", "key").as_deref(), Some("ab"));
        assert_eq!(query_value("key=ab", "q"), None);
    }
}
