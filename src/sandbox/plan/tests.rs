//! The plans of real configs: what each server may touch, how it runs on machines with and
//! without the kernel's mechanisms, and how its plan is shown and launched.

use super::*;
use crate::sandbox::*;

/// Plans for the servers of `text` (config beside `dir`) with this support.
fn plans_of(dir: &Path, text: &str, support: Support) -> Vec<Plan> {
    let mechanisms = Mechanisms {
        unix_paths: false,
        pid_namespace: Ok(()),
    };
    plans_with(dir, text, support, &mechanisms)
}

fn plans_with(dir: &Path, text: &str, support: Support, mechanisms: &Mechanisms) -> Vec<Plan> {
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let hub_env: Vec<(String, String)> = [
        ("HOME", home.to_str().unwrap()),
        ("PATH", "/usr/bin:/bin"),
        ("GITHUB_TOKEN", "t"),
        ("LANG", "C.UTF-8"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let lookup = |k: &str| hub_env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let config = crate::config::parse(text, &dir.join("mcp.json"), &lookup).unwrap();
    let temp_root = dir.join("tmp-root");
    let cx = Context {
        settings: &config.hub.sandbox,
        hub_env: &hub_env,
        support: &support,
        mechanisms,
        cwd: dir,
        own_dirs: &[dir.join("state")],
        temp_root: &temp_root,
        data_root: &dir.join("data-root"),
        cache_root: &dir.join("cache-root"),
    };
    config.servers.iter().map(|s| plan(s, &cx)).collect()
}

#[test]
fn the_default_profile_guards_credentials_and_grants_what_the_server_works_on() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::create_dir_all(dir.join("pkg/dist")).unwrap();
    std::fs::create_dir_all(dir.join("state")).unwrap();
    std::fs::write(dir.join("pkg/dist/index.js"), "").unwrap();
    std::fs::write(dir.join("bin/tool"), "#!/bin/sh\n").unwrap();
    crate::platform::set_mode(&dir.join("bin/tool"), 0o755).unwrap();
    let plans = plans_of(
        &dir,
        r#"{"mcpServers": {
            "a": {"command": "/bin/sh", "args": ["-c", "x", "./data", "/"], "env": {"K": "v"}},
            "b": {"command": "/bin/sh", "sandbox": false},
            "c": {"command": "/bin/sh", "sandbox": {"network": {"allow": ["example.com"]}, "env": ["GITHUB_TOKEN"]}},
            "d": {"command": "/bin/sh", "sandbox": {"network": false, "filesystem": {"deny": ["data"]}}, "args": ["./data"]},
            "r": {"command": "/bin/sh", "args": ["-c", "docker"]},
            "t": {"command": "./bin/tool"},
            "s": {"command": "/bin/sh", "args": ["./pkg/dist/index.js", "/etc/passwd"], "env": {"DB": "./state/new.db"}}
        }}"#,
        Support::Full,
    );
    let a = plans[0].profile.as_ref().unwrap();
    assert_eq!(plans[0].mode, Mode::Enforced);
    assert!(a.write.contains(&dir.join("data")), "{:?}", a.write);
    // The cwd holds the home directory here: too broad to grant.
    assert!(!a.write.contains(&dir), "{:?}", a.write);
    assert!(!a.write.contains(&PathBuf::from("/")), "{:?}", a.write);
    assert!(a.deny.contains(&dir.join("home/.ssh")) && a.deny.contains(&dir.join("state")));
    assert!(a.env.contains(&"K".to_string()) && a.env.contains(&"LANG".to_string()));
    assert!(!a.env.contains(&"GITHUB_TOKEN".to_string()));
    assert!(matches!(&a.network, Network::Proxy(h) if h.len() == REGISTRIES.len()));
    assert!(matches!(plans[1].mode, Mode::Off { .. }) && plans[1].profile.is_none());
    let c = plans[2].profile.as_ref().unwrap();
    assert!(c.env.contains(&"GITHUB_TOKEN".to_string()));
    assert!(
        matches!(&c.network, Network::Proxy(h) if h.iter().any(|h| h.as_str() == "example.com"))
    );
    let d = plans[3].profile.as_ref().unwrap();
    assert_eq!(d.network, Network::None);
    // Shown names include the proxy's variables where the network goes through it.
    assert!(a.env.contains(&"HTTPS_PROXY".to_string()), "{:?}", a.env);
    assert!(!d.env.contains(&"HTTPS_PROXY".to_string()), "{:?}", d.env);
    assert!(
        !d.write.contains(&dir.join("data")),
        "deny wins: {:?}",
        d.write
    );
    assert_eq!(
        plans[4].mode,
        Mode::Enforced,
        "`docker` as an argument is not a launch"
    );
    let rules = a.confinement(Some(4242));
    assert_eq!(rules.network, NetRule::Proxy(4242));
    assert!(rules.carve.contains(&PathBuf::from("/tmp")));
}

