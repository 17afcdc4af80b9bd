//! Edits of a JSON(C) file's text in place (`openpact sandbox allow`, `import`, `setup`, `add`,
//! `remove`): a value added to a list, a member added to or removed from an object at a JSON
//! path, the missing objects on the way made, or a value replaced, and every other byte —
//! comments, order, indentation,
//! trailing commas — kept.
//!
//! The spans come from the text with comments blanked ([`super::jsonc::strip`] keeps every
//! byte where it was), so they index the original text too.

use super::jsonc;
use serde_json::Value;

/// The text with comments and trailing commas blanked: JSON to read the config as it is.
pub fn stripped(text: &str) -> String {
    jsonc::strip(text).into_owned()
}

/// Why the text could not be edited.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EditError {
    #[error("{line}:{column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// A value on the way is not an object (or the last one not a list).
    #[error("{path} is {kind}, not {wanted}")]
    Shape {
        path: String,
        kind: &'static str,
        wanted: &'static str,
    },
}

/// What [`add_to_list`] did.
#[derive(Debug, PartialEq)]
pub enum Added {
    /// The new text.
    Text(String),
    /// The list holds the value already; nothing changed.
    Present,
}

/// Adds the string `value` to the list at `path` (made, with the objects leading to it, when
/// missing).
pub fn add_to_list(text: &str, path: &[&str], value: &str) -> Result<Added, EditError> {
    let quoted = Value::String(value.to_string()).to_string();
    let stripped = jsonc::strip(text);
    let root = parse(&stripped)?;
    let (node, depth) = deepest(&root, path);
    let shown = |n: usize| path[..n].join(".");
    if depth == path.len() {
        let Kind::Array(items) = &node.kind else {
            return Err(shape(&shown(depth), node, "a list"));
        };
        if items
            .iter()
            .any(|i| stripped[i.start..i.end] == quoted || decoded(&stripped, i) == Some(value))
        {
            return Ok(Added::Present);
        }
        return Ok(Added::Text(insert(text, node, &quoted)));
    }
    if !matches!(node.kind, Kind::Object(_)) {
        return Err(shape(&shown(depth), node, "an object"));
    }
    let member = nested(&path[depth..], &format!("[{quoted}]"));
    Ok(Added::Text(insert(text, node, &member)))
}

/// `"a": {"b": innermost}` for `keys` = `[a, b]`: the member that makes a missing path.
fn nested(keys: &[&str], innermost: &str) -> String {
    let mut value = innermost.to_string();
    for key in keys[1..].iter().rev() {
        value = format!("{{{}: {value}}}", Value::String((*key).to_string()));
    }
    format!("{}: {value}", Value::String(keys[0].to_string()))
}

/// Adds the member `key` with the JSON text `value` to the object at `path` (made, with the
/// objects leading to it, when missing), after its last member; [`Added::Present`] when the
/// object has `key` already, which is left as it is. A value written over several lines is
/// indented as the member's line is.
pub fn add_member(text: &str, path: &[&str], key: &str, value: &str) -> Result<Added, EditError> {
    let stripped = jsonc::strip(text);
    let root = parse(&stripped)?;
    let (node, depth) = deepest(&root, path);
    let Kind::Object(members) = &node.kind else {
        return Err(shape(&path[..depth].join("."), node, "an object"));
    };
    if depth == path.len() {
        if members.iter().any(|m| m.key == key) {
            return Ok(Added::Present);
        }
        let member = nested(&[key], value);
        return Ok(Added::Text(insert(text, node, &member)));
    }
    let mut keys = path[depth..].to_vec();
    keys.push(key);
    Ok(Added::Text(insert(text, node, &nested(&keys, value))))
}

/// Sets the value at `path` to the JSON text `value`: replaced when it is there, else added
/// as a member of its parent (made when missing).
pub fn set(text: &str, path: &[&str], value: &str) -> Result<String, EditError> {
    let Some((key, parent)) = path.split_last() else {
        return Ok(value.to_string());
    };
    let stripped = jsonc::strip(text);
    let root = parse(&stripped)?;
    let (node, depth) = deepest(&root, path);
    if depth == path.len() {
        let value = indented(value, &indent_at(text, node.start));
        return Ok(format!(
            "{}{value}{}",
            &text[..node.start],
            &text[node.end..]
        ));
    }
    match add_member(text, parent, key, value)? {
        Added::Text(t) => Ok(t),
        // Not reached: the member was not found above.
        Added::Present => Ok(text.to_string()),
    }
}

