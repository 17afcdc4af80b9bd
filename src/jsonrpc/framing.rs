//! Newline framing with a hard cap on message size, shared by the async child readers and
//! the blocking stdin reader.
//!
//! A line longer than the cap is skipped up to its newline and reported once as
//! [`Frame::Oversized`] — never buffered whole, so a runaway peer cannot exhaust memory.

/// What the framer produced from the bytes it was fed.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// One complete line without its newline (a trailing `\r` is removed too).
    Line(Vec<u8>),
    /// A line that exceeded the cap; `len` is how many bytes were dropped (at least the cap).
    /// `edges` keeps its first and last few hundred bytes, enough to find a response's id.
    Oversized { len: usize, edges: Vec<u8> },
}

/// Incremental splitter: feed it the reader's buffer, consume what it says it used.
#[derive(Debug)]
pub struct Framer {
    max: usize,
    partial: Vec<u8>,
    /// `Some(n)`: inside an oversized line, `n` bytes dropped so far.
    skipping: Option<usize>,
    /// The start of the oversized line being skipped, then its latest bytes.
    head: Vec<u8>,
    tail: Vec<u8>,
}

/// How much of each end of an oversized line is kept.
const EDGE: usize = 256;

impl Framer {
    pub fn new(max: usize) -> Self {
        Framer {
            max,
            partial: Vec::new(),
            skipping: None,
            head: Vec::new(),
            tail: Vec::new(),
        }
    }

    /// Looks at `buf`; returns how many bytes were consumed and, if a line ended inside
    /// them, the frame. Call again with the rest of the buffer until it returns `(0, None)`
    /// semantics are simple: a `None` frame means all of `buf` was consumed.
    pub fn feed(&mut self, buf: &[u8]) -> (usize, Option<Frame>) {
        match memchr::memchr(b'\n', buf) {
            Some(i) => {
                let frame = self.finish(&buf[..i]);
                (i + 1, frame)
            }
            None => {
                self.absorb(buf);
                (buf.len(), None)
            }
        }
    }

    /// End of input: whatever is pending becomes a last frame.
    pub fn eof(&mut self) -> Option<Frame> {
        if let Some(len) = self.skipping.take() {
            return Some(self.oversized(len, &[]));
        }
        if self.partial.is_empty() {
            return None;
        }
        let line = std::mem::take(&mut self.partial);
        Some(Frame::Line(trim_cr(line)))
    }

    fn absorb(&mut self, chunk: &[u8]) {
        if let Some(n) = self.skipping.as_mut() {
            *n += chunk.len();
            self.keep_edges(chunk);
        } else if self.partial.len() + chunk.len() > self.max {
            self.skipping = Some(self.partial.len() + chunk.len());
            let mut start = std::mem::take(&mut self.partial);
            start.extend_from_slice(chunk);
            self.head.clear();
            self.tail.clear();
            self.keep_edges(&start);
        } else {
            self.partial.extend_from_slice(chunk);
        }
    }

    fn finish(&mut self, tail: &[u8]) -> Option<Frame> {
        if let Some(n) = self.skipping.take() {
            return Some(self.oversized(n + tail.len(), tail));
        }
        if self.partial.len() + tail.len() > self.max {
            let len = self.partial.len() + tail.len();
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(tail);
            self.head.clear();
            self.tail.clear();
            return Some(self.oversized(len, &line));
        }
        let line = if self.partial.is_empty() {
            tail.to_vec()
        } else {
            let mut l = std::mem::take(&mut self.partial);
            l.extend_from_slice(tail);
            l
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            // Blank lines carry nothing; peers commonly emit them between messages.
            return None;
        }
        Some(Frame::Line(trim_cr(line)))
    }
}

impl Framer {
    /// Keeps the first and the latest `EDGE` bytes of the line being skipped.
    fn keep_edges(&mut self, bytes: &[u8]) {
        let room = EDGE.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.tail
            .extend_from_slice(&bytes[bytes.len().saturating_sub(EDGE)..]);
        let excess = self.tail.len().saturating_sub(EDGE);
        self.tail.drain(..excess);
    }

