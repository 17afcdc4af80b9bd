//! Views: what each client sees of the merged catalogue. A profile keeps some servers and
//! tools; tool search replaces a long tool list with the pinned tools and two meta-tools
//! (`search_tools`, `call_tool`) over an index of the view's tools; code mode lists
//! `search_tools` and `run_code` instead. View 0 is the default one (`serve` without
//! `--profile`, `/mcp`); each profile is one more, in config order.

use super::catalog::{BUILTIN, Catalog, META, Named, NamedList};
use crate::code::names;
use crate::config::{CodeMode, Config, ToolSearch, ToolSelection};
use crate::search::{Hit, Index};
use crate::upstream::{Entry, Upstream};
use std::sync::{Arc, OnceLock};

/// The meta-tools' names: bare, like built-ins, and valid in both naming modes.
pub const SEARCH_TOOLS: &str = "search_tools";
pub const CALL_TOOL: &str = "call_tool";
pub const RUN_CODE: &str = "run_code";

/// The `_meta` key that makes Claude Code load a tool in full rather than defer it behind
/// its own search.
const ALWAYS_LOAD: &str = "anthropic/alwaysLoad";

/// One view as configured.
#[derive(Debug, Clone)]
pub struct ViewSpec {
    /// The profile's name; `None` for the default view.
    pub name: Option<String>,
    /// The servers in view, by index (`None`: all).
    servers: Option<Vec<usize>>,
    tools: ToolSelection,
    builtins: bool,
    pub search: ToolSearch,
    pub code: CodeMode,
}

impl ViewSpec {
    /// The default view, then one per profile; `index_of` finds a server's index by name.
    pub fn all(config: &Config, index_of: &dyn Fn(&str) -> Option<usize>) -> Vec<ViewSpec> {
        let mut views = vec![ViewSpec {
            name: None,
            servers: None,
            tools: ToolSelection::default(),
            builtins: true,
            search: config.hub.tool_search.clone(),
            code: config.hub.code_mode.clone(),
        }];
        views.extend(config.hub.profiles.iter().map(|p| {
            ViewSpec {
                name: Some(p.name.clone()),
                servers: p
                    .servers
                    .as_ref()
                    .map(|names| names.iter().filter_map(|n| index_of(n)).collect()),
                tools: p.tools.clone(),
                builtins: p.builtins,
                search: p.tool_search.clone(),
                code: p.code_mode.clone(),
            }
        }));
        views
    }

    /// Whether server `i` (or the built-ins, [`BUILTIN`]) is in view.
    pub fn shows_server(&self, i: usize) -> bool {
        match i {
            BUILTIN => self.builtins,
            META => true,
            _ => self.servers.as_ref().is_none_or(|s| s.contains(&i)),
        }
    }

    fn is_whole(&self) -> bool {
        self.servers.is_none() && self.builtins && self.tools == ToolSelection::default()
    }

    /// This view of `full`: `full` itself when the view keeps everything and lists it all.
    pub fn catalog(&self, full: &Arc<Catalog>, upstreams: &[Arc<Upstream>]) -> Arc<Catalog> {
        let mut view = if self.is_whole() {
            if !self.searched(full.tools.items.len()) {
                return full.clone();
            }
            full.filtered(|_| true, |_| true)
        } else {
            full.filtered(
                |i| self.shows_server(i),
                |t| self.tools.allows(&t.qualified),
            )
        };
        if self.searched(view.tools.items.len()) {
            view.search = Some(Arc::new(Search::new(self, &view, upstreams)));
        }
        Arc::new(view)
    }

    /// Whether a view of `tools` tools is searched: tool search is on for it, or code mode
    /// (which is searched through `search_tools`).
    fn searched(&self, tools: usize) -> bool {
        let search = self.search.active(tools);
        search || self.code.active(search)
    }
}

