//! The 2026-07-28 `requestState` and the `_meta` envelope, on arbitrary requests written in
//! any JSON spelling (member order, whitespace, `\/` and `\uXXXX` escapes). Checked:
//! - a state the hub issues opens again, for the request it was issued for, whatever
//!   spelling the retry uses, and carries `requestState`, `inputResponses` or other `_meta`;
//!   expired, it says so;
//! - a state with any change to its text, or any text at all, never opens; a state never
//!   opens for another request (origin, method, name or arguments changed);
//! - the request the session serves keeps the id, method and every other member, and loses
//!   only `requestState`, `inputResponses` and the envelope's keys;
//! - whether a request speaks the revision, and the version it names, do not depend on the
//!   spelling of its JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openpact::hub::stateless::state::{Opened, Signer, digest, now};
use openpact::hub::stateless::{envelope_version, inner_request, request_digest, wants_stateless};
use openpact::jsonrpc::Message;
use openpact::policy::canonical::canonical_value;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;

const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const ENVELOPE: [&str; 4] = [
    VERSION_KEY,
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/logLevel",
];

fn signer() -> &'static Signer {
    static S: OnceLock<Signer> = OnceLock::new();
    S.get_or_init(|| Signer::new().expect("random source"))
}

/// Reads the input in order; past its end every read is zero or empty.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn piece(&mut self) -> &'a [u8] {
        let n = usize::from(self.byte() % 48).min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }

    fn text(&mut self) -> String {
        String::from_utf8_lossy(self.piece()).into_owned()
    }

    /// A JSON value: the piece's text when it is JSON, else one built from the input.
    fn value(&mut self, depth: u8) -> Value {
        match self.byte() % 8 {
            0 => Value::Null,
            1 => Value::Bool(self.byte() & 1 == 1),
            2 => json!(i64::from(self.byte()) - 100),
            3 => json!(f64::from(self.byte()) / 4.0),
            4 | 5 => Value::String(self.text()),
            6 if depth < 3 => {
                let n = self.byte() % 4;
                Value::Array((0..n).map(|_| self.value(depth + 1)).collect())
            }
            7 if depth < 3 => {
                let n = self.byte() % 4;
                Value::Object(
                    (0..n)
                        .map(|_| (self.text(), self.value(depth + 1)))
                        .collect(),
                )
            }
            _ => serde_json::from_slice(self.piece()).unwrap_or(Value::Null),
        }
    }
}

/// A request's params as a client may send them.
fn params(input: &mut Input<'_>) -> Value {
    let flags = input.byte();
    let mut p = Map::new();
    if flags & 1 != 0 {
        p.insert("name".into(), Value::String(input.text()));
    }
    if flags & 2 != 0 {
        p.insert("uri".into(), Value::String(input.text()));
    }
    if flags & 4 != 0 {
        p.insert("arguments".into(), input.value(0));
    }
    if flags & 8 != 0 {
        let mut meta = Map::new();
        let m = input.byte();
        if m & 1 != 0 {
            let v = if m & 2 != 0 {
                json!("2026-07-28")
            } else {
                input.value(1)
            };
            meta.insert(VERSION_KEY.into(), v);
        }
        if m & 4 != 0 {
            meta.insert(ENVELOPE[1].into(), input.value(1));
        }
        if m & 8 != 0 {
            meta.insert(ENVELOPE[2].into(), json!({"name": input.text()}));
        }
        if m & 16 != 0 {
            meta.insert(ENVELOPE[3].into(), input.value(1));
        }
        if m & 32 != 0 {
            meta.insert("progressToken".into(), input.value(1));
        }
        if m & 64 != 0 {
            meta.insert(input.text(), input.value(1));
        }
        p.insert("_meta".into(), Value::Object(meta));
    }
    if flags & 16 != 0 {
        p.insert("requestState".into(), Value::String(input.text()));
    }
    if flags & 32 != 0 {
        p.insert("inputResponses".into(), input.value(0));
    }
    if flags & 64 != 0 {
        p.insert(input.text(), input.value(0));
    }
    Value::Object(p)
}

