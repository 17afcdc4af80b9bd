//! The hub as a Rust library: [`Hub::builder`] starts the servers of an openpact config, and
//! the typed calls go through an in-process client session of the hub, so they take the one
//! pipeline every client's calls take (names, permissions, limits, cache, redaction, audit).
//! The host answers permission questions with a closure and may add tools of its own.

mod client;
mod events;
mod host;
mod types;

pub use events::{Event, Events, ServerState};
pub use host::{Decision, HostTool, Permission};
pub use types::{Prompt, PromptMessage, ResourceContent, SearchHit, Tool, ToolResult};

use client::Client;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Why the hub could not start, or a call could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config is unreadable or invalid; the text lists every problem.
    #[error("{0}")]
    Config(String),
    /// The hub answered with a JSON-RPC error (an unknown prompt or resource, bad
    /// arguments, a server that failed…).
    #[error("{message} (JSON-RPC error {code})")]
    Rpc {
        /// The JSON-RPC error code.
        code: i64,
        /// What the hub said.
        message: String,
    },
    /// The hub's answer did not have the shape MCP gives it.
    #[error("unexpected answer to {method}: {why}")]
    Answer {
        /// The request answered.
        method: String,
        /// What was wrong with it.
        why: String,
    },
    /// The hub is gone (shut down while a call was waiting).
    #[error("the hub has shut down")]
    Closed,
}

/// Where the config comes from.
enum Source {
    Empty,
    File(PathBuf),
    Value(Value),
}

/// Sets up a [`Hub`]: the config, where its state goes, the policy hook and the host's tools.
pub struct HubBuilder {
    config: Source,
    state_dir: Option<PathBuf>,
    hook: Option<crate::policy::prompt::Decider>,
    tools: Vec<HostTool>,
    wait: Duration,
}

impl HubBuilder {
    /// Reads the config from the file at `path` (the format `openpact` reads: `mcpServers`,
    /// and the hub's settings under `openpact`; comments allowed).
    pub fn config_file(mut self, path: impl AsRef<Path>) -> HubBuilder {
        self.config = Source::File(path.as_ref().to_path_buf());
        self
    }

    /// Takes the config as a JSON value of the same shape as the file. Relative paths in it
    /// are relative to the working directory.
    pub fn config_value(mut self, config: Value) -> HubBuilder {
        self.config = Source::Value(config);
        self
    }

