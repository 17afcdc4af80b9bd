//! Portable tool names: always `^[A-Za-z0-9_-]{1,64}$`, the same for the same pair, and
//! distinct pairs rarely alike (a changed name carries a hash of the original pair).
#![no_main]

use libfuzzer_sys::fuzz_target;
use openpact::hub::names::{PORTABLE_MAX, portable};

fuzz_target!(|input: (&str, &str, &str)| {
    let (prefix, tool, other) = input;
    let name = portable(prefix, tool);
    assert!(!name.is_empty() && name.len() <= PORTABLE_MAX, "{name:?}");
    assert!(
        name.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'),
        "{name:?}"
    );
    assert_eq!(portable(prefix, tool), name, "stable");
    // Two tools of one server that differ only in characters the portable form replaces
    // must still get two names.
    if other != tool && portable(prefix, other) == name {
        // An empty name is not plain: like any name the portable form must change, it
        // becomes its hash (which a crafted plain name can equal, as any hashed form can).
        let plain = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        assert!(
            !(plain(tool) && plain(other)) || prefix.len() + tool.len() + 2 > PORTABLE_MAX,
            "{prefix:?}/{tool:?} and {other:?} collide as {name:?}"
        );
    }
});
