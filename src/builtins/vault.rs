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

use super::paths;
use super::workspace::{
    MAX_LIST_ENTRIES, ReadError, blocking, list_dir, listing, path_error, place, read_only,
    read_text, str_arg, write_file,
};
use super::{BoxFuture, Group, ToolDef, ToolOutput};
use serde_json::{Value, json};
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// How long one git command may take before it is killed.
/// The default git time limit (the config's `vault.git.timeout`), as the tests use it.
#[cfg(test)]
const GIT_TIMEOUT: Duration = Duration::from_secs(30);
/// `vault_search` defaults and bounds.
const DEFAULT_RESULTS: u64 = 50;
const MAX_RESULTS: u64 = 500;
const DEFAULT_CONTEXT: u64 = 1;
const MAX_CONTEXT: u64 = 10;
/// Longest line (in characters) a search result shows; longer ones end in `…`.
const MAX_LINE_CHARS: usize = 500;

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
                annotations: Some(read_only()),
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
                annotations: Some(json!({
                    "readOnlyHint": false,
                    "destructiveHint": true,
                    "idempotentHint": true,
                    "openWorldHint": self.git_sync
                })),
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
                annotations: Some(read_only()),
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
                annotations: Some(read_only()),
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
                other => ToolOutput::error(format!("unknown tool: {other}")),
            }
        })
    }
}

impl Vault {
    /// `git pull --rebase` when sync is on. Failures are logged, not returned: the notes on
    /// disk are still worth reading when the remote is unreachable.
    async fn pull(&self) {
        if !self.git_sync {
            return;
        }
        let _guard = self.git_lock.lock().await;
        let root = self.root.as_path();
        if self.rebase_in_progress().await {
            tracing::warn!(vault = %root.display(), "vault git pull skipped: a rebase is in progress");
            return;
        }
        let failure = match git(root, &["pull", "--rebase"], self.git_timeout).await {
            Ok(out) if out.ok() => return,
            Ok(out) => out.failure("pull"),
            Err(e) => e,
        };
        tracing::warn!(vault = %root.display(), "vault git pull failed (using the local copy): {failure}");
        // A conflicting pull stops mid-rebase; undo it so the vault stays writable.
        if self.rebase_in_progress().await
            && let Err(e) = git(root, &["rebase", "--abort"], self.git_timeout).await
        {
            tracing::warn!(vault = %root.display(), "vault git rebase --abort failed: {e}");
        }
    }

    /// Whether the vault's repository is stopped mid-rebase.
    async fn rebase_in_progress(&self) -> bool {
        let args = [
            "rev-parse",
            "--git-path",
            "rebase-merge",
            "--git-path",
            "rebase-apply",
        ];
        match git(&self.root, &args, self.git_timeout).await {
            Ok(out) if out.ok() => out
                .stdout
                .lines()
                .map(str::trim)
                .any(|p| !p.is_empty() && self.root.join(p).exists()),
            _ => false,
        }
    }

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

