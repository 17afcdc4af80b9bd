//! The sandbox of stdio servers, end to end: a hostile fixture behind the hub tries to read,
//! write, leak, connect and spawn its way out of its profile over real pipes; the same
//! attempts succeed unconfined (so each check can fail); a machine without Landlock
//! (simulated) refuses or warns; container launches keep working; and what each server may
//! touch is shown by `config check`, `servers` and `/health`.

use crate::support::{
    FIXTURE, OPENPACT, Peers, Scratch, Stand, WAIT, ready, reply, runner_stand_in, s, serve_with,
    text,
};
use serde_json::{Value, json};
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;

const FAKE_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- fake";

/// A home with a fake SSH key, a working dir with a link to that key, a private dir beside it.
fn hostile_home(sc: &Scratch) {
    let root = sc.path();
    for d in ["home/.ssh", "work", "private"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("home/.ssh/id_ed25519"), FAKE_KEY).unwrap();
    std::fs::write(root.join("work/notes.txt"), "allowed notes").unwrap();
    std::fs::write(root.join("private/secret.txt"), "private words").unwrap();
    std::os::unix::fs::symlink(root.join("home/.ssh/id_ed25519"), root.join("work/key")).unwrap();
}

/// A loopback port something listens on (kept open while the listener lives).
fn open_port() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// The hostile tool's own answer: the last text of the result (a host the proxy refused puts
/// the hub's words first, see `policy::hosts`).
async fn try_tool(hub: &mut crate::support::Hub, tool: &str, args: Value) -> String {
    let r = hub.client.call(tool, args).await;
    match r["result"]["content"].as_array().and_then(|c| c.last()) {
        Some(last) => last["text"].as_str().unwrap_or_default().to_string(),
        None => text(&r),
    }
}

/// Every attempt the profile does not allow fails; every one it allows works; the child the
/// server spawns is held to the same.
#[tokio::test]
async fn a_hostile_server_stays_inside_its_profile() {
    let sc = Scratch::new();
    hostile_home(&sc);
    let root = sc.path().to_path_buf();
    let (_listener, open_port) = open_port();
    let allowed = Stand::start(|_| reply(200, "text/plain", "hello from an allowed host"));
    let other = Stand::start(|_| reply(200, "text/plain", "must not be reached"));
    let config = sc.servers(
        json!({"h": {
            "command": FIXTURE,
            "args": ["--hostile"],
            "cwd": s(&root.join("work")),
            "sandbox": {
                "network": {"allow": [format!("127.0.0.1:{}", allowed.port)]},
                "env": ["MY_SETTING"],
            },
        }}),
        None,
    );
    let home = root.join("home");
    let mut hub = serve_with(
        &config,
        &[],
        &[
            ("HOME", s(&home)),
            ("GITHUB_TOKEN", "ghp_fake_token"),
            ("MY_SETTING", "visible"),
        ],
    )
    .await;
    ready(&mut hub.client, &["h:try_read"]).await;
    let hub_pid = hub.child.id().unwrap();
    let key = s(&home.join(".ssh/id_ed25519")).to_string();
    let p = |rel: &str| s(&root.join(rel)).to_string();

    let denied: Vec<(&str, Value)> = vec![
        ("try_read", json!({"path": key})),
        ("try_read", json!({"path": p("work/key")})),
        ("try_read", json!({"path": p("work/../private/secret.txt")})),
        (
            "try_read",
            json!({"path": format!("/proc/{hub_pid}/environ")}),
        ),
        ("try_list", json!({"path": p("home/.ssh")})),
        ("try_write", json!({"path": p("private/new.txt")})),
        ("try_write", json!({"path": p("home/.bashrc")})),
        (
            "try_write",
            json!({"path": "/tmp/openpact-sandbox-escape.txt"}),
        ),
        ("try_env", json!({"name": "GITHUB_TOKEN"})),
        ("try_tcp", json!({"host": "127.0.0.1", "port": open_port})),
        ("try_udp", json!({"host": "127.0.0.1", "port": 53})),
        ("try_dns", json!({"name": "example.com"})),
        ("try_fetch", json!({"url": format!("{}/", other.base)})),
        ("try_fetch", json!({"url": "https://evil.example/upload"})),
    ];
    for (tool, args) in &denied {
        let got = try_tool(&mut hub, &format!("h:{tool}"), args.clone()).await;
        assert!(
            got.starts_with("failed: "),
            "{tool} {args} should fail, got: {got}"
        );
        assert!(
            !got.contains("fake") && !got.contains("ghp_"),
            "{tool} leaked: {got}"
        );
    }
    let allowed_calls: Vec<(&str, Value, &str)> = vec![
        (
            "try_read",
            json!({"path": p("work/notes.txt")}),
            "allowed notes",
        ),
        ("try_read", json!({"path": "/etc/passwd"}), "root"),
        ("try_write", json!({"path": p("work/out.txt")}), ""),
        ("try_env", json!({"name": "MY_SETTING"}), "visible"),
        ("try_env", json!({"name": "PATH"}), "/"),
        (
            "try_fetch",
            json!({"url": format!("{}/", allowed.base)}),
            "200",
        ),
    ];
    for (tool, args, want) in &allowed_calls {
        let got = try_tool(&mut hub, &format!("h:{tool}"), args.clone()).await;
        assert!(
            got.starts_with("ok: ") && got.contains(want),
            "{tool} {args} should work, got: {got}"
        );
    }
    assert!(root.join("work/out.txt").exists());
    // Raw and netlink sockets, which `try_*` does not open: a grandchild Python tries.
    if Path::new("/usr/bin/python3").exists() {
        let script = "import socket\nfor f, t in ((socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_INET, socket.SOCK_RAW), (socket.AF_PACKET, socket.SOCK_RAW)):\n    try:\n        socket.socket(f, t, 0); print('opened', f)\n    except OSError as e:\n        print('refused', e.errno)";
        let got = try_tool(
            &mut hub,
            "h:try_exec",
            json!({"program": "/usr/bin/python3", "args": ["-c", script]}),
        )
        .await;
        assert!(
            got.starts_with("ok: exit 0") && !got.contains("opened"),
            "{got}"
        );
        assert_eq!(
            got.matches("refused 1").count(),
            3,
            "EPERM each time: {got}"
        );
    }
    assert!(!Path::new("/tmp/openpact-sandbox-escape.txt").exists());
    // The grandchild: the same attempts from a process the server starts.
    for (tool, args, ok) in [
        ("try_read", json!({"path": key}), false),
        (
            "try_tcp",
            json!({"host": "127.0.0.1", "port": open_port}),
            false,
        ),
        ("try_env", json!({"name": "GITHUB_TOKEN"}), false),
        ("try_read", json!({"path": p("work/notes.txt")}), true),
    ] {
        let got = try_tool(
            &mut hub,
            "h:try_spawn",
            json!({"tool": tool, "arguments": args}),
        )
        .await;
        let want = if ok {
            "child said: ok: "
        } else {
            "child said: failed: "
        };
        assert!(got.contains(want), "child {tool} {args}: {got}");
    }
    // Refusals are logged with server and host.
    hub.wait_log("egress refused", WAIT).await;
    let log = hub.stderr();
    assert!(log.contains("evil.example"), "{log}");
    assert!(!log.contains("ghp_fake_token"));
    assert!(allowed.seen().len() == 1 && other.seen().is_empty());
}

