//! One server's [`Plan`], worked out from its config: the layers of grants (the hub profile,
//! the entry, a known server's table entry) merged with what the server is obviously meant to
//! work on into a [`Profile`], and the [`Mode`] this machine can run it in.

use super::recipe::{Dirs, EnvRecipe};
use super::{
    Context, Mechanisms, Mode, Network, Plan, Profile, REGISTRIES, Support, UnixRule, env,
    folder_name, known, places, runtimes,
};
use crate::config::hosts::HostPattern;
use crate::config::sandbox::{NetworkSpec, SandboxChoice, SandboxSettings, SandboxSpec};
use crate::config::{ServerConfig, Transport};
use std::path::{Path, PathBuf};

#[cfg(test)]
mod tests;

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
        Transport::Http { .. } => return unprofiled(Mode::Remote),
    };
    let spec = match chosen_spec(&server.sandbox, cx.settings) {
        Ok(spec) => spec,
        Err(reason) => {
            return unprofiled(Mode::Off {
                reason: reason.to_string(),
            });
        }
    };
    let known = known_server(&spec, cx.settings, command, program, args);
    let entry_known = known.as_ref().map(|k| k.entry);
    let names = env_names(cx.settings, &spec, entry_known);
    if let Some(runtime) = container_runtime(command, program, args) {
        return runtime_plan(runtime, names, args, entry_env, known);
    }
    let home = cx.var("HOME").map(PathBuf::from);
    let home = home.as_deref();
    let tmpdir = cx.temp_root.join(folder_name(&server.name));
    let data = cx.data_root.join(folder_name(&server.name));
    let caches = cx.cache_root.join(folder_name(&server.name));
    let network = network(&cx.settings.profile, &spec, known.as_ref());
    let cwd = cwd.clone().unwrap_or_else(|| cx.cwd.to_path_buf());

    let grants = Grants::layered(&cx.settings.profile, &spec, entry_known, home);
    let unix = unix_rule(cx.mechanisms, &grants.unix_sockets);
    // Only what it writes: what it only reads is the user's to create.
    let mut create: Vec<PathBuf> = grants
        .write
        .iter()
        .filter(|p| places::made_at_start(p, home))
        .cloned()
        .collect();
    let mut deny = places::credentials(home);
    deny.extend(cx.own_dirs.iter().cloned());
    deny.extend(grants.deny.iter().cloned());
    let private = places::private(cx.var("XDG_RUNTIME_DIR").map(Path::new));
    let shared_caches = places::shared_caches(home, cx.var("XDG_CACHE_HOME").map(Path::new));
    let bounds = Bounds {
        home,
        deny: &deny,
        private: &private,
        temp_root: cx.temp_root,
    };

    // Its own package caches, not the shared ones: what a confined server writes there
    // (npm's `_npx`, uv's tool environments) is run later by whoever uses that cache.
    let mut write = vec![
        tmpdir.clone(),
        data.clone(),
        caches.clone(),
        PathBuf::from("/dev"),
    ];
    write.extend(obvious_dirs(args, entry_env, &cwd, &bounds, &shared_caches));
    write.extend(grants.write);
    let mut read = read_grants(program, args, &cwd, &bounds);
    read.extend(grants.read);
    // The profile's own `deny` wins over every grant.
    for list in [&mut read, &mut write] {
        list.retain(|p| !grants.deny.iter().any(|d| p.starts_with(d)));
        dedup(list);
    }
    dedup(&mut deny);
    create.retain(|p| read.contains(p) || write.contains(p));
    dedup(&mut create);

    let recipe = env_recipe(entry_env, names, program);
    let dirs = Dirs {
        tmpdir: &tmpdir,
        data: &data,
        caches: &caches,
    };
    let env = shown_env(&recipe, cx.hub_env, &network, &dirs);
    let warnings = warnings(program, entry_env, cx, &network);
    let profile = Profile {
        read,
        write,
        deny,
        private,
        network,
        env,
        tmpdir,
        data,
        create,
        unix_sockets: grants.unix_sockets,
        unix,
        pid_namespace: cx.mechanisms.pid_namespace.clone(),
        caches,
        shared_caches,
        warnings,
    };
    Plan {
        mode: confined_mode(cx.support, cx.settings.required),
        profile: Some(profile),
        env: Some(recipe),
        known,
    }
}

/// A plan with nothing of ours to confine: a remote server, or one the sandbox is off for.
fn unprofiled(mode: Mode) -> Plan {
    Plan {
        mode,
        profile: None,
        env: None,
        known: None,
    }
}

