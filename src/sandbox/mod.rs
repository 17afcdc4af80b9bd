//! Containment of stdio servers: each server's effective profile (files, network, environment),
//! its enforcement through a platform seam, and the egress proxy that lets a confined server
//! reach the hosts its profile allows.
//!
//! The hub works out a [`Plan`] per server from its config (`plan`); at each start it turns
//! the plan into a [`Launch`]: the environment, the private temp dir, and — when confined — the
//! command line of the wrapper (`openpact __sandbox RULES -- PROGRAM ARGS…`, see [`confine`])
//! that confines itself and `exec`s the server.
//!
//! Here: the plan's types and the machine's mechanisms. `plan` works a plan out, `recipe`
//! makes its environment, `launch` starts it, `describe` shows it.

pub mod env;
pub mod known;
pub mod places;
pub mod proxy;
pub mod refusal;
pub mod runtimes;

/// The wrapper's rules and entry, and the platform seam: the `openpact-confine` crate
/// (src/confine), which the small `openpact-sandbox` executable is built from.
pub use openpact_confine as confine;
pub use openpact_confine::{Sandbox, Support, platform};

use crate::config::hosts::HostPattern;
use crate::config::sandbox::SandboxSettings;
use confine::{Confinement, NetRule, UnixRule};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod describe;
mod launch;
mod plan;
mod recipe;

pub use describe::describe;
pub use launch::{Launch, remove_temp_root, sweep_stale_temp};
pub use plan::plan;

/// The hidden subcommand: `openpact __sandbox RULES -- PROGRAM ARGS…`.
pub const SUBCOMMAND: &str = "__sandbox";

/// Runs the wrapper when `openpact`'s command line asks for it: `Some(exit code)` if it did
/// (it only returns when the server could not be started), `None` for any other command.
pub fn run_if_asked() -> Option<std::process::ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(SUBCOMMAND.as_ref()) {
        return None;
    }
    Some(confine::wrapper_main(args.collect()))
}

/// The wrapper's own small executable, beside `openpact`'s: starting it costs a fraction of
/// starting the whole `openpact` binary (whose relocations alone fault in megabytes), which
/// fifty servers would pay fifty times.
pub const WRAPPER_BIN: &str = "openpact-sandbox";

/// How to run the wrapper: `openpact-sandbox` beside this executable, else this executable
/// with the hidden subcommand.
pub fn wrapper_command() -> std::io::Result<(PathBuf, Vec<String>)> {
    let me = std::env::current_exe()?;
    if let Some(small) = me.parent().map(|d| d.join(WRAPPER_BIN))
        && small.is_file()
    {
        return Ok((small, Vec::new()));
    }
    Ok((me, vec![SUBCOMMAND.to_string()]))
}

/// This machine's support, probed once.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(|| platform().support())
}

/// What this kernel offers to close the ways out beyond files and the network.
#[derive(Debug, Clone, PartialEq)]
pub struct Mechanisms {
    /// Landlock can limit connecting to Unix socket files to granted paths (ABI 9).
    pub unix_paths: bool,
    /// A server can have a PID namespace with its own `/proc`; else why not.
    pub pid_namespace: Result<(), String>,
}

/// The test switch that makes this machine look as if it had no unprivileged user namespaces.
pub const SIMULATE_NO_USERNS: &str = "OPENPACT_SANDBOX_SIMULATE_NO_USERNS";

/// This machine's mechanisms, probed once: the PID namespace by running the wrapper (the hub
/// itself has threads, and the kernel gives a threaded process no new user namespace).
pub fn mechanisms() -> &'static Mechanisms {
    static MECHANISMS: OnceLock<Mechanisms> = OnceLock::new();
    MECHANISMS.get_or_init(|| Mechanisms {
        unix_paths: platform().limits_unix_sockets(),
        pid_namespace: probe_pid_namespace(),
    })
}

