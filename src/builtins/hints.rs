//! The MCP tool annotations the built-ins declare, one function per kind of tool, so every
//! tool of a kind tells clients the same thing about itself. The key order is the order
//! `tools/list` shows.

use serde_json::{Value, json};

/// Reads local files only: changes nothing, and the same call gives the same answer.
pub(crate) fn read_only() -> Value {
    json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
}

/// Replaces a whole file: destructive, yet the same call twice leaves the same file.
/// `open_world`: the change also leaves this machine (the vault's git push).
pub(crate) fn overwrites(open_world: bool) -> Value {
    json!({
        "readOnlyHint": false,
        "destructiveHint": true,
        "idempotentHint": true,
        "openWorldHint": open_world
    })
}

/// Reads from a service on the network, changing nothing there.
pub(crate) fn reads_remote(title: &str) -> Value {
    json!({
        "title": title,
        "readOnlyHint": true,
        "openWorldHint": true
    })
}

/// Posts something new to a service on the network: nothing is overwritten, but every call
/// posts again.
pub(crate) fn posts(title: &str) -> Value {
    json!({
        "title": title,
        "readOnlyHint": false,
        "destructiveHint": false,
        "idempotentHint": false,
        "openWorldHint": true
    })
}
