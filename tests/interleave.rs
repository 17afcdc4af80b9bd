//! A property test over random interleavings: one client pipelines a seeded pseudo-random
//! mix of echo, slow and progress calls over three servers, cancelling some of them while
//! they run, and nothing may cross — every answer carries its own id and payload, progress
//! carries the requester's own token, only while the request is pending and always
//! increasing, and a cancelled request gets no answer (or, when the cancel lost the race,
//! its one correct answer).

use crate::support::{Client, Scratch, WAIT, fixture, serve, text};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

const SERVERS: [&str; 3] = ["a", "b", "c"];
const OPERATIONS: usize = 300;

/// xorshift64: small, seedable, good enough to shuffle test operations.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        // Spread small seeds over the state; zero is the one forbidden state.
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-ish in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// One request the client sent, and what must come back for it.
struct Sent {
    id: Value,
    /// The text of the only content block of the result.
    expect: String,
    token: Option<Value>,
    /// Progress steps the server reports (0 without a token).
    steps: u64,
    /// Slow and progress calls may be cancelled while they run.
    cancellable: bool,
    cancelled: bool,
    server: &'static str,
}

/// JSON text of a value: ids `7` and `"7"` stay apart.
fn key(v: &Value) -> String {
    v.to_string()
}

async fn until_ready(c: &mut Client) {
    let deadline = Instant::now() + WAIT;
    loop {
        let tools = c.list_tools().await;
        if SERVERS
            .iter()
            .all(|s| tools.iter().any(|t| t["name"] == format!("{s}:echo")))
        {
            return;
        }
        assert!(Instant::now() < deadline, "servers not ready: {tools:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends the whole random sequence without waiting for anything; returns what was sent and
/// how many cancel notifications went out.
async fn send_sequence(c: &mut Client, seed: u64) -> (Vec<Sent>, usize) {
    let mut rng = XorShift::new(seed);
    let mut sent: Vec<Sent> = Vec::new();
    let mut cancels = 0;
    let mut tokens: usize = 0;
    for op in 0..OPERATIONS {
        let roll = rng.range(0, 99);
        if roll >= 85 {
            // Cancel a slow or progress call sent earlier (maybe already answered).
            let open: Vec<usize> = (0..sent.len())
                .filter(|&i| sent[i].cancellable && !sent[i].cancelled)
                .collect();
            let request_id = if open.is_empty() {
                json!(format!("never-sent-{op}"))
            } else {
                let i = open[rng.range(0, open.len() as u64 - 1) as usize];
                sent[i].cancelled = true;
                sent[i].id.clone()
            };
            c.send(
                &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": request_id, "reason": "test"}}),
            )
            .await;
            cancels += 1;
        } else {
            // Ids come in look-alike pairs: 10000, "10000", 10001, "10001", …
            let n = 10_000 + sent.len() / 2;
            let id = if sent.len().is_multiple_of(2) {
                json!(n)
            } else {
                json!(n.to_string())
            };
            let server = SERVERS[rng.range(0, 2) as usize];
            let mut params;
            let (expect, token, steps, cancellable) = if roll < 40 {
                let message = format!("m{seed}-{op} \"quoted\" ✓ \\ {}", rng.next());
                params =
                    json!({"name": format!("{server}:echo"), "arguments": {"message": message}});
                (message, None, 0, false)
            } else if roll < 60 {
                let ms = rng.range(5, 50);
                params = json!({"name": format!("{server}:slow"), "arguments": {"ms": ms}});
                (format!("slept {ms} ms"), None, 0, true)
            } else {
                let steps = rng.range(1, 5);
                let ms = rng.range(2, 12);
                // Tokens come in look-alike pairs too: 1000000, "1000000", …
                let t = 1_000_000 + tokens / 2;
                let token = if tokens.is_multiple_of(2) {
                    json!(t)
                } else {
                    json!(t.to_string())
                };
                tokens += 1;
                params = json!({"name": format!("{server}:progress"),
                                "arguments": {"steps": steps, "ms": ms}});
                params["_meta"] = json!({"progressToken": token});
                (format!("done {steps}"), Some(token), steps, true)
            };
            c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
                .await;
            sent.push(Sent {
                id,
                expect,
                token,
                steps,
                cancellable,
                cancelled: false,
                server,
            });
        }
        if rng.chance(4) {
            tokio::time::sleep(Duration::from_millis(rng.range(1, 4))).await;
        }
    }
    (sent, cancels)
}

/// Everything the hub sends until every request that was not cancelled is answered, then
/// until it has been quiet for a while (late answers to cancelled requests would show).
async fn collect(c: &mut Client, sent: &[Sent]) -> Vec<Value> {
    let mut log: Vec<Value> = c.inbox.drain(..).collect();
    let must: HashSet<String> = sent
        .iter()
        .filter(|s| !s.cancelled)
        .map(|s| key(&s.id))
        .collect();
    let mut answered: HashSet<String> = HashSet::new();
    let note = |m: &Value, answered: &mut HashSet<String>| {
        if m.get("method").is_none()
            && let Some(id) = m.get("id")
        {
            answered.insert(key(id));
        }
    };
    for m in &log {
        note(m, &mut answered);
    }
    let deadline = Instant::now() + WAIT;
    while !must.is_subset(&answered) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(m) = c.recv(left).await else {
            let missing: Vec<&String> = must.difference(&answered).collect();
            panic!("{} requests never answered: {missing:?}", missing.len());
        };
        note(&m, &mut answered);
        log.push(m);
    }
    let quiet_until = Instant::now() + Duration::from_secs(3);
    while let Some(m) = c.recv(Duration::from_millis(300)).await {
        log.push(m);
        assert!(Instant::now() < quiet_until, "the hub never goes quiet");
    }
    log
}

/// Checks the properties over the messages in arrival order; returns how many cancelled
/// requests were answered anyway.
fn check(seed: u64, sent: &[Sent], log: &[Value]) -> usize {
    let by_id: HashMap<String, usize> = sent
        .iter()
        .enumerate()
        .map(|(i, s)| (key(&s.id), i))
        .collect();
    let by_token: HashMap<String, usize> = sent
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.token.as_ref().map(|t| (key(t), i)))
        .collect();
    let mut answered: HashSet<usize> = HashSet::new();
    let mut last_progress: HashMap<usize, f64> = HashMap::new();
    let mut progress_count: HashMap<usize, u64> = HashMap::new();

    for m in log {
        match m.get("method").and_then(Value::as_str) {
            Some("notifications/progress") => {
                let p = &m["params"];
                let token = &p["progressToken"];
                let Some(&i) = by_token.get(&key(token)) else {
                    panic!("seed {seed}: progress under a token the client never used: {m}");
                };
                assert!(
                    !answered.contains(&i),
                    "seed {seed}: progress for {} after its response: {m}",
                    sent[i].id
                );
                let value = p["progress"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("seed {seed}: no progress value: {m}"));
                if let Some(&prev) = last_progress.get(&i) {
                    assert!(
                        value > prev,
                        "seed {seed}: progress for {token} went {prev} → {value}"
                    );
                }
                last_progress.insert(i, value);
                assert_eq!(p["total"], sent[i].steps, "seed {seed}: {m}");
                *progress_count.entry(i).or_default() += 1;
            }
            Some(method) if method.ends_with("/list_changed") => {}
            Some(_) => panic!("seed {seed}: unexpected message from the hub: {m}"),
            None => {
                let id = m.get("id").unwrap_or(&Value::Null);
                let Some(&i) = by_id.get(&key(id)) else {
                    panic!("seed {seed}: a response to an id never sent: {m}");
                };
                assert!(
                    answered.insert(i),
                    "seed {seed}: a second response to {id}: {m}"
                );
                assert!(
                    m.get("error").is_none(),
                    "seed {seed}: {}:{} failed: {m}",
                    sent[i].server,
                    sent[i].id
                );
                assert_eq!(
                    text(m),
                    sent[i].expect,
                    "seed {seed}: wrong payload for id {id}"
                );
                assert!(m["result"]["isError"].is_null(), "seed {seed}: {m}");
            }
        }
    }

    let mut cancelled_but_answered = 0;
    for (i, s) in sent.iter().enumerate() {
        let count = progress_count.get(&i).copied().unwrap_or(0);
        if answered.contains(&i) {
            // A request answered in full reported every step first.
            assert_eq!(
                count, s.steps,
                "seed {seed}: {} answered after {count} of {} progress steps",
                s.id, s.steps
            );
            if s.cancelled {
                cancelled_but_answered += 1;
            }
        } else {
            assert!(s.cancelled, "seed {seed}: {} never answered", s.id);
            assert!(count <= s.steps, "seed {seed}: {} over-reported", s.id);
        }
    }
    cancelled_but_answered
}

async fn run(seed: u64) {
    let s = Scratch::new();
    let cfg = s.servers(
        json!({"a": fixture(&[]), "b": fixture(&[]), "c": fixture(&[])}),
        None,
    );
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    c.initialize().await;
    until_ready(c).await;
    // Start-up announcements are not part of the run.
    while c.recv(Duration::from_millis(100)).await.is_some() {}
    c.inbox.clear();

    let t0 = Instant::now();
    let (sent, cancels) = send_sequence(c, seed).await;
    let log = collect(c, &sent).await;
    let raced = check(seed, &sent, &log);
    let cancelled = sent.iter().filter(|s| s.cancelled).count();
    eprintln!(
        "seed {seed}: {} requests, {cancels} cancels ({cancelled} of sent requests, {raced} answered anyway), {} messages in {:?}",
        sent.len(),
        log.len(),
        t0.elapsed()
    );
    assert!(
        cancelled > raced,
        "seed {seed}: no cancellation took effect ({cancelled} cancelled, all answered)"
    );

    // The servers heard of the cancellations the hub carried out — never of more than the
    // client asked for — and still answer.
    let mut upstream_cancels = 0;
    for server in SERVERS {
        let r = c.call(&format!("{server}:cancelled"), json!({})).await;
        let ids: Vec<Value> = serde_json::from_str(&text(&r)).unwrap();
        upstream_cancels += ids.len();
        let r = c
            .call(&format!("{server}:echo"), json!({"message": "still here"}))
            .await;
        assert_eq!(text(&r), "still here");
    }
    assert!(
        upstream_cancels >= 1 && upstream_cancels <= cancelled,
        "seed {seed}: {upstream_cancels} cancels reached servers for {cancelled} cancelled requests"
    );
    assert!(
        !hub.stderr().contains("panicked"),
        "seed {seed}: {}",
        hub.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_interleaving_seed_1() {
    run(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_interleaving_seed_2() {
    run(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_interleaving_seed_3() {
    run(0x5eed_0003).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_interleaving_seed_4() {
    run(0xdead_beef).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_interleaving_seed_5() {
    run(20_250_611).await;
}
