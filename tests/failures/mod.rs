//! Bad servers and bad input: crashes, hangs, floods, garbage, oversized messages and
//! shutdown. In every case the hub keeps serving everything else. This module holds what
//! they share: error messages, probes of the fixture's counters and pids, and the CLI.
//!
//! - `crashes`: crashes, restarts, parking, hangs and cancellation.
//! - `startup`: servers that do not start.
//! - `misbehaving`: noisy and misbehaving servers, and malformed client input.
//! - `shutdown`: stopping every process, answering what is in flight.

mod crashes;
mod misbehaving;
mod shutdown;
mod startup;

use crate::support::{Client, OPENPACT, Ran, WAIT, alive, text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::process::Command;

fn error_message(r: &Value) -> String {
    r["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error response: {r}"))
        .to_string()
}

/// Sends `tools/call` with this id without waiting for the answer.
async fn send_call_with_id(c: &mut Client, id: &Value, name: &str, arguments: Value) {
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}))
        .await;
}

/// Waits until the fixture behind `server` has received a `tools/call` sent before this
/// (its `calls` counter counts every call, this probe included).
async fn until_received(c: &mut Client, server: &str, earlier_calls: u64) {
    for probes in 1..=100u64 {
        let n: u64 = text(&c.call(&format!("{server}:calls"), json!({})).await)
            .parse()
            .unwrap();
        if n >= earlier_calls + probes {
            return;
        }
    }
    panic!("{server} never received the earlier call");
}

/// `{"pid": N, "grandchild": M|null}` from the fixture's `pids` tool.
async fn pids(c: &mut Client, server: &str) -> (u32, Option<u32>) {
    let r = c.call(&format!("{server}:pids"), json!({})).await;
    crate::support::server_pids(&text(&r))
}

/// Waits (briefly: they were killed already) until none of `pids` is alive.
async fn all_gone(pids: &[u32], limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let living: Vec<_> = pids.iter().filter(|p| alive(**p)).collect();
        if living.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still alive after {limit:?}: {living:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `openpact ARGS` run to its end: exit code, stdout and stderr.
async fn run_cli(args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(OPENPACT);
    cmd.args(args);
    let ran = Ran::of(cmd, args, WAIT).await;
    (ran.code, ran.stdout, ran.stderr)
}
