//! `openpact add`, `openpact remove` and `openpact registry search`: a server entry added to
//! or removed from the config file in place (comments and layout kept, the file made when
//! missing), checked by the parse the hub runs, written atomically, and the running hubs
//! reloaded. A secret given on the command line is never written: the entry gets a `${VAR}`
//! reference and the output names the variable to set.

use super::args::AddArgs;
use super::output;
use super::registry::{self, Chosen};
use super::sandbox::{HubReload, refused_by_check, reloaded};
use crate::config::{self, edit};
use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// A variable the entry refers to and the person must set, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ToSet {
    pub name: String,
    pub why: String,
}

/// A server entry to write, with what the output says about it.
#[derive(Debug, Default)]
pub struct Entry {
    pub value: Map<String, Value>,
    pub to_set: Vec<ToSet>,
    /// What else a person should know (optional variables left out, why a package or a
    /// remote was chosen).
    pub notes: Vec<String>,
}

/// What `add` or `remove` did, for the output.
#[derive(Debug, serde::Serialize)]
pub struct Changed {
    pub server: String,
    /// `added` or `removed`.
    pub action: &'static str,
    pub config: String,
    /// Whether the file was made by this command.
    pub created: bool,
    /// The entry as written (added servers).
    pub entry: Option<Value>,
    /// Variables the entry refers to that must be set where the hub runs.
    pub set: Vec<ToSet>,
    pub notes: Vec<String>,
    /// The registry's choice (`add --registry`).
    pub chosen: Option<Chosen>,
    pub hubs: Vec<HubReload>,
}

/// `openpact add`.
pub async fn add(config_arg: &Option<PathBuf>, state: &Path, args: AddArgs) -> Result<ExitCode> {
    let json = args.json;
    let (name, mut entry, chosen) = match &args.registry {
        Some(id) => {
            let server = registry::fetch(&args.registry_url, id, args.version.as_deref()).await?;
            let name = match &args.name {
                Some(n) => n.clone(),
                None => registry::local_name(id),
            };
            let (entry, chosen) = registry::entry(&server, &name, &|c| which::which(c).is_ok())?;
            (name, entry, Some(chosen))
        }
        None => {
            let Some(name) = args.name.clone() else {
                bail!("say the server's name: openpact add NAME -- COMMAND ARGS…");
            };
            let entry = by_hand(&name, &args)?;
            (name, entry, None)
        }
    };
    if let Some(ns) = &args.namespace {
        entry
            .value
            .insert("namespace".into(), Value::String(ns.clone()));
    }
    let (file, created) = file_or_new(config_arg)?;
    let text = if created {
        "{\n  \"mcpServers\": {\n  }\n}\n".to_string()
    } else {
        std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?
    };
    let raw = raw_of(&text, &file)?;
    if let Some(section) = section_holding(&raw, &name) {
        return refuse(
            &format!(
                "{} has a server named {name} already (in {section}); `openpact remove {name}` first, or choose another name",
                file.display()
            ),
            json,
        );
    }
    // The VS Code shape when the file uses only it; else `mcpServers`.
    let section = if raw.get("mcpServers").is_none() && raw.get("servers").is_some() {
        "servers"
    } else {
        "mcpServers"
    };
    let value = Value::Object(entry.value.clone());
    let new = match edit::add_member(&text, &[section], &name, &one_line(&value))
        .with_context(|| format!("cannot add to {}", file.display()))?
    {
        edit::Added::Text(t) => t,
        edit::Added::Present => bail!("internal: {name} appeared in {section}"),
    };
    // The variables it names are checked as if set: setting them is the person's next step.
    let env = |k: &str| {
        std::env::var(k).ok().or_else(|| {
            entry
                .to_set
                .iter()
                .any(|t| t.name == k)
                .then(|| "set-later".to_string())
        })
    };
    check_and_write(&text, &new, &file, created, &env)?;
    let done = Changed {
        server: name,
        action: "added",
        config: file.display().to_string(),
        created,
        entry: Some(value),
        set: entry.to_set,
        notes: entry.notes,
        chosen,
        hubs: reloaded(state, &file).await,
    };
    finish(&done, json)
}

