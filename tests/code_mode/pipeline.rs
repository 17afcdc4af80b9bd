//! Every call a program makes is the client's own call through the policy: a deny rule fails
//! `call` and comes back from `try_call`; an `ask` rule prompts the client through
//! elicitation (declined: denied inside the program; accepted: made); a tool outside the
//! client's profile is unknown; a rate limit refuses with its message; the cache serves a
//! second program; a secret is redacted before the program sees it; and the audit log links
//! the inner calls to their program's own record.

use super::{and_code_on, code_on, run_failing, run_ok};
use crate::policy::{
    asking, audit_records, calls, hash_ok, prompt, started, wait_audit_where, with,
};
use crate::support::{
    Scratch, accept, answer, fixture, is_error, ready, send_call, serve_with, state_dir, text,
};
use serde_json::{Value, json};

fn fx() -> Value {
    json!({"fx": fixture(&[])})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool_fails_call_and_comes_back_from_try_call() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        fx(),
        Some(and_code_on(
            json!({"permissions": {"default": "allow", "deny": ["fx:add"]}}),
        )),
    );
    let mut hub = started(&cfg, &[], json!({}), "code-deny").await;
    let c = &mut hub.client;
    let before = calls(c).await;
    let t = run_failing(
        c,
        "print(\"before\")\ncall(\"fx:add\", {\"a\": 1, \"b\": 2})\n",
    )
    .await;
    assert!(t.starts_with("before\nThe program failed: "), "{t}");
    assert!(
        t.contains("openpact denied tool fx:add") && t.contains("openpact.permissions.deny"),
        "{t}"
    );
    // The attribute form is the same call.
    let t = run_failing(c, "tools.fx.add(a = 1, b = 2)\n").await;
    assert!(t.contains("openpact denied tool fx:add"), "{t}");
    let t = run_ok(
        c,
        "r = try_call(\"fx:add\", {\"a\": 1, \"b\": 2})\n\
         print(r[\"ok\"])\n\
         print(r[\"error\"])\n\
         call(\"fx:echo\", {\"message\": \"after\"})\n",
    )
    .await;
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "False", "{t}");
    assert!(lines[1].contains("openpact denied tool fx:add"), "{t}");
    assert_eq!(lines.last(), Some(&"\"after\""), "{t}");
    // The server never saw an add: only the echo and the counter's own call.
    assert_eq!(calls(c).await - before, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_rule_prompts_the_client_a_decline_denies_and_an_accept_calls() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        fx(),
        Some(and_code_on(asking(
            json!({"default": "allow", "ask": ["fx:add"]}),
        ))),
    );
    let mut hub = started(&cfg, &[], json!({"elicitation": {}}), "code-ask").await;
    let c = &mut hub.client;
    let code = "x = call(\"fx:add\", {\"a\": 2, \"b\": 3})\nx[\"sum\"]\n";

    // Declined: the program fails at that call with the denial.
    let id = send_call(c, "run_code", json!({"code": code})).await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert!(msg.contains("fx:add") && msg.contains("\"a\":2"), "{msg}");
    answer(c, &req, json!({"action": "decline"})).await;
    let r = c.response(&id).await;
    assert!(is_error(&r), "{r}");
    let t = text(&r);
    assert!(
        t.contains("The program failed: ") && t.contains("denied at the prompt"),
        "{t}"
    );

    // Declined under try_call: the denial is a value, the program goes on.
    let id = send_call(
        c,
        "run_code",
        json!({"code": "r = try_call(\"fx:add\", {\"a\": 2, \"b\": 3})\nr[\"ok\"]\n"}),
    )
    .await;
    let req = prompt(c).await;
    answer(c, &req, accept("deny")).await;
    let r = c.response(&id).await;
    assert_eq!(text(&r), "false", "{r}");

    // Accepted once: the call is made and its value used.
    let before = calls(c).await;
    let id = send_call(c, "run_code", json!({"code": code})).await;
    let req = prompt(c).await;
    answer(c, &req, accept("once")).await;
    let r = c.response(&id).await;
    assert!(!is_error(&r), "{r}");
    assert_eq!(text(&r), "5", "{r}");
    assert_eq!(calls(c).await - before, 2, "the add and the counter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_outside_the_clients_profile_is_unknown_in_its_programs() {
    let sc = Scratch::new();
    let mut settings = code_on(json!({}));
    settings["toolSearch"]["alwaysLoad"] = json!(["a:echo"]);
    settings["profiles"] = json!({"pa": {"servers": ["a"]}});
    let cfg = sc.servers(
        json!({"a": fixture(&[]), "fx": fixture(&[])}),
        Some(settings),
    );
    let mut hub = serve_with(&cfg, &["serve", "--profile", "pa"], &[])
        .await
        .owning(sc);
    ready(&mut hub.client, &["a:echo"]).await;
    let c = &mut hub.client;
    assert_eq!(
        run_ok(c, "call(\"a:echo\", {\"message\": \"mine\"})\n").await,
        "\"mine\""
    );
    let t = run_failing(c, "call(\"fx:echo\", {\"message\": \"theirs\"})\n").await;
    assert!(t.contains("Unknown tool") && t.contains("fx:echo"), "{t}");
    let t = run_ok(
        c,
        "r = try_call(\"fx:echo\", {\"message\": \"theirs\"})\nprint(r[\"error\"])\n[hasattr(tools, \"a\"), hasattr(tools, \"fx\")]\n",
    )
    .await;
    assert!(t.contains("Unknown tool"), "{t}");
    assert!(
        t.ends_with("[true,false]"),
        "no tools.fx in the profile's programs: {t}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_tool_fails_the_program_with_the_limits_message() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        fx(),
        Some(and_code_on(json!({
            "rateLimits": {"default": "off",
                           "tools": {"fx:echo": {"perSecond": 0.2, "burst": 3}}}
        }))),
    );
    let mut hub = started(&cfg, &[], json!({}), "code-ratelimit").await;
    let c = &mut hub.client;
    let t = run_failing(
        c,
        "for i in range(10):\n    call(\"fx:echo\", {\"message\": str(i)})\n    print(i)\n",
    )
    .await;
    assert!(
        t.starts_with("0\n1\n2\nThe program failed: ")
            && t.contains("Rate limit exceeded. Please try again later."),
        "the burst of 3, then refused: {t}"
    );
    let t = run_ok(
        c,
        "r = try_call(\"fx:echo\", {\"message\": \"x\"})\nprint(r[\"error\"])\nr[\"ok\"]\n",
    )
    .await;
    assert!(
        t.contains("Rate limit exceeded") && t.ends_with("false"),
        "{t}"
    );
    // Other tools of the server are not limited.
    assert_eq!(
        run_ok(c, "call(\"fx:add\", {\"a\": 1, \"b\": 1})[\"sum\"]\n").await,
        "2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_program_is_served_from_the_cache() {
    let sc = Scratch::new();
    let cfg = sc.servers(
        fx(),
        Some(and_code_on(json!({
            "cache": {"rules": {"fx:calls": "off", "fx:echo_structured": "1m"}}
        }))),
    );
    let state = state_dir(&cfg);
    let mut hub = started(&cfg, &[], json!({}), "code-cache").await;
    let c = &mut hub.client;
    let code = "call(\"fx:echo_structured\", {\"value\": {\"k\": 1}})\n";
    let before = calls(c).await;
    let first = run_ok(c, code).await;
    let second = run_ok(c, code).await;
    assert_eq!(first, second);
    assert!(first.contains("\"k\":1"), "{first}");
    assert_eq!(
        calls(c).await - before,
        2,
        "one call reached the fixture for two programs (and the counter's)"
    );
    let records = wait_audit_where(&state, 2, |r| r["target"] == "fx:echo_structured").await;
    let caches: Vec<&Value> = records.iter().map(|r| &r["cache"]).collect();
    assert_eq!(caches, [&json!("miss"), &json!("hit")], "{records:#?}");
    assert!(
        records.iter().all(|r| r["program"].is_string()),
        "{records:#?}"
    );
    assert_ne!(records[0]["program"], records[1]["program"]);
}

/// A secret the fixture is given in its environment, made of parts in the programs so their
/// text never holds it whole.
const SECRET: &str = "s3cr3t-v4lue-123456";
const SECRET_PARTS: &str = "\"s3cr3t-\" + \"v4lue-123456\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_result_is_redacted_before_the_program_sees_it() {
    let sc = Scratch::new();
    let mut entry = fixture(&[]);
    entry["sandbox"] = json!({"env": ["OPENPACT_TEST_SECRET"]});
    let cfg = sc.servers(
        json!({"fx": entry}),
        Some(and_code_on(json!({
            "secrets": {"env": ["OPENPACT_TEST_SECRET"]},
            "audit": {"arguments": true},
        }))),
    );
    let state = state_dir(&cfg);
    let mut hub = started(
        &cfg,
        &[("OPENPACT_TEST_SECRET", SECRET)],
        json!({}),
        "code-redaction",
    )
    .await;
    let c = &mut hub.client;
    let red = "[REDACTED:OPENPACT_TEST_SECRET]";
    let t = run_ok(
        c,
        &format!(
            "secret = {SECRET_PARTS}\n\
             x = call(\"fx:env\", {{\"name\": \"OPENPACT_TEST_SECRET\"}})\n\
             print(x)\n\
             print(secret in x)\n\
             print(x == secret)\n\
             print(len(x))\n\
             e = call(\"fx:echo\", {{\"message\": \"a \" + secret + \" b\"}})\n\
             print(secret in e)\n\
             s = call(\"fx:echo_structured\", {{\"value\": {{\"k\": secret}}}})\n\
             print(s[\"value\"][\"k\"] == secret)\n\
             [x, e, s]\n"
        ),
    )
    .await;
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(
        lines[..6],
        [red, "False", "False", "31", "False", "False"],
        "{t}"
    );
    let value: Value = serde_json::from_str(lines[6]).unwrap();
    assert_eq!(
        value,
        json!([red, format!("a {red} b"), {"value": {"k": red}}]),
        "{t}"
    );
    assert!(!t.contains(SECRET));
    // Nor in the audit: the inner calls' arguments and the program's record.
    let records = wait_audit_where(&state, 1, |r| r["target"] == "run_code").await;
    assert!(records[0]["program"].is_string(), "{records:?}");
    let audit = serde_json::to_string(&audit_records(&state)).unwrap();
    assert!(!audit.contains(SECRET), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_links_inner_calls_to_their_programs_record() {
    let sc = Scratch::new();
    let cfg = sc.servers(fx(), Some(with(and_code_on(json!({})), "audit", json!({}))));
    let state = state_dir(&cfg);
    let mut hub = started(&cfg, &[], json!({}), "code-audit").await;
    let c = &mut hub.client;
    let code = "a = call(\"fx:echo\", {\"message\": \"one\"})\n\
                b = call(\"fx:add\", {\"a\": 1, \"b\": 2})\n\
                f = try_call(\"fx:fail\", {})\n\
                [a, b[\"sum\"], f[\"ok\"]]\n";
    assert_eq!(run_ok(c, code).await, "[\"one\",3,false]");
    let failing = "call(\"fx:echo\", {\"message\": \"two\"})\ncall(\"fx:fail\", {})\n";
    run_failing(c, failing).await;

    let programs = wait_audit_where(&state, 2, |r| r["target"] == "run_code").await;
    let (ok, failed) = (&programs[0], &programs[1]);
    for (record, source, calls, outcome) in [(ok, code, 3, "ok"), (failed, failing, 2, "isError")] {
        let id = record["program"]
            .as_str()
            .unwrap_or_else(|| panic!("{record}"));
        assert!(id.starts_with("prog-"), "{record}");
        assert!(hash_ok(&record["codeHash"]), "{record}");
        assert_eq!(
            record["codeHash"],
            openpact::policy::canonical::sha256(source),
            "{record}"
        );
        assert_eq!(record["calls"], calls, "{record}");
        assert_eq!(record["outcome"], outcome, "{record}");
        assert_eq!(record["client"], "code-audit", "{record}");
        // The answer the client was sent, as for a direct call (not only what was printed).
        assert!(record["resultBytes"].as_u64() > Some(40), "{record}");
        let inner: Vec<Value> = audit_records(&state)
            .into_iter()
            .filter(|r| r["program"] == id && r["target"] != "run_code")
            .collect();
        assert_eq!(inner.len(), calls as usize, "{inner:#?}");
    }
    assert!(
        failed["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{failed}"
    );
    assert_ne!(ok["program"], failed["program"]);
    let inner: Vec<Value> = audit_records(&state)
        .into_iter()
        .filter(|r| r["program"] == ok["program"] && r["target"] != "run_code")
        .collect();
    let targets: Vec<&str> = inner
        .iter()
        .map(|r| r["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["fx:echo", "fx:add", "fx:fail"], "{inner:#?}");
    assert_eq!(inner[2]["outcome"], "isError", "{inner:#?}");
    // Calls made outside a program carry no program.
    let direct: Vec<Value> = audit_records(&state)
        .into_iter()
        .filter(|r| r.get("program").is_none())
        .collect();
    assert!(
        direct.iter().all(|r| r["target"] != "run_code"),
        "{direct:#?}"
    );
}
