//! The platform seam: what a machine can enforce, and how the wrapper confines itself. One
//! implementation now (Linux); where there is none, servers run unconfined with a warning,
//! or are refused when the config requires a sandbox. Shared by the library and the small
//! `openpact-sandbox` executable, so it names only the wrapper's own modules.

use super::confine::{ConfineError, Confinement};

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
    return &super::linux::Landlock;
    #[cfg(not(target_os = "linux"))]
    return &Unavailable;
}
