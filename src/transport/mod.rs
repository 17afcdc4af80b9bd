//! Moving lines of JSON between processes: child servers over pipes, our own stdin/stdout.
//!
//! Knows nothing of JSON-RPC beyond framing; never writes to our stdout except through
//! [`stdio::StdioPipes`], which the serve face owns.

pub mod child;
pub mod lines;
pub mod stdio;

pub use child::{ChildProc, ChildSpec, Scrub, SpawnError, Spawned, StderrLog};
pub use lines::{Outbox, Outgoing, read_frames, spawn_writer};