/// The profile the entry asks for, or why the server runs unconfined.
fn chosen_spec(
    choice: &SandboxChoice,
    settings: &SandboxSettings,
) -> Result<SandboxSpec, &'static str> {
    match choice {
        SandboxChoice::Off => Err("\"sandbox\": false on this server"),
        SandboxChoice::Unset if !settings.default_on => Err("openpact.sandbox.default is \"off\""),
        SandboxChoice::Unset | SandboxChoice::On => Ok(SandboxSpec::default()),
        SandboxChoice::Profile(spec) => Ok(spec.clone()),
    }
}

/// The known-servers entry whose grants it has. A profile's `"known": false` drops the
/// table's grants; the entry's word wins.
fn known_server(
    spec: &SandboxSpec,
    settings: &SandboxSettings,
    command: &str,
    program: &Path,
    args: &[String],
) -> Option<known::Known> {
    (spec.known.or(settings.profile.known) != Some(false))
        .then(|| known::find(command, program, args))
        .flatten()
}

/// The variables it gets by name: the hub profile's, a known server's, the entry's.
fn env_names(
    settings: &SandboxSettings,
    spec: &SandboxSpec,
    known: Option<&known::Entry>,
) -> Vec<String> {
    let mut names: Vec<String> = settings.profile.env.clone();
    // The table passes a known server's settings, never a secret: a token is the user's to
    // give (the entry's `env`, or its exact name in `sandbox.env`), as for any server.
    names.extend(
        known
            .iter()
            .flat_map(|k| k.env.iter())
            .filter(|n| !env::looks_secret(n))
            .cloned(),
    );
    names.extend(spec.env.iter().cloned());
    names
}

/// The plan of a server launched through a container runtime: the runtime decides files and
/// network, so of a known image only its variables apply.
fn runtime_plan(
    runtime: String,
    mut names: Vec<String>,
    args: &[String],
    entry_env: &[(String, String)],
    known: Option<known::Known>,
) -> Plan {
    names.extend(container_env_names(args));
    dedup(&mut names);
    Plan {
        mode: Mode::Runtime { runtime },
        profile: None,
        env: Some(EnvRecipe {
            entry: entry_env.to_vec(),
            names,
            container: true,
            pnpm: false,
        }),
        known,
    }
}

/// The paths the hub profile, then the entry, grant and deny, with a known server's grants
/// added as if written in its entry.
struct Grants {
    /// The profile's own `deny`, which wins over every grant.
    deny: Vec<PathBuf>,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    unix_sockets: Vec<PathBuf>,
}

impl Grants {
    fn layered(
        hub: &SandboxSpec,
        entry: &SandboxSpec,
        known: Option<&known::Entry>,
        home: Option<&Path>,
    ) -> Grants {
        let both = |pick: fn(&SandboxSpec) -> &Vec<PathBuf>| -> Vec<PathBuf> {
            pick(hub).iter().chain(pick(entry)).cloned().collect()
        };
        let mut grants = Grants {
            deny: both(|s| &s.deny),
            read: both(|s| &s.read),
            write: both(|s| &s.write),
            unix_sockets: both(|s| &s.unix_sockets),
        };
        // Of what a known server is granted, only the folders it writes are made at start
        // (what it reads, `~/.kube/config` say, is the user's to create).
        if let Some(k) = known {
            grants.read.extend(known::paths(&k.read, home));
            grants.write.extend(known::paths(&k.write, home));
        }
        grants
    }
}

/// How its Unix sockets are limited: a granted socket the kernel cannot limit to its path
/// leaves them all open.
fn unix_rule(mechanisms: &Mechanisms, granted: &[PathBuf]) -> UnixRule {
    if mechanisms.unix_paths {
        UnixRule::Landlock(granted.to_vec())
    } else if granted.is_empty() {
        UnixRule::Seccomp
    } else {
        UnixRule::Open
    }
}

/// What a grant the server did not ask for by name must stay clear of.
struct Bounds<'a> {
    home: Option<&'a Path>,
    /// Credential places, openpact's own dirs and the profile's `deny`.
    deny: &'a [PathBuf],
    /// Cut out of broad grants: temp roots, the user's runtime dir.
    private: &'a [PathBuf],
    /// Where the hub's private temp dirs go.
    temp_root: &'a Path,
}

