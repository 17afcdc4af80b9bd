//! Independent implementations on either side of the hub.
//!
//! - rmcp (the Rust SDK) as the client of `openpact serve`, with both tool namings and both
//!   lifecycles (plain `initialize`, and `server/discover` first with fallback).
//! - Real community servers (server-everything, server-filesystem, mcp-server-time), each run
//!   directly and through the hub: the hub must show the same tools, renamed, and give the
//!   same results.
//! - The MCP Inspector CLI and the Python `mcp` SDK as clients of the hub.
//!
//! The real peers come from `.ci/peers.sh`; without them these tests print SKIPPED and
//! pass, unless `OPENPACT_REQUIRE_PEERS=1`.

use crate::support::rmcp::{connect, first_text, obj, transport};
use crate::support::{
    self, Client, OPENPACT, Peers, Scratch, StderrLog, assert_lifecycle, fixture, names,
    openpact_for, run_in, sent_methods, spawn_direct, state_dir,
};
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientLifecycleMode, ClientServiceExt, ServiceError};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::process::Child;

/// A config with the fixture as `fx`. `listWait` is generous so that a busy machine never
/// shows a client an empty list.
fn fx_config(sc: &Scratch, tool_names: &str) -> PathBuf {
    sc.servers(
        json!({ "fx": fixture(&[]) }),
        Some(json!({"toolNames": tool_names, "listWait": "30s"})),
    )
}

// ---------------------------------------------------------------------------------------
// rmcp as the client

/// `openpact --config CONFIG --state-dir … serve` as an rmcp child-process transport.
fn rmcp_transport(config: &Path) -> (TokioChildProcess, StderrLog) {
    let mut cmd = openpact_for(config, None);
    cmd.arg("serve");
    transport(cmd)
}

/// Lists and calls the fixture's tools through a connected rmcp client; `name` turns a
/// fixture tool name into the hub's name for it.
async fn exercise_with_rmcp<S: rmcp::Service<rmcp::RoleClient>>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, S>,
    version: &str,
    name: impl Fn(&str) -> String,
) {
    let info = serde_json::to_value(
        client
            .peer_info()
            .expect("rmcp has the server's info")
            .as_ref(),
    )
    .unwrap();
    assert_eq!(info["serverInfo"]["name"], "openpact", "{info:#}");
    assert_eq!(info["protocolVersion"], version, "{info:#}");
    assert_eq!(
        info["capabilities"]["tools"]["listChanged"], true,
        "{info:#}"
    );

    let tools = tokio::time::timeout(support::WAIT, client.list_all_tools())
        .await
        .expect("tools/list answered")
        .expect("tools/list");
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    for t in ["echo", "add", "fail", "change_tools"] {
        assert!(
            names.contains(&name(t)),
            "{} missing from {names:?}",
            name(t)
        );
    }
    assert_eq!(names.len(), 24, "{names:?}");
    let add = tools.iter().find(|t| t.name == name("add")).unwrap();
    assert_eq!(add.description.as_deref(), Some("Add two numbers"));
    let schema = serde_json::to_value(
        add.output_schema
            .as_ref()
            .expect("add keeps its outputSchema"),
    )
    .unwrap();
    assert_eq!(schema["required"], json!(["sum"]));

    let echo = client
        .call_tool(
            CallToolRequestParams::new(name("echo"))
                .with_arguments(obj(json!({"message": "hi from rmcp"}))),
        )
        .await
        .expect("echo call");
    assert_ne!(echo.is_error, Some(true), "{echo:?}");
    assert_eq!(first_text(&echo), "hi from rmcp");

    let sum = client
        .call_tool(
            CallToolRequestParams::new(name("add")).with_arguments(obj(json!({"a": 2, "b": 3}))),
        )
        .await
        .expect("add call");
    assert_ne!(sum.is_error, Some(true), "{sum:?}");
    assert_eq!(sum.structured_content, Some(json!({"sum": 5})));
    assert_eq!(first_text(&sum), "5");

    let fail = client
        .call_tool(CallToolRequestParams::new(name("fail")))
        .await
        .expect("a tool error is a result, not an error");
    assert_eq!(fail.is_error, Some(true), "{fail:?}");
    assert_eq!(first_text(&fail), "this tool always fails");

    // An unknown tool is a JSON-RPC error, which rmcp reports as such.
    match client
        .call_tool(CallToolRequestParams::new(name("nope")))
        .await
    {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code.0, -32602, "{e:?}");
            assert!(e.message.contains("Unknown tool"), "{e:?}");
        }
        other => panic!("expected an MCP error for an unknown tool, got {other:?}"),
    }
}

