//! The upstream client's SSE decoding and its handling of a POST's answer (Streamable HTTP),
//! on bodies of arbitrary bytes cut into arbitrary chunks (a body can be long: its pieces
//! repeat). Checked:
//! - the decoder ([`Events`]) yields the same events, and ends the same way, whatever the
//!   chunks; no event it hands out has more data than the size limit; a body no longer than
//!   the limit is never refused as too large;
//! - on well-formed events (`data: X` blocks) it yields exactly those events, and refuses a
//!   stream as too large only for an event that is (and never for a burst of small events
//!   arriving in one large chunk);
//! - the answer handling ([`answer_post`]), for any status, content type and body, delivers
//!   the same messages whatever the chunks, none over the size limit, and never leaves a
//!   request unanswered: the response arrives, or an error for it, or the link ends.
#![no_main]

use futures_core::Stream;
use libfuzzer_sys::fuzz_target;
use openpact::jsonrpc::Frame;
use openpact::transport::http::events::{Events, StreamError};
use openpact::transport::http::{LinkEnd, RemoteKind, RemoteSpec, answer_post};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

/// Bodies stop growing here (a few times the decoder's 64 KiB slack).
const MAX_BODY: usize = 320 * 1024;

/// A current-thread runtime with paused time: the client's `retry:` waits pass at once.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime")
    })
}

/// The body's chunks, then (optionally) a broken connection.
struct Chunks {
    chunks: VecDeque<Vec<u8>>,
    broken: bool,
}

impl Stream for Chunks {
    type Item = Result<Vec<u8>, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(c) = self.chunks.pop_front() {
            return Poll::Ready(Some(Ok(c)));
        }
        if std::mem::take(&mut self.broken) {
            return Poll::Ready(Some(Err(std::io::Error::other("connection reset"))));
        }
        Poll::Ready(None)
    }
}

/// One upstream answer: status, content type, and the body in `chunks`.
fn response(
    status: u16,
    content_type: Option<&str>,
    chunks: Vec<Vec<u8>>,
    broken: bool,
) -> reqwest::Response {
    let body = reqwest::Body::wrap_stream(Chunks {
        chunks: chunks.into(),
        broken,
    });
    let mut b = http::Response::builder().status(status);
    if let Some(ct) = content_type {
        b = b.header("content-type", ct);
    }
    reqwest::Response::from(b.body(body).expect("response"))
}

