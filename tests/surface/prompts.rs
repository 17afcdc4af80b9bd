//! Prompts, namespaced and routed by name (qualified or portable), and completion routed by
//! prompt name or resource template.

use super::{ready_hub, two_ready, two_servers};
use crate::support::{Scratch, error_code};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_are_namespaced_and_routed_by_name() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let mut hub = ready_hub(&cfg, json!({}), &["a:echo", "b:echo"]).await;
    let c = &mut hub.client;

    let r = c.request("prompts/list", json!({})).await;
    let prompts = r["result"]["prompts"].as_array().unwrap();
    let names: Vec<&str> = prompts.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["a:greet", "a:plain", "b:greet", "b:plain"], "{r}");
    // Everything but the name is the server's own.
    assert_eq!(
        prompts[2]["arguments"],
        json!([{"name": "name", "description": "Who to greet", "required": true}])
    );

    let r = c
        .request(
            "prompts/get",
            json!({"name": "b:greet", "arguments": {"name": "Bo"}}),
        )
        .await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"], "Hello, Bo!",
        "{r}"
    );
    let r = c.request("prompts/get", json!({"name": "a:plain"})).await;
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"], "This is a plain prompt.",
        "{r}"
    );
    for unknown in ["c:greet", "a:nope", "greet"] {
        let r = c
            .request(
                "prompts/get",
                json!({"name": unknown, "arguments": {"name": "x"}}),
            )
            .await;
        assert_eq!(error_code(&r), -32602, "{unknown}: {r}");
    }
    // The server's own invalid-params error passes through.
    let r = c
        .request("prompts/get", json!({"name": "a:greet", "arguments": {}}))
        .await;
    assert_eq!(error_code(&r), -32602, "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("name"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn portable_prompt_names_are_listed_and_both_forms_work() {
    let s = Scratch::new();
    let cfg = two_servers(&s, Some(json!({"toolNames": "portable"})));
    let mut hub = ready_hub(&cfg, json!({}), &["a__echo", "b__echo"]).await;
    let c = &mut hub.client;

    let r = c.request("prompts/list", json!({})).await;
    let names: Vec<&str> = r["result"]["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["a__greet", "a__plain", "b__greet", "b__plain"]);
    for name in ["a__greet", "a:greet"] {
        let r = c
            .request(
                "prompts/get",
                json!({"name": name, "arguments": {"name": "Pat"}}),
            )
            .await;
        assert_eq!(
            r["result"]["messages"][0]["content"]["text"], "Hello, Pat!",
            "{name}: {r}"
        );
        let r = c
            .complete(json!({"type": "ref/prompt", "name": name}), "name", "c")
            .await;
        assert_eq!(
            r["result"]["completion"]["values"],
            json!(["carol"]),
            "{name}: {r}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_routes_prompts_by_name_and_resources_by_template() {
    let mut hub = two_ready(json!({})).await;
    let c = &mut hub.client;

    let r = c
        .complete(
            json!({"type": "ref/prompt", "name": "a:greet"}),
            "name",
            "b",
        )
        .await;
    assert_eq!(r["result"]["completion"]["values"], json!(["bob"]), "{r}");
    let r = c
        .complete(json!({"type": "ref/prompt", "name": "b:greet"}), "name", "")
        .await;
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["alice", "bob", "carol"]),
        "{r}"
    );
    let r = c
        .complete(
            json!({"type": "ref/resource", "uri": "fixture://item/{id}"}),
            "id",
            "",
        )
        .await;
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["1", "2", "3"]),
        "{r}"
    );

    let r = c
        .complete(
            json!({"type": "ref/prompt", "name": "zz:greet"}),
            "name",
            "",
        )
        .await;
    assert_eq!(error_code(&r), -32602, "{r}");
    let r = c.complete(json!({"type": "ref/nothing"}), "name", "").await;
    assert_eq!(error_code(&r), -32602, "{r}");
}
