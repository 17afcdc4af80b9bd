//! The scanner, held to serde_json: members as written, strings, errors and borrowed spans.

use super::*;
use serde::de::IgnoredAny;

/// Whether `text` is one well-formed JSON value, by the scanner.
fn validate(text: &str) -> Result<(), ScanError> {
    let b = text.as_bytes();
    let i = value(b, 0, 0)?;
    end(b, i)
}

fn serde_ok(s: &str) -> bool {
    serde_json::from_str::<IgnoredAny>(s).is_ok()
}

#[test]
fn objects_yield_members_as_written() {
    let text = r#" { "a" : 1 , "b\u0063":{"x":[true,null]}, "s":"q\"" } "#;
    let mut seen = Vec::new();
    object::<ScanError>(text, |k, v| {
        seen.push((k.text()?.into_owned(), v.to_string()));
        Ok(())
    })
    .unwrap();
    assert_eq!(
        seen,
        [
            ("a".to_string(), "1".to_string()),
            ("bc".to_string(), r#"{"x":[true,null]}"#.to_string()),
            ("s".to_string(), r#""q\"""#.to_string()),
        ]
    );
    assert_eq!(array(" [1, [2] ,{}]").unwrap(), ["1", "[2]", "{}"]);
    assert_eq!(array("[]").unwrap(), Vec::<&str>::new());
    assert!(object::<ScanError>("[1]", |_, _| Ok(())).is_err());
    // Well-formed, but the key does not decode (a lone surrogate): said where it is.
    let lone = object::<ScanError>(r#"{"a":1, "\ud800":2}"#, |k, _| k.text().map(drop));
    assert_eq!(
        lone.unwrap_err().to_string(),
        "invalid escape in a key at byte 8"
    );
    assert!(array("{}").is_err());
}

#[test]
fn strings_decode_only_when_escaped() {
    assert!(matches!(string(r#""plain""#), Some(Cow::Borrowed("plain"))));
    assert_eq!(string(r#""a\nb\u00e9""#).as_deref(), Some("a\nb\u{e9}"));
    assert_eq!(string("12"), None);
}

#[test]
fn errors_say_what_and_where() {
    for (text, want) in [
        ("[1,]", "expected a value at byte 3"),
        ("01", "invalid number at byte 1"),
        ("{\"a\":1} x", "trailing characters at byte 8"),
        ("\"a\u{1}\"", "control character in a string at byte 2"),
        ("{\"a\" 1}", "expected `:` at byte 5"),
        ("[\"\\x\"]", "invalid escape at byte 3"),
    ] {
        assert_eq!(validate(text).unwrap_err().to_string(), want, "{text}");
    }
    assert!(validate(&"[".repeat(MAX_DEPTH + 1)).is_err());
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(validate(&deep).is_ok());
}

/// A small deterministic generator, so a failure reproduces from its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'t>(&mut self, items: &[&'t str]) -> &'t str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

fn random_value(r: &mut Rng, depth: usize, out: &mut String) {
    const ATOMS: &[&str] = &[
        "0",
        "-1",
        "12.5e-3",
        "1E+2",
        "true",
        "false",
        "null",
        r#""""#,
        r#""a b""#,
        r#""\u00e9\n\"""#,
        r#""é✓""#,
        "-0.0",
    ];
    match if depth > 4 { 0 } else { r.next() % 4 } {
        0 | 1 => out.push_str(r.pick(ATOMS)),
        2 => {
            out.push('[');
            for i in 0..r.next() % 4 {
                if i > 0 {
                    out.push(',');
                }
                random_value(r, depth + 1, out);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            for i in 0..r.next() % 4 {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(r.pick(&[r#""k""#, r#""id""#, r#""\u0069d""#, r#""""#]));
                out.push(':');
                random_value(r, depth + 1, out);
            }
            out.push('}');
        }
    }
}

/// The scanner accepts exactly what serde_json accepts, on valid values and on the same
/// values with a byte dropped, doubled or replaced by a JSON-significant one.
#[test]
fn accepts_exactly_what_serde_json_accepts() {
    const NOISE: &[&str] = &[
        "\"", "\\", ",", ":", "{", "}", "[", "]", " ", "0", "-", ".", "e", "t", "\u{1}", "\\u12",
        "x",
    ];
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut disagreements = Vec::new();
    for _ in 0..20_000 {
        let mut text = String::new();
        random_value(&mut r, 0, &mut text);
        let mut cases = vec![text.clone()];
        let chars: Vec<char> = text.chars().collect();
        let at = (r.next() % chars.len() as u64) as usize;
        let mut dropped = chars.clone();
        dropped.remove(at);
        cases.push(dropped.into_iter().collect());
        let mut doubled = chars.clone();
        doubled.insert(at, chars[at]);
        cases.push(doubled.into_iter().collect());
        let mut replaced: String = chars[..at].iter().collect();
        replaced.push_str(r.pick(NOISE));
        replaced.extend(&chars[at + 1..]);
        cases.push(replaced);
        for case in cases {
            if validate(&case).is_ok() != serde_ok(&case) {
                disagreements.push(case);
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{:?}",
        &disagreements[..disagreements.len().min(5)]
    );
}

#[test]
fn member_values_are_the_spans_serde_borrows() {
    let mut r = Rng(7);
    for _ in 0..2_000 {
        let mut text = String::from("{");
        for i in 0..r.next() % 5 {
            if i > 0 {
                text.push_str(" ,\n");
            }
            text.push_str(&format!("\"m{i}\" :\t"));
            random_value(&mut r, 1, &mut text);
        }
        text.push('}');
        let theirs: Vec<(String, String)> = serde_json::from_str::<serde_view::Members>(&text)
            .unwrap()
            .0;
        let mut ours = Vec::new();
        object::<ScanError>(&text, |k, v| {
            ours.push((k.text()?.into_owned(), v.to_string()));
            Ok(())
        })
        .unwrap();
        assert_eq!(ours, theirs, "{text}");
    }
}

/// serde's view of an object's members, in order and as raw text.
mod serde_view {
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
    use serde_json::value::RawValue;

    pub struct Members(pub Vec<(String, String)>);

    impl<'de> Deserialize<'de> for Members {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Members;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<M: MapAccess<'de>>(self, mut m: M) -> Result<Members, M::Error> {
                    let mut out = Vec::new();
                    while let Some(k) = m.next_key::<String>()? {
                        let v: &RawValue = m.next_value()?;
                        out.push((k, v.get().to_string()));
                    }
                    Ok(Members(out))
                }
            }
            d.deserialize_map(V)
        }
    }
}
