//! The merged catalogue of every ready server: tools and prompts under their wire names,
//! resources by URI and resource templates, in config order, with lookup tables that resolve
//! every accepted form of a name and route every URI.

use super::names;
use super::uri_template::UriTemplate;
use crate::FastMap;
use crate::config::ToolNames;
use crate::jsonrpc::{self, RawObject};
use crate::policy::flows::Labels;
use crate::upstream::{Entry, Snapshot, State, Upstream};
use std::collections::HashMap;
use std::sync::Arc;

/// Name and URI tables.
type Index = FastMap<Arc<str>, usize>;

/// The index standing for OpenPact's own tools, served in process (not a configured server).
pub const BUILTIN: usize = usize::MAX;
/// The index standing for the search meta-tools (`search_tools`, `call_tool`).
pub const META: usize = usize::MAX - 1;
pub use crate::config::BUILTIN_SERVER;

/// The name of server `i`, built-ins included.
pub fn server_name(upstreams: &[Arc<Upstream>], i: usize) -> &str {
    if i == BUILTIN || i == META {
        BUILTIN_SERVER
    } else {
        upstreams.get(i).map_or("?", |u| u.name())
    }
}

/// A tool or prompt as the hub serves it.
#[derive(Debug, Clone)]
pub struct Named {
    pub upstream: usize,
    /// The name the server knows it by.
    pub original: String,
    /// `original` as a JSON string, made once: every call splices it into its params.
    pub original_json: String,
    /// `server:name` — what the CLI, logs and permission rules use.
    pub qualified: Arc<str>,
    /// `server__name`, accepted in either naming mode.
    pub portable: Arc<str>,
    /// What the list shows (qualified or portable, per config).
    pub wire: Arc<str>,
    /// The server's object with `name` replaced by `wire`; every other member untouched.
    pub json: String,
    /// Annotated `readOnlyHint: true` (a hint from the server, trusted only if configured).
    pub read_only: bool,
    /// Its data-flow labels before the config's (the built-ins' defaults or what its
    /// annotations say): the config's are added per call by the policy.
    pub flows: Labels,
    /// The `description` member (empty when absent), read once when the catalogue is built.
    pub description: String,
    /// Its `_meta` names a view (MCP Apps): a client without the extension is shown
    /// [`Named::json_for`]'s plain form.
    pub ui: bool,
    /// `_meta.ui.visibility` leaves out the model: callable, never listed ([`Catalog::app_only`]).
    pub view_only: bool,
    /// `json` without the UI metadata, made when a client without the extension first lists it.
    plain: std::sync::OnceLock<Option<String>>,
    /// `sha256:…` of description + schema + annotations, computed when first needed.
    definition: std::sync::OnceLock<String>,
    /// What tool search knows of it, made when a search first needs it.
    doc: std::sync::OnceLock<crate::search::Doc>,
    /// This entry's part of the list fingerprint.
    hash: u64,
}

impl Named {
    pub fn definition(&self) -> &str {
        self.definition
            .get_or_init(|| crate::policy::canonical::definition_hash(&self.json))
    }

    /// The tool as search sees it; `server` and `hint` (its server's instructions) are read
    /// only the first time.
    pub fn search_doc(&self, server: &str, hint: &str) -> &crate::search::Doc {
        self.doc
            .get_or_init(|| crate::search::Doc::of_tool(&self.original, &self.json, server, hint))
    }

    /// The definition as a client is shown it: without UI metadata unless it declared
    /// the MCP Apps extension (`apps`).
    pub fn json_for(&self, apps: bool) -> &str {
        if apps || !self.ui {
            return &self.json;
        }
        self.plain
            .get_or_init(|| super::apps::without_ui(&self.json))
            .as_deref()
            .unwrap_or(&self.json)
    }

    /// This entry with `json` for its definition (the rest shared).
    pub fn with_json(&self, json: String) -> Named {
        Named {
            hash: item_hash(self.upstream, &json),
            json,
            plain: std::sync::OnceLock::new(),
            definition: std::sync::OnceLock::new(),
            doc: std::sync::OnceLock::new(),
            ..self.clone()
        }
    }

    /// One of the hub's own entries (built-ins, meta-tools), under its bare name.
    pub fn own(upstream: usize, entry: &Entry) -> Named {
        let mut named = Named::builtin(entry);
        named.upstream = upstream;
        named.hash = item_hash(upstream, &entry.json);
        named
    }

