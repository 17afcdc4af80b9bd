//! The worker's side of code mode (`openpact __code-worker`): it takes its resource limits
//! before it reads anything, shuts itself off from every file when the machine can, then
//! runs one program with the scripts' interpreter and limits (`builtins::scripts::sandbox`)
//! and asks the hub, over its stdout and stdin, for every tool call, `keep` and `kept`.
//! It never reaches a tool or a file itself: its only way out is the pipe.

use super::protocol::{Answer, Answers, CallRequest, FromWorker, MAX_LINE, SUBCOMMAND, Start};
use crate::builtins::scripts::sandbox::{
    EXTENSIONS, MAX_CALLSTACK, MAX_HEAP, MAX_TICKS, Output, Printer, THREAD_STACK, collapse_frames,
    dialect, to_json,
};
use serde_json::{Value as Json, json};
use starlark::environment::{Globals, GlobalsBuilder, Module};
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::syntax::AstModule;
use starlark::values::list::ListRef;
use starlark::values::none::NoneType;
use starlark::values::tuple::TupleRef;
use starlark::values::{Heap, Value};
use std::cell::RefCell;
use std::io::{BufRead, Read, Write};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The worker's exit status when it could not run the program at all.
const EXIT_FAILED: u8 = 2;

/// The worker's limits, from its command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// Address space, bytes.
    pub memory: u64,
    /// CPU seconds.
    pub cpu: u64,
    /// Whether to shut itself off from every file and socket before reading the program.
    pub confine: bool,
}

impl Limits {
    /// The worker's arguments after the subcommand.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec![
            "--memory".to_string(),
            self.memory.to_string(),
            "--cpu".to_string(),
            self.cpu.to_string(),
        ];
        if self.confine {
            args.push("--confine".into());
        }
        args
    }

    fn parse(args: &[String]) -> Result<Limits, String> {
        let mut limits = Limits {
            memory: 0,
            cpu: 0,
            confine: false,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut number = || {
                it.next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| format!("{a} needs a number"))
            };
            match a.as_str() {
                "--memory" => limits.memory = number()?,
                "--cpu" => limits.cpu = number()?,
                "--confine" => limits.confine = true,
                other => return Err(format!("unknown argument {other}")),
            }
        }
        if limits.memory == 0 || limits.cpu == 0 {
            return Err("needs --memory BYTES and --cpu SECONDS".into());
        }
        Ok(limits)
    }
}

/// Runs the worker when the command line asks for it: `Some(exit code)` if it did.
pub fn run_if_asked() -> Option<std::process::ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some(SUBCOMMAND) {
        return None;
    }
    let code = match Limits::parse(&args[1..]).and_then(|limits| serve(&limits)) {
        Ok(()) => 0,
        Err(why) => {
            let _ = writeln!(std::io::stderr(), "openpact code worker: {why}");
            EXIT_FAILED
        }
    };
    Some(std::process::ExitCode::from(code))
}

/// Limits first, then the program: nothing the program does runs before they hold.
fn serve(limits: &Limits) -> Result<(), String> {
    set_limits(limits)?;
    if limits.confine {
        shut_off()?;
    }
    let mut pipe = Pipe {
        input: std::io::BufReader::new(std::io::stdin()),
        output: std::io::stdout(),
    };
    let start: Start = pipe.read()?;
    run(start, pipe)
}

#[cfg(unix)]
fn set_limits(limits: &Limits) -> Result<(), String> {
    use nix::sys::resource::{Resource, setrlimit};
    let set = |what: Resource, soft: u64, hard: u64, name: &str| {
        setrlimit(what, soft, hard).map_err(|e| format!("could not limit its {name}: {e}"))
    };
    set(Resource::RLIMIT_AS, limits.memory, limits.memory, "memory")?;
    // The soft limit sends SIGXCPU, which ends the process; the hard one is the backstop.
    set(Resource::RLIMIT_CPU, limits.cpu, limits.cpu + 1, "CPU time")?;
    // A crash leaves no core file of the program's data behind.
    set(Resource::RLIMIT_CORE, 0, 0, "core dumps")?;
    Ok(())
}

#[cfg(not(unix))]
fn set_limits(_: &Limits) -> Result<(), String> {
    Err("code mode needs resource limits this platform does not offer yet".into())
}

/// Takes away every file and network socket: the wrapper's rules had to leave the program's
/// own executable and libraries readable for it to start; once started it needs none.
fn shut_off() -> Result<(), String> {
    let nothing = openpact_confine::Confinement {
        read: Vec::new(),
        write: Vec::new(),
        carve: Vec::new(),
        network: openpact_confine::NetRule::Closed,
        unix: openpact_confine::UnixRule::Seccomp,
        pid_namespace: false,
    };
    openpact_confine::platform()
        .confine(&nothing)
        .map_err(|e| format!("could not shut itself off: {e}"))
}

