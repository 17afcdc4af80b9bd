//! `keep(name, value)` / `kept(name)`: values one client session's programs hand each other
//! without passing them through the model, bounded in count and size, gone with the session.

use super::protocol::Answer;
use serde_json::Value;
use std::collections::BTreeMap;

/// One session's kept values, with the size of each as JSON text.
#[derive(Debug, Default)]
pub struct Kept {
    values: BTreeMap<String, (Value, usize)>,
    bytes: usize,
}

impl Kept {
    /// Keeps `value` (`size` bytes as the worker sent it: measured there, so a big value is
    /// not written out again here) under `name`, replacing what was there, if it fits within
    /// `max_values` values of `max_bytes` in all; None frees the name.
    pub fn keep(
        &mut self,
        name: String,
        value: Value,
        size: usize,
        max_values: usize,
        max_bytes: usize,
    ) -> Answer {
        let replaced = self.values.get(&name).map_or(0, |(_, s)| *s);
        if value.is_null() {
            self.values.remove(&name);
            self.bytes -= replaced;
            return Answer::Ok(Value::Null);
        }
        let count = self.values.len() + usize::from(!self.values.contains_key(&name));
        if count > max_values {
            return Answer::Error(format!(
                "keep: this session already keeps {max_values} values (openpact.codeMode.keepValues); keep(name, None) frees one"
            ));
        }
        let bytes = self.bytes - replaced + size;
        if bytes > max_bytes {
            return Answer::Error(format!(
                "keep: {name} (about {size} bytes as JSON) would take this session's kept values over {max_bytes} bytes (openpact.codeMode.keepBytes)"
            ));
        }
        self.values.insert(name, (value, size));
        self.bytes = bytes;
        Answer::Ok(Value::Null)
    }

    /// The value kept under `name`, or None.
    pub fn get(&self, name: &str) -> Answer {
        Answer::Ok(
            self.values
                .get(name)
                .map_or(Value::Null, |(v, _)| v.clone()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::Kept;
    use crate::code::protocol::Answer;
    use serde_json::json;

    #[test]
    fn kept_values_are_bounded_in_count_and_bytes_and_none_frees_one() {
        let mut k = Kept::default();
        assert_eq!(
            k.keep(
                "a".into(),
                json!([1, 2]),
                json!([1, 2]).to_string().len(),
                2,
                20
            ),
            Answer::Ok(json!(null))
        );
        assert_eq!(k.get("a"), Answer::Ok(json!([1, 2])));
        assert_eq!(
            k.keep("b".into(), json!("x"), json!("x").to_string().len(), 2, 20),
            Answer::Ok(json!(null))
        );
        let Answer::Error(e) = k.keep("c".into(), json!(1), json!(1).to_string().len(), 2, 20)
        else {
            panic!("a third value fits in two")
        };
        assert!(e.contains("keepValues"), "{e}");
        // Replacing one is not one more.
        assert_eq!(
            k.keep("a".into(), json!(3), json!(3).to_string().len(), 2, 20),
            Answer::Ok(json!(null))
        );
        let Answer::Error(e) = k.keep(
            "a".into(),
            json!("a long text of many bytes"),
            json!("a long text of many bytes").to_string().len(),
            2,
            20,
        ) else {
            panic!("over the byte limit")
        };
        assert!(e.contains("keepBytes"), "{e}");
        assert_eq!(
            k.get("a"),
            Answer::Ok(json!(3)),
            "a refused keep changes nothing"
        );
        assert_eq!(
            k.keep(
                "a".into(),
                json!(null),
                json!(null).to_string().len(),
                2,
                20
            ),
            Answer::Ok(json!(null))
        );
        assert_eq!(k.get("a"), Answer::Ok(json!(null)));
        assert_eq!(
            k.keep("c".into(), json!(1), json!(1).to_string().len(), 2, 20),
            Answer::Ok(json!(null))
        );
    }
}