    /// A built-in tool, under its bare name (valid in both naming modes).
    fn builtin(entry: &Entry) -> Named {
        let name: Arc<str> = Arc::from(entry.key.as_str());
        let obj = RawObject::parse(&entry.json).unwrap_or_default();
        let hints = Hints::of(&obj);
        Named {
            upstream: BUILTIN,
            original: entry.key.clone(),
            original_json: jsonrpc::quote(&entry.key),
            qualified: name.clone(),
            portable: name.clone(),
            wire: name,
            json: entry.json.to_string(),
            read_only: hints.read_only,
            flows: Labels::intrinsic(Some(&entry.key), hints.read_only, hints.open_world),
            description: obj.get_str("description").unwrap_or_default().into(),
            ui: false,
            view_only: false,
            plain: std::sync::OnceLock::new(),
            definition: std::sync::OnceLock::new(),
            doc: std::sync::OnceLock::new(),
            hash: item_hash(BUILTIN, &entry.json),
        }
    }

    /// A server's tool (`tool`) or prompt under the names `prefix` and `mode` give it
    /// (`None`: the entry is not an object). A tool's `execution.taskSupport` is kept: the
    /// hub honours it, following the server's task (see `hub::tasks`).
    fn upstream(
        upstream: usize,
        prefix: &str,
        mode: ToolNames,
        entry: &Entry,
        tool: bool,
    ) -> Option<Named> {
        let obj = RawObject::parse(&entry.json).ok()?;
        let qualified: Arc<str> = Arc::from(names::qualified(prefix, &entry.key));
        let portable: Arc<str> = Arc::from(names::portable(prefix, &entry.key));
        let wire = match mode {
            ToolNames::Qualified => qualified.clone(),
            ToolNames::Portable => portable.clone(),
        };
        let name = jsonrpc::quote(&wire);
        let ui = tool.then(|| super::apps::tool_ui(prefix, &obj)).flatten();
        let json = match ui.as_ref().and_then(|u| u.meta.as_deref()) {
            Some(meta) => obj.rewrite(&[("name", Some(name.as_str())), ("_meta", Some(meta))]),
            None => obj.with("name", &name),
        };
        let hints = Hints::of(&obj);
        Some(Named {
            upstream,
            original: entry.key.clone(),
            original_json: jsonrpc::quote(&entry.key),
            qualified,
            portable,
            wire,
            read_only: hints.read_only,
            flows: Labels::intrinsic(None, hints.read_only, hints.open_world),
            description: obj.get_str("description").unwrap_or_default().into(),
            view_only: ui.as_ref().is_some_and(|u| u.view_only),
            ui: ui.is_some(),
            plain: std::sync::OnceLock::new(),
            definition: std::sync::OnceLock::new(),
            doc: std::sync::OnceLock::new(),
            hash: item_hash(upstream, &json),
            json,
        })
    }
}

/// The annotations the hub acts on, each `true` only when the entry says so.
struct Hints {
    read_only: bool,
    open_world: bool,
}

impl Hints {
    fn of(obj: &RawObject) -> Hints {
        let annotations = obj
            .get("annotations")
            .and_then(|a| RawObject::parse(a).ok());
        let says = |key: &str| {
            annotations
                .as_ref()
                .and_then(|a| a.get(key).map(|v| v == "true"))
                .unwrap_or(false)
        };
        Hints {
            read_only: says("readOnlyHint"),
            open_world: says("openWorldHint"),
        }
    }
}

/// A namespaced list (tools or prompts) with its lookup table.
#[derive(Debug, Default)]
pub struct NamedList {
    /// Shared, so a call takes its entry with a reference count, not a deep copy.
    pub items: Vec<Arc<Named>>,
    lookup: Index,
    /// Changes whenever the served list changes; cursors carry it.
    pub fingerprint: u64,
}

impl NamedList {
    /// A list of the hub's own entries, in order.
    pub fn of(items: Vec<Arc<Named>>) -> NamedList {
        NamedList::merge("tool", &mut Vec::new(), std::iter::once(&items[..]))
    }