/// The same attempts with `"sandbox": false` succeed: each check above can fail.
/// The wrapper (`openpact-sandbox`, one start per confined server start, fifty at once for
/// fifty servers) is built from the `openpact-confine` crate alone: a small fraction of
/// `openpact`, whose size it nears once it links the library.
#[test]
fn the_wrapper_links_none_of_the_library() {
    let size = |bin: &str| std::fs::metadata(bin).unwrap().len();
    let wrapper = size(env!("CARGO_BIN_EXE_openpact-sandbox"));
    let openpact = size(crate::support::OPENPACT);
    assert!(
        wrapper * 10 < openpact,
        "openpact-sandbox is {wrapper} bytes, openpact {openpact}: the wrapper links the library"
    );
}

#[tokio::test]
async fn unconfined_the_same_attempts_succeed() {
    let sc = Scratch::new();
    hostile_home(&sc);
    let root = sc.path().to_path_buf();
    let (_listener, open_port) = open_port();
    let config = sc.servers(
        json!({"h": {"command": FIXTURE, "args": ["--hostile"], "sandbox": false}}),
        None,
    );
    let home = root.join("home");
    let mut hub = serve_with(
        &config,
        &[],
        &[("HOME", s(&home)), ("GITHUB_TOKEN", "ghp_fake_token")],
    )
    .await;
    ready(&mut hub.client, &["h:try_read"]).await;
    let key = s(&home.join(".ssh/id_ed25519")).to_string();
    for (tool, args, want) in [
        ("try_read", json!({"path": key}), "fake"),
        (
            "try_read",
            json!({"path": s(&root.join("work/key"))}),
            "fake",
        ),
        ("try_env", json!({"name": "GITHUB_TOKEN"}), "ghp_"),
        (
            "try_tcp",
            json!({"host": "127.0.0.1", "port": open_port}),
            "connected",
        ),
    ] {
        let got = try_tool(&mut hub, &format!("h:{tool}"), args.clone()).await;
        assert!(
            got.starts_with("ok: ") && got.contains(want),
            "{tool}: {got}"
        );
    }
}

/// `openpact ARGS` with the config, a private state dir and `env`; its JSON output.
async fn cli_json(config: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Value, String) {
    let out = tokio::process::Command::new(OPENPACT)
        .arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(config.with_file_name("state"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        format!("{stdout}\n{stderr}"),
    )
}

fn server<'a>(hubs: &'a Value, name: &str) -> &'a Value {
    hubs[0]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {hubs}"))
}

/// Without Landlock (simulated), `required` refuses the server with the reason; without it
/// the server runs unconfined and `servers` says so, in both forms.
#[tokio::test]
async fn without_landlock_required_refuses_and_otherwise_warns() {
    let no_landlock = ("OPENPACT_SANDBOX_SIMULATE_NO_LANDLOCK", "1");
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"a": {"command": FIXTURE}}),
        Some(json!({"sandbox": {"required": true}})),
    );
    let (code, hubs, out) = cli_json(&config, &["servers", "--json"], &[no_landlock]).await;
    let a = server(&hubs, "a");
    assert_eq!(a["state"], "failed", "{out}");
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.contains("Landlock") && reason.contains("required"),
        "{reason}"
    );
    assert_eq!(a["sandbox"]["mode"], "refused");
    assert_ne!(code, -1);

    let sc = Scratch::new();
    let config = sc.servers(json!({"a": {"command": FIXTURE}}), None);
    let (_, hubs, out) = cli_json(
        &config,
        &["servers", "--json"],
        &[no_landlock, ("GITHUB_TOKEN", "x")],
    )
    .await;
    let a = server(&hubs, "a");
    assert_eq!(a["state"], "ready", "{out}");
    assert_eq!(a["sandbox"]["mode"], "unconfined");
    assert_eq!(a["sandbox"]["enforced"], false);
    assert!(
        !a["sandbox"]["profile"]["env"]
            .as_array()
            .unwrap()
            .contains(&json!("GITHUB_TOKEN"))
    );
    let (_, _, human) = cli_json(&config, &["servers"], &[no_landlock]).await;
    assert!(
        human.contains("NOT sandboxed") && human.contains("Landlock"),
        "{human}"
    );
    let (_, _, human) = cli_json(&config, &["servers"], &[]).await;
    assert!(human.contains("sandboxed (Landlock + seccomp)"), "{human}");
}

/// `config check` shows each server's profile (paths, hosts, variable names) and how it
/// runs; `sandbox` on a remote server, or a mistyped key, is a problem.
#[tokio::test]
async fn config_check_shows_profiles_and_refuses_bad_sandbox_keys() {
    let sc = Scratch::new();
    let notes = sc.path().join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    let config = sc.servers(
        json!({
            "a": {"command": FIXTURE, "sandbox": {
                "filesystem": {"read": [s(&notes)], "deny": ["~/private"]},
                "network": {"allow": ["example.com", "*.github.com:443"]},
                "env": ["LANG"],
            }},
            "b": {"command": FIXTURE, "sandbox": false},
        }),
        None,
    );
    let (code, v, out) = cli_json(&config, &["config", "check", "--json"], &[]).await;
    assert_eq!(code, 0, "{out}");
    let a = &v["servers"][0]["sandbox"];
    assert_eq!(a["mode"], "enforced", "{out}");
    let profile = &a["profile"];
    assert!(
        profile["read"]
            .as_array()
            .unwrap()
            .contains(&json!(s(&notes)))
    );
    assert!(
        profile["deny"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d.as_str().unwrap().ends_with("/.ssh"))
    );
    let allow = profile["network"]["allow"].as_array().unwrap();
    assert!(
        allow.contains(&json!("*.github.com:443")) && allow.contains(&json!("registry.npmjs.org"))
    );
    assert_eq!(v["servers"][1]["sandbox"]["mode"], "off");
    let (_, _, human) = cli_json(&config, &["config", "check"], &[]).await;
    assert!(
        human.contains("sandbox: sandboxed") && human.contains("*.github.com:443"),
        "{human}"
    );
    assert!(
        human.contains("unconfined (\"sandbox\": false on this server)"),
        "{human}"
    );

    let sc = Scratch::new();
    let config = sc.servers(
        json!({
            "r": {"url": "http://127.0.0.1:9/mcp", "sandbox": true},
            "t": {"command": FIXTURE, "sandbox": {"filesytem": {}, "network": {"allow": ["https://x.org"]}}},
        }),
        None,
    );
    let (code, v, out) = cli_json(&config, &["config", "check", "--json"], &[]).await;
    assert_eq!(code, 1, "{out}");
    let problems = v["problems"].to_string();
    assert!(problems.contains("cannot be sandboxed"), "{problems}");
    assert!(problems.contains("filesystem"), "{problems}");
    assert!(
        problems.contains("mcpServers.t.sandbox.network.allow[0]"),
        "{problems}"
    );
}

