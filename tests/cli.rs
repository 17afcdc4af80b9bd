//! The command line, run as a real process: `tools`, `call`, `servers`, `config check`,
//! `--mcp`, the global flags and where the config and state dir come from.
//!
//! Every run gets its own scratch dir as working directory, `HOME` and XDG dirs, so the
//! real user's config and state are never read or written.

use crate::support::{self, OPENPACT, Scratch, fixture};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// No CLI command here should take more than a second or two; this only stops a hang.
const LIMIT: Duration = Duration::from_secs(60);

/// What a finished `openpact` run left behind.
#[derive(Debug)]
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    /// Panics with everything the run printed unless it exited with `code`.
    fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code,
            Some(code),
            "unexpected exit code; run was {self:#?}"
        );
        self
    }
}

fn s(p: &Path) -> &str {
    p.to_str().expect("scratch paths are UTF-8")
}

/// `openpact ARGS` as [`openpact`] runs it, stdout and stderr piped, not yet started.
fn isolated(scratch: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Command {
    let root = scratch.path();
    for d in ["cwd", "home", "xdg-config", "xdg-state"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let mut cmd = Command::new(OPENPACT);
    cmd.args(args)
        .current_dir(root.join("cwd"))
        .env_remove("OPENPACT_CONFIG")
        .env_remove("OPENPACT_STATE_DIR")
        .env_remove("OPENPACT_LOG")
        .env_remove("RUST_LOG")
        .env_remove("NOPE_VAR")
        .env("HOME", root.join("home"))
        .env("XDG_CONFIG_HOME", root.join("xdg-config"))
        .env("XDG_STATE_HOME", root.join("xdg-state"))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs `openpact ARGS` isolated in `scratch`: its working directory is an empty
/// `scratch/cwd`, `HOME` and the XDG dirs point into the scratch dir, and no `OPENPACT_*`,
/// log or `NOPE_VAR` variables leak in from the test's environment. `env` is applied last.
async fn openpact(
    scratch: &Scratch,
    args: &[&str],
    env: &[(&str, &str)],
    stdin: Option<&str>,
) -> Out {
    let mut cmd = isolated(scratch, args, env);
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd.spawn().expect("spawn openpact");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).await.unwrap();
        drop(pipe);
    }
    let out = tokio::time::timeout(LIMIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("openpact {args:?} did not finish within {LIMIT:?}"))
        .unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A scratch dir with a config holding the fixture as `fx`, plus its state dir. The fixture
/// answers in milliseconds; the short timeout makes a lost request fail the test quickly.
fn fx_only() -> (Scratch, PathBuf, PathBuf) {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({ "fx": {"command": support::FIXTURE, "timeout": "20s"} }),
        None,
    );
    let state = sc.path().join("state");
    (sc, cfg, state)
}

/// The fixture as `fx` and a server that exits with 9 before reading anything as `bad`.
fn fx_and_bad() -> (Scratch, PathBuf, PathBuf) {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({ "fx": fixture(&[]), "bad": fixture(&["--exit-at-start", "9"]) }),
        None,
    );
    let state = sc.path().join("state");
    (sc, cfg, state)
}

/// The names of the fixture's built-in tools (see its header).
const FIXTURE_TOOLS: [&str; 24] = [
    "echo",
    "add",
    "slow",
    "fail",
    "echo_structured",
    "error_with",
    "stderr",
    "crash",
    "huge",
    "flood",
    "garbage",
    "progress",
    "sample",
    "elicit",
    "roots",
    "log",
    "env",
    "cwd",
    "args",
    "pids",
    "touch",
    "cancelled",
    "calls",
    "change_tools",
];

