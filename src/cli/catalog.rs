//! The commands that ask the servers: the listings (`tools`, `prompts`, `resources`),
//! `tools --search`, and one request through an in-process session (`call`, `prompt`,
//! `read`).

use super::{Listing, load, output, settle, start_for};
use crate::config::Config;
use crate::hub::{Hub, LocalClient};
use crate::jsonrpc::{self, RawObject};
use anyhow::{Context, Result, bail};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `call SERVER:TOOL` and `prompt SERVER:NAME` (`method`: `tools/call` or `prompts/get`),
/// their arguments read before the config.
pub(super) async fn call(
    config: &Option<PathBuf>,
    state: &Path,
    method: &str,
    name: &str,
    arguments: Option<&str>,
    json: bool,
) -> Result<ExitCode> {
    let params = format!(
        "{{\"name\":{},\"arguments\":{}}}",
        jsonrpc::quote(name),
        arguments_object(arguments)?
    );
    invoke(&load(config)?, state, Some(name), method, &params, json).await
}

/// `read URI`.
pub(super) async fn read(
    config: &Option<PathBuf>,
    state: &Path,
    uri: &str,
    json: bool,
) -> Result<ExitCode> {
    let params = format!("{{\"uri\":{}}}", jsonrpc::quote(uri));
    invoke(&load(config)?, state, None, "resources/read", &params, json).await
}

pub(super) async fn list(
    config: &Config,
    state: &Path,
    what: Listing,
    json: bool,
) -> Result<ExitCode> {
    let hub = Hub::start(config, state);
    hub.declare_client(None);
    settle(&hub).await;
    let catalog = hub.catalog();
    let shown = if json {
        output::listing_json(&hub, &catalog, what)
    } else {
        output::listing_human(&hub, &catalog, what);
        Ok(())
    };
    hub.shutdown().await;
    shown?;
    Ok(ExitCode::SUCCESS)
}

/// `openpact tools --search`: the whole catalogue ranked for `query` by the index that
/// `search_tools` uses.
pub(super) async fn search_tools(
    config: &Config,
    state: &Path,
    query: &str,
    limit: Option<usize>,
    json: bool,
) -> Result<ExitCode> {
    if query.trim().is_empty() {
        bail!("--search needs words: the task in plain words, like --search \"make a folder\"");
    }
    // Both are checked to be 1..=MAX_LIMIT (the argument by clap, the setting by config).
    let limit = limit.unwrap_or(config.hub.tool_search.limit);
    let hub = Hub::start(config, state);
    hub.declare_client(None);
    settle(&hub).await;
    let results = crate::hub::views::search_catalog(&hub, query, limit).await;
    let total = hub.catalog().tools.items.len();
    hub.shutdown().await;
    output::search_results(query, &results, total, json)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads a JSON-object argument (`-` = stdin; absent = `{}`) and returns it as JSON text.
fn arguments_object(arguments: Option<&str>) -> Result<String> {
    let text = match arguments {
        None => return Ok("{}".to_string()),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the arguments from stdin")?;
            if s.trim().is_empty() {
                bail!(
                    "`-` reads the arguments from stdin, which was empty; give a JSON object there, like '{{\"message\": \"hi\"}}' ('{{}}' for none)"
                );
            }
            s
        }
        Some(text) => text.to_string(),
    };
    let parsed: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("the arguments are not valid JSON: {}", text.trim()))?;
    if !parsed.is_object() {
        bail!("the arguments must be a JSON object, like '{{\"message\": \"hi\"}}'");
    }
    Ok(parsed.to_string())
}

/// Runs one request through an in-process session, as an editor would, with progress shown
/// on a terminal and Ctrl-C cancelling the request upstream. `name` (SERVER:NAME) limits
/// which servers are started when it clearly names one.
async fn invoke(
    config: &Config,
    state: &Path,
    name: Option<&str>,
    method: &str,
    params: &str,
    json: bool,
) -> Result<ExitCode> {
    let hub = start_for(config, state, name);
    // Connect first: servers wait to learn the client's capabilities before `initialize`.
    let Some((client, mut messages)) =
        LocalClient::connect(hub.clone(), "openpact-cli", "{}").await
    else {
        bail!("the hub's session closed before it answered initialize")
    };
    settle(&hub).await;
    let progress = output::Progress::new();
    let params = if progress.visible() {
        with_progress_token(params)
    } else {
        params.to_string()
    };
    let (id, mut response) = client.send_request(method, &params);
    let reply = loop {
        tokio::select! {
            reply = &mut response => break reply.ok(),
            Some(m) = messages.recv() => progress.update(&m),
            _ = tokio::signal::ctrl_c() => {
                client.notify("notifications/cancelled", Some(&format!("{{\"requestId\":{id},\"reason\":\"interrupted\"}}")));
                progress.finish();
                // Let the cancel reach the server before it is stopped.
                tokio::time::sleep(Duration::from_millis(50)).await;
                hub.shutdown().await;
                output::interrupted();
                return Ok(ExitCode::from(130));
            }
        }
    };
    progress.finish();
    hub.shutdown().await;
    let Some(reply) = reply else {
        bail!("the request got no answer")
    };
    if let Some(error) = reply.error() {
        output::rpc_error(error, json);
        return Ok(ExitCode::from(1));
    }
    let result = reply.result().unwrap_or("{}");
    let failed = match method {
        "tools/call" => output::call_result(result, json)?,
        "prompts/get" => output::prompt_result(result, json)?,
        _ => output::read_result(result, json)?,
    };
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn with_progress_token(params: &str) -> String {
    match RawObject::parse(params) {
        Ok(o) => o.with("_meta", "{\"progressToken\":\"cli\"}"),
        Err(_) => params.to_string(),
    }
}
