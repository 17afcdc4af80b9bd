//! Containment of stdio servers: each server's effective profile (files, network, environment),
//! its enforcement through a platform seam, and the egress proxy that lets a confined server
//! reach the hosts its profile allows.
//!
//! The hub works out a [`Plan`] per server from its config (`plan`); at each start it turns
//! the plan into a [`Launch`]: the environment, the private temp dir, and — when confined — the
//! command line of the wrapper (`openpact __sandbox RULES -- PROGRAM ARGS…`, see [`confine`])
//! that confines itself and `exec`s the server.

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
use crate::config::sandbox::{NetworkSpec, SandboxChoice, SandboxSettings, SandboxSpec};
use crate::config::{ServerConfig, Transport};
use confine::{Confinement, NetRule, UnixRule};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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
    env: Option<EnvRecipe>,
    /// The known-servers entry whose grants it has.
    pub known: Option<known::Known>,
}

/// How to make the server's environment at each start.
#[derive(Debug, Clone, PartialEq)]
struct EnvRecipe {
    entry: Vec<(String, String)>,
    names: Vec<String>,
    container: bool,
    /// Launched by pnpm (`pnpm dlx`, `pnpx`): its cache variables are npm's setting names,
    /// which npm itself warns about (and will refuse), so only a pnpm launch gets them.
    pnpm: bool,
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

/// Works out how `server` runs.
pub fn plan(server: &ServerConfig, cx: &Context) -> Plan {
    let (command, program, args, entry_env, cwd) = match &server.transport {
        Transport::Stdio {
            command,
            program,
            args,
            env,
            cwd,
            ..
        } => (command, program, args, env, cwd),
        Transport::Http { .. } => {
            return Plan {
                mode: Mode::Remote,
                profile: None,
                env: None,
                known: None,
            };
        }
    };
    let off = |reason: &str| Plan {
        mode: Mode::Off {
            reason: reason.to_string(),
        },
        profile: None,
        env: None,
        known: None,
    };
    let spec = match &server.sandbox {
        SandboxChoice::Off => return off("\"sandbox\": false on this server"),
        SandboxChoice::Unset if !cx.settings.default_on => {
            return off("openpact.sandbox.default is \"off\"");
        }
        SandboxChoice::Unset | SandboxChoice::On => SandboxSpec::default(),
        SandboxChoice::Profile(spec) => spec.clone(),
    };
    // A profile's `"known": false` drops the table's grants; the entry's word wins.
    let known = (spec.known.or(cx.settings.profile.known) != Some(false))
        .then(|| known::find(command, program, args))
        .flatten();
    let entry_known = known.as_ref().map(|k| k.entry);
    let mut names: Vec<String> = cx.settings.profile.env.clone();
    // The table passes a known server's settings, never a secret: a token is the user's to
    // give (the entry's `env`, or its exact name in `sandbox.env`), as for any server.
    names.extend(
        entry_known
            .iter()
            .flat_map(|k| k.env.iter())
            .filter(|n| !env::looks_secret(n))
            .cloned(),
    );
    names.extend(spec.env.iter().cloned());
    if let Some(runtime) = container_runtime(command, program, args) {
        // The runtime decides files and network: of a known image, only its variables apply.
        names.extend(container_env_names(args));
        dedup(&mut names);
        return Plan {
            mode: Mode::Runtime { runtime },
            profile: None,
            env: Some(EnvRecipe {
                entry: entry_env.clone(),
                names,
                container: true,
                pnpm: false,
            }),
            known,
        };
    }
    let home = cx.var("HOME").map(PathBuf::from);
    let home = home.as_deref();
    let tmpdir = cx.temp_root.join(folder_name(&server.name));
    let data = cx.data_root.join(folder_name(&server.name));
    let caches = cx.cache_root.join(folder_name(&server.name));
    let network = network(&cx.settings.profile, &spec, known.as_ref());
    let cwd = cwd.clone().unwrap_or_else(|| cx.cwd.to_path_buf());

    // The hub profile's paths, then the entry's.
    let both = |pick: fn(&SandboxSpec) -> &Vec<PathBuf>| -> Vec<PathBuf> {
        pick(&cx.settings.profile)
            .iter()
            .chain(pick(&spec))
            .cloned()
            .collect()
    };
    let user_deny = both(|s| &s.deny);
    let mut explicit_read = both(|s| &s.read);
    let mut explicit_write = both(|s| &s.write);
    let unix_sockets = both(|s| &s.unix_sockets);
    // A granted socket the kernel cannot limit to its path leaves them all open.
    let unix = if cx.mechanisms.unix_paths {
        UnixRule::Landlock(unix_sockets.clone())
    } else if unix_sockets.is_empty() {
        UnixRule::Seccomp
    } else {
        UnixRule::Open
    };
    // Only what it writes: what it only reads is the user's to create.
    let mut create: Vec<PathBuf> = explicit_write
        .iter()
        .filter(|p| places::made_at_start(p, home))
        .cloned()
        .collect();
    // A known server's grants, as if written in its entry; only its folders are made (what it
    // reads, `~/.kube/config` say, is the user's to create).
    if let Some(k) = entry_known {
        let write = known::paths(&k.write, home);
        create.extend(
            write
                .iter()
                .filter(|p| places::made_at_start(p, home))
                .cloned(),
        );
        explicit_read.extend(known::paths(&k.read, home));
        explicit_write.extend(write);
    }
    let mut deny = places::credentials(home);
    deny.extend(cx.own_dirs.iter().cloned());
    deny.extend(user_deny.iter().cloned());
    let private = places::private(cx.var("XDG_RUNTIME_DIR").map(Path::new));

    // What the server is obviously meant to work on: its working directory and the folders
    // its arguments and variables name, unless that would be most of the disk, the system's
    // own folders or a credential place.
    let mut obvious: Vec<PathBuf> = vec![cwd.clone()];
    obvious.extend(named_dirs(
        args.iter().chain(entry_env.iter().map(|(_, v)| v)),
        &cwd,
    ));
    let credential = |p: &Path| deny.iter().any(|d| p.starts_with(d));
    obvious.retain(|p| !places::too_broad(p, home) && !credential(p));

    // Its own package caches, not the shared ones: what a confined server writes there
    // (npm's `_npx`, uv's tool environments) is run later by whoever uses that cache.
    let mut write = vec![
        tmpdir.clone(),
        data.clone(),
        caches.clone(),
        PathBuf::from("/dev"),
    ];
    let shared_caches = places::shared_caches(home, cx.var("XDG_CACHE_HOME").map(Path::new));
    let shared = |p: &Path| shared_caches.iter().any(|c| p.starts_with(c));
    obvious.retain(|p| !shared(p));
    write.extend(obvious);
    write.extend(explicit_write);
    let mut read = vec![PathBuf::from("/")];
    // The program's own folder, and the scripts' its arguments name, when they lie in a place
    // cut out of the read grant (a checkout in /tmp, say): the whole folder they were put in
    // there, since a script's packages sit beside it (`node_modules`, a venv), not in its own
    // folder.
    let carved = |p: &Path| private.iter().any(|d| p.starts_with(d));
    // The top-most folder there on the way to `d` that holds neither the home folder nor the
    // hub's temp dirs (a HOME in `/tmp/x/home` must not make `/tmp/x/install` unreadable, nor
    // open `/tmp/x` and the home's temp files with it).
    let package_tree = |d: &Path| {
        let Some(root) = private
            .iter()
            .filter(|root| d.starts_with(root) && d != root.as_path())
            .max_by_key(|root| root.components().count())
        else {
            return d.to_path_buf();
        };
        let mut top = root.clone();
        for part in d.strip_prefix(root).into_iter().flat_map(Path::components) {
            top.push(part);
            if !cx.temp_root.starts_with(&top)
                && !places::too_broad(&top, home)
                && !credential(&top)
            {
                return top;
            }
        }
        d.to_path_buf()
    };
    let named = named_dirs(args.iter(), &cwd);
    read.extend(
        program
            .parent()
            .filter(|d| d.is_absolute())
            .into_iter()
            .chain(named.iter().map(PathBuf::as_path))
            .filter(|d| carved(d) && !credential(d) && !places::too_broad(d, home))
            .map(package_tree),
    );
    // The home folder it runs under, when that lies in a temp root (a scratch HOME): its own
    // files as anywhere else, its credential places and the hub's temp dirs still cut out.
    if let Some(h) = home
        && carved(h)
        && !private.iter().any(|p| p == h)
    {
        read.push(h.to_path_buf());
    }
    read.extend(explicit_read);
    // The profile's own `deny` wins over every grant.
    for list in [&mut read, &mut write] {
        list.retain(|p| !user_deny.iter().any(|d| p.starts_with(d)));
        dedup(list);
    }
    dedup(&mut deny);
    create.retain(|p| read.contains(p) || write.contains(p));
    dedup(&mut create);

    let env_recipe = EnvRecipe {
        entry: entry_env.clone(),
        names,
        container: false,
        pnpm: program
            .file_name()
            .is_some_and(|n| n == "pnpm" || n == "pnpx"),
    };
    // The names the server will get, the proxy's variables included (their value is the
    // proxy's address, known only once it runs).
    let env_names = env_recipe
        .build(
            cx.hub_env,
            &network,
            &Dirs {
                tmpdir: &tmpdir,
                data: &data,
                caches: &caches,
            },
            Some("http://127.0.0.1"),
        )
        .vars
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    let path_var = entry_env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .or_else(|| cx.var("PATH"));
    let warnings: Vec<String> = match &network {
        Network::Proxy(_) => runtimes::node_warning(program, path_var)
            .into_iter()
            .collect(),
        _ => Vec::new(),
    };
    let profile = Profile {
        read,
        write,
        deny,
        private,
        network,
        env: env_names,
        tmpdir,
        data,
        create,
        unix_sockets,
        unix,
        pid_namespace: cx.mechanisms.pid_namespace.clone(),
        caches,
        shared_caches,
        warnings,
    };
    let mode = match cx.support {
        Support::Full => Mode::Enforced,
        Support::Partial(why) | Support::Missing(why) if cx.settings.required => Mode::Refused {
            reason: format!(
                "{why}; openpact.sandbox.required is true, so this server is not started (set \"sandbox\": false on it to run it unconfined)"
            ),
        },
        Support::Partial(why) | Support::Missing(why) => Mode::Unconfined {
            reason: format!(
                "{why}; running unconfined (environment filtered only); set openpact.sandbox.required to refuse instead"
            ),
        },
    };
    Plan {
        mode,
        profile: Some(profile),
        env: Some(env_recipe),
        known,
    }
}

/// The network: the entry's choice, else the hub profile's, else the registries through the
/// proxy; allow lists add up (registries, known hosts, hub profile, entry). A known server
/// whose job is any URL gets any public host through the proxy (loopback, link-local and
/// metadata addresses stay refused, UDP closed) unless the entry chose its network.
fn network(hub: &SandboxSpec, entry: &SandboxSpec, known: Option<&known::Known>) -> Network {
    let chosen = entry.network.as_ref().or(hub.network.as_ref());
    match chosen {
        Some(NetworkSpec::Any) => Network::Any,
        Some(NetworkSpec::None) => Network::None,
        _ => {
            let known_hosts = known.map(|k| k.hosts.as_slice()).unwrap_or_default();
            let mut allow: Vec<HostPattern> = REGISTRIES
                .iter()
                .copied()
                .chain(known_hosts.iter().map(String::as_str))
                .filter_map(|h| HostPattern::parse(h).ok())
                .collect();
            if entry.network.is_none() && known.is_some_and(|k| k.entry.any_host) {
                allow.push(HostPattern::any_public());
            }
            for spec in [hub, entry] {
                if let Some(NetworkSpec::Allow(list)) = &spec.network {
                    for h in list {
                        if !allow.contains(h) {
                            allow.push(h.clone());
                        }
                    }
                }
            }
            Network::Proxy(allow)
        }
    }
}

fn dedup<T: PartialEq + Clone>(list: &mut Vec<T>) {
    let mut seen = Vec::new();
    list.retain(|p| {
        if seen.contains(p) {
            false
        } else {
            seen.push(p.clone());
            true
        }
    });
}

/// The folders named by `words` (absolute, `./…`, `../…`, `.`, or after `=` in `--flag=value`;
/// relative ones taken from `cwd`): a directory itself, and for a file — a server's script,
/// a database, a data file still to be made — the folder it is in (where such a server keeps
/// its state: server-memory writes beside its own script), when that folder exists.
fn named_dirs<'a>(words: impl Iterator<Item = &'a String>, cwd: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for word in words {
        let value = match word.split_once('=') {
            Some((flag, v)) if flag.starts_with('-') => v,
            _ => word.as_str(),
        };
        let looks_like_path = value.starts_with('/')
            || value == "."
            || value == ".."
            || value.starts_with("./")
            || value.starts_with("../");
        if !looks_like_path {
            continue;
        }
        let path: PathBuf = cwd.join(value).components().collect();
        let dir = if path.is_dir() {
            Some(path.as_path())
        } else {
            path.parent().filter(|p| p.is_dir())
        };
        if let Some(real) = dir.and_then(|d| d.canonicalize().ok()) {
            out.push(real);
        }
    }
    out
}

