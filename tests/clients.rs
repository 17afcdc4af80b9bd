//! Independent MCP clients on the hub's whole surface: rmcp (the Rust SDK), the MCP
//! Inspector CLI and the Python `mcp` SDK, each against `openpact serve` with two servers
//! behind it — the fixture (`fx`) and server-everything (`everything`). Tools, resources
//! (listed, read, by template), prompts, completion, and where the client can, sampling and
//! logging.
//!
//! The real peers come from `.ci/peers.sh`; without them these tests print SKIPPED and
//! pass, unless `OPENPACT_REQUIRE_PEERS=1`.

use crate::support::rmcp::{connect, first_text, obj, transport};
use crate::support::{
    self, OPENPACT, Peers, Ran, Scratch, assert_lifecycle, fixture, openpact_for, run_in, s,
    sent_methods, state_dir,
};

// Sampling and roots are deprecated for 2026-07-28 (SEP-2577) but current in 2025-11-25,
// which is what the hub speaks.
use rmcp::model::{
    CallToolRequestParams, ClientConfig, GetPromptRequestParams, ReadResourceRequestParams,
};
#[allow(deprecated)]
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult, ListRootsResult};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const FEATURES: &str = "demo://resource/static/document/features.md";

/// Every prompt of both servers, as the hub lists them.
const PROMPTS: [&str; 6] = [
    "fx:greet",
    "fx:plain",
    "everything:simple-prompt",
    "everything:args-prompt",
    "everything:completable-prompt",
    "everything:resource-prompt",
];

/// Every resource template of both servers, as the hub lists them.
const TEMPLATES: [&str; 3] = [
    "fixture://item/{id}",
    "demo://resource/dynamic/text/{resourceId}",
    "demo://resource/dynamic/blob/{resourceId}",
];

/// The fixture as `fx` and server-everything as `everything`. `listWait` is generous so
/// that a busy machine never shows a client a server still starting.
fn config(peers: &Peers, sc: &Scratch) -> PathBuf {
    sc.servers(
        json!({"fx": fixture(&[]), "everything": peers.entry("PEER_EVERYTHING", &[])}),
        Some(json!({"listWait": "30s"})),
    )
}

// ---------------------------------------------------------------------------------------
// rmcp

const RMCP_SAMPLED: &str = "Sampled by the rmcp test client.";

/// An rmcp client that declares sampling and roots, and answers them with fixed values.
#[derive(Clone, Default)]
struct RmcpClient {
    sampled: Arc<Mutex<Vec<Value>>>,
}

