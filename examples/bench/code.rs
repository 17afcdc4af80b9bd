//! Part 13: code mode — what an agent's context takes in when it does multi-step work as
//! direct tool calls against one `search_tools` and one `run_code`.
//!
//! Four fixture catalogues answer from their canned data (`fixtures/catalogues/NAME.json`
//! served with `--data NAME.data.json`): tracker, github, slack and postgres. Every task of
//! [`TASKS`] is a request a user would make that takes five or more calls, done two ways:
//!
//! - (a) direct: a hub with code mode off lists the whole catalogue (what an agent holds in
//!   context), then the task's calls go one by one, each with arguments taken from the earlier
//!   answers in Rust (so the sequence is the real one). Bytes: the `tools/list` result plus
//!   every call's result, as the client received them.
//! - (b) code: a hub with `"codeMode": {"mode": "on"}` lists `search_tools` and `run_code`;
//!   the task is one `search_tools {query, limit: 5}` and one `run_code` of the task's
//!   Starlark program. Bytes: that `tools/list` result, the search's result and the program's.
//!
//! Tokens are approximated as bytes / 4 (JSON text of this kind runs 3–4.5 bytes a token in
//! common tokenizers; the ratio between the ways does not depend on the divisor). Wall times
//! are the median of the runs, the calls only (no model turns, which in a real agent add a
//! model round trip per direct call). Both answers must be the same value: the program's
//! last expression against what the Rust side computed.
//!
//! Also measured on the code-mode hub: a program's start cost (`run_code` of `1`, p50 over
//! [`START_RUNS`], beside a plain `tools/call` of a catalogue tool interleaved with it) and
//! the hub's memory idle and while a worker runs a long loop (sampled from `/proc` meanwhile).
//! The goal (≥ [`GOAL_BYTES_CUT`] fewer bytes over the tasks) is information only. When the
//! hub lists no `run_code`, (b) and the worker figures are skipped with a note.

use crate::client::{self, Peer, children, status_field};
use crate::retrieval::{LIST_WAIT, settings};
use crate::{Ctx, Params, ms, percentile};
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The goal for the share of bytes code mode saves over the tasks.
pub const GOAL_BYTES_CUT: f64 = 0.8;
/// Bytes per token in the approximate token counts.
pub const BYTES_PER_TOKEN: f64 = 4.0;
/// `run_code {"code": "1"}` runs for the start cost (and as many plain calls).
pub const START_RUNS: usize = 20;
/// `search_tools`'s `limit` in way (b).
pub const SEARCH_LIMIT: usize = 5;
/// The catalogues served, by config name (and file names in `fixtures/catalogues/`).
const SETS: [&str; 4] = ["tracker", "github", "slack", "postgres"];
/// The plain call set beside `run_code` of `1`.
const PLAIN_CALL: (&str, &str) = ("tracker:get_issue", r#"{"id": "ENG-1"}"#);
/// A program that keeps its worker busy until the timeout (no sleep in Starlark), its
/// integers kept small so that it allocates nothing.
const SPIN: &str = "def spin():\n    n = 0\n    for i in range(1000000000):\n        n = (n + i) % 7\n    return n\nspin()\n";
/// Seconds `SPIN` may run; the hub's memory is read while it does.
const SPIN_TIMEOUT: u64 = 4;

/// One task: the user's request, the search the agent makes in code mode, the program it
/// writes, and the direct calls it would make instead (with the answer they lead to).
pub struct Task {
    pub key: &'static str,
    pub what: &'static str,
    pub query: &'static str,
    pub program: &'static str,
    direct: fn(&mut Direct) -> Result<Value>,
}

/// Way (a)'s side of one peer: every call's result bytes and the tools used.
pub struct Direct<'a> {
    peer: &'a mut Peer,
    pub calls: usize,
    pub result_bytes: usize,
    pub used: BTreeSet<String>,
}

impl Direct<'_> {
    /// Calls `tool` with `arguments`; its value as a program would get it: the
    /// `structuredContent`, else the text parsed as JSON, else the text. A tool error fails
    /// the task (none of them expects one).
    fn call(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        let raw = self
            .peer
            .call_raw("tools/call", json!({"name": tool, "arguments": arguments}))?;
        self.calls += 1;
        self.result_bytes += raw.len();
        self.used.insert(tool.to_string());
        let result: Value = serde_json::from_str(&raw)
            .with_context(|| format!("{}: {tool}: result is not JSON", self.peer.label))?;
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            bail!("{}: {tool} failed: {result}", self.peer.label);
        }
        Ok(value_of(&result))
    }
}