/// Tool search as one view has it: the short list its clients are given, and the index of
/// all its tools (built off the runtime when first needed).
#[derive(Debug)]
pub struct Search {
    pub listed: NamedList,
    pub settings: ToolSearch,
    /// Set when the view is in code mode: `run_code` is listed, with these limits.
    pub code: Option<CodeMode>,
    /// The view's tools as programs call them, made when first needed.
    program: OnceLock<Arc<ProgramView>>,
    /// Per tool of the view, in catalogue order: its server's name and instructions.
    servers: Vec<(Arc<str>, Arc<str>)>,
    index: OnceLock<Arc<Index>>,
}

impl Search {
    fn new(spec: &ViewSpec, view: &Catalog, upstreams: &[Arc<Upstream>]) -> Search {
        let names: Vec<&str> = upstreams
            .iter()
            .filter(|u| spec.shows_server(u.index) && !u.is_removed() && !u.config().disabled)
            .map(|u| u.name())
            .collect();
        let search_on = spec.search.active(view.tools.items.len());
        let code = spec.code.active(search_on).then(|| spec.code.clone());
        let mut listed: Vec<Arc<Named>> = meta_tools(&names, code.as_ref())
            .iter()
            .map(|e| Arc::new(Named::own(META, e)))
            .collect();
        listed.extend(
            view.tools
                .items
                .iter()
                .filter(|t| {
                    spec.search.always_load.matches(&t.qualified)
                        || spec.search.always_load.matches(&t.wire)
                })
                .map(|t| Arc::new(t.with_json(with_meta_flag(&t.json, ALWAYS_LOAD)))),
        );
        let servers = tool_servers(&view.tools.items, upstreams);
        Search {
            listed: NamedList::of(listed),
            settings: spec.search.clone(),
            code,
            program: OnceLock::new(),
            servers,
            index: OnceLock::new(),
        }
    }

    /// The index of `tools` (the view's, which this search was made with); built on the
    /// first call, which blocks: call it off the runtime unless [`Search::ready`].
    pub fn index(&self, tools: &[Arc<Named>]) -> Arc<Index> {
        self.index
            .get_or_init(|| Arc::new(index_over(tools, &self.servers)))
            .clone()
    }

    /// The index, if it is built.
    pub fn ready(&self) -> Option<Arc<Index>> {
        self.index.get().cloned()
    }

    /// `tools` (the view's) as a program calls them, made on first use.
    pub fn program(&self, tools: &[Arc<Named>], upstreams: &[Arc<Upstream>]) -> Arc<ProgramView> {
        self.program
            .get_or_init(|| Arc::new(ProgramView::new(tools, upstreams)))
            .clone()
    }
}

/// A code-mode view's tools as its programs see them: each tool's names (in catalogue
/// order), and the Starlark that defines the `tools` namespace.
#[derive(Debug)]
pub struct ProgramView {
    pub tools: Vec<names::ProgramTool>,
    pub prelude: String,
}

impl ProgramView {
    fn new(tools: &[Arc<Named>], upstreams: &[Arc<Upstream>]) -> ProgramView {
        let servers = tool_servers(tools, upstreams);
        let rows: Vec<(&str, &str, &str)> = tools
            .iter()
            .zip(&servers)
            .map(|(t, (prefix, _))| (&*t.wire, &**prefix, t.original.as_str()))
            .collect();
        let tools = names::program_tools(&rows);
        let prelude = names::prelude(&tools);
        ProgramView { tools, prelude }
    }
}

/// The index of `view`'s tools, built on the blocking pool when it is not built yet (so a
/// big catalogue's indexing never holds up the runtime's calls).
pub async fn index_of(view: &Arc<Catalog>) -> Option<Arc<Index>> {
    let search = view.search.as_ref()?;
    if let Some(index) = search.ready() {
        return Some(index);
    }
    let view = view.clone();
    tokio::task::spawn_blocking(move || view.search.as_ref().map(|s| s.index(&view.tools.items)))
        .await
        .ok()
        .flatten()
}

