//! Hot reload of a serving hub, over real pipes and over the HTTP face: a server added
//! appears with `list_changed`, one removed goes, one whose args changed restarts, one whose
//! filter changed keeps its process, a slow call survives a reload, a save by rename is seen,
//! a config with errors is not applied and is reported, a permission rule applies to the
//! next call, and `openpact reload` asks for one by hand. With tool search on, the servers
//! `search_tools` names follow the reloads, and a restart announces no change it did not make.

use crate::http_face::{Http, http_base};
use crate::support::{
    FIXTURE, Hub, Ran, Scratch, WAIT, error_code, names, openpact_for, serve_with, text,
    wait_for_tool,
};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// Writes the config the way editors save: a temp file renamed over it.
fn save(path: &Path, servers: &Value, openpact: &Value) {
    let mut op = openpact.clone();
    op["builtins"] = json!(false);
    if op.get("toolSearch").is_none() {
        op["toolSearch"] = json!({"mode": "off"});
    }
    op["rateLimits"] = json!({"default": "off"});
    if op.get("permissions").is_none() {
        op["permissions"] = json!({"default": "allow"});
    }
    let text = serde_json::to_vec_pretty(&json!({"mcpServers": servers, "openpact": op})).unwrap();
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// `openpact --config CONFIG --state-dir (its state) ARGS`, run to its end.
async fn run(config: &Path, args: &[&str]) -> Ran {
    let mut cmd = openpact_for(config, None);
    cmd.args(args);
    Ran::of(cmd, args, WAIT).await
}

fn fx(name: &str) -> Value {
    json!({"command": FIXTURE, "args": ["--name", name]})
}

/// The fixture's own pid, by its `pids` tool.
async fn pid_of(hub: &mut Hub, server: &str) -> u64 {
    let r = hub.client.call(&format!("{server}:pids"), json!({})).await;
    let v: Value = serde_json::from_str(&text(&r)).unwrap_or_else(|e| panic!("{e}: {r}"));
    v["pid"].as_u64().unwrap()
}

/// Waits for `tools/list_changed`, then for the tool list to satisfy `done`.
async fn tools_become(
    hub: &mut Hub,
    done: impl Fn(&[String]) -> bool,
    limit: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let tools = names(&hub.client.list_tools().await);
        if done(&tools) {
            return tools;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            hub.client
                .wait_for("notifications/tools/list_changed", left)
                .await
                .is_some(),
            "the tools did not change as expected within {limit:?}: {tools:?}\n{}",
            hub.stderr()
        );
    }
}

