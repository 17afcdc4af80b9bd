//! Canonical JSON (sorted keys, normalised numbers, no whitespace) and SHA-256 digests of it:
//! cache keys that ignore key order and `1` vs `1.0`, and definition hashes that ignore
//! cosmetic re-encoding by a server.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;

/// Canonical form of a JSON text; invalid JSON is returned as is (it still keys something).
pub fn canonical(text: &str) -> String {
    // Most arguments objects are small and compact already: a scan then spares the parse
    // into a tree and the rewrite, a third of what the whole pipeline costs per call.
    if already_canonical(text) {
        return text.to_string();
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v) => {
            let mut out = String::with_capacity(text.len());
            write_value(&v, &mut out);
            out
        }
        Err(_) => text.to_string(),
    }
}

/// True when `text` is exactly what [`write_value`] would make of it: compact, object keys
/// strictly increasing, strings without escapes, numbers plain integers that `i64` holds.
/// Anything else (even if canonical) is left to the full path; a "no" is never wrong.
fn already_canonical(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    plain_value(b, &mut i, 0) && i == b.len()
}

/// How deep [`already_canonical`] looks before leaving the text to the full path.
const PLAIN_DEPTH: usize = 32;

fn plain_value(b: &[u8], i: &mut usize, depth: usize) -> bool {
    if depth > PLAIN_DEPTH {
        return false;
    }
    match b.get(*i) {
        Some(b'{') => {
            *i += 1;
            if b.get(*i) == Some(&b'}') {
                *i += 1;
                return true;
            }
            let mut previous: Option<&[u8]> = None;
            loop {
                let Some(key) = plain_string(b, i) else {
                    return false;
                };
                if previous.is_some_and(|p| p >= key) || b.get(*i) != Some(&b':') {
                    return false;
                }
                previous = Some(key);
                *i += 1;
                if !plain_value(b, i, depth + 1) || !plain_separator(b, i, b'}') {
                    return false;
                }
                if b.get(*i - 1) == Some(&b'}') {
                    return true;
                }
            }
        }
        Some(b'[') => {
            *i += 1;
            if b.get(*i) == Some(&b']') {
                *i += 1;
                return true;
            }
            loop {
                if !plain_value(b, i, depth + 1) || !plain_separator(b, i, b']') {
                    return false;
                }
                if b.get(*i - 1) == Some(&b']') {
                    return true;
                }
            }
        }
        Some(b'"') => plain_string(b, i).is_some(),
        Some(b't') => plain_literal(b, i, b"true"),
        Some(b'f') => plain_literal(b, i, b"false"),
        Some(b'n') => plain_literal(b, i, b"null"),
        Some(b'-' | b'0'..=b'9') => plain_integer(b, i),
        _ => false,
    }
}

/// Steps over `,` or the closing `close`.
fn plain_separator(b: &[u8], i: &mut usize, close: u8) -> bool {
    match b.get(*i) {
        Some(&c) if c == b',' || c == close => {
            *i += 1;
            true
        }
        _ => false,
    }
}

/// A string without escapes; its contents.
fn plain_string<'a>(b: &'a [u8], i: &mut usize) -> Option<&'a [u8]> {
    if b.get(*i) != Some(&b'"') {
        return None;
    }
    let start = *i + 1;
    let end = start + memchr::memchr2(b'"', b'\\', b.get(start..)?)?;
    let contents = &b[start..end];
    if b[end] != b'"' || contents.iter().any(|&c| c < 0x20) {
        return None;
    }
    *i = end + 1;
    Some(contents)
}

fn plain_literal(b: &[u8], i: &mut usize, word: &[u8]) -> bool {
    if b.get(*i..*i + word.len()) == Some(word) {
        *i += word.len();
        true
    } else {
        false
    }
}

