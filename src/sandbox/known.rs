//! Known servers: the grants popular packages need under the default profile (the hosts of
//! their API, the folders they keep state in, the files they read beyond the default, the
//! variables they need), from a table shipped with openpact (`known-servers.json`, data with
//! the source of each fact), matched from a stdio server's command line.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where the table lives in openpact's sources: named by `config check` and the README.
pub const TABLE_PATH: &str = "src/sandbox/known-servers.json";

const TABLE: &str = include_str!("known-servers.json");

/// One package's needs.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Entry {
    /// The short name shown as `profile: known (NAME)`.
    pub name: String,
    /// npm packages (`npx -y PKG`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub npm: Vec<String>,
    /// PyPI projects (`uvx PKG`, `pipx run PKG`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pypi: Vec<String>,
    /// OCI images, without tag (`docker run … IMAGE`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oci: Vec<String>,
    /// The commands an install puts on `PATH` (a pip entry point, an npm `bin`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    /// `python -m MODULE`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modules: Vec<String>,
    /// The hosts its API needs, as `sandbox.network.allow` entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Reaching any host is its job (fetching URLs, driving a browser): the network is open.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub any_host: bool,
    /// The host of each `http(s)://` URL its arguments name is allowed too (a bridge to the
    /// server the user named: mcp-remote).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub url_hosts: bool,
    /// Folders it writes (`~/…` or absolute), made (0700) at start when missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// What it reads beyond the default profile (a file in a credential place, say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Variables it needs from the hub's environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
    /// Where each fact comes from.
    pub sources: Vec<Source>,
}

/// Where some of an entry's facts come from.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// The facts it backs: `hosts`, `anyHost`, `urlHosts`, `write`, `read`, `env`, `notes`,
    /// or `none` (it needs nothing more).
    pub facts: Vec<String>,
    /// A README's address, or `PACKAGE@VERSION: path/in/the/package`.
    pub from: String,
    pub checked: Checked,
}

/// How a fact was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Checked {
    /// Read in the package's own code.
    Package,
    /// Stated by its README, not found in its code.
    Readme,
    /// Seen by running it (issue 39's trial, the compatibility suite).
    Run,
    /// Neither: believed, not checked.
    Unverified,
}

/// The table, parsed once; an unreadable table (a bad edit) is logged and matches nothing.
pub fn table() -> &'static [Entry] {
    static PARSED: OnceLock<Vec<Entry>> = OnceLock::new();
    PARSED.get_or_init(|| match parse(TABLE) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, table = TABLE_PATH, "sandbox: the known-servers table does not parse; no server gets a known profile");
            Vec::new()
        }
    })
}

/// The file: `servers`, beside an `about` for its readers.
#[derive(Deserialize)]
struct File {
    servers: Vec<Entry>,
}

fn parse(text: &str) -> Result<Vec<Entry>, serde_json::Error> {
    serde_json::from_str::<File>(text).map(|f| f.servers)
}

/// What a command line launches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launched {
    Npm(String),
    Pypi(String),
    Oci(String),
    Module(String),
    Command(String),
}

impl std::fmt::Display for Launched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Launched::Npm(p) => write!(f, "npm package {p}"),
            Launched::Pypi(p) => write!(f, "PyPI package {p}"),
            Launched::Oci(p) => write!(f, "image {p}"),
            Launched::Module(m) => write!(f, "python -m {m}"),
            Launched::Command(c) => write!(f, "command {c}"),
        }
    }
}

/// A server matched to an entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Known {
    pub entry: &'static Entry,
    /// How it was recognised.
    pub launched: Launched,
    /// The allow-list entries it gets: the entry's hosts, and the hosts of the URLs its
    /// arguments name when the entry says so.
    pub hosts: Vec<String>,
}

/// The entry for a stdio server launched as `program args` (`command` as written).
pub fn find(command: &str, program: &Path, args: &[String]) -> Option<Known> {
    let launched = launched(command, program, args)?;
    let entry = lookup(table(), &launched)?;
    let mut hosts = entry.hosts.clone();
    if entry.url_hosts {
        hosts.extend(args.iter().filter_map(|a| url_host(a)));
    }
    Some(Known {
        entry,
        launched,
        hosts,
    })
}

