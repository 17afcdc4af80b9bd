//! `openpact setup HOST…`: each host's user config rewritten so that its only MCP server is
//! `openpact connect`, after a timestamped backup beside the file; `--undo` puts the newest
//! backup back. The rest of each file (Claude Code's `~/.claude.json` holds much more) is
//! kept byte for byte.

use super::hosts::{self, Dirs, Place, Shape};
use super::output;
use crate::config::edit;
use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The name the openpact entry has in every host.
const NAME: &str = "openpact";
const BACKUP: &str = ".openpact-backup-";

/// What `setup` did to one file.
#[derive(Debug, Serialize)]
pub struct SetUp {
    pub host: &'static str,
    pub path: String,
    /// The backup made (setup) or put back (undo); none when there was no file (setup) or
    /// no backup (undo).
    pub backup: Option<String>,
    /// Whether the file changed.
    pub changed: bool,
    /// Lines removed and added, for the terminal.
    #[serde(skip)]
    pub diff: Vec<String>,
}

/// `openpact setup HOST… [--undo]`.
pub fn run(
    config_arg: &Option<PathBuf>,
    state_dir_arg: &Option<PathBuf>,
    home: Option<&Path>,
    ids: &[String],
    undo: bool,
    json: bool,
) -> Result<ExitCode> {
    let hosts: Vec<&hosts::Host> = ids
        .iter()
        .map(|id| hosts::named(id).map_err(anyhow::Error::msg))
        .collect::<Result<_>>()?;
    let cwd = std::env::current_dir().context("cannot determine the current directory")?;
    let Some(dirs) = Dirs::new(home, cwd) else {
        bail!("$HOME is not set: pass --home DIR to say where the hosts' files are");
    };
    let args = connect_args(config_arg, state_dir_arg)?;
    let command = std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .map_or_else(|| NAME.to_string(), |p| p.display().to_string());
    let show_diff = !json && std::io::stdout().is_terminal();
    let mut done = Vec::new();
    for host in hosts {
        let Some(place) = host.setup_place(&dirs) else {
            continue;
        };
        let one = if undo {
            restore(host.id, &place.path)?
        } else {
            match point(host.id, &place, &command, &args) {
                Ok(one) => one,
                // A file it cannot parse is refused, not an internal failure.
                Err(e) if e.downcast_ref::<hosts::FileError>().is_some() => {
                    output::fatal(&e);
                    return Ok(ExitCode::from(1));
                }
                Err(e) => return Err(e),
            }
        };
        if show_diff && !one.diff.is_empty() {
            output::setup_diff(&one);
        }
        done.push(one);
    }
    output::set_up(&done, undo, json)?;
    Ok(ExitCode::SUCCESS)
}

/// `connect`, after `--config PATH` when the config is not the one openpact finds by
/// default (the editor starts it elsewhere, without this shell's environment), and
/// `--state-dir` when given.
fn connect_args(
    config_arg: &Option<PathBuf>,
    state_dir_arg: &Option<PathBuf>,
) -> Result<Vec<String>> {
    let mut args = Vec::new();
    let default = crate::config::user_config_file(&|k| std::env::var(k).ok());
    let config = match config_arg {
        Some(c) => Some(c.clone()),
        None => crate::config::file(None)?,
    };
    if let Some(config) = config {
        let config = std::fs::canonicalize(&config).unwrap_or(config);
        let is_default = default
            .as_ref()
            .is_some_and(|d| std::fs::canonicalize(d).ok().as_ref() == Some(&config));
        if !is_default {
            args.extend(["--config".to_string(), config.display().to_string()]);
        }
    }
    if let Some(state) = state_dir_arg {
        let state = std::fs::canonicalize(state).unwrap_or_else(|_| state.clone());
        args.extend(["--state-dir".to_string(), state.display().to_string()]);
    }
    args.push("connect".to_string());
    Ok(args)
}

/// Rewrites `place` so its servers are `openpact` alone, after a backup.
fn point(host: &'static str, place: &Place, command: &str, args: &[String]) -> Result<SetUp> {
    let path = &place.path;
    let old = hosts::text_of(path)?;
    let text = old.clone().unwrap_or_default();
    let new = match place.shape {
        Shape::Codex => codex(&text, path, command, args)?,
        shape => json(&text, path, shape, command, args)?,
    };
    let mut one = SetUp {
        host,
        path: path.display().to_string(),
        backup: None,
        changed: old.as_deref() != Some(new.as_str()),
        diff: diff(&text, &new),
    };
    if !one.changed {
        return Ok(one);
    }
    if old.is_some() {
        let stamp = chrono::Local::now().format("%Y%m%dT%H%M%S");
        let backup = PathBuf::from(format!("{}{BACKUP}{stamp}", path.display()));
        std::fs::copy(path, &backup).with_context(|| {
            format!("cannot back {} up to {}", path.display(), backup.display())
        })?;
        one.backup = Some(backup.display().to_string());
    } else if let Some(dir) = path.parent() {
        crate::platform::create_dir_all(dir, 0o700)
            .with_context(|| format!("cannot make {}", dir.display()))?;
    }
    crate::state::replace(path, new.as_bytes(), 0o600, true)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(one)
}

