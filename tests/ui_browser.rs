//! The dashboard in a real browser: headless Chromium (Debian's `chromium`), driven over the
//! DevTools protocol by `fixtures/ui/drive.mjs`, against `openpact serve --http` with three
//! fixture servers. It opens the login link and sees the servers ready with their sandbox
//! state; finds a tool by search; sees a call made over `/mcp` by another client within a
//! second of its answer; answers a pending permission prompt of a client that cannot ask
//! (no elicitation, no terminal) with "once", after which the waiting call completes; and,
//! without the cookie or from another origin, is refused every page and action.
//!
//! With `OPENPACT_UI_SCREENSHOTS=DIR` the driver also saves the screenshots of the main views
//! into DIR (those under docs/ were taken so).

use crate::apps::chromium;
use crate::http_face::{client, http_hub};
use crate::support::{Peers, Ran, fixture, s};
use crate::ui::login_link;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const TOKEN: &str = "t0ken-for-the-browser-test";

/// The fixture serving the catalogue `name` (its tools and canned answers).
fn catalogue(name: &str) -> Value {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/catalogues");
    let tools = dir.join(format!("{name}.json"));
    let data = dir.join(format!("{name}.data.json"));
    fixture(&["--tools-file", s(&tools), "--data", s(&data)])
}

/// Whether the servers table's sandbox cell tells the server's sandbox as the hub reports
/// it: its mode, and the known-servers profile it runs under when one applies.
fn tells_sandbox(cell: &Value, server: &Value) -> bool {
    let cell = cell.as_str().unwrap_or_default();
    let sandbox = &server["sandbox"];
    let mode = sandbox["mode"].as_str().unwrap_or("?");
    let profile = match sandbox["known"]["name"].as_str() {
        Some(name) => format!("known ({name})"),
        None => "default".to_string(),
    };
    cell.starts_with(mode) && cell.contains(&profile)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_headless_chromium_shows_servers_search_calls_and_answers_a_prompt() {
    let Some(peers) = Peers::get() else { return };
    let Some(chromium) = chromium() else {
        eprintln!("SKIPPED: no chromium on PATH (Debian: apt-get install chromium)");
        return;
    };
    let servers = json!({
        "fx": fixture(&[]),
        "github": catalogue("github"),
        "slack": catalogue("slack"),
    });
    let settings = json!({
        "toolSearch": {"mode": "off"},
        "http": {"token": "${UI_TOKEN}"},
        // fx:add is asked (by the default: an `ask` rule would not offer "always").
        "permissions": {"default": "ask", "allow": ["github:*", "slack:*", "fx:echo", "fx:fail"]},
    });
    let h = http_hub(servers, Some(settings), &[("UI_TOKEN", TOKEN)]).await;
    let screenshots = std::env::var_os("OPENPACT_UI_SCREENSHOTS").map(|dir| {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::canonicalize(dir).unwrap()
    });
    let plan = json!({
        "base": h.base,
        "login": login_link(&h),
        "token": TOKEN,
        "screenshots": screenshots,
        "servers": ["fx", "github", "slack"],
        "search": {"query": "open an issue", "expect": "github:create_issue"},
        "before": [
            {"tool": "github:get_me", "arguments": {}},
            {"tool": "slack:slack_list_channels", "arguments": {}},
            {"tool": "fx:fail", "arguments": {}},
        ],
        "call": {"tool": "fx:echo", "arguments": {"message": "from another client"}},
        "ask": {"tool": "fx:add", "arguments": {"a": 2, "b": 3}},
    });
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/ui/drive.mjs");
    let mut cmd = tokio::process::Command::new(&peers.command("PEER_NODE")[0]);
    cmd.arg(&driver).arg(&chromium).arg(plan.to_string());
    let ran = Ran::of(cmd, "drive.mjs", Duration::from_secs(120)).await;
    let v = ran.json();

    // (a) The login link lands on the page, which lists every server ready, with the
    // sandbox state the hub reports.
    assert_eq!(v["path"], "/ui", "{v}");
    let reported: Value = client()
        .get(format!("{}/ui/api/servers", h.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = v["servers"].as_array().unwrap();
    for server in reported["servers"].as_array().unwrap() {
        let name = &server["name"];
        let row = rows.iter().find(|r| r["name"] == *name);
        let row = row.unwrap_or_else(|| panic!("{name} not on the page: {v}"));
        assert_eq!(row["state"], "ready", "{row}");
        assert!(tells_sandbox(&row["sandbox"], server), "{row} / {server}");
        assert_eq!(row["tools"], server["tools"].to_string(), "{row}");
        assert_eq!(row["restarts"], "0", "{row}");
    }
    assert_eq!(rows.len(), 3, "{v}");
    assert_eq!(v["detail"], "fx", "the picked server's detail: {v}");

    // (b) The search finds the tool.
    assert_eq!(v["search"][0], "github:create_issue", "{v}");

    // (c) Another client's call is on the page within a second of its answer.
    let call = &v["call"];
    assert_eq!(call["result"], "from another client", "{call}");
    assert_eq!(call["row"][1], "browser-test-client", "{call}");
    assert_eq!(call["row"][2], "fx:echo", "{call}");
    assert_eq!(call["row"][3], "allow", "{call}");
    let delay = call["delayMs"].as_i64().unwrap();
    assert!(
        delay < 1000,
        "the call was on the page {delay} ms after its answer"
    );
    eprintln!("the call was on the page {delay} ms after its answer");
    // The newest first, each of this client's calls.
    assert_eq!(
        v["calls"],
        json!([
            "fx:echo",
            "fx:fail",
            "slack:slack_list_channels",
            "github:get_me"
        ]),
        "{v}"
    );

    // (d) The permission prompt waits for the page; "once" lets the waiting call complete.
    let prompt = &v["prompt"];
    assert!(
        prompt["text"].as_str().unwrap().contains("fx:add"),
        "{prompt}"
    );
    assert_eq!(
        prompt["answers"],
        json!(["always", "once", "deny", "never"]),
        "{prompt}"
    );
    assert_eq!(prompt["answeredBeforeClick"], false, "{prompt}");
    assert_eq!(prompt["result"], "5", "{prompt}");
    assert_ne!(prompt["isError"], true, "{prompt}");
    assert_eq!(prompt["error"], Value::Null, "{prompt}");
    assert_eq!(prompt["goneFromPage"], true, "{prompt}");

    // (e) Without the cookie the page and its API are refused, and its script never runs.
    let refused = &v["noCookie"];
    assert_eq!(refused["page"], 401, "{refused}");
    assert_eq!(refused["api"], 401, "{refused}");
    assert_eq!(refused["scriptRan"], false, "{refused}");
    assert!(
        refused["body"].as_str().unwrap().contains("openpact ui"),
        "says how to log in: {refused}"
    );
    // A page of another origin on the same machine (the browser sends the cookie along) is
    // refused the API and the action, and the session lives on.
    let other = &v["otherOrigin"];
    assert_eq!(other["api"], 403, "{other}");
    assert_eq!(other["logout"], 403, "{other}");
    assert_eq!(other["stillLoggedIn"], true, "{other}");
}
