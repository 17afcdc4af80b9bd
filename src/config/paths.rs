//! Where the config file and the state directory live (flags, environment, XDG, platform defaults).

use super::{ConfigError, Problem};
use std::path::{Path, PathBuf};

/// The config file name looked for in the working directory and the user config dir.
pub const FILE_NAME: &str = "mcp.json";
const APP: &str = "openpact";

fn non_empty(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.is_empty())
}

fn must_exist(path: &Path, cwd: &Path, label: &str, how: &str) -> Result<PathBuf, ConfigError> {
    let full = cwd.join(path);
    if full.is_file() {
        return Ok(full);
    }
    let message = if full.exists() {
        format!("is not a file; {how} must name a JSON config file")
    } else {
        format!("config file not found; check {how}")
    };
    Err(ConfigError::from(Problem {
        file: label.to_string(),
        path: String::new(),
        message,
    }))
}

/// The config file to read: `--config`, else `$OPENPACT_CONFIG`, else `./mcp.json`,
/// else the user config dir's `openpact/mcp.json`, else `None` (run an empty hub).
pub fn locate(
    explicit: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
    cwd: &Path,
) -> Result<Option<PathBuf>, ConfigError> {
    if let Some(path) = explicit {
        let label = path.display().to_string();
        return must_exist(path, cwd, &label, "the --config path").map(Some);
    }
    if let Some(value) = non_empty(env, "OPENPACT_CONFIG") {
        return must_exist(
            Path::new(&value),
            cwd,
            &value,
            "$OPENPACT_CONFIG (or unset it)",
        )
        .map(Some);
    }
    let local = cwd.join(FILE_NAME);
    if local.is_file() {
        return Ok(Some(local));
    }
    let user = user_config_dir(env).map(|dir| dir.join(FILE_NAME));
    Ok(user.filter(|p| p.is_file()))
}

/// Where a user's own config goes (`~/.config/openpact/mcp.json`), for messages that
/// suggest creating one.
pub fn user_config_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    user_config_dir(env).map(|dir| dir.join(FILE_NAME))
}

/// `$XDG_CONFIG_HOME/openpact` when the lookup has it, else the platform's config dir.
/// A set `XDG_CONFIG_HOME` is authoritative (as the XDG spec says), which also keeps
/// an injected lookup from falling through to the real user's files.
fn user_config_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(xdg) = non_empty(env, "XDG_CONFIG_HOME") {
        return Some(PathBuf::from(xdg).join(APP));
    }
    directories::ProjectDirs::from("", "", APP).map(|dirs| dirs.config_dir().to_path_buf())
}

/// Where OpenPact's built-in tools keep their files when no config file says where (the
/// workspace `ai-data` and its scripts): `$XDG_DATA_HOME/openpact`, else the platform's data
/// dir (usually `~/.local/share/openpact`). Never the working directory, which for an
/// editor-launched hub is wherever the editor happened to start.
pub fn data_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(xdg) = non_empty(env, "XDG_DATA_HOME") {
        return PathBuf::from(xdg).join(APP);
    }
    if let Some(dirs) = directories::ProjectDirs::from("", "", APP) {
        return dirs.data_dir().to_path_buf();
    }
    match non_empty(env, "HOME") {
        Some(home) => PathBuf::from(home).join(".local/share").join(APP),
        None => std::env::temp_dir().join(APP),
    }
}

/// Where what can be made again is kept (the confined servers' private package caches):
/// `$XDG_CACHE_HOME/openpact`, else the platform's cache dir (usually `~/.cache/openpact`).
pub fn cache_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(xdg) = non_empty(env, "XDG_CACHE_HOME") {
        return PathBuf::from(xdg).join(APP);
    }
    if let Some(dirs) = directories::ProjectDirs::from("", "", APP) {
        return dirs.cache_dir().to_path_buf();
    }
    match non_empty(env, "HOME") {
        Some(home) => PathBuf::from(home).join(".cache").join(APP),
        None => std::env::temp_dir().join(APP),
    }
}

