//! OAuth logins against a real authorization server on loopback: the Python MCP SDK's
//! `mcp.server.auth` in `fixtures/oauth/server.py` (discovery, dynamic registration, PKCE,
//! rotating refresh tokens, bearer-protected Streamable HTTP). `openpact auth login | status |
//! logout` run as real processes, with a headless "browser" (curl following the redirect);
//! refresh and the non-interactive "needs login" path are driven through
//! `openpact::auth::ServerAuth` exactly as the remote transport uses it, and through the hub
//! (`openpact call`, `openpact serve` over stdio, `openpact servers`). Token values must never
//! appear in any output, the audit log included. `client_login`: logging in through the
//! downstream client (URL-mode elicitation).

mod client_login;

use crate::support::{Hub, OPENPACT, Peers, Scratch, wait_for_tool};
use openpact::auth::{AuthError, Credentials, Opener, ServerAuth, TokenStore};
use openpact::config::OAuthSettings;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const LIMIT: Duration = Duration::from_secs(60);
/// Follows the authorize endpoint's redirect to our loopback callback, as a browser would.
const CURL_BROWSER: &str = "curl -s -L -o /dev/null --max-time 20";

/// The OAuth-protected fixture server, killed on drop.
struct OAuthServer {
    _child: Child,
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    url: String,
}

