//! The script tools through `Builtins::call` (argument validation included), against script
//! files in a temp folder and loopback HTTP servers.

use super::*;
use crate::builtins::Builtins;
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Fixture {
    _tmp: tempfile::TempDir,
    settings: ScriptsSettings,
    state: PathBuf,
    builtins: Builtins,
}

fn web(allow_private: bool) -> WebSettings {
    WebSettings {
        enabled: true,
        allow_private,
        max_bytes: 1 << 20,
        timeout: Duration::from_secs(10),
        max_redirects: 3,
    }
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with(|_| {}, false, Vec::new())
    }

    fn with(
        edit: impl FnOnce(&mut ScriptsSettings),
        allow_private: bool,
        secrets: Vec<(String, String)>,
    ) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("scripts");
        std::fs::create_dir_all(&dir).unwrap();
        let mut settings = ScriptsSettings {
            dir,
            allowlist: Vec::new(),
            exec: true,
            timeout: Duration::from_secs(10),
            max_output: 10_000,
        };
        edit(&mut settings);
        let state = tmp.path().join("state");
        let builtins = Builtins::new(vec![group(&settings, &web(allow_private), secrets, &state)]);
        Fixture {
            _tmp: tmp,
            settings,
            state,
            builtins,
        }
    }

    fn write(&self, file: &str, source: &str) {
        std::fs::write(self.settings.dir.join(file), source).unwrap();
    }

    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        self.builtins.call(tool, &args).await.unwrap()
    }

    async fn run(&self, args: Value) -> ToolOutput {
        self.call("script_run", args).await
    }

    async fn exec(&self, code: &str) -> ToolOutput {
        self.call("script_exec", json!({ "code": code })).await
    }

    fn statuses(&self) -> Vec<(String, String)> {
        list(&self.settings, &self.state)
            .unwrap()
            .into_iter()
            .map(|i| (i.name, i.status))
            .collect()
    }
}

fn structured(o: &ToolOutput) -> &Value {
    o.structured
        .as_ref()
        .unwrap_or_else(|| panic!("no structured content: {o:?}"))
}

/// The value of a successful run.
fn ok_value(o: &ToolOutput) -> Value {
    assert!(!o.is_error, "expected success: {}", o.text);
    let s = structured(o);
    assert_eq!(s["error"], Value::Null);
    assert_eq!(serde_json::from_str::<Value>(&o.text).unwrap(), *s);
    s["value"].clone()
}

/// The error of a failed run.
fn run_error(o: &ToolOutput) -> String {
    assert!(o.is_error, "expected an error: {}", o.text);
    structured(o)["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error field: {}", o.text))
        .to_string()
}

