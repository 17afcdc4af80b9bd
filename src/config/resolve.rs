//! Turning a server's expanded `command` and `cwd` into checked absolute paths.

use std::path::{Path, PathBuf};

/// `~` and `~/…` become the home directory; `Err` when HOME is needed but unset.
pub(crate) fn tilde(text: String, home: Option<String>) -> Result<String, String> {
    let rest = if text == "~" {
        ""
    } else if let Some(rest) = text.strip_prefix("~/") {
        rest
    } else {
        return Ok(text);
    };
    match home.filter(|h| !h.is_empty()) {
        Some(home) if rest.is_empty() => Ok(home),
        Some(home) => Ok(format!("{}/{rest}", home.trim_end_matches('/'))),
        None => Err(format!(
            "`{text}` needs HOME, which is not set; give an absolute path"
        )),
    }
}

/// `path` taken from `base_dir` when relative, without `.` components: `./ai-data` beside
/// the config is `DIR/ai-data`, not `DIR/./ai-data`.
pub(crate) fn beside(base_dir: &Path, path: &str) -> PathBuf {
    base_dir.join(path).components().collect()
}

/// An absolute `cwd` for the child; relative ones are taken from the config file's directory.
pub(crate) fn cwd(expanded: &str, base_dir: &Path, check: bool) -> Result<PathBuf, String> {
    if expanded.is_empty() {
        return Err("cwd is empty; remove it or give a directory".to_string());
    }
    let full = beside(base_dir, expanded);
    if check {
        if !full.exists() {
            return Err(format!(
                "directory {} does not exist; create it or fix the path",
                full.display()
            ));
        }
        if !full.is_dir() {
            return Err(format!(
                "{} is not a directory; point cwd at a directory",
                full.display()
            ));
        }
    }
    Ok(full)
}

fn has_separator(command: &str) -> bool {
    command.contains('/') || (cfg!(windows) && command.contains('\\'))
}

/// Finds the program the child will run, the way the child's own PATH (`path`) and
/// working directory (`cwd`) would.
pub(crate) fn program(command: &str, path: Option<&str>, cwd: &Path) -> Result<PathBuf, String> {
    if command.is_empty() {
        return Err("command is empty; give the program to run".to_string());
    }
    if has_separator(command) {
        let full = cwd.join(command);
        return match which::which_in(command, path, cwd) {
            Ok(found) => Ok(found),
            Err(_) if !full.exists() => Err(format!(
                "`{command}` does not exist (looked for {}); fix the path",
                full.display()
            )),
            Err(_) if full.is_dir() => Err(format!(
                "`{command}` is a directory ({}); give the program inside it",
                full.display()
            )),
            Err(_) => Err(format!(
                "`{command}` is not executable ({}); chmod +x it",
                full.display()
            )),
        };
    }
    which::which_in(command, path, cwd).map_err(|_| {
        let shown = match path {
            Some(p) if !p.is_empty() => p,
            _ => "PATH is not set",
        };
        format!("`{command}` was not found on PATH ({shown}); install it or give its full path")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn executable(path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn tilde_expansion() {
        let home = || Some("/home/u".to_string());
        assert_eq!(tilde("~/bin/x".into(), home()).unwrap(), "/home/u/bin/x");
        assert_eq!(tilde("~".into(), home()).unwrap(), "/home/u");
        assert_eq!(
            tilde("~/x".into(), Some("/home/u/".into())).unwrap(),
            "/home/u/x"
        );
        assert_eq!(tilde("~user/x".into(), home()).unwrap(), "~user/x");
        assert_eq!(tilde("a/~/b".into(), home()).unwrap(), "a/~/b");
        assert!(tilde("~/x".into(), None).unwrap_err().contains("HOME"));
    }

    #[test]
    fn cwd_checks() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::write(tmp.path().join("f"), "").unwrap();
        assert_eq!(cwd("d", tmp.path(), true).unwrap(), tmp.path().join("d"));
        assert!(
            cwd("f", tmp.path(), true)
                .unwrap_err()
                .contains("not a directory")
        );
        assert!(
            cwd("missing", tmp.path(), true)
                .unwrap_err()
                .contains("does not exist")
        );
        assert_eq!(
            cwd("missing", tmp.path(), false).unwrap(),
            tmp.path().join("missing")
        );
        assert_eq!(
            cwd("/abs", tmp.path(), true).is_err(),
            !Path::new("/abs").is_dir()
        );
    }

    #[cfg(unix)]
    #[test]
    fn programs_by_path_and_relative() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        executable(&bin.join("tool"));
        std::fs::write(bin.join("plain"), "").unwrap();
        let path = bin.to_str().unwrap();

        assert_eq!(
            program("tool", Some(path), tmp.path()).unwrap(),
            bin.join("tool")
        );
        assert_eq!(
            program("./bin/tool", None, tmp.path()).unwrap(),
            bin.join("tool")
        );
        let abs = bin.join("tool");
        assert_eq!(
            program(abs.to_str().unwrap(), None, Path::new("/")).unwrap(),
            abs
        );

        let err = program("nope", Some("/a:/b"), tmp.path()).unwrap_err();
        assert_eq!(
            err,
            "`nope` was not found on PATH (/a:/b); install it or give its full path"
        );
        assert!(
            program("nope", None, tmp.path())
                .unwrap_err()
                .contains("PATH is not set")
        );
        assert!(
            program("./bin/plain", None, tmp.path())
                .unwrap_err()
                .contains("not executable")
        );
        assert!(
            program("./bin/gone", None, tmp.path())
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(
            program("./bin", None, tmp.path())
                .unwrap_err()
                .contains("is a directory")
        );
        assert!(
            program("", Some(path), tmp.path())
                .unwrap_err()
                .contains("empty")
        );
    }
}
