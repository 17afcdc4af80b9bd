//! The envelope: one parse of a line finds `id`, `method`, `params`, `result` and `error`
//! as spans of the original text, so forwarding copies nothing it does not rewrite.

use super::scan::{self, ScanError};
use std::borrow::Cow;
use std::ops::Range;

/// What kind of JSON-RPC message this is, decided by which members are present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
}

/// Why a frame is not a usable message.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error("not UTF-8 text")]
    NotUtf8,
    #[error("not JSON: {0}")]
    NotJson(#[from] ScanError),
    #[error("not a JSON-RPC message (needs `method`, or `id` with `result` or `error`)")]
    NotJsonRpc,
    #[error("`{0}` appears twice")]
    Duplicate(&'static str),
    #[error("`method` is not a string")]
    MethodNotString,
    #[error("empty batch")]
    EmptyBatch,
}

/// One parsed message. Owns its text; accessors hand out slices of it.
#[derive(Debug, Clone)]
pub struct Message {
    text: Box<str>,
    kind: Kind,
    id: Option<Range<usize>>,
    method: Option<Text>,
    params: Option<Range<usize>>,
    result: Option<Range<usize>>,
    error: Option<Range<usize>>,
}

#[derive(Debug, Clone)]
enum Text {
    Span(Range<usize>),
    /// The method had JSON escapes, so its decoded form is not a slice of the text.
    Owned(Box<str>),
}

/// Parses one frame: a single message, or a batch array (accepted from peers for
/// 2025-03-26 compatibility) whose elements become separate messages. An element that is not
/// a message is reported in place so the caller can answer it.
pub fn parse_frame(line: Vec<u8>) -> Result<Messages, ParseError> {
    let text = String::from_utf8(line).map_err(|_| ParseError::NotUtf8)?;
    let first = text.bytes().find(|b| !b.is_ascii_whitespace());
    if first == Some(b'[') {
        let items = scan::array(&text)?;
        if items.is_empty() {
            return Err(ParseError::EmptyBatch);
        }
        let batch: Vec<_> = items
            .into_iter()
            .map(|raw| Message::parse(raw.into()))
            .collect();
        return Ok(Messages::Batch(batch.into_iter()));
    }
    Message::parse(text.into_boxed_str()).map(|m| Messages::One(Some(Ok(m))))
}

/// The messages of one frame in order: nearly always one, which needs no list.
#[derive(Debug)]
pub enum Messages {
    One(Option<Result<Message, ParseError>>),
    Batch(std::vec::IntoIter<Result<Message, ParseError>>),
}

impl Iterator for Messages {
    type Item = Result<Message, ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Messages::One(one) => one.take(),
            Messages::Batch(batch) => batch.next(),
        }
    }
}

fn span(base: &str, part: &str) -> Range<usize> {
    // `part` is a sub-slice of `base` (serde borrowed it), so pointer offsets locate it.
    let start = part.as_ptr() as usize - base.as_ptr() as usize;
    start..start + part.len()
}

impl ParseError {
    /// The JSON-RPC code to answer with: -32700 for unreadable bytes, -32600 for JSON that
    /// is not a valid message.
    pub fn code(&self) -> i64 {
        match self {
            ParseError::NotUtf8 | ParseError::NotJson(_) => crate::jsonrpc::code::PARSE_ERROR,
            ParseError::NotJsonRpc
            | ParseError::EmptyBatch
            | ParseError::Duplicate(_)
            | ParseError::MethodNotString => crate::jsonrpc::code::INVALID_REQUEST,
        }
    }
}