/// A tool result as a program sees it (see [`Direct::call`]).
fn value_of(result: &Value) -> Value {
    if let Some(structured) = result.get("structuredContent") {
        return structured.clone();
    }
    let text = result
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default();
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn list(v: &Value, key: &str) -> Vec<Value> {
    v.get(key)
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn is_open(issue: &Value) -> bool {
    !matches!(
        issue.pointer("/state/name").and_then(Value::as_str),
        Some("Done" | "Canceled")
    )
}

const REPO: (&str, &str) = ("acme", "storefront");
const TOP_SQL: &str = "SELECT c.id, c.name, sum(o.total_cents) AS revenue_cents FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name ORDER BY revenue_cents DESC LIMIT 5";

fn pr_args(number: &Value) -> Value {
    json!({"owner": REPO.0, "repo": REPO.1, "pullNumber": number})
}

pub const TASKS: &[Task] = &[
    Task {
        key: "open-issue-comments",
        what: "every open tracker issue with more than two comments",
        query: "list tracker issues; list the comments on an issue",
        program: r#"issues = call("tracker:list_issues", {})["issues"]
open = [i for i in issues if i["state"]["name"] not in ("Done", "Canceled")]
comments = parallel([["tracker:list_comments", {"issueId": i["identifier"]}] for i in open])
[{"id": i["identifier"], "title": i["title"], "comments": len(c["comments"])} for i, c in zip(open, comments) if len(c["comments"]) > 2]
"#,
        direct: |d| {
            let mut out = Vec::new();
            for i in list(&d.call("tracker:list_issues", json!({}))?, "issues") {
                if !is_open(&i) {
                    continue;
                }
                let c = d.call("tracker:list_comments", json!({"issueId": i["identifier"]}))?;
                let n = list(&c, "comments").len();
                if n > 2 {
                    out.push(json!({"id": i["identifier"], "title": i["title"], "comments": n}));
                }
            }
            Ok(Value::Array(out))
        },
    },
    Task {
        key: "my-open-bugs",
        what: "Maya's unfinished bugs with their priority and the first line of each description",
        query: "tracker users; list issues by assignee; get an issue's details",
        program: r#"me = call("tracker:list_users", {"query": "Maya"})["users"][0]
mine = call("tracker:list_issues", {"assignee": me["id"]})["issues"]
full = parallel([["tracker:get_issue", {"id": i["identifier"]}] for i in mine])
[{"id": f["identifier"], "priority": f["priority"], "summary": f["description"].split("\n")[0]} for f in full if "bug" in f["labels"] and f["state"]["name"] not in ("Done", "Canceled")]
"#,
        direct: |d| {
            let users = d.call("tracker:list_users", json!({"query": "Maya"}))?;
            let me = list(&users, "users")
                .first()
                .and_then(|u| u.get("id").cloned())
                .ok_or_else(|| anyhow!("no user Maya: {users}"))?;
            let mut out = Vec::new();
            for i in list(
                &d.call("tracker:list_issues", json!({"assignee": me}))?,
                "issues",
            ) {
                let f = d.call("tracker:get_issue", json!({"id": i["identifier"]}))?;
                let bug = list(&f, "labels").iter().any(|l| l == "bug");
                if bug && is_open(&f) {
                    let first = f["description"]
                        .as_str()
                        .unwrap_or_default()
                        .split('\n')
                        .next()
                        .unwrap_or_default();
                    out.push(
                        json!({"id": f["identifier"], "priority": f["priority"], "summary": first}),
                    );
                }
            }
            Ok(Value::Array(out))
        },
    },
    Task {
        key: "messages-by-author",
        what: "messages per author over every Slack channel, most first",
        query: "list slack channels; a channel's message history; list slack users",
        program: r#"chans = call("slack:slack_list_channels", {})["channels"]
names = {u["id"]: u["real_name"] for u in call("slack:slack_get_users", {})["members"]}
hist = parallel([["slack:slack_get_channel_history", {"channel_id": c["id"]}] for c in chans])
counts = {}
for h in hist:
    for m in h["messages"]:
        n = names[m["user"]]
        counts[n] = counts.get(n, 0) + 1
[[n, counts[n]] for n in sorted(counts.keys(), key = lambda n: (-counts[n], n))]
"#,
        direct: |d| {
            let chans = list(&d.call("slack:slack_list_channels", json!({}))?, "channels");
            let names: Map<String, Value> =
                list(&d.call("slack:slack_get_users", json!({}))?, "members")
                    .iter()
                    .filter_map(|u| Some((u["id"].as_str()?.to_string(), u["real_name"].clone())))
                    .collect();
            let mut counts: Vec<(String, i64)> = Vec::new();
            for c in chans {
                let h = d.call(
                    "slack:slack_get_channel_history",
                    json!({"channel_id": c["id"]}),
                )?;
                for m in list(&h, "messages") {
                    let name = names
                        .get(m["user"].as_str().unwrap_or_default())
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    match counts.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, k)) => *k += 1,
                        None => counts.push((name, 1)),
                    }
                }
            }
            counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            Ok(json!(
                counts
                    .into_iter()
                    .map(|(n, k)| json!([n, k]))
                    .collect::<Vec<_>>()
            ))
        },
    },
    Task {
        key: "busy-incident-threads",
        what: "threads in #incidents with more than three replies, and who replied",
        query: "slack channels; channel history; thread replies; users",
        program: r#"inc = [c for c in call("slack:slack_list_channels", {})["channels"] if c["name"] == "incidents"][0]
names = {u["id"]: u["real_name"] for u in call("slack:slack_get_users", {})["members"]}
msgs = call("slack:slack_get_channel_history", {"channel_id": inc["id"]})["messages"]
threads = [m for m in msgs if m.get("reply_count", 0) > 0]
reps = parallel([["slack:slack_get_thread_replies", {"channel_id": inc["id"], "thread_ts": m["ts"]}] for m in threads])
out = []
for m, r in zip(threads, reps):
    rs = r["messages"][1:]
    if len(rs) > 3:
        out.append({"text": m["text"], "replies": len(rs), "repliers": sorted({names[x["user"]]: True for x in rs}.keys())})
out
"#,
        direct: |d| {
            let inc = list(&d.call("slack:slack_list_channels", json!({}))?, "channels")
                .into_iter()
                .find(|c| c["name"] == "incidents")
                .ok_or_else(|| anyhow!("no #incidents"))?;
            let names = list(&d.call("slack:slack_get_users", json!({}))?, "members");
            let name_of = |id: &Value| {
                names
                    .iter()
                    .find(|u| u["id"] == *id)
                    .map_or(Value::Null, |u| u["real_name"].clone())
            };
            let history = d.call(
                "slack:slack_get_channel_history",
                json!({"channel_id": inc["id"]}),
            )?;
            let mut out = Vec::new();
            for m in list(&history, "messages") {
                if m.get("reply_count").and_then(Value::as_i64).unwrap_or(0) == 0 {
                    continue;
                }
                let r = d.call(
                    "slack:slack_get_thread_replies",
                    json!({"channel_id": inc["id"], "thread_ts": m["ts"]}),
                )?;
                let replies: Vec<Value> = list(&r, "messages").into_iter().skip(1).collect();
                if replies.len() > 3 {
                    let who: BTreeSet<String> = replies
                        .iter()
                        .filter_map(|x| name_of(&x["user"]).as_str().map(str::to_string))
                        .collect();
                    out.push(json!({"text": m["text"], "replies": replies.len(), "repliers": who}));
                }
            }
            Ok(Value::Array(out))
        },
    },
    Task {
        key: "prs-touching-file",
        what: "open pull requests touching src/checkout/cart.ts, with each reviewer's latest review state",
        query: "list pull requests; a pull request's files; its reviews",
        program: r#"prs = call("github:list_pull_requests", {"owner": "acme", "repo": "storefront", "state": "open"})["pull_requests"]
files = parallel([["github:get_pull_request_files", {"owner": "acme", "repo": "storefront", "pullNumber": p["number"]}] for p in prs])
hit = [p for p, f in zip(prs, files) if any([x["filename"] == "src/checkout/cart.ts" for x in f["files"]])]
revs = parallel([["github:get_pull_request_reviews", {"owner": "acme", "repo": "storefront", "pullNumber": p["number"]}] for p in hit])
out = []
for p, r in zip(hit, revs):
    latest = {}
    for v in r["reviews"]:
        latest[v["user"]["login"]] = v["state"]
    out.append({"number": p["number"], "title": p["title"], "reviews": latest})
out
"#,
        direct: |d| {
            let prs = d.call(
                "github:list_pull_requests",
                json!({"owner": REPO.0, "repo": REPO.1, "state": "open"}),
            )?;
            let mut out = Vec::new();
            for p in list(&prs, "pull_requests") {
                let files = d.call("github:get_pull_request_files", pr_args(&p["number"]))?;
                if !list(&files, "files")
                    .iter()
                    .any(|f| f["filename"] == "src/checkout/cart.ts")
                {
                    continue;
                }
                let reviews = d.call("github:get_pull_request_reviews", pr_args(&p["number"]))?;
                let mut latest = Map::new();
                for v in list(&reviews, "reviews") {
                    if let Some(login) = v.pointer("/user/login").and_then(Value::as_str) {
                        latest.insert(login.to_string(), v["state"].clone());
                    }
                }
                out.push(json!({"number": p["number"], "title": p["title"], "reviews": latest}));
            }
            Ok(Value::Array(out))
        },
    },
    Task {
        key: "failing-checks",
        what: "open pull requests whose checks fail, with the failing checks and the author",
        query: "list pull requests; a pull request's status checks",
        program: r#"prs = call("github:list_pull_requests", {"owner": "acme", "repo": "storefront", "state": "open"})["pull_requests"]
st = parallel([["github:get_pull_request_status", {"owner": "acme", "repo": "storefront", "pullNumber": p["number"]}] for p in prs])
out = []
for p, s in zip(prs, st):
    bad = [x["context"] for x in s["statuses"] if x["state"] == "failure"]
    if bad:
        out.append({"number": p["number"], "author": p["user"]["login"], "failing": bad})
out
"#,
        direct: |d| {
            let prs = d.call(
                "github:list_pull_requests",
                json!({"owner": REPO.0, "repo": REPO.1, "state": "open"}),
            )?;
            let mut out = Vec::new();
            for p in list(&prs, "pull_requests") {
                let s = d.call("github:get_pull_request_status", pr_args(&p["number"]))?;
                let bad: Vec<Value> = list(&s, "statuses")
                    .into_iter()
                    .filter(|x| x["state"] == "failure")
                    .map(|x| x["context"].clone())
                    .collect();
                if !bad.is_empty() {
                    out.push(json!({"number": p["number"], "author": p["user"]["login"], "failing": bad}));
                }
            }
            Ok(Value::Array(out))
        },
    },
    Task {
        key: "bug-discussions",
        what: "open GitHub issues labelled bug: how many comments, who commented last",
        query: "list github repository issues by label; issue comments",
        program: r#"issues = call("github:list_issues", {"owner": "acme", "repo": "storefront", "state": "OPEN", "labels": ["bug"]})["issues"]
cs = parallel([["github:get_issue_comments", {"owner": "acme", "repo": "storefront", "issue_number": i["number"]}] for i in issues])
[{"number": i["number"], "title": i["title"], "comments": len(c["comments"]), "last": c["comments"][-1]["user"]["login"] if c["comments"] else None} for i, c in zip(issues, cs)]
"#,
        direct: |d| {
            let issues = d.call(
                "github:list_issues",
                json!({"owner": REPO.0, "repo": REPO.1, "state": "OPEN", "labels": ["bug"]}),
            )?;
            let mut out = Vec::new();
            for i in list(&issues, "issues") {
                let c = list(
                    &d.call(
                        "github:get_issue_comments",
                        json!({"owner": REPO.0, "repo": REPO.1, "issue_number": i["number"]}),
                    )?,
                    "comments",
                );
                let last = c.last().map_or(Value::Null, |x| x["user"]["login"].clone());
                out.push(json!({"number": i["number"], "title": i["title"], "comments": c.len(), "last": last}));
            }
            Ok(Value::Array(out))
        },
    },
    Task {
        key: "in-review-readiness",
        what: "tracker issues in review: their linked pull request's checks and approvals",
        query: "tracker issues by state; get an issue; pull request status; pull request reviews",
        program: r#"issues = call("tracker:list_issues", {"state": "In Review"})["issues"]
full = parallel([["tracker:get_issue", {"id": i["identifier"]}] for i in issues])
out = []
for f in full:
    pr = [a["number"] for a in f["attachments"] if a["type"] == "github_pr"][0]
    args = {"owner": "acme", "repo": "storefront", "pullNumber": pr}
    st, rv = parallel([["github:get_pull_request_status", args], ["github:get_pull_request_reviews", args]])
    out.append({"issue": f["identifier"], "pr": pr, "checks": st["state"], "approvals": len([r for r in rv["reviews"] if r["state"] == "APPROVED"])})
out
"#,
        direct: |d| {
            let issues = d.call("tracker:list_issues", json!({"state": "In Review"}))?;
            let mut out = Vec::new();
            for i in list(&issues, "issues") {
                let f = d.call("tracker:get_issue", json!({"id": i["identifier"]}))?;
                let pr = list(&f, "attachments")
                    .into_iter()
                    .find(|a| a["type"] == "github_pr")
                    .map(|a| a["number"].clone())
                    .ok_or_else(|| anyhow!("{} links no pull request", i["identifier"]))?;
                let st = d.call("github:get_pull_request_status", pr_args(&pr))?;
                let rv = d.call("github:get_pull_request_reviews", pr_args(&pr))?;
                let approvals = list(&rv, "reviews")
                    .iter()
                    .filter(|r| r["state"] == "APPROVED")
                    .count();
                out.push(json!({"issue": f["identifier"], "pr": pr, "checks": st["state"], "approvals": approvals}));
            }
            Ok(Value::Array(out))
        },
    },
    Task {
        key: "customer-tables",
        what: "tables with a customer_id column, their estimated rows and whether it may be null",
        query: "postgres list tables; describe a table's columns",
        program: r#"tables = call("postgres:list_tables", {})["tables"]
ds = parallel([["postgres:describe_table", {"table_name": t["name"]}] for t in tables])
out = []
for t, d in zip(tables, ds):
    col = [c for c in d["columns"] if c["name"] == "customer_id"]
    if col:
        out.append({"table": t["name"], "rows": t["estimated_rows"], "nullable": col[0]["nullable"]})
out
"#,
        direct: |d| {
            let mut out = Vec::new();
            for t in list(&d.call("postgres:list_tables", json!({}))?, "tables") {
                let desc = d.call("postgres:describe_table", json!({"table_name": t["name"]}))?;
                if let Some(col) = list(&desc, "columns")
                    .into_iter()
                    .find(|c| c["name"] == "customer_id")
                {
                    out.push(json!({"table": t["name"], "rows": t["estimated_rows"], "nullable": col["nullable"]}));
                }
            }
            Ok(Value::Array(out))
        },
    },
    Task {
        key: "top-customers-issues",
        what: "the five customers with the most revenue and their open tracker issues",
        query: "run a sql query; search tracker issues by text",
        program: r#"SQL = "SELECT c.id, c.name, sum(o.total_cents) AS revenue_cents FROM customers c JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name ORDER BY revenue_cents DESC LIMIT 5"
rows = call("postgres:query", {"sql": SQL})["rows"]
found = parallel([["tracker:list_issues", {"query": r["name"]}] for r in rows])
[{"customer": r["name"], "revenue_cents": r["revenue_cents"], "issues": [i["identifier"] for i in f["issues"] if i["state"]["name"] not in ("Done", "Canceled")]} for r, f in zip(rows, found)]
"#,
        direct: |d| {
            let rows = list(&d.call("postgres:query", json!({"sql": TOP_SQL}))?, "rows");
            let mut out = Vec::new();
            for r in rows {
                let found = d.call("tracker:list_issues", json!({"query": r["name"]}))?;
                let open: Vec<Value> = list(&found, "issues")
                    .into_iter()
                    .filter(is_open)
                    .map(|i| i["identifier"].clone())
                    .collect();
                out.push(json!({"customer": r["name"], "revenue_cents": r["revenue_cents"], "issues": open}));
            }
            Ok(Value::Array(out))
        },
    },
];

