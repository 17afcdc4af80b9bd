//! `vault_read`, `vault_write` and `vault_list` on disk, and the walk below a folder that
//! listing and search share.

use super::resolve;
use crate::builtins::ToolOutput;
use crate::builtins::workspace::{
    MAX_LIST_ENTRIES, ReadError, list_dir, listing, place, read_text, write_file,
};
use std::path::{Path, PathBuf};

pub(super) fn read_tool(root: &Path, user: &str, max: u64) -> ToolOutput {
    let user = user.trim();
    let (full, _) = match resolve(root, user, "failed to read file") {
        Ok(p) => p,
        Err(out) => return out,
    };
    match read_text(&full, max) {
        Ok(t) => ToolOutput::ok(t.with_marker()),
        Err(ReadError::NotFound) => ToolOutput::error(format!("file not found: {user}")),
        Err(e) => ToolOutput::error(format!("failed to read file: {}", e.describe(user))),
    }
}

/// Writes the note; returns its path relative to the vault root (for git).
pub(super) fn write_note(root: &Path, user: &str, content: &str) -> Result<PathBuf, ToolOutput> {
    // `.git` is checked on the resolved path (so a symlink into .git is caught too), before
    // `place` creates any folder, and again after.
    let (_, rel) = resolve(root, user, "failed to write file")?;
    if rel.as_os_str().is_empty() {
        return Err(ToolOutput::error(format!(
            "failed to write file: {user} is a directory"
        )));
    }
    let full = place(root, user, "vault")?;
    let (again, rel) = resolve(root, user, "failed to write file")?;
    if again != full {
        return Err(ToolOutput::error("path escapes vault"));
    }
    write_file(&full, content.as_bytes())
        .map_err(|e| ToolOutput::error(format!("failed to write file: {user}: {e}")))?;
    Ok(rel)
}

pub(super) fn list_tool(root: &Path, user: &str, recursive: bool) -> ToolOutput {
    let user = user.trim();
    let shown = if user.is_empty() { "." } else { user };
    let (dir, _) = match resolve(root, shown, "failed to list directory") {
        Ok(p) => p,
        Err(out) => return out,
    };
    let result = if recursive {
        let mut entries = Vec::new();
        let mut truncated = false;
        walk(root_canon(root).as_deref(), &dir, &mut |rel, is_dir| {
            if entries.len() == MAX_LIST_ENTRIES {
                truncated = true;
                return false;
            }
            if is_dir {
                entries.push(format!("{rel}/"));
            } else if is_markdown(rel) {
                entries.push(rel.to_string());
            }
            true
        })
        .map(|()| (entries, truncated))
    } else {
        list_dir(&dir, true)
    };
    match result {
        Ok((entries, truncated)) => listing(shown, entries, truncated, Some(recursive)),
        Err(e) => ToolOutput::error(format!("failed to list directory: {shown}: {e}")),
    }
}

pub(super) fn root_canon(root: &Path) -> Option<PathBuf> {
    root.canonicalize().ok()
}

pub(super) fn is_markdown(name: &str) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
}

/// Depth-first, sorted walk below `dir`, skipping hidden names and not following symlinks
/// (so no loops and no way out). `visit(path from the vault root, is_dir)` returns false to
/// stop. Unreadable subfolders are skipped; only `dir` itself failing is an error.
pub(super) fn walk(
    root: Option<&Path>,
    dir: &Path,
    visit: &mut dyn FnMut(&str, bool) -> bool,
) -> std::io::Result<()> {
    fn inner(
        root: Option<&Path>,
        dir: &Path,
        visit: &mut dyn FnMut(&str, bool) -> bool,
        top: bool,
    ) -> std::io::Result<bool> {
        let read = match std::fs::read_dir(dir) {
            Ok(r) => r,
            Err(e) if top => return Err(e),
            Err(_) => return Ok(true),
        };
        let mut entries: Vec<_> = read
            .filter_map(Result::ok)
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let Ok(ty) = e.file_type() else { continue };
            let path = e.path();
            let rel = root
                .and_then(|r| path.strip_prefix(r).ok())
                .unwrap_or(&path)
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            if ty.is_dir() {
                if !visit(&rel, true) || !inner(root, &path, visit, false)? {
                    return Ok(false);
                }
            } else if ty.is_file() && !visit(&rel, false) {
                return Ok(false);
            }
        }
        Ok(true)
    }
    inner(root, dir, visit, true).map(|_| ())
}
