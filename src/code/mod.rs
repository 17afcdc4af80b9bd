//! Code mode: a model's program (Starlark) run in a confined worker process, whose only way
//! out is asking the hub to call tools.
//!
//! - `kept`: what `keep` holds for a session's later programs.
//! - `names`: tools as the program sees them — valid identifiers for the attribute form
//!   (`tools.fs.read_text_file(path=…)`) and the Starlark signature `search_tools` shows.
//! - `protocol`: the lines the hub and the worker exchange over the worker's pipes.
//! - `worker`: the worker's side (the hidden `openpact __code-worker`): limits, the
//!   interpreter, `call`, `parallel`, `keep`.
//! - `process`: the hub's side: starting a worker through the sandbox wrapper and speaking
//!   to it.
//!
//! What each inner call passes (view, permission, limits, cache, redaction, audit) is the
//! hub's: `hub::session` runs them through the same stages as a direct `tools/call`.

pub mod kept;
pub mod names;
pub mod process;
pub mod protocol;
pub mod worker;