/// Way (a) of one task.
pub struct DirectRun {
    pub calls: usize,
    pub result_bytes: usize,
    /// Median over the runs.
    pub ms: f64,
    pub tools: Vec<String>,
    pub answer: Value,
}

/// Way (b) of one task.
pub struct CodeRun {
    pub search_bytes: usize,
    pub run_bytes: usize,
    pub ms: f64,
    /// Of the tools (a) used, how many the search answered.
    pub found: usize,
    /// The tools (a) used that the search did not answer.
    pub missed: Vec<String>,
    /// The program's answer equals (a)'s.
    pub same: bool,
    /// The program failed: its message.
    pub error: Option<String>,
    /// What the program answered, when it differs.
    pub answer: Option<Value>,
    /// The result said the worker ran without the sandbox.
    pub unconfined: bool,
}

pub struct TaskRun {
    pub task: &'static Task,
    pub direct: DirectRun,
    pub code: Option<CodeRun>,
}

/// `run_code` of `1` against a plain call, sequential and interleaved.
pub struct StartCost {
    pub runs: usize,
    pub run_code_p50_ms: f64,
    pub plain_p50_ms: f64,
    /// Which hub answered the plain call (the code-mode view may hide direct tools).
    pub plain_on: &'static str,
}

/// The code-mode hub's memory, idle and with a worker running [`SPIN`].
pub struct Memory {
    pub hub_idle_kib: u64,
    /// The hub's peak while the program ran.
    pub hub_running_kib: u64,
    /// Every process below the hub but the fixtures (the worker and its wrapper), at their
    /// largest sample.
    pub workers: usize,
    pub workers_kib: u64,
    /// How the program ended (the first line of its answer).
    pub ended: String,
}

