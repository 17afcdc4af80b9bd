//! Canonical JSON (the cache key and audit hash of arguments): idempotent, and blind to the
//! order of object members.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openpact::policy::canonical::{canonical, canonical_value};

fuzz_target!(|text: &str| {
    let once = canonical(text);
    assert_eq!(canonical(&once), once, "canonical is idempotent");
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        // The same value with every object's members reversed.
        fn reversed(v: &serde_json::Value) -> serde_json::Value {
            match v {
                serde_json::Value::Object(m) => serde_json::Value::Object(
                    m.iter()
                        .rev()
                        .map(|(k, v)| (k.clone(), reversed(v)))
                        .collect(),
                ),
                serde_json::Value::Array(a) => {
                    serde_json::Value::Array(a.iter().map(reversed).collect())
                }
                other => other.clone(),
            }
        }
        assert_eq!(
            canonical_value(&v),
            canonical_value(&reversed(&v)),
            "member order changed the canonical form"
        );
    }
});
