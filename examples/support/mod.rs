//! What the embedding examples share: their `main` (the sandbox wrapper's check, a runtime,
//! the exit code), where the fixture server is, and reporting a check.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;

pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Runs `body` on a runtime; exits non-zero (saying why) when it fails. Sandboxed servers
/// start through the program itself as the sandbox wrapper, so that check comes first.
pub fn main<F: Future<Output = Result<()>>>(name: &str, body: impl FnOnce() -> F) -> ExitCode {
    if let Some(code) = openpact::run_sandbox_wrapper_if_asked() {
        return code;
    }
    match tokio::runtime::Runtime::new().map(|rt| rt.block_on(body())) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{name}: no runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The fixture server: `$OPENPACT_FIXTURE`, else `openpact-fixture` in the target dir this
/// example was built in.
pub fn fixture() -> Result<PathBuf> {
    if let Ok(path) = std::env::var("OPENPACT_FIXTURE") {
        return Ok(path.into());
    }
    let exe = std::env::current_exe()?;
    exe.parent()
        .and_then(|examples| examples.parent())
        .map(|dir| dir.join("openpact-fixture"))
        .filter(|p| p.is_file())
        .ok_or_else(|| "no openpact-fixture beside target/*/examples; set OPENPACT_FIXTURE".into())
}

/// Prints `what` with `detail`; an error when `ok` is false.
pub fn check(what: &str, ok: bool, detail: &str) -> Result<()> {
    println!("{} {what}: {detail}", if ok { "ok " } else { "BAD" });
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: {detail}").into())
    }
}
