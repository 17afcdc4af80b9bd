//! Permission rules compiled once: which of `deny`, `ask`, `allow` (in that precedence) a
//! qualified name matches, or none.

use crate::FastMap;
use crate::config::{Permissions, Rule};
use globset::{Glob, GlobSet, GlobSetBuilder};
use std::sync::{Mutex, PoisonError};

/// Answers remembered per name: rules never change while the process runs, and the same few
/// tools are called over and over, so a look-up replaces matching every glob on every call.
/// Bounded, since resource targets (`server:<uri>`) can be endless.
#[derive(Debug, Default)]
struct Memo<V> {
    answers: Mutex<FastMap<String, V>>,
}

const MEMO_LIMIT: usize = 4096;

impl<V: Copy> Memo<V> {
    fn get_or(&self, name: &str, compute: impl FnOnce() -> V) -> V {
        let lock = || self.answers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(v) = lock().get(name) {
            return *v;
        }
        let v = compute();
        let mut answers = lock();
        if answers.len() < MEMO_LIMIT {
            answers.insert(name.to_string(), v);
        }
        v
    }
}

#[derive(Debug)]
pub struct RuleSet {
    /// In precedence order: deny, ask, allow.
    lists: [(Rule, Globs); 3],
    memo: Memo<Option<Rule>>,
}

/// One list of rules: the compiled set, and the globs as written for messages.
#[derive(Debug)]
pub(super) struct Globs {
    pub(super) set: GlobSet,
    pub(super) written: Vec<String>,
}

pub(super) fn compile(globs: &[String]) -> Globs {
    let mut b = GlobSetBuilder::new();
    let mut written = Vec::new();
    for g in globs {
        // The config layer already rejected invalid globs; skipping keeps this total.
        if let Ok(glob) = Glob::new(g) {
            b.add(glob);
            written.push(g.clone());
        }
    }
    Globs {
        set: b.build().unwrap_or_else(|_| GlobSet::empty()),
        written,
    }
}

/// The rule that decides a name, and the first glob of its list that matches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub rule: Rule,
    pub glob: String,
}

impl Matched {
    /// Whether a remembered decision says what this rule already decides (an `ask` rule
    /// agrees with none: it asks whatever was remembered).
    pub fn agrees_with(&self, decision: crate::policy::decisions::Remember) -> bool {
        use crate::policy::decisions::Remember;
        matches!(
            (self.rule, decision),
            (Rule::Allow, Remember::Allow) | (Rule::Deny, Remember::Deny)
        )
    }

    /// `"fs:read_*" in openpact.permissions.allow`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "the rule \"{}\" in openpact.permissions.{}",
            self.glob,
            self.rule.label()
        )
    }
}

impl RuleSet {
    pub fn new(p: &Permissions) -> RuleSet {
        RuleSet {
            lists: [
                (Rule::Deny, compile(&p.deny)),
                (Rule::Ask, compile(&p.ask)),
                (Rule::Allow, compile(&p.allow)),
            ],
            memo: Memo::default(),
        }
    }

    /// The strongest rule matching `qualified`: deny beats ask beats allow.
    pub fn matching(&self, qualified: &str) -> Option<Rule> {
        self.memo.get_or(qualified, || {
            self.lists
                .iter()
                .find(|(_, globs)| globs.set.is_match(qualified))
                .map(|(rule, _)| *rule)
        })
    }

    /// Which rule decides `qualified` and why (for messages; not memoised).
    pub fn explain(&self, qualified: &str) -> Option<Matched> {
        self.lists.iter().find_map(|(rule, globs)| {
            let first = globs.set.matches(qualified).into_iter().min()?;
            Some(Matched {
                rule: *rule,
                glob: globs.written.get(first)?.clone(),
            })
        })
    }
}

/// First matching glob of an ordered list (cache rules, rate limits).
#[derive(Debug)]
pub struct FirstMatch<T> {
    globs: Vec<(globset::GlobMatcher, T)>,
    /// Index of the first matching glob.
    memo: Memo<Option<usize>>,
}

impl<T: Clone> FirstMatch<T> {
    pub fn new(entries: &[(String, T)]) -> Self {
        let globs = entries
            .iter()
            .filter_map(|(g, v)| Glob::new(g).ok().map(|g| (g.compile_matcher(), v.clone())))
            .collect();
        FirstMatch {
            globs,
            memo: Memo::default(),
        }
    }

    pub fn find(&self, name: &str) -> Option<&T> {
        if self.globs.is_empty() {
            return None;
        }
        let at = self.memo.get_or(name, || {
            self.globs.iter().position(|(g, _)| g.is_match(name))
        });
        at.and_then(|i| self.globs.get(i)).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explain_names_the_deciding_glob() {
        let p = Permissions {
            allow: vec!["fs:*".into()],
            ask: vec!["fs:write_*".into(), "fs:write_file".into()],
            ..Permissions::default()
        };
        let rules = RuleSet::new(&p);
        let m = rules.explain("fs:write_file").unwrap();
        assert_eq!((m.rule, m.glob.as_str()), (Rule::Ask, "fs:write_*"));
        assert_eq!(
            m.describe(),
            "the rule \"fs:write_*\" in openpact.permissions.ask"
        );
        assert_eq!(rules.explain("fs:read").unwrap().rule, Rule::Allow);
        assert_eq!(rules.explain("time:now"), None);
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        let p = Permissions {
            allow: vec!["github:*".into(), "time:*".into()],
            ask: vec!["github:create_*".into()],
            deny: vec!["*:delete_*".into()],
            ..Permissions::default()
        };
        let r = RuleSet::new(&p);
        assert_eq!(r.matching("time:now"), Some(Rule::Allow));
        assert_eq!(r.matching("github:list"), Some(Rule::Allow));
        assert_eq!(r.matching("github:create_issue"), Some(Rule::Ask));
        assert_eq!(r.matching("github:delete_repo"), Some(Rule::Deny));
        assert_eq!(r.matching("fs:read"), None);
        // Asked again: the remembered answers are the same.
        assert_eq!(r.matching("github:delete_repo"), Some(Rule::Deny));
        assert_eq!(r.matching("fs:read"), None);
        let f = FirstMatch::new(&[("a:*".to_string(), 1), ("*".to_string(), 2)]);
        assert_eq!(f.find("a:x"), Some(&1));
        assert_eq!(f.find("b:x"), Some(&2));
        assert_eq!(f.find("a:x"), Some(&1));
    }
}
