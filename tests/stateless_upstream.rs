//! 2026-07-28 servers upstream, behind a handshake client: mcp-server-time pinned and probed
//! (`auto`), `auto` falling back to `initialize` on the project's handshake fixture, and a
//! Python SDK 2.3 server of ours (`fixtures/stateless/stateless_server.py`, stdio and Streamable
//! HTTP) whose elicitation and sampling come back as `input_required` results, which the hub
//! turns into real requests to the client and retries with the answers.

use crate::remote::{answered_call, client_caps, error_text, hub_with, sampled, start};
use crate::support::{
    Client, FIXTURE, Listening, Peers, Ran, Scratch, WAIT, everything_listening, fixture,
    free_port, openpact_for, ready_polling, serve, text, wait_for_tool,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn stateless_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/stateless/stateless_server.py")
}

/// Our stateless fixture as a stdio server entry.
pub(crate) fn stateless_stdio(peers: &Peers, protocol: &str) -> Value {
    let mut entry = peers.entry(
        "PEER_PYTHON",
        &[stateless_script().to_str().unwrap(), "stdio"],
    );
    entry["protocol"] = json!(protocol);
    entry
}

/// Our stateless fixture over Streamable HTTP on `port`.
async fn stateless_http(peers: &Peers, port: u16) -> Listening {
    let cmd = vec![
        peers.command("PEER_PYTHON")[0].clone(),
        stateless_script().display().to_string(),
        "http".into(),
        port.to_string(),
    ];
    Listening::start("modern python server", &cmd, &[], port).await
}

