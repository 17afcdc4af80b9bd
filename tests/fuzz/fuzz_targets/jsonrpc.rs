//! The JSON-RPC framing and envelope on arbitrary bytes split at arbitrary points: the same
//! frames whatever the splits, never a panic, and (against serde_json) never a message
//! accepted from text that is not JSON, nor a method or id that differs from what serde_json
//! reads there.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openpact::jsonrpc::{Frame, Framer, Kind, parse_frame};

/// Frames of `data` fed in pieces cut at `cuts` (each a piece length, 1..=64).
fn frames(data: &[u8], cuts: &[u8], max: usize) -> Vec<Frame> {
    let mut framer = Framer::new(max);
    let mut out = Vec::new();
    let mut rest = data;
    let mut cut = cuts.iter().cycle();
    while !rest.is_empty() {
        let n = usize::from(cut.next().copied().unwrap_or(64) % 64 + 1).min(rest.len());
        let mut piece = &rest[..n];
        rest = &rest[n..];
        while !piece.is_empty() {
            let (used, frame) = framer.feed(piece);
            piece = &piece[used..];
            out.extend(frame);
            if used == 0 {
                break;
            }
        }
    }
    out.extend(framer.eof());
    out
}

fuzz_target!(|input: (Vec<u8>, Vec<u8>)| {
    let (data, cuts) = input;
    let max = 4096;
    let whole = frames(&data, &[63], max);
    let split = frames(&data, &cuts, max);
    assert_eq!(whole.len(), split.len(), "the splits changed the frames");
    for (a, b) in whole.iter().zip(&split) {
        match (a, b) {
            (Frame::Line(a), Frame::Line(b)) => assert_eq!(a, b),
            (Frame::Oversized { len: a, .. }, Frame::Oversized { len: b, .. }) => {
                assert_eq!(a, b)
            }
            _ => panic!("a frame changed kind with the splits"),
        }
    }
    for frame in whole {
        let Frame::Line(line) = frame else { continue };
        let text = String::from_utf8_lossy(&line).into_owned();
        let Ok(messages) = parse_frame(line) else {
            continue;
        };
        let serde: Option<serde_json::Value> = serde_json::from_str(&text).ok();
        let Some(serde) = serde else {
            panic!("accepted what serde_json says is not JSON: {text:?}");
        };
        let items: Vec<serde_json::Value> = match serde {
            serde_json::Value::Array(items) => items,
            one => vec![one],
        };
        for (m, v) in messages.zip(items) {
            let Ok(m) = m else { continue };
            if m.kind() != Kind::Response {
                assert_eq!(Some(m.method()), v.get("method").and_then(|x| x.as_str()));
            }
            if let Some(id) = v.get("id") {
                let ours: serde_json::Value = serde_json::from_str(m.id()).expect("id is JSON");
                assert_eq!(&ours, id, "id read differently");
            }
        }
    }
});
