//! The one integration-test binary: real processes over real pipes.
//!
//! - `support`: the hub harness, a JSON-RPC test client, and helpers every module shares.
//! - `apps`: MCP Apps servers (ext-apps SDK) behind the hub: views under one URI, view tools.
//! - `addrm`: `openpact add`, `remove` and `add --registry` editing the config in place, a
//!   running hub taking the change, the MCP Registry as a loopback stand-in.
//! - `abuse`: clients that do not read their answers: bounded memory, nothing lost.
//! - `http_face`: `openpact serve --http` over real sockets: sessions, SSE, security.
//! - `ui`: the dashboard on `/ui`: login link, cookie, Origin and CSRF refusals, the
//!   security headers, servers and search endpoints, calls on its SSE stream.
//! - `ui_browser`: the dashboard in headless Chromium: servers, search, a call seen live,
//!   a permission prompt answered on the page, refusals; the screenshots under docs/.
//! - `http_load`: the HTTP face under 200 clients and faults; vanishing clients cancelled.
//! - `hub`: `openpact serve` against the fixture server — protocol, names, routing.
//! - `failures`: crashes, hangs, floods, garbage, oversized messages, shutdown.
//! - `cli`: the command line.
//! - `docs`: every relative link in README.md and docs/*.md leads to a file and a heading.
//! - `stateless`: the 2026-07-28 revision downstream: discover, stateless requests, input-required.
//! - `stateless_upstream`: 2026-07-28 servers behind the hub (pinned, auto), and their input requests.
//! - `interop`: rmcp as an independent client; real community servers, direct vs through the hub.
//! - `surface`: resources, prompts, completion, logging, progress, server→client requests.
//! - `telemetry`: OTLP export of the hub's spans and metrics to a real receiver, `traceparent`
//!   through the hub to a server, and nothing of it while off.
//! - `interleave`: many concurrent requests with progress and cancellation; nothing crosses.
//! - `everything`: server-everything's whole surface through the hub vs directly.
//! - `clients`: independent clients (rmcp, MCP Inspector, Python SDK) on resources and prompts.
//! - `editors`: Claude Code, Gemini CLI and opencode health-check `connect` and `serve`;
//!   Claude Code, Gemini CLI and Codex call a tool and run a program in a turn through `connect`.
//! - `builtins_*`: OpenPact's own tools end to end, with loopback stand-ins for remote services.
//! - `sandbox`: stdio servers confined to their profile: files, network, environment, children.
//! - `sandbox_allow`: a refusal names the command that allows it; following it works.
//! - `compat`: popular community servers under the default profile (`.ci/compat.sh` installs them).
//! - `reload`: hot reload of the config over pipes and HTTP; `openpact reload`.
//! - `shared`: `openpact connect` windows sharing one hub per config; the hub killed and replaced.
//! - `embed`: the embedding API (`openpact::Hub`) in this process against the fixture.
//! - `policy`: permissions (terminal, elicitation, none), cache, rate limits, redaction, audit.
//! - `code_work`: code-mode programs doing multi-server work over the real servers and the
//!   fixture catalogues' data: parallel reads, keep/kept, tool errors, images, signatures.
//! - `tasks`: MCP Tasks through the hub in both eras — `face`: the hub's own tasks for a
//!   server without tasks; `follow`: servers' tasks (rmcp's extension, server-everything's
//!   2025-11-25 tasks) followed for a plain call, cancelled with it; `rmcp`: rmcp's 2026-07-28
//!   client and a legacy one asking tasks of the rmcp task server; `clients`: the TS and Python
//!   SDKs' task clients, and two clients never seeing each other's tasks.
//! - `import`: `openpact import` and `setup` over fixture homes of eight hosts; the agents'
//!   own `mcp list` after `setup`.
//! - `code_mode`: `run_code` programs: hostile ones held to their limits in a confined worker,
//!   every inner call under the client's policy, progress, cancellation, the data-flow guard.
//!
//! Unix only, as the hub is so far (src/platform/mod.rs): the tests signal processes and open
//! ptys, pipes and unix sockets.
#![cfg(unix)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod support;

mod abuse;
mod addrm;
mod apps;
mod auth;
mod builtins_calendar;
mod builtins_files;
mod builtins_scripts;
mod builtins_web;
mod cli;
mod clients;
mod code_mode;
mod code_work;
mod compat;
mod docs;
mod editors;
mod embed;
mod everything;
mod failures;
mod http_clients;
mod http_face;
mod http_load;
mod hub;
mod import;
mod interleave;
mod interop;
mod policy;
mod reload;
mod remote;
mod remote_faults;
mod sandbox;
mod sandbox_allow;
mod search_clients;
mod shared;
mod stateless;
mod stateless_upstream;
mod stdio_socket;
mod surface;
mod tasks;
mod telemetry;
mod ui;
mod ui_browser;
