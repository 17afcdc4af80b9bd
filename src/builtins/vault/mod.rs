//! The Obsidian vault tools (`vault_read`, `vault_write`, `vault_list`, `vault_search`) and
//! the vault's optional git sync.
//!
//! Notes are plain text (no frontmatter or wikilink parsing, as in the original). Paths go
//! through [`paths::resolve`]; anything inside `.git` is refused as well, because a written
//! `.git/config` or hook would run code the next time we call git, and `.git/config` may hold
//! a remote's credentials. With `git_sync`, reads, lists and searches first run
//! `git pull --rebase` (a failure is logged and ignored: the local copy is still useful), and
//! writes run `git add`, `git commit`, `git push`; git runs directly (never through a shell),
//! with a timeout, and one git operation at a time.
//!
//! The parts: this file holds the tool definitions, the dispatch and the path checks;
//! `notes` reads, writes and lists notes; `search` searches them; `sync` runs git.

mod notes;
mod search;
mod sync;
#[cfg(test)]
mod tests;

use super::paths;
use super::workspace::{MAX_LIST_ENTRIES, blocking, path_error, str_arg};
use super::{BoxFuture, Group, ToolDef, ToolOutput, hints};
use notes::{list_tool, read_tool, write_note};
use search::search_tool;
use serde_json::{Value, json};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// `vault_search` defaults and bounds.
const DEFAULT_RESULTS: u64 = 50;
const MAX_RESULTS: u64 = 500;
const DEFAULT_CONTEXT: u64 = 1;
const MAX_CONTEXT: u64 = 10;

/// The vault tools over `v.path`.
pub fn group(v: &crate::config::VaultSettings) -> Arc<dyn Group> {
    Arc::new(Vault {
        root: v.path.clone(),
        git_sync: v.git_sync,
        git_timeout: v.git_timeout,
        max_read: v.max_bytes,
        git_lock: tokio::sync::Mutex::new(()),
    })
}

struct Vault {
    root: PathBuf,
    git_sync: bool,
    git_timeout: Duration,
    max_read: u64,
    /// One git operation (and one write) at a time: git's index lock would fail a second
    /// concurrent commit, and a pull must not rebase under a half-done write.
    git_lock: tokio::sync::Mutex<()>,
}

impl Group for Vault {
    fn tools(&self) -> Vec<ToolDef> {
        let cap = self.max_read / 1024;
        let sync = if self.git_sync {
            " The vault is pulled from git first."
        } else {
            ""
        };
        vec![
            ToolDef {
                name: "vault_read",
                description: format!(
                    "Read a note (UTF-8 text) from the Obsidian vault. `path` is relative to the \
                     vault root; paths outside it and inside .git are refused. Files over {cap} \
                     KiB are cut with a marker; binary files are refused.{sync}"
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Note path relative to the vault root, e.g. Projects/plan.md"}
                    },
                    "required": ["path"]
                }),
                annotations: Some(hints::read_only()),
            },
            ToolDef {
                name: "vault_write",
                description: format!(
                    "Write a note in the Obsidian vault, creating folders and replacing any \
                     existing file atomically.{}",
                    if self.git_sync {
                        " Then commits it (`commit_message`, default `Update <file name>`) and \
                         pushes."
                    } else {
                        ""
                    }
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Note path relative to the vault root"},
                        "content": {"type": "string", "description": "The whole new content of the note"},
                        "commit_message": {"type": "string", "description": "Git commit message when sync is on (default: Update <file name>)"}
                    },
                    "required": ["path", "content"]
                }),
                annotations: Some(hints::overwrites(self.git_sync)),
            },
            ToolDef {
                name: "vault_list",
                description: format!(
                    "List the vault. Without `recursive`: one folder's non-hidden entries, \
                     sorted, folders ending in `/`. With `recursive: true`: every folder (with \
                     `/`) and Markdown note below `path`, as paths from the vault root, hidden \
                     folders (.git, .obsidian) skipped. Returns JSON {{path, recursive, \
                     entries}}; at most {MAX_LIST_ENTRIES} entries.{sync}"
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Folder relative to the vault root (default: the root)"},
                        "recursive": {"type": "boolean", "description": "Walk subfolders, listing folders and .md notes (default false)"}
                    }
                }),
                annotations: Some(hints::read_only()),
            },
            ToolDef {
                name: "vault_search",
                description: format!(
                    "Search the vault's Markdown notes (not hidden ones) for text, ignoring case. \
                     Returns JSON {{query, results: [{{path, line, text, before, after}}], \
                     truncated}}: each matching line with its 1-based number and `context` lines \
                     around it (default {DEFAULT_CONTEXT}, at most {MAX_CONTEXT}). At most \
                     `max_results` matches (default {DEFAULT_RESULTS}, at most {MAX_RESULTS}); \
                     `truncated` says there were more. Only the first {cap} KiB of each note is \
                     searched.{sync}"
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "Text to find (case-insensitive substring)"},
                        "path": {"type": "string", "description": "Folder (or note) to search, relative to the vault root (default: the whole vault)"},
                        "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "Most matching lines to return (default 50)"},
                        "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context before and after each match (default 1)"}
                    },
                    "required": ["query"]
                }),
                annotations: Some(hints::read_only()),
            },
        ]
    }

    fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let root = self.root.clone();
            let max = self.max_read;
            let path = str_arg(args, "path");
            match tool {
                "vault_read" => {
                    self.pull().await;
                    blocking(move || read_tool(&root, &path, max)).await
                }
                "vault_list" => {
                    let recursive = args.get("recursive").and_then(Value::as_bool) == Some(true);
                    self.pull().await;
                    blocking(move || list_tool(&root, &path, recursive)).await
                }
                "vault_search" => {
                    let query = str_arg(args, "query");
                    let results =
                        match bounded(args, "max_results", DEFAULT_RESULTS, 1, MAX_RESULTS) {
                            Ok(n) => n,
                            Err(e) => return ToolOutput::error(e),
                        };
                    let context = match bounded(args, "context", DEFAULT_CONTEXT, 0, MAX_CONTEXT) {
                        Ok(n) => n,
                        Err(e) => return ToolOutput::error(e),
                    };
                    if query.trim().is_empty() {
                        return ToolOutput::error("query is required");
                    }
                    self.pull().await;
                    blocking(move || search_tool(&root, &path, &query, results, context, max)).await
                }
                "vault_write" => {
                    let content = str_arg(args, "content");
                    let message = str_arg(args, "commit_message");
                    self.write(path, content, message).await
                }
                other => ToolOutput::unknown_tool(other),
            }
        })
    }
}

