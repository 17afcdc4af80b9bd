//! Data-flow labels and the guard across calls: which tools read the user's data
//! (`private`), take in content others wrote (`untrusted`) or can send data out (`egress`) —
//! from `openpact.flows`, the built-ins' defaults and MCP annotations — and the rule that an
//! egress call needs a decision of its own once a session has called both of the others.

use super::Target;
use super::rules::{Globs, compile};
use crate::config::{FlowGuard, Flows};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    /// Reads the user's data: files, mail, notes, databases, memory.
    Private,
    /// Takes in content others wrote: web pages, issue bodies, chat messages.
    Untrusted,
    /// Can send data out: posting, messaging, creating issues, HTTP writes.
    Egress,
}

impl Label {
    pub const ALL: [Label; 3] = [Label::Private, Label::Untrusted, Label::Egress];

    pub fn name(self) -> &'static str {
        match self {
            Label::Private => "private",
            Label::Untrusted => "untrusted",
            Label::Egress => "egress",
        }
    }

    const fn bit(self) -> u8 {
        match self {
            Label::Private => 1,
            Label::Untrusted => 2,
            Label::Egress => 4,
        }
    }
}

/// A set of labels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks(u8);

impl Marks {
    pub const NONE: Marks = Marks(0);

    pub const fn of(labels: &[Label]) -> Marks {
        let mut bits = 0;
        let mut i = 0;
        while i < labels.len() {
            bits |= labels[i].bit();
            i += 1;
        }
        Marks(bits)
    }

    pub fn has(self, label: Label) -> bool {
        self.0 & label.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn with(self, label: Label) -> Marks {
        Marks(self.0 | label.bit())
    }

    fn union(self, other: Marks) -> Marks {
        Marks(self.0 | other.0)
    }

    pub fn iter(self) -> impl Iterator<Item = Label> {
        Label::ALL.into_iter().filter(move |l| self.has(*l))
    }
}

/// Where a label came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `openpact.flows.<label>`.
    Config,
    /// [`BUILTINS`].
    Builtin,
    /// The tool's `openWorldHint` (and `readOnlyHint`).
    Annotations,
}

impl Origin {
    pub fn name(self) -> &'static str {
        match self {
            Origin::Config => "config",
            Origin::Builtin => "built-in default",
            Origin::Annotations => "annotations",
        }
    }
}

/// A tool's labels, kept by where each came from so that they can be shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Labels {
    pub config: Marks,
    pub builtin: Marks,
    pub annotations: Marks,
}

impl Labels {
    pub fn all(self) -> Marks {
        self.config.union(self.builtin).union(self.annotations)
    }

    pub fn has(self, label: Label) -> bool {
        self.all().has(label)
    }

    /// Each label the tool has, with every source that gives it.
    pub fn sources(self) -> Vec<(Label, Vec<Origin>)> {
        self.all()
            .iter()
            .map(|l| {
                let from = [
                    (self.config, Origin::Config),
                    (self.builtin, Origin::Builtin),
                    (self.annotations, Origin::Annotations),
                ]
                .into_iter()
                .filter(|(m, _)| m.has(l))
                .map(|(_, o)| o)
                .collect();
                (l, from)
            })
            .collect()
    }

    /// The labels a tool has whatever the config says: the built-ins' defaults for a tool
    /// served in process (`builtin`: its bare name) that [`BUILTINS`] lists, else what its
    /// annotations say. A listed built-in's own annotations are not read: the table says
    /// more precisely what it does (`chat_send` posts, yet takes nothing in).
    pub fn intrinsic(builtin: Option<&str>, read_only: bool, open_world: bool) -> Labels {
        match builtin.and_then(|name| BUILTINS.iter().find(|(n, _)| *n == name)) {
            Some((_, marks)) => Labels {
                builtin: *marks,
                ..Labels::default()
            },
            None => Labels {
                annotations: from_annotations(read_only, open_world),
                ..Labels::default()
            },
        }
    }
}

const PRIVATE: Marks = Marks::of(&[Label::Private]);
const UNTRUSTED: Marks = Marks::of(&[Label::Untrusted]);
const EGRESS: Marks = Marks::of(&[Label::Egress]);
const FETCHES_AND_SENDS: Marks = Marks::of(&[Label::Untrusted, Label::Egress]);

/// The built-in tools' labels (`src/builtins/`). Unlisted ones have none.
pub const BUILTINS: &[(&str, Marks)] = &[
    // The workspace and its memory files, the vault and the calendars are the user's own.
    ("workspace_read", PRIVATE),
    ("workspace_list", PRIVATE),
    ("memory_read", PRIVATE),
    ("vault_read", PRIVATE),
    ("vault_list", PRIVATE),
    ("vault_search", PRIVATE),
    ("calendar_read", PRIVATE),
    // Pages and issue bodies are written by anyone.
    ("web_fetch", UNTRUSTED),
    ("github_list_issues", UNTRUSTED),
    // Posted where others read it.
    ("chat_send", EGRESS),
    ("github_create_issue", EGRESS),
    // With `autoSync`, a write is pushed to the vault's git remote.
    ("vault_write", EGRESS),
    // Scripts have `http.get` and `http.post`.
    ("script_run", FETCHES_AND_SENDS),
    ("script_exec", FETCHES_AND_SENDS),
];

