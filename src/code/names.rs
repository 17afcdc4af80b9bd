//! Tools as a program sees them: identifiers for the attribute form and signatures.
//!
//! A program reaches a tool two ways: `call("fs:read_text_file", {"path": p})` with the name
//! the client sees, and the attribute form `tools.fs.read_text_file(path = p)`, whose group
//! and attribute names are made from the server prefix and the tool's own name. Those names
//! are a function of the catalogue alone, so the same catalogue always gives the same
//! program surface, and a tool's attribute depends only on the tools of its own group: a
//! server added elsewhere never renames it.
//!
//! [`signature`] is what `search_tools` shows in code mode: enough to write a correct call
//! from one search (each parameter's type, whether it is required, its description), in as
//! few bytes as that takes.

use serde_json::Value as Json;
use std::collections::HashSet;

/// Names that cannot follow a dot or be bound: Starlark's keywords, the words starlark-rust
/// reserves (Python's keywords), and Python's constants, which a model used to Python would
/// not write as an attribute either.
const KEYWORDS: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "load", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
    "True", "False", "None",
];

/// A tool description longer than this (in characters, after folding it onto one line) is
/// cut, at a sentence's end where one is near: the signature is for choosing and calling,
/// and a search shows several.
const DESCRIPTION_CAP: usize = 200;
/// The same for one parameter's description.
const PARAM_CAP: usize = 160;
/// Parameters listed one per line; the rest are named on one line.
const MAX_PARAMS: usize = 24;
/// Past this length the first line stops listing optional parameters.
const HEADER_CAP: usize = 200;
/// An object's shape (`{name: str, tags?: list[str]}`) stops listing properties at this
/// length.
const SHAPE_CAP: usize = 160;
/// A union of more types than this is shown as `any`.
const MAX_UNION: usize = 4;
/// An enum is shown as its values (`"asc" | "desc"`) up to this many…
const ENUM_VALUES: usize = 6;
/// …and this many characters.
const ENUM_CAP: usize = 60;
/// Deeper schemas (and `$ref` chains) render as `any`.
const MAX_DEPTH: usize = 6;

/// `raw` with every character outside `[A-Za-z0-9_]` made `_`, a `_` before a leading digit,
/// `_` for nothing.
fn sanitize(raw: &str) -> String {
    let mut out: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A valid name to follow a dot (`tools.<group>.<attr>`): `raw` sanitized, and a trailing
/// `_` on a keyword (`x.if` does not parse). A program's globals are fine after a dot, so
/// `tools.memory.print` keeps its name.
pub fn attribute(raw: &str) -> String {
    let mut out = sanitize(raw);
    if KEYWORDS.contains(&out.as_str()) {
        out.push('_');
    }
    out
}

/// Whether `name` can be passed as `name = value` (else only in a dict).
fn is_keyword_argument(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name)
}

/// One tool as a program reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramTool {
    /// The name `call()` takes: the tool's wire name as the client sees it.
    pub name: String,
    /// The group in `tools.<group>`, from the server prefix (`fs`).
    pub group: String,
    /// The attribute in `tools.<group>.<attr>`, from the tool's own name.
    pub attr: String,
}

/// The program surface of a catalogue: `tools` are (wire name, server prefix — `openpact`
/// for the built-ins —, the tool's original name), in the catalogue's order. The result is
/// in the same order.
pub fn program_tools(tools: &[(&str, &str, &str)]) -> Vec<ProgramTool> {
    let mut prefixes: Vec<&str> = Vec::new();
    let mut seen = HashSet::new();
    for &(_, prefix, _) in tools {
        if seen.insert(prefix) {
            prefixes.push(prefix);
        }
    }
    let groups = distinct(&prefixes);
    let mut out: Vec<Option<ProgramTool>> = vec![None; tools.len()];
    for (prefix, group) in prefixes.iter().zip(groups) {
        let members: Vec<usize> = (0..tools.len())
            .filter(|&i| tools[i].1 == *prefix)
            .collect();
        let originals: Vec<&str> = members.iter().map(|&i| tools[i].2).collect();
        for (&i, attr) in members.iter().zip(distinct(&originals)) {
            out[i] = Some(ProgramTool {
                name: tools[i].0.to_string(),
                group: group.clone(),
                attr,
            });
        }
    }
    out.into_iter().flatten().collect()
}