#[allow(deprecated)]
impl ClientHandler for RmcpClient {
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.sampled
            .lock()
            .unwrap()
            .push(serde_json::to_value(&params).unwrap());
        Ok(serde_json::from_value(json!({
            "role": "assistant",
            "content": {"type": "text", "text": RMCP_SAMPLED},
            "model": "rmcp-test-model",
            "stopReason": "endTurn",
        }))
        .unwrap())
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(serde_json::from_value(
            json!({"roots": [{"uri": "file:///tmp/rmcp-root", "name": "rmcp root"}]}),
        )
        .unwrap())
    }

    fn get_info(&self) -> ClientConfig {
        serde_json::from_value(json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"sampling": {}, "roots": {"listChanged": true}},
            "clientInfo": {"name": "openpact-rmcp-test", "version": "0"},
        }))
        .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_uses_tools_resources_prompts_and_completion() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = config(&peers, &sc);
    let mut cmd = openpact_for(&config, None);
    cmd.arg("serve");
    let (transport, _log) = transport(cmd);
    let handler = RmcpClient::default();
    let client = connect(handler.clone(), transport).await;

    // Tools: both servers', namespaced; server-everything was told the client's sampling
    // and roots (so it lists its tools for those) but not elicitation.
    let tools = tokio::time::timeout(support::WAIT, client.list_all_tools())
        .await
        .expect("tools/list answered")
        .expect("tools/list");
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    for n in [
        "fx:echo",
        "fx:add",
        "everything:get-sum",
        "everything:echo",
        "everything:trigger-sampling-request",
        "everything:get-roots-list",
    ] {
        assert!(names.contains(&n.to_string()), "{n} missing from {names:?}");
    }
    assert!(
        !names.contains(&"everything:trigger-elicitation-request".to_string()),
        "the client declared no elicitation: {names:?}"
    );
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("fx:") || n.starts_with("everything:")),
        "{names:?}"
    );

    let sum = client
        .call_tool(
            CallToolRequestParams::new("everything:get-sum")
                .with_arguments(obj(json!({"a": 2, "b": 3}))),
        )
        .await
        .expect("get-sum");
    assert_ne!(sum.is_error, Some(true), "{sum:?}");
    assert_eq!(first_text(&sum), "The sum of 2 and 3 is 5.");
    let add = client
        .call_tool(
            CallToolRequestParams::new("fx:add").with_arguments(obj(json!({"a": 4, "b": 5}))),
        )
        .await
        .expect("fx:add");
    assert_eq!(add.structured_content, Some(json!({"sum": 9})));

    // Sampling: server-everything asks, the hub forwards to rmcp's handler, the answer goes
    // back up.
    let sampled = client
        .call_tool(
            CallToolRequestParams::new("everything:trigger-sampling-request")
                .with_arguments(obj(json!({"prompt": "Say hi", "maxTokens": 10}))),
        )
        .await
        .expect("trigger-sampling-request");
    assert!(first_text(&sampled).contains(RMCP_SAMPLED), "{sampled:?}");
    let asked = handler.sampled.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        asked[0]["messages"][0]["content"]["text"],
        "Resource trigger-sampling-request context: Say hi"
    );

    // Resources: listed from both servers, read by URI (static and by template).
    let resources = client.list_all_resources().await.expect("resources/list");
    let uris: Vec<String> = resources.iter().map(|r| r.uri.to_string()).collect();
    for u in ["fixture://static/1", "fixture://static/3", FEATURES] {
        assert!(uris.contains(&u.to_string()), "{u} missing from {uris:?}");
    }
    let templates = client
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    let templates: Vec<String> = templates
        .iter()
        .map(|t| t.uri_template.to_string())
        .collect();
    assert_eq!(templates, TEMPLATES,);
    for (uri, want) in [
        ("fixture://static/2", "content of fixture://static/2"),
        ("fixture://item/xyz", "content of fixture://item/xyz"),
        (
            "demo://resource/dynamic/text/4",
            "Resource 4: This is a plaintext resource created at ",
        ),
        (FEATURES, "# Everything Server - Features"),
    ] {
        let read = client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .unwrap_or_else(|e| panic!("resources/read {uri}: {e:?}"));
        let v = serde_json::to_value(&read).unwrap();
        assert_eq!(v["contents"][0]["uri"], uri, "{v}");
        let text = v["contents"][0]["text"].as_str().unwrap_or_default();
        assert!(text.starts_with(want), "{uri}: {text:.200}");
    }

    // Prompts.
    let prompts = client.list_all_prompts().await.expect("prompts/list");
    let prompt_names: Vec<String> = prompts.iter().map(|p| p.name.to_string()).collect();
    assert_eq!(prompt_names, PROMPTS,);
    let simple = client
        .get_prompt(GetPromptRequestParams::new("everything:simple-prompt"))
        .await
        .expect("prompts/get simple-prompt");
    let v = serde_json::to_value(&simple).unwrap();
    assert_eq!(
        v["messages"][0]["content"]["text"], "This is a simple prompt without arguments.",
        "{v}"
    );
    let greet = client
        .get_prompt(
            GetPromptRequestParams::new("fx:greet").with_arguments(obj(json!({"name": "Ada"}))),
        )
        .await
        .expect("prompts/get greet");
    let v = serde_json::to_value(&greet).unwrap();
    assert_eq!(v["messages"][0]["content"]["text"], "Hello, Ada!", "{v}");

    // Completion: a prompt argument (by namespaced name) and a template variable.
    let values = client
        .complete_prompt_simple("everything:completable-prompt", "department", "S")
        .await
        .expect("complete a prompt argument");
    assert_eq!(values, ["Sales", "Support"]);
    let values = client
        .complete_resource_simple("fixture://item/{id}", "id", "")
        .await
        .expect("complete a template variable");
    assert_eq!(values, ["1", "2", "3"]);

    client.cancel().await.expect("close");
}