#[tokio::test]
async fn approval_flow_pending_approved_modified_rejected_allowlisted() {
    let f = Fixture::with(
        |s| s.allowlist = vec!["trusted.star".into()],
        false,
        Vec::new(),
    );
    f.write(
        "hello.star",
        "# @description: Says hi\n# @secrets: A\nresult = 'hi'\n",
    );
    f.write("trusted.star", "result = 'trusted'\n");
    assert_eq!(
        f.statuses(),
        vec![
            ("hello".into(), "pending".into()),
            ("trusted".into(), "allowlisted".into())
        ]
    );

    let out = f.run(json!({"name": "hello"})).await;
    assert!(out.is_error);
    assert!(
        out.text.starts_with(
            "Script 'hello.star' is pending approval. An administrator must review and approve this script before it can be executed."
        ),
        "{}",
        out.text
    );
    assert_eq!(structured(&out)["status"], "pending");
    assert_eq!(structured(&out)["error"], "script_not_approved");
    assert_eq!(
        ok_value(&f.run(json!({"name": "trusted"})).await),
        "trusted"
    );

    let hash = approve(&f.settings, &f.state, "hello").unwrap();
    assert!(hash.starts_with("sha256:") && hash.len() == 71, "{hash}");
    assert!(f.state.join("approvals.json").is_file());
    assert_eq!(ok_value(&f.run(json!({"name": "hello"})).await), "hi");
    assert_eq!(ok_value(&f.run(json!({"name": "hello.star"})).await), "hi");
    let info = list(&f.settings, &f.state).unwrap();
    assert_eq!(
        (
            info[0].status.as_str(),
            info[0].hash.as_str(),
            info[0].description.as_str()
        ),
        ("approved", hash.as_str(), "Says hi")
    );
    assert_eq!(info[0].required_secrets, vec!["A"]);

    // An edit is never covered by the old approval, and the file is read fresh each time.
    f.write("hello.star", "result = 'changed'\n");
    let out = f.run(json!({"name": "hello"})).await;
    assert!(out.is_error);
    assert!(
        out.text
            .starts_with("Script 'hello.star' has been modified since approval."),
        "{}",
        out.text
    );
    assert_eq!(structured(&out)["status"], "modified");
    assert_eq!(f.statuses()[0].1, "modified");
    approve(&f.settings, &f.state, "hello.star").unwrap();
    assert_eq!(ok_value(&f.run(json!({"name": "hello"})).await), "changed");

    reject(&f.settings, &f.state, "hello").unwrap();
    let out = f.run(json!({"name": "hello"})).await;
    assert!(out.text.contains("was rejected"), "{}", out.text);
    assert_eq!(structured(&out)["status"], "rejected");
    // Changing a rejected script puts it up for review again, still not runnable.
    f.write("hello.star", "result = 'again'\n");
    assert_eq!(f.statuses()[0].1, "pending");
    assert!(f.run(json!({"name": "hello"})).await.is_error);

    assert_eq!(
        show(&f.settings, "hello").unwrap(),
        "result = 'again'\n".to_string()
    );
    assert_eq!(
        approve(&f.settings, &f.state, "nope"),
        Err("script not found: nope.star".into())
    );
}

#[tokio::test]
async fn names_are_checked_and_paths_refused() {
    let f = Fixture::new();
    std::fs::write(f._tmp.path().join("outside.star"), "result = 1\n").unwrap();
    std::os::unix::fs::symlink(
        f._tmp.path().join("outside.star"),
        f.settings.dir.join("evil.star"),
    )
    .unwrap();
    std::fs::create_dir(f.settings.dir.join("folder.star")).unwrap();
    for bad in [
        "../outside",
        "../outside.star",
        "a/b",
        "/etc/passwd",
        ".hidden",
    ] {
        let out = f.run(json!({ "name": bad })).await;
        assert!(out.is_error);
        assert!(
            out.text.starts_with("invalid script name"),
            "{bad}: {}",
            out.text
        );
    }
    let out = f.run(json!({"name": "evil"})).await;
    assert!(out.is_error && out.text.contains("escapes"), "{}", out.text);
    let out = f.run(json!({"name": "nope"})).await;
    assert_eq!(out.text, "script not found: nope.star");
    let out = f.run(json!({"name": "folder"})).await;
    assert_eq!(out.text, "script not found: folder.star");
    let out = f.run(json!({})).await;
    assert_eq!(out.text, "name is required");
    let out = f.run(json!({"name": 3})).await;
    assert_eq!(out.text, "name must be a string");
    // Neither the escaping link nor the folder is listed.
    assert!(f.statuses().is_empty());
    assert!(approve(&f.settings, &f.state, "../outside").is_err());
}

#[tokio::test]
async fn list_reload_and_exec_visibility() {
    let f = Fixture::with(|s| s.exec = false, false, Vec::new());
    let names: Vec<&str> = f.builtins.tools().iter().map(|t| t.name).collect();
    assert_eq!(names, ["script_list", "script_run", "script_reload"]);
    assert!(
        f.builtins
            .call("script_exec", &json!({"code": "result = 1"}))
            .await
            .is_none()
    );
    f.write(
        "w.star",
        "# @description: Weather\n# @author: me\n\n# @secrets: KEY\ndef main():\n    return 1\n",
    );
    f.write("notes.txt", "not a script");
    let out = f.call("script_list", json!({})).await;
    assert!(!out.is_error);
    assert_eq!(
        *structured(&out),
        json!({"count": 1, "scripts": [{
            "name": "w",
            "description": "Weather",
            "metadata": {"description": "Weather", "author": "me", "secrets": "KEY"},
            "required_secrets": ["KEY"],
            "approval_status": "pending",
        }]})
    );
    f.write("v.star", "result = 2\n");
    let out = f.call("script_reload", json!({})).await;
    assert_eq!(
        *structured(&out),
        json!({"message": "Scripts reloaded successfully", "count": 2})
    );
    let with_exec = Fixture::new();
    let names: Vec<&str> = with_exec.builtins.tools().iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        ["script_list", "script_run", "script_exec", "script_reload"]
    );
}

