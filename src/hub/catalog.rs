//! The merged catalogue of every ready server: tools and prompts under their wire names,
//! resources by URI and resource templates, in config order, with lookup tables that resolve
//! every accepted form of a name and route every URI.

use super::names;
use super::uri_template::UriTemplate;
use crate::config::ToolNames;
use crate::jsonrpc::{self, RawObject};
use crate::upstream::{Entry, State, Upstream};
use std::collections::HashMap;
use std::sync::Arc;

/// The index standing for OpenPact's own tools, served in process (not a configured server).
pub const BUILTIN: usize = usize::MAX;
/// The server name built-in tools go by in logs, audit records and listings.
pub const BUILTIN_SERVER: &str = "openpact";

/// The name of server `i`, built-ins included.
pub fn server_name(upstreams: &[Arc<Upstream>], i: usize) -> &str {
    if i == BUILTIN {
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
    /// `server:name` — what the CLI, logs and permission rules use.
    pub qualified: String,
    /// What the list shows (qualified or portable, per config).
    pub wire: String,
    /// The server's object with `name` replaced by `wire`; every other member untouched.
    pub json: String,
    /// Annotated `readOnlyHint: true` (a hint from the server, trusted only if configured).
    pub read_only: bool,
    /// The `description` member (empty when absent), read once when the catalogue is built.
    pub description: String,
    /// `sha256:…` of description + schema + annotations, computed when first needed.
    definition: std::sync::OnceLock<String>,
}

impl Named {
    pub fn definition(&self) -> &str {
        self.definition
            .get_or_init(|| crate::policy::canonical::definition_hash(&self.json))
    }
}

/// Tools keep this name in the code that only deals with tools.
pub type CatalogTool = Named;

/// A namespaced list (tools or prompts) with its lookup table.
#[derive(Debug, Default)]
pub struct NamedList {
    /// Shared, so a call takes its entry with a reference count, not a deep copy.
    pub items: Vec<Arc<Named>>,
    lookup: HashMap<String, usize>,
    /// Changes whenever the served list changes; cursors carry it.
    pub fingerprint: u64,
}

impl NamedList {
    fn build(
        upstreams: &[Arc<Upstream>],
        mode: ToolNames,
        kind: &str,
        conflicts: &mut Vec<String>,
        builtin: &[Entry],
        entries: impl Fn(&Upstream) -> Arc<Vec<Entry>>,
    ) -> NamedList {
        let mut items: Vec<Arc<Named>> = Vec::new();
        let mut lookup: HashMap<String, usize> = HashMap::new();
        // Built-ins come first, under their bare names, which are valid in both naming modes.
        for entry in builtin {
            lookup.insert(entry.key.clone(), items.len());
            items.push(Arc::new(Named {
                upstream: BUILTIN,
                original: entry.key.clone(),
                qualified: entry.key.clone(),
                wire: entry.key.clone(),
                json: entry.json.to_string(),
                read_only: RawObject::parse(&entry.json)
                    .ok()
                    .and_then(|o| o.get("annotations").and_then(|a| RawObject::parse(a).ok()))
                    .and_then(|a| a.get("readOnlyHint").map(|v| v == "true"))
                    .unwrap_or(false),
                description: RawObject::parse(&entry.json)
                    .ok()
                    .and_then(|o| o.get_str("description"))
                    .unwrap_or_default(),
                definition: std::sync::OnceLock::new(),
            }));
        }
        for up in ready(upstreams) {
            let prefix = up.config.prefix();
            for entry in entries(up).iter() {
                let qualified = names::qualified(prefix, &entry.key);
                let portable = names::portable(prefix, &entry.key);
                let wire = match mode {
                    ToolNames::Qualified => qualified.clone(),
                    ToolNames::Portable => portable.clone(),
                };
                if let Some(&other) = lookup.get(&wire) {
                    conflicts.push(format!(
                        "servers '{}' and '{}' both offer {kind} '{wire}'; '{}' serves it (set a `namespace` to tell them apart)",
                        server_name(upstreams, items[other].upstream),
                        up.name(),
                        server_name(upstreams, items[other].upstream),
                    ));
                    continue;
                }
                let Ok(obj) = RawObject::parse(&entry.json) else {
                    continue;
                };
                let json = obj.with("name", &jsonrpc::quote(&wire));
                let read_only = obj
                    .get("annotations")
                    .and_then(|a| RawObject::parse(a).ok())
                    .and_then(|a| a.get("readOnlyHint").map(|v| v == "true"))
                    .unwrap_or(false);

                let idx = items.len();
                for name in [&wire, &qualified, &portable] {
                    lookup.entry(name.clone()).or_insert(idx);
                }
                items.push(Arc::new(Named {
                    upstream: up.index,
                    original: entry.key.clone(),
                    qualified,
                    wire,
                    json,
                    read_only,
                    description: obj.get_str("description").unwrap_or_default(),
                    definition: std::sync::OnceLock::new(),
                }));
            }
        }
        let fingerprint = fingerprint(items.iter().map(|i| (i.upstream, i.json.as_str())));
        NamedList {
            items,
            lookup,
            fingerprint,
        }
    }

    /// Resolves a wire, qualified or portable name.
    pub fn find(&self, name: &str) -> Option<&Arc<Named>> {
        self.lookup.get(name).map(|&i| &self.items[i])
    }

    pub fn jsons(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(|i| i.json.as_str())
    }
}

/// A resource or resource template, kept verbatim.
#[derive(Debug, Clone)]
pub struct Listed {
    pub upstream: usize,
    /// The URI (or URI template).
    pub key: String,
    pub json: Box<str>,
}

#[derive(Debug, Default)]
pub struct Catalog {
    pub tools: NamedList,
    pub prompts: NamedList,
    pub resources: Vec<Listed>,
    pub templates: Vec<Listed>,
    uri_index: HashMap<String, usize>,
    matchers: Vec<UriTemplate>,
    pub resources_fingerprint: u64,
    pub templates_fingerprint: u64,
    /// Names or URIs offered by more than one server (the first in config order wins).
    pub conflicts: Vec<String>,
}

fn ready(upstreams: &[Arc<Upstream>]) -> impl Iterator<Item = &Arc<Upstream>> {
    upstreams
        .iter()
        .filter(|u| u.snapshot().state == State::Ready)
}

fn fingerprint<'a>(items: impl Iterator<Item = (usize, &'a str)>) -> u64 {
    let mut fp: u64 = 0xcbf2_9ce4_8422_2325;
    for (upstream, json) in items {
        fp ^= names::fnv1a(json.as_bytes()).rotate_left((upstream % 64) as u32);
        fp = fp.wrapping_mul(0x0000_0100_0000_01b3);
    }
    fp
}

