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
    if op.get("builtins").is_none() {
        op["builtins"] = json!(false);
    }
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
    u64::from(crate::support::server_pids(&text(&r)).0)
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

/// The secrets a save adds are in place before anything that uses them: a script sees the
/// new one, and a server added in the same save has its first stderr line and its tool list
/// redacted (the hub applies secrets and policy before it starts servers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_puts_new_secrets_in_place_before_the_servers_and_scripts_that_see_them() {
    const S2: &str = "second-secret-5b7f0e1c2d";
    let sc = Scratch::new();
    let config = sc.path().join("mcp.json");
    let scripts = sc.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::write(
        scripts.join("names.star"),
        "# @description: Names the secrets\ndef main():\n    return secrets.list()\n",
    )
    .unwrap();
    let mut servers = json!({"a": fx("a")});
    let mut openpact = json!({
        "builtins": {"scripts": {"dir": "scripts"}},
        "secrets": {"env": ["OPENPACT_TEST_S1"]},
    });
    save(&config, &servers, &openpact);
    run(&config, &["scripts", "approve", "names"])
        .await
        .expect_code(0);
    let mut hub = serve_with(
        &config,
        &[],
        &[
            ("OPENPACT_TEST_S1", "first-secret-9a8c7e6d"),
            ("OPENPACT_TEST_S2", S2),
        ],
    )
    .await;
    hub.client.initialize().await;
    wait_for_tool(&mut hub.client, "a:echo", WAIT).await;
    let secret_names = |r: &Value| -> Value {
        let body: Value = serde_json::from_str(&text(r)).unwrap_or_else(|e| panic!("{e}: {r}"));
        body["value"].clone()
    };
    let r = hub
        .client
        .call("script_run", json!({"name": "names"}))
        .await;
    assert_eq!(secret_names(&r), json!(["OPENPACT_TEST_S1"]), "{r}");

    // One save: a new secret, and a server that says it at once on stderr and in its list.
    openpact["secrets"]["env"] = json!(["OPENPACT_TEST_S1", "OPENPACT_TEST_S2"]);
    servers["late"] = json!({
        "command": "sh",
        "args": ["-c", format!(
            "echo \"late says ${{OPENPACT_TEST_S2}}\" >&2; exec {FIXTURE} --name late --echo-description \"echoes ${{OPENPACT_TEST_S2}}\""
        )],
    });
    save(&config, &servers, &openpact);
    tools_become(&mut hub, |t| has(t, "late:echo"), WAIT).await;
    let listed = hub.client.list_tools().await;
    let late = listed
        .iter()
        .find(|t| t["name"] == "late:echo")
        .unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(
        late["description"], "echoes [REDACTED:OPENPACT_TEST_S2]",
        "{late}"
    );
    hub.wait_log("late says [REDACTED:OPENPACT_TEST_S2]", WAIT)
        .await;
    let r = hub
        .client
        .call("script_run", json!({"name": "names"}))
        .await;
    assert_eq!(
        secret_names(&r),
        json!(["OPENPACT_TEST_S1", "OPENPACT_TEST_S2"]),
        "scripts see the secret the reload added: {r}"
    );
    assert!(!hub.stderr().contains(S2), "{}", hub.stderr());
}

/// A namespace renames a server's tools, so rules must use the new names: a save that adds
/// one while a rule still names the server is refused (the deny rule keeps working), and
/// the fixed save moves the remembered decisions to the new names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_never_voids_a_rule_or_a_remembered_decision() {
    let sc = Scratch::new();
    let config = sc.path().join("mcp.json");
    let mut servers = json!({"github": fx("github")});
    let mut openpact = json!({"permissions": {"default": "deny", "deny": ["github:crash"]}});
    save(&config, &servers, &openpact);
    let out = run(&config, &["permissions", "allow", "github:echo"]).await;
    out.expect_code(0);
    let mut hub = serve_with(&config, &[], &[]).await;
    hub.client.initialize().await;
    wait_for_tool(&mut hub.client, "github:echo", WAIT).await;
    let r = hub
        .client
        .call("github:echo", json!({"message": "m"}))
        .await;
    assert_eq!(text(&r), "m", "remembered: {r}");

    servers["github"]["namespace"] = json!("gh");
    save(&config, &servers, &openpact);
    hub.wait_log("reload (the file changed) not applied", WAIT)
        .await;
    assert!(
        hub.stderr().contains("write \"gh:crash\""),
        "the refusal says what to write: {}",
        hub.stderr()
    );
    let check = run(&config, &["config", "check"]).await;
    assert_ne!(check.code, Some(0), "{check}");
    assert!(check.stderr.contains("write \"gh:crash\""), "{check}");
    let r = hub.client.call("github:crash", json!({})).await;
    assert!(text(&r).contains("denied"), "still denied: {r}");

    openpact["permissions"]["deny"] = json!(["gh:crash"]);
    save(&config, &servers, &openpact);
    tools_become(&mut hub, |t| has(t, "gh:echo"), WAIT).await;
    let r = hub.client.call("gh:crash", json!({})).await;
    assert!(text(&r).contains("denied"), "the rule follows: {r}");
    let r = hub.client.call("gh:echo", json!({"message": "n"})).await;
    assert_eq!(text(&r), "n", "the remembered allow moved: {r}");
    let listed = run(&config, &["permissions", "list", "--json"]).await;
    assert!(
        listed.stdout.contains("gh:echo") && !listed.stdout.contains("github:echo"),
        "{listed}"
    );
}

