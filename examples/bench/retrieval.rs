//! Part 10: tool search — whether `search_tools` finds the tool a user means, what hiding the
//! catalogue behind it saves in `tools/list`, and what one search costs at 10,000 tools.
//!
//! The catalogue is the real filesystem, memory, time and everything servers (from the test
//! peers, run live) and the six fixture sets of `fixtures/catalogues/` (github, slack,
//! postgres, browser, git, tracker, each served by `openpact-fixture --tools-file`): 159
//! tools. The tasks (`examples/bench/retrieval/tasks.json`) are what a user would type to an
//! assistant, each with the one tool that best answers it; they were written before the
//! catalogues' descriptions and without looking at the search, and must stay that way — tune
//! the search against them, never them against the search. Two more sets of 70 were written
//! later by someone who had seen the catalogue but not the search ([`LATER_SETS`]): the
//! first was tuned on once its figure was taken, the second never has been, so it shows
//! what the search does with wording nobody fitted it to.
//!
//! - Quality: a hub with `"toolSearch": {"mode": "on"}` answers `search_tools {query: TASK,
//!   limit: 10}` for every task; recall@1, recall@5 and MRR over the ranked wire names of
//!   `structuredContent.tools`, per server too, and every task whose tool was not first with
//!   what came first (the table prints those not in the first five; `bench.json` has all).
//!   Also the mean size of a search's answer and, asking again, its round trip at 159 tools.
//! - Bytes: the complete `tools/list` result (every page, following `nextCursor`) of the same
//!   catalogue with the mode off and on, and the cut.
//! - Cost: a hub with the fixture sets served again and again under other names until the
//!   catalogue holds at least [`BIG_TOOLS`] tools (about 500 fixtures, unsandboxed to start
//!   sooner), sequential `search_tools` over the tasks' queries interleaved with as many
//!   `tools/call` of a fixture tool through the same hub: the call is the baseline, so the
//!   difference is the search's own work (and its larger answer: ten definitions, about
//!   12 KB, against one short text).
//!
//! Every server runs with `"sandbox": false` (part 9 measures the sandbox; here it would only
//! slow the starts) and the hub's built-in tools are off, so the catalogue is exactly the
//! servers'. The goals (recall@5 ≥ [`GOAL_RECALL_AT_5`], a cut ≥ [`GOAL_BYTES_CUT`] of the
//! bytes, what a search adds to a call's p50 well under [`GOAL_SEARCH_P50_MS`] ms) are information only: the part
//! fails only on errors. Without the peers it is skipped with a note, as part 7 is; against a
//! hub without `search_tools` it reports the bytes and the 10,000-tool start and says what it
//! could not measure.

use crate::client::{self, CallTemplate, IdScanner, Peer, children, pass_through};
use crate::latency::one_call;
use crate::remote::peers_json;
use crate::{Ctx, Params, ms, percentile};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The goal for the share of tasks whose tool is among the first five answers.
pub const GOAL_RECALL_AT_5: f64 = 0.9;
/// The goal for the share of `tools/list` bytes the mode "on" saves (at 150 tools or more).
pub const GOAL_BYTES_CUT: f64 = 0.8;
/// What a search should add to a call's p50 at 10,000 tools: well under this.
pub const GOAL_SEARCH_P50_MS: f64 = 1.0;
/// The size of the catalogue the cost is measured at (at least).
pub const BIG_TOOLS: usize = 10_000;
/// Answers asked of every search: MRR counts ranks up to here.
pub const LIMIT: usize = 10;
/// How long the first `tools/list` (and `search_tools`) of the 159-tool hubs may wait for
/// their servers: the hub holds both until every server has started, so the catalogue
/// listed and searched is complete (Node servers take a second or two).
pub const LIST_WAIT: &str = "60s";
/// The same for the hub with about 500 servers.
pub const BIG_LIST_WAIT: &str = "240s";
/// The real servers, by their config name and the peers variable holding their command.
const REAL: [(&str, &str); 4] = [
    ("filesystem", "PEER_FILESYSTEM"),
    ("memory", "PEER_MEMORY"),
    ("time", "PEER_TIME"),
    ("everything", "PEER_EVERYTHING"),
];
/// The fixture sets, by their config name (and file name in `fixtures/catalogues/`).
const SETS: [&str; 6] = ["github", "slack", "postgres", "browser", "git", "tracker"];
/// The fixture tool the 10,000-tool hub's baseline calls (`<set>00:get_me`).
const BASELINE_TOOL: &str = "github00:get_me";

