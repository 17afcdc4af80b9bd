//! Tolerance for JSONC (comments, trailing commas), which VS Code's `mcp.json` allows.
//!
//! Comments and trailing commas are blanked to spaces byte for byte, so the line and
//! column of any later JSON syntax error still point into the original text.

use std::borrow::Cow;

pub(crate) fn strip(text: &str) -> Cow<'_, str> {
    if !text.contains('/') && !text.contains(',') {
        return Cow::Borrowed(text);
    }
    let mut out = text.as_bytes().to_vec();
    let bytes = text.as_bytes();
    let mut i = 0;
    // Index of the last comma outside strings that has only blanks after it so far.
    let mut pending_comma: Option<usize> = None;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                pending_comma = None;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let mut j = i + 2;
                while j < bytes.len() && !(bytes[j] == b'*' && bytes.get(j + 1) == Some(&b'/')) {
                    j += 1;
                }
                // An unterminated comment swallows the rest, so the parser reports EOF.
                let end = (j + 2).min(bytes.len());
                for (k, b) in out.iter_mut().enumerate().take(end).skip(i) {
                    if bytes[k] != b'\n' && bytes[k] != b'\r' {
                        *b = b' ';
                    }
                }
                i = end;
            }
            b',' => {
                pending_comma = Some(i);
                i += 1;
            }
            b'}' | b']' => {
                if let Some(c) = pending_comma.take() {
                    out[c] = b' ';
                }
                i += 1;
            }
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            _ => {
                pending_comma = None;
                i += 1;
            }
        }
    }
    // Only whole ASCII bytes were replaced by ASCII spaces, so this cannot fail; fall
    // back to the original text (and its syntax error) rather than panic.
    match String::from_utf8(out) {
        Ok(s) => Cow::Owned(s),
        Err(_) => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn parse(text: &str) -> Value {
        serde_json::from_str(&strip(text)).unwrap()
    }

    #[test]
    fn comments_and_trailing_commas() {
        let v = parse(
            "{\n  // line comment\n  \"a\": [1, 2,], /* block\n comment */ \"b\": {\"c\": \"//not a comment, /* nor this */\",},\n}",
        );
        assert_eq!(v["a"], serde_json::json!([1, 2]));
        assert_eq!(v["b"]["c"], "//not a comment, /* nor this */");
    }

    #[test]
    fn escaped_quotes_in_strings() {
        let v = parse(r#"{"a": "x\"//y", "b": 1,}"#);
        assert_eq!(v["a"], "x\"//y");
        assert_eq!(v["b"], 1);
    }

    #[test]
    fn positions_are_preserved() {
        let text = "{\n  \"a\": 1,\n  /* c */ \"b\": nope\n}";
        let blanked = "{\n  \"a\": 1,\n          \"b\": nope\n}";
        let err = serde_json::from_str::<Value>(&strip(text)).unwrap_err();
        let want = serde_json::from_str::<Value>(blanked).unwrap_err();
        assert_eq!((err.line(), err.column()), (want.line(), want.column()));
        assert_eq!(err.line(), 3);
    }

    #[test]
    fn plain_json_untouched() {
        assert!(matches!(strip("{\"a\": 1}"), Cow::Borrowed(_)));
        // A comma between values must survive.
        assert_eq!(parse("[1, 2]"), serde_json::json!([1, 2]));
    }
}
