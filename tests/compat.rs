//! The compatibility suite: popular community MCP servers, pinned in `fixtures/peers/compat`
//! and installed by `.ci/compat.sh`, each launched the way its README says (`npx -y PKG` run
//! from the install, the PyPI ones by the command `uvx PKG` would run) under the default
//! sandbox profile with no `sandbox` key, in a home laid out like a developer's. Each must
//! start, list its tools and complete one offline call a user would make, while the hostile
//! fixture in the same hub is still refused a key and a connection. Skipped unless
//! `OPENPACT_COMPAT_JSON` names the install (`.ci/compat.sh` sets it; with
//! `OPENPACT_REQUIRE_COMPAT=1` a missing install fails instead).
//!
//! Servers whose README launch needs more than the default profile (a folder under home, a
//! file it reads, a host) are kept here on purpose, with that need in a comment: the table of
//! known servers is what must give it to them, not a `sandbox` key in this test.

use crate::http_face::{fx, http_hub};
use crate::support::{
    FIXTURE, Hub, Scratch, Stand, accept, answer, is_error, names, non_loopback_address, reply, s,
    send_call, serve_with,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long the whole set may take to list its tools: sixteen servers start at once on a
/// busy 2-core machine, chroma's import alone takes seconds.
const START_LIMIT: Duration = Duration::from_secs(120);
/// How long the calls, sent together, may take to be answered.
const CALL_LIMIT: Duration = Duration::from_secs(120);

/// How long no question may come before the calls start.
const QUIET: Duration = Duration::from_secs(3);

const FAKE_KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- fake compat key";

/// The install `.ci/compat.sh` wrote (`compat.json`): the npm project dir, `npx`, and each PyPI
/// server's console script.
struct Install {
    dir: PathBuf,
    npx: String,
    /// The folder of a Node 22 binary, for the server that needs a Node honouring the proxy.
    node22_bin: String,
    python: serde_json::Map<String, Value>,
}

impl Install {
    fn get() -> Option<Install> {
        let Ok(path) = std::env::var("OPENPACT_COMPAT_JSON") else {
            if std::env::var("OPENPACT_REQUIRE_COMPAT").as_deref() == Ok("1") {
                panic!(
                    "the compatibility suite is required but OPENPACT_COMPAT_JSON is unset; run `bash .ci/compat.sh`"
                );
            }
            eprintln!(
                "SKIPPED: compatibility suite not installed (OPENPACT_COMPAT_JSON unset); run `bash .ci/compat.sh`"
            );
            return None;
        };
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!("OPENPACT_COMPAT_JSON={path} is unreadable ({e}); run `bash .ci/compat.sh`")
        });
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        Some(Install {
            dir: PathBuf::from(v["dir"].as_str().unwrap()),
            npx: v["npx"].as_str().unwrap().to_string(),
            node22_bin: v["node22_bin"].as_str().unwrap().to_string(),
            python: v["python"].as_object().unwrap().clone(),
        })
    }

    /// `npx -y PKG ARGS` as the READMEs write it, run from a folder inside the install so that
    /// npx finds the pinned package there and downloads nothing (not even into a private
    /// cache). Not from the install itself: a server may write in its working directory, and
    /// one server must not get to rewrite the others' code.
    fn npx(&self, package: &str, args: &[&str]) -> Value {
        let mut words = vec!["-y".to_string(), package.to_string()];
        words.extend(args.iter().map(|a| a.to_string()));
        let cwd = self.dir.join("run");
        std::fs::create_dir_all(&cwd).unwrap();
        json!({"command": self.npx, "args": words, "cwd": s(&cwd)})
    }

    /// What `uvx NAME ARGS` runs: the package's console script, from its own venv.
    fn uvx(&self, name: &str, args: &[&str]) -> Value {
        let program = self.python[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name} missing in compat.json"));
        json!({"command": program, "args": args})
    }
}

