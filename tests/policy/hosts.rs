//! Hosts beyond a sandboxed server's allow list: the hostile fixture fetches through its
//! egress proxy from a loopback stand-in the list does not name, and the hub asks the client
//! (once, always — remembered across a restart and revocable — deny, no answer), or refuses
//! at once with the command that allows the host when nobody can be asked; either way a
//! refused host makes the call an error that says so, even when the server calls it success.

use super::{
    accept, answer, call_unasked, decisions, eliciting_hub, hub_with, openpact_on, prompt,
    serve_command, started,
};
use crate::support::{Scratch, Stand, WAIT, is_error, reply, send_call, state_dir, text};
use serde_json::{Value, json};
use std::path::Path;

/// The hostile fixture as `fx`, sandboxed, its network allowed to a host the tests never use.
fn confined_fx() -> Value {
    let mut fx = crate::support::fixture(&["--hostile"]);
    fx["sandbox"] = json!({"network": {"allow": ["api.example.com"]}});
    json!({ "fx": fx })
}

/// Permissions out of the way (tools allowed); host questions time out after 2 s.
fn settings() -> Value {
    json!({"permissions": {"default": "allow", "promptTimeout": "2s"}})
}

fn stand() -> Stand {
    Stand::start(|_| reply(200, "text/plain", "hello from the stand-in"))
}

fn fetch(stand: &Stand) -> Value {
    json!({"url": format!("{}/", stand.base)})
}