/// A JSON host file with its servers object set to `openpact` alone (Claude Code's
/// per-project servers emptied too); refused when the file does not parse.
fn json(text: &str, path: &Path, shape: Shape, command: &str, args: &[String]) -> Result<String> {
    let root = hosts::parse_json(text, path)?;
    let mut servers = serde_json::Map::new();
    servers.insert(NAME.to_string(), shape.stdio_entry(command, args));
    let value = serde_json::to_string_pretty(&Value::Object(servers))?;
    let base = if text.trim().is_empty() { "{}\n" } else { text };
    let edited = |e: edit::EditError| anyhow::anyhow!("cannot edit {}: {e}", path.display());
    let mut out = edit::set(base, shape.servers_path(), &value).map_err(edited)?;
    if shape == Shape::ClaudeUser {
        let projects = root.get("projects").and_then(Value::as_object);
        for (project, v) in projects.into_iter().flatten() {
            let has = v
                .get("mcpServers")
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty());
            if has {
                out =
                    edit::set(&out, &["projects", project, "mcpServers"], "{}").map_err(edited)?;
            }
        }
    }
    Ok(out)
}

/// Codex's `config.toml` with `[mcp_servers]` holding `openpact` alone.
fn codex(text: &str, path: &Path, command: &str, args: &[String]) -> Result<String> {
    let mut doc = hosts::parse_toml(text, path)?;
    let mut entry = toml_edit::Table::new();
    entry.insert("command", toml_edit::value(command));
    let mut list = toml_edit::Array::new();
    for a in args {
        list.push(a.as_str());
    }
    entry.insert("args", toml_edit::value(list));
    let mut servers = toml_edit::Table::new();
    servers.set_implicit(true);
    servers.insert(NAME, toml_edit::Item::Table(entry));
    doc.insert("mcp_servers", toml_edit::Item::Table(servers));
    Ok(doc.to_string())
}

/// Puts the newest backup of `path` back (the backup is used up, so a second `--undo` goes
/// one further back).
fn restore(host: &'static str, path: &Path) -> Result<SetUp> {
    let mut one = SetUp {
        host,
        path: path.display().to_string(),
        backup: None,
        changed: false,
        diff: Vec::new(),
    };
    let Some(backup) = newest_backup(path) else {
        return Ok(one);
    };
    let current = hosts::text_of(path)?.unwrap_or_default();
    let old = std::fs::read_to_string(&backup)
        .with_context(|| format!("cannot read {}", backup.display()))?;
    one.diff = diff(&current, &old);
    crate::state::replace(path, old.as_bytes(), 0o600, true)
        .with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::remove_file(&backup).with_context(|| format!("cannot remove {}", backup.display()))?;
    one.changed = current != old;
    one.backup = Some(backup.display().to_string());
    Ok(one)
}

/// The backup of `path` with the latest stamp (the stamps sort as text).
fn newest_backup(path: &Path) -> Option<PathBuf> {
    let dir = path.parent()?;
    let prefix = format!("{}{BACKUP}", path.file_name()?.to_string_lossy());
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .max()
        .map(|n| dir.join(n))
}

/// The lines between the common head and tail of `old` and `new`, as `-` and `+` lines
/// with a line of context each side: enough to see what changes in a config file.
fn diff(old: &str, new: &str) -> Vec<String> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    if head == a.len() && head == b.len() {
        return Vec::new();
    }
    let mut out = vec![format!("@@ line {} @@", head + 1)];
    if head > 0 {
        out.push(format!(" {}", a[head - 1]));
    }
    out.extend(a[head..a.len() - tail].iter().map(|l| format!("-{l}")));
    out.extend(b[head..b.len() - tail].iter().map(|l| format!("+{l}")));
    if tail > 0 {
        out.push(format!(" {}", a[a.len() - tail]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_diff_shows_the_changed_lines_with_context() {
        let d = diff("a\nb\nc\n", "a\nx\ny\nc\n");
        assert_eq!(d, vec!["@@ line 2 @@", " a", "-b", "+x", "+y", " c"]);
        assert!(diff("a\n", "a\n").is_empty());
    }

    #[test]
    fn codex_keeps_the_rest_of_its_file() {
        let text = "# mine\nmodel = \"o3\"\n\n[mcp_servers.a]\ncommand = \"x\"\n\n[tui]\nx = 1\n";
        let out = codex(
            text,
            Path::new("c.toml"),
            "/bin/openpact",
            &["connect".into()],
        )
        .unwrap();
        assert!(out.starts_with("# mine\nmodel = \"o3\"\n"), "{out}");
        assert!(out.contains("[tui]\nx = 1"), "{out}");
        assert!(
            out.contains(
                "[mcp_servers.openpact]\ncommand = \"/bin/openpact\"\nargs = [\"connect\"]"
            ),
            "{out}"
        );
        assert!(!out.contains("mcp_servers.a"), "{out}");
    }
}
