//! The Starlark sandbox: one script run on its own thread, with limits the model cannot
//! talk its way past.
//!
//! - **No `load`**: the dialect forbids the statement and no loader is installed, so a
//!   script sees only the built-ins below, never another file.
//! - **Time**: a deadline the evaluator polls (`set_check_cancelled`, every ~1000 ticks), the
//!   built-ins that block (`time.sleep`, `http.*`) poll in small slices or are given only the
//!   time left, and the caller stops waiting shortly after the deadline whatever the thread
//!   is doing (a thread cannot be killed; an overrunning one is flagged and dies at its next
//!   check, and still counts towards [`MAX_RUNNING`] until it does).
//! - **Steps**: a tick budget (one tick = one call or one loop iteration).
//! - **Memory**: the Starlark heap limit, checked with the ticks. starlark-rust documents it
//!   as best effort: a single huge allocation between two checks is not stopped.
//! - **Recursion**: a call-stack limit.
//! - **Output**: `print` goes to a buffer capped at `max_output` characters.
//!
//! The evaluator is not `Send`, so it lives and dies on the thread; the built-ins reach the
//! run's context through a thread-local (the evaluator's `extra` slot would need an
//! `unsafe impl`, which this crate forbids).

use serde_json::{Map, Value as Json};
use starlark::PrintHandler;
use starlark::environment::{Globals, GlobalsBuilder, LibraryExtension, Module};
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::syntax::{AstModule, Dialect};
use starlark::values::dict::DictRef;
use starlark::values::float::StarlarkFloat;
use starlark::values::list::ListRef;
use starlark::values::none::{NoneOr, NoneType};
use starlark::values::tuple::TupleRef;
use starlark::values::{Heap, UnpackValue, Value};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Scripts running at once (including overrunning ones still winding down), so a model
/// looping over `script_run` cannot pin every core.
pub const MAX_RUNNING: usize = 8;
/// Steps per run. At tens of millions of ticks a second this outlasts any sensible timeout;
/// it is a deterministic backstop, not the main limit.
pub const MAX_TICKS: u64 = 500_000_000;
/// Starlark heap per run (the original's `max_memory_mb` default, which it never enforced).
pub const MAX_HEAP: usize = 128 << 20;
/// Nested Starlark calls.
pub const MAX_CALLSTACK: usize = 100;
/// Longest single `time.sleep`.
pub const SLEEP_CAP: Duration = Duration::from_secs(5);
/// How long the caller waits past the deadline for the thread to notice it.
const GRACE: Duration = Duration::from_millis(300);
/// Each Starlark call recurses on the native stack; give deep (but limited) recursion room.
pub const THREAD_STACK: usize = 32 << 20;
/// How often blocking built-ins look at the deadline.
const SLICE: Duration = Duration::from_millis(20);
/// Deeper values are returned as their string form (also stops self-containing lists).
const MAX_DEPTH: usize = 64;
/// `User-Agent` of `http.*` unless the script sets one.
pub const USER_AGENT: &str = "OpenPact-Starlark/1.0";

/// The limits of one run.
#[derive(Debug, Clone)]
pub struct Limits {
    pub timeout: Duration,
    pub max_ticks: u64,
    pub max_heap: usize,
    pub max_callstack: usize,
    pub max_output: usize,
    pub sleep_cap: Duration,
}

impl Limits {
    pub fn new(timeout: Duration, max_output: usize) -> Limits {
        Limits {
            timeout,
            max_ticks: MAX_TICKS,
            max_heap: MAX_HEAP,
            max_callstack: MAX_CALLSTACK,
            max_output,
            sleep_cap: SLEEP_CAP,
        }
    }
}

/// What every run can reach: the secrets, and the HTTP client for `http.*` (or why there is
/// none).
pub struct Env {
    pub secrets: Vec<(String, String)>,
    pub fetcher: Result<crate::builtins::net::Fetcher, String>,
    pub web_timeout: Duration,
}