/// `SystemTime` as `YYYY-MM-DDTHH:MM:SSZ` (these sort like the times they stand for).
fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `2026-11-21T06:40:01Z`: exactly this shape, digits where digits go.
fn is_rfc3339_z(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

// ---------------------------------------------------------------------------------------
// tools

#[tokio::test]
async fn tools_lists_qualified_names_with_descriptions_and_a_count() {
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &["--config", s(&cfg), "--state-dir", s(&state), "tools"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let (count_line, tool_lines) = lines.split_last().expect("some output");
    assert_eq!(
        *count_line,
        format!("{} tools from 1 server(s)", FIXTURE_TOOLS.len()),
        "{}",
        out.stdout
    );
    assert_eq!(tool_lines.len(), FIXTURE_TOOLS.len(), "{}", out.stdout);
    for (line, tool) in tool_lines.iter().zip(FIXTURE_TOOLS) {
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some(format!("fx:{tool}").as_str()), "{line}");
    }
    let echo = tool_lines
        .iter()
        .find(|l| l.starts_with("fx:echo "))
        .unwrap();
    assert!(echo.ends_with("  Echo the message back"), "{echo}");
    let add = tool_lines
        .iter()
        .find(|l| l.starts_with("fx:add "))
        .unwrap();
    assert!(add.ends_with("  Add two numbers"), "{add}");
    assert!(!out.stderr.contains("failed"), "{}", out.stderr);
}

#[tokio::test]
async fn tools_json_describes_every_tool() {
    let (sc, cfg, state) = fx_only();
    // Flags after the subcommand work too.
    let out = openpact(
        &sc,
        &[
            "tools",
            "--json",
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout));
    let list = v.as_array().expect("a JSON array");
    let wire: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let want: Vec<String> = FIXTURE_TOOLS.iter().map(|t| format!("fx:{t}")).collect();
    assert_eq!(wire, want);
    for t in list {
        assert_eq!(t["qualified"], t["name"], "{t}");
        assert_eq!(t["server"], "fx", "{t}");
        assert_eq!(t["definition"]["name"], t["name"], "{t}");
        assert!(t["definition"]["inputSchema"].is_object(), "{t}");
    }
    let add = list.iter().find(|t| t["name"] == "fx:add").unwrap();
    assert_eq!(add["definition"]["description"], "Add two numbers");
    assert_eq!(
        add["definition"]["outputSchema"]["required"],
        json!(["sum"])
    );
}

/// Each `tools --json` entry names the server's own tool under `tool` (with `portable`
/// names that is the only place the original name shows).
#[tokio::test]
async fn tools_json_names_the_servers_own_tool() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({ "fx": fixture(&[]) }),
        Some(json!({"toolNames": "portable"})),
    );
    let state = sc.path().join("state");
    let out = openpact(
        &sc,
        &[
            "tools",
            "--json",
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout));
    let list = v.as_array().expect("a JSON array");
    let tools: Vec<&str> = list
        .iter()
        .map(|t| {
            t["tool"]
                .as_str()
                .unwrap_or_else(|| panic!("no `tool` in {t}"))
        })
        .collect();
    assert_eq!(tools, FIXTURE_TOOLS);
    let echo = list.iter().find(|t| t["tool"] == "echo").unwrap();
    assert_eq!(echo["name"], "fx__echo");
    assert_eq!(echo["qualified"], "fx:echo");
}

