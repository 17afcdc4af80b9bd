//! The environment a confined server starts with: a base set every server needs, its entry's
//! `env`, the names its profile passes through, and never a secret it was not given by name.

use crate::config::views::Globs;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Variables (names or `*` globs) every confined server inherits from the hub: the program
/// search path, who and where the user is, locale and terminal, and the package managers'
/// and language runtimes' own settings (where `npx`, `uvx`, `node` and `python` find their
/// installs, caches and certificates).
const BASE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "FORCE_COLOR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "NODE_*",
    "NPM_CONFIG_*",
    "npm_config_*",
    "NVM_*",
    "VOLTA_HOME",
    "PNPM_HOME",
    "BUN_INSTALL",
    "DENO_DIR",
    "COREPACK_*",
    "PYTHON*",
    "VIRTUAL_ENV",
    "CONDA_*",
    "UV_*",
    "PIP_*",
    "PIPX_*",
    "PYENV*",
    "POETRY_*",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOROOT",
    "GOMODCACHE",
    "GOFLAGS",
    "JAVA_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// What a container runtime's command line needs to find its daemon and its own config.
const CONTAINER: &[&str] = &[
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "CONTAINER_HOST",
    "CONTAINERS_CONF",
    "XDG_RUNTIME_DIR",
];

/// Proxy settings: the user's own pass only to servers with unrestricted network; a server
/// behind the egress proxy gets ours instead.
const PROXY: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
];

pub use crate::config::looks_secret;

/// The base set's globs, and with them a container runtime's, compiled once: every server
/// start tests each of the hub's variables against them.
fn inherited(container: bool) -> &'static Globs {
    static BASE_ONLY: OnceLock<Globs> = OnceLock::new();
    static WITH_CONTAINER: OnceLock<Globs> = OnceLock::new();
    let compile =
        |lists: &[&[&str]]| Globs::new(lists.concat().into_iter().map(String::from).collect());
    if container {
        WITH_CONTAINER.get_or_init(|| compile(&[BASE, CONTAINER]))
    } else {
        BASE_ONLY.get_or_init(|| compile(&[BASE]))
    }
}

/// What the server is given and what it is not.
#[derive(Debug, Default, PartialEq)]
pub struct Environment {
    /// The whole environment of the child, sorted by name.
    pub vars: Vec<(String, String)>,
    /// Names in the hub's environment the server does not get, sorted.
    pub withheld: Vec<String>,
}

/// How the environment is put together for one server.
pub struct EnvRequest<'a> {
    /// The hub's own environment.
    pub hub: &'a [(String, String)],
    /// The entry's `env` (always set, as written).
    pub entry: &'a [(String, String)],
    /// `sandbox.env` of the hub's profile and the entry.
    pub names: &'a [String],
    /// A container runtime's command line: its own variables pass too.
    pub container: bool,
    /// Unrestricted network: the user's proxy settings pass too.
    pub network_open: bool,
    /// Set by openpact itself (private TMPDIR, the egress proxy), over everything else.
    pub ours: &'a [(String, String)],
}

impl EnvRequest<'_> {
    pub fn build(&self) -> Environment {
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        let mut withheld = Vec::new();
        // `sandbox.env` holds names and globs (the config allows letters, digits, `_`, `*`).
        let named = Globs::new(self.names.to_vec());
        for (name, value) in self.hub {
            if self.passes(name, &named) {
                vars.insert(name.clone(), value.clone());
            } else {
                withheld.push(name.clone());
            }
        }
        for (name, value) in self.entry.iter().chain(self.ours) {
            withheld.retain(|w| w != name);
            vars.insert(name.clone(), value.clone());
        }
        withheld.sort();
        Environment {
            vars: vars.into_iter().collect(),
            withheld,
        }
    }

    fn passes(&self, name: &str, named: &Globs) -> bool {
        if self.names.iter().any(|n| n == name) {
            return true;
        }
        if PROXY.contains(&name) {
            return self.network_open;
        }
        if looks_secret(name) {
            return false;
        }
        inherited(self.container).matches(name) || named.matches(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn secrets_stay_home_unless_named_exactly() {
        let hub = pairs(&[
            ("PATH", "/usr/bin"),
            ("GITHUB_TOKEN", "t"),
            ("AWS_REGION", "eu"),
            ("NODE_AUTH_TOKEN", "n"),
            ("NODE_OPTIONS", "--x"),
            ("OPENAI_API_KEY", "k"),
            ("DB_PASSWORD", "p"),
            ("EDITOR", "vi"),
            ("HTTPS_PROXY", "http://corp:3128"),
            ("MY_SETTING", "1"),
        ]);
        let names = vec![
            "MY_*".to_string(),
            "OPENAI_API_KEY".to_string(),
            "NODE_*".to_string(),
        ];
        let env = EnvRequest {
            hub: &hub,
            entry: &pairs(&[("GITHUB_TOKEN", "from-entry")]),
            names: &names,
            container: false,
            network_open: false,
            ours: &pairs(&[("TMPDIR", "/tmp/x")]),
        }
        .build();
        let got: Vec<&str> = env.vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            got,
            [
                "GITHUB_TOKEN",
                "MY_SETTING",
                "NODE_OPTIONS",
                "OPENAI_API_KEY",
                "PATH",
                "TMPDIR"
            ]
        );
        assert!(
            env.vars
                .contains(&("GITHUB_TOKEN".into(), "from-entry".into()))
        );
        assert_eq!(
            env.withheld,
            [
                "AWS_REGION",
                "DB_PASSWORD",
                "EDITOR",
                "HTTPS_PROXY",
                "NODE_AUTH_TOKEN"
            ]
        );
    }

    #[test]
    fn proxy_and_container_variables_pass_only_where_they_belong() {
        let hub = pairs(&[
            ("HTTPS_PROXY", "http://corp:3128"),
            ("DOCKER_HOST", "unix:///x"),
        ]);
        let build = |container, network_open| {
            EnvRequest {
                hub: &hub,
                entry: &[],
                names: &[],
                container,
                network_open,
                ours: &[],
            }
            .build()
            .vars
            .len()
        };
        assert_eq!(build(false, false), 0);
        assert_eq!(build(true, true), 2);
    }

    #[test]
    fn globs() {
        let glob_matches = |pattern: &str, name| Globs::new(vec![pattern.into()]).matches(name);
        assert!(glob_matches("LC_*", "LC_ALL"));
        assert!(glob_matches("*_HOME", "JAVA_HOME"));
        assert!(glob_matches("A*B*C", "AxxBxxC"));
        assert!(!glob_matches("A*B*C", "AxxC"));
        assert!(!glob_matches("PATH", "PATHS"));
        assert!(!glob_matches("LC_*", "XLC_ALL"));
        // What the config lets through (letters, digits, `_`, `*`) means what it says.
        assert!(glob_matches("NODE_**", "NODE_OPTIONS"));
        assert!(glob_matches("*", "ANY"));
        assert!(looks_secret("gh_token") && looks_secret("AWS_REGION") && !looks_secret("PWD"));
    }
}
