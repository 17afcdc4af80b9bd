//! The workspace and memory tools (`workspace_read`, `workspace_write`, `workspace_list`,
//! `memory_read`, `memory_write`) over the workspace root (`ai-data` beside the config, or in the data dir with none, by
//! default, created on first write), plus the capped text reads and atomic writes the vault
//! tools share.
//!
//! Every user path goes through [`paths::resolve`]; nothing here checks containment itself.
//! Reads stop at `openpact.builtins.workspace.maxBytes` (cut on a character boundary, with a visible marker) and
//! refuse binary files; writes go to a temp file in the same directory and are renamed into
//! place, so a reader never sees half a file.

use super::paths::{self, PathError};
use super::{BoxFuture, Group, ToolDef, ToolOutput, hints};
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The most bytes any read returns (1 MiB); longer files are cut with a marker.
/// The default read cap (the config's `workspace.maxBytes`), as the tests use it.
#[cfg(test)]
pub(crate) const MAX_READ_BYTES: u64 = 1024 * 1024;

/// The most entries a listing returns; past it the result says `truncated`.
pub(crate) const MAX_LIST_ENTRIES: usize = 5000;

/// The files `memory_*` may touch, besides `memory/YYYY-MM-DD.md`.
const MEMORY_FILES: [&str; 3] = ["MEMORY.md", "SOUL.md", "USER.md"];

/// The workspace and memory tools over `settings.workspace_root`.
pub fn group(settings: &crate::config::BuiltinsSettings) -> Arc<dyn Group> {
    Arc::new(Workspace {
        root: settings.workspace_root.clone(),
        max_read: settings.workspace_max_bytes,
        write_lock: tokio::sync::Mutex::new(()),
    })
}

struct Workspace {
    root: PathBuf,
    max_read: u64,
    /// Serialises this process's writes, so two `memory_write` appends never lose one another
    /// (an append is read + atomic replace).
    write_lock: tokio::sync::Mutex<()>,
}

impl Group for Workspace {
    fn tools(&self) -> Vec<ToolDef> {
        let cap = self.max_read / 1024;
        vec![
            ToolDef {
                name: "workspace_read",
                description: format!(
                    "Read a UTF-8 text file from the workspace folder. `path` is relative to \
                     the workspace root; paths outside it are refused. Files over {cap} KiB are \
                     cut with a marker; binary files are refused."
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "File path relative to the workspace root, e.g. notes/todo.md"}
                    },
                    "required": ["path"]
                }),
                annotations: Some(hints::read_only()),
            },
            ToolDef {
                name: "workspace_write",
                description: "Write a text file in the workspace folder, creating parent \
                              folders and replacing any existing file atomically. Returns \
                              `Wrote <N> bytes to <path>`. Paths outside the workspace are refused."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "File path relative to the workspace root"},
                        "content": {"type": "string", "description": "The whole new content of the file"}
                    },
                    "required": ["path", "content"]
                }),
                annotations: Some(hints::overwrites(false)),
            },
            ToolDef {
                name: "workspace_list",
                description: format!(
                    "List one folder of the workspace: entry names sorted, folders \
                     ending in `/`, dotfiles included. `path` defaults to the workspace root. \
                     Returns JSON {{path, entries}}; at most {MAX_LIST_ENTRIES} entries."
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "Folder relative to the workspace root (default: the root)"}
                    }
                }),
                annotations: Some(hints::read_only()),
            },
            ToolDef {
                name: "memory_read",
                description: format!(
                    "Read a memory file: MEMORY.md (long-term memory, the default), SOUL.md \
                     (identity), USER.md (user profile) or memory/YYYY-MM-DD.md (a daily note). \
                     A file that does not exist yet reads as empty text. Cut at {cap} KiB."
                ),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "file": {"type": "string", "description": "MEMORY.md (default), SOUL.md, USER.md or memory/YYYY-MM-DD.md"}
                    }
                }),
                annotations: Some(hints::read_only()),
            },
            ToolDef {
                name: "memory_write",
                description: "Write a memory file: MEMORY.md (default), SOUL.md, USER.md or \
                              memory/YYYY-MM-DD.md. Replaces the file, or with `append: true` \
                              adds the content at its end on a new line."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "Text to write (or append)"},
                        "file": {"type": "string", "description": "MEMORY.md (default), SOUL.md, USER.md or memory/YYYY-MM-DD.md"},
                        "append": {"type": "boolean", "description": "Add to the end instead of replacing (default false)"}
                    },
                    "required": ["content"]
                }),
                annotations: Some(json!({
                    "readOnlyHint": false,
                    "destructiveHint": true,
                    "idempotentHint": false,
                    "openWorldHint": false
                })),
            },
        ]
    }

    fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let root = self.root.clone();
            let max = self.max_read;
            let path = str_arg(args, "path");
            match tool {
                "workspace_read" => blocking(move || read_tool(&root, &path, max)).await,
                "workspace_list" => blocking(move || list_tool(&root, &path)).await,
                "workspace_write" => {
                    let content = str_arg(args, "content");
                    let _guard = self.write_lock.lock().await;
                    blocking(move || write_tool(&root, &path, &content)).await
                }
                "memory_read" => {
                    let file = str_arg(args, "file");
                    blocking(move || memory_read(&root, &file, max)).await
                }
                "memory_write" => {
                    let file = str_arg(args, "file");
                    let content = str_arg(args, "content");
                    let append = args.get("append").and_then(Value::as_bool) == Some(true);
                    let _guard = self.write_lock.lock().await;
                    blocking(move || memory_write(&root, &file, &content, append)).await
                }
                other => ToolOutput::unknown_tool(other),
            }
        })
    }
}

