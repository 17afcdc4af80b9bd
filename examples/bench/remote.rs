//! Part 7: a remote server. Sequential `tools/call echo` to a real Streamable HTTP server on
//! loopback (`@modelcontextprotocol/server-everything` in `streamableHttp` mode, from the test
//! peers), DIRECT with this program as the HTTP client and through a hub whose config names
//! the server's URL. Both sides use reqwest on a one-thread tokio runtime and sse-stream for
//! the answers' event streams, as the hub does, so the difference is the hub's own work.
//!
//! The goal (≤ [`GOAL_RATIO`]×) is information only: an HTTP round trip to a Node server
//! takes hundreds of µs, so what the hub adds should hardly show. Without the peers
//! (`target/peers/peers.json`, or `OPENPACT_PEERS_JSON`) the part is skipped with a note.

use crate::client::{self, CallTemplate, Peer, Pids, pass_through, pids};
use crate::latency::{LatencyPart, measure, sample};
use crate::{Ctx, Params};
use anyhow::{Context, Result, anyhow, bail};
use futures_core::Stream;
use serde_json::{Value, json};
use sse_stream::{Sse, SseByteStream};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The design goal, printed as information: hub p50 over direct p50.
pub const GOAL_RATIO: f64 = 1.5;
/// The server measured, as named in the report.
pub const SERVER: &str = "server-everything (Node), Streamable HTTP on loopback";
/// The server's name in the hub's config: its tools are `remote:NAME`.
const NAME: &str = "remote";
/// How long the server may take to listen, and the hub to list the server's tools.
const READY: Duration = Duration::from_secs(30);

/// The peers file of `.ci/peers.sh`, if the peers are installed.
fn peers_json() -> Option<PathBuf> {
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
    };
    for rep in 0..p.remote_runs.max(1) {
        let direct = Pids {
            hub: None,
            fixture: server.pid,
        };
        let mut http = HttpClient::connect(&url)?;
        part.direct.push(sample(counts, direct, ctx.clk_tck, || {
            // The very bytes the hub side sends, the tool name aside.
            let (id, mut body) = (http.next_id(), Vec::with_capacity(128));
            template.write(&mut body, id)?;
            http.timed_call(body, id)
        })?);
        http.close();

        let (mut hub, pids) = start_hub(ctx, &format!("hub-remote-{rep}"), &url, server.pid)?;
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

/// server-everything in `streamableHttp` mode on a free loopback port, killed on drop.
struct Server {
    child: Child,
    pid: u32,
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
        let child = Command::new(node)
            .arg("--require")
            .arg(&shim)
            .args([script, "streamableHttp"])
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| format!("cannot start {node} {script}"))?;
        let pid = child.id();
        pids().push(pid);
        let mut server = Server { child, pid, port };
        let deadline = Instant::now() + READY;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = server.child.try_wait() {
                bail!(
                    "server-everything exited at start ({status}); see target/bench-work/server-everything.log"
                );
            }
            if Instant::now() > deadline {
                bail!("server-everything never listened on port {port}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        pids().retain(|p| *p != self.pid);
    }
}

/// The direct side: an MCP client over Streamable HTTP with one session.
struct HttpClient {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    url: String,
    session: Option<String>,
    protocol: Option<String>,
    next_id: u64,
}

impl HttpClient {
    /// A new connection and session: initialize, then `notifications/initialized`.
    fn connect(url: &str) -> Result<HttpClient> {
        // reqwest is built without a default TLS provider (plain HTTP here needs none).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut c = HttpClient {
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?,
            http: reqwest::Client::builder()
                .build()
                .context("cannot build the HTTP client")?,
            url: url.to_string(),
            session: None,
            protocol: None,
            next_id: 1,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": Peer::initialize_params()});
        let result = c.post(init.to_string().into_bytes(), Some(0))?.0;
        c.protocol = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        c.post(done.to_string().into_bytes(), None)?;
        let check = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call",
                           "params": {"name": "echo", "arguments": {"message": "hello"}}});
        check_echo(&c.post(check.to_string().into_bytes(), Some(0))?.0)
            .context("server-everything (direct)")?;
        Ok(c)
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// One request; nanoseconds from sending it to reading its answer.
    fn timed_call(&mut self, body: Vec<u8>, id: u64) -> Result<u64> {
        Ok(self.post(body, Some(id))?.1)
    }

    /// POSTs one message and, for a request (`id`), reads its result and how long it took to
    /// arrive; the rest of the answer's stream is read after the clock stops.
    fn post(&mut self, body: Vec<u8>, id: Option<u64>) -> Result<(Value, u64)> {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        if let Some(v) = &self.protocol {
            req = req.header("mcp-protocol-version", v);
        }
        let session = &mut self.session;
        self.rt.block_on(async move {
            let t = Instant::now();
            let resp = req.body(body).send().await.context("POST to the server")?;
            let status = resp.status();
            if !status.is_success() {
                bail!(
                    "the server answered {status}: {}",
                    resp.text().await.unwrap_or_default()
                );
            }
            if let Some(s) = resp.headers().get("mcp-session-id") {
                *session = Some(s.to_str()?.to_string());
            }
            let Some(id) = id else {
                return Ok((Value::Null, 0));
            };
            let json = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/json"));
            if json {
                let answer = result_of(&resp.bytes().await?, id)?
                    .ok_or_else(|| anyhow!("the answer is not the response to {id}"))?;
                return Ok((answer, t.elapsed().as_nanos() as u64));
            }
            let mut events = Box::pin(SseByteStream::new(resp.bytes_stream()));
            while let Some(event) = next(&mut events).await {
                let Some(data) = event?.data.filter(|d| !d.trim().is_empty()) else {
                    continue;
                };
                if let Some(answer) = result_of(data.as_bytes(), id)? {
                    let took = t.elapsed().as_nanos() as u64;
                    while next(&mut events).await.is_some() {}
                    return Ok((answer, took));
                }
            }
            bail!("the stream ended without the response to {id}")
        })
    }

    /// Ends the session (DELETE), as the hub does on shutdown.
    fn close(self) {
        if let Some(s) = &self.session {
            let req = self.http.delete(&self.url).header("mcp-session-id", s);
            let _ = self.rt.block_on(req.send());
        }
    }
}

/// The next event of an answer's stream; `None` at its end.
async fn next<S>(events: &mut Pin<Box<S>>) -> Option<Result<Sse>>
where
    S: Stream<Item = Result<Sse, sse_stream::Error>>,
{
    let item = std::future::poll_fn(|cx| events.as_mut().poll_next(cx)).await?;
    Some(item.map_err(|e| anyhow!("the event stream broke: {e}")))
}

/// The result of the response to `id` in a message; `None` for any other message (a
/// notification); an error response is a failure.
fn result_of(message: &[u8], id: u64) -> Result<Option<Value>> {
    let mut msg: Value = serde_json::from_slice(message).context("a message that is not JSON")?;
    if msg.get("method").is_some() || msg.get("id").and_then(Value::as_u64) != Some(id) {
        return Ok(None);
    }
    match msg.get_mut("result") {
        Some(result) => Ok(Some(result.take())),
        None => bail!("request {id} failed: {msg}"),
    }
}
