//! The bench as an MCP client over Streamable HTTP, shared by parts 7 and 8: a [`Session`]
//! (one `Mcp-Session-Id`, reqwest and sse-stream as the hub uses them) for async callers, the
//! blocking [`HttpClient`] around one on its own one-thread runtime, and [`ServerProcess`], a
//! server started by the bench that is stopped with it.

use crate::client::{CallTemplate, Peer, pids};
use anyhow::{Context, Result, anyhow, bail};
use futures_core::Stream;
use serde_json::{Value, json};
use sse_stream::{Sse, SseByteStream};
use std::path::Path;
use std::pin::Pin;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A reqwest client for plain HTTP on loopback.
pub fn reqwest_client() -> Result<reqwest::Client> {
    // reqwest is built without a default TLS provider (plain HTTP here needs none).
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .build()
        .context("cannot build the HTTP client")
}

/// One MCP session over Streamable HTTP (handshake era: `initialize`, then the session id and
/// protocol version on every request).
pub struct Session {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
    protocol: Option<String>,
    next_id: u64,
}

impl Session {
    /// A new session on `http`: initialize, then `notifications/initialized`.
    pub async fn connect(http: reqwest::Client, url: &str) -> Result<Session> {
        let mut s = Session {
            http,
            url: url.to_string(),
            session: None,
            protocol: None,
            next_id: 1,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": Peer::initialize_params()});
        let result = s.post(init.to_string().into_bytes(), Some(0)).await?.0;
        s.protocol = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        s.post(done.to_string().into_bytes(), None).await?;
        Ok(s)
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// One request from `template` with the next id; nanoseconds from sending it to reading
    /// its answer.
    pub async fn timed(&mut self, template: &CallTemplate) -> Result<u64> {
        let (id, mut body) = (self.next_id(), Vec::with_capacity(128));
        template.write(&mut body, id)?;
        Ok(self.post(body, Some(id)).await?.1)
    }

    /// A request built here; its result.
    pub async fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id();
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        Ok(self.post(msg.to_string().into_bytes(), Some(id)).await?.0)
    }

    /// POSTs one message and, for a request (`id`), reads its result and how long it took to
    /// arrive (ns); the rest of the answer's stream is read after the clock stops.
    async fn post(&mut self, body: Vec<u8>, id: Option<u64>) -> Result<(Value, u64)> {
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
            self.session = Some(s.to_str()?.to_string());
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
    }

    /// Ends the session (DELETE), as the hub does on shutdown.
    pub async fn close(self) {
        if let Some(s) = &self.session {
            let _ = self
                .http
                .delete(&self.url)
                .header("mcp-session-id", s)
                .send()
                .await;
        }
    }
}

/// A [`Session`] for sequential callers: its own one-thread tokio runtime, as the hub's
/// remote client has a runtime under it.
pub struct HttpClient {
    rt: tokio::runtime::Runtime,
    session: Session,
}

impl HttpClient {
    /// A new connection and session.
    pub fn connect(url: &str) -> Result<HttpClient> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let session = rt.block_on(Session::connect(reqwest_client()?, url))?;
        Ok(HttpClient { rt, session })
    }

    pub fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.rt.block_on(self.session.call(method, params))
    }

    /// The runtime and the session, for async work on the session.
    pub fn parts(&mut self) -> (&tokio::runtime::Runtime, &mut Session) {
        (&self.rt, &mut self.session)
    }

    /// See [`Session::timed`].
    pub fn timed(&mut self, template: &CallTemplate) -> Result<u64> {
        self.rt.block_on(self.session.timed(template))
    }

    pub fn close(self) {
        self.rt.block_on(self.session.close());
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

/// An HTTP server the bench started; stopped (SIGTERM, then SIGKILL) when dropped.
pub struct ServerProcess {
    pub label: String,
    child: Child,
    pub pid: u32,
}

impl ServerProcess {
    /// Starts `cmd` (its stderr already directed) and registers it with the run's children.
    pub fn spawn(label: &str, mut cmd: Command) -> Result<ServerProcess> {
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {label}"))?;
        let pid = child.id();
        pids().push(pid);
        Ok(ServerProcess {
            label: label.to_string(),
            child,
            pid,
        })
    }

    /// Waits for the process to say where it listens: the `http://…/mcp` URL on the first
    /// line of `log` (its stderr) that contains `marker` followed by the URL.
    pub fn url_from_log(&mut self, log: &Path, marker: &str, limit: Duration) -> Result<String> {
        let deadline = Instant::now() + limit;
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let url = text
                .lines()
                .find_map(|l| l.split_once(marker))
                .and_then(|(_, rest)| rest.split_whitespace().next());
            if let Some(url) = url {
                return Ok(url.to_string());
            }
            if self.exited() {
                bail!("{} exited at start; see {}", self.label, log.display());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} never said where it listens; see {}",
                    self.label,
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, so that it ends its sessions and children; SIGKILL after `limit`.
    pub fn stop(mut self, limit: Duration) {
        self.terminate(limit);
    }

    fn terminate(&mut self, limit: Duration) {
        // Unix only, as the hub is so far (src/platform/mod.rs).
        #[cfg(unix)]
        if let Ok(pid) = i32::try_from(self.pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let t = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if t.elapsed() > limit => {
                    eprintln!(
                        "bench: {} did not exit {} ms after SIGTERM; killing it",
                        self.label,
                        limit.as_millis()
                    );
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        pids().retain(|p| *p != self.pid);
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.terminate(Duration::from_secs(5));
        }
    }
}