#[tokio::test]
async fn rmcp_client_lists_and_calls_qualified_tools() {
    let sc = Scratch::new();
    let config = fx_config(&sc, "qualified");
    let (transport, _log) = rmcp_transport(&config);
    let client = connect((), transport).await;
    exercise_with_rmcp(&client, "2025-11-25", |t| format!("fx:{t}")).await;
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn rmcp_client_lists_and_calls_portable_tools() {
    let sc = Scratch::new();
    let config = fx_config(&sc, "portable");
    let (transport, _log) = rmcp_transport(&config);
    let client = connect((), transport).await;
    exercise_with_rmcp(&client, "2025-11-25", |t| format!("fx__{t}")).await;
    let tools = client.list_all_tools().await.unwrap();
    for t in &tools {
        let n = t.name.as_ref();
        assert!(
            n.len() <= 64
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "not portable: {n}"
        );
    }
    client.cancel().await.expect("close");
}

/// rmcp's `Auto` lifecycle sends `server/discover` first; the hub's -32601 must make it fall
/// back to `initialize` on the same pipe at once (rmcp would also fall back after 10 s of
/// silence, so the time matters).
#[tokio::test]
async fn rmcp_auto_lifecycle_settles_on_2026_07_28() {
    let sc = Scratch::new();
    let config = fx_config(&sc, "qualified");
    let (transport, _log) = rmcp_transport(&config);
    let t0 = Instant::now();
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: None,
    };
    let client = tokio::time::timeout(support::WAIT, ().serve_with_lifecycle(transport, lifecycle))
        .await
        .expect("handshake in time")
        .expect("rmcp auto lifecycle");
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(8),
        "discovery took {took:?}: did the hub answer server/discover?"
    );
    exercise_with_rmcp(&client, "2026-07-28", |t| format!("fx:{t}")).await;
    client.cancel().await.expect("close");
}

// ---------------------------------------------------------------------------------------
// Real community servers: directly vs through the hub

/// A real server run directly, with the harness client on its pipes.
struct Direct {
    _child: Child,
    client: Client,
    init: Value,
    _log: StderrLog,
}

async fn direct(what: &'static str, words: &[String], cwd: &Path) -> Direct {
    let (child, mut client, log) = spawn_direct(what, words, cwd);
    let init = client.initialize().await;
    assert!(
        init["protocolVersion"].is_string(),
        "{what}: initialize gave {init}"
    );
    Direct {
        _child: child,
        client,
        init,
        _log: log,
    }
}

fn without_name(tool: &Value) -> Value {
    let mut t = tool.clone();
    t.as_object_mut()
        .expect("a tool is an object")
        .remove("name");
    t
}

/// The first of `candidates` that the server lists.
fn pick(listed: &[String], candidates: &[&str]) -> String {
    candidates
        .iter()
        .find(|c| listed.iter().any(|n| n == *c))
        .unwrap_or_else(|| panic!("none of {candidates:?} in {listed:?}"))
        .to_string()
}

