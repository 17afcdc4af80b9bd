//! What each client sees of the catalogue, as written: tool globs, profiles
//! (`openpact.profiles`) and tool search (`openpact.toolSearch`). The hub builds the views.

/// Globs over names (tools; a sandbox's variables), compiled once; equal when their texts are.
#[derive(Debug, Clone, Default)]
pub struct Globs {
    pub patterns: Vec<String>,
    set: Option<globset::GlobSet>,
}

impl PartialEq for Globs {
    fn eq(&self, other: &Self) -> bool {
        self.patterns == other.patterns
    }
}

impl Globs {
    /// From globs the config already checked (an invalid one is skipped).
    pub fn new(patterns: Vec<String>) -> Globs {
        let set = (!patterns.is_empty())
            .then(|| {
                let mut b = globset::GlobSetBuilder::new();
                for g in &patterns {
                    if let Ok(glob) = globset::Glob::new(g) {
                        b.add(glob);
                    }
                }
                b.build().ok()
            })
            .flatten();
        Globs { patterns, set }
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    pub fn matches(&self, name: &str) -> bool {
        self.set.as_ref().is_some_and(|s| s.is_match(name))
    }
}

/// When a session's `tools/list` is replaced by the search meta-tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchMode {
    /// When the session's catalogue has more tools than the threshold.
    #[default]
    Auto,
    On,
    Off,
}

/// `openpact.toolSearch` (or a profile's own).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSearch {
    pub mode: SearchMode,
    /// `auto` turns search on above this many tools.
    pub threshold: usize,
    /// Tools listed even while search is on (qualified names, or a built-in's bare name).
    pub always_load: Globs,
    /// How many matches `search_tools` returns when the call names no limit.
    pub limit: usize,
}

impl ToolSearch {
    pub const DEFAULT_THRESHOLD: usize = 40;
    pub const DEFAULT_LIMIT: usize = 8;
    /// The most matches one search returns, whatever it asks for.
    pub const MAX_LIMIT: usize = 50;

    /// Whether search replaces the list of a view of `tools` tools.
    pub fn active(&self, tools: usize) -> bool {
        match self.mode {
            SearchMode::On => true,
            SearchMode::Off => false,
            SearchMode::Auto => tools > self.threshold,
        }
    }
}

impl Default for ToolSearch {
    fn default() -> Self {
        ToolSearch {
            mode: SearchMode::Auto,
            threshold: Self::DEFAULT_THRESHOLD,
            always_load: Globs::default(),
            limit: Self::DEFAULT_LIMIT,
        }
    }
}

/// Tool globs where a leading `!` excludes: a tool is in when some include matches it (or
/// there is none) and no exclude does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolSelection {
    pub include: Globs,
    pub exclude: Globs,
}

impl ToolSelection {
    pub fn from_patterns(patterns: &[String]) -> ToolSelection {
        let (exclude, include): (Vec<&String>, Vec<&String>) =
            patterns.iter().partition(|p| p.starts_with('!'));
        ToolSelection {
            include: Globs::new(include.into_iter().cloned().collect()),
            exclude: Globs::new(
                exclude
                    .into_iter()
                    .map(|p| p.trim_start_matches('!').to_string())
                    .collect(),
            ),
        }
    }

    pub fn allows(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.matches(name)) && !self.exclude.matches(name)
    }
}

/// `openpact.profiles.NAME`: one client's view of the catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    /// The servers in view (`None`: all of them).
    pub servers: Option<Vec<String>>,
    /// Which of their tools (qualified names; built-ins by their bare names).
    pub tools: ToolSelection,
    /// Whether OpenPact's own tools are in view.
    pub builtins: bool,
    pub tool_search: ToolSearch,
}

impl Profile {
    /// Whether server `name` is in view.
    #[cfg(test)]
    pub fn has_server(&self, name: &str) -> bool {
        self.servers
            .as_ref()
            .is_none_or(|s| s.iter().any(|n| n == name))
    }
}