    /// The servers' shares in order; a wire name offered twice goes to the first.
    fn merge<'a>(
        kind: &'static str,
        conflicts: &mut Vec<Conflict>,
        shares: impl Iterator<Item = &'a [Arc<Named>]>,
    ) -> NamedList {
        let (items, lookup) = merge(kind, conflicts, shares);
        NamedList {
            fingerprint: fold(items.iter().map(|i| i.hash)),
            items,
            lookup,
        }
    }

    /// Resolves a wire, qualified or portable name.
    pub fn find(&self, name: &str) -> Option<&Arc<Named>> {
        self.lookup.get(name).map(|&i| &self.items[i])
    }

    pub fn jsons(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(|i| i.json.as_str())
    }

    /// The definitions as a client is shown them (see [`Named::json_for`]).
    pub fn jsons_for(&self, apps: bool) -> impl Iterator<Item = &str> {
        self.items.iter().map(move |i| i.json_for(apps))
    }

    /// This list without its view-only tools, and those tools (names were already checked
    /// for conflicts across both).
    fn split_view_only(self) -> (NamedList, NamedList) {
        if !self.items.iter().any(|t| t.view_only) {
            return (self, NamedList::default());
        }
        let (app_only, tools): (Vec<_>, Vec<_>) = self.items.into_iter().partition(|t| t.view_only);
        let mut none = Vec::new();
        (
            NamedList::merge("tool", &mut none, std::iter::once(&tools[..])),
            NamedList::merge("tool", &mut none, std::iter::once(&app_only[..])),
        )
    }

    /// The tools of servers with MCP Apps views whose own (unprefixed) name is `name`, as a
    /// view calls them.
    pub fn by_own_name<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Arc<Named>> {
        self.items
            .iter()
            .filter(move |t| t.original == name && t.upstream < META)
    }
}

/// A resource or resource template, kept verbatim.
#[derive(Debug, Clone)]
pub struct Listed {
    pub upstream: usize,
    /// The URI (or URI template) the hub serves it under.
    pub key: Arc<str>,
    pub json: Box<str>,
    /// For a template: the parsed form URIs are matched against.
    matcher: Option<UriTemplate>,
    /// This entry's part of the list fingerprint.
    hash: u64,
}

impl Listed {
    fn new(upstream: usize, prefix: &str, entry: &Entry, template: bool) -> Listed {
        // A view (MCP Apps) is served under a URI of the hub's: two servers may use the same.
        let member = if template { "uriTemplate" } else { "uri" };
        let shown = super::apps::hub_uri(prefix, &entry.key).and_then(|uri| {
            let json = RawObject::parse(&entry.json)
                .ok()?
                .with(member, &jsonrpc::quote(&uri));
            Some((uri, json))
        });
        let (key, json): (Arc<str>, Box<str>) = match shown {
            Some((uri, json)) => (uri.into(), json.into()),
            None => (entry.key.as_str().into(), entry.json.clone()),
        };
        Listed {
            upstream,
            matcher: template.then(|| UriTemplate::parse(&key)),
            hash: item_hash(upstream, &json),
            key,
            json,
        }
    }
}

#[derive(Debug, Default)]
pub struct Catalog {
    /// The tools a model may be shown (listed, searched, in code mode).
    pub tools: NamedList,
    /// Tools for their MCP Apps view only: callable by name, never listed or searched.
    pub app_only: NamedList,
    pub prompts: NamedList,
    pub resources: Vec<Arc<Listed>>,
    pub templates: Vec<Arc<Listed>>,
    uri_index: Index,
    pub resources_fingerprint: u64,
    pub templates_fingerprint: u64,
    /// Names or URIs offered by more than one server (the first in config order wins).
    pub conflicts: Vec<Conflict>,
    /// Set when tool search replaces this view's tool list.
    pub search: Option<Arc<super::views::Search>>,
}

/// Conflicts of one kind between one pair of servers: (kind, kept, other) and the keys.
type ConflictGroup<'c> = ((&'static str, usize, usize), Vec<&'c Arc<str>>);

/// A name or URI that two servers offer; the first in config order serves it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Conflict {
    pub kind: &'static str,
    pub key: Arc<str>,
    pub kept: usize,
    pub other: usize,
}