/// Distinct [`attribute`]s for `raws`, in their order. A name that needs no change keeps it
/// whatever came before (`read_file` never becomes `read_file_2` because `read-file` came
/// first); of the rest, the first to want a name gets it and the later ones get `_2`, `_3`…,
/// skipping any name already given.
fn distinct(raws: &[&str]) -> Vec<String> {
    let bases: Vec<String> = raws.iter().map(|r| attribute(r)).collect();
    let unchanged = |i: &usize| bases[*i] == raws[*i];
    let order: Vec<usize> = (0..raws.len())
        .filter(unchanged)
        .chain((0..raws.len()).filter(|i| !unchanged(i)))
        .collect();
    let mut taken: HashSet<String> = HashSet::new();
    let mut names: Vec<Option<String>> = vec![None; raws.len()];
    for &i in &order {
        if taken.insert(bases[i].clone()) {
            names[i] = Some(bases[i].clone());
        }
    }
    for &i in &order {
        if names[i].is_none() {
            let name = (2..)
                .map(|n| format!("{}_{n}", bases[i]))
                .find(|c| !taken.contains(c))
                .unwrap_or_default();
            taken.insert(name.clone());
            names[i] = Some(name);
        }
    }
    names.into_iter().flatten().collect()
}

/// A Starlark string literal (JSON's escapes are all Starlark escapes too).
fn quote(s: &str) -> String {
    Json::String(s.to_string()).to_string()
}

/// Starlark source defining the global `tools`, so `tools.fs.read_text_file(path = "x")` is
/// `call("fs:read_text_file", {"path": "x"})`. It needs the worker's built-in `call`; its
/// helper is `_tool` (private: a frozen module does not export it).
///
/// The attribute form drops arguments given as `None`, so a call written after a signature's
/// `head: int = None` leaves `head` out rather than sending `null`; it also takes one dict
/// instead of keyword arguments, for names that are not Starlark names.
pub fn prelude(tools: &[ProgramTool]) -> String {
    let mut out = String::from(
        "def _tool(name, attr):\n    \
             def tool(*args, **kwargs):\n        \
                 if args:\n            \
                     if len(args) != 1 or type(args[0]) != \"dict\" or kwargs:\n                \
                         fail(attr + \" takes keyword arguments (or one dict of them)\")\n            \
                     return call(name, args[0])\n        \
                 return call(name, {k: v for k, v in kwargs.items() if v != None})\n    \
             return tool\n\n",
    );
    let mut groups: Vec<&str> = Vec::new();
    for t in tools {
        if !groups.contains(&t.group.as_str()) {
            groups.push(&t.group);
        }
    }
    if groups.is_empty() {
        out.push_str("tools = struct()\n");
        return out;
    }
    out.push_str("tools = struct(\n");
    for group in groups {
        out.push_str(&format!("    {group} = struct(\n"));
        for t in tools.iter().filter(|t| t.group == group) {
            let shown = format!("tools.{}.{}", t.group, t.attr);
            out.push_str(&format!(
                "        {} = _tool({}, {}),\n",
                t.attr,
                quote(&t.name),
                quote(&shown)
            ));
        }
        out.push_str("    ),\n");
    }
    out.push_str(")\n");
    out
}

