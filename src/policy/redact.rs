//! Secret redaction: one Aho–Corasick automaton over every secret value (8 bytes or more),
//! rewriting each occurrence to `[REDACTED:NAME]` in anything that leaves openpact.
//!
//! Values are matched both as written and in their JSON-escaped form, because results travel
//! as JSON text and a secret with a quote or backslash in it looks different there.

use aho_corasick::{AhoCorasick, MatchKind};
use std::borrow::Cow;

/// Shorter values match too much ordinary text to be worth hiding.
pub const MIN_SECRET_LEN: usize = 8;

#[derive(Debug, Default)]
pub struct Redactor {
    automaton: Option<AhoCorasick>,
    replacements: Vec<String>,
    names: Vec<String>,
}

impl Redactor {
    /// `secrets`: (name, value) pairs; short and empty values are ignored.
    pub fn new(secrets: &[(String, String)]) -> Redactor {
        let mut patterns = Vec::new();
        let mut replacements = Vec::new();
        let mut names = Vec::new();
        for (name, value) in secrets {
            if value.len() < MIN_SECRET_LEN {
                continue;
            }
            let replacement = format!("[REDACTED:{name}]");
            let quoted = crate::jsonrpc::quote(value);
            let escaped = &quoted[1..quoted.len() - 1];
            patterns.push(value.clone());
            replacements.push(replacement.clone());
            if escaped != value {
                patterns.push(escaped.to_string());
                replacements.push(replacement);
            }
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        let automaton = if patterns.is_empty() {
            None
        } else {
            // Leftmost-longest: of two overlapping secrets the longer is hidden whole.
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&patterns)
                .ok()
        };
        Redactor {
            automaton,
            replacements,
            names,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// Names of the secrets covered (never their values).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(ac) = &self.automaton else {
            return Cow::Borrowed(text);
        };
        if !ac.is_match(text) {
            return Cow::Borrowed(text);
        }
        Cow::Owned(ac.replace_all(text, &self.replacements))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hides_values_raw_and_json_escaped_longest_first() {
        let r = Redactor::new(&[
            ("TOKEN".into(), "ghp_abcdefgh12345".into()),
            ("LONGER".into(), "ghp_abcdefgh12345XYZ".into()),
            ("QUOTED".into(), "pa\"ss\\word!".into()),
            ("SHORT".into(), "abc".into()),
        ]);
        assert_eq!(r.redact("x ghp_abcdefgh12345 y"), "x [REDACTED:TOKEN] y");
        assert_eq!(r.redact("ghp_abcdefgh12345XYZ"), "[REDACTED:LONGER]");
        assert_eq!(
            r.redact(r#"{"t":"pa\"ss\\word!"}"#),
            r#"{"t":"[REDACTED:QUOTED]"}"#
        );
        assert_eq!(r.redact("abc"), "abc");
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
        assert!(Redactor::new(&[]).is_empty());
    }
}