/// A server launched through a container runtime is left to it: not wrapped, environment
/// filtered, with the runtime's own variables and `-e NAME` passed, its config readable.
#[tokio::test]
async fn container_launches_keep_their_runtime_settings() {
    let sc = Scratch::new();
    let bin = sc.path().join("bin");
    let home = sc.path().join("home");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(home.join(".docker")).unwrap();
    std::fs::write(home.join(".docker/config.json"), "{\"auths\": {}}").unwrap();
    // A stand-in for the docker CLI: it reads its own config, as the real one does, then
    // runs the "container".
    let docker = bin.join("docker");
    std::fs::write(
        &docker,
        format!("#!/bin/sh\ncat \"$HOME/.docker/config.json\" >&2 || exit 3\n[ \"$1\" = run ] || exit 4\nexec {FIXTURE}\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = sc.servers(
        json!({"c": {"command": s(&docker), "args": ["run", "-i", "--rm", "-e", "PASSED_TOKEN", "mcp/image"]}}),
        None,
    );
    let mut hub = serve_with(
        &config,
        &[],
        &[
            ("HOME", s(&home)),
            ("DOCKER_HOST", "unix:///run/docker.sock"),
            ("PASSED_TOKEN", "given"),
            ("OTHER_TOKEN", "kept"),
        ],
    )
    .await;
    ready(&mut hub.client, &["c:env"]).await;
    for (name, want) in [
        ("DOCKER_HOST", "unix:///run/docker.sock"),
        ("PASSED_TOKEN", "given"),
        ("OTHER_TOKEN", "<unset>"),
    ] {
        let got = text(&hub.client.call("c:env", json!({"name": name})).await);
        assert_eq!(got, want, "{name}");
    }
    let (_, hubs, out) = cli_json(&config, &["servers", "--json"], &[("HOME", s(&home))]).await;
    let c = server(&hubs, "c");
    assert_eq!(c["sandbox"]["mode"], "runtime", "{out}");
    assert_eq!(c["sandbox"]["runtime"], "docker");
}

/// server-filesystem, sandboxed with the default profile and given one directory, reads and
/// writes there, and reads nothing outside it, not even through a link its root contains.
#[tokio::test]
async fn server_filesystem_is_confined_to_its_directory() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let files = sc.path().join("files");
    let outside = sc.path().join("outside");
    std::fs::create_dir_all(&files).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(files.join("in.txt"), "inside").unwrap();
    std::fs::write(outside.join("secret.txt"), "outside words").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), files.join("link.txt")).unwrap();
    let config = sc.servers(
        json!({"fs": peers.entry("PEER_FILESYSTEM", &[s(&files)])}),
        None,
    );
    let mut hub = serve_with(&config, &[], &[]).await;
    ready(&mut hub.client, &["fs:read_text_file"]).await;
    let read = |p: &Path| json!({"path": s(p)});
    let r = hub
        .client
        .call("fs:read_text_file", read(&files.join("in.txt")))
        .await;
    assert_eq!(text(&r), "inside");
    let r = hub
        .client
        .call(
            "fs:write_file",
            json!({"path": s(&files.join("new.txt")), "content": "written"}),
        )
        .await;
    assert!(!crate::support::is_error(&r), "{r}");
    assert_eq!(
        std::fs::read_to_string(files.join("new.txt")).unwrap(),
        "written"
    );
    for p in [files.join("link.txt"), outside.join("secret.txt")] {
        let r = hub.client.call("fs:read_text_file", read(&p)).await;
        assert!(!r.to_string().contains("outside words"), "{r}");
    }
    let (_, hubs, _) = cli_json(&config, &["servers", "--json"], &[]).await;
    assert_eq!(server(&hubs, "fs")["sandbox"]["mode"], "enforced");
}

/// A server that fails to start in the sandbox is reported with the sandbox named and the
/// command that widens it, which works.
#[tokio::test]
async fn a_server_failing_in_the_sandbox_says_how_to_widen_it() {
    let sc = Scratch::new();
    let home = sc.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), FAKE_KEY).unwrap();
    let config = sc.servers(
        json!({"greedy": {"command": "/bin/sh", "args": ["-c", "cat \"$HOME/.ssh/id_ed25519\" >/dev/null || exit 3; exec \"$0\"", FIXTURE]}}),
        None,
    );
    let (_, hubs, out) = cli_json(&config, &["servers", "--json"], &[("HOME", s(&home))]).await;
    let g = server(&hubs, "greedy");
    assert_eq!(g["state"], "failed", "{out}");
    let reason = g["reason"].as_str().unwrap();
    assert!(reason.contains("Permission denied"), "{reason}");
    let named = format!(
        "openpact --config {} sandbox allow greedy read ~/.ssh/id_ed25519",
        s(&config)
    );
    assert!(
        reason.contains(&format!(
            "the sandbox refused reading ~/.ssh/id_ed25519, a place where credentials live; if this server should have it: {named}"
        )),
        "{reason}"
    );
    // The command it names works: run as a user would, the server then starts.
    let bin = Path::new(crate::support::OPENPACT).parent().unwrap();
    let ran = std::process::Command::new("sh")
        .args(["-c", &named])
        .env("HOME", &home)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .output()
        .unwrap();
    assert!(ran.status.success(), "{ran:?}");
    let (_, hubs, out) = cli_json(&config, &["servers", "--json"], &[("HOME", s(&home))]).await;
    assert_eq!(server(&hubs, "greedy")["state"], "ready", "{out}");
}

/// `"network": false` leaves no way out, not even the proxy; `"network": true` opens TCP and
/// UDP directly, with the rest of the profile still on.
#[tokio::test]
async fn network_false_closes_everything_and_true_opens_it() {
    let sc = Scratch::new();
    hostile_home(&sc);
    let home = sc.path().join("home");
    let (_listener, open_port) = open_port();
    let allowed = Stand::start(|_| reply(200, "text/plain", "reachable"));
    let config = sc.servers(
        json!({
            "closed": {"command": FIXTURE, "args": ["--hostile"], "sandbox": {"network": false}},
            "open": {"command": FIXTURE, "args": ["--hostile"], "sandbox": {"network": true}},
        }),
        None,
    );
    let mut hub = serve_with(&config, &[], &[("HOME", s(&home))]).await;
    ready(&mut hub.client, &["closed:try_tcp", "open:try_tcp"]).await;
    let key = s(&home.join(".ssh/id_ed25519")).to_string();
    let http = format!("{}/", allowed.base);
    for (server, tool, args, ok) in [
        (
            "closed",
            "try_tcp",
            json!({"host": "127.0.0.1", "port": open_port}),
            false,
        ),
        (
            "closed",
            "try_udp",
            json!({"host": "127.0.0.1", "port": 53}),
            false,
        ),
        ("closed", "try_env", json!({"name": "HTTPS_PROXY"}), false),
        ("closed", "try_fetch", json!({"url": http}), false),
        (
            "open",
            "try_tcp",
            json!({"host": "127.0.0.1", "port": open_port}),
            true,
        ),
        (
            "open",
            "try_udp",
            json!({"host": "127.0.0.1", "port": 53}),
            true,
        ),
        ("open", "try_fetch", json!({"url": http}), true),
        ("open", "try_read", json!({"path": key}), false),
    ] {
        let got = try_tool(&mut hub, &format!("{server}:{tool}"), args.clone()).await;
        let want = if ok { "ok: " } else { "failed: " };
        assert!(got.starts_with(want), "{server}:{tool} {args}: {got}");
    }
}