/// Builds the index of each view that searches, on the blocking pool, as soon as the view
/// exists: the first search then finds it ready.
pub fn warm(views: &[Arc<Catalog>]) {
    for view in views {
        if view.search.as_ref().is_some_and(|s| s.ready().is_none()) {
            let view = view.clone();
            tokio::task::spawn_blocking(move || {
                if let Some(s) = &view.search {
                    s.index(&view.tools.items);
                }
            });
        }
    }
}

/// Per tool: its server's name (the prefix its tools go by) and instructions, shared by
/// the tools of one server.
pub fn tool_servers(
    tools: &[Arc<Named>],
    upstreams: &[Arc<Upstream>],
) -> Vec<(Arc<str>, Arc<str>)> {
    let mut per_server: crate::FastMap<usize, (Arc<str>, Arc<str>)> = Default::default();
    tools
        .iter()
        .map(|t| {
            per_server
                .entry(t.upstream)
                .or_insert_with(|| match upstreams.get(t.upstream) {
                    Some(up) => (
                        Arc::from(up.config().prefix()),
                        Arc::from(
                            up.snapshot()
                                .info
                                .as_ref()
                                .and_then(|i| i.instructions.as_deref())
                                .unwrap_or(""),
                        ),
                    ),
                    None => (Arc::from(super::catalog::BUILTIN_SERVER), Arc::from("")),
                })
                .clone()
        })
        .collect()
}

/// The index of `tools`, whose servers [`tool_servers`] gave (blocks for a big catalogue's
/// first indexing: each tool's terms are made once and kept).
pub fn index_over(tools: &[Arc<Named>], servers: &[(Arc<str>, Arc<str>)]) -> Index {
    let docs: Vec<&crate::search::Doc> = tools
        .iter()
        .zip(servers)
        .map(|(t, (server, hint))| t.search_doc(server, hint))
        .collect();
    Index::new(docs)
}

/// The `limit` tools of the whole catalogue that best match `query`, as [`results`] gives
/// them (what `openpact tools --search` and the embedding API's search return). The default
/// view holds every tool: its index is used when it keeps one (tool search on), else one is
/// built; both, and the search, on the blocking pool.
pub async fn search_catalog(hub: &super::Hub, query: &str, limit: usize) -> Vec<serde_json::Value> {
    let view = hub.view_catalog(0);
    let kept = index_of(&view).await;
    let found = {
        let (view, query) = (view.clone(), query.to_string());
        let servers = tool_servers(&view.tools.items, &hub.upstreams());
        tokio::task::spawn_blocking(move || {
            let index = kept.unwrap_or_else(|| Arc::new(index_over(&view.tools.items, &servers)));
            index.search_needs(&query, limit, ToolSearch::MAX_LIMIT, |_| true)
        })
        .await
        .unwrap_or_default()
    };
    results(&view.tools.items, &found, &hub.upstreams())
}

/// What a search found, as `search_tools` and `openpact tools --search` show it: each tool
/// of `tools` that `hits` names, best first, with its full definition, server and score.
pub fn results(
    tools: &[Arc<Named>],
    hits: &[Hit],
    upstreams: &[Arc<Upstream>],
) -> Vec<serde_json::Value> {
    hits.iter()
        .filter_map(|h| tools.get(h.doc).map(|t| (t, h.score)))
        .map(|(t, score)| {
            let def: serde_json::Value = serde_json::from_str(&t.json).unwrap_or_default();
            let mut entry = serde_json::json!({
                "name": &*t.wire,
                "server": super::catalog::server_name(upstreams, t.upstream),
                "description": t.description,
                "inputSchema": def.get("inputSchema").cloned()
                    .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                "score": (score * 1000.0).round() / 1000.0,
            });
            for key in ["title", "annotations", "outputSchema"] {
                if let Some(v) = def.get(key) {
                    entry[key] = v.clone();
                }
            }
            entry
        })
        .collect()
}

/// `json` (a tool definition) with `_meta[key]` set to true, other `_meta` members kept.
fn with_meta_flag(json: &str, key: &str) -> String {
    let Ok(mut tool) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(json)
    else {
        return json.to_string();
    };
    let meta = tool
        .entry("_meta")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(key.to_string(), serde_json::Value::Bool(true));
    }
    serde_json::Value::Object(tool).to_string()
}

