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
    Oversized { len: usize },
}

/// Incremental splitter: feed it the reader's buffer, consume what it says it used.
#[derive(Debug)]
pub struct Framer {
    max: usize,
    partial: Vec<u8>,
    /// `Some(n)`: inside an oversized line, `n` bytes dropped so far.
    skipping: Option<usize>,
}

impl Framer {
    pub fn new(max: usize) -> Self {
        Framer {
            max,
            partial: Vec::new(),
            skipping: None,
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
            return Some(Frame::Oversized { len });
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
        } else if self.partial.len() + chunk.len() > self.max {
            self.skipping = Some(self.partial.len() + chunk.len());
            self.partial = Vec::new();
        } else {
            self.partial.extend_from_slice(chunk);
        }
    }

    fn finish(&mut self, tail: &[u8]) -> Option<Frame> {
        if let Some(n) = self.skipping.take() {
            return Some(Frame::Oversized {
                len: n + tail.len(),
            });
        }
        if self.partial.len() + tail.len() > self.max {
            let len = self.partial.len() + tail.len();
            self.partial = Vec::new();
            return Some(Frame::Oversized { len });
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
        let frames = run(4, &[b"12", b"345", b"67\nok\n"]);
        assert_eq!(
            frames,
            vec![Frame::Oversized { len: 7 }, Frame::Line(b"ok".to_vec())]
        );
        let frames = run(4, &[b"123456\nok"]);
        assert_eq!(
            frames,
            vec![Frame::Oversized { len: 6 }, Frame::Line(b"ok".to_vec())]
        );
        let frames = run(4, &[b"1234"]);
        assert_eq!(frames, vec![Frame::Line(b"1234".to_vec())]);
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