/// `v` with every object's members in reverse order.
fn reversed(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .rev()
                .map(|(k, v)| (k.clone(), reversed(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
        other => other.clone(),
    }
}

/// JSON text of `v` in one of several equivalent spellings.
fn spell(v: &Value, style: u8, out: &mut String) {
    let string = |s: &str, out: &mut String| {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '/' if style == 2 => out.push_str("\\/"),
                c if style == 3 && c.is_ascii_alphabetic() => {
                    out.push_str(&format!("\\u{:04X}", c as u32))
                }
                c if style == 4 && !c.is_ascii() => {
                    let mut buf = [0u16; 2];
                    for unit in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
    };
    let gap = if style == 1 { " \n\t" } else { "" };
    match v {
        Value::Object(m) => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(gap);
                string(k, out);
                out.push_str(gap);
                out.push(':');
                spell(v, style, out);
            }
            out.push_str(gap);
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(gap);
                spell(v, style, out);
            }
            out.push(']');
        }
        Value::String(s) => string(s, out),
        other => out.push_str(&other.to_string()),
    }
}

fn spelled(v: &Value, style: u8) -> String {
    let mut s = String::new();
    spell(v, style, &mut s);
    s
}

/// What the digest is documented to bind: origin, method, name (or uri), arguments.
fn bound(
    origin: &str,
    method: &str,
    p: &Value,
) -> (String, String, Option<String>, Option<String>) {
    (
        origin.to_string(),
        method.to_string(),
        p.get("name").or_else(|| p.get("uri")).map(canonical_value),
        p.get("arguments").map(canonical_value),
    )
}

