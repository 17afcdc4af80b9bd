//! Test harness shared by every module of the integration binary: the binaries under test,
//! scratch dirs with configs, `openpact serve` as a real process with a JSON-RPC client on
//! its pipes, helpers for the tool catalogue, other processes and rmcp, and the real peers.
//!
//! - `scratch`: temp dirs and the configs written into them.
//! - `hub`: `openpact serve` started as a process (its stderr kept for failure reports).
//! - `client`: a JSON-RPC client over a pair of pipes.
//! - `catalog`: waiting for tools to be listed, sending calls, reading results.
//! - `process`: other processes: stderr logs, commands run to their end.
//! - `git`: git under a test identity, and a vault cloned from a local bare repository (the
//!   library's unit tests compile the same file).
//! - `ics`: iCalendar feed text for the calendar tests (the library's unit tests compile the
//!   same file).
//! - `rmcp`: small adapters for tests that drive the hub with the rmcp SDK.
//! - `stand`: a loopback HTTP stand-in for the services the network built-ins call (the
//!   library's unit tests compile the same file).
//! - `listening`: server processes on a loopback port (remote servers for the hub).
//! - `peers`: the real community servers and clients from `.ci/peers.sh`.

mod catalog;
mod client;
mod git;
#[path = "../../fixtures/host_pid.rs"]
mod host_pid;
mod hub;
mod ics;
mod listening;
mod peers;
mod process;
pub mod rmcp;
mod scratch;
mod stand;

pub use catalog::{
    LOG_LEVELS, error_code, is_error, names, ready, ready_polling, send_call, send_request, text,
    wait_for_tool, wait_for_tools,
};
pub use client::Client;
pub use git::{bare_git, synced_vault};
pub use hub::{
    Hub, collect_lines, openpact_for, serve, serve_config, serve_fixtures, serve_ready, serve_with,
    spawn_piped,
};
pub use ics::{ics, stamp};
pub use listening::{Listening, everything_listening, free_port};
pub use peers::{Peers, assert_lifecycle, sent_methods};
pub use process::{Ran, StderrLog, fixture_over_http, run_in, server_pids, spawn_direct};
pub use scratch::Scratch;
pub use stand::{Reply, Seen, Stand, json_reply, reply};

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const OPENPACT: &str = env!("CARGO_BIN_EXE_openpact");
pub const FIXTURE: &str = env!("CARGO_BIN_EXE_openpact-fixture");
/// Generous: CI machines are slow and busy; tests that measure speed say so themselves.
pub const WAIT: Duration = Duration::from_secs(30);

/// A stand-in for a package runner (`npx`, `uvx`) in a scratch `bin`: whatever package it is
/// asked for, it runs the hostile fixture, so a config can launch a known package offline.
pub fn runner_stand_in(sc: &Scratch, name: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let bin = sc.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\nexec {FIXTURE} --hostile\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    s(&path).to_string()
}

/// The address this machine sends from on its default route (no packet is sent), or
/// loopback when it has none.
pub fn non_loopback_address() -> std::net::IpAddr {
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|u| u.connect("198.51.100.1:9").and_then(|()| u.local_addr()))
        .map(|a| a.ip())
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))
}

/// Answers the hub's request `req` (an `elicitation/create`, say) with `result`.
pub async fn answer(c: &mut Client, req: &Value, result: Value) {
    c.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": result}))
        .await;
}

/// An elicitation result accepting a permission question with `decision` (`once`,
/// `always`, `deny`).
pub fn accept(decision: &str) -> Value {
    json!({"action": "accept", "content": {"decision": decision}})
}

/// A fixture server entry for `mcpServers`, with extra flags.
pub fn fixture(args: &[&str]) -> Value {
    json!({ "command": FIXTURE, "args": args })
}

/// The state dir the harness gives the hub of `config`: `state` beside it.
pub fn state_dir(config: &Path) -> PathBuf {
    config.parent().unwrap().join("state")
}

/// A path as a command-line argument (scratch paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("scratch paths are UTF-8")
}

/// Whether a process with this pid exists (zombies count as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}