impl Vault {
    async fn write(&self, path: String, content: String, message: String) -> ToolOutput {
        let _guard = self.git_lock.lock().await;
        let root = self.root.clone();
        let user = path.trim().to_string();
        let written = {
            let user = user.clone();
            tokio::task::spawn_blocking(move || write_note(&root, &user, &content))
                .await
                .unwrap_or_else(|e| Err(ToolOutput::error(format!("internal error: {e}"))))
        };
        let rel = match written {
            Ok(rel) => rel,
            Err(out) => return out,
        };
        if !self.git_sync {
            return ToolOutput::ok(format!("Wrote {user}"));
        }
        let message = match message.trim() {
            "" => format!(
                "Update {}",
                Path::new(&user)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| user.clone())
            ),
            m => m.to_string(),
        };
        match self.commit_and_push(&rel, &message).await {
            Ok(true) => ToolOutput::ok(format!("Wrote and synced {user}")),
            Ok(false) => ToolOutput::ok(format!("Wrote and synced {user} (no changes to commit)")),
            Err(e) => ToolOutput::error(format!("file written but git sync failed: {e}")),
        }
    }
}

/// A bounded integer argument, or its default.
fn bounded(args: &Value, name: &str, default: u64, min: u64, max: u64) -> Result<u64, String> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_i64() {
            Some(n) if n >= min as i64 && n <= max as i64 => Ok(n as u64),
            _ => Err(format!("{name} must be between {min} and {max}")),
        },
    }
}

/// Resolves a vault path and refuses anything inside `.git`; returns the path and its part
/// below the vault root. `io_context` prefixes I/O failures.
fn resolve(root: &Path, user: &str, io_context: &str) -> Result<(PathBuf, PathBuf), ToolOutput> {
    let full = paths::resolve(root, user, "vault").map_err(|e| path_error(e, io_context))?;
    let canon = root.canonicalize().map_err(|e| {
        ToolOutput::error(format!("{io_context}: vault root {}: {e}", root.display()))
    })?;
    let rel = full
        .strip_prefix(&canon)
        .unwrap_or(Path::new(""))
        .to_path_buf();
    if in_git_dir(&rel) {
        return Err(ToolOutput::error(
            "refused: .git is not part of the vault (it holds git's config, hooks and credentials)",
        ));
    }
    Ok((full, rel))
}

fn in_git_dir(rel: &Path) -> bool {
    rel.components().any(|c| match c {
        Component::Normal(n) => n.to_string_lossy().eq_ignore_ascii_case(".git"),
        _ => false,
    })
}