impl Env {
    /// The client is made here, once, with the guard on: script URLs are chosen by a model.
    pub fn new(secrets: Vec<(String, String)>, web: &crate::config::WebSettings) -> Env {
        Env {
            secrets,
            fetcher: crate::builtins::net::Fetcher::new(web, true).map_err(|e| e.to_string()),
            web_timeout: web.timeout,
        }
    }
}

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct Job {
    /// Shown in error locations (`weather.star:3:5`).
    pub file: String,
    pub source: String,
    /// `None`: the whole-script rule (`main()`, else `result`, else the upper-case globals);
    /// `Some((f, args))`: run the file, then call `f(*args)`.
    pub call: Option<(String, Vec<Json>)>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub value: Json,
    /// What `print` wrote, capped.
    pub output: String,
    pub error: Option<String>,
    pub duration: Duration,
}

/// `print` output, kept up to the cap; the rest is only counted (also code mode's).
#[derive(Debug, Default)]
pub struct Output {
    text: String,
    kept: usize,
    total: usize,
    cap: usize,
}

impl Output {
    pub fn new(cap: usize) -> Output {
        Output {
            cap,
            ..Output::default()
        }
    }

    fn push(&mut self, line: &str) {
        for c in line.chars().chain(std::iter::once('\n')) {
            self.total += 1;
            if self.kept < self.cap {
                self.text.push(c);
                self.kept += 1;
            }
        }
    }

    pub fn finish(&self) -> String {
        if self.total > self.kept {
            format!(
                "{}\n\n[Output truncated: {} of {} characters shown]",
                self.text, self.kept, self.total
            )
        } else {
            self.text.clone()
        }
    }
}

/// Sends `print` to an [`Output`].
pub struct Printer(pub Arc<Mutex<Output>>);

impl PrintHandler for Printer {
    fn println(&self, text: &str) -> starlark::Result<()> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(text);
        Ok(())
    }
}

/// One run's context, for the built-ins.
struct Ctx {
    env: Arc<Env>,
    deadline: Instant,
    cancel: Arc<AtomicBool>,
    limits: Limits,
}

impl Ctx {
    fn expired(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }

    /// Fails once the run is out of time, so a loop of quick built-in calls stops too.
    fn check(&self) -> anyhow::Result<()> {
        if self.expired() {
            anyhow::bail!("{}", timeout_message(self.limits.timeout));
        }
        Ok(())
    }
}

thread_local! {
    /// Set for the duration of a run on the script's own thread.
    static CTX: RefCell<Option<Rc<Ctx>>> = const { RefCell::new(None) };
}

fn ctx() -> anyhow::Result<Rc<Ctx>> {
    CTX.with(|c| c.borrow().clone())
        .ok_or_else(|| anyhow::anyhow!("not available outside a script run"))
}

pub fn timeout_message(limit: Duration) -> String {
    format!("script timed out after {limit:?} (the limit is openpact.builtins.scripts.timeout)")
}

#[starlark_module]
fn time_members(builder: &mut GlobalsBuilder) {
    /// The current time, UTC, as RFC 3339 (`2026-11-21T06:40:01Z`).
    fn now() -> anyhow::Result<String> {
        ctx()?.check()?;
        Ok(crate::time::now_rfc3339())
    }

    /// Sleeps `seconds` (int or float; at most 5 per call). Stops with an error when the
    /// script's time is up.
    fn sleep<'v>(#[starlark(require = pos)] seconds: Value<'v>) -> anyhow::Result<NoneType> {
        let ctx = ctx()?;
        let secs = match StarlarkFloat::unpack_value_opt(seconds) {
            Some(f) => f.0,
            None => match i64::unpack_value(seconds) {
                Ok(Some(i)) => i as f64,
                _ => anyhow::bail!("time.sleep: seconds must be a number"),
            },
        };
        if !secs.is_finite() || secs < 0.0 {
            anyhow::bail!("time.sleep: seconds must be a non-negative number");
        }
        let want = Duration::from_secs_f64(secs.min(ctx.limits.sleep_cap.as_secs_f64()));
        let until = Instant::now() + want;
        loop {
            ctx.check()?;
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(NoneType);
            }
            std::thread::sleep(left.min(SLICE));
        }
    }
}