pub struct CodePart {
    pub runs: usize,
    pub tools_direct: usize,
    pub list_direct_bytes: usize,
    /// `None` when the hub lists no `run_code` (then nothing of (b) is measured).
    pub list_code: Option<(usize, Vec<String>)>,
    pub tasks: Vec<TaskRun>,
    pub start: Option<StartCost>,
    pub memory: Option<Memory>,
}

impl CodePart {
    /// Bytes into the context over all tasks: (a), and (b) when measured.
    pub fn totals(&self) -> (usize, Option<usize>) {
        let a = self
            .tasks
            .iter()
            .map(|t| self.list_direct_bytes + t.direct.result_bytes)
            .sum();
        let b = self.list_code.as_ref().map(|(list, _)| {
            self.tasks
                .iter()
                .map(|t| list + t.code.as_ref().map_or(0, |c| c.search_bytes + c.run_bytes))
                .sum()
        });
        (a, b)
    }

    /// The share of bytes code mode saves over the tasks.
    pub fn cut(&self) -> Option<f64> {
        let (a, b) = self.totals();
        b.filter(|_| a > 0).map(|b| 1.0 - b as f64 / a as f64)
    }
}

pub fn tokens(bytes: usize) -> f64 {
    bytes as f64 / BYTES_PER_TOKEN
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The four catalogue fixtures with their data, unsandboxed (part 9 measures that).
fn servers(ctx: &Ctx) -> Result<Map<String, Value>> {
    let mut map = Map::new();
    for set in SETS {
        let dir = root().join("fixtures/catalogues");
        let (tools, data) = (
            dir.join(format!("{set}.json")),
            dir.join(format!("{set}.data.json")),
        );
        if !data.is_file() {
            bail!("{} is missing", data.display());
        }
        map.insert(
            set.to_string(),
            json!({"command": ctx.fixture, "args": ["--tools-file", tools, "--data", data], "sandbox": false}),
        );
    }
    Ok(map)
}

/// The code-mode hub's settings: tool search and code mode on, the rest as part 10's.
pub fn code_settings() -> Value {
    let mut v = settings("on", LIST_WAIT);
    v["codeMode"] = json!({"mode": "on"});
    v
}

/// Every page of `tools/list`: the bytes received and the names.
fn listing(peer: &mut Peer) -> Result<(usize, Vec<String>)> {
    let (mut bytes, mut names, mut cursor) = (0, Vec::new(), None::<String>);
    loop {
        let params = cursor
            .as_ref()
            .map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let raw = peer.call_raw("tools/list", params)?;
        bytes += raw.len();
        let page: client::ToolsPage = serde_json::from_str(&raw)
            .with_context(|| format!("{}: tools/list without tools", peer.label))?;
        names.extend(page.tools.into_iter().map(|t| t.name));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok((bytes, names)),
        }
    }
}

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn run_direct(hub: &mut Peer, task: &'static Task, runs: usize) -> Result<DirectRun> {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let mut d = Direct {
            peer: &mut *hub,
            calls: 0,
            result_bytes: 0,
            used: BTreeSet::new(),
        };
        let started = Instant::now();
        let answer = (task.direct)(&mut d).with_context(|| format!("task {}", task.key))?;
        times.push(ms(started.elapsed()));
        last = Some(DirectRun {
            calls: d.calls,
            result_bytes: d.result_bytes,
            ms: 0.0,
            tools: d.used.into_iter().collect(),
            answer,
        });
    }
    let mut run = last.ok_or_else(|| anyhow!("no runs"))?;
    if run.calls < 5 {
        bail!(
            "task {} made {} calls; every task needs five or more",
            task.key,
            run.calls
        );
    }
    run.ms = median_ms(times);
    Ok(run)
}