impl OAuthServer {
    async fn start(peers: &Peers, token_ttl: u32) -> OAuthServer {
        let python = peers.vars["PEER_PYTHON"].as_str().expect("PEER_PYTHON");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/oauth/server.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg("--token-ttl")
            .arg(token_ttl.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the OAuth fixture");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(LIMIT, lines.next_line())
            .await
            .expect("the OAuth fixture starts")
            .unwrap()
            .expect("the OAuth fixture prints READY");
        let url = first
            .strip_prefix("READY ")
            .expect("READY line")
            .to_string();
        OAuthServer { _child: child, url }
    }

    async fn stats(&self) -> Value {
        let base = self.url.trim_end_matches("/mcp");
        let text = client()
            .get(format!("{base}/_fixture/stats"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

/// A plain HTTP client (reqwest is built without a default TLS provider).
fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `openpact --config CFG --state-dir STATE ARGS` with the file store and the curl browser.
async fn openpact(cfg: &Path, state: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = tokio::time::timeout(
        LIMIT,
        command(cfg, state, args, env).stdin(Stdio::null()).output(),
    )
    .await
    .unwrap_or_else(|_| panic!("openpact {args:?} hangs"))
    .unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn command(cfg: &Path, state: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(OPENPACT);
    cmd.arg("--config")
        .arg(cfg)
        .arg("--state-dir")
        .arg(state)
        .args(args)
        .env_remove("OPENPACT_LOG")
        .env_remove("RUST_LOG")
        .env_remove(openpact::auth::METADATA_URL_VAR)
        .env("OPENPACT_TOKEN_STORE", "file")
        .env("OPENPACT_OAUTH_BROWSER", CURL_BROWSER)
        .env("OPENPACT_OAUTH_TIMEOUT_SECS", "30")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// The fixture with this token lifetime and a config naming it `remote`; None without peers.
async fn started(token_ttl: u32) -> Option<(OAuthServer, Scratch, PathBuf, PathBuf)> {
    let peers = Peers::get()?;
    let server = OAuthServer::start(&peers, token_ttl).await;
    let (sc, cfg, state) = setup(&server.url);
    Some((server, sc, cfg, state))
}

fn setup(url: &str) -> (Scratch, PathBuf, PathBuf) {
    let sc = Scratch::new();
    let cfg = sc.servers(
        json!({
            "remote": {"url": url},
            "local": {"command": crate::support::FIXTURE},
        }),
        // Arguments too, so a token in them would have a way into the log.
        Some(json!({"audit": {"enabled": true, "arguments": true}})),
    );
    let state = sc.path().join("state");
    (sc, cfg, state)
}

/// The stored token file of `remote` (the only tokens-* file).
fn token_file(state: &Path) -> Option<PathBuf> {
    std::fs::read_dir(state.join("oauth"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("tokens-remote-"))
        })
}

fn stored(state: &Path) -> Value {
    let path = token_file(state).expect("a token file");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn assert_no_secret(outputs: &[&str], secrets: &[String]) {
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        for out in outputs {
            assert!(
                !out.contains(secret.as_str()),
                "a token value leaked into the output:\n{out}"
            );
        }
    }
    // Also the tokens no test saw (those the hub refreshed in between): the fixture's are
    // `at_` / `rt_` and 32 URL-safe characters.
    for out in outputs {
        for prefix in ["at_", "rt_"] {
            for (at, _) in out.match_indices(prefix) {
                let tail = out[at + 3..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                    .count();
                assert!(
                    tail < 32,
                    "a token-like value leaked into the output:\n{out}"
                );
            }
        }
    }
}

/// `openpact serve` with `env` over stdio, tokens in the file store of `state`.
fn serve(cfg: &Path, state: &Path, env: &[(&str, &str)]) -> Hub {
    let mut cmd = command(cfg, state, &["serve"], env);
    // Debug logs too: any of them could quote a token.
    cmd.env("OPENPACT_LOG", "info,openpact=debug");
    Hub::spawn(cmd)
}

/// The text of a `tools/call` response, which must not be an error.
fn text_of(r: &Value) -> String {
    assert!(r["result"]["isError"] != json!(true), "{r}");
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {r}"))
        .to_string()
}

/// Logged in by `openpact auth login`: a call through `openpact call`, then calls through
/// `openpact serve` before and after the token expires (the hub refreshes it), and what
/// `openpact servers` shows meanwhile. Returns every output to check for tokens.
async fn through_the_hub(server: &OAuthServer, cfg: &Path, state: &Path) -> Vec<String> {
    let mut outputs = Vec::new();
    let call = openpact(
        cfg,
        state,
        &["call", "remote:echo", r#"{"text":"via the cli"}"#],
        &[],
    )
    .await;
    assert_eq!(call.code, Some(0), "{call:#?}");
    assert!(call.stdout.contains("echo: via the cli"), "{call:#?}");
    outputs.extend([call.stdout, call.stderr]);

    let refreshes = server.stats().await["refreshes"].as_u64().unwrap();
    let mut hub = serve(cfg, state, &[]);
    hub.client.initialize().await;
    wait_for_tool(&mut hub.client, "remote:echo", LIMIT).await;
    let r = hub
        .client
        .call("remote:echo", json!({"text": "before expiry"}))
        .await;
    assert_eq!(text_of(&r), "echo: before expiry");
    let servers = openpact(cfg, state, &["servers"], &[]).await;
    assert_eq!(servers.code, Some(0), "{servers:#?}");
    assert!(servers.stdout.contains("remote"), "{servers:#?}");
    let servers_json = openpact(cfg, state, &["servers", "--json", "--start"], &[]).await;
    assert_eq!(servers_json.code, Some(0), "{servers_json:#?}");
    assert!(
        servers_json.stdout.contains(server.url.as_str()),
        "{servers_json:#?}"
    );
    // The token lives 3 s: the next call needs the refreshed one.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let r = hub
        .client
        .call("remote:echo", json!({"text": "after expiry"}))
        .await;
    assert_eq!(text_of(&r), "echo: after expiry");
    let stats = server.stats().await;
    assert!(
        stats["refreshes"].as_u64().unwrap() > refreshes,
        "the hub refreshed the token: {stats}"
    );
    assert_eq!(stats["code_exchanges"], 1, "no new login: {stats}");
    assert_eq!(stats["token_requests_without_resource"], 0, "{stats}");
    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0), "{}", hub.stderr());
    let audit = std::fs::read_to_string(state.join("audit.jsonl")).expect("the audit log");
    assert!(
        audit.matches("remote:echo").count() >= 2,
        "every call is audited: {audit}"
    );
    assert!(
        audit.contains("after expiry"),
        "arguments are audited: {audit}"
    );
    outputs.extend([
        hub.stderr(),
        audit,
        servers.stdout,
        servers.stderr,
        servers_json.stdout,
        servers_json.stderr,
    ]);
    outputs
}

/// A minimal Streamable HTTP client session through [`Credentials`], as the transport does:
/// the header from `authorization()`, and `challenge()` then a retry on 401/403.
struct Session<'a> {
    http: reqwest::Client,
    url: &'a str,
    auth: &'a ServerAuth,
    session: Option<String>,
}

impl<'a> Session<'a> {
    fn new(url: &'a str, auth: &'a ServerAuth) -> Session<'a> {
        Session {
            http: client(),
            url,
            auth,
            session: None,
        }
    }

    /// One POST: (status, WWW-Authenticate, body).
    async fn send(&mut self, body: &Value) -> (u16, Option<String>, String) {
        let mut req = self
            .http
            .post(self.url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body.to_string());
        if let Some(h) = self.auth.authorization() {
            req = req.header("Authorization", h);
        }
        if let Some(s) = &self.session {
            req = req
                .header("Mcp-Session-Id", s)
                .header("MCP-Protocol-Version", "2025-11-25");
        }
        let resp = req.send().await.unwrap();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(String::from)
        };
        if let Some(s) = header("mcp-session-id") {
            self.session = Some(s);
        }
        let www = header("www-authenticate");
        let status = resp.status().as_u16();
        (status, www, resp.text().await.unwrap())
    }

    /// POST with the transport's auth handling: challenge and retry on 401/403; a session
    /// that the server dropped (it belonged to the old token) is opened again.
    async fn post(&mut self, body: Value) -> Result<Value, AuthError> {
        for _ in 0..4 {
            let (mut status, mut www, mut text) = self.send(&body).await;
            if status == 404 && self.session.is_some() {
                self.session = None;
                self.send(&initialize()).await;
                self.send(&initialized()).await;
                (status, www, text) = self.send(&body).await;
            }
            if status == 401 || status == 403 {
                self.auth.challenge(status, www.as_deref()).await?;
                continue;
            }
            assert!(status < 300, "HTTP {status} for {body}: {text}");
            return Ok(if text.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).unwrap()
            });
        }
        panic!("still refused after retries");
    }

    async fn open(&mut self) -> Result<(), AuthError> {
        self.post(initialize()).await?;
        self.post(initialized()).await?;
        Ok(())
    }

    async fn echo(&mut self, text: &str) -> Result<String, AuthError> {
        self.tool("echo", json!({"text": text})).await
    }

    async fn tool(&mut self, name: &str, arguments: Value) -> Result<String, AuthError> {
        let r = self
            .post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}))
            .await?;
        Ok(r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text in {r}"))
            .to_string())
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "auth-test", "version": "1"}}})
}