/// `openpact remove NAME`.
pub async fn remove(
    config_arg: &Option<PathBuf>,
    state: &Path,
    name: &str,
    json: bool,
) -> Result<ExitCode> {
    let Some(file) = config::file(config_arg.as_deref())? else {
        return refuse(
            "no config file found, so there is nothing to remove (pass --config to name one)",
            json,
        );
    };
    let file = std::fs::canonicalize(&file).unwrap_or(file);
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let raw = raw_of(&text, &file)?;
    let Some(section) = section_holding(&raw, name) else {
        let names: Vec<&str> = ["mcpServers", "servers"]
            .iter()
            .filter_map(|s| raw.get(*s).and_then(Value::as_object))
            .flat_map(|m| m.keys().map(String::as_str))
            .collect();
        let pairs: Vec<(&str, &str)> = names.iter().map(|n| (*n, *n)).collect();
        let hint = match config::suggest::closest(name, &pairs) {
            Some(near) => format!("; did you mean {near}?"),
            None if names.is_empty() => " (it has no servers)".to_string(),
            None => format!(" (its servers: {})", names.join(", ")),
        };
        return refuse(
            &format!("{} has no server named {name}{hint}", file.display()),
            json,
        );
    };
    let Some(new) = edit::remove_member(&text, &[section], name)
        .with_context(|| format!("cannot remove from {}", file.display()))?
    else {
        bail!("internal: {name} vanished from {section}");
    };
    let env = |k: &str| std::env::var(k).ok();
    check_and_write(&text, &new, &file, false, &env)?;
    let done = Changed {
        server: name.to_string(),
        action: "removed",
        config: file.display().to_string(),
        created: false,
        entry: None,
        set: Vec::new(),
        notes: Vec::new(),
        chosen: None,
        hubs: reloaded(state, &file).await,
    };
    finish(&done, json)
}

/// `openpact registry search QUERY`.
pub async fn search(registry_url: &str, query: &str, json: bool) -> Result<ExitCode> {
    let found = registry::search(registry_url, query).await?;
    output::registry_found(registry_url, query, &found, json);
    Ok(ExitCode::SUCCESS)
}

fn finish(done: &Changed, json: bool) -> Result<ExitCode> {
    output::server_changed(done, json);
    // A hub that cannot apply an entry whose variables are still to be set is the expected
    // state, said in the output, not a failure of the command.
    Ok(
        if done.set.is_empty() && done.hubs.iter().any(|h| h.applied == Some(false)) {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}

fn refuse(message: &str, json: bool) -> Result<ExitCode> {
    output::refused(message, json);
    Ok(ExitCode::from(1))
}

/// The entry `add NAME -- COMMAND…` or `add NAME --url URL` describes.
fn by_hand(name: &str, args: &AddArgs) -> Result<Entry> {
    let mut entry = Entry::default();
    match (&args.url, args.command.split_first()) {
        (Some(_), Some(_)) => bail!("give either --url URL or -- COMMAND ARGS…, not both"),
        (None, None) => bail!(
            "say how to reach {name}: openpact add {name} -- COMMAND ARGS… (a stdio server) or openpact add {name} --url URL (a remote one)"
        ),
        (Some(url), None) => {
            entry.value.insert("url".into(), json!(url));
            let mut headers = Map::new();
            for h in &args.headers {
                let Some((k, v)) = h.split_once(':') else {
                    bail!("--header {h}: write it as 'NAME: VALUE'");
                };
                let (k, v) = (k.trim(), v.trim());
                let written = kept_out(name, k, v, "header", &mut entry.to_set);
                headers.insert(k.to_string(), Value::String(written));
            }
            if !headers.is_empty() {
                entry.value.insert("headers".into(), Value::Object(headers));
            }
        }
        (None, Some((command, rest))) => {
            entry.value.insert("command".into(), json!(command));
            if !rest.is_empty() {
                entry.value.insert("args".into(), json!(rest));
            }
            let mut env = Map::new();
            for e in &args.env {
                let Some((k, v)) = e.split_once('=') else {
                    bail!("--env {e}: write it as KEY=VALUE");
                };
                let written = kept_out(name, k, v, "env", &mut entry.to_set);
                env.insert(k.to_string(), Value::String(written));
            }
            if !env.is_empty() {
                entry.value.insert("env".into(), Value::Object(env));
            }
            if let Some(cwd) = &args.cwd {
                // Absolute: the config may be read from anywhere, the shell's folder is here.
                let cwd = std::path::absolute(cwd)
                    .with_context(|| format!("--cwd {}: not a path", cwd.display()))?;
                entry
                    .value
                    .insert("cwd".into(), json!(cwd.display().to_string()));
            }
        }
    }
    Ok(entry)
}

/// The value to write for `key: value` (an `env` entry or a header): the value itself, or,
/// when it looks secret, a `${VAR}` reference (a bearer credential keeps its scheme), with
/// the variable noted in `to_set`.
fn kept_out(server: &str, key: &str, value: &str, kind: &str, to_set: &mut Vec<ToSet>) -> String {
    if !config::secret_entry(key, value) {
        return value.to_string();
    }
    let (scheme, var) = match (kind, value.split_once(' ')) {
        ("env", _) => ("", key.to_string()),
        (_, Some((scheme, _))) if scheme.eq_ignore_ascii_case("bearer") => {
            ("Bearer ", format!("{}_TOKEN", var_name(server)))
        }
        _ => ("", format!("{}_{}", var_name(server), var_name(key))),
    };
    to_set.push(ToSet {
        name: var.clone(),
        why: format!(
            "the {kind} {key} of {server} looks secret, so the config refers to ${{{var}}} instead of holding the value you gave{}",
            if scheme.is_empty() {
                String::new()
            } else {
                " (set it to the token alone)".to_string()
            }
        ),
    });
    format!("{scheme}${{{var}}}")
}

/// JSON on one line as a person writes it: a space after each `:` and `,`.
fn one_line(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let members: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), one_line(v)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(one_line).collect();
            format!("[{}]", items.join(", "))
        }
        scalar => scalar.to_string(),
    }
}

