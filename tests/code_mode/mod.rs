//! Code mode end to end: `run_code` programs against `openpact serve` and the fixture, real
//! processes over real pipes. This module holds what the topics share: the settings that turn
//! code mode on, running a program, and finding the worker processes a hub started.
//!
//! - `hostile`: programs that loop, recurse, allocate, call without end or reach for files
//!   and sockets end with an error naming the limit, while another client is served, and
//!   leave no worker behind; the worker is confined while it runs.
//! - `pipeline`: every call a program makes passes the client's own policy: permissions
//!   (deny, ask through elicitation), its profile, rate limits, the cache, redaction and the
//!   audit log linking the calls to their program.
//! - `progress`: one progress notification per inner call; cancelling `run_code` kills the
//!   worker and cancels the call in flight upstream.
//! - `flows`: the data-flow guard inside one program: a private, an untrusted, then an egress
//!   call is asked about or denied; not with the guard off.

use crate::support::{Client, WAIT, alive, is_error, text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

mod flows;
mod hostile;
mod pipeline;
mod progress;

/// `openpact` settings with code mode on under these `codeMode` settings (merged over
/// `mode: on`), and `fx:echo` still listed, so `ready`/`init` can see the fixture is up.
pub(crate) fn code_on(code: Value) -> Value {
    let mut mode = json!({"mode": "on"});
    if let (Some(m), Some(extra)) = (mode.as_object_mut(), code.as_object()) {
        m.extend(extra.clone());
    }
    json!({
        "codeMode": mode,
        "toolSearch": {"mode": "off", "alwaysLoad": ["fx:echo"]},
    })
}

/// `settings` with code mode on (as [`code_on`] with no extra limits) added.
pub(crate) fn and_code_on(mut settings: Value) -> Value {
    if let (Some(s), Some(on)) = (settings.as_object_mut(), code_on(json!({})).as_object()) {
        s.extend(on.clone());
    }
    settings
}

/// The arguments of `run_code` for `code` with a `timeout` in seconds.
pub(crate) fn program(code: &str, timeout: Option<u64>) -> Value {
    match timeout {
        Some(t) => json!({"code": code, "timeout": t}),
        None => json!({"code": code}),
    }
}

/// Runs `code` and returns its response.
pub(crate) async fn run(c: &mut Client, code: &str) -> Value {
    c.call("run_code", program(code, None)).await
}

/// Runs `code`, which must succeed; the text the model reads.
pub(crate) async fn run_ok(c: &mut Client, code: &str) -> String {
    let r = run(c, code).await;
    assert!(!is_error(&r), "the program failed: {r}");
    text(&r)
}

/// Runs `code`, which must fail; the text the model reads.
pub(crate) async fn run_failing(c: &mut Client, code: &str) -> String {
    let r = run(c, code).await;
    assert!(is_error(&r), "the program did not fail: {r}");
    let t = text(&r);
    assert!(t.contains("The program failed: "), "{t}");
    t
}

/// The code-mode workers `hub` started and that still run: its children (the sandbox
/// wrapper execs the worker) whose command line is `openpact __code-worker …`. Other tests'
/// hubs run at the same time, so a bare `pgrep -f __code-worker` would see theirs.
pub(crate) fn workers(hub: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the command's `(name)`: state, then the parent's pid.
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(hub)
                && alive(pid)
                && String::from_utf8_lossy(&cmdline).contains("__code-worker")
        })
        .collect()
}

/// Waits (up to `limit`; zero: checks once) until `hub` has no worker left; panics naming
/// the ones still there.
pub(crate) async fn no_workers_within(hub: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let left = workers(hub);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "workers {left:?} of hub {hub} outlived their program by {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `hub` runs a worker; its pid.
pub(crate) async fn a_worker(hub: u32) -> u32 {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(&pid) = workers(hub).first() {
            return pid;
        }
        assert!(Instant::now() < deadline, "hub {hub} started no worker");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