/// The hub's tools for `prefix` are the direct list, in order, renamed, otherwise identical.
fn assert_same_tools(hub_tools: &[Value], direct_tools: &[Value], prefix: &str) {
    let mine: Vec<&Value> = hub_tools
        .iter()
        .filter(|t| {
            t["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("{prefix}:")))
        })
        .collect();
    assert_eq!(
        mine.iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>(),
        names(direct_tools)
            .iter()
            .map(|n| format!("{prefix}:{n}"))
            .collect::<Vec<_>>(),
        "{prefix}: the hub's names are the direct names, prefixed, in order"
    );
    for (h, d) in mine.iter().zip(direct_tools) {
        assert_eq!(
            without_name(h),
            without_name(d),
            "{prefix}: tool {} differs beyond its name",
            d["name"]
        );
    }
}

/// Calls `tool` directly and `prefix:tool` through the hub; the results must be equal.
/// Returns the direct response.
async fn same_call(
    hub: &mut Client,
    direct: &mut Client,
    prefix: &str,
    tool: &str,
    args: Value,
) -> Value {
    let d = direct.call(tool, args.clone()).await;
    let h = hub.call(&format!("{prefix}:{tool}"), args.clone()).await;
    assert!(d.get("result").is_some(), "direct {tool} {args}: {d}");
    assert_eq!(h.get("error"), None, "hub {prefix}:{tool} {args}: {h}");
    assert_eq!(
        h["result"], d["result"],
        "{prefix}:{tool} {args}: hub and direct results differ"
    );
    d
}

#[tokio::test]
async fn real_servers_look_and_answer_the_same_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let files = sc.path().join("files");
    std::fs::create_dir_all(files.join("sub")).unwrap();
    std::fs::write(
        files.join("hello.txt"),
        "hello from openpact\nsecond line\n",
    )
    .unwrap();
    // server-filesystem compares real paths.
    let files = std::fs::canonicalize(&files).unwrap();
    let files_s = files.to_str().unwrap();
    let config = sc.servers(
        json!({
            "everything": peers.entry("PEER_EVERYTHING", &[]),
            "fs": peers.entry("PEER_FILESYSTEM", &[files_s]),
            "time": peers.entry("PEER_TIME", &[]),
        }),
        // mcp-server-time takes about a second to start, more on a busy machine.
        Some(json!({"listWait": "60s"})),
    );

    let fs_words = {
        let mut w = peers.command("PEER_FILESYSTEM");
        w.push(files_s.to_string());
        w
    };
    let everything_words = peers.command("PEER_EVERYTHING");
    let time_words = peers.command("PEER_TIME");
    let (mut hub, mut everything, mut fs, mut time) = tokio::join!(
        async {
            let mut hub = support::serve(&config).await;
            hub.client.initialize().await;
            hub
        },
        direct("server-everything", &everything_words, sc.path()),
        direct("server-filesystem", &fs_words, sc.path()),
        direct("mcp-server-time", &time_words, sc.path()),
    );

    let hub_tools = hub.client.list_tools().await;
    let everything_tools = everything.client.list_tools().await;
    let fs_tools = fs.client.list_tools().await;
    let time_tools = time.client.list_tools().await;
    assert_eq!(
        hub_tools.len(),
        everything_tools.len() + fs_tools.len() + time_tools.len(),
        "hub lists {:?}",
        names(&hub_tools)
    );
    assert_same_tools(&hub_tools, &everything_tools, "everything");
    assert_same_tools(&hub_tools, &fs_tools, "fs");
    assert_same_tools(&hub_tools, &time_tools, "time");

    // server-everything
    let listed = names(&everything_tools);
    let d = same_call(
        &mut hub.client,
        &mut everything.client,
        "everything",
        "echo",
        json!({"message": "hi"}),
    )
    .await;
    assert!(support::text(&d).contains("hi"), "{d}");
    let sum = pick(&listed, &["get-sum", "get_sum", "add"]);
    let d = same_call(
        &mut hub.client,
        &mut everything.client,
        "everything",
        &sum,
        json!({"a": 2, "b": 3}),
    )
    .await;
    assert!(support::text(&d).contains('5'), "{d}");

    // server-filesystem
    let listed = names(&fs_tools);
    let d = same_call(
        &mut hub.client,
        &mut fs.client,
        "fs",
        "list_directory",
        json!({"path": files_s}),
    )
    .await;
    let listing = support::text(&d);
    assert!(
        listing.contains("hello.txt") && listing.contains("sub"),
        "{listing}"
    );
    let read = pick(&listed, &["read_text_file", "read_file"]);
    let hello = files.join("hello.txt");
    let d = same_call(
        &mut hub.client,
        &mut fs.client,
        "fs",
        &read,
        json!({"path": hello.to_str().unwrap()}),
    )
    .await;
    assert_eq!(support::text(&d), "hello from openpact\nsecond line\n");
    // A refusal outside the allowed dir is passed on as it is, too.
    let outside = sc.path().join("outside.txt");
    std::fs::write(&outside, "not yours").unwrap();
    let d = same_call(
        &mut hub.client,
        &mut fs.client,
        "fs",
        &read,
        json!({"path": outside.to_str().unwrap()}),
    )
    .await;
    assert_eq!(d["result"]["isError"], true, "{d}");

    // mcp-server-time: fixed inputs only (get_current_time changes from call to call).
    let d = same_call(
        &mut hub.client,
        &mut time.client,
        "time",
        "convert_time",
        json!({"source_timezone": "America/New_York", "time": "16:30", "target_timezone": "Asia/Tokyo"}),
    )
    .await;
    let converted = support::text(&d);
    assert!(
        converted.contains("Asia/Tokyo") && converted.contains("America/New_York"),
        "{converted}"
    );

    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0), "{}", hub.stderr());
}