/// The text of a tool result (every text block together).
fn result_text(result: &Value) -> String {
    result
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The program's value in a `run_code` result: its text is the printed output, then the
/// last expression's value as one line of JSON, then perhaps a note (that it ran
/// unconfined); the tasks print nothing, so the last line that is JSON is the value.
fn program_value(result: &Value) -> Option<Value> {
    result_text(result)
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
}

/// The note `run_code` adds when the worker could not be confined.
const UNCONFINED: &str = "ran unconfined";

fn run_code_params(code: &str, timeout: Option<u64>) -> Value {
    let mut args = json!({"code": code});
    if let Some(t) = timeout {
        args["timeout"] = json!(t);
    }
    json!({"name": "run_code", "arguments": args})
}

fn run_code(
    hub: &mut Peer,
    task: &'static Task,
    direct: &DirectRun,
    runs: usize,
) -> Result<CodeRun> {
    let mut times = Vec::with_capacity(runs);
    let (mut search_bytes, mut run_bytes, mut search, mut result) =
        (0, 0, Value::Null, Value::Null);
    for _ in 0..runs {
        let started = Instant::now();
        let s = hub.call_raw(
            "tools/call",
            json!({"name": "search_tools", "arguments": {"query": task.query, "limit": SEARCH_LIMIT}}),
        )?;
        let r = hub.call_raw("tools/call", run_code_params(task.program, None))?;
        times.push(ms(started.elapsed()));
        (search_bytes, run_bytes) = (s.len(), r.len());
        search = serde_json::from_str(&s).context("search_tools result is not JSON")?;
        result = serde_json::from_str(&r).context("run_code result is not JSON")?;
    }
    // In code mode a search shows each match as its call, `call("server:tool", …)`.
    let shown = result_text(&search);
    let missed: Vec<String> = direct
        .tools
        .iter()
        .filter(|t| !shown.contains(&format!("call(\"{t}\"")))
        .cloned()
        .collect();
    let found = direct.tools.len() - missed.len();
    let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
    let answer = (!failed).then(|| program_value(&result)).flatten();
    let same = answer.as_ref() == Some(&direct.answer);
    Ok(CodeRun {
        search_bytes,
        run_bytes,
        ms: median_ms(times),
        found,
        missed,
        same,
        error: failed.then(|| result_text(&result)),
        answer: (!same).then_some(answer).flatten(),
        unconfined: result_text(&result).contains(UNCONFINED),
    })
}

/// `run_code` of `1` and a plain call, interleaved, [`START_RUNS`] each after one of each.
fn start_cost(code: &mut Peer, direct: &mut Peer) -> Result<StartCost> {
    let plain =
        json!({"name": PLAIN_CALL.0, "arguments": serde_json::from_str::<Value>(PLAIN_CALL.1)?});
    // The plain call on the code-mode hub when its view lets it through, else on the other.
    let on_code = code
        .call("tools/call", plain.clone())
        .is_ok_and(|r| r.get("isError").and_then(Value::as_bool) != Some(true));
    let one = run_code_params("1", None);
    let first = code.call("tools/call", one.clone())?;
    if first.get("isError").and_then(Value::as_bool) == Some(true)
        || program_value(&first) != Some(json!(1))
    {
        bail!("run_code of 1 answered {first}");
    }
    let (mut run_ns, mut plain_ns) = (Vec::new(), Vec::new());
    for _ in 0..START_RUNS {
        let t = Instant::now();
        code.call_raw("tools/call", one.clone())?;
        run_ns.push(t.elapsed().as_nanos() as u64);
        let peer = if on_code { &mut *code } else { &mut *direct };
        let t = Instant::now();
        peer.call_raw("tools/call", plain.clone())?;
        plain_ns.push(t.elapsed().as_nanos() as u64);
    }
    run_ns.sort_unstable();
    plain_ns.sort_unstable();
    Ok(StartCost {
        runs: START_RUNS,
        run_code_p50_ms: percentile(&run_ns, 0.5) as f64 / 1e6,
        plain_p50_ms: percentile(&plain_ns, 0.5) as f64 / 1e6,
        plain_on: if on_code {
            "code-mode hub"
        } else {
            "direct hub"
        },
    })
}

/// Every process below `pid`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = children(pid);
    while let Some(p) = todo.pop() {
        todo.extend(children(p));
        out.push(p);
    }
    out
}

