//! What `openpact add`, `remove` and `registry search` print: the entry written or removed,
//! the variables to set, the registry's choice, and what each running hub did.

use super::out;
use crate::cli::addrm::Changed;
use crate::cli::registry::Found;
use serde_json::json;

/// `add` or `remove` done.
pub fn server_changed(done: &Changed, json: bool) {
    if json {
        out!("{}", serde_json::to_string_pretty(done).unwrap_or_default());
        return;
    }
    if done.created {
        out!("made {}", done.config);
    }
    if let Some(c) = &done.chosen {
        out!(
            "{} {} from the registry: {} ({})",
            c.registry_name,
            c.version,
            c.what,
            c.why
        );
    }
    match &done.entry {
        Some(entry) => out!(
            "added {} to {}: {}",
            done.server,
            done.config,
            started_by(entry)
        ),
        None => out!("removed {} from {}", done.server, done.config),
    }
    if !done.set.is_empty() {
        out!(
            "set these where openpact runs (its environment: your shell profile, or the editor's env for `openpact connect`), then `openpact reload`:"
        );
        for v in &done.set {
            out!("  {}  ({})", v.name, v.why);
        }
    }
    for n in done.notes.iter().skip(usize::from(done.chosen.is_some())) {
        out!("note: {n}");
    }
    super::config::hub_reloads(&done.hubs);
}

/// How an entry starts its server, as a person would type it: `COMMAND ARGS…`, or the URL.
fn started_by(entry: &serde_json::Value) -> String {
    match entry["command"].as_str() {
        Some(command) => {
            let mut words = vec![command.to_string()];
            words.extend(
                entry["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(str::to_string)),
            );
            words.join(" ")
        }
        None => entry["url"].as_str().unwrap_or_default().to_string(),
    }
}

/// A refused `add` or `remove` (exit 1): stderr, or `{"error": …}` with `--json`.
pub fn refused(message: &str, json: bool) {
    if json {
        out!("{}", json!({"error": {"message": message}}));
    } else {
        eprintln!("openpact: {message}");
    }
}

/// `registry search`.
pub fn registry_found(registry: &str, query: &str, found: &[Found], json: bool) {
    if json {
        out!(
            "{}",
            serde_json::to_string_pretty(found).unwrap_or_default()
        );
        return;
    }
    if found.is_empty() {
        out!("no server in {registry} matches {query}");
        return;
    }
    let width = found.iter().map(|f| f.name.len()).max().unwrap_or(0);
    for f in found {
        out!(
            "{:width$}  {:10}  {:14}  {}",
            f.name,
            f.version,
            f.kinds.join(","),
            f.description
        );
    }
    out!("add one with: openpact add --registry NAME");
}
