//! The commands on what openpact keeps in files: remembered permission decisions, the
//! scripts and their approvals, the audit log, and `config check`.

use super::{PermissionsCommand, ScriptsCommand, load, output, settle, start_for};
use crate::config::{self, Config};
use crate::hub::Hub;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// `audit tail`: the last `lines` calls, oldest first.
pub(super) fn audit_tail(state: &Path, lines: usize, json: bool) -> Result<ExitCode> {
    let records = crate::policy::audit::tail(state, lines)
        .with_context(|| format!("reading the audit log in {}", state.display()))?;
    output::audit(&records, lines, json)?;
    Ok(ExitCode::SUCCESS)
}

pub(super) async fn permissions(
    config: &Option<PathBuf>,
    state: &Path,
    command: PermissionsCommand,
) -> Result<ExitCode> {
    use crate::policy::decisions::Remember;
    let store = crate::policy::decisions::DecisionStore::new(state);
    let (name, decision) = match command {
        PermissionsCommand::List { json } => {
            // Rules beat remembered decisions: show which ones a rule overrides.
            let config = load(config)?;
            let rules = crate::policy::rules::RuleSet::new(&config.hub.policy.permissions);
            output::decisions(&store.all()?, &rules, json)?;
            return Ok(ExitCode::SUCCESS);
        }
        PermissionsCommand::Forget { name } => {
            let existed = store.forget(&name)?;
            output::forgot(&name, existed);
            return Ok(ExitCode::SUCCESS);
        }
        PermissionsCommand::Allow { name } => (name, Remember::Allow),
        PermissionsCommand::Deny { name } => (name, Remember::Deny),
    };
    let config = load(config)?;
    let label = config.label();
    let rules = crate::policy::rules::RuleSet::new(&config.hub.policy.permissions);
    // A decision is bound to the definition the server shows now, so ask the server.
    let hub = start_for(&config, state, Some(&name));
    hub.declare_client(None);
    settle(&hub).await;
    let catalog = hub.catalog();
    let found = catalog
        .tool(&name)
        .or_else(|| catalog.prompts.find(&name))
        .map(|n| (n.qualified.clone(), n.definition().to_string()))
        .or_else(|| resource_named(&hub, &catalog, &name));
    hub.shutdown().await;
    let Some((qualified, definition)) = found else {
        bail!(
            "no tool, prompt or resource is named {name} (see `openpact tools`, `openpact prompts` and `openpact resources`; a resource is SERVER:URI); for patterns, use openpact.permissions rules in the config"
        );
    };
    // Rules come before remembered decisions: a decision a rule overrides would do nothing,
    // so it is refused with the rule named, and one a rule already makes is only noted.
    let rule = rules.explain(&qualified);
    if let Some(m) = rule.as_ref().filter(|m| !m.agrees_with(decision)) {
        output::overridden(&qualified, decision, m, &label);
        return Ok(ExitCode::from(1));
    }
    store.remember(&qualified, decision, &definition)?;
    output::remembered(&qualified, decision, rule.as_ref(), &definition);
    Ok(ExitCode::SUCCESS)
}

/// `SERVER:URI` when a read of URI goes to that server: the name and (empty) definition a
/// resource's permission is checked under (`hub::session` `by_uri`). Only a URI (with a
/// scheme) may take the route of last resort, the only server with resources: a tool name
/// misspelt is not a resource.
fn resource_named(
    hub: &Hub,
    catalog: &crate::hub::Catalog,
    name: &str,
) -> Option<(Arc<str>, String)> {
    let (prefix, uri) = name.split_once(':')?;
    let upstreams = hub.upstreams();
    // A view (MCP Apps) is permitted under its server's own URI, which the hub serves in
    // its own form.
    let view = crate::hub::apps::hub_uri(prefix, uri).and_then(|shown| hub.view_server(0, &shown));
    let index = match view.or_else(|| catalog.route_uri_listed(uri)) {
        Some(index) => index,
        None if url::Url::parse(uri).is_ok() => catalog.route_uri(uri, &upstreams, |_| true)?,
        None => return None,
    };
    let up = upstreams.iter().find(|u| u.index == index)?;
    (up.config().prefix() == prefix).then(|| (name.into(), String::new()))
}

pub(super) fn scripts(config: &Config, state: &Path, command: ScriptsCommand) -> Result<ExitCode> {
    use crate::builtins::scripts;
    let settings = &config.hub.builtins.scripts;
    match command {
        ScriptsCommand::List { json } => {
            let list = scripts::list(settings, state).map_err(anyhow::Error::msg)?;
            output::scripts(&list, &settings.dir, json)?;
        }
        ScriptsCommand::Show { name } => {
            output::script_source(&scripts::show(settings, &name).map_err(anyhow::Error::msg)?)
        }
        ScriptsCommand::Approve { name } => {
            let hash = scripts::approve(settings, state, &name).map_err(anyhow::Error::msg)?;
            output::script_approved(&name, &hash);
        }
        ScriptsCommand::Reject { name } => {
            scripts::reject(settings, state, &name).map_err(anyhow::Error::msg)?;
            output::script_rejected(&name);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn config_check(
    path: &Option<PathBuf>,
    state_dir: &Option<PathBuf>,
    json: bool,
) -> Result<ExitCode> {
    let state = super::state_dir(state_dir);
    match config::load(path.as_deref()).and_then(Config::strict) {
        Ok(config) => {
            if json {
                output::config_json(&config, &state)?;
            } else {
                output::config_human(&config, &state);
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            output::config_problems(&e, json)?;
            Ok(ExitCode::from(1))
        }
    }
}
