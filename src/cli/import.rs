//! `openpact import`: the MCP servers every host has configured, each once, made openpact
//! entries with their secrets turned into `${VAR}` references; with `--write`, added to the
//! config file in place (comments and layout kept).

use super::hosts::{self, Dirs, HOSTS, Host};
use super::output;
use crate::config::edit::{self, Added};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What `import` found and did, for the output.
#[derive(Debug, Default, Serialize)]
pub struct Imported {
    /// Every file looked at.
    pub looked: Vec<Looked>,
    /// Each distinct server once.
    pub servers: Vec<Server>,
    /// Entries openpact cannot run, with why.
    pub skipped: Vec<Skipped>,
    /// The variables the written entries refer to instead of a value found in clear.
    pub variables: Vec<Variable>,
    /// The config file added to (or that would be).
    pub config: String,
    pub written: bool,
}

#[derive(Debug, Serialize)]
pub struct Looked {
    pub host: &'static str,
    pub title: &'static str,
    pub path: String,
    pub found: bool,
    /// Why the file could not be read.
    pub error: Option<String>,
    pub servers: usize,
}

#[derive(Debug, Serialize)]
pub struct Server {
    pub name: String,
    pub entry: Value,
    pub sources: Vec<Source>,
    /// `new`, `added`, or `present` (the config has a server of that name: left alone).
    pub status: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct Source {
    pub host: &'static str,
    pub path: String,
    /// The name the host gave it.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Skipped {
    pub source: Source,
    pub why: String,
}

#[derive(Debug, Serialize)]
pub struct Variable {
    pub name: String,
    pub servers: Vec<String>,
    /// What it stands for: a secret found in clear, or a VS Code input.
    pub why: String,
    /// The value is known (found in a host file): the person has it to hand.
    #[serde(skip)]
    value: Option<String>,
}

/// A runnable entry as read: where from, the openpact entry, the inputs it refers to.
type Found = (Source, Map<String, Value>, Vec<(String, String)>);

/// Whether an entry starts openpact's own hub (`openpact connect`, `serve`, `--mcp`): an
/// editor `setup` pointed at openpact, not a server to import into it.
fn is_openpact(server: &Map<String, Value>) -> bool {
    let command = server.get("command").and_then(Value::as_str).unwrap_or("");
    let named = std::path::Path::new(command)
        .file_name()
        .is_some_and(|n| n == "openpact");
    let hub = server
        .get("args")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .any(|a| matches!(a, "connect" | "serve" | "--mcp"))
        });
    named && hub
}

