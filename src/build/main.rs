//! Build script: link tuning for the `openpact` binary on Linux with glibc, each part used
//! only when a probe shows this toolchain links it and the result runs.
//!
//! - `-z pack-relative-relocs` (RELR): the ~100,000 relative relocations of a position-
//!   independent binary shrink from 2.5 MB of `.rela.dyn`, which the loader reads (and keeps
//!   resident) at every start, to a few KB. Needs glibc ≥ 2.36 at run time, hence the probe
//!   runs what it linked.
//! - `--symbol-ordering-file=src/build/hot-functions.txt` (lld): the functions the hub
//!   actually runs go first in `.text`, so the pages it touches are a few hundred contiguous
//!   ones instead of a scattering that fault-around inflates to most of the binary.
//!
//! `OPENPACT_LINK_TUNING=0` turns both off.

// Cargo reads a build script's instructions from its stdout.
#![allow(clippy::print_stdout)]

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=src/build/main.rs");
    println!("cargo::rerun-if-changed=src/build/hot-functions.txt");
    println!("cargo::rerun-if-env-changed=OPENPACT_LINK_TUNING");
    if env::var("OPENPACT_LINK_TUNING").is_ok_and(|v| v == "0") {
        return;
    }
    let var = |k: &str| env::var(k).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    let Some(out) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("src/build/hot-functions.txt");
    // Only a binary built for this machine can be run to check the loader copes.
    let runnable = var("HOST") == var("TARGET");

    let relr = ["-Wl,-z,pack-relative-relocs".to_string()];
    if runnable && probe(&out, "relr", &relr, true) {
        link_args(&relr);
    }
    let ordering = [
        format!("-Wl,--symbol-ordering-file={}", order.display()),
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ];
    if order.is_file() && probe(&out, "order", &ordering, runnable) {
        link_args(&ordering);
    }
}

fn link_args(args: &[String]) {
    for a in args {
        println!("cargo::rustc-link-arg-bin=openpact={a}");
    }
}

/// Links an empty program with `args` the way cargo would link ours (same rustc, target,
/// linker and flags) and, if `run`, runs it.
fn probe(out: &Path, name: &str, args: &[String], run: bool) -> bool {
    let src = out.join("probe.rs");
    let exe = out.join(format!("probe-{name}"));
    if std::fs::write(&src, "fn main() {}\n").is_err() {
        return false;
    }
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("--crate-name")
        .arg("probe");
    if let Ok(target) = env::var("TARGET") {
        cmd.arg("--target").arg(target);
    }
    if let Ok(linker) = env::var("RUSTC_LINKER") {
        cmd.arg("-C").arg(format!("linker={linker}"));
    }
    if let Ok(flags) = env::var("CARGO_ENCODED_RUSTFLAGS") {
        cmd.args(flags.split('\x1f').filter(|f| !f.is_empty()));
    }
    for a in args {
        cmd.arg("-C").arg(format!("link-arg={a}"));
    }
    let linked = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let works = linked && (!run || Command::new(&exe).status().is_ok_and(|s| s.success()));
    if !works {
        println!(
            "cargo::warning=link tuning: {name} not used (this toolchain cannot link or run it)"
        );
    }
    works
}
