//! Permission prompts answered by independent clients: rmcp's elicitation handler and the
//! Python SDK's elicitation callback.

use super::{asking, decisions, fx_config, serve_command};
use crate::support::rmcp::{Answering, connect, first_text, obj, transport};
use crate::support::{OPENPACT, Peers, Ran, Scratch, WAIT, s, state_dir};
use rmcp::model::{CallToolRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_client_answers_permission_prompts() {
    let sc = Scratch::new();
    let config = fx_config(&sc, asking(json!({"default": "ask"})));
    let (transport, log) = transport(serve_command(&config, &[]));
    let handler = Answering::default();
    handler.answers.lock().unwrap().extend([
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "once"})),
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "always"})),
        ElicitResult::new(ElicitationAction::Decline),
        ElicitResult::new(ElicitationAction::Cancel),
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": "deny"})),
    ]);
    let client = connect(handler.clone(), transport).await;
    let (client, log) = (&client, &log);
    let call = |name: &'static str, args: Value| async move {
        tokio::time::timeout(
            WAIT,
            client.call_tool(CallToolRequestParams::new(name).with_arguments(obj(args))),
        )
        .await
        .expect("answer in time")
        .unwrap_or_else(|e| panic!("{name}: {e}\n{}", log.text()))
    };
    let asked = || handler.asked.lock().unwrap().len();

    let r = call("fx:echo", json!({"message": "once"})).await;
    assert_eq!(first_text(&r), "once");
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(asked(), 1);
    let r = call("fx:echo", json!({"message": "always"})).await;
    assert_eq!(first_text(&r), "always");
    assert_eq!(asked(), 2, "once is once");
    let r = call("fx:echo", json!({"message": "remembered"})).await;
    assert_eq!(first_text(&r), "remembered");
    assert_eq!(asked(), 2, "always is remembered");
    for (i, what) in ["decline", "cancel", "deny"].iter().enumerate() {
        let r = call("fx:add", json!({"a": 1, "b": 2})).await;
        assert_eq!(r.is_error, Some(true), "{what}: {r:?}");
        assert!(first_text(&r).contains("denied at the prompt"), "{what}");
        assert_eq!(asked(), 3 + i, "{what}");
    }
    let asked = handler.asked.lock().unwrap().clone();
    for a in &asked {
        assert_eq!(
            a["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["always", "once", "deny"]),
            "{a}"
        );
        assert_eq!(a["requestedSchema"]["required"], json!(["decision"]), "{a}");
    }
    assert!(asked[0]["message"].as_str().unwrap().contains("fx:echo"));
    assert!(asked[2]["message"].as_str().unwrap().contains("fx:add"));
    let d = decisions(&state_dir(&config));
    assert_eq!(d["fx:echo"]["decision"], "allow", "{d}");
    assert!(d.get("fx:add").is_none(), "{d}");
}

/// A Python SDK client whose elicitation callback answers from a queue; prints what it
/// saw as one JSON object.
const PY_ELICITING: &str = r#"
import asyncio, json, sys
from mcp import Client, StdioServerParameters
import mcp.types as types

async def main():
    command, args = sys.argv[1], json.loads(sys.argv[2])
    answers = [
        {"action": "accept", "content": {"decision": "once"}},
        {"action": "accept", "content": {"decision": "always"}},
        {"action": "decline"},
        {"action": "cancel"},
    ]
    asked = []
    async def on_elicit(context, params):
        asked.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(**answers.pop(0))
    dump = lambda r: r.model_dump(mode="json", by_alias=True, exclude_none=True)
    out = {}
    async with Client(StdioServerParameters(command=command, args=args), mode="legacy",
                      read_timeout_seconds=60, elicitation_callback=on_elicit) as client:
        out["once"] = dump(await client.call_tool("fx:echo", {"message": "py once"}))
        out["always"] = dump(await client.call_tool("fx:echo", {"message": "py always"}))
        out["remembered"] = dump(await client.call_tool("fx:echo", {"message": "py again"}))
        out["asked_before_add"] = len(asked)
        out["declined"] = dump(await client.call_tool("fx:add", {"a": 1, "b": 2}))
        out["cancelled"] = dump(await client.call_tool("fx:add", {"a": 1, "b": 2}))
    out["asked"] = asked
    print(json.dumps(out))

asyncio.run(main())
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_answers_permission_prompts() {
    let Some(peers) = Peers::get() else { return };
    let sc = Scratch::new();
    let config = fx_config(&sc, asking(json!({"default": "ask"})));
    let script = sc.path().join("eliciting.py");
    std::fs::write(&script, PY_ELICITING).unwrap();
    let state = state_dir(&config);
    let hub_args = json!([
        OPENPACT,
        "--config",
        s(&config),
        "--state-dir",
        s(&state),
        "serve"
    ]);
    let python = peers.command("PEER_PYTHON");
    let mut cmd = Command::new(&python[0]);
    cmd.args(&python[1..])
        .arg(&script)
        .arg("setsid")
        .arg(hub_args.to_string())
        .current_dir(sc.path())
        .stdin(Stdio::null());
    let v = Ran::of(cmd, "the Python client", Duration::from_secs(90))
        .await
        .json();
    let t = |k: &str| {
        v[k]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(t("once"), "py once", "{v:#}");
    assert_eq!(t("always"), "py always", "{v:#}");
    assert_eq!(t("remembered"), "py again", "{v:#}");
    assert_eq!(v["asked_before_add"], 2, "always is remembered: {v:#}");
    for k in ["declined", "cancelled"] {
        assert_eq!(v[k]["isError"], true, "{k}: {v:#}");
        assert!(t(k).contains("denied at the prompt"), "{k}: {v:#}");
    }
    let asked = v["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 4, "{v:#}");
    for a in asked {
        assert_eq!(
            a["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["always", "once", "deny"]),
            "{a}"
        );
    }
    assert_eq!(decisions(&state)["fx:echo"]["decision"], "allow");
}