/// `http(s)://HOST[:PORT]/…` → `HOST:PORT` (the scheme's port when none is written), as an
/// allow-list entry; a URL with user info or no host gives none.
fn url_host(word: &str) -> Option<String> {
    let (rest, port) = if let Some(r) = word.strip_prefix("https://") {
        (r, 443)
    } else {
        (word.strip_prefix("http://")?, 80)
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let with_port = match authority.rsplit_once(':') {
        Some((_, p)) if p.parse::<u16>().is_ok() => authority.to_string(),
        _ => format!("{authority}:{port}"),
    };
    crate::config::hosts::HostPattern::parse(&with_port)
        .ok()
        .map(|_| with_port)
}

fn lookup<'t>(table: &'t [Entry], launched: &Launched) -> Option<&'t Entry> {
    table.iter().find(|e| match launched {
        Launched::Npm(p) => e.npm.iter().any(|n| n == p),
        Launched::Pypi(p) => e.pypi.iter().any(|n| pypi_name(n) == *p),
        Launched::Oci(i) => e.oci.iter().any(|n| image_name(n) == *i),
        Launched::Module(m) => e.modules.iter().any(|n| n == m),
        Launched::Command(c) => e.commands.iter().any(|n| n == c),
    })
}

/// The program's own name: `npx`, `uvx`, `python3.12`, … (`.cmd`/`.exe` dropped).
fn program_name<'a>(command: &'a str, program: &'a Path) -> Option<&'a str> {
    let name = program
        .file_name()
        .and_then(|n| n.to_str())
        .or_else(|| Path::new(command).file_name().and_then(|n| n.to_str()))?;
    Some(
        name.strip_suffix(".cmd")
            .or_else(|| name.strip_suffix(".exe"))
            .unwrap_or(name),
    )
}

/// What `program args` launches: a package through its runner, a module, an image, or a
/// command by name.
pub fn launched(command: &str, program: &Path, args: &[String]) -> Option<Launched> {
    let name = program_name(command, program)?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match name {
        "npx" | "bunx" | "pnpx" => npm_runner(&args),
        "npm" | "bun" | "pnpm" | "yarn" => match args.split_first() {
            Some((&("exec" | "x" | "dlx"), rest)) => npm_runner(rest),
            _ => None,
        },
        "uvx" => python_runner(&args, "--from"),
        "uv" => match args.as_slice() {
            ["tool", "run", rest @ ..] => python_runner(rest, "--from"),
            _ => None,
        },
        "pipx" => match args.split_first() {
            Some((&"run", rest)) => python_runner(rest, "--spec"),
            _ => None,
        },
        "docker" | "podman" | "nerdctl" => match args.split_first() {
            Some((&"run", rest)) => image(rest),
            _ => None,
        },
        n if n == "python" || n.starts_with("python3") => match args.as_slice() {
            ["-m", module, ..] => Some(Launched::Module((*module).to_string())),
            _ => None,
        },
        n => Some(Launched::Command(n.to_string())),
    }
}

/// `[-y] [--package=X | -p X] PKG[@version] …`: the package (X when given, since the
/// command then names one of its binaries).
fn npm_runner(args: &[&str]) -> Option<Launched> {
    let mut package = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--package" | "-p" => package = it.next().map(|p| p.to_string()),
            "--" => {}
            _ if a.starts_with("--package=") => {
                package = a.strip_prefix("--package=").map(str::to_string);
            }
            _ if a.starts_with('-') => {}
            first => {
                let named = package.unwrap_or_else(|| first.to_string());
                return Some(Launched::Npm(npm_name(&named)));
            }
        }
    }
    package.map(|p| Launched::Npm(npm_name(&p)))
}

/// `@scope/name@1.2.3` → `@scope/name`.
fn npm_name(spec: &str) -> String {
    let (scope, rest) = match spec.strip_prefix('@') {
        Some(rest) => ("@", rest),
        None => ("", spec),
    };
    let bare = rest.split('@').next().unwrap_or(rest);
    format!("{scope}{bare}")
}

