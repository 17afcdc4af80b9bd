//! `openpact import` and `openpact setup` over the host config fixtures (fixtures/hosts: every
//! host's files as its documentation writes them), laid out as one home and one project:
//! the dry run and `--write` (duplicates, a name clash, secrets in `env` and headers, VS Code
//! inputs, Codex TOML, disabled entries), the written config keeping its comments and passing
//! `config check`; `setup` and `--undo` on each host's file; and Claude Code's and Gemini
//! CLI's own `mcp list` (the pinned agents) reporting `openpact connect` connected after
//! `setup`.

use crate::support::{FIXTURE, OPENPACT, Peers, Scratch, s, state_dir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

const HOSTS: &[&str] = &[
    "claude-desktop",
    "claude-code",
    "cursor",
    "vscode",
    "windsurf",
    "gemini",
    "codex",
    "opencode",
];

/// The variables the imported entries refer to (secrets found in clear, VS Code's input,
/// the hosts' own references).
const VARS: &[&str] = &[
    "PERPLEXITY_KEY",
    "GITHUB_PERSONAL_ACCESS_TOKEN",
    "AIRTABLE_API_KEY",
    "API_KEY",
    "LINEAR_TOKEN",
    "DB_CONNECTION_STRING",
    "EXTERNAL_API_KEY",
    "HTTPSERVERWITHAUTH_TOKEN",
    "CONTEXT7_API_KEY",
    "FIGMA_OAUTH_TOKEN",
    "MY_REMOTE_MCP_TOKEN",
];

fn copy_tree(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Every host's fixture files in one scratch home and project.
struct Homes {
    sc: Scratch,
    home: PathBuf,
    project: PathBuf,
}

impl Homes {
    fn new() -> Homes {
        let sc = Scratch::new();
        let (home, project) = (sc.path().join("home"), sc.path().join("project"));
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hosts");
        for host in HOSTS {
            for (part, to) in [("home", &home), ("project", &project)] {
                let from = fixtures.join(host).join(part);
                std::fs::create_dir_all(to).unwrap();
                if from.is_dir() {
                    copy_tree(&from, to);
                }
            }
        }
        Homes { sc, home, project }
    }

    /// Runs openpact with `args` in the project, the hosts' files under `--home`.
    fn openpact(&self, args: &[&str], env: &[(&str, &str)]) -> (String, String, i32) {
        let out = Command::new(OPENPACT)
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.code().unwrap_or(-1),
        )
    }
}

const CONFIG: &str = "{\n  // my own servers\n  \"mcpServers\": {\n    \"memory\": {\"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-memory\"]} // kept\n  }\n}\n";

#[test]
fn import_shows_each_server_once_and_writes_them_keeping_the_config() {
    let h = Homes::new();
    let config = h.sc.path().join("mcp.json");
    std::fs::write(&config, CONFIG).unwrap();
    let home = s(&h.home);
    let (out, err, code) = h.openpact(
        &["--config", s(&config), "import", "--home", home, "--json"],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    // Where it looked: every host, found or not.
    let looked = v["looked"].as_array().unwrap();
    for host in HOSTS {
        assert!(
            looked
                .iter()
                .any(|l| l["host"] == *host && l["found"] == true),
            "{host}: {looked:?}"
        );
    }
    assert!(looked.iter().any(|l| l["found"] == false));
    let server = |name: &str| -> Value {
        v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {out}"))
    };
    // One filesystem server, from three hosts.
    let fs = server("filesystem");
    let hosts: Vec<&str> = fs["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["claude-desktop", "cursor", "windsurf"]);
    // Two different servers named github.
    assert_eq!(server("github")["entry"]["command"], "docker");
    assert_eq!(server("github-cursor")["entry"]["command"], "npx");
    // Secrets: never in clear, a variable instead.
    assert!(
        !out.contains("ghp_")
            && !out.contains("lin_api_")
            && !out.contains("ctx7sk-")
            && !out.contains("your-api-token"),
        "{out}"
    );
    assert_eq!(
        server("github")["entry"]["env"]["GITHUB_PERSONAL_ACCESS_TOKEN"],
        "${GITHUB_PERSONAL_ACCESS_TOKEN}"
    );
    assert_eq!(
        server("linear")["entry"]["headers"]["Authorization"],
        "Bearer ${LINEAR_TOKEN}"
    );
    assert_eq!(
        server("context7")["entry"]["env"]["CONTEXT7_API_KEY"],
        "${CONTEXT7_API_KEY}"
    );
    // VS Code: its input a variable, the workspace folder the project.
    assert_eq!(
        server("Perplexity")["entry"]["env"]["PERPLEXITY_API_KEY"],
        "${PERPLEXITY_KEY}"
    );
    assert_eq!(
        server("notes")["entry"]["args"][0],
        format!("{}/tools/notes-server.js", s(&h.project))
    );
    // Gemini: httpUrl is Streamable HTTP, url SSE; Codex's bearer variable a header.
    assert_eq!(server("sseServer")["entry"]["type"], "sse");
    assert_eq!(
        server("figma-codex")["entry"]["headers"]["Authorization"],
        "Bearer ${FIGMA_OAUTH_TOKEN}"
    );
    assert_eq!(server("memory")["status"], "present");
    let vars: Vec<&str> = v["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    let mut want = VARS.to_vec();
    want.sort();
    let mut got = vars.clone();
    got.sort();
    assert_eq!(got, want);
    // What cannot run, with why.
    let skipped: Vec<(String, String)> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["source"]["name"].as_str().unwrap().to_string(),
                x["why"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (name, why) in [
        ("puppeteer", "disabled"),
        ("chrome_devtools", "disabled"),
        ("jira", "disabled"),
        ("agent-sdk", "type `ws`"),
    ] {
        assert!(
            skipped.iter().any(|(n, w)| n == name && w.contains(why)),
            "{name}: {skipped:?}"
        );
    }
    // The dry run wrote nothing.
    assert_eq!(std::fs::read_to_string(&config).unwrap(), CONFIG);

    // The human form says the same, and where to set the variables.
    let (out, _, _) = h.openpact(&["--config", s(&config), "import", "--home", home], &[]);
    assert!(
        out.contains("not found") && out.contains("github-cursor") && out.contains("export them"),
        "{out}"
    );

    // --write: added in place, comments kept, the present name skipped.
    let (out, err, code) = h.openpact(
        &["--config", s(&config), "import", "--home", home, "--write"],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("skipped: the config has a server of this name"),
        "{out}"
    );
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.starts_with("{\n  // my own servers\n"), "{written}");
    assert!(written.contains("]}, // kept"), "{written}");
    assert!(
        !written.contains("ghp_") && !written.contains("lin_api_"),
        "{written}"
    );
    // It passes `config check` once the variables are set and the commands exist.
    let bin = h.sc.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for cmd in ["npx", "uvx", "docker", "python", "node"] {
        std::os::unix::fs::symlink("/bin/true", bin.join(cmd)).unwrap();
    }
    std::fs::create_dir_all(h.home.join("mcp-servers/python")).unwrap();
    let path = format!("{}:{}", s(&bin), std::env::var("PATH").unwrap());
    let mut env: Vec<(&str, &str)> = VARS.iter().map(|v| (*v, "x")).collect();
    env.push(("PATH", &path));
    let (out, err, code) = h.openpact(&["--config", s(&config), "config", "check"], &env);
    assert_eq!(code, 0, "{out}\n{err}\n{written}");
    // A second --write adds nothing.
    let (out, _, _) = h.openpact(
        &[
            "--config",
            s(&config),
            "import",
            "--home",
            home,
            "--write",
            "--json",
        ],
        &[],
    );
    let again: Value = serde_json::from_str(&out).unwrap();
    assert!(
        again["servers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == "present"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), written);
}

/// Each host's user file, relative to the home, and how to find the openpact entry in it.
fn setup_file(host: &str) -> &'static str {
    match host {
        "claude-desktop" => ".config/Claude/claude_desktop_config.json",
        "claude-code" => ".claude.json",
        "cursor" => ".cursor/mcp.json",
        "vscode" => ".config/Code/User/mcp.json",
        "windsurf" => ".codeium/windsurf/mcp_config.json",
        "gemini" => ".gemini/settings.json",
        "codex" => ".codex/config.toml",
        _ => ".config/opencode/opencode.json",
    }
}

#[test]
fn setup_points_each_host_at_connect_and_undo_restores_it() {
    let h = Homes::new();
    let config = h.sc.path().join("mcp.json");
    std::fs::write(&config, CONFIG).unwrap();
    let home = s(&h.home);
    let before: Vec<Option<String>> = HOSTS
        .iter()
        .map(|host| std::fs::read_to_string(h.home.join(setup_file(host))).ok())
        .collect();
    let mut args = vec!["--config", s(&config), "setup", "--home", home, "--json"];
    args.extend(HOSTS);
    let (out, err, code) = h.openpact(&args, &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["files"].as_array().unwrap().len(), HOSTS.len(), "{out}");
    let config_path = std::fs::canonicalize(&config).unwrap();
    for (host, before) in HOSTS.iter().zip(&before) {
        let path = h.home.join(setup_file(host));
        let text = std::fs::read_to_string(&path).unwrap();
        let backups: Vec<String> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".openpact-backup-"))
            .collect();
        assert_eq!(
            backups.len(),
            usize::from(before.is_some()),
            "{host}: {backups:?}"
        );
        assert!(
            text.contains(s(&config_path)) && text.contains("connect"),
            "{host}: {text}"
        );
        if *host == "codex" {
            assert!(
                text.starts_with("# Codex settings")
                    && text.contains("[tui]")
                    && !text.contains("context7"),
                "{text}"
            );
            continue;
        }
        if *host == "opencode" {
            // JSONC: its comment and trailing commas outside `mcp` stay.
            assert!(
                text.contains("\"$schema\"")
                    && text.contains("\"type\": \"local\"")
                    && !text.contains("my-local-mcp-server"),
                "{text}"
            );
            continue;
        }
        let json: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{host}: {e}\n{text}"));
        let servers = match *host {
            "vscode" => &json["servers"],
            _ => &json["mcpServers"],
        };
        let names: Vec<&String> = servers.as_object().unwrap().keys().collect();
        assert_eq!(names, ["openpact"], "{host}: {text}");
        match *host {
            "claude-code" => {
                assert_eq!(json["numStartups"], 12);
                assert_eq!(json["projects"]["/home/user/app"]["mcpServers"], json!({}));
                assert_eq!(
                    json["projects"]["/home/user/app"]["hasTrustDialogAccepted"],
                    true
                );
            }
            "gemini" => assert_eq!(json["security"]["auth"]["selectedType"], "gemini-api-key"),
            _ => {}
        }
    }
    // An unparsable file is refused, named with its error, and left alone.
    let cursor = h.home.join(setup_file("cursor"));
    std::fs::write(&cursor, "{ not json").unwrap();
    let (out, err, code) = h.openpact(&["setup", "--home", home, "cursor"], &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        err.contains(s(&cursor)) && err.contains("not valid JSON"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), "{ not json");

    // --undo: every file as it was.
    let mut args = vec!["setup", "--home", home, "--undo"];
    args.extend(HOSTS.iter().filter(|h| **h != "cursor"));
    let (out, err, code) = h.openpact(&args, &[]);
    assert_eq!(code, 0, "{out}\n{err}");
    for (host, before) in HOSTS.iter().zip(&before) {
        if *host == "cursor" {
            continue;
        }
        let now = std::fs::read_to_string(h.home.join(setup_file(host))).ok();
        match before {
            Some(b) => assert_eq!(now.as_ref(), Some(b), "{host}"),
            // No file before: nothing to put back; say so.
            None => assert!(out.contains("no openpact backup"), "{host}: {out}"),
        }
    }
}

/// After `setup`, the agent's own `mcp list` reports the openpact entry connected.
fn agent_lists_connect(host: &str, peer: &str) {
    let Some(peers) = Peers::get() else {
        return;
    };
    let h = Homes::new();
    let config = h.sc.servers(
        json!({"fx": {"command": FIXTURE}}),
        Some(json!({"shared": {"idleExit": "2s"}, "toolSearch": {"mode": "off"}})),
    );
    let state = state_dir(&config);
    let home = s(&h.home);
    let (out, err, code) = h.openpact(
        &[
            "--config",
            s(&config),
            "--state-dir",
            s(&state),
            "setup",
            "--home",
            home,
            host,
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    // Gemini CLI runs no server in a folder the user has not trusted.
    std::fs::write(
        h.home.join(".gemini/trustedFolders.json"),
        json!({ s(&h.project): "TRUST_FOLDER" }).to_string(),
    )
    .unwrap();
    let mut words = peers.command(peer);
    let program = words.remove(0);
    let out = Command::new(program)
        .args(words)
        .args(["mcp", "list"])
        .current_dir(&h.project)
        .env("HOME", &h.home)
        .env("XDG_CONFIG_HOME", h.home.join(".config"))
        .env("XDG_DATA_HOME", h.home.join(".local/share"))
        .env("XDG_STATE_HOME", h.home.join(".local/state"))
        .env("XDG_CACHE_HOME", h.home.join(".cache"))
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("NO_COLOR", "1")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let listing =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let line = listing
        .lines()
        .find(|l| l.contains("openpact"))
        .unwrap_or_default();
    let status = line.rsplit(" - ").next().unwrap_or_default().to_lowercase();
    assert!(
        status.contains("connected")
            && !status.contains("disconnected")
            && !status.contains("fail"),
        "{host}: openpact connect not listed connected:\n{listing}"
    );
}

#[test]
fn claude_code_lists_connect_after_setup() {
    agent_lists_connect("claude-code", "PEER_CLAUDE");
}

#[test]
fn gemini_cli_lists_connect_after_setup() {
    agent_lists_connect("gemini", "PEER_GEMINI");
}
