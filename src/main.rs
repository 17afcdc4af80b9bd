//! The `openpact` binary: everything it does is the library's `cli` layer.

fn main() -> std::process::ExitCode {
    openpact::binary_main()
}
