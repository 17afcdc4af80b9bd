//! A validating JSON scanner: checks that text is well-formed JSON and finds where members
//! and elements begin and end, building nothing. The envelope and the member view sit on it,
//! because on the forwarding path serde's per-token machinery cost more than the rest of a
//! call's parsing put together.

use std::borrow::Cow;

/// Why text is not well-formed JSON, and where (a byte offset into the text scanned).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at byte {at}")]
pub struct ScanError {
    what: &'static str,
    at: usize,
}

/// Nesting deeper than this is refused, as serde_json refuses it when it builds values, so that a hostile line the
/// scanner accepted cannot overflow the stack of a later, recursive parse of the same text.
const MAX_DEPTH: usize = 128;

/// An object member's key as written, quotes included.
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    quoted: &'a str,
    escaped: bool,
    /// Where the key starts in the scanned text, for errors.
    at: usize,
}

impl<'a> Key<'a> {
    /// The decoded key: borrowed when it has no escapes (nearly always).
    #[inline]
    pub fn text(&self) -> Result<Cow<'a, str>, ScanError> {
        if !self.escaped {
            return Ok(Cow::Borrowed(self.plain()));
        }
        serde_json::from_str::<String>(self.quoted)
            .map(Cow::Owned)
            .map_err(|_| error("invalid escape in a key", self.at))
    }

    fn plain(&self) -> &'a str {
        self.quoted
            .get(1..self.quoted.len().saturating_sub(1))
            .unwrap_or_default()
    }
}

/// Scans `text`, which must hold exactly one JSON object, calling `member` for each member in
/// document order with its key and its value's text.
pub fn object<'a, E: From<ScanError>>(
    text: &'a str,
    mut member: impl FnMut(Key<'a>, &'a str) -> Result<(), E>,
) -> Result<(), E> {
    let b = text.as_bytes();
    let mut i = open(b, 0, b'{', "expected an object")?;
    if b.get(i) == Some(&b'}') {
        return Ok(end(b, i + 1)?);
    }
    loop {
        let (key, start) = key(text, i)?;
        i = value(b, start, 1)?;
        member(key, slice(text, start, i))?;
        i = ws(b, i);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return Ok(end(b, i + 1)?),
            _ => return Err(error("expected `,` or `}`", i).into()),
        }
    }
}

/// The elements of `text`, which must hold exactly one JSON array.
pub fn array(text: &str) -> Result<Vec<&str>, ScanError> {
    let b = text.as_bytes();
    let mut items = Vec::new();
    let mut i = open(b, 0, b'[', "expected an array")?;
    if b.get(i) == Some(&b']') {
        end(b, i + 1)?;
        return Ok(items);
    }
    loop {
        let start = ws(b, i);
        i = value(b, start, 1)?;
        items.push(slice(text, start, i));
        i = ws(b, i);
        match b.get(i) {
            Some(b',') => i += 1,
            Some(b']') => {
                end(b, i + 1)?;
                return Ok(items);
            }
            _ => return Err(error("expected `,` or `]`", i)),
        }
    }
}

/// Decodes `raw`, the text of a JSON value the scanner accepted, if it is a string.
pub fn string(raw: &str) -> Option<Cow<'_, str>> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains('\\') {
        // Accepted by the scanner and free of escapes: the bytes are the string.
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(raw).ok().map(Cow::Owned)
}

// The scanning functions take the bytes and an index and return the index after what they
// read: with the position in a local rather than behind `&mut self`, it stays in a register.

fn error(what: &'static str, at: usize) -> ScanError {
    ScanError { what, at }
}

#[inline(always)]
fn slice(text: &str, start: usize, end: usize) -> &str {
    text.get(start..end).unwrap_or_default()
}

#[inline(always)]
fn ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = b.get(i) {
        i += 1;
    }
    i
}

/// Past leading whitespace, the opening bracket and the whitespace after it.
fn open(b: &[u8], i: usize, bracket: u8, what: &'static str) -> Result<usize, ScanError> {
    let i = ws(b, i);
    if b.get(i) != Some(&bracket) {
        return Err(error(what, i));
    }
    Ok(ws(b, i + 1))
}

fn end(b: &[u8], i: usize) -> Result<(), ScanError> {
    let i = ws(b, i);
    if i < b.len() {
        return Err(error("trailing characters", i));
    }
    Ok(())
}

/// A member's key at `i` and the `:` after it; returns where the value starts.
#[inline(always)]
fn key(text: &str, i: usize) -> Result<(Key<'_>, usize), ScanError> {
    let b = text.as_bytes();
    if b.get(i) != Some(&b'"') {
        return Err(error("expected a string key", i));
    }
    let (after, escaped) = skip_string(b, i)?;
    let colon = ws(b, after);
    if b.get(colon) != Some(&b':') {
        return Err(error("expected `:`", colon));
    }
    let quoted = slice(text, i, after);
    Ok((
        Key {
            quoted,
            escaped,
            at: i,
        },
        ws(b, colon + 1),
    ))
}