fn has(tools: &[String], name: &str) -> bool {
    tools.iter().any(|t| t == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_applies_only_the_difference_over_stdio() {
    let sc = Scratch::new();
    let config = sc.path().join("mcp.json");
    let mut servers = json!({"a": fx("a"), "b": fx("b"), "slow": fx("slow")});
    let mut openpact = json!({});
    save(&config, &servers, &openpact);
    let mut hub = serve_with(&config, &[], &[]).await;
    hub.client.initialize().await;
    for t in ["a:pids", "b:pids", "slow:slow"] {
        wait_for_tool(&mut hub.client, t, WAIT).await;
    }
    let (pid_a, pid_b) = (pid_of(&mut hub, "a").await, pid_of(&mut hub, "b").await);
    // A slow call of a server the reloads leave alone: it must complete across them.
    let slow = hub.client.next_id();
    hub.client
        .send(
            &json!({"jsonrpc": "2.0", "id": slow, "method": "tools/call",
                      "params": {"name": "slow:slow", "arguments": {"ms": 2500}}}),
        )
        .await;

    // Added: its tools appear, announced, within 2 s of the write.
    servers["c"] = fx("c");
    let t0 = Instant::now();
    save(&config, &servers, &openpact);
    let tools = tools_become(&mut hub, |t| has(t, "c:echo"), Duration::from_secs(2)).await;
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(has(&tools, "a:echo") && has(&tools, "b:echo"), "{tools:?}");

    // Removed, args changed, filter changed — in one save.
    servers.as_object_mut().unwrap().remove("b");
    servers["a"]["args"] = json!(["--name", "a", "--page-size", "7"]);
    servers["c"]["disabledTools"] = json!(["add"]);
    let pid_c = pid_of(&mut hub, "c").await;
    save(&config, &servers, &openpact);
    let tools = tools_become(
        &mut hub,
        |t| !has(t, "b:echo") && !has(t, "c:add") && has(t, "a:echo"),
        WAIT,
    )
    .await;
    assert!(has(&tools, "c:echo"), "{tools:?}");
    let r = hub.client.call("b:echo", json!({"message": "x"})).await;
    assert_eq!(
        error_code(&r),
        -32602,
        "a removed server's tools are unknown: {r}"
    );
    assert_ne!(
        pid_of(&mut hub, "a").await,
        pid_a,
        "a's args changed: restarted"
    );
    assert_eq!(
        pid_of(&mut hub, "c").await,
        pid_c,
        "only c's filter changed: same process"
    );
    assert!(
        crate::shared::pids_with(&[FIXTURE, "--name b"])
            .iter()
            .all(|p| *p as u64 != pid_b),
        "b's process was stopped"
    );
    let r = hub.client.response(&json!(slow)).await;
    assert_eq!(
        text(&r),
        "slept 2500 ms",
        "the slow call survived the reloads: {r}"
    );

    // Broken JSON: not applied, said in the log and the status.
    std::fs::write(&config, "{\"mcpServers\": {").unwrap();
    hub.wait_log("not applied", WAIT).await;
    // The status file follows within a moment.
    let deadline = Instant::now() + WAIT;
    let status = loop {
        let status = run(&config, &["servers", "--json"]).await.json();
        if status[0]["reload"]["applied"] == false {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the failed reload never showed: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        status[0]["reload"]["message"]
            .as_str()
            .unwrap()
            .contains("mcp.json"),
        "names the file: {status}"
    );
    let r = hub.client.call("c:echo", json!({"message": "still"})).await;
    assert_eq!(text(&r), "still", "the last good config serves on");

    // An unknown command: not applied either, and nothing of it starts.
    let mut bad = servers.clone();
    bad["d"] = json!({"command": "no-such-command-openpact-test"});
    save(&config, &bad, &openpact);
    hub.wait_log("no-such-command-openpact-test", WAIT).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!has(&names(&hub.client.list_tools().await), "d:echo"));

    // A permission rule: the next call obeys it.
    openpact["permissions"] = json!({"default": "allow", "deny": ["c:echo"]});
    save(&config, &servers, &openpact);
    let deadline = Instant::now() + WAIT;
    loop {
        let r = hub.client.call("c:echo", json!({"message": "m"})).await;
        if text(&r).contains("denied") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the deny rule never applied: {r}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        pid_of(&mut hub, "c").await,
        pid_c,
        "a policy change restarts nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_reaches_http_clients_and_openpact_reload_reports_it() {
    let sc = Scratch::new();
    let config = sc.path().join("mcp.json");
    let mut servers = json!({"fx": fx("fx")});
    // Watching off: only `openpact reload` (SIGHUP) reloads.
    let openpact = json!({"reload": false});
    save(&config, &servers, &openpact);
    let mut hub = serve_with(&config, &["serve", "--http", "127.0.0.1:0"], &[]).await;
    let base = http_base(&mut hub).await;
    let mut http = Http::at(format!("{base}/mcp"));
    http.initialize(json!({})).await;

    servers["extra"] = fx("extra");
    save(&config, &servers, &openpact);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let listed = http.rpc(10, "tools/list", json!({})).await;
    assert!(
        !listed.to_string().contains("extra:echo"),
        "reload is off: nothing changes on its own"
    );

    let out = run(&config, &["reload"]).await;
    out.expect_code(0);
    assert!(
        out.stdout.contains("applied") && out.stdout.contains("added: extra"),
        "{out}"
    );

    let deadline = Instant::now() + WAIT;
    loop {
        let listed = http.rpc(11, "tools/list", json!({})).await;
        if listed.to_string().contains("extra:echo") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "extra never listed over HTTP: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let r = http.call(12, "extra:add", json!({"a": 20, "b": 22})).await;
    assert!(r.to_string().contains("42"), "{r}");
    let health: Value = reqwest::get(format!("{base}/health"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["reload"]["applied"], true, "{health}");
    assert!(health["servers"].as_array().unwrap().len() == 2, "{health}");
}

/// The servers `search_tools`' description names, as listed now.
async fn searched_servers(hub: &mut Hub) -> String {
    let tools = hub.client.list_tools().await;
    let search = tools
        .iter()
        .find(|t| t["name"] == "search_tools")
        .unwrap_or_else(|| panic!("no search_tools listed: {tools:?}"));
    let description = search["description"].as_str().unwrap();
    let over = description
        .split_once("among the tools of ")
        .and_then(|(_, rest)| rest.split_once(" (only"))
        .unwrap_or_else(|| panic!("no server list in {description:?}"));
    over.0.to_string()
}

/// Waits until `call` of `tool` answers (its server is up), however the list looks.
async fn callable(hub: &mut Hub, tool: &str) {
    let deadline = Instant::now() + WAIT;
    loop {
        let r = hub.client.call(tool, json!({"message": "up"})).await;
        if text(&r) == "up" {
            return;
        }
        assert!(Instant::now() < deadline, "{tool} never answered: {r}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_tools_names_the_servers_of_the_config_as_it_is_reloaded() {
    let sc = Scratch::new();
    let config = sc.path().join("mcp.json");
    let mut servers = json!({"time2": fx("time2"), "memory": fx("memory")});
    let openpact = json!({"toolSearch": {"mode": "on"}});
    save(&config, &servers, &openpact);
    let mut hub = serve_with(&config, &[], &[]).await;
    hub.client.initialize().await;
    callable(&mut hub, "time2:echo").await;
    callable(&mut hub, "memory:echo").await;
    assert_eq!(searched_servers(&mut hub).await, "time2, memory");

    // Removed: the client is told, and the description no longer names it.
    servers.as_object_mut().unwrap().remove("memory");
    save(&config, &servers, &openpact);
    assert!(
        hub.client
            .wait_for("notifications/tools/list_changed", WAIT)
            .await
            .is_some(),
        "removing a server in search mode was not announced\n{}",
        hub.stderr()
    );
    hub.wait_log("removed: memory", WAIT).await;
    assert_eq!(searched_servers(&mut hub).await, "time2");

    // Added again: named once.
    servers["memory"] = fx("memory");
    save(&config, &servers, &openpact);
    assert!(
        hub.client
            .wait_for("notifications/tools/list_changed", WAIT)
            .await
            .is_some(),
        "adding a server in search mode was not announced"
    );
    callable(&mut hub, "memory:echo").await;
    assert_eq!(searched_servers(&mut hub).await, "time2, memory");
}

/// A client that re-lists on every `list_changed` (as editors do) while a server restarts
/// because its args changed: how many it was sent, once the restarted server answers.
async fn announcements_of_a_restart(tool_search: &str) -> usize {
    let sc = Scratch::new();
    let config = sc.path().join("mcp.json");
    let mut servers = json!({"a": fx("a"), "b": fx("b")});
    let openpact = json!({"toolSearch": {"mode": tool_search}});
    save(&config, &servers, &openpact);
    let mut hub = serve_with(&config, &[], &[]).await;
    hub.client.initialize().await;
    callable(&mut hub, "a:echo").await;
    callable(&mut hub, "b:echo").await;
    let before = names(&hub.client.list_tools().await);
    let pid_a = pid_of(&mut hub, "a").await;

    servers["a"]["args"] = json!(["--name", "a", "--page-size", "7"]);
    save(&config, &servers, &openpact);
    let t0 = Instant::now();
    let mut announced = 0;
    let mut quiet_since = Instant::now();
    // Re-listing at once after each announcement, until the new process answers and
    // nothing has been announced for a while.
    loop {
        if hub
            .client
            .wait_for(
                "notifications/tools/list_changed",
                Duration::from_millis(100),
            )
            .await
            .is_some()
        {
            announced += 1;
            hub.client.list_tools().await;
            quiet_since = Instant::now();
            continue;
        }
        let r = hub.client.call("a:pids", json!({})).await;
        let pid = serde_json::from_str::<Value>(&text(&r))
            .ok()
            .and_then(|v| v["pid"].as_u64());
        if pid.is_some_and(|p| p != pid_a) && quiet_since.elapsed() > Duration::from_millis(1500) {
            break;
        }
        assert!(
            t0.elapsed() < WAIT,
            "a never restarted: {r}\n{}",
            hub.stderr()
        );
    }
    assert_eq!(
        names(&hub.client.list_tools().await),
        before,
        "the same tools after the restart"
    );
    announced
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_keeps_the_tools_is_not_announced() {
    for mode in ["on", "off"] {
        assert_eq!(
            announcements_of_a_restart(mode).await,
            0,
            "toolSearch {mode}: the client's list did not change"
        );
    }
}
