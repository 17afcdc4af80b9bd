//! The MCP Registry (its generic API, `/v0.1/servers`): search it, fetch one server's
//! `server.json`, and make a config entry of it — a package the machine can run (npm through
//! `npx`, PyPI through `uvx`, OCI through `docker`), else a remote — with each required input
//! as a `${VAR}` reference the output names.

use super::addrm::{Entry, ToSet, var_name};
use anyhow::{Result, anyhow, bail};
use serde_json::{Map, Value, json};

/// One server of a search, as `registry search` shows it.
#[derive(Debug, serde::Serialize)]
pub struct Found {
    pub name: String,
    pub version: String,
    pub description: String,
    /// How it can run: `npm`, `pypi`, `oci`, … and `remote`.
    pub kinds: Vec<String>,
}

/// What `add --registry` took from a `server.json`, and why.
#[derive(Debug, serde::Serialize)]
pub struct Chosen {
    pub registry_name: String,
    pub version: String,
    /// `npm`, `pypi`, `oci`, or `remote`.
    pub kind: String,
    /// The package (`identifier@version`) or the URL.
    pub what: String,
    pub why: String,
}

/// `base` + `path`, a registry name or version in it percent-encoded.
fn url(base: &str, path: &str) -> Result<url::Url> {
    url::Url::parse(&format!("{}{path}", base.trim_end_matches('/')))
        .map_err(|e| anyhow!("{base}: not a registry URL ({e}); check --registry-url"))
}

