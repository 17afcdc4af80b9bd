//! Asking the user: the always / once / deny question, through the downstream client
//! (elicitation) or the controlling terminal (`platform::terminal`: `/dev/tty` on unix, never
//! stdin/stdout, which carry the protocol).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The user's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Allow and remember.
    Always,
    /// Allow this call only.
    Once,
    /// Refuse this call; `remember` makes it stick.
    Deny { remember: bool },
}

/// What the question is about.
#[derive(Debug, Clone)]
pub struct Question {
    pub kind: &'static str,
    pub qualified: String,
    pub server: String,
    pub description: String,
    /// Arguments, shortened and redacted.
    pub arguments: String,
    /// Why we ask again, if a remembered decision no longer applies.
    pub changed: Option<String>,
    /// Why the data-flow guard asks about this call (`crate::policy::flows`).
    pub guard: Option<String>,
    /// Whether an answer can be remembered. Not when an `ask` rule matches or the tool asks
    /// on every call: those ask whatever was remembered, so "always" would be a lie.
    pub rememberable: bool,
}

/// The `kind` of a question about a host a sandboxed server wants to reach (`qualified` is
/// its `host:port`); also what a remembered answer about a host is bound to.
pub const HOST: &str = "host";

impl Question {
    pub fn text(&self) -> String {
        if self.kind == HOST {
            return format!(
                "openpact: server {} wants {}: allow once / always / deny?\n  (its sandbox does not \
                 allow this host; \"always\" is remembered for this server, \"once\" is for the \
                 call under way)\n",
                self.server, self.qualified
            );
        }
        let mut t = format!(
            "openpact: allow {} {}?\n  server: {}\n",
            self.kind, self.qualified, self.server
        );
        if !self.description.is_empty() {
            t.push_str(&format!("  description: {}\n", self.description));
        }
        if !self.arguments.is_empty() && self.arguments != "{}" {
            t.push_str(&format!("  arguments: {}\n", self.arguments));
        }
        if let Some(why) = &self.changed {
            t.push_str(&format!("  {why}\n"));
        }
        if let Some(why) = &self.guard {
            t.push_str(&format!(
                "  why: {why}, so openpact.flows asks about this call\n"
            ));
        }
        if !self.rememberable {
            t.push_str("  (openpact asks about it on every call, so no answer is remembered)\n");
        }
        t
    }

    /// The elicitation form for this question.
    pub fn schema(&self) -> &'static str {
        if self.rememberable {
            ELICITATION_SCHEMA
        } else {
            ELICITATION_SCHEMA_ONCE
        }
    }

    /// `answer` as it can take effect: one that would be remembered is not, when nothing
    /// can be (a client may answer a choice the form did not offer).
    pub fn effective(&self, answer: Answer) -> Answer {
        match answer {
            _ if self.rememberable => answer,
            Answer::Always => Answer::Once,
            Answer::Deny { .. } => Answer::Deny { remember: false },
            Answer::Once => Answer::Once,
        }
    }
}

/// The elicitation form: exactly one required string property, `decision`.
pub const ELICITATION_SCHEMA: &str = r#"{"type":"object","properties":{"decision":{"type":"string","title":"Decision","description":"always: allow and remember; once: allow this call only; deny: refuse this call","enum":["always","once","deny"]}},"required":["decision"]}"#;

/// The form when no answer can be remembered: once or deny.
pub const ELICITATION_SCHEMA_ONCE: &str = r#"{"type":"object","properties":{"decision":{"type":"string","title":"Decision","description":"once: allow this call; deny: refuse this call (asked again on every call)","enum":["once","deny"]}},"required":["decision"]}"#;

/// Reads an `elicitation/create` result: accept with a decision; decline, cancel or anything
/// unexpected is a denial.
pub fn parse_elicitation(result: &str) -> Answer {
    let v: serde_json::Value = serde_json::from_str(result).unwrap_or(serde_json::Value::Null);
    if v.get("action").and_then(|a| a.as_str()) != Some("accept") {
        return Answer::Deny { remember: false };
    }
    match v.pointer("/content/decision").and_then(|d| d.as_str()) {
        Some("always") => Answer::Always,
        Some("once") => Answer::Once,
        _ => Answer::Deny { remember: false },
    }
}

/// A program's answer to every question, given instead of a person's (`crate::embed`'s
/// policy hook).
pub type Decider = std::sync::Arc<dyn Fn(&Question) -> Answer + Send + Sync>;