const ORIGINS: [&str; 3] = ["http#0", "http#1", "stdio#0"];
const METHODS: [&str; 5] = [
    "tools/call",
    "prompts/get",
    "resources/read",
    "tools/list",
    "server/discover",
];
const IDS: [&str; 5] = ["1", "\"a\"", "0", "-5", "\"x\\\"y\""];

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let pick = input.byte();
    let o1 = ORIGINS[usize::from(pick) % 3];
    let m1 = METHODS[usize::from(pick >> 2) % 5];
    let p1 = params(&mut input);

    // A retry: the same request in another spelling, with the retry's own members; or a
    // request that differs.
    let change = input.byte();
    let (o2, m2) = if change & 0x80 != 0 {
        (
            ORIGINS[usize::from(change) % 3],
            METHODS[usize::from(change >> 2) % 5],
        )
    } else {
        (o1, m1)
    };
    let mut p2 = match change % 6 {
        0 | 1 => reversed(&p1),
        2 => params(&mut input),
        _ => p1.clone(),
    };
    if let Some(obj) = p2.as_object_mut() {
        match change % 6 {
            1 => {
                obj.insert("requestState".into(), Value::String(input.text()));
                obj.insert("inputResponses".into(), json!({"k": {"action": "accept"}}));
                obj.insert("_meta".into(), json!({"progressToken": 7}));
            }
            3 => {
                obj.insert("name".into(), input.value(0));
            }
            4 => {
                obj.insert("arguments".into(), input.value(0));
            }
            5 => {
                if let Some(name) = obj.remove("name") {
                    obj.insert("uri".into(), name);
                }
            }
            _ => {}
        }
    }
    // The retry as the hub reads it: parsed back from some spelling.
    let style = input.byte() % 5;
    let p2: Value =
        serde_json::from_str(&spelled(&p2, style)).expect("a spelling that is not JSON");

    let d1 = request_digest(o1, m1, &p1);
    let d2 = request_digest(o2, m2, &p2);
    let same = bound(o1, m1, &p1) == bound(o2, m2, &p2);
    assert_eq!(d1 == d2, same, "digest {d1} vs {d2} for {p1} and {p2}");
    assert_eq!(digest(&[o1, m1]), digest(&[o1, m1]), "digest is stable");

    // A state the hub issued: a random handle, expiring in `offset` seconds.
    let handle: String = input
        .piece()
        .iter()
        .chain([0u8; 16].iter())
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect();
    let offset = i64::from(input.byte()) - 64;
    let expires = now().saturating_add_signed(offset.max(-(now() as i64)));
    let s = signer();
    let state = s.sign(&handle, expires, &d1);
    let opened = s.open(&state, &d1);
    match offset {
        ..=0 => assert_eq!(opened, Ok(Opened::Expired), "{state}"),
        1 => assert!(opened.is_ok(), "{opened:?}"),
        _ => assert_eq!(opened, Ok(Opened::Live(handle.clone())), "{state}"),
    }
    if !same {
        assert!(
            s.open(&state, &d2).is_err(),
            "a state opened for another request"
        );
    }

    // The state, altered.
    let mut bytes = state.clone().into_bytes();
    let edits = input.byte() % 4;
    for _ in 0..=edits {
        let at = usize::from(input.byte()) * bytes.len() / 256;
        let b = input.byte();
        let last = bytes.len() - 1;
        // Where the tag starts: hex the signer wrote, which other spellings must not match.
        let tag = bytes.iter().rposition(|&c| c == b'.').map_or(0, |i| i + 1);
        match input.byte() % 7 {
            5 => bytes[tag..].make_ascii_uppercase(),
            6 => {
                // A byte below 0x10 written `+X` instead of `0X`.
                if let Some(i) = (tag..last).step_by(2).find(|&i| bytes[i] == b'0') {
                    bytes[i] = b'+';
                }
            }
            0 => bytes[at.min(last)] = b,
            1 => bytes.insert(at, b),
            2 if last > 0 => {
                bytes.remove(at.min(last));
            }
            3 => bytes.make_ascii_uppercase(),
            _ => bytes[at.min(last)] = bytes[at.min(last)].to_ascii_uppercase(),
        }
    }
    let altered = String::from_utf8_lossy(&bytes);
    if altered != state {
        assert!(
            s.open(&altered, &d1).is_err(),
            "an altered state opened: {state} -> {altered}"
        );
    }
    // Any text.
    let text = input.text();
    if text != state {
        assert!(s.open(&text, &d1).is_err(), "{text:?} opened");
    }

    // The request the session serves.
    let id = IDS[usize::from(pick >> 5) % IDS.len()];
    let line = inner_request(id, m1, &p1);
    let inner: Value = serde_json::from_str(&line).expect("inner request is JSON");
    assert_eq!(inner["jsonrpc"], "2.0");
    assert_eq!(inner["id"], serde_json::from_str::<Value>(id).expect("id"));
    assert_eq!(inner["method"], m1);
    let (Some(before), Some(after)) = (p1.as_object(), inner["params"].as_object()) else {
        panic!("params lost: {line}");
    };
    for (k, v) in before {
        match k.as_str() {
            "requestState" | "inputResponses" => assert!(!after.contains_key(k), "{k} kept"),
            "_meta" => {
                let kept: Map<String, Value> = v
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .filter(|(k, _)| !ENVELOPE.contains(&k.as_str()))
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                match after.get("_meta") {
                    None => assert!(kept.is_empty() && v.is_object(), "_meta lost: {v}"),
                    Some(m) if v.is_object() => assert_eq!(m, &Value::Object(kept), "_meta"),
                    Some(m) => assert_eq!(m, v, "_meta that is not an object"),
                }
            }
            _ => assert_eq!(after.get(k), Some(v), "{k} changed"),
        }
    }
    assert!(
        after.keys().all(|k| before.contains_key(k)),
        "members added: {line}"
    );

    // Whether it speaks the revision, in every spelling.
    let mut seen = None;
    for style in 0..5 {
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{m1}","params":{}}}"#,
            spelled(&p1, style)
        );
        let Ok(m) = Message::parse(text.into()) else {
            panic!("a request openpact does not read");
        };
        let version = envelope_version(&m);
        let stateless = wants_stateless(&m);
        assert_eq!(
            stateless,
            m1 == "server/discover" || version.is_some(),
            "style {style}: {p1}"
        );
        match &seen {
            None => seen = Some((stateless, version)),
            Some(first) => assert_eq!(first, &(stateless, version), "style {style} changed it: {p1}"),
        }
    }
});
