//! Tools as a program sees them: identifiers for the attribute form and signatures.
//! (A stand-in until the full version lands: same API.)

/// One tool as a program calls it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramTool {
    pub name: String,
    pub group: String,
    pub attr: String,
}

pub fn identifier(raw: &str) -> String {
    let mut s: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

pub fn program_tools(tools: &[(&str, &str, &str)]) -> Vec<ProgramTool> {
    tools
        .iter()
        .map(|(wire, prefix, original)| ProgramTool {
            name: wire.to_string(),
            group: identifier(prefix),
            attr: identifier(original),
        })
        .collect()
}

pub fn prelude(tools: &[ProgramTool]) -> String {
    let mut groups: std::collections::BTreeMap<&str, Vec<&ProgramTool>> = Default::default();
    for t in tools {
        groups.entry(&t.group).or_default().push(t);
    }
    let mut out = String::from("def _tool(name):\n    def f(**kw):\n        return call(name, kw)\n    return f\n\ntools = struct(\n");
    for (g, ts) in groups {
        out.push_str(&format!("    {g} = struct(\n"));
        for t in ts {
            out.push_str(&format!("        {} = _tool({}),\n", t.attr, serde_json::Value::String(t.name.clone())));
        }
        out.push_str("    ),\n");
    }
    out.push_str(")\n");
    out
}