    /// Keeps the hub's state (remembered permission decisions, the audit log, OAuth tokens)
    /// in `dir`. Default: where `openpact` keeps it (`$OPENPACT_STATE_DIR`, else the
    /// platform's state directory).
    pub fn state_dir(mut self, dir: impl AsRef<Path>) -> HubBuilder {
        self.state_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Answers the policy's permission questions with `hook` instead of asking a person.
    /// Without a hook, a call that needs an answer is denied with advice (there is no
    /// terminal to ask on, unless the program has one).
    pub fn policy_hook(
        mut self,
        hook: impl Fn(&Permission) -> Decision + Send + Sync + 'static,
    ) -> HubBuilder {
        self.hook = Some(host::decider(hook));
        self
    }

    /// Adds a tool of the host program, served beside OpenPact's built-in tools.
    pub fn tool(mut self, tool: HostTool) -> HubBuilder {
        self.tools.push(tool);
        self
    }

    /// How long [`HubBuilder::start`] waits for the servers to start (default 60 s); it
    /// returns earlier once none is still starting. A server that failed does not fail the
    /// start: [`Hub::servers`] tells its state.
    pub fn start_timeout(mut self, limit: Duration) -> HubBuilder {
        self.wait = limit;
        self
    }

    /// Starts every enabled server (in parallel), waits for them as
    /// [`HubBuilder::start_timeout`] says, and opens the session the calls go through.
    /// Needs a Tokio runtime.
    pub async fn start(self) -> Result<Hub, Error> {
        let env = |name: &str| std::env::var(name).ok();
        let config = match self.config {
            Source::Empty => Ok(crate::config::empty()),
            Source::File(path) => crate::config::load(Some(&path)),
            Source::Value(value) => crate::config::parse(&value.to_string(), Path::new(""), &env),
        }
        .map_err(|e| Error::Config(e.to_string()))?;
        for warning in &config.warnings {
            tracing::warn!("{warning}");
        }
        let state_dir = self
            .state_dir
            .unwrap_or_else(|| crate::config::state_dir(None, &env));
        let names: Vec<String> = self.tools.iter().map(|t| t.name().to_string()).collect();
        if let Some(twice) = names
            .iter()
            .enumerate()
            .find_map(|(i, n)| names[..i].contains(n).then_some(n))
        {
            return Err(Error::Config(format!(
                "two host tools are named '{twice}'; each needs a name of its own"
            )));
        }
        let mut tools: Vec<Arc<dyn crate::builtins::Group>> = Vec::new();
        if !self.tools.is_empty() {
            tools.push(Arc::new(host::HostTools(self.tools)));
        }
        let host = crate::hub::Host {
            decide: self.hook,
            tools,
        };
        let hub = crate::hub::Hub::start_hosted(&config, &state_dir, |_| true, host);
        let builtins = hub.builtins();
        let taken: Vec<&str> = builtins
            .left_out()
            .iter()
            .copied()
            .filter(|n| names.iter().any(|h| h == n))
            .collect();
        if !taken.is_empty() {
            hub.shutdown().await;
            return Err(Error::Config(format!(
                "host tool {} has the name of one of OpenPact's built-in tools; pick another name (or turn that built-in off in the config)",
                taken
                    .iter()
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        hub.settled(self.wait).await;
        let client = Client::connect(hub.clone()).await?;
        Ok(Hub { hub, client })
    }
}

/// A running hub: the servers of a config behind one set of names, with its policy.
///
/// Calls may run concurrently (`&self`); each goes through the same pipeline as an
/// editor's call to `openpact serve`.
pub struct Hub {
    hub: Arc<crate::hub::Hub>,
    client: Client,
}

impl Hub {
    /// A builder with no config yet (no servers), the default state dir, no hook and no
    /// host tools.
    pub fn builder() -> HubBuilder {
        HubBuilder {
            config: Source::Empty,
            state_dir: None,
            hook: None,
            tools: Vec::new(),
            wait: Duration::from_secs(60),
        }
    }

    /// Calls tool `name` (`server:tool` as [`Hub::list_tools`] names it, or a built-in's or
    /// host tool's bare name) with `arguments` (a JSON object).
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Result<ToolResult, Error> {
        let result = self
            .client
            .request("tools/call", &json!({"name": name, "arguments": arguments}))
            .await?;
        typed("tools/call", result)
    }

    /// Every tool of every ready server, the built-ins and the host's tools: the whole
    /// list, even where `toolSearch` gives clients a short one (a program has no context
    /// window to spare).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, Error> {
        self.hub
            .view_catalog(0)
            .tools
            .items
            .iter()
            .map(|t| {
                typed(
                    "tools/list",
                    serde_json::from_str(&t.json).unwrap_or_default(),
                )
            })
            .collect()
    }

    /// The tools that best match `query` (a task in plain words), best first, at most
    /// `limit` of them: the ranking `openpact tools --search` and the `search_tools` tool use.
    pub async fn search_tools(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, Error> {
        let found = crate::hub::views::search_catalog(&self.hub, query, limit).await;
        typed("search", Value::Array(found))
    }

    /// Reads the resource at `uri` (of whichever server offers it).
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<ResourceContent>, Error> {
        let mut result = self
            .client
            .request("resources/read", &json!({"uri": uri}))
            .await?;
        typed("resources/read", result["contents"].take())
    }

    /// Prompt `name` (`server:prompt`) filled in with `arguments` (a JSON object of strings).
    pub async fn get_prompt(&self, name: &str, arguments: Value) -> Result<Prompt, Error> {
        let result = self
            .client
            .request(
                "prompts/get",
                &json!({"name": name, "arguments": arguments}),
            )
            .await?;
        typed("prompts/get", result)
    }

    /// Every configured server's name and state now.
    pub fn servers(&self) -> Vec<(String, ServerState)> {
        events::states(&self.hub)
    }

    /// The hub's events from now on: servers' state changes and list changes.
    pub fn events(&self) -> Events {
        Events::new(&self.hub)
    }

    /// Stops every server (in parallel) and waits for them, at most about two seconds;
    /// flushes the audit log.
    pub async fn shutdown(self) {
        self.hub.shutdown().await;
    }
}

/// `value` as the type an answer to `method` has.
fn typed<T: serde::de::DeserializeOwned>(method: &str, value: Value) -> Result<T, Error> {
    serde_json::from_value(value).map_err(|e| Error::Answer {
        method: method.to_string(),
        why: e.to_string(),
    })
}

/// For a program that hosts sandboxed servers: the sandbox starts each server through a
/// wrapper, `openpact-sandbox` when it lies beside the program's executable, else the
/// program itself with a hidden first argument. Call this first thing in `main` (before
/// logging or a runtime starts); when the program was started as the wrapper it confines
/// itself, runs the server, and returns the exit code to end with. Code mode's program
/// worker (`openpact.codeMode`) is started the same way, from the program's executable.
/// Otherwise it returns `None` at once.
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     if let Some(code) = openpact::run_sandbox_wrapper_if_asked() {
///         return code;
///     }
///     // … start a runtime and a `Hub` …
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn run_sandbox_wrapper_if_asked() -> Option<std::process::ExitCode> {
    crate::sandbox::run_if_asked().or_else(crate::code::worker::run_if_asked)
}