/// A reload that is refused, or applied with warnings, reaches the user where they are: each
/// client gets an MCP log message (`notifications/message`, logger `openpact`), and
/// `openpact reload` asks the hub even when the file no longer parses, then says what it
/// did — non-zero when it refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_or_warned_reload_reaches_the_clients_and_openpact_reload() {
    let sc = Scratch::new();
    let config = sc.path().join("mcp.json");
    let mut servers = json!({"a": fx("a")});
    let openpact = json!({"reload": false});
    save(&config, &servers, &openpact);
    let mut hub = serve_with(&config, &[], &[]).await;
    hub.client.initialize().await;
    wait_for_tool(&mut hub.client, "a:echo", WAIT).await;
    let told = |m: &Option<Value>, level: &str| -> String {
        let m = m.as_ref().expect("a log message");
        assert_eq!(m["params"]["level"], level, "{m}");
        assert_eq!(m["params"]["logger"], "openpact", "{m}");
        m["params"]["data"].as_str().unwrap_or_default().to_string()
    };

    // A typo: applied, with the did-you-mean said to the client and by `openpact reload`.
    servers["b"] = fx("b");
    servers["b"]["disable"] = json!(true);
    save(&config, &servers, &openpact);
    let out = run(&config, &["reload"]).await;
    out.expect_code(0);
    assert!(
        out.stdout.contains("added: b") && out.stdout.contains("did you mean `disabled`"),
        "{out}"
    );
    let m = hub.client.wait_for("notifications/message", WAIT).await;
    let data = told(&m, "warning");
    assert!(data.contains("did you mean `disabled`"), "{data}");

    // Broken: refused, said to the client, and `openpact reload` reports it and fails.
    std::fs::write(&config, "{\"mcpServers\": {").unwrap();
    let out = run(&config, &["reload"]).await;
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout.contains("NOT applied") && out.stdout.contains("serves the last good config"),
        "{out}"
    );
    assert!(out.stdout.contains("mcp.json"), "names the file: {out}");
    let m = hub.client.wait_for("notifications/message", WAIT).await;
    let data = told(&m, "error");
    assert!(data.contains("last good one still serves"), "{data}");
    let r = hub.client.call("a:echo", json!({"message": "on"})).await;
    assert_eq!(text(&r), "on", "{r}");

    // Fixed: those told of the refusal hear that the fix took.
    servers["b"].as_object_mut().unwrap().remove("disable");
    save(&config, &servers, &openpact);
    run(&config, &["reload"]).await.expect_code(0);
    let m = hub.client.wait_for("notifications/message", WAIT).await;
    let data = told(&m, "notice");
    assert!(data.contains("errors reported before are fixed"), "{data}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openpact_reload_names_the_shared_hub_and_what_waits_for_a_restart_in_camel_case() {
    let sc = Scratch::new();
    let config = sc.path().join("mcp.json");
    let servers = json!({"fx": fx("fx")});
    // Watching off: only `openpact reload` reloads.
    let mut openpact = json!({"reload": false, "shared": {"idleExit": "2s"}});
    save(&config, &servers, &openpact);
    // A window through `connect`, which starts the shared hub of this config.
    let mut window = openpact_for(&config, None);
    window
        .arg("connect")
        .env("XDG_RUNTIME_DIR", sc.path().join("run"))
        .env("OPENPACT_LOG", "info,openpact=debug")
        .kill_on_drop(true);
    let mut window = Hub::spawn(window);
    window.client.initialize().await;
    wait_for_tool(&mut window.client, "fx:echo", WAIT).await;
    let status = run(&config, &["servers", "--json"]).await.json();
    let pid = status[0]["pid"].as_u64().unwrap();
    assert!(status[0]["socket"].is_string(), "a shared hub: {status}");

    openpact["pageSize"] = json!(7);
    save(&config, &servers, &openpact);
    let out = run(&config, &["reload"]).await;
    out.expect_code(0);
    assert!(
        out.stdout.contains(&format!("shared hub (pid {pid}):"))
            && !out.stdout.contains("openpact serve"),
        "{out}"
    );
    assert!(
        out.stdout
            .contains("openpact.pageSize changed: applies when this hub restarts"),
        "{out}"
    );
    let status = run(&config, &["servers", "--json"]).await.json();
    let reload = &status[0]["reload"];
    assert_eq!(
        reload["needsRestart"],
        json!(["openpact.pageSize"]),
        "{status}"
    );
    assert!(reload.get("needs_restart").is_none(), "{status}");
    let out = run(&config, &["cache", "stats"]).await;
    assert!(
        out.stdout.contains(&format!("shared hub (pid {pid}):")),
        "{out}"
    );
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
        let pid = Some(u64::from(crate::support::server_pids(&text(&r)).0));
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
