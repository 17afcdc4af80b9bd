//! The coding agents users put openpact into: Claude Code, Gemini CLI, opencode and Codex.
//! The first three run their own `mcp list` health check (their real MCP client: spawn,
//! initialize, list) against `openpact connect` and `openpact serve`. Through `connect` the
//! shared hub must have been handed the agent's pipes, whatever kind its runtime gives a
//! server (Node's sockets, Bun's pipes, a native binary's). And Claude Code, Gemini CLI and
//! Codex each call a tool through `connect` in a whole turn, their model answered by a
//! loopback stand-in of its API (the one part that cannot run here): the tool's real result
//! must reach the model. Each also runs a program with code mode's `run_code` in a turn,
//! and says nothing about the hub or its tools in its own log. (opencode fetches its model
//! providers from npm when it first runs, so it only lists; Codex's `mcp list` only reads
//! its config, so it only runs turns.)
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
    Codex,
}

impl Agent {
    fn peer(self) -> &'static str {
        match self {
            Agent::Claude => "PEER_CLAUDE",
            Agent::Gemini => "PEER_GEMINI",
            Agent::Opencode => "PEER_OPENCODE",
            Agent::Codex => "PEER_CODEX",
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
                    json!({"mcpServers": {"openpact": {"command": command, "args": args, "env": env}},
                           "security": {"auth": {"selectedType": "gemini-api-key"}}}),
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
            Agent::Codex => {
                // TOML: a JSON string or array of strings is one too; the env an inline table.
                let env: Vec<String> = env
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect();
                let path = home.join(".codex/config.toml");
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(
                    path,
                    format!(
                        "[mcp_servers.openpact]\ncommand = {command}\nargs = {args}\nenv = {{ {} }}\n",
                        env.join(", ")
                    ),
                )
                .unwrap();
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
/// with the fixture behind it (every call allowed), and the hub's `openpact` settings
/// changed by `more` (e.g. code mode on).
struct Setup {
    /// Holds the scratch folder (config, home, project) until the test ends.
    _sc: Scratch,
    home: PathBuf,
    project: PathBuf,
    state: PathBuf,
}

impl Setup {
    fn new(agent: Agent, mode: &str) -> Setup {
        Setup::with(agent, mode, json!({}))
    }

    fn with(agent: Agent, mode: &str, more: Value) -> Setup {
        let sc = Scratch::new();
        let mut settings = json!({
            "shared": {"idleExit": "2s"},
            "toolSearch": {"mode": "off"},
            "permissions": {"default": "allow"},
        });
        for (k, v) in more.as_object().into_iter().flatten() {
            settings[k] = v.clone();
        }
        let config = sc.servers(json!({"fx": {"command": FIXTURE}}), Some(settings));
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

    /// Runs the agent with `args` (and `env`) in the project: its stdout, its stderr, and
    /// whether it exited 0.
    async fn run(
        &self,
        peers: &Peers,
        agent: Agent,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> (String, String, bool) {
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
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.status.success(),
        )
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
    let (out, err, _) = shared.run(&peers, agent, &["mcp", "list"], &[]).await;
    let listing = out + &err;
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
    let (out, err, _) = own.run(&peers, agent, &["mcp", "list"], &[]).await;
    let listing = out + &err;
    assert!(
        agent.connected(&listing),
        "{agent:?} does not list openpact serve as connected:\n{listing}"
    );
}

/// What the tool is asked to echo, and must come back to the model.
const SAID: &str = "hello from an agent, through openpact";

/// The program the model runs: fixture calls direct, by attribute and in parallel.
const PROGRAM: &str = r#"sum = call("fx:add", {"a": 20, "b": 22})["sum"]
print(tools.fx.echo(message = "the sum is " + str(sum)))
{"sum": sum, "echoed": parallel([["fx:echo", {"message": "one"}], ["fx:echo", {"message": "two"}]])}
"#;

/// The tool call the model makes in a turn: a tool by the hub's name for it (`fx:echo`),
/// with `input`.
#[derive(Clone, Debug)]
struct Call {
    tool: &'static str,
    input: Value,
}

impl Call {
    /// The fixture's echo of [`SAID`].
    fn echo() -> Call {
        Call {
            tool: "fx:echo",
            input: json!({"message": SAID}),
        }
    }

    /// `run_code` running [`PROGRAM`].
    fn program() -> Call {
        Call {
            tool: "run_code",
            input: json!({"code": PROGRAM}),
        }
    }
}

impl Agent {
    /// The stand-in for the agent's model API: while a request offers `call`'s tool and
    /// carries no tool result, the model makes `call`; then it says "done".
    fn model(self, call: Call) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
        let answer: fn(&Seen, Option<(&str, &Value)>) -> Reply = match self {
            Agent::Claude => claude_model,
            Agent::Gemini => gemini_model,
            Agent::Codex => codex_model,
            Agent::Opencode => {
                unimplemented!("opencode fetches its model providers from npm at run time")
            }
        };
        move |seen| {
            let body = seen.json();
            let name = self.names(call.tool);
            let calls = self.offers(&body, &name) && !self.answered(&body);
            answer(seen, calls.then_some((name.as_str(), &call.input)))
        }
    }

    /// The agent's name for the hub's `tool`, as its model sees it. Claude Code names it
    /// `mcp__SERVER__TOOL`, Gemini CLI `mcp_SERVER_TOOL`; Codex offers a server's tools as
    /// one namespace (`mcp__openpact`) of functions named as the hub names them. Claude
    /// Code and Codex make the hub's name fit `^[a-zA-Z0-9_-]+$` (`fx:echo` as `fx_echo`)
    /// and map a call back; Gemini CLI keeps the `:`, which the Gemini API allows. The
    /// stand-in calls exactly that name, so a change on either side shows here.
    fn names(self, tool: &str) -> String {
        match self {
            Agent::Claude => format!("mcp__openpact__{}", tool.replace(':', "_")),
            Agent::Gemini | Agent::Opencode => format!("mcp_openpact_{tool}"),
            Agent::Codex => tool.replace(':', "_"),
        }
    }

    /// Whether the model `request` offers a tool called `name` (the hub's, for Codex).
    fn offers(self, request: &Value, name: &str) -> bool {
        let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
        let tools = list(&request["tools"]);
        let offered: Vec<Value> = match self {
            Agent::Claude => tools,
            Agent::Gemini | Agent::Opencode => tools
                .iter()
                .flat_map(|t| list(&t["functionDeclarations"]))
                .collect(),
            Agent::Codex => tools
                .iter()
                .filter(|t| t["type"] == "namespace" && t["name"] == "mcp__openpact")
                .flat_map(|t| list(&t["tools"]))
                .collect(),
        };
        offered.iter().any(|t| t["name"] == name)
    }

    /// The arguments and environment of one non-interactive turn against the model at `api`,
    /// in which the model may call the hub's `tool` (Claude Code asks about any other).
    fn turn(self, api: &str, tool: &str) -> (Vec<String>, Vec<(&'static str, String)>) {
        let prompt = "echo something through openpact";
        match self {
            Agent::Claude => (
                words(&[
                    "-p",
                    prompt,
                    "--allowedTools",
                    &self.names(tool),
                    "--output-format",
                    "json",
                ]),
                vec![
                    ("ANTHROPIC_BASE_URL", api.to_string()),
                    ("ANTHROPIC_API_KEY", "sk-test-not-a-key".into()),
                ],
            ),
            // A model named, so that no routing requests (which the stand-in cannot answer
            // as the router expects) come before the turn.
            Agent::Gemini => (
                words(&[
                    "-p",
                    prompt,
                    "-m",
                    "gemini-2.5-flash",
                    "--approval-mode",
                    "yolo",
                    "-o",
                    "json",
                ]),
                vec![
                    ("GOOGLE_GEMINI_BASE_URL", api.to_string()),
                    ("GEMINI_API_KEY", "test-not-a-key".into()),
                ],
            ),
            // The model provider is given on the command line: the stand-in's port is
            // known only now. Codex's own approvals and sandbox are off (the hub's
            // permissions are the ones under test).
            Agent::Codex => {
                let provider = format!(
                    "model_providers.stand={{name=\"stand\", base_url=\"{api}/v1\", wire_api=\"responses\", env_key=\"STAND_API_KEY\"}}"
                );
                (
                    words(&[
                        "exec",
                        "--skip-git-repo-check",
                        "--json",
                        "--dangerously-bypass-approvals-and-sandbox",
                        "-c",
                        "model=\"gpt-test\"",
                        "-c",
                        "model_provider=\"stand\"",
                        "-c",
                        &provider,
                        prompt,
                    ]),
                    vec![("STAND_API_KEY", "test-not-a-key".into())],
                )
            }
            Agent::Opencode => unimplemented!("see Agent::model"),
        }
    }

    /// The final answer in the agent's JSON output (Codex's: a JSON event per line).
    fn answer(self, out: &str) -> Option<String> {
        let json = |line: &str| serde_json::from_str::<Value>(line.trim()).ok();
        let text = |v: &Value| v.as_str().map(str::to_string);
        match self {
            Agent::Claude => json(out).and_then(|o| text(&o["result"])),
            Agent::Gemini | Agent::Opencode => json(out).and_then(|o| text(&o["response"])),
            Agent::Codex => out
                .lines()
                .rev()
                .filter_map(json)
                .find(|e| e["type"] == "item.completed" && e["item"]["type"] == "agent_message")
                .and_then(|e| text(&e["item"]["text"])),
        }
    }

    /// The successful tool results the model received in `request` (in its last message or
    /// input), as text. A failed call's result is left out: Gemini CLI quotes the call's
    /// arguments in its error. (Codex's failed MCP call is one text saying so, without them.)
    fn tool_results(self, request: &Value) -> Vec<String> {
        let last = |messages: &str, parts: &str| -> Vec<Value> {
            request[messages]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m[parts].as_array())
                .cloned()
                .unwrap_or_default()
        };
        match self {
            Agent::Claude => last("messages", "content")
                .iter()
                .filter(|p| p["type"] == "tool_result" && p["is_error"] != true)
                .map(|p| text_of(&p["content"]))
                .collect(),
            Agent::Gemini | Agent::Opencode => last("contents", "parts")
                .iter()
                .filter_map(|p| p.pointer("/functionResponse/response/output"))
                .map(text_of)
                .collect(),
            Agent::Codex => request["input"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|i| i["type"] == "function_call_output")
                .map(|i| text_of(&i["output"]))
                .collect(),
        }
    }

    /// Whether `request` carries a tool result, failed or not.
    fn answered(self, request: &Value) -> bool {
        let text = request.to_string();
        match self {
            Agent::Claude => text.contains("\"tool_result\""),
            Agent::Gemini | Agent::Opencode => text.contains("\"functionResponse\""),
            Agent::Codex => text.contains("\"function_call_output\""),
        }
    }
}

/// The Messages API's answer to `seen` (see [`Agent::model`]): a `tool_use` of `calls`
/// when given, else "done". Streamed when asked.
fn claude_model(seen: &Seen, calls: Option<(&str, &Value)>) -> Reply {
    if seen.url.contains("count_tokens") {
        return json_reply(200, json!({"input_tokens": 10}));
    }
    let body = seen.json();
    let (block, stop) = match calls {
        Some((name, input)) => (
            json!({"type": "tool_use", "id": "toolu_1", "name": name, "input": input}),
            "tool_use",
        ),
        None => (json!({"type": "text", "text": "done"}), "end_turn"),
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

/// The Gemini API's `generateContent` answer to `seen` (see [`Agent::model`]): a
/// `functionCall` of `calls` when given, else "done"; as server-sent events for
/// `streamGenerateContent?alt=sse`.
fn gemini_model(seen: &Seen, calls: Option<(&str, &Value)>) -> Reply {
    if seen.url.contains(":countTokens") {
        return json_reply(200, json!({"totalTokens": 10}));
    }
    let part = match calls {
        Some((name, args)) => json!({"functionCall": {"name": name, "args": args}}),
        None => json!({"text": "done"}),
    };
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
    });
    if seen.url.contains("alt=sse") {
        reply(200, "text/event-stream", format!("data: {answer}\r\n\r\n"))
    } else {
        json_reply(200, answer)
    }
}

/// The Responses API's answer to `seen` for Codex (see [`Agent::model`]), streamed: a
/// `function_call` of `calls` in the `mcp__openpact` namespace when given, else "done".
fn codex_model(_seen: &Seen, calls: Option<(&str, &Value)>) -> Reply {
    let item = match calls {
        Some((name, args)) => json!({
            "type": "function_call", "id": "fc_1", "call_id": "call_1", "namespace": "mcp__openpact",
            "name": name, "arguments": args.to_string(),
        }),
        None => json!({
            "type": "message", "id": "msg_1", "role": "assistant",
            "content": [{"type": "output_text", "text": "done", "annotations": []}],
        }),
    };
    let usage = json!({"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
        "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}});
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_1"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": "resp_1", "output": [item], "usage": usage}}),
    ];
    let sse: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    reply(200, "text/event-stream", sse)
}

/// A tool result's content as text: a string, text blocks one per line, else its JSON.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// Owned command-line words.
fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// One non-interactive turn of `agent` through `openpact connect`: its model (a stand-in)
/// calls the fixture's echo, and the echo's real result must reach the model's next request.
async fn whole_turn(agent: Agent) {
    turn_through_connect(agent, Call::echo(), json!({}), &[SAID]).await;
}

/// Code mode through a real agent: its model calls `run_code` through `openpact connect`,
/// the program calls the fixture's tools, and what it printed and returned must reach the
/// model's next request.
async fn program_turn(agent: Agent) {
    turn_through_connect(
        agent,
        Call::program(),
        json!({"codeMode": {"mode": "on"}}),
        &["the sum is 42", r#"{"sum":42,"echoed":["one","two"]}"#],
    )
    .await;
}

/// One non-interactive turn of `agent` through `openpact connect` with the hub's settings
/// changed by `more`: its model (a stand-in) makes `call`, and one tool result of the
/// model's later requests must hold every text of `expect`. The agent's own log must hold
/// no warning or error about the hub.
async fn turn_through_connect(agent: Agent, call: Call, more: Value, expect: &[&str]) {
    let Some(peers) = Peers::get() else {
        return;
    };
    let tool = call.tool;
    let api = Stand::start(agent.model(call));
    let setup = Setup::with(agent, "connect", more);
    let (mut args, mut env) = agent.turn(&api.base, tool);
    let own_log = setup.home.join("agent.log");
    let (log_args, log_env) = agent.log_to(&own_log);
    args.extend(log_args);
    env.extend(log_env);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (out, err, ok) = setup.run(&peers, agent, &args, &env).await;
    let log = hub_log(&setup.state);
    assert!(
        ok,
        "{agent:?} {args:?} failed:\n{out}{err}\nhub log:\n{log}"
    );
    assert_eq!(
        agent.answer(&out).as_deref(),
        Some("done"),
        "{agent:?}: {out}{err}"
    );
    let requests: Vec<Value> = api.seen().iter().map(Seen::json).collect();
    let results: Vec<String> = requests
        .iter()
        .flat_map(|r| agent.tool_results(r))
        .collect();
    assert!(
        results.iter().any(|r| expect.iter().all(|e| r.contains(e))),
        "{agent:?}: no tool result with {expect:?} reached the model: {results:?}\n{requests:?}"
    );
    assert!(log.contains(HANDED), "{agent:?}: not handed over:\n{log}");
    let logged = match std::fs::read_to_string(&own_log) {
        Ok(text) => text,
        Err(_) if matches!(agent, Agent::Codex) => String::new(),
        Err(e) => panic!("{agent:?} wrote no log to {}: {e}", own_log.display()),
    };
    let said = logged + &err;
    let complaints = agent.complaints(&said);
    assert!(
        complaints.is_empty(),
        "{agent:?} complained about the hub: {complaints:#?}"
    );
}

impl Agent {
    /// The arguments and environment that have the agent log its warnings and errors:
    /// Claude Code and Gemini CLI to `file` (their debug log), Codex to its stderr.
    fn log_to(self, file: &Path) -> (Vec<String>, Vec<(&'static str, String)>) {
        match self {
            Agent::Claude => (words(&["--debug-file", s(file)]), vec![]),
            Agent::Gemini => (vec![], vec![("GEMINI_DEBUG_LOG_FILE", s(file).into())]),
            Agent::Codex => (vec![], vec![("RUST_LOG", "warn".into())]),
            Agent::Opencode => unimplemented!("see Agent::model"),
        }
    }

    /// The warnings and errors of what the agent logged (see [`Agent::log_to`]) and wrote
    /// to stderr that concern the hub: its server `openpact` or one of its tools. Each agent
    /// also logs the lines a server writes to stderr (Claude Code as errors): those are the
    /// hub's own log (at debug level here), not complaints. Gemini CLI's MCP diagnostics
    /// and its hint at them need not name the server, but `openpact` is its only one.
    fn complaints(self, said: &str) -> Vec<&str> {
        let (marks, relayed): (&[&str], &str) = match self {
            Agent::Claude => (&["[WARN]", "[ERROR]"], "Server stderr:"),
            Agent::Gemini => (
                &[
                    "[WARN]",
                    "[ERROR]",
                    "[WARNING]",
                    "[MCP warning]",
                    "[MCP error]",
                    "MCP issues detected",
                ],
                "[MCP STDERR",
            ),
            Agent::Codex => (&[" WARN ", " ERROR "], "MCP server stderr"),
            Agent::Opencode => unimplemented!("see Agent::model"),
        };
        let ours = |l: &str| {
            l.contains("openpact") || (matches!(self, Agent::Gemini) && l.contains("MCP"))
        };
        said.lines()
            .filter(|l| marks.iter().any(|m| l.contains(m)))
            .filter(|l| ours(l) && !l.contains(relayed))
            .collect()
    }
}

#[tokio::test]
async fn claude_code_calls_a_tool_through_connect_in_a_whole_turn() {
    whole_turn(Agent::Claude).await;
}

#[tokio::test]
async fn gemini_cli_calls_a_tool_through_connect_in_a_whole_turn() {
    whole_turn(Agent::Gemini).await;
}

#[tokio::test]
async fn codex_calls_a_tool_through_connect_in_a_whole_turn() {
    whole_turn(Agent::Codex).await;
}

#[tokio::test]
async fn claude_code_runs_a_program_through_connect() {
    program_turn(Agent::Claude).await;
}

#[tokio::test]
async fn gemini_cli_runs_a_program_through_connect() {
    program_turn(Agent::Gemini).await;
}

#[tokio::test]
async fn codex_runs_a_program_through_connect() {
    program_turn(Agent::Codex).await;
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
