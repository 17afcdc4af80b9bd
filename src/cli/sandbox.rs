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

/// `sandbox allow`: the grant checked, the config's entry for the server opened for it, the
/// values added, the file written, the folders made, the running hubs reloaded.
pub async fn allow(
    config_arg: &Option<PathBuf>,
    state: &Path,
    name: &str,
    kind: &str,
    values: &[String],
    json: bool,
) -> Result<ExitCode> {
    let grant = grant_named(kind)?;
    let env = |k: &str| std::env::var(k).ok();
    let file = file_to_edit(config_arg)?;
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let old = config::parse(&text, &file, &env).map_err(|e| {
        anyhow::anyhow!("the config does not load, so it is not edited; fix it first:\n{e}")
    })?;
    let server = confined_server(&old, name, &file)?;
    let home = env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let mut edit = Edit::open(text, name, &file, grant)?;
    let mut done = Allowed {
        server: name.to_string(),
        kind: grant.word(),
        config: file.display().to_string(),
        added: Vec::new(),
        present: Vec::new(),
        created: Vec::new(),
        hubs: Vec::new(),
    };
    let folders = edit.add(server, grant, values, home.as_deref(), &mut done)?;
    if !done.added.is_empty() {
        refused_by_check(&old, &edit.text, &file, &env)?;
        crate::state::replace(&file, edit.text.as_bytes(), 0o600, true)
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    for dir in folders {
        crate::platform::create_dir_all(&dir, 0o700)
            .with_context(|| format!("cannot make {}", dir.display()))?;
        done.created.push(tilde(&dir, home.as_deref()));
    }
    if !done.added.is_empty() {
        done.hubs = reloaded(state, &file).await;
    }
    let failed = done.hubs.iter().any(|h| h.applied == Some(false));
    output::sandbox_allowed(&done, json)?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The grant KIND names (write, read, net, socket).
fn grant_named(kind: &str) -> Result<Grant> {
    let Some(grant) = Grant::parse(kind) else {
        let words: Vec<&str> = Grant::ALL.iter().map(|g| g.word()).collect();
        bail!(
            "{kind} is not a kind of grant; use one of {}",
            words.join(", ")
        );
    };
    Ok(grant)
}

/// The config file named or found, through its links: the file they point at is the one
/// rewritten, and a link to it stays a link.
fn file_to_edit(config_arg: &Option<PathBuf>) -> Result<PathBuf> {
    let Some(file) = config::file(config_arg.as_deref())? else {
        bail!(
            "no config file found to edit: create one (see `openpact config check`) or pass --config"
        );
    };
    Ok(std::fs::canonicalize(&file).unwrap_or(file))
}

/// The server `name` of the config, when it is one a grant means something to: a stdio
/// server that runs confined.
fn confined_server<'c>(
    old: &'c config::Config,
    name: &str,
    file: &Path,
) -> Result<&'c config::ServerConfig> {
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
    Ok(server)
}

/// The config text being edited, and where the server's entry is in it.
struct Edit<'a> {
    text: String,
    /// `mcpServers` or `servers`: the section that holds the server.
    section: &'static str,
    name: &'a str,
    file: &'a Path,
}

impl<'a> Edit<'a> {
    /// The text with the server's `sandbox` ready for `grant`: `true` made `{}`, and for a
    /// host, `"network": false` made an empty allow list (`true` already reaches any host).
    fn open(text: String, name: &'a str, file: &'a Path, grant: Grant) -> Result<Edit<'a>> {
        let raw: serde_json::Value =
            serde_json::from_str(&edit::stripped(&text)).unwrap_or_default();
        // `mcpServers` unless only `servers` holds the name.
        let section = if raw["mcpServers"].get(name).is_some() {
            "mcpServers"
        } else {
            "servers"
        };
        let mut this = Edit {
            text,
            section,
            name,
            file,
        };
        let sandbox_raw = &raw[section][name]["sandbox"];
        if sandbox_raw == &serde_json::Value::Bool(true) {
            this.replace(&[], "{}")?;
        }
        if grant == Grant::Net {
            match &sandbox_raw["network"] {
                serde_json::Value::Bool(true) => bail!(
                    "{name} has \"network\": true: it reaches any host directly already; nothing changed"
                ),
                serde_json::Value::Bool(false) => {
                    this.replace(&["network"], "{\"allow\": []}")?;
                }
                _ => {}
            }
        }
        Ok(this)
    }

    fn cannot(&self) -> String {
        format!("cannot add to {}", self.file.display())
    }

    /// Replaces the value at `keys` under the server's `sandbox`.
    fn replace(&mut self, keys: &[&str], value: &str) -> Result<()> {
        let mut path = vec![self.section, self.name, "sandbox"];
        path.extend(keys);
        self.text = edit::replace(&self.text, &path, value).with_context(|| self.cannot())?;
        Ok(())
    }

    /// Adds each value to the grant's list, noting in `done` which were added and which
    /// were there already; returns the folders a write grant needs made.
    fn add(
        &mut self,
        server: &config::ServerConfig,
        grant: Grant,
        values: &[String],
        home: Option<&Path>,
        done: &mut Allowed,
    ) -> Result<Vec<PathBuf>> {
        let granted = |p: &Path| match (&server.sandbox, grant) {
            (SandboxChoice::Profile(spec), Grant::Write) => spec.write.iter().any(|w| w == p),
            (SandboxChoice::Profile(spec), Grant::Read) => spec.read.iter().any(|r| r == p),
            _ => false,
        };
        let mut folders = Vec::new();
        for value in values {
            let (written, resolved) = if grant.is_path() {
                let (written, resolved) = as_written(value, home)?;
                (written, Some(resolved))
            } else {
                (value.clone(), None)
            };
            if let Some(p) = &resolved {
                // Only what it will write: a missing read grant is the user's to create (the
                // check of the edited config refuses it), since `~/.kube/config` made as a
                // folder breaks kubectl.
                if grant == Grant::Write && !p.exists() && config::sandbox::made_at_start(p, home) {
                    folders.push(p.clone());
                }
                if granted(p) {
                    done.present.push(written);
                    continue;
                }
            }
            let mut path: Vec<&str> = vec![self.section, self.name, "sandbox"];
            path.extend(grant.keys());
            match edit::add_to_list(&self.text, &path, &written).with_context(|| self.cannot())? {
                Added::Present => done.present.push(written),
                Added::Text(t) => {
                    self.text = t;
                    done.added.push(written);
                }
            }
        }
        Ok(folders)
    }
}

/// Asks the running hubs of `file` to reload, and what each did.
pub(super) async fn reloaded(state: &Path, file: &Path) -> Vec<HubReload> {
    let before = super::hubs_of(state, Some(file));
    super::hubs::ask_reload(state, &before)
        .await
        .into_iter()
        .map(|(hub, answer)| HubReload {
            pid: hub.pid,
            applied: answer.as_ref().map(|r| r.applied),
            message: answer.map(|r| r.message),
        })
        .collect()
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
pub(super) fn refused_by_check(
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
