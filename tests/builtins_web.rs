//! The network built-ins end to end through `openpact serve`: `web_fetch` against a loopback
//! page (allowed only with `allowPrivate`), and the GitHub and chat tools against loopback
//! stand-ins for their APIs, with base URLs from the config and tokens from the hub's
//! environment. The stand-ins check what the real APIs expect: method, path, query, headers
//! and JSON body.

use crate::support::{
    Scratch, Stand, fixture, is_error, json_reply, ready_polling, reply, serve_with, text,
};
use serde_json::{Value, json};

const PAGE: &str = "<!doctype html><html><head><title>Loopback &amp; Co</title>\
    <style>p{color:red}</style><script>var leak = 1;</script></head>\
    <body><h1>Hello</h1><p>Fish &amp; chips &euro;5</p></body></html>";

fn page_server() -> Stand {
    Stand::start(|rq| match rq.url.as_str() {
        "/page" => reply(200, "text/html; charset=utf-8", PAGE),
        _ => reply(404, "text/plain", "no"),
    })
}

#[tokio::test]
async fn web_fetch_reads_a_loopback_page_when_private_addresses_are_allowed() {
    let site = page_server();
    let s = Scratch::new();
    let cfg = s.config(&json!({
        "mcpServers": {"fx": fixture(&[])},
        "openpact": {"builtins": {"web": {"allowPrivate": true}}}
    }));
    let mut hub = serve_with(&cfg, &[], &[]).await;
    let c = &mut hub.client;
    let tools = ready_polling(c, &["fx:echo", "web_fetch"]).await;
    let t = tools.iter().find(|t| t["name"] == "web_fetch").unwrap();
    assert_eq!(t["inputSchema"]["required"], json!(["url"]));
    assert_eq!(t["annotations"]["readOnlyHint"], true);

    let url = format!("{}/page", site.base);
    let r = c.call("web_fetch", json!({"url": url})).await;
    assert!(!is_error(&r), "{r}");
    let body = text(&r);
    assert!(body.contains("Hello"), "{body}");
    assert!(body.contains("Fish & chips €5"), "{body}");
    assert!(!body.contains("leak") && !body.contains("color"), "{body}");
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["title"], "Loopback & Co");
    assert_eq!(sc["status"], 200);
    assert_eq!(sc["final_url"], url);
    assert_eq!(sc["truncated"], false);

    let r = c
        .call("web_fetch", json!({"url": format!("{}/nope", site.base)}))
        .await;
    assert!(is_error(&r), "{r}");
    assert_eq!(text(&r), "HTTP 404: Not Found");

    let r = c
        .call(
            "web_fetch",
            json!({"url": format!("{}/page", site.base), "max_length": 3}),
        )
        .await;
    assert!(
        text(&r).contains("[Content truncated: 3 of"),
        "{}",
        text(&r)
    );

    let r = c
        .call("web_fetch", json!({"url": "file:///etc/passwd"}))
        .await;
    assert!(is_error(&r));
    assert_eq!(text(&r), "URL must start with http:// or https://");

    let seen = site.seen();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0].method, "GET");
    assert_eq!(
        seen[0].header("user-agent"),
        Some("OpenPact/0.1 (+https://github.com/open-pact/openpact)")
    );
}

#[tokio::test]
async fn web_fetch_refuses_loopback_by_default() {
    let site = page_server();
    let s = Scratch::new();
    let cfg = s.config(&json!({
        "mcpServers": {"fx": fixture(&[])},
        "openpact": {"builtins": {"web": {"enabled": true}}}
    }));
    let mut hub = serve_with(&cfg, &[], &[]).await;
    let c = &mut hub.client;
    ready_polling(c, &["web_fetch"]).await;
    for url in [
        format!("{}/page", site.base),
        format!("http://localhost:{}/page", site.port),
        "http://169.254.169.254/latest/meta-data/".to_string(),
    ] {
        let r = c.call("web_fetch", json!({"url": url})).await;
        assert!(is_error(&r), "{url}: {r}");
        let t = text(&r);
        assert!(
            t.contains("refusing to fetch private address")
                && t.contains("openpact.builtins.web.allowPrivate"),
            "{url}: {t}"
        );
    }
    assert!(site.seen().is_empty(), "nothing may reach the page");
}