#[tokio::test]
async fn tools_reports_a_failed_server_on_stderr_and_still_succeeds() {
    let (sc, cfg, state) = fx_and_bad();
    let out = openpact(
        &sc,
        &["--config", s(&cfg), "--state-dir", s(&state), "tools"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout.lines().any(|l| l.starts_with("fx:echo ")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .ends_with(&format!("{} tools from 1 server(s)\n", FIXTURE_TOOLS.len())),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("bad"),
        "the failure belongs on stderr: {}",
        out.stdout
    );
    assert!(out.stderr.contains("server 'bad' failed"), "{}", out.stderr);
    assert!(out.stderr.contains("exit status: 9"), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------------
// call

#[tokio::test]
async fn call_prints_the_text_result() {
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "call",
            "fx:echo",
            r#"{"message":"hi"}"#,
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert_eq!(out.stdout, "hi\n");
}

#[tokio::test]
async fn call_reads_arguments_from_stdin() {
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &[
            "call",
            "fx:echo",
            "-",
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
        ],
        &[],
        Some("{\n  \"message\": \"from stdin\"\n}\n"),
    )
    .await;
    out.expect_code(0);
    assert_eq!(out.stdout, "from stdin\n");
}

#[tokio::test]
async fn call_accepts_pretty_printed_arguments() {
    // The arguments go upstream inside one JSON-RPC line: a newline in them must not
    // split that line.
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "call",
            "fx:echo",
            "{\n  \"message\": \"two\\nlines\"\n}\n",
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert_eq!(out.stdout, "two\nlines\n");
}

/// SIGINT (Ctrl-C) during a call cancels it: exit 130 at once, not when the tool is done.
#[tokio::test]
async fn call_interrupted_exits_130_promptly() {
    let (sc, cfg, state) = fx_only();
    let mut cmd = isolated(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "call",
            "fx:slow",
            r#"{"ms": 30000}"#,
        ],
        &[("OPENPACT_LOG", "info")],
    );
    let mut child = cmd.stdin(Stdio::null()).spawn().expect("spawn openpact");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    // The server is ready (its `ready` log line), so the call is on its way.
    let mut seen = String::new();
    tokio::time::timeout(support::WAIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("ready") && line.contains("server=fx") {
                return;
            }
        }
        panic!("openpact ended before fx was ready: {seen}");
    })
    .await
    .unwrap_or_else(|_| panic!("fx never became ready: {seen}"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = nix::unistd::Pid::from_raw(child.id().expect("running") as i32);
    let t0 = std::time::Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("openpact exits soon after SIGINT")
        .unwrap();
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        let mut rest = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            rest.push_str(&line);
            rest.push('\n');
        }
        rest
    })
    .await
    .unwrap_or_default();
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    assert!(rest.contains("cancelled"), "{rest}");
}

#[tokio::test]
async fn call_json_prints_the_raw_result() {
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "call",
            "fx:add",
            r#"{"a":2,"b":3}"#,
            "--json",
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout));
    assert_eq!(
        v,
        json!({"content": [{"type": "text", "text": "5"}], "structuredContent": {"sum": 5}})
    );
}

