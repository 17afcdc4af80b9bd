//! The rules for one server, as the hub hands them to the wrapper: the paths it may read and
//! write, places carved out of them, the network and Unix sockets it may use; and how broad
//! grants are cut around the carved places before the kernel gets them.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
