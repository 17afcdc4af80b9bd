//! `openpact call`: the text result, arguments from the command line or stdin, `--json`,
//! tool errors and bad arguments, Ctrl-C, and starting only the server the call needs.

use super::{fx_and_bad, fx_only, isolated, openpact, stdout_json};
use crate::support;
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test]
async fn call_prints_the_text_result() {
    let cli = fx_only();
    let out = cli.run(&["call", "fx:echo", r#"{"message":"hi"}"#]).await;
    out.expect_code(0);
    assert_eq!(out.stdout, "hi\n");
}

#[tokio::test]
async fn call_reads_arguments_from_stdin() {
    let cli = fx_only();
    let args = [&["call", "fx:echo", "-"][..], &cli.flags()].concat();
    let stdin = "{\n  \"message\": \"from stdin\"\n}\n";
    let out = openpact(&cli.sc, &args, &[], Some(stdin)).await;
    out.expect_code(0);
    assert_eq!(out.stdout, "from stdin\n");
}

#[tokio::test]
async fn call_accepts_pretty_printed_arguments() {
    // The arguments go upstream inside one JSON-RPC line: a newline in them must not
    // split that line.
    let cli = fx_only();
    let out = cli
        .run(&["call", "fx:echo", "{\n  \"message\": \"two\\nlines\"\n}\n"])
        .await;
    out.expect_code(0);
    assert_eq!(out.stdout, "two\nlines\n");
}

/// SIGINT (Ctrl-C) during a call cancels it: exit 130 at once, not when the tool is done.
#[tokio::test]
async fn call_interrupted_exits_130_promptly() {
    let cli = fx_only();
    let args = [&cli.flags()[..], &["call", "fx:slow", r#"{"ms": 30000}"#]].concat();
    let mut cmd = isolated(&cli.sc, &args, &[("OPENPACT_LOG", "info")]);
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
    let cli = fx_only();
    let out = cli
        .run(&["call", "fx:add", r#"{"a":2,"b":3}"#, "--json"])
        .await;
    out.expect_code(0);
    let v = stdout_json(&out);
    assert_eq!(
        v,
        json!({"content": [{"type": "text", "text": "5"}], "structuredContent": {"sum": 5}})
    );
}

#[tokio::test]
async fn call_of_an_is_error_result_exits_1_with_the_text_on_stderr() {
    let cli = fx_only();
    let out = cli.run(&["call", "fx:fail"]).await;
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
    let cli = fx_only();
    let out = cli.run(&["call", "fx:nope", "{}"]).await;
    out.expect_code(1);
    assert!(out.stderr.contains("Unknown tool"), "{}", out.stderr);
    assert!(out.stderr.contains("fx:nope"), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

#[tokio::test]
async fn call_with_malformed_json_arguments_fails_clearly() {
    let cli = fx_only();
    let out = cli.run(&["call", "fx:echo", r#"{"message": hi}"#]).await;
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
    let cli = fx_only();
    for args in ["[1]", "\"hi\"", "42"] {
        let out = cli.run(&["call", "fx:echo", args]).await;
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
    let cli = fx_and_bad();
    let env = [("OPENPACT_LOG", "debug")];
    // Control: a command that starts everything does show `bad` failing in the log.
    let all = cli.run_env(&["servers"], &env).await;
    all.expect_code(0);
    assert!(
        all.stderr.contains("server=bad"),
        "control run should log bad's failure: {}",
        all.stderr
    );

    let out = cli
        .run_env(&["call", "fx:echo", r#"{"message":"only fx"}"#], &env)
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