#[tokio::test]
async fn call_of_an_is_error_result_exits_1_with_the_text_on_stderr() {
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "call",
            "fx:fail",
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(1);
    assert!(
        out.stderr.contains("this tool always fails"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stdout.contains("this tool always fails"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn call_of_an_unknown_tool_exits_1() {
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "call",
            "fx:nope",
            "{}",
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(1);
    assert!(out.stderr.contains("Unknown tool"), "{}", out.stderr);
    assert!(out.stderr.contains("fx:nope"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

#[tokio::test]
async fn call_with_malformed_json_arguments_fails_clearly() {
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "call",
            "fx:echo",
            r#"{"message": hi}"#,
        ],
        &[],
        None,
    )
    .await;
    assert_ne!(out.code, Some(0), "{out:#?}");
    assert!(out.code.is_some(), "killed by a signal? {out:#?}");
    assert!(out.stderr.contains("not valid JSON"), "{}", out.stderr);
    assert!(
        out.stderr.contains(r#"{"message": hi}"#),
        "the message quotes the input: {}",
        out.stderr
    );
    assert_eq!(out.stdout, "");
}

#[tokio::test]
async fn call_with_non_object_arguments_fails_clearly() {
    let (sc, cfg, state) = fx_only();
    for args in ["[1]", "\"hi\"", "42"] {
        let out = openpact(
            &sc,
            &[
                "--config",
                s(&cfg),
                "--state-dir",
                s(&state),
                "call",
                "fx:echo",
                args,
            ],
            &[],
            None,
        )
        .await;
        assert!(matches!(out.code, Some(c) if c != 0), "{args}: {out:#?}");
        assert!(
            out.stderr.contains("must be a JSON object"),
            "{args}: {}",
            out.stderr
        );
        assert_eq!(out.stdout, "", "{args}");
    }
}

#[tokio::test]
async fn call_starts_only_the_server_it_needs() {
    let (sc, cfg, state) = fx_and_bad();
    let env = [("OPENPACT_LOG", "debug")];
    // Control: a command that starts everything does show `bad` failing in the log.
    let all = openpact(
        &sc,
        &["--config", s(&cfg), "--state-dir", s(&state), "servers"],
        &env,
        None,
    )
    .await;
    all.expect_code(0);
    assert!(
        all.stderr.contains("server=bad"),
        "control run should log bad's failure: {}",
        all.stderr
    );

    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "call",
            "fx:echo",
            r#"{"message":"only fx"}"#,
        ],
        &env,
        None,
    )
    .await;
    out.expect_code(0);
    assert_eq!(out.stdout, "only fx\n");
    assert!(
        out.stderr.contains("server=fx"),
        "the debug log names the server it started: {}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("bad"),
        "server 'bad' must not be started for fx:echo: {}",
        out.stderr
    );
    assert!(!out.stderr.contains("failing at start"), "{}", out.stderr);
}

// ---------------------------------------------------------------------------------------
// servers

#[tokio::test]
async fn servers_shows_state_protocol_tools_times_and_failures() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({ "fx": fixture(&["--tools", "3"]), "bad": fixture(&["--exit-at-start", "9"]) }),
        None,
    );
    let state = sc.path().join("state");
    let tools = FIXTURE_TOOLS.len() + 3;

    let before = rfc3339(SystemTime::now());
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "servers",
            "--json",
        ],
        &[],
        None,
    )
    .await;
    let after = rfc3339(SystemTime::now());
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout));
    let list = v.as_array().expect("a JSON array");
    assert_eq!(list.len(), 2, "{v:#}");
    let fx = list.iter().find(|x| x["name"] == "fx").expect("fx listed");
    assert_eq!(fx["state"], "ready", "{fx:#}");
    assert_eq!(fx["protocolVersion"], "2025-11-25", "{fx:#}");
    assert_eq!(fx["tools"], json!(tools), "{fx:#}");
    assert_eq!(fx["serverInfo"]["name"], "fixture", "{fx:#}");
    assert!(fx["reason"].is_null(), "{fx:#}");
    let started = fx["startedAt"].as_str().expect("startedAt is a string");
    assert!(is_rfc3339_z(started), "startedAt {started:?}");
    assert!(
        before.as_str() <= started && started <= after.as_str(),
        "startedAt {started} not within {before}..{after}"
    );
    let ready_ms = fx["readyMs"].as_u64().expect("readyMs is a number");
    assert!(
        ready_ms < support::WAIT.as_millis() as u64,
        "readyMs {ready_ms}"
    );

    let bad = list
        .iter()
        .find(|x| x["name"] == "bad")
        .expect("bad listed");
    assert_eq!(bad["state"], "failed", "{bad:#}");
    let reason = bad["reason"]
        .as_str()
        .expect("a failed server has a reason");
    assert!(reason.contains("exit status: 9"), "{reason}");
    assert!(
        bad["tools"].is_null() && bad["readyMs"].is_null() && bad["protocolVersion"].is_null(),
        "{bad:#}"
    );
    assert!(
        is_rfc3339_z(bad["startedAt"].as_str().unwrap_or("")),
        "{bad:#}"
    );
    let stderr: Vec<&str> = bad["stderr"]
        .as_array()
        .expect("stderr lines")
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(
        stderr.contains(&"fixture: failing at start as asked"),
        "{stderr:?}"
    );

    // The human table says the same.
    let out = openpact(
        &sc,
        &["servers", "--config", s(&cfg), "--state-dir", s(&state)],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header[..5],
        ["NAME", "STATE", "PROTOCOL", "TOOLS", "STARTED"],
        "{}",
        out.stdout
    );
    let fx_row: Vec<&str> = lines
        .iter()
        .find(|l| l.starts_with("fx "))
        .expect("fx row")
        .split_whitespace()
        .collect();
    assert_eq!(
        fx_row[1..4],
        ["ready", "2025-11-25", tools.to_string().as_str()],
        "{}",
        out.stdout
    );
    assert!(is_rfc3339_z(fx_row[4]), "{}", out.stdout);
    assert!(
        fx_row[5].ends_with("ms") || fx_row[5].ends_with('s'),
        "READY IN {:?}",
        fx_row[5]
    );
    let bad_row: Vec<&str> = lines
        .iter()
        .find(|l| l.starts_with("bad "))
        .expect("bad row")
        .split_whitespace()
        .collect();
    assert_eq!(bad_row[1..4], ["failed", "-", "-"], "{}", out.stdout);
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start().starts_with("reason: ") && l.contains("exit status: 9")),
        "{}",
        out.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.trim_start() == "stderr: fixture: failing at start as asked"),
        "{}",
        out.stdout
    );
}