    fn oversized(&mut self, len: usize, last: &[u8]) -> Frame {
        self.keep_edges(last);
        let mut edges = std::mem::take(&mut self.head);
        edges.push(b'\n');
        edges.append(&mut self.tail);
        Frame::Oversized { len, edges }
    }
}

/// The integer `"id"` of a JSON-RPC message, found in the kept edges of an oversized line.
pub fn id_in_edges(edges: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(edges);
    let mut rest = text.as_ref();
    while let Some(pos) = rest.find("\"id\"") {
        let after = rest[pos + 4..].trim_start();
        if let Some(value) = after.strip_prefix(':') {
            let digits: String = value
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(id) = digits.parse() {
                return Some(id);
            }
        }
        rest = &rest[pos + 4..];
    }
    None
}

fn trim_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(max: usize, chunks: &[&[u8]]) -> Vec<Frame> {
        let mut f = Framer::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            let mut rest: &[u8] = chunk;
            while !rest.is_empty() {
                let (used, frame) = f.feed(rest);
                rest = &rest[used..];
                out.extend(frame);
            }
        }
        out.extend(f.eof());
        out
    }

    #[test]
    fn splits_lines_across_chunks() {
        let frames = run(100, &[b"ab", b"c\nde", b"f\r\n\n", b"g"]);
        assert_eq!(
            frames,
            vec![
                Frame::Line(b"abc".to_vec()),
                Frame::Line(b"def".to_vec()),
                Frame::Line(b"g".to_vec())
            ]
        );
    }

    #[test]
    fn oversized_line_is_skipped_and_the_next_survives() {
        let skipped_then_ok = |len, edges: &[u8]| {
            vec![
                Frame::Oversized {
                    len,
                    edges: edges.to_vec(),
                },
                Frame::Line(b"ok".to_vec()),
            ]
        };
        // Split over chunks, or in one.
        assert_eq!(
            run(4, &[b"12", b"345", b"67\nok\n"]),
            skipped_then_ok(7, b"1234567\n1234567")
        );
        assert_eq!(
            run(4, &[b"123456\nok"]),
            skipped_then_ok(6, b"123456\n123456")
        );
        let frames = run(4, &[b"1234"]);
        assert_eq!(frames, vec![Frame::Line(b"1234".to_vec())]);
    }

    #[test]
    fn oversized_edges_reveal_the_id_wherever_it_is() {
        let big = "x".repeat(2000);
        let first = format!(r#"{{"jsonrpc":"2.0","id":42,"result":{{"t":"{big}"}}}}"#);
        let last = format!(r#"{{"result":{{"t":"{big}"}},"jsonrpc":"2.0","id" : 7}}"#);
        for (line, id) in [(first, 42), (last, 7)] {
            let chunks: Vec<&[u8]> = line.as_bytes().chunks(300).collect();
            let mut all: Vec<&[u8]> = chunks;
            all.push(b"\n");
            let frames = run(500, &all);
            match &frames[0] {
                Frame::Oversized { len, edges } => {
                    assert_eq!(*len, line.len());
                    assert!(edges.len() <= 2 * EDGE + 1);
                    assert_eq!(id_in_edges(edges), Some(id));
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(id_in_edges(br#"{"ids":1}"#), None);
    }

    #[test]
    fn random_split_points_give_the_same_frames() {
        let text: &[u8] = b"{\"a\":1}\n\n{\"b\":[1,2,3]}\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nlast";
        let whole = run(16, &[text]);
        for cut in 0..text.len() {
            for cut2 in cut..text.len() {
                let parts = [&text[..cut], &text[cut..cut2], &text[cut2..]];
                assert_eq!(run(16, &parts), whole, "cuts at {cut},{cut2}");
            }
        }
        assert_eq!(whole.len(), 4);
    }
}
