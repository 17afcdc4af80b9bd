//! The soak's traffic: what each client and each fault driver does, what it expects, and
//! the [`Tally`] of calls by kind and of failures.
//!
//! Clients (one action at a time, 100–400 ms apart): [`handshake_client`] (a Streamable HTTP
//! session, half of them with a GET stream, renewed now and then), [`stateless_client`]
//! (2026-07-28 stateless calls) and [`stdio_client`] (the hub's own stdin/stdout). Their
//! actions ([`Action`]): an `fx:echo` with a unique payload, `fx:progress` (every progress
//! notification must arrive, before the answer), a cache hit (`fx:add` has a TTL rule), a
//! permission prompt (`fx:echo_structured` has an `ask` rule; the client allows once), a
//! cancelled call (`notifications/cancelled` once a progress notification shows it in
//! flight, after which its stream must end unanswered; in the 2026-07-28 era, a closed
//! stream), a client that vanishes mid-call (drops the connection, or DELETEs its session and
//! reads on: the call must be answered with an error), the
//! flaky servers' `echo`, `tools/list`, and a `subscriptions/listen` stream dropped soon.
//!
//! Drivers: [`crash_driver`] has `crashy` crash every few seconds and waits for it to come
//! back; [`flood_driver`] has `noisy` write thousands of stderr lines a second;
//! [`stuck_driver`] calls `stuck:slow` for longer than `stuck`'s 1 s timeout;
//! [`remote_driver`] kills the remote server every 30 s and starts it again.
//!
//! A failure is an answer that is wrong, missing or late from a server that should answer,
//! or any message a client got that was not for it ([`crate::mcp::Strays`]). Errors from a
//! server that is down on purpose (`crashy`, `remote`) are counted, not failures.

use crate::Ctx;
use crate::hub::Remote;
use crate::mcp::{Events, Handshake, Reply, Stateless, Stdio, Strays, http_client, lock};
use anyhow::Result;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long an answer from a healthy server may take before it counts as lost.
const LIMIT: Duration = Duration::from_secs(30);

/// Calls of one kind.
#[derive(Clone, Copy, Default)]
pub struct Count {
    /// Answered as expected.
    pub ok: u64,
    /// An error from a server that was down on purpose.
    pub soft: u64,
    pub fail: u64,
}

/// Calls by kind, and what failed.
#[derive(Default)]
pub struct Tally {
    kinds: Mutex<BTreeMap<&'static str, Count>>,
    notes: Mutex<Vec<String>>,
    pub strays: Arc<Strays>,
}

impl Tally {
    pub fn ok(&self, kind: &'static str) {
        lock(&self.kinds).entry(kind).or_default().ok += 1;
    }

    pub fn soft(&self, kind: &'static str) {
        lock(&self.kinds).entry(kind).or_default().soft += 1;
    }

    pub fn fail(&self, kind: &'static str, what: String) {
        lock(&self.kinds).entry(kind).or_default().fail += 1;
        let mut notes = lock(&self.notes);
        if notes.len() < 40 {
            notes.push(format!("{kind}: {what}"));
        }
    }

    pub fn kinds(&self) -> BTreeMap<&'static str, Count> {
        lock(&self.kinds).clone()
    }

    pub fn failures(&self) -> u64 {
        lock(&self.kinds).values().map(|c| c.fail).sum::<u64>() + self.strays.count()
    }

    pub fn notes(&self) -> Vec<String> {
        let mut notes = lock(&self.notes).clone();
        notes.extend(
            self.strays
                .notes()
                .into_iter()
                .map(|n| format!("stray: {n}")),
        );
        notes
    }

    pub fn calls(&self) -> u64 {
        lock(&self.kinds)
            .values()
            .map(|c| c.ok + c.soft + c.fail)
            .sum()
    }
}

/// What every client and driver shares.
#[derive(Clone)]
pub struct Env {
    pub url: String,
    pub stop: Arc<AtomicBool>,
    pub tally: Arc<Tally>,
}