/// One line of `tasks.json`.
#[derive(serde::Deserialize)]
struct Task {
    task: String,
    /// The best answer, `server:tool`.
    tool: String,
}

/// What the search answered for one task.
pub struct Ranked {
    pub task: String,
    pub expected: String,
    /// 1-based, within the first [`LIMIT`]; `None` when absent.
    pub rank: Option<usize>,
    /// The wire names answered, best first.
    pub got: Vec<String>,
}

/// Which half of the tasks (see [`Quality::recall_at_in`]).
#[derive(Clone, Copy, PartialEq)]
pub enum Half {
    Studied,
    HeldOut,
}

/// A set of tasks written after `tasks.json`, by someone who saw the catalogue but neither
/// the search nor its misses.
pub struct LaterSet {
    pub file: &'static str,
    pub key: &'static str,
    /// What was done with its misses.
    pub note: &'static str,
}

pub const LATER_SETS: &[LaterSet] = &[
    LaterSet {
        file: "tasks-fresh.json",
        key: "fresh",
        note: "written after the first tuning; 0.814 then; tuned on since",
    },
    LaterSet {
        file: "tasks-heldout.json",
        key: "heldout",
        note: "written after that; never tuned on, misses never read",
    },
];

/// The search's answers to every task.
pub struct Quality {
    pub ranked: Vec<Ranked>,
    /// The answers to each of [`LATER_SETS`], in that order.
    pub later: Vec<Vec<Ranked>>,
    /// The mean size of a `search_tools` result (its JSON text), what a client reads per search.
    pub result_bytes: f64,
    /// The same searches again, one at a time, against this catalogue (the quality pass was
    /// their warm-up): to set beside the cost at [`BIG_TOOLS`].
    pub timing: Timing,
}

impl Quality {
    /// The share of tasks whose tool is among the first `k` answers.
    pub fn recall_at(&self, k: usize) -> f64 {
        recall(&self.ranked, k)
    }

    /// [`Quality::recall_at`] over the `i`th of [`LATER_SETS`].
    pub fn later_recall_at(&self, i: usize, k: usize) -> f64 {
        self.later.get(i).map_or(0.0, |r| recall(r, k))
    }

    /// [`Quality::recall_at`] over one half of the tasks: `Studied` (the even positions of
    /// `tasks.json`, whose misses were read while tuning the search) or `HeldOut` (the odd
    /// ones, never looked at). The gap between them is what tuning to the tasks' wording
    /// bought that other wording would not get.
    pub fn recall_at_in(&self, k: usize, half: Half) -> f64 {
        let mine: Vec<&Ranked> = self
            .ranked
            .iter()
            .enumerate()
            .filter(|(i, _)| (i % 2 == 0) == (half == Half::Studied))
            .map(|(_, r)| r)
            .collect();
        recall(&mine, k)
    }

    /// Mean reciprocal rank over the first [`LIMIT`] answers (a tool not among them adds 0).
    pub fn mrr(&self) -> f64 {
        let sum: f64 = self
            .ranked
            .iter()
            .filter_map(|r| r.rank)
            .map(|n| 1.0 / n as f64)
            .sum();
        sum / self.ranked.len().max(1) as f64
    }

    /// Per server, in config order: tasks, found first, found in the first five.
    pub fn by_server(&self) -> Vec<(&'static str, usize, usize, usize)> {
        server_names()
            .map(|server| {
                let mine: Vec<&Ranked> = self
                    .ranked
                    .iter()
                    .filter(|r| r.expected.split_once(':').map(|(s, _)| s) == Some(server))
                    .collect();
                let within = |k: usize| {
                    mine.iter()
                        .filter(|r| r.rank.is_some_and(|n| n <= k))
                        .count()
                };
                (server, mine.len(), within(1), within(5))
            })
            .collect()
    }
}