/// A string argument, or "" when absent (schemas already checked the type).
pub(crate) fn str_arg(args: &Value, name: &str) -> String {
    args.get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Runs blocking file work off the async threads.
pub(crate) async fn blocking(f: impl FnOnce() -> ToolOutput + Send + 'static) -> ToolOutput {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| ToolOutput::error(format!("internal error: {e}")))
}

fn read_tool(root: &Path, user: &str, max: u64) -> ToolOutput {
    let user = user.trim();
    if !root.is_dir() && !user.is_empty() {
        // The workspace is created on first write; until then every file is missing.
        return ToolOutput::error(format!(
            "failed to read file: {user}: no such file (the workspace is empty)"
        ));
    }
    let full = match paths::resolve(root, user, "workspace") {
        Ok(p) => p,
        Err(e) => return path_error(e, "failed to read file"),
    };
    match read_text(&full, max) {
        Ok(t) => ToolOutput::ok(t.with_marker()),
        Err(e) => ToolOutput::error(format!("failed to read file: {}", e.describe(user))),
    }
}

fn list_tool(root: &Path, user: &str) -> ToolOutput {
    let user = user.trim();
    let is_root = user.is_empty() || user == ".";
    let shown = if is_root { "." } else { user };
    if !root.is_dir() {
        if is_root {
            return ToolOutput::json(json!({"path": ".", "entries": []}));
        }
        return ToolOutput::error(format!(
            "failed to list directory: {user}: no such directory (the workspace is empty)"
        ));
    }
    let dir = match paths::resolve(root, if is_root { "." } else { user }, "workspace") {
        Ok(p) => p,
        Err(e) => return path_error(e, "failed to list directory"),
    };
    match list_dir(&dir, false) {
        Ok((entries, truncated)) => listing(shown, entries, truncated, None),
        Err(e) => ToolOutput::error(format!("failed to list directory: {shown}: {e}")),
    }
}

fn write_tool(root: &Path, user: &str, content: &str) -> ToolOutput {
    let user = user.trim();
    if let Err(out) = create_root(root) {
        return out;
    }
    match place(root, user, "workspace") {
        Ok(full) => match write_file(&full, content.as_bytes()) {
            Ok(()) => ToolOutput::ok(format!("Wrote {} bytes to {user}", content.len())),
            Err(e) => ToolOutput::error(format!("failed to write file: {user}: {e}")),
        },
        Err(out) => out,
    }
}

/// Resolves `user` for a write: creates the parent folders, then resolves again so a symlink
/// met on the way is still checked against the root.
pub(crate) fn place(root: &Path, user: &str, what: &'static str) -> Result<PathBuf, ToolOutput> {
    if user.is_empty() {
        return Err(ToolOutput::error("path is required"));
    }
    let full =
        paths::resolve(root, user, what).map_err(|e| path_error(e, "failed to write file"))?;
    if let Some(parent) = full.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| ToolOutput::error(format!("failed to create directory: {user}: {e}")))?;
    }
    paths::resolve(root, user, what).map_err(|e| path_error(e, "failed to write file"))
}