/// The hub's RSS idle, then its peak and the worker's while [`SPIN`] runs (sampled every
/// 20 ms from another thread while this one waits for the program's answer).
fn memory(ctx: &Ctx, hub: &mut Peer) -> Result<Memory> {
    let hub_idle_kib = status_field(hub.pid, "VmRSS")?;
    let fixture = ctx
        .fixture
        .canonicalize()
        .unwrap_or_else(|_| ctx.fixture.clone());
    let hub_pid = hub.pid;
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let (mut hub_kib, mut workers, mut workers_kib) = (0, 0, 0);
            while !done.load(Ordering::Relaxed) {
                hub_kib = hub_kib.max(status_field(hub_pid, "VmRSS").unwrap_or(0));
                let below: Vec<u32> = descendants(hub_pid)
                    .into_iter()
                    .filter(|p| {
                        std::fs::read_link(format!("/proc/{p}/exe")).is_ok_and(|exe| exe != fixture)
                    })
                    .collect();
                let kib: u64 = below
                    .iter()
                    .filter_map(|p| status_field(*p, "VmRSS").ok())
                    .sum();
                if kib > workers_kib {
                    (workers, workers_kib) = (below.len(), kib);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (hub_kib, workers, workers_kib)
        })
    };
    let answer = hub.call("tools/call", run_code_params(SPIN, Some(SPIN_TIMEOUT)));
    done.store(true, Ordering::Relaxed);
    let (hub_running_kib, workers, workers_kib) = sampler
        .join()
        .map_err(|_| anyhow!("the memory sampler panicked"))?;
    let ended = result_text(&answer?)
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .take(160)
        .collect();
    Ok(Memory {
        hub_idle_kib,
        hub_running_kib,
        workers,
        workers_kib,
        ended,
    })
}

