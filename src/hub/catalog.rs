//! The merged tool catalogue: every ready server's tools under their wire names, in config
//! order, with a lookup table that resolves every accepted form of a name.

use super::names;
use crate::config::ToolNames;
use crate::jsonrpc::{self, RawObject};
use crate::upstream::{State, Upstream};
use std::collections::HashMap;
use std::sync::Arc;

/// One tool as the hub serves it.
#[derive(Debug, Clone)]
pub struct CatalogTool {
    pub upstream: usize,
    /// The name the server knows it by.
    pub original: String,
    /// `server:tool` — what the CLI, logs and permission rules use.
    pub qualified: String,
    /// What `tools/list` shows (qualified or portable, per config).
    pub wire: String,
    /// The server's tool object with `name` replaced by `wire`.
    pub json: String,
}

#[derive(Debug, Default)]
pub struct Catalog {
    pub tools: Vec<CatalogTool>,
    lookup: HashMap<String, usize>,
    /// Changes whenever the served list changes; cursors carry it.
    pub fingerprint: u64,
}

impl Catalog {
    pub fn build(upstreams: &[Arc<Upstream>], mode: ToolNames) -> Catalog {
        let mut tools = Vec::new();
        let mut lookup: HashMap<String, usize> = HashMap::new();
        for up in upstreams {
            let snap = up.snapshot();
            if snap.state != State::Ready {
                continue;
            }
            let prefix = up.config.prefix();
            for entry in snap.tools.iter() {
                let qualified = names::qualified(prefix, &entry.key);
                let portable = names::portable(prefix, &entry.key);
                let wire = match mode {
                    ToolNames::Qualified => qualified.clone(),
                    ToolNames::Portable => portable.clone(),
                };
                if let Some(&other) = lookup.get(&wire) {
                    let other: &CatalogTool = &tools[other];
                    tracing::warn!(
                        tool = %wire,
                        kept = %upstreams[other.upstream].name(),
                        dropped = %up.name(),
                        "two servers offer a tool under the same name; keeping the first (set a `namespace` to tell them apart)"
                    );
                    continue;
                }
                let json = match RawObject::parse(&entry.json) {
                    Ok(o) => o.with("name", &jsonrpc::quote(&wire)),
                    Err(_) => continue,
                };
                let idx = tools.len();
                for name in [&wire, &qualified, &portable] {
                    lookup.entry(name.clone()).or_insert(idx);
                }
                tools.push(CatalogTool {
                    upstream: up.index,
                    original: entry.key.clone(),
                    qualified,
                    wire,
                    json,
                });
            }
        }
        let mut fp = names::fnv1a(&(tools.len() as u64).to_le_bytes());
        for t in &tools {
            fp ^= names::fnv1a(t.json.as_bytes()).rotate_left((t.upstream % 64) as u32);
            fp = fp.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Catalog {
            tools,
            lookup,
            fingerprint: fp,
        }
    }

    /// Resolves a wire, qualified or portable name.
    pub fn find(&self, name: &str) -> Option<&CatalogTool> {
        self.lookup.get(name).map(|&i| &self.tools[i])
    }
}