// ---------------------------------------------------------------------------------------
// MCP Inspector CLI

/// Runs a command to its end (HOME pointed at `cwd`, so nothing lands in the real one).
async fn run(words: Vec<String>, cwd: PathBuf) -> Ran {
    run_in(&words, &cwd, &[("HOME", &cwd)]).await
}

/// `field` of each item of the array `items`.
fn field_of(items: &Value, field: &str) -> Vec<String> {
    items
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {items}"))
        .iter()
        .map(|t| t[field].as_str().unwrap().to_string())
        .collect()
}

fn tool_names(list: &Value) -> Vec<String> {
    field_of(&list["tools"], "name")
}

/// The Inspector CLI running `openpact serve` with `config`, doing `method`.
fn inspector_via_hub(peers: &Peers, config: &Path, method: &[&str]) -> Vec<String> {
    let mut w = peers.command("PEER_INSPECTOR");
    w.extend(["--cli".into(), OPENPACT.into(), "serve".into()]);
    // The Inspector takes `--config` (even `--config=…`) for itself wherever it appears, so
    // the hub gets its config from the environment the Inspector passes on (`-e`).
    w.extend([
        "-e".into(),
        format!("OPENPACT_CONFIG={}", config.display()),
        "-e".into(),
        format!("OPENPACT_STATE_DIR={}", state_dir(config).display()),
    ]);
    w.extend(method.iter().map(|s| s.to_string()));
    w.extend(["--format", "json", "-q"].map(String::from));
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_cli_uses_tools_resources_and_prompts() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = config(&peers, &sc);
    let hub = |method: &[&str]| inspector_via_hub(&peers, &config, method);
    let direct_list = {
        let mut w = peers.command("PEER_INSPECTOR");
        w.push("--cli".into());
        w.extend(peers.command("PEER_EVERYTHING"));
        w.extend(["--method", "tools/list", "--format", "json", "-q"].map(String::from));
        w
    };
    // Each run is a fresh hub whose first request is the one shown (see
    // `inspector_reads_resources_of_a_server_still_starting` for everything's resources).
    let runs = [
        direct_list,
        hub(&["--method", "tools/list"]),
        hub(&["--protocol-era", "auto", "--method", "tools/list"]),
        hub(&[
            "--method",
            "tools/call",
            "--tool-name",
            "everything:get-sum",
            "--tool-arg",
            "a=2",
            "b=3",
        ]),
        hub(&["--method", "resources/list"]),
        hub(&["--method", "resources/templates/list"]),
        hub(&["--method", "resources/read", "--uri", "fixture://item/7"]),
        hub(&["--method", "prompts/list"]),
        hub(&[
            "--method",
            "prompts/get",
            "--prompt-name",
            "everything:args-prompt",
            "--prompt-args",
            "city=Paris",
            "state=Texas",
        ]),
        hub(&["--method", "logging/setLevel", "--log-level", "warning"]),
    ];
    let ran = futures_join_all(runs.into_iter().map(|w| run(w, sc.path().to_path_buf()))).await;
    let [
        direct_list,
        list,
        auto_list,
        sum,
        resources,
        templates,
        item7,
        prompts,
        args_prompt,
        set_level,
    ] = &ran[..]
    else {
        unreachable!()
    };

    // The hub tells server-everything what the Inspector declared, so it lists the same
    // tools through the hub as directly, prefixed.
    let direct_names = tool_names(&direct_list.result());
    let names = tool_names(&list.result());
    let everything: Vec<String> = names
        .iter()
        .filter_map(|n| n.strip_prefix("everything:").map(String::from))
        .collect();
    assert_eq!(everything, direct_names);
    let fx = names.iter().filter(|n| n.starts_with("fx:")).count();
    assert!(
        names.contains(&"fx:echo".to_string()) && names.contains(&"fx:add".to_string()),
        "{names:?}"
    );
    assert_eq!(names.len(), fx + direct_names.len(), "{names:?}");
    // `--protocol-era auto` probes server/discover; the hub's -32601 sends it to initialize.
    assert_eq!(tool_names(&auto_list.result()), names);

    assert_eq!(
        sum.result()["content"],
        json!([{"type": "text", "text": "The sum of 2 and 3 is 5."}])
    );

    let uris = field_of(&resources.result()["resources"], "uri");
    for u in ["fixture://static/1", FEATURES] {
        assert!(uris.contains(&u.to_string()), "{u} missing from {uris:?}");
    }
    assert_eq!(uris.len(), 3 + 7, "{uris:?}");
    let templates = field_of(&templates.result()["resourceTemplates"], "uriTemplate");
    assert_eq!(templates, TEMPLATES);
    assert_eq!(
        item7.result()["contents"][0]["text"],
        "content of fixture://item/7"
    );

    let prompt_names = field_of(&prompts.result()["prompts"], "name");
    assert_eq!(prompt_names, PROMPTS);
    assert_eq!(
        args_prompt.result()["messages"][0]["content"]["text"],
        "What's weather in Paris, Texas?"
    );
    assert_eq!(set_level.result(), json!({}));
}