/// What MCP annotations say enough about: a tool that reaches the open world takes in what
/// others wrote; one that also may change things there can send data out. Without
/// `openWorldHint: true` they say nothing about where data goes.
pub fn from_annotations(read_only: bool, open_world: bool) -> Marks {
    match (open_world, read_only) {
        (false, _) => Marks::NONE,
        (true, true) => UNTRUSTED,
        (true, false) => FETCHES_AND_SENDS,
    }
}

/// The private and the untrusted call that came first in a session: why an egress call is
/// guarded (shown in its prompt or denial, and in its audit record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trigger {
    pub private: Arc<str>,
    pub untrusted: Arc<str>,
}

impl Trigger {
    /// Why the call of `qualified` is guarded, as a clause.
    pub fn reason(&self, qualified: &str) -> String {
        format!(
            "this session already called {} (reads private data) and {} (takes in untrusted content), and {qualified} can send data out",
            self.private, self.untrusted
        )
    }
}

/// What one session has called so far, as far as the guard cares. Reading it is one atomic
/// load; the lock is taken only the first time each label is seen.
#[derive(Debug, Default)]
pub struct Seen {
    bits: AtomicU8,
    first: Mutex<First>,
}

#[derive(Debug, Default)]
struct First {
    private: Option<Arc<str>>,
    untrusted: Option<Arc<str>>,
}

const BOTH: u8 = Label::Private.bit() | Label::Untrusted.bit();

impl Seen {
    fn both(&self) -> bool {
        self.bits.load(Ordering::Acquire) & BOTH == BOTH
    }

    /// The calls that make an egress call guarded, once both have been made.
    pub fn trigger(&self) -> Option<Trigger> {
        if !self.both() {
            return None;
        }
        let first = self.first.lock().unwrap_or_else(PoisonError::into_inner);
        Some(Trigger {
            private: first.private.clone()?,
            untrusted: first.untrusted.clone()?,
        })
    }

    fn note(&self, qualified: &Arc<str>, marks: Marks) {
        let new = marks.0 & BOTH & !self.bits.load(Ordering::Acquire);
        if new == 0 {
            return;
        }
        let mut first = self.first.lock().unwrap_or_else(PoisonError::into_inner);
        if marks.has(Label::Private) && first.private.is_none() {
            first.private = Some(qualified.clone());
        }
        if marks.has(Label::Untrusted) && first.untrusted.is_none() {
            first.untrusted = Some(qualified.clone());
        }
        // Set under the lock, after the names: whoever sees the bits finds the names.
        self.bits.fetch_or(new, Ordering::Release);
    }
}

/// `openpact.flows` compiled: the guard's setting and the label globs.
#[derive(Debug)]
pub struct Rules {
    guard: FlowGuard,
    /// Per label, its globs; `None` when the config gives that label none.
    globs: [(Label, Option<Globs>); 3],
}

impl Rules {
    pub fn new(f: &Flows) -> Rules {
        let list = |globs: &[String]| (!globs.is_empty()).then(|| compile(globs));
        Rules {
            guard: f.guard,
            globs: [
                (Label::Private, list(&f.private)),
                (Label::Untrusted, list(&f.untrusted)),
                (Label::Egress, list(&f.egress)),
            ],
        }
    }

    pub fn guard(&self) -> FlowGuard {
        self.guard
    }

    /// A tool's labels: `intrinsic` (see [`Labels::intrinsic`]) and the config's.
    pub fn labels(&self, qualified: &str, intrinsic: Labels) -> Labels {
        let mut config = Marks::NONE;
        for (label, globs) in &self.globs {
            if globs.as_ref().is_some_and(|g| g.set.is_match(qualified)) {
                config = config.with(*label);
            }
        }
        Labels {
            config,
            ..intrinsic
        }
    }

    /// `target` as the permission stage must see it: marked guarded when it can send data
    /// out and the session has called both a private and an untrusted tool. With the guard
    /// off, or before the session has seen both, this is a field read and an atomic load.
    pub fn check<'t, 'a>(&self, target: &'t Target<'a>, seen: &Seen) -> Cow<'t, Target<'a>> {
        if self.guard == FlowGuard::Off || !seen.both() {
            return Cow::Borrowed(target);
        }
        if !self
            .labels(target.qualified, target.labels)
            .has(Label::Egress)
        {
            return Cow::Borrowed(target);
        }
        match seen.trigger() {
            Some(trigger) => Cow::Owned(Target {
                guard: Some(trigger),
                ..target.clone()
            }),
            None => Cow::Borrowed(target),
        }
    }

    /// Notes a call admitted: its private or untrusted label, the first time the session
    /// meets it.
    pub fn saw(&self, seen: &Seen, qualified: &Arc<str>, intrinsic: Labels) {
        if self.guard == FlowGuard::Off || seen.both() {
            return;
        }
        seen.note(qualified, self.labels(qualified, intrinsic).all());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(m: Marks) -> Vec<&'static str> {
        m.iter().map(Label::name).collect()
    }