#[starlark_module]
fn secrets_members(builder: &mut GlobalsBuilder) {
    /// The value of secret `name`, or None. Values are hidden from every result.
    fn get(#[starlark(require = pos)] name: &str) -> anyhow::Result<NoneOr<String>> {
        let ctx = ctx()?;
        ctx.check()?;
        Ok(NoneOr::from_option(
            ctx.env
                .secrets
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone()),
        ))
    }

    /// The names of the available secrets (never their values).
    fn list() -> anyhow::Result<Vec<String>> {
        let ctx = ctx()?;
        ctx.check()?;
        Ok(ctx.env.secrets.iter().map(|(n, _)| n.clone()).collect())
    }
}

#[starlark_module]
fn http_members(builder: &mut GlobalsBuilder) {
    /// GET `url`; returns `{status, body, headers}`. Private and loopback addresses follow
    /// the web settings, like `web_fetch`.
    fn get<'v>(
        #[starlark(require = pos)] url: &str,
        headers: Option<Value<'v>>,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let resp = super::http::request(&ctx()?.http(), "GET", url, headers, None)?;
        Ok(heap.alloc(resp))
    }

    /// POST `body` to `url` (Content-Type `content_type` unless `headers` set one); returns
    /// `{status, body, headers}`.
    fn post<'v>(
        #[starlark(require = pos)] url: &str,
        #[starlark(default = "")] body: &str,
        headers: Option<Value<'v>>,
        #[starlark(default = "application/json")] content_type: &str,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let resp = super::http::request(
            &ctx()?.http(),
            "POST",
            url,
            headers,
            Some((body, content_type)),
        )?;
        Ok(heap.alloc(resp))
    }
}

impl Ctx {
    /// What `http.*` needs from the run.
    fn http(&self) -> super::http::Budget<'_> {
        super::http::Budget {
            fetcher: self.env.fetcher.as_ref().map_err(String::as_str),
            web_timeout: self.env.web_timeout,
            deadline: self.deadline,
            cancel: &self.cancel,
            timeout_message: timeout_message(self.limits.timeout),
        }
    }
}

/// `headers={...}` as pairs; values that are not strings are given as their string form.
pub fn header_pairs(headers: Option<Value<'_>>) -> anyhow::Result<Vec<(String, String)>> {
    let Some(h) = headers.filter(|h| !h.is_none()) else {
        return Ok(Vec::new());
    };
    let Some(d) = DictRef::from_value(h) else {
        anyhow::bail!("headers must be a dict of strings, not {}", h.get_type());
    };
    Ok(d.iter()
        .map(|(k, v)| {
            let s = |x: Value| x.unpack_str().map_or_else(|| x.to_str(), str::to_string);
            (s(k), s(v))
        })
        .collect())
}

/// The standard library a script (and a code-mode program) gets: `json`, `print`, `struct`,
/// `map`, `filter`.
pub const EXTENSIONS: &[LibraryExtension] = &[
    LibraryExtension::Json,
    LibraryExtension::Print,
    LibraryExtension::StructType,
    LibraryExtension::Map,
    LibraryExtension::Filter,
];

/// The built-ins every run sees, built once.
fn globals() -> &'static Globals {
    static GLOBALS: OnceLock<Globals> = OnceLock::new();
    GLOBALS.get_or_init(|| {
        GlobalsBuilder::extended_by(EXTENSIONS)
            .with_namespace("http", http_members)
            .with_namespace("time", time_members)
            .with_namespace("secrets", secrets_members)
            .build()
    })
}

