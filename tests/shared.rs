//! `openpact connect`: editor windows sharing one hub per config over its private socket.
//! Three windows start the servers once and each gets its own permission prompt and
//! progress; closing one leaves the others; the hub leaves after its idle time. A hub killed
//! mid-call fails only that call, is replaced, and both windows carry on after a
//! `list_changed`.

use crate::support::{
    FIXTURE, Hub, Scratch, WAIT, fixture, names, openpact_for, text, wait_for_tool,
};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// An editor window: `openpact connect` on pipes, its shared hub's socket under `runtime`.
pub(crate) fn window(config: &Path, runtime: &Path) -> Hub {
    window_with(config, runtime, false)
}

/// [`window`], its `connect` relaying every message (`relay`) instead of handing the
/// editor's pipes to the hub.
fn window_with(config: &Path, runtime: &Path, relay: bool) -> Hub {
    let mut cmd = openpact_for(config, None);
    cmd.arg("connect")
        .env("XDG_RUNTIME_DIR", runtime)
        .env("OPENPACT_LOG", "info,openpact=debug")
        .kill_on_drop(true);
    if relay {
        cmd.env("OPENPACT_CONNECT_RELAY", "1");
    }
    Hub::spawn(cmd)
}

/// What descriptor `fd` of process `pid` is (`pipe:[1234]`).
fn fd_target(pid: u32, fd: &str) -> String {
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Whether process `pid` holds the pipe that is `window`'s stdin (handed over by `connect`).
fn holds_stdin_of(pid: i32, window: &Hub) -> bool {
    let stdin = fd_target(window.child.id().unwrap(), "0");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .any(|fd| fd_target(pid as u32, &fd.file_name().to_string_lossy()) == stdin)
}

/// Pids of the processes whose command line holds every one of `needles`.
pub(crate) fn pids_with(needles: &[&str]) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if needles.iter().all(|n| cmdline.contains(n)) {
            out.push(pid);
        }
    }
    out
}

/// The shared hub serving `config` (exactly one, once a hub that lost a start race to it,
/// which leaves at once, has left: on a busy machine that can take a while).
fn the_hub(config: &Path) -> i32 {
    let config = config.to_string_lossy();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let hubs = pids_with(&["serve --shared", &config]);
        if let [hub] = hubs[..] {
            return hub;
        }
        assert!(
            Instant::now() < deadline,
            "one shared hub for {config}: {hubs:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `pid` is gone; false after `limit`.
async fn gone(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Path::new(&format!("/proc/{pid}")).exists() {
        // A zombie has no command line left: it has exited.
        if std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.is_empty()) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

fn shared_config(sc: &Scratch, marker: &str) -> std::path::PathBuf {
    sc.servers(
        json!({"fx": fixture(&["--name", marker])}),
        Some(json!({
            "permissions": {"default": "allow", "ask": ["fx:echo"]},
            "shared": {"idleExit": "2s"},
        })),
    )
}

/// Calls `fx:echo` and answers the permission prompt that reaches this window.
async fn echo_with_prompt(w: &mut Hub, message: &str) -> Value {
    let c = &mut w.client;
    let id = c.next_id();
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "fx:echo", "arguments": {"message": message}}}))
        .await;
    let Some(prompt) = c.wait_for("elicitation/create", WAIT).await else {
        panic!("the window that called is not asked: {:?}", c.inbox);
    };
    let asked = prompt["params"]["message"].as_str().unwrap_or_default();
    assert!(asked.contains("fx:echo"), "{prompt}");
    c.send(&json!({"jsonrpc": "2.0", "id": prompt["id"],
                   "result": {"action": "accept", "content": {"decision": "once"}}}))
        .await;
    c.response(&json!(id)).await
}

