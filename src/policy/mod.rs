//! The policy every call passes, in this order: permission → rate limit → cache lookup →
//! (the call) → redaction → cache store → audit. This module owns each step's state; the hub
//! runs the steps around the upstream call.
//!
//! Knows qualified names, definitions and arguments — never sessions or transports (the
//! client is reached through the [`prompt::Asker`] trait).

pub mod audit;
pub mod cache;
pub mod canonical;
pub mod decisions;
pub mod desk;
pub mod flows;
pub mod prompt;
pub mod ratelimit;
pub mod redact;
pub mod rules;

use crate::config::{FlowGuard, PolicySettings, Rule};
use decisions::{DecisionStore, Remember};
use prompt::{Answer, Asker, Question};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

/// Where an allow or deny came from (recorded in the audit log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Rule,
    Remembered,
    Prompt,
    Default,
    NonInteractive,
    /// The data-flow guard set to deny ([`flows`]).
    Guard,
}

impl Source {
    pub fn label(self) -> &'static str {
        match self {
            Source::Rule => "rule",
            Source::Remembered => "remembered",
            Source::Prompt => "prompt",
            Source::Default => "default",
            Source::NonInteractive => "non-interactive",
            Source::Guard => "flows guard",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow(Source),
    /// With the message the caller gets.
    Deny(Source, String),
}

/// The thing a permission is asked for.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// `tool`, `prompt` or `resource`.
    pub kind: &'static str,
    pub qualified: &'a str,
    pub server: &'a str,
    pub description: &'a str,
    /// `sha256:…` of the definition (see [`canonical::definition_hash`]).
    pub definition: &'a str,
    /// Arguments as JSON text.
    pub arguments: &'a str,
    /// Ask on every call, whatever allow rules or remembered answers say (arbitrary code).
    pub ask_every_time: bool,
    /// The labels the tool has whatever the config says ([`flows::Labels::intrinsic`]).
    pub labels: flows::Labels,
    /// Set by [`flows::Rules::check`]: an egress call after a private and an untrusted one,
    /// which needs a decision of its own (asked, never remembered), whatever allows it.
    pub guard: Option<flows::Trigger>,
}

pub struct Policy {
    pub settings: PolicySettings,
    rules: rules::RuleSet,
    decisions: Arc<DecisionStore>,
    /// One terminal prompt at a time (clients are asked one at a time each, see
    /// [`Asker::turn`]); calls that need none never wait for it.
    prompt_lock: Arc<tokio::sync::Mutex<()>>,
    /// Shared with the policy a reload makes from this one: cached results outlive it.
    pub cache: Arc<cache::ResultCache>,
    cache_rules: rules::FirstMatch<Option<Duration>>,
    limiter: ratelimit::Limiter,
    /// Rebuilt when secrets arrive at run time (tokens from a login or a refresh).
    redactor: std::sync::RwLock<Arc<redact::Redactor>>,
    /// Every (name, value) pair the redactor was built from.
    secrets: std::sync::Mutex<Vec<(String, String)>>,
    audit: Option<Arc<audit::AuditLog>>,
    /// Every audit record as it is filed, for the dashboard's live view of calls; kept
    /// across reloads so a watcher never misses the switch.
    live: tokio::sync::broadcast::Sender<audit::Record>,
    state_dir: PathBuf,
    /// Shown in denial messages so users know which file to edit.
    config_label: String,
    /// `openpact.flows`, compiled.
    pub flows: flows::Rules,
    /// Questions waiting on the dashboard; kept across reloads, as calls keep waiting.
    pub desk: Arc<desk::Desk>,
}

impl Policy {
    /// `servers`: configured server names (rate-limit buckets); `secrets`: (name, value) pairs
    /// to redact — the configured secret variables and every value openpact injects into a
    /// child's environment.
    pub fn new(
        settings: &PolicySettings,
        state_dir: &Path,
        servers: &[String],
        secrets: &[(String, String)],
        config_label: String,
    ) -> Policy {
        Policy {
            rules: rules::RuleSet::new(&settings.permissions),
            decisions: Arc::new(DecisionStore::new(state_dir)),
            prompt_lock: Arc::new(tokio::sync::Mutex::new(())),
            cache: Arc::new(cache::ResultCache::new(settings.cache.max_bytes)),
            cache_rules: rules::FirstMatch::new(&settings.cache.rules),
            limiter: ratelimit::Limiter::new(&settings.rate_limits, servers),
            redactor: std::sync::RwLock::new(Arc::new(redact::Redactor::new(secrets))),
            secrets: std::sync::Mutex::new(secrets.to_vec()),
            audit: settings
                .audit
                .enabled
                .then(|| Arc::new(audit::AuditLog::start(state_dir, settings.audit.max_bytes))),
            live: tokio::sync::broadcast::channel(LIVE_RECORDS).0,
            state_dir: state_dir.to_path_buf(),
            config_label,
            flows: flows::Rules::new(&settings.flows),
            desk: Arc::default(),
            settings: settings.clone(),
        }
    }