/// Creates the workspace root on first write.
fn create_root(root: &Path) -> Result<(), ToolOutput> {
    std::fs::create_dir_all(root).map_err(|e| {
        ToolOutput::error(format!(
            "failed to create directory: {}: {e}",
            root.display()
        ))
    })
}

/// The tool error for a refused or unresolvable path; `io_context` prefixes I/O failures.
pub(crate) fn path_error(e: PathError, io_context: &str) -> ToolOutput {
    match e {
        PathError::Io(m) => ToolOutput::error(format!("{io_context}: {m}")),
        refused => ToolOutput::error(refused.to_string()),
    }
}

/// A listing result: text and `structuredContent` are the same JSON object.
pub(crate) fn listing(
    path: &str,
    entries: Vec<String>,
    truncated: bool,
    recursive: Option<bool>,
) -> ToolOutput {
    let mut v = json!({"path": path});
    if let Some(r) = recursive {
        v["recursive"] = Value::Bool(r);
    }
    v["entries"] = json!(entries);
    if truncated {
        v["truncated"] = Value::Bool(true);
        v["note"] = json!(format!(
            "only the first {MAX_LIST_ENTRIES} entries are shown; list a subfolder"
        ));
    }
    ToolOutput::json(v)
}

/// One level of `dir`: names sorted, folders ending in `/`, hidden names kept unless
/// `skip_hidden`. Symlinks are not followed (a link shows as a plain name).
pub(crate) fn list_dir(dir: &Path, skip_hidden: bool) -> std::io::Result<(Vec<String>, bool)> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if skip_hidden && name.starts_with('.') {
            continue;
        }
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        names.push(if is_dir { format!("{name}/") } else { name });
    }
    names.sort();
    let truncated = names.len() > MAX_LIST_ENTRIES;
    names.truncate(MAX_LIST_ENTRIES);
    Ok((names, truncated))
}

/// Maps `file` (default MEMORY.md) to its path under the root, or explains what is allowed.
fn memory_file(file: &str) -> Result<String, String> {
    let file = file.trim();
    let file = if file.is_empty() { "MEMORY.md" } else { file };
    if MEMORY_FILES.contains(&file) || is_daily(file) {
        Ok(file.to_string())
    } else {
        Err(format!(
            "invalid memory path '{file}': allowed are MEMORY.md, SOUL.md, USER.md and \
             memory/YYYY-MM-DD.md (a real date)"
        ))
    }
}

/// `memory/YYYY-MM-DD.md` with a date that exists.
fn is_daily(file: &str) -> bool {
    let Some(date) = file
        .strip_prefix("memory/")
        .and_then(|f| f.strip_suffix(".md"))
    else {
        return false;
    };
    // The shape check keeps chrono's lenient parsing (unpadded fields) out.
    let shape = date.len() == 10
        && date.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    shape && chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok()
}

fn memory_read(root: &Path, file: &str, max: u64) -> ToolOutput {
    let file = match memory_file(file) {
        Ok(f) => f,
        Err(e) => return ToolOutput::error(e),
    };
    if !root.is_dir() {
        return ToolOutput::ok("");
    }
    let full = match paths::resolve(root, &file, "workspace") {
        Ok(p) => p,
        Err(e) => return path_error(e, "failed to read memory"),
    };
    match read_text(&full, max) {
        Ok(t) => ToolOutput::ok(t.with_marker()),
        Err(ReadError::NotFound) => ToolOutput::ok(""),
        Err(e) => ToolOutput::error(format!("failed to read memory: {}", e.describe(&file))),
    }
}