    trait Describe {
        fn describe(self) -> String;
    }

    impl Describe for Labels {
        /// `private (config), untrusted (annotations)`.
        fn describe(self) -> String {
            self.sources()
                .into_iter()
                .map(|(l, from)| {
                    let from: Vec<&str> = from.iter().map(|o| o.name()).collect();
                    format!("{} ({})", l.name(), from.join(", "))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    }

    #[test]
    fn annotations_label_only_what_they_say() {
        assert_eq!(names(from_annotations(false, false)), Vec::<&str>::new());
        assert_eq!(names(from_annotations(true, false)), Vec::<&str>::new());
        assert_eq!(names(from_annotations(true, true)), ["untrusted"]);
        assert_eq!(
            names(from_annotations(false, true)),
            ["untrusted", "egress"]
        );
        // A server's tool named like a built-in is not labelled by its name.
        let l = Labels::intrinsic(None, false, false);
        assert!(l.all().is_empty());
        assert_eq!(
            Labels::intrinsic(None, true, true).describe(),
            "untrusted (annotations)"
        );
    }

    #[test]
    fn builtins_have_their_table_labels_whatever_their_annotations() {
        let l = |name| names(Labels::intrinsic(Some(name), false, true).all());
        assert_eq!(l("workspace_read"), ["private"]);
        assert_eq!(l("vault_search"), ["private"]);
        assert_eq!(l("web_fetch"), ["untrusted"]);
        assert_eq!(l("github_list_issues"), ["untrusted"]);
        assert_eq!(l("chat_send"), ["egress"]);
        assert_eq!(l("github_create_issue"), ["egress"]);
        assert_eq!(l("script_exec"), ["untrusted", "egress"]);
        // Other tools served in process (meta-tools, a host program's) by their annotations.
        let other = |name, read_only, open_world| {
            names(Labels::intrinsic(Some(name), read_only, open_world).all())
        };
        assert_eq!(other("workspace_write", false, false), Vec::<&str>::new());
        assert_eq!(other("search_tools", true, false), Vec::<&str>::new());
        assert_eq!(other("host_post", false, true), ["untrusted", "egress"]);
        // Every name in the table is one a built-in defines (a renamed tool would lose its
        // labels silently).
        let sources = [
            include_str!("../builtins/workspace.rs"),
            include_str!("../builtins/vault/mod.rs"),
            include_str!("../builtins/calendar/mod.rs"),
            include_str!("../builtins/web.rs"),
            include_str!("../builtins/github.rs"),
            include_str!("../builtins/chat.rs"),
            include_str!("../builtins/scripts.rs"),
        ];
        for (name, _) in BUILTINS {
            let quoted = format!("\"{name}\"");
            assert!(
                sources.iter().any(|s| s.contains(&quoted)),
                "{name} is no built-in tool"
            );
        }
    }

    #[test]
    fn config_globs_add_labels_and_say_so() {
        let rules = Rules::new(&Flows {
            private: vec!["fs:read_*".into()],
            egress: vec!["web_fetch".into(), "slack:*".into()],
            ..Flows::default()
        });
        let l = rules.labels(
            "web_fetch",
            Labels::intrinsic(Some("web_fetch"), true, true),
        );
        assert_eq!(names(l.all()), ["untrusted", "egress"]);
        assert_eq!(
            l.describe(),
            "untrusted (built-in default), egress (config)"
        );
        let l = rules.labels("fs:read_file", Labels::intrinsic(None, true, false));
        assert_eq!(l.describe(), "private (config)");
        assert_eq!(
            rules.labels("slack:post", Labels::default()).sources(),
            [(Label::Egress, vec![Origin::Config])]
        );
    }

    #[test]
    fn seen_keeps_the_first_private_and_untrusted_call() {
        let rules = Rules::new(&Flows {
            private: vec!["fx:read".into(), "fx:read2".into()],
            untrusted: vec!["fx:fetch".into()],
            ..Flows::default()
        });
        let seen = Seen::default();
        let none = Labels::default();
        rules.saw(&seen, &"fx:read".into(), none);
        assert_eq!(seen.trigger(), None);
        rules.saw(&seen, &"fx:read2".into(), none);
        rules.saw(&seen, &"fx:fetch".into(), none);
        assert_eq!(
            seen.trigger(),
            Some(Trigger {
                private: "fx:read".into(),
                untrusted: "fx:fetch".into()
            })
        );
        // With the guard off nothing is noted.
        let off = Rules::new(&Flows {
            guard: FlowGuard::Off,
            ..Flows::default()
        });
        let seen = Seen::default();
        off.saw(
            &seen,
            &"web_fetch".into(),
            Labels::intrinsic(Some("web_fetch"), true, true),
        );
        off.saw(
            &seen,
            &"vault_read".into(),
            Labels::intrinsic(Some("vault_read"), true, false),
        );
        assert_eq!(seen.trigger(), None);
    }
}
