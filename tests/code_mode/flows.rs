//! The data-flow guard inside one program (`policy::flows` is the direct-call version): with
//! `fx:echo` labelled private and `fx:add` untrusted by the config's globs, a program that
//! calls both and then the built-in `chat_send` (egress, to a loopback webhook) is asked at
//! that call, naming both earlier calls; denied when the client cannot be asked; let through
//! with the guard off.

use super::{and_code_on, run_failing, run_ok};
use crate::policy::flows::{hook_calls, loopback, send};
use crate::policy::{call_unasked, prompt, started};
use crate::support::{Scratch, Stand, accept, answer, fixture, is_error, send_call, text};
use serde_json::json;
use std::path::PathBuf;

/// The fixture with `fx:echo` private and `fx:*d*` (add) untrusted, `chat_send` through a
/// webhook on `site`, everything allowed, code mode on, and this `guard`.
fn config(sc: &Scratch, site: &Stand, guard: &str) -> PathBuf {
    sc.servers(
        json!({"fx": fixture(&[])}),
        Some(and_code_on(json!({
            "permissions": {"default": "allow", "nonInteractive": "allow"},
            "flows": {"guard": guard, "private": ["fx:ech?"], "untrusted": ["fx:a*"]},
            "builtins": {"chat": {"webhook": {"url": format!("{}/hook", site.base)}}}
        }))),
    )
}

/// Reads the private notes, takes in untrusted text, then sends the notes out.
fn exfiltrate() -> String {
    let send = send("placeholder")
        .to_string()
        .replace("\"placeholder\"", "notes + \" \" + str(sum[\"sum\"])");
    format!(
        "notes = call(\"fx:echo\", {{\"message\": \"my secret notes\"}})\n\
         sum = call(\"fx:add\", {{\"a\": 1, \"b\": 2}})\n\
         print(\"read and fetched\")\n\
         call(\"chat_send\", {send})\n\
         \"sent\"\n"
    )
}

/// What the message about the guarded call names: the calls that came first.
const WHY: [&str; 3] = ["fx:echo", "fx:add", "chat_send can send data out"];

fn assert_why(t: &str, more: &[&str]) {
    for needle in WHY.iter().chain(more) {
        assert!(t.contains(needle), "{needle:?} not in {t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_reading_private_then_untrusted_data_is_asked_before_egress() {
    let site = loopback();
    let sc = Scratch::new();
    let cfg = config(&sc, &site, "ask");
    let mut hub = started(&cfg, &[], json!({"elicitation": {}}), "code-flows").await;
    let c = &mut hub.client;

    // Declined: the program fails at the send, after what it did before.
    let id = send_call(c, "run_code", json!({"code": exfiltrate()})).await;
    let req = prompt(c).await;
    let msg = req["params"]["message"].as_str().unwrap();
    assert_why(msg, &["openpact.flows"]);
    answer(c, &req, json!({"action": "decline"})).await;
    let r = c.response(&id).await;
    assert!(is_error(&r), "{r}");
    let t = text(&r);
    assert!(
        t.starts_with("read and fetched\nThe program failed: ")
            && t.contains("denied at the prompt"),
        "{t}"
    );
    assert_eq!(hook_calls(&site), 0);

    // Accepted once: sent.
    let id = send_call(c, "run_code", json!({"code": exfiltrate()})).await;
    let req = prompt(c).await;
    assert_why(req["params"]["message"].as_str().unwrap(), &[]);
    answer(c, &req, accept("once")).await;
    let r = c.response(&id).await;
    assert!(!is_error(&r), "{r}");
    assert!(text(&r).ends_with("\"sent\""), "{r}");
    assert_eq!(hook_calls(&site), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_is_denied_egress_without_a_way_to_ask_and_let_through_with_the_guard_off() {
    let site = loopback();
    let sc = Scratch::new();
    let cfg = config(&sc, &site, "ask");
    let mut hub = started(&cfg, &[], json!({}), "code-flows-no-elicitation").await;
    let c = &mut hub.client;
    // Egress before the program has both is not guarded.
    let r = run_ok(c, &format!("call(\"chat_send\", {})\n", send("hello"))).await;
    assert!(!r.contains("failed"), "{r}");
    assert_eq!(hook_calls(&site), 1);
    let t = run_failing(c, &exfiltrate()).await;
    assert_why(
        &t,
        &["no way to ask", "set openpact.flows.guard to \"off\""],
    );
    assert_eq!(hook_calls(&site), 1);
    // The program's calls are the session's: a direct send after it is guarded too.
    let r = call_unasked(c, "chat_send", send("the notes")).await;
    assert!(is_error(&r), "{r}");
    assert_why(&text(&r), &[]);
    assert_eq!(hook_calls(&site), 1);
    hub.close().await;

    let sc = Scratch::new();
    let cfg = config(&sc, &site, "off");
    let mut hub = started(&cfg, &[], json!({}), "code-flows-off").await;
    let c = &mut hub.client;
    let t = run_ok(c, &exfiltrate()).await;
    assert_eq!(t, "read and fetched\n\"sent\"");
    assert_eq!(hook_calls(&site), 2);
    let sent: Vec<String> = site
        .seen()
        .into_iter()
        .filter(|r| r.url == "/hook")
        .map(|r| r.body)
        .collect();
    assert!(
        sent.last().unwrap().contains("my secret notes 3"),
        "{sent:?}"
    );
}