impl Env {
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleeps `d`, or less when the run stops; whether it is still running.
    async fn pause(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while Instant::now() < until {
            if self.stopped() {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            tokio::time::sleep(left.min(Duration::from_millis(100))).await;
        }
        !self.stopped()
    }
}

/// xorshift64*: enough randomness for picking actions.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// In `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Action {
    Echo,
    Progress,
    Cache,
    Prompt,
    Cancel,
    Vanish,
    Remote,
    Crashy,
    List,
    /// Handshake: DELETE and a new session. 2026-07-28: a `subscriptions/listen` stream.
    Renew,
    /// A code-mode program (`run_code`) that echoes through the fixture: a worker process
    /// started and gone each time.
    Program,
}

/// A weighted pick of the next action.
fn pick(rng: &mut Rng) -> Action {
    const WEIGHTS: [(Action, u64); 11] = [
        (Action::Echo, 34),
        (Action::Progress, 10),
        (Action::Cache, 10),
        (Action::Prompt, 8),
        (Action::Cancel, 6),
        (Action::Vanish, 4),
        (Action::Remote, 8),
        (Action::Crashy, 8),
        (Action::List, 6),
        (Action::Renew, 6),
        (Action::Program, 4),
    ];
    let total: u64 = WEIGHTS.iter().map(|(_, w)| w).sum();
    let mut at = rng.range(0, total);
    for (a, w) in WEIGHTS {
        if at < w {
            return a;
        }
        at -= w;
    }
    Action::Echo
}

/// `run_code`'s arguments for a program whose output is `unique`, echoed by the fixture.
fn program(unique: &str) -> Value {
    let literal = serde_json::to_string(unique).unwrap_or_default();
    json!({"code": format!("print(call(\"fx:echo\", {{\"message\": {literal}}}))")})
}

fn gap(rng: &mut Rng) -> Duration {
    Duration::from_millis(rng.range(100, 400))
}

/// What a call's reply must be: `expect` as its text. A reply from a flaky server (`soft`)
/// may be an error instead; a wrong text or a missing answer is always a failure.
fn judge(tally: &Tally, kind: &'static str, r: Result<Reply>, expect: &str, soft: bool) {
    match r {
        Ok(r) if r.is_ok() && r.text() == Some(expect) => tally.ok(kind),
        Ok(r) if r.is_ok() => tally.fail(kind, format!("expected {expect:?}, got {}", r.brief())),
        Ok(_) if soft => tally.soft(kind),
        Ok(r) => tally.fail(kind, format!("error for {expect:?}: {}", r.brief())),
        Err(e) => tally.fail(kind, format!("{expect:?}: {e:#}")),
    }
}

/// A progress call's reply: `done STEPS`, after every one of its STEPS notifications.
fn judge_progress(tally: &Tally, r: Result<Reply>, steps: u32) {
    match r {
        Ok(r) if r.is_ok() && r.text() == Some(&format!("done {steps}")) && r.progress == steps => {
            tally.ok("progress");
        }
        Ok(r) => tally.fail(
            "progress",
            format!(
                "{} progress notifications of {steps}; {}",
                r.progress,
                r.brief()
            ),
        ),
        Err(e) => tally.fail("progress", format!("{e:#}")),
    }
}

/// The text `fx:echo_structured` answers for a string value.
fn structured(v: &str) -> String {
    Value::from(v).to_string()
}

fn flaky_kind(tool: &str) -> &'static str {
    if tool.starts_with("remote") {
        "remote"
    } else {
        "crashy"
    }
}