impl Conflict {
    /// What to tell the user about `conflicts`: one line per pair of servers and kind of
    /// entry, in the order the pairs first appear. Fifty servers exposing the same four
    /// resources are 49 lines, not 196, and the keys each line names are capped.
    pub fn messages<'c>(
        conflicts: impl IntoIterator<Item = &'c Conflict>,
        upstreams: &[Arc<Upstream>],
    ) -> Vec<String> {
        Self::grouped(conflicts)
            .into_iter()
            .map(|((kind, kept, other), keys)| {
                let kept = server_name(upstreams, kept);
                let other = server_name(upstreams, other);
                Self::message(kind, kept, other, &keys)
            })
            .collect()
    }

    /// The keys of `conflicts` by kind and pair of servers, in order of first appearance.
    fn grouped<'c>(conflicts: impl IntoIterator<Item = &'c Conflict>) -> Vec<ConflictGroup<'c>> {
        let mut groups: Vec<ConflictGroup<'c>> = Vec::new();
        for c in conflicts {
            let pair = (c.kind, c.kept, c.other);
            match groups.iter_mut().find(|(p, _)| *p == pair) {
                Some((_, keys)) => keys.push(&c.key),
                None => groups.push((pair, vec![&c.key])),
            }
        }
        groups
    }

    fn message(kind: &str, kept: &str, other: &str, keys: &[&Arc<str>]) -> String {
        const NAMED: usize = 5;
        let verb = if matches!(kind, "tool" | "prompt") {
            "offer"
        } else {
            "expose"
        };
        let what = match keys {
            [key] => format!("{kind} '{key}'"),
            _ => {
                let mut named: Vec<String> =
                    keys.iter().take(NAMED).map(|k| format!("'{k}'")).collect();
                if keys.len() > NAMED {
                    named.push(format!("and {} more", keys.len() - NAMED));
                }
                format!("{} {kind}s ({})", keys.len(), named.join(", "))
            }
        };
        let it = if keys.len() == 1 { "it" } else { "them" };
        let fix = if verb == "offer" {
            "set a `namespace` to tell them apart"
        } else {
            "the first in config order"
        };
        format!("servers '{kept}' and '{other}' both {verb} {what}; '{kept}' serves {it} ({fix})")
    }
}

fn ready(upstreams: &[Arc<Upstream>]) -> impl Iterator<Item = &Arc<Upstream>> {
    upstreams
        .iter()
        .filter(|u| u.snapshot().state == State::Ready)
}

/// One entry's part of a list fingerprint: its JSON, and which server offers it.
fn item_hash(upstream: usize, json: &str) -> u64 {
    names::fnv1a(json.as_bytes()).rotate_left((upstream % 64) as u32)
}

/// Order-sensitive combination of the entries' hashes.
fn fold(hashes: impl Iterator<Item = u64>) -> u64 {
    let mut fp: u64 = 0xcbf2_9ce4_8422_2325;
    for h in hashes {
        fp ^= h;
        fp = fp.wrapping_mul(0x0000_0100_0000_01b3);
    }
    fp
}

/// What one list of one server became in the catalogue, with the list it was made from:
/// a server's lists are replaced, never edited, so the same list needs no second look.
struct Share<T> {
    source: Arc<Vec<Entry>>,
    items: Vec<Arc<T>>,
}

impl<T> Share<T> {
    /// Makes the items again only when `source` is not the list they came from.
    fn refresh(
        slot: &mut Option<Share<T>>,
        source: &Arc<Vec<Entry>>,
        make: impl Fn(&Entry) -> Option<T>,
    ) {
        if slot
            .as_ref()
            .is_none_or(|s| !Arc::ptr_eq(&s.source, source))
        {
            *slot = Some(Share {
                source: source.clone(),
                items: source
                    .iter()
                    .filter_map(|e| make(e).map(Arc::new))
                    .collect(),
            });
        }
    }

    fn items(slot: &Option<Share<T>>) -> &[Arc<T>] {
        slot.as_ref().map_or(&[], |s| &s.items)
    }
}

/// A server's shares of the four lists.
#[derive(Default)]
struct ServerShares {
    /// The prefix the names were made with: a reload may change it in place.
    prefix: String,
    tools: Option<Share<Named>>,
    prompts: Option<Share<Named>>,
    resources: Option<Share<Listed>>,
    templates: Option<Share<Listed>>,
}

/// Builds catalogues, keeping each server's share between builds: when fifty servers come up
/// one after another, each build redoes only the servers whose lists are new rather than
/// the whole catalogue.
pub struct Builder {
    mode: ToolNames,
    builtins: Vec<Arc<Named>>,
    servers: HashMap<usize, ServerShares>,
}

