//! `tools/call`, `prompts/get` and `resources/read`: routed, then through the policy —
//! permission, rate limit, result cache, audit — to a server or a built-in tool.

use super::search::Meta;
use super::{CallReply, Reply, Session, lock, relay};
use crate::builtins::ToolOutput;
use crate::hub::{NameKind, Route};
use crate::jsonrpc::{self, MemberProbe, Message, RawObject, code};
use crate::metrics::Outcome;
use crate::policy::audit::Record;
use crate::policy::cache::{Key, Lookup};
use crate::policy::canonical::canonical;
use crate::policy::{Target, Verdict};
use crate::upstream::{CallError, Upstream};
use std::borrow::Cow;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

/// JSON-RPC code for a refused `prompts/get` or `resources/read` (tools get an `isError`
/// result instead).
pub const PERMISSION_DENIED: i64 = -32003;
/// The code the rate limit answers with.
pub const RATE_LIMITED: i64 = -32000;

impl Session {
    /// `tools/call` and `prompts/get`: route by name, then the policy pipeline — permission →
    /// rate limit → cache lookup → call (only `name` rewritten) → answer → cache store →
    /// audit.
    /// Redaction happens where every line leaves ([`Session::send`]).
    pub(super) async fn by_name(self: &Arc<Self>, m: &Message, kind: NameKind) -> Reply {
        let params = m.params().unwrap_or("{}");
        if matches!(kind, NameKind::Tool)
            && let Ok(obj) = RawObject::parse(params)
            && let Some(name) = obj.get_str("name")
            && let Some(meta) = self.meta_tool(m, &obj, &name).await
        {
            return match meta {
                Meta::Answer(line) => line.into(),
                Meta::Call(inner) => self.by_name_with(m, kind, &inner).await,
            };
        }
        self.by_name_with(m, kind, params).await
    }

    /// [`Session::by_name`] with `params` for the request's own.
    async fn by_name_with(self: &Arc<Self>, m: &Message, kind: NameKind, params: &str) -> Reply {
        let t0 = Instant::now();
        let obj = match RawObject::parse(params) {
            Ok(o) => o,
            Err(e) => {
                return jsonrpc::error(
                    m.id(),
                    code::INVALID_PARAMS,
                    &format!("{} params must be an object: {e}", m.method()),
                    None,
                )
                .into();
            }
        };
        let Some(name) = obj.get_str("name") else {
            return jsonrpc::error(
                m.id(),
                code::INVALID_PARAMS,
                &format!("{} needs a string `name`", m.method()),
                None,
            )
            .into();
        };
        let (route, named) = match self.route_or_login(m, kind, &name).await {
            Ok(found) => found,
            Err(line) => return line.into(),
        };
        let arguments = obj.get("arguments").unwrap_or("{}");
        let target = Target {
            kind: match kind {
                NameKind::Tool => "tool",
                NameKind::Prompt => "prompt",
            },
            qualified: &named.qualified,
            server: &self.hub.server_name(named.upstream),
            description: &named.description,
            definition: named.definition(),
            arguments,
            ask_every_time: matches!(route, Route::Builtin)
                && crate::builtins::ASK_EVERY_TIME.contains(&named.original.as_str()),
        };
        let policy = self.hub.policy();
        let ttl = match kind {
            NameKind::Tool => policy.cache_ttl(&named.qualified, named.read_only),
            NameKind::Prompt => None,
        };
        // The cache key and the audit record share one canonical form of the arguments.
        let canon: Option<Arc<str>> =
            (ttl.is_some() || policy.audit_enabled()).then(|| canonical(arguments).into());
        let mut audit = self.audit_start(m.method(), named.qualified.clone(), canon.clone());
        let server = named.upstream;
        if let Some((outcome, denied)) = self.admit(m, &target, &mut audit).await {
            return self.answer(audit, (server, outcome), t0, denied);
        }
        let claim = match ttl {
            None => None,
            Some(ttl) => {
                let key = Key::from_canonical(
                    named.upstream,
                    &named.original,
                    canon.unwrap_or_else(|| canonical(arguments).into()),
                );
                match policy.cache.lookup::<CallReply>(key).await {
                    Lookup::Hit(result) => {
                        audit.cache = "hit".into();
                        // Only successful, non-error results are stored.
                        audit.outcome = "ok".into();
                        self.hub.metrics.cache_hit(server);
                        let line = jsonrpc::result(m.id(), &result);
                        return self.answer(audit, (server, Outcome::Ok), t0, line);
                    }
                    Lookup::Failed(reply) => {
                        audit.cache = "miss".into();
                        let outcome = self.note_outcome(&mut audit, &reply);
                        return self.answer(audit, (server, outcome), t0, relay(m.id(), &reply));
                    }
                    Lookup::Claimed(claim) => Some((claim, ttl)),
                }
            }
        };
        audit.cache = if claim.is_some() { "miss" } else { "off" }.into();
        let upstream_params = obj.with("name", &named.original_json);
        let refusals = self.hub.hosts.mark(server);
        let refused_before = match &route {
            Route::Server(up) => up.refusals().count(),
            Route::Builtin => 0,
        };
        let reply = self
            .dispatch(
                &route,
                m.method(),
                &named.original,
                arguments,
                &upstream_params,
            )
            .await;
        let reply = match kind {
            NameKind::Tool => {
                let reply = match &route {
                    Route::Server(up) => with_path_refusals(up, refused_before, reply).await,
                    Route::Builtin => reply,
                };
                self.hub.with_refusals(server, refusals, reply)
            }
            NameKind::Prompt => reply,
        };
        let outcome = self.note_outcome(&mut audit, &reply);
        let sent = self.answer(audit, (server, outcome), t0, relay(m.id(), &reply));
        if let Some((claim, ttl)) = claim {
            match reply.as_ref().ok().and_then(Message::result) {
                // Only successful, non-error results are stored — already redacted, so the
                // cache never holds a secret.
                Some(result) if !is_error_result(result) => {
                    claim.store(Arc::from(policy.redact(result).as_ref()), ttl);
                }
                _ => claim.fail(Arc::new(reply)),
            }
        }
        sent
    }

