//! The `openpact` binary: parse arguments, set up logging to stderr, run.

use clap::Parser;
use openpact::cli::{self, Cli};
use std::io::IsTerminal;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to stderr only — stdout is the protocol in serve mode. The writer is
    // non-blocking and lossy, so a client that stops reading our stderr cannot stall us.
    let (writer, _guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        // The default queue (128k lines) is allocated up front; a few thousand is plenty
        // between two writes to stderr, and the writer is lossy anyway.
        .buffered_lines_limit(4096)
        .finish(std::io::stderr());
    let default = if cli.is_serve() { "info" } else { "warn" };
    let filter = std::env::var("OPENPACT_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
        });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(4));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            cli::output::fatal(&e.into());
            return ExitCode::from(2);
        }
    };
    let code = match runtime.block_on(cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            cli::output::fatal(&e);
            ExitCode::from(2)
        }
    };
    // Don't wait for the stdin thread (blocked in read) or idle blocking threads.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}