/// What a server says about itself in `initialize.instructions` reaches the client, under
/// the server's name, as the README promises.
#[tokio::test]
async fn real_server_instructions_reach_the_client() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = sc.servers(
        json!({"everything": peers.entry("PEER_EVERYTHING", &[])}),
        Some(json!({"listWait": "60s"})),
    );
    let words = peers.command("PEER_EVERYTHING");
    let everything = direct("server-everything", &words, sc.path()).await;
    // Let the server come up first (it waits a few seconds for the client's capabilities,
    // then starts in a few hundred ms): instructions can only be in the `initialize` answer
    // of servers ready by then. Fast servers are covered in `hub`.
    let mut hub = support::serve(&config).await;
    hub.wait_log("ready server=everything", Duration::from_secs(30))
        .await;
    let init = hub.client.initialize().await;

    let own = everything.init["instructions"]
        .as_str()
        .expect("server-everything has instructions")
        .trim()
        .to_string();
    assert!(!own.is_empty());
    let merged = init["instructions"]
        .as_str()
        .unwrap_or_else(|| panic!("no instructions from the hub: {init:#}"));
    assert!(
        merged.contains(&format!("## everything\n{own}")),
        "{merged}"
    );
}

// ---------------------------------------------------------------------------------------
// The MCP Inspector CLI and the Python SDK as clients of the hub

#[tokio::test]
async fn inspector_cli_lists_and_calls_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = fx_config(&sc, "qualified");
    // The Inspector keeps `--config` for itself, so the hub gets its config from the
    // environment the Inspector passes on (`-e`).
    let inspector = |method: &[&str]| {
        let mut w = peers.command("PEER_INSPECTOR");
        w.push("--cli".into());
        w.push(OPENPACT.into());
        w.push("serve".into());
        w.push("-e".into());
        w.push(format!("OPENPACT_CONFIG={}", config.display()));
        w.push("-e".into());
        w.push(format!(
            "OPENPACT_STATE_DIR={}",
            state_dir(&config).display()
        ));
        w.extend(method.iter().map(|s| s.to_string()));
        w.extend(["--format", "json", "-q"].map(String::from));
        w
    };
    let list = inspector(&["--method", "tools/list"]);
    let echo = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        "fx:echo",
        "--tool-arg",
        "message=hi there",
    ]);
    let add = inspector(&[
        "--method",
        "tools/call",
        "--tool-name",
        "fx:add",
        "--tool-arg",
        "a=2",
        "b=3",
    ]);
    let (list, echo, add) = tokio::join!(
        run_in(&list, sc.path(), &[]),
        run_in(&echo, sc.path(), &[]),
        run_in(&add, sc.path(), &[])
    );

    let list = list.json();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"fx:echo") && names.contains(&"fx:add"),
        "{names:?}"
    );
    assert_eq!(names.len(), 24, "{names:?}");
    assert_eq!(
        echo.json()["result"]["content"],
        json!([{"type": "text", "text": "hi there"}])
    );
    assert_eq!(add.json()["result"]["structuredContent"], json!({"sum": 5}));
}

