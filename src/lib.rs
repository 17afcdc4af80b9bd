//! openpact: an MCP client host and multi-server aggregator — many MCP servers behind one,
//! with one policy (permissions, rate limits, a result cache, redaction, an audit log), tool
//! search and a sandbox for the servers it starts.
//!
//! Most people run it as the `openpact` command. This crate also lets a Rust program host
//! the servers itself: [`Hub`] starts them from an openpact config (a file or a JSON value)
//! and calls them by qualified name (`server:tool`), every call through the same pipeline an
//! editor's calls take.
//!
//! ```no_run
//! use openpact::{Decision, Hub};
//! use serde_json::json;
//!
//! # async fn run() -> Result<(), openpact::Error> {
//! let hub = Hub::builder()
//!     .config_value(json!({
//!         "mcpServers": {
//!             "fs": { "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"] }
//!         },
//!         "openpact": { "permissions": { "default": "ask" } }
//!     }))
//!     // Instead of asking a person: allow reads, refuse the rest.
//!     .policy_hook(|ask| {
//!         if ask.name.starts_with("fs:read") { Decision::AllowOnce } else { Decision::Deny }
//!     })
//!     .start()
//!     .await?;
//! let result = hub.call_tool("fs:read_text_file", json!({ "path": "/tmp/notes.txt" })).await?;
//! println!("{}", result.text());
//! hub.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Servers run sandboxed by default; the sandbox starts them through a small wrapper,
//! `openpact-sandbox` beside your executable or, failing that, your executable itself: call
//! [`run_sandbox_wrapper_if_asked`] first thing in `main` (see its docs), or turn the sandbox
//! off in the config (`"openpact": {"sandbox": {"default": "off"}}`).
//!
//! The examples in the repository's `examples/` folder (`embed.rs`, `policy_hook.rs`,
//! `custom_tool.rs`) are complete programs.

// The layers (for contributors; the embedding API is [`embed`], re-exported at the root),
// each importing only the ones above it in this list:
// - [`platform`]: the operating system's side — file modes, signals, process groups, the
//   terminal, change watches — one owner per piece, and the table of what a port needs
//   (a leaf).
// - [`jsonrpc`]: envelope, framing, builders (no MCP knowledge).
// - [`config`]: raw JSON config → validated, resolved servers (a leaf: imports no layer).
// - [`state`]: private files in the state dir, written atomically (a leaf).
// - [`time`]: wall-clock timestamps as RFC 3339 text (a leaf).
// - [`metrics`]: Prometheus counters and histograms of calls, served at `/metrics` (a leaf).
// - [`telemetry`]: OpenTelemetry — OTLP export of MCP spans and operation durations, and
//   trace context in `_meta` (`openpact.telemetry`; off by default).
// - [`revision`]: the 2026-07-28 revision's version, `_meta` keys and error codes (a leaf).
// - [`search`]: ranked tool search — terms, synonyms, BM25 over tool definitions, reordered
//   by meaning (embedded token vectors; a leaf).
// - [`auth`]: OAuth 2.1 for remote servers — discovery, registration, the PKCE login through
//   a loopback callback, refresh, the token store.
// - [`sandbox`]: what a stdio server may touch — its profile, its confinement (Landlock and
//   seccomp on Linux, behind a platform seam) and its egress proxy.
// - [`transport`]: child processes, our own stdio, Streamable HTTP and HTTP+SSE clients.
// - [`upstream`]: one server — process, handshake, requests, lifecycle.
// - [`policy`]: permissions, rate limits, result cache, redaction, audit (used by the hub).
// - [`builtins`]: OpenPact's own tools, served in process (used by the hub).
// - [`code`]: code mode — a model's program run in a confined worker process, calling
//   tools only through the hub.
// - [`hub`]: many servers — merged catalogue, names, routing, downstream sessions.
// - [`face`]: the hub's ways in for `openpact serve` — stdio, Streamable HTTP, the shared
//   hub's socket with the editor pipes handed over on it, reload on signal and file change,
//   and the status file.
// - [`embed`]: the hub as a Rust library — `Hub::builder()`, typed calls, a policy hook,
//   host tools, events.
// - [`cli`]: command-line commands (`openpact connect`, the shared hub's client, among them)
//   and their output.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

// The layers below are the crate's inside: private, except with the `internals` feature,
// which the tests, the fixture server and the fuzz targets build with (hidden from the docs
// even then: they are not an API anyone should build on).
macro_rules! layers {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        #[allow(missing_docs)]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

layers!(
    auth, builtins, cli, code, config, face, hub, jsonrpc, metrics, platform, policy, revision,
    sandbox, search, state, telemetry, time, transport, upstream,
);

// rustfmt does not look inside macros, so `cargo fmt` would never reach the layers above:
// these declarations, never compiled, show it their files.
#[cfg(any())]
mod auth;
#[cfg(any())]
mod builtins;
#[cfg(any())]
mod cli;
#[cfg(any())]
mod code;
#[cfg(any())]
mod config;
#[cfg(any())]
mod face;
#[cfg(any())]
mod hub;
#[cfg(any())]
mod jsonrpc;
#[cfg(any())]
mod metrics;
#[cfg(any())]
mod platform;
#[cfg(any())]
mod policy;
#[cfg(any())]
mod revision;
#[cfg(any())]
mod sandbox;
#[cfg(any())]
mod search;
#[cfg(any())]
mod state;
#[cfg(any())]
mod telemetry;
#[cfg(any())]
mod time;
#[cfg(any())]
mod transport;
#[cfg(any())]
mod upstream;

pub mod embed;

pub use embed::{
    Decision, Error, Event, Events, HostTool, Hub, HubBuilder, Permission, Prompt, PromptMessage,
    ResourceContent, SearchHit, ServerState, Tool, ToolResult, run_sandbox_wrapper_if_asked,
};

/// The `openpact` binary's `main` (src/main.rs): not part of the library's API.
#[doc(hidden)]
pub use cli::entry::main as binary_main;

#[cfg(test)]
mod layers;

/// Maps looked up on every call, or once per name in a rebuild: foldhash instead of std's
/// SipHash, which costs a few hundred instructions a look-up. The keys are ids we number
/// ourselves or names from the configured servers and the client; the per-process seed still
/// varies the layout.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, FastHasher>;
/// The hasher of [`FastMap`], for the tables (moka's) that take one of their own.
pub(crate) type FastHasher = foldhash::fast::RandomState;
