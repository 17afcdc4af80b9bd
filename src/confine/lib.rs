//! openpact's sandbox wrapper: what a confined server's wrapper process is made of. The hub
//! (the `openpact` library's `sandbox` module) works out each server's [`Confinement`] and
//! starts the wrapper with it; the wrapper (the small `openpact-sandbox` executable, or the
//! hidden `openpact __sandbox`) confines itself and `exec`s the server. A crate of its own so
//! that executable links this and nothing of the library: fifty servers pay its start fifty
//! times.
//!
//! - [`rules`]: one server's rules, and how grants are cut around the carved places.
//! - [`wrapper`]: the wrapper's entry, [`wrapper_main`].
//! - the platform seam, here: what a machine can enforce ([`Support`]) and how the wrapper
//!   confines itself ([`Sandbox`], [`platform`]). One implementation now (Linux: Landlock,
//!   seccomp, dropped capabilities, PID namespaces); where there is none, servers run
//!   unconfined with a warning, or are refused when the config requires a sandbox.

#![forbid(unsafe_code)]

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod pidns;
pub mod rules;
pub mod wrapper;

pub use rules::{ConfineError, Confinement, NetRule, UnixRule, expand};
pub use wrapper::{EXIT_CONFINE, PROBE, wrapper_main};

/// The platform seam: what this machine can enforce, and how the wrapper confines itself.
pub trait Sandbox: Send + Sync {
    /// For messages: "Landlock + seccomp".
    fn name(&self) -> &'static str;
    fn support(&self) -> Support;
    /// Whether it can limit connecting to Unix socket files to granted paths.
    fn limits_unix_sockets(&self) -> bool {
        false
    }
    /// Confines the calling process and all it will `exec` (called by the wrapper only).
    fn confine(&self, c: &Confinement) -> Result<(), ConfineError>;
}

/// What a platform can enforce.
#[derive(Debug, Clone, PartialEq)]
pub enum Support {
    Full,
    /// Files only, say; the text says what is missing.
    Partial(String),
    Missing(String),
}

/// Where no sandbox exists yet (macOS would use `sandbox-exec` profiles; see the README).
#[cfg(not(target_os = "linux"))]
struct Unavailable;

#[cfg(not(target_os = "linux"))]
impl Sandbox for Unavailable {
    fn name(&self) -> &'static str {
        "none"
    }
    fn support(&self) -> Support {
        Support::Missing(format!(
            "openpact has no sandbox for {} yet",
            std::env::consts::OS
        ))
    }
    fn confine(&self, _: &Confinement) -> Result<(), ConfineError> {
        Err(ConfineError::Unsupported(format!(
            "openpact has no sandbox for {} yet",
            std::env::consts::OS
        )))
    }
}

/// This platform's sandbox.
pub fn platform() -> &'static dyn Sandbox {
    #[cfg(target_os = "linux")]
    return &linux::Landlock;
    #[cfg(not(target_os = "linux"))]
    return &Unavailable;
}