/// server-memory, sandboxed with the default profile, keeps its graph in the file its entry
/// names (the file's folder is the server's to write) and reads it back.
#[tokio::test]
async fn server_memory_writes_where_its_entry_says() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let data = sc.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let file = data.join("memory.jsonl");
    let mut entry = peers.entry("PEER_MEMORY", &[]);
    entry["env"] = json!({"MEMORY_FILE_PATH": s(&file)});
    let config = sc.servers(json!({"memory": entry}), None);
    let mut hub = serve_with(&config, &[], &[]).await;
    ready(&mut hub.client, &["memory:create_entities"]).await;
    let alice = json!({"entities": [{"name": "Alice", "entityType": "person", "observations": ["works at Acme"]}]});
    let r = hub.client.call("memory:create_entities", alice).await;
    assert!(!crate::support::is_error(&r), "{r}");
    let r = hub.client.call("memory:read_graph", json!({})).await;
    assert!(r.to_string().contains("works at Acme"), "{r}");
    assert!(std::fs::read_to_string(&file).unwrap().contains("Alice"));
}

/// A scratch home and data home for the hub, as a user's would be.
fn home_env(sc: &Scratch) -> (std::path::PathBuf, std::path::PathBuf) {
    let home = sc.path().join("home");
    let data = sc.path().join("data");
    std::fs::create_dir_all(&home).unwrap();
    (home, data)
}

/// A granted folder under the home folder that does not exist yet (as `~/.playwright-mcp`
/// on a first run) is shown as one to be made and made (0700) at each start, so the server
/// can write there the first time and after the user removed it.
#[tokio::test]
async fn a_missing_granted_folder_under_home_is_made_at_each_start() {
    use std::os::unix::fs::PermissionsExt;
    let sc = Scratch::new();
    let (home, data) = home_env(&sc);
    let env = [("HOME", s(&home)), ("XDG_DATA_HOME", s(&data))];
    let config = sc.servers(
        json!({"h": {"command": FIXTURE, "args": ["--hostile"],
            "sandbox": {"filesystem": {"write": ["~/.something/state"]}}}}),
        None,
    );
    let granted = home.join(".something/state");
    let (code, v, out) = cli_json(&config, &["config", "check", "--json"], &env).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        v["servers"][0]["sandbox"]["profile"]["create"],
        json!([s(&granted)]),
        "{out}"
    );
    let (_, _, human) = cli_json(&config, &["config", "check"], &env).await;
    assert!(
        human.contains(&format!("{} (missing: made at start)", s(&granted))),
        "{human}"
    );
    assert!(!granted.exists(), "config check makes nothing");
    for start in 0..2 {
        let mut hub = serve_with(&config, &[], &env).await;
        ready(&mut hub.client, &["h:try_write"]).await;
        let file = granted.join("first.json");
        let got = try_tool(&mut hub, "h:try_write", json!({"path": s(&file)})).await;
        assert!(got.starts_with("ok: "), "start {start}: {got}");
        for dir in [&granted, &home.join(".something")] {
            let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", dir.display());
        }
        hub.close().await;
        // The user removes it between starts.
        std::fs::remove_dir_all(home.join(".something")).unwrap();
    }
}

/// A granted folder elsewhere that does not exist is not made: `config check` refuses it,
/// saying why and what to do, and the hub logs it when it starts.
#[tokio::test]
async fn a_missing_granted_folder_outside_home_is_refused_by_config_check() {
    let sc = Scratch::new();
    let (home, data) = home_env(&sc);
    let env = [("HOME", s(&home)), ("XDG_DATA_HOME", s(&data))];
    let missing = sc.path().join("mnt/drive");
    let config = sc.servers(
        json!({"h": {"command": FIXTURE,
            "sandbox": {"filesystem": {"read": [s(&home)], "write": [s(&missing)]}}}}),
        None,
    );
    let (code, v, out) = cli_json(&config, &["config", "check", "--json"], &env).await;
    assert_eq!(code, 1, "{out}");
    let problems = v["problems"].to_string();
    assert!(
        problems.contains("mcpServers.h.sandbox.filesystem.write[0]")
            && problems.contains("does not exist")
            && problems.contains(&format!("mkdir -p {}", s(&missing))),
        "{problems}"
    );
    assert!(!missing.exists());
    let (_, hubs, out) = cli_json(&config, &["servers", "--json"], &env).await;
    assert_eq!(server(&hubs, "h")["state"], "ready", "{out}");
    assert!(out.contains("does not exist"), "logged at start: {out}");
    // Following the advice makes the config good.
    std::fs::create_dir_all(&missing).unwrap();
    let (code, _, out) = cli_json(&config, &["config", "check", "--json"], &env).await;
    assert_eq!(code, 0, "{out}");
}

/// Each confined server has a data folder of its own (`$OPENPACT_DATA_DIR`, in openpact's
/// data dir): it may write there without a grant, what it writes is there after a restart,
/// and another confined server can neither read nor list it.
#[tokio::test]
async fn a_server_keeps_its_state_in_its_private_data_folder() {
    let sc = Scratch::new();
    let (home, _) = home_env(&sc);
    // Outside the temp dirs, which are closed to every server anyway: what keeps `b` out is
    // the data folder's own protection.
    let outside_temp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let data = outside_temp.path().to_path_buf();
    let env = [("HOME", s(&home)), ("XDG_DATA_HOME", s(&data))];
    let config = sc.servers(
        json!({
            "a": {"command": FIXTURE, "args": ["--hostile"]},
            "b": {"command": FIXTURE, "args": ["--hostile"]},
        }),
        None,
    );
    let own = data.join("openpact/servers/a");
    let kept = own.join("kept.txt");
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["a:try_env", "b:try_read"]).await;
    let got = try_tool(&mut hub, "a:try_env", json!({"name": "OPENPACT_DATA_DIR"})).await;
    assert_eq!(got, format!("ok: {}", s(&own)));
    let got = try_tool(
        &mut hub,
        "a:try_write",
        json!({"path": s(&kept), "text": "remembered"}),
    )
    .await;
    assert!(got.starts_with("ok: "), "{got}");
    for (tool, path) in [("b:try_read", &kept), ("b:try_list", &own)] {
        let got = try_tool(&mut hub, tool, json!({"path": s(path)})).await;
        assert!(got.starts_with("failed: "), "{tool}: {got}");
    }
    hub.close().await;
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["a:try_read"]).await;
    let got = try_tool(&mut hub, "a:try_read", json!({"path": s(&kept)})).await;
    assert_eq!(got, "ok: remembered");
    let (_, hubs, out) = cli_json(&config, &["servers", "--json"], &env).await;
    assert_eq!(
        server(&hubs, "a")["sandbox"]["profile"]["data"],
        json!(s(&own)),
        "{out}"
    );
    let (_, _, human) = cli_json(&config, &["config", "check"], &env).await;
    assert!(
        human.contains(&format!("data: {} (its own", s(&own))),
        "{human}"
    );
}

