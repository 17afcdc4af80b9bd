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
    ///
    /// One pass per part over the positions of `uri` (the set of positions the parts so far
    /// can end at), so a template of many expressions (a server's, so untrusted) costs
    /// parts × length, neither exponential nor cubic.
    pub fn matches(&self, uri: &str) -> bool {
        let n = uri.len();
        let mut reach = vec![false; n + 1];
        reach[0] = true;
        let mut next = vec![false; n + 1];
        for part in &self.parts {
            next.fill(false);
            match part {
                Part::Lit(lit) => {
                    for (at, _) in reach.iter().enumerate().filter(|(_, r)| **r) {
                        if uri[at..].starts_with(lit.as_str()) {
                            next[at + lit.len()] = true;
                        }
                    }
                }
                Part::Expr(op) => expression(*op, uri, &reach, &mut next),
            }
            std::mem::swap(&mut reach, &mut next);
            if !reach.contains(&true) {
                return false;
            }
        }
        reach[n]
    }
}

/// Marks in `next` every end an expression with operator `op` can reach from a position in
/// `reach`: its value may take any run of what is left that the operator allows (the empty
/// one too), and a non-empty one starts with the operator's own character, `{+x}` and `{x}`
/// aside. Runs from several starts merge, so one sweep finds them all.
fn expression(op: char, uri: &str, reach: &[bool], next: &mut [bool]) {
    let allowed = |c: char| match op {
        '+' | '#' => true,
        '?' | '&' | ';' => c != '#',
        '/' => !matches!(c, '?' | '#'),
        _ => !matches!(c, '/' | '?' | '#'),
    };
    let starts = |c: char| matches!(op, '\0' | '+') || c == op;
    // Some start's run of allowed characters reaches the current position.
    let mut running = false;
    for (at, c) in uri.char_indices() {
        if reach[at] {
            next[at] = true;
            running |= starts(c);
        }
        running &= allowed(c);
        if running {
            next[at + c.len_utf8()] = true;
        }
    }
    if reach[uri.len()] {
        next[uri.len()] = true;
    }
}

#[cfg(test)]
mod tests {
    use super::{Part, UriTemplate};

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

    /// The backtracking matcher this replaced: each expression tries every end in turn.
    fn by_backtracking(t: &UriTemplate, s: &str) -> bool {
        fn from(parts: &[Part], s: &str, at: usize) -> bool {
            match parts.first() {
                None => at == s.len(),
                Some(Part::Lit(lit)) => {
                    s[at..].starts_with(lit.as_str()) && from(&parts[1..], s, at + lit.len())
                }
                Some(Part::Expr(op)) => {
                    let allowed = |c: char| match op {
                        '+' | '#' => true,
                        '?' | '&' | ';' => c != '#',
                        '/' => !matches!(c, '?' | '#'),
                        _ => !matches!(c, '/' | '?' | '#'),
                    };
                    let starts_ok = |taken: &str| match op {
                        '\0' | '+' => true,
                        _ => taken.is_empty() || taken.starts_with(*op),
                    };
                    let mut end = at;
                    loop {
                        if starts_ok(&s[at..end]) && from(&parts[1..], s, end) {
                            return true;
                        }
                        match s[end..].chars().next() {
                            Some(c) if allowed(c) => end += c.len_utf8(),
                            _ => return false,
                        }
                    }
                }
            }
        }
        from(&t.parts, s, 0)
    }

    /// Every small template and URI over an alphabet of the characters that matter.
    #[test]
    fn the_same_answers_as_backtracking() {
        let pieces = [
            "a", "/", "?", "#", "=", "&", ";", ".", "é", "{x}", "{+x}", "{#x}", "{/x}", "{?x}",
            "{&x}", "{;x}", "{.x}",
        ];
        let chars = ["a", "/", "?", "#", "=", "&", ";", ".", "é"];
        // Every string of up to three of `parts` (with repeats among the shorter ones).
        let strings = |parts: &[&str]| {
            let mut all = vec![String::new()];
            for _ in 0..3 {
                let longer: Vec<String> = all
                    .iter()
                    .flat_map(|s| parts.iter().map(move |p| format!("{s}{p}")))
                    .collect();
                all.extend(longer);
            }
            all
        };
        let mut templates = strings(&pieces);
        let uris = strings(&chars);
        templates.sort();
        templates.dedup();
        for t in templates.iter().step_by(7) {
            let parsed = UriTemplate::parse(t);
            for u in &uris {
                assert_eq!(
                    parsed.matches(u),
                    by_backtracking(&parsed, u),
                    "{t:?} {u:?}"
                );
            }
        }
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

    /// Found by the fuzzer's speed (target `uri_template` slowed to 130 runs a second on
    /// inputs of 2 KB): trying each (part, position) once still left every expression trying
    /// every end, parts × length² in all. A server's 64 KB template against a 1 KB URI is
    /// now a few million steps, not tens of billions.
    #[test]
    fn long_templates_match_in_linear_passes() {
        // 1,500 parts against 750 characters: ~1 M steps in one pass per part, ~800 M for a
        // matcher that tries every end of every expression; the bound holds in a debug build
        // on a busy machine with room to spare.
        let template = "{a}{/b}{?c}".repeat(500) + "x";
        let uri = "y/?".repeat(250);
        let t0 = std::time::Instant::now();
        let t = UriTemplate::parse(&template);
        assert!(!t.matches(&uri));
        assert!(t.matches(&(uri.clone() + "x")));
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
    }
}
