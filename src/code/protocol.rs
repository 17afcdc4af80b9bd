//! The lines the hub and a code worker exchange: one JSON object per line on the worker's
//! stdin (from the hub) and stdout (to the hub). The worker asks; the hub answers every ask
//! with one [`Answers`] line, in the order asked.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The hidden subcommand that runs a worker: `openpact __code-worker --memory BYTES --cpu S`.
pub const SUBCOMMAND: &str = "__code-worker";

/// The longest line either side accepts: a program and its prelude, a tool's answer.
pub const MAX_LINE: usize = 32 << 20;

/// The hub's first line: what to run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Start {
    /// The model's program.
    pub code: String,
    /// Starlark run before it (the `tools` namespace; see `code::names::prelude`).
    pub prelude: String,
    /// How long the program may run, in milliseconds (the hub kills it a little after).
    pub timeout_ms: u64,
    /// Characters of `print` output kept.
    pub max_output: usize,
}

/// One tool call a program asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRequest {
    /// The tool's name as the client sees it (`server:tool`).
    pub name: String,
    pub arguments: Value,
    /// The whole `tools/call` result instead of its value (`call(…, raw=True)`).
    #[serde(default)]
    pub raw: bool,
}

/// What a worker sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum FromWorker {
    /// Tool calls to make at once (one for `call`, several for `parallel`).
    Call { calls: Vec<CallRequest> },
    /// `keep(name, value)`.
    Keep { name: String, value: Value },
    /// `kept(name)`.
    Kept { name: String },
    /// The program ended: its value and output, or why it failed.
    Done {
        value: Value,
        output: String,
        error: Option<String>,
    },
}

/// The answer to one ask: a value, or an error message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    Ok(Value),
    Error(String),
}

/// The hub's answer line to a [`FromWorker`] ask, one [`Answer`] per call asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answers {
    pub answers: Vec<Answer>,
}
