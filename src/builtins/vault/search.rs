//! `vault_search`: matching lines of the vault's Markdown notes, with context.

use super::notes::{is_markdown, root_canon, walk};
use super::{MAX_RESULTS, resolve};
use crate::builtins::ToolOutput;
use crate::builtins::workspace::read_text;
use serde_json::json;
use std::path::Path;

/// Longest line (in characters) a search result shows; longer ones end in `…`.
pub(super) const MAX_LINE_CHARS: usize = 500;

pub(super) fn search_tool(
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
