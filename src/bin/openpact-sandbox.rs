//! `openpact-sandbox RULES -- PROGRAM ARGS…`: the wrapper that confines itself to a server's
//! sandbox and then `exec`s the server. The same code runs as `openpact __sandbox`; this
//! executable names only the `openpact-confine` crate (not the library), so that starting it
//! costs a fraction of starting `openpact`, which fifty servers pay fifty times.

fn main() -> std::process::ExitCode {
    openpact_confine::wrapper_main(std::env::args_os().skip(1).collect())
}
