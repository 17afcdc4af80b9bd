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
//! - A static unwinder (`libgcc_eh.a`, linked whole) in both binaries, through the
//!   `openpact_static_unwinder` cfg that `src/build/unwinder.rs` acts on: without it each
//!   process loads `libgcc_s.so`, whose constructor probes the CPU with `cpuid`, which traps
//!   to the hypervisor on a VM. Measured on the 2-core CI-like VM: 0.3–0.4 ms of CPU per
//!   process start (of 1.4–1.9 ms for the fixture), paid 50 times when the hub starts 50
//!   servers.
//!
//! `OPENPACT_LINK_TUNING=0` turns all three off.

use std::env;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    cargo("rerun-if-changed=src/build/main.rs");
    cargo("rerun-if-changed=src/build/hot-functions.txt");
    cargo("rerun-if-env-changed=OPENPACT_LINK_TUNING");
    cargo("rustc-check-cfg=cfg(openpact_static_unwinder)");
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
    if runnable && probe(&out, "relr", &link_flags(&relr), true) {
        link_args(&relr);
    }
    // The probe panics and catches it, so a run proves the static unwinder unwinds.
    let unwinder = ["-l".to_string(), "static:+whole-archive=gcc_eh".to_string()];
    if probe(&out, "unwinder", &unwinder, runnable) {
        cargo("rustc-cfg=openpact_static_unwinder");
    }
    let ordering = [
        format!("-Wl,--symbol-ordering-file={}", order.display()),
        "-Wl,--no-warn-symbol-ordering".to_string(),
    ];
    if order.is_file() && probe(&out, "order", &link_flags(&ordering), runnable) {
        link_args(&ordering);
    }
}

/// One instruction to cargo, which reads them from a build script's stdout (this script's
/// only output channel; the binaries' stdout rule is about serve mode's protocol).
fn cargo(instruction: &str) {
    if writeln!(std::io::stdout(), "cargo::{instruction}").is_err() {
        // Cargo is gone or stopped listening: a build without our instructions would be
        // a different build, so fail rather than carry on.
        std::process::exit(1);
    }
}

fn link_args(args: &[String]) {
    for a in args {
        cargo(&format!("rustc-link-arg-bin=openpact={a}"));
    }
}

fn link_flags(args: &[String]) -> Vec<String> {
    args.iter().map(|a| format!("-Clink-arg={a}")).collect()
}

/// A program that needs a working unwinder: a panic caught, then a normal exit.
const PROBE: &str = "fn main() {\n    std::panic::set_hook(Box::new(|_| {}));\n    \
                     assert!(std::panic::catch_unwind(|| panic!()).is_err());\n}\n";

/// Compiles the probe program with the extra rustc `flags` the way cargo would build ours
/// (same rustc, target, linker and flags) and, if `run`, runs it.
fn probe(out: &Path, name: &str, flags: &[String], run: bool) -> bool {
    let src = out.join("probe.rs");
    let exe = out.join(format!("probe-{name}"));
    if std::fs::write(&src, PROBE).is_err() {
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
    if let Ok(encoded) = env::var("CARGO_ENCODED_RUSTFLAGS") {
        cmd.args(encoded.split('\x1f').filter(|f| !f.is_empty()));
    }
    cmd.args(flags);
    let linked = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let works = linked && (!run || Command::new(&exe).status().is_ok_and(|s| s.success()));
    if !works {
        cargo(&format!(
            "warning=link tuning: {name} not used (this toolchain cannot link or run it)"
        ));
    }
    works
}
