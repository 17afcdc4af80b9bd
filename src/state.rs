//! Files in the state dir: created private (0700 dirs, 0600 files) and written atomically
//! (temp file + rename), so a reader or a second openpact process never sees half a file;
//! and the exclusive lock writers hold around a read-change-replace of one.

use nix::fcntl::{Flock, FlockArg};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// Creates `dir` (and parents) readable only by the user, if missing.
pub fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Replaces `path` with `bytes` in one step: readers see the old or the new file, never a mix.
/// The file is private (0600): state files may hold decisions, tokens, audit records.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    ensure_dir(path.parent().unwrap_or_else(|| Path::new(".")))?;
    replace(path, bytes, 0o600, false)
}

/// [`write_atomic`] without the sync to disk, for files that describe a running process
/// (its live status) and mean nothing after a crash: readers still never see half a file,
/// and a rewrite costs no disk flush.
pub fn write_volatile(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    ensure_dir(path.parent().unwrap_or_else(|| Path::new(".")))?;
    write_then_rename(path, bytes, 0o600, false, false)
}

/// Writes `bytes` to a temp file beside `path` with `mode` (or, with `keep_mode`, the mode
/// the existing file has), syncs it and renames it over `path`.
pub fn replace(path: &Path, bytes: &[u8], mode: u32, keep_mode: bool) -> std::io::Result<()> {
    write_then_rename(path, bytes, mode, keep_mode, true)
}

fn write_then_rename(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    keep_mode: bool,
    durable: bool,
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let existing = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        Ok(m) if keep_mode => Some(m.permissions().mode() & 0o7777),
        _ => None,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique per process and call, so two writers never share a temp file.
    let tmp = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), unique()));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(existing.unwrap_or(mode))
            .open(&tmp)?;
        if let Some(mode) = existing {
            // The umask applied at creation; an overwrite keeps exactly what the file had.
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Blocks until this process holds an exclusive `flock` on `lock_path` (created, with its
/// dir, if missing), released on drop. A writer that re-reads, changes and replaces a state
/// file under it never loses another process's change; readers need no lock, as the file is
/// only ever replaced whole.
pub fn lock_exclusive(lock_path: &Path) -> std::io::Result<Flock<std::fs::File>> {
    ensure_dir(lock_path.parent().unwrap_or_else(|| Path::new(".")))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path)?;
    Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| errno.into())
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn atomic_write_is_private_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/state.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            std::fs::metadata(p.parent().unwrap())
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        let leftovers: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }
}