/// A handshake Streamable HTTP client: one session at a time.
pub async fn handshake_client(env: Env, n: u64) {
    let Ok(http) = http_client() else { return };
    let tally = &env.tally;
    let mut rng = Rng::new(1_000 + n);
    let mut session: Option<Handshake> = None;
    let mut seq = 0u64;
    while !env.stopped() {
        let s = match session.as_mut() {
            Some(s) => s,
            None => {
                let get = rng.range(0, 2) == 0;
                match Handshake::connect(http.clone(), &env.url, tally.strays.clone(), get).await {
                    Ok(s) => {
                        tally.ok("session");
                        session.insert(s)
                    }
                    Err(e) => {
                        tally.fail("session", format!("{e:#}"));
                        env.pause(Duration::from_secs(1)).await;
                        continue;
                    }
                }
            }
        };
        seq += 1;
        let unique = format!("legacy {n} #{seq} {:x}", rng.next());
        match pick(&mut rng) {
            Action::Echo => {
                let r = s
                    .call("fx:echo", json!({"message": unique}), None, LIMIT)
                    .await;
                judge(tally, "echo", r, &unique, false);
            }
            Action::Progress => {
                let token = format!("legacy-{n}-{seq}");
                let args = json!({"steps": 3, "ms": 20});
                judge_progress(
                    tally,
                    s.call("fx:progress", args, Some(&token), LIMIT).await,
                    3,
                );
            }
            Action::Program => {
                let r = s.call("run_code", program(&unique), None, LIMIT).await;
                judge(tally, "program", r, &unique, false);
            }
            Action::Cache => {
                let k = rng.range(0, 8);
                let r = s.call("fx:add", json!({"a": k, "b": k}), None, LIMIT).await;
                judge(tally, "cache", r, &(2 * k).to_string(), false);
            }
            Action::Prompt => {
                let r = s
                    .call("fx:echo_structured", json!({"value": unique}), None, LIMIT)
                    .await;
                judge(tally, "prompt", r, &structured(&unique), false);
            }
            Action::Cancel => {
                // A progress call, cancelled once its first notification shows it in flight;
                // the client reads on, as SDK clients do: the stream must end, unanswered.
                let token = format!("legacy-{n}-{seq}");
                let args = json!({"steps": 50, "ms": 100});
                let cancelled = async {
                    let (id, mut events) = s.open_call("fx:progress", args, &token).await?;
                    s.until_progress(&mut events).await?;
                    s.cancel(id).await?;
                    tokio::time::timeout(Duration::from_secs(5), s.until_end(&mut events))
                        .await
                        .map_err(|_| {
                            anyhow::anyhow!("its stream stayed open 5 s after the cancellation")
                        })?
                };
                match tokio::time::timeout(LIMIT, cancelled).await {
                    Ok(Ok(())) => tally.ok("cancel"),
                    Ok(Err(e)) => tally.fail("cancel", format!("{e:#}")),
                    Err(_) => tally.fail("cancel", "no progress within 30 s".into()),
                }
            }
            Action::Vanish => {
                // A progress call, in flight once its first notification came; then the
                // client walks away, or ends its session (DELETE) and reads on.
                let token = format!("legacy-{n}-{seq}");
                let args = json!({"steps": 50, "ms": 100});
                let started = async {
                    let (id, mut events) = s.open_call("fx:progress", args, &token).await?;
                    s.until_progress(&mut events).await?;
                    anyhow::Ok((id, events))
                };
                let started = tokio::time::timeout(LIMIT, started).await;
                let Some(s) = session.take() else { continue };
                let (id, mut events) = match started {
                    Ok(Ok(started)) => started,
                    Ok(Err(e)) => {
                        tally.fail("vanish", format!("{e:#}"));
                        continue;
                    }
                    Err(_) => {
                        tally.fail("vanish", "no progress within 30 s".into());
                        continue;
                    }
                };
                if rng.range(0, 2) == 0 {
                    // Gone without a word: the connection drops, the session is abandoned.
                    drop(events);
                    drop(s);
                    tally.ok("vanish");
                    continue;
                }
                match s.delete().await {
                    Ok(204) => {}
                    Ok(status) => tally.fail("vanish", format!("DELETE answered {status}")),
                    Err(e) => tally.fail("vanish", format!("DELETE: {e:#}")),
                }
                // The call of an ended session is answered with an error.
                let answer = async {
                    while let Some(m) = events.next().await? {
                        if m.get("method").is_none() {
                            return anyhow::Ok(Some(m));
                        }
                    }
                    Ok(None)
                };
                match tokio::time::timeout(Duration::from_secs(10), answer).await {
                    Ok(Ok(Some(m))) if m["id"] == json!(id) && m.get("error").is_some() => {
                        tally.ok("vanish");
                    }
                    Ok(Ok(Some(m))) => tally.fail(
                        "vanish",
                        format!("a call of a deleted session answered {m}"),
                    ),
                    Ok(Ok(None)) => tally.fail(
                        "vanish",
                        "a call of a deleted session ended unanswered".into(),
                    ),
                    Ok(Err(e)) => tally.fail("vanish", format!("{e:#}")),
                    Err(_) => tally.fail(
                        "vanish",
                        "a call of a deleted session was not answered within 10 s".into(),
                    ),
                }
            }
            Action::Remote | Action::Crashy => {
                let tool = if rng.range(0, 2) == 0 {
                    "remote:echo"
                } else {
                    "crashy:echo"
                };
                let r = s.call(tool, json!({"message": unique}), None, LIMIT).await;
                judge(tally, flaky_kind(tool), r, &unique, true);
            }
            Action::List => {
                let r = s.request("tools/list", json!({}), LIMIT).await;
                judge_list(tally, r);
            }
            Action::Renew => {
                let Some(s) = session.take() else { continue };
                match s.delete().await {
                    Ok(204) => tally.ok("delete"),
                    Ok(status) => tally.fail("delete", format!("DELETE answered {status}")),
                    Err(e) => tally.fail("delete", format!("{e:#}")),
                }
            }
        }
        env.pause(gap(&mut rng)).await;
    }
    if let Some(s) = session {
        match s.delete().await {
            Ok(204) => tally.ok("delete"),
            Ok(status) => tally.fail("delete", format!("DELETE answered {status}")),
            Err(e) => tally.fail("delete", format!("{e:#}")),
        }
    }
}