#[tokio::test]
async fn return_value_rules() {
    let f = Fixture::new();
    let cases: &[(&str, Value)] = &[
        (
            "def main():\n    return {'a': [1, 2.5, None, True, (3, 4)], 'b': 'x'}\nresult = 'ignored'\n",
            json!({"a": [1, 2.5, null, true, [3, 4]], "b": "x"}),
        ),
        ("result = 42\nx = 1\n", json!(42)),
        (
            "Name = 'x'\nCOUNT = 3\nlower = 1\n",
            json!({"Name": "x", "COUNT": 3}),
        ),
        ("x = 1\n", Value::Null),
        ("main = 5\nresult = 'not main'\n", json!("not main")),
        ("result = {1: 'a'}\n", json!("{1: \"a\"}")),
        (
            "result = json.decode(json.encode({'k': [1, 'two', 2.5]}))\n",
            json!({"k": [1, "two", 2.5]}),
        ),
        ("result = 10000000000\n", json!(10000000000i64)),
        (
            "total = 0\nfor i in range(10):\n    total += i\nresult = total\n",
            json!(45),
        ),
    ];
    for (code, want) in cases {
        assert_eq!(ok_value(&f.exec(code).await), *want, "{code}");
    }
    let v = ok_value(&f.exec("result = len\n").await);
    assert!(v.as_str().is_some_and(|s| s.contains("len")), "{v}");
    let now = ok_value(&f.exec("result = time.now()\n").await);
    let now = now.as_str().unwrap();
    assert!(
        now.len() == 20 && now.ends_with('Z') && now.as_bytes()[10] == b'T',
        "{now}"
    );
    let out = f
        .exec("print('hello', 1)\nprint('again')\nresult = 2\n")
        .await;
    assert_eq!(ok_value(&out), 2);
    assert_eq!(structured(&out)["output"], "hello 1\nagain\n");
    assert!(structured(&out)["duration_ms"].is_u64());
}

#[tokio::test]
async fn function_and_args() {
    let f = Fixture::with(|s| s.allowlist = vec!["lib".into()], false, Vec::new());
    f.write(
        "lib.star",
        "def add(a, b):\n    return a + b\n\ndef greet(name, punct = '!'):\n    return 'hi ' + name + punct\n\ndef main():\n    return 'main'\n\nNOT_FN = 3\n",
    );
    let run =
        |function: &str, args: Value| json!({"name": "lib", "function": function, "args": args});
    assert_eq!(ok_value(&f.run(run("add", json!([2, 3]))).await), 5);
    assert_eq!(
        ok_value(&f.run(run("add", json!([[1], [2, {"k": null}]]))).await),
        json!([1, 2, {"k": null}])
    );
    assert_eq!(
        ok_value(&f.run(run("greet", json!(["bo"]))).await),
        "hi bo!"
    );
    assert_eq!(
        ok_value(&f.run(json!({"name": "lib", "function": "main"})).await),
        "main"
    );
    assert_eq!(ok_value(&f.run(json!({"name": "lib"})).await), "main");
    assert_eq!(
        run_error(&f.run(run("nope", json!([]))).await),
        "function \"nope\" not found"
    );
    assert_eq!(
        run_error(&f.run(run("NOT_FN", json!([]))).await),
        "\"NOT_FN\" is not a function"
    );
    let e = run_error(&f.run(run("add", json!([1]))).await);
    assert!(e.contains("Missing parameter `b`"), "{e}");
    let out = f.run(json!({"name": "lib", "args": [1]})).await;
    assert!(
        out.is_error && out.text.contains("name the function"),
        "{}",
        out.text
    );
}