/// The definitions of `search_tools` and `call_tool` (or, in code mode, `run_code`) for a
/// view of servers `servers`.
fn meta_tools(servers: &[&str], code: Option<&CodeMode>) -> Vec<Entry> {
    let over = if servers.is_empty() {
        "the hub's tools".to_string()
    } else {
        format!("the tools of {}", servers.join(", "))
    };
    let search = serde_json::json!({
        "name": SEARCH_TOOLS,
        "title": "Search tools",
        "description": format!(
            "Find the tools for a task among {over} (only a few are listed up front). \
             Describe the task in plain words (several needs at once: separate them with \
             `;`); the best matches come back with their full definitions. {}",
            if code.is_some() {
                "Then use them in a program with run_code (each match shows its call)."
            } else {
                "Then call one with call_tool, or by its name."
            }
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in plain words; several needs separated by ;"},
                "limit": {"type": "integer", "minimum": 1, "maximum": ToolSearch::MAX_LIMIT,
                          "description": "How many matches to return"},
                "server": {"type": "string", "description": "Only tools of this server"},
                "readOnly": {"type": "boolean",
                             "description": "Only tools annotated as changing nothing"}
            },
            "required": ["query"]
        },
        "annotations": {"readOnlyHint": true, "openWorldHint": false},
        "_meta": {ALWAYS_LOAD: true}
    });
    let call = serde_json::json!({
        "name": CALL_TOOL,
        "title": "Call a tool",
        "description": "Call a tool that search_tools found, by its name, with its arguments.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The tool's name, as search_tools gave it"},
                "arguments": {"type": "object", "description": "The tool's arguments"}
            },
            "required": ["name"]
        },
        "_meta": {ALWAYS_LOAD: true}
    });
    let second = match code {
        Some(code) => run_code_tool(code),
        None => call,
    };
    [search, second]
        .into_iter()
        .filter_map(|t| {
            Some(Entry {
                key: t.get("name")?.as_str()?.to_string(),
                json: t.to_string().into(),
            })
        })
        .collect()
}

/// The definition of `run_code`: what a program may do and what it cannot, in the words a
/// model reads before it writes one.
fn run_code_tool(code: &CodeMode) -> serde_json::Value {
    let description = format!(
        "Run a Starlark (Python-like) program that calls tools; only what it prints and its last \
         expression's value come back, so use it to chain many calls, loop, filter and \
         summarise without passing every result through the conversation. Find tools and \
         their call signatures with search_tools first. In the program: \
         call(\"server:tool\", {{args}}) returns the tool's value (its structured content, \
         else its text parsed as JSON when it is JSON, else the text) and FAILS the program \
         on a tool error (denied, unknown tool, rate limit, isError); \
         try_call(\"server:tool\", {{args}}) returns {{\"ok\": True, \"value\": v}} or \
         {{\"ok\": False, \"error\": msg}} instead (Starlark has no try/except); \
         tools.SERVER.TOOL(arg=value) is call() by attribute; \
         parallel([[\"server:tool\", {{args}}], ...]) runs up to {} calls at once and returns \
         their values in order (fail=False gives try_call's form); keep(name, value) and \
         kept(name) hold values for later programs of this session; print(...); \
         json.encode/json.decode. No load(), files, network or clock. Limits: {} \
         run time (the `timeout` argument may ask for less), {} tool calls, {} MiB of memory, \
         {} characters of output. Every call is checked by the user's permissions like a \
         direct call.",
        code.parallel,
        crate::config::human_duration(code.timeout),
        code.max_calls,
        code.memory >> 20,
        code.max_output,
    );
    serde_json::json!({
        "name": RUN_CODE,
        "title": "Run a program that calls tools",
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The Starlark program"},
                "timeout": {"type": "number",
                            "description": "Seconds the program may run (at most the configured limit)"}
            },
            "required": ["code"]
        },
        "_meta": {ALWAYS_LOAD: true}
    })
}
