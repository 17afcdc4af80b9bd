//! The places of a machine the default profile names: where credentials live (never
//! readable), what is private to one server (temp dirs, the user's runtime dir), and where
//! the package managers keep their shared caches (read-only to a confined server).

use std::path::{Path, PathBuf};

/// Under the home directory: keys, tokens, cookies and shell histories. A profile can still
/// grant one of these by naming it (or a path inside it) in `filesystem.read` or `write`.
const HOME_CREDENTIALS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gh",
    ".config/hub",
    ".password-store",
    ".local/share/keyrings",
    ".pki",
    ".vault-token",
    ".terraform.d",
    ".config/op",
    ".mozilla",
    ".thunderbird",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    "snap/firefox",
    "snap/chromium",
    ".var/app",
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
];

/// Outside the home directory: secrets mounted by container platforms.
const SYSTEM_CREDENTIALS: &[&str] = &["/run/secrets", "/var/run/secrets"];

/// The caches the package managers share between the user, unconfined servers and the
/// user's own terminal (`npx`, `uvx`, `pip`, `pnpm`, `bun`, `yarn`): what is in them is run
/// later by all of those, so a confined server only reads them.
const HOME_CACHES: &[&str] = &[
    ".npm",
    ".cache",
    ".local/share/uv",
    ".local/share/pnpm",
    ".local/share/pipx",
    ".bun/install/cache",
    ".yarn/berry/cache",
];

/// The variables that send each package manager's cache — and what a one-off run installs
/// there and runs (npm's `_npx`, uv's tool environments, `pipx run`'s venvs) — to `root`, a
/// folder of the server's own, by tool: each tool's documented variable. pnpm's are npm's
/// setting names, which npm warns about when it runs ("Unknown env config … will stop
/// working"): they are set only for a pnpm launch (`pnpm`).
pub fn private_cache_vars(root: &Path, pnpm: bool) -> Vec<(String, String)> {
    let at = |sub: &str| root.join(sub).display().to_string();
    [
        // npm reads its settings from `npm_config_*` in any case: both spellings, so that a
        // user's `NPM_CONFIG_CACHE` passed through cannot win by the order npm reads them.
        ("npm_config_cache", at("npm")),
        ("NPM_CONFIG_CACHE", at("npm")),
        ("YARN_CACHE_FOLDER", at("yarn")),
        ("YARN_GLOBAL_FOLDER", at("yarn/global")),
        ("BUN_INSTALL_CACHE_DIR", at("bun")),
        ("COREPACK_HOME", at("corepack")),
        ("DENO_DIR", at("deno")),
        ("UV_CACHE_DIR", at("uv")),
        ("UV_TOOL_DIR", at("uv/tools")),
        ("UV_TOOL_BIN_DIR", at("uv/bin")),
        ("PIP_CACHE_DIR", at("pip")),
        ("PIPX_HOME", at("pipx")),
        ("PIPX_BIN_DIR", at("pipx/bin")),
    ]
    .into_iter()
    // pnpm: its package store and `pnpm dlx`'s cache.
    .chain(
        [
            ("npm_config_store_dir", at("pnpm/store")),
            ("npm_config_cache_dir", at("pnpm/cache")),
        ]
        .into_iter()
        .filter(|_| pnpm),
    )
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

pub use crate::config::sandbox::made_at_start;

/// The credential places for this home directory and machine.
pub fn credentials(home: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = SYSTEM_CREDENTIALS.iter().map(PathBuf::from).collect();
    if let Some(home) = home {
        out.extend(HOME_CREDENTIALS.iter().map(|p| home.join(p)));
    }
    out
}

/// Shared scratch places one server must not read from another: the temp roots (each
/// server gets a private dir inside) and the user's runtime dir (agent and bus sockets).
pub fn private(runtime_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/tmp"), PathBuf::from("/var/tmp")];
    let temp = std::env::temp_dir();
    if !out.contains(&temp) {
        out.push(temp);
    }
    match runtime_dir {
        Some(dir) => out.push(dir.to_path_buf()),
        None => out.push(PathBuf::from(format!(
            "/run/user/{}",
            crate::platform::uid()
        ))),
    }
    out
}

/// The shared package caches of this home that exist, `XDG_CACHE_HOME` included when it is
/// set elsewhere.
pub fn shared_caches(home: Option<&Path>, xdg_cache: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = match home {
        Some(home) => HOME_CACHES
            .iter()
            .map(|p| home.join(p))
            .filter(|p| p.exists())
            .collect(),
        None => Vec::new(),
    };
    if let Some(dir) = xdg_cache
        && !out.iter().any(|p| p == dir)
        && dir.exists()
    {
        out.push(dir.to_path_buf());
    }
    out
}

/// The system's own folders: never writable because a server's arguments name a file there.
const SYSTEM: &[&str] = &[
    "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/proc",
    "/sys", "/snap", "/nix",
];

/// Too broad to hand a server just because it is its working directory or appears in its
/// arguments: the root, the home directory and what contains it, the temp roots, and the
/// system's own folders.
pub fn too_broad(dir: &Path, home: Option<&Path>) -> bool {
    dir == Path::new("/")
        || home.is_some_and(|h| h.starts_with(dir))
        || private(None).iter().any(|p| p == dir)
        || SYSTEM.iter().any(|s| dir.starts_with(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pnpm_settings_only_for_a_pnpm_launch() {
        let names = |pnpm| -> Vec<String> {
            private_cache_vars(Path::new("/c"), pnpm)
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        };
        // npm warns about settings it does not know, and says it will refuse them.
        assert!(!names(false).iter().any(|k| k.contains("store_dir")));
        assert!(names(false).contains(&"npm_config_cache".to_string()));
        assert!(names(true).contains(&"npm_config_store_dir".to_string()));
    }
}