/// The `uvx`/`uv tool run`/`pipx run` flags that take a value (their value is not the package).
const PY_VALUE_FLAGS: &[&str] = &[
    "--with",
    "-w",
    "--with-editable",
    "--with-requirements",
    "--python",
    "-p",
    "--index",
    "--index-url",
    "-i",
    "--default-index",
    "--extra-index-url",
    "--find-links",
    "-f",
    "--directory",
    "--project",
    "--config-file",
    "--cache-dir",
    "--python-platform",
    "--pip-args",
];

/// `[--from X] PKG[==version|@version|[extras]] …`: the package.
fn python_runner(args: &[&str], from_flag: &str) -> Option<Launched> {
    let mut from = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if *a == from_flag {
            from = it.next().copied();
        } else if let Some(v) = a.strip_prefix(from_flag).and_then(|r| r.strip_prefix('=')) {
            from = Some(v);
        } else if PY_VALUE_FLAGS.contains(a) {
            it.next();
        } else if !a.starts_with('-') {
            return Some(Launched::Pypi(pypi_name(from.unwrap_or(a))));
        }
    }
    from.map(|f| Launched::Pypi(pypi_name(f)))
}

/// A requirement's project name, normalized (PEP 503): `Mcp_Server.Fetch[x]==1` →
/// `mcp-server-fetch`.
fn pypi_name(spec: &str) -> String {
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(spec.len());
    let mut out = String::new();
    for c in spec[..end].chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// `docker run` flags that take no value; any other flag written without `=` takes the next
/// word.
const RUN_SWITCHES: &[&str] = &[
    "-i",
    "-t",
    "-it",
    "-ti",
    "-d",
    "-P",
    "--rm",
    "--init",
    "--interactive",
    "--tty",
    "--detach",
    "--privileged",
    "--read-only",
    "--publish-all",
    "--no-healthcheck",
    "--oom-kill-disable",
    "-q",
    "--quiet",
];

/// `docker run [flags] IMAGE[:tag][@digest] …`: the image.
fn image(args: &[&str]) -> Option<Launched> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if RUN_SWITCHES.contains(a) || a.contains('=') {
            continue;
        }
        if a.starts_with('-') {
            it.next();
            continue;
        }
        return Some(Launched::Oci(image_name(a)));
    }
    None
}

/// An image reference without tag or digest, with Docker Hub's implicit names spelled out
/// the short way: `docker.io/library/x:1` → `x`, `docker.io/mcp/fetch` → `mcp/fetch`.
fn image_name(reference: &str) -> String {
    let no_digest = reference.split('@').next().unwrap_or(reference);
    let last_slash = no_digest.rfind('/').map_or(0, |i| i + 1);
    let no_tag = match no_digest[last_slash..].find(':') {
        Some(i) => &no_digest[..last_slash + i],
        None => no_digest,
    };
    let short = no_tag
        .strip_prefix("docker.io/")
        .or_else(|| no_tag.strip_prefix("index.docker.io/"))
        .unwrap_or(no_tag);
    short.strip_prefix("library/").unwrap_or(short).to_string()
}

