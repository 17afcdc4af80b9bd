//! `openpact config check`: the servers without their secret values, unset variables,
//! typo keys and JSON syntax errors named with file, path and fix.

use super::{Cli, stdout_json, with_servers};
use crate::support::{self, Scratch, s};
use serde_json::{Value, json};

#[tokio::test]
async fn config_check_prints_servers_and_never_env_values() {
    let cli = with_servers(
        json!({"x": {"command": support::FIXTURE, "args": ["--name", "xx"], "env": {"TOKEN": "s3cr3t-value"}}}),
        None,
    );
    let Cli { cfg, state, .. } = &cli;
    let out = cli.run(&["config", "check"]).await;
    out.expect_code(0);
    assert!(
        out.stdout.contains(&format!("config: {}", cfg.display())),
        "{}",
        out.stdout
    );
    assert!(out.stdout.lines().any(|l| l == "x"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains(&format!("command: {}", support::FIXTURE)),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(r#"args: ["--name","xx"]"#),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("TOKEN"), "{}", out.stdout);
    assert!(
        out.stdout.contains("ok: 1 server(s) enabled"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("s3cr3t") && !out.stderr.contains("s3cr3t"),
        "secret shown: {out:#?}"
    );

    let out = cli.run(&["config", "check", "--json"]).await;
    out.expect_code(0);
    assert!(
        !out.stdout.contains("s3cr3t") && !out.stderr.contains("s3cr3t"),
        "secret shown: {out:#?}"
    );
    let v = stdout_json(&out);
    assert_eq!(v["config"], s(cfg));
    assert_eq!(v["stateDir"], s(state));
    assert_eq!(v["warnings"], json!([]));
    let x = &v["servers"][0];
    assert_eq!(x["name"], "x");
    assert_eq!(x["type"], "stdio");
    assert_eq!(x["command"], support::FIXTURE);
    assert_eq!(x["args"], json!(["--name", "xx"]));
    assert_eq!(x["env"], json!(["TOKEN"]));
    assert_eq!(x["disabled"], false);
}

#[tokio::test]
async fn config_check_names_file_path_and_fix_for_an_unset_variable() {
    let cli = with_servers(
        json!({"x": {"command": support::FIXTURE, "args": ["${NOPE_VAR}"]}}),
        None,
    );
    let Cli { cfg, .. } = &cli;
    for json_flag in [false, true] {
        let mut args = vec!["config", "check"];
        if json_flag {
            args.push("--json");
        }
        let out = cli.run(&args).await;
        out.expect_code(1);
        // With --json the problems are JSON on stdout, each as the text would show it.
        let said = if json_flag {
            let v = stdout_json(&out);
            assert_eq!(v["ok"], false, "{v:#}");
            let p = &v["problems"][0];
            format!(
                "{}: {}: {}",
                p["file"].as_str().unwrap(),
                p["path"].as_str().unwrap(),
                p["message"].as_str().unwrap()
            )
        } else {
            assert!(!out.stdout.contains("ok:"), "{}", out.stdout);
            out.stderr.clone()
        };
        let want = format!(
            "{}: mcpServers.x.args[0]: ${{NOPE_VAR}} is not set",
            cfg.display()
        );
        assert!(said.contains(&want), "want {want:?} in {said}");
        assert!(
            said.contains("export it or use ${NOPE_VAR:-}"),
            "a fix is suggested: {said}"
        );
    }
}

/// A typo key is a problem for `config check` (exit 1), a warning for the other commands.
#[tokio::test]
async fn config_check_fails_on_a_typo_key() {
    let cli = with_servers(
        json!({"x": {"command": support::FIXTURE, "comand": "oops"}}),
        None,
    );
    let out = cli.run_after(&["config", "check"]).await;
    out.expect_code(1);
    let warning = out
        .stderr
        .lines()
        .find(|l| l.contains("comand"))
        .unwrap_or_else(|| panic!("no warning: {}", out.stderr));
    assert!(warning.contains("mcpServers.x.comand"), "{warning}");
    assert!(
        warning.contains("did you mean") && warning.contains("command"),
        "{warning}"
    );

    let out = cli.run_after(&["config", "check", "--json"]).await;
    out.expect_code(1);
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{v:#}");
    assert!(
        problems[0]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean"),
        "{v:#}"
    );
    let tools = cli.run(&["tools"]).await;
    tools.expect_code(0);
    assert!(tools.stderr.contains("did you mean"), "{}", tools.stderr);
}

#[tokio::test]
async fn config_check_points_at_a_json_syntax_error() {
    let sc = Scratch::new();
    let cfg = sc.path().join("broken.json");
    // Line 3, column 9: the `{` where a `:` belongs.
    std::fs::write(&cfg, "{\n  \"mcpServers\": {\n    \"x\" {}\n  }\n}\n").unwrap();
    let cli = Cli {
        state: sc.state(),
        cfg,
        sc,
    };
    let out = cli.run(&["config", "check"]).await;
    out.expect_code(1);
    let want = format!("{}:3:9:", cli.cfg.display());
    assert!(
        out.stderr.contains(&want),
        "want {want:?} in {}",
        out.stderr
    );
}