/// `text` on one line, at most `cap` characters (cut with `…`).
fn one_line(text: &str, cap: usize) -> String {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.chars().count() <= cap {
        return folded;
    }
    let mut cut: String = folded.chars().take(cap.saturating_sub(1)).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// A tool's description on one line: whole when short, else its sentences that fit in
/// [`DESCRIPTION_CAP`], else cut there.
fn summary(text: &str) -> String {
    let folded = one_line(text, usize::MAX);
    let Some((limit, _)) = folded.char_indices().nth(DESCRIPTION_CAP) else {
        return folded;
    };
    match folded[..limit].rfind(". ") {
        // A first sentence too short to say much is not worth the cut.
        Some(end) if end >= DESCRIPTION_CAP / 4 => format!("{} …", &folded[..=end]),
        _ => one_line(&folded, DESCRIPTION_CAP),
    }
}

/// A JSON value as the Starlark literal a program would write, if it is a scalar.
fn literal(v: &Json) -> Option<String> {
    match v {
        Json::Null => Some("None".into()),
        Json::Bool(true) => Some("True".into()),
        Json::Bool(false) => Some("False".into()),
        Json::Number(n) => Some(n.to_string()),
        Json::String(s) => Some(quote(s)),
        Json::Array(_) | Json::Object(_) => None,
    }
}

/// A default value as Starlark, when it is short enough to show.
fn default_literal(v: &Json) -> Option<String> {
    let text = match v {
        Json::Array(a) if a.is_empty() => "[]".to_string(),
        Json::Object(o) if o.is_empty() => "{}".to_string(),
        _ => literal(v)?,
    };
    (text.chars().count() <= 40).then_some(text)
}

/// Distinct parts joined with ` | `, `None` last.
fn union(parts: Vec<String>) -> String {
    distinct_types(parts).join(" | ")
}

/// Distinct parts, `None` last.
fn distinct_types(parts: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in parts {
        if !out.contains(&p) {
            out.push(p);
        }
    }
    if let Some(i) = out.iter().position(|p| p == "None") {
        let none = out.remove(i);
        out.push(none);
    }
    out
}

/// Schema to Starlark type text. `root` resolves local `$ref`s; `expand` shows objects
/// with properties as their shape (`{path: str, tail?: int}`) instead of `dict`.
struct Types<'a> {
    root: &'a Json,
}