/// With an `openpact serve` running on the same state dir, `servers` shows that hub's servers
/// (restarts included) instead of starting its own; `--start` starts fresh ones; once the
/// hub has exited its status file is gone.
#[tokio::test]
async fn servers_shows_a_running_serve_from_the_state_dir() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({ "fx": fixture(&[]) }),
        Some(json!({"restart": {"initialBackoff": "50ms"}})),
    );
    // The harness's state dir for this config, which the CLI is pointed at too.
    let state = sc.path().join("state");
    let mut hub = support::serve(&cfg).await;
    hub.client.initialize().await;
    assert!(
        hub.client
            .list_tools()
            .await
            .iter()
            .any(|t| t["name"] == "fx:echo")
    );
    let hub_pid = hub.child.id().expect("hub running");
    // One crash, so the running hub has something a fresh start would not show.
    let crashed = hub.client.call("fx:crash", json!({})).await;
    assert!(
        crashed.get("error").is_some() || crashed["result"]["isError"] == true,
        "{crashed}"
    );

    let args = [
        "--config",
        s(&cfg),
        "--state-dir",
        s(&state),
        "servers",
        "--json",
    ];
    let deadline = std::time::Instant::now() + support::WAIT;
    let live = loop {
        let out = openpact(&sc, &args, &[], None).await;
        out.expect_code(0);
        let v: Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout));
        let fx = &v[0]["servers"][0];
        if fx["restarts"] == 1 && fx["state"] == "ready" {
            break v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the running hub never showed fx restarted once: {v:#}\n{}",
            hub.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let hubs = live.as_array().expect("a list of running hubs");
    assert_eq!(hubs.len(), 1, "{live:#}");
    assert_eq!(hubs[0]["pid"], hub_pid, "{live:#}");
    assert!(
        hubs[0]["config"]
            .as_str()
            .is_some_and(|c| c.contains(s(&cfg))),
        "{live:#}"
    );
    assert!(
        is_rfc3339_z(hubs[0]["startedAt"].as_str().unwrap_or("")),
        "{live:#}"
    );
    let fx = &hubs[0]["servers"][0];
    assert_eq!(fx["name"], "fx");
    assert_eq!(fx["tools"], FIXTURE_TOOLS.len());
    assert!(
        fx["lastError"].as_str().is_some_and(|e| !e.is_empty()),
        "the crash is remembered: {fx:#}"
    );

    let human = openpact(
        &sc,
        &["--config", s(&cfg), "--state-dir", s(&state), "servers"],
        &[],
        None,
    )
    .await;
    human.expect_code(0);
    assert!(
        human
            .stdout
            .contains(&format!("openpact serve (pid {hub_pid}")),
        "{}",
        human.stdout
    );

    // --start: servers started for the occasion, never restarted.
    let fresh = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "servers",
            "--json",
            "--start",
        ],
        &[],
        None,
    )
    .await;
    fresh.expect_code(0);
    let v: Value = serde_json::from_str(&fresh.stdout).unwrap();
    assert_eq!(v[0]["name"], "fx", "a plain list of servers: {v:#}");
    assert_eq!(v[0]["restarts"], 0, "{v:#}");
    assert_ne!(v[0]["pid"], fx["pid"], "{v:#}");

    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0));
    let left: Vec<_> = std::fs::read_dir(&state)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("serve-"))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "status files left behind: {left:?}");
    let after = openpact(&sc, &args, &[], None).await;
    after.expect_code(0);
    let v: Value = serde_json::from_str(&after.stdout).unwrap();
    assert_eq!(
        v[0]["name"], "fx",
        "after the hub exited, servers starts its own: {v:#}"
    );
    assert_eq!(v[0]["restarts"], 0, "{v:#}");
}

// ---------------------------------------------------------------------------------------
// config check

