//! What the wrapper process receives and does: the rules for one server (paths it may read
//! and write, places carved out of them, the network it may use), how broad grants are cut
//! around the carved places, and the wrapper's entry (`openpact-sandbox`, or the hidden
//! `openpact __sandbox`) that confines itself and then `exec`s the server, so every
//! descendant inherits the confinement. It names no module of the library but the seam, so
//! the small executable can be built from it alone.

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The wrapper's exit status when it could not confine or start the server.
pub const EXIT_CONFINE: u8 = 126;
/// How deep a grant is cut into subdirectories to leave a carved place out (symlink loops
/// and deep trees stop here; what lies deeper is simply not granted).
const MAX_DEPTH: usize = 12;

/// One server's rules, as the hub hands them to the wrapper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confinement {
    /// Readable (and executable) trees.
    pub read: Vec<PathBuf>,
    /// Readable and writable trees.
    pub write: Vec<PathBuf>,
    /// Places cut out of any grant that contains them.
    pub carve: Vec<PathBuf>,
    pub network: NetRule,
    pub unix: UnixRule,
    /// Runs the server in PID and mount namespaces of its own with a fresh `/proc`, so that
    /// it sees no other process (see `pidns`).
    pub pid_namespace: bool,
}

/// Which Unix socket files it may connect to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnixRule {
    /// Any (a grant this kernel cannot limit to its path).
    Open,
    /// Those beneath the write grants and these (Landlock ABI 9).
    Landlock(Vec<PathBuf>),
    /// None: `socket(AF_UNIX)` is refused, socket pairs still work.
    Seccomp,
}

/// What the network may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetRule {
    /// Anything.
    Open,
    /// No TCP, UDP, raw or netlink socket at all (local sockets only).
    Closed,
    /// TCP only to this port (the egress proxy on loopback).
    Proxy(u16),
}

/// Why the wrapper could not confine the server.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("{0}")]
    Unsupported(String),
    #[error("the kernel refused the sandbox rules: {0}")]
    Kernel(String),
}

/// The rules with each grant cut around the carved places it contains: the paths to hand
/// the kernel, readable ones and writable ones.
pub fn expand(c: &Confinement) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let cut = |roots: &[PathBuf]| {
        let mut out = Vec::new();
        for root in roots {
            let root = root.canonicalize().unwrap_or_else(|_| root.clone());
            if root.exists() {
                cut_around(&root, &c.carve, 0, &mut out);
            }
        }
        out
    };
    (cut(&c.read), cut(&c.write))
}

fn cut_around(dir: &Path, carve: &[PathBuf], depth: usize, out: &mut Vec<PathBuf>) {
    // Only the places below `dir` cut it: a grant may itself lie inside a carved place (a
    // server's own folder in /tmp), and is then granted as given.
    let below: Vec<&PathBuf> = carve
        .iter()
        .filter(|d| d.starts_with(dir) && d.as_path() != dir)
        .collect();
    if below.is_empty() {
        out.push(dir.to_path_buf());
        return;
    }
    if depth >= MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if below.iter().any(|d| path.starts_with(d)) {
            continue;
        }
        // `dir` is a real path, so only a symlink's path differs from what it names. A link is
        // granted as what it points to, and never into any carved place.
        let real = if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            match path.canonicalize() {
                Ok(real) if !carve.iter().any(|d| real.starts_with(d)) => real,
                _ => continue,
            }
        } else {
            path
        };
        cut_around(&real, carve, depth + 1, out);
    }
}

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
    super::platform().confine(&rules).map_err(|e| {
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
use super::pidns as namespaces;

/// Replaces this process with `program`, which so inherits the confinement; returns only the
/// error when it could not. Unix only: Windows has no `exec` (a port would spawn, wait and
/// exit with the child's code, once it has a sandbox; see src/platform/mod.rs).
#[cfg(unix)]
fn exec(mut server: std::process::Command) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    server.exec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_cut_around_carved_places_and_links_into_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in [
            "home/.ssh",
            "home/code/deep",
            "home/.config/gcloud",
            "home/.config/app",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::os::unix::fs::symlink(root.join("home/.ssh"), root.join("home/code/keys")).unwrap();
        let c = Confinement {
            read: vec![root.join("home")],
            write: vec![root.join("home/code")],
            carve: vec![root.join("home/.ssh"), root.join("home/.config/gcloud")],
            network: NetRule::Closed,
            unix: UnixRule::Seccomp,
            pid_namespace: false,
        };
        let (mut read, write) = expand(&c);
        read.sort();
        assert_eq!(
            read,
            [root.join("home/.config/app"), root.join("home/code")],
        );
        // A link inside a grant does not carry it: the kernel checks the real path, and
        // `home/.ssh` lies beneath no granted tree.
        assert_eq!(write, [root.join("home/code")]);

        // A grant inside a carved place (a server's folder in /tmp) that holds a carved place
        // of its own (the hub's state dir) is cut around that one only.
        std::fs::create_dir_all(root.join("tmp/work/state")).unwrap();
        std::fs::write(root.join("tmp/work/server"), "#!/bin/sh\n").unwrap();
        let c = Confinement {
            read: vec![root.join("tmp/work")],
            write: Vec::new(),
            carve: vec![root.join("tmp"), root.join("tmp/work/state")],
            network: NetRule::Open,
            unix: UnixRule::Open,
            pid_namespace: false,
        };
        assert_eq!(expand(&c).0, [root.join("tmp/work/server")]);
    }
}