/// The Inspector's first request to a fresh hub is the read. The fixture is ready within
/// milliseconds, server-everything (node) takes a few hundred: the read must wait for it
/// (within `listWait`), like a tool call or a prompt does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_reads_resources_of_a_server_still_starting() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = config(&peers, &sc);
    let hub = |method: &[&str]| inspector_via_hub(&peers, &config, method);
    let runs = [
        hub(&["--method", "resources/read", "--uri", FEATURES]),
        hub(&[
            "--method",
            "resources/read",
            "--uri",
            "demo://resource/dynamic/text/9",
        ]),
    ];
    let ran = futures_join_all(runs.into_iter().map(|w| run(w, sc.path().to_path_buf()))).await;
    let features = ran[0].result();
    assert_eq!(features["contents"][0]["uri"], FEATURES);
    assert!(
        features["contents"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("# Everything Server - Features"),
        "{features}"
    );
    assert!(
        ran[1].result()["contents"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Resource 9: This is a plaintext resource created at "),
        "{}",
        ran[1].stdout
    );
}

/// The same, with the harness client and every request routed by URI: right after
/// `initialize`, reading, subscribing to and completing server-everything's URIs must wait
/// for it, not go to the fixture (which is already ready and also serves resources).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uris_of_a_server_still_starting_wait_for_it() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let mut hub = support::serve(&config(&peers, &sc)).await;
    let c = &mut hub.client;
    c.initialize().await;
    let read = c.request("resources/read", json!({"uri": FEATURES})).await;
    assert_eq!(read["result"]["contents"][0]["uri"], FEATURES, "{read}");
    let complete = c
        .complete(
            json!({"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"}),
            "resourceId",
            "4",
        )
        .await;
    assert_eq!(
        complete["result"]["completion"]["values"],
        json!(["4"]),
        "{complete}"
    );
    // A subscription that went to the fixture would never see server-everything's
    // updates: it must reach server-everything, which acknowledges it with a log message.
    let text1 = "demo://resource/dynamic/text/1";
    let sub = c
        .request("resources/subscribe", json!({"uri": text1}))
        .await;
    assert_eq!(sub["result"], json!({}), "{sub}");
    let ack = c.wait_for("notifications/message", support::WAIT).await;
    assert!(
        ack.as_ref().is_some_and(|m| m["params"]["data"]
            .as_str()
            .is_some_and(|d| d.contains(text1))),
        "{ack:?}"
    );
}

/// Awaits all futures concurrently, results in order.
async fn futures_join_all<F>(futs: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futs.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("client run"));
    }
    out
}

// ---------------------------------------------------------------------------------------
// Python SDK

/// A client on the Python SDK with sampling, roots and logging callbacks: tools, resources,
/// templates, prompts, completion, sampling through server-everything, logging through the
/// fixture. Prints what it saw as one JSON object.
const PY_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import Client, StdioServerParameters, types