/// `my-server` → `MY_SERVER`: a name fit for an environment variable.
pub(super) fn var_name(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The config's JSON (comments blanked), or why it cannot be edited.
fn raw_of(text: &str, file: &Path) -> Result<Value> {
    serde_json::from_str(&edit::stripped(text)).map_err(|e| {
        anyhow::anyhow!(
            "{}:{}:{}: not JSON, so it is not edited; fix it first: {e}",
            file.display(),
            e.line(),
            e.column()
        )
    })
}

/// `mcpServers` or `servers`, whichever holds `name`.
fn section_holding(raw: &Value, name: &str) -> Option<&'static str> {
    ["mcpServers", "servers"]
        .into_iter()
        .find(|s| raw.get(*s).and_then(|m| m.get(name)).is_some())
}

/// The config file to edit: the one named or found (through its links), else — `--config`
/// or `$OPENPACT_CONFIG` naming a file not there yet, or none found at all — the one to
/// make (the user config dir's when nothing names one); `true` when it is to be made.
fn file_or_new(config_arg: &Option<PathBuf>) -> Result<(PathBuf, bool)> {
    let named = config_arg.clone().or_else(|| {
        std::env::var_os("OPENPACT_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    if let Some(path) = &named
        && !path.exists()
    {
        return Ok((std::path::absolute(path)?, true));
    }
    if let Some(file) = config::file(config_arg.as_deref())? {
        return Ok((std::fs::canonicalize(&file).unwrap_or(file), false));
    }
    let env = |k: &str| std::env::var(k).ok();
    let Some(user) = config::user_config_file(&env) else {
        bail!("no config file found and no user config dir known: pass --config PATH");
    };
    Ok((user, true))
}

/// The edited text checked as the hub would read it (what it reports that the old text did
/// not refuses the edit), then written atomically (0600, the folder made for a new file).
fn check_and_write(
    old: &str,
    new: &str,
    file: &Path,
    created: bool,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<()> {
    let before = config::parse(old, file, env).unwrap_or_else(|_| config::empty());
    refused_by_check(&before, new, file, env)?;
    if created && let Some(dir) = file.parent() {
        crate::platform::create_dir_all(dir, 0o700)
            .with_context(|| format!("cannot make {}", dir.display()))?;
    }
    crate::state::replace(file, new.as_bytes(), 0o600, true)
        .with_context(|| format!("cannot write {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_become_references() {
        let mut to_set = Vec::new();
        assert_eq!(
            kept_out("gh", "GITHUB_TOKEN", "ghp_x", "env", &mut to_set),
            "${GITHUB_TOKEN}"
        );
        assert_eq!(kept_out("gh", "LOG", "debug", "env", &mut to_set), "debug");
        assert_eq!(
            kept_out(
                "my-api",
                "Authorization",
                "Bearer abc",
                "header",
                &mut to_set
            ),
            "Bearer ${MY_API_TOKEN}"
        );
        assert_eq!(
            kept_out("my-api", "X-Api-Key", "abc", "header", &mut to_set),
            "${MY_API_X_API_KEY}"
        );
        let names: Vec<&str> = to_set.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["GITHUB_TOKEN", "MY_API_TOKEN", "MY_API_X_API_KEY"]);
    }
}