/// Removes the member `key` of the object at `path`, with its line when it has one of its
/// own (the comment ending that line goes with it) and the comma that separated it; `None`
/// when there is no such member.
pub fn remove_member(text: &str, path: &[&str], key: &str) -> Result<Option<String>, EditError> {
    let stripped = jsonc::strip(text);
    let root = parse(&stripped)?;
    let (node, depth) = deepest(&root, path);
    if depth < path.len() {
        return Ok(None);
    }
    let Kind::Object(members) = &node.kind else {
        return Err(shape(&path.join("."), node, "an object"));
    };
    let Some(at) = members.iter().position(|m| m.key == key) else {
        return Ok(None);
    };
    let member = &members[at];
    let close = node.end - 1;
    // What follows the value up to the next member (or the closing brace), blanks and comma.
    let next = members.get(at + 1).map_or(close, |m| m.at);
    let after = &stripped[member.value.end..next];
    let comma_after = after.trim_start().starts_with(',');
    let line_start = stripped[..member.at].rfind('\n').map_or(0, |i| i + 1);
    let own_line = stripped[line_start..member.at].trim().is_empty();
    let line_end = stripped[member.value.end..]
        .find('\n')
        .map(|i| member.value.end + i + 1);
    let rest_of_line_blank = line_end.is_some_and(|end| {
        stripped[member.value.end..end]
            .chars()
            .all(|c| c.is_whitespace() || c == ',')
    });
    let last = at + 1 == members.len();
    let prev_end = at.checked_sub(1).map(|p| members[p].value.end);
    let through_comma = member.value.end
        + if comma_after {
            after.find(',').map_or(0, |i| i + 1)
        } else {
            0
        };
    let (from, to) = match (line_end, prev_end) {
        (Some(end), _) if own_line && rest_of_line_blank => (line_start, end),
        // On a shared line: up to the next member; the last from its neighbour's end, so
        // the comma between them goes (a trailing comma after it stays).
        _ if !last => (member.at, next),
        (_, Some(prev_end)) => (prev_end, member.value.end),
        (_, None) => (member.at, through_comma),
    };
    // A last member on its own line without a trailing comma: the comma before it goes.
    let comma_before = match prev_end {
        Some(p) if last && !comma_after && from == line_start => {
            stripped[p..from].find(',').map(|i| p + i)
        }
        _ => None,
    };
    let mut out = String::with_capacity(text.len());
    match comma_before {
        Some(c) => {
            out.push_str(&text[..c]);
            out.push_str(&text[c + 1..from]);
        }
        None => out.push_str(&text[..from]),
    }
    out.push_str(&text[to..]);
    Ok(Some(out))
}

/// Replaces the value at `path` (which must exist) with the JSON text `with`.
pub fn replace(text: &str, path: &[&str], with: &str) -> Result<String, EditError> {
    let stripped = jsonc::strip(text);
    let root = parse(&stripped)?;
    let (node, depth) = deepest(&root, path);
    if depth < path.len() {
        return Err(EditError::Shape {
            path: path[..=depth].join("."),
            kind: "missing",
            wanted: "a value",
        });
    }
    Ok(format!(
        "{}{with}{}",
        &text[..node.start],
        &text[node.end..]
    ))
}

fn shape(path: &str, node: &Node, wanted: &'static str) -> EditError {
    EditError::Shape {
        path: path.to_string(),
        kind: match node.kind {
            Kind::Object(_) => "an object",
            Kind::Array(_) => "a list",
            Kind::Scalar => "a single value",
        },
        wanted,
    }
}

fn decoded<'a>(text: &'a str, node: &Node) -> Option<&'a str> {
    // Only plain strings (no escapes) can equal a value compared as written.
    let s = &text[node.start..node.end];
    s.strip_prefix('"')?.strip_suffix('"')
}

/// The node `path` leads to as far as it exists, and how many keys of it were found.
fn deepest<'n>(root: &'n Node, path: &[&str]) -> (&'n Node, usize) {
    let mut node = root;
    for (depth, key) in path.iter().enumerate() {
        let Kind::Object(members) = &node.kind else {
            return (node, depth);
        };
        match members.iter().find(|m| m.key == *key) {
            Some(m) => node = &m.value,
            None => return (node, depth),
        }
    }
    (node, path.len())
}