fn initialized() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

#[tokio::test]
async fn login_call_refresh_status_logout() {
    use std::os::unix::fs::PermissionsExt;
    let Some((server, _sc, cfg, state)) = started(3).await else {
        return;
    };

    let before = openpact(&cfg, &state, &["auth", "status", "--json"], &[]).await;
    assert_eq!(before.code, Some(0), "{before:#?}");
    let list: Value = serde_json::from_str(&before.stdout).unwrap();
    assert_eq!(
        list.as_array().unwrap().len(),
        1,
        "only remote servers: {list}"
    );
    assert_eq!(list[0]["server"], "remote");
    assert_eq!(list[0]["loggedIn"], false);

    let login = openpact(&cfg, &state, &["auth", "login", "remote"], &[]).await;
    assert_eq!(login.code, Some(0), "{login:#?}");
    assert!(login.stdout.contains("Logged in to 'remote'"), "{login:#?}");
    assert!(login.stdout.contains("mcp:tools"), "{login:#?}");
    // The URL is always printed to stderr, whatever opens it.
    assert!(login.stderr.contains("/authorize?"), "{login:#?}");
    assert!(login.stderr.contains("code_challenge_method=S256"));
    assert!(login.stderr.contains("resource=http%3A%2F%2F127.0.0.1"));

    let path = token_file(&state).expect("tokens in the file store");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let first = stored(&state);
    let first_access = first["access_token"].as_str().unwrap().to_string();
    let first_refresh = first["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(first["resource"].as_str().unwrap(), server.url);
    let stats = server.stats().await;
    assert_eq!(stats["registrations"], 1, "{stats}");
    assert_eq!(stats["code_exchanges"], 1, "{stats}");
    assert_eq!(stats["token_requests_without_resource"], 0, "{stats}");
    assert_eq!(stats["last_scopes"], json!(["mcp:tools"]), "{stats}");

    let status = openpact(&cfg, &state, &["auth", "status", "--json"], &[]).await;
    let list: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(list[0]["loggedIn"], true, "{list}");
    assert_eq!(list[0]["scopes"], json!(["mcp:tools"]));
    assert_eq!(list[0]["store"], "file");
    let human = openpact(&cfg, &state, &["auth", "status"], &[]).await;
    assert!(human.stdout.contains("remote: logged in"), "{human:#?}");

    // Through the hub: `openpact call`, `openpact serve` across an expiry, `openpact servers`.
    let hub_outputs = through_the_hub(&server, &cfg, &state).await;
    let by_hub = stored(&state);
    let hub_access = by_hub["access_token"].as_str().unwrap().to_string();
    let hub_refresh = by_hub["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(
        hub_access, first_access,
        "the hub stored the refreshed token"
    );
    assert_eq!(
        std::fs::metadata(token_file(&state).unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600,
        "still 0600 after the hub rewrote it"
    );

    // The transport's view: a session with the stored token, then one after it expired.
    let store = Arc::new(TokenStore::file(&state));
    let auth = ServerAuth::new(
        "remote",
        &server.url,
        &OAuthSettings::default(),
        store.clone(),
        false,
    );
    let mut session = Session::new(&server.url, &auth);
    session.open().await.unwrap();
    assert_eq!(session.echo("hi").await.unwrap(), "echo: hi");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(session.echo("again").await.unwrap(), "echo: again");
    let stats = server.stats().await;
    assert!(stats["refreshes"].as_u64().unwrap() >= 1, "{stats}");
    assert_eq!(stats["token_requests_without_resource"], 0, "{stats}");
    let second = stored(&state);
    let second_access = second["access_token"].as_str().unwrap().to_string();
    let second_refresh = second["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(
        second_access, first_access,
        "the access token was refreshed"
    );
    assert_ne!(
        second_refresh, first_refresh,
        "the rotated refresh token is stored"
    );
    assert_eq!(stats["code_exchanges"], 1, "no new login: {stats}");
    let secrets = auth.secrets();
    assert!(secrets.contains(&second_access) && secrets.contains(&second_refresh));
    assert!(!format!("{auth:?}").contains(&second_access));

    let status = openpact(&cfg, &state, &["auth", "status"], &[]).await;
    let logout = openpact(&cfg, &state, &["auth", "logout", "remote"], &[]).await;
    assert_eq!(logout.code, Some(0), "{logout:#?}");
    assert!(
        logout.stdout.contains("Logged out of 'remote'"),
        "{logout:#?}"
    );
    assert!(token_file(&state).is_none(), "the token file is deleted");
    let again = openpact(&cfg, &state, &["auth", "logout", "remote"], &[]).await;
    assert!(again.stdout.contains("had no stored login"), "{again:#?}");

    // Logged out, through the hub without a user: the call says how to log in.
    let refused = openpact(
        &cfg,
        &state,
        &["call", "remote:echo", r#"{"text":"logged out"}"#],
        &[("OPENPACT_OAUTH_BROWSER", "none")],
    )
    .await;
    assert_ne!(refused.code, Some(0), "{refused:#?}");
    assert!(
        format!("{}{}", refused.stdout, refused.stderr).contains("openpact auth login remote"),
        "{refused:#?}"
    );
    assert!(token_file(&state).is_none(), "no login without a user");

    // Without tokens and without a user (serve): a clear "how to log in".
    let auth = ServerAuth::new(
        "remote",
        &server.url,
        &OAuthSettings::default(),
        store,
        false,
    );
    let mut session = Session::new(&server.url, &auth);
    let e = session.open().await.unwrap_err();
    assert!(matches!(e, AuthError::NeedsLogin { .. }), "{e:?}");
    assert!(
        e.to_string().contains("run `openpact auth login remote`"),
        "{e}"
    );

    let all = [
        first_access,
        first_refresh,
        second_access,
        second_refresh,
        first["client_secret"].as_str().unwrap_or("").to_string(),
        hub_access,
        hub_refresh,
    ];
    let mut outputs: Vec<&str> = vec![
        &login.stdout,
        &login.stderr,
        &status.stdout,
        &status.stderr,
        &human.stdout,
        &logout.stdout,
        &logout.stderr,
        &refused.stdout,
        &refused.stderr,
    ];
    let e = e.to_string();
    outputs.push(&e);
    outputs.extend(hub_outputs.iter().map(String::as_str));
    assert_no_secret(&outputs, &all);
}

#[tokio::test]
async fn callback_refuses_a_wrong_state_and_reports_a_refusal() {
    let Some((server, _sc, cfg, state)) = started(3600).await else {
        return;
    };
    let mut child = command(
        &cfg,
        &state,
        &["auth", "login", "remote"],
        &[("OPENPACT_OAUTH_BROWSER", "none")],
    )
    .stdin(Stdio::null())
    .spawn()
    .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(LIMIT, async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            if let Some(u) = line
                .trim()
                .strip_prefix("http")
                .filter(|u| u.contains("/authorize?"))
            {
                return format!("http{u}");
            }
        }
        panic!("no authorization URL printed");
    })
    .await
    .unwrap();
    let url = url::Url::parse(&url).unwrap();
    let param = |k: &str| {
        url.query_pairs()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.into_owned())
            .unwrap()
    };
    let redirect = param("redirect_uri");
    let state_value = param("state");
    assert!(redirect.starts_with("http://127.0.0.1:"), "{redirect}");

    let http = client();
    let forged = http
        .get(format!("{redirect}?code=forged&state=not-{state_value}"))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status().as_u16(), 400);
    assert!(forged.text().await.unwrap().contains("does not match"));
    // Still waiting for the real answer: the user declines.
    let declined = http
        .get(format!(
            "{redirect}?error=access_denied&error_description=user+said+no&state={state_value}"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(declined.status().as_u16(), 400);
    assert!(declined.text().await.unwrap().contains("user said no"));

    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(2));
    let mut rest = String::new();
    while let Some(line) = stderr.next_line().await.unwrap() {
        rest.push_str(&line);
        rest.push('\n');
    }
    assert!(rest.contains("access_denied: user said no"), "{rest}");
    // One answer for one state, then closed. The freed port may already serve another test
    // (a model API stand-in answers 200 to anything), so the check is that no openpact
    // callback took the answer, not that nothing listens.
    if let Ok(late) = http
        .get(format!("{redirect}?code=late&state={state_value}"))
        .send()
        .await
    {
        let page = late.text().await.unwrap_or_default();
        assert!(!page.contains("openpact is logged in"), "{page}");
    }
    assert!(token_file(&state).is_none());
    assert_eq!(server.stats().await["code_exchanges"], 0);
}