/// The worker's pipes to the hub.
struct Pipe {
    input: std::io::BufReader<std::io::Stdin>,
    output: std::io::Stdout,
}

impl Pipe {
    fn read<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, String> {
        let mut line = Vec::new();
        let n = (&mut self.input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading from the hub: {e}"))?;
        if n == 0 {
            return Err("the hub closed the pipe".into());
        }
        if n > MAX_LINE {
            return Err(format!("a line from the hub is over {MAX_LINE} bytes"));
        }
        serde_json::from_slice(&line).map_err(|e| format!("an unreadable line from the hub: {e}"))
    }

    fn write(&mut self, message: &FromWorker) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).map_err(|e| e.to_string())?;
        line.push(b'\n');
        self.output
            .write_all(&line)
            .and_then(|()| self.output.flush())
            .map_err(|e| format!("writing to the hub: {e}"))
    }

    /// Sends an ask and waits for its answers.
    fn ask(&mut self, message: &FromWorker, expected: usize) -> Result<Vec<Answer>, String> {
        self.write(message)?;
        let answers: Answers = self.read()?;
        if answers.answers.len() != expected {
            return Err(format!(
                "the hub answered {} of {expected} asks",
                answers.answers.len()
            ));
        }
        Ok(answers.answers)
    }
}

/// The run's context, for the built-ins (the evaluator is not `Send`, and its `extra` slot
/// would need `unsafe`).
struct Ctx {
    pipe: Pipe,
    deadline: Instant,
    timeout: Duration,
}

thread_local! {
    static CTX: RefCell<Option<Ctx>> = const { RefCell::new(None) };
}

/// Asks the hub, from a built-in.
fn ask(message: &FromWorker, expected: usize) -> anyhow::Result<Vec<Answer>> {
    CTX.with(|c| {
        let mut c = c.borrow_mut();
        let ctx = c
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("not available outside a program"))?;
        if Instant::now() >= ctx.deadline {
            anyhow::bail!("{}", timeout_message(ctx.timeout));
        }
        ctx.pipe.ask(message, expected).map_err(anyhow::Error::msg)
    })
}

pub fn timeout_message(limit: Duration) -> String {
    format!(
        "the program ran out of time after {} (the limit is run_code's `timeout`, at most openpact.codeMode.timeout)",
        crate::config::human_duration(limit)
    )
}

/// `args` of a call: a dict, or None for no arguments.
fn arguments(args: Option<Value<'_>>) -> anyhow::Result<Json> {
    match args.filter(|a| !a.is_none()) {
        None => Ok(json!({})),
        Some(a) => match to_json(a, 0) {
            obj @ Json::Object(_) => Ok(obj),
            _ => anyhow::bail!(
                "a tool's arguments must be a dict of names to values, not {}",
                a.get_type()
            ),
        },
    }
}

/// The `[name, args]` pairs of `parallel`.
fn pairs(calls: Value<'_>) -> anyhow::Result<Vec<CallRequest>> {
    let items: Vec<Value> = if let Some(l) = ListRef::from_value(calls) {
        l.iter().collect()
    } else if let Some(t) = TupleRef::from_value(calls) {
        t.iter().collect()
    } else {
        anyhow::bail!("parallel takes a list of [name, args] pairs");
    };
    items
        .into_iter()
        .map(|item| {
            let parts: Vec<Value> = match (ListRef::from_value(item), TupleRef::from_value(item)) {
                (Some(l), _) => l.iter().collect(),
                (_, Some(t)) => t.iter().collect(),
                _ => Vec::new(),
            };
            let name = parts.first().and_then(|n| n.unpack_str());
            match (name, parts.len()) {
                (Some(name), 1 | 2) => Ok(CallRequest {
                    name: name.to_string(),
                    arguments: arguments(parts.get(1).copied())?,
                    raw: false,
                }),
                _ => anyhow::bail!(
                    "parallel takes a list of [name, args] pairs, like [[\"fs:read_text_file\", {{\"path\": \"a.md\"}}]]; got {}",
                    item.to_repr()
                ),
            }
        })
        .collect()
}

fn call_one(name: &str, args: Option<Value<'_>>, raw: bool) -> anyhow::Result<Answer> {
    let calls = vec![CallRequest {
        name: name.to_string(),
        arguments: arguments(args)?,
        raw,
    }];
    let mut answers = ask(&FromWorker::Call { calls }, 1)?;
    answers
        .pop()
        .ok_or_else(|| anyhow::anyhow!("the hub gave no answer"))
}

/// The `{ok, value | error}` form of an answer.
fn as_outcome(answer: Answer) -> Json {
    match answer {
        Answer::Ok(value) => json!({"ok": true, "value": value}),
        Answer::Error(error) => json!({"ok": false, "error": error}),
    }
}