#[tokio::test]
async fn script_errors_are_error_results_and_load_is_refused() {
    let f = Fixture::new();
    let e = run_error(&f.exec("def broken(:\n").await);
    assert!(e.contains("exec.star"), "{e}");
    let e = run_error(&f.exec("result = 1 // 0\n").await);
    assert!(e.to_lowercase().contains("division by zero"), "{e}");
    let e = run_error(&f.exec("fail('boom')\n").await);
    assert!(e.contains("boom"), "{e}");
    let e = run_error(&f.exec("load('other.star', 'x')\nresult = x\n").await);
    assert!(e.contains("`load` is not allowed"), "{e}");
    let e = run_error(
        &f.exec("def f(n):\n    return f(n + 1)\nresult = f(0)\n")
            .await,
    );
    assert!(e.contains("Starlark call stack overflow"), "{e}");
    // The repeated frame is folded, not listed a hundred times.
    assert!(
        e.contains("[the frame above repeats") && e.len() < 1000,
        "{e}"
    );
    // Output printed before the failure is kept.
    let out = f.exec("print('before')\nfail('after')\n").await;
    assert_eq!(structured(&out)["output"], "before\n");
}

const SPIN: &str = "def spin():\n    n = 0\n    for i in range(2147483647):\n        for j in range(2147483647):\n            n += 1\n    return n\nresult = spin()\n";

#[tokio::test]
async fn time_limit_stops_loops_and_sleeps() {
    let f = Fixture::with(|s| s.timeout = Duration::from_secs(1), false, Vec::new());
    let t0 = Instant::now();
    let e = run_error(&f.exec(SPIN).await);
    assert!(e.starts_with("script timed out after 1s"), "{e}");
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );

    let t0 = Instant::now();
    let e = run_error(&f.exec("time.sleep(10)\nresult = 1\n").await);
    assert!(e.starts_with("script timed out after 1s"), "{e}");
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );

    // Short sleeps inside the limit are fine.
    let out = f
        .exec("time.sleep(0.05)\ntime.sleep(0)\nresult = 'rested'\n")
        .await;
    assert_eq!(ok_value(&out), "rested");
    let e = run_error(&f.exec("time.sleep(-1)\n").await);
    assert!(e.contains("non-negative"), "{e}");
}