/// `docker run …`, `podman run …`, `nerdctl run …`: the runtime's name.
fn container_runtime(command: &str, program: &Path, args: &[String]) -> Option<String> {
    let name = program
        .file_name()
        .and_then(|n| n.to_str())
        .or_else(|| Path::new(command).file_name().and_then(|n| n.to_str()))?;
    let runtime = ["docker", "podman", "nerdctl"]
        .into_iter()
        .find(|r| *r == name)?;
    let first_word = args.iter().find(|a| !a.starts_with('-'))?;
    (first_word == "run").then(|| runtime.to_string())
}

/// `-e NAME` / `--env NAME` / `--env=NAME` without a value: the runtime reads NAME from its
/// own environment, so it must pass.
fn container_env_names(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = match a.as_str() {
            "-e" | "--env" => it.next().map(String::as_str),
            _ => a.strip_prefix("--env="),
        };
        if let Some(v) = value
            && !v.contains('=')
            && !v.is_empty()
        {
            out.push(v.to_string());
        }
    }
    out
}

/// npm's setting for its "new version available" notice.
const NPM_UPDATE_NOTIFIER: &str = "npm_config_update_notifier";

/// A confined server's own folders, as its environment names them.
struct Dirs<'a> {
    tmpdir: &'a Path,
    data: &'a Path,
    caches: &'a Path,
}

