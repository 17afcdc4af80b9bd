//! `openpact sandbox allow NAME KIND VALUE…`: a grant added to one server's `sandbox` in the
//! config file, edited in place (comments and layout kept), checked by the same parse the
//! hub runs, written atomically, the granted folder made, and the running hubs reloaded.

use super::output;
use crate::config::edit::{self, Added};
use crate::config::sandbox::{Grant, SandboxChoice};
use crate::config::{self, Transport};
use crate::sandbox::refusal::tilde;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What one `sandbox allow` did, for the output.
#[derive(Debug, serde::Serialize)]
pub struct Allowed {
    pub server: String,
    pub kind: &'static str,
    pub config: String,
    /// Values added to the config.
    pub added: Vec<String>,
    /// Values the config granted already.
    pub present: Vec<String>,
    /// Folders made (0700).
    pub created: Vec<String>,
    /// Each running hub of this config and what its reload did (`null`: no word yet).
    pub hubs: Vec<HubReload>,
}

#[derive(Debug, serde::Serialize)]
pub struct HubReload {
    pub pid: u32,
    pub applied: Option<bool>,
    pub message: Option<String>,
}

pub async fn allow(
    config_arg: &Option<PathBuf>,
    state: &Path,
    name: &str,
    kind: &str,
    values: &[String],
    json: bool,
) -> Result<ExitCode> {
    let Some(grant) = Grant::parse(kind) else {
        let words: Vec<&str> = Grant::ALL.iter().map(|g| g.word()).collect();
        bail!(
            "{kind} is not a kind of grant; use one of {}",
            words.join(", ")
        );
    };
    let env = |k: &str| std::env::var(k).ok();
    let Some(file) = config::file(config_arg.as_deref())? else {
        bail!(
            "no config file found to edit: create one (see `openpact config check`) or pass --config"
        );
    };
    // A link to the config stays a link: the file it points at is the one rewritten.
    let file = std::fs::canonicalize(&file).unwrap_or(file);
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let old = config::parse(&text, &file, &env).map_err(|e| {
        anyhow::anyhow!("the config does not load, so it is not edited; fix it first:\n{e}")
    })?;
    let Some(server) = old.servers.iter().find(|s| s.name == name) else {
        let names: Vec<(&str, &str)> = old
            .servers
            .iter()
            .map(|s| (s.name.as_str(), s.name.as_str()))
            .collect();
        let hint = match config::suggest::closest(name, &names) {
            Some(near) => format!("; did you mean {near}?"),
            None if names.is_empty() => " (it has no servers)".to_string(),
            None => format!(
                " (its servers: {})",
                names.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        };
        bail!("{} has no server named {name}{hint}", file.display());
    };
    if matches!(server.transport, Transport::Http { .. }) {
        bail!(
            "{name} is a remote server (it runs elsewhere, outside openpact's sandbox); nothing to allow"
        );
    }
    match (&server.sandbox, old.hub.sandbox.default_on) {
        (SandboxChoice::Off, _) => bail!(
            "{name} has \"sandbox\": false in {}: it runs unconfined, so nothing needs allowing; nothing changed",
            file.display()
        ),
        (SandboxChoice::Unset, false) => bail!(
            "{name} runs unconfined (openpact.sandbox.default is \"off\" in {}), so nothing needs allowing; nothing changed",
            file.display()
        ),
        _ => {}
    }
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let raw: serde_json::Value = serde_json::from_str(&edit::stripped(&text)).unwrap_or_default();
    // `mcpServers` unless only `servers` holds the name.
    let section = if raw["mcpServers"].get(name).is_some() {
        "mcpServers"
    } else {
        "servers"
    };
    let sandbox_raw = &raw[section][name]["sandbox"];
    let cannot = || format!("cannot add to {}", file.display());
    let mut text_now = text.clone();
    if sandbox_raw == &serde_json::Value::Bool(true) {
        text_now =
            edit::replace(&text_now, &[section, name, "sandbox"], "{}").with_context(cannot)?;
    }
    if grant == Grant::Net {
        match &sandbox_raw["network"] {
            serde_json::Value::Bool(true) => bail!(
                "{name} has \"network\": true: it reaches any host directly already; nothing changed"
            ),
            serde_json::Value::Bool(false) => {
                text_now = edit::replace(
                    &text_now,
                    &[section, name, "sandbox", "network"],
                    "{\"allow\": []}",
                )
                .with_context(cannot)?;
            }
            _ => {}
        }
    }
    let mut done = Allowed {
        server: name.to_string(),
        kind: grant.word(),
        config: file.display().to_string(),
        added: Vec::new(),
        present: Vec::new(),
        created: Vec::new(),
        hubs: Vec::new(),
    };
    let granted = |p: &Path| match (&server.sandbox, grant) {
        (SandboxChoice::Profile(spec), Grant::Write) => spec.write.iter().any(|w| w == p),
        (SandboxChoice::Profile(spec), Grant::Read) => spec.read.iter().any(|r| r == p),
        _ => false,
    };
    let mut folders = Vec::new();
    for value in values {
        let (written, resolved) = if grant.is_path() {
            let (written, resolved) = as_written(value, home.as_deref())?;
            (written, Some(resolved))
        } else {
            (value.clone(), None)
        };
        if let Some(p) = &resolved {
            // Only what it will write: a missing read grant is the user's to create (the
            // check below refuses it), since `~/.kube/config` made as a folder breaks kubectl.
            if grant == Grant::Write
                && !p.exists()
                && config::sandbox::made_at_start(p, home.as_deref())
            {
                folders.push(p.clone());
            }
            if granted(p) {
                done.present.push(written);
                continue;
            }
        }
        let mut path: Vec<&str> = vec![section, name, "sandbox"];
        path.extend(grant.keys());
        match edit::add_to_list(&text_now, &path, &written).with_context(cannot)? {
            Added::Present => done.present.push(written),
            Added::Text(t) => {
                text_now = t;
                done.added.push(written);
            }
        }
    }
    if !done.added.is_empty() {
        refused_by_check(&old, &text_now, &file, &env)?;
        crate::state::replace(&file, text_now.as_bytes(), 0o600, true)
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    for dir in folders {
        crate::platform::create_dir_all(&dir, 0o700)
            .with_context(|| format!("cannot make {}", dir.display()))?;
        done.created.push(tilde(&dir, home.as_deref()));
    }
    if !done.added.is_empty() {
        let before = super::hubs_of(state, Some(&file));
        for (hub, answer) in super::hubs::ask_reload(state, &before).await {
            done.hubs.push(HubReload {
                pid: hub.pid,
                applied: answer.as_ref().map(|r| r.applied),
                message: answer.map(|r| r.message),
            });
        }
    }
    let failed = done.hubs.iter().any(|h| h.applied == Some(false));
    output::sandbox_allowed(&done, json)?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A path as the config should hold it — absolute, or `~/…` below the home folder, so it
/// means the same wherever the config is read from — and as the sandbox will see it.
fn as_written(value: &str, home: Option<&Path>) -> Result<(String, PathBuf)> {
    let resolved = match (value.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        (None, Some(home)) if value == "~" => home.to_path_buf(),
        _ if value.starts_with('~') => {
            bail!("{value}: HOME is not set, so `~` means nothing here; give an absolute path")
        }
        _ => std::path::absolute(value).with_context(|| format!("{value}: not a path"))?,
    };
    Ok((tilde(&resolved, home), resolved))
}

/// The edited text through the parse and the check a hub and `config check` run: what it
/// reports that the file did not before is why the edit is refused.
fn refused_by_check(
    old: &config::Config,
    text: &str,
    file: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    let problems = |c: config::Config| match c.strict() {
        Ok(_) => Vec::new(),
        Err(e) => e.problems,
    };
    let before = problems(old.clone());
    let after = match config::parse(text, file, env) {
        Ok(c) => problems(c),
        Err(e) => e.problems,
    };
    let new: Vec<String> = after
        .iter()
        .filter(|p| !before.contains(p))
        .map(ToString::to_string)
        .collect();
    if !new.is_empty() {
        bail!(
            "not allowed: the config would then say\n{}\nnothing changed",
            new.join("\n")
        );
    }
    Ok(())
}