#[tokio::test]
async fn unfinished_login_times_out_and_wrong_servers_are_named() {
    let Some((_server, _sc, cfg, state)) = started(3600).await else {
        return;
    };
    let env = [
        ("OPENPACT_OAUTH_BROWSER", "none"),
        ("OPENPACT_OAUTH_TIMEOUT_SECS", "1"),
    ];
    let run = openpact(&cfg, &state, &["auth", "login", "remote"], &env).await;
    assert_eq!(run.code, Some(2), "{run:#?}");
    assert!(run.stderr.contains("not completed within 1 s"), "{run:#?}");
    assert!(token_file(&state).is_none());

    let run = openpact(&cfg, &state, &["auth", "login", "local"], &[]).await;
    assert_eq!(run.code, Some(2));
    assert!(run.stderr.contains("local (stdio) server"), "{run:#?}");
    let run = openpact(&cfg, &state, &["auth", "logout", "nope"], &[]).await;
    assert_eq!(run.code, Some(2));
    assert!(
        run.stderr.contains("no server is named 'nope'") && run.stderr.contains("remote"),
        "{run:#?}"
    );
}

/// A server that refuses every token for one tool: refreshed once, logged in once, then the
/// call fails saying so — no loop of logins, and no new registration (the authorization
/// server has not changed; a move to another one is the conformance suite's
/// `auth/authorization-server-migration`).
#[tokio::test]
async fn a_token_refused_right_after_a_login_fails_the_call_once() {
    let Some((server, _sc, cfg, state)) = started(3600).await else {
        return;
    };
    let login = openpact(&cfg, &state, &["auth", "login", "remote"], &[]).await;
    assert_eq!(login.code, Some(0), "{login:#?}");
    let before = server.stats().await;
    let store = Arc::new(TokenStore::file(&state));
    let auth = ServerAuth::new(
        "remote",
        &server.url,
        &OAuthSettings::default(),
        store,
        true,
    );
    auth.set_opener(Opener::Command(
        CURL_BROWSER.split(' ').map(String::from).collect(),
    ));
    let mut session = Session::new(&server.url, &auth);
    session.open().await.unwrap();
    let e = session.tool("refused", json!({})).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("the server refuses the token it just issued"),
        "{e}"
    );
    let after = server.stats().await;
    let grew = |key: &str| after[key].as_u64().unwrap() - before[key].as_u64().unwrap();
    assert_eq!(grew("refused"), 3, "{after}");
    assert_eq!(grew("refreshes"), 1, "{after}");
    assert_eq!(grew("authorizations"), 1, "{after}");
    assert_eq!(grew("registrations"), 0, "{after}");
    // The server's other tools take the new token.
    assert_eq!(session.echo("still").await.unwrap(), "echo: still");
}