impl EnvRecipe {
    fn build(
        &self,
        hub: &[(String, String)],
        network: &Network,
        dirs: &Dirs,
        proxy: Option<&str>,
    ) -> env::Environment {
        let mut ours: Vec<(String, String)> = Vec::new();
        // The package caches go before the entry's `env`, which may send one elsewhere (the
        // write grant still decides whether it can write there).
        let mut entry = Vec::new();
        if !self.container {
            let t = dirs.tmpdir.display().to_string();
            ours.extend(["TMPDIR", "TMP", "TEMP"].map(|k| (k.to_string(), t.clone())));
            ours.push((DATA_VAR.to_string(), dirs.data.display().to_string()));
            entry = places::private_cache_vars(dirs.caches, self.pnpm);
            // npm's notice of a newer npm fills the last lines of stderr, which the hub's
            // "failed to start" reason quotes, and hides the real error of an `npx` start.
            if !self
                .entry
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(NPM_UPDATE_NOTIFIER))
            {
                entry.push((NPM_UPDATE_NOTIFIER.to_string(), "false".to_string()));
            }
        }
        entry.extend(self.entry.iter().cloned());
        if let (Network::Proxy(_), Some(url)) = (network, proxy) {
            for k in [
                "HTTP_PROXY",
                "HTTPS_PROXY",
                "http_proxy",
                "https_proxy",
                "npm_config_proxy",
                "npm_config_https_proxy",
            ] {
                ours.push((k.to_string(), url.to_string()));
            }
            // Nothing bypasses the proxy: a loopback service is reached through it too, and
            // only if the profile allows it.
            ours.push(("NO_PROXY".into(), String::new()));
            ours.push(("no_proxy".into(), String::new()));
            ours.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
        }
        env::EnvRequest {
            hub,
            entry: &entry,
            names: &self.names,
            container: self.container,
            network_open: matches!(network, Network::Any) || self.container,
            ours: &ours,
        }
        .build()
    }
}

/// How to start one server process.
#[derive(Debug)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The whole environment; `None` inherits the hub's (with the entry's `env` on top).
    pub env: Option<Vec<(String, String)>>,
    /// Names of the hub's variables the server does not get (for a debug log line).
    pub withheld: Vec<String>,
}