#[starlark_module]
fn program_members(builder: &mut GlobalsBuilder) {
    /// Calls tool `name` with `args` (a dict); its value, or the program fails with the
    /// tool's error.
    fn call<'v>(
        #[starlark(require = pos)] name: &str,
        #[starlark(require = pos)] args: Option<Value<'v>>,
        #[starlark(require = named, default = false)] raw: bool,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        match call_one(name, args, raw)? {
            Answer::Ok(value) => Ok(heap.alloc(value)),
            Answer::Error(error) => Err(anyhow::anyhow!("{error}")),
        }
    }

    /// Calls tool `name` like `call`, but a tool error is returned, not raised:
    /// `{"ok": True, "value": v}` or `{"ok": False, "error": "…"}`.
    fn try_call<'v>(
        #[starlark(require = pos)] name: &str,
        #[starlark(require = pos)] args: Option<Value<'v>>,
        #[starlark(require = named, default = false)] raw: bool,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        Ok(heap.alloc(as_outcome(call_one(name, args, raw)?)))
    }

    /// Runs `[[name, args], …]` at once; their values in order. The program fails on the
    /// first error unless `fail=False`, which gives each as `try_call` does.
    fn parallel<'v>(
        #[starlark(require = pos)] calls: Value<'v>,
        #[starlark(require = named, default = true)] fail: bool,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let calls = pairs(calls)?;
        if calls.is_empty() {
            return Ok(heap.alloc(Json::Array(Vec::new())));
        }
        let names: Vec<String> = calls.iter().map(|c| c.name.clone()).collect();
        let answers = ask(&FromWorker::Call { calls }, names.len())?;
        let mut values = Vec::with_capacity(answers.len());
        for (answer, name) in answers.into_iter().zip(names) {
            match (answer, fail) {
                (Answer::Ok(v), true) => values.push(v),
                (Answer::Error(e), true) => anyhow::bail!("{name}: {e}"),
                (answer, false) => values.push(as_outcome(answer)),
            }
        }
        Ok(heap.alloc(Json::Array(values)))
    }

    /// Keeps `value` (JSON-like) under `name` for later programs of this client session.
    fn keep<'v>(
        #[starlark(require = pos)] name: &str,
        #[starlark(require = pos)] value: Value<'v>,
    ) -> anyhow::Result<NoneType> {
        let message = FromWorker::Keep {
            name: name.to_string(),
            value: to_json(value, 0),
        };
        match ask(&message, 1)?.pop() {
            Some(Answer::Error(e)) => Err(anyhow::anyhow!("{e}")),
            _ => Ok(NoneType),
        }
    }

    /// The value kept under `name` by this or an earlier program of this session, or None.
    fn kept<'v>(
        #[starlark(require = pos)] name: &str,
        heap: Heap<'v>,
    ) -> anyhow::Result<Value<'v>> {
        let message = FromWorker::Kept {
            name: name.to_string(),
        };
        match ask(&message, 1)?.pop() {
            Some(Answer::Ok(v)) => Ok(heap.alloc(v)),
            Some(Answer::Error(e)) => Err(anyhow::anyhow!("{e}")),
            None => Ok(Value::new_none()),
        }
    }
}

/// What a program sees: standard Starlark with `json`, `struct`, `map`, `filter`, `print`,
/// and the calls above. No `load`, no files, no clock, no network.
fn globals() -> &'static Globals {
    static GLOBALS: OnceLock<Globals> = OnceLock::new();
    GLOBALS.get_or_init(|| {
        GlobalsBuilder::extended_by(EXTENSIONS)
            .with(program_members)
            .build()
    })
}

/// Runs the program on a thread with room for deep (but limited) recursion, and sends its
/// end to the hub.
fn run(start: Start, pipe: Pipe) -> Result<(), String> {
    let output = Arc::new(Mutex::new(Output::new(start.max_output)));
    let out = output.clone();
    let thread = std::thread::Builder::new()
        .name("program".into())
        .stack_size(THREAD_STACK)
        .spawn(move || {
            let timeout = Duration::from_millis(start.timeout_ms);
            CTX.with(|c| {
                *c.borrow_mut() = Some(Ctx {
                    pipe,
                    deadline: Instant::now() + timeout,
                    timeout,
                })
            });
            let result = evaluate(&start, out, timeout);
            let pipe = CTX.with(|c| c.borrow_mut().take()).map(|ctx| ctx.pipe);
            (result, pipe)
        })
        .map_err(|e| format!("could not start the program's thread: {e}"))?;
    let (result, pipe) = thread
        .join()
        .map_err(|_| "the interpreter failed".to_string())?;
    let mut pipe = pipe.ok_or("the program's pipe was lost")?;
    let output = output
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .finish();
    let done = match result {
        Ok(value) => FromWorker::Done {
            value,
            output,
            error: None,
        },
        Err(error) => FromWorker::Done {
            value: Json::Null,
            output,
            error: Some(error),
        },
    };
    pipe.write(&done)
}

