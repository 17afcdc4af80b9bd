//! Scratch dirs: a temp dir per test, and the `mcp.json` configs written into it.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A temp dir holding a config; removed on drop.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `state` inside the scratch dir: the state dir the harness gives a hub whose config
    /// sits here.
    pub fn state(&self) -> PathBuf {
        self.path().join("state")
    }

    /// Writes `mcp.json` with `value` and returns its path. Unless the test sets them itself,
    /// permissions default to `allow`, rate limits are off and built-in tools are off: the
    /// shipped defaults (`ask`, which denies without a prompt channel; 10 calls/s; built-ins
    /// on) are tested on their own, and would otherwise refuse or shift what other tests see.
    pub fn config(&self, value: &Value) -> PathBuf {
        let p = self.dir.path().join("mcp.json");
        let mut value = value.clone();
        if let Some(root) = value.as_object_mut() {
            let op = root.entry("openpact").or_insert_with(|| json!({}));
            if let Some(op) = op.as_object_mut() {
                let perms = op.entry("permissions").or_insert_with(|| json!({}));
                if let Some(perms) = perms.as_object_mut() {
                    perms.entry("default").or_insert_with(|| json!("allow"));
                }
                let limits = op.entry("rateLimits").or_insert_with(|| json!({}));
                if let Some(limits) = limits.as_object_mut() {
                    limits.entry("default").or_insert_with(|| json!("off"));
                }
                // Built-in tools are tested on their own; elsewhere they would only shift
                // every tool list and count.
                op.entry("builtins").or_insert_with(|| json!(false));
                // Tool search (on by default above 40 tools) is tested on its own; elsewhere
                // two fixtures would already be searched instead of listed.
                op.entry("toolSearch")
                    .or_insert_with(|| json!({"mode": "off"}));
            }
        }
        std::fs::write(&p, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
        p
    }

    /// Config with these servers (name → entry) and optional `openpact` settings.
    pub fn servers(&self, servers: Value, openpact: Option<Value>) -> PathBuf {
        let mut cfg = json!({ "mcpServers": servers });
        if let Some(o) = openpact {
            cfg["openpact"] = o;
        }
        self.config(&cfg)
    }

    /// Writes `value` as-is (no defaults filled in) to `name` in the scratch dir; its path.
    pub fn raw_config(&self, name: &str, value: &Value) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(&p, value.to_string()).unwrap();
        p
    }
}