#[tokio::test]
async fn github_tools_talk_to_the_configured_api() {
    const TOKEN: &str = "t0k3n-abcdef";
    let api = Stand::start(|rq| {
        match (rq.method.as_str(), rq.url.split('?').next().unwrap_or("")) {
            ("GET", "/repos/octo/hello%20world/issues") => json_reply(
                200,
                json!([
                    {"number": 3, "title": "Crash", "html_url": "https://gh.example/octo/hw/issues/3",
                     "state": "open", "created_at": "2025-01-02T03:04:05Z", "labels": [{"name": "bug"}]},
                    {"number": 2, "title": "A pull request", "html_url": "https://gh.example/octo/hw/pull/2",
                     "state": "open", "created_at": "2025-01-01T00:00:00Z", "labels": [],
                     "pull_request": {"url": "x"}}
                ]),
            ),
            ("POST", "/repos/octo/hello%20world/issues") => {
                let title = rq.json()["title"].clone();
                json_reply(
                    201,
                    json!({"number": 4, "title": title, "html_url": "https://gh.example/octo/hw/issues/4",
                           "state": "open", "created_at": "2025-01-03T00:00:00Z", "labels": []}),
                )
            }
            _ => json_reply(404, json!({"message": "Not Found"})),
        }
    });
    let s = Scratch::new();
    let cfg = s.config(&json!({
        "mcpServers": {"fx": fixture(&[])},
        "openpact": {"builtins": {"github": {"tokenEnv": "GITHUB_TOKEN", "baseUrl": api.base}}}
    }));

    // Without the token variable the tools are simply absent.
    let mut hub = serve_with(&cfg, &[], &[("GITHUB_TOKEN", "")]).await;
    let names: Vec<String> = ready_polling(&mut hub.client, &["fx:echo"])
        .await
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("github_")), "{names:?}");
    drop(hub);

    let mut hub = serve_with(&cfg, &[], &[("GITHUB_TOKEN", TOKEN)]).await;
    let c = &mut hub.client;
    ready_polling(c, &["github_list_issues", "github_create_issue"]).await;
    let r = c
        .call(
            "github_list_issues",
            json!({"owner": "octo", "repo": "hello world", "state": "all", "limit": 5}),
        )
        .await;
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        text(&r),
        "Issues in octo/hello world (all):\n\n#3: Crash [bug]\n    URL: https://gh.example/octo/hw/issues/3\n    Created: 2025-01-02\n"
    );
    assert_eq!(r["result"]["structuredContent"]["issues"][0]["number"], 3);

    let r = c
        .call(
            "github_create_issue",
            json!({"owner": "octo", "repo": "hello world", "title": "New one", "body": "Details", "labels": ["bug"]}),
        )
        .await;
    assert!(!is_error(&r), "{r}");
    assert_eq!(
        text(&r),
        "Created issue #4: New one\nURL: https://gh.example/octo/hw/issues/4"
    );

    let r = c
        .call(
            "github_list_issues",
            json!({"owner": "octo", "repo": "gone"}),
        )
        .await;
    assert!(is_error(&r));
    assert_eq!(
        text(&r),
        "failed to list issues: GitHub API error: 404 - Not Found"
    );

    let seen = api.seen();
    assert_eq!(
        seen[0].url,
        "/repos/octo/hello%20world/issues?state=all&per_page=5"
    );
    assert_eq!(seen[1].method, "POST");
    assert_eq!(
        seen[1].json(),
        json!({"title": "New one", "body": "Details", "labels": ["bug"]})
    );
    assert_eq!(seen[1].header("content-type"), Some("application/json"));
    assert_eq!(
        seen[2].url,
        "/repos/octo/gone/issues?state=open&per_page=30"
    );
    for rq in &seen {
        assert_eq!(
            rq.header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert_eq!(rq.header("accept"), Some("application/vnd.github+json"));
        assert_eq!(rq.header("x-github-api-version"), Some("2022-11-28"));
        assert!(rq.header("user-agent").is_some_and(|u| !u.is_empty()));
    }
    hub.close().await;
    assert!(!hub.stderr().contains(TOKEN), "the token was logged");
}

