//! The `WWW-Authenticate` header of a 401/403 (RFC 9110 §11.6.1, RFC 6750 §3): the Bearer
//! challenge's `resource_metadata`, `scope`, `error` and `error_description`.

/// The parameters of the `Bearer` challenge a server sent; empty when it sent none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    /// RFC 9728 §5.1: where the Protected Resource Metadata is.
    pub resource_metadata: Option<String>,
    /// Space-separated scopes the request needs (authoritative for this request).
    pub scope: Option<String>,
    /// `invalid_token`, `insufficient_scope`, …
    pub error: Option<String>,
    pub error_description: Option<String>,
}

impl Challenge {
    /// Parses a header value; schemes other than Bearer (and anything malformed) are skipped.
    pub fn parse(header: Option<&str>) -> Challenge {
        let mut out = Challenge::default();
        let Some(header) = header else {
            return out;
        };
        let mut lexer = Lexer {
            s: header.as_bytes(),
            i: 0,
        };
        let mut in_bearer = false;
        while let Some(word) = lexer.token() {
            if lexer.eat(b'=') {
                // An auth-param of the current scheme (a token68 ends in '=' too and is skipped).
                let value = lexer.value();
                if in_bearer && let Some(value) = value {
                    let slot = match word.to_ascii_lowercase().as_str() {
                        "resource_metadata" => &mut out.resource_metadata,
                        "scope" => &mut out.scope,
                        "error" => &mut out.error,
                        "error_description" => &mut out.error_description,
                        _ => continue,
                    };
                    slot.get_or_insert(value);
                }
            } else {
                // A bare word starts a new challenge: `Basic realm="x", Bearer scope="y"`.
                in_bearer = word.eq_ignore_ascii_case("bearer");
            }
        }
        out
    }

    /// The challenged scopes, in order, without duplicates.
    pub fn scopes(&self) -> Vec<String> {
        split_scopes(self.scope.as_deref().unwrap_or(""))
    }

    /// Whether this is a step-up request (RFC 6750 `insufficient_scope`).
    #[cfg(any(test, feature = "internals"))]
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// A space-separated scope string as a list, in order, without duplicates. Any whitespace
/// separates (a vertical tab too, which `split_ascii_whitespace` keeps inside a word): a
/// scope token never holds one (RFC 6749 §3.3).
pub fn split_scopes(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for scope in s.split(char::is_whitespace).filter(|w| !w.is_empty()) {
        if !out.iter().any(|s| s == scope) {
            out.push(scope.to_string());
        }
    }
    out
}

struct Lexer<'a> {
    s: &'a [u8],
    i: usize,
}

impl Lexer<'_> {
    fn skip_separators(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b',') {
            self.i += 1;
        }
    }

    fn skip_spaces(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t') {
            self.i += 1;
        }
    }

    /// The next token (RFC 9110 tchar run), or None at the end.
    fn token(&mut self) -> Option<String> {
        loop {
            self.skip_separators();
            if self.i >= self.s.len() {
                return None;
            }
            let start = self.i;
            while self.i < self.s.len() && is_tchar(self.s[self.i]) {
                self.i += 1;
            }
            if self.i > start {
                return Some(String::from_utf8_lossy(&self.s[start..self.i]).into_owned());
            }
            // Not a token (a stray quote or '='): skip the byte and go on.
            self.i += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.skip_spaces();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// A token or a quoted string (with `\` escapes); None for an empty value.
    fn value(&mut self) -> Option<String> {
        self.skip_spaces();
        if self.s.get(self.i) == Some(&b'"') {
            self.i += 1;
            let mut out = Vec::new();
            while let Some(&c) = self.s.get(self.i) {
                self.i += 1;
                match c {
                    b'"' => break,
                    b'\\' => {
                        if let Some(&next) = self.s.get(self.i) {
                            out.push(next);
                            self.i += 1;
                        }
                    }
                    _ => out.push(c),
                }
            }
            return Some(String::from_utf8_lossy(&out).into_owned());
        }
        let start = self.i;
        // token68 characters too, so `error=invalid_token` and base64 values both work.
        while self.i < self.s.len() && (is_tchar(self.s[self.i]) || self.s[self.i] == b'/') {
            self.i += 1;
        }
        // A token68 may end in '=' padding.
        while self.s.get(self.i) == Some(&b'=') {
            self.i += 1;
        }
        (self.i > start).then(|| String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }
}

fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_parameters() {
        let c = Challenge::parse(Some(
            r#"Bearer error="insufficient_scope", scope="files:read  files:write files:read", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", error_description="needs \"write\"""#,
        ));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scopes(), vec!["files:read", "files:write"]);
        assert!(c.insufficient_scope());
        // Found by the fuzzer (target oauth): a vertical tab stayed inside a scope.
        assert_eq!(split_scopes("a\u{b}b\u{a0}c a"), vec!["a", "b", "c"]);
        assert_eq!(c.error_description.as_deref(), Some(r#"needs "write""#));
    }

    #[test]
    fn unquoted_values_and_case() {
        let c = Challenge::parse(Some("bearer ERROR=invalid_token,scope=read"));
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.scopes(), vec!["read"]);
        assert!(!c.insufficient_scope());
    }

    #[test]
    fn other_schemes_are_skipped() {
        let c = Challenge::parse(Some(
            r#"Basic realm="x", scope="nope", Bearer realm="mcp", scope="mine", DPoP algs="ES256", scope="dpop""#,
        ));
        assert_eq!(c.scope.as_deref(), Some("mine"));
        assert_eq!(c.resource_metadata, None);
    }

    #[test]
    fn token68_and_garbage_do_not_panic() {
        let c = Challenge::parse(Some("Negotiate abc+/def==, Bearer scope=\"a\""));
        assert_eq!(c.scope.as_deref(), Some("a"));
        for junk in [
            "",
            "=",
            "\"",
            "Bearer =\"",
            "Bearer scope=\"unterminated",
            ",,,",
            "Bearer",
        ] {
            let _ = Challenge::parse(Some(junk));
        }
        let c = Challenge::parse(Some("Bearer scope=\"unterminated"));
        assert_eq!(c.scope.as_deref(), Some("unterminated"));
        assert_eq!(Challenge::parse(None), Challenge::default());
    }
}
