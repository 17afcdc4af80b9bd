//! What the commands that ask the servers print: the listings, search results, and the
//! answer to `call`, `prompt` and `read` (or the JSON-RPC error instead).

use super::out;
use crate::cli::Listing;
use crate::hub::{Catalog, Hub};
use crate::jsonrpc::RawObject;
use crate::upstream::State;
use serde_json::{Value, json};

fn description(json: &str) -> String {
    let d = RawObject::parse(json)
        .ok()
        .and_then(|o| o.get_str("description"))
        .unwrap_or_default();
    let first = d.lines().next().unwrap_or("").trim();
    if first.chars().count() > 100 {
        format!("{}…", first.chars().take(99).collect::<String>())
    } else {
        first.to_string()
    }
}

/// One line per tool / prompt / resource, then a count; failed servers on stderr.
pub fn listing_human(hub: &Hub, catalog: &Catalog, what: Listing) {
    // Which servers the rows came from, for the count (built-ins count as `openpact`).
    let servers: std::collections::BTreeSet<usize> = match what {
        Listing::Tools => catalog.tools.items.iter().map(|t| t.upstream).collect(),
        Listing::Prompts => catalog.prompts.items.iter().map(|p| p.upstream).collect(),
        Listing::Resources => catalog
            .resources
            .iter()
            .chain(catalog.templates.iter())
            .map(|r| r.upstream)
            .collect(),
    };
    let mut labelled = false;
    let rows: Vec<(String, String)> = match what {
        Listing::Tools => catalog
            .tools
            .items
            .iter()
            .map(|t| {
                let labels = hub.tool_labels(t).all();
                let mut row = description(&t.json);
                if !labels.is_empty() {
                    labelled = true;
                    let names: Vec<&str> = labels.iter().map(|l| l.name()).collect();
                    row = format!("{row}  [{}]", names.join(", "))
                        .trim_start()
                        .to_string();
                }
                (t.qualified.to_string(), row)
            })
            .collect(),
        Listing::Prompts => catalog
            .prompts
            .items
            .iter()
            .map(|p| {
                let args = prompt_arguments(&p.json);
                let label = if args.is_empty() {
                    p.qualified.to_string()
                } else {
                    format!("{} ({args})", p.qualified)
                };
                (label, description(&p.json))
            })
            .collect(),
        Listing::Resources => catalog
            .resources
            .iter()
            .chain(catalog.templates.iter())
            .map(|r| {
                let name = RawObject::parse(&r.json)
                    .ok()
                    .and_then(|o| o.get_str("name"))
                    .unwrap_or_default();
                let server = hub.server_name(r.upstream);
                (
                    r.key.to_string(),
                    format!("[{server}] {name}  {}", description(&r.json))
                        .trim_end()
                        .to_string(),
                )
            })
            .collect(),
    };
    let width = rows
        .iter()
        .map(|(a, _)| a.chars().count())
        .max()
        .unwrap_or(0);
    for (a, b) in &rows {
        out!("{a:width$}  {b}");
    }
    let noun = match what {
        Listing::Tools => "tools",
        Listing::Prompts => "prompts",
        Listing::Resources => "resources and templates",
    };
    out!("{} {noun} from {} server(s)", rows.len(), servers.len());
    if what == Listing::Tools {
        if labelled {
            out!(
                "[…]: the tool's data-flow labels (openpact.flows.guard: \"{}\"); `openpact tools --json` says where each comes from",
                hub.policy().settings.flows.guard.label()
            );
        }
        for up in hub.upstreams().iter() {
            let hidden = up.snapshot().hidden_tools;
            if hidden > 0 {
                out!(
                    "({hidden} tool(s) of {} hidden by its enabledTools/disabledTools)",
                    up.name()
                );
            }
        }
    }
    for up in hub.upstreams().iter() {
        if let State::Failed(reason) = &up.snapshot().state {
            eprintln!("server '{}' failed: {reason}", up.name());
        }
    }
}