/// A server launched as a known package (`uvx arxiv-mcp-server`, no `sandbox` key) gets its
/// table entry's grants and says so: `profile: known (arxiv)` in `config check` and
/// `servers`, both forms; its state folder under the home folder is made and writable, its
/// API host passes the proxy while others are refused.
#[tokio::test]
async fn a_known_server_gets_its_folders_and_hosts_and_says_so() {
    let sc = Scratch::new();
    let (home, data) = home_env(&sc);
    let env = [("HOME", s(&home)), ("XDG_DATA_HOME", s(&data))];
    let uvx = runner_stand_in(&sc, "uvx");
    let config = sc.servers(
        json!({"papers": {"command": uvx, "args": ["arxiv-mcp-server", "--storage-path", "~/x"]}}),
        None,
    );
    let folder = home.join(".arxiv-mcp-server");
    for args in [&["config", "check", "--json"][..], &["servers", "--json"]] {
        let (_, v, out) = cli_json(&config, args, &env).await;
        let sandbox = if args[0] == "config" {
            &v["servers"][0]["sandbox"]
        } else {
            &server(&v, "papers")["sandbox"]
        };
        assert_eq!(sandbox["known"]["name"], "arxiv", "{args:?}: {out}");
        assert_eq!(sandbox["known"]["matched"], "PyPI package arxiv-mcp-server");
        let allow = sandbox["profile"]["network"]["allow"].to_string();
        assert!(allow.contains("export.arxiv.org"), "{allow}");
        assert!(
            sandbox["profile"]["write"]
                .as_array()
                .unwrap()
                .contains(&json!(s(&folder))),
            "{out}"
        );
    }
    for args in [&["config", "check"][..], &["servers"]] {
        let (_, _, human) = cli_json(&config, args, &env).await;
        assert!(human.contains("profile: known (arxiv)"), "{human}");
    }
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["papers:try_write"]).await;
    let got = try_tool(
        &mut hub,
        "papers:try_write",
        json!({"path": s(&folder.join("1.pdf"))}),
    )
    .await;
    assert!(got.starts_with("ok: "), "{got}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    // Allowed: the proxy tries it (reachable or 502 offline), it does not refuse it.
    let got = try_tool(
        &mut hub,
        "papers:try_fetch",
        json!({"url": "https://export.arxiv.org/api/query"}),
    )
    .await;
    assert!(!got.contains(" 403 "), "{got}");
    let got = try_tool(
        &mut hub,
        "papers:try_fetch",
        json!({"url": "https://evil.example/"}),
    )
    .await;
    assert!(got.contains(" 403 "), "{got}");
    let got = try_tool(
        &mut hub,
        "papers:try_write",
        json!({"path": s(&home.join(".bashrc"))}),
    )
    .await;
    assert!(
        got.starts_with("failed: "),
        "the rest of home stays closed: {got}"
    );
    hub.wait_log("egress refused", WAIT).await;
    let log = hub.stderr();
    assert!(
        !log.lines()
            .any(|l| l.contains("egress refused") && l.contains("export.arxiv.org")),
        "{log}"
    );
}

/// The entry's own `sandbox` object adds to the known profile (its hosts, folders and
/// settings' variables stay, the entry's are added; a secret the table lists is not passed);
/// `"known": false` in it drops the table's grants; `"sandbox": false` stays unconfined.
#[tokio::test]
async fn an_entry_sandbox_adds_to_the_known_profile_and_known_false_drops_it() {
    let sc = Scratch::new();
    let (home, data) = home_env(&sc);
    let env = [("HOME", s(&home)), ("XDG_DATA_HOME", s(&data))];
    let npx = runner_stand_in(&sc, "npx");
    let launch = |sandbox: Value| {
        let mut e = json!({"command": npx, "args": ["-y", "@sentry/mcp-server@latest"]});
        if !sandbox.is_null() {
            e["sandbox"] = sandbox;
        }
        e
    };
    let config = sc.servers(
        json!({
            "added": launch(json!({"network": {"allow": ["example.org"]}, "filesystem": {"write": ["~/reports"]}})),
            "dropped": launch(json!({"known": false})),
            "off": launch(json!(false)),
        }),
        None,
    );
    let (code, v, out) = cli_json(&config, &["config", "check", "--json"], &env).await;
    assert_eq!(code, 0, "{out}");
    let added = &v["servers"][0]["sandbox"];
    assert_eq!(added["known"]["name"], "sentry", "{out}");
    let allow = added["profile"]["network"]["allow"].to_string();
    assert!(
        allow.contains("\"sentry.io\"") && allow.contains("example.org"),
        "{allow}"
    );
    let write = added["profile"]["write"].to_string();
    assert!(
        write.contains(s(&home.join(".sentry"))) && write.contains(s(&home.join("reports"))),
        "{write}"
    );
    let dropped = &v["servers"][1]["sandbox"];
    assert!(dropped["known"].is_null(), "{out}");
    assert!(
        !dropped["profile"]["network"]["allow"]
            .to_string()
            .contains("sentry.io")
    );
    assert!(!dropped["profile"]["write"].to_string().contains(".sentry"));
    assert_eq!(v["servers"][2]["sandbox"]["mode"], "off");
    assert!(v["servers"][2]["sandbox"]["known"].is_null());
    let with_vars = [
        env[0],
        env[1],
        ("SENTRY_HOST", "sentry.example.org"),
        ("SENTRY_ACCESS_TOKEN", "sntrys_fake"),
    ];
    let mut hub = serve_with(&config, &[], &with_vars).await;
    ready(&mut hub.client, &["added:try_write", "dropped:try_write"]).await;
    // The table passes its settings, never its secrets: the token is the user's to give.
    let got = try_tool(&mut hub, "added:try_env", json!({"name": "SENTRY_HOST"})).await;
    assert_eq!(got, "ok: sentry.example.org");
    let got = try_tool(
        &mut hub,
        "added:try_env",
        json!({"name": "SENTRY_ACCESS_TOKEN"}),
    )
    .await;
    assert!(got.starts_with("failed: "), "{got}");
    let file = s(&home.join(".sentry/mcp.json")).to_string();
    let got = try_tool(&mut hub, "added:try_write", json!({"path": file})).await;
    assert!(got.starts_with("ok: "), "{got}");
    let got = try_tool(&mut hub, "dropped:try_write", json!({"path": file})).await;
    assert!(got.starts_with("failed: "), "{got}");
    let got = try_tool(
        &mut hub,
        "dropped:try_fetch",
        json!({"url": "https://sentry.io/api/0/"}),
    )
    .await;
    assert!(got.contains(" 403 "), "{got}");
}

/// A grant of one file inside a credential place (`~/.kube/config`, which
/// mcp-server-kubernetes reads) opens that file and nothing else of the place, whether the
/// entry writes it or the known-servers table gives it.
#[tokio::test]
async fn a_grant_inside_a_credential_place_opens_that_path_only() {
    let sc = Scratch::new();
    let (home, data) = home_env(&sc);
    std::fs::create_dir_all(home.join(".kube/cache")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(
        home.join(".kube/config"),
        "apiVersion: v1 # fake kubeconfig",
    )
    .unwrap();
    std::fs::write(home.join(".kube/other-cluster"), "token: fake").unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), FAKE_KEY).unwrap();
    let env = [("HOME", s(&home)), ("XDG_DATA_HOME", s(&data))];
    let npx = runner_stand_in(&sc, "npx");
    let config = sc.servers(
        json!({
            "explicit": {"command": FIXTURE, "args": ["--hostile"],
                "sandbox": {"filesystem": {"read": ["~/.kube/config"]}}},
            "known": {"command": npx, "args": ["-y", "mcp-server-kubernetes"]},
        }),
        None,
    );
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["explicit:try_read", "known:try_read"]).await;
    let p = |rel: &str| json!({"path": s(&home.join(rel))});
    for name in ["explicit", "known"] {
        let got = try_tool(&mut hub, &format!("{name}:try_read"), p(".kube/config")).await;
        assert!(got.contains("fake kubeconfig"), "{name}: {got}");
        for (tool, rel) in [
            ("try_read", ".kube/other-cluster"),
            ("try_list", ".kube"),
            ("try_read", ".ssh/id_ed25519"),
        ] {
            let got = try_tool(&mut hub, &format!("{name}:{tool}"), p(rel)).await;
            assert!(got.starts_with("failed: "), "{name}:{tool} {rel}: {got}");
        }
    }
}