    /// `git add`, `git commit` (only this note, only if it changed), `git push` (after a
    /// rejected push: `git pull --rebase` and one more push). Pushes even with nothing new to
    /// commit, so a commit left by an earlier failed push goes out. Ok(false) means there was
    /// nothing to commit.
    async fn commit_and_push(&self, rel: &Path, message: &str) -> Result<bool, String> {
        let root = self.root.as_path();
        let t = self.git_timeout;
        let rel = rel.as_os_str();
        let s = OsStr::new;
        let add = git(root, &[s("add"), s("--"), rel], t).await?;
        if !add.ok() {
            return Err(add.failure("add"));
        }
        let diff = git(
            root,
            &[s("diff"), s("--cached"), s("--quiet"), s("--"), rel],
            t,
        )
        .await?;
        let changed = match diff.code {
            Some(0) => false,
            Some(1) => true,
            _ => return Err(diff.failure("diff")),
        };
        if changed {
            let commit = git(
                root,
                &[s("commit"), s("-q"), s("-m"), s(message), s("--"), rel],
                t,
            )
            .await?;
            if !commit.ok() {
                return Err(commit.failure("commit"));
            }
        }
        let push = git(root, &["push", "-q"], t).await?;
        if push.ok() {
            return Ok(changed);
        }
        // Usually the remote moved on since the last pull: rebase onto it and push once more.
        // Anything else (no remote, no access, a conflict) reports the first push's failure.
        let pull = git(root, &["pull", "-q", "--rebase"], t).await?;
        if !pull.ok() {
            if self.rebase_in_progress().await {
                let _ = git(root, &["rebase", "--abort"], t).await;
            }
            return Err(push.failure("push"));
        }
        let again = git(root, &["push", "-q"], t).await?;
        if !again.ok() {
            return Err(again.failure("push"));
        }
        Ok(changed)
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

fn read_tool(root: &Path, user: &str, max: u64) -> ToolOutput {
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
fn write_note(root: &Path, user: &str, content: &str) -> Result<PathBuf, ToolOutput> {
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

fn list_tool(root: &Path, user: &str, recursive: bool) -> ToolOutput {
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

fn root_canon(root: &Path) -> Option<PathBuf> {
    root.canonicalize().ok()
}

fn is_markdown(name: &str) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
}

/// Depth-first, sorted walk below `dir`, skipping hidden names and not following symlinks
/// (so no loops and no way out). `visit(path from the vault root, is_dir)` returns false to
/// stop. Unreadable subfolders are skipped; only `dir` itself failing is an error.
fn walk(
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

fn search_tool(
    root: &Path,
    user: &str,
    query: &str,
    max_results: u64,
    context: u64,
    max_read: u64,
) -> ToolOutput {
    let user = user.trim();
    let shown = if user.is_empty() { "." } else { user };
    let (start, rel) = match resolve(root, shown, "search failed") {
        Ok(p) => p,
        Err(out) => return out,
    };
    let canon = root_canon(root);
    let mut files = Vec::new();
    if start.is_file() {
        files.push(rel.to_string_lossy().into_owned());
    } else if let Err(e) = walk(canon.as_deref(), &start, &mut |rel, is_dir| {
        if !is_dir && is_markdown(rel) {
            files.push(rel.to_string());
        }
        true
    }) {
        return ToolOutput::error(format!("search failed: {shown}: {e}"));
    }
    let needle = query.to_lowercase();
    let max = max_results as usize;
    let ctx = context as usize;
    let mut results = Vec::new();
    let mut truncated = false;
    let mut searched = 0;
    'files: for rel in &files {
        let base = canon.as_deref().unwrap_or(root);
        // Binary, unreadable or vanished files are simply not matches.
        let Ok(text) = read_text(&base.join(rel), max_read) else {
            continue;
        };
        searched += 1;
        let lines: Vec<&str> = text.text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !line.to_lowercase().contains(&needle) {
                continue;
            }
            if results.len() == max {
                truncated = true;
                break 'files;
            }
            let clip = |ls: &[&str]| ls.iter().map(|l| clip_line(l)).collect::<Vec<_>>();
            results.push(json!({
                "path": rel,
                "line": i + 1,
                "text": clip_line(line),
                "before": clip(&lines[i.saturating_sub(ctx)..i]),
                "after": clip(&lines[(i + 1).min(lines.len())..(i + 1 + ctx).min(lines.len())]),
            }));
        }
    }
    let mut v = json!({
        "query": query,
        "path": shown,
        "results": results,
        "count": results.len(),
        "files_searched": searched,
        "truncated": truncated,
    });
    if truncated {
        v["note"] = json!(format!(
            "showing the first {max} matches; there are more (narrow the query or path, or raise max_results up to {MAX_RESULTS})"
        ));
    } else if results.is_empty() {
        v["note"] = json!(format!("No files containing '{query}'"));
    }
    ToolOutput::json(v)
}

/// A line cut to [`MAX_LINE_CHARS`] characters, with `…` when cut.
fn clip_line(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        None => line.to_string(),
        Some((cut, _)) => format!("{}…", &line[..cut]),
    }
}

/// What a git command printed and how it ended.
struct GitRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl GitRun {
    fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// `git <what> failed: exit status N: <last of stderr>`.
    fn failure(&self, what: &str) -> String {
        let status = match self.code {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".into(),
        };
        let err = self.stderr.trim();
        // The end of stderr holds the reason; keep the message short.
        let tail: String = {
            let n = err.chars().count();
            err.chars().skip(n.saturating_sub(600)).collect()
        };
        if tail.is_empty() {
            format!("git {what} failed: {status}")
        } else {
            format!("git {what} failed: {status}: {tail}")
        }
    }
}

/// Runs `git ARGS` in `dir` without a shell; killed after `timeout`. Err only when git
/// could not run or timed out.
async fn git<S: AsRef<std::ffi::OsStr>>(
    dir: &Path,
    args: &[S],
    timeout: Duration,
) -> Result<GitRun, String> {
    let what = args
        .first()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .unwrap_or_default();
    let args: Vec<OsString> = args.iter().map(|a| a.as_ref().to_os_string()).collect();
    let child = tokio::process::Command::new("git")
        .args(&args)
        .current_dir(dir)
        // Never wait for a password prompt; paths are literal, not pathspec patterns.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_LITERAL_PATHSPECS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("git {what} could not start: {e}"))?;
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => Ok(GitRun {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }),
        Ok(Err(e)) => Err(format!("git {what} failed: {e}")),
        // Dropping the future drops the child, which kill_on_drop kills.
        Err(_) => Err(format!(
            "git {what} timed out after {}s",
            timeout.as_secs_f32()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtins::Builtins;
    use crate::builtins::workspace::MAX_READ_BYTES;
    use crate::config::VaultSettings;
    use serde_json::json;

    struct Fx {
        tmp: tempfile::TempDir,
        b: Builtins,
    }

    impl Fx {
        /// A vault at `<tmp>/vault` with a few notes, a sibling `vault-evil` and a secret
        /// beside it.
        fn new(git_sync: bool) -> Fx {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("vault");
            for (p, text) in [
                (
                    "Home.md",
                    "# Home\nWelcome to the vault.\nSee [[Projects/Plan]].\n",
                ),
                (
                    "Projects/Plan.md",
                    "line one\nThe PLAN is here\nline three\nline four\n",
                ),
                ("Projects/notes.txt", "plan in a text file\n"),
                ("Projects/Deep/Idea.MD", "another plan\n"),
                (".obsidian/app.md", "plan hidden\n"),
                ("Archive/.hidden.md", "plan hidden file\n"),
            ] {
                let f = root.join(p);
                std::fs::create_dir_all(f.parent().unwrap()).unwrap();
                std::fs::write(f, text).unwrap();
            }
            std::fs::create_dir_all(tmp.path().join("vault-evil")).unwrap();
            std::fs::write(tmp.path().join("vault-evil/x.md"), "evil plan").unwrap();
            std::fs::write(tmp.path().join("secret.md"), "secret plan").unwrap();
            let b = Builtins::new(vec![group(&VaultSettings {
                path: root,
                git_sync,
                max_bytes: MAX_READ_BYTES,
                git_timeout: GIT_TIMEOUT,
            })]);
            Fx { tmp, b }
        }

        fn root(&self) -> PathBuf {
            self.tmp.path().join("vault")
        }

        async fn call(&self, tool: &str, args: Value) -> ToolOutput {
            self.b.call(tool, &args).await.unwrap()
        }

        async fn ok(&self, tool: &str, args: Value) -> ToolOutput {
            let out = self.call(tool, args).await;
            assert!(!out.is_error, "{tool}: {}", out.text);
            out
        }

        async fn err(&self, tool: &str, args: Value) -> String {
            let out = self.call(tool, args).await;
            assert!(out.is_error, "{tool} should fail: {}", out.text);
            out.text
        }
    }

    #[test]
    fn tools_have_the_original_names_and_parameters() {
        let fx = Fx::new(false);
        let tools = fx.b.tools();
        let names: Vec<_> = tools.iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            ["vault_read", "vault_write", "vault_list", "vault_search"]
        );
        let props = |n: &str| {
            let t = tools.iter().find(|t| t.name == n).unwrap();
            let mut p: Vec<String> = t.input_schema["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            p.sort();
            (
                p,
                t.input_schema["required"].clone(),
                t.annotations.clone().unwrap(),
            )
        };
        let (p, r, a) = props("vault_read");
        assert_eq!((p, r), (vec!["path".to_string()], json!(["path"])));
        assert_eq!(a["readOnlyHint"], true);
        let (p, r, a) = props("vault_write");
        assert_eq!(p, ["commit_message", "content", "path"]);
        assert_eq!(r, json!(["path", "content"]));
        assert_eq!(a["readOnlyHint"], false);
        let (p, r, a) = props("vault_list");
        assert_eq!(
            (p, r),
            (vec!["path".into(), "recursive".into()], Value::Null)
        );
        assert_eq!(a["readOnlyHint"], true);
        let (p, r, a) = props("vault_search");
        assert_eq!(p, ["context", "max_results", "path", "query"]);
        assert_eq!(r, json!(["query"]));
        assert_eq!(a["readOnlyHint"], true);
    }

    #[tokio::test]
    async fn read_write_and_errors() {
        let fx = Fx::new(false);
        assert_eq!(
            fx.ok("vault_read", json!({"path": "Home.md"})).await.text,
            "# Home\nWelcome to the vault.\nSee [[Projects/Plan]].\n"
        );
        assert_eq!(
            fx.ok(
                "vault_write",
                json!({"path": "New/Note.md", "content": "hi", "commit_message": "x"})
            )
            .await
            .text,
            "Wrote New/Note.md"
        );
        assert_eq!(
            fx.ok("vault_read", json!({"path": "New/Note.md"}))
                .await
                .text,
            "hi"
        );
        assert_eq!(
            std::fs::read_to_string(fx.root().join("New/Note.md")).unwrap(),
            "hi"
        );
        assert_eq!(fx.err("vault_read", json!({})).await, "path is required");
        assert_eq!(
            fx.err("vault_read", json!({"path": "Nope.md"})).await,
            "file not found: Nope.md"
        );
        assert_eq!(
            fx.err("vault_read", json!({"path": "Projects"})).await,
            "failed to read file: Projects is a directory"
        );
        assert_eq!(
            fx.err("vault_write", json!({"path": "a.md"})).await,
            "content is required"
        );
        assert_eq!(
            fx.err("vault_write", json!({"path": ".", "content": "x"}))
                .await,
            "failed to write file: . is a directory"
        );
        std::fs::write(fx.root().join("pic.png"), b"\x89PNG\0\0").unwrap();
        assert_eq!(
            fx.err("vault_read", json!({"path": "pic.png"})).await,
            "failed to read file: pic.png is a binary file; only UTF-8 text files can be read"
        );
        let big = "é".repeat(MAX_READ_BYTES as usize); // twice the cap in bytes
        std::fs::write(fx.root().join("big.md"), &big).unwrap();
        let text = fx.ok("vault_read", json!({"path": "big.md"})).await.text;
        assert!(text.starts_with(&big[..MAX_READ_BYTES as usize]));
        assert!(text.ends_with(&format!(
            "[Content truncated: {MAX_READ_BYTES} of {} bytes shown]",
            2 * MAX_READ_BYTES
        )));
    }

    #[tokio::test]
    async fn traversal_and_git_dir_are_refused() {
        let fx = Fx::new(false);
        std::fs::create_dir_all(fx.root().join(".git")).unwrap();
        std::fs::write(
            fx.root().join(".git/config"),
            "[remote] url = https://token@x",
        )
        .unwrap();
        std::os::unix::fs::symlink(fx.tmp.path(), fx.root().join("out")).unwrap();
        std::os::unix::fs::symlink(fx.tmp.path().join("secret.md"), fx.root().join("s.md"))
            .unwrap();
        std::os::unix::fs::symlink(fx.root().join(".git"), fx.root().join("g")).unwrap();
        let abs = fx
            .tmp
            .path()
            .join("secret.md")
            .to_string_lossy()
            .into_owned();
        for p in [
            "../secret.md",
            "../vault-evil/x.md",
            "Projects/../../secret.md",
            "/etc/passwd",
            abs.as_str(),
            "out/secret.md",
            "s.md",
        ] {
            assert_eq!(
                fx.err("vault_read", json!({"path": p})).await,
                "path escapes vault",
                "read {p}"
            );
            assert_eq!(
                fx.err("vault_write", json!({"path": p, "content": "pwned"}))
                    .await,
                "path escapes vault",
                "write {p}"
            );
            assert_eq!(
                fx.err("vault_search", json!({"query": "plan", "path": p}))
                    .await,
                "path escapes vault",
                "search {p}"
            );
        }
        for p in ["..", "../vault-evil", "/", "out"] {
            assert_eq!(
                fx.err("vault_list", json!({"path": p})).await,
                "path escapes vault",
                "list {p}"
            );
            assert_eq!(
                fx.err("vault_list", json!({"path": p, "recursive": true}))
                    .await,
                "path escapes vault",
                "list -r {p}"
            );
        }
        for p in [
            ".git/config",
            ".GIT/hooks/post-commit",
            "g/config",
            "x/../.git/HEAD",
        ] {
            assert!(
                fx.err("vault_read", json!({"path": p}))
                    .await
                    .contains(".git is not part of the vault"),
                "{p}"
            );
            assert!(
                fx.err("vault_write", json!({"path": p, "content": "x"}))
                    .await
                    .contains(".git is not part of the vault"),
                "{p}"
            );
        }
        assert!(!fx.root().join(".git/hooks").exists());
        assert!(
            fx.err("vault_list", json!({"path": ".git"}))
                .await
                .contains(".git is not part of the vault")
        );
        assert_eq!(
            std::fs::read_to_string(fx.tmp.path().join("secret.md")).unwrap(),
            "secret plan"
        );
        assert_eq!(
            std::fs::read_to_string(fx.tmp.path().join("vault-evil/x.md")).unwrap(),
            "evil plan"
        );
    }

    #[tokio::test]
    async fn listing_one_level_and_recursive() {
        let fx = Fx::new(false);
        let out = fx.ok("vault_list", json!({})).await;
        assert_eq!(
            out.structured.unwrap(),
            json!({"path": ".", "recursive": false, "entries": ["Archive/", "Home.md", "Projects/"]})
        );
        let out = fx.ok("vault_list", json!({"path": "Projects"})).await;
        assert_eq!(
            out.structured.unwrap()["entries"],
            json!(["Deep/", "Plan.md", "notes.txt"])
        );
        let out = fx.ok("vault_list", json!({"recursive": true})).await;
        assert_eq!(
            out.structured.unwrap()["entries"],
            json!([
                "Archive/",
                "Home.md",
                "Projects/",
                "Projects/Deep/",
                "Projects/Deep/Idea.MD",
                "Projects/Plan.md"
            ])
        );
        let out = fx
            .ok(
                "vault_list",
                json!({"path": "Projects/Deep", "recursive": true}),
            )
            .await;
        assert_eq!(
            out.text,
            r#"{"path":"Projects/Deep","recursive":true,"entries":["Projects/Deep/Idea.MD"]}"#
        );
        assert!(
            fx.err("vault_list", json!({"path": "Home.md"}))
                .await
                .starts_with("failed to list directory: Home.md:")
        );
        assert_eq!(
            fx.err("vault_list", json!({"recursive": "yes"})).await,
            "recursive must be a boolean"
        );
    }

    #[tokio::test]
    async fn search_returns_lines_with_context_and_honours_the_cap() {
        let fx = Fx::new(false);
        let out = fx.ok("vault_search", json!({"query": "plan"})).await;
        let v = out.structured.unwrap();
        assert_eq!(out.text, v.to_string());
        assert_eq!(
            v["results"],
            json!([
                {"path": "Home.md", "line": 3, "text": "See [[Projects/Plan]].", "before": ["Welcome to the vault."], "after": []},
                {"path": "Projects/Deep/Idea.MD", "line": 1, "text": "another plan", "before": [], "after": []},
                {"path": "Projects/Plan.md", "line": 2, "text": "The PLAN is here", "before": ["line one"], "after": ["line three"]},
            ])
        );
        assert_eq!(v["truncated"], false);
        assert_eq!(v["count"], 3);
        // Hidden folders and files, non-Markdown files and the sibling are not searched.
        assert_eq!(v["files_searched"], 3);

        let v = fx
            .ok(
                "vault_search",
                json!({"query": "PLAN IS", "path": "Projects", "context": 2}),
            )
            .await
            .structured
            .unwrap();
        assert_eq!(
            v["results"],
            json!([{"path": "Projects/Plan.md", "line": 2, "text": "The PLAN is here", "before": ["line one"], "after": ["line three", "line four"]}])
        );
        let v = fx
            .ok(
                "vault_search",
                json!({"query": "line", "context": 0, "max_results": 2}),
            )
            .await
            .structured
            .unwrap();
        assert_eq!(v["count"], 2);
        assert_eq!(v["truncated"], true);
        assert!(v["note"].as_str().unwrap().contains("first 2 matches"));
        assert_eq!(v["results"][1]["line"], 3);
        assert_eq!(v["results"][1]["before"], json!([]));
        // Exactly at the cap is not truncated.
        let v = fx
            .ok("vault_search", json!({"query": "line", "max_results": 3}))
            .await
            .structured
            .unwrap();
        assert_eq!(
            (v["count"].clone(), v["truncated"].clone()),
            (json!(3), json!(false))
        );

        let v = fx
            .ok("vault_search", json!({"query": "nothing like this"}))
            .await
            .structured
            .unwrap();
        assert_eq!(v["results"], json!([]));
        assert_eq!(v["note"], "No files containing 'nothing like this'");
        // The default cap is 50 matches.
        let many: String = (0..80).map(|i| format!("match {i}\n")).collect();
        std::fs::write(fx.root().join("Many.md"), many).unwrap();
        let v = fx
            .ok("vault_search", json!({"query": "match"}))
            .await
            .structured
            .unwrap();
        assert_eq!(
            (v["count"].clone(), v["truncated"].clone()),
            (json!(50), json!(true))
        );
        // Long lines are clipped on a character boundary.
        std::fs::write(fx.root().join("Long.md"), format!("zz{}", "é".repeat(900))).unwrap();
        let v = fx
            .ok("vault_search", json!({"query": "zz"}))
            .await
            .structured
            .unwrap();
        let t = v["results"][0]["text"].as_str().unwrap();
        assert_eq!(t.chars().count(), MAX_LINE_CHARS + 1);
        assert!(t.ends_with('…'));

        assert_eq!(fx.err("vault_search", json!({})).await, "query is required");
        assert_eq!(
            fx.err("vault_search", json!({"query": "  "})).await,
            "query is required"
        );
        assert_eq!(
            fx.err("vault_search", json!({"query": "x", "max_results": 0}))
                .await,
            "max_results must be between 1 and 500"
        );
        assert_eq!(
            fx.err("vault_search", json!({"query": "x", "context": 11}))
                .await,
            "context must be between 0 and 10"
        );
        assert_eq!(
            fx.err("vault_search", json!({"query": "x", "context": "2"}))
                .await,
            "context must be an integer"
        );
    }

    /// `git -c identity … ARGS` in `dir`, asserting success; returns stdout.
    fn sh_git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=Test",
                "-c",
                "user.email=test@example.invalid",
                "-c",
                "init.defaultBranch=main",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A bare `origin.git` and a clone of it, `vault`, with an identity in its own config
    /// (as a real vault needs) and one pushed commit.
    fn synced_vault() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let bare = tmp.path().join("origin.git");
        let vault = tmp.path().join("vault");
        sh_git(
            tmp.path(),
            &["init", "-q", "--bare", bare.to_str().unwrap()],
        );
        sh_git(
            tmp.path(),
            &[
                "clone",
                "-q",
                bare.to_str().unwrap(),
                vault.to_str().unwrap(),
            ],
        );
        for (k, v) in [
            ("user.name", "Vault Bot"),
            ("user.email", "vault@example.invalid"),
            ("commit.gpgsign", "false"),
        ] {
            sh_git(&vault, &["config", k, v]);
        }
        std::fs::write(vault.join("Home.md"), "# Home\n").unwrap();
        sh_git(&vault, &["add", "Home.md"]);
        sh_git(&vault, &["commit", "-q", "-m", "init"]);
        sh_git(&vault, &["push", "-q", "-u", "origin", "HEAD"]);
        (tmp, bare, vault)
    }

    fn bare_git(bare: &Path, args: &[&str]) -> String {
        let mut all = vec!["--git-dir", bare.to_str().unwrap()];
        all.extend_from_slice(args);
        sh_git(bare.parent().unwrap(), &all)
    }

    #[tokio::test]
    async fn git_sync_commits_pushes_and_pulls() {
        let (tmp, bare, vault) = synced_vault();
        let b = Builtins::new(vec![group(&VaultSettings {
            path: vault.clone(),
            git_sync: true,
            max_bytes: MAX_READ_BYTES,
            git_timeout: GIT_TIMEOUT,
        })]);
        let call = |tool: &'static str, args: Value| {
            let b = b.clone();
            async move { b.call(tool, &args).await.unwrap() }
        };

        let out = call(
            "vault_write",
            json!({"path": "Daily/2025-01-02.md", "content": "Met Ada.\n", "commit_message": "Daily note"}),
        )
        .await;
        assert_eq!(out, ToolOutput::ok("Wrote and synced Daily/2025-01-02.md"));
        assert_eq!(
            bare_git(&bare, &["log", "-1", "--format=%s|%an"]).trim(),
            "Daily note|Vault Bot"
        );
        assert_eq!(
            bare_git(&bare, &["show", "HEAD:Daily/2025-01-02.md"]),
            "Met Ada.\n"
        );
        // Default message; only the written note is in the commit.
        std::fs::write(vault.join("stray.md"), "not mine").unwrap();
        let out = call(
            "vault_write",
            json!({"path": "Home.md", "content": "# Home v2\n"}),
        )
        .await;
        assert_eq!(out.text, "Wrote and synced Home.md");
        assert_eq!(
            bare_git(&bare, &["log", "-1", "--format=%s"]).trim(),
            "Update Home.md"
        );
        assert_eq!(
            bare_git(&bare, &["show", "--name-only", "--format=", "HEAD"]).trim(),
            "Home.md"
        );
        // Same content again: nothing to commit is fine.
        let out = call(
            "vault_write",
            json!({"path": "Home.md", "content": "# Home v2\n"}),
        )
        .await;
        assert_eq!(out.text, "Wrote and synced Home.md (no changes to commit)");
        assert_eq!(
            bare_git(&bare, &["rev-list", "--count", "HEAD"]).trim(),
            "3"
        );

        // Someone else pushes; a read pulls it first.
        let other = tmp.path().join("other");
        sh_git(
            tmp.path(),
            &[
                "clone",
                "-q",
                bare.to_str().unwrap(),
                other.to_str().unwrap(),
            ],
        );
        std::fs::write(other.join("Remote.md"), "from elsewhere: plan\n").unwrap();
        sh_git(&other, &["add", "Remote.md"]);
        sh_git(&other, &["commit", "-q", "-m", "remote"]);
        sh_git(&other, &["push", "-q"]);
        let out = call("vault_read", json!({"path": "Remote.md"})).await;
        assert_eq!(out, ToolOutput::ok("from elsewhere: plan\n"));
        std::fs::write(other.join("Second.md"), "second plan\n").unwrap();
        sh_git(&other, &["add", "Second.md"]);
        sh_git(&other, &["commit", "-q", "-m", "second"]);
        sh_git(&other, &["push", "-q"]);
        let out = call("vault_search", json!({"query": "second"})).await;
        assert_eq!(out.structured.unwrap()["results"][0]["path"], "Second.md");

        // The remote moved on and nothing pulled since: the write rebases and pushes again.
        std::fs::write(other.join("Third.md"), "third\n").unwrap();
        sh_git(&other, &["add", "Third.md"]);
        sh_git(&other, &["commit", "-q", "-m", "third"]);
        sh_git(&other, &["push", "-q"]);
        let out = call(
            "vault_write",
            json!({"path": "Mine.md", "content": "mine\n"}),
        )
        .await;
        assert_eq!(out, ToolOutput::ok("Wrote and synced Mine.md"));
        assert_eq!(bare_git(&bare, &["show", "HEAD:Mine.md"]), "mine\n");
        assert_eq!(bare_git(&bare, &["show", "HEAD~1:Third.md"]), "third\n");
        assert!(vault.join("Third.md").exists());

        // A push that fails is reported; the file is still written.
        sh_git(
            &vault,
            &[
                "remote",
                "set-url",
                "origin",
                tmp.path().join("gone.git").to_str().unwrap(),
            ],
        );
        let out = call("vault_write", json!({"path": "Late.md", "content": "late"})).await;
        assert!(out.is_error);
        assert!(
            out.text
                .starts_with("file written but git sync failed: git push failed: exit status"),
            "{}",
            out.text
        );
        assert_eq!(
            std::fs::read_to_string(vault.join("Late.md")).unwrap(),
            "late"
        );
        // A failing pull is only logged: reads still work.
        let out = call("vault_read", json!({"path": "Late.md"})).await;
        assert_eq!(out, ToolOutput::ok("late"));
        let out = call("vault_list", json!({})).await;
        assert!(!out.is_error, "{}", out.text);
    }

    #[tokio::test]
    async fn a_conflicting_pull_leaves_no_rebase_behind() {
        let (tmp, bare, vault) = synced_vault();
        let b = Builtins::new(vec![group(&VaultSettings {
            path: vault.clone(),
            git_sync: true,
            max_bytes: MAX_READ_BYTES,
            git_timeout: GIT_TIMEOUT,
        })]);
        let other = tmp.path().join("other");
        sh_git(
            tmp.path(),
            &[
                "clone",
                "-q",
                bare.to_str().unwrap(),
                other.to_str().unwrap(),
            ],
        );
        std::fs::write(other.join("Home.md"), "theirs\n").unwrap();
        sh_git(&other, &["commit", "-q", "-am", "theirs"]);
        sh_git(&other, &["push", "-q"]);
        std::fs::write(vault.join("Home.md"), "ours\n").unwrap();
        sh_git(&vault, &["commit", "-q", "-am", "ours"]);
        let out = b
            .call("vault_read", &json!({"path": "Home.md"}))
            .await
            .unwrap();
        assert_eq!(out, ToolOutput::ok("ours\n"));
        assert!(!vault.join(".git/rebase-merge").exists());
        assert!(!vault.join(".git/rebase-apply").exists());
        assert_eq!(sh_git(&vault, &["status", "--porcelain"]).trim(), "");
    }

    #[tokio::test]
    async fn git_that_hangs_is_killed_at_the_timeout() {
        let tmp = tempfile::tempdir().unwrap();
        let t0 = std::time::Instant::now();
        // `git -c alias.x='!sleep 5' x`: a shell alias we start only in this test, to hang.
        let r = git(
            tmp.path(),
            &["-c", "alias.hang=!sleep 5", "hang"],
            Duration::from_millis(300),
        )
        .await;
        assert!(r.is_err_and(|e| e.contains("timed out")));
        assert!(t0.elapsed() < Duration::from_secs(4));
    }
}
