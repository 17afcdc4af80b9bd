//! Part 7: a remote server. Sequential `tools/call echo` to a real Streamable HTTP server on
//! loopback (`@modelcontextprotocol/server-everything` in `streamableHttp` mode, from the test
//! peers), DIRECT with this program as the HTTP client and through a hub whose config names
//! the server's URL. Both sides use reqwest on a one-thread tokio runtime and sse-stream for
//! the answers' event streams, as the hub does, so the difference is the hub's own work.
//!
//! The goal (≤ [`GOAL_RATIO`]×) is information only: an HTTP round trip to a Node server
//! takes hundreds of µs, so what the hub adds should hardly show. Without the peers
//! (`target/peers/peers.json`, or `OPENPACT_PEERS_JSON`) the part is skipped with a note.

use crate::client::{self, CallTemplate, Peer, Pids, pass_through};
use crate::http::{HttpClient, ServerProcess};
use crate::latency::{LatencyPart, measure, sample};
use crate::{Ctx, Params};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The design goal, printed as information: hub p50 over direct p50.
pub const GOAL_RATIO: f64 = 1.5;
/// The server measured, as named in the report.
pub const SERVER: &str = "server-everything (Node), Streamable HTTP on loopback";
/// The server's name in the hub's config: its tools are `remote:NAME`.
const NAME: &str = "remote";
/// How long the server may take to listen, and the hub to list the server's tools.
const READY: Duration = Duration::from_secs(30);

/// The peers file of `.ci/peers.sh`, if the peers are installed (part 10 reads it too).
pub fn peers_json() -> Option<PathBuf> {
    let path = std::env::var_os("OPENPACT_PEERS_JSON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/peers.json"),
        PathBuf::from,
    );
    path.is_file().then_some(path)
}

/// Part 7's runs (`measured_again` is always false: no gate), or `None` with a note printed
/// when the peers are not installed.
pub fn run(ctx: &Ctx, p: &Params) -> Result<Option<LatencyPart>> {
    let Some(peers) = peers_json() else {
        println!(
            "7. remote server: skipped, the test peers are not installed (run `bash .ci/peers.sh target/peers`)"
        );
        return Ok(None);
    };
    let server = Server::start(ctx, &peers)?;
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let counts = (p.remote_warmup, p.remote_calls);
    let template = CallTemplate::echo("echo");
    let hub_template = CallTemplate::echo(&format!("{NAME}:echo"));
    let mut part = LatencyPart {
        direct: Vec::new(),
        hub: Vec::new(),
        measured_again: false,
        limit: None,
    };
    for rep in 0..p.remote_runs.max(1) {
        let direct = Pids {
            hub: None,
            fixture: server.process.pid,
        };
        let mut http = HttpClient::connect(&url)?;
        let check = http.call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "hello"}}),
        )?;
        check_echo(&check).context("server-everything (direct)")?;
        // The very bytes the hub side sends, the tool name aside.
        part.direct.push(sample(counts, direct, ctx.clk_tck, || {
            http.timed(&template)
        })?);
        http.close();

        let (mut hub, pids) =
            start_hub(ctx, &format!("hub-remote-{rep}"), &url, server.process.pid)?;
        part.hub
            .push(measure(&mut hub, &hub_template, counts, pids, ctx.clk_tck)?);
        hub.close(Duration::from_secs(10));
    }
    Ok(Some(part))
}

/// Starts a hub whose one server is the remote URL, waits until it lists `remote:echo`, and
/// checks that the echo comes back.
fn start_hub(ctx: &Ctx, label: &str, url: &str, server: u32) -> Result<(Peer, Pids)> {
    let mut servers = serde_json::Map::new();
    servers.insert(NAME.into(), json!({"url": url, "type": "streamable-http"}));
    let mut hub = client::spawn_hub_on(ctx, label, servers, &pass_through())?;
    hub.label = format!("hub ({label})");
    hub.initialize()?;
    let echo = format!("{NAME}:echo");
    let deadline = Instant::now() + READY;
    // The hub answers initialize before a remote server is connected: list until it is.
    while !hub.list_tools()?.unwrap_or_default().contains(&echo) {
        if Instant::now() > deadline {
            bail!("{} never listed {echo}", hub.label);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let check = hub.call(
        "tools/call",
        json!({"name": echo, "arguments": {"message": "hello"}}),
    )?;
    check_echo(&check).with_context(|| hub.label.clone())?;
    let pids = Pids {
        hub: Some(hub.pid),
        fixture: server,
    };
    Ok((hub, pids))
}

/// server-everything's echo answers `Echo: MESSAGE`.
fn check_echo(result: &Value) -> Result<()> {
    match result.pointer("/content/0/text").and_then(Value::as_str) {
        Some("Echo: hello") => Ok(()),
        _ => bail!("echo answered {result}"),
    }
}

/// server-everything in `streamableHttp` mode on a free loopback port, stopped on drop.
struct Server {
    process: ServerProcess,
    port: u16,
}

impl Server {
    /// Launched as the tests do: Node with the project's loopback shim, `PORT` in the
    /// environment, the MCP endpoint at `/mcp`.
    fn start(ctx: &Ctx, peers: &Path) -> Result<Server> {
        let vars: Value = serde_json::from_slice(
            &std::fs::read(peers).with_context(|| format!("reading {}", peers.display()))?,
        )
        .with_context(|| format!("{} is not JSON", peers.display()))?;
        // PEER_EVERYTHING is `node …/dist/index.js stdio`.
        let words: Vec<&str> = vars
            .get("PEER_EVERYTHING")
            .and_then(Value::as_str)
            .map(|c| c.split(' ').collect())
            .unwrap_or_default();
        let [node, script, ..] = words[..] else {
            bail!("no PEER_EVERYTHING in {}", peers.display());
        };
        let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/remote/localhost.cjs");
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        // It logs a line per request: to a file, so a full pipe never stalls it.
        let log = ctx.work.join("server-everything.log");
        let log = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        let mut cmd = Command::new(node);
        cmd.arg("--require")
            .arg(&shim)
            .args([script, "streamableHttp"])
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        let mut process = ServerProcess::spawn("server-everything", cmd)?;
        let deadline = Instant::now() + READY;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if process.exited() {
                bail!(
                    "server-everything exited at start; see target/bench-work/server-everything.log"
                );
            }
            if Instant::now() > deadline {
                bail!("server-everything never listened on port {port}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Server { process, port })
    }
}
