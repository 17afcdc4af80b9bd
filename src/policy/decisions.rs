//! Remembered permission decisions in `permissions.json` in the state dir, keyed by qualified
//! name and bound to a hash of the tool's definition. Writes take an exclusive `flock` on a
//! lock file, re-read, change and replace the file atomically, so two openpact processes
//! deciding at once never lose each other's decisions or leave a torn file.

use crate::state;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Remember {
    Allow,
    Deny,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    pub decision: Remember,
    /// `sha256:…` of the definition the decision was made for.
    pub definition: String,
    /// When it was made (RFC 3339).
    pub at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    decisions: BTreeMap<String, Remembered>,
}

#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a valid decisions file ({source}); move it aside to start afresh")]
    Corrupt {
        path: String,
        source: serde_json::Error,
    },
}

/// The decisions as last read, with the file's mtime then.
type Snapshot = (Option<SystemTime>, BTreeMap<String, Remembered>);

pub struct DecisionStore {
    path: PathBuf,
    lock_path: PathBuf,
    /// Last read: file mtime and content, re-read when the file changes.
    cached: Mutex<Option<Snapshot>>,
}

impl DecisionStore {
    pub fn new(state_dir: &Path) -> DecisionStore {
        DecisionStore {
            path: state_dir.join("permissions.json"),
            lock_path: state_dir.join("permissions.lock"),
            cached: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> DecisionError {
        DecisionError::Io {
            path: self.path.display().to_string(),
            source,
        }
    }

    fn read(&self) -> Result<BTreeMap<String, Remembered>, DecisionError> {
        match std::fs::read(&self.path) {
            Ok(bytes) if bytes.is_empty() => Ok(BTreeMap::new()),
            Ok(bytes) => serde_json::from_slice::<File>(&bytes)
                .map(|f| f.decisions)
                .map_err(|source| DecisionError::Corrupt {
                    path: self.path.display().to_string(),
                    source,
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(self.io(e)),
        }
    }

    fn mtime(&self) -> Option<SystemTime> {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
    }

    /// All decisions, re-read only when the file changed since the last look.
    pub fn all(&self) -> Result<BTreeMap<String, Remembered>, DecisionError> {
        self.with_current(BTreeMap::clone)
    }

    pub fn lookup(&self, name: &str) -> Result<Option<Remembered>, DecisionError> {
        // Every call looks here: only the one decision is copied, not the whole map.
        self.with_current(|map| map.get(name).cloned())
    }

    /// Runs `f` on the decisions as the file now has them, re-read only when it changed
    /// since the last look.
    fn with_current<T>(
        &self,
        f: impl FnOnce(&BTreeMap<String, Remembered>) -> T,
    ) -> Result<T, DecisionError> {
        let mtime = self.mtime();
        let mut cached = self
            .cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((seen, map)) = cached.as_ref()
            && *seen == mtime
        {
            return Ok(f(map));
        }
        let map = self.read()?;
        let out = f(&map);
        *cached = Some((mtime, map));
        Ok(out)
    }

    /// Applies `change` under the lock and writes the result atomically.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, Remembered>) -> T,
    ) -> Result<T, DecisionError> {
        let dir = self.path.parent().unwrap_or_else(|| Path::new("."));
        state::ensure_dir(dir).map_err(|e| self.io(e))?;
        let lock_file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            .map_err(|e| self.io(e))?;
        let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
            .map_err(|(_, errno)| self.io(errno.into()))?;
        let mut map = self.read()?;
        let out = change(&mut map);
        let bytes = serde_json::to_vec_pretty(&File {
            version: 1,
            decisions: map,
        })
        .map_err(|e| self.io(e.into()))?;
        state::write_atomic(&self.path, &bytes).map_err(|e| self.io(e))?;
        // Force the next read: mtime granularity may hide two writes within one tick.
        *self
            .cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        Ok(out)
    }

    pub fn remember(
        &self,
        name: &str,
        decision: Remember,
        definition: &str,
    ) -> Result<(), DecisionError> {
        let entry = Remembered {
            decision,
            definition: definition.to_string(),
            at: crate::time::now_rfc3339(),
        };
        self.update(|m| {
            m.insert(name.to_string(), entry);
        })
    }

    /// Returns whether there was a decision to forget.
    pub fn forget(&self, name: &str) -> Result<bool, DecisionError> {
        self.update(|m| m.remove(name).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remember_lookup_forget_and_concurrent_writers() {
        let dir = tempfile::tempdir().unwrap();
        let store = DecisionStore::new(dir.path());
        assert_eq!(store.lookup("a:x").unwrap(), None);
        store.remember("a:x", Remember::Allow, "sha256:1").unwrap();
        let got = store.lookup("a:x").unwrap().unwrap();
        assert_eq!(
            (got.decision, got.definition.as_str()),
            (Remember::Allow, "sha256:1")
        );
        // Two stores on one file stand for two processes.
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let path = dir.path().to_path_buf();
                std::thread::spawn(move || {
                    let s = DecisionStore::new(&path);
                    for i in 0..20 {
                        s.remember(&format!("t{t}:{i}"), Remember::Deny, "sha256:2")
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(store.all().unwrap().len(), 1 + 8 * 20);
        assert!(store.forget("a:x").unwrap());
        assert!(!store.forget("a:x").unwrap());
        std::fs::write(store.path(), "{not json").unwrap();
        assert!(matches!(
            store.lookup("x"),
            Err(DecisionError::Corrupt { .. })
        ));
    }
}
