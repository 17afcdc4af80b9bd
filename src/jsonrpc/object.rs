//! An ordered view of a JSON object's members as raw JSON text, for rewriting one or two keys
//! (a tool's `name`, a request's `name` or `_meta`) without re-encoding the rest.

use super::scan::{self, ScanError};
use memchr::memmem::Finder;
use std::borrow::Cow;
use std::sync::LazyLock;

/// A quick test for whether an object's text might have a given member, so that the common
/// text without it is not parsed at all. Build it once (a `static`): building a searcher costs
/// more than running it over a typical message.
pub struct MemberProbe {
    quoted: Finder<'static>,
}

impl MemberProbe {
    pub fn new(name: &str) -> Self {
        MemberProbe {
            quoted: Finder::new(format!("\"{name}\"").as_bytes()).into_owned(),
        }
    }

    /// False only if `text` cannot have the member: its name is not spelled out anywhere, and
    /// there is no `\u` escape that could spell it another way.
    pub fn may_have(&self, text: &str) -> bool {
        static ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));
        let bytes = text.as_bytes();
        self.quoted.find(bytes).is_some() || ESCAPE.find(bytes).is_some()
    }
}

/// Members in document order; values are untouched JSON text.
#[derive(Debug, Default)]
pub struct RawObject<'a> {
    members: Vec<(Cow<'a, str>, &'a str)>,
    /// The text it was parsed from, where one value can be replaced by splicing instead of
    /// re-encoding every member.
    source: &'a str,
}

impl<'a> RawObject<'a> {
    /// Parses `text`, which must be a JSON object.
    pub fn parse(text: &'a str) -> Result<Self, ScanError> {
        let mut members = Vec::new();
        scan::object(text, |k, v| {
            members.push((k.text()?, v));
            Ok::<(), ScanError>(())
        })?;
        Ok(RawObject {
            members,
            source: text,
        })
    }

    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.members.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// A string member's decoded value, borrowed from the text unless it has escapes.
    pub fn get_str(&self, key: &str) -> Option<Cow<'a, str>> {
        self.get(key).and_then(scan::string)
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|(k, _)| k.as_ref())
    }

    /// The object with `key` set to the JSON text `value` (replaced in place, or appended).
    /// A member present once in a parsed text is spliced, leaving every other byte as it was.
    pub fn with(&self, key: &str, value: &str) -> String {
        self.splice(key, value)
            .unwrap_or_else(|| self.rewrite(&[(key, Some(value))]))
    }

    /// `source` with the value of `key` swapped for `value`, when `key` occurs exactly once.
    fn splice(&self, key: &str, value: &str) -> Option<String> {
        let source = self.source;
        let mut found = self.members.iter().filter(|(k, _)| k == key);
        let (_, old) = found.next()?;
        if found.next().is_some() {
            return None;
        }
        // The raw value borrows from `source`: its offset is where it sits in the text.
        let start = (old.as_ptr() as usize).checked_sub(source.as_ptr() as usize)?;
        let end = start + old.len();
        if source.get(start..end) != Some(old) {
            return None;
        }
        let mut out = String::with_capacity(source.len() - old.len() + value.len());
        out.push_str(&source[..start]);
        out.push_str(value);
        out.push_str(&source[end..]);
        Some(out)
    }

    /// Re-serialises applying edits: `Some(json)` sets a member, `None` removes it.
    pub fn rewrite(&self, edits: &[(&str, Option<&str>)]) -> String {
        let mut out = String::with_capacity(self.len_hint() + 32);
        out.push('{');
        let mut first = true;
        let mut push = |out: &mut String, k: &str, v: &str| {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&crate::jsonrpc::quote(k));
            out.push(':');
            out.push_str(v);
        };
        for (k, v) in &self.members {
            match edits.iter().find(|(ek, _)| ek == k) {
                Some((_, Some(nv))) => push(&mut out, k, nv),
                Some((_, None)) => {}
                None => push(&mut out, k, v),
            }
        }
        for (ek, ev) in edits {
            if let Some(nv) = ev
                && !self.members.iter().any(|(k, _)| k == ek)
            {
                push(&mut out, ek, nv);
            }
        }
        out.push('}');
        out
    }

    fn len_hint(&self) -> usize {
        self.members
            .iter()
            .map(|(k, v)| k.len() + v.len() + 4)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_keeps_order_and_unknown_members() {
        let o = RawObject::parse(
            r#"{"name":"a","execution":{"taskSupport":"optional"},"x-vendor":[1, 2]}"#,
        )
        .unwrap();
        assert_eq!(o.get_str("name").as_deref(), Some("a"));
        assert_eq!(
            o.with("name", "\"s:a\""),
            r#"{"name":"s:a","execution":{"taskSupport":"optional"},"x-vendor":[1, 2]}"#
        );
        assert_eq!(
            o.rewrite(&[("execution", None), ("new", Some("1"))]),
            r#"{"name":"a","x-vendor":[1, 2],"new":1}"#
        );
        assert!(RawObject::parse("[1]").is_err());
    }

    #[test]
    fn with_splices_one_value_and_keeps_every_other_byte() {
        let text = r#"{ "arguments": {"a" : 1}, "name" : "x\"y", "z": [] }"#;
        let o = RawObject::parse(text).unwrap();
        assert_eq!(
            o.with("name", "\"s:x\""),
            r#"{ "arguments": {"a" : 1}, "name" : "s:x", "z": [] }"#
        );
        // Absent: appended by re-encoding.
        assert_eq!(
            o.with("new", "2"),
            r#"{"arguments":{"a" : 1},"name":"x\"y","z":[],"new":2}"#
        );
        // Present twice: every occurrence set, as a re-encoding does.
        let twice = RawObject::parse(r#"{"name":"a","name":"b"}"#).unwrap();
        assert_eq!(twice.with("name", "\"c\""), r#"{"name":"c","name":"c"}"#);
    }

    #[test]
    fn member_probe_rules_out_only_text_that_cannot_have_the_member() {
        let probe = MemberProbe::new("isError");
        assert!(probe.may_have(r#"{"content":[],"isError":true}"#));
        // The key spelled with an escape: the probe cannot tell, so it must say maybe.
        assert!(probe.may_have(r#"{"is\u0045rror":true}"#));
        assert!(!probe.may_have(r#"{"content":[{"type":"text","text":"no isError here"}]}"#));
        assert!(!probe.may_have(r#"{"content":[]}"#));
    }
}
