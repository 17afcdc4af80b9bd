//! The CLI's permission prompt on a real pseudo-terminal (util-linux `script` gives
//! `openpact call` a pty): the choices by key, the timeout, and the terminal restored.

use super::{asking, decisions, fx_config};
use crate::support::{OPENPACT, Scratch, WAIT, s, state_dir};
use serde_json::json;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};

/// A command running under `script` on a fresh pty: what it prints, and keys to type.
struct Pty {
    child: Child,
    stdin: ChildStdin,
    out: Arc<Mutex<Vec<u8>>>,
    seen: usize,
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Copies everything `pipe` yields into `sink`, in the background.
fn copy_into(mut pipe: impl AsyncRead + Unpin + Send + 'static, sink: Arc<Mutex<Vec<u8>>>) {
    tokio::spawn(async move {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf).await {
            if n == 0 {
                return;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
}

/// `openpact --config CONFIG --state-dir STATE call TOOL ARGS`, as words.
fn call_words<'a>(config: &'a Path, state: &'a Path, tool: &'a str, args: &'a str) -> [&'a str; 8] {
    [
        OPENPACT,
        "--config",
        s(config),
        "--state-dir",
        s(state),
        "call",
        tool,
        args,
    ]
}

fn quote_words(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| sh_quote(w))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Pty {
    fn spawn(words: &[&str]) -> Pty {
        Pty::shell(&format!("exec {}", quote_words(words)))
    }

    /// A shell command line on the pty.
    fn shell(line: &str) -> Pty {
        let mut child = Command::new("script")
            .args(["-qfec", line, "/dev/null"])
            .env("SHELL", "/bin/sh")
            .env("TERM", "xterm")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn script (util-linux)");
        let stdin = child.stdin.take().unwrap();
        let out = Arc::new(Mutex::new(Vec::new()));
        copy_into(child.stdout.take().unwrap(), out.clone());
        copy_into(child.stderr.take().unwrap(), out.clone());
        Pty {
            child,
            stdin,
            out,
            seen: 0,
        }
    }

    fn output(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// Waits until `needle` appears after what was already waited for.
    async fn expect(&mut self, needle: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let out = self.output();
            if let Some(pos) = out.get(self.seen..).and_then(|rest| rest.find(needle)) {
                self.seen += pos + needle.len();
                // Let the prompt switch the terminal to raw mode before typing.
                tokio::time::sleep(Duration::from_millis(300)).await;
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} never appeared on the terminal:\n{out}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn keys(&mut self, keys: &[&str]) {
        for k in keys {
            self.stdin.write_all(k.as_bytes()).await.unwrap();
            self.stdin.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// Waits for the command to end; its exit code and everything it showed.
    async fn finish(mut self) -> (Option<i32>, String) {
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("still running; the terminal shows:\n{}", self.output()))
            .unwrap();
        // The readers may still be copying the last bytes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        (status.code(), self.output())
    }
}

const UP: &str = "\x1b[A";
const ENTER: &str = "\r";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_prompt_through_a_real_pty() {
    let sc = Scratch::new();
    let config = fx_config(&sc, asking(json!({"default": "ask"})));
    let state = state_dir(&config);
    let call = |tool: &str, message: &str| {
        let args = json!({"message": message}).to_string();
        Pty::spawn(&call_words(&config, &state, tool, &args))
    };

    // Enter on the default (deny), then "n": denied, not remembered.
    let mut t = call("fx:echo", "hi");
    t.expect("openpact: allow tool fx:echo?").await;
    t.expect("Allow?").await;
    t.keys(&[ENTER]).await;
    t.expect("Remember this denial?").await;
    t.keys(&["n"]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("denied at the prompt"), "{out}");
    assert!(decisions(&state).get("fx:echo").is_none());

    // Deny, then Enter on the Confirm (default no): not remembered either.
    let mut t = call("fx:echo", "hi");
    t.expect("Allow?").await;
    t.keys(&[ENTER]).await;
    t.expect("Remember this denial?").await;
    t.keys(&[ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(decisions(&state).get("fx:echo").is_none());

    // Up, Enter: once.
    let mut t = call("fx:echo", "hi once");
    t.expect("Allow?").await;
    t.keys(&[UP, ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("hi once"), "{out}");
    assert!(decisions(&state).get("fx:echo").is_none());

    // Up, Up, Enter: always — remembered, and the next call asks nothing.
    let mut t = call("fx:echo", "hi always");
    t.expect("Allow?").await;
    t.keys(&[UP, UP, ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("hi always"), "{out}");
    assert_eq!(decisions(&state)["fx:echo"]["decision"], "allow");
    let (code, out) = call("fx:echo", "no prompt").finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("no prompt") && !out.contains("Allow?"),
        "{out}"
    );

    // Deny + "y": a remembered denial; the next call is denied without a prompt.
    let mut t = call("fx:add", "x");
    t.expect("Allow?").await;
    t.keys(&[ENTER]).await;
    t.expect("Remember this denial?").await;
    t.keys(&["y"]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(decisions(&state)["fx:add"]["decision"], "deny");
    let (code, out) = call("fx:add", "x").finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(!out.contains("Allow?"), "{out}");
    assert!(out.contains("openpact permissions forget fx:add"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_prompt_times_out_and_the_cli_still_exits() {
    let sc = Scratch::new();
    let config = fx_config(
        &sc,
        asking(json!({"default": "ask", "promptTimeout": "1s"})),
    );
    let state = state_dir(&config);
    let t0 = Instant::now();
    let mut t = Pty::spawn(&call_words(
        &config,
        &state,
        "fx:echo",
        r#"{"message":"m"}"#,
    ));
    t.expect("Allow?").await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("no answer"), "{out}");
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_is_restored_after_a_prompt_times_out() {
    let sc = Scratch::new();
    let config = fx_config(
        &sc,
        asking(json!({"default": "ask", "promptTimeout": "1s"})),
    );
    let state = state_dir(&config);
    let call = quote_words(&call_words(
        &config,
        &state,
        "fx:echo",
        r#"{"message":"m"}"#,
    ));
    // Modes before and after, on the same terminal.
    let mut t = Pty::shell(&format!(
        "echo BEFORE; stty -a; {call}; echo AFTER; stty -a; echo END"
    ));
    t.expect("Allow?").await;
    t.expect("END").await;
    let (_, out) = t.finish().await;
    let modes = |from: &str| -> (bool, bool) {
        let part = &out[out.find(from).unwrap()..];
        let words: Vec<&str> = part.split_whitespace().collect();
        (words.contains(&"icanon"), words.contains(&"echo"))
    };
    assert_eq!(modes("BEFORE"), (true, true), "{out}");
    assert_eq!(
        modes("AFTER"),
        (true, true),
        "the terminal is left in raw mode:\n{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_prompt_under_an_ask_rule_offers_once_or_deny() {
    let sc = Scratch::new();
    let config = fx_config(&sc, asking(json!({"default": "allow", "ask": ["fx:echo"]})));
    let state = state_dir(&config);
    let call = |message: &str| {
        let args = json!({"message": message}).to_string();
        Pty::spawn(&call_words(&config, &state, "fx:echo", &args))
    };

    // Enter on the default, deny: refused at once, no question about remembering it.
    let mut t = call("hi");
    t.expect("openpact: allow tool fx:echo?").await;
    t.expect("Allow?").await;
    t.keys(&[ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("denied at the prompt"), "{out}");
    assert!(!out.contains("always (remember)"), "{out}");
    assert!(!out.contains("Remember this denial?"), "{out}");
    assert!(out.contains("on every call"), "says why: {out}");

    // Up, Enter: once (the first choice).
    let mut t = call("hi once");
    t.expect("Allow?").await;
    t.keys(&[UP, ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("hi once"), "{out}");
    assert!(decisions(&state).get("fx:echo").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_remember_question_is_a_denial_not_an_unanswered_prompt() {
    let sc = Scratch::new();
    let config = fx_config(
        &sc,
        asking(json!({"default": "ask", "promptTimeout": "4s"})),
    );
    let state = state_dir(&config);
    let mut t = Pty::spawn(&call_words(
        &config,
        &state,
        "fx:echo",
        r#"{"message":"m"}"#,
    ));
    t.expect("Allow?").await;
    t.keys(&[ENTER]).await;
    t.expect("Remember this denial?").await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("denied at the prompt"), "{out}");
    assert!(
        out.contains("not remembered") && !out.contains("no answer to the permission prompt"),
        "{out}"
    );
    assert!(decisions(&state).get("fx:echo").is_none());
}

/// A host outside a sandboxed server's allow list, asked for on the terminal of `openpact
/// call`: once lets the call through and keeps nothing; deny fails it with the command that
/// allows the host; always is remembered for the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_asks_for_a_host_outside_the_allow_list() {
    let sc = Scratch::new();
    let stand = crate::support::Stand::start(|_| crate::support::reply(200, "text/plain", "hi"));
    let host = format!("127.0.0.1:{}", stand.port);
    let key = format!("fx/net/{host}");
    let mut fx = crate::support::fixture(&["--hostile"]);
    fx["sandbox"] = json!({"network": {"allow": ["api.example.com"]}});
    let config = sc.servers(json!({ "fx": fx }), None);
    let state = state_dir(&config);
    let args = json!({"url": format!("{}/", stand.base)}).to_string();
    let call = || Pty::spawn(&call_words(&config, &state, "fx:try_fetch", &args));

    // Up, Enter: once.
    let mut t = call();
    t.expect(&format!(
        "server fx wants {host}: allow once / always / deny"
    ))
    .await;
    t.expect("Allow?").await;
    t.keys(&[UP, ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ok: HTTP/1.1 200"), "{out}");
    assert!(decisions(&state).get(&key).is_none());

    // Enter (deny), then "n": the call fails with the proxy's reason and the fix.
    let mut t = call();
    t.expect("Allow?").await;
    t.keys(&[ENTER]).await;
    t.expect("Remember this denial?").await;
    t.keys(&["n"]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("denied at the prompt")
            && out.contains(&format!(
                "openpact --config {} sandbox allow fx net {host}",
                config.display()
            )),
        "{out}"
    );

    // Up, Up, Enter: always, remembered; the next call asks nothing.
    let mut t = call();
    t.expect("Allow?").await;
    t.keys(&[UP, UP, ENTER]).await;
    let (code, out) = t.finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(decisions(&state)[&key]["decision"], "allow");
    let (code, out) = call().finish().await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("ok: HTTP/1.1 200") && !out.contains("Allow?"),
        "{out}"
    );
}