/// Why a server cannot be started as its sandbox asks.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("sandbox: {0}")]
    Refused(String),
    #[error("sandbox: could not prepare the server's private folder {path}: {source}")]
    TempDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("sandbox: could not find openpact's own executable to confine the server: {0}")]
    Wrapper(std::io::Error),
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

    /// The command line and environment for one start. `proxy` is the server's egress
    /// proxy, when its network goes through one.
    pub fn launch(
        &self,
        program: &Path,
        args: &[String],
        proxy: Option<&proxy::EgressProxy>,
    ) -> Result<Launch, LaunchError> {
        let plain = || Launch {
            program: program.to_path_buf(),
            args: args.to_vec(),
            env: None,
            withheld: Vec::new(),
        };
        if let Mode::Refused { reason } = &self.mode {
            return Err(LaunchError::Refused(reason.clone()));
        }
        let Some(recipe) = &self.env else {
            return Ok(plain());
        };
        let hub = hub_env();
        let Some(profile) = &self.profile else {
            // A container runtime: only the environment is ours to decide.
            let none = Path::new("");
            let dirs = Dirs {
                tmpdir: none,
                data: none,
                caches: none,
            };
            let env = recipe.build(&hub, &Network::Any, &dirs, None);
            return Ok(Launch {
                env: Some(env.vars),
                withheld: env.withheld,
                ..plain()
            });
        };
        prepare_dirs(profile)?;
        let url = proxy.map(proxy::EgressProxy::url);
        let env = recipe.build(
            &hub,
            &profile.network,
            &Dirs {
                tmpdir: &profile.tmpdir,
                data: &profile.data,
                caches: &profile.caches,
            },
            url.as_deref(),
        );
        if self.mode != Mode::Enforced {
            return Ok(Launch {
                env: Some(env.vars),
                withheld: env.withheld,
                ..plain()
            });
        }
        let rules = profile.confinement(proxy.map(proxy::EgressProxy::port));
        let rules = serde_json::to_string(&rules).unwrap_or_default();
        let (wrapper, mut wrapped) = wrapper_command().map_err(LaunchError::Wrapper)?;
        wrapped.extend([rules, "--".to_string()]);
        wrapped.push(program.display().to_string());
        wrapped.extend(args.iter().cloned());
        Ok(Launch {
            program: wrapper,
            args: wrapped,
            env: Some(env.vars),
            withheld: env.withheld,
        })
    }
}

/// Makes the private temp dir and data folder (0700), the granted folders under the home
/// folder that are missing (0700: at each start, since the user may have removed one), and
/// its private package caches.
fn prepare_dirs(profile: &Profile) -> Result<(), LaunchError> {
    use crate::platform;
    let err = |path: &Path| {
        let path = path.display().to_string();
        move |source| LaunchError::TempDir { path, source }
    };
    platform::create_dir_all(&profile.tmpdir, 0o700).map_err(err(&profile.tmpdir))?;
    // In a shared temp dir, someone else may have made the folder first to read or plant
    // files in every server's temp dir: use it only if it is ours and closed to others.
    if let Some(base) = temp_root().parent() {
        let meta = std::fs::metadata(base).map_err(err(base))?;
        if !platform::private_to_user(&meta) {
            return Err(err(base)(std::io::Error::other(
                "it belongs to another user or is open to others; remove it",
            )));
        }
    }
    platform::create_dir_all(&profile.data, 0o700).map_err(err(&profile.data))?;
    for dir in profile.create.iter().filter(|d| !d.exists()) {
        // Not fatal: the server may not need this folder for what it is asked to do.
        if let Err(e) = platform::create_dir_all(dir, 0o700) {
            tracing::warn!(path = %dir.display(), error = %e, "sandbox: could not make a granted folder, so the grant does nothing");
        }
    }
    platform::create_dir_all(&profile.caches, 0o700).map_err(err(&profile.caches))?;
    Ok(())
}

/// Removes this hub's private temp dirs (when it stops).
pub fn remove_temp_root() {
    let _ = std::fs::remove_dir_all(temp_root());
}

