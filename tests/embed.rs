//! The embedding API (`openpact::Hub`) in this process, against fixture servers: typed
//! calls, lists, search, resources and prompts; the policy hook; a host tool; events.

use crate::support::{Scratch, WAIT, fixture};
use openpact::{Decision, Event, HostTool, Hub, ServerState};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};

/// A hub over `servers` from a scratch config (permissions allow, built-ins off, as the
/// harness writes them), unconfined: this test binary is not a sandbox wrapper.
fn builder(sc: &Scratch, servers: Value, openpact: Value) -> openpact::HubBuilder {
    let mut openpact = openpact;
    openpact["sandbox"] = json!({"default": "off"});
    let config = sc.config(&json!({"mcpServers": servers, "openpact": openpact}));
    Hub::builder()
        .config_file(config)
        .state_dir(sc.state())
        .start_timeout(WAIT)
}

#[tokio::test]
async fn an_embedded_hub_calls_lists_searches_reads_and_prompts() {
    let sc = Scratch::new();
    // Tool search on: clients get a short list, the program still the whole one.
    let hub = builder(
        &sc,
        json!({"a": fixture(&[]), "b": fixture(&[])}),
        json!({"toolSearch": {"mode": "on"}}),
    )
    .start()
    .await
    .unwrap();
    assert!(
        hub.servers()
            .iter()
            .all(|(_, state)| *state == ServerState::Ready),
        "{:?}",
        hub.servers()
    );
    let names: Vec<String> = hub
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(names.contains(&"a:echo".to_string()), "{names:?}");
    assert!(names.contains(&"b:add".to_string()), "{names:?}");

    let echoed = hub
        .call_tool("a:echo", json!({"message": "hi"}))
        .await
        .unwrap();
    assert!(
        !echoed.is_error && echoed.text().contains("hi"),
        "{echoed:?}"
    );
    let sum = hub
        .call_tool("b:add", json!({"a": 2, "b": 3}))
        .await
        .unwrap();
    assert_eq!(sum.text(), "5", "{sum:?}");
    let failed = hub.call_tool("a:fail", json!({})).await.unwrap();
    assert!(failed.is_error, "{failed:?}");

    let found = hub.search_tools("add two numbers", 3).await.unwrap();
    assert!(
        found.first().is_some_and(|h| h.name.ends_with(":add")),
        "{found:?}"
    );

    let contents = hub.read_resource("fixture://static/1").await.unwrap();
    assert!(
        contents[0].text.as_ref().is_some_and(|t| !t.is_empty()),
        "{contents:?}"
    );
    let prompt = hub
        .get_prompt("a:greet", json!({"name": "Ada"}))
        .await
        .unwrap();
    assert!(
        prompt.messages[0].content.to_string().contains("Ada"),
        "{prompt:?}"
    );
    let unknown = hub.get_prompt("a:nope", json!({})).await;
    assert!(
        matches!(unknown, Err(openpact::Error::Rpc { .. })),
        "{unknown:?}"
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn the_policy_hook_answers_instead_of_a_prompt() {
    let sc = Scratch::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let hub = builder(
        &sc,
        json!({"fx": fixture(&[])}),
        json!({"permissions": {"default": "ask"}}),
    )
    .policy_hook(move |ask| {
        seen.lock().unwrap().push(ask.name.clone());
        if ask.name == "fx:echo" {
            Decision::AllowOnce
        } else {
            Decision::Deny
        }
    })
    .start()
    .await
    .unwrap();
    let allowed = hub
        .call_tool("fx:echo", json!({"message": "hi"}))
        .await
        .unwrap();
    assert!(!allowed.is_error, "{allowed:?}");
    let denied = hub
        .call_tool("fx:add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert!(
        denied.is_error
            && denied
                .text()
                .contains("denied by the host program's policy hook"),
        "{denied:?}"
    );
    assert_eq!(*asked.lock().unwrap(), ["fx:echo", "fx:add"]);
    hub.shutdown().await;
}

/// The data-flow guard reaches the hook: after a private and an untrusted call, an egress
/// call is put to it (allow rules notwithstanding) with `guard` saying why, and not as
/// rememberable.
#[tokio::test]
async fn the_policy_hook_is_asked_about_a_guarded_call_and_told_why() {
    let sc = Scratch::new();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let hub = builder(
        &sc,
        json!({"fx": fixture(&[])}),
        json!({
            "permissions": {"default": "allow"},
            "flows": {"private": ["fx:echo"], "untrusted": ["fx:add"], "egress": ["fx:env"]}
        }),
    )
    .policy_hook(move |ask| {
        seen.lock()
            .unwrap()
            .push((ask.name.clone(), ask.guard.clone(), ask.rememberable));
        Decision::AllowAlways
    })
    .start()
    .await
    .unwrap();
    hub.call_tool("fx:env", json!({"name": "HOME"}))
        .await
        .unwrap();
    hub.call_tool("fx:echo", json!({"message": "notes"}))
        .await
        .unwrap();
    hub.call_tool("fx:add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert!(
        asked.lock().unwrap().is_empty(),
        "{:?}",
        asked.lock().unwrap()
    );
    for _ in 0..2 {
        let r = hub
            .call_tool("fx:env", json!({"name": "HOME"}))
            .await
            .unwrap();
        assert!(!r.is_error, "{r:?}");
    }
    let asked = asked.lock().unwrap().clone();
    assert_eq!(
        asked.len(),
        2,
        "asked each time, \"always\" notwithstanding: {asked:?}"
    );
    let (name, guard, rememberable) = &asked[0];
    assert_eq!(name, "fx:env");
    assert!(!rememberable);
    assert_eq!(
        guard.as_deref(),
        Some(
            "this session already called fx:echo (reads private data) and fx:add (takes in untrusted content), and fx:env can send data out"
        )
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn a_host_tool_is_served_beside_the_built_ins() {
    let sc = Scratch::new();
    let shout = HostTool::new(
        "shout",
        "Says the text louder.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args: Value| async move {
            match args["text"].as_str() {
                Some("") => Err("nothing to shout".to_string()),
                Some(text) => Ok(Value::String(text.to_uppercase())),
                None => Err("no text".to_string()),
            }
        },
    );
    let hub = builder(&sc, json!({"fx": fixture(&[])}), json!({}))
        .tool(shout)
        .start()
        .await
        .unwrap();
    let tools = hub.list_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "shout"), "{tools:?}");
    let loud = hub.call_tool("shout", json!({"text": "hi"})).await.unwrap();
    assert_eq!((loud.text().as_str(), loud.is_error), ("HI", false));
    let refused = hub.call_tool("shout", json!({"text": ""})).await.unwrap();
    assert!(
        refused.is_error && refused.text() == "nothing to shout",
        "{refused:?}"
    );
    // The schema is checked before the handler runs.
    let unchecked = hub.call_tool("shout", json!({})).await.unwrap();
    assert!(
        unchecked.is_error && unchecked.text().contains("text"),
        "{unchecked:?}"
    );
    hub.shutdown().await;
}

#[tokio::test]
async fn events_tell_of_a_crash_and_a_list_change() {
    let sc = Scratch::new();
    let hub = builder(&sc, json!({"fx": fixture(&[])}), json!({}))
        .start()
        .await
        .unwrap();
    let mut events = hub.events();
    let _ = hub.call_tool("fx:crash", json!({})).await;
    let mut states = Vec::new();
    let waited = tokio::time::timeout(WAIT, async {
        while let Some(event) = events.next().await {
            if let Event::ServerState { server, state } = event {
                assert_eq!(server, "fx");
                states.push(state.clone());
                if state == ServerState::Ready {
                    return;
                }
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "no restart after the crash: {states:?}");
    assert_ne!(states.first(), Some(&ServerState::Ready), "{states:?}");

    hub.call_tool("fx:change_tools", json!({})).await.unwrap();
    let changed = tokio::time::timeout(WAIT, async {
        while let Some(event) = events.next().await {
            if event == Event::ToolsChanged {
                return;
            }
        }
    })
    .await;
    assert!(changed.is_ok(), "no ToolsChanged after change_tools");
    hub.shutdown().await;
}

/// A host tool may not take a built-in's name (it would never be called), nor two host tools
/// one name: the start fails saying which.
#[tokio::test]
async fn a_host_tool_named_like_a_built_in_fails_the_start() {
    let sc = Scratch::new();
    let tool = |name: &str| {
        HostTool::new(
            name,
            "Reads.",
            json!({"type": "object"}),
            |_args: Value| async move { Ok(Value::String("mine".into())) },
        )
    };
    let workspace = sc.state().join("workspace");
    let builtins = json!({"builtins": {"workspace": {"root": workspace}}});
    let Err(taken) = builder(&sc, json!({"fx": fixture(&[])}), builtins)
        .tool(tool("workspace_read"))
        .start()
        .await
    else {
        panic!("a host tool named workspace_read was accepted beside the built-in");
    };
    let taken = taken.to_string();
    assert!(
        taken.contains("'workspace_read'") && taken.contains("built-in"),
        "{taken}"
    );
    let Err(twice) = builder(&sc, json!({"fx": fixture(&[])}), json!({}))
        .tool(tool("mine"))
        .tool(tool("mine"))
        .start()
        .await
    else {
        panic!("two host tools named alike were accepted");
    };
    assert!(twice.to_string().contains("'mine'"), "{twice}");
}
