//! Routing and pass-through: calls go to their server, ids (big integers too), arguments,
//! results and JSON-RPC errors pass through unchanged; unknown tools get clear errors.

use super::spawn_openpact;
use crate::support::{FIXTURE, Scratch, WAIT, fixture, ready, serve, serve_ready, text};
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_call_routes_by_server_and_passes_results_through() {
    let s = Scratch::new();
    let a = json!({"command": FIXTURE, "env": {"OPENPACT_TEST_X": "from-a"}});
    let b = json!({"command": FIXTURE, "env": {"OPENPACT_TEST_X": "from-b"}});
    let cfg = s.servers(json!({"a": a, "b": b}), None);
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["a:echo", "b:echo"]).await;

    assert_eq!(
        text(&c.call("a:env", json!({"name": "OPENPACT_TEST_X"})).await),
        "from-a"
    );
    assert_eq!(
        text(&c.call("b:env", json!({"name": "OPENPACT_TEST_X"})).await),
        "from-b"
    );

    // Arguments arrive untouched, escapes and non-ASCII included.
    let message = "héllo \"quoted\" \\ back\nslash \u{1F389} \u{0007}";
    let r = c.call("a:echo", json!({"message": message})).await;
    assert_eq!(text(&r), message, "{r}");
    // Structured results pass through (integers stay integers).
    let r = c.call("b:add", json!({"a": 2, "b": 40})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 42}), "{r}");

    // String ids are echoed as strings.
    c.send(&json!({"jsonrpc": "2.0", "id": "abc", "method": "tools/call", "params": {"name": "a:echo", "arguments": {"message": "s"}}}))
        .await;
    let r = c.response(&json!("abc")).await;
    assert_eq!(r["id"], json!("abc"));
    assert_eq!(text(&r), "s");
    // `"1"` and `1` are different ids.
    c.send(&json!({"jsonrpc": "2.0", "id": "1", "method": "tools/call", "params": {"name": "a:echo", "arguments": {"message": "string one"}}}))
        .await;
    let r = c.response(&json!("1")).await;
    assert_eq!(text(&r), "string one", "{r}");

    // `isError` results are results, not errors.
    let r = c.call("b:fail", json!({})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(text(&r), "this tool always fails");
    assert!(r.get("error").is_none(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_integer_ids_come_back_byte_exact() {
    let s = Scratch::new();
    let cfg = s.servers(json!({"a": fixture(&[])}), None);
    let state = s.path().join("state");
    let (mut child, mut stdin, stdout) = spawn_openpact(
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "serve",
        ],
        s.path(),
        &[],
    );
    let mut lines = BufReader::new(stdout).lines();
    let mut next_line = async || {
        tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("answer in time")
            .unwrap()
            .expect("stdout open")
    };
    // Settle first (see `ready`): list until a:echo is there, relisting on list_changed.
    let init = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    stdin
        .write_all(
            format!("{init}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    for attempt in 0.. {
        assert!(attempt < 10, "a:echo never listed");
        let list = format!(r#"{{"jsonrpc":"2.0","id":"list-{attempt}","method":"tools/list"}}"#);
        stdin
            .write_all(format!("{list}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
        let answer = loop {
            let line = next_line().await;
            if line.contains(&format!(r#""id":"list-{attempt}""#)) {
                break line;
            }
        };
        if answer.contains(r#""name":"a:echo""#) {
            break;
        }
        while !next_line()
            .await
            .contains("notifications/tools/list_changed")
        {}
    }
    let requests = concat!(
        r#"{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"name":"a:echo","arguments":{"message":"big"}}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":-0.5e3,"method":"ping"}"#,
        "\n",
    );
    stdin.write_all(requests.as_bytes()).await.unwrap();
    stdin.flush().await.unwrap();
    let mut big = None;
    let mut odd = None;
    while big.is_none() || odd.is_none() {
        let line = next_line().await;
        if line.contains("12345678901234567890") {
            big = Some(line);
        } else if line.contains("-0.5e3") {
            odd = Some(line);
        }
    }
    let big = big.unwrap();
    assert!(
        big.starts_with(r#"{"jsonrpc":"2.0","id":12345678901234567890,"result":"#),
        "{big}"
    );
    assert!(big.contains(r#""text":"big""#), "{big}");
    let odd = odd.unwrap();
    assert_eq!(odd, r#"{"jsonrpc":"2.0","id":-0.5e3,"result":{}}"#);
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// A scripted upstream (sh + sed) that answers every `tools/call` with a JSON-RPC error
/// carrying `data`, which the fixture's `error_with` does not.
const ERROR_SERVER: &str = r#"
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\([0-9]*\),.*/\1/p')
  case "$line" in
    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"0"}}}\n' "$id" ;;
    *'"method":"tools/list"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"boom","inputSchema":{"type":"object"}}]}}\n' "$id" ;;
    *'"method":"tools/call"'*)
      printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32099,"message":"boom failed","data":{"why":["scripted",1]}}}\n' "$id" ;;
  esac
done
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_jsonrpc_errors_pass_through() {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"sh": {"command": "sh", "args": ["-c", ERROR_SERVER]}, "a": fixture(&[])}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready(c, &["sh:boom", "a:echo"]).await;
    let r = c.call("sh:boom", json!({})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32099, "message": "boom failed", "data": {"why": ["scripted", 1]}}),
        "{r}"
    );
    assert!(r.get("result").is_none(), "{r}");
    // The fixture's own error tool, message with escapes and all.
    let message = "nope: \"quoted\" \u{e9}";
    let r = c.call("a:error_with", json!({"message": message})).await;
    assert_eq!(
        r["error"],
        json!({"code": -32603, "message": message}),
        "{r}"
    );
    assert_eq!(
        text(&c.call("a:echo", json!({"message": "still fine"})).await),
        "still fine"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_tools_and_tools_of_failed_servers_get_clear_errors() {
    let mut hub = serve_ready(
        json!({"a": fixture(&[]), "dead": fixture(&["--exit-at-start", "3"])}),
        None,
        &["a:echo"],
    )
    .await;
    let c = &mut hub.client;

    let r = c.call("a:no_such_tool", json!({})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["message"], "Unknown tool: a:no_such_tool", "{r}");
    let r = c.call("nobody:echo", json!({})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["message"], "Unknown tool: nobody:echo", "{r}");

    let r = c.call("dead:echo", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("'dead'") && msg.contains("failed"), "{msg}");
    // The portable spelling of the same tool says the same.
    let r = c.call("dead__echo", json!({})).await;
    assert_eq!(r["error"]["code"], -32010, "{r}");

    // Missing or malformed names are invalid params, and the session goes on.
    let r = c.request("tools/call", json!({"arguments": {}})).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let r = c.request("tools/call", json!(["a:echo"])).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(
        text(&c.call("a:echo", json!({"message": "ok"})).await),
        "ok"
    );
}

/// A catalogue fixture with `--data` (what the code-mode benchmark calls): a case chosen by
/// the arguments answers with `structuredContent` and the same JSON as text, through the hub
/// unchanged; a case's error is a tool error; a tool the data leaves out keeps the plain
/// `NAME called with ARGUMENTS` answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogue_data_answers_by_arguments_and_falls_back() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/catalogues");
    let tools = format!("{dir}/tracker.json");
    let data = format!("{dir}/tracker.data.json");
    let mut hub = serve_ready(
        json!({"tracker": fixture(&["--tools-file", &tools, "--data", &data])}),
        None,
        &["tracker:list_comments"],
    )
    .await;
    let c = &mut hub.client;

    let r = c
        .call("tracker:list_comments", json!({"issueId": "ENG-3"}))
        .await;
    let comments = &r["result"]["structuredContent"]["comments"];
    assert_eq!(comments.as_array().map(Vec::len), Some(3), "{r}");
    assert_eq!(comments[0]["user"]["name"], "Lukas Weber", "{r}");
    let as_text: serde_json::Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(as_text, r["result"]["structuredContent"], "{r}");

    // Arguments the case does not name do not matter; the first matching case answers.
    let r = c
        .call(
            "tracker:list_issues",
            json!({"state": "In Review", "limit": 5}),
        )
        .await;
    let ids: Vec<&str> = r["result"]["structuredContent"]["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["identifier"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["ENG-3", "ENG-7", "ENG-12"], "{r}");

    // The last case, without `when`, is the fallback: here an error, as the real API's.
    let r = c.call("tracker:get_issue", json!({"id": "ENG-999"})).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert!(text(&r).starts_with("Entity not found"), "{r}");

    // No data for this tool: the plain answer, without structuredContent.
    let r = c
        .call(
            "tracker:create_comment",
            json!({"issueId": "ENG-3", "body": "hi"}),
        )
        .await;
    assert_eq!(
        text(&r),
        r#"create_comment called with {"issueId":"ENG-3","body":"hi"}"#,
        "{r}"
    );
    assert!(r["result"].get("structuredContent").is_none(), "{r}");
}
