//! What the commands on openpact's files print: the audit log, remembered permission
//! decisions (and the rules that override them), the scripts and their approvals.

use super::out;
use serde_json::{Value, json};
use std::path::Path;

/// `asked`: how many records were asked for (`-n`); none asked, none shown, nothing said.
pub fn audit(
    records: &[crate::policy::audit::Record],
    asked: usize,
    raw: bool,
) -> anyhow::Result<()> {
    if records.is_empty() && !raw && asked > 0 {
        out!("the audit log is empty");
    }
    for r in records {
        if raw {
            out!("{}", serde_json::to_string(r)?);
            continue;
        }
        let decision = if r.source.is_empty() {
            r.decision.to_string()
        } else {
            format!("{} ({})", r.decision, r.source)
        };
        out!(
            "{}  {:<12} {:<14} {:<32} {:<22} cache {:<4} {:>8.1} ms  {:<11} {} B",
            r.time,
            r.client,
            r.method,
            r.target,
            decision,
            r.cache,
            r.duration_ms,
            r.outcome,
            r.result_bytes
        );
        if let Some(e) = &r.error {
            out!("    {e}");
        }
    }
    Ok(())
}

/// The rule that decides `name` instead of its remembered decision `r`, if any, and
/// whether it agrees with it.
fn ruled(
    name: &str,
    r: &crate::policy::decisions::Remembered,
    rules: &crate::policy::rules::RuleSet,
) -> Option<(crate::policy::rules::Matched, bool)> {
    // Permission rules are about tools, prompts and resources, never a host (`hub::hosts`).
    if r.definition == crate::policy::prompt::HOST {
        return None;
    }
    let m = rules.explain(name)?;
    let agrees = m.agrees_with(r.decision);
    Some((m, agrees))
}

pub fn decisions(
    map: &std::collections::BTreeMap<String, crate::policy::decisions::Remembered>,
    rules: &crate::policy::rules::RuleSet,
    raw: bool,
) -> anyhow::Result<()> {
    if raw {
        let mut out = serde_json::Map::new();
        for (name, r) in map {
            let mut v = serde_json::to_value(r)?;
            if let Some((m, agrees)) = ruled(name, r, rules) {
                v["rule"] = json!({"list": m.rule.label(), "glob": m.glob, "overrides": !agrees});
            }
            out.insert(name.clone(), v);
        }
        out!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    if map.is_empty() {
        out!("no remembered decisions");
    }
    for (name, r) in map {
        let d = remember_label(r.decision);
        let definition = match r.definition.get(..r.definition.len().min(19)) {
            Some("") | None => "a resource",
            Some(hash) => hash,
        };
        out!("{name:<40} {d:<6} since {}  ({definition})", r.at);
        match ruled(name, r, rules) {
            Some((m, false)) => out!("    overridden: {} decides instead", m.describe()),
            Some((m, true)) => out!("    (also {} by {})", d, m.describe()),
            None => {}
        }
    }
    Ok(())
}

fn remember_label(d: crate::policy::decisions::Remember) -> &'static str {
    match d {
        crate::policy::decisions::Remember::Allow => "allow",
        crate::policy::decisions::Remember::Deny => "deny",
    }
}

pub fn forgot(name: &str, existed: bool) {
    if existed {
        out!("forgot the decision about {name}; openpact will ask again");
    } else {
        out!("there was no remembered decision about {name}");
    }
}

/// `definition`: what the decision is bound to (empty for a resource, which has none).
pub fn remembered(
    name: &str,
    decision: crate::policy::decisions::Remember,
    rule: Option<&crate::policy::rules::Matched>,
    definition: &str,
) {
    let d = match decision {
        crate::policy::decisions::Remember::Allow => "allowed",
        crate::policy::decisions::Remember::Deny => "denied",
    };
    let until = if definition.is_empty() {
        ""
    } else {
        "until its definition changes; "
    };
    out!("{name} is now always {d} ({until}`openpact permissions forget {name}` undoes this)");
    if let Some(m) = rule {
        out!(
            "note: {} already has it {d}, and decides first",
            m.describe()
        );
    }
}

/// A decision not saved because a rule decides otherwise, with what to do about it.
pub fn overridden(
    name: &str,
    decision: crate::policy::decisions::Remember,
    rule: &crate::policy::rules::Matched,
    config: &str,
) {
    use crate::config::Rule;
    let what = match rule.rule {
        Rule::Ask => "asks on every call",
        Rule::Allow => "allows it",
        Rule::Deny => "denies it",
    };
    eprintln!(
        "openpact: not saved: {} matches {name} and {what}; rules come before remembered decisions, so `openpact permissions {} {name}` would do nothing. Change that rule in {config} so it no longer matches {name}, then run this again.",
        rule.describe(),
        remember_label(decision)
    );
}

pub fn scripts(
    list: &[crate::builtins::scripts::ScriptInfo],
    dir: &Path,
    raw: bool,
) -> anyhow::Result<()> {
    if raw {
        let v: Vec<Value> = list
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "status": s.status, "hash": s.hash, "requiredSecrets": s.required_secrets, "metadata": s.metadata}))
            .collect();
        out!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    if list.is_empty() {
        out!("no scripts in {}", dir.display());
    }
    let w = list.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for s in list {
        out!("{:w$}  {:<11}  {}", s.name, s.status, s.description);
    }
    Ok(())
}

pub fn script_source(source: &str) {
    super::write_out(format_args!("{source}"));
    if !source.ends_with('\n') {
        out!();
    }
}

pub fn script_approved(name: &str, hash: &str) {
    out!("approved {name} ({hash}); editing it will need approval again");
}

pub fn script_rejected(name: &str) {
    out!("rejected {name}; script_run will refuse it");
}