/// The share of `ranked` whose tool is among the first `k` answers.
fn recall<R: std::borrow::Borrow<Ranked>>(ranked: &[R], k: usize) -> f64 {
    let hits = ranked
        .iter()
        .filter(|r| r.borrow().rank.is_some_and(|n| n <= k))
        .count();
    hits as f64 / ranked.len().max(1) as f64
}

/// The complete `tools/list` result of one hub.
pub struct Listing {
    /// The result objects' JSON text, every page together.
    pub bytes: usize,
    pub pages: usize,
    pub names: Vec<String>,
}

/// Sequential round trips of one kind.
pub struct Timing {
    pub calls: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
}

impl Timing {
    fn of(mut ns: Vec<u64>) -> Timing {
        ns.sort_unstable();
        let n = ns.len().max(1) as f64;
        Timing {
            calls: ns.len(),
            p50_us: percentile(&ns, 0.50) as f64 / 1e3,
            p99_us: percentile(&ns, 0.99) as f64 / 1e3,
            mean_us: ns.iter().sum::<u64>() as f64 / n / 1e3,
        }
    }
}

/// The hub with at least [`BIG_TOOLS`] tools.
pub struct Big {
    pub servers: usize,
    /// What the servers' catalogue files hold together.
    pub tools: usize,
    /// `openpact-fixture` processes found under the hub once its list was answered.
    pub fixtures_running: usize,
    /// Spawn → the first `tools/list` answered (the hub waits for its servers, within the
    /// `listWait` the part sets).
    pub startup_ms: f64,
    /// Passes over the tasks' queries measured (after one pass of warm-up).
    pub rounds: usize,
    /// `tools/call` of [`BASELINE_TOOL`], interleaved with the searches.
    pub call: Timing,
    /// `None` when the hub has no `search_tools`.
    pub search: Option<Timing>,
}

pub struct RetrievalPart {
    pub tasks: usize,
    /// The catalogue as the mode "off" lists it, and as "on" does.
    pub off: Listing,
    pub on: Listing,
    /// `None` when the hub has no `search_tools`.
    pub quality: Option<Quality>,
    pub big: Big,
}

impl RetrievalPart {
    /// The share of `tools/list` bytes the mode "on" saves.
    pub fn bytes_cut(&self) -> f64 {
        if self.off.bytes == 0 {
            return 0.0;
        }
        1.0 - self.on.bytes as f64 / self.off.bytes as f64
    }
}

fn server_names() -> impl Iterator<Item = &'static str> {
    REAL.iter().map(|(name, _)| *name).chain(SETS)
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn catalogue_path(set: &str) -> PathBuf {
    root().join(format!("fixtures/catalogues/{set}.json"))
}

/// The hub's settings: the pass-through pipeline, no built-in tools (the catalogue is the
/// servers'), the first `tools/list` waiting up to `list_wait` for every server, the mode.
pub fn settings(mode: &str, list_wait: &str) -> Value {
    let mut v = pass_through();
    v["builtins"] = json!(false);
    v["listWait"] = json!(list_wait);
    v["toolSearch"] = json!({"mode": mode});
    v
}

/// What `search_tools` answers each of `tasks`, and the bytes of those answers.
fn rank_all(on: &mut Peer, tasks: &[Task]) -> Result<(Vec<Ranked>, usize)> {
    let mut ranked = Vec::with_capacity(tasks.len());
    let mut bytes = 0;
    for t in tasks {
        let raw = on.call_raw("tools/call", search_params(&t.task))?;
        bytes += raw.len();
        let result: Value = serde_json::from_str(&raw)
            .with_context(|| format!("{}: search_tools result is not JSON", on.label))?;
        let got = ranked_names(&on.label, &result)?;
        let rank = got.iter().position(|n| *n == t.tool).map(|i| i + 1);
        ranked.push(Ranked {
            task: t.task.clone(),
            expected: t.tool.clone(),
            rank,
            got,
        });
    }
    Ok((ranked, bytes))
}

/// `examples/bench/retrieval/FILE`.
fn read_tasks(file: &str) -> Result<Vec<Task>> {
    let path = root().join("examples/bench/retrieval").join(file);
    let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let tasks: Vec<Task> = serde_json::from_slice(&text)
        .with_context(|| format!("{} is malformed", path.display()))?;
    if tasks.is_empty() {
        bail!("{} holds no tasks", path.display());
    }
    Ok(tasks)
}