#[tokio::test]
async fn config_check_prints_servers_and_never_env_values() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({"x": {"command": support::FIXTURE, "args": ["--name", "xx"], "env": {"TOKEN": "s3cr3t-value"}}}),
        None,
    );
    let state = sc.path().join("state");
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "config",
            "check",
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout.contains(&format!("config: {}", cfg.display())),
        "{}",
        out.stdout
    );
    assert!(out.stdout.lines().any(|l| l == "x"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("command: {}", support::FIXTURE)),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(r#"args: ["--name","xx"]"#),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("TOKEN"), "{}", out.stdout);
    assert!(
        out.stdout.contains("ok: 1 server(s) enabled"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("s3cr3t") && !out.stderr.contains("s3cr3t"),
        "secret shown: {out:#?}"
    );

    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "config",
            "check",
            "--json",
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        !out.stdout.contains("s3cr3t") && !out.stderr.contains("s3cr3t"),
        "secret shown: {out:#?}"
    );
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout));
    assert_eq!(v["config"], s(&cfg));
    assert_eq!(v["stateDir"], s(&state));
    assert_eq!(v["warnings"], json!([]));
    let x = &v["servers"][0];
    assert_eq!(x["name"], "x");
    assert_eq!(x["type"], "stdio");
    assert_eq!(x["command"], support::FIXTURE);
    assert_eq!(x["args"], json!(["--name", "xx"]));
    assert_eq!(x["env"], json!(["TOKEN"]));
    assert_eq!(x["disabled"], false);
}

#[tokio::test]
async fn config_check_names_file_path_and_fix_for_an_unset_variable() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({"x": {"command": support::FIXTURE, "args": ["${NOPE_VAR}"]}}),
        None,
    );
    let state = sc.path().join("state");
    for json_flag in [false, true] {
        let mut args = vec![
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "config",
            "check",
        ];
        if json_flag {
            args.push("--json");
        }
        let out = openpact(&sc, &args, &[], None).await;
        out.expect_code(1);
        let want = format!(
            "{}: mcpServers.x.args[0]: ${{NOPE_VAR}} is not set",
            cfg.display()
        );
        assert!(
            out.stderr.contains(&want),
            "want {want:?} in {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("export it or use ${NOPE_VAR:-}"),
            "a fix is suggested: {}",
            out.stderr
        );
        assert!(!out.stdout.contains("ok:"), "{}", out.stdout);
    }
}

#[tokio::test]
async fn config_check_warns_about_a_typo_key() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({"x": {"command": support::FIXTURE, "comand": "oops"}}),
        None,
    );
    let state = sc.path().join("state");
    let out = openpact(
        &sc,
        &[
            "config",
            "check",
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    let warning = out
        .stderr
        .lines()
        .find(|l| l.contains("comand"))
        .unwrap_or_else(|| panic!("no warning: {}", out.stderr));
    assert!(warning.contains("mcpServers.x.comand"), "{warning}");
    assert!(
        warning.contains("did you mean") && warning.contains("command"),
        "{warning}"
    );

    let out = openpact(
        &sc,
        &[
            "config",
            "check",
            "--json",
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let warnings = v["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{v:#}");
    assert!(
        warnings[0].as_str().unwrap().contains("did you mean"),
        "{v:#}"
    );
}

#[tokio::test]
async fn config_check_points_at_a_json_syntax_error() {
    let sc = Scratch::new();
    let cfg = sc.path().join("broken.json");
    // Line 3, column 9: the `{` where a `:` belongs.
    std::fs::write(&cfg, "{\n  \"mcpServers\": {\n    \"x\" {}\n  }\n}\n").unwrap();
    let state = sc.path().join("state");
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "config",
            "check",
        ],
        &[],
        None,
    )
    .await;
    out.expect_code(1);
    let want = format!("{}:3:9:", cfg.display());
    assert!(
        out.stderr.contains(&want),
        "want {want:?} in {}",
        out.stderr
    );
}

#[tokio::test]
async fn global_flags_work_before_and_after_the_subcommand() {
    let (sc, cfg, state) = fx_only();
    let before = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
            "config",
            "check",
        ],
        &[],
        None,
    )
    .await;
    let after = openpact(
        &sc,
        &[
            "config",
            "check",
            "--config",
            s(&cfg),
            "--state-dir",
            s(&state),
        ],
        &[],
        None,
    )
    .await;
    let mixed = openpact(
        &sc,
        &[
            "--state-dir",
            s(&state),
            "config",
            "check",
            "--config",
            s(&cfg),
        ],
        &[],
        None,
    )
    .await;
    before.expect_code(0);
    assert!(
        before
            .stdout
            .contains(&format!("config: {}", cfg.display())),
        "{}",
        before.stdout
    );
    assert!(
        before
            .stdout
            .contains(&format!("state dir: {}", state.display())),
        "{}",
        before.stdout
    );
    assert!(
        before.stdout.lines().any(|l| l == "fx"),
        "{}",
        before.stdout
    );
    assert_eq!(before.stdout, after.stdout);
    assert_eq!(before.stdout, mixed.stdout);
    assert_eq!((after.code, mixed.code), (Some(0), Some(0)));
}