fn judge_list(tally: &Tally, r: Result<Reply>) {
    match r {
        Ok(r)
            if r.msg["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["name"] == "fx:echo")) =>
        {
            tally.ok("list");
        }
        Ok(r) => tally.fail("list", format!("no fx:echo in {}", r.brief())),
        Err(e) => tally.fail("list", format!("{e:#}")),
    }
}

/// A 2026-07-28 client: every call a POST of its own.
pub async fn stateless_client(env: Env, n: u64) {
    let Ok(http) = http_client() else { return };
    let tally = &env.tally;
    let mut rng = Rng::new(2_000 + n);
    let mut c = Stateless::new(http, &env.url, tally.strays.clone());
    let mut seq = 0u64;
    while !env.stopped() {
        seq += 1;
        let unique = format!("modern {n} #{seq} {:x}", rng.next());
        match pick(&mut rng) {
            Action::Echo => {
                let r = c
                    .call("fx:echo", json!({"message": unique}), None, LIMIT)
                    .await;
                judge(tally, "echo", r, &unique, false);
            }
            Action::Progress => {
                let token = format!("modern-{n}-{seq}");
                let args = json!({"steps": 3, "ms": 20});
                judge_progress(
                    tally,
                    c.call("fx:progress", args, Some(&token), LIMIT).await,
                    3,
                );
            }
            Action::Program => {
                let r = c.call("run_code", program(&unique), None, LIMIT).await;
                judge(tally, "program", r, &unique, false);
            }
            Action::Cache => {
                let k = rng.range(0, 8);
                let r = c.call("fx:add", json!({"a": k, "b": k}), None, LIMIT).await;
                judge(tally, "cache", r, &(2 * k).to_string(), false);
            }
            Action::Prompt => {
                let r = c
                    .call("fx:echo_structured", json!({"value": unique}), None, LIMIT)
                    .await;
                judge(tally, "prompt", r, &structured(&unique), false);
            }
            Action::Cancel => {
                // Closing the stream is how this era cancels.
                let id = c.next_id();
                let params = json!({"name": "fx:slow", "arguments": {"ms": 3000}});
                let send = c.post(id, "tools/call", Some("fx:slow"), params).send();
                let task = tokio::spawn(send);
                tokio::time::sleep(Duration::from_millis(300)).await;
                task.abort();
                tally.ok("cancel");
            }
            Action::Vanish => {
                // Walks away mid-stream, after the first progress notification.
                let id = c.next_id();
                let token = format!("modern-{n}-{seq}");
                let params = json!({"name": "fx:progress", "arguments": {"steps": 10, "ms": 100},
                    "_meta": {"progressToken": token}});
                let resp = c.post(id, "tools/call", Some("fx:progress"), params).send();
                let first = async {
                    let mut events = Events::of(resp.await?).await?;
                    events.next().await
                };
                match tokio::time::timeout(LIMIT, first).await {
                    Ok(Ok(Some(m))) if m["method"] == "notifications/progress" => {
                        tally.ok("vanish")
                    }
                    Ok(Ok(m)) => {
                        tally.fail("vanish", format!("expected progress first, got {m:?}"))
                    }
                    Ok(Err(e)) => tally.fail("vanish", format!("{e:#}")),
                    Err(_) => tally.fail("vanish", "no progress within 30 s".into()),
                }
            }
            Action::Remote | Action::Crashy => {
                let tool = if rng.range(0, 2) == 0 {
                    "remote:echo"
                } else {
                    "crashy:echo"
                };
                let r = c.call(tool, json!({"message": unique}), None, LIMIT).await;
                judge(tally, flaky_kind(tool), r, &unique, true);
            }
            Action::List => {
                let r = c.request("tools/list", None, json!({}), None, LIMIT).await;
                judge_list(tally, r);
            }
            Action::Renew => {
                let id = c.next_id();
                let params = json!({"notifications": {"toolsListChanged": true}});
                let resp = c.post(id, "subscriptions/listen", None, params).send();
                let ack = async {
                    let mut events = Events::of(resp.await?).await?;
                    let first = events.next().await?;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    anyhow::Ok(first)
                };
                match tokio::time::timeout(LIMIT, ack).await {
                    Ok(Ok(Some(m)))
                        if m["method"] == "notifications/subscriptions/acknowledged" =>
                    {
                        tally.ok("listen");
                    }
                    Ok(Ok(m)) => {
                        tally.fail("listen", format!("expected the acknowledgement, got {m:?}"))
                    }
                    Ok(Err(e)) => tally.fail("listen", format!("{e:#}")),
                    Err(_) => tally.fail("listen", "no acknowledgement within 30 s".into()),
                }
            }
        }
        env.pause(gap(&mut rng)).await;
    }
}

/// `initialize` on the hub's stdio, declaring elicitation.
pub async fn stdio_initialize(c: &Stdio) -> Result<()> {
    let params = json!({"protocolVersion": crate::mcp::HANDSHAKE, "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "openpact-soak-stdio", "version": "1"}});
    let r = c.request("initialize", params, false, LIMIT).await?;
    if r.msg.get("result").is_none() {
        anyhow::bail!("stdio initialize failed: {}", r.brief());
    }
    c.notify("notifications/initialized", json!({}))
}

/// The stdio client: one action at a time, like the HTTP ones.
pub async fn stdio_client(env: Env, c: Arc<Stdio>) {
    let tally = &env.tally;
    let mut rng = Rng::new(3_000);
    let mut seq = 0u64;
    let call = |name: &str, args: Value| json!({"name": name, "arguments": args});
    while !env.stopped() && !c.closed() {
        seq += 1;
        let unique = format!("stdio #{seq} {:x}", rng.next());
        match pick(&mut rng) {
            Action::Echo | Action::Renew => {
                let r = c.request(
                    "tools/call",
                    call("fx:echo", json!({"message": unique})),
                    false,
                    LIMIT,
                );
                judge(tally, "echo", r.await, &unique, false);
            }
            Action::Progress => {
                let args = call("fx:progress", json!({"steps": 3, "ms": 20}));
                judge_progress(tally, c.request("tools/call", args, true, LIMIT).await, 3);
            }
            Action::Cache => {
                let k = rng.range(0, 8);
                let r = c.request(
                    "tools/call",
                    call("fx:add", json!({"a": k, "b": k})),
                    false,
                    LIMIT,
                );
                judge(tally, "cache", r.await, &(2 * k).to_string(), false);
            }
            Action::Prompt => {
                let args = call("fx:echo_structured", json!({"value": unique}));
                let r = c.request("tools/call", args, false, LIMIT).await;
                judge(tally, "prompt", r, &structured(&unique), false);
            }
            Action::Cancel | Action::Vanish => {
                match c.begin("tools/call", call("fx:slow", json!({"ms": 3000})), false) {
                    Ok((id, _rx, _)) => {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        match c.cancel(id) {
                            Ok(()) => tally.ok("cancel"),
                            Err(e) => tally.fail("cancel", format!("{e:#}")),
                        }
                    }
                    Err(e) => tally.fail("cancel", format!("{e:#}")),
                }
            }
            Action::Remote | Action::Crashy => {
                let tool = if rng.range(0, 2) == 0 {
                    "remote:echo"
                } else {
                    "crashy:echo"
                };
                let r = c.request(
                    "tools/call",
                    call(tool, json!({"message": unique})),
                    false,
                    LIMIT,
                );
                judge(tally, flaky_kind(tool), r.await, &unique, true);
            }
            Action::List => {
                judge_list(
                    tally,
                    c.request("tools/list", json!({}), false, LIMIT).await,
                );
            }
            Action::Program => {
                let r = c.request(
                    "tools/call",
                    call("run_code", program(&unique)),
                    false,
                    LIMIT,
                );
                judge(tally, "program", r.await, &unique, false);
            }
        }
        env.pause(gap(&mut rng)).await;
    }
}

/// Has `crashy` crash every `every`, then waits for its `echo` to answer again.
pub async fn crash_driver(env: Env, every: Duration) {
    let Ok(http) = http_client() else { return };
    let tally = &env.tally;
    let mut c = Stateless::new(http, &env.url, tally.strays.clone());
    while env.pause(every).await {
        match c.call("crashy:crash", json!({}), None, LIMIT).await {
            Ok(r) if r.is_ok() => tally.fail("crash", format!("crash answered {}", r.brief())),
            Ok(_) => tally.ok("crash"),
            Err(e) => tally.fail("crash", format!("{e:#}")),
        }
        back(&env, &mut c, "crashy:echo", "crashy back").await;
    }
}

/// Polls `tool` (an echo) until it answers right, for up to 20 s.
async fn back(env: &Env, c: &mut Stateless, tool: &str, kind: &'static str) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        let r = c.call(tool, json!({"message": "back?"}), None, LIMIT).await;
        if r.is_ok_and(|r| r.text() == Some("back?")) {
            env.tally.ok(kind);
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    env.tally
        .fail(kind, format!("{tool} did not answer within 20 s"));
}

/// Has `noisy` write `lines` stderr lines every `every`.
pub async fn flood_driver(env: Env, every: Duration, lines: u64) {
    let Ok(http) = http_client() else { return };
    let mut c = Stateless::new(http, &env.url, env.tally.strays.clone());
    while env.pause(every).await {
        let r = c
            .call("noisy:flood", json!({"lines": lines}), None, LIMIT)
            .await;
        judge(&env.tally, "flood", r, "flooded", false);
    }
}

/// Calls `stuck:slow` for far longer than `stuck`'s timeout: the hub must answer with its
/// timeout error (-32001) and cancel upstream.
pub async fn stuck_driver(env: Env, every: Duration) {
    let Ok(http) = http_client() else { return };
    let tally = &env.tally;
    let mut c = Stateless::new(http, &env.url, tally.strays.clone());
    while env.pause(every).await {
        match c
            .call("stuck:slow", json!({"ms": 20_000}), None, LIMIT)
            .await
        {
            Ok(r) if r.error_code() == Some(-32001) => tally.ok("stuck"),
            Ok(r) => tally.fail("stuck", format!("expected a timeout, got {}", r.brief())),
            Err(e) => tally.fail("stuck", format!("{e:#}")),
        }
    }
}

/// Kills the remote server every `every` (SIGKILL and SIGTERM in turn), starts it again a
/// second later, and waits for `remote:echo` to answer. Hands the server back at the end.
pub async fn remote_driver(env: Env, ctx: Arc<Ctx>, mut remote: Remote, every: Duration) -> Remote {
    let Ok(http) = http_client() else {
        return remote;
    };
    let mut c = Stateless::new(http, &env.url, env.tally.strays.clone());
    while env.pause(every).await {
        let hard = remote.starts % 2 == 1;
        match remote.restart(&ctx, hard, Duration::from_secs(1)).await {
            Ok(()) => env.tally.ok("remote restart"),
            Err(e) => {
                env.tally.fail("remote restart", format!("{e:#}"));
                return remote;
            }
        }
        back(&env, &mut c, "remote:echo", "remote back").await;
    }
    remote
}
