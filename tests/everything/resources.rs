//! Resources (static, templated, blobs), prompts and completion: the same directly and
//! through the hub.

use super::{Peer, compare, listed_names};
use crate::support::{Peers, Scratch};
use serde_json::{Value, json};
use std::collections::BTreeSet;

async fn resources_prompts_scenario(p: &mut Peer) {
    let side = p.side;
    let resources = p.list_all("resources/list", "resources").await;
    assert!(
        resources
            .iter()
            .any(|r| r["uri"] == "demo://resource/static/document/features.md"),
        "{side:?}: {resources:#?}"
    );
    p.record("resources/list", &json!(resources));
    for r in &resources {
        let uri = r["uri"].as_str().unwrap();
        let read = p.result("resources/read", json!({"uri": uri})).await;
        assert_eq!(read["contents"][0]["uri"], uri, "{side:?}: {read}");
        assert!(
            read["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| !t.is_empty()),
            "{side:?}: {read}"
        );
        p.record(format!("resources/read {uri}"), &read);
    }

    let templates = p
        .list_all("resources/templates/list", "resourceTemplates")
        .await;
    let uri_templates: Vec<&str> = templates
        .iter()
        .filter_map(|t| t["uriTemplate"].as_str())
        .collect();
    assert_eq!(
        uri_templates,
        [
            "demo://resource/dynamic/text/{resourceId}",
            "demo://resource/dynamic/blob/{resourceId}"
        ],
        "{side:?}"
    );
    p.record("resources/templates/list", &json!(templates));
    for uri in [
        "demo://resource/dynamic/text/1",
        "demo://resource/dynamic/text/42",
        "demo://resource/dynamic/blob/1",
        "demo://resource/dynamic/blob/7",
    ] {
        let read = p.result("resources/read", json!({"uri": uri})).await;
        assert_eq!(read["contents"][0]["uri"], uri, "{side:?}: {read}");
        p.record(format!("resources/read {uri}"), &read);
    }
    let text1 = p
        .transcript
        .iter()
        .find(|(s, _)| s == "resources/read demo://resource/dynamic/text/1")
        .unwrap()
        .1
        .clone();
    assert_eq!(
        text1["contents"][0]["text"],
        "Resource 1: This is a plaintext resource created at <time>"
    );
    let blob7 = &p.transcript.last().unwrap().1;
    assert_eq!(
        blob7["contents"][0]["blob"],
        "base64 of: Resource 7: This is a base64 blob created at <time>"
    );
    // A URI the template matches but the server rejects: its own error, passed on.
    let bad = p
        .request(
            "resources/read",
            json!({"uri": "demo://resource/dynamic/text/abc"}),
        )
        .await;
    assert!(bad["error"]["code"].is_i64(), "{side:?}: {bad}");
    p.record("resources/read text/abc (error)", &bad["error"]);

    let prompts = p.list_bare("prompts/list", "prompts").await;
    let names = listed_names(&prompts);
    assert_eq!(
        names,
        BTreeSet::from(
            [
                "simple-prompt",
                "args-prompt",
                "completable-prompt",
                "resource-prompt"
            ]
            .map(String::from)
        ),
        "{side:?}"
    );
    p.record("prompts/list", &json!(prompts));
    let gets: &[(&str, Value)] = &[
        ("simple-prompt", json!({})),
        ("args-prompt", json!({"city": "Paris"})),
        ("args-prompt", json!({"city": "Austin", "state": "Texas"})),
        (
            "completable-prompt",
            json!({"department": "Engineering", "name": "Alice"}),
        ),
        (
            "resource-prompt",
            json!({"resourceType": "Text", "resourceId": "1"}),
        ),
        (
            "resource-prompt",
            json!({"resourceType": "Blob", "resourceId": "2"}),
        ),
    ];
    let mut got = BTreeSet::new();
    for (prompt, args) in gets {
        let name = p.name(prompt);
        let r = p
            .result("prompts/get", json!({"name": name, "arguments": args}))
            .await;
        assert!(
            r["messages"].as_array().is_some_and(|m| !m.is_empty()),
            "{side:?}: {r}"
        );
        p.record(format!("prompts/get {prompt} {args}"), &r);
        got.insert(prompt.to_string());
    }
    assert_eq!(got, names, "{side:?}: every prompt fetched");
    let paris = &p.transcript[p.transcript.len() - 5].1;
    assert_eq!(
        paris["messages"][0]["content"]["text"], "What's weather in Paris?",
        "{side:?}: {paris}"
    );
    // The server's own errors for bad arguments.
    for (prompt, args) in [
        (
            "resource-prompt",
            json!({"resourceType": "Nope", "resourceId": "1"}),
        ),
        ("args-prompt", json!({})),
    ] {
        let name = p.name(prompt);
        let r = p
            .request("prompts/get", json!({"name": name, "arguments": args}))
            .await;
        assert!(r["error"]["code"].is_i64(), "{side:?}: {r}");
        p.record(format!("prompts/get {prompt} {args} (error)"), &r["error"]);
    }

    // Completion, for prompt arguments (by namespaced name) and template variables (by
    // URI template).
    let prompt_ref = |p: &Peer, name: &str| json!({"type": "ref/prompt", "name": p.name(name)});
    let cases = [
        (prompt_ref(p, "completable-prompt"), "department", "", None),
        (prompt_ref(p, "completable-prompt"), "department", "S", None),
        (
            prompt_ref(p, "completable-prompt"),
            "name",
            "",
            Some(json!({"arguments": {"department": "Sales"}})),
        ),
        (
            prompt_ref(p, "completable-prompt"),
            "name",
            "E",
            Some(json!({"arguments": {"department": "Sales"}})),
        ),
        (prompt_ref(p, "resource-prompt"), "resourceType", "B", None),
        (prompt_ref(p, "resource-prompt"), "resourceId", "3", None),
        (
            json!({"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"}),
            "resourceId",
            "5",
            None,
        ),
        (
            json!({"type": "ref/resource", "uri": "demo://resource/dynamic/blob/{resourceId}"}),
            "resourceId",
            "x",
            None,
        ),
    ];
    for (reference, arg, value, context) in cases {
        let mut params = json!({"ref": reference, "argument": {"name": arg, "value": value}});
        if let Some(c) = &context {
            params["context"] = c.clone();
        }
        let r = p.result("completion/complete", params).await;
        let mut label_ref = reference.clone();
        if let Some(n) = reference["name"].as_str() {
            label_ref["name"] = json!(p.bare(n));
        }
        p.record(
            format!("completion/complete {label_ref} {arg}={value:?} {context:?}"),
            &r,
        );
    }
    let values = |step: &str| {
        p.transcript
            .iter()
            .find(|(s, _)| s.contains(step))
            .unwrap_or_else(|| panic!("no step {step}"))
            .1["completion"]["values"]
            .clone()
    };
    assert_eq!(
        values("department=\"S\""),
        json!(["Sales", "Support"]),
        "{side:?}"
    );
    assert_eq!(
        values("name=\"\" Some"),
        json!(["David", "Eve", "Frank"]),
        "{side:?}"
    );
    assert_eq!(values("resourceType=\"B\""), json!(["Blob"]), "{side:?}");
    assert_eq!(values("resourceId=\"5\""), json!(["5"]), "{side:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_prompts_and_completions_are_the_same_through_the_hub() {
    let Some(peers) = Peers::get() else { return };
    compare(&peers, &Scratch::new(), resources_prompts_scenario).await;
}