#[tokio::test]
async fn step_up_asks_for_the_union_of_scopes_then_gives_up() {
    let Some((server, _sc, cfg, state)) = started(3600).await else {
        return;
    };
    let login = openpact(&cfg, &state, &["auth", "login", "remote"], &[]).await;
    assert_eq!(login.code, Some(0), "{login:#?}");
    assert_eq!(stored(&state)["scopes"], json!(["mcp:tools"]));
    let store = Arc::new(TokenStore::file(&state));
    let settings = OAuthSettings::default();

    // In `serve` (no user at hand): the error says which scopes to log in with.
    let quiet = ServerAuth::new("remote", &server.url, &settings, store.clone(), false);
    let mut session = Session::new(&server.url, &quiet);
    session.open().await.unwrap();
    let e = session.tool("admin", json!({})).await.unwrap_err();
    assert!(matches!(e, AuthError::NeedsLogin { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("run `openpact auth login remote --scope 'mcp:tools mcp:admin'`"),
        "{e}"
    );

    // With a user: re-authorized with the union, the call then goes through.
    let auth = ServerAuth::new("remote", &server.url, &settings, store, true);
    auth.set_opener(Opener::Command(
        CURL_BROWSER.split(' ').map(String::from).collect(),
    ));
    let mut session = Session::new(&server.url, &auth);
    session.open().await.unwrap();
    assert_eq!(session.tool("admin", json!({})).await.unwrap(), "admin ok");
    let stats = server.stats().await;
    assert_eq!(
        stats["last_scopes"],
        json!(["mcp:tools", "mcp:admin"]),
        "{stats}"
    );
    // The first registration did not cover mcp:admin: a new one was made for it.
    assert_eq!(stats["registrations"], 2, "{stats}");
    assert_eq!(stored(&state)["scopes"], json!(["mcp:tools", "mcp:admin"]));
    let before = stats["authorizations"].as_u64().unwrap();

    // A server that keeps refusing: a bounded number of re-authorizations, then a clear error.
    let e = session.tool("forbidden", json!({})).await.unwrap_err();
    assert!(matches!(e, AuthError::Failed { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("still answers 403 insufficient_scope after 3 re-authorizations"),
        "{e}"
    );
    let after = server.stats().await["authorizations"].as_u64().unwrap();
    assert!(after - before <= 3, "{before} -> {after}");

    // `auth login --scope` asks for more up front.
    openpact(&cfg, &state, &["auth", "logout", "remote"], &[]).await;
    let login = openpact(
        &cfg,
        &state,
        &["auth", "login", "remote", "--scope", "mcp:admin"],
        &[],
    )
    .await;
    assert_eq!(login.code, Some(0), "{login:#?}");
    assert_eq!(stored(&state)["scopes"], json!(["mcp:tools", "mcp:admin"]));
}
