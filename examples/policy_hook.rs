//! Permission decisions from code: with `"default": "ask"`, every call the policy would ask
//! a person about goes to the program's hook instead. This one allows `fx:echo` and denies
//! everything else; the denied call comes back as a tool error saying so.
//!
//!     cargo build --release --features internals --bin openpact-fixture
//!     cargo run --release --example policy_hook
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports what it did, and why it failed"
)]

mod support;

use openpact::{Decision, Hub};
use serde_json::json;
use std::process::ExitCode;
use support::{Result, check, fixture};

fn main() -> ExitCode {
    support::main("policy_hook", run)
}

async fn run() -> Result<()> {
    let state = tempfile::tempdir()?;
    let hub = Hub::builder()
        .config_value(json!({
            "mcpServers": {"fx": {"command": fixture()?}},
            "openpact": {"permissions": {"default": "ask"}},
        }))
        .state_dir(state.path())
        .policy_hook(|ask| {
            let decision = if ask.name == "fx:echo" {
                Decision::AllowOnce
            } else {
                Decision::Deny
            };
            println!("asked about {} {}: {decision:?}", ask.kind, ask.name);
            decision
        })
        .start()
        .await?;
    let allowed = hub.call_tool("fx:echo", json!({"message": "hi"})).await?;
    check("fx:echo allowed", !allowed.is_error, &allowed.text())?;
    let denied = hub.call_tool("fx:add", json!({"a": 1, "b": 2})).await?;
    check(
        "fx:add denied",
        denied.is_error && denied.text().contains("policy hook"),
        &denied.text(),
    )?;
    hub.shutdown().await;
    Ok(())
}
