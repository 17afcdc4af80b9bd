//! The config loader end to end on arbitrary text (JSONC, both shapes, `${VAR}` expansion,
//! units, globs, profiles, sandbox profiles): an error or a config, never a panic, and a
//! config that loads loads the same again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|text: &str| {
    let env = |name: &str| match name {
        "HOME" => Some("/home/fuzz".to_string()),
        "TOKEN" => Some("s3cret".to_string()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    let file = Path::new("/nonexistent/fuzz/mcp.json");
    let first = openpact::config::parse(text, file, &env);
    if let Ok(config) = first {
        let again = openpact::config::parse(text, file, &env).expect("loads twice");
        assert_eq!(config, again, "the same text loads the same config");
    }
});