/// `openpact import`.
pub fn run(
    config_arg: &Option<PathBuf>,
    home: Option<&Path>,
    from: &[String],
    write: bool,
    json: bool,
) -> Result<ExitCode> {
    let chosen: Vec<&Host> = if from.is_empty() {
        HOSTS.iter().collect()
    } else {
        from.iter()
            .map(|id| hosts::named(id).map_err(anyhow::Error::msg))
            .collect::<Result<_>>()?
    };
    let cwd = std::env::current_dir().context("cannot determine the current directory")?;
    let Some(dirs) = Dirs::new(home, cwd) else {
        bail!("$HOME is not set: pass --home DIR to say where the hosts' files are");
    };
    let config = target_config(config_arg)?;
    let text = hosts::text_of(&config)?;
    let existing = existing_names(text.as_deref(), &config)?;
    let mut done = Imported {
        config: config.display().to_string(),
        ..Imported::default()
    };
    let mut found: Vec<Found> = Vec::new();
    for host in chosen {
        for place in host.places(&dirs) {
            let path = place.path.display().to_string();
            let mut looked = Looked {
                host: host.id,
                title: host.title,
                path: path.clone(),
                found: false,
                error: None,
                servers: 0,
            };
            match hosts::read(&place, &dirs) {
                Ok(None) => {}
                Err(e) => {
                    looked.found = true;
                    looked.error = Some(e.to_string());
                }
                Ok(Some(read)) => {
                    looked.found = true;
                    looked.servers = read.entries.len();
                    for e in read.entries {
                        let source = Source {
                            host: host.id,
                            path: path.clone(),
                            name: e.name,
                            scope: e.scope,
                        };
                        match e.server {
                            // What `setup` wrote: the editor already goes through openpact.
                            Ok(server) if is_openpact(&server) => done.skipped.push(Skipped {
                                source,
                                why: "openpact itself (`openpact setup` points editors at it)"
                                    .into(),
                            }),
                            Ok(server) => found.push((source, server, e.inputs)),
                            Err(why) => done.skipped.push(Skipped { source, why }),
                        }
                    }
                }
            }
            done.looked.push(looked);
        }
    }
    merge(found, &existing, &mut done);
    if write {
        write_config(&config, text, &mut done)?;
    }
    output::imported(&done, json)?;
    let unreadable = done.looked.iter().any(|l| l.error.is_some());
    Ok(if unreadable {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The config file `--write` adds to: `--config`, else the one openpact finds, else the
/// user's (`~/.config/openpact/mcp.json`), made when missing.
fn target_config(config_arg: &Option<PathBuf>) -> Result<PathBuf> {
    if let Some(path) = config_arg {
        return Ok(path.clone());
    }
    if let Some(found) = crate::config::file(None)? {
        return Ok(found);
    }
    crate::config::user_config_file(&|k| std::env::var(k).ok())
        .context("no config file found and no user config dir: pass --config PATH")
}

/// The server names the config has already.
fn existing_names(text: Option<&str>, path: &Path) -> Result<Vec<String>> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let root = hosts::parse_json(text, path)?;
    Ok(root
        .get("mcpServers")
        .and_then(Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default())
}

/// Each distinct server once (the same entry in several hosts is one, with every source), a
/// name of its own (a different server under a taken name gets `NAME-HOST`), and its
/// secrets made references.
fn merge(found: Vec<Found>, existing: &[String], done: &mut Imported) {
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut raw: Vec<Map<String, Value>> = Vec::new();
    for (source, server, inputs) in found {
        let key = canonical(&Value::Object(server.clone()));
        if let Some((_, i)) = seen.iter().find(|(k, _)| *k == key) {
            done.servers[*i].sources.push(source);
            continue;
        }
        let taken = |n: &str| done.servers.iter().any(|s| s.name == n);
        let mut name = source.name.clone();
        if taken(&name) {
            name = format!("{}-{}", source.name, source.host);
            let mut n = 2;
            while taken(&name) {
                name = format!("{}-{}-{n}", source.name, source.host);
                n += 1;
            }
        }
        for (var, what) in inputs {
            note_var(
                &mut done.variables,
                &var,
                &name,
                format!("VS Code input: {what}"),
                None,
            );
        }
        seen.push((key, done.servers.len()));
        raw.push(server);
        done.servers.push(Server {
            status: if existing.contains(&name) {
                "present"
            } else {
                "new"
            },
            name,
            entry: Value::Null,
            sources: vec![source],
        });
    }
    for (server, entry) in done.servers.iter_mut().zip(raw) {
        server.entry = Value::Object(hide_secrets(entry, &server.name, &mut done.variables));
        for var in references(&server.entry) {
            let why = "the host's entry refers to it".to_string();
            note_var(&mut done.variables, &var, &server.name, why, None);
        }
    }
}

/// The variables `v`'s strings refer to without a default (`${VAR}`, `${env:VAR}`): the
/// config does not load while they are unset.
fn references(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut walk = |s: &str| {
        let mut rest = s;
        while let Some(at) = rest.find("${") {
            let body = &rest[at + 2..];
            let Some(end) = body.find('}') else { break };
            let name = body[..end].strip_prefix("env:").unwrap_or(&body[..end]);
            if !name.contains(":-") && !name.is_empty() {
                out.push(name.to_string());
            }
            rest = &body[end..];
        }
    };
    fn each(v: &Value, f: &mut dyn FnMut(&str)) {
        match v {
            Value::String(s) => f(s),
            Value::Array(a) => a.iter().for_each(|v| each(v, f)),
            Value::Object(m) => m.values().for_each(|v| each(v, f)),
            _ => {}
        }
    }
    each(v, &mut walk);
    out
}

/// `v` as text with every object's keys sorted, so two hosts' copies of one entry compare equal.
fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// `entry` with every `env` value and header that looks secret replaced by a `${VAR}`
/// reference, the variables noted in `vars`.
fn hide_secrets(
    mut entry: Map<String, Value>,
    server: &str,
    vars: &mut Vec<Variable>,
) -> Map<String, Value> {
    if let Some(Value::Object(env)) = entry.get_mut("env") {
        for (k, v) in env.iter_mut() {
            let Value::String(s) = v else { continue };
            if s.is_empty() || s.contains("${") || !crate::config::secret_entry(k, s) {
                continue;
            }
            let var = note_var(
                vars,
                k,
                server,
                "a secret found in clear".into(),
                Some(s.clone()),
            );
            *v = Value::String(format!("${{{var}}}"));
        }
    }
    let prefix = super::hosts::var_name(server);
    if let Some(Value::Object(headers)) = entry.get_mut("headers") {
        for (k, v) in headers.iter_mut() {
            let Value::String(s) = v else { continue };
            if s.is_empty() || s.contains("${") || !crate::config::secret_entry(k, s) {
                continue;
            }
            // `Bearer TOKEN` keeps its scheme: the variable holds the token alone.
            let (scheme, secret) = match s.split_once(' ') {
                Some((scheme, rest)) if ["Bearer", "Basic", "Token"].contains(&scheme) => {
                    (format!("{scheme} "), rest.to_string())
                }
                _ => (String::new(), s.clone()),
            };
            let wanted = if k.eq_ignore_ascii_case("authorization") {
                format!("{prefix}_TOKEN")
            } else {
                format!("{prefix}_{}", super::hosts::var_name(k))
            };
            let var = note_var(
                vars,
                &wanted,
                server,
                format!("the `{k}` header, found in clear"),
                Some(secret),
            );
            *v = Value::String(format!("{scheme}${{{var}}}"));
        }
    }
    entry
}

/// Notes that `server` needs variable `name` (holding `value` when known) and returns the
/// name to use: `name`, unless another server's `name` holds a different value, then
/// `SERVER_NAME`.
fn note_var(
    vars: &mut Vec<Variable>,
    name: &str,
    server: &str,
    why: String,
    value: Option<String>,
) -> String {
    let mut name = name.to_string();
    if let Some(v) = vars.iter_mut().find(|v| v.name == name) {
        if v.value == value || v.value.is_none() || value.is_none() {
            if !v.servers.iter().any(|s| s == server) {
                v.servers.push(server.to_string());
            }
            return name;
        }
        name = format!("{}_{name}", super::hosts::var_name(server));
    }
    vars.push(Variable {
        name: name.clone(),
        servers: vec![server.to_string()],
        why,
        value,
    });
    name
}

/// Adds the new servers to the config file (made when missing), checks the result as
/// `config check` does (with the new variables standing set), and writes it.
fn write_config(config: &Path, text: Option<String>, done: &mut Imported) -> Result<()> {
    let mut text = text.unwrap_or_else(|| "{\n  \"mcpServers\": {}\n}\n".to_string());
    let mut added = false;
    for server in done.servers.iter_mut().filter(|s| s.status == "new") {
        let value = serde_json::to_string_pretty(&server.entry)?;
        match edit::add_member(&text, &["mcpServers"], &server.name, &value)
            .with_context(|| format!("cannot add to {}", config.display()))?
        {
            Added::Text(t) => {
                text = t;
                server.status = "added";
                added = true;
            }
            Added::Present => server.status = "present",
        }
    }
    if !added {
        return Ok(());
    }
    let names: Vec<String> = done.variables.iter().map(|v| v.name.clone()).collect();
    let env = |k: &str| {
        if names.iter().any(|n| n == k) {
            Some("set".to_string())
        } else {
            std::env::var(k).ok()
        }
    };
    crate::config::parse(&text, config, &env).map_err(|e| {
        anyhow::anyhow!("the servers were not added: the config would not load:\n{e}")
    })?;
    if let Some(dir) = config.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::platform::create_dir_all(dir, 0o700)
            .with_context(|| format!("cannot make {}", dir.display()))?;
    }
    crate::state::replace(config, text.as_bytes(), 0o600, true)
        .with_context(|| format!("cannot write {}", config.display()))?;
    done.written = true;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_editor_pointed_at_openpact_is_not_imported_into_it() {
        let entry = |v: Value| v.as_object().unwrap().clone();
        assert!(is_openpact(&entry(
            json!({"command": "/usr/local/bin/openpact", "args": ["connect", "--config", "x.json"]})
        )));
        assert!(is_openpact(&entry(
            json!({"command": "openpact", "args": ["--config", "x", "serve"]})
        )));
        assert!(!is_openpact(&entry(
            json!({"command": "openpact", "args": ["tools"]})
        )));
        assert!(!is_openpact(&entry(
            json!({"command": "npx", "args": ["-y", "connect"]})
        )));
    }

    #[test]
    fn secrets_become_references_and_names_are_kept_apart() {
        let mut vars = Vec::new();
        let entry = json!({"command": "x", "env": {"GITHUB_TOKEN": "ghp_abc", "LOG": "debug", "X": "sk-1", "Y": "${Y}"},
                           "headers": {"Authorization": "Bearer abc", "X-Api-Key": "k"}});
        let Value::Object(m) = entry else { panic!() };
        let out = Value::Object(hide_secrets(m, "my-gh", &mut vars));
        assert_eq!(
            out,
            json!({"command": "x", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "LOG": "debug", "X": "${X}", "Y": "${Y}"},
                   "headers": {"Authorization": "Bearer ${MY_GH_TOKEN}", "X-Api-Key": "${MY_GH_X_API_KEY}"}})
        );
        // Another server's GITHUB_TOKEN with another value gets a name of its own.
        let Value::Object(m) = json!({"env": {"GITHUB_TOKEN": "ghp_other"}}) else {
            panic!()
        };
        let out = Value::Object(hide_secrets(m, "gh2", &mut vars));
        assert_eq!(out["env"]["GITHUB_TOKEN"], "${GH2_GITHUB_TOKEN}");
    }

    #[test]
    fn the_same_entry_in_any_key_order_is_one() {
        assert_eq!(
            canonical(&json!({"a": 1, "b": {"y": 2, "x": 1}})),
            canonical(&json!({"b": {"x": 1, "y": 2}, "a": 1}))
        );
    }
}