/// A way to reach the user through the downstream client (implemented by a session).
pub trait Asker: Send + Sync {
    /// The answer of the program embedding the hub, which then stands in for the user;
    /// `None` when it gave no hook.
    fn decide(&self, _question: &Question) -> Option<Answer> {
        None
    }
    /// Who asks (`clientInfo.name`), shown with a question on the dashboard.
    fn client(&self) -> String {
        String::new()
    }
    /// Whether the client declared `elicitation`.
    fn can_elicit(&self) -> bool;
    /// Sends `elicitation/create`; the result JSON text, or None (no answer in time).
    fn elicit(
        &self,
        message: String,
        schema: &'static str,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Option<String>> + Send + '_>>;
    /// Taken while this client is asked: one question at a time per client, so parallel
    /// calls of one tool ask once when the first answer is "always". Other clients (each
    /// with its own dialog) are never held up by it.
    fn turn(&self) -> &tokio::sync::Mutex<()>;
}

/// No client to ask (e.g. a listing from the CLI).
pub struct NoClient;

impl Asker for NoClient {
    fn can_elicit(&self) -> bool {
        false
    }
    fn elicit(
        &self,
        _: String,
        _: &'static str,
        _: Duration,
    ) -> Pin<Box<dyn Future<Output = Option<String>> + Send + '_>> {
        Box::pin(async { None })
    }
    fn turn(&self) -> &tokio::sync::Mutex<()> {
        static NOBODY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        &NOBODY
    }
}

/// The terminal's mode before a prompt, to put back if the prompt is abandoned.
pub struct TerminalState {
    mode: crate::platform::TerminalMode,
}

impl TerminalState {
    pub fn save() -> Option<TerminalState> {
        crate::platform::TerminalMode::save().map(|mode| TerminalState { mode })
    }

    pub fn restore(&self) {
        use std::io::Write;
        self.mode.restore();
        // Show the cursor again and end the line the prompt was on.
        let _ = self.mode.terminal().write_all(b"\x1b[?25h\r\n");
    }
}

pub fn has_terminal() -> bool {
    crate::platform::terminal().is_some()
}

/// Asks on the terminal (blocking: run it off the async threads). None when there is no
/// terminal or it failed. A denial is put in `chosen` as soon as it is chosen, before the
/// question whether to remember it: the caller's timeout may end this thread's wait there,
/// and the user did answer.
pub fn ask_terminal(q: &Question, chosen: &std::sync::Mutex<Option<Answer>>) -> Option<Answer> {
    let (read, write) = crate::platform::terminal()?;
    let term = console::Term::read_write_pair(read, write);
    let _ = term.write_line("");
    let _ = term.write_str(&q.text());
    let choices: &[(&str, Answer)] = if q.rememberable {
        &[
            ("always (remember)", Answer::Always),
            ("once (this call only)", Answer::Once),
            ("deny", Answer::Deny { remember: false }),
        ]
    } else {
        &[
            ("once (this call only)", Answer::Once),
            ("deny", Answer::Deny { remember: false }),
        ]
    };
    let choice = dialoguer::Select::new()
        .with_prompt("Allow?")
        .items(choices.iter().map(|(label, _)| *label))
        .default(choices.len() - 1)
        .interact_on_opt(&term)
        .ok()??;
    let answer = choices.get(choice)?.1;
    if !(q.rememberable && matches!(answer, Answer::Deny { .. })) {
        return Some(answer);
    }
    *chosen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(answer);
    let remember = dialoguer::Confirm::new()
        .with_prompt("Remember this denial?")
        .default(false)
        .interact_on_opt(&term)
        .ok()
        .flatten()
        .unwrap_or(false);
    Some(Answer::Deny { remember })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elicitation_answers() {
        assert_eq!(
            parse_elicitation(r#"{"action":"accept","content":{"decision":"always"}}"#),
            Answer::Always
        );
        assert_eq!(
            parse_elicitation(r#"{"action":"accept","content":{"decision":"once"}}"#),
            Answer::Once
        );
        assert_eq!(
            parse_elicitation(r#"{"action":"accept","content":{"decision":"deny"}}"#),
            Answer::Deny { remember: false }
        );
        assert_eq!(
            parse_elicitation(r#"{"action":"decline"}"#),
            Answer::Deny { remember: false }
        );
        assert_eq!(
            parse_elicitation(r#"{"action":"cancel"}"#),
            Answer::Deny { remember: false }
        );
        assert_eq!(
            parse_elicitation(r#"{"action":"accept","content":{"decision":"yes"}}"#),
            Answer::Deny { remember: false }
        );
        let schema: serde_json::Value = serde_json::from_str(ELICITATION_SCHEMA).unwrap();
        assert_eq!(schema["required"], serde_json::json!(["decision"]));
        assert_eq!(
            schema["properties"]["decision"]["enum"],
            serde_json::json!(["always", "once", "deny"])
        );
        let schema: serde_json::Value = serde_json::from_str(ELICITATION_SCHEMA_ONCE).unwrap();
        assert_eq!(schema["required"], serde_json::json!(["decision"]));
        assert_eq!(
            schema["properties"]["decision"]["enum"],
            serde_json::json!(["once", "deny"])
        );
    }
}