#[test]
fn each_way_out_shows_the_mechanism_this_kernel_closes_it_with() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"{"mcpServers": {
        "a": {"command": "/bin/sh"},
        "g": {"command": "/bin/sh", "sandbox": {"unixSockets": ["/run/docker.sock"]}}
    }}"#;
    let before_abi_9 = Mechanisms {
        unix_paths: false,
        pid_namespace: Ok(()),
    };
    let plans = plans_with(dir.path(), text, Support::Full, &before_abi_9);
    let (a, g) = (&plans[0], &plans[1]);
    assert_eq!(a.profile.as_ref().unwrap().unix, UnixRule::Seccomp);
    // seccomp cannot tell one socket file from another: a grant opens them all.
    assert_eq!(g.profile.as_ref().unwrap().unix, UnixRule::Open);
    let closes = &a.to_json()["closes"];
    assert_eq!(
        closes["unixSockets"],
        "seccomp: no socket(AF_UNIX), socket pairs only"
    );
    assert_eq!(closes["proc"], "PID namespace: its own processes only");
    assert_eq!(
        g.to_json()["closes"]["unixSockets"],
        "any (granted /run/docker.sock; limiting to it needs Landlock ABI 9, Linux 7.1)"
    );
    assert!(a.profile.as_ref().unwrap().confinement(None).pid_namespace);

    let abi_9_without_userns = Mechanisms {
        unix_paths: true,
        pid_namespace: Err("no user namespaces here".into()),
    };
    let plans = plans_with(dir.path(), text, Support::Full, &abi_9_without_userns);
    let (a, g) = (&plans[0], &plans[1]);
    assert_eq!(
        g.profile.as_ref().unwrap().unix,
        UnixRule::Landlock(vec!["/run/docker.sock".into()])
    );
    let rules = a.profile.as_ref().unwrap().confinement(None);
    assert_eq!(rules.unix, UnixRule::Landlock(Vec::new()));
    assert!(!rules.pid_namespace);
    let lines = describe(&g.to_json());
    assert!(
        lines.contains(
            &"Unix sockets: Landlock: only sockets beneath its write grants and /run/docker.sock"
                .to_string()
        ),
        "{lines:?}"
    );
    assert!(
        lines.contains(
            &"/proc: shared (no user namespaces here): other processes' command lines are readable"
                .to_string()
        ),
        "{lines:?}"
    );
    // Nothing closes them for a server the kernel does not confine.
    let plans = plans_with(
        dir.path(),
        text,
        Support::Missing("no Landlock".into()),
        &before_abi_9,
    );
    assert!(plans[0].to_json().get("closes").is_none());
}

#[test]
fn a_script_checked_out_in_a_temp_dir_may_read_its_packages_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    // The checkout: a folder in the temp dir with node_modules, away from the home dir.
    let checkout = tempfile::tempdir().unwrap();
    let checkout = checkout.path().canonicalize().unwrap();
    let script = checkout.join("node_modules/@scope/server/dist/index.js");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "").unwrap();
    std::fs::create_dir_all(dir.join("tmp-root/x")).unwrap();
    std::fs::write(dir.join("tmp-root/x/s.js"), "").unwrap();
    let text = r#"{"mcpServers": {
        "n": {"command": "/bin/sh", "args": ["SCRIPT"]},
        "t": {"command": "/bin/sh", "args": ["OWN"]},
        "w": {"command": "/bin/sh", "args": ["/tmp"]}
    }}"#
    .replace("SCRIPT", script.to_str().unwrap())
    .replace("OWN", dir.join("tmp-root/x/s.js").to_str().unwrap());
    let plans = plans_of(&dir, &text, Support::Full);
    let n = plans[0].profile.as_ref().unwrap();
    if checkout.starts_with("/tmp") {
        assert!(n.read.contains(&checkout), "{:?}", n.read);
    }
    // Never the folder that holds the hub's private temp dirs, nor a temp root itself.
    let t = plans[1].profile.as_ref().unwrap();
    assert!(!t.read.contains(&dir), "{:?}", t.read);
    let w = plans[2].profile.as_ref().unwrap();
    assert!(!w.read.contains(&PathBuf::from("/tmp")), "{:?}", w.read);
}

