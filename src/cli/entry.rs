//! The `openpact` binary's `main`, here rather than in src/main.rs because the binary
//! reaches only the library's public API, and the command line is not part of it.

use crate::cli::{self, Cli};
use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

/// Runs the `openpact` command line and returns its exit code.
pub fn main() -> ExitCode {
    // The sandbox wrapper confines itself and becomes the server: nothing else of openpact
    // (logging, the runtime) may start first.
    if let Some(code) = crate::embed::run_sandbox_wrapper_if_asked() {
        return code;
    }
    let cli = Cli::parse();
    // Logs go to stderr only — stdout is the protocol in serve mode. The writer is
    // non-blocking and lossy, so a client that stops reading our stderr cannot stall us.
    let (writer, _guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        // The default queue (128k lines) is allocated up front; a few thousand is plenty
        // between two writes to stderr, and the writer is lossy anyway.
        .buffered_lines_limit(4096)
        .finish(std::io::stderr());
    let default = cli.default_log_filter();
    let filter = std::env::var("OPENPACT_LOG")
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| {
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
        });
    let telemetry = match telemetry_export(&cli) {
        // Off: the subscriber as it always was, with no layer to pass spans through.
        None => {
            tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(writer)
                .with_ansi(std::io::stderr().is_terminal())
                .init();
            None
        }
        Some(export) => with_telemetry(&export, filter, writer),
    };

    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            cli::output::fatal(&e.into());
            return ExitCode::from(2);
        }
    };
    // Run on a worker, not on this thread: the tasks the command spawns then start on the
    // same thread that spawned them instead of waking another one.
    let json = cli.wants_json();
    let code = match runtime.block_on(async { tokio::spawn(cli::run(cli)).await }) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            if json {
                cli::output::fatal_json(&e);
            }
            cli::output::fatal(&e);
            ExitCode::from(2)
        }
        Err(e) => {
            cli::output::fatal(&anyhow::anyhow!("openpact failed: {e}"));
            ExitCode::from(2)
        }
    };
    // Don't wait for the stdin thread (blocked in read) or idle blocking threads.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    if let Some(telemetry) = telemetry {
        telemetry.shutdown();
    }
    code
}

/// Where `serve` exports telemetry, if anywhere: `openpact.telemetry` of the config it will
/// serve, and the `OTEL_*` variables. Read here because the layer must be in the subscriber
/// before anything logs; the other commands export nothing.
fn telemetry_export(cli: &Cli) -> Option<crate::telemetry::Export> {
    let serves = cli.mcp || matches!(cli.command, Some(cli::Command::Serve { .. }));
    if !serves {
        return None;
    }
    // A config that does not load exports nothing; `serve` reports why when it loads it.
    let settings = crate::config::load(cli.config.as_deref())
        .map(|c| c.hub.telemetry)
        .unwrap_or_default();
    crate::telemetry::Export::resolve(&settings, &|k| std::env::var(k).ok())
}

/// The subscriber with the OpenTelemetry layer beside the log output: the layer takes only
/// the telemetry spans, the log output everything else its filter lets through.
fn with_telemetry(
    export: &crate::telemetry::Export,
    filter: EnvFilter,
    writer: tracing_appender::non_blocking::NonBlocking,
) -> Option<crate::telemetry::Guard> {
    use crate::telemetry::TARGET;
    use tracing_subscriber::filter::{FilterExt, Targets, filter_fn};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{Layer, fmt, registry};
    let logs = fmt::layer()
        .with_writer(writer)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(filter.and(filter_fn(|m| m.target() != TARGET)));
    let subscriber = registry().with(logs);
    match crate::telemetry::start(export) {
        Ok((layer, guard)) => {
            subscriber
                // A static filter: every other callsite is never of interest to the layer, so
                // the hot path's disabled `debug!`s stay disabled at their callsite rather than
                // being asked about at each hit.
                .with(layer.with_filter(Targets::new().with_target(TARGET, tracing::Level::TRACE)))
                .init();
            tracing::info!(traces = %export.traces, metrics = %export.metrics, "telemetry: exporting over OTLP/HTTP");
            Some(guard)
        }
        Err(e) => {
            subscriber.init();
            tracing::warn!("telemetry is off: {e}");
            None
        }
    }
}

/// One worker by default. Forwarding is a chain of short tasks (read, route, write, wait):
/// on one worker each wake-up costs an epoll return and nothing else, while a second worker
/// is woken through a futex twice per call to look for work it never finds, and a hop costs
/// 24 µs instead of 32 µs (bench, best runs). What needs a CPU of its own runs off the worker:
/// process spawning on the blocking pool, scripts, audit and terminal prompts on threads.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    let threads = std::env::var("OPENPACT_WORKER_THREADS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(1);
    if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .on_thread_unpark(crate::transport::lines::new_turn)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .on_thread_unpark(crate::transport::lines::new_turn)
            .enable_all()
            .build()
    }
}