fn encoded(part: &str) -> String {
    url::form_urlencoded::byte_serialize(part.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

async fn get(u: &url::Url, what: &str) -> Result<Value> {
    let http = crate::auth::http::http().map_err(|e| anyhow!(e))?;
    let reply = http.get(u).await.map_err(|e| anyhow!(e))?;
    match reply.status {
        200 => reply
            .json()
            .ok_or_else(|| anyhow!("{u}: the registry's answer is not JSON")),
        404 => bail!(
            "the registry at {} has no {what}",
            u.origin().ascii_serialization()
        ),
        s => bail!("{u}: the registry answered HTTP {s}"),
    }
}

/// The latest version of each server whose name contains `query`.
pub async fn search(base: &str, query: &str) -> Result<Vec<Found>> {
    let u = url(
        base,
        &format!("/v0.1/servers?search={}&version=latest", encoded(query)),
    )?;
    let list = get(&u, "server list").await?;
    Ok(list["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let s = &r["server"];
            let text = |k: &str| s[k].as_str().unwrap_or_default().to_string();
            let mut kinds: Vec<String> = s["packages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["registryType"].as_str().map(str::to_string))
                .collect();
            if s["remotes"].as_array().is_some_and(|r| !r.is_empty()) {
                kinds.push("remote".into());
            }
            kinds.dedup();
            Found {
                name: text("name"),
                version: text("version"),
                description: text("description"),
                kinds,
            }
        })
        .collect())
}

/// The `server.json` of `name` at `version` (default: the latest).
pub async fn fetch(base: &str, name: &str, version: Option<&str>) -> Result<Value> {
    let v = version.unwrap_or("latest");
    let u = url(
        base,
        &format!("/v0.1/servers/{}/versions/{}", encoded(name), encoded(v)),
    )?;
    let what = match version {
        Some(v) => format!("server {name} at version {v}"),
        None => format!("server named {name} (`openpact registry search` lists names)"),
    };
    let answer = get(&u, &what).await?;
    match answer.get("server") {
        Some(s) if s.is_object() => Ok(s.clone()),
        _ => bail!("{u}: the registry's answer holds no server"),
    }
}

/// `io.github.user/weather-server` → `weather-server`: the config name a registry name
/// suggests.
pub fn local_name(registry_name: &str) -> String {
    let last = registry_name.rsplit('/').next().unwrap_or(registry_name);
    last.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// The runner each package type needs.
fn runner(kind: &str) -> Option<&'static str> {
    match kind {
        "npm" => Some("npx"),
        "pypi" => Some("uvx"),
        "oci" => Some("docker"),
        _ => None,
    }
}

/// The config entry for `server` (a `server.json`), named `name` in the config: the first
/// stdio package whose runner `runs` finds, else the first remote, else the first stdio
/// package openpact knows how to start (its runner missing, said in a note).
pub fn entry(server: &Value, name: &str, runs: &dyn Fn(&str) -> bool) -> Result<(Entry, Chosen)> {
    let registry_name = server["name"].as_str().unwrap_or(name).to_string();
    let version = server["version"].as_str().unwrap_or_default().to_string();
    let empty = Vec::new();
    let packages: Vec<&Value> = server["packages"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter(|p| {
            runner(p["registryType"].as_str().unwrap_or_default()).is_some()
                && p["transport"]["type"].as_str().unwrap_or("stdio") == "stdio"
        })
        .collect();
    let remotes = server["remotes"].as_array().unwrap_or(&empty);
    let runnable = packages
        .iter()
        .find(|p| runner(p["registryType"].as_str().unwrap_or_default()).is_some_and(runs));
    let (mut entry, kind, what, why) = match (runnable, remotes.first(), packages.first()) {
        (Some(p), _, _) => {
            let (e, kind, what) = package(p, name)?;
            let why = format!(
                "a {kind} package, and {} is on PATH",
                runner(&kind).unwrap_or("")
            );
            (e, kind, what, why)
        }
        (None, Some(r), _) => {
            let (e, what) = remote(r, name)?;
            let why = if packages.is_empty() {
                "the server is offered as a remote only".to_string()
            } else {
                let missing: Vec<&str> = packages
                    .iter()
                    .filter_map(|p| runner(p["registryType"].as_str().unwrap_or_default()))
                    .collect();
                format!(
                    "a remote, since no runner of its packages is on PATH ({})",
                    missing.join(", ")
                )
            };
            (e, "remote".to_string(), what, why)
        }
        (None, None, Some(p)) => {
            let (e, kind, what) = package(p, name)?;
            let r = runner(&kind).unwrap_or("");
            let why = format!(
                "its only way to run; {r} is not on PATH, so install it before the server can start"
            );
            (e, kind, what, why)
        }
        (None, None, None) => {
            let types: Vec<&str> = server["packages"]
                .as_array()
                .unwrap_or(&empty)
                .iter()
                .filter_map(|p| p["registryType"].as_str())
                .collect();
            bail!(
                "{registry_name} has no package openpact can start (npm, pypi or oci over stdio) and no remote{}",
                if types.is_empty() {
                    String::new()
                } else {
                    format!(" (its packages: {})", types.join(", "))
                }
            )
        }
    };
    entry.notes.insert(0, format!("chose {what}: {why}"));
    Ok((
        entry,
        Chosen {
            registry_name,
            version,
            kind,
            what,
            why,
        },
    ))
}

/// The entry for one stdio package, its kind, and what it runs (`identifier@version`).
fn package(p: &Value, name: &str) -> Result<(Entry, String, String)> {
    let kind = p["registryType"].as_str().unwrap_or_default().to_string();
    let id = p["identifier"]
        .as_str()
        .ok_or_else(|| anyhow!("a package of {name} has no identifier"))?;
    let version = p["version"].as_str().filter(|v| !v.is_empty());
    let mut entry = Entry::default();
    let mut args: Vec<String> = Vec::new();
    let runtime = arguments(&p["runtimeArguments"], name, &mut entry);
    let (command, what) = match kind.as_str() {
        "npm" => {
            let what = version.map_or(id.to_string(), |v| format!("{id}@{v}"));
            if !runtime.iter().any(|a| a == "-y" || a == "--yes") {
                args.push("-y".into());
            }
            args.extend(runtime);
            args.push(what.clone());
            ("npx", what)
        }
        "pypi" => {
            let what = version.map_or(id.to_string(), |v| format!("{id}=={v}"));
            args.extend(runtime);
            args.push(what.clone());
            ("uvx", what)
        }
        _ => {
            // An image reference carries its tag (or digest) already in the current schema.
            let tagged = id
                .rsplit('/')
                .next()
                .is_some_and(|l| l.contains(':') || l.contains('@'));
            let what = match version {
                Some(v) if !tagged => format!("{id}:{v}"),
                _ => id.to_string(),
            };
            args.extend(["run", "-i", "--rm"].map(String::from));
            args.extend(runtime);
            ("docker", what)
        }
    };
    let env = env_vars(&p["environmentVariables"], name, &mut entry);
    if kind == "oci" {
        // A container sees only the variables passed to it by name.
        for k in env.keys() {
            args.extend(["-e".to_string(), k.clone()]);
        }
        args.push(what.clone());
    }
    args.extend(arguments(&p["packageArguments"], name, &mut entry));
    entry.value.insert("command".into(), json!(command));
    entry.value.insert("args".into(), json!(args));
    if !env.is_empty() {
        entry.value.insert("env".into(), Value::Object(env));
    }
    Ok((entry, kind, what))
}

/// The entry for one remote (`streamable-http` or `sse`), and its URL.
fn remote(r: &Value, name: &str) -> Result<(Entry, String)> {
    let mut entry = Entry::default();
    let template = r["url"]
        .as_str()
        .ok_or_else(|| anyhow!("a remote of {name} has no url"))?;
    let url = filled(template, &r["variables"], name, &mut entry);
    entry.value.insert("url".into(), json!(url));
    if r["type"].as_str() == Some("sse") {
        entry.value.insert("type".into(), json!("sse"));
    }
    let headers = inputs(&r["headers"], name, "header", &mut entry);
    if !headers.is_empty() {
        entry.value.insert("headers".into(), Value::Object(headers));
    }
    Ok((entry, url))
}

fn env_vars(list: &Value, name: &str, entry: &mut Entry) -> Map<String, Value> {
    inputs(list, name, "environment variable", entry)
}

/// `KeyValueInput`s (environment variables, headers): a fixed `value` written as given (its
/// `{variables}` filled), a required one as a `${VAR}` reference to set, an optional one left
/// out and mentioned.
fn inputs(list: &Value, name: &str, kind: &str, entry: &mut Entry) -> Map<String, Value> {
    let mut out = Map::new();
    for input in list.as_array().into_iter().flatten() {
        let Some(key) = input["name"].as_str() else {
            continue;
        };
        let description = input["description"].as_str().unwrap_or_default();
        let about = if description.is_empty() {
            String::new()
        } else {
            format!(": {description}")
        };
        if let Some(v) = input["value"].as_str() {
            let v = filled(v, &input["variables"], name, entry);
            out.insert(key.to_string(), json!(v));
        } else if input["isRequired"].as_bool() == Some(true) {
            let var = if kind == "header" {
                format!("{}_{}", var_name(name), var_name(key))
            } else {
                key.to_string()
            };
            out.insert(key.to_string(), json!(format!("${{{var}}}")));
            entry.to_set.push(ToSet {
                name: var,
                why: format!("required {kind} {key} of {name}{about}"),
            });
        } else {
            let default = input["default"]
                .as_str()
                .map_or(String::new(), |d| format!(" (default {d})"));
            entry.notes.push(format!(
                "optional {kind} {key} left out{default}{about}; add it to the entry to set it"
            ));
        }
    }
    out
}

/// Runtime or package `Argument`s as command-line words: a positional's value (or default),
/// a named one as `--flag value`; a required input with no value becomes a `${VAR}` to set,
/// an optional one is left out and mentioned.
fn arguments(list: &Value, name: &str, entry: &mut Entry) -> Vec<String> {
    let mut words = Vec::new();
    for a in list.as_array().into_iter().flatten() {
        let flag = a["name"].as_str();
        let value = a["value"]
            .as_str()
            .or_else(|| a["default"].as_str())
            .map(|v| filled(v, &a["variables"], name, entry));
        let label = flag
            .or_else(|| a["valueHint"].as_str())
            .unwrap_or("argument");
        let value = match value {
            Some(v) => Some(v),
            None if a["isRequired"].as_bool() == Some(true) => {
                let var = format!(
                    "{}_{}",
                    var_name(name),
                    var_name(label.trim_start_matches('-'))
                );
                entry.to_set.push(ToSet {
                    name: var.clone(),
                    why: format!(
                        "required argument {label} of {name}{}",
                        a["description"]
                            .as_str()
                            .map_or(String::new(), |d| format!(": {d}"))
                    ),
                });
                Some(format!("${{{var}}}"))
            }
            None if flag.is_some() && a["format"].as_str() == Some("boolean") => None,
            None => {
                entry
                    .notes
                    .push(format!("optional argument {label} left out"));
                continue;
            }
        };
        words.extend(flag.map(str::to_string));
        words.extend(value);
    }
    words
}

/// `{var}` in a value or URL template filled from its `variables`: the variable's fixed
/// value or default, else a `${VAR}` reference noted as to set.
fn filled(template: &str, variables: &Value, name: &str, entry: &mut Entry) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}').map(|c| open + c) else {
            break;
        };
        let key = &rest[open + 1..close];
        out.push_str(&rest[..open]);
        let v = &variables[key];
        match v["value"].as_str().or_else(|| v["default"].as_str()) {
            Some(given) => out.push_str(given),
            None => {
                let var = format!("{}_{}", var_name(name), var_name(key));
                if !entry.to_set.iter().any(|t| t.name == var) {
                    entry.to_set.push(ToSet {
                        name: var.clone(),
                        why: format!("the {{{key}}} in {template} of {name}"),
                    });
                }
                out.push_str(&format!("${{{var}}}"));
            }
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> Value {
        json!({
            "name": "io.github.user/local-weather",
            "description": "Weather",
            "version": "1.0.0",
            "packages": [{
                "registryType": "npm",
                "identifier": "@modelcontextprotocol/server-weather",
                "version": "1.0.0",
                "transport": {"type": "stdio"},
                "packageArguments": [
                    {"type": "positional", "valueHint": "config_path", "isRequired": true},
                    {"type": "named", "name": "--port", "value": "8080"}
                ],
                "environmentVariables": [
                    {"name": "API_KEY", "isSecret": true, "isRequired": true},
                    {"name": "UNITS", "default": "metric"}
                ]
            }],
            "remotes": [{"type": "streamable-http", "url": "https://{host}/mcp",
                         "variables": {"host": {"default": "api.example.com"}}}]
        })
    }

    #[test]
    fn a_runnable_package_first_its_inputs_as_references() {
        let (e, chosen) = entry(&weather(), "weather", &|_| true).unwrap();
        assert_eq!(chosen.kind, "npm");
        assert_eq!(
            Value::Object(e.value),
            json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-weather@1.0.0", "${WEATHER_CONFIG_PATH}", "--port", "8080"],
                   "env": {"API_KEY": "${API_KEY}"}})
        );
        let set: Vec<&str> = e.to_set.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(set, ["API_KEY", "WEATHER_CONFIG_PATH"]);
        assert!(e.notes.iter().any(|n| n.contains("UNITS")), "{:?}", e.notes);
    }

    #[test]
    fn a_remote_when_no_runner_is_there() {
        let (e, chosen) = entry(&weather(), "weather", &|_| false).unwrap();
        assert_eq!(chosen.kind, "remote");
        assert_eq!(e.value["url"], "https://api.example.com/mcp");
        assert!(chosen.why.contains("npx"), "{}", chosen.why);
    }

    #[test]
    fn oci_passes_its_variables_into_the_container() {
        let s = json!({"name": "io.example/x", "version": "2", "packages": [{
            "registryType": "oci", "identifier": "docker.io/example/x:2.0",
            "transport": {"type": "stdio"},
            "environmentVariables": [{"name": "TOKEN", "isRequired": true}]}]});
        let (e, _) = entry(&s, "x", &|_| true).unwrap();
        assert_eq!(
            e.value["args"],
            json!([
                "run",
                "-i",
                "--rm",
                "-e",
                "TOKEN",
                "docker.io/example/x:2.0"
            ])
        );
        assert_eq!(local_name("io.github.User/My.Server"), "my-server");
    }
}
