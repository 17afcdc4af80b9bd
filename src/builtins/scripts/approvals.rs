//! Script approvals in `approvals.json` in the state dir: for each script file, whether an
//! administrator approved or rejected it and the `sha256:` of the exact content they saw.
//! An edit changes the hash, so an approval never carries over to code nobody reviewed.
//!
//! Like the permission decisions (`policy::decisions`), the file is a [`state::JsonStore`],
//! so two openpact processes (the hub and `openpact scripts approve`) never lose each other's
//! records. Nothing is cached, so an approval made by another process counts on the next call.

use crate::state::{self, StoreError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approved,
    Rejected,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub status: Decision,
    /// `sha256:<hex>` of the file the decision was made for.
    pub hash: String,
    /// When (RFC 3339).
    pub at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    #[serde(default)]
    scripts: BTreeMap<String, Record>,
}

/// Where a script stands, as `script_list` and `openpact scripts list` show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Named in the config allowlist: runs whatever its content.
    Allowlisted,
    /// Approved, and unchanged since.
    Approved,
    /// Never decided on, or changed since it was rejected.
    Pending,
    Rejected,
    /// Approved, then edited: needs approval again.
    Modified,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Allowlisted => "allowlisted",
            Status::Approved => "approved",
            Status::Pending => "pending",
            Status::Rejected => "rejected",
            Status::Modified => "modified",
        }
    }

    pub fn runnable(self) -> bool {
        matches!(self, Status::Allowlisted | Status::Approved)
    }

    /// Why a script that may not run does not, for the model (and the person it tells).
    pub fn refusal(self, file: &str) -> String {
        let how = format!(
            "An administrator can review it with `openpact scripts show {file}` and approve it \
             with `openpact scripts approve {file}`."
        );
        match self {
            Status::Allowlisted | Status::Approved => String::new(),
            Status::Pending => format!(
                "Script '{file}' is pending approval. An administrator must review and approve \
                 this script before it can be executed. {how}"
            ),
            Status::Modified => format!(
                "Script '{file}' has been modified since approval. Re-approval required. {how}"
            ),
            Status::Rejected => format!(
                "Script '{file}' was rejected by an administrator and cannot be executed. \
                 Changing it makes it pending review again."
            ),
        }
    }
}

/// `sha256:<hex>` of a script's bytes, the form recorded and shown.
pub fn hash(bytes: &[u8]) -> String {
    crate::policy::canonical::sha256(bytes)
}

/// The status of `file` (a `x.star` name) with content hash `hash`.
pub fn status_of(allowlist: &[String], record: Option<&Record>, file: &str, hash: &str) -> Status {
    // The allowlist holds file names; a bare name there is meant the same way.
    let stem = super::meta::bare(file);
    if allowlist.iter().any(|a| {
        let a = a.trim();
        a == file || a == stem
    }) {
        return Status::Allowlisted;
    }
    match record {
        None => Status::Pending,
        Some(r) => match (r.status, r.hash == hash) {
            (Decision::Approved, true) => Status::Approved,
            (Decision::Approved, false) => Status::Modified,
            (Decision::Rejected, true) => Status::Rejected,
            (Decision::Rejected, false) => Status::Pending,
        },
    }
}

pub struct Approvals {
    file: state::JsonStore<File>,
}

impl Approvals {
    pub fn new(state_dir: &Path) -> Approvals {
        Approvals {
            file: state::JsonStore::new(state_dir, "approvals.json", "approvals.lock", "approvals"),
        }
    }

    /// Every record. A damaged file is an error, never "no approvals" silently turned into
    /// "approve nothing" or worse.
    pub fn all(&self) -> Result<BTreeMap<String, Record>, StoreError> {
        self.file.read().map(|f| f.scripts)
    }

    pub fn get(&self, file: &str) -> Result<Option<Record>, StoreError> {
        Ok(self.all()?.remove(file))
    }

    /// Records `decision` for `file` at `hash`, under the lock.
    pub fn set(&self, file: &str, decision: Decision, hash: &str) -> Result<(), StoreError> {
        let record = Record {
            status: decision,
            hash: hash.to_string(),
            at: crate::time::now_rfc3339(),
        };
        self.file.update(|f| {
            f.version = 1;
            f.scripts.insert(file.to_string(), record);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_hash_and_the_allowlist() {
        let h = hash(b"x = 1\n");
        assert!(h.starts_with("sha256:") && h.len() == 71, "{h}");
        let rec = |status| Record {
            status,
            hash: h.clone(),
            at: String::new(),
        };
        let none: &[String] = &[];
        assert_eq!(status_of(none, None, "a.star", &h), Status::Pending);
        let approved = rec(Decision::Approved);
        assert_eq!(
            status_of(none, Some(&approved), "a.star", &h),
            Status::Approved
        );
        assert_eq!(
            status_of(none, Some(&approved), "a.star", "sha256:other"),
            Status::Modified
        );
        let rejected = rec(Decision::Rejected);
        assert_eq!(
            status_of(none, Some(&rejected), "a.star", &h),
            Status::Rejected
        );
        assert_eq!(
            status_of(none, Some(&rejected), "a.star", "sha256:other"),
            Status::Pending
        );
        for allow in ["a.star", "a"] {
            assert_eq!(
                status_of(&[allow.to_string()], Some(&rejected), "a.star", &h),
                Status::Allowlisted
            );
        }
        assert!(Status::Pending.refusal("a.star").starts_with(
            "Script 'a.star' is pending approval. An administrator must review and approve this script before it can be executed."
        ));
    }

    #[test]
    fn records_survive_concurrent_writers_and_damage_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = Approvals::new(&dir.path().join("state"));
        assert_eq!(store.get("a.star").unwrap(), None);
        // Several stores on one file stand for several processes.
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let path = dir.path().join("state");
                std::thread::spawn(move || {
                    let s = Approvals::new(&path);
                    for i in 0..10 {
                        s.set(&format!("t{t}-{i}.star"), Decision::Approved, "sha256:1")
                            .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(store.all().unwrap().len(), 40);
        store
            .set("t0-0.star", Decision::Rejected, "sha256:2")
            .unwrap();
        let r = store.get("t0-0.star").unwrap().unwrap();
        assert_eq!(
            (r.status, r.hash.as_str()),
            (Decision::Rejected, "sha256:2")
        );
        std::fs::write(dir.path().join("state/approvals.json"), "{oops").unwrap();
        assert!(
            store
                .all()
                .unwrap_err()
                .to_string()
                .contains("not a valid approvals file")
        );
    }
}
