//! "Did you mean …?" suggestions for misspelled keys and JSON path formatting for messages.

use serde_json::Value;

/// Optimal-string-alignment distance, case-insensitive, so a swapped pair of letters counts
/// as one edit.
fn distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(&a.to_lowercase(), &b.to_lowercase())
}

/// The candidate closest to `word` (case-insensitively) within two edits; ties go to
/// the earlier candidate. Each candidate is (compared text, text to suggest).
pub(crate) fn closest<'a>(word: &str, candidates: &[(&str, &'a str)]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|(compare, show)| (distance(word, compare), *show))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, show)| show)
}

pub(crate) fn closest_key<'a>(word: &str, keys: &[&'a str]) -> Option<&'a str> {
    let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (*k, *k)).collect();
    closest(word, &pairs)
}

/// The message for a key that is ignored, with a suggestion when one is close.
pub(crate) fn unknown_key(suggestion: Option<&str>) -> String {
    match suggestion {
        Some(s) => format!("unknown key (ignored); did you mean `{s}`?"),
        None => "unknown key (ignored)".to_string(),
    }
}

fn identifier_like(key: &str) -> bool {
    let mut chars = key.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '$'))
}

/// `parent.key`, or `parent["odd key"]` when the key would be ambiguous with dots.
pub(crate) fn child(parent: &str, key: &str) -> String {
    if !identifier_like(key) {
        format!("{parent}[{}]", Value::String(key.to_string()))
    } else if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("comand", "command"), 1);
        assert_eq!(distance("cmomand", "command"), 1);
        assert_eq!(distance("ARGS", "args"), 0);
        assert_eq!(distance("", "env"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn suggestions() {
        let keys = ["command", "args", "env", "cwd"];
        assert_eq!(closest_key("comand", &keys), Some("command"));
        assert_eq!(closest_key("ARGS", &keys), Some("args"));
        assert_eq!(closest_key("environment", &keys), None);
        assert_eq!(
            closest(
                "toolNames",
                &[("servers", "servers"), ("toolNames", "openpact.toolNames")]
            ),
            Some("openpact.toolNames")
        );
    }

    #[test]
    fn paths() {
        assert_eq!(child("", "mcpServers"), "mcpServers");
        assert_eq!(child("mcpServers", "github"), "mcpServers.github");
        assert_eq!(child("mcpServers", "my-server"), "mcpServers.my-server");
        assert_eq!(child("mcpServers", "odd key"), "mcpServers[\"odd key\"]");
        assert_eq!(child("mcpServers", "a.b"), "mcpServers[\"a.b\"]");
        assert_eq!(child("mcpServers", ""), "mcpServers[\"\"]");
        assert_eq!(child("", "odd key"), "[\"odd key\"]");
        assert_eq!(
            index("mcpServers.github.args", 2),
            "mcpServers.github.args[2]"
        );
    }
}