impl Builder {
    pub fn new(mode: ToolNames, builtin_tools: &[Entry]) -> Builder {
        Builder {
            mode,
            builtins: builtin_tools
                .iter()
                .map(|e| Arc::new(Named::builtin(e)))
                .collect(),
            servers: HashMap::new(),
        }
    }

    /// Serves `builtin_tools` from the next build on (a reload changed the built-ins).
    pub fn set_builtins(&mut self, builtin_tools: &[Entry]) {
        self.builtins = Self::new(self.mode, builtin_tools).builtins;
    }

    /// The catalogue of the ready servers (plus the built-ins), in config order. A server
    /// that a reload restarted keeps the lists of the process it replaces until it is ready
    /// (or fails): a client re-listing in between would otherwise see its tools go and come
    /// back, two announcements for a restart that changed nothing.
    pub fn build(&mut self, upstreams: &[Arc<Upstream>]) -> Catalog {
        let mode = self.mode;
        let listed: Vec<(usize, String, Option<Arc<Snapshot>>)> = upstreams
            .iter()
            .filter_map(|u| {
                let snap = u.snapshot();
                let prefix = u.config().prefix().to_string();
                match snap.state {
                    State::Ready => Some((u.index, prefix, Some(snap))),
                    // `Starting` is a process's first start, never a crash's restart: a share
                    // in its slot is its predecessor's.
                    State::Starting
                        if self
                            .servers
                            .get(&u.index)
                            .is_some_and(|s| s.prefix == prefix) =>
                    {
                        Some((u.index, prefix, None))
                    }
                    _ => None,
                }
            })
            .collect();
        // A server that is not ready comes back with new lists; its old share is of no use.
        self.servers.retain(|i, shares| {
            listed
                .iter()
                .any(|(r, prefix, _)| r == i && *prefix == shares.prefix)
        });
        for (index, prefix, snap) in &listed {
            let Some(snap) = snap else { continue };
            let prefix = prefix.as_str();
            let shares = self.servers.entry(*index).or_insert_with(|| ServerShares {
                prefix: prefix.to_string(),
                ..ServerShares::default()
            });
            Share::refresh(&mut shares.tools, &snap.tools, |e| {
                Named::upstream(*index, prefix, mode, e, true)
            });
            Share::refresh(&mut shares.prompts, &snap.prompts, |e| {
                Named::upstream(*index, prefix, mode, e, false)
            });
            Share::refresh(&mut shares.resources, &snap.resources, |e| {
                Some(Listed::new(*index, prefix, e, false))
            });
            Share::refresh(&mut shares.templates, &snap.templates, |e| {
                Some(Listed::new(*index, prefix, e, true))
            });
        }
        let in_order = || listed.iter().filter_map(|(i, _, _)| self.servers.get(i));

        let mut conflicts = Vec::new();
        let (tools, app_only) = NamedList::merge(
            "tool",
            &mut conflicts,
            std::iter::once(&self.builtins[..]).chain(in_order().map(|s| Share::items(&s.tools))),
        )
        .split_view_only();
        let prompts = NamedList::merge(
            "prompt",
            &mut conflicts,
            in_order().map(|s| Share::items(&s.prompts)),
        );
        let (resources, uri_index) = merge(
            "resource",
            &mut conflicts,
            in_order().map(|s| Share::items(&s.resources)),
        );
        let (templates, _) = merge(
            "resource template",
            &mut conflicts,
            in_order().map(|s| Share::items(&s.templates)),
        );
        Catalog {
            tools,
            app_only,
            prompts,
            resources_fingerprint: fold(resources.iter().map(|r| r.hash)),
            templates_fingerprint: fold(templates.iter().map(|r| r.hash)),
            resources,
            templates,
            uri_index,
            conflicts,
            search: None,
        }
    }
}