/// mcp-remote (a known bridge) reaches the server its arguments name, a local one on
/// loopback included, and nothing else.
#[tokio::test]
async fn a_known_bridge_reaches_the_url_its_arguments_name() {
    let sc = Scratch::new();
    let (home, data) = home_env(&sc);
    let env = [("HOME", s(&home)), ("XDG_DATA_HOME", s(&data))];
    let named = Stand::start(|_| reply(200, "text/plain", "the named server"));
    let other = Stand::start(|_| reply(200, "text/plain", "must not be reached"));
    let npx = runner_stand_in(&sc, "npx");
    let config = sc.servers(
        json!({"remote": {"command": npx, "args": ["-y", "mcp-remote", format!("{}/mcp", named.base)]}}),
        None,
    );
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["remote:try_fetch"]).await;
    let got = try_tool(
        &mut hub,
        "remote:try_fetch",
        json!({"url": format!("{}/mcp", named.base)}),
    )
    .await;
    assert!(got.starts_with("ok: ") && got.contains("200"), "{got}");
    let got = try_tool(
        &mut hub,
        "remote:try_fetch",
        json!({"url": format!("{}/", other.base)}),
    )
    .await;
    assert!(got.contains(" 403 "), "{got}");
    assert!(named.seen().len() == 1 && other.seen().is_empty());
}

/// A known server whose job is any URL (`uvx mcp-server-fetch`) passes the proxy to any
/// public host, but never to this machine: loopback stays refused, as does UDP.
#[tokio::test]
async fn a_known_fetch_server_reaches_any_public_host_and_nothing_local() {
    let sc = Scratch::new();
    let (home, data) = home_env(&sc);
    let env = [("HOME", s(&home)), ("XDG_DATA_HOME", s(&data))];
    let local = Stand::start(|_| reply(200, "text/plain", "must not be reached"));
    let uvx = runner_stand_in(&sc, "uvx");
    let config = sc.servers(
        json!({"fetch": {"command": uvx, "args": ["mcp-server-fetch"]}}),
        None,
    );
    let (_, v, out) = cli_json(&config, &["config", "check", "--json"], &env).await;
    let allow = v["servers"][0]["sandbox"]["profile"]["network"]["allow"].to_string();
    assert!(allow.contains("any public host"), "{out}");
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["fetch:try_fetch"]).await;
    // A name the proxy accepts and then cannot resolve (.invalid never resolves): not a 403.
    let got = try_tool(
        &mut hub,
        "fetch:try_fetch",
        json!({"url": "https://some-site.invalid/page"}),
    )
    .await;
    assert!(
        got.starts_with("failed: ") && !got.contains(" 403 "),
        "{got}"
    );
    for url in [
        format!("{}/", local.base),
        "http://localhost:9/".to_string(),
    ] {
        let got = try_tool(&mut hub, "fetch:try_fetch", json!({"url": url})).await;
        assert!(got.contains(" 403 "), "{url}: {got}");
    }
    let got = try_tool(
        &mut hub,
        "fetch:try_udp",
        json!({"host": "127.0.0.1", "port": 53}),
    )
    .await;
    assert!(got.starts_with("failed: "), "{got}");
    assert!(local.seen().is_empty());
}

/// A Unix socket listening in /tmp, one under `$XDG_RUNTIME_DIR` (where the session bus and
/// the agents listen) and a granted one: reached unconfined; confined, only the granted one
/// is, by the server and its children, while a socket pair keeps working; `servers` says
/// which mechanism holds them.
#[tokio::test]
async fn unix_sockets_are_refused_unless_granted_and_socket_pairs_work() {
    use std::os::unix::net::UnixListener;
    let sc = Scratch::new();
    let (home, _) = home_env(&sc);
    let run = sc.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    let in_tmp = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
    let sockets = [
        in_tmp.path().join("agent.sock"),
        run.join("bus"),
        sc.path().join("docker.sock"),
    ];
    let _listening: Vec<UnixListener> = sockets
        .iter()
        .map(|p| UnixListener::bind(p).unwrap())
        .collect();
    let granted = s(&sockets[2]);
    let hostile =
        |sandbox: Value| json!({"command": FIXTURE, "args": ["--hostile"], "sandbox": sandbox});
    let config = sc.servers(
        json!({
            "open": hostile(json!(false)),
            "h": hostile(json!(true)),
            "g": hostile(json!({"unixSockets": [granted]})),
        }),
        None,
    );
    let env = [("HOME", s(&home)), ("XDG_RUNTIME_DIR", s(&run))];
    let mut hub = serve_with(&config, &[], &env).await;
    ready(
        &mut hub.client,
        &["open:try_unix", "h:try_unix", "g:try_unix"],
    )
    .await;
    for socket in &sockets {
        let path = json!({"path": s(socket)});
        let got = try_tool(&mut hub, "open:try_unix", path.clone()).await;
        assert!(
            got.starts_with("ok: connected"),
            "unconfined {socket:?}: {got}"
        );
        let got = try_tool(&mut hub, "h:try_unix", path.clone()).await;
        assert!(
            got.starts_with("failed: ") && got.contains("Permission denied"),
            "confined {socket:?}: {got}"
        );
        let got = try_tool(
            &mut hub,
            "h:try_spawn",
            json!({"tool": "try_unix", "arguments": path}),
        )
        .await;
        assert!(
            got.contains("child said: failed: "),
            "child {socket:?}: {got}"
        );
    }
    let got = try_tool(&mut hub, "g:try_unix", json!({"path": granted})).await;
    assert!(got.starts_with("ok: connected"), "granted: {got}");
    let got = try_tool(&mut hub, "h:try_unix", json!({})).await;
    assert_eq!(got, "ok: a socket pair passed a byte");

    let (_, hubs, out) = cli_json(&config, &["servers", "--json"], &env).await;
    let closes = |name: &str| server(&hubs, name)["sandbox"]["closes"]["unixSockets"].clone();
    let h = closes("h");
    let h = h.as_str().unwrap_or_else(|| panic!("{out}"));
    let g = closes("g");
    let g = g.as_str().unwrap_or_default();
    // Landlock where the kernel limits sockets to paths (ABI 9), else seccomp, which cannot
    // tell one socket from another: then a grant opens them all, and says so.
    if h.starts_with("Landlock") {
        assert!(g.starts_with("Landlock") && g.contains(granted), "{g}");
    } else {
        assert_eq!(h, "seccomp: no socket(AF_UNIX), socket pairs only");
        assert!(
            g.starts_with(&format!(
                "any (granted {granted}; limiting to it needs Landlock ABI 9"
            )),
            "{g}"
        );
    }
    assert_eq!(
        server(&hubs, "g")["sandbox"]["profile"]["unixSockets"],
        json!([granted])
    );
    assert!(server(&hubs, "open")["sandbox"].get("closes").is_none());
    let (_, _, human) = cli_json(&config, &["servers"], &env).await;
    assert!(human.contains(&format!("Unix sockets: {h}")), "{human}");
}