fn probe_pid_namespace() -> Result<(), String> {
    if std::env::var_os(SIMULATE_NO_USERNS).is_some() {
        return Err(format!(
            "unprivileged user namespaces are unavailable (simulated by {SIMULATE_NO_USERNS})"
        ));
    }
    let (wrapper, mut args) = wrapper_command().map_err(|e| e.to_string())?;
    args.push(confine::PROBE.to_string());
    let out = std::process::Command::new(wrapper)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("could not run the sandbox wrapper: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr);
    let why = why.trim().trim_start_matches("openpact sandbox: ");
    Err(if why.is_empty() {
        format!("the probe failed ({})", out.status)
    } else {
        why.to_string()
    })
}

/// The package registries `npx` and `uvx` fetch from: what a server behind the proxy may
/// always reach, so that launching it keeps working.
pub const REGISTRIES: &[&str] = &[
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "pypi.org",
    "files.pythonhosted.org",
];

/// How one server runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Mode {
    /// Confined by the kernel.
    Enforced,
    /// Meant to be confined, but this machine cannot; the environment is still filtered.
    Unconfined { reason: String },
    /// Meant to be confined, `required` is set, and this machine cannot: not started.
    Refused { reason: String },
    /// `sandbox: false` or `openpact.sandbox.default: "off"`: as before, the whole environment.
    Off { reason: String },
    /// Launched through a container runtime, which contains it.
    Runtime { runtime: String },
    /// A remote server: not a process of ours.
    Remote,
}

/// Where a confined server's network goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Network {
    Any,
    None,
    /// Through the egress proxy, to these hosts only.
    Proxy(Vec<HostPattern>),
}

/// What a server may touch.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Readable trees (before the denied places are cut out).
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// Never readable: credential places and the profile's `deny`.
    pub deny: Vec<PathBuf>,
    /// Cut out of broad grants but grantable inside: temp roots, the user's runtime dir.
    pub private: Vec<PathBuf>,
    pub network: Network,
    /// The names of the variables the server gets.
    pub env: Vec<String>,
    /// The server's own temp dir (its `TMPDIR`).
    pub tmpdir: PathBuf,
    /// The server's own data folder, kept across restarts (its `OPENPACT_DATA_DIR`).
    pub data: PathBuf,
    /// Granted folders under the home folder, made (0700) at each start when missing.
    pub create: Vec<PathBuf>,
    /// Socket files granted (`unixSockets`).
    pub unix_sockets: Vec<PathBuf>,
    /// How its Unix sockets are limited.
    pub unix: UnixRule,
    /// Its own PID namespace and `/proc`, or why it shares the machine's.
    pub pid_namespace: Result<(), String>,
    /// The server's own package caches, kept across restarts (npm, uv, pip, … are sent here
    /// through their variables).
    pub caches: PathBuf,
    /// The shared package caches of the home folder: read-only to this server.
    pub shared_caches: Vec<PathBuf>,
    /// What will not work as the user expects, and the fix (a Node that ignores the proxy).
    pub warnings: Vec<String>,
}

/// One server's sandbox, worked out from the config.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub mode: Mode,
    /// For `Enforced`, `Unconfined` and `Refused`: what the server may (or would) touch.
    pub profile: Option<Profile>,
    env: Option<recipe::EnvRecipe>,
    /// The known-servers entry whose grants it has.
    pub known: Option<known::Known>,
}

/// What the hub knows when it plans a server's sandbox.
pub struct Context<'a> {
    pub settings: &'a SandboxSettings,
    /// The hub's environment.
    pub hub_env: &'a [(String, String)],
    pub support: &'a Support,
    pub mechanisms: &'a Mechanisms,
    /// The hub's working directory (the server's, when its entry sets none).
    pub cwd: &'a Path,
    /// openpact's own state, config and data dirs: never readable by a server.
    pub own_dirs: &'a [PathBuf],
    /// Where private temp dirs go (one per server inside).
    pub temp_root: &'a Path,
    /// Where the servers' private data folders go (one per server inside).
    pub data_root: &'a Path,
    /// Where the servers' private package caches go (one per server inside).
    pub cache_root: &'a Path,
}