/// The language: standard Starlark without `load`; top-level `if`/`for` are allowed (unlike
/// the Go original), which only makes more scripts valid.
pub fn dialect() -> Dialect {
    Dialect {
        enable_load: false,
        enable_top_level_stmt: true,
        ..Dialect::Standard
    }
}

/// A Starlark value as JSON: None, bools, ints, floats, strings, lists and tuples, dicts with
/// string keys; anything else (functions, structs, huge ints, …) as its string form.
pub fn to_json(v: Value<'_>, depth: usize) -> Json {
    if depth > MAX_DEPTH {
        return Json::String(v.to_str());
    }
    if v.is_none() {
        return Json::Null;
    }
    if let Some(b) = v.unpack_bool() {
        return Json::Bool(b);
    }
    if let Some(s) = v.unpack_str() {
        return Json::String(s.to_string());
    }
    if v.get_type() == "int" {
        return match i64::unpack_value(v) {
            Ok(Some(i)) => Json::from(i),
            _ => Json::String(v.to_str()),
        };
    }
    if let Some(f) = StarlarkFloat::unpack_value_opt(v) {
        return serde_json::Number::from_f64(f.0)
            .map_or_else(|| Json::String(v.to_str()), Json::Number);
    }
    if let Some(l) = ListRef::from_value(v) {
        return Json::Array(l.iter().map(|x| to_json(x, depth + 1)).collect());
    }
    if let Some(t) = TupleRef::from_value(v) {
        return Json::Array(t.iter().map(|x| to_json(x, depth + 1)).collect());
    }
    if let Some(d) = DictRef::from_value(v) {
        let mut m = Map::new();
        for (k, x) in d.iter() {
            let Some(k) = k.unpack_str() else {
                return Json::String(v.to_str());
            };
            m.insert(k.to_string(), to_json(x, depth + 1));
        }
        return Json::Object(m);
    }
    Json::String(v.to_str())
}

/// Frees a run slot when the thread ends (normally or not).
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs `job` on its own thread and waits for it, at most the timeout plus a short grace.
pub async fn run(job: Job, env: Arc<Env>, limits: Limits, running: Arc<AtomicUsize>) -> Outcome {
    let start = Instant::now();
    let output = Arc::new(Mutex::new(Output::new(limits.max_output)));
    let fail = |error: String, output: &Arc<Mutex<Output>>| Outcome {
        value: Json::Null,
        output: output
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .finish(),
        error: Some(error),
        duration: start.elapsed(),
    };
    if running.fetch_add(1, Ordering::SeqCst) >= MAX_RUNNING {
        running.fetch_sub(1, Ordering::SeqCst);
        return fail(
            format!("too many scripts are running ({MAX_RUNNING}); try again when one finishes"),
            &output,
        );
    }
    let slot = Slot(running);
    let cancel = Arc::new(AtomicBool::new(false));
    let deadline = start + limits.timeout;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let timeout = limits.timeout;
    let spawned = {
        let (cancel, output) = (cancel.clone(), output.clone());
        std::thread::Builder::new()
            .name("openpact-script".into())
            .stack_size(THREAD_STACK)
            .spawn(move || {
                let result = evaluate(job, env, limits, cancel, deadline, output);
                // Free the slot first, so a caller that got the answer sees it free.
                drop(slot);
                let _ = tx.send(result);
            })
    };
    if let Err(e) = spawned {
        return fail(format!("could not start the script: {e}"), &output);
    }
    match tokio::time::timeout(timeout + GRACE, rx).await {
        Ok(Ok(Ok(value))) => Outcome {
            value,
            output: output
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .finish(),
            error: None,
            duration: start.elapsed(),
        },
        Ok(Ok(Err(error))) => fail(error, &output),
        Ok(Err(_)) => fail("the script stopped unexpectedly".into(), &output),
        Err(_) => {
            // The thread is stuck in one long step; it stops at its next check.
            cancel.store(true, Ordering::SeqCst);
            fail(timeout_message(timeout), &output)
        }
    }
}

