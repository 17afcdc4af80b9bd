//! Remembered permission decisions in `permissions.json` in the state dir, keyed by qualified
//! name and bound to a hash of the tool's definition. Writes take an exclusive `flock` on a
//! lock file, re-read, change and replace the file atomically, so two openpact processes
//! deciding at once never lose each other's decisions or leave a torn file.
//!
//! Every call without a matching rule looks here, so a look must be cheap and exact: a watch
//! on the state dir ([`FileWatch`]: inotify, on Linux) says whether the file changed, so the
//! last reading is used without a `stat` of the file; where no watch can be trusted (or the
//! platform has none), its mtime decides.

use crate::platform::{FileWatch, Look};
use crate::state;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
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
    /// Set up by the first look (`None`: this dir cannot be watched; every look is a `stat`).
    watch: OnceLock<Option<FileWatch>>,
}

impl DecisionStore {
    pub fn new(state_dir: &Path) -> DecisionStore {
        DecisionStore {
            path: state_dir.join("permissions.json"),
            lock_path: state_dir.join("permissions.lock"),
            cached: Mutex::new(None),
            watch: OnceLock::new(),
        }
    }

    #[cfg(test)]
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
        // Watching before the first reading, so no change can fall between the two.
        let watch = self.watch.get_or_init(|| FileWatch::start(&self.path));
        let mut cached = self
            .cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Events are taken under the lock: a look that finds none must not use a reading
        // that another look, which took the events, is still renewing.
        let look = watch.as_ref().map_or(Look::Unwatched, FileWatch::look);
        // Only a look the watch cannot vouch for needs the mtime now.
        let mtime = (look != Look::Unchanged).then(|| self.mtime());
        if let Some((seen, map)) = cached.as_ref() {
            let current = match look {
                Look::Unchanged => true,
                Look::Changed => false,
                Look::Unwatched => mtime == Some(*seen),
            };
            if current {
                return Ok(f(map));
            }
        }
        let mtime = mtime.unwrap_or_else(|| self.mtime());
        let map = match self.read() {
            Ok(map) => map,
            Err(e) => {
                // No event may come before the file is mended: every look reads it until then.
                *cached = None;
                return Err(e);
            }
        };
        let out = f(&map);
        *cached = Some((mtime, map));
        Ok(out)
    }

    /// Applies `change` under the lock and writes the result atomically.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, Remembered>) -> T,
    ) -> Result<T, DecisionError> {
        let _lock = state::lock_exclusive(&self.lock_path).map_err(|e| self.io(e))?;
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

    /// Moves the decisions about the tools of prefix `from` (`from:…`) to prefix `to` (`""`:
    /// no prefix), for a server whose tools were renamed by a `namespace`: under the old
    /// names they would never be looked up again. A decision already stored under the new
    /// name is newer and stays. Returns how many were moved; the file is only written when
    /// some are.
    pub fn move_prefix(&self, from: &str, to: &str) -> Result<usize, DecisionError> {
        let old = format!("{from}:");
        let renamed = |key: &str| {
            key.strip_prefix(&old).map(|rest| match to {
                "" => rest.to_string(),
                to => format!("{to}:{rest}"),
            })
        };
        if !self.with_current(|m| m.keys().any(|k| renamed(k).is_some()))? {
            return Ok(0);
        }
        self.update(|m| {
            let keys: Vec<String> = m.keys().filter(|k| k.starts_with(&old)).cloned().collect();
            let mut moved = 0;
            for key in keys {
                let (Some(new), Some(decision)) = (renamed(&key), m.remove(&key)) else {
                    continue;
                };
                if let std::collections::btree_map::Entry::Vacant(slot) = m.entry(new) {
                    slot.insert(decision);
                    moved += 1;
                }
            }
            moved
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
    fn decisions_move_to_a_new_prefix_and_newer_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let store = DecisionStore::new(dir.path());
        store
            .remember("github:get_me", Remember::Allow, "sha256:1")
            .unwrap();
        store
            .remember("github:crash", Remember::Deny, "sha256:2")
            .unwrap();
        store
            .remember("gh:crash", Remember::Allow, "sha256:3")
            .unwrap();
        store
            .remember("githubber:x", Remember::Allow, "sha256:4")
            .unwrap();
        assert_eq!(store.move_prefix("github", "gh").unwrap(), 1);
        let all = store.all().unwrap();
        let keys: Vec<&str> = all.keys().map(String::as_str).collect();
        assert_eq!(keys, ["gh:crash", "gh:get_me", "githubber:x"]);
        assert_eq!(
            all["gh:crash"].decision,
            Remember::Allow,
            "the newer one stays"
        );
        assert_eq!(all["gh:get_me"].definition, "sha256:1");
        assert_eq!(
            store.move_prefix("github", "gh").unwrap(),
            0,
            "nothing left"
        );
        assert_eq!(store.move_prefix("gh", "").unwrap(), 2);
        assert!(store.lookup("get_me").unwrap().is_some());
    }

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
        assert_eq!(decided(&store, "a:x"), None, "a reading to keep");
        std::fs::write(store.path(), "{not json").unwrap();
        for _ in 0..2 {
            assert!(
                matches!(store.lookup("x"), Err(DecisionError::Corrupt { .. })),
                "a broken file is reported on every look, not only the first"
            );
        }
        std::fs::write(store.path(), file_with("a:x", "allow")).unwrap();
        assert_eq!(decided(&store, "a:x"), Some(Remember::Allow));
    }

    fn decided(store: &DecisionStore, name: &str) -> Option<Remember> {
        store.lookup(name).unwrap().map(|r| r.decision)
    }

    /// A file of decisions as another process or an editor would write it.
    fn file_with(name: &str, decision: &str) -> String {
        format!(
            r#"{{"version":1,"decisions":{{"{name}":{{"decision":"{decision}","definition":"sha256:1","at":"2026-01-01T00:00:00Z"}}}}}}"#
        )
    }

    #[test]
    fn every_kind_of_write_counts_on_the_next_look() {
        let dir = tempfile::tempdir().unwrap();
        let store = DecisionStore::new(dir.path());
        assert_eq!(decided(&store, "a:x"), None);
        // Only Linux has a watch; elsewhere every look compares the file's mtime.
        assert!(
            !cfg!(target_os = "linux") || store.watch.get().is_some_and(Option::is_some),
            "the temp dir should be on a local filesystem, watched"
        );
        // Another process deciding (atomic replace).
        DecisionStore::new(dir.path())
            .remember("a:x", Remember::Deny, "sha256:1")
            .unwrap();
        assert_eq!(decided(&store, "a:x"), Some(Remember::Deny));
        // Other files of the dir changing leave the reading as it is.
        std::fs::write(dir.path().join("audit.jsonl"), "{}\n").unwrap();
        assert_eq!(decided(&store, "a:x"), Some(Remember::Deny));
        // An editor rewriting the file in place, within the same mtime tick perhaps.
        std::fs::write(store.path(), file_with("a:x", "allow")).unwrap();
        assert_eq!(decided(&store, "a:x"), Some(Remember::Allow));
        std::fs::remove_file(store.path()).unwrap();
        assert_eq!(decided(&store, "a:x"), None);
    }

    #[test]
    fn a_state_dir_removed_and_made_again_still_counts() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("state");
        std::fs::create_dir(&dir).unwrap();
        let store = DecisionStore::new(&dir);
        store.remember("a:x", Remember::Allow, "sha256:1").unwrap();
        assert_eq!(decided(&store, "a:x"), Some(Remember::Allow));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(decided(&store, "a:x"), None);
        // A new dir under the old path: the watch went with the old one.
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("permissions.json"), file_with("a:x", "deny")).unwrap();
        assert_eq!(decided(&store, "a:x"), Some(Remember::Deny));
    }
}