/// `item` (a member or an element) put after the last one of `container`, laid out as its
/// neighbours are: on a line of its own in a container written over several lines.
fn insert(text: &str, container: &Node, item: &str) -> String {
    let last = match &container.kind {
        Kind::Object(m) => m.last().map(|m| &m.value),
        Kind::Array(items) => items.last(),
        Kind::Scalar => None,
    };
    let open = container.start;
    let close = container.end - 1;
    let multiline = text[open..close].contains('\n');
    let indent_of = |at: usize| indent_at(text, at);
    let Some(last) = last else {
        if multiline {
            let outer = indent_of(close);
            let inner = format!("{outer}  ");
            let item = indented(item, &inner);
            return format!("{}\n{inner}{item}{}", &text[..=open], &text[open + 1..]);
        }
        let item = indented(item, &indent_of(open));
        return format!("{}{item}{}", &text[..=open], &text[open + 1..]);
    };
    // A comma already after the last one (JSONC's trailing comma) stays where it is.
    let after = text[last.end..close].trim_start();
    let comma = if after.starts_with(',') { "" } else { "," };
    if !multiline {
        let item = indented(item, &indent_of(open));
        return format!("{}{comma} {item}{}", &text[..last.end], &text[last.end..]);
    }
    // On the line after the last one's, past any comment that ends its line.
    let line_end = text[last.end..close]
        .find('\n')
        .map_or(last.end, |i| last.end + i);
    let indent = indent_of(last.start);
    let item = indented(item, &indent);
    let trailing = if comma.is_empty() { "," } else { "" };
    format!(
        "{}{comma}{}\n{indent}{item}{trailing}{}",
        &text[..last.end],
        &text[last.end..line_end],
        &text[line_end..]
    )
}

/// The spaces and tabs that begin the line holding byte `at`.
fn indent_at(text: &str, at: usize) -> String {
    let line = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect()
}

/// `item`'s second and later lines indented by `indent` more, so a value written over
/// several lines sits under the line it starts on.
fn indented(item: &str, indent: &str) -> String {
    item.replace('\n', &format!("\n{indent}"))
}

#[derive(Debug)]
struct Node {
    start: usize,
    /// One past the last byte.
    end: usize,
    kind: Kind,
}

/// A member of an object: its key, where the key's opening quote is, and its value.
#[derive(Debug)]
struct Member {
    key: String,
    at: usize,
    value: Node,
}

#[derive(Debug)]
enum Kind {
    Object(Vec<Member>),
    Array(Vec<Node>),
    Scalar,
}

/// The spans of `text` (comments already blanked); serde_json checks it is JSON first, so
/// the walk below meets only well-formed input.
fn parse(text: &str) -> Result<Node, EditError> {
    if let Err(e) = serde_json::from_str::<Value>(text) {
        return Err(EditError::Syntax {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        });
    }
    let mut p = Spans {
        b: text.as_bytes(),
        i: 0,
        text,
    };
    Ok(p.value())
}

struct Spans<'t> {
    b: &'t [u8],
    i: usize,
    text: &'t str,
}