impl Types<'_> {
    /// A local `$ref` (`#/$defs/X`) resolved; `None` for others.
    fn resolve(&self, reference: &str) -> Option<&Json> {
        reference
            .strip_prefix('#')
            .and_then(|pointer| self.root.pointer(pointer))
    }

    fn render(&self, schema: &Json, depth: usize, expand: bool) -> String {
        let Some(obj) = schema.as_object() else {
            return "any".into();
        };
        if depth > MAX_DEPTH {
            return "any".into();
        }
        if let Some(r) = obj.get("$ref").and_then(Json::as_str) {
            return match self.resolve(r) {
                Some(target) => self.render(target, depth + 1, expand),
                None => "any".into(),
            };
        }
        if let Some(c) = obj.get("const") {
            return literal(c).unwrap_or_else(|| "any".into());
        }
        if let Some(values) = obj.get("enum").and_then(Json::as_array) {
            let shown: Vec<String> = values.iter().filter_map(literal).collect();
            let text = union(shown.clone());
            if !values.is_empty()
                && shown.len() == values.len()
                && shown.len() <= ENUM_VALUES
                && text.chars().count() <= ENUM_CAP
            {
                return text;
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = obj.get(key).and_then(Json::as_array) {
                let parts: Vec<String> = branches
                    .iter()
                    .map(|b| self.render(b, depth + 1, expand))
                    .collect();
                let distinct = distinct_types(parts);
                if distinct.is_empty()
                    || distinct.iter().any(|p| p == "any")
                    || distinct.len() > MAX_UNION
                {
                    return "any".into();
                }
                let text = distinct.join(" | ");
                if expand && text.chars().count() > SHAPE_CAP {
                    return self.render(schema, depth, false);
                }
                return text;
            }
        }
        if let Some(all) = obj.get("allOf").and_then(Json::as_array) {
            return match all.as_slice() {
                [one] => self.render(one, depth + 1, expand),
                _ => "any".into(),
            };
        }
        let types: Vec<&str> = match obj.get("type") {
            Some(Json::String(t)) => vec![t.as_str()],
            Some(Json::Array(ts)) => ts.iter().filter_map(Json::as_str).collect(),
            _ if obj.contains_key("properties") => vec!["object"],
            _ if obj.contains_key("items") => vec!["array"],
            _ => Vec::new(),
        };
        if types.is_empty() {
            return "any".into();
        }
        union(
            types
                .iter()
                .map(|t| match *t {
                    "string" => "str".into(),
                    "integer" => "int".into(),
                    "number" => "float".into(),
                    "boolean" => "bool".into(),
                    "null" => "None".into(),
                    "array" => match obj.get("items") {
                        Some(items) => match self.render(items, depth + 1, expand).as_str() {
                            "any" => "list".into(),
                            inner => format!("list[{inner}]"),
                        },
                        None => "list".into(),
                    },
                    "object" => match expand.then(|| self.shape(schema, depth)).flatten() {
                        Some(shape) => shape,
                        None => "dict".into(),
                    },
                    _ => "any".into(),
                })
                .collect(),
        )
    }

    /// An object's properties as `{name: str, tail?: int}` (keys that are not names quoted),
    /// one level deep, as many as fit in [`SHAPE_CAP`]; `None` without properties.
    fn shape(&self, schema: &Json, depth: usize) -> Option<String> {
        let props = schema.get("properties")?.as_object()?;
        if props.is_empty() {
            return None;
        }
        let required = required(schema);
        let mut parts = Vec::new();
        let mut length = 2;
        for (key, sub) in props {
            let name = if is_keyword_argument(key) {
                key.clone()
            } else {
                quote(key)
            };
            let mark = if required.contains(&key.as_str()) {
                ""
            } else {
                "?"
            };
            // Only the outer object is expanded: deeper ones are `dict`.
            let part = format!("{name}{mark}: {}", self.render(sub, depth + 1, false));
            length += part.chars().count() + 2;
            if length > SHAPE_CAP {
                parts.push("...".to_string());
                break;
            }
            parts.push(part);
        }
        Some(format!("{{{}}}", parts.join(", ")))
    }
}

