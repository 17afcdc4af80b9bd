//! A link against a loopback server that insists on authorization, with stand-in
//! [`Credentials`]: the header on every request, the challenge on 401 and on 403
//! `insufficient_scope`, the bounded retries, and a login that only the user can do.

use super::super::*;
use crate::auth::{AuthError, BoxFuture};
use crate::jsonrpc::Frame;
use crate::transport::Outbox;
use std::sync::atomic::Ordering;

/// What the test server asks for: 401 until it sees `Bearer fresh`; with `scope_forever`,
/// 403 `insufficient_scope` whatever it sees.
struct Server {
    port: u16,
    stop: Arc<std::sync::atomic::AtomicBool>,
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

impl Server {
    fn start(scope_forever: bool) -> Server {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let port = server.server_addr().to_ip().unwrap().port();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (halt, log) = (stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !halt.load(Ordering::Relaxed) {
                let Ok(Some(mut req)) = server.recv_timeout(Duration::from_millis(20)) else {
                    continue;
                };
                let auth = req
                    .headers()
                    .iter()
                    .find(|h| h.field.equiv("Authorization"))
                    .map(|h| h.value.to_string());
                log.lock().unwrap().push(auth.clone());
                let mut body = String::new();
                let _ = req.as_reader().read_to_string(&mut body);
                let header = |k: &str, v: &str| {
                    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).unwrap()
                };
                let resp = if scope_forever {
                    tiny_http::Response::from_string("more scope")
                        .with_status_code(403)
                        .with_header(header(
                            "WWW-Authenticate",
                            "Bearer error=\"insufficient_scope\", scope=\"admin\"",
                        ))
                } else if auth.as_deref() != Some("Bearer fresh") {
                    tiny_http::Response::from_string("who are you")
                        .with_status_code(401)
                        .with_header(header(
                            "WWW-Authenticate",
                            "Bearer resource_metadata=\"http://x/prm\"",
                        ))
                } else {
                    let id = crate::jsonrpc::RawObject::parse(&body)
                        .ok()
                        .and_then(|o| o.get("id").map(str::to_string))
                        .unwrap_or_else(|| "null".into());
                    tiny_http::Response::from_string(crate::jsonrpc::result(&id, "{\"ok\":true}"))
                        .with_header(header("Content-Type", "application/json"))
                };
                let _ = req.respond(resp);
            }
        });
        Server { port, stop, seen }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Stand-in credentials: a token that a challenge renews, or a login the user must do.
struct Fake {
    token: Mutex<String>,
    challenges: Mutex<Vec<(u16, Option<String>)>>,
    needs_login: bool,
}

impl Fake {
    fn new(token: &str, needs_login: bool) -> Arc<Fake> {
        Arc::new(Fake {
            token: Mutex::new(token.into()),
            challenges: Mutex::new(Vec::new()),
            needs_login,
        })
    }
}

impl Credentials for Fake {
    fn authorization(&self) -> Option<String> {
        Some(format!("Bearer {}", self.token.lock().unwrap()))
    }

    fn challenge<'a>(
        &'a self,
        status: u16,
        www_authenticate: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), AuthError>> {
        Box::pin(async move {
            self.challenges
                .lock()
                .unwrap()
                .push((status, www_authenticate.map(String::from)));
            if self.needs_login {
                return Err(AuthError::NeedsLogin {
                    server: "t".into(),
                    hint: "log in first".into(),
                });
            }
            *self.token.lock().unwrap() = "fresh".into();
            Ok(())
        })
    }
}

/// Opens a link to `port` with `credentials`, sends one request; the frames that came back
/// within a moment, and how the link ended (if it did).
async fn one_request(
    port: u16,
    credentials: Option<Arc<dyn Credentials>>,
) -> (Vec<String>, Option<LinkEnd>) {
    let spec = Arc::new(RemoteSpec {
        label: "t".into(),
        url: Url::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap(),
        // Replaced by the credentials' header, when they give one.
        headers: vec![("Authorization".into(), "Bearer configured".into())],
        kind: RemoteKind::Streamable,
        max_message_size: 1 << 20,
        deadline: Duration::from_secs(10),
        credentials,
    });
    let (tx, mut rx) = mpsc::unbounded_channel();
    let deliver: Deliver = Arc::new(move |frame| {
        if let Frame::Line(line) = frame {
            let _ = tx.send(String::from_utf8(line).unwrap());
        }
    });
    let (out, lines) = Outbox::channel();
    let (_link, mut ended) = Link::open(spec, Arc::new(Mutex::new(None)), lines, deliver).unwrap();
    out.send(crate::jsonrpc::request("7", "tools/list", None));
    let mut frames = Vec::new();
    let end = tokio::select! {
        f = rx.recv() => { frames.extend(f); None }
        end = &mut ended => end.ok(),
        _ = tokio::time::sleep(Duration::from_secs(10)) => None,
    };
    (frames, end)
}

#[tokio::test]
async fn a_401_is_answered_by_the_credentials_and_the_request_retried() {
    let server = Server::start(false);
    let fake = Fake::new("stale", false);
    let (frames, end) = one_request(server.port, Some(fake.clone())).await;
    assert_eq!(end, None);
    assert_eq!(frames, [r#"{"jsonrpc":"2.0","id":7,"result":{"ok":true}}"#]);
    assert_eq!(
        *fake.challenges.lock().unwrap(),
        [(
            401,
            Some("Bearer resource_metadata=\"http://x/prm\"".to_string())
        )]
    );
    assert_eq!(
        *server.seen.lock().unwrap(),
        [Some("Bearer stale".into()), Some("Bearer fresh".into())]
    );
}

#[tokio::test]
async fn step_up_is_retried_a_bounded_number_of_times() {
    let server = Server::start(true);
    let fake = Fake::new("t", false);
    let (frames, end) = one_request(server.port, Some(fake.clone())).await;
    assert_eq!(end, None);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert!(
        frames[0].contains("server 't' answered HTTP 403 Forbidden: more scope"),
        "{frames:?}"
    );
    let challenges = fake.challenges.lock().unwrap().clone();
    assert_eq!(challenges.len(), 3, "{challenges:?}");
    assert!(challenges.iter().all(|(status, _)| *status == 403));
    assert_eq!(server.seen.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn a_login_only_the_user_can_do_ends_the_link_saying_so() {
    let server = Server::start(false);
    let fake = Fake::new("stale", true);
    let (frames, end) = one_request(server.port, Some(fake)).await;
    assert!(frames.is_empty(), "{frames:?}");
    assert_eq!(
        end,
        Some(LinkEnd::NeedsLogin {
            detail: "it answered HTTP 401 Unauthorized".into(),
            how: Some("log in first".into()),
        })
    );
    // Without credentials at all, the same: the user has to act.
    let (_, end) = one_request(server.port, None).await;
    assert_eq!(
        server.seen.lock().unwrap().last(),
        Some(&Some("Bearer configured".to_string()))
    );
    assert_eq!(
        end,
        Some(LinkEnd::NeedsLogin {
            detail: "it answered HTTP 401 Unauthorized".into(),
            how: None,
        })
    );
}
