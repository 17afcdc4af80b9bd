//! A host's entries read as openpact `mcpServers` entries (`command`/`args`/`env`/`cwd`, or
//! `type`/`url`/`headers`), or the reason openpact cannot run one.

use super::Shape;
use serde_json::{Map, Value};
use std::path::Path;

/// The servers of one file.
#[derive(Debug, Default)]
pub struct Read {
    pub entries: Vec<Entry>,
}

/// One server entry of a host file.
#[derive(Debug)]
pub struct Entry {
    pub name: String,
    /// Where in the file, when not the file's own list: Claude Code's `projects.PATH`.
    pub scope: Option<String>,
    /// The openpact entry, or why openpact cannot run it.
    pub server: Result<Map<String, Value>, String>,
    /// The variables `${input:ID}` references became: (`VAR`, what VS Code asks for).
    pub inputs: Vec<(String, String)>,
}

/// The servers of a JSON host file of `shape`; `base` stands for `${workspaceFolder}`.
pub fn json(root: &Value, shape: Shape, base: &Path) -> Read {
    let mut read = Read::default();
    let inputs = match shape {
        Shape::VsCode => root.get("inputs"),
        Shape::VsCodeSettings => root.get("mcp").and_then(|m| m.get("inputs")),
        _ => None,
    };
    let inputs = Inputs::of(inputs);
    let mut servers_of = |servers: Option<&Value>, scope: Option<String>| {
        for (name, v) in servers.and_then(Value::as_object).into_iter().flatten() {
            let mut entry = Entry {
                name: name.clone(),
                scope: scope.clone(),
                server: Err(String::new()),
                inputs: Vec::new(),
            };
            let mut fill = |s: &str| {
                let s = fill(s, &inputs, base, &mut entry.inputs);
                if shape == Shape::Gemini {
                    braced(&s)
                } else {
                    s
                }
            };
            entry.server = match shape {
                Shape::Opencode => opencode(v, &mut fill),
                _ => standard(v, shape, base, &mut fill),
            };
            read.entries.push(entry);
        }
    };
    let path = shape.servers_path();
    let mut at = Some(root);
    for key in path {
        at = at.and_then(|v| v.get(*key));
    }
    servers_of(at, None);
    if shape == Shape::ClaudeUser {
        for (project, v) in root
            .get("projects")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            servers_of(v.get("mcpServers"), Some(format!("projects.{project}")));
        }
    }
    read
}

/// VS Code's `inputs`: id → what it asks for.
struct Inputs(Vec<(String, String)>);

impl Inputs {
    fn of(list: Option<&Value>) -> Inputs {
        let inputs = list
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|i| {
                let id = i.get("id")?.as_str()?;
                let what = i.get("description").and_then(Value::as_str).unwrap_or(id);
                Some((id.to_string(), what.to_string()))
            })
            .collect();
        Inputs(inputs)
    }
}