impl Spans<'_> {
    fn blank(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r' | b',')
        {
            self.i += 1;
        }
    }

    fn string_end(&self, from: usize) -> usize {
        let mut i = from + 1;
        while i < self.b.len() && self.b[i] != b'"' {
            i += if self.b[i] == b'\\' { 2 } else { 1 };
        }
        i + 1
    }

    fn value(&mut self) -> Node {
        self.blank();
        let start = self.i;
        match self.b.get(start) {
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                loop {
                    self.blank();
                    if self.b.get(self.i) != Some(&b'"') {
                        break;
                    }
                    let at = self.i;
                    let key_end = self.string_end(self.i);
                    let key = serde_json::from_str::<String>(&self.text[self.i..key_end])
                        .unwrap_or_default();
                    self.i = key_end;
                    self.blank();
                    self.i += 1; // ':'
                    let value = self.value();
                    members.push(Member { key, at, value });
                }
                self.i += 1; // '}'
                Node {
                    start,
                    end: self.i,
                    kind: Kind::Object(members),
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    self.blank();
                    if matches!(self.b.get(self.i), Some(b']') | None) {
                        break;
                    }
                    items.push(self.value());
                }
                self.i += 1;
                Node {
                    start,
                    end: self.i,
                    kind: Kind::Array(items),
                }
            }
            Some(b'"') => {
                self.i = self.string_end(start);
                Node {
                    start,
                    end: self.i,
                    kind: Kind::Scalar,
                }
            }
            _ => {
                while self.i < self.b.len()
                    && !matches!(
                        self.b[self.i],
                        b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'
                    )
                {
                    self.i += 1;
                }
                Node {
                    start,
                    end: self.i,
                    kind: Kind::Scalar,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATH: &[&str] = &["mcpServers", "s", "sandbox", "filesystem", "write"];

    fn added(text: &str, path: &[&str], value: &str) -> String {
        match add_to_list(text, path, value).unwrap() {
            Added::Text(t) => {
                serde_json::from_str::<Value>(&jsonc::strip(&t)).unwrap();
                t
            }
            Added::Present => panic!("present"),
        }
    }

    #[test]
    fn makes_the_missing_objects_keeping_comments() {
        let text = "{\n  // my servers\n  \"mcpServers\": {\n    \"s\": {\n      \"command\": \"x\" // the tool\n    }\n  }\n}\n";
        let out = added(text, PATH, "~/.s");
        assert_eq!(
            out,
            "{\n  // my servers\n  \"mcpServers\": {\n    \"s\": {\n      \"command\": \"x\", // the tool\n      \"sandbox\": {\"filesystem\": {\"write\": [\"~/.s\"]}}\n    }\n  }\n}\n"
        );
    }

    #[test]
    fn appends_to_an_existing_list_single_and_multi_line() {
        let one = r#"{"mcpServers": {"s": {"sandbox": {"filesystem": {"write": ["~/a"]}}}}}"#;
        assert!(added(one, PATH, "~/b").contains(r#"["~/a", "~/b"]"#));
        let many = "{\"mcpServers\": {\"s\": {\"sandbox\": {\"filesystem\": {\"write\": [\n  \"~/a\", /* kept */\n]}}}}}";
        let out = added(many, PATH, "~/b");
        assert!(out.contains("\"~/a\", /* kept */\n  \"~/b\",\n]"), "{out}");
        let empty = r#"{"mcpServers": {"s": {"sandbox": {"filesystem": {"write": []}}}}}"#;
        assert!(added(empty, PATH, "~/b").contains(r#"["~/b"]"#));
    }

    #[test]
    fn present_and_wrong_shapes() {
        let has = r#"{"mcpServers": {"s": {"sandbox": {"filesystem": {"write": ["~/a"]}}}}}"#;
        assert_eq!(add_to_list(has, PATH, "~/a").unwrap(), Added::Present);
        let off = r#"{"mcpServers": {"s": {"sandbox": false}}}"#;
        assert!(matches!(
            add_to_list(off, PATH, "~/a"),
            Err(EditError::Shape { .. })
        ));
        let broken = "{\n  \"mcpServers\": nope\n}";
        assert!(matches!(
            add_to_list(broken, PATH, "~/a"),
            Err(EditError::Syntax { line: 2, .. })
        ));
    }

    fn member(text: &str, path: &[&str], key: &str, value: &str) -> String {
        match add_member(text, path, key, value).unwrap() {
            Added::Text(t) => {
                serde_json::from_str::<Value>(&jsonc::strip(&t)).unwrap();
                t
            }
            Added::Present => panic!("present"),
        }
    }

    #[test]
    fn adds_a_member_keeping_comments_and_indenting_it() {
        let text =
            "{\n  // mine\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"} // first\n  }\n}\n";
        let out = member(text, &["mcpServers"], "b", "{\n  \"command\": \"y\"\n}");
        assert_eq!(
            out,
            "{\n  // mine\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}, // first\n    \"b\": {\n      \"command\": \"y\"\n    }\n  }\n}\n"
        );
        // Into an empty object written over lines, and with the object itself missing.
        let empty = "{\n  \"mcpServers\": {\n  }\n}";
        let out = member(empty, &["mcpServers"], "b", "{\n  \"command\": \"y\"\n}");
        assert_eq!(
            out,
            "{\n  \"mcpServers\": {\n    \"b\": {\n      \"command\": \"y\"\n    }\n  }\n}"
        );
        let bare = "{\n  \"openpact\": {} // settings\n}\n";
        let out = member(bare, &["mcpServers"], "b", "1");
        assert_eq!(
            out,
            "{\n  \"openpact\": {}, // settings\n  \"mcpServers\": {\"b\": 1}\n}\n"
        );
    }

    #[test]
    fn a_present_member_or_a_wrong_shape_is_said() {
        let text = r#"{"mcpServers": {"a": {}}}"#;
        assert_eq!(
            add_member(text, &["mcpServers"], "a", "{}").unwrap(),
            Added::Present
        );
        assert!(matches!(
            add_member(r#"{"mcpServers": []}"#, &["mcpServers"], "a", "{}"),
            Err(EditError::Shape { .. })
        ));
    }

    #[test]
    fn sets_a_value_replacing_or_adding_it() {
        let text = "{\n  \"x\": 1, // keep\n  \"mcp\": {\"servers\": {\"old\": {}}}\n}";
        let out = set(text, &["mcp", "servers"], "{\n  \"new\": 2\n}").unwrap();
        assert_eq!(
            out,
            "{\n  \"x\": 1, // keep\n  \"mcp\": {\"servers\": {\n    \"new\": 2\n  }}\n}"
        );
        let out = set("{}", &["mcpServers"], "{}").unwrap();
        assert_eq!(out, r#"{"mcpServers": {}}"#);
    }

    #[test]
    fn replaces_a_value() {
        let on = "{\"mcpServers\": {\"s\": {\"sandbox\": true /* on */}}}";
        let out = replace(on, &["mcpServers", "s", "sandbox"], "{}").unwrap();
        assert_eq!(out, "{\"mcpServers\": {\"s\": {\"sandbox\": {} /* on */}}}");
    }

    fn with_member(text: &str, path: &[&str], key: &str, value: &str) -> String {
        match add_member(text, path, key, value).unwrap() {
            Added::Text(t) => {
                serde_json::from_str::<Value>(&jsonc::strip(&t)).unwrap();
                t
            }
            Added::Present => panic!("present"),
        }
    }

    fn removed(text: &str, key: &str) -> String {
        let out = remove_member(text, &["mcpServers"], key).unwrap().unwrap();
        serde_json::from_str::<Value>(&jsonc::strip(&out)).unwrap();
        out
    }

    #[test]
    fn sets_a_member_keeping_comments_or_making_its_object() {
        let text =
            "{\n  // mine\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"} // first\n  }\n}\n";
        assert_eq!(
            with_member(text, &["mcpServers"], "b", r#"{"url": "u"}"#),
            "{\n  // mine\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\"}, // first\n    \"b\": {\"url\": \"u\"}\n  }\n}\n"
        );
        assert_eq!(
            with_member("{\"openpact\": {}}", &["mcpServers"], "b", "1"),
            "{\"openpact\": {}, \"mcpServers\": {\"b\": 1}}"
        );
        assert_eq!(
            with_member("{}", &["mcpServers"], "b", "1"),
            "{\"mcpServers\": {\"b\": 1}}"
        );
        assert_eq!(
            add_member("{\"mcpServers\": {\"b\": 1}}", &["mcpServers"], "b", "2").unwrap(),
            Added::Present
        );
    }

    #[test]
    fn removes_a_member_with_its_line_and_comma() {
        let text = "{\n  \"mcpServers\": {\n    // a's note\n    \"a\": {\"command\": \"x\"},\n    \"b\": {\n      \"url\": \"u\"\n    }, // b\n    \"c\": 3\n  }\n}\n";
        assert_eq!(
            removed(text, "b"),
            "{\n  \"mcpServers\": {\n    // a's note\n    \"a\": {\"command\": \"x\"},\n    \"c\": 3\n  }\n}\n"
        );
        assert_eq!(
            removed(text, "c"),
            "{\n  \"mcpServers\": {\n    // a's note\n    \"a\": {\"command\": \"x\"},\n    \"b\": {\n      \"url\": \"u\"\n    } // b\n  }\n}\n"
        );
        let one = r#"{"mcpServers": {"a": 1, "b": 2, "c": 3}}"#;
        assert_eq!(removed(one, "b"), r#"{"mcpServers": {"a": 1, "c": 3}}"#);
        assert_eq!(removed(one, "c"), r#"{"mcpServers": {"a": 1, "b": 2}}"#);
        assert_eq!(removed(one, "a"), r#"{"mcpServers": {"b": 2, "c": 3}}"#);
        assert_eq!(
            removed(r#"{"mcpServers": {"a": 1}}"#, "a"),
            r#"{"mcpServers": {}}"#
        );
        assert_eq!(remove_member(one, &["mcpServers"], "z").unwrap(), None);
        assert_eq!(remove_member("{}", &["mcpServers"], "z").unwrap(), None);
    }
}