impl Context<'_> {
    fn var(&self, name: &str) -> Option<&str> {
        self.hub_env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// The private temp dirs of this hub: `TEMP/openpact-UID/PID`.
pub fn temp_root() -> PathBuf {
    std::env::temp_dir()
        .join(format!("openpact-{}", crate::platform::uid()))
        .join(std::process::id().to_string())
}

/// The variable that names a confined server's own data folder.
pub const DATA_VAR: &str = "OPENPACT_DATA_DIR";

/// The servers' private data folders: `DATA/servers` in openpact's data dir.
pub fn data_root(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    crate::config::data_dir(env).join("servers")
}

/// A server's name as one folder name: a name may hold `/` or be `..`, which must not lead
/// its private folders out of their root.
fn folder_name(name: &str) -> String {
    let escaped = name.replace('%', "%25").replace('/', "%2F");
    match escaped.as_str() {
        "." | ".." => escaped.replace('.', "%2E"),
        _ => escaped,
    }
}

/// The hub's environment as text pairs (variables that are not UTF-8 are not passed).
pub fn hub_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// The plan of each of `config`'s servers, for a hub whose state dir is `state_dir`.
pub fn plans(config: &crate::config::Config, state_dir: &Path) -> Vec<Plan> {
    let hub_env = hub_env();
    let lookup = |k: &str| std::env::var(k).ok();
    let data_root = data_root(&lookup);
    let cache_root = crate::config::cache_dir(&lookup).join("servers");
    let own_dirs: Vec<PathBuf> = [
        Some(state_dir.to_path_buf()),
        crate::config::user_config_file(&lookup).and_then(|f| f.parent().map(Path::to_path_buf)),
        // The servers' data folders lie inside: each is granted to its own server only.
        Some(crate::config::data_dir(&lookup)),
        // Likewise the servers' private package caches.
        Some(crate::config::cache_dir(&lookup)),
    ]
    .into_iter()
    .flatten()
    .collect();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let temp_root = temp_root();
    // Probed only where it matters: `config check` on a machine without Landlock runs no
    // wrapper.
    let unprobed = Mechanisms {
        unix_paths: false,
        pid_namespace: Err("not probed".into()),
    };
    let cx = Context {
        settings: &config.hub.sandbox,
        hub_env: &hub_env,
        support: support(),
        mechanisms: if *support() == Support::Full {
            mechanisms()
        } else {
            &unprobed
        },
        cwd: &cwd,
        own_dirs: &own_dirs,
        temp_root: &temp_root,
        data_root: &data_root,
        cache_root: &cache_root,
    };
    config.servers.iter().map(|s| plan(s, &cx)).collect()
}

impl Plan {
    /// The hosts of a server whose network goes through the egress proxy.
    pub fn proxied(&self) -> Option<&[HostPattern]> {
        match (&self.mode, &self.profile) {
            (Mode::Enforced | Mode::Unconfined { .. }, Some(p)) => match &p.network {
                Network::Proxy(allow) => Some(allow),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether the kernel confines this server.
    pub fn enforced(&self) -> bool {
        self.mode == Mode::Enforced
    }
}

impl Profile {
    /// The rules the wrapper applies.
    pub fn confinement(&self, proxy_port: Option<u16>) -> Confinement {
        let mut carve = Vec::new();
        for p in self.deny.iter().chain(&self.private) {
            carve.push(p.clone());
            if let Ok(real) = p.canonicalize()
                && &real != p
            {
                carve.push(real);
            }
        }
        Confinement {
            read: self.read.clone(),
            write: self.write.clone(),
            carve,
            network: match (&self.network, proxy_port) {
                (Network::Any, _) => NetRule::Open,
                (Network::Proxy(_), Some(port)) => NetRule::Proxy(port),
                _ => NetRule::Closed,
            },
            unix: self.unix.clone(),
            pid_namespace: self.pid_namespace.is_ok(),
        }
    }
}