/// The `required` names of an object schema, in order.
fn required(schema: &Json) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for name in schema
        .get("required")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
    {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// One parameter as shown.
struct Param {
    name: String,
    /// For the first line (`list[dict]`).
    short: String,
    /// For the parameter's own line (`list[{path: str}]`).
    long: String,
    required: bool,
    default: Option<String>,
    description: String,
}

/// The parameters of an input schema: the required ones in `required` order, then the rest
/// in property order.
fn params(schema: &Json, types: &Types) -> Vec<Param> {
    let empty = serde_json::Map::new();
    let props = schema
        .get("properties")
        .and_then(Json::as_object)
        .unwrap_or(&empty);
    let required = required(schema);
    let any = Json::Bool(true);
    let names = required.iter().copied().chain(
        props
            .keys()
            .map(String::as_str)
            .filter(|k| !required.contains(k)),
    );
    names
        .map(|name| {
            let sub = props.get(name).unwrap_or(&any);
            let resolved = sub
                .get("$ref")
                .and_then(Json::as_str)
                .and_then(|r| types.resolve(r))
                .unwrap_or(sub);
            let description = sub
                .get("description")
                .or_else(|| resolved.get("description"))
                .and_then(Json::as_str)
                .unwrap_or("");
            let mut description = one_line(description, PARAM_CAP);
            let long = types.render(sub, 0, true);
            // Values an enum was too long to show in the type.
            if let Some(values) = resolved.get("enum").and_then(Json::as_array)
                && !long.contains(" | ")
                && !values.is_empty()
            {
                let listed: Vec<String> = values.iter().filter_map(literal).collect();
                let values = one_line(&format!("one of {}", listed.join(", ")), PARAM_CAP);
                description = if description.is_empty() {
                    values
                } else {
                    format!("{description} ({values})")
                };
            }
            Param {
                name: name.to_string(),
                short: types.render(sub, 0, false),
                long,
                required: required.contains(&name),
                default: sub
                    .get("default")
                    .or_else(|| resolved.get("default"))
                    .and_then(default_literal),
                description,
            }
        })
        .collect()
}

/// How `search_tools` shows `tool` in code mode, e.g.
///
/// ```text
/// tools.fs.read_text_file(path: str, head: int = None) -> dict
///   Read a file as text.
///   or: call("fs:read_text_file", {"path": ...})
///   path (str, required): The file to read
///   head (int, optional): Only the first N lines
///   returns: {content: str}
/// ```
///
/// A tool with a parameter that is not a Starlark name (`repo-path`, `from`) is shown only
/// as its `call` with a dict, since the attribute form cannot pass that name.
pub fn signature(
    tool: &ProgramTool,
    description: &str,
    input_schema: &Json,
    output_schema: Option<&Json>,
) -> String {
    let types = Types { root: input_schema };
    let params = params(input_schema, &types);
    let not_a_name = params.iter().find(|p| !is_keyword_argument(&p.name));
    let returns = output_schema.map(|s| {
        let types = Types { root: s };
        (types.render(s, 0, false), types.render(s, 0, true))
    });
    let arrow = returns
        .as_ref()
        .map(|(short, _)| format!(" -> {short}"))
        .unwrap_or_default();
    let name = quote(&tool.name);

    // The first line: every required parameter, then optional ones while it stays short.
    let mut shown = Vec::new();
    let mut length = 0;
    for (i, p) in params.iter().enumerate() {
        let text = match (not_a_name.is_some(), p.required) {
            (false, true) => format!("{}: {}", p.name, p.short),
            (false, false) => format!(
                "{}: {} = {}",
                p.name,
                p.short,
                p.default.as_deref().unwrap_or("None")
            ),
            (true, true) => format!("{}: {}", quote(&p.name), p.short),
            (true, false) => format!("{}?: {}", quote(&p.name), p.short),
        };
        if i >= MAX_PARAMS || (!p.required && length + text.len() > HEADER_CAP) {
            shown.push("...".to_string());
            break;
        }
        length += text.len() + 2;
        shown.push(text);
    }
    let mut out = match not_a_name {
        None => format!(
            "tools.{}.{}({}){arrow}\n",
            tool.group,
            tool.attr,
            shown.join(", ")
        ),
        Some(_) => format!("call({name}, {{{}}}){arrow}\n", shown.join(", ")),
    };
    let description = summary(description);
    if !description.is_empty() {
        out.push_str(&format!("  {description}\n"));
    }
    match not_a_name {
        None => {
            let keys: Vec<String> = params
                .iter()
                .filter(|p| p.required)
                .map(|p| format!("{}: ...", quote(&p.name)))
                .collect();
            out.push_str(&format!("  or: call({name}, {{{}}})\n", keys.join(", ")));
        }
        Some(p) => out.push_str(&format!(
            "  (arguments go in a dict: {} is not a Starlark name)\n",
            quote(&p.name)
        )),
    }
    for p in params.iter().take(MAX_PARAMS) {
        let status = match (&p.default, p.required) {
            (_, true) => "required".to_string(),
            (Some(d), false) => format!("default {d}"),
            (None, false) => "optional".to_string(),
        };
        let mut line = format!("  {} ({}, {status})", p.name, p.long);
        if !p.description.is_empty() {
            line.push_str(&format!(": {}", p.description));
        }
        out.push_str(&line);
        out.push('\n');
    }
    if params.len() > MAX_PARAMS {
        let rest: Vec<&str> = params[MAX_PARAMS..]
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        let names = one_line(&rest.join(", "), DESCRIPTION_CAP);
        out.push_str(&format!("  {} more: {names}\n", rest.len()));
    }
    match returns {
        Some((_, long)) => out.push_str(&format!("  returns: {long}\n")),
        None => out.push_str("  returns: the result's text (parsed as JSON when it is JSON)\n"),
    }
    out
}

#[cfg(test)]
mod tests;
