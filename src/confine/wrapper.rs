//! The wrapper's entry (`openpact-sandbox`, or the hidden `openpact __sandbox`): it reads
//! one server's rules, confines itself and then `exec`s the server, so every descendant
//! inherits the confinement; or, when the server gets a PID namespace, runs itself again as
//! that namespace's first process.

use crate::rules::Confinement;
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

/// The wrapper's exit status when it could not confine or start the server.
pub const EXIT_CONFINE: u8 = 126;

/// The wrapper, given `RULES -- PROGRAM ARGS…`: returns only when the server could not be
/// started, or, when the server runs in a PID namespace, with the server's exit code.
pub fn wrapper_main(args: Vec<OsString>) -> std::process::ExitCode {
    let code = wrap(args).unwrap_or_else(|message| {
        let _ = writeln!(std::io::stderr(), "openpact sandbox: {message}");
        EXIT_CONFINE
    });
    std::process::ExitCode::from(code)
}

/// The wrapper's first argument when it runs again as the first process of the server's PID
/// namespace (`--pid1 RULES -- PROGRAM ARGS…`).
const PID1: &str = "--pid1";
/// `openpact-sandbox --probe-pid-namespace`: exits 0 where a server can get a PID namespace
/// with its own `/proc`, else says why on stderr.
pub const PROBE: &str = "--probe-pid-namespace";
const PROBE_PID1: &str = "--probe-pid1";

fn wrap(args: Vec<OsString>) -> Result<u8, String> {
    // How to run this wrapper again: the same executable with the words before ours
    // (`openpact __sandbox` has one).
    let all: Vec<OsString> = std::env::args_os().skip(1).collect();
    let again = |first: &str, rest: &[OsString]| -> Result<std::process::Command, String> {
        let me = std::env::current_exe().map_err(|e| format!("cannot find itself: {e}"))?;
        let mut cmd = std::process::Command::new(me);
        cmd.args(&all[..all.len().saturating_sub(args.len())])
            .arg(first)
            .args(rest);
        Ok(cmd)
    };
    let first = args.first().and_then(|a| a.to_str());
    if first == Some(PROBE) {
        return namespaces::outside(again(PROBE_PID1, &[])?);
    }
    if first == Some(PROBE_PID1) {
        return namespaces::fresh_proc().map(|()| 0);
    }
    let pid1 = first == Some(PID1);
    let mut rest = args[usize::from(pid1)..].iter();
    let rules = rest.next().ok_or("missing rules")?;
    let rules: Confinement = serde_json::from_str(&rules.to_string_lossy())
        .map_err(|e| format!("unreadable rules: {e}"))?;
    if rest.next().map(OsString::as_os_str) != Some("--".as_ref()) {
        return Err("expected `--` before the program".into());
    }
    let program = rest.next().ok_or("missing program")?;
    if rules.pid_namespace && !pid1 {
        return namespaces::outside(again(PID1, &args)?).map_err(|e| {
            format!(
                "could not give {} a PID namespace of its own: {e}; the server was not started",
                Path::new(program).display()
            )
        });
    }
    if pid1 {
        namespaces::fresh_proc()?;
    }
    crate::platform().confine(&rules).map_err(|e| {
        format!(
            "could not confine {}: {e}; the server was not started (set \"sandbox\": false on this server to run it unconfined)",
            Path::new(program).display()
        )
    })?;
    let mut server = std::process::Command::new(program);
    server.args(rest);
    let started = if pid1 {
        // The first process of a PID namespace adopts every orphan, and its end ends them
        // all: so it stays, as a small init, while the server runs.
        namespaces::supervise(server, true)
    } else {
        Err(exec(server))
    };
    started.map_err(|e| format!("could not start {}: {e}", Path::new(program).display()))
}

/// Where there are no namespaces to enter, the hub never asks for them.
#[cfg(not(target_os = "linux"))]
mod namespaces {
    const NONE: &str = "PID namespaces are Linux's";
    pub fn outside(_: std::process::Command) -> Result<u8, String> {
        Err(NONE.into())
    }
    pub fn fresh_proc() -> Result<(), String> {
        Err(NONE.into())
    }
    pub fn supervise(_: std::process::Command, _: bool) -> Result<u8, std::io::Error> {
        Err(std::io::Error::other(NONE))
    }
}
#[cfg(target_os = "linux")]
use crate::pidns as namespaces;

/// Replaces this process with `program`, which so inherits the confinement; returns only the
/// error when it could not. Unix only: Windows has no `exec` (a port would spawn, wait and
/// exit with the child's code, once it has a sandbox; see src/platform/mod.rs).
#[cfg(unix)]
fn exec(mut server: std::process::Command) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    server.exec()
}
