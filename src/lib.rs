//! openpact: an MCP client host and multi-server aggregator.
//!
//! Layers, each importing only the ones above it in this list:
//! - [`platform`]: the operating system's side — file modes, signals, process groups, the
//!   terminal, change watches — one owner per piece, and the table of what a port needs
//!   (a leaf).
//! - [`jsonrpc`]: envelope, framing, builders (no MCP knowledge).
//! - [`config`]: raw JSON config → validated, resolved servers (a leaf: imports no layer).
//! - [`state`]: private files in the state dir, written atomically (a leaf).
//! - [`time`]: wall-clock timestamps as RFC 3339 text (a leaf).
//! - [`metrics`]: Prometheus counters and histograms of calls, served at `/metrics` (a leaf).
//! - [`revision`]: the 2026-07-28 revision's version, `_meta` keys and error codes (a leaf).
//! - [`search`]: ranked tool search — terms, synonyms, BM25 over tool definitions, reordered
//!   by meaning (embedded token vectors; a leaf).
//! - [`auth`]: OAuth 2.1 for remote servers — discovery, registration, the PKCE login through
//!   a loopback callback, refresh, the token store.
//! - [`sandbox`]: what a stdio server may touch — its profile, its confinement (Landlock and
//!   seccomp on Linux, behind a platform seam) and its egress proxy.
//! - [`transport`]: child processes, our own stdio, Streamable HTTP and HTTP+SSE clients.
//! - [`upstream`]: one server — process, handshake, requests, lifecycle.
//! - [`policy`]: permissions, rate limits, result cache, redaction, audit (used by the hub).
//! - [`builtins`]: OpenPact's own tools, served in process (used by the hub).
//! - [`hub`]: many servers — merged catalogue, names, routing, downstream sessions.
//! - [`face`]: the hub's ways in for `openpact serve` — stdio, Streamable HTTP, the shared
//!   hub's socket with the editor pipes handed over on it, reload on signal and file change,
//!   and the status file.
//! - [`cli`]: command-line commands and their output.

#![forbid(unsafe_code)]

pub mod auth;
pub mod builtins;
pub mod cli;
pub mod config;
pub mod face;
pub mod hub;
pub mod jsonrpc;
pub mod metrics;
pub mod platform;
pub mod policy;
pub mod revision;
pub mod sandbox;
pub mod search;
pub mod state;
pub mod time;
pub mod transport;
pub mod upstream;

#[cfg(test)]
mod layers;

/// Maps looked up on every call, or once per name in a rebuild: foldhash instead of std's
/// SipHash, which costs a few hundred instructions a look-up. The keys are ids we number
/// ourselves or names from the configured servers and the client; the per-process seed still
/// varies the layout.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, FastHasher>;
/// The hasher of [`FastMap`], for the tables (moka's) that take one of their own.
pub(crate) type FastHasher = foldhash::fast::RandomState;
