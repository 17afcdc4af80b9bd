//! Code mode's names, from tool names a server chose: each tool gets a valid Starlark name
//! (unique in its group), the prelude made of them parses whatever the names hold (quotes,
//! newlines, control characters: a name cannot break out of its string literal), and a
//! signature is made of any schema without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openpact::builtins::scripts::sandbox::dialect;
use openpact::code::names::{prelude, program_tools, signature};
use starlark::syntax::AstModule;

fuzz_target!(|input: (Vec<(String, String)>, String)| {
    let (pairs, schema) = input;
    let rows: Vec<(String, String, String)> = pairs
        .into_iter()
        .take(64)
        .map(|(prefix, tool)| (format!("{prefix}:{tool}"), prefix, tool))
        .collect();
    let borrowed: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|(w, p, t)| (w.as_str(), p.as_str(), t.as_str()))
        .collect();
    let tools = program_tools(&borrowed);
    assert_eq!(tools.len(), rows.len());
    let is_name = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let mut seen = std::collections::HashSet::new();
    for (t, (wire, _, _)) in tools.iter().zip(&rows) {
        assert!(is_name(&t.group) && is_name(&t.attr), "{t:?}");
        assert_eq!(&t.name, wire);
        assert!(seen.insert((t.group.clone(), t.attr.clone())), "twice: {t:?}");
    }
    let source = prelude(&tools);
    if let Err(e) = AstModule::parse("tools.star", source.clone(), &dialect()) {
        panic!("the prelude does not parse: {e}\n{source}");
    }
    if let (Ok(schema), Some(tool)) = (serde_json::from_str(&schema), tools.first()) {
        let _ = signature(tool, "a description", &schema, Some(&schema));
    }
});
