//! Git as the vault tests drive it: commands under a fixed test identity, and a vault cloned
//! from a local bare repository with a first commit pushed.
//!
//! Two test crates compile this one file: the integration binary (as `support::git`) and the
//! library's unit tests (through `#[path]` from `src/builtins/vault/tests/sync.rs`), so it
//! uses nothing but std.

use std::path::{Path, PathBuf};

/// `git -c identity … ARGS` in `dir`, asserting success; returns stdout.
pub fn sh_git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `git --git-dir BARE ARGS`, run beside the bare repository.
pub fn bare_git(bare: &Path, args: &[&str]) -> String {
    let mut all = vec!["--git-dir", bare.to_str().unwrap()];
    all.extend_from_slice(args);
    sh_git(bare.parent().unwrap(), &all)
}

/// Clones `bare` into `dir/name`; returns the clone's path.
pub fn clone_of(bare: &Path, dir: &Path, name: &str) -> PathBuf {
    let into = dir.join(name);
    sh_git(
        dir,
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            into.to_str().unwrap(),
        ],
    );
    into
}

/// A bare `dir/origin.git` and a clone of it, `dir/vault`, with an identity in its own
/// config (as a real vault needs) and `files` (path, content) pushed as its first commit.
/// Returns both paths.
pub fn synced_vault(dir: &Path, files: &[(&str, &str)]) -> (PathBuf, PathBuf) {
    let bare = dir.join("origin.git");
    sh_git(dir, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    let vault = clone_of(&bare, dir, "vault");
    for (k, v) in [
        ("user.name", "Vault Bot"),
        ("user.email", "vault@example.invalid"),
        ("commit.gpgsign", "false"),
    ] {
        sh_git(&vault, &["config", k, v]);
    }
    for (path, content) in files {
        let path = vault.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    sh_git(&vault, &["add", "."]);
    sh_git(&vault, &["commit", "-q", "-m", "init"]);
    sh_git(&vault, &["push", "-q", "-u", "origin", "HEAD"]);
    (bare, vault)
}