/// The `mcpServers` entry of a fixture serving `set`'s catalogue.
fn fixture_entry(ctx: &Ctx, set: &str) -> Value {
    json!({
        "command": ctx.fixture,
        "args": ["--tools-file", catalogue_path(set)],
        "sandbox": false,
    })
}

/// The ten servers: the real ones as the peers file starts them, then the fixture sets.
fn servers(ctx: &Ctx, peers: &Path) -> Result<Map<String, Value>> {
    let mut map = real_servers(ctx, peers)?;
    for set in SETS {
        map.insert(set.to_string(), fixture_entry(ctx, set));
    }
    Ok(map)
}

/// The pinned real servers (filesystem, memory, time, everything) as the peers file starts
/// them, over the bench's own files.
pub fn real_servers(ctx: &Ctx, peers: &Path) -> Result<Map<String, Value>> {
    let vars: Value = serde_json::from_slice(
        &std::fs::read(peers).with_context(|| format!("reading {}", peers.display()))?,
    )
    .with_context(|| format!("{} is not JSON", peers.display()))?;
    // The filesystem server's one allowed directory, and the memory server's graph file: the
    // bench's own, so a run neither reads nor leaves anything elsewhere.
    let files = ctx.work.join("retrieval-files");
    std::fs::create_dir_all(&files)
        .with_context(|| format!("cannot create {}", files.display()))?;
    let memory = ctx.work.join("retrieval-memory.jsonl");
    let mut map = Map::new();
    for (name, var) in REAL {
        // Commands are paths and words without spaces (as part 7 reads them too).
        let words: Vec<&str> = vars
            .get(var)
            .and_then(Value::as_str)
            .map(|c| c.split(' ').filter(|w| !w.is_empty()).collect())
            .unwrap_or_default();
        let Some((command, args)) = words.split_first() else {
            bail!("no {var} in {}", peers.display());
        };
        let mut entry = json!({"command": command, "args": args, "sandbox": false});
        match name {
            "filesystem" => {
                let mut args: Vec<Value> = args.iter().map(|a| json!(a)).collect();
                args.push(json!(files));
                entry["args"] = Value::Array(args);
            }
            "memory" => entry["env"] = json!({"MEMORY_FILE_PATH": memory}),
            _ => {}
        }
        map.insert(name.to_string(), entry);
    }
    Ok(map)
}

/// Every page of `tools/list`, as received.
fn list(peer: &mut Peer) -> Result<Listing> {
    let mut listing = Listing {
        bytes: 0,
        pages: 0,
        names: Vec::new(),
    };
    let mut cursor: Option<String> = None;
    loop {
        let params = cursor
            .as_ref()
            .map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let raw = peer.call_raw("tools/list", params)?;
        listing.bytes += raw.len();
        listing.pages += 1;
        let page: client::ToolsPage = serde_json::from_str(&raw)
            .with_context(|| format!("{}: tools/list without tools", peer.label))?;
        listing.names.extend(page.tools.into_iter().map(|t| t.name));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(listing),
        }
    }
}

/// The `search_tools` request for `query`.
fn search_params(query: &str) -> Value {
    json!({"name": "search_tools", "arguments": {"query": query, "limit": LIMIT}})
}

/// The wire names a `search_tools` result ranks, best first.
fn ranked_names(label: &str, result: &Value) -> Result<Vec<String>> {
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        bail!("{label}: search_tools answered an error: {result}");
    }
    let tools = result
        .pointer("/structuredContent/tools")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            anyhow!("{label}: search_tools without structuredContent.tools: {result}")
        })?;
    tools
        .iter()
        .map(|t| {
            t.get("name")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| anyhow!("{label}: a search answer without a name: {t}"))
        })
        .collect()
}