def dump(r):
    return r.model_dump(mode="json", by_alias=True, exclude_none=True)

async def main():
    mode, command, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    sampled, logs = [], []

    async def sampling(context, params):
        sampled.append(dump(params))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Sampled by Python."),
            model="py-test-model", stop_reason="endTurn")

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/py-root", name="py root")])

    async def logging(params):
        logs.append(dump(params))

    async def until(cond):
        for _ in range(400):
            if cond():
                return True
            await asyncio.sleep(0.05)
        return False

    out = {}
    async with Client(StdioServerParameters(command=command, args=args), mode=mode,
                      read_timeout_seconds=60, sampling_callback=sampling,
                      list_roots_callback=roots, logging_callback=logging) as client:
        out["protocolVersion"] = client.protocol_version
        out["serverName"] = client.server_info.name if client.server_info else None
        out["capabilities"] = dump(client.server_capabilities)
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        out["sum"] = dump(await client.call_tool("everything:get-sum", {"a": 2, "b": 3}))
        out["add"] = dump(await client.call_tool("fx:add", {"a": 2, "b": 3}))
        out["resources"] = [r.uri for r in (await client.list_resources()).resources]
        out["templates"] = [t.uri_template for t in
                            (await client.list_resource_templates()).resource_templates]
        out["read_features"] = dump(await client.read_resource(
            "demo://resource/static/document/features.md"))
        out["read_static"] = dump(await client.read_resource("fixture://static/2"))
        out["read_text3"] = dump(await client.read_resource("demo://resource/dynamic/text/3"))
        out["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
        out["args_prompt"] = dump(await client.get_prompt("everything:args-prompt", {"city": "Paris"}))
        out["greet"] = dump(await client.get_prompt("fx:greet", {"name": "Ada"}))
        out["complete_prompt"] = dump(await client.complete(
            types.PromptReference(type="ref/prompt", name="everything:completable-prompt"),
            {"name": "department", "value": "E"}))
        out["complete_template"] = dump(await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="fixture://item/{id}"),
            {"name": "id", "value": ""}))
        out["sampling_result"] = dump(await client.call_tool(
            "everything:trigger-sampling-request", {"prompt": "Say hi", "maxTokens": 10}))
        out["sampled"] = sampled
        # Logging and unsolicited roots requests belong to the handshake era (2026-07-28 drops
        # logging/setLevel, and servers ask only during a request).
        if client.protocol_version != "2026-07-28":
            # server-everything asks for the roots after initialized and logs the count.
            await until(lambda: any("Roots updated" in str(l.get("data")) for l in logs))
            await client.set_logging_level("warning")
            await client.call_tool("fx:log", {"level": "info", "message": "below the level"})
            out["log_call"] = dump(await client.call_tool(
                "fx:log", {"level": "error", "message": "from python"}))
            await until(lambda: any(l.get("data") == "from python" for l in logs))
        out["logs"] = logs
    print(json.dumps(out))