/// `body` in pieces: sizes from `cuts` (cycled), small or (high values) up to 128 KiB.
fn split(body: &[u8], cuts: &[u8]) -> Vec<Vec<u8>> {
    if cuts.is_empty() {
        return vec![body.to_vec()];
    }
    let mut out = Vec::new();
    let mut rest = body;
    let mut cut = cuts.iter().cycle();
    while !rest.is_empty() {
        let c = usize::from(*cut.next().unwrap_or(&0));
        let n = if c < 192 { c + 1 } else { (c - 191) * 2048 };
        let n = n.min(rest.len());
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum End {
    Clean,
    TooLarge,
    Broken(String),
}

#[derive(Debug, Clone, PartialEq)]
struct Ev {
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
}

fn decode(chunks: Vec<Vec<u8>>, broken: bool, max: usize) -> (Vec<Ev>, End) {
    runtime().block_on(async {
        let resp = response(200, Some("text/event-stream"), chunks, broken);
        let mut events = Events::new(resp, max);
        let mut out = Vec::new();
        loop {
            match events.next().await {
                None => return (out, End::Clean),
                Some(Ok(ev)) => {
                    if let Some(d) = &ev.data {
                        assert!(d.len() <= max, "an event over the limit was handed out");
                    }
                    out.push(Ev {
                        event: ev.event,
                        data: ev.data,
                        id: ev.id,
                        retry: ev.retry,
                    });
                }
                Some(Err(StreamError::TooLarge(_))) => return (out, End::TooLarge),
                Some(Err(StreamError::Broken(why))) => return (out, End::Broken(why)),
            }
        }
    })
}

/// Reads the input in order; past its end every read is zero or empty.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
}

/// What a message frame says, for comparing two runs (an oversized message's length may
/// depend on where the chunks were cut).
#[derive(Debug, PartialEq)]
enum Seen {
    Line(Vec<u8>),
    Oversized(Vec<u8>),
}

/// Whether `line` (a message or a batch) is the response to the request with `id`, read as
/// the JSON-RPC client reads it.
fn answers(line: &[u8], id: &serde_json::Value) -> bool {
    let is_answer = |v: &serde_json::Value| {
        v.get("method").is_none()
            && v.get("id") == Some(id)
            && (v.get("result").is_some() || v.get("error").is_some())
    };
    match serde_json::from_slice::<serde_json::Value>(line) {
        Ok(serde_json::Value::Array(items)) => items.iter().any(is_answer),
        Ok(v) => is_answer(&v),
        Err(_) => false,
    }
}

/// Frames as text, for messages.
fn shown(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .map(|f| match f {
            Frame::Line(l) => String::from_utf8_lossy(&l[..l.len().min(300)]).into_owned(),
            Frame::Oversized { len, .. } => format!("<{len} bytes>"),
        })
        .collect()
}

fn spec(max: usize) -> Arc<RemoteSpec> {
    Arc::new(RemoteSpec {
        label: "fuzz".into(),
        // A resumption (GET) fails at once, without a network: reqwest refuses the scheme.
        url: url::Url::parse("fuzz://upstream/mcp").expect("url"),
        headers: Vec::new(),
        kind: RemoteKind::Streamable,
        max_message_size: max,
        deadline: Duration::from_secs(60),
        credentials: None,
    })
}

/// Runs the answer handling on one response; what it delivered and how the link ended.
fn answer(
    line: &str,
    status: u16,
    content_type: Option<&str>,
    chunks: Vec<Vec<u8>>,
    broken: bool,
    max: usize,
) -> (Vec<Frame>, Option<LinkEnd>) {
    let frames: Arc<Mutex<Vec<Frame>>> = Arc::default();
    let sink = frames.clone();
    let deliver: openpact::transport::http::Deliver =
        Arc::new(move |f| sink.lock().expect("lock").push(f));
    let end = runtime().block_on(async {
        let resp = response(status, content_type, chunks, broken);
        answer_post(spec(max), line.to_string(), resp, deliver)
            .await
            .expect("link")
    });
    let frames = std::mem::take(&mut *frames.lock().expect("lock"));
    (frames, end)
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let flags = input.byte();
    let max = match input.byte() {
        255 => 16 * 1024 * 1024,
        b @ 128.. => usize::from(b - 127) * 1024,
        b => usize::from(b) * 16,
    };
    let ncuts = usize::from(input.byte() % 32);
    let cuts = input.take(ncuts).to_vec();
    let broken = flags & 4 != 0;
    let structured = flags & 3 == 2;

    // The body: pieces, each repeated; in the structured mode each piece is the data of a
    // well-formed event instead.
    let mut body = Vec::new();
    let mut expected: Vec<String> = Vec::new();
    while !input.0.is_empty() && body.len() < MAX_BODY {
        let len = usize::from(input.byte());
        let rep = usize::from(input.byte()).max(1);
        let piece = input.take(len);
        let piece = if structured {
            let text: String = String::from_utf8_lossy(piece)
                .chars()
                .filter(|c| !matches!(c, '\r' | '\n'))
                .collect();
            let block = format!("data: {text}\n\n");
            for _ in 0..rep {
                expected.push(text.clone());
            }
            block.into_bytes()
        } else {
            piece.to_vec()
        };
        for _ in 0..rep {
            body.extend_from_slice(&piece);
        }
    }

    // The decoder: one chunk, then the cuts.
    let (whole, whole_end) = decode(vec![body.clone()], broken, max);
    let (parts, parts_end) = decode(split(&body, &cuts), broken, max);
    let common = whole.len().min(parts.len());
    assert_eq!(
        whole[..common],
        parts[..common],
        "the chunks changed the events"
    );
    if whole_end != End::TooLarge && parts_end != End::TooLarge {
        assert_eq!(whole, parts, "the chunks changed the events");
        assert_eq!(
            whole_end, parts_end,
            "the chunks changed how the stream ended"
        );
    }
    if body.len() <= max {
        assert!(
            whole_end != End::TooLarge && parts_end != End::TooLarge,
            "a body of {} bytes refused as over the limit of {max}",
            body.len()
        );
    }
    if structured {
        // `data: X\n\n` is 8 bytes more than X.
        let first_big = expected.iter().position(|d| d.len() > max);
        let all_fit = expected.iter().all(|d| d.len() + 8 <= max);
        for (events, end) in [(&whole, &whole_end), (&parts, &parts_end)] {
            let datas: Vec<&str> = events
                .iter()
                .map(|e| e.data.as_deref().unwrap_or(""))
                .collect();
            assert!(
                events
                    .iter()
                    .all(|e| e.event.is_none() && e.id.is_none() && e.retry.is_none()),
                "fields that were not sent"
            );
            assert_eq!(
                datas[..],
                expected.iter().map(String::as_str).collect::<Vec<_>>()[..datas.len()],
                "events other than those sent"
            );
            if all_fit {
                assert_eq!(
                    datas.len(),
                    expected.len(),
                    "events lost ({end:?}, limit {max})"
                );
                assert_ne!(
                    *end,
                    End::TooLarge,
                    "small events refused as too large (limit {max})"
                );
            }
            if let Some(k) = first_big {
                assert!(datas.len() <= k, "an event over the limit got through");
                assert_eq!(
                    *end,
                    End::TooLarge,
                    "an event over the limit was not refused"
                );
            }
        }
    }

    // The answer to a POST, whole and in pieces.
    let status =
        [200, 200, 200, 202, 204, 400, 401, 404, 405, 500, 503, 302][usize::from(flags >> 4) % 12];
    let content_type = [
        Some("text/event-stream"),
        Some("application/json"),
        Some("Text/Event-Stream; charset=utf-8"),
        None,
        Some("text/plain"),
    ][usize::from(flags >> 3) % 5];
    let (line, id) = match cuts.first().copied().unwrap_or(0) % 4 {
        0 => (
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            None,
        ),
        1 => (
            r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#,
            Some(serde_json::json!("a")),
        ),
        _ => (
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            Some(serde_json::json!(1)),
        ),
    };
    let (a_frames, a_end) = answer(line, status, content_type, vec![body.clone()], broken, max);
    let (b_frames, b_end) = answer(line, status, content_type, split(&body, &cuts), broken, max);
    let seen = |frames: &[Frame]| -> Vec<Seen> {
        frames
            .iter()
            .map(|f| match f {
                Frame::Line(l) => {
                    // The limit is on what the server sent, not on openpact's own errors.
                    assert!(
                        l.len() <= max || String::from_utf8_lossy(l).contains("\"server 'fuzz' "),
                        "a message over the limit was delivered"
                    );
                    Seen::Line(l.clone())
                }
                Frame::Oversized { edges, .. } => Seen::Oversized(edges.clone()),
            })
            .collect()
    };
    let (a_seen, b_seen) = (seen(&a_frames), seen(&b_frames));
    if a_seen != b_seen || a_end != b_end {
        // Only a limit reached at different places may tell the two apart, and only from
        // where it is reached: the limit counts bytes up to a piece past an event's end, so a
        // side may refuse, as over the limit, an event the other delivered.
        let before_limit = |s: &[Seen]| -> usize {
            match s.last() {
                Some(Seen::Oversized(_)) => s.len() - 1,
                _ => s.len(),
            }
        };
        let common = before_limit(&a_seen).min(before_limit(&b_seen));
        assert_eq!(
            a_seen[..common],
            b_seen[..common],
            "the chunks changed the messages"
        );
        let limited = |s: &[Seen], e: &Option<LinkEnd>| {
            matches!(s.last(), Some(Seen::Oversized(_)))
                || matches!(e, Some(LinkEnd::Lost(why)) if why.contains("over the limit"))
        };
        assert!(
            limited(&a_seen, &a_end) || limited(&b_seen, &b_end),
            "the chunks changed the answer: {:?} {a_end:?} vs {:?} {b_end:?}",
            shown(&a_frames),
            shown(&b_frames)
        );
    }
    if let Some(id) = id {
        for (frames, end) in [(&a_frames, &a_end), (&b_frames, &b_end)] {
            let id_text = id.to_string();
            let answered = frames.iter().any(|f| match f {
                Frame::Line(l) => answers(l, &id),
                Frame::Oversized { edges, .. } => {
                    String::from_utf8_lossy(edges).contains(&format!("\"id\":{id_text}"))
                }
            });
            assert!(
                answered || end.is_some(),
                "request {id} left unanswered: HTTP {status} {content_type:?}, {:?}",
                shown(frames)
            );
        }
    }
});
