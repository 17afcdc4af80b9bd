//! The search meta-tools of a view whose tools are searched: `search_tools` is answered from
//! the view's index; `call_tool` becomes the call it names, which then takes the whole
//! pipeline like any other (permission for the real tool, cache, limits, audit).

use super::Session;
use crate::builtins::ToolOutput;
use crate::config::ToolSearch;
use crate::hub::views::{self, CALL_TOOL, RUN_CODE, SEARCH_TOOLS};
use crate::hub::{Catalog, catalog};
use crate::jsonrpc::{self, Message, RawObject};
use serde_json::{Value, json};
use std::sync::Arc;

/// What a call of a meta-tool comes to.
pub(super) enum Meta {
    /// The answer, ready to send.
    Answer(String),
    /// The params of the call it stands for.
    Call(String),
}

/// A `tools/call` answer with one text and, maybe, structured content.
fn tool_result(id: &str, text: &str, structured: Option<Value>, is_error: bool) -> String {
    ToolOutput {
        text: text.to_string(),
        structured,
        is_error,
    }
    .answer(id)
}

impl Session {
    /// `Some` when `name` is a meta-tool of this client's view (`params`: the call's).
    pub(super) async fn meta_tool(
        self: &Arc<Self>,
        m: &Message,
        params: &RawObject<'_>,
        name: &str,
    ) -> Option<Meta> {
        if name != SEARCH_TOOLS && name != CALL_TOOL && name != RUN_CODE {
            return None;
        }
        if name == SEARCH_TOOLS || name == RUN_CODE {
            // Like a listing: servers still starting get a moment to bring their tools (a
            // program's `tools.SERVER` namespace is made of the tools there are now).
            self.hub.startup_grace().await;
        }
        let view = self.catalog();
        let search = view.search.as_ref()?;
        if name == RUN_CODE {
            let code = search.code.as_ref()?;
            return Some(Meta::Answer(self.run_code(m, params, &view, code).await));
        }
        let arguments: Value = params
            .get("arguments")
            .and_then(|a| serde_json::from_str(a).ok())
            .unwrap_or(Value::Null);
        if name == SEARCH_TOOLS {
            return Some(Meta::Answer(
                self.search_tools(m.id(), &view, &search.settings, &arguments)
                    .await,
            ));
        }
        let target = arguments.get("name").and_then(Value::as_str);
        let inner = match target {
            None | Some("") => Err(format!(
                "{CALL_TOOL} needs `name`: the name of a tool that {SEARCH_TOOLS} found"
            )),
            Some(SEARCH_TOOLS | CALL_TOOL) => Err(format!(
                "{CALL_TOOL} calls the tools {SEARCH_TOOLS} finds; call {SEARCH_TOOLS} directly"
            )),
            Some(target) => match arguments.get("arguments") {
                None | Some(Value::Null) => Ok((target, "{}".to_string())),
                Some(a @ Value::Object(_)) => Ok((target, a.to_string())),
                Some(_) => Err(format!(
                    "{CALL_TOOL}: `arguments` must be an object of the tool's arguments"
                )),
            },
        };
        Some(match inner {
            Err(why) => Meta::Answer(tool_result(m.id(), &why, None, true)),
            // The call's own `_meta` (its progress token) stays with it.
            Ok((target, args)) => Meta::Call(params.rewrite(&[
                ("name", Some(&jsonrpc::quote(target))),
                ("arguments", Some(&args)),
            ])),
        })
    }

