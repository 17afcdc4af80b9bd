//! Keeping file access inside a root (workspace, vault, scripts): a user path is resolved
//! against the canonical root component by component; `..` that climbs out, absolute paths,
//! and symlinks that lead outside are refused. A sibling such as `ai-data-evil` never passes
//! for `ai-data`, because components are compared, not string prefixes.

use std::path::{Component, Path, PathBuf};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("path is required")]
    Empty,
    #[error("path escapes {0}")]
    Escapes(&'static str),
    #[error("{0}")]
    Io(String),
}

/// Resolves `user` inside `root` (which must exist). `what` names the root in errors
/// ("workspace", "vault"). The result may not exist yet (for writes), but every part of it
/// that does exist is checked through symlinks.
pub fn resolve(root: &Path, user: &str, what: &'static str) -> Result<PathBuf, PathError> {
    let user = user.trim();
    if user.is_empty() {
        return Err(PathError::Empty);
    }
    let root = root
        .canonicalize()
        .map_err(|e| PathError::Io(format!("{what} root {}: {e}", root.display())))?;
    let mut out = root.clone();
    for c in Path::new(user).components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if out == root {
                    return Err(PathError::Escapes(what));
                }
                out.pop();
            }
            Component::RootDir | Component::Prefix(_) => return Err(PathError::Escapes(what)),
        }
    }
    // Follow symlinks for the part that exists; it must still be inside the root.
    let mut existing = out.as_path();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => break,
        }
    }
    let real = existing
        .canonicalize()
        .map_err(|e| PathError::Io(e.to_string()))?;
    if !real.starts_with(&root) {
        return Err(PathError::Escapes(what));
    }
    let mut full = real;
    for name in rest.into_iter().rev() {
        full.push(name);
    }
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traversal_absolute_symlinks_and_siblings_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("ai-data");
        std::fs::create_dir_all(root.join("notes")).unwrap();
        std::fs::create_dir_all(tmp.path().join("ai-data-evil")).unwrap();
        std::fs::write(tmp.path().join("secret.txt"), "x").unwrap();
        let r = |p: &str| resolve(&root, p, "workspace");
        let canon = root.canonicalize().unwrap();
        assert_eq!(r("notes/a.md").unwrap(), canon.join("notes/a.md"));
        assert_eq!(r("./notes/../b.md").unwrap(), canon.join("b.md"));
        assert_eq!(r("new/dir/c.md").unwrap(), canon.join("new/dir/c.md"));
        assert_eq!(r("../secret.txt"), Err(PathError::Escapes("workspace")));
        assert_eq!(r("../ai-data-evil/x"), Err(PathError::Escapes("workspace")));
        assert_eq!(
            r("notes/../../secret.txt"),
            Err(PathError::Escapes("workspace"))
        );
        assert_eq!(r("/etc/passwd"), Err(PathError::Escapes("workspace")));
        assert_eq!(r(""), Err(PathError::Empty));
        std::os::unix::fs::symlink(tmp.path(), root.join("out")).unwrap();
        assert_eq!(r("out/secret.txt"), Err(PathError::Escapes("workspace")));
        assert_eq!(r("out/new-file"), Err(PathError::Escapes("workspace")));
        std::os::unix::fs::symlink(root.join("notes"), root.join("inside")).unwrap();
        assert_eq!(r("inside/x.md").unwrap(), canon.join("notes/x.md"));
    }
}
