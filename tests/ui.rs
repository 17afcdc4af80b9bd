//! The dashboard on `/ui` of `openpact serve --http`, over real sockets with reqwest: every
//! page, endpoint and action refused without the session cookie or with a foreign `Origin`;
//! the login link working once; the security headers; the servers and tools endpoints; a
//! call made by another client arriving on the SSE stream; `openpact ui` getting a login link
//! from the running hub.

use crate::http_face::{Events, Http, HttpHub, fx, http_base, http_hub};
use crate::support::{Ran, Scratch, WAIT, openpact_for, serve_with};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Every GET the dashboard answers, and its one action.
const PAGES: [&str; 6] = [
    "/ui",
    "/ui/app.js",
    "/ui/style.css",
    "/ui/api/servers",
    "/ui/api/tools?q=echo",
    "/ui/api/events",
];
const ACTION: &str = "/ui/logout";

/// A client that does not follow redirects (the login's answer is one) and keeps no cookies.
fn browser() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The login link the hub logged.
pub(crate) fn login_link(h: &HttpHub) -> String {
    let log = h.hub.stderr();
    let start = log.find("dashboard: http://").unwrap() + "dashboard: ".len();
    let end = start + log[start..].find(' ').unwrap();
    log[start..end].to_string()
}

/// Opens the login link the hub logged: the `name=value` of the session cookie it sets.
async fn log_in(h: &HttpHub) -> String {
    spend(&login_link(h)).await
}

/// Opens login link `link`: the `name=value` of the session cookie it sets.
async fn spend(link: &str) -> String {
    let resp = browser().get(link).send().await.unwrap();
    assert_eq!(resp.status(), 303);
    assert_eq!(resp.headers()["location"], "/ui");
    let set = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(set.contains(attribute), "{set}");
    }
    set.split(';').next().unwrap().to_string()
}

async fn get(h: &HttpHub, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    at(&h.base, path, headers).await
}