/// Removes the private temp dirs of hubs that are gone (one killed outright cannot clean up
/// after itself).
pub fn sweep_stale_temp() {
    let root = temp_root();
    let Some(base) = root.parent() else { return };
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // Only when surely gone: a pid we may not signal still names a live process.
        if crate::platform::liveness(pid) == crate::platform::Liveness::Gone {
            let _ = std::fs::remove_dir_all(entry.path());
        }
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

impl Profile {
    /// Which mechanism closes each way out, by way out.
    fn closes(&self) -> Value {
        let granted = || {
            self.unix_sockets
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let unix = match &self.unix {
            UnixRule::Landlock(g) if g.is_empty() => {
                "Landlock: only sockets beneath its write grants".to_string()
            }
            UnixRule::Landlock(_) => format!(
                "Landlock: only sockets beneath its write grants and {}",
                granted()
            ),
            UnixRule::Seccomp => "seccomp: no socket(AF_UNIX), socket pairs only".to_string(),
            UnixRule::Open => format!(
                "any (granted {}; limiting to {} needs Landlock ABI 9, Linux 7.1)",
                granted(),
                if self.unix_sockets.len() == 1 {
                    "it"
                } else {
                    "them"
                }
            ),
        };
        let proc = match &self.pid_namespace {
            Ok(()) => "PID namespace: its own processes only".to_string(),
            Err(why) => format!("shared ({why}): other processes' command lines are readable"),
        };
        json!({
            "unixSockets": unix,
            "proc": proc,
            "packageCaches": {"private": self.caches, "sharedReadOnly": self.shared_caches},
        })
    }
}

impl Network {
    fn to_json(&self) -> Value {
        match self {
            Network::Any => json!("any"),
            Network::None => json!("none"),
            Network::Proxy(allow) => {
                json!({"allow": allow.iter().map(|h| h.to_string()).collect::<Vec<_>>()})
            }
        }
    }
}

impl Plan {
    /// For `config check --json`, `servers --json` and `/health`.
    pub fn to_json(&self) -> Value {
        let mut out = serde_json::to_value(&self.mode).unwrap_or_default();
        if let Value::Object(map) = &mut out {
            map.insert("enforced".into(), json!(self.enforced()));
            if let Some(p) = &self.profile {
                map.insert(
                    "profile".into(),
                    json!({
                        "read": p.read,
                        "write": p.write,
                        "deny": p.deny,
                        "private": p.private,
                        "network": p.network.to_json(),
                        "env": p.env,
                        "tmpdir": p.tmpdir,
                        "data": p.data,
                        // Shown while missing: made at the next start.
                        "create": p.create.iter().filter(|d| !d.exists()).collect::<Vec<_>>(),
                        "unixSockets": p.unix_sockets,
                    }),
                );
                if !p.warnings.is_empty() {
                    map.insert("warnings".into(), json!(p.warnings));
                }
                // The ways out this sandbox closes, each with what closes it.
                if self.enforced() {
                    map.insert("closes".into(), p.closes());
                }
            }
            if let Some(recipe) = self.env.as_ref().filter(|_| self.profile.is_none()) {
                map.insert("env".into(), json!(recipe.names));
            }
            if let Some(k) = &self.known {
                map.insert(
                    "known".into(),
                    json!({
                        "name": k.entry.name,
                        "matched": k.launched.to_string(),
                        "table": known::TABLE_PATH,
                        "entry": k.entry,
                    }),
                );
            }
        }
        out
    }
}

/// The human lines for a sandbox as [`Plan::to_json`] gives it (also as read back from a
/// running hub's status): how it runs, then its profile.
pub fn describe(v: &Value) -> Vec<String> {
    let text = |key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default();
    let first = match text("mode") {
        "enforced" => format!("sandboxed ({})", platform().name()),
        "unconfined" => format!("NOT sandboxed: {}", text("reason")),
        "refused" => format!("refused: {}", text("reason")),
        "off" => format!("unconfined ({})", text("reason")),
        "runtime" => format!(
            "contained by {} (environment filtered; its own flags decide files and network)",
            text("runtime")
        ),
        _ => "remote (not a local process)".to_string(),
    };
    let mut out = vec![first];
    let warnings = v.get("warnings").and_then(Value::as_array);
    out.extend(
        warnings
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|w| format!("warning: {w}")),
    );
    if let Some(k) = v.get("known") {
        let name = k.get("name").and_then(Value::as_str).unwrap_or_default();
        let matched = k.get("matched").and_then(Value::as_str).unwrap_or_default();
        let what = if text("mode") == "runtime" {
            "its variables from"
        } else {
            "the default profile plus its grants in"
        };
        out.push(format!(
            "profile: known ({name}), matched as {matched}: {what} {} (a \"sandbox\" object adds to them; \"known\": false in it drops them)",
            known::TABLE_PATH
        ));
        let secrets: Vec<&str> = k
            .pointer("/entry/env")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let secrets: Vec<&str> = secrets
            .into_iter()
            .filter(|n| env::looks_secret(n))
            .collect();
        if !secrets.is_empty() {
            out.push(format!(
                "secrets it reads, not passed by the table: {} (give them in its \"env\", or name them in sandbox.env)",
                secrets.join(", ")
            ));
        }
        if let Some(notes) = k
            .pointer("/entry/notes")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            out.push(format!("notes: {notes}"));
        }
    }
    let Some(p) = v.get("profile") else {
        return out;
    };
    let tmpdir = p.get("tmpdir").and_then(Value::as_str).unwrap_or_default();
    let data = p.get("data").and_then(Value::as_str).unwrap_or_default();
    let caches = v
        .pointer("/closes/packageCaches/private")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let strings = |key: &str| -> Vec<&str> {
        p.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let create = strings("create");
    // The temp dir's path holds the hub's pid: shown by what it is, as are the data folder
    // and the package caches (on lines of their own); a folder still to be made says so.
    let list = |key: &str| -> String {
        strings(key)
            .into_iter()
            .map(|s| {
                if s == tmpdir {
                    "its own TMPDIR".to_string()
                } else if s == data {
                    "its data folder".to_string()
                } else if s == caches {
                    "its package caches".to_string()
                } else if create.contains(&s) {
                    format!("{s} (missing: made at start)")
                } else {
                    s.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let network = match p.get("network") {
        Some(Value::String(s)) if s == "any" => "any host".to_string(),
        Some(Value::String(_)) => "none".to_string(),
        Some(n) => format!(
            "only through the egress proxy, to {}",
            n.get("allow")
                .and_then(Value::as_array)
                .map(|a| a
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", "))
                .unwrap_or_default()
        ),
        None => String::new(),
    };
    let denied = p.get("deny").and_then(Value::as_array).map_or(0, Vec::len);
    out.extend([
        format!("read: {} (except what is denied)", list("read")),
        format!("write: {}", list("write")),
        format!(
            "deny: {denied} places, credentials first: {}",
            first_few(&list("deny"))
        ),
        format!("network: {network}"),
        format!("env: {}", list("env")),
    ]);
    if !data.is_empty() {
        out.push(format!(
            "data: {data} (its own, kept across restarts; ${DATA_VAR})"
        ));
    }
    let closes = |key: &str| v["closes"].get(key).and_then(Value::as_str);
    for (key, label) in [("unixSockets", "Unix sockets"), ("proc", "/proc")] {
        if let Some(how) = closes(key) {
            out.push(format!("{label}: {how}"));
        }
    }
    if let Some(caches) = v.pointer("/closes/packageCaches") {
        let shared: Vec<&str> = caches
            .get("sharedReadOnly")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let shared = match shared.is_empty() {
            true => "none here".to_string(),
            false => shared.join(", "),
        };
        out.push(format!(
            "package caches: its own at {} (npm/npx, uv/uvx, pip, pipx, yarn, pnpm, bun); the shared ones read-only: {shared}",
            caches.get("private").and_then(Value::as_str).unwrap_or_default()
        ));
    }
    out
}

fn first_few(list: &str) -> String {
    let items: Vec<&str> = list.split(", ").collect();
    if items.len() <= 4 {
        return list.to_string();
    }
    format!("{}, … (--json lists all)", items[..4].join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plans for the servers of `text` (config beside `dir`) with this support.
    fn plans_of(dir: &Path, text: &str, support: Support) -> Vec<Plan> {
        let mechanisms = Mechanisms {
            unix_paths: false,
            pid_namespace: Ok(()),
        };
        plans_with(dir, text, support, &mechanisms)
    }

    fn plans_with(dir: &Path, text: &str, support: Support, mechanisms: &Mechanisms) -> Vec<Plan> {
        let home = dir.join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        let hub_env: Vec<(String, String)> = [
            ("HOME", home.to_str().unwrap()),
            ("PATH", "/usr/bin:/bin"),
            ("GITHUB_TOKEN", "t"),
            ("LANG", "C.UTF-8"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let lookup = |k: &str| hub_env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let config = crate::config::parse(text, &dir.join("mcp.json"), &lookup).unwrap();
        let temp_root = dir.join("tmp-root");
        let cx = Context {
            settings: &config.hub.sandbox,
            hub_env: &hub_env,
            support: &support,
            mechanisms,
            cwd: dir,
            own_dirs: &[dir.join("state")],
            temp_root: &temp_root,
            data_root: &dir.join("data-root"),
            cache_root: &dir.join("cache-root"),
        };
        config.servers.iter().map(|s| plan(s, &cx)).collect()
    }

    #[test]
    fn the_default_profile_guards_credentials_and_grants_what_the_server_works_on() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("pkg/dist")).unwrap();
        std::fs::create_dir_all(dir.join("state")).unwrap();
        std::fs::write(dir.join("pkg/dist/index.js"), "").unwrap();
        std::fs::write(dir.join("bin/tool"), "#!/bin/sh\n").unwrap();
        crate::platform::set_mode(&dir.join("bin/tool"), 0o755).unwrap();
        let plans = plans_of(
            &dir,
            r#"{"mcpServers": {
                "a": {"command": "/bin/sh", "args": ["-c", "x", "./data", "/"], "env": {"K": "v"}},
                "b": {"command": "/bin/sh", "sandbox": false},
                "c": {"command": "/bin/sh", "sandbox": {"network": {"allow": ["example.com"]}, "env": ["GITHUB_TOKEN"]}},
                "d": {"command": "/bin/sh", "sandbox": {"network": false, "filesystem": {"deny": ["data"]}}, "args": ["./data"]},
                "r": {"command": "/bin/sh", "args": ["-c", "docker"]},
                "t": {"command": "./bin/tool"},
                "s": {"command": "/bin/sh", "args": ["./pkg/dist/index.js", "/etc/passwd"], "env": {"DB": "./state/new.db"}}
            }}"#,
            Support::Full,
        );
        let a = plans[0].profile.as_ref().unwrap();
        assert_eq!(plans[0].mode, Mode::Enforced);
        assert!(a.write.contains(&dir.join("data")), "{:?}", a.write);
        // The cwd holds the home directory here: too broad to grant.
        assert!(!a.write.contains(&dir), "{:?}", a.write);
        assert!(!a.write.contains(&PathBuf::from("/")), "{:?}", a.write);
        assert!(a.deny.contains(&dir.join("home/.ssh")) && a.deny.contains(&dir.join("state")));
        assert!(a.env.contains(&"K".to_string()) && a.env.contains(&"LANG".to_string()));
        assert!(!a.env.contains(&"GITHUB_TOKEN".to_string()));
        assert!(matches!(&a.network, Network::Proxy(h) if h.len() == REGISTRIES.len()));
        assert!(matches!(plans[1].mode, Mode::Off { .. }) && plans[1].profile.is_none());
        let c = plans[2].profile.as_ref().unwrap();
        assert!(c.env.contains(&"GITHUB_TOKEN".to_string()));
        assert!(
            matches!(&c.network, Network::Proxy(h) if h.iter().any(|h| h.as_str() == "example.com"))
        );
        let d = plans[3].profile.as_ref().unwrap();
        assert_eq!(d.network, Network::None);
        // Shown names include the proxy's variables where the network goes through it.
        assert!(a.env.contains(&"HTTPS_PROXY".to_string()), "{:?}", a.env);
        assert!(!d.env.contains(&"HTTPS_PROXY".to_string()), "{:?}", d.env);
        assert!(
            !d.write.contains(&dir.join("data")),
            "deny wins: {:?}",
            d.write
        );
        assert_eq!(
            plans[4].mode,
            Mode::Enforced,
            "`docker` as an argument is not a launch"
        );
        let rules = a.confinement(Some(4242));
        assert_eq!(rules.network, NetRule::Proxy(4242));
        assert!(rules.carve.contains(&PathBuf::from("/tmp")));
    }

    #[test]
    fn each_way_out_shows_the_mechanism_this_kernel_closes_it_with() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"{"mcpServers": {
            "a": {"command": "/bin/sh"},
            "g": {"command": "/bin/sh", "sandbox": {"unixSockets": ["/run/docker.sock"]}}
        }}"#;
        let before_abi_9 = Mechanisms {
            unix_paths: false,
            pid_namespace: Ok(()),
        };
        let plans = plans_with(dir.path(), text, Support::Full, &before_abi_9);
        let (a, g) = (&plans[0], &plans[1]);
        assert_eq!(a.profile.as_ref().unwrap().unix, UnixRule::Seccomp);
        // seccomp cannot tell one socket file from another: a grant opens them all.
        assert_eq!(g.profile.as_ref().unwrap().unix, UnixRule::Open);
        let closes = &a.to_json()["closes"];
        assert_eq!(
            closes["unixSockets"],
            "seccomp: no socket(AF_UNIX), socket pairs only"
        );
        assert_eq!(closes["proc"], "PID namespace: its own processes only");
        assert_eq!(
            g.to_json()["closes"]["unixSockets"],
            "any (granted /run/docker.sock; limiting to it needs Landlock ABI 9, Linux 7.1)"
        );
        assert!(a.profile.as_ref().unwrap().confinement(None).pid_namespace);

        let abi_9_without_userns = Mechanisms {
            unix_paths: true,
            pid_namespace: Err("no user namespaces here".into()),
        };
        let plans = plans_with(dir.path(), text, Support::Full, &abi_9_without_userns);
        let (a, g) = (&plans[0], &plans[1]);
        assert_eq!(
            g.profile.as_ref().unwrap().unix,
            UnixRule::Landlock(vec!["/run/docker.sock".into()])
        );
        let rules = a.profile.as_ref().unwrap().confinement(None);
        assert_eq!(rules.unix, UnixRule::Landlock(Vec::new()));
        assert!(!rules.pid_namespace);
        let lines = describe(&g.to_json());
        assert!(
            lines.contains(&"Unix sockets: Landlock: only sockets beneath its write grants and /run/docker.sock".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"/proc: shared (no user namespaces here): other processes' command lines are readable".to_string()),
            "{lines:?}"
        );
        // Nothing closes them for a server the kernel does not confine.
        let plans = plans_with(
            dir.path(),
            text,
            Support::Missing("no Landlock".into()),
            &before_abi_9,
        );
        assert!(plans[0].to_json().get("closes").is_none());
    }

    #[test]
    fn a_script_checked_out_in_a_temp_dir_may_read_its_packages_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        // The checkout: a folder in the temp dir with node_modules, away from the home dir.
        let checkout = tempfile::tempdir().unwrap();
        let checkout = checkout.path().canonicalize().unwrap();
        let script = checkout.join("node_modules/@scope/server/dist/index.js");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "").unwrap();
        std::fs::create_dir_all(dir.join("tmp-root/x")).unwrap();
        std::fs::write(dir.join("tmp-root/x/s.js"), "").unwrap();
        let text = r#"{"mcpServers": {
            "n": {"command": "/bin/sh", "args": ["SCRIPT"]},
            "t": {"command": "/bin/sh", "args": ["OWN"]},
            "w": {"command": "/bin/sh", "args": ["/tmp"]}
        }}"#
        .replace("SCRIPT", script.to_str().unwrap())
        .replace("OWN", dir.join("tmp-root/x/s.js").to_str().unwrap());
        let plans = plans_of(&dir, &text, Support::Full);
        let n = plans[0].profile.as_ref().unwrap();
        if checkout.starts_with("/tmp") {
            assert!(n.read.contains(&checkout), "{:?}", n.read);
        }
        // Never the folder that holds the hub's private temp dirs, nor a temp root itself.
        let t = plans[1].profile.as_ref().unwrap();
        assert!(!t.read.contains(&dir), "{:?}", t.read);
        let w = plans[2].profile.as_ref().unwrap();
        assert!(!w.read.contains(&PathBuf::from("/tmp")), "{:?}", w.read);
    }

    #[test]
    fn a_home_in_a_temp_dir_keeps_its_installs_and_itself_readable() {
        // `plans_of` puts HOME in `dir/home`: a scratch dir, in the temp dir as a test's is.
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let script = dir.join("install/node_modules/@scope/server/dist/index.js");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "").unwrap();
        let text = r#"{"mcpServers": {"n": {"command": "/bin/sh", "args": ["SCRIPT"]}}}"#
            .replace("SCRIPT", script.to_str().unwrap());
        let plans = plans_of(&dir, &text, Support::Full);
        let n = plans[0].profile.as_ref().unwrap();
        // The install beside the home, not the folder that holds both.
        assert!(n.read.contains(&dir.join("install")), "{:?}", n.read);
        assert!(n.read.contains(&dir.join("home")), "{:?}", n.read);
        assert!(!n.read.contains(&dir), "{:?}", n.read);
        let rules = n.confinement(None);
        assert!(rules.carve.contains(&dir.join("home/.ssh")), "{rules:?}");
    }

    #[test]
    fn where_the_machine_cannot_confine_required_refuses_and_otherwise_runs_unconfined() {
        let dir = tempfile::tempdir().unwrap();
        let missing = || Support::Missing("no Landlock here".into());
        let text = r#"{"mcpServers": {"a": {"command": "/bin/sh"}}, "openpact": {"sandbox": {"required": REQ}}}"#;
        let refused = plans_of(dir.path(), &text.replace("REQ", "true"), missing());
        assert!(
            matches!(&refused[0].mode, Mode::Refused { reason } if reason.contains("no Landlock here"))
        );
        assert!(refused[0].launch(Path::new("/bin/sh"), &[], None).is_err());
        let unconfined = plans_of(dir.path(), &text.replace("REQ", "false"), missing());
        assert!(matches!(unconfined[0].mode, Mode::Unconfined { .. }));
        let off = plans_of(
            dir.path(),
            r#"{"mcpServers": {"a": {"command": "/bin/sh"}, "b": {"command": "/bin/sh", "sandbox": true}}, "openpact": {"sandbox": {"default": "off"}}}"#,
            Support::Full,
        );
        assert!(matches!(off[0].mode, Mode::Off { .. }));
        assert_eq!(off[1].mode, Mode::Enforced);
    }

    #[test]
    fn private_folders_stay_in_their_roots_and_home_grants_are_made() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        let plans = plans_of(
            &dir,
            r#"{"mcpServers": {
                "../up": {"command": "/bin/sh"},
                "a/b": {"command": "/bin/sh", "sandbox": {"filesystem": {"write": ["~/.new/deep", "~/../escape", "~/app.db"], "read": ["~/.kube/config"]}}}
            }}"#,
            Support::Full,
        );
        let up = plans[0].profile.as_ref().unwrap();
        assert_eq!(up.data, dir.join("data-root/..%2Fup"));
        assert_eq!(up.tmpdir, dir.join("tmp-root/..%2Fup"));
        assert!(up.write.contains(&up.data), "{:?}", up.write);
        let ab = plans[1].profile.as_ref().unwrap();
        assert_eq!(ab.data, dir.join("data-root/a%2Fb"));
        // Only folders it writes below the home folder, never by way of `..`, never a file to
        // be, never what it only reads (a `~/.kube/config` folder would break kubectl).
        assert_eq!(ab.create, [dir.join("home/.new/deep")]);
        assert_eq!(folder_name(".."), "%2E%2E");
    }

    #[test]
    fn a_known_server_gets_its_grants_under_the_layers_the_user_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        // Runners that exist (a missing command makes the server unavailable, with no plan).
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        for runner in ["uvx", "npx", "docker"] {
            std::fs::write(dir.join("bin").join(runner), "#!/bin/sh\n").unwrap();
            crate::platform::set_mode(&dir.join("bin").join(runner), 0o755).unwrap();
        }
        let bin = |text: &str| text.replace("BIN", dir.join("bin").to_str().unwrap());
        let plans = plans_of(
            &dir,
            &bin(r#"{"mcpServers": {
                "fetch": {"command": "BIN/uvx", "args": ["mcp-server-fetch"]},
                "narrow": {"command": "BIN/uvx", "args": ["mcp-server-fetch"], "sandbox": {"network": {"allow": ["example.com"]}}},
                "kube": {"command": "BIN/npx", "args": ["-y", "mcp-server-kubernetes"]},
                "gh": {"command": "BIN/docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"]},
                "plain": {"command": "/bin/sh"}
            }}"#),
            Support::Full,
        );
        let name = |p: &Plan| p.known.as_ref().map(|k| k.entry.name.clone());
        assert_eq!(name(&plans[0]).as_deref(), Some("fetch"));
        // Any public host, through the proxy.
        assert!(matches!(&plans[0].profile.as_ref().unwrap().network,
            Network::Proxy(h) if h.contains(&HostPattern::any_public())));
        // The entry's own network choice wins over the table's "any host".
        assert!(matches!(&plans[1].profile.as_ref().unwrap().network,
            Network::Proxy(h) if h.iter().any(|h| h.as_str() == "example.com")
                && !h.contains(&HostPattern::any_public())));
        let kube = plans[2].profile.as_ref().unwrap();
        let home = dir.join("home");
        assert!(
            kube.read.contains(&home.join(".kube/config")),
            "{:?}",
            kube.read
        );
        assert!(
            kube.deny.contains(&home.join(".kube")),
            "the rest stays denied"
        );
        // What it reads is not made; the folder it writes is.
        assert_eq!(kube.create, [home.join(".kube/cache")]);
        // An image: contained by its runtime; only the entry's variables apply.
        assert!(matches!(plans[3].mode, Mode::Runtime { .. }));
        assert_eq!(name(&plans[3]).as_deref(), Some("github"));
        let names = &plans[3].env.as_ref().unwrap().names;
        assert!(names.contains(&"GITHUB_HOST".to_string()), "{names:?}");
        // A secret passes only when the user names it (here no `-e`): never by the table.
        assert!(
            !names.contains(&"GITHUB_PERSONAL_ACCESS_TOKEN".to_string()),
            "{names:?}"
        );
        assert_eq!(name(&plans[4]), None);
        // The hub's network: false holds every server, known or not; its "known": false drops
        // the table for all but an entry that says "known": true.
        let plans = plans_of(
            &dir,
            &bin(r#"{"mcpServers": {
                "fetch": {"command": "BIN/uvx", "args": ["mcp-server-fetch"]},
                "kube": {"command": "BIN/npx", "args": ["-y", "mcp-server-kubernetes"], "sandbox": {"known": true}}
            }, "openpact": {"sandbox": {"profile": {"network": false, "known": false}}}}"#),
            Support::Full,
        );
        assert_eq!(name(&plans[0]), None);
        assert_eq!(plans[0].profile.as_ref().unwrap().network, Network::None);
        assert_eq!(name(&plans[1]).as_deref(), Some("kubernetes"));
        assert_eq!(plans[1].profile.as_ref().unwrap().network, Network::None);
    }

    #[test]
    fn npm_update_notice_is_off_unless_the_entry_sets_it() {
        let dirs = Dirs {
            tmpdir: Path::new("/t"),
            data: Path::new("/d"),
            caches: Path::new("/c"),
        };
        let notifier = |entry: &[(&str, &str)]| {
            let recipe = EnvRecipe {
                entry: entry
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                names: Vec::new(),
                container: false,
                pnpm: false,
            };
            let vars = recipe.build(&[], &Network::None, &dirs, None).vars;
            vars.into_iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case(NPM_UPDATE_NOTIFIER))
                .collect::<Vec<_>>()
        };
        let set = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(notifier(&[]), set("npm_config_update_notifier", "false"));
        assert_eq!(
            notifier(&[("npm_config_update_notifier", "true")]),
            set("npm_config_update_notifier", "true")
        );
        assert_eq!(
            notifier(&[("NPM_CONFIG_UPDATE_NOTIFIER", "true")]),
            set("NPM_CONFIG_UPDATE_NOTIFIER", "true")
        );
    }

    #[test]
    fn container_launches_pass_the_runtime_and_its_named_variables() {
        assert_eq!(
            container_runtime(
                "docker",
                Path::new("/usr/bin/docker"),
                &["run".into(), "-i".into()]
            ),
            Some("docker".into())
        );
        assert_eq!(
            container_runtime("docker", Path::new("/usr/bin/docker"), &["ps".into()]),
            None
        );
        let args: Vec<String> = ["run", "-e", "A_TOKEN", "--env=B", "-e", "C=1", "img"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(container_env_names(&args), ["A_TOKEN", "B"]);
    }
}