#[test]
fn a_home_in_a_temp_dir_keeps_its_installs_and_itself_readable() {
    // `plans_of` puts HOME in `dir/home`: a scratch dir, in the temp dir as a test's is.
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let script = dir.join("install/node_modules/@scope/server/dist/index.js");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "").unwrap();
    let text = r#"{"mcpServers": {"n": {"command": "/bin/sh", "args": ["SCRIPT"]}}}"#
        .replace("SCRIPT", script.to_str().unwrap());
    let plans = plans_of(&dir, &text, Support::Full);
    let n = plans[0].profile.as_ref().unwrap();
    // The install beside the home, not the folder that holds both.
    assert!(n.read.contains(&dir.join("install")), "{:?}", n.read);
    assert!(n.read.contains(&dir.join("home")), "{:?}", n.read);
    assert!(!n.read.contains(&dir), "{:?}", n.read);
    let rules = n.confinement(None);
    assert!(rules.carve.contains(&dir.join("home/.ssh")), "{rules:?}");
}

#[test]
fn where_the_machine_cannot_confine_required_refuses_and_otherwise_runs_unconfined() {
    let dir = tempfile::tempdir().unwrap();
    let missing = || Support::Missing("no Landlock here".into());
    let text = r#"{"mcpServers": {"a": {"command": "/bin/sh"}}, "openpact": {"sandbox": {"required": REQ}}}"#;
    let refused = plans_of(dir.path(), &text.replace("REQ", "true"), missing());
    assert!(
        matches!(&refused[0].mode, Mode::Refused { reason } if reason.contains("no Landlock here"))
    );
    assert!(refused[0].launch(Path::new("/bin/sh"), &[], None).is_err());
    let unconfined = plans_of(dir.path(), &text.replace("REQ", "false"), missing());
    assert!(matches!(unconfined[0].mode, Mode::Unconfined { .. }));
    let off = plans_of(
        dir.path(),
        r#"{"mcpServers": {"a": {"command": "/bin/sh"}, "b": {"command": "/bin/sh", "sandbox": true}}, "openpact": {"sandbox": {"default": "off"}}}"#,
        Support::Full,
    );
    assert!(matches!(off[0].mode, Mode::Off { .. }));
    assert_eq!(off[1].mode, Mode::Enforced);
}

#[test]
fn private_folders_stay_in_their_roots_and_home_grants_are_made() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let plans = plans_of(
        &dir,
        r#"{"mcpServers": {
            "../up": {"command": "/bin/sh"},
            "a/b": {"command": "/bin/sh", "sandbox": {"filesystem": {"write": ["~/.new/deep", "~/../escape", "~/app.db"], "read": ["~/.kube/config"]}}}
        }}"#,
        Support::Full,
    );
    let up = plans[0].profile.as_ref().unwrap();
    assert_eq!(up.data, dir.join("data-root/..%2Fup"));
    assert_eq!(up.tmpdir, dir.join("tmp-root/..%2Fup"));
    assert!(up.write.contains(&up.data), "{:?}", up.write);
    let ab = plans[1].profile.as_ref().unwrap();
    assert_eq!(ab.data, dir.join("data-root/a%2Fb"));
    // Only folders it writes below the home folder, never by way of `..`, never a file to
    // be, never what it only reads (a `~/.kube/config` folder would break kubectl).
    assert_eq!(ab.create, [dir.join("home/.new/deep")]);
    assert_eq!(folder_name(".."), "%2E%2E");
}

