//! Files in the state dir: created private (0700 dirs, 0600 files) and written atomically
//! (temp file + rename), so a reader or a second openpact process never sees half a file;
//! and the exclusive locks writers hold around a read-change-replace of one, or a process
//! holds for its life.

use crate::platform;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Creates `dir` (and parents) readable only by the user, if missing.
pub fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    platform::create_dir_all(dir, 0o700)
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
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let existing = match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory",
            ));
        }
        Ok(m) if keep_mode => Some(platform::mode(&m)),
        _ => None,
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique per process and call, so two writers never share a temp file.
    let tmp = dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), unique()));
    let result = (|| {
        let mut f = platform::create_mode(
            std::fs::OpenOptions::new().write(true).create_new(true),
            existing.unwrap_or(mode),
        )
        .open(&tmp)?;
        if let Some(mode) = existing {
            // The umask applied at creation; an overwrite keeps exactly what the file had.
            platform::set_file_mode(&f, mode)?;
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

/// An exclusive lock on a lock file, held until dropped: closing the file releases it (std's
/// `File::lock`, which is `flock` on unix and `LockFileEx` on Windows; the lock files hold
/// nothing, so whether other readers are kept out does not matter).
#[must_use = "the lock is released when this is dropped"]
pub struct Lock {
    _file: File,
}

/// Why a lock file was not locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("cannot open {path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot lock {path}: {source}")]
    Lock {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is locked by another process")]
    Held { path: String },
}

/// Blocks until this process holds an exclusive lock on `lock_path` (created, with its dir,
/// if missing), released on drop. A writer that re-reads, changes and replaces a state file
/// under it never loses another process's change; readers need no lock, as the file is only
/// ever replaced whole.
pub fn lock_exclusive(lock_path: &Path) -> std::io::Result<Lock> {
    ensure_dir(lock_path.parent().unwrap_or_else(|| Path::new(".")))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path)?;
    file.lock()?;
    Ok(Lock { _file: file })
}

/// Blocks until this process holds an exclusive lock on `lock_path`, created private (0600)
/// if missing in its existing dir.
pub fn lock_private(lock_path: &Path) -> Result<Lock, LockError> {
    let file = open_private(lock_path)?;
    match file.lock() {
        Ok(()) => Ok(Lock { _file: file }),
        Err(source) => Err(LockError::Lock {
            path: lock_path.display().to_string(),
            source,
        }),
    }
}

/// [`lock_private`] without waiting: [`LockError::Held`] when another process holds it.
pub fn try_lock_private(lock_path: &Path) -> Result<Lock, LockError> {
    let file = open_private(lock_path)?;
    match file.try_lock() {
        Ok(()) => Ok(Lock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(LockError::Held {
            path: lock_path.display().to_string(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(LockError::Lock {
            path: lock_path.display().to_string(),
            source,
        }),
    }
}

fn open_private(lock_path: &Path) -> Result<File, LockError> {
    platform::create_mode(
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true),
        0o600,
    )
    .open(lock_path)
    .map_err(|source| LockError::Open {
        path: lock_path.display().to_string(),
        source,
    })
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_is_private_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/state.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(
            platform::mode(&std::fs::metadata(&p).unwrap()) & 0o777,
            0o600
        );
        assert_eq!(
            platform::mode(&std::fs::metadata(p.parent().unwrap()).unwrap()) & 0o777,
            0o700
        );
        let leftovers: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn a_held_lock_is_refused_without_waiting_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.lock");
        let held = try_lock_private(&path).unwrap();
        assert_eq!(
            platform::mode(&std::fs::metadata(&path).unwrap()) & 0o777,
            0o600
        );
        // A second open file stands for a second process, as `flock` counts them.
        assert!(matches!(
            try_lock_private(&path),
            Err(LockError::Held { .. })
        ));
        drop(held);
        let _again = try_lock_private(&path).unwrap();
        assert!(matches!(
            try_lock_private(&dir.path().join("missing/hub.lock")),
            Err(LockError::Open { .. })
        ));
    }
}