/// One server of the suite: its entry, a tool it must list, and the call a user would make
/// with the text its answer must contain (None: listing is all it can do offline).
struct Case {
    name: &'static str,
    entry: Value,
    listed: &'static str,
    call: Option<(&'static str, Value, String)>,
}

/// A home as a developer's looks: keys, a kube config, git identity, package caches in use,
/// and projects (one a git repository, one a document).
fn developer_home(home: &Path, kube_port: u16) {
    for d in [
        ".ssh",
        ".kube",
        ".npm",
        ".cache",
        "projects/notes",
        "projects/shop",
    ] {
        std::fs::create_dir_all(home.join(d)).unwrap();
    }
    std::fs::write(home.join(".ssh/id_rsa"), FAKE_KEY).unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Dev\n\temail = dev@example.com\n[init]\n\tdefaultBranch = main\n",
    )
    .unwrap();
    // A cluster nobody answers for: only local reads of the config can succeed.
    std::fs::write(
        home.join(".kube/config"),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: dev-cluster\n  cluster:\n    server: https://127.0.0.1:{kube_port}\ncontexts:\n- name: dev-context\n  context:\n    cluster: dev-cluster\n    user: dev\ncurrent-context: dev-context\nusers:\n- name: dev\n  user:\n    token: fake-kube-token\n"
        ),
    )
    .unwrap();
    let notes = home.join("projects/notes");
    std::fs::write(
        notes.join("README.md"),
        "# Release notes\n\nThe compat suite reads this.\n",
    )
    .unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&notes)
            .env("HOME", home)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "README.md"]);
    git(&["commit", "-q", "-m", "first notes"]);
    std::fs::write(notes.join("draft.txt"), "not yet added").unwrap();
}

/// `entry` with the environment variable `name` set to `value`.
fn with_env(mut entry: Value, name: &str, value: &str) -> Value {
    entry["env"] = json!({ name: value });
    entry
}

/// Whether the hub logged that server `name` failed to start (it will not list tools).
fn failed_to_start(hub: &Hub, name: &str) -> bool {
    let tag = format!(" server={name}");
    hub.stderr()
        .lines()
        .any(|l| l.contains("failed to start") && l.trim_end().ends_with(&tag))
}

/// Answers `m` if it is the hub's question (`elicitation/create`) as a user would: a host
/// one of `once_for` wants is allowed once, anything else declined; records the question.
async fn answered(
    hub: &mut Hub,
    m: &Value,
    once_for: &[&str],
    questions: &mut Vec<String>,
) -> bool {
    if m["method"] != "elicitation/create" {
        return false;
    }
    let question = m["params"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let once = once_for
        .iter()
        .any(|name| question.starts_with(&format!("openpact: server {name} wants ")));
    let result = if once {
        accept("once")
    } else {
        json!({"action": "decline"})
    };
    answer(&mut hub.client, m, result).await;
    questions.push(question);
    true
}

/// Sends every call at once and collects the answers by id until all came or `limit`,
/// answering the hub's questions meanwhile (see [`answered`]) and recording them in
/// `questions`.
async fn call_all(
    hub: &mut Hub,
    calls: &[(String, Value)],
    once_for: &[&str],
    questions: &mut Vec<String>,
    limit: Duration,
) -> BTreeMap<String, Value> {
    let mut pending = BTreeMap::new();
    for (tool, args) in calls {
        let id = send_call(&mut hub.client, tool, args.clone()).await;
        pending.insert(id.to_string(), tool.clone());
    }
    let mut answers = BTreeMap::new();
    let deadline = Instant::now() + limit;
    while !pending.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        // What came while the tools were listed first: a question asked then waits too.
        let next = match hub.client.inbox.pop_front() {
            Some(m) => Some(m),
            None => hub.client.recv(left).await,
        };
        let Some(m) = next else {
            break;
        };
        if answered(hub, &m, once_for, questions).await || m.get("method").is_some() {
            continue;
        }
        if let Some(tool) = m.get("id").and_then(|id| pending.remove(&id.to_string())) {
            answers.insert(tool, m);
        }
    }
    answers
}

/// A developer's home (see [`developer_home`]) whose kube config names an unused loopback
/// port, in a folder kept until the first value is dropped. Not under the temp dirs, which
/// the default profile keeps private to each server: a developer's home is not there either.
fn scratch_home() -> (tempfile::TempDir, PathBuf) {
    let outside_temp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = outside_temp.path().join("home");
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let kube_port = unused.local_addr().unwrap().port();
    drop(unused);
    developer_home(&home, kube_port);
    (outside_temp, home)
}