/// Progress notifications the window got for `token`, after calling `fx:progress` with it.
async fn progress_of(w: &mut Hub, token: &str) -> Vec<Value> {
    let c = &mut w.client;
    let id = c.next_id();
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "fx:progress", "arguments": {"steps": 3},
                              "_meta": {"progressToken": token}}}))
        .await;
    let r = c.response(&json!(id)).await;
    assert!(r.get("result").is_some(), "{r}");
    c.inbox
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_windows_share_one_hub_each_with_its_own_prompts_and_progress() {
    let sc = Scratch::new();
    let marker = format!("shared-{}", std::process::id());
    let config = shared_config(&sc, &marker);
    let runtime = sc.path().join("run");
    let mut windows = Vec::new();
    for n in 0..3 {
        let mut w = window(&config, &runtime);
        w.client
            .initialize_as(json!({"elicitation": {}}), &format!("window-{n}"))
            .await;
        wait_for_tool(&mut w.client, "fx:progress", WAIT).await;
        windows.push(w);
    }
    let hub = the_hub(&config);
    // The fixture itself, not the sandbox's wrapper and namespace init whose command lines
    // name it too.
    let servers: Vec<i32> = pids_with(&[FIXTURE, &marker])
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.starts_with(format!("{FIXTURE}\0").as_bytes()))
        })
        .collect();
    assert_eq!(servers.len(), 1, "three windows, one fixture server");

    for (n, w) in windows.iter_mut().enumerate() {
        let r = echo_with_prompt(w, &format!("from window {n}")).await;
        assert_eq!(text(&r), format!("from window {n}"));
        let progress = progress_of(w, &format!("p{n}")).await;
        assert_eq!(progress.len(), 3, "{progress:?}");
        assert!(
            progress
                .iter()
                .all(|p| p["progressToken"] == format!("p{n}")),
            "only this window's progress: {progress:?}"
        );
    }
    for w in &windows {
        let asked = w
            .client
            .inbox
            .iter()
            .filter(|m| m["method"] == "elicitation/create")
            .count();
        assert_eq!(asked, 0, "no window saw another's prompt");
    }

    // Closing one window leaves the others (and the hub) working.
    let mut closed = windows.remove(1);
    assert_eq!(closed.close().await.0, Some(0));
    for w in &mut windows {
        let r = w.client.call("fx:add", json!({"a": 2, "b": 3})).await;
        assert_eq!(text(&r), "5", "{r}");
    }
    assert_eq!(the_hub(&config), hub);

    // After the last window, the hub leaves once its idle time (2 s here) has passed.
    for w in &mut windows {
        w.close().await;
    }
    let t0 = Instant::now();
    assert!(gone(hub, Duration::from_secs(10)).await, "the hub stayed");
    assert!(
        t0.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    assert!(
        pids_with(&[FIXTURE, &marker]).is_empty(),
        "its servers went with it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_hub_fails_only_the_call_in_flight_and_both_windows_carry_on() {
    killed_hub(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_hub_fails_only_the_call_in_flight_when_connect_relays() {
    killed_hub(true).await;
}

async fn killed_hub(relay: bool) {
    let sc = Scratch::new();
    let marker = format!("killed-{relay}-{}", std::process::id());
    let config = shared_config(&sc, &marker);
    let runtime = sc.path().join("run");
    let mut a = window_with(&config, &runtime, relay);
    let mut b = window_with(&config, &runtime, relay);
    for w in [&mut a, &mut b] {
        w.client
            .initialize_as(json!({"elicitation": {}}), "window")
            .await;
        wait_for_tool(&mut w.client, "fx:slow", WAIT).await;
        // A log level the new hub must hear again.
        let r = w
            .client
            .request("logging/setLevel", json!({"level": "debug"}))
            .await;
        assert!(r.get("result").is_some(), "{r}");
    }
    let hub = the_hub(&config);
    assert_eq!(
        holds_stdin_of(hub, &a),
        !relay,
        "the hub reads the editor's pipe itself unless connect relays"
    );
    let id = a.client.next_id();
    a.client
        .send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": "fx:slow", "arguments": {"ms": 10000}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(hub),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();

    let r = a.client.response(&json!(id)).await;
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("hub") && message.contains("restarted"),
        "the call in flight fails saying why: {r}"
    );
    for w in [&mut a, &mut b] {
        assert!(
            w.client
                .wait_for("notifications/tools/list_changed", WAIT)
                .await
                .is_some(),
            "each window is told the lists may have changed"
        );
        // Only the call in flight failed: nothing answered before is answered again.
        let again: Vec<&Value> = w
            .client
            .inbox
            .iter()
            .filter(|m| m.get("error").is_some())
            .collect();
        assert!(again.is_empty(), "answered again: {again:?}");
        let tools = names(&wait_for_tool(&mut w.client, "fx:add", WAIT).await);
        assert!(tools.contains(&"fx:slow".to_string()), "{tools:?}");
        let r = w.client.call("fx:add", json!({"a": 1, "b": 1})).await;
        assert_eq!(text(&r), "2", "{r}");
        assert!(
            w.child.try_wait().unwrap().is_none(),
            "connect kept running"
        );
    }
    let new_hub = the_hub(&config);
    assert_ne!(new_hub, hub);
    assert_eq!(
        holds_stdin_of(new_hub, &b),
        !relay,
        "handed to the new hub too"
    );
    // connect says what happened on the editor's log.
    a.wait_log("went away", WAIT).await;
    for w in [&mut a, &mut b] {
        w.close().await;
    }
    assert!(gone(new_hub, Duration::from_secs(10)).await);
}

/// What an editor does on `list_changed`: asks for the tools at once. The answer to that.
async fn relist_on_notice(c: &mut crate::support::Client) -> Value {
    assert!(
        c.wait_for("notifications/tools/list_changed", WAIT)
            .await
            .is_some(),
        "no list_changed after the hub was killed"
    );
    c.request("tools/list", json!({})).await
}

/// A killed hub's exit races the hand-over to the next one (its listener outlives the
/// connections `connect` watches): whichever wins, a request sent after the restart notice is
/// the new hub's to answer, and only calls in flight fail. Twenty kills, two windows asking
/// at once each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_sent_after_a_hub_restart_is_answered_by_the_new_hub() {
    rekilled(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_sent_after_a_hub_restart_is_answered_by_the_new_hub_when_connect_relays() {
    rekilled(true).await;
}

async fn rekilled(relay: bool) {
    let sc = Scratch::new();
    let config = shared_config(&sc, &format!("rekilled-{relay}-{}", std::process::id()));
    let runtime = sc.path().join("run");
    let mut a = window_with(&config, &runtime, relay);
    let mut b = window_with(&config, &runtime, relay);
    for w in [&mut a, &mut b] {
        w.client.initialize().await;
        wait_for_tool(&mut w.client, "fx:add", WAIT).await;
    }
    for round in 0..20 {
        let hub = the_hub(&config);
        // What the last hub announced of its own is not this round's notice.
        a.client.inbox.clear();
        b.client.inbox.clear();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(hub),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let (ra, rb) = tokio::join!(
            relist_on_notice(&mut a.client),
            relist_on_notice(&mut b.client)
        );
        for r in [ra, rb] {
            assert!(r["result"]["tools"].is_array(), "round {round}: {r}");
        }
        for w in [&mut a, &mut b] {
            // The new hub's servers are up before the next kill.
            wait_for_tool(&mut w.client, "fx:add", WAIT).await;
        }
    }
    for w in [&mut a, &mut b] {
        assert!(!w.stderr().contains("ERROR"), "{}", w.stderr());
        w.close().await;
    }
}

/// An editor that kills its `connect` (as editors stop a server) sees its stdout end at
/// once, though the hub held the other end of it; the other window carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_connect_releases_its_window_and_the_others_carry_on() {
    let sc = Scratch::new();
    let config = shared_config(&sc, &format!("released-{}", std::process::id()));
    let runtime = sc.path().join("run");
    let mut a = window(&config, &runtime);
    let mut b = window(&config, &runtime);
    for w in [&mut a, &mut b] {
        w.client.initialize().await;
        wait_for_tool(&mut w.client, "fx:slow", WAIT).await;
    }
    let hub = the_hub(&config);
    assert!(holds_stdin_of(hub, &a));
    let stdin = fd_target(a.child.id().unwrap(), "0");
    a.client
        .send(&json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                      "params": {"name": "fx:slow", "arguments": {"ms": 10000}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    a.child.start_kill().unwrap();
    let started = Instant::now();
    while a.client.recv(Duration::from_secs(5)).await.is_some() {}
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the window's stdout ends soon after its connect is killed ({:?})",
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_dir(format!("/proc/{hub}/fd"))
        .unwrap()
        .flatten()
        .any(|fd| fd_target(hub as u32, &fd.file_name().to_string_lossy()) == stdin)
    {
        assert!(
            Instant::now() < deadline,
            "the hub let go of the killed window's pipe"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = b.client.call("fx:add", json!({"a": 2, "b": 3})).await;
    assert_eq!(text(&r), "5", "{r}");
    assert_eq!(the_hub(&config), hub, "the hub kept running");
    b.close().await;
}

/// A hub that dies while its config is broken cannot be started again: the window's
/// requests are answered with why (nothing hangs), and once the config is fixed the next
/// hub takes over and calls work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_whose_hub_cannot_restart_is_told_why_and_recovers() {
    for relay in [false, true] {
        let sc = Scratch::new();
        let config = shared_config(&sc, &format!("broken-{relay}-{}", std::process::id()));
        let good = std::fs::read_to_string(&config).unwrap();
        let mut w = window_with(&config, &sc.path().join("run"), relay);
        w.client.initialize().await;
        wait_for_tool(&mut w.client, "fx:add", WAIT).await;
        let hub = the_hub(&config);
        std::fs::write(&config, "{ \"mcpServers\": ").unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(hub),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        assert!(gone(hub, Duration::from_secs(5)).await);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let r = w.client.request("tools/list", json!({})).await;
        let message = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("could not be started"),
            "relay {relay}: the request is answered with why: {r}"
        );
        std::fs::write(&config, &good).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let r = w.client.call("fx:add", json!({"a": 4, "b": 5})).await;
            if r.get("result").is_some() {
                assert_eq!(text(&r), "9", "{r}");
                break;
            }
            assert!(Instant::now() < deadline, "relay {relay}: no recovery: {r}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        w.close().await;
    }
}

/// What the shared hubs of `config` logged (their log files in its state dir).
fn hub_logs(config: &Path) -> String {
    std::fs::read_dir(crate::support::state_dir(config))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("shared-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect()
}

/// A config broken while its shared hub runs: the hub keeps serving the last good version,
/// and a new window joins it rather than fail on the parse error (it asks the hub for its
/// profile, which answers for the config it serves). With no hub running, `connect` fails
/// on the error as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_window_joins_the_running_hub_while_the_config_is_broken() {
    let sc = Scratch::new();
    let config = shared_config(&sc, &format!("joins-{}", std::process::id()));
    let runtime = sc.path().join("run");
    let mut a = window(&config, &runtime);
    a.client.initialize().await;
    wait_for_tool(&mut a.client, "fx:add", WAIT).await;
    let hub = the_hub(&config);
    std::fs::write(&config, "{ \"mcpServers\": ").unwrap();
    let deadline = Instant::now() + WAIT;
    while !hub_logs(&config).contains("still serving the last good one") {
        assert!(Instant::now() < deadline, "{}", hub_logs(&config));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut b = window(&config, &runtime);
    let init = b.client.initialize().await;
    assert_eq!(init["serverInfo"]["name"], "openpact", "{init}");
    wait_for_tool(&mut b.client, "fx:add", WAIT).await;
    let r = b.client.call("fx:add", json!({"a": 2, "b": 3})).await;
    assert_eq!(text(&r), "5", "{r}");
    assert_eq!(
        the_hub(&config),
        hub,
        "the running hub serves the new window"
    );
    b.wait_log("EOF while parsing", WAIT).await;
    b.wait_log("keeps serving its last good version", WAIT)
        .await;

    // The profile is the hub's to check now: refused at once, saying why.
    for relay in [false, true] {
        let mut c = Hub::spawn({
            let mut cmd = openpact_for(&config, None);
            cmd.args(["connect", "--profile", "nope"])
                .env("XDG_RUNTIME_DIR", &runtime)
                .kill_on_drop(true);
            if relay {
                cmd.env("OPENPACT_CONNECT_RELAY", "1");
            }
            cmd
        });
        c.client
            .send(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "c", "version": "0"}}}),
            )
            .await;
        let status = tokio::time::timeout(Duration::from_secs(10), c.child.wait())
            .await
            .expect("connect exits at once")
            .unwrap();
        assert_eq!(status.code(), Some(2), "relay {relay}");
        // Its stderr is read by a thread of its own: the last line may land a moment after
        // the exit.
        c.wait_log("no profile \"nope\"", WAIT).await;
    }

    // No hub: the broken config is the answer, as for any command.
    for w in [&mut a, &mut b] {
        w.close().await;
    }
    assert!(gone(hub, Duration::from_secs(10)).await, "the hub stayed");
    let out = openpact_for(&config, None)
        .arg("connect")
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("EOF while parsing"), "{err}");
    assert!(out.stdout.is_empty(), "nothing but protocol on stdout");
    assert!(pids_with(&["serve --shared", &config.to_string_lossy()]).is_empty());
}

/// A hub killed halfway through writing an answer the editor is slow to read: the editor
/// finds the torn line ended (one line it cannot parse, not two messages run together), then
/// the call's error, then `list_changed`, and its next call works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_killed_mid_answer_leaves_a_line_the_editor_can_skip() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": fixture(&["--name", &format!("torn-{}", std::process::id())])}),
        Some(json!({"permissions": {"default": "allow"}, "shared": {"idleExit": "2s"}})),
    );
    let mut cmd = openpact_for(&config, None);
    cmd.arg("connect")
        .env("XDG_RUNTIME_DIR", sc.path().join("run"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut send = async |v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).await.unwrap();
    };
    let mut answer_to = async |id: i64, stdout: &mut tokio::io::BufReader<_>| -> Value {
        loop {
            line.clear();
            let n = tokio::time::timeout(WAIT, stdout.read_line(&mut line))
                .await
                .expect("an answer in time")
                .unwrap();
            assert!(n > 0, "stdout ended");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "slow-reader", "version": "1"}}}),
    )
    .await;
    answer_to(1, &mut stdout).await;
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let mut ready = false;
    for id in 2..60 {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "fx:add", "arguments": {"a": 1, "b": 1}}}))
        .await;
        if answer_to(id, &mut stdout).await.get("result").is_some() {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "fx:add never answered");
    // A megabyte of answer: the pipe takes 64 KiB of it while nobody reads.
    let big = "x".repeat(1 << 20);
    send(json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call",
                "params": {"name": "fx:echo", "arguments": {"message": big}}}))
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let hub = the_hub(&config);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(hub),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // The torn start of the answer, ended by connect: one line, not JSON.
    let mut torn = String::new();
    tokio::time::timeout(WAIT, stdout.read_line(&mut torn))
        .await
        .unwrap()
        .unwrap();
    assert!(
        torn.starts_with("{\"jsonrpc\":\"2.0\",\"id\":100,") && torn.ends_with('\n'),
        "{}",
        &torn[..torn.len().min(80)]
    );
    assert!(
        torn.len() < big.len(),
        "the answer was cut short ({} bytes)",
        torn.len()
    );
    assert!(serde_json::from_str::<Value>(&torn).is_err());
    // Then the one call in flight fails; none answered before is answered again.
    let mut next = String::new();
    tokio::time::timeout(WAIT, stdout.read_line(&mut next))
        .await
        .unwrap()
        .unwrap();
    let r: Value = serde_json::from_str(&next).unwrap();
    assert_eq!(r["id"], json!(100), "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("restarted"), "{r}");
    for id in 200..260 {
        send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "fx:add", "arguments": {"a": 2, "b": 2}}}))
        .await;
        let r = answer_to(id, &mut stdout).await;
        if r.get("result").is_some() {
            assert_eq!(text(&r), "4", "{r}");
            child.start_kill().unwrap();
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no call worked after the restart");
}