/// The server `fx` as the running hub's status file shows it (`servers --json`), once it
/// has `member` (the file is rewritten soon after a change, not at once).
async fn fx_status(config: &Path, member: &str) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let v = openpact_on(config, &["servers", "--json"]).await.json();
        let fx = v[0]["servers"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == "fx"))
            .cloned()
            .unwrap_or_else(|| panic!("no fx in {v}"));
        if fx.get(member).is_some() || std::time::Instant::now() > deadline {
            return fx;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_outside_the_list_is_asked_for_once_always_and_deny() {
    let sc = Scratch::new();
    let stand = stand();
    let host = format!("127.0.0.1:{}", stand.port);
    let key = format!("fx/net/{host}");
    let (mut hub, config) = eliciting_hub(&sc, confined_fx(), settings()).await;
    let state = state_dir(&config);
    let c = &mut hub.client;

    // once: this call works, and the question says who wants what.
    let id = send_call(c, "fx:try_fetch", fetch(&stand)).await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!(
            "server fx wants {host}: allow once / always / deny"
        )),
        "{msg}"
    );
    answer(c, &req, accept("once")).await;
    let r = c.response(&id).await;
    assert!(
        !is_error(&r) && text(&r).starts_with("ok: HTTP/1.1 200"),
        "{r}"
    );
    assert!(decisions(&state).get(&key).is_none(), "once is not kept");

    // Asked again; two calls at once raise one question, and "once" covers both.
    let a = send_call(c, "fx:try_fetch", fetch(&stand)).await;
    let b = send_call(c, "fx:try_fetch", fetch(&stand)).await;
    let req = prompt(c).await;
    answer(c, &req, accept("once")).await;
    for id in [a, b] {
        let r = c.response(&id).await;
        assert!(text(&r).starts_with("ok: "), "{r}");
    }
    assert!(
        !c.inbox.iter().any(|m| m["method"] == "elicitation/create"),
        "asked twice: {:?}",
        c.inbox
    );

    // always: kept for the server, shown, and not asked again.
    let id = send_call(c, "fx:try_fetch", fetch(&stand)).await;
    let req = prompt(c).await;
    answer(c, &req, accept("always")).await;
    assert!(text(&c.response(&id).await).starts_with("ok: "));
    assert_eq!(decisions(&state)[&key]["decision"], "allow");
    let r = call_unasked(c, "fx:try_fetch", fetch(&stand)).await;
    assert!(text(&r).starts_with("ok: "), "{r}");
    let shown = fx_status(&config, "askedHosts").await;
    assert_eq!(shown["askedHosts"][0]["host"], host.as_str(), "{shown}");
    assert_eq!(
        shown["askedHosts"][0]["forget"],
        format!("openpact permissions forget {key}"),
        "{shown}"
    );

    let listed = openpact_on(&config, &["permissions", "list"]).await;
    assert!(
        listed
            .stdout
            .lines()
            .any(|l| l.starts_with(&key) && l.contains("allow")),
        "{listed}"
    );

    // Remembered across a restart of the hub.
    drop(hub);
    let mut hub = started(&config, &[], json!({"elicitation": {}}), "hosts-again").await;
    let c = &mut hub.client;
    let r = call_unasked(c, "fx:try_fetch", fetch(&stand)).await;
    assert!(text(&r).starts_with("ok: "), "{r}");

    // Revoked by the command shown: asked again, and a denial fails the call with the
    // proxy's reason and the command that allows the host.
    let ran = openpact_on(&config, &["permissions", "forget", &key]).await;
    assert_eq!(ran.code, Some(0), "{ran}");
    let id = send_call(c, "fx:try_fetch", fetch(&stand)).await;
    let req = prompt(c).await;
    answer(c, &req, accept("deny")).await;
    let r = c.response(&id).await;
    assert!(is_error(&r), "{r}");
    let t = text(&r);
    assert!(
        t.contains(&format!("may not reach {host}: denied at the prompt"))
            && t.contains(&format!("`{} fx net {host}`", allow(&config))),
        "{t}"
    );

    // No answer in time: refused, and the call says why.
    let id = send_call(c, "fx:try_fetch", fetch(&stand)).await;
    prompt(c).await;
    let r = tokio::time::timeout(WAIT, c.response(&id)).await.unwrap();
    assert!(is_error(&r), "{r}");
    assert!(text(&r).contains("had no answer within 2s"), "{r}");
    assert!(decisions(&state).get(&key).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_way_to_ask_a_host_is_refused_at_once_and_the_call_fails() {
    let sc = Scratch::new();
    let stand = stand();
    let host = format!("127.0.0.1:{}", stand.port);
    let (mut hub, config) = hub_with(&sc, confined_fx(), settings()).await;
    let fix = format!("{} fx net {host}", allow(&config));
    // Plain HTTP and a CONNECT tunnel: the fixture answers both as a normal result.
    for url in [format!("{}/", stand.base), format!("https://{host}/")] {
        let t0 = std::time::Instant::now();
        let r = hub.client.call("fx:try_fetch", json!({"url": url})).await;
        assert!(t0.elapsed() < std::time::Duration::from_secs(2), "held");
        assert!(is_error(&r), "{url}: {r}");
        let t = text(&r);
        assert!(
            t.contains(&format!("server \"fx\" may not reach {host}"))
                && t.contains("there is no way to ask")
                && t.contains(&format!("`{fix}`")),
            "{t}"
        );
        // What the server said is still there, after the hub's words.
        let theirs = r["result"]["content"][1]["text"].as_str().unwrap_or("");
        assert!(theirs.starts_with("failed: HTTP/1.1 403"), "{r}");
    }
    assert!(stand.seen().is_empty(), "the stand-in was reached");
    let shown = fx_status(&config, "refusals").await;
    let refusal = &shown["refusals"][0];
    assert_eq!(refusal["kind"], "net", "{shown}");
    assert_eq!(refusal["what"], host.as_str(), "{shown}");
    assert_eq!(refusal["fix"], fix.as_str(), "{shown}");
    let human = openpact_on(&config, &["servers"]).await;
    assert!(
        human.stdout.contains(&format!("refused: net {host} at "))
            && human.stdout.contains(&format!("allow it: `{fix}`")),
        "{human}"
    );
    // A call that reaches no refused host is left as the server answered it.
    let r = hub.client.call("fx:echo", json!({"message": "hi"})).await;
    assert!(!is_error(&r) && text(&r) == "hi", "{r}");
}

/// `/health` shows a server's refusals and the hosts answered about for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_shows_refused_and_remembered_hosts() {
    let sc = Scratch::new();
    let stand = stand();
    let host = format!("127.0.0.1:{}", stand.port);
    let config = sc.servers(confined_fx(), Some(settings()));
    let state = state_dir(&config);
    std::fs::create_dir_all(&state).unwrap();
    let kept = json!({"version": 1, "decisions": {"fx/net/example.org:8443": {
        "decision": "allow", "definition": "host", "at": "2026-01-01T00:00:00Z"}}});
    std::fs::write(state.join("permissions.json"), kept.to_string()).unwrap();
    let mut cmd = serve_command(&config, &[]);
    cmd.args(["--http", "127.0.0.1:0"]);
    let mut hub = crate::support::Hub::spawn(cmd);
    let base = crate::http_face::http_base(&mut hub).await;
    let r = hub.client.call("fx:try_fetch", fetch(&stand)).await;
    assert!(is_error(&r), "{r}");
    let health = crate::http_face::health(&base).await;
    let fx = &health["servers"][0];
    assert_eq!(fx["refusals"][0]["what"], host.as_str(), "{health}");
    assert_eq!(
        fx["refusals"][0]["fix"],
        format!("{} fx net {host}", allow(&config)),
        "{health}"
    );
    assert_eq!(fx["askedHosts"][0]["host"], "example.org:8443", "{health}");
    assert_eq!(fx["askedHosts"][0]["decision"], "allow", "{health}");
}