fn memory_write(root: &Path, file: &str, content: &str, append: bool) -> ToolOutput {
    let file = match memory_file(file) {
        Ok(f) => f,
        Err(e) => return ToolOutput::error(e),
    };
    if let Err(out) = create_root(root) {
        return out;
    }
    let full = match place(root, &file, "workspace") {
        Ok(p) => p,
        Err(out) => return out,
    };
    let new = if append {
        let old = match std::fs::read(&full) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(s) => s,
                Err(_) => {
                    return ToolOutput::error(format!(
                        "failed to write memory: {file} is not UTF-8 text; not appending to it"
                    ));
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return ToolOutput::error(format!("failed to write memory: {file}: {e}")),
        };
        let sep = if old.is_empty() || old.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        format!("{old}{sep}{content}")
    } else {
        content.to_string()
    };
    match write_file(&full, new.as_bytes()) {
        Ok(()) if append => ToolOutput::ok(format!("Appended {} bytes to {file}", content.len())),
        Ok(()) => ToolOutput::ok(format!("Wrote memory to {file} ({} bytes)", content.len())),
        Err(e) => ToolOutput::error(format!("failed to write memory: {file}: {e}")),
    }
}

/// Text read under a cap.
#[derive(Debug)]
pub(crate) struct Text {
    pub text: String,
    /// The file's size, when more than `text` was there.
    pub cut_from: Option<u64>,
}

impl Text {
    /// The text, with a visible marker if it was cut.
    pub fn with_marker(self) -> String {
        match self.cut_from {
            None => self.text,
            Some(total) => format!(
                "{}\n\n[Content truncated: {} of {total} bytes shown]",
                self.text,
                self.text.len()
            ),
        }
    }
}

#[derive(Debug)]
pub(crate) enum ReadError {
    NotFound,
    NotAFile { dir: bool },
    Binary,
    Io(std::io::Error),
}

impl ReadError {
    /// The failure, naming the file as the user wrote it.
    pub fn describe(&self, user: &str) -> String {
        match self {
            ReadError::NotFound => format!("{user}: no such file"),
            ReadError::NotAFile { dir: true } => format!("{user} is a directory"),
            ReadError::NotAFile { dir: false } => format!("{user} is not a regular file"),
            ReadError::Binary => {
                format!("{user} is a binary file; only UTF-8 text files can be read")
            }
            ReadError::Io(e) => format!("{user}: {e}"),
        }
    }
}

/// Reads at most `max` bytes of a regular UTF-8 text file. A cut inside a character backs
/// off to the character's start; NUL bytes or invalid UTF-8 mean binary.
pub(crate) fn read_text(path: &Path, max: u64) -> Result<Text, ReadError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => ReadError::NotFound,
        _ => ReadError::Io(e),
    })?;
    // Checked before opening: opening a FIFO would block until someone writes to it.
    if !meta.is_file() {
        return Err(ReadError::NotAFile { dir: meta.is_dir() });
    }
    let file = std::fs::File::open(path).map_err(ReadError::Io)?;
    let mut buf = Vec::new();
    file.take(max.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(ReadError::Io)?;
    let cut = buf.len() as u64 > max;
    if cut {
        buf.truncate(max as usize);
    }
    if buf.contains(&0) {
        return Err(ReadError::Binary);
    }
    let text = match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => {
            let u = e.utf8_error();
            // Only an incomplete character at the cut is fine; anything else is not text.
            if !(cut && u.error_len().is_none()) {
                return Err(ReadError::Binary);
            }
            let valid = u.valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).map_err(|_| ReadError::Binary)?
        }
    };
    let total = std::fs::metadata(path)
        .map(|m| m.len())
        .unwrap_or(meta.len());
    Ok(Text {
        text,
        cut_from: cut.then_some(total.max(max + 1)),
    })
}

/// Replaces `path` with `bytes` atomically. An existing file keeps its permissions; a new one
/// is 0644 (less umask), like any file a user writes.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    crate::state::replace(path, bytes, 0o644, true)
}

#[cfg(test)]
mod tests;