/// Waits until `openpact servers --json` (the running hub of `cfg`, through its status
/// file, which trails the hub a little) shows a ready server on protocol `version`.
async fn shows_version(cfg: &Path, version: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut cmd = openpact_for(cfg, None);
        cmd.args(["servers", "--json"]);
        let ran = Ran::of(cmd, "openpact servers --json", WAIT).await;
        ran.expect_code(0);
        let hubs: Value = serde_json::from_str(&ran.stdout).unwrap();
        let server = &hubs[0]["servers"][0];
        if server["state"] == "ready" {
            assert_eq!(server["protocolVersion"], version, "{server}");
            return;
        }
        assert!(Instant::now() < deadline, "never ready: {hubs}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_server_time_pinned_and_probed() {
    let Some(peers) = Peers::get() else { return };
    for protocol in ["2026-07-28", "auto"] {
        let s = Scratch::new();
        let mut time = peers.entry("PEER_TIME", &[]);
        time["protocol"] = json!(protocol);
        let cfg = s.servers(json!({ "time": time }), None);
        let mut hub = serve(&cfg).await;
        let tools = ready_polling(&mut hub.client, &["time:get_current_time"]).await;
        assert!(
            tools.iter().any(|t| t["name"] == "time:convert_time"),
            "{protocol}: {tools:?}"
        );
        let r = hub
            .client
            .call("time:get_current_time", json!({"timezone": "UTC"}))
            .await;
        assert!(text(&r).contains("UTC"), "{protocol}: {r}");
        shows_version(&cfg, "2026-07-28").await;
        // Found stateless at once, or (on a loaded machine, past the probe's wait) late.
        let log = hub.stderr();
        assert!(
            !log.contains("using initialize") || log.contains("answered server/discover late"),
            "{protocol}: {log}"
        );
    }
}

/// `auto` and a stateless server slow to start (a first `uvx` run): it misses the probe's
/// short wait and refuses the `initialize` that follows, and is then asked again, so it is
/// found stateless rather than failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_server_slow_to_start_is_found_by_auto() {
    let Some(peers) = Peers::get() else { return };
    let s = Scratch::new();
    let time = peers.entry("PEER_TIME", &[]);
    let mut words = vec![
        json!("-c"),
        json!("sleep 3; exec \"$0\" \"$@\""),
        time["command"].clone(),
    ];
    words.extend(time["args"].as_array().unwrap().iter().cloned());
    let cfg = s.servers(
        json!({"time": {"command": "sh", "args": words, "protocol": "auto"}}),
        None,
    );
    let mut hub = serve(&cfg).await;
    ready_polling(&mut hub.client, &["time:get_current_time"]).await;
    shows_version(&cfg, "2026-07-28").await;
    hub.wait_log("answered server/discover late", WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_shows_each_servers_era() {
    let s = Scratch::new();
    let mut probed = fixture(&[]);
    probed["protocol"] = json!("auto");
    let cfg = s.servers(
        json!({"plain": fixture(&[]), "probed": probed,
               "web": {"url": "http://127.0.0.1:9/mcp", "protocol": "2026-07-28"}}),
        None,
    );
    let mut cmd = openpact_for(&cfg, None);
    cmd.args(["config", "check"]);
    let ran = Ran::of(cmd, "openpact config check", WAIT).await;
    ran.expect_code(0);
    for line in [
        "protocol: legacy (initialize)",
        "protocol: auto (server/discover, falling back to initialize)",
        "protocol: 2026-07-28 (stateless, no initialize)",
    ] {
        assert!(ran.stdout.contains(line), "{line}: {}", ran.stdout);
    }
    let mut cmd = openpact_for(&cfg, None);
    cmd.args(["config", "check", "--json"]);
    let ran = Ran::of(cmd, "openpact config check --json", WAIT).await;
    let eras: Vec<Value> = ran.json()["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["protocol"].clone())
        .collect();
    assert_eq!(eras, [json!("legacy"), json!("auto"), json!("2026-07-28")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_falls_back_to_initialize_on_a_handshake_server_quickly() {
    let s = Scratch::new();
    let mut entry = fixture(&[]);
    entry["protocol"] = json!("auto");
    let cfg = s.servers(json!({ "fx": entry }), None);
    let t0 = Instant::now();
    let mut hub = serve(&cfg).await;
    ready_polling(&mut hub.client, &["fx:echo"]).await;
    // The fixture answers the probe with -32601 at once: no probe timeout is spent.
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(2), "ready after {took:?}");
    let r = hub
        .client
        .call("fx:echo", json!({"message": "legacy"}))
        .await;
    assert_eq!(text(&r), "legacy", "{r}");
    // The log line and the answer travel on different pipes: wait for the log.
    hub.wait_log("not a 2026-07-28 server", WAIT).await;
    shows_version(&cfg, "2025-11-25").await;
}

/// A handshake server that ignores everything before `initialize` (the probe included): the
/// fixture behind a shell loop that drops what comes first.
fn silent_until_initialize() -> Value {
    let script = r#"while read -r line; do case "$line" in *'"initialize"'*) break;; esac; done
{ printf '%s\n' "$line"; cat; } | exec "$0""#;
    json!({"command": "/bin/sh", "args": ["-c", script, FIXTURE], "protocol": "auto"})
}

/// A handshake server that exits on any first message but `initialize`, the first time it runs
/// (a marker file remembers); then it is the plain fixture.
/// A folder for servers' marker files, granted to them in their sandbox: not the scratch dir
/// itself, which holds the hub's state dir (never a server's to touch), so a grant of it
/// would cover only the files there now, not new ones.
fn marker_dir(s: &Scratch) -> std::path::PathBuf {
    let dir = s.path().join("markers");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn dies_on_the_probe(marker: &Path) -> Value {
    let script = r#"if [ -e "$1" ]; then exec "$0"; fi
: > "$1"; read -r line; case "$line" in *'"initialize"'*) ;; *) exit 3;; esac
{ printf '%s\n' "$line"; cat; } | exec "$0""#;
    // The marker's folder is in the test's scratch dir, which the sandbox keeps private.
    let folder = marker.parent().unwrap().to_str().unwrap();
    json!({"command": "/bin/sh", "args": ["-c", script, FIXTURE, marker.to_str().unwrap()],
           "protocol": "auto", "sandbox": {"filesystem": {"write": [folder]}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_never_hangs_on_a_silent_or_dying_handshake_server() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"quiet": silent_until_initialize(),
               "fragile": dies_on_the_probe(&marker_dir(&s).join("started"))}),
        None,
    );
    let t0 = Instant::now();
    let mut hub = serve(&cfg).await;
    ready_polling(&mut hub.client, &["quiet:echo", "fragile:echo"]).await;
    let took = t0.elapsed();
    // The probe waits 2 s for the silent one; both run in parallel.
    assert!(took < Duration::from_secs(6), "ready after {took:?}");
    for server in ["quiet", "fragile"] {
        let r = hub
            .client
            .call(&format!("{server}:echo"), json!({"message": server}))
            .await;
        assert_eq!(text(&r), server, "{r}");
    }
    let log = hub.stderr();
    assert!(
        log.contains("did not answer server/discover within 2s"),
        "{log}"
    );
    assert!(log.contains("ended on the server/discover probe"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_over_http_finds_handshake_streamable_http_and_sse_servers() {
    let Some(peers) = Peers::get() else { return };
    let web = everything_listening(&peers, "streamableHttp", free_port()).await;
    let old = everything_listening(&peers, "sse", free_port()).await;
    let s = Scratch::new();
    let mut hub = hub_with(
        &s,
        json!({
            "web": {"url": format!("http://127.0.0.1:{}/mcp", web.port), "protocol": "auto"},
            "old": {"url": format!("http://127.0.0.1:{}/sse", old.port), "protocol": "auto"},
        }),
        &["web:get-sum", "old:get-sum"],
    )
    .await;
    for server in ["web", "old"] {
        let r = hub
            .client
            .call(&format!("{server}:get-sum"), json!({"a": 2, "b": 3}))
            .await;
        assert_eq!(text(&r), "The sum of 2 and 3 is 5.", "{server}: {r}");
    }
    let log = hub.stderr();
    assert!(log.contains("using the legacy HTTP+SSE transport"), "{log}");
    assert_eq!(log.matches("not a 2026-07-28 server").count(), 2, "{log}");
}

/// Calls `both` (a name by elicitation and a model answer by sampling in one round): two
/// real requests reach the client, and the call completes with both answers.
async fn both_answered(c: &mut Client, tool: &str) {
    let id = start(
        c,
        "tools/call",
        json!({"name": tool, "arguments": {"prompt": "Say hi"}}),
    )
    .await;
    let mut asked = Vec::new();
    for _ in 0..2 {
        let m = loop {
            let m = c.recv(WAIT).await.expect("a request from the hub");
            if m.get("method").is_some() && m.get("id").is_some() {
                break m;
            }
            c.inbox.push_back(m);
        };
        let answer = match m["method"].as_str() {
            Some("elicitation/create") => json!({"action": "accept", "content": {"name": "Ada"}}),
            Some("sampling/createMessage") => sampled("hi there"),
            other => panic!("unexpected request {other:?}: {m}"),
        };
        c.send(&json!({"jsonrpc": "2.0", "id": m["id"], "result": answer}))
            .await;
        asked.push(m["method"].as_str().unwrap().to_string());
    }
    asked.sort();
    assert_eq!(asked, ["elicitation/create", "sampling/createMessage"]);
    let r = c.response(&id).await;
    assert_eq!(text(&r), "Ada: hi there", "{r}");
}

/// What a handshake client sees of the stateless fixture named `server` behind the hub.
async fn bridged_surface(c: &mut Client, server: &str) {
    let r = c
        .call(&format!("{server}:add"), json!({"a": 20, "b": 22}))
        .await;
    assert_eq!(text(&r), "42", "{r}");

    let (asked, r) = answered_call(
        c,
        &format!("{server}:greet"),
        json!({}),
        "elicitation/create",
        json!({"action": "accept", "content": {"name": "Ada"}}),
    )
    .await;
    assert_eq!(asked["params"]["message"], "What is your name?", "{asked}");
    assert_eq!(text(&r), "hello Ada", "{r}");

    let (asked, r) = answered_call(
        c,
        &format!("{server}:sample"),
        json!({"prompt": "Say hello"}),
        "sampling/createMessage",
        sampled("hello from the client"),
    )
    .await;
    assert_eq!(
        asked["params"]["messages"][0]["content"]["text"],
        "Say hello"
    );
    assert_eq!(text(&r), "hello from the client", "{r}");

    both_answered(c, &format!("{server}:both")).await;

    let r = c
        .request("resources/read", json!({"uri": "fixture://greeting"}))
        .await;
    assert_eq!(
        r["result"]["contents"][0]["text"], "hello from the modern fixture",
        "{r}"
    );
    let r = c
        .request(
            "prompts/get",
            json!({"name": format!("{server}:hello"), "arguments": {"name": "Bo"}}),
        )
        .await;
    assert!(r["result"].to_string().contains("Please greet Bo"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_python_server_over_stdio_bridged_to_a_handshake_client() {
    let Some(peers) = Peers::get() else { return };
    let s = Scratch::new();
    let mut hub = hub_with(
        &s,
        json!({ "py": stateless_stdio(&peers, "2026-07-28") }),
        &["py:add", "py:greet", "py:both"],
    )
    .await;
    bridged_surface(&mut hub.client, "py").await;
    assert_eq!(client_caps(), json!({"sampling": {}, "elicitation": {}}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_python_server_over_http_bridged_to_a_handshake_client() {
    let Some(peers) = Peers::get() else { return };
    let py = stateless_http(&peers, free_port()).await;
    let s = Scratch::new();
    let url = format!("http://127.0.0.1:{}/mcp", py.port);
    let mut hub = hub_with(
        &s,
        json!({ "web": {"url": url, "protocol": "auto"} }),
        &["web:add", "web:greet"],
    )
    .await;
    bridged_surface(&mut hub.client, "web").await;
    shows_version(&s.path().join("mcp.json"), "2026-07-28").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_the_capability_gets_a_plain_error() {
    let Some(peers) = Peers::get() else { return };
    let s = Scratch::new();
    let cfg = s.servers(json!({ "py": stateless_stdio(&peers, "auto") }), None);
    let mut hub = serve(&cfg).await;
    ready_polling(&mut hub.client, &["py:greet", "py:sample"]).await;
    let r = hub.client.call("py:greet", json!({})).await;
    let message = error_text(&r);
    assert!(
        message.contains("elicitation/create") && message.contains("did not declare"),
        "{r}"
    );
    let r = hub.client.call("py:sample", json!({"prompt": "x"})).await;
    assert!(error_text(&r).contains("sampling"), "{r}");
    // Nothing was asked of the client.
    assert!(
        !hub.client
            .inbox
            .iter()
            .any(|m| m.get("id").is_some() && m.get("method").is_some()),
        "{:?}",
        hub.client.inbox
    );
    let r = hub.client.call("py:add", json!({"a": 1, "b": 2})).await;
    assert_eq!(text(&r), "3", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changes_and_resource_updates_arrive_through_listen() {
    let Some(peers) = Peers::get() else { return };
    let s = Scratch::new();
    let mut hub = hub_with(
        &s,
        json!({ "py": stateless_stdio(&peers, "2026-07-28") }),
        &["py:grow", "py:touch"],
    )
    .await;
    let c = &mut hub.client;
    let r = c
        .request("resources/subscribe", json!({"uri": "fixture://greeting"}))
        .await;
    assert!(r.get("result").is_some(), "{r}");
    c.inbox.clear();

    let r = c.call("py:grow", json!({})).await;
    assert_eq!(text(&r), "grown", "{r}");
    let changed = c.wait_for("notifications/tools/list_changed", WAIT).await;
    assert!(changed.is_some(), "no list_changed: {:?}", c.inbox);
    wait_for_tool(c, "py:extra", WAIT).await;

    // The subscription re-opened the listen stream with the URI; give it a moment to be
    // acknowledged before the update is sent.
    let deadline = Instant::now() + WAIT;
    let updated = loop {
        let r = c.call("py:touch", json!({})).await;
        assert_eq!(text(&r), "touched", "{r}");
        if let Some(m) = c
            .wait_for(
                "notifications/resources/updated",
                Duration::from_millis(500),
            )
            .await
        {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "no resources/updated: {:?}",
            c.inbox
        );
    };
    assert_eq!(updated["params"]["uri"], "fixture://greeting", "{updated}");
}

/// Cancels a slow call through the hub: the server sees the cancellation (stdio: a
/// `notifications/cancelled`; HTTP: the POST aborted), no answer comes, and the server
/// keeps serving.
async fn cancel_reaches(c: &mut Client, server: &str, marker: &Path) {
    let id = start(
        c,
        "tools/call",
        json!({"name": format!("{server}:sleep"),
               "arguments": {"seconds": 20, "marker": marker.to_str().unwrap()}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "the test cancels"}}),
    )
    .await;
    let deadline = Instant::now() + WAIT;
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "{server}: the server never saw the cancel"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = c
        .call(&format!("{server}:add"), json!({"a": 1, "b": 1}))
        .await;
    assert_eq!(text(&r), "2", "{r}");
    assert!(
        !c.inbox.iter().any(|m| m["id"] == id),
        "{server}: the cancelled call was answered: {:?}",
        c.inbox
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_reaches_stateless_servers_over_stdio_and_http() {
    let Some(peers) = Peers::get() else { return };
    let py = stateless_http(&peers, free_port()).await;
    let s = Scratch::new();
    let url = format!("http://127.0.0.1:{}/mcp", py.port);
    // The server leaves its marker in the scratch dir, which the sandbox keeps private.
    let mut pipe = stateless_stdio(&peers, "2026-07-28");
    pipe["sandbox"] = json!({"filesystem": {"write": [marker_dir(&s).to_str().unwrap()]}});
    let mut hub = hub_with(
        &s,
        json!({
            "pipe": pipe,
            "web": {"url": url, "protocol": "2026-07-28"},
        }),
        &["pipe:sleep", "web:sleep"],
    )
    .await;
    for server in ["pipe", "web"] {
        let marker = marker_dir(&s).join(format!("{server}-cancelled"));
        cancel_reaches(&mut hub.client, server, &marker).await;
    }
}
