//! Everything the CLI prints. The only module allowed to write to stdout, and it is never
//! reached in serve mode.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod addrm;
mod catalog;
mod config;
mod hubs;
mod import;
mod stores;

pub use addrm::{refused, registry_found, server_changed};
pub use catalog::{
    call_result, listing_human, listing_json, prompt_result, read_result, rpc_error, search_results,
};
pub use config::{config_human, config_json, config_problems, sandbox_allowed};
pub use hubs::{
    cache_cleared, cache_stats, hubs_json, live_human, nothing_to_reload, reloaded, servers_human,
    ui_link, ui_opened,
};
pub use import::{imported, set_up, setup_diff};
pub use stores::{
    audit, decisions, forgot, overridden, remembered, script_approved, script_rejected,
    script_source, scripts,
};

use crate::config::human_duration;
use crate::jsonrpc::Message;
use serde_json::{Value, json};
use std::io::IsTerminal;

/// Writes one line of the CLI's output to stdout. When the reader has gone away (`openpact
/// tools | head`), the command ends quietly with success, as Unix tools do, instead of
/// panicking the way `println!` does on a broken pipe.
macro_rules! out {
    () => { $crate::cli::output::write_out(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::output::write_out(format_args!("{}\n", format_args!($($arg)*))) };
}
pub(crate) use out;

/// The body of [`out!`]; also prints text that brings its own line ends.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("openpact: cannot write the output: {e}");
        std::process::exit(1);
    }
}

pub fn help() {
    eprintln!(
        "openpact: say what to do, e.g. `openpact serve`, `openpact tools`, `openpact call SERVER:TOOL '{{}}'`; see `openpact --help`"
    );
}

/// A fatal error at the edge of the program.
pub fn fatal(e: &anyhow::Error) {
    eprintln!("openpact: {e:#}");
}

/// A command's failure as `{"error": {"message": …}}` on stdout, for `--json` callers.
pub fn fatal_json(e: &anyhow::Error) {
    out!("{}", json!({"error": {"message": format!("{e:#}")}}));
}

/// Servers a command goes on waiting for after `openpact.listWait`, and for how long.
pub fn waiting_for(names: &[&str], waited: std::time::Duration, longest: std::time::Duration) {
    eprintln!(
        "openpact: waiting for {}: still starting after {} (a first `npx`/`uvx` run downloads the server); giving up after its timeout ({}). `openpact servers` shows each server's state and stderr.",
        names.join(", "),
        human_duration(waited),
        human_duration(longest)
    );
}

/// Servers a command stopped waiting for.
pub fn still_starting(names: &[&str]) {
    if !names.is_empty() {
        eprintln!(
            "openpact: still starting, so left out: {}",
            names.join(", ")
        );
    }
}

pub fn interrupted() {
    eprintln!("interrupted: the request was cancelled");
}

/// A progress bar on stderr for `notifications/progress`, drawn only on a terminal.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    pub fn new() -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar
        });
        Progress { bar }
    }

    pub fn visible(&self) -> bool {
        self.bar.is_some()
    }

    pub fn update(&self, m: &Message) {
        let Some(bar) = &self.bar else { return };
        if m.method() != "notifications/progress" {
            return;
        }
        let v: Value = m
            .params()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or(Value::Null);
        if let Some(total) = v.get("total").and_then(Value::as_f64) {
            bar.set_length(total as u64);
        }
        if let Some(p) = v.get("progress").and_then(Value::as_f64) {
            bar.set_position(p as u64);
        }
        if let Some(msg) = v.get("message").and_then(Value::as_str) {
            bar.set_message(msg.to_string());
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