/// The name of the variable a VS Code input becomes: `github-token` → `GITHUB_TOKEN`.
pub fn var_name(words: &str) -> String {
    let mut name: String = words
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

/// `text` with VS Code's `${input:ID}` made `${ID}` (noted in `used`) and
/// `${workspaceFolder}` made `base`.
fn fill(text: &str, inputs: &Inputs, base: &Path, used: &mut Vec<(String, String)>) -> String {
    let mut out = text.replace("${workspaceFolder}", &base.display().to_string());
    while let Some(at) = out.find("${input:") {
        let Some(len) = out[at..].find('}') else {
            break;
        };
        let id = out[at + 8..at + len].to_string();
        let var = var_name(&id);
        let what = inputs
            .0
            .iter()
            .find(|(i, _)| *i == id)
            .map_or_else(|| format!("VS Code input `{id}`"), |(_, w)| w.clone());
        if !used.iter().any(|(v, _)| *v == var) {
            used.push((var.clone(), what));
        }
        out.replace_range(at..=at + len, &format!("${{{var}}}"));
    }
    out
}

/// Gemini CLI's `$VAR` written `${VAR}`, the form openpact expands (a bare `$` is literal).
fn braced(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if len > 0 && !after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(&format!("${{{}}}", &after[..len]));
            rest = &after[len..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

fn strings(v: Option<&Value>, fill: &mut dyn FnMut(&str) -> String) -> Option<Value> {
    let list: Vec<Value> = v?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .map(|s| Value::String(fill(s)))
        .collect();
    (!list.is_empty()).then_some(Value::Array(list))
}

fn string_map(v: Option<&Value>, fill: &mut dyn FnMut(&str) -> String) -> Option<Value> {
    let map: Map<String, Value> = v?
        .as_object()?
        .iter()
        .filter_map(|(k, v)| {
            let v = match v {
                Value::String(s) => fill(s),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some((k.clone(), Value::String(v)))
        })
        .collect();
    (!map.is_empty()).then_some(Value::Object(map))
}

fn put(out: &mut Map<String, Value>, key: &str, v: Option<Value>) {
    if let Some(v) = v {
        out.insert(key.to_string(), v);
    }
}

/// The `mcpServers` shape and its relatives (Claude, Cursor, Windsurf, Gemini, VS Code).
fn standard(
    v: &Value,
    shape: Shape,
    base: &Path,
    fill: &mut dyn FnMut(&str) -> String,
) -> Result<Map<String, Value>, String> {
    let Some(o) = v.as_object() else {
        return Err("is not an object".into());
    };
    if o.get("disabled") == Some(&Value::Bool(true)) {
        return Err("disabled (`\"disabled\": true`)".into());
    }
    let text = |k: &str| o.get(k).and_then(Value::as_str);
    let declared = text("type");
    let (kind, url) = match (shape, declared) {
        (Shape::Gemini, _) if text("httpUrl").is_some() => ("http", text("httpUrl")),
        (Shape::Gemini, _) if text("url").is_some() => ("sse", text("url")),
        (_, None | Some("stdio")) if text("command").is_some() => ("stdio", None),
        (_, None) if text("serverUrl").is_some() => ("http", text("serverUrl")),
        (_, None | Some("http" | "streamable-http" | "streamableHttp"))
            if text("url").is_some() =>
        {
            ("http", text("url"))
        }
        (_, Some("sse")) => ("sse", text("url").or(text("serverUrl"))),
        (_, Some(t)) if !matches!(t, "stdio" | "http" | "streamable-http" | "streamableHttp") => {
            return Err(format!(
                "type `{t}` is the host's own; openpact runs stdio, http and sse servers"
            ));
        }
        _ => return Err("has no `command` or `url`".into()),
    };
    let mut out = Map::new();
    if kind == "stdio" {
        put(
            &mut out,
            "command",
            text("command").map(|c| Value::String(fill(c))),
        );
        put(&mut out, "args", strings(o.get("args"), fill));
        put(&mut out, "env", string_map(o.get("env"), fill));
        // A relative `cwd` is the host's own business (where it runs): made absolute from the
        // folder the file belongs to, the home or the project.
        let cwd = text("cwd").map(|c| base.join(fill(c)).display().to_string());
        put(&mut out, "cwd", cwd.map(Value::String));
        return Ok(out);
    }
    let Some(url) = url else {
        return Err(format!("is a `{kind}` server without a `url`"));
    };
    if kind == "sse" {
        out.insert("type".into(), Value::String("sse".into()));
    }
    out.insert("url".into(), Value::String(fill(url)));
    put(&mut out, "headers", string_map(o.get("headers"), fill));
    Ok(out)
}

/// opencode's `type: local` (command as a list, `environment`) or `type: remote`.
fn opencode(v: &Value, fill: &mut dyn FnMut(&str) -> String) -> Result<Map<String, Value>, String> {
    let Some(o) = v.as_object() else {
        return Err("is not an object".into());
    };
    if o.get("enabled") == Some(&Value::Bool(false)) {
        return Err("disabled (`\"enabled\": false`)".into());
    }
    let mut out = Map::new();
    match o.get("type").and_then(Value::as_str) {
        Some("local") => {
            let Some(Value::Array(line)) = strings(o.get("command"), fill) else {
                return Err("is `local` without a `command` list".into());
            };
            let mut line = line.into_iter();
            put(&mut out, "command", line.next());
            let args: Vec<Value> = line.collect();
            put(
                &mut out,
                "args",
                (!args.is_empty()).then_some(Value::Array(args)),
            );
            put(&mut out, "env", string_map(o.get("environment"), fill));
        }
        Some("remote") => {
            let Some(url) = o.get("url").and_then(Value::as_str) else {
                return Err("is `remote` without a `url`".into());
            };
            out.insert("url".into(), Value::String(fill(url)));
            put(&mut out, "headers", string_map(o.get("headers"), fill));
        }
        Some(t) => {
            return Err(format!(
                "type `{t}` is opencode's own; openpact reads `local` and `remote`"
            ));
        }
        None => return Err("has no `type` (`local` or `remote`)".into()),
    }
    Ok(out)
}

/// Codex's `[mcp_servers.NAME]` tables: `command`, `args`, `env`, `env_vars`, `cwd`,
/// `enabled`; or `url` with `bearer_token_env_var`, `http_headers`, `env_http_headers`.
pub fn codex(doc: &toml_edit::DocumentMut) -> Read {
    let mut read = Read::default();
    let Some(servers) = doc.get("mcp_servers").and_then(|t| t.as_table_like()) else {
        return read;
    };
    for (name, item) in servers.iter() {
        read.entries.push(Entry {
            name: name.to_string(),
            scope: None,
            server: codex_entry(item),
            inputs: Vec::new(),
        });
    }
    read
}

fn codex_entry(item: &toml_edit::Item) -> Result<Map<String, Value>, String> {
    let Some(t) = item.as_table_like() else {
        return Err("is not a table".into());
    };
    let text = |k: &str| t.get(k).and_then(|i| i.as_str()).map(str::to_string);
    let list = |k: &str| -> Vec<String> {
        t.get(k)
            .and_then(|i| i.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let table = |k: &str| -> Map<String, Value> {
        t.get(k)
            .and_then(|i| i.as_table_like())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        Some((k.to_string(), Value::String(v.as_str()?.to_string())))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    if t.get("enabled").and_then(|i| i.as_bool()) == Some(false) {
        return Err("disabled (`enabled = false`)".into());
    }
    let mut out = Map::new();
    if let Some(command) = text("command") {
        out.insert("command".into(), Value::String(command));
        let args = list("args");
        if !args.is_empty() {
            out.insert("args".into(), args.into());
        }
        let mut env = table("env");
        // Variables Codex passes through by name: the same by reference.
        for name in list("env_vars") {
            env.insert(name.clone(), Value::String(format!("${{{name}}}")));
        }
        if !env.is_empty() {
            out.insert("env".into(), Value::Object(env));
        }
        if let Some(cwd) = text("cwd") {
            out.insert("cwd".into(), Value::String(cwd));
        }
        return Ok(out);
    }
    let Some(url) = text("url") else {
        return Err("has no `command` or `url`".into());
    };
    out.insert("url".into(), Value::String(url));
    let mut headers = table("http_headers");
    for (header, var) in table("env_http_headers") {
        if let Value::String(var) = var {
            headers.insert(header, Value::String(format!("${{{var}}}")));
        }
    }
    if let Some(var) = text("bearer_token_env_var") {
        headers.insert(
            "Authorization".into(),
            Value::String(format!("Bearer ${{{var}}}")),
        );
    }
    if !headers.is_empty() {
        out.insert("headers".into(), Value::Object(headers));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemini_bare_variables_are_braced() {
        assert_eq!(braced("$DB x ${Y} $$ $1 a$"), "${DB} x ${Y} $$ $1 a$");
    }
}
