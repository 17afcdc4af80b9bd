//! Canonical JSON (sorted keys, normalised numbers, no whitespace) and SHA-256 digests of it:
//! cache keys that ignore key order and `1` vs `1.0`, and definition hashes that ignore
//! cosmetic re-encoding by a server.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt::Write;

/// Canonical form of a JSON text; invalid JSON is returned as is (it still keys something).
pub fn canonical(text: &str) -> String {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => {
            let mut out = String::with_capacity(text.len());
            write_value(&v, &mut out);
            out
        }
        Err(_) => text.to_string(),
    }
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

/// `sha256:<hex>` of some text.
pub fn sha256(text: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(text.as_bytes());
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    for b in digest {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}

/// The hash a remembered decision is bound to: description, input schema and annotations.
pub fn definition_hash(tool_json: &str) -> String {
    let v: Value = serde_json::from_str(tool_json).unwrap_or(Value::Null);
    let pick = serde_json::json!({
        "description": v.get("description"),
        "inputSchema": v.get("inputSchema"),
        "annotations": v.get("annotations"),
    });
    sha256(&canonical_value(&pick))
}

#[cfg(test)]
mod tests {
    use super::*;

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
