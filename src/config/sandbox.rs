//! The `sandbox` settings as written: a server entry's choice and the hub-wide default
//! (`openpact.sandbox`). What they mean for a process is worked out in `crate::sandbox`.

use super::hosts::HostPattern;
use std::path::PathBuf;

/// A server entry's `sandbox` key.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum SandboxChoice {
    /// No `sandbox` key: the hub's default decides.
    #[default]
    Unset,
    /// `true`: the default profile, whatever the hub's default.
    On,
    /// `false`: unconfined, explicitly.
    Off,
    /// An object: the default profile with these additions.
    Profile(SandboxSpec),
}

/// Additions to the default profile (paths absolute, `~` and variables expanded).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SandboxSpec {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub deny: Vec<PathBuf>,
    /// `unixSockets`: socket files it may connect to.
    pub unix_sockets: Vec<PathBuf>,
    /// `None`: keep what the layer below says.
    pub network: Option<NetworkSpec>,
    /// Names or `*` globs of variables passed through from the hub's environment.
    pub env: Vec<String>,
    /// `"known": false` drops the known-servers table's grants (`None`: the layer below
    /// decides, and by default a known server gets them).
    pub known: Option<bool>,
}

/// `sandbox.network`.
#[derive(Clone, Debug, PartialEq)]
pub enum NetworkSpec {
    /// `true`: any host, directly.
    Any,
    /// `false`: no network at all.
    None,
    /// `{"allow": [...]}`: these hosts (and the package registries), through the egress proxy.
    Allow(Vec<HostPattern>),
}

/// `openpact.sandbox`.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxSettings {
    /// `"default": "on" | "off"`: whether servers without a `sandbox` key are confined.
    pub default_on: bool,
    /// Additions every confined server gets.
    pub profile: SandboxSpec,
    /// Refuse to start a server that cannot be confined here instead of running it
    /// unconfined with a warning.
    pub required: bool,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        SandboxSettings {
            default_on: true,
            profile: SandboxSpec::default(),
            required: false,
        }
    }
}

/// Whether a granted `path` that does not exist is made (0700) before each start: a folder
/// below the home folder (servers keep their state in `~/.something`, which a first run
/// would otherwise have to create where it may not write). A name with an extension
/// (`~/app.db`, `~/notes.md`) is a file to be: made as a folder it would break the server,
/// and made as an empty file it could too (an empty JSON file does not parse), so it is not
/// made.
pub fn made_at_start(path: &std::path::Path, home: Option<&std::path::Path>) -> bool {
    home.is_some_and(|h| {
        path.starts_with(h)
            && path != h
            && path.extension().is_none()
            && !path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
    })
}

/// What `openpact sandbox allow` adds to a server's `sandbox`, and what a refusal names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// `filesystem.write`
    Write,
    /// `filesystem.read`
    Read,
    /// `network.allow`
    Net,
    /// `unixSockets`
    Socket,
}

impl Grant {
    pub const ALL: [Grant; 4] = [Grant::Write, Grant::Read, Grant::Net, Grant::Socket];

    /// The word the command takes (and prints).
    pub fn word(self) -> &'static str {
        match self {
            Grant::Write => "write",
            Grant::Read => "read",
            Grant::Net => "net",
            Grant::Socket => "socket",
        }
    }

    /// The word, or one of the names people reach for first.
    pub fn parse(word: &str) -> Option<Grant> {
        match word.to_ascii_lowercase().as_str() {
            "write" | "w" | "rw" => Some(Grant::Write),
            "read" | "r" | "ro" => Some(Grant::Read),
            "net" | "network" | "host" | "hosts" => Some(Grant::Net),
            "socket" | "sockets" | "unix" | "unixsocket" | "unixsockets" => Some(Grant::Socket),
            _ => None,
        }
    }

    /// Its list inside the `sandbox` object.
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            Grant::Write => &["filesystem", "write"],
            Grant::Read => &["filesystem", "read"],
            Grant::Net => &["network", "allow"],
            Grant::Socket => &["unixSockets"],
        }
    }

    /// Whether its values are paths (`~` and relative ones resolved).
    pub fn is_path(self) -> bool {
        self != Grant::Net
    }
}
