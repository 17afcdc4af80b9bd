//! Files in the state dir: created private (0700 dirs, 0600 files) and written atomically
//! (temp file + rename), so a reader or a second openpact process never sees half a file;
//! and the exclusive locks writers hold around a read-change-replace of one, or a process
//! holds for its life; and [`JsonStore`], a JSON file several processes change under such a
//! lock.

use crate::platform;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::File;
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

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

/// A JSON file of records that several openpact processes change (the hub, a CLI command):
/// each change takes an exclusive lock on a lock file beside it, re-reads the file, changes it
/// and replaces it atomically (private, 0600), so no process loses another's change and no
/// reader sees a torn file. Reads need no lock: the file is only ever replaced whole. A file
/// that does not parse is an error, on reads and changes alike, and is never replaced: an
/// empty store read from a damaged file would silently forget every record.
pub struct JsonStore<F> {
    path: PathBuf,
    lock_path: PathBuf,
    /// What the file holds, as its errors name it ("approvals", "decisions").
    what: &'static str,
    file: PhantomData<fn() -> F>,
}

/// Why a [`JsonStore`] could not be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a valid {what} file ({source}); move it aside to start afresh")]
    Corrupt {
        path: String,
        what: &'static str,
        source: serde_json::Error,
    },
}

impl<F: Serialize + DeserializeOwned + Default> JsonStore<F> {
    /// The store in `file_name` in `state_dir`, locked through `lock_name` beside it.
    pub fn new(
        state_dir: &Path,
        file_name: &str,
        lock_name: &str,
        what: &'static str,
    ) -> JsonStore<F> {
        JsonStore {
            path: state_dir.join(file_name),
            lock_path: state_dir.join(lock_name),
            what,
            file: PhantomData,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// The file as it is now; a missing or empty file is an empty store.
    pub fn read(&self) -> Result<F, StoreError> {
        match std::fs::read(&self.path) {
            Ok(bytes) if bytes.is_empty() => Ok(F::default()),
            Ok(bytes) => {
                serde_json::from_slice::<F>(&bytes).map_err(|source| StoreError::Corrupt {
                    path: self.path.display().to_string(),
                    what: self.what,
                    source,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(F::default()),
            Err(e) => Err(self.io(e)),
        }
    }

    /// Applies `change` to the file as it is under the lock and writes the result atomically.
    pub fn update<T>(&self, change: impl FnOnce(&mut F) -> T) -> Result<T, StoreError> {
        let _lock = lock_exclusive(&self.lock_path).map_err(|e| self.io(e))?;
        let mut file = self.read()?;
        let out = change(&mut file);
        let bytes = serde_json::to_vec_pretty(&file).map_err(|e| self.io(e.into()))?;
        write_atomic(&self.path, &bytes).map_err(|e| self.io(e))?;
        Ok(out)
    }
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

    #[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
    struct Counts {
        n: std::collections::BTreeMap<String, u32>,
    }

    fn counts(dir: &Path) -> JsonStore<Counts> {
        JsonStore::new(dir, "counts.json", "counts.lock", "counts")
    }

    #[test]
    fn a_json_store_loses_no_concurrent_change_and_keeps_a_damaged_file() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let store = counts(&state);
        assert!(
            store.read().unwrap().n.is_empty(),
            "no file: an empty store"
        );
        // Several stores on one file stand for several processes.
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let state = state.clone();
                std::thread::spawn(move || {
                    let s = counts(&state);
                    for i in 0..10 {
                        s.update(|f| f.n.insert(format!("t{t}-{i}"), i)).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(store.read().unwrap().n.len(), 40);
        assert_eq!(
            platform::mode(&std::fs::metadata(store.path()).unwrap()) & 0o777,
            0o600
        );
        std::fs::write(store.path(), "{oops").unwrap();
        let e = store.read().unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { .. }), "{e:?}");
        assert!(e.to_string().contains("not a valid counts file"), "{e}");
        assert!(matches!(
            store.update(|f| f.n.clear()),
            Err(StoreError::Corrupt { .. })
        ));
        assert_eq!(
            std::fs::read(store.path()).unwrap(),
            b"{oops",
            "left as it was"
        );
    }
}