impl Message {
    /// Parses a single JSON-RPC object. Members other than the five it needs are checked
    /// for well-formedness and otherwise left alone; `null` counts as absent (responses to
    /// unparseable requests carry `"id": null`).
    pub fn parse(text: Box<str>) -> Result<Message, ParseError> {
        const NAMES: [&str; 5] = ["id", "method", "params", "result", "error"];
        let mut found: [Option<Range<usize>>; 5] = Default::default();
        scan::object(&text, |key, value| {
            let name = key.text()?;
            let Some(slot) = NAMES.iter().position(|n| *n == name) else {
                return Ok(());
            };
            if found[slot].is_some() {
                return Err(ParseError::Duplicate(NAMES[slot]));
            }
            found[slot] = Some(span(&text, value));
            Ok(())
        })?;
        let [id, method, params, result, error] =
            found.map(|r| r.filter(|r| &text[r.clone()] != "null"));
        let method = match method {
            None => None,
            Some(r) => match scan::string(&text[r.clone()]) {
                Some(Cow::Borrowed(_)) => Some(Text::Span(r.start + 1..r.end - 1)),
                Some(Cow::Owned(s)) => Some(Text::Owned(s.into_boxed_str())),
                None => return Err(ParseError::MethodNotString),
            },
        };
        let kind = match (&method, &id, result.is_some() || error.is_some()) {
            (Some(_), Some(_), _) => Kind::Request,
            (Some(_), None, _) => Kind::Notification,
            (None, _, true) => Kind::Response,
            (None, _, false) => return Err(ParseError::NotJsonRpc),
        };
        Ok(Message {
            text,
            kind,
            id,
            method,
            params,
            result,
            error,
        })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The whole message as received.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The whole message as received, given back.
    pub fn into_text(self) -> String {
        self.text.into_string()
    }

    /// The id as JSON text (`null` when absent).
    pub fn id(&self) -> &str {
        self.id.as_ref().map_or("null", |r| &self.text[r.clone()])
    }

    pub fn method(&self) -> &str {
        match &self.method {
            Some(Text::Span(r)) => &self.text[r.clone()],
            Some(Text::Owned(s)) => s,
            None => "",
        }
    }

    /// `params` as JSON text, if present.
    pub fn params(&self) -> Option<&str> {
        self.params.as_ref().map(|r| &self.text[r.clone()])
    }

    /// `result` as JSON text, if this is a success response.
    pub fn result(&self) -> Option<&str> {
        self.result.as_ref().map(|r| &self.text[r.clone()])
    }

    /// `error` as JSON text, if this is an error response.
    pub fn error(&self) -> Option<&str> {
        self.error.as_ref().map(|r| &self.text[r.clone()])
    }

    /// The id as an unsigned integer, for ids this process allocated itself.
    pub fn id_u64(&self) -> Option<u64> {
        self.id().parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> Message {
        Message::parse(s.into()).unwrap()
    }

    #[test]
    fn request_fields_are_verbatim_spans() {
        let m = one(
            r#"{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"name":"x","arguments":{"a":1.0}},"extra":true}"#,
        );
        assert_eq!(m.kind(), Kind::Request);
        assert_eq!(m.id(), "12345678901234567890");
        assert_eq!(m.method(), "tools/call");
        assert_eq!(m.params(), Some(r#"{"name":"x","arguments":{"a":1.0}}"#));
    }

    #[test]
    fn kinds_and_escaped_methods() {
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","method":"notifications\/initialized"}"#).method(),
            "notifications/initialized"
        );
        assert_eq!(
            one(r#"{"jsonrpc":"2.0","method":"x"}"#).kind(),
            Kind::Notification
        );
        let r = one(r#"{"jsonrpc":"2.0","id":"a","result":{"k":[1]}}"#);
        assert_eq!(
            (r.kind(), r.id(), r.result()),
            (Kind::Response, "\"a\"", Some(r#"{"k":[1]}"#))
        );
        let e = one(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#);
        assert_eq!(
            (e.kind(), e.id(), e.error().is_some()),
            (Kind::Response, "null", true)
        );
        assert!(matches!(
            Message::parse(r#"{"id":1}"#.into()),
            Err(ParseError::NotJsonRpc)
        ));
        assert!(matches!(
            Message::parse("[1".into()),
            Err(ParseError::NotJson(_))
        ));
    }

    #[test]
    fn valid_json_that_is_not_a_message_is_an_invalid_request() {
        for (text, want) in [
            (r#"{"id":1,"method":"a","id":2}"#, "`id` appears twice"),
            (r#"{"id":1,"method":7}"#, "`method` is not a string"),
            // An array is not an object, whatever its elements would line up with.
            (r#"[1,"ping"]"#, "not JSON: expected an object at byte 0"),
        ] {
            let e = Message::parse(text.into()).unwrap_err();
            assert_eq!(e.to_string(), want, "{text}");
        }
        let e = Message::parse(r#"{"id":1,"method":"a","id":2}"#.into()).unwrap_err();
        assert_eq!(e.code(), crate::jsonrpc::code::INVALID_REQUEST);
        let e = Message::parse(r#"{"id":1,"method":"a""#.into()).unwrap_err();
        assert_eq!(e.code(), crate::jsonrpc::code::PARSE_ERROR);
        // `null` members count as absent, as before: a reply to an unreadable request.
        let m = one(r#"{"jsonrpc":"2.0","id":null,"method":"n","params":null}"#);
        assert_eq!((m.kind(), m.params()), (Kind::Notification, None));
    }

    #[test]
    fn batches_split_into_messages() {
        let out: Vec<_> =
            parse_frame(br#" [{"jsonrpc":"2.0","id":1,"method":"ping"},{"bad":1}]"#.to_vec())
                .unwrap()
                .collect();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].as_ref().unwrap().method(), "ping");
        assert!(out[1].is_err());
        assert!(matches!(
            parse_frame(b"[]".to_vec()),
            Err(ParseError::EmptyBatch)
        ));
        assert!(matches!(
            parse_frame(vec![0xff, b'{']),
            Err(ParseError::NotUtf8)
        ));
    }

    #[test]
    fn builders_produce_parseable_lines() {
        let line = crate::jsonrpc::request("7", "a\"b", Some("{}"));
        let m = one(&line);
        assert_eq!((m.id(), m.method(), m.params()), ("7", "a\"b", Some("{}")));
        let e = one(&crate::jsonrpc::error("\"x\"", -32601, "nope", Some("[1]")));
        assert_eq!(
            e.error(),
            Some(r#"{"code":-32601,"message":"nope","data":[1]}"#)
        );
    }
}