#[tokio::test]
async fn chat_send_reaches_each_provider() {
    let api = Stand::start(|rq| {
        let b = rq.json();
        match rq.url.as_str() {
            "/discord/users/@me/channels" => json_reply(200, json!({"id": "9001"})),
            "/discord/channels/9001/messages" | "/discord/channels/42/messages" => {
                json_reply(200, json!({"id": "1"}))
            }
            "/telegram/bot77:tg-token/sendMessage" => {
                json_reply(200, json!({"ok": true, "result": {}}))
            }
            "/slack/chat.postMessage" if b["channel"] == "C0FFEE" => {
                json_reply(200, json!({"ok": true}))
            }
            "/slack/chat.postMessage" => {
                json_reply(200, json!({"ok": false, "error": "channel_not_found"}))
            }
            "/hook" => reply(200, "text/plain", "ok"),
            _ => reply(404, "text/plain", "not found"),
        }
    });
    let s = Scratch::new();
    let cfg = s.config(&json!({
        "mcpServers": {"fx": fixture(&[])},
        "openpact": {"builtins": {"chat": {
            "discord": {"baseUrl": format!("{}/discord", api.base)},
            "telegram": {"tokenEnv": "TG_TOKEN", "baseUrl": format!("{}/telegram", api.base)},
            "slack": {"baseUrl": format!("{}/slack", api.base)},
            "webhook": {"url": format!("{}/hook", api.base)}
        }}}
    }));
    let env = [
        ("DISCORD_TOKEN", "dc-token"),
        ("TG_TOKEN", "77:tg-token"),
        ("SLACK_BOT_TOKEN", "xoxb-token"),
    ];
    let mut hub = serve_with(&cfg, &[], &env).await;
    let c = &mut hub.client;
    let tools = ready_polling(c, &["chat_send"]).await;
    let t = tools.iter().find(|t| t["name"] == "chat_send").unwrap();
    assert_eq!(
        t["inputSchema"]["properties"]["provider"]["enum"],
        json!(["discord", "telegram", "slack", "webhook"])
    );

    for (provider, target) in [
        ("discord", "user:1234"),
        ("discord", "channel:42"),
        ("telegram", "-1001"),
        ("slack", "channel:C0FFEE"),
        ("webhook", "ops"),
    ] {
        let r = c
            .call(
                "chat_send",
                json!({"provider": provider, "target": target, "message": "hello"}),
            )
            .await;
        assert!(!is_error(&r), "{provider}: {r}");
        assert_eq!(text(&r), format!("Message sent via {provider} to {target}"));
    }
    let r = c
        .call(
            "chat_send",
            json!({"provider": "slack", "target": "CNOPE", "message": "x"}),
        )
        .await;
    assert!(is_error(&r));
    assert_eq!(
        text(&r),
        "failed to send message: Slack API error: channel_not_found"
    );
    let r = c
        .call(
            "chat_send",
            json!({"provider": "telegram", "target": "user:alice", "message": "x"}),
        )
        .await;
    assert_eq!(text(&r), "failed to send message: invalid Telegram chat ID");

    let seen = api.seen();
    let summary: Vec<(String, String, Option<String>, Value)> = seen
        .iter()
        .map(|r| {
            (
                r.method.clone(),
                r.url.clone(),
                r.header("authorization").map(str::to_string),
                r.json(),
            )
        })
        .collect();
    let bot = Some("Bot dc-token".to_string());
    let bearer = Some("Bearer xoxb-token".to_string());
    let post = |u: &str| ("POST".to_string(), u.to_string());
    let want = vec![
        (
            post("/discord/users/@me/channels"),
            bot.clone(),
            json!({"recipient_id": "1234"}),
        ),
        (
            post("/discord/channels/9001/messages"),
            bot.clone(),
            json!({"content": "hello"}),
        ),
        (
            post("/discord/channels/42/messages"),
            bot.clone(),
            json!({"content": "hello"}),
        ),
        (
            post("/telegram/bot77:tg-token/sendMessage"),
            None,
            json!({"chat_id": -1001, "text": "hello"}),
        ),
        (
            post("/slack/chat.postMessage"),
            bearer.clone(),
            json!({"channel": "C0FFEE", "text": "hello"}),
        ),
        (
            post("/hook"),
            None,
            json!({"text": "hello", "target": "ops"}),
        ),
        (
            post("/slack/chat.postMessage"),
            bearer,
            json!({"channel": "CNOPE", "text": "x"}),
        ),
    ];
    let want: Vec<(String, String, Option<String>, Value)> = want
        .into_iter()
        .map(|((m, u), a, b)| (m, u, a, b))
        .collect();
    assert_eq!(summary, want);
    for rq in &seen {
        assert!(
            rq.header("content-type")
                .is_some_and(|c| c.starts_with("application/json")),
            "{rq:?}"
        );
    }
    hub.close().await;
    let log = hub.stderr();
    for secret in ["dc-token", "tg-token", "xoxb-token"] {
        assert!(!log.contains(secret), "{secret} was logged");
    }
}
