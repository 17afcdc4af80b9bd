//! Secret redaction: one Aho–Corasick automaton over every secret value (8 bytes or more),
//! rewriting each occurrence to `[REDACTED:NAME]` in anything that leaves openpact.
//!
//! Values are matched both as written and in their JSON-escaped form, because results travel
//! as JSON text and a secret with a quote or backslash in it looks different there. JSON can
//! spell any character with an escape (`\/`, `\u00e9`, `\u0041`, as Python's `json.dumps`
//! and PHP's `json_encode` do): text with such escapes is also searched with every escape in
//! serde_json's form, and when a secret shows there, that form is what is returned (the same
//! JSON, redacted).

use aho_corasick::{AhoCorasick, MatchKind};
use std::borrow::Cow;

/// Shorter values match too much ordinary text to be worth hiding.
pub const MIN_SECRET_LEN: usize = 8;

#[derive(Debug, Default)]
pub struct Redactor {
    automaton: Option<AhoCorasick>,
    replacements: Vec<String>,
}

impl Redactor {
    /// `secrets`: (name, value) pairs; short and empty values are ignored.
    pub fn new(secrets: &[(String, String)]) -> Redactor {
        let mut patterns = Vec::new();
        let mut replacements = Vec::new();
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
        }
    }

    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(ac) = &self.automaton else {
            return Cow::Borrowed(text);
        };
        let plain = if ac.is_match(text) {
            Cow::Owned(ac.replace_all(text, &self.replacements))
        } else {
            Cow::Borrowed(text)
        };
        if !has_loose_escape(&plain) {
            return plain;
        }
        let canonical = canonical_escapes(&plain);
        if !ac.is_match(&canonical) {
            return plain;
        }
        Cow::Owned(ac.replace_all(&canonical, &self.replacements))
    }
}

/// Whether `text` has a JSON escape serde_json would not have written: `\/` or a `\u`.
fn has_loose_escape(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'\\', &bytes[at..]) {
        let i = at + i;
        match bytes.get(i + 1) {
            Some(b'u' | b'/') => return true,
            Some(_) => at = i + 2,
            None => return false,
        }
    }
    false
}

/// `text` with each `\uXXXX` (surrogate pairs joined) and `\/` escape rewritten as serde_json
/// writes that character in a string: most as themselves, a quote, a backslash and control
/// characters escaped. Other escapes, and `\u` escapes that are not a character, stay.
fn canonical_escapes(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'\\', &bytes[at..]) {
        let i = at + i;
        let (len, c) = match bytes.get(i + 1) {
            Some(b'/') => (2, Some('/')),
            Some(b'u') => match unit(bytes, i) {
                Some(hi @ 0xD800..=0xDBFF) => match unit(bytes, i + 6) {
                    Some(lo @ 0xDC00..=0xDFFF) => {
                        let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                        (12, char::from_u32(c))
                    }
                    _ => (6, None),
                },
                Some(u) => (6, char::from_u32(u)),
                None => (2, None),
            },
            Some(_) => (2, None),
            None => (1, None),
        };
        if let Some(c) = c {
            out.push_str(&text[copied..i]);
            let mut buf = [0u8; 4];
            let quoted = crate::jsonrpc::quote(c.encode_utf8(&mut buf));
            out.push_str(&quoted[1..quoted.len() - 1]);
            copied = i + len;
        }
        at = i + len;
    }
    out.push_str(&text[copied..]);
    out
}

/// The code unit of the `\uXXXX` escape at `bytes[i..]`, if there is one.
fn unit(bytes: &[u8], i: usize) -> Option<u32> {
    let hex = bytes.get(i..i + 6)?;
    if hex[0] != b'\\' || hex[1] != b'u' {
        return None;
    }
    let digits = std::str::from_utf8(&hex[2..]).ok()?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
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

    /// Found by the fuzzer (tests/fuzz, target `redact`): a secret JSON-escaped otherwise than
    /// serde_json does it (`\/`, `\uXXXX`) reached the client.
    #[test]
    fn hides_values_in_any_json_spelling() {
        let r = Redactor::new(&[
            ("SLASHED".into(), "abc/def/ghi".into()),
            ("ACCENT".into(), "s\u{e9}cret-v\u{e4}lue".into()),
            ("EMOJI".into(), "key-\u{1F600}-1234".into()),
            ("CONTROL".into(), "line\none\u{1}x".into()),
        ]);
        for (text, want) in [
            (r#"{"t":"abc\/def\/ghi"}"#, r#"{"t":"[REDACTED:SLASHED]"}"#),
            (
                r#"["s\u00e9cret-v\u00E4lue!"]"#,
                r#"["[REDACTED:ACCENT]!"]"#,
            ),
            (r#""\u0073\u00e9cret-v\u00e4lue""#, r#""[REDACTED:ACCENT]""#),
            (r#""key-\ud83d\ude00-1234""#, r#""[REDACTED:EMOJI]""#),
            (r#""line\u000aone\u0001x""#, r#""[REDACTED:CONTROL]""#),
            // Other escapes in the same text keep their meaning.
            (
                r#"{"a\/b":"\u00e9\"\\","t":"abc\/def\/ghi"}"#,
                r#"{"a/b":"é\"\\","t":"[REDACTED:SLASHED]"}"#,
            ),
        ] {
            assert_eq!(r.redact(text), want, "{text}");
            let decoded: serde_json::Value = serde_json::from_str(&r.redact(text)).unwrap();
            assert!(!decoded.to_string().contains("abc/def"), "{decoded}");
        }
        // No secret: the text is not touched, escapes and all; an escaped backslash followed
        // by `u0041` is no escape.
        for text in [
            r#""abc\/def""#,
            r#""\u00e9 \ud800 \uZZZZ \""#,
            r#""\\u0073\u00e9cret-v\u00e4lue""#,
        ] {
            assert!(matches!(r.redact(text), Cow::Borrowed(_)), "{text}");
        }
    }
}