#[tokio::test]
async fn step_and_heap_limits() {
    let env = Arc::new(sandbox::Env::new(Vec::new(), &web(false)));
    let running = Arc::new(AtomicUsize::new(0));
    let job = |source: &str| sandbox::Job {
        file: "t.star".into(),
        source: source.into(),
        call: None,
    };
    let mut limits = sandbox::Limits::new(Duration::from_secs(10), 1000);
    limits.max_ticks = 100_000;
    let o = sandbox::run(job(SPIN), env.clone(), limits, running.clone()).await;
    let e = o.error.unwrap();
    assert!(e.contains("100000 ticks"), "{e}");

    let mut limits = sandbox::Limits::new(Duration::from_secs(10), 1000);
    limits.max_heap = 4 << 20;
    let o = sandbox::run(
        job("x = []\nfor i in range(10000000):\n    x.append('item %d' % i)\nresult = len(x)\n"),
        env.clone(),
        limits,
        running.clone(),
    )
    .await;
    let e = o.error.unwrap();
    assert!(e.contains("Heap memory limit"), "{e}");
    assert_eq!(running.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn output_and_value_are_capped() {
    let f = Fixture::with(|s| s.max_output = 100, false, Vec::new());
    let out = f
        .exec("for i in range(50):\n    print('line', i)\nresult = 'x' * 500\n")
        .await;
    let s = structured(&out);
    let output = s["output"].as_str().unwrap();
    assert!(
        output.starts_with("line 0\nline 1\n")
            && output.contains("[Output truncated: 100 of ")
            && output.chars().count() < 160,
        "{output}"
    );
    let value = s["value"].as_str().unwrap();
    assert!(
        value.contains("[Content truncated: 100 of 502 characters shown]"),
        "{value}"
    );
}

#[tokio::test]
async fn secrets_are_readable_but_redacted() {
    let secret = "s3cr3t-value-123";
    let f = Fixture::with(
        |_| {},
        false,
        vec![
            ("API_TOKEN".into(), secret.into()),
            ("OTHER".into(), "another-long-secret".into()),
        ],
    );
    let out = f
        .exec(
            "t = secrets.get('API_TOKEN')\nprint('token is ' + t)\nresult = {'t': t, 'len': len(t), 'names': secrets.list(), 'missing': secrets.get('NOPE'), t: 1}\n",
        )
        .await;
    assert!(!out.text.contains(secret), "{}", out.text);
    assert_eq!(
        ok_value(&out),
        json!({"t": "[REDACTED:API_TOKEN]", "len": 16, "names": ["API_TOKEN", "OTHER"], "missing": null, "[REDACTED:API_TOKEN]": 1})
    );
    assert_eq!(
        structured(&out)["output"],
        "token is [REDACTED:API_TOKEN]\n"
    );
    let out = f.exec("fail('leak ' + secrets.get('OTHER'))\n").await;
    let e = run_error(&out);
    assert!(
        e.contains("leak [REDACTED:OTHER]") && !e.contains("another-long"),
        "{e}"
    );
    assert!(!out.text.contains("another-long"));
}

/// A loopback HTTP server answering every request (after `delay`) with a JSON echo of it.
fn echo_server(delay: Duration) -> String {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = server.server_addr().to_ip().unwrap().port();
    std::thread::spawn(move || {
        for mut req in server.incoming_requests() {
            std::thread::sleep(delay);
            let mut body = String::new();
            let _ = req.as_reader().read_to_string(&mut body);
            let header = |name: &str| {
                req.headers()
                    .iter()
                    .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
                    .map(|h| h.value.as_str().to_string())
                    .unwrap_or_default()
            };
            let echo = json!({
                "method": req.method().as_str(),
                "url": req.url(),
                "body": body,
                "content_type": header("content-type"),
                "ua": header("user-agent"),
                "x": header("x-custom"),
            });
            let resp = tiny_http::Response::from_string(echo.to_string())
                .with_status_code(201)
                .with_header("X-Reply: yes".parse::<tiny_http::Header>().unwrap());
            let _ = req.respond(resp);
        }
    });
    format!("http://127.0.0.1:{port}")
}

#[tokio::test]
async fn http_get_and_post_against_loopback() {
    let base = echo_server(Duration::ZERO);
    let f = Fixture::with(|_| {}, true, Vec::new());
    let code = format!(
        "r = http.get('{base}/hello?q=1', headers={{'X-Custom': 'c'}})\n\
         p = http.post('{base}/post', body=json.encode({{'a': 1}}))\n\
         t = http.post('{base}/post', 'plain', {{}}, 'text/plain')\n\
         result = {{'get': r['status'], 'get_body': json.decode(r['body']), 'reply': r['headers']['x-reply'], 'post': json.decode(p['body']), 'text': json.decode(t['body'])['content_type']}}\n"
    );
    let v = ok_value(&f.exec(&code).await);
    assert_eq!(v["get"], 201);
    assert_eq!(v["reply"], "yes");
    assert_eq!(v["get_body"]["method"], "GET");
    assert_eq!(v["get_body"]["url"], "/hello?q=1");
    assert_eq!(v["get_body"]["x"], "c");
    assert_eq!(v["get_body"]["ua"], "OpenPact-Starlark/1.0");
    assert_eq!(v["post"]["method"], "POST");
    assert_eq!(v["post"]["body"], "{\"a\":1}");
    assert_eq!(v["post"]["content_type"], "application/json");
    assert_eq!(v["text"], "text/plain");

    let e = run_error(&f.exec("result = http.get('file:///etc/passwd')\n").await);
    assert!(e.contains("http:// or https://"), "{e}");

    // Without allowPrivate the same server is refused, as for web_fetch.
    let guarded = Fixture::new();
    let e = run_error(
        &guarded
            .exec(&format!("result = http.get('{base}/hello')\n"))
            .await,
    );
    assert!(e.contains("refusing to fetch private address"), "{e}");
}

#[tokio::test]
async fn slow_http_is_cut_at_the_script_deadline() {
    let base = echo_server(Duration::from_secs(5));
    let f = Fixture::with(|s| s.timeout = Duration::from_secs(1), true, Vec::new());
    let t0 = Instant::now();
    let e = run_error(&f.exec(&format!("result = http.get('{base}/slow')\n")).await);
    assert!(e.starts_with("script timed out after 1s"), "{e}");
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
}
