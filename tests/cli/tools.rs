//! `openpact tools`: qualified names with descriptions and a count, `--json`, and a failed
//! server reported on stderr without failing the command.

use super::{FIXTURE_TOOLS, fx_and_bad, fx_only, stdout_json, with_servers};
use crate::support::fixture;
use serde_json::json;

#[tokio::test]
async fn tools_lists_qualified_names_with_descriptions_and_a_count() {
    let cli = fx_only();
    let out = cli.run(&["tools"]).await;
    out.expect_code(0);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let (count_line, tool_lines) = lines.split_last().expect("some output");
    assert_eq!(
        *count_line,
        format!("{} tools from 1 server(s)", FIXTURE_TOOLS.len()),
        "{}",
        out.stdout
    );
    assert_eq!(tool_lines.len(), FIXTURE_TOOLS.len(), "{}", out.stdout);
    for (line, tool) in tool_lines.iter().zip(FIXTURE_TOOLS) {
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some(format!("fx:{tool}").as_str()), "{line}");
    }
    let echo = tool_lines
        .iter()
        .find(|l| l.starts_with("fx:echo "))
        .unwrap();
    assert!(echo.ends_with("  Echo the message back"), "{echo}");
    let add = tool_lines
        .iter()
        .find(|l| l.starts_with("fx:add "))
        .unwrap();
    assert!(add.ends_with("  Add two numbers"), "{add}");
    assert!(!out.stderr.contains("failed"), "{}", out.stderr);
}

#[tokio::test]
async fn tools_json_describes_every_tool() {
    let cli = fx_only();
    // Flags after the subcommand work too.
    let out = cli.run_after(&["tools", "--json"]).await;
    out.expect_code(0);
    let v = stdout_json(&out);
    let list = v.as_array().expect("a JSON array");
    let wire: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let want: Vec<String> = FIXTURE_TOOLS.iter().map(|t| format!("fx:{t}")).collect();
    assert_eq!(wire, want);
    for t in list {
        assert_eq!(t["qualified"], t["name"], "{t}");
        assert_eq!(t["server"], "fx", "{t}");
        assert_eq!(t["definition"]["name"], t["name"], "{t}");
        assert!(t["definition"]["inputSchema"].is_object(), "{t}");
    }
    let add = list.iter().find(|t| t["name"] == "fx:add").unwrap();
    assert_eq!(add["definition"]["description"], "Add two numbers");
    assert_eq!(
        add["definition"]["outputSchema"]["required"],
        json!(["sum"])
    );
}

/// Each `tools --json` entry names the server's own tool under `tool` (with `portable`
/// names that is the only place the original name shows).
#[tokio::test]
async fn tools_json_names_the_servers_own_tool() {
    let cli = with_servers(
        json!({ "fx": fixture(&[]) }),
        Some(json!({"toolNames": "portable"})),
    );
    let out = cli.run_after(&["tools", "--json"]).await;
    out.expect_code(0);
    let v = stdout_json(&out);
    let list = v.as_array().expect("a JSON array");
    let tools: Vec<&str> = list
        .iter()
        .map(|t| {
            t["tool"]
                .as_str()
                .unwrap_or_else(|| panic!("no `tool` in {t}"))
        })
        .collect();
    assert_eq!(tools, FIXTURE_TOOLS);
    let echo = list.iter().find(|t| t["tool"] == "echo").unwrap();
    assert_eq!(echo["name"], "fx__echo");
    assert_eq!(echo["qualified"], "fx:echo");
}

#[tokio::test]
async fn tools_reports_a_failed_server_on_stderr_and_still_succeeds() {
    let cli = fx_and_bad();
    let out = cli.run(&["tools"]).await;
    out.expect_code(0);
    assert!(
        out.stdout.lines().any(|l| l.starts_with("fx:echo ")),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .ends_with(&format!("{} tools from 1 server(s)\n", FIXTURE_TOOLS.len())),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("bad"),
        "the failure belongs on stderr: {}",
        out.stdout
    );
    assert!(out.stderr.contains("server 'bad' failed"), "{}", out.stderr);
    assert!(out.stderr.contains("exit status: 9"), "{}", out.stderr);
}