fn prompt_arguments(json: &str) -> String {
    let v: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    v.get("arguments")
        .and_then(Value::as_array)
        .map(|args| {
            args.iter()
                .filter_map(|a| {
                    let name = a.get("name")?.as_str()?;
                    let required = a.get("required").and_then(Value::as_bool).unwrap_or(false);
                    Some(if required {
                        name.to_string()
                    } else {
                        format!("{name}?")
                    })
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// `openpact tools --search`: the matches best first (`results` as `search_tools` gives
/// them), of `total` tools.
pub fn search_results(
    query: &str,
    results: &[Value],
    total: usize,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let out = json!({"query": query, "tools": results, "total": total});
        out!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if results.is_empty() {
        out!(
            "No tool matches \"{query}\" among {total} tools; try other words (what the tool does, or its server's name)."
        );
        return Ok(());
    }
    let text = |v: &Value, key: &str| v[key].as_str().unwrap_or("").to_string();
    let width = results
        .iter()
        .map(|r| text(r, "name").chars().count())
        .max()
        .unwrap_or(0);
    for (i, r) in results.iter().enumerate() {
        let description = description(&json!({"description": r["description"]}).to_string());
        out!("{:>2}. {:<width$}  {description}", i + 1, text(r, "name"));
    }
    out!(
        "\n{} of {total} tools, best first; call one with `openpact call NAME '{{…}}'` (`--json` adds each one's arguments)",
        results.len()
    );
    Ok(())
}

pub fn listing_json(hub: &Hub, catalog: &Catalog, what: Listing) -> anyhow::Result<()> {
    // The server's own name for the item: `tool` for tools, `prompt` for prompts.
    let own = match what {
        Listing::Prompts => "prompt",
        _ => "tool",
    };
    let named = |items: &[std::sync::Arc<crate::hub::Named>]| -> Vec<Value> {
        items
            .iter()
            .map(|t| {
                let mut v = json!({
                    "name": t.wire,
                    "qualified": t.qualified,
                    "server": hub.server_name(t.upstream),
                    "definition": serde_json::from_str::<Value>(&t.json).unwrap_or(Value::Null),
                });
                v[own] = json!(t.original);
                if what == Listing::Tools {
                    let labels = hub.tool_labels(t).sources();
                    v["labels"] = json!(labels.iter().map(|(l, _)| l.name()).collect::<Vec<_>>());
                    v["labelsFrom"] = labels
                        .iter()
                        .map(|(l, from)| {
                            (
                                l.name().to_string(),
                                json!(from.iter().map(|o| o.name()).collect::<Vec<_>>()),
                            )
                        })
                        .collect::<serde_json::Map<_, _>>()
                        .into();
                }
                v
            })
            .collect()
    };
    let listed = |items: &[std::sync::Arc<crate::hub::catalog::Listed>]| -> Vec<Value> {
        items
            .iter()
            .map(|r| {
                json!({
                    "server": hub.server_name(r.upstream),
                    "definition": serde_json::from_str::<Value>(&r.json).unwrap_or(Value::Null),
                })
            })
            .collect()
    };
    let out = match what {
        Listing::Tools => Value::Array(named(&catalog.tools.items)),
        Listing::Prompts => Value::Array(named(&catalog.prompts.items)),
        Listing::Resources => {
            json!({ "resources": listed(&catalog.resources), "templates": listed(&catalog.templates) })
        }
    };
    out!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// A JSON-RPC error answer: `error CODE: message` on stderr, or with `--json` the error
/// object as `{"error": …}` on stdout, so a script reads every outcome the same way.
pub fn rpc_error(error: &str, raw: bool) {
    let v: Value = serde_json::from_str(error).unwrap_or(Value::Null);
    if raw {
        let error = if v.is_object() {
            v
        } else {
            json!({"message": error})
        };
        out!("{}", json!({ "error": error }));
        return;
    }
    let code = v.get("code").and_then(Value::as_i64).unwrap_or(0);
    let message = v.get("message").and_then(Value::as_str).unwrap_or(error);
    eprintln!("error {code}: {message}");
    if let Some(data) = v.get("data") {
        eprintln!("data: {data}");
    }
}

fn content_text(item: &Value) -> String {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or("?");
    let mime = item.get("mimeType").and_then(Value::as_str).unwrap_or("");
    match kind {
        "text" => item
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        "image" | "audio" => {
            let n = item
                .get("data")
                .and_then(Value::as_str)
                .map_or(0, |d| d.len() * 3 / 4);
            format!("[{kind} {mime}, about {n} bytes]")
        }
        "resource" => {
            let r = item.get("resource").cloned().unwrap_or(Value::Null);
            match r.get("text").and_then(Value::as_str) {
                Some(text) => text.to_string(),
                None => format!(
                    "[resource {}]",
                    r.get("uri").and_then(Value::as_str).unwrap_or("?")
                ),
            }
        }
        "resource_link" => format!(
            "[link {}]",
            item.get("uri").and_then(Value::as_str).unwrap_or("?")
        ),
        other => format!("[{other} content]"),
    }
}

/// Prints a `tools/call` result; returns whether it was an `isError` result.
pub fn call_result(result: &str, raw: bool) -> anyhow::Result<bool> {
    let v: Value = serde_json::from_str(result)?;
    let is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
    if raw {
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(is_error);
    }
    let mut lines: Vec<String> = v
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(content_text)
        .collect();
    if lines.is_empty()
        && let Some(s) = v.get("structuredContent")
    {
        lines.push(serde_json::to_string_pretty(s)?);
    }
    let text = lines.join("\n");
    if is_error {
        eprintln!("error: {text}");
    } else {
        out!("{text}");
    }
    Ok(is_error)
}

/// The result parsed for human output, or None after printing it raw (`--json`).
fn parsed_unless_raw(result: &str, raw: bool) -> anyhow::Result<Option<Value>> {
    let v: Value = serde_json::from_str(result)?;
    if raw {
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(None);
    }
    Ok(Some(v))
}

/// Prints a `prompts/get` result as `role: text` lines.
pub fn prompt_result(result: &str, raw: bool) -> anyhow::Result<bool> {
    let Some(v) = parsed_unless_raw(result, raw)? else {
        return Ok(false);
    };
    if let Some(d) = v.get("description").and_then(Value::as_str) {
        out!("# {d}");
    }
    for m in v
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
        out!(
            "{role}: {}",
            content_text(m.get("content").unwrap_or(&Value::Null))
        );
    }
    Ok(false)
}

/// Prints a `resources/read` result: text contents as they are, blobs summarised.
pub fn read_result(result: &str, raw: bool) -> anyhow::Result<bool> {
    let Some(v) = parsed_unless_raw(result, raw)? else {
        return Ok(false);
    };
    for c in v
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (
            c.get("text").and_then(Value::as_str),
            c.get("blob").and_then(Value::as_str),
        ) {
            (Some(text), _) => out!("{text}"),
            (None, Some(blob)) => {
                let mime = c
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("application/octet-stream");
                out!(
                    "[{mime}, about {} bytes; use --json for the base64]",
                    blob.len() * 3 / 4
                );
            }
            _ => {}
        }
    }
    Ok(false)
}