/// Restores the thread-local when the run ends, however it ends.
struct CtxGuard;

impl Drop for CtxGuard {
    fn drop(&mut self) {
        CTX.with(|c| *c.borrow_mut() = None);
    }
}

/// Folds runs of identical traceback frames (deep recursion repeats one frame up to the
/// call-stack limit) into one frame and a count.
pub fn collapse_frames(text: &str) -> String {
    // A frame is a `  * file:line, in f` line and the indented source lines after it.
    let mut frames: Vec<String> = Vec::new();
    for line in text.lines() {
        match frames.last_mut() {
            Some(f) if !line.starts_with("  * ") && line.starts_with("    ") => {
                f.push('\n');
                f.push_str(line);
            }
            _ => frames.push(line.to_string()),
        }
    }
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < frames.len() {
        let same = frames[i..].iter().take_while(|f| **f == frames[i]).count();
        out.push(frames[i].clone());
        if same > 2 && frames[i].starts_with("  * ") {
            out.push(format!(
                "  [the frame above repeats {} more times]",
                same - 1
            ));
            i += same;
        } else {
            i += 1;
        }
    }
    out.join("\n")
}

/// The run itself, on the script thread.
fn evaluate(
    job: Job,
    env: Arc<Env>,
    limits: Limits,
    cancel: Arc<AtomicBool>,
    deadline: Instant,
    output: Arc<Mutex<Output>>,
) -> Result<Json, String> {
    let ctx = Rc::new(Ctx {
        env,
        deadline,
        cancel,
        limits,
    });
    CTX.with(|c| *c.borrow_mut() = Some(ctx.clone()));
    let _guard = CtxGuard;
    let ast = AstModule::parse(&job.file, job.source, &dialect()).map_err(|e| e.to_string())?;
    let printer = Printer(output);
    let describe = |e: starlark::Error| {
        if ctx.expired() {
            timeout_message(ctx.limits.timeout)
        } else {
            collapse_frames(e.to_string().trim_end())
        }
    };
    Module::with_temp_heap(|module| {
        let mut eval = Evaluator::new(&module);
        eval.set_print_handler(&printer);
        let watch = ctx.clone();
        eval.set_check_cancelled(Box::new(move || watch.expired()));
        let setup = |r: anyhow::Result<()>| r.map_err(|e| format!("sandbox setup: {e}"));
        setup(eval.set_max_tick_count(ctx.limits.max_ticks))?;
        setup(eval.set_max_heap_size(ctx.limits.max_heap))?;
        setup(eval.set_max_callstack_size(ctx.limits.max_callstack))?;
        eval.eval_module(ast, globals()).map_err(describe)?;
        let is_function = |v: Value| v.get_type() == "function";
        let value = match &job.call {
            Some((name, args)) => {
                let f = module
                    .get(name)
                    .ok_or_else(|| format!("function \"{name}\" not found"))?;
                if !is_function(f) {
                    return Err(format!("\"{name}\" is not a function"));
                }
                let heap = module.heap();
                let args: Vec<Value> = args.iter().map(|a| heap.alloc(a)).collect();
                eval.eval_function(f, &args, &[]).map_err(describe)?
            }
            None => match module.get("main").filter(|m| is_function(*m)) {
                Some(main) => eval.eval_function(main, &[], &[]).map_err(describe)?,
                None => match module.get("result") {
                    Some(r) => r,
                    None => {
                        let mut m = Map::new();
                        for name in module.names() {
                            let name = name.as_str();
                            if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                                continue;
                            }
                            if let Some(v) = module.get(name) {
                                m.insert(name.to_string(), to_json(v, 1));
                            }
                        }
                        return Ok(if m.is_empty() {
                            Json::Null
                        } else {
                            Json::Object(m)
                        });
                    }
                },
            },
        };
        Ok(to_json(value, 0))
    })
}