/// An entry's paths: `~/…` under `home` (dropped without one), absolute ones as written.
pub fn paths(list: &[String], home: Option<&Path>) -> Vec<PathBuf> {
    list.iter()
        .filter_map(|p| match p.strip_prefix("~/") {
            Some(rest) => home.map(|h| h.join(rest)),
            None => Some(PathBuf::from(p)).filter(|p| p.is_absolute()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::hosts::HostPattern;

    fn launch(line: &str) -> Option<Launched> {
        let mut words = line.split_whitespace();
        let command = words.next().unwrap();
        let args: Vec<String> = words.map(str::to_string).collect();
        launched(command, Path::new(command), &args)
    }

    #[test]
    fn command_lines_name_their_package() {
        let npm = |p: &str| Some(Launched::Npm(p.into()));
        let pypi = |p: &str| Some(Launched::Pypi(p.into()));
        let oci = |p: &str| Some(Launched::Oci(p.into()));
        for (line, want) in [
            (
                "npx -y @modelcontextprotocol/server-github",
                npm("@modelcontextprotocol/server-github"),
            ),
            (
                "npx @playwright/mcp@latest --headless",
                npm("@playwright/mcp"),
            ),
            ("npx -y firecrawl-mcp@3.2.1", npm("firecrawl-mcp")),
            (
                "/usr/local/bin/npx --yes --package=@scope/pkg@1 pkg-bin",
                npm("@scope/pkg"),
            ),
            ("npx -p mcp-remote mcp-remote-client", npm("mcp-remote")),
            (
                "npm exec -- @upstash/context7-mcp",
                npm("@upstash/context7-mcp"),
            ),
            ("pnpm dlx tavily-mcp", npm("tavily-mcp")),
            ("bunx exa-mcp-server", npm("exa-mcp-server")),
            ("npx.cmd -y mcp-remote https://x", npm("mcp-remote")),
            ("uvx mcp-server-fetch", pypi("mcp-server-fetch")),
            (
                "uvx mcp-server-git==2025.1.1 --repository .",
                pypi("mcp-server-git"),
            ),
            (
                "uvx --from basic-memory basic-memory mcp",
                pypi("basic-memory"),
            ),
            ("uvx --python 3.12 Chroma_MCP[x]>=0.2", pypi("chroma-mcp")),
            ("uvx markitdown-mcp@0.0.1a4", pypi("markitdown-mcp")),
            ("uv tool run arxiv-mcp-server", pypi("arxiv-mcp-server")),
            (
                "pipx run --spec mcp-atlassian mcp-atlassian",
                pypi("mcp-atlassian"),
            ),
            (
                "python3 -m mcp_server_time --local-timezone=UTC",
                Some(Launched::Module("mcp_server_time".into())),
            ),
            (
                "docker run -i --rm -e GITHUB_PERSONAL_ACCESS_TOKEN ghcr.io/github/github-mcp-server:v1",
                oci("ghcr.io/github/github-mcp-server"),
            ),
            (
                "podman run --rm -i --env=A=1 -v /a:/b docker.io/mcp/fetch@sha256:abc",
                oci("mcp/fetch"),
            ),
            ("docker run -it library/busybox:1", oci("busybox")),
            (
                "/home/u/.local/bin/mcp-server-fetch",
                Some(Launched::Command("mcp-server-fetch".into())),
            ),
            ("docker ps", None),
            ("npx", None),
            ("npm install x", None),
        ] {
            assert_eq!(launch(line), want, "{line}");
        }
    }

    #[test]
    fn known_packages_are_found_by_any_of_their_launches() {
        for (line, name) in [
            ("npx -y @modelcontextprotocol/server-github", "github"),
            (
                "docker run -i --rm ghcr.io/github/github-mcp-server",
                "github",
            ),
            (
                "npx -y @wonderwhy-er/desktop-commander@latest",
                "desktop-commander",
            ),
            ("uvx mcp-server-fetch", "fetch"),
            ("python -m mcp_server_fetch", "fetch"),
            ("mcp-server-fetch", "fetch"),
            ("uvx --from mcp-server-git mcp-server-git", "git"),
            ("npx -y mcp-server-kubernetes", "kubernetes"),
        ] {
            let mut words = line.split_whitespace();
            let command = words.next().unwrap();
            let args: Vec<String> = words.map(str::to_string).collect();
            let found = find(command, Path::new(command), &args);
            assert_eq!(found.map(|k| k.entry.name.as_str()), Some(name), "{line}");
        }
        assert_eq!(find("node", Path::new("/usr/bin/node"), &[]), None);
        // A bridge gets the host of the URL it is given, with the scheme's port.
        let args: Vec<String> = [
            "-y",
            "mcp-remote",
            "http://127.0.0.1:8931/mcp",
            "--header",
            "x",
        ]
        .map(String::from)
        .to_vec();
        let k = find("npx", Path::new("npx"), &args).unwrap();
        assert_eq!(k.hosts, ["127.0.0.1:8931"]);
        for (url, want) in [
            ("https://mcp.example.com/sse", Some("mcp.example.com:443")),
            ("http://[::1]/mcp", Some("[::1]:80")),
            ("https://user@x.org/", None),
            ("ftp://x.org", None),
        ] {
            assert_eq!(url_host(url).as_deref(), want, "{url}");
        }
        assert_eq!(
            find("npx", Path::new("npx"), &["-y".into(), "left-pad".into()]),
            None
        );
    }

    /// Every entry is usable and accounted for: a source for each fact, hosts that parse as
    /// allow-list entries, paths under `~` or absolute, unique names and packages.
    #[test]
    fn the_table_is_valid() {
        let table = parse(TABLE).unwrap();
        assert!(table.len() >= 40, "{} entries", table.len());
        let mut names = Vec::new();
        let mut packages = Vec::new();
        for e in &table {
            let at = &e.name;
            assert!(!names.contains(&e.name), "{at}: name twice");
            names.push(e.name.clone());
            let launches = e.npm.len() + e.pypi.len() + e.oci.len() + e.commands.len();
            assert!(launches > 0, "{at}: no package to match");
            for p in e.npm.iter().chain(&e.pypi).chain(&e.oci) {
                assert!(!packages.contains(p), "{at}: {p} in two entries");
                packages.push(p.clone());
            }
            for p in &e.pypi {
                assert_eq!(&pypi_name(p), p, "{at}: write PyPI names normalized");
            }
            for i in &e.oci {
                assert_eq!(&image_name(i), i, "{at}: write images without tag");
            }
            for h in &e.hosts {
                HostPattern::parse(h).unwrap_or_else(|m| panic!("{at}: host {h}: {m}"));
            }
            for p in e.write.iter().chain(&e.read) {
                assert!(
                    p.starts_with("~/") || p.starts_with('/'),
                    "{at}: {p} is neither under ~ nor absolute"
                );
                assert!(!p.contains(".."), "{at}: {p}");
            }
            for v in &e.env {
                assert!(
                    !v.is_empty() && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "{at}: {v}"
                );
            }
            let backed = |fact: &str| e.sources.iter().any(|s| s.facts.iter().any(|f| f == fact));
            for (fact, present) in [
                ("hosts", !e.hosts.is_empty()),
                ("anyHost", e.any_host),
                ("urlHosts", e.url_hosts),
                ("write", !e.write.is_empty()),
                ("read", !e.read.is_empty()),
                ("env", !e.env.is_empty()),
                ("notes", !e.notes.is_empty()),
            ] {
                assert!(!present || backed(fact), "{at}: no source for {fact}");
            }
            assert!(!e.sources.is_empty(), "{at}: no source");
            for s in &e.sources {
                assert!(!s.from.is_empty() && !s.facts.is_empty(), "{at}: {s:?}");
                for f in &s.facts {
                    assert!(
                        [
                            "hosts", "anyHost", "urlHosts", "write", "read", "env", "notes", "none"
                        ]
                        .contains(&f.as_str()),
                        "{at}: fact {f}"
                    );
                }
            }
        }
        // The ones issue 39's trial failed on, each matched.
        for name in [
            "desktop-commander",
            "playwright",
            "kubernetes",
            "basic-memory",
            "arxiv",
            "chroma",
            "mcp-remote",
            "fetch",
            "github",
            "notion",
            "context7",
            "firecrawl",
            "duckduckgo",
            "atlassian",
        ] {
            assert!(names.iter().any(|n| n == name), "no entry {name}");
        }
    }

    #[test]
    fn paths_are_taken_from_home() {
        let home = Path::new("/home/u");
        let list = vec!["~/.kube/config".to_string(), "/srv/x".into(), "rel".into()];
        assert_eq!(
            paths(&list, Some(home)),
            [
                PathBuf::from("/home/u/.kube/config"),
                PathBuf::from("/srv/x")
            ]
        );
        assert_eq!(paths(&list, None), [PathBuf::from("/srv/x")]);
    }
}
