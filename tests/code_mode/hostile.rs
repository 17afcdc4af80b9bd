//! Hostile programs: an endless loop, deep recursion, a huge string and a huge list, 100,000
//! inner calls, `load`, and reaching for files and sockets. Each ends with an error naming
//! the limit it hit; a second client of the same hub (over HTTP) is answered in its usual
//! time while each runs; no worker outlives its program. And the worker, while it runs, is
//! confined: seccomp, no new privileges, no environment, its memory limit.

use super::{a_worker, code_on, no_workers_within, program};
use crate::http_face::{Http, HttpHub, http_hub};
use crate::support::{FIXTURE, WAIT, is_error, send_call, text};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long another client's echo may take while a hostile program runs: the hub answers
/// one in milliseconds when idle; a hub stalled by the program would take seconds.
const USUAL: Duration = Duration::from_secs(1);

/// A hub over the fixture with code mode on under `code` settings, serving stdio (the
/// hostile client) and HTTP (the other client).
async fn hub(code: Value) -> HttpHub {
    http_hub(
        json!({"fx": {"command": FIXTURE}}),
        Some(code_on(code)),
        &[],
    )
    .await
}

/// The other client: echo calls over HTTP one after another until stopped.
struct Probes {
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicUsize>,
    slowest: Arc<Mutex<Duration>>,
    task: tokio::task::JoinHandle<()>,
}

