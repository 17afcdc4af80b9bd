//! A tool of the host program, served by the hub beside OpenPact's built-in tools and
//! called like any other (its arguments checked against its schema first), next to a
//! server's tool.
//!
//!     cargo build --release --features internals --bin openpact-fixture
//!     cargo run --release --example custom_tool
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports what it did, and why it failed"
)]

mod support;

use openpact::{HostTool, Hub};
use serde_json::{Value, json};
use std::process::ExitCode;
use support::{Result, check, fixture};

fn main() -> ExitCode {
    support::main("custom_tool", run)
}

async fn run() -> Result<()> {
    let state = tempfile::tempdir()?;
    let word_count = HostTool::new(
        "word_count",
        "Counts the words of a text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args: Value| async move {
            let text = args["text"].as_str().unwrap_or_default();
            Ok(json!({"words": text.split_whitespace().count()}))
        },
    );
    let hub = Hub::builder()
        .config_value(json!({
            "mcpServers": {"fx": {"command": fixture()?}},
            "openpact": {"permissions": {"allow": ["fx:*", "word_count"]}},
        }))
        .state_dir(state.path())
        .tool(word_count)
        .start()
        .await?;
    let listed = hub
        .list_tools()
        .await?
        .iter()
        .any(|t| t.name == "word_count");
    check("word_count listed", listed, "beside the built-ins")?;
    let echoed = hub
        .call_tool("fx:echo", json!({"message": "one two three"}))
        .await?;
    let counted = hub
        .call_tool("word_count", json!({"text": echoed.text()}))
        .await?;
    let words = counted
        .structured_content
        .as_ref()
        .map(|v| v["words"].clone());
    check(
        "word_count of fx:echo's answer",
        words == Some(json!(3)),
        &counted.text(),
    )?;
    let refused = hub.call_tool("word_count", json!({})).await?;
    check("arguments checked", refused.is_error, &refused.text())?;
    hub.shutdown().await;
    Ok(())
}
