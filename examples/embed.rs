//! Hosts three MCP servers in a Rust program and calls across them: the test fixture twice,
//! under two names, and the pinned `@modelcontextprotocol/server-filesystem` from
//! `.ci/peers.sh`, sandboxed to a scratch folder.
//!
//!     bash .ci/peers.sh target/peers && cargo build --release --features internals --bin openpact-fixture
//!     cargo run --release --example embed
//!
//! `OPENPACT_FIXTURE` names the fixture binary (default: `openpact-fixture` in the target
//! dir this example was built in); `OPENPACT_PEERS_JSON` the peers file (default:
//! `target/peers/peers.json`). Exits non-zero when any answer is not what it should be.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports what it did, and why it failed"
)]

use openpact::Hub;
use serde_json::{Value, json};
use std::process::ExitCode;

mod support;
use support::{Result, check, fixture};

fn main() -> ExitCode {
    support::main("embed", run)
}

/// The filesystem server's command line, from the peers file `.ci/peers.sh` writes.
fn filesystem_server() -> Result<Vec<String>> {
    let path = std::env::var("OPENPACT_PEERS_JSON").unwrap_or_else(|_| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/peers/peers.json").to_string()
    });
    let peers: Value = serde_json::from_slice(
        &std::fs::read(&path).map_err(|e| format!("{path}: {e} (run bash .ci/peers.sh)"))?,
    )?;
    let line = peers["PEER_FILESYSTEM"]
        .as_str()
        .ok_or("PEER_FILESYSTEM missing in peers.json")?;
    Ok(line.split(' ').map(String::from).collect())
}

async fn run() -> Result<()> {
    let scratch = tempfile::tempdir()?;
    let files = scratch.path().join("files");
    std::fs::create_dir(&files)?;
    let files = files.canonicalize()?;
    let fixture = fixture()?;
    let mut fs = filesystem_server()?;
    let program = fs.remove(0);
    fs.push(files.display().to_string());

    let hub = Hub::builder()
        .config_value(json!({
            "mcpServers": {
                "alpha": {"command": fixture, "args": ["--name", "alpha"]},
                "beta": {"command": fixture, "args": ["--name", "beta"]},
                "fs": {"command": program, "args": fs, "sandbox": {"write": [files]}},
            },
            "openpact": {"permissions": {"allow": ["alpha:*", "beta:*", "fs:*"]}},
        }))
        .state_dir(scratch.path().join("state"))
        .start()
        .await?;
    for (server, state) in hub.servers() {
        println!("server {server}: {state:?}");
    }
    let tools = hub.list_tools().await?;
    let count = |prefix: &str| tools.iter().filter(|t| t.name.starts_with(prefix)).count();
    check(
        "three servers' tools",
        count("alpha:") > 0 && count("beta:") > 0 && count("fs:") > 0,
        &format!(
            "alpha {}, beta {}, fs {}",
            count("alpha:"),
            count("beta:"),
            count("fs:")
        ),
    )?;

    let greeting = hub
        .call_tool("alpha:echo", json!({"message": "hello"}))
        .await?;
    let sum = hub.call_tool("beta:add", json!({"a": 2, "b": 3})).await?;
    check(
        "alpha:echo",
        greeting.text().contains("hello"),
        &greeting.text(),
    )?;
    check("beta:add", sum.text() == "5", &sum.text())?;

    // Across servers: what two servers answered, written and read back by a third.
    let note = files.join("note.txt");
    let content = format!("{} / 2 + 3 = {}", greeting.text(), sum.text());
    let wrote = hub
        .call_tool("fs:write_file", json!({"path": note, "content": content}))
        .await?;
    check("fs:write_file", !wrote.is_error, &wrote.text())?;
    let read = hub
        .call_tool("fs:read_text_file", json!({"path": note}))
        .await?;
    check("fs:read_text_file", read.text() == content, &read.text())?;

    let found = hub.search_tools("read a file", 3).await?;
    let names: Vec<&str> = found.iter().map(|h| h.name.as_str()).collect();
    check(
        "search",
        names.iter().any(|n| n.starts_with("fs:")),
        &names.join(", "),
    )?;
    hub.shutdown().await;
    Ok(())
}
