//! Secret redaction on arbitrary text and on JSON documents that carry secrets (in values,
//! keys, arrays, several times) in any JSON spelling: serde_json's, `\/`, `\uXXXX` for
//! non-ASCII or for any character, upper- or lower-case hex. What the redactor promises
//! (`policy::redact`, README "Secrets"), checked:
//! - no secret of 8 bytes or more survives in the output, as written or JSON-escaped;
//! - in a JSON document, no string the client decodes holds a secret, however the document
//!   spelled it;
//! - text with no secret in it comes back unchanged, and redacting twice changes nothing.
//!
//! Not promised, so not checked: a secret cut in pieces (across strings, keys or lines).
#![no_main]

use libfuzzer_sys::fuzz_target;
use openpact::policy::redact::{MIN_SECRET_LEN, Redactor};
use serde_json::{Map, Value};

/// Reads the input in order; past its end every read is zero or empty.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn piece(&mut self) -> &'a [u8] {
        let n = usize::from(self.byte() % 32).min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }

    fn text(&mut self) -> String {
        String::from_utf8_lossy(self.piece()).into_owned()
    }
}

const NAMES: [&str; 3] = ["TOKEN", "API_KEY", "OAUTH_TOKEN_GH"];
/// Stands for a redaction marker when looking for what survived.
const MARK: char = '\u{1}';

/// Ordinary text or a secret, as the input says.
fn text_or_secret(input: &mut Input<'_>, secrets: &[(String, String)]) -> String {
    let b = input.byte();
    match b % 4 {
        0 | 1 => input.text(),
        2 => {
            let (_, v) = &secrets[usize::from(b >> 2) % secrets.len()];
            format!("{}{v}{}", input.text(), input.text())
        }
        _ => {
            let (_, v) = &secrets[usize::from(b >> 2) % secrets.len()];
            format!("{v}{v}")
        }
    }
}

fn document(input: &mut Input<'_>, secrets: &[(String, String)], depth: u8) -> Value {
    match input.byte() % 6 {
        0 => Value::String(text_or_secret(input, secrets)),
        1 => serde_json::json!(input.byte()),
        2 if depth < 4 => {
            let n = input.byte() % 4;
            Value::Array(
                (0..n)
                    .map(|_| document(input, secrets, depth + 1))
                    .collect(),
            )
        }
        3 | 4 if depth < 4 => {
            let n = input.byte() % 4;
            let mut m = Map::new();
            for _ in 0..n {
                m.insert(
                    text_or_secret(input, secrets),
                    document(input, secrets, depth + 1),
                );
            }
            Value::Object(m)
        }
        _ => Value::String(text_or_secret(input, secrets)),
    }
}

/// JSON text of `v`; `style` picks the escapes, `bits` which characters get `\uXXXX`.
fn spell(v: &Value, style: u8, bits: &mut impl Iterator<Item = bool>, out: &mut String) {
    let string = |s: &str, bits: &mut dyn Iterator<Item = bool>, out: &mut String| {
        out.push('"');
        for c in s.chars() {
            let u = match style {
                1 => !c.is_ascii(),
                2 => bits.next().unwrap_or(false),
                3 => true,
                _ => false,
            };
            match c {
                '/' if style == 4 => out.push_str("\\/"),
                c if u || (c as u32) < 0x20 => {
                    let mut buf = [0u16; 2];
                    for unit in c.encode_utf16(&mut buf) {
                        if bits.next().unwrap_or(false) {
                            out.push_str(&format!("\\u{unit:04X}"));
                        } else {
                            out.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                }
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c => out.push(c),
            }
        }
        out.push('"');
    };
    match v {
        Value::Object(m) => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(k, bits, out);
                out.push(':');
                spell(v, style, bits, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                spell(v, style, bits, out);
            }
            out.push(']');
        }
        Value::String(s) => string(s, bits, out),
        other => out.push_str(&other.to_string()),
    }
}

/// `text` with every redaction marker replaced by [`MARK`].
fn masked(text: &str) -> String {
    let mut out = text.to_string();
    for n in NAMES {
        out = out.replace(&format!("[REDACTED:{n}]"), &MARK.to_string());
    }
    out
}

/// Every string (keys too) in `v`.
fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k);
                strings(x, out);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let n = usize::from(input.byte() % 3) + 1;
    let mut secrets: Vec<(String, String)> = Vec::new();
    for i in 0..n {
        let mut v = input.text();
        if v.contains(MARK) {
            return;
        }
        // Short values are not secrets (and would match everywhere): most are made longer.
        if input.byte() & 3 != 0 {
            while v.len() < MIN_SECRET_LEN {
                v.push_str("s3cr3t");
            }
        }
        secrets.push((NAMES[i % NAMES.len()].to_string(), v));
    }
    let r = Redactor::new(&secrets);
    let hidden: Vec<&str> = secrets
        .iter()
        .map(|(_, v)| v.as_str())
        .filter(|v| v.len() >= MIN_SECRET_LEN)
        .collect();

    let mode = input.byte();
    let doc = (mode & 1 == 1).then(|| document(&mut input, &secrets, 0));
    let text = match &doc {
        Some(doc) => {
            let mut bits = input
                .0
                .iter()
                .flat_map(|b| (0..8).map(move |i| b >> i & 1 == 1));
            let mut s = String::new();
            spell(doc, (mode >> 1) % 5, &mut bits, &mut s);
            s
        }
        None => {
            // Arbitrary text with secrets dropped in.
            let mut s = String::new();
            while !input.0.is_empty() {
                s.push_str(&text_or_secret(&mut input, &secrets));
            }
            s
        }
    };

    let out = r.redact(&text);
    let seen = masked(&out);
    for v in &hidden {
        let quoted = serde_json::to_string(v).expect("quote");
        let escaped = &quoted[1..quoted.len() - 1];
        assert!(!seen.contains(v), "{v:?} survived in {out:?}");
        assert!(!seen.contains(escaped), "{escaped:?} survived in {out:?}");
    }
    if !hidden.iter().any(|v| text.contains(v)) && !out.contains("[REDACTED:") {
        assert_eq!(out, text, "text without secrets changed");
    }
    // Redacting again changes nothing, unless a secret can match a marker ("REDACTED").
    let markers: String = NAMES.iter().map(|n| format!("[REDACTED:{n}]")).collect();
    if hidden
        .iter()
        .all(|v| !v.contains(['[', ']']) && !markers.contains(v))
    {
        assert_eq!(r.redact(&out), out, "redacting twice changed it");
    }

    if doc.is_some() {
        let Ok(decoded) = serde_json::from_str::<Value>(&out) else {
            // Only a secret that also matched across the JSON structure (one holding a
            // quote, say) can break the document; what survives is checked above.
            return;
        };
        let mut all = Vec::new();
        strings(&decoded, &mut all);
        for s in all {
            let s = masked(s);
            for v in &hidden {
                assert!(!s.contains(v), "the client decodes {v:?} from {out:?}");
            }
        }
    }
});