/// Another server's command line holding a token (as `mcp-remote --header "Authorization:
/// Bearer …"` has it) is read unconfined and not confined, by the server or its children:
/// a confined server sees only its own processes. Where unprivileged user namespaces are
/// missing (simulated), the server still runs, and `servers` says /proc is shared.
#[tokio::test]
async fn other_processes_command_lines_are_hidden_from_a_confined_server() {
    let sc = Scratch::new();
    let (home, _) = home_env(&sc);
    let token = "tok_0penpact_s3cret";
    let config = sc.servers(
        json!({
            "remote": {"command": FIXTURE, "args": ["--name", format!("Authorization: Bearer {token}")]},
            "open": {"command": FIXTURE, "args": ["--hostile"], "sandbox": false},
            "h": {"command": FIXTURE, "args": ["--hostile"]},
        }),
        None,
    );
    let find = json!({"find": token});
    let env = [("HOME", s(&home))];
    let mut hub = serve_with(&config, &[], &env).await;
    ready(
        &mut hub.client,
        &["remote:echo", "open:try_proc", "h:try_proc"],
    )
    .await;
    let got = try_tool(&mut hub, "open:try_proc", find.clone()).await;
    assert!(got.starts_with("ok: ") && got.contains(token), "{got}");
    let got = try_tool(&mut hub, "h:try_proc", find.clone()).await;
    assert!(got.starts_with("failed: "), "{got}");
    let hub_pid = hub.child.id().unwrap();
    let got = try_tool(&mut hub, "h:try_proc", json!({"pid": hub_pid})).await;
    assert!(!got.contains("serve"), "the hub's command line: {got}");
    let got = try_tool(
        &mut hub,
        "h:try_spawn",
        json!({"tool": "try_proc", "arguments": find.clone()}),
    )
    .await;
    assert!(got.contains("child said: failed: "), "{got}");
    // Not even root (as CI runs) uncovers the machine's /proc by unmounting the fresh one.
    for umount in ["/bin/umount", "/usr/bin/umount"].map(Path::new) {
        if umount.exists() {
            let got = try_tool(
                &mut hub,
                "h:try_exec",
                json!({"program": s(umount), "args": ["-l", "/proc"]}),
            )
            .await;
            assert!(!got.starts_with("ok: exit 0"), "{got}");
            let got = try_tool(&mut hub, "h:try_proc", find.clone()).await;
            assert!(got.starts_with("failed: "), "after umount: {got}");
            break;
        }
    }
    // Its own processes stay readable (runtimes read /proc/self).
    let got = try_tool(&mut hub, "h:try_proc", json!({})).await;
    assert!(
        got.starts_with("ok: ") && got.contains("--hostile"),
        "{got}"
    );
    let (_, hubs, out) = cli_json(&config, &["servers", "--json"], &env).await;
    assert_eq!(
        server(&hubs, "h")["sandbox"]["closes"]["proc"],
        "PID namespace: its own processes only",
        "{out}"
    );
    hub.close().await;

    let simulated = [
        ("HOME", s(&home)),
        ("OPENPACT_SANDBOX_SIMULATE_NO_USERNS", "1"),
    ];
    let mut hub = serve_with(&config, &[], &simulated).await;
    ready(&mut hub.client, &["remote:echo", "h:try_proc"]).await;
    let got = try_tool(&mut hub, "h:try_proc", find).await;
    assert!(got.contains(token), "today's behaviour: {got}");
    let (_, _, human) = cli_json(&config, &["servers"], &simulated).await;
    assert!(
        human.contains("/proc: shared (unprivileged user namespaces are unavailable"),
        "{human}"
    );
}

/// A home outside the temp dirs (which are closed to every server anyway) laid out like a
/// developer's: a package npx has run before, a uv cache, and the variables the hub runs
/// with.
fn developer_home(root: &Path) -> (std::path::PathBuf, Vec<(&'static str, String)>) {
    let home = root.join("home");
    let pkg = home.join(".npm/_npx/0a1b2c3d4e5f/node_modules/some-server");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("index.js"), "console.log('original');\n").unwrap();
    std::fs::create_dir_all(home.join(".cache/uv/archive-v0")).unwrap();
    std::fs::write(home.join(".cache/uv/CACHEDIR.TAG"), "Signature").unwrap();
    let env = vec![
        ("HOME", s(&home).to_string()),
        ("XDG_DATA_HOME", s(&home.join(".local/share")).to_string()),
        ("XDG_CACHE_HOME", s(&home.join(".cache")).to_string()),
    ];
    (home, env)
}

/// The first way out: code a confined server plants in a shared package cache is run later
/// by an unconfined server (or the user's own `npx`). Confined, the shared caches are
/// read-only; with `"sandbox": false` the plant works and the planted code runs.
#[tokio::test]
async fn a_confined_server_cannot_plant_code_in_the_shared_package_caches() {
    let outside_temp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (home, env) = developer_home(outside_temp.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let sc = Scratch::new();
    let config = sc.servers(
        json!({
            "c": {"command": FIXTURE, "args": ["--hostile"]},
            "u": {"command": FIXTURE, "args": ["--hostile"], "sandbox": false},
        }),
        None,
    );
    let planted = home.join(".npm/_npx/0a1b2c3d4e5f/node_modules/some-server/index.js");
    let code = "console.log('PLANTED ' + process.pid);\n";
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["c:try_write", "u:try_write"]).await;
    for target in [
        planted.clone(),
        home.join(".npm/_npx/0a1b2c3d4e5f/node_modules/.bin/some-server"),
        home.join(".cache/uv/archive-v0/planted.py"),
    ] {
        let got = try_tool(
            &mut hub,
            "c:try_write",
            json!({"path": s(&target), "text": code}),
        )
        .await;
        assert!(got.starts_with("failed: "), "{}: {got}", target.display());
    }
    // Still readable: npx may reuse what the user fetched.
    let got = try_tool(&mut hub, "c:try_read", json!({"path": s(&planted)})).await;
    assert!(got.contains("original"), "{got}");
    let got = try_tool(
        &mut hub,
        "u:try_write",
        json!({"path": s(&planted), "text": code}),
    )
    .await;
    assert!(got.starts_with("ok: "), "{got}");
    let got = try_tool(
        &mut hub,
        "u:try_exec",
        json!({"program": "node", "args": [s(&planted)]}),
    )
    .await;
    assert!(got.contains("PLANTED"), "the planted code runs: {got}");
}

