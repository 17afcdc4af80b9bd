//! The coding agents users put openpact into: Claude Code, Gemini CLI and opencode, each
//! running its own `mcp list` health check (its real MCP client: spawn, initialize, list)
//! against `openpact connect` and `openpact serve`. Through `connect` the shared hub must
//! have been handed the agent's pipes, whatever kind its runtime gives a server (Node's
//! sockets, Bun's pipes, a native binary's).
//!
//! The agents come from `.ci/peers.sh` (pinned); without them these tests print SKIPPED and
//! pass, unless `OPENPACT_REQUIRE_PEERS=1`. No agent needs an account for this command.

use crate::support::{FIXTURE, OPENPACT, Peers, Scratch, s, state_dir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The agents, each with how it is configured and how its listing says "connected".
#[derive(Clone, Copy, Debug)]
enum Agent {
    Claude,
    Gemini,
    Opencode,
}

impl Agent {
    fn peer(self) -> &'static str {
        match self {
            Agent::Claude => "PEER_CLAUDE",
            Agent::Gemini => "PEER_GEMINI",
            Agent::Opencode => "PEER_OPENCODE",
        }
    }

    /// Writes the agent's config naming `server` (command, args, env) as `openpact`, under
    /// `home` (user scope) or in `project` (where the agent runs).
    fn configure(self, home: &Path, project: &Path, server: &Value) {
        let write = |path: PathBuf, v: Value| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
        };
        let (command, args, env) = (&server["command"], &server["args"], &server["env"]);
        match self {
            Agent::Claude => write(
                home.join(".claude.json"),
                json!({"mcpServers": {"openpact": {"type": "stdio", "command": command, "args": args, "env": env}}}),
            ),
            Agent::Gemini => {
                write(
                    home.join(".gemini/settings.json"),
                    json!({"mcpServers": {"openpact": {"command": command, "args": args, "env": env}}}),
                );
                // Gemini CLI runs no server in a folder the user has not trusted.
                write(
                    home.join(".gemini/trustedFolders.json"),
                    json!({ s(project): "TRUST_FOLDER" }),
                );
            }
            Agent::Opencode => {
                let mut line = vec![command.clone()];
                line.extend(args.as_array().unwrap().iter().cloned());
                write(
                    project.join("opencode.json"),
                    json!({"mcp": {"openpact": {"type": "local", "command": line, "environment": env, "enabled": true}}}),
                );
            }
        }
    }

    /// Whether the agent's listing reports `openpact` connected.
    fn connected(self, listing: &str) -> bool {
        let line = listing
            .lines()
            .find(|l| l.contains("openpact"))
            .unwrap_or_default();
        // Claude Code and Gemini CLI end the line with " - STATUS" after the command line
        // (whose paths could hold any word); opencode's line is its status.
        let line = line.rsplit(" - ").next().unwrap_or_default().to_lowercase();
        let failed = ["fail", "disconnected", "disabled", "error", "pending"]
            .iter()
            .any(|w| line.contains(w));
        !failed && line.contains("connected")
    }
}

/// Runs `agent mcp list` in a fresh home whose config names `openpact` as `mode` (`connect`
/// or `serve`) with the fixture behind it. Returns the listing and the hub's state dir.
async fn list(peers: &Peers, agent: Agent, mode: &str) -> (String, PathBuf, Scratch) {
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"fx": {"command": FIXTURE}}),
        Some(json!({"shared": {"idleExit": "2s"}, "toolSearch": {"mode": "off"}})),
    );
    let (home, project, runtime) = (
        sc.path().join("home"),
        sc.path().join("project"),
        sc.path().join("run"),
    );
    for d in [&home, &project, &runtime] {
        std::fs::create_dir_all(d).unwrap();
    }
    let server = json!({
        "command": OPENPACT,
        "args": ["--config", s(&config), "--state-dir", s(&state_dir(&config)), mode],
        "env": {"XDG_RUNTIME_DIR": s(&runtime), "OPENPACT_LOG": "info,openpact=debug"},
    });
    agent.configure(&home, &project, &server);

    let mut words = peers.command(agent.peer());
    let program = words.remove(0);
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(words)
        .args(["mcp", "list"])
        .current_dir(&project)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        // No update checks, telemetry or colours: the listing is all we want.
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("NO_COLOR", "1")
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{agent:?} mcp list did not finish in 120 s"))
        .unwrap();
    let listing = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (listing, state_dir(&config), sc)
}

/// What the shared hub logged (its log file in the state dir).
fn hub_log(state: &Path) -> String {
    std::fs::read_dir(state)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.starts_with("shared-") && name.ends_with(".log")
                })
                .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

async fn connects(agent: Agent) {
    let Some(peers) = Peers::get() else {
        return;
    };
    let (listing, state, _sc) = list(&peers, agent, "connect").await;
    assert!(
        agent.connected(&listing),
        "{agent:?} does not list openpact connect as connected:\n{listing}\nhub log:\n{}",
        hub_log(&state)
    );
    let log = hub_log(&state);
    assert!(
        log.contains("a window handed over its editor's stdin and stdout"),
        "{agent:?}: the shared hub was not handed the agent's pipes:\n{log}"
    );

    let (listing, _, _sc) = list(&peers, agent, "serve").await;
    assert!(
        agent.connected(&listing),
        "{agent:?} does not list openpact serve as connected:\n{listing}"
    );
}

#[tokio::test]
async fn claude_code_lists_openpact_as_connected() {
    connects(Agent::Claude).await;
}

#[tokio::test]
async fn gemini_cli_lists_openpact_as_connected() {
    connects(Agent::Gemini).await;
}

#[tokio::test]
async fn opencode_lists_openpact_as_connected() {
    connects(Agent::Opencode).await;
}

/// The check itself: a listing that says anything but connected fails.
#[test]
fn a_failed_or_pending_server_is_not_taken_for_connected() {
    for (agent, bad) in [
        (Agent::Claude, "openpact: x connect - ✗ Failed to connect"),
        (Agent::Claude, "openpact: x - ⏸ Pending approval"),
        (Agent::Gemini, "✗ openpact: x (stdio) - Disconnected"),
        (Agent::Gemini, "○ openpact: x (stdio) - Disabled"),
        (Agent::Opencode, "✗ openpact failed"),
        (Agent::Opencode, "nothing about it"),
    ] {
        assert!(!agent.connected(bad), "{agent:?}: {bad}");
    }
    assert!(Agent::Claude.connected("openpact: x connect - ✔ Connected"));
    assert!(Agent::Gemini.connected("✓ openpact: x (stdio) - Connected"));
    assert!(Agent::Opencode.connected("●  ✓ openpact connected"));
}