#[test]
fn a_known_server_gets_its_grants_under_the_layers_the_user_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    // Runners that exist (a missing command makes the server unavailable, with no plan).
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    for runner in ["uvx", "npx", "docker"] {
        std::fs::write(dir.join("bin").join(runner), "#!/bin/sh\n").unwrap();
        crate::platform::set_mode(&dir.join("bin").join(runner), 0o755).unwrap();
    }
    let bin = |text: &str| text.replace("BIN", dir.join("bin").to_str().unwrap());
    let plans = plans_of(
        &dir,
        &bin(r#"{"mcpServers": {
            "fetch": {"command": "BIN/uvx", "args": ["mcp-server-fetch"]},
            "narrow": {"command": "BIN/uvx", "args": ["mcp-server-fetch"], "sandbox": {"network": {"allow": ["example.com"]}}},
            "kube": {"command": "BIN/npx", "args": ["-y", "mcp-server-kubernetes"]},
            "gh": {"command": "BIN/docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"]},
            "plain": {"command": "/bin/sh"}
        }}"#),
        Support::Full,
    );
    let name = |p: &Plan| p.known.as_ref().map(|k| k.entry.name.clone());
    assert_eq!(name(&plans[0]).as_deref(), Some("fetch"));
    // Any public host, through the proxy.
    assert!(matches!(&plans[0].profile.as_ref().unwrap().network,
        Network::Proxy(h) if h.contains(&HostPattern::any_public())));
    // The entry's own network choice wins over the table's "any host".
    assert!(matches!(&plans[1].profile.as_ref().unwrap().network,
        Network::Proxy(h) if h.iter().any(|h| h.as_str() == "example.com")
            && !h.contains(&HostPattern::any_public())));
    let kube = plans[2].profile.as_ref().unwrap();
    let home = dir.join("home");
    assert!(
        kube.read.contains(&home.join(".kube/config")),
        "{:?}",
        kube.read
    );
    assert!(
        kube.deny.contains(&home.join(".kube")),
        "the rest stays denied"
    );
    // What it reads is not made; the folder it writes is.
    assert_eq!(kube.create, [home.join(".kube/cache")]);
    // An image: contained by its runtime; only the entry's variables apply.
    assert!(matches!(plans[3].mode, Mode::Runtime { .. }));
    assert_eq!(name(&plans[3]).as_deref(), Some("github"));
    let names = &plans[3].env.as_ref().unwrap().names;
    assert!(names.contains(&"GITHUB_HOST".to_string()), "{names:?}");
    // A secret passes only when the user names it (here no `-e`): never by the table.
    assert!(
        !names.contains(&"GITHUB_PERSONAL_ACCESS_TOKEN".to_string()),
        "{names:?}"
    );
    assert_eq!(name(&plans[4]), None);
    // The hub's network: false holds every server, known or not; its "known": false drops
    // the table for all but an entry that says "known": true.
    let plans = plans_of(
        &dir,
        &bin(r#"{"mcpServers": {
            "fetch": {"command": "BIN/uvx", "args": ["mcp-server-fetch"]},
            "kube": {"command": "BIN/npx", "args": ["-y", "mcp-server-kubernetes"], "sandbox": {"known": true}}
        }, "openpact": {"sandbox": {"profile": {"network": false, "known": false}}}}"#),
        Support::Full,
    );
    assert_eq!(name(&plans[0]), None);
    assert_eq!(plans[0].profile.as_ref().unwrap().network, Network::None);
    assert_eq!(name(&plans[1]).as_deref(), Some("kubernetes"));
    assert_eq!(plans[1].profile.as_ref().unwrap().network, Network::None);
}

#[test]
fn container_launches_pass_the_runtime_and_its_named_variables() {
    assert_eq!(
        container_runtime(
            "docker",
            Path::new("/usr/bin/docker"),
            &["run".into(), "-i".into()]
        ),
        Some("docker".into())
    );
    assert_eq!(
        container_runtime("docker", Path::new("/usr/bin/docker"), &["ps".into()]),
        None
    );
    let args: Vec<String> = ["run", "-e", "A_TOKEN", "--env=B", "-e", "C=1", "img"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(container_env_names(&args), ["A_TOKEN", "B"]);
}