impl Catalog {
    /// The part of this catalogue whose server `keep_server` accepts and, for tools, that
    /// `keep_tool` accepts too (built-ins are server [`BUILTIN`]).
    pub fn filtered(
        &self,
        keep_server: impl Fn(usize) -> bool,
        keep_tool: impl Fn(&Named) -> bool,
    ) -> Catalog {
        let mut none = Vec::new();
        let keep = |list: &NamedList| -> Vec<Arc<Named>> {
            list.items
                .iter()
                .filter(|t| keep_server(t.upstream) && keep_tool(t))
                .cloned()
                .collect()
        };
        let (tools, app_only) = (keep(&self.tools), keep(&self.app_only));
        let prompts: Vec<Arc<Named>> = self
            .prompts
            .items
            .iter()
            .filter(|p| keep_server(p.upstream))
            .cloned()
            .collect();
        let pick = |list: &[Arc<Listed>]| -> Vec<Arc<Listed>> {
            list.iter()
                .filter(|r| keep_server(r.upstream))
                .cloned()
                .collect()
        };
        let (resources, uri_index) = merge(
            "resource",
            &mut none,
            std::iter::once(&pick(&self.resources)[..]),
        );
        let (templates, _) = merge(
            "resource template",
            &mut none,
            std::iter::once(&pick(&self.templates)[..]),
        );
        Catalog {
            tools: NamedList::merge("tool", &mut none, std::iter::once(&tools[..])),
            app_only: NamedList::merge("tool", &mut none, std::iter::once(&app_only[..])),
            prompts: NamedList::merge("prompt", &mut none, std::iter::once(&prompts[..])),
            resources_fingerprint: fold(resources.iter().map(|r| r.hash)),
            templates_fingerprint: fold(templates.iter().map(|r| r.hash)),
            resources,
            templates,
            uri_index,
            conflicts: Vec::new(),
            search: None,
        }
    }

    /// The tools a client is given: the search's short list when search is on, else all.
    pub fn listed_tools(&self) -> &NamedList {
        self.search.as_ref().map_or(&self.tools, |s| &s.listed)
    }

    /// Which server serves `uri`: the one listing it, else the first whose template matches
    /// it, else the only ready server offering resources at all.
    /// Only servers `in_view` accepts are candidates for the last resort.
    pub fn route_uri(
        &self,
        uri: &str,
        upstreams: &[Arc<Upstream>],
        in_view: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        self.route_uri_listed(uri)
            .or_else(|| self.only_resource_server(upstreams, in_view))
    }

    /// The tool with wire, qualified or portable name `name`, listed or view-only.
    pub fn tool(&self, name: &str) -> Option<&Arc<Named>> {
        self.tools.find(name).or_else(|| self.app_only.find(name))
    }

    /// The servers with MCP Apps views: some tool of theirs names one.
    fn app_servers(&self) -> Vec<usize> {
        let mut servers: Vec<usize> = (self.tools.items.iter())
            .chain(&self.app_only.items)
            .filter(|t| t.ui)
            .map(|t| t.upstream)
            .collect();
        servers.sort_unstable();
        servers.dedup();
        servers
    }

    /// A tool called by a view: by its wire name, else (for servers with views) by the
    /// name its own server knows it by, which is what a view calls it by through its host.
    /// `Err` holds the qualified names when several such servers have a tool of that name.
    pub fn find_tool<'a>(&'a self, name: &'a str) -> Result<Option<&'a Arc<Named>>, Vec<Arc<str>>> {
        if let Some(t) = self.tool(name) {
            return Ok(Some(t));
        }
        let apps = self.app_servers();
        if apps.is_empty() {
            return Ok(None);
        }
        let found: Vec<&Arc<Named>> = (self.tools.by_own_name(name))
            .chain(self.app_only.by_own_name(name))
            .filter(|t| apps.contains(&t.upstream))
            .collect();
        match found[..] {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            _ => Err(found.iter().map(|t| t.qualified.clone()).collect()),
        }
    }

    /// The server that lists `uri` or a template matching it.
    pub fn route_uri_listed(&self, uri: &str) -> Option<usize> {
        if let Some(&i) = self.uri_index.get(uri) {
            return Some(self.resources[i].upstream);
        }
        if let Some(t) = self.templates.iter().find(|t| &*t.key == uri) {
            return Some(t.upstream);
        }
        self.templates
            .iter()
            .find(|t| t.matcher.as_ref().is_some_and(|m| m.matches(uri)))
            .map(|t| t.upstream)
    }