/// Skips the value at `i` (after optional whitespace), checking it as it goes; returns the
/// index just past it. Iterative, with the open containers kept as bits (1 = object), so
/// depth costs no stack.
fn value(b: &[u8], mut i: usize, depth_outside: usize) -> Result<usize, ScanError> {
    let mut open: u128 = 0;
    let mut depth = 0usize;
    'value: loop {
        i = ws(b, i);
        match b.get(i) {
            Some(&c @ (b'{' | b'[')) => {
                if depth_outside + depth >= MAX_DEPTH {
                    return Err(error("nesting too deep", i));
                }
                i = ws(b, i + 1);
                let is_object = c == b'{';
                if b.get(i) == Some(if is_object { &b'}' } else { &b']' }) {
                    i += 1;
                } else {
                    open = (open << 1) | u128::from(is_object);
                    depth += 1;
                    if is_object {
                        i = skip_key(b, i)?;
                    }
                    continue 'value;
                }
            }
            Some(b'"') => i = skip_string(b, i)?.0,
            Some(b'-' | b'0'..=b'9') => i = number(b, i)?,
            Some(b't') => i = literal(b, i, b"true")?,
            Some(b'f') => i = literal(b, i, b"false")?,
            Some(b'n') => i = literal(b, i, b"null")?,
            _ => return Err(error("expected a value", i)),
        }
        // A value is complete: close every container it completes.
        while depth > 0 {
            i = ws(b, i);
            let in_object = open & 1 == 1;
            match b.get(i) {
                Some(b',') => {
                    i += 1;
                    if in_object {
                        i = skip_key(b, ws(b, i))?;
                    }
                    continue 'value;
                }
                Some(b'}') if in_object => {}
                Some(b']') if !in_object => {}
                _ if in_object => return Err(error("expected `,` or `}`", i)),
                _ => return Err(error("expected `,` or `]`", i)),
            }
            i += 1;
            open >>= 1;
            depth -= 1;
        }
        return Ok(i);
    }
}

/// [`key`] when only its end matters.
#[inline(always)]
fn skip_key(b: &[u8], i: usize) -> Result<usize, ScanError> {
    if b.get(i) != Some(&b'"') {
        return Err(error("expected a string key", i));
    }
    let colon = ws(b, skip_string(b, i)?.0);
    if b.get(colon) != Some(&b':') {
        return Err(error("expected `:`", colon));
    }
    Ok(colon + 1)
}

fn literal(b: &[u8], i: usize, word: &'static [u8]) -> Result<usize, ScanError> {
    if b.get(i..i + word.len()) == Some(word) {
        Ok(i + word.len())
    } else {
        Err(error("expected a value", i))
    }
}

#[inline(always)]
fn digits(b: &[u8], mut i: usize) -> usize {
    while let Some(b'0'..=b'9') = b.get(i) {
        i += 1;
    }
    i
}

fn number(b: &[u8], mut i: usize) -> Result<usize, ScanError> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => {
            i += 1;
            if let Some(b'0'..=b'9') = b.get(i) {
                return Err(error("invalid number", i));
            }
        }
        Some(b'1'..=b'9') => i = digits(b, i + 1),
        _ => return Err(error("invalid number", i)),
    }
    if b.get(i) == Some(&b'.') {
        let after = digits(b, i + 1);
        if after == i + 1 {
            return Err(error("invalid number", after));
        }
        i = after;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        let after = digits(b, i);
        if after == i {
            return Err(error("invalid number", i));
        }
        i = after;
    }
    Ok(i)
}

/// Skips the string whose opening quote is at `i`; returns the index past its closing quote
/// and whether it has escapes.
#[inline(always)]
fn skip_string(b: &[u8], mut i: usize) -> Result<(usize, bool), ScanError> {
    i += 1;
    let mut escaped = false;
    loop {
        i = skip_plain(b, i);
        match b.get(i) {
            Some(b'"') => return Ok((i + 1, escaped)),
            Some(b'\\') => {
                escaped = true;
                i = escape(b, i + 1)?;
            }
            Some(_) => return Err(error("control character in a string", i)),
            None => return Err(error("unterminated string", i)),
        }
    }
}

/// The escape after a backslash at `i - 1`; returns the index past it.
fn escape(b: &[u8], i: usize) -> Result<usize, ScanError> {
    match b.get(i) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 1),
        Some(b'u') => {
            let hex = b.get(i + 1..i + 5);
            if hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                Ok(i + 5)
            } else {
                Err(error("invalid \\u escape", i + 1))
            }
        }
        _ => Err(error("invalid escape", i)),
    }
}

/// Skips string bytes that need no attention (not `"`, `\` or a control character), eight
/// at a time where it can; returns the index of the first that does (or the end).
#[inline(always)]
fn skip_plain(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // A byte of `x` is zero (for the last term: below 0x20) when its high bit ends up
        // set. Borrows only run upwards, so the lowest flagged byte is exactly the first byte
        // that qualifies.
        let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
        let special = zero(w ^ (ONES * u64::from(b'"')))
            | zero(w ^ (ONES * u64::from(b'\\')))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH);
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests;