pub fn run(ctx: &Ctx, p: &Params) -> Result<Option<RetrievalPart>> {
    let Some(peers) = peers_json() else {
        println!(
            "10. tool search: skipped, the test peers are not installed (run `bash .ci/peers.sh target/peers`)"
        );
        return Ok(None);
    };
    let wd = &ctx.watchdog;
    let tasks = read_tasks("tasks.json")?;
    let later = LATER_SETS
        .iter()
        .map(|set| read_tasks(set.file))
        .collect::<Result<Vec<_>>>()?;
    let map = servers(ctx, &peers)?;

    wd.arm(
        "tool search: starting the two hubs with every server",
        Duration::from_secs(120),
    );
    // Both spawned before either is spoken to, so their servers start side by side.
    let mut off = client::spawn_hub_on(
        ctx,
        "retrieval-off",
        map.clone(),
        &settings("off", LIST_WAIT),
    )?;
    let mut on = client::spawn_hub_on(ctx, "retrieval-on", map, &settings("on", LIST_WAIT))?;
    off.label = "hub (retrieval, mode off)".into();
    on.label = "hub (retrieval, mode on)".into();
    off.initialize()?;
    on.initialize()?;
    // The first list waits until every server has started (within LIST_WAIT), so it is
    // complete; so does the first search.
    let off_list = list(&mut off)?;
    let on_list = list(&mut on)?;
    off.close(Duration::from_secs(10));
    check_catalogue(&off_list, &tasks)?;
    for set in &later {
        check_catalogue(&off_list, set)?;
    }

    let searchable = on_list.names.iter().any(|n| n == "search_tools");
    let quality = if searchable {
        wd.arm("tool search: the tasks", Duration::from_secs(120));
        let (ranked, bytes) = rank_all(&mut on, &tasks)?;
        let later = later
            .iter()
            .map(|set| rank_all(&mut on, set).map(|(r, _)| r))
            .collect::<Result<Vec<_>>>()?;
        let scanner = IdScanner::new();
        let mut ns = Vec::with_capacity(tasks.len());
        for t in &tasks {
            let template = CallTemplate::new("tools/call", &search_params(&t.task));
            ns.push(one_call(&mut on, &scanner, &template)?);
        }
        Some(Quality {
            ranked,
            later,
            result_bytes: bytes as f64 / tasks.len() as f64,
            timing: Timing::of(ns),
        })
    } else {
        println!(
            "10. tool search: the hub lists no search_tools with \"toolSearch\": {{\"mode\": \"on\"}} ({} tools listed); recall and the search's cost are not measured",
            on_list.names.len()
        );
        None
    };
    on.close(Duration::from_secs(10));

    let big = big(ctx, p, &tasks, searchable)?;
    wd.disarm();
    Ok(Some(RetrievalPart {
        tasks: tasks.len(),
        off: off_list,
        on: on_list,
        quality,
        big,
    }))
}

/// Every server listed tools, and every task's tool is in the catalogue (a real server that
/// renamed a tool would otherwise count as the search's miss).
fn check_catalogue(off: &Listing, tasks: &[Task]) -> Result<()> {
    for server in server_names() {
        let prefix = format!("{server}:");
        if !off.names.iter().any(|n| n.starts_with(&prefix)) {
            bail!(
                "server {server} listed no tools within the hub's listWait; see target/bench-work/retrieval-off.stderr.log"
            );
        }
    }
    let missing: Vec<&str> = tasks
        .iter()
        .filter(|t| !off.names.contains(&t.tool))
        .map(|t| t.tool.as_str())
        .collect();
    if !missing.is_empty() {
        bail!(
            "tasks.json names tools the catalogue does not have: {}",
            missing.join(", ")
        );
    }
    Ok(())
}

/// The fixture sets again and again (`github00`, `slack00`, …, `github01`, …) until their
/// catalogues hold [`BIG_TOOLS`] tools; the map and that count.
fn big_servers(ctx: &Ctx) -> Result<(Map<String, Value>, usize)> {
    let mut sizes = Vec::new();
    for set in SETS {
        let path = catalogue_path(set);
        let tools: Vec<Value> = serde_json::from_slice(
            &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
        )
        .with_context(|| format!("{} is malformed", path.display()))?;
        sizes.push((set, tools.len()));
    }
    let (mut map, mut tools) = (Map::new(), 0);
    for i in 0.. {
        if tools >= BIG_TOOLS {
            break;
        }
        let (set, size) = sizes[i % sizes.len()];
        map.insert(
            format!("{set}{:02}", i / sizes.len()),
            fixture_entry(ctx, set),
        );
        tools += size;
    }
    Ok((map, tools))
}