/// A small client on the Python SDK: connects in MODE, lists tools, calls three of them and
/// prints what it saw as one JSON object.
const PY_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import Client, StdioServerParameters

async def main():
    mode, command, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    async with Client(StdioServerParameters(command=command, args=args), mode=mode, read_timeout_seconds=60) as client:
        info = client.server_info
        out = {"protocolVersion": client.protocol_version, "serverName": info.name if info else None}
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        dump = lambda r: r.model_dump(mode="json", by_alias=True, exclude_none=True)
        out["echo"] = dump(await client.call_tool("fx:echo", {"message": "hi from python"}))
        out["add"] = dump(await client.call_tool("fx:add", {"a": 2, "b": 3}))
        out["fail"] = dump(await client.call_tool("fx:fail", {}))
    print(json.dumps(out))

asyncio.run(main())
"#;

#[tokio::test]
async fn python_sdk_client_works_in_auto_and_handshake_mode() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = fx_config(&sc, "qualified");
    let script = sc.path().join("py_client.py");
    std::fs::write(&script, PY_CLIENT).unwrap();
    // The hub runs behind `tee`, which records what the client sent.
    let sent = |mode: &str| sc.path().join(format!("sent-{mode}.jsonl"));
    let state = state_dir(&config);
    let hub = [
        OPENPACT,
        "--config",
        config.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "serve",
    ];
    let client = |mode: &str| peers.python_via_tee(&script, mode, &sent(mode), &hub);
    let (auto_words, handshake_words) = (client("auto"), client("legacy"));
    let (auto, handshake) = tokio::join!(
        run_in(&auto_words, sc.path(), &[]),
        run_in(&handshake_words, sc.path(), &[])
    );

    for (mode, ran) in [("auto", auto), ("legacy", handshake)] {
        let v = ran.json();
        // `auto` discovers that the hub speaks 2026-07-28 and stays on it.
        let version = if mode == "auto" {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(v["protocolVersion"], version, "{mode}: {v:#}");
        assert_eq!(v["serverName"], "openpact", "{mode}: {v:#}");
        let tools = v["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 24, "{mode}: {tools:?}");
        assert!(
            tools.contains(&json!("fx:echo")) && tools.contains(&json!("fx:add")),
            "{mode}: {tools:?}"
        );
        assert_eq!(
            v["echo"]["content"],
            json!([{"type": "text", "text": "hi from python"}]),
            "{mode}: {v:#}"
        );
        assert_ne!(v["echo"]["isError"], true, "{mode}: {v:#}");
        assert_eq!(
            v["add"]["structuredContent"],
            json!({"sum": 5}),
            "{mode}: {v:#}"
        );
        assert_eq!(v["fail"]["isError"], true, "{mode}: {v:#}");
        assert_eq!(
            v["fail"]["content"][0]["text"], "this tool always fails",
            "{mode}: {v:#}"
        );

        // What the client sent.
        let methods = sent_methods(&sent(mode));
        assert_lifecycle(mode, &methods);
        assert!(
            methods.contains(&"tools/call".to_string()),
            "{mode}: {methods:?}"
        );
    }
}