asyncio.run(main())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_uses_the_whole_surface_in_auto_and_handshake_mode() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = config(&peers, &sc);
    let script = sc.path().join("py_client.py");
    std::fs::write(&script, PY_CLIENT).unwrap();
    // The hub runs behind `tee`, which records what the client sent.
    let sent = |mode: &str| sc.path().join(format!("sent-{mode}.jsonl"));
    let state = |mode: &str| sc.path().join(format!("state-{mode}"));
    let client = |mode: &str| {
        let state = state(mode);
        let hub = [
            OPENPACT,
            "--config",
            s(&config),
            "--state-dir",
            s(&state),
            "serve",
        ];
        peers.python_via_tee(&script, mode, &sent(mode), &hub)
    };
    let (auto, handshake) = tokio::join!(
        run(client("auto"), sc.path().to_path_buf()),
        run(client("legacy"), sc.path().to_path_buf())
    );

    for (mode, ran) in [("auto", auto), ("legacy", handshake)] {
        let v = ran.json();
        let ctx = format!("{mode}: {v:#}\nstderr:\n{}", ran.stderr);
        // `auto` discovers that the hub speaks 2026-07-28 and stays on it.
        let stateless = mode == "auto";
        let version = if stateless {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(v["protocolVersion"], version, "{ctx}");
        assert_eq!(v["serverName"], "openpact", "{ctx}");
        assert_eq!(v["capabilities"]["resources"]["subscribe"], true, "{ctx}");
        assert!(v["capabilities"]["completions"].is_object(), "{ctx}");

        let tools: Vec<&str> = v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        for t in [
            "fx:echo",
            "everything:get-sum",
            "everything:trigger-sampling-request",
            "everything:get-roots-list",
        ] {
            assert!(tools.contains(&t), "{t}: {ctx}");
        }
        // No elicitation callback, so no elicitation declared, upstream either.
        assert!(
            !tools.contains(&"everything:trigger-elicitation-request"),
            "{ctx}"
        );
        assert_eq!(
            v["sum"]["content"],
            json!([{"type": "text", "text": "The sum of 2 and 3 is 5."}]),
            "{ctx}"
        );
        assert_eq!(v["add"]["structuredContent"], json!({"sum": 5}), "{ctx}");

        let resources = v["resources"].as_array().unwrap();
        assert_eq!(resources.len(), 3 + 7, "{ctx}");
        assert!(resources.contains(&json!(FEATURES)), "{ctx}");
        assert_eq!(v["templates"], json!(TEMPLATES), "{ctx}");
        assert!(
            v["read_features"]["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("# Everything Server - Features")),
            "{ctx}"
        );
        assert_eq!(
            v["read_static"]["contents"][0]["text"], "content of fixture://static/2",
            "{ctx}"
        );
        assert!(
            v["read_text3"]["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("Resource 3: This is a plaintext resource")),
            "{ctx}"
        );

        assert_eq!(v["prompts"], json!(PROMPTS), "{ctx}");
        assert_eq!(
            v["args_prompt"]["messages"][0]["content"]["text"], "What's weather in Paris?",
            "{ctx}"
        );
        assert_eq!(
            v["greet"]["messages"][0]["content"]["text"], "Hello, Ada!",
            "{ctx}"
        );
        assert_eq!(
            v["complete_prompt"]["completion"]["values"],
            json!(["Engineering"]),
            "{ctx}"
        );
        assert_eq!(
            v["complete_template"]["completion"]["values"],
            json!(["1", "2", "3"]),
            "{ctx}"
        );

        // Sampling through the hub, answered by the Python callback.
        assert_eq!(v["sampled"].as_array().map(Vec::len), Some(1), "{ctx}");
        assert_eq!(
            v["sampled"][0]["messages"][0]["content"]["text"],
            "Resource trigger-sampling-request context: Say hi",
            "{ctx}"
        );
        assert!(
            v["sampling_result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("Sampled by Python.")),
            "{ctx}"
        );

        // What the client sent.
        let methods = sent_methods(&sent(mode));
        assert_lifecycle(mode, &methods);
        if stateless {
            continue;
        }
        // Logging: the roots sync message (before any level was set), then at "warning" only
        // the error; each with the server's name in `logger`.
        let logs = v["logs"].as_array().unwrap();
        let roots_log = logs
            .iter()
            .find(|l| l["data"] == "Roots updated: 1 root(s) received from client")
            .unwrap_or_else(|| panic!("no roots log: {ctx}"));
        assert_eq!(roots_log["logger"], "everything/everything-server", "{ctx}");
        assert!(
            !logs.iter().any(|l| l["data"] == "below the level"),
            "{ctx}"
        );
        let error = logs
            .iter()
            .find(|l| l["data"] == "from python")
            .unwrap_or_else(|| panic!("no error log: {ctx}"));
        assert_eq!(error["level"], "error", "{ctx}");
        assert!(
            error["logger"]
                .as_str()
                .is_some_and(|l| l == "fx" || l.starts_with("fx/")),
            "{ctx}"
        );

        for m in [
            "completion/complete",
            "resources/read",
            "prompts/get",
            "logging/setLevel",
        ] {
            assert!(methods.contains(&m.to_string()), "{mode}: {methods:?}");
        }
    }
}