impl Catalog {
    pub fn build(upstreams: &[Arc<Upstream>], mode: ToolNames, builtin_tools: &[Entry]) -> Catalog {
        let mut conflicts = Vec::new();
        let tools = NamedList::build(
            upstreams,
            mode,
            "tool",
            &mut conflicts,
            builtin_tools,
            |u| u.snapshot().tools.clone(),
        );
        let prompts = NamedList::build(upstreams, mode, "prompt", &mut conflicts, &[], |u| {
            u.snapshot().prompts.clone()
        });
        let (resources, uri_index) = listed(upstreams, "resource", &mut conflicts, |u| {
            u.snapshot().resources.clone()
        });
        let (templates, _) = listed(upstreams, "resource template", &mut conflicts, |u| {
            u.snapshot().templates.clone()
        });
        let matchers = templates
            .iter()
            .map(|t| UriTemplate::parse(&t.key))
            .collect();
        let resources_fingerprint = fingerprint(resources.iter().map(|r| (r.upstream, &*r.json)));
        let templates_fingerprint = fingerprint(templates.iter().map(|r| (r.upstream, &*r.json)));
        Catalog {
            tools,
            prompts,
            resources,
            templates,
            uri_index,
            matchers,
            resources_fingerprint,
            templates_fingerprint,
            conflicts,
        }
    }

    /// Which server serves `uri`: the one listing it, else the first whose template matches
    /// it, else the only ready server offering resources at all.
    pub fn route_uri(&self, uri: &str, upstreams: &[Arc<Upstream>]) -> Option<usize> {
        self.route_uri_listed(uri)
            .or_else(|| self.only_resource_server(upstreams))
    }

    /// The server that lists `uri` or a template matching it.
    pub fn route_uri_listed(&self, uri: &str) -> Option<usize> {
        if let Some(&i) = self.uri_index.get(uri) {
            return Some(self.resources[i].upstream);
        }
        if let Some(t) = self.templates.iter().find(|t| t.key == uri) {
            return Some(t.upstream);
        }
        self.matchers
            .iter()
            .position(|m| m.matches(uri))
            .map(|i| self.templates[i].upstream)
    }

    /// The last resort for a URI nobody lists: the only ready server offering resources.
    fn only_resource_server(&self, upstreams: &[Arc<Upstream>]) -> Option<usize> {
        let mut offering = ready(upstreams).filter(|u| {
            u.snapshot()
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

/// Resources or templates in config order; a key offered twice goes to the first server.
fn listed(
    upstreams: &[Arc<Upstream>],
    kind: &str,
    conflicts: &mut Vec<String>,
    entries: impl Fn(&Upstream) -> Arc<Vec<Entry>>,
) -> (Vec<Listed>, HashMap<String, usize>) {
    let mut out: Vec<Listed> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for up in ready(upstreams) {
        for entry in entries(up).iter() {
            if let Some(&first) = index.get(&entry.key) {
                let kept = server_name(upstreams, out[first].upstream);
                conflicts.push(format!(
                    "servers '{kept}' and '{}' both expose {kind} '{}'; '{kept}' serves it (the first in config order)",
                    up.name(),
                    entry.key
                ));
                continue;
            }
            index.insert(entry.key.clone(), out.len());
            out.push(Listed {
                upstream: up.index,
                key: entry.key.clone(),
                json: entry.json.clone(),
            });
        }
    }
    (out, index)
}
