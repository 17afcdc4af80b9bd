//! Moving JSON-RPC messages between processes: child servers over pipes, remote servers
//! over HTTP ([`http`]), our own stdin/stdout.
//!
//! Knows nothing of JSON-RPC beyond framing and ids; never writes to our stdout except
//! through [`stdio::StdioPipes`], which the serve face owns.

pub mod child;
pub mod http;
pub mod lines;
#[cfg(unix)]
pub mod pollable;
pub mod queue;
#[cfg(unix)]
pub mod socket;
pub mod stdio;

pub use child::{ChildProc, ChildSpec, StderrLog};
pub use lines::{Outbox, Outgoing, read_frames, spawn_writer};
