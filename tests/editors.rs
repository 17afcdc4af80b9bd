//! The coding agents users put openpact into: Claude Code, Gemini CLI and opencode, each
//! running its own `mcp list` health check (its real MCP client: spawn, initialize, list)
//! against `openpact connect` and `openpact serve`. Through `connect` the shared hub must
//! have been handed the agent's pipes, whatever kind its runtime gives a server (Node's
//! sockets, Bun's pipes, a native binary's). And Claude Code calls a tool through `connect`
//! in a whole turn, its model answered by a loopback stand-in of the Messages API (the one
//! part that cannot run here): the tool's real result must reach the model.
//!
//! The agents come from `.ci/peers.sh` (pinned); without them these tests print SKIPPED and
//! pass, unless `OPENPACT_REQUIRE_PEERS=1`. No agent needs an account for these commands.

use crate::support::{
    FIXTURE, OPENPACT, Peers, Reply, Scratch, Seen, Stand, json_reply, reply, s, state_dir,
};
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

/// An agent in a fresh home whose config names `openpact` as `mode` (`connect` or `serve`)
/// with the fixture behind it (every call allowed).
struct Setup {
    /// Holds the scratch folder (config, home, project) until the test ends.
    _sc: Scratch,
    home: PathBuf,
    project: PathBuf,
    state: PathBuf,
}

impl Setup {
    fn new(agent: Agent, mode: &str) -> Setup {
        let sc = Scratch::new();
        let config = sc.servers(
            json!({"fx": {"command": FIXTURE}}),
            Some(json!({
                "shared": {"idleExit": "2s"},
                "toolSearch": {"mode": "off"},
                "permissions": {"default": "allow"},
            })),
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
        Setup {
            state: state_dir(&config),
            _sc: sc,
            home,
            project,
        }
    }

    /// Runs the agent with `args` (and `env`) in the project; its stdout and stderr, and
    /// whether it exited 0.
    async fn run(
        &self,
        peers: &Peers,
        agent: Agent,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (String, bool) {
        let mut words = peers.command(agent.peer());
        let program = words.remove(0);
        let home = &self.home;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(words)
            .args(args)
            .current_dir(&self.project)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("XDG_STATE_HOME", home.join(".local/state"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            // No update checks, telemetry or colours.
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .env("NO_COLOR", "1")
            .env_remove("XDG_RUNTIME_DIR")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
            .await
            .unwrap_or_else(|_| panic!("{agent:?} {args:?} did not finish in 120 s"))
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (text, out.status.success())
    }
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

const HANDED: &str = "a window handed over its editor's stdin and stdout";

async fn connects(agent: Agent) {
    let Some(peers) = Peers::get() else {
        return;
    };
    let shared = Setup::new(agent, "connect");
    let (listing, _) = shared.run(&peers, agent, &["mcp", "list"], &[]).await;
    let log = hub_log(&shared.state);
    assert!(
        agent.connected(&listing),
        "{agent:?} does not list openpact connect as connected:\n{listing}\nhub log:\n{log}"
    );
    assert!(
        log.contains(HANDED),
        "{agent:?}: the shared hub was not handed the agent's pipes:\n{log}"
    );

    let own = Setup::new(agent, "serve");
    let (listing, _) = own.run(&peers, agent, &["mcp", "list"], &[]).await;
    assert!(
        agent.connected(&listing),
        "{agent:?} does not list openpact serve as connected:\n{listing}"
    );
}

/// What the tool is asked to echo, and must come back to the model.
const SAID: &str = "hello from claude code, through openpact";
/// The fixture's echo as Claude Code names it: `mcp__SERVER__TOOL`, the hub's portable name.
const ECHO: &str = "mcp__openpact__fx_echo";

/// The Messages API as far as one turn needs it: while the request offers the echo tool and
/// carries no tool result, the model calls it; then it says "done". Streamed when asked.
fn model(seen: &Seen) -> Reply {
    if seen.url.contains("count_tokens") {
        return json_reply(200, json!({"input_tokens": 10}));
    }
    let body = seen.json();
    let offered = body["tools"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["name"] == ECHO));
    let answered = tool_results(&body).next().is_some();
    let (block, stop) = if offered && !answered {
        (
            json!({"type": "tool_use", "id": "toolu_1", "name": ECHO, "input": {"message": SAID}}),
            "tool_use",
        )
    } else {
        (json!({"type": "text", "text": "done"}), "end_turn")
    };
    let usage = json!({"input_tokens": 10, "output_tokens": 5});
    let message = |content: Value, stop: Value| {
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
               "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage})
    };
    if body["stream"] != true {
        return json_reply(200, message(json!([block]), json!(stop)));
    }
    let (start, delta) = if block["type"] == "text" {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": block["text"]}),
        )
    } else {
        let mut start = block.clone();
        start["input"] = json!({});
        (
            start,
            json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
        )
    };
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": message(json!([]), Value::Null)}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": usage}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let sse: String = events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    reply(200, "text/event-stream", sse)
}

/// The `tool_result` blocks of a request's last message.
fn tool_results(body: &Value) -> impl Iterator<Item = &Value> {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == "tool_result")
}

#[tokio::test]
async fn claude_code_calls_a_tool_through_connect_in_a_whole_turn() {
    let Some(peers) = Peers::get() else {
        return;
    };
    let api = Stand::start(model);
    let setup = Setup::new(Agent::Claude, "connect");
    let (out, ok) = setup
        .run(
            &peers,
            Agent::Claude,
            &[
                "-p",
                "echo something through openpact",
                "--allowedTools",
                ECHO,
                "--output-format",
                "json",
            ],
            &[
                ("ANTHROPIC_BASE_URL", &api.base),
                ("ANTHROPIC_API_KEY", "sk-test-not-a-key"),
            ],
        )
        .await;
    assert!(
        ok,
        "claude -p failed:\n{out}\nhub log:\n{}",
        hub_log(&setup.state)
    );
    let result: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["result"], "done", "{result}");
    // The model's second request carries the tool's result: the fixture's echo of `SAID`,
    // from the shared hub that was handed Claude Code's pipes.
    let texts: Vec<String> = api
        .seen()
        .iter()
        .flat_map(|seen| {
            let body = seen.json();
            tool_results(&body)
                .map(|r| r["content"].to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        texts.iter().any(|t| t.contains(SAID)),
        "no tool result with the echo reached the model: {texts:?}"
    );
    assert!(hub_log(&setup.state).contains(HANDED));
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
