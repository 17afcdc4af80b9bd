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
/// started.
pub fn wrapper_main(args: Vec<OsString>) -> std::process::ExitCode {
    let code = match wrap(args) {
        Ok(never) => match never {},
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "openpact sandbox: {message}");
            EXIT_CONFINE
        }
    };
    std::process::ExitCode::from(code)
}

fn wrap(args: Vec<OsString>) -> Result<std::convert::Infallible, String> {
    let mut args = args.into_iter();
    let rules = args.next().ok_or("missing rules")?;
    let rules: Confinement = serde_json::from_str(&rules.to_string_lossy())
        .map_err(|e| format!("unreadable rules: {e}"))?;
    if args.next().as_deref() != Some("--".as_ref()) {
        return Err("expected `--` before the program".into());
    }
    let program = args.next().ok_or("missing program")?;
    super::platform().confine(&rules).map_err(|e| {
        format!(
            "could not confine {}: {e}; the server was not started (set \"sandbox\": false on this server to run it unconfined)",
            Path::new(&program).display()
        )
    })?;
    let err = exec(&program, args);
    Err(format!(
        "could not start {}: {err}",
        Path::new(&program).display()
    ))
}

/// Replaces this process with `program`, which so inherits the confinement; returns only the
/// error when it could not. Unix only: Windows has no `exec` (a port would spawn, wait and
/// exit with the child's code, once it has a sandbox; see src/platform/mod.rs).
#[cfg(unix)]
fn exec(program: &OsString, args: impl Iterator<Item = OsString>) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(program).args(args).exec()
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
        };
        assert_eq!(expand(&c).0, [root.join("tmp/work/server")]);
    }
}
