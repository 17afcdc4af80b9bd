//! Tool names on the wire: `server:tool` (qualified) or `server__tool` (portable, always
//! matching `^[A-Za-z0-9_-]{1,64}$`, shortened with a stable hash suffix when needed).

/// The longest portable name; several model APIs reject anything longer.
pub const PORTABLE_MAX: usize = 64;

/// `prefix:tool`, or the bare tool name when the prefix is empty.
pub fn qualified(prefix: &str, tool: &str) -> String {
    if prefix.is_empty() {
        tool.to_string()
    } else {
        format!("{prefix}:{tool}")
    }
}

/// `prefix__tool` restricted to `[A-Za-z0-9_-]`, at most 64 characters. When characters had
/// to be replaced or the name shortened, a hash of the original pair is appended so that
/// distinct tools keep distinct names, the same on every run and every machine.
pub fn portable(prefix: &str, tool: &str) -> String {
    // One pass and one allocation: every tool of every server gets this alias.
    let mut name = String::with_capacity(prefix.len() + 2 + tool.len());
    let mut changed = false;
    let mut push = |name: &mut String, part: &str| {
        for c in part.chars() {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                name.push(c);
            } else {
                changed = true;
                name.push('_');
            }
        }
    };
    push(&mut name, prefix);
    if !prefix.is_empty() {
        name.push_str("__");
    }
    push(&mut name, tool);
    if changed || name.is_empty() || name.len() > PORTABLE_MAX {
        let suffix = format!(
            "_{:08x}",
            fnv1a(format!("{prefix}\u{0}{tool}").as_bytes()) as u32
        );
        name.truncate(PORTABLE_MAX - suffix.len());
        name.push_str(&suffix);
    }
    name
}

/// 64-bit FNV-1a: tiny, and unlike std's hasher its output never changes between releases.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(n: &str) -> bool {
        !n.is_empty()
            && n.len() <= PORTABLE_MAX
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_stay_readable() {
        assert_eq!(portable("github", "create_issue"), "github__create_issue");
        assert_eq!(portable("", "echo"), "echo");
        assert_eq!(qualified("fs", "read"), "fs:read");
        assert_eq!(qualified("", "read"), "read");
    }

    #[test]
    fn odd_and_long_names_are_valid_distinct_and_stable() {
        let a = portable("my.server", "get-sum");
        let b = portable("my_server", "get-sum");
        assert!(valid(&a) && valid(&b));
        assert_ne!(a, b);
        assert_eq!(a, portable("my.server", "get-sum"));
        let long = "x".repeat(100);
        let l1 = portable("s", &long);
        let l2 = portable("s", &format!("{long}y"));
        assert!(valid(&l1) && valid(&l2) && l1 != l2);
        assert_eq!(l1.len(), PORTABLE_MAX);
        assert!(valid(&portable("ü", "工具")));
        assert_eq!(fnv1a(b"a"), 0xaf63dc4c8601ec8c);
    }

    #[test]
    fn many_random_names_never_collide_or_break_the_pattern() {
        let mut seen = std::collections::HashMap::new();
        let mut x: u64 = 42;
        for _ in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let alphabet = ['a', 'B', '1', '_', '-', '.', ':', '/', ' ', 'é'];
            let len = (x >> 33) as usize % 80;
            let tool: String = (0..len)
                .map(|i| alphabet[((x >> (i % 50)) as usize + i) % alphabet.len()])
                .collect();
            let prefix = ["a", "a.b", "srv", ""][(x >> 7) as usize % 4];
            let n = portable(prefix, &tool);
            assert!(valid(&n), "{n:?}");
            if let Some(prev) = seen.insert(n.clone(), (prefix, tool.clone())) {
                assert_eq!(prev, (prefix, tool), "collision on {n}");
            }
        }
    }
}