    /// Sends a routed `tools/call` / `prompts/get` to its server, or runs a built-in tool in
    /// process (its result wrapped as if a server had answered, so the rest of the pipeline
    /// treats both alike).
    async fn dispatch(
        self: &Arc<Self>,
        route: &Route,
        method: &str,
        tool: &str,
        arguments: &str,
        upstream_params: &str,
    ) -> Result<Message, CallError> {
        match route {
            Route::Server(up) => self.request_upstream(up, method, upstream_params).await,
            Route::Builtin => {
                let args: serde_json::Value =
                    serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null);
                let output = self
                    .hub
                    .builtins()
                    .call(tool, &args)
                    .await
                    .unwrap_or_else(|| ToolOutput::unknown_tool(tool));
                let line = output.answer("0");
                Message::parse(line.into_boxed_str()).map_err(|e| CallError::Closed {
                    server: crate::hub::catalog::BUILTIN_SERVER.into(),
                    reason: format!("produced an unreadable result: {e}"),
                })
            }
        }
    }

    /// Permission and rate limit. `Some` is the refusal to send instead of calling.
    async fn admit(
        self: &Arc<Self>,
        m: &Message,
        target: &Target<'_>,
        audit: &mut Record,
    ) -> Option<(Outcome, String)> {
        let policy = self.hub.policy();
        let verdict = policy.permission(target, self.as_ref()).await;
        let (decision, source) = match &verdict {
            Verdict::Allow(s) => ("allow", *s),
            Verdict::Deny(s, _) => ("deny", *s),
        };
        audit.decision = decision.into();
        audit.source = source.label().into();
        if let Verdict::Deny(_, message) = verdict {
            audit.outcome = "denied".into();
            audit.error = Some(message.clone());
            tracing::info!(target = %policy.redact(target.qualified), source = source.label(), "denied");
            let line = if m.method() == "tools/call" {
                // A tool error the model can read and relay, as the spec prefers.
                ToolOutput::error(message).answer(m.id())
            } else {
                jsonrpc::error(m.id(), PERMISSION_DENIED, &message, None)
            };
            return Some((Outcome::Denied, line));
        }
        if let Err(limited) = policy.rate_limit(target.server, target.qualified) {
            audit.outcome = "rateLimited".into();
            let retry_ms = limited.retry_after.as_millis();
            let data = serde_json::json!({
                "limit": limited.which,
                "perSecond": limited.limit.per_second,
                "burst": limited.limit.burst,
                "retryAfterMs": retry_ms,
            });
            let line = jsonrpc::error(
                m.id(),
                RATE_LIMITED,
                "Rate limit exceeded. Please try again later.",
                Some(&data.to_string()),
            );
            return Some((Outcome::RateLimited, line));
        }
        None
    }

    /// The audit record as far as it is known before the call; an empty one (nothing
    /// allocated) when auditing is off.
    fn audit_start(&self, method: &str, target: Arc<str>, canon: Option<Arc<str>>) -> Record {
        let policy = self.hub.policy();
        let (true, Some(canon)) = (policy.audit_enabled(), canon) else {
            return Record::default();
        };
        let arguments = policy.settings.audit.arguments.then(|| {
            serde_json::from_str(&policy.redact(&canon)).unwrap_or(serde_json::Value::Null)
        });
        const METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];
        Record {
            at: Some(std::time::SystemTime::now()),
            client: lock(&self.client_name).clone(),
            method: METHODS
                .into_iter()
                .find(|known| *known == method)
                .map_or_else(|| method.to_string().into(), Cow::Borrowed),
            target,
            cache: "off".into(),
            hash_later: Some(canon),
            arguments,
            ..Record::default()
        }
    }

    /// Reads the outcome off a server's reply: for the metrics from what is already parsed,
    /// and for the audit (when on) in detail, sparing [`Session::answer`] a re-parse of the
    /// line it becomes. Failures to get a reply are left to `answer`, which records the
    /// error object the client was sent.
    fn note_outcome(&self, audit: &mut Record, reply: &CallReply) -> Outcome {
        let counted = match reply {
            Ok(msg) if msg.error().is_none() => Outcome::Ok,
            _ => Outcome::Error,
        };
        let policy = self.hub.policy();
        if !policy.audit_enabled() {
            return counted;
        }
        let Ok(msg) = reply else { return counted };
        audit.outcome = match (msg.result(), msg.error()) {
            (Some(result), _) if is_error_result(result) => "isError".into(),
            (Some(_), _) => "ok".into(),
            (None, Some(error)) => {
                audit.error = Some(policy.redact(error).into_owned());
                "error".into()
            }
            (None, None) => return counted,
        };
        counted
    }

    /// Counts the call (`counted`: its server's index and outcome), sends the answer, then
    /// completes and files the audit record: that bookkeeping need not delay the client.
    fn answer(
        &self,
        mut audit: Record,
        counted: (usize, Outcome),
        t0: Instant,
        line: String,
    ) -> Reply {
        self.hub.metrics.call(counted.0, counted.1, t0.elapsed());
        let policy = self.hub.policy();
        if !policy.audit_enabled() {
            self.send(line);
            return Reply::Sent;
        }
        audit.duration_ms = (t0.elapsed().as_secs_f64() * 1e6).round() / 1e3;
        audit.result_bytes = line.len();
        if audit.outcome.is_empty() {
            audit.outcome = match Message::parse(line.as_str().into()) {
                Ok(msg) if msg.error().is_some() => {
                    audit.error = msg.error().map(|e| policy.redact(e).into_owned());
                    "error".into()
                }
                Ok(msg) if msg.result().is_some_and(is_error_result) => "isError".into(),
                _ => "ok".into(),
            };
        }
        self.send(line);
        // A URI or a denial message can quote a secret.
        if let Cow::Owned(redacted) = policy.redact(&audit.target) {
            audit.target = redacted.into();
        }
        audit.error = audit.error.map(|e| policy.redact(&e).into_owned());
        policy.audit(audit);
        Reply::Sent
    }

    pub(super) fn uri_of(m: &Message) -> Result<String, String> {
        let params = m.params().unwrap_or("{}");
        RawObject::parse(params)
            .ok()
            .and_then(|o| o.get_str("uri").map(Cow::into_owned))
            .ok_or_else(|| {
                jsonrpc::error(
                    m.id(),
                    code::INVALID_PARAMS,
                    &format!("{} needs a string `uri`", m.method()),
                    None,
                )
            })
    }

    pub(super) async fn route_uri(&self, m: &Message, uri: &str) -> Result<Arc<Upstream>, String> {
        self.hub
            .route_uri(self.view, uri)
            .await
            .map_err(|e| jsonrpc::error(m.id(), e.code(), &e.to_string(), None))
    }

    /// `resources/read`: URIs are not namespaced; route by the URI → server map. Passes
    /// permission (as `server:<uri>`), rate limit and audit like a call.
    pub(super) async fn by_uri(self: &Arc<Self>, m: &Message) -> Reply {
        let t0 = Instant::now();
        let uri = match Self::uri_of(m) {
            Ok(u) => u,
            Err(line) => return line.into(),
        };
        let up = match self.route_uri(m, &uri).await {
            Ok(up) => up,
            Err(line) => return line.into(),
        };
        let qualified = format!("{}:{uri}", up.config().prefix());
        let target = Target {
            kind: "resource",
            qualified: &qualified,
            server: up.name(),
            description: "",
            definition: "",
            arguments: "{}",
            ask_every_time: false,
        };
        let mut audit = self.audit_start(m.method(), qualified.as_str().into(), Some("{}".into()));
        if let Some((outcome, denied)) = self.admit(m, &target, &mut audit).await {
            return self.answer(audit, (up.index, outcome), t0, denied);
        }
        let reply = self
            .request_upstream(&up, m.method(), m.params().unwrap_or("{}"))
            .await;
        let outcome = self.note_outcome(&mut audit, &reply);
        self.answer(audit, (up.index, outcome), t0, relay(m.id(), &reply))
    }
}

