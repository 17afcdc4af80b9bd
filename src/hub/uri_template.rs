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
        match_from(&self.parts, uri)
    }
}

fn match_from(parts: &[Part], s: &str) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return s.is_empty();
    };
    match first {
        Part::Lit(lit) => s
            .strip_prefix(lit.as_str())
            .is_some_and(|tail| match_from(rest, tail)),
        Part::Expr(op) => {
            // The value may take any prefix of `s` that its operator allows; try them all
            // (templates are short, so backtracking is cheap).
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
            let mut end = 0;
            loop {
                let taken = &s[..end];
                if starts_ok(taken) && match_from(rest, &s[end..]) {
                    return true;
                }
                let Some(c) = s[end..].chars().next() else {
                    return false;
                };
                if !allowed(c) {
                    return false;
                }
                end += c.len_utf8();
            }
        }
    }
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
}
