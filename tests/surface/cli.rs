//! The CLI commands for the surface: `resources`, `read`, `prompts`, `prompt`, and `call`
//! with progress off a terminal.

use super::two_servers;
use crate::support::{Ran, Scratch, WAIT, openpact_for};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;

/// `openpact --config CFG --state-dir … ARGS` with stdin, stdout and stderr not terminals.
async fn cli(s: &Scratch, cfg: &Path, args: &[&str]) -> Ran {
    let mut cmd = openpact_for(cfg, None);
    cmd.args(args)
        .current_dir(s.path())
        .env_remove("OPENPACT_LOG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    Ran::of(cmd, args, WAIT).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_lists_resources_and_prompts() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);

    let out = cli(&s, &cfg, &["resources"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    for (line, uri) in lines.iter().zip([
        "fixture://static/1",
        "fixture://static/2",
        "fixture://static/3",
        "fixture://item/{id}",
    ]) {
        assert!(line.starts_with(uri), "{line:?} should list {uri}");
        assert!(line.contains("[a]"), "{line:?}: served by a");
    }
    // Both servers list the same resources; "a" serves them all.
    assert_eq!(lines[4], "4 resources and templates from 1 server(s)");

    let out = cli(&s, &cfg, &["resources", "--json"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["resources"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(
        v["templates"],
        json!([{"server": "a", "definition": {"uriTemplate": "fixture://item/{id}", "name": "item"}}])
    );

    let out = cli(&s, &cfg, &["prompts"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{}", out.stdout);
    for (line, label) in
        lines
            .iter()
            .zip(["a:greet (name)", "a:plain", "b:greet (name)", "b:plain"])
    {
        assert!(line.starts_with(label), "{line:?} should start {label:?}");
    }
    assert!(lines[0].contains("Greet someone by name"), "{}", lines[0]);
    assert_eq!(lines[4], "4 prompts from 2 server(s)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_reads_resources_and_gets_prompts() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);

    let out = cli(&s, &cfg, &["read", "fixture://item/5"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "content of fixture://item/5\n");

    let out = cli(&s, &cfg, &["read", "fixture://static/2", "--json"]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["contents"][0]["text"], "content of fixture://static/2");

    let out = cli(&s, &cfg, &["prompt", "a:greet", r#"{"name":"Z"}"#]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "# Greet someone by name\nuser: Hello, Z!\n");

    let out = cli(&s, &cfg, &["prompt", "b:nope"]).await;
    assert_eq!(out.code, Some(1), "{} / {}", out.stdout, out.stderr);
    assert!(out.stderr.contains("error -32602"), "{}", out.stderr);

    let out = cli(&s, &cfg, &["read", "nope://x"]).await;
    assert_eq!(out.code, Some(1), "{} / {}", out.stdout, out.stderr);
    assert!(out.stderr.contains("error -32002"), "{}", out.stderr);
    assert!(out.stderr.contains("nope://x"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_call_with_progress_off_a_terminal_prints_just_the_result() {
    let s = Scratch::new();
    let cfg = two_servers(&s, None);
    let out = cli(&s, &cfg, &["call", "a:progress", r#"{"steps":3,"ms":10}"#]).await;
    assert_eq!(out.code, Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "done 3\n");
    // No progress bar (or its escape codes) on a stderr that is not a terminal.
    assert!(
        !out.stderr.contains("step") && !out.stderr.contains('\u{1b}'),
        "{:?}",
        out.stderr
    );
}
