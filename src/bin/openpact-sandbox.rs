//! `openpact-sandbox RULES -- PROGRAM ARGS…`: the wrapper that confines itself to a server's
//! sandbox and then `exec`s the server. The same code runs as `openpact __sandbox`; this
//! executable is built from the wrapper's modules alone (not the whole library), so that
//! starting it costs a fraction of starting `openpact`, which fifty servers pay fifty times.

#[path = "../sandbox/confine.rs"]
mod confine;
// The seam's other half (what a machine supports, its name for messages) serves the hub.
#[allow(dead_code)]
#[cfg(target_os = "linux")]
#[path = "../sandbox/linux.rs"]
mod linux;
#[cfg(target_os = "linux")]
#[path = "../sandbox/pidns.rs"]
mod pidns;
#[allow(dead_code)]
#[path = "../sandbox/seam.rs"]
mod seam;

use seam::{Sandbox, Support, platform};

fn main() -> std::process::ExitCode {
    confine::wrapper_main(std::env::args_os().skip(1).collect())
}