    async fn search_tools(
        &self,
        id: &str,
        view: &Arc<Catalog>,
        settings: &ToolSearch,
        arguments: &Value,
    ) -> String {
        let query = arguments
            .get("query")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("");
        if query.is_empty() {
            let why = format!("{SEARCH_TOOLS} needs `query`: the task in plain words");
            return tool_result(id, &why, None, true);
        }
        let limit = arguments
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(settings.limit, |n| n as usize)
            .clamp(1, ToolSearch::MAX_LIMIT);
        let upstreams = &self.hub.upstreams();
        // The view's servers in order (its tools come grouped by server).
        let mut in_view: Vec<usize> = Vec::new();
        for t in view.tools.items.iter() {
            if in_view.last() != Some(&t.upstream) && !in_view.contains(&t.upstream) {
                in_view.push(t.upstream);
            }
        }
        let servers: Vec<&str> = in_view
            .iter()
            .map(|&i| catalog::server_name(upstreams, i))
            .collect();
        let only_server = match arguments.get("server").and_then(Value::as_str) {
            None | Some("") => None,
            Some(name) => {
                let named = |&i: &usize| {
                    catalog::server_name(upstreams, i) == name
                        || upstreams
                            .get(i)
                            .is_some_and(|u| u.config().prefix() == name)
                };
                match in_view.iter().find(|i| named(i)) {
                    Some(&i) => Some(i),
                    None => {
                        let why = format!(
                            "no server \"{name}\" among this client's: {}",
                            servers.join(", ")
                        );
                        return tool_result(id, &why, None, true);
                    }
                }
            }
        };
        let read_only = arguments.get("readOnly").and_then(Value::as_bool) == Some(true);
        let Some(index) = views::index_of(view).await else {
            return tool_result(id, "the search index is not available", None, true);
        };
        let tools = &view.tools.items;
        let keep = |doc: usize| {
            tools.get(doc).is_some_and(|t| {
                only_server.is_none_or(|s| t.upstream == s) && (!read_only || t.read_only)
            })
        };
        let hits = index.search_needs(query, limit, ToolSearch::MAX_LIMIT, keep);
        if let Some(search) = view.search.as_ref().filter(|s| s.code.is_some()) {
            let program = search.program(tools, upstreams);
            return code_mode_results(id, query, tools, &hits, &program);
        }
        let listed = views::results(tools, &hits, upstreams);
        let mut text = if listed.is_empty() {
            format!(
                "No tool matches \"{query}\" among the {} tools of {}. Try other words: what the tool does, or the server's name.",
                tools.len(),
                servers.join(", ")
            )
        } else {
            format!(
                "Tools for \"{query}\", best first ({} of {}). Call one with {CALL_TOOL} {{\"name\": NAME, \"arguments\": {{…}}}}, or by its name.\n",
                listed.len(),
                tools.len()
            )
        };
        for (i, entry) in listed.iter().enumerate() {
            text.push_str(&format!(
                "\n{}. {} — {}\n   input: {}\n",
                i + 1,
                entry["name"].as_str().unwrap_or(""),
                entry["description"].as_str().unwrap_or("").trim(),
                entry["inputSchema"]
            ));
        }
        let structured = json!({"query": query, "tools": listed, "total": tools.len()});
        tool_result(id, &text, Some(structured), false)
    }
}

/// `search_tools` in code mode: each match as the Starlark call that invokes it, with its
/// parameters and what it returns; text only (a second, structured copy would double what
/// the model reads).
fn code_mode_results(
    id: &str,
    query: &str,
    tools: &[Arc<crate::hub::Named>],
    hits: &[crate::search::Hit],
    program: &views::ProgramView,
) -> String {
    if hits.is_empty() {
        let why = format!(
            "No tool matches \"{query}\" among the {} tools. Try other words: what the tool does, or the server's name.",
            tools.len()
        );
        return tool_result(id, &why, None, false);
    }
    let mut text = format!(
        "Tools for \"{query}\", best first ({} of {}), as a program calls them with {RUN_CODE}:\n",
        hits.len(),
        tools.len()
    );
    for hit in hits {
        let (Some(t), Some(p)) = (tools.get(hit.doc), program.tools.get(hit.doc)) else {
            continue;
        };
        let def: Value = serde_json::from_str(&t.json).unwrap_or_default();
        let schema = def.get("inputSchema").cloned().unwrap_or_else(|| json!({}));
        text.push('\n');
        let signature =
            crate::code::names::signature(p, &t.description, &schema, def.get("outputSchema"));
        text.push_str(signature.trim_end());
        text.push('\n');
    }
    tool_result(id, &text, None, false)
}
