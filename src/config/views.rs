//! What each client sees of the catalogue, as written: tool globs, profiles
//! (`openpact.profiles`), tool search (`openpact.toolSearch`) and code mode
//! (`openpact.codeMode`). The hub builds the views.

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

/// When a view offers `run_code` (code mode) in place of its tool list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CodeModeSwitch {
    /// Not offered (the default while code mode is new).
    #[default]
    Off,
    On,
    /// Where tool search is on.
    Auto,
}

/// `openpact.codeMode` (or a profile's own): whether clients get `run_code`, and the limits
/// of every program.
#[derive(Debug, Clone, PartialEq)]
pub struct CodeMode {
    pub mode: CodeModeSwitch,
    /// The longest a program may run (a call's `timeout` may ask for less).
    pub timeout: std::time::Duration,
    /// Tool calls one program may make.
    pub max_calls: usize,
    /// Calls of one `parallel([...])` in flight at once.
    pub parallel: usize,
    /// The worker's address space, in bytes.
    pub memory: u64,
    /// Characters of `print` output and result the model gets back.
    pub max_output: usize,
    /// `keep(name, value)`: values one client session may keep, and their total size.
    pub keep_values: usize,
    pub keep_bytes: usize,
}

impl CodeMode {
    pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
    pub const DEFAULT_MAX_CALLS: usize = 500;
    pub const DEFAULT_PARALLEL: usize = 8;
    pub const DEFAULT_MEMORY: u64 = 512 << 20;
    pub const DEFAULT_MAX_OUTPUT: usize = 20_000;
    pub const DEFAULT_KEEP_VALUES: usize = 64;
    pub const DEFAULT_KEEP_BYTES: usize = 8 << 20;
    /// Below this the interpreter itself cannot start.
    pub const MIN_MEMORY: u64 = 64 << 20;

    /// Whether a view whose tool search is `search_on` offers `run_code`.
    pub fn active(&self, search_on: bool) -> bool {
        match self.mode {
            CodeModeSwitch::On => true,
            CodeModeSwitch::Off => false,
            CodeModeSwitch::Auto => search_on,
        }
    }
}

impl Default for CodeMode {
    fn default() -> Self {
        CodeMode {
            mode: CodeModeSwitch::Off,
            timeout: Self::DEFAULT_TIMEOUT,
            max_calls: Self::DEFAULT_MAX_CALLS,
            parallel: Self::DEFAULT_PARALLEL,
            memory: Self::DEFAULT_MEMORY,
            max_output: Self::DEFAULT_MAX_OUTPUT,
            keep_values: Self::DEFAULT_KEEP_VALUES,
            keep_bytes: Self::DEFAULT_KEEP_BYTES,
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
    pub code_mode: CodeMode,
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
