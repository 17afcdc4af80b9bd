//! The real community servers and clients installed by `.ci/peers.sh`; tests that need them
//! skip (or, with `OPENPACT_REQUIRE_PEERS=1`, fail) when they are missing.

use super::s;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Real community servers installed by `.ci/peers.sh` (see `target/peers/peers.json`).
pub struct Peers {
    pub vars: serde_json::Map<String, Value>,
}

impl Peers {
    /// The peers, or None (with a note) when they are not installed. With
    /// `OPENPACT_REQUIRE_PEERS=1` (as `.ci/run` sets) their absence fails the test instead.
    pub fn get() -> Option<Peers> {
        let path = std::env::var("OPENPACT_PEERS_JSON")
            .ok()
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/peers.json")
            });
        match std::fs::read(&path) {
            Ok(bytes) => Some(Peers {
                vars: serde_json::from_slice(&bytes).unwrap(),
            }),
            Err(e) => {
                if std::env::var("OPENPACT_REQUIRE_PEERS").as_deref() == Ok("1") {
                    panic!(
                        "real peers are required but {} is unreadable ({e}); run `bash .ci/peers.sh`",
                        path.display()
                    );
                }
                eprintln!(
                    "SKIPPED: real peers not installed ({}); run `bash .ci/peers.sh`",
                    path.display()
                );
                None
            }
        }
    }

    /// A `PEER_*` command line split into words.
    pub fn command(&self, name: &str) -> Vec<String> {
        self.vars[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name} missing in peers.json"))
            .split(' ')
            .map(String::from)
            .collect()
    }

    /// Runs the client script `tests/DIR/SCRIPT` with `interpreter` (a `PEER_*` command) and
    /// `args`, within `limit`, stdin closed.
    pub async fn script(
        &self,
        interpreter: &str,
        dir: &str,
        script: &str,
        args: &[&str],
        limit: std::time::Duration,
    ) -> super::Ran {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join(dir)
            .join(script);
        let words = self.command(interpreter);
        let mut cmd = tokio::process::Command::new(&words[0]);
        cmd.args(&words[1..])
            .arg(&path)
            .args(args)
            .stdin(std::process::Stdio::null());
        super::Ran::of(cmd, (script, args), limit).await
    }

    /// A `mcpServers` entry for a peer, with extra args.
    pub fn entry(&self, name: &str, extra: &[&str]) -> Value {
        let mut words = self.command(name);
        let program = words.remove(0);
        words.extend(extra.iter().map(|s| s.to_string()));
        json!({"command": program, "args": words})
    }

    /// The words that run the Python client `script` in `mode` against `hub` (a command
    /// line), with the hub behind `tee`, which records what the client sent in `sent`.
    pub fn python_via_tee(
        &self,
        script: &Path,
        mode: &str,
        sent: &Path,
        hub: &[&str],
    ) -> Vec<String> {
        let shell: Vec<&str> = ["-c", "tee \"$0\" | exec \"$@\"", s(sent)]
            .into_iter()
            .chain(hub.iter().copied())
            .collect();
        let mut w = self.command("PEER_PYTHON");
        w.extend([
            s(script).to_string(),
            mode.to_string(),
            "/bin/sh".into(),
            json!(shell).to_string(),
        ]);
        w
    }
}

/// The methods a client sent, in order, from the log `tee` kept of it.
pub fn sent_methods(sent: &Path) -> Vec<String> {
    std::fs::read_to_string(sent)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|m| m["method"].as_str().map(String::from))
        .collect()
}

/// What a client in `mode` sent: `auto` asks `server/discover` first and, the hub offering
/// 2026-07-28, never sends `initialize`; `handshake` goes straight to `initialize`.
pub fn assert_lifecycle(mode: &str, methods: &[String]) {
    let (first, init) = if mode == "auto" {
        ("server/discover", false)
    } else {
        ("initialize", true)
    };
    assert_eq!(
        methods.first().map(String::as_str),
        Some(first),
        "{mode}: client sent {methods:?}"
    );
    assert_eq!(
        methods.iter().any(|m| m == "initialize"),
        init,
        "{mode}: client sent {methods:?}"
    );
}
