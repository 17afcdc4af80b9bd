//! `openpact.http.token` as a user meets it (issue 38): a token that cannot be had — its
//! variable unset, or empty — makes `serve --http` refuse, once, with advice that ends in a
//! face that serves when followed; `"token": false` serves without one and says so; and no
//! other command talks about the HTTP token at all.

use super::{Cli, isolated, with_servers};
use crate::support::{Hub, StderrLog, WAIT, fixture};
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::Instant;
use tokio::process::Child;

const SERVE_HTTP: [&str; 4] = ["serve", "--http", "127.0.0.1:0", "--no-stdio"];

fn with_token(token: Value) -> Cli {
    with_servers(
        json!({ "fx": fixture(&[]) }),
        Some(json!({"http": {"token": token}})),
    )
}

/// `serve --http` on a free loopback port, as a user starts it (default log filter), once it
/// says where it serves: the process (killed when dropped), `http://HOST:PORT` and its stderr.
async fn serving(cli: &Cli, env: &[(&str, &str)]) -> (Child, String, StderrLog) {
    let mut cmd = isolated(&cli.sc, &[&cli.flags()[..], &SERVE_HTTP].concat(), env);
    cmd.stdin(Stdio::null());
    let mut child = cmd.spawn().expect("spawn openpact");
    let log = StderrLog::drain("openpact serve --http", child.stderr.take().unwrap());
    let deadline = Instant::now() + WAIT;
    loop {
        let text = log.text();
        if let Some(start) = text.find("serving MCP over HTTP on http://") {
            let url = &text[start + "serving MCP over HTTP on ".len()..];
            let base = url[..url.find("/mcp").unwrap()].to_string();
            return (child, base, log);
        }
        assert!(
            child.try_wait().unwrap().is_none() && Instant::now() < deadline,
            "serve --http did not start:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// `GET /health`'s status, with `Authorization: Bearer TOKEN` when given.
async fn health(base: &str, token: Option<&str>) -> u16 {
    let mut req = crate::http_face::client().get(format!("{base}/health"));
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    req.send().await.unwrap().status().as_u16()
}

/// The first `export …` the message tells the user to run, run by a shell as they would:
/// the value it leaves in `variable`.
async fn follow_export(message: &str, variable: &str) -> String {
    let start = message
        .find("`export ")
        .unwrap_or_else(|| panic!("no `export …` advice in: {message}"));
    let command = &message[start + 1..start + 1 + message[start + 1..].find('`').unwrap()];
    let out = tokio::process::Command::new("sh")
        .args(["-c", &format!("{command} && printf %s \"${variable}\"")])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{command}: {out:?}");
    let value = String::from_utf8(out.stdout).unwrap();
    assert!(value.len() >= 32, "{command} set {variable} to {value:?}");
    value
}

/// The walk: the variable unset, `serve --http` refuses once; each of its two ways
/// out, followed literally, serves: the exported token is then required, and `"token":
/// false` serves without one, with a warning.
#[tokio::test]
async fn an_unset_token_is_refused_once_and_both_ways_out_work() {
    let cli = with_token(json!("${OPENPACT_HTTP_TOKEN}"));
    let refused = cli.run(&SERVE_HTTP).await;
    assert_eq!(refused.code, Some(2), "{refused:#?}");
    let err = &refused.stderr;
    assert_eq!(
        err.matches("${OPENPACT_HTTP_TOKEN} is not set").count(),
        1,
        "said once: {err}"
    );
    assert!(
        err.contains("refusing to serve HTTP without the configured token"),
        "{err}"
    );
    // The old advice, `${OPENPACT_HTTP_TOKEN:-}`, served with no token at all.
    assert!(!err.contains(":-}"), "{err}");

    let token = follow_export(err, "OPENPACT_HTTP_TOKEN").await;
    let (_hub, base, log) = serving(&cli, &[("OPENPACT_HTTP_TOKEN", &token)]).await;
    assert_eq!(health(&base, None).await, 401);
    assert_eq!(health(&base, Some("wrong")).await, 401);
    assert_eq!(health(&base, Some(&token)).await, 200);
    assert!(!log.text().contains("token"), "{}", log.text());

    assert!(err.contains("write \"token\": false"), "{err}");
    let cli = with_token(json!(false));
    let (_hub, base, log) = serving(&cli, &[]).await;
    assert_eq!(health(&base, None).await, 200);
    let text = log.text();
    assert_eq!(
        text.matches("WARN").count(),
        1,
        "one warning, that no token guards the face: {text}"
    );
    assert!(
        text.contains("openpact.http.token is false: no token guards http://127.0.0.1:"),
        "{text}"
    );
    // Not beyond this machine, though: there a token is the only guard.
    let wide = cli
        .run(&["serve", "--http", "0.0.0.0:0", "--no-stdio"])
        .await;
    assert_eq!(wide.code, Some(2), "{wide:#?}");
    assert!(
        wide.stderr
            .contains("refusing to serve HTTP on 0.0.0.0:0 without a token")
            && wide
                .stderr
                .contains("\"token\": false, too, serves loopback only"),
        "{}",
        wide.stderr
    );
}

/// An empty token — `${VAR:-}` with VAR unset, VAR set but empty, or `""` — is a refusal,
/// never a face without a token; the advice names the variable to set (for `""`, one to
/// write), and following it serves with that token required.
#[tokio::test]
async fn an_empty_token_is_refused_and_the_advice_works() {
    for (token, env) in [
        (json!("${OPENPACT_HTTP_TOKEN:-}"), vec![]),
        (
            json!("${OPENPACT_HTTP_TOKEN}"),
            vec![("OPENPACT_HTTP_TOKEN", "")],
        ),
        (json!(""), vec![]),
    ] {
        let cli = with_token(token.clone());
        let refused = cli.run_env(&SERVE_HTTP, &env).await;
        assert_eq!(refused.code, Some(2), "{token}: {refused:#?}");
        let err = &refused.stderr;
        assert_eq!(
            err.matches("is empty").count(),
            1,
            "{token}: refused once, saying why: {err}"
        );
        assert!(
            err.contains("an empty token would let every request in"),
            "{err}"
        );
        let value = follow_export(err, "OPENPACT_HTTP_TOKEN").await;
        if token == json!("") {
            // The advice says what to write too.
            assert!(
                err.contains("Write \"token\": \"${OPENPACT_HTTP_TOKEN}\""),
                "{err}"
            );
            std::fs::write(
                &cli.cfg,
                json!({"mcpServers": {"fx": fixture(&[])},
                       "openpact": {"http": {"token": "${OPENPACT_HTTP_TOKEN}"}}})
                .to_string(),
            )
            .unwrap();
        }
        let (_hub, base, _log) = serving(&cli, &[("OPENPACT_HTTP_TOKEN", &value)]).await;
        assert_eq!(health(&base, None).await, 401, "{token}");
        assert_eq!(health(&base, Some(&value)).await, 200, "{token}");
    }
}

/// The HTTP token matters only where the HTTP face starts: `tools`, `servers` and stdio
/// `serve` say nothing of an unset token variable; `config check` says it once, as what
/// `serve --http` would do, and that nothing else needs it.
#[tokio::test]
async fn only_serve_http_and_config_check_mention_an_unset_token() {
    let cli = with_token(json!("${OPENPACT_HTTP_TOKEN}"));
    for args in [&["tools"][..], &["servers"], &["prompts"]] {
        let out = cli.run(args).await;
        out.expect_code(0);
        assert!(
            !out.stderr.contains("OPENPACT_HTTP_TOKEN"),
            "{args:?}: {out}"
        );
    }
    let mut stdio = Hub::spawn(isolated(
        &cli.sc,
        &[&cli.flags()[..], &["serve"]].concat(),
        &[],
    ));
    tokio::time::timeout(WAIT, stdio.client.initialize())
        .await
        .expect("stdio serve answers");
    stdio.close().await;
    assert!(
        !stdio.stderr().contains("OPENPACT_HTTP_TOKEN"),
        "{}",
        stdio.stderr()
    );

    let check = cli.run(&["config", "check"]).await;
    check.expect_code(0);
    let all = format!("{}{}", check.stdout, check.stderr);
    assert_eq!(
        all.matches("OPENPACT_HTTP_TOKEN} is not set").count(),
        1,
        "{all}"
    );
    let line = all
        .lines()
        .find(|l| l.contains("is not set"))
        .unwrap_or_default();
    assert!(
        line.starts_with(
            "HTTP face (only `serve --http` uses it; stdio `serve` and the other commands work): refusing to serve HTTP"
        ),
        "{line}"
    );
    assert!(!check.stderr.contains("warning"), "{}", check.stderr);

    let json = cli.run(&["config", "check", "--json"]).await;
    let v: Value = json.json();
    assert_eq!(v["http"]["token"], "missing", "{v:#}");
    assert!(
        v["http"]["refusal"]
            .as_str()
            .is_some_and(|r| r.contains("OPENPACT_HTTP_TOKEN} is not set")),
        "{v:#}"
    );
    assert_eq!(v["warnings"], json!([]), "{v:#}");
}