/// The program's value: its last expression's.
fn evaluate(start: &Start, output: Arc<Mutex<Output>>, timeout: Duration) -> Result<Json, String> {
    let deadline = Instant::now() + timeout;
    let prelude = AstModule::parse("tools.star", start.prelude.clone(), &dialect())
        .map_err(|e| format!("the tools namespace did not parse (a bug): {e}"))?;
    let program = AstModule::parse("program.star", start.code.clone(), &dialect())
        .map_err(|e| e.to_string())?;
    let printer = Printer(output);
    let describe = |e: starlark::Error| {
        if Instant::now() >= deadline {
            timeout_message(timeout)
        } else {
            explain(&without_prelude(&collapse_frames(e.to_string().trim_end())))
        }
    };
    Module::with_temp_heap(|module| {
        let mut eval = Evaluator::new(&module);
        eval.set_print_handler(&printer);
        eval.set_check_cancelled(Box::new(move || Instant::now() >= deadline));
        let setup = |r: anyhow::Result<()>| r.map_err(|e| format!("interpreter setup: {e}"));
        setup(eval.set_max_tick_count(MAX_TICKS))?;
        setup(eval.set_max_heap_size(MAX_HEAP))?;
        setup(eval.set_max_callstack_size(MAX_CALLSTACK))?;
        eval.eval_module(prelude, globals()).map_err(describe)?;
        let value = eval.eval_module(program, globals()).map_err(describe)?;
        Ok(to_json(value, 0))
    })
}

/// The file name the prelude is parsed under.
const PRELUDE_FILE: &str = "tools.star";

/// An error as the program's author should read it: the prelude's frames and source lines
/// (the inside of `tools.SERVER.TOOL`) left out, since the program did not write them.
fn without_prelude(error: &str) -> String {
    let frame = format!("  * {PRELUDE_FILE}");
    let span = format!(" --> {PRELUDE_FILE}");
    let mut out: Vec<&str> = Vec::new();
    let mut skipping = false;
    for line in error.lines() {
        if line.starts_with(&span) {
            break;
        }
        if line.starts_with("  * ") {
            skipping = line.starts_with(&frame);
        } else if !line.starts_with("    ") {
            skipping = false;
        }
        if !skipping {
            out.push(line);
        }
    }
    out.join("\n").trim_end().to_string()
}

/// Names the limit an interpreter error hit, where its own words do not.
fn explain(error: &str) -> String {
    // The interpreter's own words for its limits (a tool's error that quotes other words
    // about memory or calls must not be taken for one).
    let limit = if error.contains("Starlark call stack overflow") {
        Some(format!(
            "calls nested more than {MAX_CALLSTACK} deep (the interpreter's call-stack limit)"
        ))
    } else if error.contains("Heap memory limit of") {
        Some(format!(
            "the program's values outgrew the interpreter's heap limit of {} MiB",
            MAX_HEAP >> 20
        ))
    } else if error.contains("Execution duration limit of") {
        Some(format!(
            "the program took more than {MAX_TICKS} steps (the interpreter's step limit)"
        ))
    } else {
        None
    };
    match limit {
        Some(limit) => format!("{error}\n\nLimit reached: {limit}."),
        None if error.contains("Object of type `struct` has no attribute") => format!(
            "{error}\n\ntools.SERVER.TOOL names the tools search_tools shows (SERVER as in \"server:tool\"); call(\"server:tool\", {{...}}) takes any tool's full name."
        ),
        None => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{explain, without_prelude};

    #[test]
    fn errors_leave_out_the_prelude_and_name_the_limit_only_from_the_interpreters_words() {
        let traced = "Traceback (most recent call last):\n  * program.star:4, in g\n      return tools.fx.fail()\n  * tools.star:7, in tool\n      return call(name, kw)\nerror: this tool always fails\n --> tools.star:7:16\n  |\n7 |   return call(name, kw)\n  |";
        assert_eq!(
            without_prelude(traced),
            "Traceback (most recent call last):\n  * program.star:4, in g\n      return tools.fx.fail()\nerror: this tool always fails"
        );
        assert!(explain("error: Starlark call stack overflow").contains("Limit reached"));
        // A tool's own words about memory are not the interpreter's heap limit.
        assert_eq!(
            explain("error: memory:read_graph failed: out of heap"),
            "error: memory:read_graph failed: out of heap"
        );
        assert!(
            explain("Object of type `struct` has no attribute `nope`").contains("search_tools")
        );
    }
}