/// Where persistent state goes: `--state-dir`, else `$OPENPACT_STATE_DIR`, else
/// `$XDG_STATE_HOME/openpact`, else the platform state dir (or local data dir where
/// the platform has none). Nothing is created here.
pub fn state_dir(explicit: Option<&Path>, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    if let Some(dir) = non_empty(env, "OPENPACT_STATE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(xdg) = non_empty(env, "XDG_STATE_HOME") {
        return PathBuf::from(xdg).join(APP);
    }
    if let Some(dirs) = directories::ProjectDirs::from("", "", APP) {
        return match dirs.state_dir() {
            Some(dir) => dir.to_path_buf(),
            None => dirs.data_local_dir().to_path_buf(),
        };
    }
    // No home directory at all (e.g. a bare container user): still return somewhere usable.
    match non_empty(env, "HOME") {
        Some(home) => PathBuf::from(home).join(".local/state").join(APP),
        None => std::env::temp_dir().join(APP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::env_of;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "{}").unwrap();
    }

    #[test]
    fn locate_order() {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path().join("work");
        let xdg = tmp.path().join("xdg");
        let explicit = tmp.path().join("explicit.json");
        let from_env = tmp.path().join("env.json");
        let local = cwd.join("mcp.json");
        let user = xdg.join("openpact/mcp.json");
        for p in [&explicit, &from_env, &local, &user] {
            touch(p);
        }
        let xdg_s = xdg.to_str().unwrap();
        let env_s = from_env.to_str().unwrap();
        let full = env_of(&[("XDG_CONFIG_HOME", xdg_s), ("OPENPACT_CONFIG", env_s)]);
        let no_var = env_of(&[("XDG_CONFIG_HOME", xdg_s)]);

        assert_eq!(
            locate(Some(&explicit), &full, &cwd).unwrap(),
            Some(explicit.clone())
        );
        assert_eq!(locate(None, &full, &cwd).unwrap(), Some(from_env.clone()));
        // An empty OPENPACT_CONFIG counts as unset.
        let empty_var = env_of(&[("XDG_CONFIG_HOME", xdg_s), ("OPENPACT_CONFIG", "")]);
        assert_eq!(locate(None, &empty_var, &cwd).unwrap(), Some(local.clone()));
        assert_eq!(locate(None, &no_var, &cwd).unwrap(), Some(local.clone()));
        std::fs::remove_file(&local).unwrap();
        assert_eq!(locate(None, &no_var, &cwd).unwrap(), Some(user.clone()));
        std::fs::remove_file(&user).unwrap();
        assert_eq!(locate(None, &no_var, &cwd).unwrap(), None);
    }

    #[test]
    fn relative_explicit_is_relative_to_cwd() {
        let tmp = tempfile::tempdir().unwrap();
        touch(&tmp.path().join("sub/c.json"));
        let env = env_of(&[]);
        assert_eq!(
            locate(Some(Path::new("sub/c.json")), &env, tmp.path()).unwrap(),
            Some(tmp.path().join("sub/c.json"))
        );
    }

    #[test]
    fn missing_explicit_or_env_file_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        touch(&tmp.path().join("mcp.json"));
        let env = env_of(&[]);
        let err = locate(Some(Path::new("nope.json")), &env, tmp.path()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "nope.json: config file not found; check the --config path"
        );
        let env = env_of(&[("OPENPACT_CONFIG", "/definitely/not/here.json")]);
        let err = locate(None, &env, tmp.path()).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/definitely/not/here.json: config file not found")
        );
        // A directory is not a config file.
        let err = locate(Some(tmp.path()), &env, tmp.path()).unwrap_err();
        assert!(err.to_string().contains("is not a file"), "{err}");
    }

    #[test]
    fn state_dir_order() {
        let env = env_of(&[
            ("OPENPACT_STATE_DIR", "/s/explicit-env"),
            ("XDG_STATE_HOME", "/x"),
        ]);
        assert_eq!(
            state_dir(Some(Path::new("/flag")), &env),
            PathBuf::from("/flag")
        );
        assert_eq!(state_dir(None, &env), PathBuf::from("/s/explicit-env"));
        let env = env_of(&[("OPENPACT_STATE_DIR", ""), ("XDG_STATE_HOME", "/x")]);
        assert_eq!(state_dir(None, &env), PathBuf::from("/x/openpact"));
        let env = env_of(&[]);
        assert!(state_dir(None, &env).ends_with("openpact"));
    }
}