/// GET `path` of the dashboard at `base`.
async fn at(base: &str, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = browser().get(format!("{base}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

async fn act(h: &HttpHub, headers: &[(&str, &str)]) -> reqwest::StatusCode {
    let mut req = browser().post(format!("{}{ACTION}", h.base));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap().status()
}

/// What the page reads from endpoint `path` (`/ui/api/…`) with session `cookie`.
async fn api(h: &HttpHub, cookie: &str, path: &str) -> Value {
    let resp = get(h, path, &[("cookie", cookie)]).await;
    resp.json().await.unwrap()
}

/// The page's live stream from the dashboard at `base`, once it said that nothing waits.
async fn watch(base: &str, cookie: &str) -> Events {
    let resp = at(base, "/ui/api/events", &[("cookie", cookie)]).await;
    let mut events = Events::of(resp).await;
    assert_eq!(
        next_prompts(&mut events).await,
        Vec::<Value>::new(),
        "nothing waits yet"
    );
    events
}

/// The page's CSRF token (its meta tag).
fn csrf_of(page: &str) -> String {
    let marker = "name=\"openpact-csrf\" content=\"";
    let start = page.find(marker).unwrap() + marker.len();
    page[start..start + page[start..].find('"').unwrap()].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_refuses_without_the_cookie_or_from_another_origin_and_logs_in_once() {
    let h = http_hub(fx(), None, &[]).await;
    for path in PAGES {
        let resp = get(&h, path, &[]).await;
        assert_eq!(resp.status(), 401, "{path} without the cookie");
        assert!(
            resp.headers().contains_key("content-security-policy"),
            "{path}"
        );
    }
    assert_eq!(act(&h, &[]).await, 401, "the action without the cookie");
    // The dashboard's guard is its routes' alone: elsewhere, what is not there is 404.
    assert_eq!(get(&h, "/favicon.ico", &[]).await.status(), 404);
    let wrong = get(&h, "/ui", &[("cookie", "openpact_ui=00112233")]).await;
    assert_eq!(wrong.status(), 401, "a made-up session");

    let link = login_link(&h);
    let cookie = log_in(&h).await;
    assert!(!cookie.contains(&link[link.find("key=").unwrap() + 4..]));
    let again = browser().get(&link).send().await.unwrap();
    assert_eq!(again.status(), 403, "the link works once");
    assert!(!again.headers().contains_key("set-cookie"));

    let page = get(&h, "/ui", &[("cookie", &cookie)]).await;
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    let page = page.text().await.unwrap();
    assert!(page.contains("<script src=\"/ui/app.js\""), "{page}");
    assert!(!page.contains("<script>"), "no inline script");
    let csrf = csrf_of(&page);
    assert_eq!(csrf.len(), 32, "{page}");

    // The page's own origin is fine; another site, or another local port, is not.
    let own = h.base.clone();
    for path in PAGES.into_iter().filter(|p| *p != "/ui/api/events") {
        let ok = get(&h, path, &[("cookie", &cookie), ("origin", &own)]).await;
        assert_eq!(ok.status(), 200, "{path} from its own origin");
        for origin in ["http://evil.example", "http://localhost:1", "null"] {
            let resp = get(&h, path, &[("cookie", &cookie), ("origin", origin)]).await;
            assert_eq!(resp.status(), 403, "{path} from {origin}");
        }
    }
    let foreign = [
        ("cookie", cookie.as_str()),
        ("origin", "http://evil.example"),
        ("x-openpact-csrf", csrf.as_str()),
    ];
    assert_eq!(act(&h, &foreign).await, 403, "the action from elsewhere");
    // A method no route takes, or a path under /ui that is none of them, tells nothing more
    // to a caller the dashboard does not know.
    let put = browser()
        .put(format!("{}/ui", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 401, "PUT /ui without the cookie");
    let put = browser()
        .put(format!("{}/ui", h.base))
        .header("cookie", &cookie)
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 403, "PUT /ui from elsewhere");
    assert_eq!(get(&h, "/ui/nothing", &[]).await.status(), 401);
    assert_eq!(
        get(&h, "/ui/nothing", &[("cookie", &cookie)])
            .await
            .status(),
        404
    );

    // What the page reads: the fixture server, with its sandbox; the search.
    let servers = api(&h, &cookie, "/ui/api/servers").await;
    let fx = &servers["servers"][0];
    assert_eq!(fx["name"], "fx", "{servers}");
    assert_eq!(fx["state"], "ready", "{servers}");
    assert!(fx["tools"].as_u64().unwrap() > 0, "{servers}");
    assert!(fx["sandbox"]["mode"].is_string(), "{servers}");
    let tools: Value = get(&h, "/ui/api/tools?q=echo+a+message", &[("cookie", &cookie)])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(tools["query"], "echo a message", "{tools}");
    assert_eq!(tools["tools"][0]["name"], "fx:echo", "{tools}");

    // An action without the CSRF token is refused; with it, it is done (here: logging out,
    // after which the cookie opens nothing).
    assert_eq!(act(&h, &[("cookie", &cookie)]).await, 403, "no CSRF token");
    let forged = [("cookie", cookie.as_str()), ("x-openpact-csrf", "00")];
    assert_eq!(act(&h, &forged).await, 403, "a wrong CSRF token");
    let right = [
        ("cookie", cookie.as_str()),
        ("origin", own.as_str()),
        ("x-openpact-csrf", csrf.as_str()),
    ];
    assert_eq!(act(&h, &right).await, 204);
    let after = get(&h, "/ui/api/servers", &[("cookie", &cookie)]).await;
    assert_eq!(after.status(), 401, "logged out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_takes_the_bearer_token_instead_of_the_cookie() {
    let h = http_hub(
        fx(),
        Some(json!({"http": {"token": "${UI_TOKEN}"}})),
        &[("UI_TOKEN", "t0ken-for-the-ui")],
    )
    .await;
    let with = get(
        &h,
        "/ui/api/servers",
        &[("authorization", "Bearer t0ken-for-the-ui")],
    )
    .await;
    assert_eq!(with.status(), 200);
    let wrong = get(&h, "/ui/api/servers", &[("authorization", "Bearer nope")]).await;
    assert_eq!(wrong.status(), 401);
    // Elsewhere, without the token nothing says what is served; with it, 404.
    assert_eq!(get(&h, "/favicon.ico", &[]).await.status(), 401);
    let with = [("authorization", "Bearer t0ken-for-the-ui")];
    assert_eq!(get(&h, "/favicon.ico", &with).await.status(), 404);
    // The token is never what the cookie holds.
    let cookie = log_in(&h).await;
    assert!(!cookie.contains("t0ken-for-the-ui"), "{cookie}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_streams_a_call_made_by_another_client_within_a_second() {
    let mut h = http_hub(fx(), None, &[]).await;
    let cookie = log_in(&h).await;
    let mut events = get(&h, "/ui/api/events", &[("cookie", &cookie)]).await;
    assert_eq!(events.status(), 200);
    assert!(
        events.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    // The stdio client is another client of the same hub.
    let t0 = Instant::now();
    let r = h
        .hub
        .client
        .call("fx:echo", json!({"message": "seen live"}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    let mut seen = String::new();
    let call = loop {
        let chunk = tokio::time::timeout(Duration::from_secs(1), events.chunk())
            .await
            .expect("the call within a second")
            .unwrap()
            .expect("the stream stays open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
        let data = seen
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|c| c["target"] == "fx:echo");
        if let Some(call) = data {
            break call;
        }
    };
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert!(seen.contains("event: call"), "{seen}");
    assert_eq!(call["decision"], "allow", "{call}");
    assert_eq!(call["outcome"], "ok", "{call}");
    assert!(call["durationMs"].is_number(), "{call}");
    assert!(call["client"].is_string(), "{call}");
    assert!(
        call.get("arguments").is_none(),
        "no arguments on the page: {call}"
    );
}

/// The next list of waiting questions on a dashboard's event stream (calls skipped).
async fn next_prompts(events: &mut Events) -> Vec<Value> {
    loop {
        let (_, v) = events
            .within(Duration::from_secs(10))
            .await
            .expect("the questions waiting");
        if let Value::Array(list) = v {
            return list;
        }
    }
}

/// The page's session: its cookie and CSRF token.
async fn page_session(h: &HttpHub) -> (String, String) {
    let cookie = log_in(h).await;
    let page = get(h, "/ui", &[("cookie", &cookie)])
        .await
        .text()
        .await
        .unwrap();
    (cookie.clone(), csrf_of(&page))
}

/// Answers question `id` on the dashboard at `base` as the page does: the status code.
async fn answer(base: &str, session: &(String, String), id: &str, decision: &str) -> u16 {
    browser()
        .post(format!("{base}/ui/api/prompts/{id}"))
        .header("cookie", &session.0)
        .header("x-openpact-csrf", &session.1)
        .body(json!({"decision": decision}).to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_nobody_else_can_ask_about_waits_for_the_dashboards_answer() {
    let ask =
        json!({"permissions": {"default": "allow", "ask": ["fx:echo"], "dashboardWait": "30s"}});
    let h = http_hub(fx(), Some(ask), &[]).await;
    // No page open: denied at once, naming where it could have been answered.
    let mut agent = Http::new(&h);
    agent.initialize(json!({})).await;
    let t0 = Instant::now();
    let denied = agent.call(1, "fx:echo", json!({"message": "hi"})).await;
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    let text = crate::http_face::text(&denied).to_string();
    assert!(
        text.contains(&format!("open the dashboard at {}/ui", h.base))
            && text.contains("openpact ui"),
        "{denied}"
    );

    let session = page_session(&h).await;
    let mut events = watch(&h.base, &session.0).await;
    for (decision, allowed) in [("once", true), ("deny", false)] {
        let mut agent = Http::new(&h);
        agent.initialize(json!({})).await;
        let call = tokio::spawn(async move {
            agent
                .call(
                    2,
                    "fx:echo",
                    json!({"message": "wait for me", "token": "x"}),
                )
                .await
        });
        let waiting = next_prompts(&mut events).await;
        assert_eq!(waiting.len(), 1, "{waiting:?}");
        let q = &waiting[0];
        assert_eq!(q["name"], "fx:echo", "{q}");
        assert_eq!(q["server"], "fx", "{q}");
        assert_eq!(q["client"], "http-test", "{q}");
        assert_eq!(q["rememberable"], false, "an ask rule: {q}");
        assert!(
            q["arguments"].as_str().unwrap().contains("wait for me"),
            "{q}"
        );
        let listed: Value = api(&h, &session.0, "/ui/api/prompts").await;
        assert_eq!(listed["prompts"][0]["id"], q["id"], "{listed}");
        // An answer is an action: without the CSRF token it is refused.
        let forged = browser()
            .post(format!(
                "{}/ui/api/prompts/{}",
                h.base,
                q["id"].as_str().unwrap()
            ))
            .header("cookie", &session.0)
            .body(r#"{"decision":"once"}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), 403);
        let id = q["id"].as_str().unwrap();
        assert_eq!(answer(&h.base, &session, id, "maybe").await, 400);
        assert_eq!(answer(&h.base, &session, id, decision).await, 204);
        let r = tokio::time::timeout(WAIT, call).await.unwrap().unwrap();
        let text = crate::http_face::text(&r).to_string();
        if allowed {
            assert_eq!(r["result"]["isError"], Value::Null, "{r}");
            assert!(text.contains("wait for me"), "{r}");
        } else {
            assert_eq!(r["result"]["isError"], true, "{r}");
            assert!(text.contains("denied at the prompt"), "{r}");
        }
        assert_eq!(next_prompts(&mut events).await, Vec::<Value>::new());
        assert_eq!(
            answer(&h.base, &session, id, "once").await,
            404,
            "answered twice"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_dashboard_question_denies_naming_the_dashboard() {
    let ask = json!({"permissions": {"default": "ask", "dashboardWait": "1s"}});
    let h = http_hub(fx(), Some(ask), &[]).await;
    let session = page_session(&h).await;
    let mut events = watch(&h.base, &session.0).await;
    let mut agent = Http::new(&h);
    agent.initialize(json!({})).await;
    let r = agent.call(1, "fx:echo", json!({"message": "hi"})).await;
    let text = crate::http_face::text(&r).to_string();
    assert!(
        text.contains(&format!(
            "no answer to the permission prompt on the dashboard at {}/ui",
            h.base
        )) && text.contains("within 1s"),
        "{r}"
    );
    assert_eq!(next_prompts(&mut events).await.len(), 1, "it was shown");
    assert_eq!(
        next_prompts(&mut events).await,
        Vec::<Value>::new(),
        "and taken off"
    );
}

/// `openpact --config CONFIG --state-dir (its state) ui --no-open`, run to its end.
async fn openpact_ui(config: &std::path::Path) -> Ran {
    let mut cmd = openpact_for(config, None);
    cmd.args(["ui", "--no-open"]);
    Ran::of(cmd, &["ui"], WAIT).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openpact_ui_starts_the_dashboard_of_a_hub_without_http() {
    let sc = Scratch::new();
    let config = sc.servers(fx(), None);
    let mut hub = serve_with(&config, &["serve"], &[]).await.owning(sc);
    crate::support::ready(&mut hub.client, &["fx:echo"]).await;
    let ran = openpact_ui(&config).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let link = ran.stdout.trim().to_string();
    assert!(link.starts_with("http://127.0.0.1:"), "{link}");
    let base = link[..link.find("/ui/login").unwrap()].to_string();
    let h = HttpHub { hub, base };
    let cookie = spend(&link).await;
    let servers = api(&h, &cookie, "/ui/api/servers").await;
    assert_eq!(servers["servers"][0]["name"], "fx", "{servers}");
    // The dashboard alone: no new way in to the tools.
    let mcp = browser()
        .post(format!("{}/mcp", h.base))
        .send()
        .await
        .unwrap();
    assert_eq!(mcp.status(), 404);
    // A second `openpact ui` uses the same dashboard.
    let again = openpact_ui(&config).await;
    assert_eq!(again.code, Some(0), "{again:?}");
    assert!(
        again
            .stdout
            .trim()
            .starts_with(&format!("{}/ui/login?key=", h.base)),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openpact_ui_prints_a_login_link_the_running_hub_takes_once() {
    let sc = Scratch::new();
    let config = sc.servers(fx(), None);
    let alone = openpact_ui(&config).await;
    assert_ne!(alone.code, Some(0), "no hub runs: {alone:?}");
    assert!(
        alone
            .stderr
            .contains("no openpact hub of this config is running")
            && alone.stderr.contains("openpact serve --http"),
        "{alone:?}"
    );

    let mut hub = serve_with(&config, &["serve", "--http", "127.0.0.1:0"], &[])
        .await
        .owning(sc);
    let base = http_base(&mut hub).await;
    // The link logged at start is spent first: the one `openpact ui` prints is another.
    let h = HttpHub { hub, base };
    log_in(&h).await;
    let ran = openpact_ui(&config).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let link = ran.stdout.trim();
    assert!(
        link.starts_with(&format!("{}/ui/login?key=", h.base)),
        "{link}"
    );
    let cookie = spend(link).await;
    let page = get(&h, "/ui/api/servers", &[("cookie", &cookie)]).await;
    assert_eq!(page.status(), 200);
    let again = browser().get(link).send().await.unwrap();
    assert_eq!(again.status(), 403, "the link works once");
    // Nothing is left in the state dir.
    let state = crate::support::state_dir(&config);
    let left: Vec<_> = std::fs::read_dir(&state)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ui-login-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reload_is_on_the_dashboard_with_its_problems() {
    let sc = Scratch::new();
    let config = sc.servers(fx(), None);
    let mut hub = serve_with(&config, &["serve", "--http", "127.0.0.1:0"], &[])
        .await
        .owning(sc);
    let base = http_base(&mut hub).await;
    let h = HttpHub { hub, base };
    let cookie = log_in(&h).await;
    std::fs::write(&config, "{\"mcpServers\": {").unwrap();
    let deadline = Instant::now() + WAIT;
    let reload = loop {
        let servers = api(&h, &cookie, "/ui/api/servers").await;
        if servers["reload"]["applied"] == false {
            break servers["reload"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "no failed reload shown: {servers}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let message = reload["message"].as_str().unwrap();
    assert!(
        message.contains("mcp.json") && message.contains("EOF while parsing"),
        "the problem named: {reload}"
    );
    // The hub serves on with its last good config, and the page says so.
    let servers = api(&h, &cookie, "/ui/api/servers").await;
    assert_eq!(servers["servers"][0]["name"], "fx", "{servers}");
    let script = get(&h, "/ui/app.js", &[("cookie", &cookie)])
        .await
        .text()
        .await
        .unwrap();
    assert!(
        script.contains("serves its last good config"),
        "the page shows it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_hubs_window_is_asked_on_the_dashboard_openpact_ui_starts() {
    let sc = Scratch::new();
    // The hub leaves soon after the window: nothing outlives the test.
    let settings = json!({"permissions": {"default": "ask"}, "shared": {"idleExit": "2s"}});
    let config = sc.servers(fx(), Some(settings));
    let runtime = sc.path().join("run");
    let mut w = crate::shared::window(&config, &runtime);
    w.client.initialize_as(json!({}), "background-agent").await;
    crate::support::wait_for_tool(&mut w.client, "fx:echo", WAIT).await;
    // Without the dashboard open the denial says how to be asked: follow it.
    let denied = w.client.call("fx:echo", json!({"message": "first"})).await;
    let advice = crate::support::text(&denied).to_string();
    assert!(
        advice.contains("no dashboard page is open") && advice.contains("`openpact ui`"),
        "{denied}"
    );
    let ran = openpact_ui(&config).await;
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let link = ran.stdout.trim().to_string();
    let base = link[..link.find("/ui/login").unwrap()].to_string();
    let cookie = spend(&link).await;
    let page = at(&base, "/ui", &[("cookie", &cookie)]).await;
    let session = (cookie.clone(), csrf_of(&page.text().await.unwrap()));
    let mut events = watch(&base, &cookie).await;
    let call = tokio::spawn(async move {
        let r = w.client.call("fx:echo", json!({"message": "second"})).await;
        (w, r)
    });
    let waiting = next_prompts(&mut events).await;
    assert_eq!(waiting[0]["client"], "background-agent", "{waiting:?}");
    let id = waiting[0]["id"].as_str().unwrap();
    assert_eq!(answer(&base, &session, id, "always").await, 204);
    let (mut w, r) = tokio::time::timeout(WAIT, call).await.unwrap().unwrap();
    assert_eq!(crate::support::text(&r), "second", "{r}");
    // "always" is remembered: the next call asks nobody.
    let r = w.client.call("fx:echo", json!({"message": "third"})).await;
    assert_eq!(crate::support::text(&r), "third", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_takes_its_question_off_the_dashboard() {
    let ask = json!({"permissions": {"default": "ask"}});
    let mut h = http_hub(fx(), Some(ask), &[]).await;
    let session = page_session(&h).await;
    let mut events = watch(&h.base, &session.0).await;
    // The stdio client (no elicitation, no terminal) asks, then gives up.
    h.hub
        .client
        .send(&json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                      "params": {"name": "fx:echo", "arguments": {"message": "never mind"}}}))
        .await;
    assert_eq!(next_prompts(&mut events).await.len(), 1);
    h.hub
        .client
        .send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 77, "reason": "the user moved on"}}),
        )
        .await;
    assert_eq!(
        next_prompts(&mut events).await,
        Vec::<Value>::new(),
        "the question stays after its call was cancelled"
    );
    let listed: Value = api(&h, &session.0, "/ui/api/prompts").await;
    assert_eq!(listed["prompts"], json!([]), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_deny_on_the_dashboard_is_remembered() {
    let ask = json!({"permissions": {"default": "ask"}});
    let h = http_hub(fx(), Some(ask), &[]).await;
    let session = page_session(&h).await;
    let mut events = watch(&h.base, &session.0).await;
    let mut agent = Http::new(&h);
    agent.initialize(json!({})).await;
    let call = tokio::spawn(async move {
        let r = agent.call(1, "fx:echo", json!({"message": "no"})).await;
        (agent, r)
    });
    let waiting = next_prompts(&mut events).await;
    assert_eq!(waiting[0]["rememberable"], true, "{waiting:?}");
    let id = waiting[0]["id"].as_str().unwrap();
    assert_eq!(answer(&h.base, &session, id, "never").await, 204);
    let (mut agent, r) = tokio::time::timeout(WAIT, call).await.unwrap().unwrap();
    assert_eq!(r["result"]["isError"], true, "{r}");
    // Remembered: the next call is denied at once, saying how to undo it.
    let r = agent.call(2, "fx:echo", json!({"message": "no"})).await;
    let text = crate::http_face::text(&r).to_string();
    assert!(
        text.contains("you chose to deny it")
            && text.contains("openpact permissions forget fx:echo"),
        "{r}"
    );
}
