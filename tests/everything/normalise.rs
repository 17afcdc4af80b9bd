//! What varies from run to run in server-everything's answers, made constant before the
//! transcripts are compared: clock times in text and in base64 blobs, and the HTTP session
//! id server-everything puts into some texts.

use serde_json::{Value, json};

const STAMP: &str = " created at ";

/// Replaces the clock time after each " created at " with `<time>`.
fn untime(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(STAMP) {
        out.push_str(&rest[..i + STAMP.len()]);
        rest = &rest[i + STAMP.len()..];
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == ':'))
            .unwrap_or(rest.len());
        if n > 0 {
            rest = &rest[n..];
            for suffix in [" AM", " PM", "\u{202f}AM", "\u{202f}PM"] {
                if let Some(r) = rest.strip_prefix(suffix) {
                    rest = r;
                }
            }
            out.push_str("<time>");
        }
    }
    out.push_str(rest);
    out
}

/// Whether `s` is a session id as server-everything's HTTP transports make them (a UUID).
fn is_session_id(s: &str) -> bool {
    s.len() == 36 && s.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

/// Writes server-everything's texts about its HTTP session as it writes them over stdio,
/// where there is no session: "for session <id>" becomes "for session undefined" and
/// " from session <id>" (after a subscribed URI) goes. The id is the transport's business
/// (each connection gets a fresh one), not something the hub forwards differently.
fn unsession(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("session ") {
        let after = &rest[i + "session ".len()..];
        let id = &after[..after.find(char::is_whitespace).unwrap_or(after.len())];
        if !is_session_id(id) {
            out.push_str(&rest[..i + "session ".len()]);
            rest = after;
            continue;
        }
        match rest[..i].strip_suffix("from ") {
            Some(before) => out.push_str(before),
            None => {
                out.push_str(&rest[..i]);
                out.push_str("session undefined");
            }
        }
        rest = &after[id.len()..];
    }
    out.push_str(rest);
    out
}

/// Standard base64 (with or without padding); None if it is not.
pub(super) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for c in s.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    Some(out)
}

pub(super) fn base64_encode(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The run-dependent parts of server-everything's answers, made constant: clock times in
/// text, and in base64 blobs that decode to such text (replaced by "base64 of: <text>");
/// HTTP session ids in text, written as over stdio (see [`unsession`]).
pub(super) fn normalise(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(unsession(&untime(s))),
        Value::Array(a) => Value::Array(a.iter().map(normalise).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    if k == "blob"
                        && let Some(text) = v
                            .as_str()
                            .and_then(base64_decode)
                            .and_then(|b| String::from_utf8(b).ok())
                        && text.contains(STAMP)
                    {
                        return (k.clone(), json!(format!("base64 of: {}", untime(&text))));
                    }
                    (k.clone(), normalise(v))
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

#[test]
fn session_ids_read_as_over_stdio() {
    let id = "a6de9b2b-c71b-4629-ace4-1269f76f345f";
    assert_eq!(
        unsession(&format!("logging for session {id} at a 5 second pace")),
        "logging for session undefined at a 5 second pace"
    );
    assert_eq!(
        unsession(&format!("for URI: demo://x from session {id}")),
        "for URI: demo://x "
    );
    let plain = "a session about sessions, session undefined";
    assert_eq!(unsession(plain), plain);
}