/// Every text block of a `tools/call` answer, joined.
fn all_text(r: &Value) -> String {
    r["result"]["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn popular_servers_work_under_the_default_profile() {
    let Some(install) = Install::get() else {
        return;
    };
    let t0 = Instant::now();
    let sc = Scratch::new();
    let (_outside_temp, home) = scratch_home();
    let notes = home.join("projects/notes");
    let readme = notes.join("README.md");
    let shop_db = home.join("projects/shop/shop.db");

    // The page mcp-server-fetch fetches, on the machine's own non-loopback address where it
    // has one: loopback and link-local addresses are closed to a confined server unless an
    // entry names them, so only an address like a LAN host's can stand in for a site
    // offline. Where that address is private, "any public host" does not reach it either:
    // the hub asks, and the user (call_all) allows it once.
    let page_ip = non_loopback_address();
    let page = Stand::start_on(page_ip, |seen| {
        if seen.url.ends_with("/robots.txt") {
            reply(404, "text/plain", "none")
        } else {
            reply(
                200,
                "text/html",
                "<html><body><h1>Compat guide</h1><p>Served on loopback.</p></body></html>",
            )
        }
    });
    let page_host = page
        .base
        .trim_start_matches("http://")
        .rsplit_once(':')
        .map(|(h, _)| h.to_string())
        .unwrap();
    // mcp-remote's README: a remote server by URL; here `openpact serve --http` on loopback.
    let remote = http_hub(fx(), None, &[]).await;
    let remote_url = format!("{}/mcp", remote.base);

    let cases = vec![
        Case {
            name: "everything",
            entry: install.npx("@modelcontextprotocol/server-everything", &[]),
            listed: "echo",
            call: Some(("echo", json!({"message": "compat"}), "Echo: compat".into())),
        },
        Case {
            name: "filesystem",
            entry: install.npx("@modelcontextprotocol/server-filesystem", &[s(&notes)]),
            listed: "list_directory",
            call: Some((
                "list_directory",
                json!({"path": s(&notes)}),
                "README.md".into(),
            )),
        },
        // Launched bare, it keeps memory.jsonl beside its own code (in npx's cache, which it
        // may write; not in this install): its README's MEMORY_FILE_PATH puts it in a project.
        Case {
            name: "memory",
            entry: with_env(
                install.npx("@modelcontextprotocol/server-memory", &[]),
                "MEMORY_FILE_PATH",
                s(&notes.join(".memory.jsonl")),
            ),
            listed: "create_entities",
            call: Some((
                "create_entities",
                json!({"entities": [{"name": "Compat", "entityType": "project", "observations": ["runs confined"]}]}),
                "runs confined".into(),
            )),
        },
        Case {
            name: "thinking",
            entry: install.npx("@modelcontextprotocol/server-sequential-thinking", &[]),
            listed: "sequentialthinking",
            call: Some((
                "sequentialthinking",
                json!({"thought": "Check the compat suite", "nextThoughtNeeded": false, "thoughtNumber": 1, "totalThoughts": 1}),
                "\"thoughtNumber\": 1".into(),
            )),
        },
        // Needs: a browser for every tool (none can be downloaded here), so it only lists;
        // writes ~/.cache/ms-playwright-mcp (a cache: allowed) and ~/.playwright-mcp for its
        // output files.
        Case {
            name: "playwright",
            entry: install.npx("@playwright/mcp", &[]),
            listed: "browser_navigate",
            call: None,
        },
        // Needs: host context7.com for both tools (its API), so it only lists.
        Case {
            name: "context7",
            entry: install.npx("@upstash/context7-mcp", &[]),
            listed: "resolve-library-id",
            call: None,
        },
        // Needs: write ~/.claude-server-commander (config.json made at start, tool-call logs).
        Case {
            name: "desktop",
            entry: install.npx("@wonderwhy-er/desktop-commander", &[]),
            listed: "list_directory",
            call: Some((
                "list_directory",
                json!({"path": s(&notes)}),
                "README.md".into(),
            )),
        },
        // Needs: read ~/.kube/config (a credential place, closed by default); the cluster's
        // host for anything beyond the config.
        Case {
            name: "kubernetes",
            entry: install.npx("mcp-server-kubernetes", &[]),
            listed: "kubectl_context",
            call: Some((
                "kubectl_context",
                json!({"operation": "list"}),
                "dev-context".into(),
            )),
        },
        // Needs: the host of its URL argument (here 127.0.0.1:PORT), write ~/.mcp-auth, and
        // a Node whose fetch honours the proxy (NODE_USE_ENV_PROXY: 22.21+, 24): Node 20's
        // connects directly and is refused, so a user's Node 22 goes first on its PATH.
        Case {
            name: "remote",
            entry: with_env(
                install.npx("mcp-remote", &[&remote_url]),
                "PATH",
                &format!(
                    "{}:{}",
                    install.node22_bin,
                    std::env::var("PATH").unwrap_or_default()
                ),
            ),
            listed: "fx:echo",
            call: Some((
                "fx:echo",
                json!({"message": "through mcp-remote"}),
                "through mcp-remote".into(),
            )),
        },
        Case {
            name: "time",
            entry: install.uvx("mcp-server-time", &[]),
            listed: "get_current_time",
            call: Some((
                "get_current_time",
                json!({"timezone": "Europe/Paris"}),
                "Europe/Paris".into(),
            )),
        },
        // Needs: every public host (fetching any URL is its whole job); here the machine's
        // own address, which it refuses itself unless told (its --allow-private-ips), and
        // which, private, the hub asks about.
        Case {
            name: "fetch",
            entry: install.uvx("mcp-server-fetch", &["--allow-private-ips"]),
            listed: "fetch",
            call: Some((
                "fetch",
                json!({"url": format!("{}/guide", page.base)}),
                "Compat guide".into(),
            )),
        },
        Case {
            name: "git",
            entry: install.uvx("mcp-server-git", &["--repository", s(&notes)]),
            listed: "git_status",
            call: Some((
                "git_status",
                json!({"repo_path": s(&notes)}),
                "draft.txt".into(),
            )),
        },
        Case {
            name: "sqlite",
            entry: install.uvx("mcp-server-sqlite", &["--db-path", s(&shop_db)]),
            listed: "create_table",
            call: Some((
                "create_table",
                json!({"query": "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)"}),
                "Table created successfully".into(),
            )),
        },
        // Needs: write ~/.arxiv-mcp-server/papers (its default storage, made at start).
        Case {
            name: "arxiv",
            entry: install.uvx("arxiv-mcp-server", &[]),
            listed: "list_papers",
            call: Some(("list_papers", json!({}), "\"total_papers\": 0".into())),
        },
        Case {
            name: "markitdown",
            entry: install.uvx("markitdown-mcp", &[]),
            listed: "convert_to_markdown",
            call: Some((
                "convert_to_markdown",
                json!({"uri": format!("file://{}", s(&readme))}),
                "The compat suite reads this.".into(),
            )),
        },
        // Writes ~/.cache/Microsoft (onnxruntime; a cache: allowed). Documents need the
        // embedding model's host on first use, so the call makes a collection only.
        Case {
            name: "chroma",
            entry: install.uvx("chroma-mcp", &["--client-type", "ephemeral"]),
            listed: "chroma_create_collection",
            call: Some((
                "chroma_create_collection",
                json!({"collection_name": "compat_notes"}),
                "Successfully created collection compat_notes".into(),
            )),
        },
    ];

    let mut servers = serde_json::Map::new();
    for c in &cases {
        assert!(
            c.entry.get("sandbox").is_none(),
            "{}: the suite runs the default profile",
            c.name
        );
        servers.insert(c.name.to_string(), c.entry.clone());
    }
    servers.insert(
        "hostile".into(),
        json!({"command": FIXTURE, "args": ["--hostile"]}),
    );
    let config = sc.servers(Value::Object(servers), None);
    let mut hub = serve_with(&config, &[], &[("HOME", s(&home))]).await;
    // Declaring elicitation, so the hub can ask about a host as it would ask a user.
    let r = hub
        .client
        .initialize_as(json!({"elicitation": {}}), "compat")
        .await;
    assert!(r["result"]["capabilities"].is_object(), "{r}");

    // Everything starts at once; wait until every server's tool is listed (or the server
    // failed to start), or the limit.
    let deadline = Instant::now() + START_LIMIT;
    // Hosts servers want while they start are asked about too, as a user would answer.
    let mut questions = Vec::new();
    // Until they are all answered (none for a while): one answered during a call would be
    // that call's refused host (desktop-commander asks for its telemetry's at start).
    let mut last_question = Instant::now();
    let listed = loop {
        let listed = names(&hub.client.list_tools().await);
        for m in std::mem::take(&mut hub.client.inbox) {
            if answered(&mut hub, &m, &["fetch"], &mut questions).await {
                last_question = Instant::now();
            } else {
                hub.client.inbox.push_back(m);
            }
        }
        let settled = |c: &Case| {
            listed.contains(&format!("{}:{}", c.name, c.listed)) || failed_to_start(&hub, c.name)
        };
        if (cases.iter().all(settled)
            && listed.iter().any(|n| n == "hostile:try_read")
            && last_question.elapsed() >= QUIET)
            || Instant::now() >= deadline
        {
            break listed;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let started = t0.elapsed();

    let mut calls: Vec<(String, Value)> = cases
        .iter()
        .filter(|c| listed.contains(&format!("{}:{}", c.name, c.listed)))
        .filter_map(|c| {
            c.call
                .as_ref()
                .map(|(tool, args, _)| (format!("{}:{tool}", c.name), args.clone()))
        })
        .collect();
    // The hostile probes, in the same hub and at the same time: a key and a connection
    // to a host nobody listed are still refused.
    let key = home.join(".ssh/id_rsa");
    let probes = [
        ("hostile:try_read", json!({"path": s(&key)})),
        (
            "hostile:try_tcp",
            json!({"host": page_host, "port": page.port}),
        ),
        (
            "hostile:try_fetch",
            json!({"url": format!("{}/guide", page.base)}),
        ),
    ];
    calls.extend(probes.iter().map(|(t, a)| (t.to_string(), a.clone())));
    let answers = call_all(&mut hub, &calls, &["fetch"], &mut questions, CALL_LIMIT).await;

    let mut report = Vec::new();
    let mut failed = Vec::new();
    for c in &cases {
        let tool = format!("{}:{}", c.name, c.listed);
        let outcome = if failed_to_start(&hub, c.name) {
            Err("failed to start (see the hub's log)".to_string())
        } else if !listed.contains(&tool) {
            Err(format!("{tool} not listed within {START_LIMIT:?}"))
        } else {
            match &c.call {
                None => Ok("listed (no offline call)".to_string()),
                Some((t, _, want)) => match answers.get(&format!("{}:{t}", c.name)) {
                    None => Err(format!("{t}: no answer within {CALL_LIMIT:?}")),
                    Some(r) => {
                        let got = all_text(r);
                        if r.get("error").is_some() || is_error(r) || !got.contains(want) {
                            Err(format!(
                                "{t}: wanted {want:?}, got {}",
                                r.to_string().chars().take(400).collect::<String>()
                            ))
                        } else {
                            Ok(format!("{t} ok"))
                        }
                    }
                },
            }
        };
        match outcome {
            Ok(what) => report.push(format!("  ok    {:<11} {what}", c.name)),
            Err(why) => {
                report.push(format!("  FAIL  {:<11} {why}", c.name));
                failed.push(c.name);
            }
        }
    }
    for (tool, _) in &probes {
        let got = answers.get(*tool).map(all_text).unwrap_or_default();
        // The server's own words come last, after what the hub says the sandbox refused
        // meanwhile (the probes run at once, so one's refusal may show in another's result).
        let refused = got
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("failed: "))
            && !got.contains("fake compat key");
        report.push(format!(
            "  {}  {tool}: {got}",
            if refused { "refused" } else { "ESCAPED" }
        ));
        if !refused {
            failed.push(tool);
        }
    }
    // A clean stop, so the hub stops its servers (a killed hub leaves behind the ones that
    // outlive their stdin, as chroma-mcp does).
    hub.close().await;
    for q in &questions {
        report.push(format!("  asked {}", q.lines().next().unwrap_or_default()));
    }
    let passed = cases.len() - failed.iter().filter(|f| !f.starts_with("hostile:")).count();
    eprintln!(
        "compat: {passed}/{} servers pass under the default profile (listed in {:.1}s, done in {:.1}s):\n{}",
        cases.len(),
        started.as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        report.join("\n")
    );
    assert!(failed.is_empty(), "compat failures: {failed:?}");
    // The page's host was asked about (and allowed once) rather than reached unasked.
    if openpact::config::hosts::is_private_address(page_ip) {
        let page_what = page.base.trim_start_matches("http://");
        let asked = format!("openpact: server fetch wants {page_what}: ");
        assert!(
            questions.iter().any(|q| q.starts_with(&asked)),
            "no question {asked:?} among {questions:?}"
        );
    }
}

/// Real servers under a profile too narrow on purpose (the known grants dropped, or a page
/// on a private address that "any public host" does not reach): each failure names the exact
/// command that fixes it, and running that command as a user would — the running hub
/// reloads — makes the same client's next call work. A folder (desktop-commander's state),
/// a file (kubernetes' `~/.kube/config`) and a host (fetch's page). (A socket: no server of
/// the suite uses one; `sandbox_allow::a_refused_socket_…` follows that kind with the
/// fixture.)
#[tokio::test]
async fn too_narrow_profiles_name_the_command_that_fixes_them() {
    let Some(install) = Install::get() else {
        return;
    };
    let sc = Scratch::new();
    let (_outside_temp, home) = scratch_home();
    let notes = home.join("projects/notes");
    let page = Stand::start_on(crate::support::non_loopback_address(), |_| {
        reply(
            200,
            "text/html",
            "<html><body><h1>Narrow page</h1></body></html>",
        )
    });
    let page_host = page.base.trim_start_matches("http://").to_string();
    let narrow = |mut entry: Value| {
        entry["sandbox"] = json!({"known": false});
        entry
    };
    let config = sc.servers(
        json!({
            "desktop": narrow(install.npx("@wonderwhy-er/desktop-commander", &[])),
            "kubernetes": narrow(install.npx("mcp-server-kubernetes", &[])),
            "fetch": install.uvx("mcp-server-fetch", &["--allow-private-ips"]),
        }),
        None,
    );
    let mut hub = serve_with(&config, &[], &[("HOME", s(&home))]).await;
    hub.client.initialize_as(json!({}), "compat-narrow").await;
    let allow = |rest: &str| format!("openpact --config {} sandbox allow {rest}", s(&config));

    // A folder and a file: the start fails, and its reason names the command.
    for (server, fix) in [
        ("desktop", allow("desktop write ~/.claude-server-commander")),
        ("kubernetes", allow("kubernetes read ~/.kube/config")),
    ] {
        let deadline = Instant::now() + START_LIMIT;
        while !failed_to_start(&hub, server) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let log = hub.stderr();
        let failure = log
            .lines()
            .find(|l| {
                l.contains("failed to start")
                    && l.trim_end().ends_with(&format!(" server={server}"))
            })
            .unwrap_or_else(|| panic!("{server} did not fail to start: {log}"));
        assert!(
            failure.contains(&fix),
            "{server}: wanted `{fix}` in: {failure}"
        );
        let (code, out) = crate::sandbox_allow::run_in_shell(&fix, &config, &home);
        assert_eq!(code, 0, "{fix}: {out}");
    }
    // A host: the call fails naming the command.
    let url = format!("{}/narrow", page.base);
    crate::support::wait_for_tool(&mut hub.client, "fetch:fetch", START_LIMIT).await;
    let r = hub.client.call("fetch:fetch", json!({"url": url})).await;
    let fix = allow(&format!("fetch net {page_host}"));
    assert!(
        is_error(&r) && all_text(&r).contains(&fix),
        "wanted `{fix}`: {r}"
    );
    let (code, out) = crate::sandbox_allow::run_in_shell(&fix, &config, &home);
    assert_eq!(code, 0, "{fix}: {out}");

    // The same client, no restart: each next call works.
    for (tool, args, want) in [
        (
            "desktop:list_directory",
            json!({"path": s(&notes)}),
            "README.md",
        ),
        (
            "kubernetes:kubectl_context",
            json!({"operation": "list"}),
            "dev-context",
        ),
        ("fetch:fetch", json!({"url": url}), "Narrow page"),
    ] {
        let deadline = Instant::now() + START_LIMIT;
        let r = loop {
            let r = hub.client.call(tool, args.clone()).await;
            let done = !is_error(&r) && r.get("error").is_none() && all_text(&r).contains(want);
            if done || Instant::now() > deadline {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        assert!(
            !is_error(&r) && all_text(&r).contains(want),
            "{tool} after its fix: wanted {want:?}: {r}"
        );
    }
    hub.close().await;
}