impl Bounds<'_> {
    fn credential(&self, p: &Path) -> bool {
        self.deny.iter().any(|d| p.starts_with(d))
    }

    fn carved(&self, p: &Path) -> bool {
        self.private.iter().any(|d| p.starts_with(d))
    }

    /// The top-most folder in a private place on the way to `d` that holds neither the home
    /// folder nor the hub's temp dirs (a HOME in `/tmp/x/home` must not make `/tmp/x/install`
    /// unreadable, nor open `/tmp/x` and the home's temp files with it).
    fn package_tree(&self, d: &Path) -> PathBuf {
        let Some(root) = self
            .private
            .iter()
            .filter(|root| d.starts_with(root) && d != root.as_path())
            .max_by_key(|root| root.components().count())
        else {
            return d.to_path_buf();
        };
        let mut top = root.clone();
        for part in d.strip_prefix(root).into_iter().flat_map(Path::components) {
            top.push(part);
            if !self.temp_root.starts_with(&top)
                && !places::too_broad(&top, self.home)
                && !self.credential(&top)
            {
                return top;
            }
        }
        d.to_path_buf()
    }
}

/// What the server is obviously meant to work on: its working directory and the folders
/// its arguments and variables name, unless that would be most of the disk, the system's
/// own folders, a credential place or a shared package cache.
fn obvious_dirs(
    args: &[String],
    entry_env: &[(String, String)],
    cwd: &Path,
    bounds: &Bounds,
    shared_caches: &[PathBuf],
) -> Vec<PathBuf> {
    let mut obvious: Vec<PathBuf> = vec![cwd.to_path_buf()];
    obvious.extend(named_dirs(
        args.iter().chain(entry_env.iter().map(|(_, v)| v)),
        cwd,
    ));
    obvious.retain(|p| !places::too_broad(p, bounds.home) && !bounds.credential(p));
    let shared = |p: &Path| shared_caches.iter().any(|c| p.starts_with(c));
    obvious.retain(|p| !shared(p));
    obvious
}

/// What it may read before the explicit grants: everything but the cut-out places, and of
/// those the program's own folder and the scripts' its arguments name, when they lie in one
/// (a checkout in /tmp, say): the whole folder they were put in there, since a script's
/// packages sit beside it (`node_modules`, a venv), not in its own folder.
fn read_grants(program: &Path, args: &[String], cwd: &Path, bounds: &Bounds) -> Vec<PathBuf> {
    let mut read = vec![PathBuf::from("/")];
    let named = named_dirs(args.iter(), cwd);
    read.extend(
        program
            .parent()
            .filter(|d| d.is_absolute())
            .into_iter()
            .chain(named.iter().map(PathBuf::as_path))
            .filter(|d| {
                bounds.carved(d) && !bounds.credential(d) && !places::too_broad(d, bounds.home)
            })
            .map(|d| bounds.package_tree(d)),
    );
    // The home folder it runs under, when that lies in a temp root (a scratch HOME): its own
    // files as anywhere else, its credential places and the hub's temp dirs still cut out.
    if let Some(h) = bounds.home
        && bounds.carved(h)
        && !bounds.private.iter().any(|p| p == h)
    {
        read.push(h.to_path_buf());
    }
    read
}

/// How to make a confined server's environment at each start.
fn env_recipe(entry_env: &[(String, String)], names: Vec<String>, program: &Path) -> EnvRecipe {
    EnvRecipe {
        entry: entry_env.to_vec(),
        names,
        container: false,
        pnpm: program
            .file_name()
            .is_some_and(|n| n == "pnpm" || n == "pnpx"),
    }
}

/// The names the server will get, the proxy's variables included (their value is the
/// proxy's address, known only once it runs).
fn shown_env(
    recipe: &EnvRecipe,
    hub_env: &[(String, String)],
    network: &Network,
    dirs: &Dirs,
) -> Vec<String> {
    recipe
        .build(hub_env, network, dirs, Some("http://127.0.0.1"))
        .vars
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

/// What will not work as the user expects, and the fix (a Node that ignores the proxy).
fn warnings(
    program: &Path,
    entry_env: &[(String, String)],
    cx: &Context,
    network: &Network,
) -> Vec<String> {
    let path_var = entry_env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .or_else(|| cx.var("PATH"));
    match network {
        Network::Proxy(_) => runtimes::node_warning(program, path_var)
            .into_iter()
            .collect(),
        _ => Vec::new(),
    }
}

/// How a server the sandbox applies to runs on this machine.
fn confined_mode(support: &Support, required: bool) -> Mode {
    match support {
        Support::Full => Mode::Enforced,
        Support::Partial(why) | Support::Missing(why) if required => Mode::Refused {
            reason: format!(
                "{why}; openpact.sandbox.required is true, so this server is not started (set \"sandbox\": false on it to run it unconfined)"
            ),
        },
        Support::Partial(why) | Support::Missing(why) => Mode::Unconfined {
            reason: format!(
                "{why}; running unconfined (environment filtered only); set openpact.sandbox.required to refuse instead"
            ),
        },
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