pub fn run(ctx: &Ctx, p: &Params) -> Result<Option<CodePart>> {
    let wd = &ctx.watchdog;
    let runs = if p.quick { 3 } else { 7 };
    let map = servers(ctx)?;
    wd.arm("code mode: starting the two hubs", Duration::from_secs(120));
    let mut direct =
        client::spawn_hub_on(ctx, "code-direct", map.clone(), &settings("off", LIST_WAIT))?;
    let mut code = client::spawn_hub_on(ctx, "code-on", map, &code_settings())?;
    direct.label = "hub (code mode off)".into();
    code.label = "hub (code mode on)".into();
    direct.initialize()?;
    code.initialize()?;
    let (list_direct_bytes, names) = listing(&mut direct)?;
    for set in SETS {
        if !names.iter().any(|n| n.starts_with(&format!("{set}:"))) {
            bail!("server {set} listed no tools; see target/bench-work/code-direct.stderr.log");
        }
    }
    let (code_bytes, code_names) = listing(&mut code)?;
    let coded = code_names.iter().any(|n| n == "run_code");
    if !coded {
        println!(
            "13. code mode: the hub lists no run_code with \"codeMode\": {{\"mode\": \"on\"}} ({} tools listed); way (b), the start cost and the memory are not measured",
            code_names.len()
        );
    }

    wd.arm("code mode: the tasks", Duration::from_secs(300));
    let mut tasks = Vec::with_capacity(TASKS.len());
    for task in TASKS {
        let d = run_direct(&mut direct, task, runs)?;
        let c = if coded {
            Some(run_code(&mut code, task, &d, runs)?)
        } else {
            None
        };
        tasks.push(TaskRun {
            task,
            direct: d,
            code: c,
        });
    }
    let (start, memory) = if coded {
        wd.arm(
            "code mode: a program's start and memory",
            Duration::from_secs(120),
        );
        (
            Some(start_cost(&mut code, &mut direct)?),
            Some(memory(ctx, &mut code)?),
        )
    } else {
        (None, None)
    };
    direct.close(Duration::from_secs(10));
    code.close(Duration::from_secs(10));
    wd.disarm();
    Ok(Some(CodePart {
        runs,
        tools_direct: names.len(),
        list_direct_bytes,
        list_code: coded.then_some((code_bytes, code_names)),
        tasks,
        start,
        memory,
    }))
}