    /// The last resort for a URI nobody lists: the only ready server offering resources.
    fn only_resource_server(
        &self,
        upstreams: &[Arc<Upstream>],
        in_view: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let mut offering = ready(upstreams).filter(|u| {
            in_view(u.index)
                && u.snapshot()
                    .info
                    .as_ref()
                    .is_some_and(|i| i.has_capability("resources"))
        });
        match (offering.next(), offering.next()) {
            (Some(only), None) => Some(only.index),
            _ => None,
        }
    }
}

/// What [`merge`] needs of an entry.
trait Mergeable {
    fn upstream(&self) -> usize;
    /// The name or URI two servers must not share.
    fn key(&self) -> &Arc<str>;
    /// Every form the entry is looked up by (the key among them).
    fn aliases(&self) -> [&Arc<str>; 2];
}

impl Mergeable for Named {
    fn upstream(&self) -> usize {
        self.upstream
    }
    fn key(&self) -> &Arc<str> {
        &self.wire
    }
    fn aliases(&self) -> [&Arc<str>; 2] {
        // The wire name is one of these two.
        [&self.qualified, &self.portable]
    }
}

impl Mergeable for Listed {
    fn upstream(&self) -> usize {
        self.upstream
    }
    fn key(&self) -> &Arc<str> {
        &self.key
    }
    fn aliases(&self) -> [&Arc<str>; 2] {
        [&self.key, &self.key]
    }
}

/// The servers' shares in config order, with a table of every alias; an entry whose key an
/// earlier server already offers is left out and reported.
fn merge<'a, T: Mergeable + 'a>(
    kind: &'static str,
    conflicts: &mut Vec<Conflict>,
    shares: impl Iterator<Item = &'a [Arc<T>]>,
) -> (Vec<Arc<T>>, Index) {
    let shares: Vec<&[Arc<T>]> = shares.collect();
    let total = shares.iter().map(|s| s.len()).sum();
    let mut out: Vec<Arc<T>> = Vec::with_capacity(total);
    let mut index = Index::with_capacity_and_hasher(2 * total, Default::default());
    for item in shares.into_iter().flatten() {
        if let Some(&first) = index.get(&**item.key()) {
            conflicts.push(Conflict {
                kind,
                key: item.key().clone(),
                kept: out[first].upstream(),
                other: item.upstream(),
            });
            continue;
        }
        for name in item.aliases() {
            index.entry(name.clone()).or_insert(out.len());
        }
        out.push(item.clone());
    }
    (out, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict(kind: &'static str, key: &str, kept: usize, other: usize) -> Conflict {
        Conflict {
            kind,
            key: Arc::from(key),
            kept,
            other,
        }
    }

    #[test]
    fn conflicts_are_told_once_per_pair_of_servers_and_kind() {
        let all = [
            conflict("resource", "x://1", 0, 1),
            conflict("resource", "x://1", 0, 2),
            conflict("resource", "x://2", 0, 1),
            conflict("resource template", "x://{id}", 0, 1),
            conflict("resource", "x://3", 0, 1),
        ];
        let groups = Conflict::grouped(&all);
        let keys = |g: &ConflictGroup| g.1.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        assert_eq!(groups.len(), 3, "{groups:?}");
        assert_eq!(groups[0].0, ("resource", 0, 1));
        assert_eq!(keys(&groups[0]), ["x://1", "x://2", "x://3"]);
        assert_eq!(groups[1].0, ("resource", 0, 2));
        assert_eq!(groups[2].0, ("resource template", 0, 1));
    }

    #[test]
    fn a_conflict_message_names_the_keys_and_who_serves_them() {
        let keys: Vec<Arc<str>> = (1..=7).map(|i| Arc::from(format!("x://{i}"))).collect();
        let refs: Vec<&Arc<str>> = keys.iter().collect();
        assert_eq!(
            Conflict::message("resource", "a", "b", &refs[..1]),
            "servers 'a' and 'b' both expose resource 'x://1'; 'a' serves it (the first in config order)"
        );
        assert_eq!(
            Conflict::message("resource", "a", "b", &refs[..2]),
            "servers 'a' and 'b' both expose 2 resources ('x://1', 'x://2'); 'a' serves them (the first in config order)"
        );
        assert_eq!(
            Conflict::message("tool", "a", "b", &refs),
            "servers 'a' and 'b' both offer 7 tools ('x://1', 'x://2', 'x://3', 'x://4', 'x://5', and 2 more); 'a' serves them (set a `namespace` to tell them apart)"
        );
    }
}