#[tokio::test]
async fn openpact_config_variable_is_honoured() {
    let (sc, cfg, state) = fx_only();
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[("OPENPACT_CONFIG", s(&cfg))],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout.contains(&format!("config: {}", cfg.display())),
        "{}",
        out.stdout
    );
    assert!(out.stdout.lines().any(|l| l == "fx"), "{}", out.stdout);

    // It also feeds the other commands.
    let out = openpact(
        &sc,
        &[
            "--state-dir",
            s(&state),
            "call",
            "fx:echo",
            r#"{"message":"via env"}"#,
        ],
        &[("OPENPACT_CONFIG", s(&cfg))],
        None,
    )
    .await;
    out.expect_code(0);
    assert_eq!(out.stdout, "via env\n");

    // --config wins over it.
    let other = sc.path().join("other.json");
    std::fs::write(
        &other,
        json!({"mcpServers": {"other": fixture(&[])}}).to_string(),
    )
    .unwrap();
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&other),
            "--state-dir",
            s(&state),
            "config",
            "check",
        ],
        &[("OPENPACT_CONFIG", s(&cfg))],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout.lines().any(|l| l == "other") && !out.stdout.lines().any(|l| l == "fx"),
        "{}",
        out.stdout
    );

    // A variable naming a missing file is an error, not a silent fallback.
    let missing = sc.path().join("missing.json");
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[("OPENPACT_CONFIG", s(&missing))],
        None,
    )
    .await;
    out.expect_code(1);
    assert!(
        out.stderr.contains("config file not found") && out.stderr.contains("OPENPACT_CONFIG"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn without_any_config_the_embedded_default_is_used() {
    let sc = Scratch::new();
    let state = sc.path().join("state");
    // The helper gives an empty cwd and an empty XDG_CONFIG_HOME, and unsets OPENPACT_CONFIG.
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(out.stdout.contains("embedded default"), "{}", out.stdout);
    assert!(
        out.stdout.contains("ok: 0 server(s) enabled"),
        "{}",
        out.stdout
    );

    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check", "--json"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(v["config"].is_null(), "{v:#}");
    assert_eq!(v["servers"], json!([]));

    // Control: a ./mcp.json in the working directory is picked up...
    let local = sc.path().join("cwd").join("mcp.json");
    std::fs::write(
        &local,
        json!({"mcpServers": {"local": fixture(&[])}}).to_string(),
    )
    .unwrap();
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(out.stdout.lines().any(|l| l == "local"), "{}", out.stdout);
    std::fs::remove_file(&local).unwrap();
    // ...and so is $XDG_CONFIG_HOME/openpact/mcp.json.
    let user = sc
        .path()
        .join("xdg-config")
        .join("openpact")
        .join("mcp.json");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(
        &user,
        json!({"mcpServers": {"user": fixture(&[])}}).to_string(),
    )
    .unwrap();
    let out = openpact(
        &sc,
        &["--state-dir", s(&state), "config", "check"],
        &[],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(out.stdout.lines().any(|l| l == "user"), "{}", out.stdout);
}

#[tokio::test]
async fn state_dir_comes_from_the_flag_then_the_variable() {
    let (sc, cfg, state) = fx_only();
    let from_env = sc.path().join("env-state");
    let out = openpact(
        &sc,
        &["--config", s(&cfg), "config", "check"],
        &[("OPENPACT_STATE_DIR", s(&from_env))],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout
            .contains(&format!("state dir: {}", from_env.display())),
        "{}",
        out.stdout
    );

    let out = openpact(
        &sc,
        &["--config", s(&cfg), "config", "check", "--json"],
        &[("OPENPACT_STATE_DIR", s(&from_env))],
        None,
    )
    .await;
    out.expect_code(0);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["stateDir"], s(&from_env));

    // The flag wins over the variable.
    let out = openpact(
        &sc,
        &[
            "--config",
            s(&cfg),
            "config",
            "check",
            "--state-dir",
            s(&state),
        ],
        &[("OPENPACT_STATE_DIR", s(&from_env))],
        None,
    )
    .await;
    out.expect_code(0);
    assert!(
        out.stdout
            .contains(&format!("state dir: {}", state.display())),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("env-state"), "{}", out.stdout);

    // Neither: $XDG_STATE_HOME/openpact (the helper points it into the scratch dir).
    let out = openpact(&sc, &["--config", s(&cfg), "config", "check"], &[], None).await;
    out.expect_code(0);
    let xdg = sc.path().join("xdg-state").join("openpact");
    assert!(
        out.stdout
            .contains(&format!("state dir: {}", xdg.display())),
        "{}",
        out.stdout
    );
}

// ---------------------------------------------------------------------------------------
// serving, the example config, usage

#[tokio::test]
async fn mcp_flag_serves_over_stdio() {
    let (_sc, cfg, _state) = fx_only();
    let mut hub = support::serve_with(&cfg, &["--mcp"], &[]).await;
    let init = tokio::time::timeout(support::WAIT, hub.client.initialize())
        .await
        .expect("initialize answered");
    assert_eq!(init["serverInfo"]["name"], "openpact", "{init:#}");
    assert_eq!(init["protocolVersion"], "2025-11-25", "{init:#}");
    let tools = hub.client.list_tools().await;
    assert!(tools.iter().any(|t| t["name"] == "fx:echo"), "{tools:?}");
    let r = hub
        .client
        .call("fx:echo", json!({"message": "over --mcp"}))
        .await;
    assert_eq!(support::text(&r), "over --mcp");
    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0), "{}", hub.stderr());
}

#[tokio::test]
async fn the_example_config_checks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(
        root.join("mcp.example.json").is_file(),
        "mcp.example.json is missing at the repository root"
    );
    let sc = Scratch::new();
    let state = sc.path().join("state");
    let out = Command::new(OPENPACT)
        .args([
            "--config",
            "mcp.example.json",
            "--state-dir",
            s(&state),
            "config",
            "check",
        ])
        .current_dir(root)
        .env_remove("OPENPACT_CONFIG")
        .env_remove("OPENPACT_STATE_DIR")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(LIMIT, out)
        .await
        .expect("config check finishes")
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("config: mcp.example.json") || stdout.contains("mcp.example.json"),
        "{stdout}"
    );
    assert!(stdout.contains("ok: "), "{stdout}");
}

#[tokio::test]
async fn no_subcommand_exits_2_with_a_hint_and_help_exits_0() {
    let sc = Scratch::new();
    let state = sc.path().join("state");
    let out = openpact(&sc, &["--state-dir", s(&state)], &[], None).await;
    out.expect_code(2);
    assert!(out.stderr.contains("openpact --help"), "{}", out.stderr);
    assert!(out.stderr.contains("openpact serve"), "{}", out.stderr);
    assert_eq!(out.stdout, "", "stdout stays clean");

    let out = openpact(&sc, &["--help"], &[], None).await;
    out.expect_code(0);
    for cmd in [
        "serve",
        "tools",
        "call",
        "servers",
        "config",
        "--config",
        "--state-dir",
        "--mcp",
    ] {
        assert!(
            out.stdout.contains(cmd),
            "--help mentions {cmd}: {}",
            out.stdout
        );
    }
}