/// A `tools/call` result with `isError: true`.
fn is_error_result(result: &str) -> bool {
    static IS_ERROR: LazyLock<MemberProbe> = LazyLock::new(|| MemberProbe::new("isError"));
    // Most results have no `isError` member at all; only those that might need parsing.
    IS_ERROR.may_have(result)
        && RawObject::parse(result)
            .ok()
            .and_then(|o| o.get("isError").map(|v| v == "true"))
            .unwrap_or(false)
}

/// Words a refusal is reported with (see `crate::sandbox::refusal::detect`): a result
/// without any is passed on untouched.
const REFUSED_WORDS: [&str; 5] = [
    "EACCES",
    "Permission denied",
    "Errno 13",
    "os error 13",
    "Operation not permitted",
];

/// A tool result with what the sandbox refused during the call (reported in the result's
/// text or on the server's stderr) put before it as one more text block: what was refused and the
/// command that allows it, where the user reads the result. The server's own content is
/// kept as it is.
async fn with_path_refusals(up: &Upstream, before: u64, reply: CallReply) -> CallReply {
    let Ok(msg) = &reply else { return reply };
    let Some(result) = msg.result() else {
        return reply;
    };
    let mentions = REFUSED_WORDS.iter().any(|w| result.contains(w));
    if mentions {
        let value: serde_json::Value = serde_json::from_str(result).unwrap_or_default();
        let mut found = false;
        for content in value["content"].as_array().into_iter().flatten() {
            // Every block is read, even after one named a refusal.
            found |= content["text"]
                .as_str()
                .is_some_and(|t| up.note_refusals(t));
        }
        if !found && up.refusals().count() == before {
            // The result says "denied" without the place: the server's stderr, a separate
            // pipe, may name it a moment later.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    let refused = up.refusals().since(before);
    if refused.is_empty() {
        return reply;
    }
    let Ok(mut value @ serde_json::Value::Object(_)) =
        serde_json::from_str::<serde_json::Value>(result)
    else {
        return reply;
    };
    let said: Vec<String> = refused.iter().map(|r| r.sentence()).collect();
    let block = serde_json::json!({"type": "text", "text": said.join("\n")});
    match value.get_mut("content").and_then(|c| c.as_array_mut()) {
        // First, as the proxy's refusal of a host is: what the user must read before the
        // server's own words.
        Some(content) => content.insert(0, block),
        None => value["content"] = serde_json::json!([block]),
    }
    let line = jsonrpc::result(msg.id(), &value.to_string());
    match Message::parse(line.into_boxed_str()) {
        Ok(changed) => Ok(changed),
        Err(_) => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::is_error_result;

    #[test]
    fn is_error_result_reads_the_member_however_it_is_written() {
        assert!(!is_error_result(
            r#"{"content":[{"type":"text","text":"hi"}]}"#
        ));
        assert!(!is_error_result(r#"{"content":[],"isError":false}"#));
        assert!(is_error_result(r#"{"content":[],"isError":true}"#));
        assert!(is_error_result(r#"{"content":[], "isError" : true}"#));
        // A key with escapes is the same key.
        assert!(is_error_result(r#"{"content":[],"\u0069sError":true}"#));
        // The words inside a text are not the member.
        assert!(!is_error_result(
            r#"{"content":[{"type":"text","text":"\"isError\": true"}]}"#
        ));
    }
}