/// The Notion MCP server (pinned in `fixtures/peers`) pointed at a loopback stand-in of the
/// Notion API through its `BASE_URL`, under the default profile: refused with the command
/// that allows the host when nobody can be asked; allowed by a config change the running hub
/// reloads (same client, no restart); asked for through an elicitation client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notion_server_is_asked_for_its_api_and_works_once_allowed() {
    let Some(peers) = crate::support::Peers::get() else {
        return;
    };
    let dir = peers.vars["OPENPACT_PEERS_DIR"]
        .as_str()
        .unwrap()
        .to_string();
    let cli = Path::new(&dir).join("node_modules/@notionhq/notion-mcp-server/bin/cli.mjs");
    if !cli.exists() {
        assert_ne!(
            std::env::var("OPENPACT_REQUIRE_PEERS").as_deref(),
            Ok("1"),
            "{} is missing: run `bash .ci/peers.sh`",
            cli.display()
        );
        eprintln!(
            "skipped: {} is missing (run `bash .ci/peers.sh`)",
            cli.display()
        );
        return;
    }
    let api = Stand::start(|seen| match seen.url.as_str() {
        "/v1/users/me" => crate::support::json_reply(
            200,
            json!({"object": "user", "id": "u-1", "type": "bot", "name": "Stand-in bot"}),
        ),
        _ => reply(
            404,
            "application/json",
            r#"{"object":"error","status":404}"#,
        ),
    });
    let host = format!("127.0.0.1:{}", api.port);
    let notion = |allow: &[&str]| {
        let mut entry = peers.entry("PEER_NODE", &[crate::support::s(&cli)]);
        entry["env"] = json!({"NOTION_TOKEN": "ntn_stand_in", "BASE_URL": api.base});
        if !allow.is_empty() {
            entry["sandbox"] = json!({"network": {"allow": allow}});
        }
        let mut servers = confined_fx();
        servers["notion"] = entry;
        servers
    };
    // Nobody to ask: refused at once, and the call says what allows it.
    let sc = Scratch::new();
    let (mut hub, config) = hub_with(&sc, notion(&[]), settings()).await;
    let c = &mut hub.client;
    crate::support::wait_for_tool(c, "notion:API-get-self", WAIT).await;
    let r = c.call("notion:API-get-self", json!({})).await;
    assert!(is_error(&r), "{r}");
    let fix = format!("{} notion net {host}", allow(&config));
    assert!(text(&r).contains(&format!("`{fix}`")), "{r}");
    assert!(api.seen().is_empty());

    // That command, run as the user would: it puts the host in the server's allow list and
    // the running hub reloads; the next call of the same client works.
    let home = std::path::PathBuf::from(std::env::var("HOME").unwrap());
    let (code, out) = crate::sandbox_allow::run_in_shell(&fix, &config, &home);
    assert_eq!(code, 0, "{fix}: {out}");
    let c = &mut hub.client;
    let deadline = std::time::Instant::now() + WAIT;
    let r = loop {
        let r = c.call("notion:API-get-self", json!({})).await;
        let answered = r["result"].is_object() && !is_error(&r);
        if answered || std::time::Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert!(!is_error(&r) && text(&r).contains("Stand-in bot"), "{r}");
    let seen = api.seen();
    assert_eq!(seen[0].header("authorization"), Some("Bearer ntn_stand_in"));
    drop(hub);

    // An elicitation client is asked, and "once" lets the call through.
    let sc = Scratch::new();
    let (mut hub, _) = eliciting_hub(&sc, notion(&[]), settings()).await;
    let c = &mut hub.client;
    crate::support::wait_for_tool(c, "notion:API-get-self", WAIT).await;
    let id = send_call(c, "notion:API-get-self", json!({})).await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(
        msg.contains(&format!("server notion wants {host}")),
        "{msg}"
    );
    answer(c, &req, accept("once")).await;
    let r = c.response(&id).await;
    assert!(!is_error(&r) && text(&r).contains("Stand-in bot"), "{r}");
}

/// The start of the command a refusal names: a hub serving a config other than the user's own
/// names its file.
fn allow(config: &std::path::Path) -> String {
    format!("openpact --config {} sandbox allow", config.display())
}
