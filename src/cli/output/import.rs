//! What `openpact import` and `openpact setup` print: where they looked, each server once
//! with its sources, what cannot run and why, the variables to set; the files set up or
//! restored, and the diff on a terminal.

use super::out;
use crate::cli::import::Imported;
use crate::cli::setup::SetUp;
use serde_json::json;

/// `openpact import`, human or `--json`.
pub fn imported(done: &Imported, json: bool) -> anyhow::Result<()> {
    if json {
        out!("{}", serde_json::to_string_pretty(done)?);
        return Ok(());
    }
    out!("Looked in:");
    for l in &done.looked {
        let what = match (&l.error, l.found) {
            (Some(e), _) => format!("cannot read: {e}"),
            (None, true) => format!("found, {} server(s)", l.servers),
            (None, false) => "not found".to_string(),
        };
        out!("  {:<15} {}  ({what})", l.title, l.path);
    }
    out!();
    if done.servers.is_empty() {
        out!("No servers to import.");
    } else {
        let verb = if done.written {
            "Servers"
        } else {
            "Servers to add"
        };
        out!("{verb} (to {}):", done.config);
        for s in &done.servers {
            let status = match s.status {
                "added" => "added",
                "present" => "skipped: the config has a server of this name",
                _ if done.written => "not added",
                _ => "new",
            };
            out!("  {}  [{status}]", s.name);
            out!("    {}", serde_json::to_string(&s.entry)?);
            for src in &s.sources {
                let scope = src
                    .scope
                    .as_deref()
                    .map(|s| format!(" {s}"))
                    .unwrap_or_default();
                out!(
                    "    from {} `{}` in {}{scope}",
                    src.host,
                    src.name,
                    src.path
                );
            }
        }
    }
    if !done.skipped.is_empty() {
        out!();
        out!("Not imported (openpact cannot run them as they are):");
        for s in &done.skipped {
            out!(
                "  {} `{}` in {}: {}",
                s.source.host,
                s.source.name,
                s.source.path,
                s.why
            );
        }
    }
    if !done.variables.is_empty() {
        out!();
        out!(
            "These entries refer to variables instead of values found in clear; set them where openpact starts (export them in your shell profile, or in the `env` of the editor's openpact entry) before `openpact config check`:"
        );
        for v in &done.variables {
            out!("  {}  ({}; for {})", v.name, v.why, v.servers.join(", "));
        }
    }
    out!();
    if done.written {
        out!(
            "Wrote {}; `openpact config check` shows the result.",
            done.config
        );
    } else if done.servers.iter().any(|s| s.status == "new") {
        out!(
            "Nothing written: run `openpact import --write` to add the new servers to {}.",
            done.config
        );
    }
    Ok(())
}

/// The lines `setup` changes in one file, before it writes them.
pub fn setup_diff(one: &SetUp) {
    out!("--- {}", one.path);
    out!("+++ {}", one.path);
    for l in &one.diff {
        out!("{l}");
    }
}

/// `openpact setup` / `setup --undo`, human or `--json`.
pub fn set_up(done: &[SetUp], undo: bool, json: bool) -> anyhow::Result<()> {
    if json {
        out!(
            "{}",
            serde_json::to_string_pretty(&json!({"undo": undo, "files": done}))?
        );
        return Ok(());
    }
    for one in done {
        match (undo, &one.backup, one.changed) {
            (true, Some(b), _) => out!("{}: restored {} from {b}", one.host, one.path),
            (true, None, _) => out!(
                "{}: no openpact backup of {} to restore",
                one.host,
                one.path
            ),
            (false, _, false) => out!(
                "{}: {} already names openpact connect alone",
                one.host,
                one.path
            ),
            (false, Some(b), true) => {
                out!(
                    "{}: {} now names openpact connect alone (backup: {b})",
                    one.host,
                    one.path
                )
            }
            (false, None, true) => out!("{}: wrote {} naming openpact connect", one.host, one.path),
        }
    }
    if !undo && done.iter().any(|d| d.changed) {
        out!(
            "Restart the editors (or reload their MCP servers); `openpact setup --undo HOST…` puts the old files back."
        );
    }
    Ok(())
}
