//! Matching a concrete URI against an RFC 6570 URI template, to route `resources/read` for
//! resources a server only advertises as a template (e.g. `file:///{path}`).

/// A parsed template: literal text and `{…}` expressions.
#[derive(Debug, Clone)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone)]
enum Part {
    Lit(String),
    /// The expression's operator: `'\0'` for plain `{x}`, else one of `+#./;?&`.
    Expr(char),
}

impl UriTemplate {
    pub fn parse(template: &str) -> UriTemplate {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Lit(rest[..open].to_string()));
            }
            let Some(close) = rest[open..].find('}') else {
                // Unterminated: treat the remainder as literal text.
                parts.push(Part::Lit(rest[open..].to_string()));
                return UriTemplate { parts };
            };
            let body = &rest[open + 1..open + close];
            let op = body
                .chars()
                .next()
                .filter(|c| "+#./;?&".contains(*c))
                .unwrap_or('\0');
            parts.push(Part::Expr(op));
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Lit(rest.to_string()));
        }
        UriTemplate { parts }
    }

    /// Whether some expansion of the template could produce `uri`.
    pub fn matches(&self, uri: &str) -> bool {
        // Each (part, position) is tried at most once: without this, a template of many
        // expressions (a server's, so untrusted) makes the backtracking exponential.
        let mut failed = vec![false; (self.parts.len() + 1) * (uri.len() + 1)];
        match_from(&self.parts, 0, uri, 0, &mut failed)
    }
}

/// Whether `parts[i..]` can produce `s[at..]`; `failed` remembers the pairs that cannot.
fn match_from(parts: &[Part], i: usize, s: &str, at: usize, failed: &mut [bool]) -> bool {
    let key = i * (s.len() + 1) + at;
    if failed[key] {
        return false;
    }
    let found = match parts.get(i) {
        None => at == s.len(),
        Some(Part::Lit(lit)) => {
            s[at..].starts_with(lit.as_str()) && match_from(parts, i + 1, s, at + lit.len(), failed)
        }
        Some(Part::Expr(op)) => {
            // The value may take any prefix of what is left that its operator allows.
            let allowed = |c: char| match op {
                '+' | '#' => true,
                '?' | '&' | ';' => c != '#',
                '/' => !matches!(c, '?' | '#'),
                _ => !matches!(c, '/' | '?' | '#'),
            };
            let starts_ok = |taken: &str| match op {
                '\0' | '+' => true,
                '#' => taken.is_empty() || taken.starts_with('#'),
                _ => taken.is_empty() || taken.starts_with(*op),
            };
            let mut end = at;
            loop {
                if starts_ok(&s[at..end]) && match_from(parts, i + 1, s, end, failed) {
                    break true;
                }
                match s[end..].chars().next() {
                    Some(c) if allowed(c) => end += c.len_utf8(),
                    _ => break false,
                }
            }
        }
    };
    if !found {
        failed[key] = true;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::UriTemplate;

    #[test]
    fn simple_and_reserved_expressions() {
        let t = UriTemplate::parse("fixture://item/{id}");
        assert!(t.matches("fixture://item/42"));
        assert!(!t.matches("fixture://item/4/2"));
        assert!(!t.matches("fixture://other/42"));
        assert!(UriTemplate::parse("file:///{+path}").matches("file:///a/b/c.txt"));
        assert!(!UriTemplate::parse("file:///{path}").matches("file:///a/b"));
        let q = UriTemplate::parse("demo://resource/dynamic/text/{resourceId}");
        assert!(q.matches("demo://resource/dynamic/text/7"));
        assert!(
            UriTemplate::parse("http://x/search{?q,lang}").matches("http://x/search?q=a&lang=en")
        );
        assert!(UriTemplate::parse("http://x/search{?q,lang}").matches("http://x/search"));
        assert!(UriTemplate::parse("x://{a}-{b}").matches("x://1-2"));
    }

    /// Found by the fuzzer: many expressions in a row made matching exponential (a slow
    /// unit of 125 s). Each (part, position) is now tried once.
    #[test]
    fn many_expressions_match_in_polynomial_time() {
        let template = "{a}".repeat(60) + "x";
        let uri = "y".repeat(200);
        let t0 = std::time::Instant::now();
        assert!(!UriTemplate::parse(&template).matches(&uri));
        assert!(UriTemplate::parse(&template).matches(&(uri.clone() + "x")));
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            t0.elapsed()
        );
    }
}