/// Node-based editors give a server sockets, not pipes, for stdin and stdout: those are
/// handed over too, and the session works on them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_whose_stdio_are_sockets_is_handed_over_too() {
    use std::io::{BufRead, Write};
    use std::os::unix::net::UnixStream;
    let sc = Scratch::new();
    let config = shared_config(&sc, &format!("sockets-{}", std::process::id()));
    let (to_connect, its_stdin) = UnixStream::pair().unwrap();
    let (from_connect, its_stdout) = UnixStream::pair().unwrap();
    let mut cmd = openpact_for(&config, None);
    cmd.arg("connect")
        .env("XDG_RUNTIME_DIR", sc.path().join("run"))
        .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            its_stdin,
        )))
        .stdout(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            its_stdout,
        )))
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let connect = child.id().unwrap();
    let config_path = config.clone();
    let answers = tokio::task::spawn_blocking(move || {
        from_connect.set_read_timeout(Some(WAIT)).unwrap();
        let mut lines = std::io::BufReader::new(from_connect).lines();
        let send = |line: Value| writeln!(&to_connect, "{line}").unwrap();
        let mut ask = |line: Value, id: i64| -> Value {
            send(line);
            loop {
                let got: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
                if got["id"] == json!(id) {
                    return got;
                }
            }
        };
        let init = ask(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "socket-editor", "version": "1"}}}),
            1,
        );
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let hub = the_hub(&config_path);
        let stdin = fd_target(connect, "0");
        let handed = stdin.starts_with("socket:")
            && std::fs::read_dir(format!("/proc/{hub}/fd"))
                .unwrap()
                .flatten()
                .any(|fd| fd_target(hub as u32, &fd.file_name().to_string_lossy()) == stdin);
        let mut add = json!(null);
        for n in 2..40 {
            add = ask(
                json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                       "params": {"name": "fx:add", "arguments": {"a": 20, "b": 22}}}),
                n,
            );
            if add.get("result").is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (init, handed, add)
    })
    .await
    .unwrap();
    let (init, handed, add) = answers;
    assert_eq!(init["result"]["serverInfo"]["name"], "openpact", "{init}");
    assert!(handed, "the hub holds the editor's socket");
    assert_eq!(text(&add), "42", "{add}");
    child.start_kill().unwrap();
    let _ = child.wait().await;
}

#[tokio::test]
async fn connect_refuses_an_unknown_profile_naming_the_profiles() {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": {"command": FIXTURE}}),
        Some(json!({"profiles": {"coding": {"servers": ["fx"]}}})),
    );
    let out = openpact_for(&config, None)
        .args(["connect", "--profile", "codin"])
        .env("XDG_RUNTIME_DIR", sc.path().join("run"))
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no profile \"codin\"") && err.contains("coding"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing but protocol on stdout");
}