/// An integer written as `i64` prints it: no `-0`, no leading zeros, at most 15 digits.
fn plain_integer(b: &[u8], i: &mut usize) -> bool {
    let negative = b.get(*i) == Some(&b'-');
    if negative {
        *i += 1;
    }
    let start = *i;
    while matches!(b.get(*i), Some(b'0'..=b'9')) {
        *i += 1;
    }
    let digits = &b[start..*i];
    let well_formed = match digits {
        [] => false,
        [b'0'] => !negative,
        [b'0', ..] => false,
        _ => digits.len() <= 15,
    };
    well_formed && !matches!(b.get(*i), Some(b'.' | b'e' | b'E'))
}

pub fn canonical_value(v: &Value) -> String {
    let mut out = String::new();
    write_value(v, &mut out);
    out
}

fn write_value(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&crate::jsonrpc::quote(k));
                out.push(':');
                if let Some(val) = m.get(*k) {
                    write_value(val, out);
                }
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(x, out);
            }
            out.push(']');
        }
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (_, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            // 2.0 and 2 are the same argument.
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                let _ = write!(out, "{}", f as i64);
            }
            _ => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// `sha256:<hex>` of some text or bytes: the form recorded and shown.
pub fn sha256(data: impl AsRef<[u8]>) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data.as_ref())))
}

/// The hash a remembered decision is bound to: description, input schema and annotations.
pub fn definition_hash(tool_json: &str) -> String {
    let v: Value = serde_json::from_str(tool_json).unwrap_or(Value::Null);
    let pick = serde_json::json!({
        "description": v.get("description"),
        "inputSchema": v.get("inputSchema"),
        "annotations": v.get("annotations"),
    });
    sha256(canonical_value(&pick))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scan's verdicts, checked against the full path: a text it accepts must be exactly
    /// its own canonical form.
    #[test]
    fn the_fast_path_agrees_with_the_full_one() {
        let cases = [
            (r#"{"message":"hello 7"}"#, true),
            (r#"{"a":1,"b":[true,false,null,-3,0,"x"],"c":{}}"#, true),
            (r#"{"a":{"b":{"c":[[],{}]}}}"#, true),
            (r#"[]"#, true),
            (r#""é ü""#, true),
            (r#"{"b":1,"a":2}"#, false),
            (r#"{"a":1,"a":2}"#, false),
            (r#"{"a": 1}"#, false),
            (r#"{"a":1.0}"#, false),
            (r#"{"a":1e3}"#, false),
            (r#"{"a":-0}"#, false),
            (r#"{"a":007}"#, false),
            (r#"{"a":1234567890123456789}"#, false),
            (r#"{"a":"line\nbreak"}"#, false),
            (r#"{"a":"\u00e9"}"#, false),
            (r#"{"a":1,}"#, false),
            (r#"{"a"}"#, false),
            (r#"[1,2"#, false),
            (r#"tru"#, false),
            ("", false),
        ];
        for (text, plain) in cases {
            assert_eq!(already_canonical(text), plain, "{text}");
            let full = match serde_json::from_str::<Value>(text) {
                Ok(v) => canonical_value(&v),
                Err(_) => text.to_string(),
            };
            assert_eq!(canonical(text), full, "{text}");
            if plain {
                assert_eq!(full, text, "{text}");
            }
        }
    }

    #[test]
    fn key_order_and_number_forms_do_not_matter() {
        assert_eq!(
            canonical(r#"{"b":1.0,"a":[2, {"y":1,"x":2}]}"#),
            r#"{"a":[2,{"x":2,"y":1}],"b":1}"#
        );
        assert_eq!(canonical(r#"{"a":1.5}"#), r#"{"a":1.5}"#);
        assert_ne!(canonical(r#"{"a":"1"}"#), canonical(r#"{"a":1}"#));
        let h1 =
            definition_hash(r#"{"name":"x","description":"d","inputSchema":{"type":"object"}}"#);
        let h2 = definition_hash(
            r#"{"inputSchema":{"type":"object"},"description":"d","name":"renamed","title":"t"}"#,
        );
        assert_eq!(h1, h2);
        assert_ne!(
            h1,
            definition_hash(
                r#"{"name":"x","description":"changed","inputSchema":{"type":"object"}}"#
            )
        );
        assert!(h1.starts_with("sha256:") && h1.len() == 71);
    }
}