    /// The policy of a reloaded config: new rules, limits, secrets and audit settings, the
    /// same result cache, remembered decisions and (when its settings stay) audit writer.
    /// The cache keeps its size bound: that one needs a restart.
    pub fn reconfigured(
        &self,
        settings: &PolicySettings,
        servers: &[String],
        secrets: &[(String, String)],
        config_label: String,
    ) -> Policy {
        let mut next = Policy {
            rules: rules::RuleSet::new(&settings.permissions),
            decisions: self.decisions.clone(),
            prompt_lock: self.prompt_lock.clone(),
            cache: self.cache.clone(),
            cache_rules: rules::FirstMatch::new(&settings.cache.rules),
            limiter: ratelimit::Limiter::new(&settings.rate_limits, servers),
            redactor: std::sync::RwLock::new(Arc::new(redact::Redactor::new(secrets))),
            secrets: std::sync::Mutex::new(secrets.to_vec()),
            audit: None,
            live: self.live.clone(),
            state_dir: self.state_dir.clone(),
            config_label,
            flows: flows::Rules::new(&settings.flows),
            desk: self.desk.clone(),
            settings: settings.clone(),
        };
        next.settings.cache.max_bytes = self.settings.cache.max_bytes;
        let same_log = settings.audit.enabled == self.settings.audit.enabled
            && settings.audit.max_bytes == self.settings.audit.max_bytes;
        next.audit = match (&self.audit, settings.audit.enabled) {
            (Some(log), true) if same_log => Some(log.clone()),
            (_, true) => Some(Arc::new(audit::AuditLog::start(
                &self.state_dir,
                settings.audit.max_bytes,
            ))),
            (_, false) => None,
        };
        next
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    pub fn decisions(&self) -> &DecisionStore {
        &self.decisions
    }

    /// Decides whether the call may go ahead, asking the user if rules and remembered
    /// decisions leave it open.
    pub async fn permission(&self, t: &Target<'_>, asker: &dyn Asker) -> Verdict {
        // Only a deny rule settles a guarded call without a decision for it.
        if let Some(trigger) = &t.guard {
            return match self.rules.matching(t.qualified) {
                Some(Rule::Deny) => Verdict::Deny(Source::Rule, self.denied_by_rule(t)),
                _ if self.flows.guard() == FlowGuard::Deny => Verdict::Deny(
                    Source::Guard,
                    format!(
                        "openpact denied {} {}: {}; openpact.flows.guard is \"deny\" in {}: set it to \"ask\" to be asked about such calls, or to \"off\"",
                        t.kind,
                        t.qualified,
                        trigger.reason(t.qualified),
                        self.config_label
                    ),
                ),
                _ => self.ask(t, asker, None, false).await,
            };
        }
        if t.ask_every_time {
            return match self.rules.matching(t.qualified) {
                Some(Rule::Deny) => Verdict::Deny(Source::Rule, self.denied_by_rule(t)),
                _ => self.ask(t, asker, None, false).await,
            };
        }
        match self.rules.matching(t.qualified) {
            Some(Rule::Deny) => {
                return Verdict::Deny(Source::Rule, self.denied_by_rule(t));
            }
            Some(Rule::Allow) => return Verdict::Allow(Source::Rule),
            // An explicit ask rule asks every time, whatever was remembered.
            Some(Rule::Ask) => return self.ask(t, asker, None, false).await,
            None => {}
        }
        let changed = match self.remembered(t) {
            Ok(Some(verdict)) => return verdict,
            Ok(None) => None,
            Err(why) => Some(why),
        };
        match (changed, self.settings.permissions.default) {
            (Some(why), _) => self.ask(t, asker, Some(why), false).await,
            (None, Rule::Allow) => Verdict::Allow(Source::Default),
            (None, Rule::Deny) => Verdict::Deny(
                Source::Default,
                format!(
                    "openpact denied {} {}: openpact.permissions.default is \"deny\"; {}",
                    t.kind,
                    t.qualified,
                    self.how_to_allow(t)
                ),
            ),
            (None, Rule::Ask) => self.ask(t, asker, None, true).await,
        }
    }

    /// A remembered decision that still applies; `Err(reason)` when one exists but the
    /// definition changed since (so the user must be asked again, and told why).
    fn remembered(&self, t: &Target<'_>) -> Result<Option<Verdict>, String> {
        let found = match self.decisions.lookup(t.qualified) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!("remembered decisions unreadable, asking instead: {e}");
                None
            }
        };
        match found {
            None => Ok(None),
            Some(r) if r.definition == t.definition => Ok(Some(match r.decision {
                Remember::Allow => Verdict::Allow(Source::Remembered),
                Remember::Deny => Verdict::Deny(
                    Source::Remembered,
                    format!(
                        "openpact denied {} {}: you chose to deny it (on {}); `openpact permissions forget {}` undoes that",
                        t.kind, t.qualified, r.at, t.qualified
                    ),
                ),
            })),
            Some(r) => Err(format!(
                "the server changed this {}'s definition since you chose \"{}\" on {}, so openpact asks again",
                t.kind,
                match r.decision {
                    Remember::Allow => "always",
                    Remember::Deny => "deny",
                },
                r.at
            )),
        }
    }

    fn denied_by_rule(&self, t: &Target<'_>) -> String {
        let rule = self.rules.explain(t.qualified).map_or_else(
            || "a rule in openpact.permissions.deny".to_string(),
            |m| m.describe(),
        );
        format!(
            "openpact denied {} {}: {rule} matches it; to allow it, change that rule in {} so it no longer matches",
            t.kind, t.qualified, self.config_label
        )
    }

    /// Advice that works for a call denied for want of a way to ask: what allows it
    /// depends on what made openpact ask.
    fn how_to_allow(&self, t: &Target<'_>) -> String {
        let qualified = t.qualified;
        let ask_instead = "use a client that supports elicitation, or run `openpact call` from a terminal, to be asked";
        if let Some(trigger) = &t.guard {
            return format!(
                "{}, so this call needs a decision of its own whatever the rules say; {ask_instead}, or set openpact.flows.guard to \"off\" in {} to let such calls through",
                trigger.reason(qualified),
                self.config_label
            );
        }
        if t.ask_every_time {
            return format!(
                "{qualified} asks on every call, whatever the rules say; {ask_instead}"
            );
        }
        if let Some(m) = self
            .rules
            .explain(qualified)
            .filter(|m| m.rule == Rule::Ask)
        {
            return format!(
                "{} matches it, and asks on every call whatever else allows it; {ask_instead}, or change that rule in {} so it no longer matches (then `openpact permissions allow {qualified}` works)",
                m.describe(),
                self.config_label
            );
        }
        // Built-ins have bare names: there is no server glob to offer for them.
        let alternative = match qualified.split_once(':') {
            Some((server, _)) => format!(" (or \"{server}:*\")"),
            None => String::new(),
        };
        format!(
            "to allow it, run `openpact permissions allow {qualified}`, or add \"{qualified}\"{alternative} to openpact.permissions.allow in {}",
            self.config_label
        )
    }

    /// `recheck`: whether a remembered answer given while this call waited its turn may
    /// settle it (not for `ask` rules and ask-every-time tools, which always ask).
    async fn ask(
        &self,
        t: &Target<'_>,
        asker: &dyn Asker,
        changed: Option<String>,
        recheck: bool,
    ) -> Verdict {
        let timeout = self.settings.permissions.prompt_timeout;
        let _turn = self.turn(asker).await;
        // Someone may have answered "always" for this very tool while we waited our turn.
        if recheck
            && changed.is_none()
            && let Ok(Some(v)) = self.remembered(t)
        {
            return v;
        }
        let q = Question {
            kind: t.kind,
            qualified: t.qualified.to_string(),
            server: t.server.to_string(),
            description: first_line(t.description, 200),
            arguments: self.preview(t.arguments),
            changed,
            guard: t.guard.as_ref().map(|trigger| trigger.reason(t.qualified)),
            // Remembered answers are never read for these (see `permission`).
            rememberable: !t.ask_every_time
                && t.guard.is_none()
                && self.rules.matching(t.qualified) != Some(Rule::Ask),
        };
        let (answer, unremembered, by) = match self.put(&q, asker).await {
            Put::Answered(answer, unremembered) => (answer, unremembered, AT_THE_PROMPT),
            Put::Decided(answer) => (answer, false, BY_THE_HOOK),
            Put::NoChannel => {
                // `nonInteractive: "allow"` lets through what nobody can be asked about; a
                // guarded call needs a decision, so it is not one of those.
                return match self.settings.permissions.non_interactive {
                    Rule::Allow if t.guard.is_none() => Verdict::Allow(Source::NonInteractive),
                    _ => {
                        let (why, elsewhere) = self.no_way_to_ask();
                        Verdict::Deny(
                            Source::NonInteractive,
                            format!(
                                "openpact denied {} {}: it needs permission and there is no way to ask ({why}); {}{elsewhere}",
                                t.kind,
                                t.qualified,
                                self.how_to_allow(t),
                            ),
                        )
                    }
                };
            }
            Put::NoAnswer { on, within } => {
                let on = on.map_or_else(String::new, |place| format!(" on {place}"));
                return Verdict::Deny(
                    Source::Prompt,
                    format!(
                        "openpact denied {} {}: no answer to the permission prompt{on} within {}",
                        t.kind,
                        t.qualified,
                        crate::config::human_duration(within)
                    ),
                );
            }
        };
        self.remember_answer(t.qualified, answer, t.definition)
            .await;
        match answer {
            Answer::Always | Answer::Once => Verdict::Allow(Source::Prompt),
            Answer::Deny { .. } if unremembered => Verdict::Deny(
                Source::Prompt,
                format!(
                    "openpact denied {} {}: denied at the prompt; not remembered, as \"Remember this denial?\" had no answer within {}",
                    t.kind,
                    t.qualified,
                    crate::config::human_duration(timeout)
                ),
            ),
            Answer::Deny { .. } => Verdict::Deny(
                Source::Prompt,
                format!("openpact denied {} {}: denied {by}", t.kind, t.qualified),
            ),
        }
    }

    /// Asks whether server `server` may reach `what` (`host:port`), which its sandbox does
    /// not allow: the remembered decision under `key` if there is one, else the user through
    /// `asker` or the terminal. "always" (and a denial the user asks to remember) is kept
    /// under `key`. `Err` is why it is refused.
    pub async fn ask_host(
        &self,
        server: &str,
        what: &str,
        key: &str,
        asker: &dyn Asker,
    ) -> Result<Answer, String> {
        let remembered = || match self.decisions.lookup(key) {
            Ok(Some(r)) => Some(match r.decision {
                Remember::Allow => Ok(Answer::Always),
                Remember::Deny => Err(format!(
                    "you chose to deny it (on {}); `openpact permissions forget {key}` undoes that",
                    r.at
                )),
            }),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!("remembered decisions unreadable, asking instead: {e}");
                None
            }
        };
        if let Some(decided) = remembered() {
            return decided;
        }
        let timeout = self.settings.permissions.prompt_timeout;
        let unanswered = |on: Option<String>, within: Duration| {
            let on = on.map_or_else(String::new, |place| format!(" on {place}"));
            format!(
                "it is not in its sandbox.network.allow, and the question had no answer{on} within {}",
                crate::config::human_duration(within)
            )
        };
        // The proxy holds a connection meanwhile: questions before this one (about tools
        // too) may keep it waiting its turn only so long.
        let Ok(_turn) = tokio::time::timeout(timeout, self.turn(asker)).await else {
            return Err(unanswered(None, timeout));
        };
        // An "always" given while this waited its turn settles it.
        if let Some(decided) = remembered() {
            return decided;
        }
        let q = Question {
            kind: prompt::HOST,
            qualified: what.to_string(),
            server: server.to_string(),
            description: String::new(),
            arguments: String::new(),
            changed: None,
            guard: None,
            rememberable: true,
        };
        let answered = self.put(&q, asker).await;
        let by = match answered {
            Put::Decided(_) => BY_THE_HOOK,
            _ => AT_THE_PROMPT,
        };
        match answered {
            Put::Answered(answer, _) | Put::Decided(answer) => {
                self.remember_answer(key, answer, prompt::HOST).await;
                match answer {
                    Answer::Deny { .. } => Err(format!("denied {by}")),
                    allowed => Ok(allowed),
                }
            }
            Put::NoChannel => {
                let (why, elsewhere) = self.no_way_to_ask();
                Err(format!(
                    "it is not in its sandbox.network.allow, and there is no way to ask ({why}){elsewhere}"
                ))
            }
            Put::NoAnswer { on, within } => Err(unanswered(on, within)),
        }
    }

    /// One question at a time: per client when it is asked, else for the terminal.
    async fn turn<'a>(&'a self, asker: &'a dyn Asker) -> tokio::sync::MutexGuard<'a, ()> {
        if asker.can_elicit() {
            asker.turn().lock().await
        } else {
            self.prompt_lock.lock().await
        }
    }

    /// Puts `q` to the user: through the client when it can be asked, else on the terminal.
    async fn put(&self, q: &Question, asker: &dyn Asker) -> Put {
        let timeout = self.settings.permissions.prompt_timeout;
        if let Some(answer) = asker.decide(q) {
            return Put::Decided(q.effective(answer));
        }
        let answer = if asker.can_elicit() {
            asker
                .elicit(q.text(), q.schema(), timeout)
                .await
                .map(|result| prompt::parse_elicitation(&result))
        } else if prompt::has_terminal() {
            let q2 = q.clone();
            let saved = prompt::TerminalState::save();
            let chosen = Arc::new(std::sync::Mutex::new(None));
            let chosen2 = chosen.clone();
            let blocking = tokio::task::spawn_blocking(move || prompt::ask_terminal(&q2, &chosen2));
            match tokio::time::timeout(timeout, blocking).await {
                Ok(Ok(Some(a))) => Some(a),
                Ok(_) => None,
                Err(_) => {
                    // The prompt thread cannot be interrupted; at least give the terminal back
                    // in the mode it was in (the prompt had switched it to raw input).
                    if let Some(saved) = saved {
                        saved.restore();
                    }
                    // A denial whose "remember it?" had no answer in time: denied, not
                    // remembered.
                    let chosen = *chosen.lock().unwrap_or_else(PoisonError::into_inner);
                    return chosen.map_or(
                        Put::NoAnswer {
                            on: None,
                            within: timeout,
                        },
                        |a| Put::Answered(q.effective(a), true),
                    );
                }
            }
        } else if let Some(wait) = self.dashboard_wait() {
            return match self.desk.ask(q, &asker.client(), wait).await {
                Some(answer) => Put::Answered(answer, false),
                None => Put::NoAnswer {
                    on: self.desk.where_to_answer(),
                    within: wait,
                },
            };
        } else {
            return Put::NoChannel;
        };
        match answer {
            Some(answer) => Put::Answered(q.effective(answer), false),
            None => Put::NoAnswer {
                on: None,
                within: timeout,
            },
        }
    }

    /// How long a question may wait on the dashboard now: only while a page is open to
    /// show it, and not when `dashboardWait` is zero.
    fn dashboard_wait(&self) -> Option<Duration> {
        let wait = self.settings.permissions.dashboard_wait;
        (!wait.is_zero() && self.desk.is_watched()).then_some(wait)
    }

    /// For a denial for want of a way to ask: why nobody could be asked (every way
    /// [`Policy::put`] tries), and where the user could be asked next time — the dashboard,
    /// when this hub has one to open — or nothing.
    fn no_way_to_ask(&self) -> (String, String) {
        let wait = self.settings.permissions.dashboard_wait;
        match self.desk.where_to_answer().filter(|_| !wait.is_zero()) {
            Some(place) => (
                format!("{NO_WAY_TO_ASK}, and no dashboard page is open"),
                format!(
                    "; or open {place}: while it is open, such a call waits up to {} for your answer there",
                    crate::config::human_duration(wait)
                ),
            ),
            None => (NO_WAY_TO_ASK.to_string(), String::new()),
        }
    }

    /// Keeps an "always" (or a denial to remember) under `name`, bound to `definition`.
    async fn remember_answer(&self, name: &str, answer: Answer, definition: &str) {
        let decision = match answer {
            Answer::Always => Remember::Allow,
            Answer::Deny { remember: true } => Remember::Deny,
            _ => return,
        };
        let store = DecisionStore::new(&self.state_dir);
        let (name, def) = (name.to_string(), definition.to_string());
        match tokio::task::spawn_blocking(move || store.remember(&name, decision, &def)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("could not remember the decision: {e}"),
            Err(e) => tracing::warn!("could not remember the decision: {e}"),
        }
    }

    /// Arguments for a prompt: long strings cut, secrets hidden.
    fn preview(&self, arguments: &str) -> String {
        fn cut(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::String(s) if s.chars().count() > 200 => {
                    *s = format!(
                        "{}… ({} characters)",
                        s.chars().take(200).collect::<String>(),
                        s.chars().count()
                    );
                }
                serde_json::Value::Array(a) => a.iter_mut().for_each(cut),
                serde_json::Value::Object(m) => m.values_mut().for_each(cut),
                _ => {}
            }
        }
        let text = match serde_json::from_str::<serde_json::Value>(arguments) {
            Ok(mut v) => {
                cut(&mut v);
                v.to_string()
            }
            Err(_) => arguments.chars().take(400).collect(),
        };
        self.redact(&text).into_owned()
    }

    pub fn rate_limit(&self, server: &str, qualified: &str) -> Result<(), ratelimit::Limited> {
        self.limiter.check(server, qualified)
    }

    /// How long a tool's successful results may be cached, if at all.
    pub fn cache_ttl(&self, qualified: &str, read_only_hint: bool) -> Option<Duration> {
        match self.cache_rules.find(qualified) {
            Some(rule) => *rule,
            None if read_only_hint && self.settings.cache.trust_read_only_hint => Some(
                self.settings
                    .cache
                    .default
                    .unwrap_or(crate::config::CacheSettings::READ_ONLY_TTL),
            ),
            None => self.settings.cache.default,
        }
    }

    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.redactor().redact(text)
    }

    pub fn has_secrets(&self) -> bool {
        !self.redactor().is_empty()
    }

    /// Adds secret values found at run time (a remote server's new tokens) under `name`;
    /// results and logs are redacted of them from then on.
    pub fn add_secrets(&self, name: &str, values: Vec<String>) {
        let mut all = self.secrets.lock().unwrap_or_else(PoisonError::into_inner);
        let before = all.len();
        for v in values {
            if !all.iter().any(|(_, known)| *known == v) {
                all.push((name.to_string(), v));
            }
        }
        if all.len() != before {
            let rebuilt = Arc::new(redact::Redactor::new(&all));
            *self
                .redactor
                .write()
                .unwrap_or_else(PoisonError::into_inner) = rebuilt;
        }
    }

    fn redactor(&self) -> Arc<redact::Redactor> {
        self.redactor
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn audit(&self, record: audit::Record) {
        if let Some(a) = &self.audit {
            // A copy only while someone watches: a hub without a dashboard pays nothing.
            if self.live.receiver_count() > 0 {
                let _ = self.live.send(record.clone());
            }
            a.record(record);
        }
    }

    /// The audit records filed from now on (already redacted, as the log's are). A watcher
    /// that falls more than [`LIVE_RECORDS`] behind skips what it missed.
    pub fn watch_audit(&self) -> tokio::sync::broadcast::Receiver<audit::Record> {
        self.live.subscribe()
    }

    /// Writes every audit record handed in so far (on shutdown, before the process exits).
    pub fn flush_audit(&self) {
        if let Some(a) = &self.audit {
            a.flush();
        }
    }

    pub fn audit_enabled(&self) -> bool {
        self.audit.is_some()
    }
}

/// How many audit records a slow watcher may fall behind before it skips some.
pub const LIVE_RECORDS: usize = 256;

/// Why nobody can be asked.
const NO_WAY_TO_ASK: &str = "the client did not declare elicitation and there is no terminal";

/// How a question went.
/// Who refused, in a denial's message.
const AT_THE_PROMPT: &str = "at the prompt";
const BY_THE_HOOK: &str = "by the host program's policy hook";

enum Put {
    /// `true`: a denial whose "remember it?" had no answer in time.
    Answered(Answer, bool),
    /// Answered by the embedding program's policy hook, not by a person.
    Decided(Answer),
    /// Nobody answered within `within`; `on`: where the question waited, when not where
    /// the user would look anyway (the client's dialog or the terminal).
    NoAnswer {
        on: Option<String>,
        within: Duration,
    },
    NoChannel,
}

fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    if line.chars().count() > max {
        format!("{}…", line.chars().take(max).collect::<String>())
    } else {
        line.to_string()
    }
}