/// A confined server's package managers write to caches of its own (kept across restarts,
/// out of every other server's reach), and `servers` / `config check` say so.
#[tokio::test]
async fn a_confined_server_has_package_caches_of_its_own() {
    let outside_temp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (home, env) = developer_home(outside_temp.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let sc = Scratch::new();
    let config = sc.servers(
        json!({
            "a": {"command": FIXTURE, "args": ["--hostile"]},
            "b": {"command": FIXTURE, "args": ["--hostile"]},
        }),
        None,
    );
    let own = home.join(".cache/openpact/servers/a");
    let mut hub = serve_with(&config, &[], &env).await;
    ready(&mut hub.client, &["a:try_env", "b:try_list"]).await;
    for (name, sub) in [
        ("npm_config_cache", "npm"),
        ("UV_CACHE_DIR", "uv"),
        ("UV_TOOL_DIR", "uv/tools"),
        ("PIP_CACHE_DIR", "pip"),
        ("PIPX_HOME", "pipx"),
    ] {
        let got = try_tool(&mut hub, "a:try_env", json!({"name": name})).await;
        assert_eq!(got, format!("ok: {}", s(&own.join(sub))), "{name}");
    }
    let cached = own.join("npm/_npx/0a1b/node_modules/x/index.js");
    std::fs::create_dir_all(cached.parent().unwrap()).unwrap();
    let got = try_tool(&mut hub, "a:try_write", json!({"path": s(&cached)})).await;
    assert!(got.starts_with("ok: "), "{got}");
    for (tool, path) in [("b:try_list", &own), ("b:try_write", &cached)] {
        let got = try_tool(&mut hub, tool, json!({"path": s(path)})).await;
        assert!(got.starts_with("failed: "), "{tool}: {got}");
    }
    hub.close().await;
    let (_, hubs, out) = cli_json(&config, &["servers", "--json"], &env).await;
    let caches = &server(&hubs, "a")["sandbox"]["closes"]["packageCaches"];
    assert_eq!(caches["private"], json!(s(&own)), "{out}");
    let shared = caches["sharedReadOnly"].to_string();
    assert!(
        shared.contains(s(&home.join(".npm"))) && shared.contains(s(&home.join(".cache"))),
        "{out}"
    );
    let (_, _, human) = cli_json(&config, &["config", "check"], &env).await;
    assert!(
        human.contains(&format!("package caches: its own at {}", s(&own)))
            && human.contains("write: its own TMPDIR, its data folder, its package caches"),
        "{human}"
    );
}

/// A Node older than 22.21 / 24.5 ignores `NODE_USE_ENV_PROXY`, so a confined server's own
/// requests cannot reach even an allowed host: said at start and in `servers` / `config
/// check`, with the fix; a newer Node (itself or first on the entry's `PATH` for `npx`), or
/// `"network": true`, is not warned about.
#[tokio::test]
async fn a_node_that_ignores_the_proxy_is_named_with_the_fix() {
    let Some(peers) = Peers::get() else { return };
    let node = peers.command("PEER_NODE").remove(0);
    let node22 = peers.command("PEER_NODE22").remove(0);
    let version = std::process::Command::new(&node)
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let (major, minor): (u32, u32) = {
        let mut it = version.trim_start_matches('v').split('.');
        (
            it.next().unwrap().parse().unwrap(),
            it.next().unwrap().parse().unwrap(),
        )
    };
    let node_is_old = match major {
        22 => minor < 21,
        24 => minor < 5,
        m => m < 25,
    };
    let memory = peers.command("PEER_MEMORY").remove(1);
    let node22_dir = s(Path::new(&node22).parent().unwrap()).to_string();
    let node_dir = s(Path::new(&node).parent().unwrap()).to_string();
    let sc = Scratch::new();
    let config = sc.servers(
        json!({
            "old": {"command": node, "args": [memory]},
            "new": {"command": node22, "args": [memory]},
            "open": {"command": node, "args": [memory], "sandbox": {"network": true}},
            "npx-old": {"command": "npx", "args": ["--version"], "env": {"PATH": format!("{node_dir}:/usr/bin:/bin")}},
            "npx-new": {"command": "npx", "args": ["--version"], "env": {"PATH": format!("{node22_dir}:/usr/bin:/bin")}},
        }),
        None,
    );
    let (_, v, out) = cli_json(&config, &["config", "check", "--json"], &[]).await;
    let warnings = |name: &str| {
        v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {out}"))["sandbox"]["warnings"]
            .to_string()
    };
    for name in ["new", "open", "npx-new"] {
        assert_eq!(warnings(name), "null", "{name}: {out}");
    }
    for name in ["old", "npx-old"] {
        let w = warnings(name);
        if node_is_old {
            assert!(
                w.contains(&format!("Node {version}"))
                    && w.contains("ignores proxy settings")
                    && w.contains("22.21 / 24.5")
                    && w.contains("\\\"network\\\": true"),
                "{name}: {w}"
            );
        } else {
            assert_eq!(w, "null", "{name}: {out}");
        }
    }
    if !node_is_old {
        return;
    }
    let (_, _, human) = cli_json(&config, &["config", "check"], &[]).await;
    assert!(
        human.contains(&format!("warning: Node {version}")),
        "{human}"
    );
    let mut hub = serve_with(&config, &[], &[]).await;
    ready(&mut hub.client, &["old:read_graph", "new:read_graph"]).await;
    hub.wait_log("ignores proxy settings", WAIT).await;
    let log = hub.stderr();
    assert!(log.contains("old") && log.contains(&version), "{log}");
}

/// A server that ends during its start after the egress proxy refused it a host (an install
/// script's download on a first `npx -y`, as puppeteer's Chrome) is told the host and both
/// ways to avoid it: the package's skip variable or allowing the host.
#[tokio::test]
async fn a_download_refused_during_start_names_the_host_and_the_fix() {
    let sc = Scratch::new();
    let download = "import urllib.request\nurllib.request.urlopen('https://storage.googleapis.com/chrome-for-testing-public/x.zip', timeout=20)";
    let config = sc.servers(
        json!({"dl": {"command": "python3", "args": ["-c", download]}}),
        None,
    );
    let (_, hubs, out) = cli_json(&config, &["servers", "--json"], &[]).await;
    let dl = server(&hubs, "dl");
    assert_eq!(dl["state"], "failed", "{out}");
    let reason = dl.to_string();
    assert!(
        reason.contains("refused storage.googleapis.com:443 during its start")
            && reason.contains("PUPPETEER_SKIP_DOWNLOAD=1")
            && reason.contains(&format!(
                "`openpact --config {} sandbox allow dl net storage.googleapis.com`",
                config.display()
            )),
        "{out}"
    );
}

/// A HOME and a server's install in the same temp folder (a scratch home, a checkout in
/// `/tmp`): the install folder and the home stay readable, the home's credentials and the
/// rest of that temp folder do not.
#[tokio::test]
async fn a_home_and_an_install_in_one_temp_folder_keep_working() {
    let sc = Scratch::new();
    hostile_home(&sc);
    let root = sc.path().to_path_buf();
    let install = root.join("install");
    std::fs::create_dir_all(install.join("bin")).unwrap();
    std::fs::create_dir_all(install.join("lib")).unwrap();
    std::fs::write(install.join("lib/data.txt"), "installed data").unwrap();
    let program = install.join("bin/openpact-fixture");
    std::fs::hard_link(FIXTURE, &program)
        .or_else(|_| std::fs::copy(FIXTURE, &program).map(|_| ()))
        .unwrap();
    let settings = root.join("home/.config/tool/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "user settings").unwrap();
    let config = sc.servers(
        json!({"h": {"command": s(&program), "args": ["--hostile"], "cwd": s(&root.join("work"))}}),
        None,
    );
    let mut hub = serve_with(&config, &[], &[("HOME", s(&root.join("home")))]).await;
    ready(&mut hub.client, &["h:try_read"]).await;
    for (path, want) in [
        (install.join("lib/data.txt"), Some("installed data")),
        (settings.clone(), Some("user settings")),
        (root.join("private/secret.txt"), None),
        (root.join("home/.ssh/id_ed25519"), None),
    ] {
        let got = try_tool(&mut hub, "h:try_read", json!({"path": s(&path)})).await;
        match want {
            Some(want) => assert_eq!(got, format!("ok: {want}"), "{}", path.display()),
            None => assert!(got.starts_with("failed: "), "{}: {got}", path.display()),
        }
    }
}