impl Probes {
    async fn start(h: &HttpHub) -> Probes {
        let mut other = Http::new(h);
        other.initialize(json!({})).await;
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicUsize::new(0));
        let slowest = Arc::new(Mutex::new(Duration::ZERO));
        let (s, a, w) = (stop.clone(), answered.clone(), slowest.clone());
        let task = tokio::spawn(async move {
            for id in 1u64.. {
                let t0 = Instant::now();
                let r = other
                    .call(id, "fx:echo", json!({"message": "still here"}))
                    .await;
                let took = t0.elapsed();
                assert_eq!(crate::http_face::text(&r), "still here", "{r}");
                {
                    let mut w = w.lock().unwrap();
                    *w = (*w).max(took);
                }
                a.fetch_add(1, Ordering::SeqCst);
                if s.load(Ordering::SeqCst) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Probes {
            stop,
            answered,
            slowest,
            task,
        }
    }

    /// Stops after one more answered echo (the hub still serves once the program is over);
    /// how many were answered in all, and the slowest.
    async fn finish(self) -> (usize, Duration) {
        self.stop.store(true, Ordering::SeqCst);
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the other client's last echo is answered")
            .expect("the other client's echoes were answered right");
        let slowest = *self.slowest.lock().unwrap();
        (self.answered.load(Ordering::SeqCst), slowest)
    }
}

/// What one hostile program did: the text the model read, how many of the other client's
/// echoes were answered while it ran, and the slowest of them.
struct Outcome {
    text: String,
    during: usize,
    /// Echoes answered in all (one after the program).
    answered: usize,
    slowest: Duration,
}

/// Runs `code` (with this `run_code` timeout) from the stdio client while the HTTP client
/// keeps calling; checks the program failed, every echo came in its usual time and no worker
/// is left once it has been answered.
async fn hostile(h: &mut HttpHub, code: &str, timeout: Option<u64>) -> Outcome {
    let probes = Probes::start(h).await;
    let hub_pid = h.hub.child.id().unwrap();
    let c = &mut h.hub.client;
    let id = send_call(c, "run_code", program(code, timeout)).await;
    let r = c.response(&id).await;
    let during = probes.answered.load(Ordering::SeqCst);
    let (answered, slowest) = probes.finish().await;
    assert!(
        answered > during,
        "the hub no longer serves the other client"
    );
    assert!(is_error(&r), "{code}: the program did not fail: {r}");
    assert!(
        slowest < USUAL,
        "{code}: another client waited {slowest:?} for an echo"
    );
    no_workers_within(hub_pid, Duration::ZERO).await;
    Outcome {
        text: text(&r),
        during,
        answered,
        slowest,
    }
}

fn assert_names(out: &Outcome, needles: &[&str]) {
    for needle in needles {
        assert!(out.text.contains(needle), "{needle:?} not in {}", out.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_ends_at_the_timeout_while_another_client_is_served() {
    let mut h = hub(json!({"timeout": "2s"})).await;
    let t0 = Instant::now();
    let out = hostile(&mut h, "for i in range(2000000000):\n    pass\n", None).await;
    assert_names(
        &out,
        &[
            "The program failed: the program ran out of time after 2s",
            "openpact.codeMode.timeout",
        ],
    );
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(6),
        "ended after {took:?}"
    );
    // Two seconds of spinning: the other client was answered all along.
    assert!(
        out.during >= 5,
        "only {} echoes during the loop",
        out.during
    );
    eprintln!(
        "endless loop: {} echoes of another client answered meanwhile, the slowest in {:?}",
        out.during, out.slowest
    );

    // A loop asking the hub all the time (kept values: no tool, no limit on the count) shares
    // the hub with the other client too.
    let out = hostile(
        &mut h,
        "for i in range(2000000000):\n    kept(\"x\")\n",
        None,
    )
    .await;
    assert_names(&out, &["ran out of time after 2s"]);
    assert!(
        out.during >= 5,
        "only {} echoes during the loop",
        out.during
    );

    // run_code's own timeout, shorter than the setting, is the one named.
    let t0 = Instant::now();
    let out = hostile(&mut h, "for i in range(2000000000):\n    pass\n", Some(1)).await;
    assert_names(&out, &["ran out of time after 1s", "run_code's `timeout`"]);
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_a_huge_string_and_a_huge_list_end_naming_their_limit() {
    let mut h = hub(json!({"timeout": "10s", "memory": "256MiB"})).await;
    let out = hostile(&mut h, "def f(n):\n    return f(n + 1)\n\nf(0)\n", None).await;
    assert_names(
        &out,
        &["call stack overflow", "calls nested more than 100 deep"],
    );
    // Values nested 100,000 deep: the interpreter itself recurses past the worker's stack
    // (even to drop them), which kills the worker, not the hub.
    let out = hostile(
        &mut h,
        "x = []\nfor i in range(100000):\n    x = [x]\n1\n",
        None,
    )
    .await;
    assert_names(&out, &["deeper than the worker's stack allows"]);
    let memory = [
        "openpact.codeMode.memory",
        "the program ran out of memory: its worker may use 256 MiB",
    ];
    // One allocation past the limit, and growth by doubling.
    for code in [
        "s = \"x\" * 2000000000\nlen(s)\n",
        "s = \"ab\"\nfor i in range(40):\n    s = s + s\nlen(s)\n",
        "l = [0] * 2000000000\nlen(l)\n",
        "l = [0]\nfor i in range(40):\n    l = l + l\nlen(l)\n",
    ] {
        let out = hostile(&mut h, code, None).await;
        assert_names(&out, &memory);
    }
    // The hub is unharmed: a program after them runs.
    let r = h.hub.client.call("run_code", program("1 + 1", None)).await;
    assert_eq!(text(&r), "2", "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_inner_calls_stop_at_max_calls() {
    // Rate limits are off (the harness's default), so maxCalls is the limit that stops it.
    let mut h = hub(json!({"maxCalls": 300, "timeout": "60s"})).await;
    let mut counter = Http::new(&h);
    counter.initialize(json!({})).await;
    let calls = async |c: &mut Http, id: u64| -> u64 {
        let r = c.call(id, "fx:calls", json!({})).await;
        crate::http_face::text(&r).parse().unwrap()
    };
    let before = calls(&mut counter, 1).await;
    let probes = Probes::start(&h).await;
    let code = "for i in range(100000):\n    call(\"fx:echo\", {\"message\": str(i)})\n";
    let c = &mut h.hub.client;
    let id = send_call(c, "run_code", program(code, None)).await;
    let r = c.response(&id).await;
    let (probed, slowest) = probes.finish().await;
    assert!(is_error(&r), "{r}");
    let t = text(&r);
    assert!(
        t.contains("the program asked for more than 300 tool calls")
            && t.contains("openpact.codeMode.maxCalls"),
        "{t}"
    );
    assert!(slowest < USUAL, "another client waited {slowest:?}");
    // Exactly maxCalls reached the server; the 301st was never made.
    let after = calls(&mut counter, 2).await;
    assert_eq!(
        after - before,
        300 + probed as u64 + 1,
        "calls reaching the fixture: the program's, the other client's {probed}, this probe"
    );
    let hub_pid = h.hub.child.id().unwrap();
    no_workers_within(hub_pid, Duration::ZERO).await;

    // All at once through parallel: refused before any is made. The ask is one line of
    // megabytes, which the hub must read without keeping its other clients waiting.
    for n in [100_000, 400_000] {
        let before = calls(&mut counter, 3).await;
        let code = format!("parallel([[\"fx:echo\", {{\"message\": \"p\"}}]] * {n})\n");
        let out = hostile(&mut h, &code, None).await;
        assert_names(&out, &["more than 300 tool calls"]);
        let after = calls(&mut counter, 4).await;
        assert_eq!(
            after - before,
            out.answered as u64 + 1,
            "calls reaching the fixture: none of the program's, the other client's, this probe"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_files_and_sockets_are_not_in_the_language() {
    let mut h = hub(json!({})).await;
    let out = hostile(&mut h, "load(\"//x.star\", \"y\")\n", None).await;
    assert_names(&out, &["`load` is not allowed in this dialect"]);
    // Every way Python would reach a file, a socket, a process or the interpreter itself is
    // simply not defined.
    for (code, name) in [
        ("open(\"/etc/passwd\").read()", "open"),
        ("file(\"/etc/passwd\")", "file"),
        ("read_file(\"/etc/passwd\")", "read_file"),
        ("socket(\"127.0.0.1\", 22)", "socket"),
        ("os.system(\"id\")", "os"),
        ("io.open(\"/etc/passwd\")", "io"),
        ("http.get(\"http://127.0.0.1/\")", "http"),
        ("__import__(\"socket\")", "__import__"),
        ("exec(\"1\")", "exec"),
        ("eval(\"1\")", "eval"),
        ("compile(\"1\", \"f\", \"exec\")", "compile"),
        ("globals()", "globals"),
    ] {
        let out = hostile(&mut h, code, None).await;
        assert_names(&out, &[&format!("Variable `{name}` not found")]);
    }
    // Nor can a program reach the hub's other calls through its own.
    let out = hostile(&mut h, "call(\"run_code\", {\"code\": \"1\"})\n", None).await;
    assert_names(&out, &["run_code cannot be called from a program"]);
}

/// A field of `/proc/PID/status`, trimmed.
fn status_field(status: &str, field: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {status}"))
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_runs_confined_under_its_limits() {
    let mut h = hub(json!({"memory": "256MiB", "timeout": "30s"})).await;
    let hub_pid = h.hub.child.id().unwrap();
    let c = &mut h.hub.client;
    let id = send_call(
        c,
        "run_code",
        program("for i in range(2000000000):\n    pass\n", Some(3)),
    )
    .await;
    let pid = a_worker(hub_pid).await;
    // Read while it runs (it may still be confining itself the first instant).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    let r = c.response(&id).await;
    assert!(is_error(&r), "{r}");
    let t = text(&r);
    assert!(t.contains("ran out of time after 3s"), "{t}");
    no_workers_within(hub_pid, Duration::ZERO).await;

    // Limits and an empty environment hold with or without the kernel's confinement.
    assert!(environ.is_empty(), "{}", String::from_utf8_lossy(&environ));
    assert_eq!(cwd, std::path::Path::new("/"));
    let address_space = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))
        .unwrap_or_else(|| panic!("{limits}"));
    let fields: Vec<&str> = address_space.split_whitespace().collect();
    assert_eq!(
        fields[3..5],
        ["268435456", "268435456"],
        "soft and hard: {address_space}"
    );
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max cpu time")
                && l.split_whitespace().nth(3) != Some("unlimited")),
        "{limits}"
    );

    if let Some(why) = t.split("(The program ran unconfined").nth(1) {
        eprintln!("skipping the confinement checks: the sandbox is unsupported here{why}");
        return;
    }
    assert_eq!(status_field(&status, "Seccomp"), "2", "{status}");
    assert_eq!(status_field(&status, "NoNewPrivs"), "1", "{status}");
}

/// Where the machine has no sandbox (simulated: no Landlock), a program still runs, under its
/// memory and time limits, and its result says it ran unconfined; `config check` said so
/// before it ran.
#[tokio::test]
async fn without_a_sandbox_a_program_runs_under_its_limits_and_says_it_was_unconfined() {
    let no_landlock = ("OPENPACT_SANDBOX_SIMULATE_NO_LANDLOCK", "1");
    let sc = crate::support::Scratch::new();
    let mut settings = code_on(json!({"timeout": "2s"}));
    settings["permissions"] = json!({"default": "allow"});
    let config = sc.servers(json!({"fx": {"command": FIXTURE}}), Some(settings));
    let openpact = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new(crate::support::OPENPACT);
        cmd.arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(config.with_file_name("state"))
            .args(args)
            .env(no_landlock.0, no_landlock.1)
            .stdin(std::process::Stdio::null());
        cmd
    };
    let out = openpact(&["config", "check"]).output().await.unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("code mode: on") && said.contains("unconfined here"),
        "{said}"
    );
    let code = json!({"code": "call(\"fx:add\", {\"a\": 2, \"b\": 3})"}).to_string();
    let out = openpact(&["call", "run_code", &code])
        .output()
        .await
        .unwrap();
    let got = String::from_utf8_lossy(&out.stdout);
    assert!(got.contains("{\"sum\":5}"), "{got}");
    assert!(
        got.contains("ran unconfined") && got.contains("Landlock"),
        "{got}"
    );
    let looping = json!({"code": "for i in range(2000000000):\n    pass\n"}).to_string();
    let out = openpact(&["call", "run_code", &looping])
        .output()
        .await
        .unwrap();
    // A failed program is a tool error: on stderr, and a failing exit.
    let got = String::from_utf8_lossy(&out.stderr);
    assert!(got.contains("ran out of time after 2s"), "{got}");
    assert!(!out.status.success());
}