/// The 10,000-tool hub: its start, then searches and baseline calls interleaved.
fn big(ctx: &Ctx, p: &Params, tasks: &[Task], searchable: bool) -> Result<Big> {
    let wd = &ctx.watchdog;
    let (map, tools) = big_servers(ctx)?;
    let servers = map.len();
    wd.arm(
        &format!("tool search: starting a hub with {servers} servers"),
        Duration::from_secs(300),
    );
    let mut hub = client::spawn_hub_on(ctx, "retrieval-10k", map, &settings("on", BIG_LIST_WAIT))?;
    hub.label = format!("hub ({servers} servers, {tools} tools)");
    hub.initialize()?;
    let listed = list(&mut hub)?;
    let startup_ms = ms(hub.spawned_at.elapsed());
    let fixture = ctx
        .fixture
        .canonicalize()
        .unwrap_or_else(|_| ctx.fixture.clone());
    let fixtures_running = children(hub.pid)
        .into_iter()
        .filter(|c| std::fs::read_link(format!("/proc/{c}/exe")).is_ok_and(|exe| exe == fixture))
        .count();
    if fixtures_running != servers {
        bail!(
            "{}: {fixtures_running} of {servers} fixtures running once the list was answered; see target/bench-work/retrieval-10k.stderr.log",
            hub.label
        );
    }
    // Without the search the mode is not understood and everything is listed: then the list
    // itself says whether every fixture's tools arrived.
    if !searchable && listed.names.len() < tools {
        bail!(
            "{}: {} tools listed, not {tools}",
            hub.label,
            listed.names.len()
        );
    }

    wd.arm(
        &format!("tool search: searches at {tools} tools"),
        Duration::from_secs(300),
    );
    let baseline = json!({"name": BASELINE_TOOL, "arguments": {}});
    let answer = hub.call("tools/call", baseline.clone())?;
    let expected = format!(
        "{} called with {{}}",
        BASELINE_TOOL.split_once(':').map_or("", |(_, t)| t)
    );
    if answer.pointer("/content/0/text").and_then(Value::as_str) != Some(expected.as_str()) {
        bail!("{}: {BASELINE_TOOL} answered {answer}", hub.label);
    }
    let call = CallTemplate::new("tools/call", &baseline);
    let searches: Vec<CallTemplate> = if searchable {
        let first = hub.call("tools/call", search_params(&tasks[0].task))?;
        if ranked_names(&hub.label, &first)?.is_empty() {
            bail!(
                "{}: search_tools found nothing for {:?}",
                hub.label,
                tasks[0].task
            );
        }
        tasks
            .iter()
            .map(|t| CallTemplate::new("tools/call", &search_params(&t.task)))
            .collect()
    } else {
        Vec::new()
    };
    let rounds = p.retrieval_rounds.max(1);
    let scanner = IdScanner::new();
    let (mut search_ns, mut call_ns) = (Vec::new(), Vec::new());
    // One pass of warm-up, then `rounds` measured; a search and a call in turn, the order
    // swapped each time, so both meet the machine in the same states.
    for round in 0..=rounds {
        for (i, _) in tasks.iter().enumerate() {
            let search = searches.get(i);
            let (s, c) = if i % 2 == 0 {
                let s = search
                    .map(|t| one_call(&mut hub, &scanner, t))
                    .transpose()?;
                (s, one_call(&mut hub, &scanner, &call)?)
            } else {
                let c = one_call(&mut hub, &scanner, &call)?;
                (
                    search
                        .map(|t| one_call(&mut hub, &scanner, t))
                        .transpose()?,
                    c,
                )
            };
            if round > 0 {
                search_ns.extend(s);
                call_ns.push(c);
            }
        }
    }
    // About 500 fixtures see their stdin close and exit together.
    hub.close(Duration::from_secs(30));
    Ok(Big {
        servers,
        tools,
        fixtures_running,
        startup_ms,
        rounds,
        call: Timing::of(call_ns),
        search: searchable.then(|| Timing::of(search_ns)),
    })
}
