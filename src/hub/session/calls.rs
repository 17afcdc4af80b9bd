//! `tools/call`, `prompts/get` and `resources/read` as a [`Call`] through named stages, so
//! the pipeline reads in one place (as a proxy's phases do):
//!
//! 1. **look up**: the name routed to a server or a built-in tool (logging in first when its
//!    server waits for one), or the URI to the server that offers it;
//! 2. **admit**: the audit record started, then permission, rate limit and — for a cacheable
//!    tool — the cache look-up; a refusal or a cached answer settles the call here;
//! 3. **dispatch**: the request sent to its server (only `name` rewritten) or the built-in
//!    run in process, with what the sandbox refused during it put before the result;
//! 4. **settle**: the outcome counted, the answer sent, the audit record filed, the result
//!    stored in the cache.
//!
//! Redaction happens where every line leaves ([`Session::send`]).

use super::login::NotRouted;
use super::search::Meta;
use super::{CallReply, Reply, Session, lock, relay};
use crate::builtins::ToolOutput;
use crate::hub::{NameKind, Named, Route, RouteError};
use crate::jsonrpc::{self, MemberProbe, Message, RawObject, code};
use crate::metrics::Outcome;
use crate::policy::audit::Record;
use crate::policy::cache::{Claim, Key, Lookup};
use crate::policy::canonical::canonical;
use crate::policy::{Policy, Target, Verdict};
use crate::telemetry::stage;
use crate::upstream::{CallError, Upstream};
use std::borrow::Cow;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};
use tracing::Instrument;

/// JSON-RPC code for a refused `prompts/get` or `resources/read` (tools get an `isError`
/// result instead).
pub const PERMISSION_DENIED: i64 = -32003;
/// The code the rate limit answers with.
pub const RATE_LIMITED: i64 = -32000;

/// Why a call found nothing to call. Rendered into the answer only at the edge
/// ([`Unrouted::line`]), where the request it answers is known.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unrouted {
    #[error("{method} params must be an object: {why}")]
    NotAnObject { method: String, why: String },
    #[error("{method} needs a string `{member}`")]
    Missing {
        method: String,
        member: &'static str,
    },
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error(transparent)]
    NotRouted(#[from] NotRouted),
}

impl Unrouted {
    /// The answer to `m`: a failed login is a tool error the model can read and relay (as a
    /// refusal is) when `m` is a tool call; everything else a JSON-RPC error.
    pub(super) fn line(&self, m: &Message) -> String {
        let code = match self {
            Unrouted::NotAnObject { .. } | Unrouted::Missing { .. } => code::INVALID_PARAMS,
            Unrouted::Route(e) | Unrouted::NotRouted(NotRouted::Route(e)) => e.code(),
            Unrouted::NotRouted(NotRouted::Login(e)) => {
                if m.method() == "tools/call" {
                    return ToolOutput::error(e.to_string()).answer(m.id());
                }
                crate::upstream::code::UNAVAILABLE
            }
        };
        jsonrpc::error(m.id(), code, &self.to_string(), None)
    }

    fn missing(m: &Message, member: &'static str) -> Unrouted {
        Unrouted::Missing {
            method: m.method().to_string(),
            member,
        }
    }
}

/// One call on its way through the stages. What the stages share is here — the request, the
/// policy it started with, its clock and its audit record — so each stage is a method and
/// none reaches into another.
struct Call<'s> {
    session: &'s Arc<Session>,
    m: &'s Message,
    policy: &'s Policy,
    t0: Instant,
    audit: Record,
    /// Set for a call a code-mode program made: where its answer goes instead of the client.
    inner: Option<Inner>,
}

/// A call whose answer does not go straight to the client — one a code-mode program made,
/// or one a task runs — and where its answer goes instead (redacted, as everything sent to
/// the client is).
pub(super) struct Inner {
    /// The program's id (for the audit), for a program's call.
    pub program: Option<Arc<str>>,
    /// The task the call runs for: told of its server's progress on a task of its own.
    pub task: Option<Arc<crate::hub::tasks::Task>>,
    pub to: tokio::sync::oneshot::Sender<String>,
}

/// What look-up found for a call by name.
struct Found<'p> {
    kind: NameKind,
    route: Route,
    named: Arc<Named>,
    /// The request's params.
    params: RawObject<'p>,
}

impl<'p> Found<'p> {
    fn arguments(&self) -> &'p str {
        self.params.get("arguments").unwrap_or("{}")
    }

    fn server(&self) -> usize {
        self.named.upstream
    }
}

/// Where admission leaves a call.
enum Admitted<'c> {
    /// On to dispatch; with the cache slot its result is to be stored in, and for how long.
    Go(Option<(Claim<'c>, Duration)>),
    /// Answered without a dispatch (refused, limited, or from the cache): the answer and
    /// its outcome, to settle.
    Answered(Outcome, String),
}

impl Session {
    /// `tools/call` and `prompts/get`: the search meta-tools answered or turned into the call
    /// they stand for, then the call's stages.
    pub(super) async fn by_name(self: &Arc<Self>, m: &Message, kind: NameKind) -> Reply {
        self.by_name_to(m, kind, None).await
    }

    /// [`Session::by_name`], answered to `inner` when given (a task's call).
    pub(super) async fn by_name_to(
        self: &Arc<Self>,
        m: &Message,
        kind: NameKind,
        inner: Option<Inner>,
    ) -> Reply {
        let params = m.params().unwrap_or("{}");
        if matches!(kind, NameKind::Tool)
            && let Ok(obj) = RawObject::parse(params)
            && let Some(name) = obj.get_str("name")
            && let Some(meta) = self.meta_tool(m, &obj, &name).await
        {
            return match (meta, inner) {
                (Meta::Answer(line), None) => line.into(),
                (Meta::Answer(line), Some(inner)) => {
                    let _ = inner.to.send(self.hub.policy().redact(&line).into_owned());
                    Reply::Sent
                }
                (Meta::Call(params), inner) => self.call_by_name(m, kind, &params, inner).await,
            };
        }
        self.call_by_name(m, kind, params, inner).await
    }

    /// A call by name with `params` for the request's own: look up → admit → dispatch →
    /// settle. A program's call (`inner`) is answered to the program.
    pub(super) async fn call_by_name(
        self: &Arc<Self>,
        m: &Message,
        kind: NameKind,
        params: &str,
        inner: Option<Inner>,
    ) -> Reply {
        let t0 = Instant::now();
        let found = match self
            .look_up(m, kind, params)
            .instrument(stage("look up"))
            .await
        {
            Ok(found) => found,
            Err(e) => return e.line(m).into(),
        };
        // The policy as it is once the name is found: a login may have waited through a reload.
        let policy = self.hub.policy();
        let mut call = Call::new(self, m, &policy, t0);
        call.inner = inner;
        match call.admit_by_name(&found).instrument(stage("admit")).await {
            Admitted::Answered(outcome, line) => call.answer(found.server(), outcome, line),
            Admitted::Go(claim) => {
                let reply = call.dispatch(&found).instrument(stage("dispatch")).await;
                stage("settle").in_scope(|| call.settle(found.server(), reply, claim))
            }
        }
    }

    /// `resources/read`: URIs are not namespaced; routed by the URI → server map. Passes
    /// permission (as `server:<uri>`), rate limit and audit like a call; never cached.
    pub(super) async fn by_uri(self: &Arc<Self>, m: &Message) -> Reply {
        let t0 = Instant::now();
        let (up, uri) = match self.resource_of(m).await {
            Ok(found) => found,
            Err(e) => return e.line(m).into(),
        };
        let policy = self.hub.policy();
        let mut call = Call::new(self, m, &policy, t0);
        // A view the hub serves under a URI of its own is asked for, and permitted, by its own.
        let view = self.hub.view_read(&up, &uri);
        let own = view.as_ref().map_or(uri.as_str(), |v| &v.upstream);
        let qualified = format!("{}:{own}", up.config().prefix());
        let target = Target {
            kind: "resource",
            qualified: &qualified,
            server: up.name(),
            description: "",
            definition: "",
            arguments: "{}",
            ask_every_time: false,
            labels: Default::default(),
            guard: None,
        };
        // Admit: no cache for reads.
        call.audit = call.audit_start(qualified.as_str().into(), Some("{}".into()));
        if let Some((outcome, refused)) = call.permit(&target).await {
            return call.answer(up.index, outcome, refused);
        }
        // Dispatch, then settle.
        let params = m.params().unwrap_or("{}");
        let reply = match &view {
            Some(view) => view.reply(
                self.request_upstream(&up, m.method(), &view.params(params))
                    .await,
            ),
            None => self.request_upstream(&up, m.method(), params).await,
        };
        call.settle(up.index, reply, None)
    }

    /// Look up: the name in `params` routed to a server or a built-in tool.
    async fn look_up<'p>(
        self: &Arc<Self>,
        m: &Message,
        kind: NameKind,
        params: &'p str,
    ) -> Result<Found<'p>, Unrouted> {
        let params = RawObject::parse(params).map_err(|e| Unrouted::NotAnObject {
            method: m.method().to_string(),
            why: e.to_string(),
        })?;
        let name = params
            .get_str("name")
            .ok_or_else(|| Unrouted::missing(m, "name"))?;
        let (route, named) = self.route_or_login(kind, &name).await?;
        Ok(Found {
            kind,
            route,
            named,
            params,
        })
    }

    /// Look up, by URI: the server that offers the resource `m` names, and its URI.
    pub(super) async fn resource_of(
        &self,
        m: &Message,
    ) -> Result<(Arc<Upstream>, String), Unrouted> {
        let uri = RawObject::parse(m.params().unwrap_or("{}"))
            .ok()
            .and_then(|o| o.get_str("uri").map(Cow::into_owned))
            .ok_or_else(|| Unrouted::missing(m, "uri"))?;
        let up = self.hub.route_uri(self.view, &uri).await?;
        Ok((up, uri))
    }
}

impl<'s> Call<'s> {
    /// A call found by look-up, timed from `t0` (when its request was taken up).
    fn new(session: &'s Arc<Session>, m: &'s Message, policy: &'s Policy, t0: Instant) -> Self {
        Call {
            session,
            m,
            policy,
            t0,
            audit: Record::default(),
            inner: None,
        }
    }

    /// Admit, by name: the audit record started, then permission, rate limit and, for a
    /// cacheable tool, the cache look-up.
    async fn admit_by_name(&mut self, found: &Found<'_>) -> Admitted<'s> {
        let (named, arguments) = (&found.named, found.arguments());
        let hub = &self.session.hub;
        let server_name = hub.server_name(named.upstream);
        let target = Target {
            kind: match found.kind {
                NameKind::Tool => "tool",
                NameKind::Prompt => "prompt",
            },
            qualified: &named.qualified,
            server: &server_name,
            description: &named.description,
            definition: named.definition(),
            arguments,
            ask_every_time: matches!(found.route, Route::Builtin)
                && crate::builtins::ASK_EVERY_TIME.contains(&named.original.as_str()),
            labels: named.flows,
            guard: None,
        };
        let policy = self.policy;
        let ttl = match found.kind {
            NameKind::Tool => policy.cache_ttl(&named.qualified, named.read_only),
            NameKind::Prompt => None,
        };
        // The cache key and the audit record share one canonical form of the arguments.
        let canon: Option<Arc<str>> =
            (ttl.is_some() || policy.audit_enabled()).then(|| canonical(arguments).into());
        self.audit = self.audit_start(named.qualified.clone(), canon.clone());
        if let Some((outcome, refused)) = self.permit(&target).await {
            return Admitted::Answered(outcome, refused);
        }
        policy
            .flows
            .saw(&self.session.flows, &named.qualified, named.flows);
        let Some(ttl) = ttl else {
            self.audit.cache = "off".into();
            return Admitted::Go(None);
        };
        let key = Key::from_canonical(
            named.upstream,
            &named.original,
            canon.unwrap_or_else(|| canonical(arguments).into()),
        );
        self.audit.cache = "miss".into();
        match policy.cache.lookup::<CallReply>(key).await {
            Lookup::Hit(result) => {
                self.audit.cache = "hit".into();
                // Only successful, non-error results are stored.
                self.audit.outcome = "ok".into();
                hub.metrics.cache_hit(named.upstream);
                Admitted::Answered(Outcome::Ok, jsonrpc::result(self.m.id(), &result))
            }
            Lookup::Failed(reply) => {
                let outcome = self.note_outcome(&reply);
                Admitted::Answered(outcome, relay(self.m.id(), &reply))
            }
            Lookup::Claimed(claim) => Admitted::Go(Some((claim, ttl))),
        }
    }

    /// Permission and rate limit. `Some` is the refusal to answer with instead of calling,
    /// and its outcome.
    async fn permit(&mut self, target: &Target<'_>) -> Option<(Outcome, String)> {
        let (m, policy, audit) = (self.m, self.policy, &mut self.audit);
        let target = &*policy.flows.check(target, &self.session.flows);
        audit.guard.clone_from(&target.guard);
        let verdict = policy.permission(target, self.session.as_ref()).await;
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

    /// Dispatch: the call sent to its server or run in process; for a tool, what the
    /// sandbox refused during it is put before the result.
    async fn dispatch(&self, found: &Found<'_>) -> CallReply {
        let (session, named) = (self.session, &found.named);
        let server = found.server();
        let hub = &session.hub;
        let refusals = hub.hosts.mark(server);
        let reply = match &found.route {
            Route::Server(up) => {
                let refused_before = up.refusals().count();
                let upstream_params = found.params.with("name", &named.original_json);
                let sink = self
                    .inner
                    .as_ref()
                    .and_then(|i| i.task.as_deref())
                    .map(|t| t as &dyn super::follow::TaskSink);
                match found.kind {
                    NameKind::Tool => {
                        let reply = session
                            .call_tool_upstream(up, &named.original, &upstream_params, sink)
                            .await;
                        with_path_refusals(up, refused_before, reply).await
                    }
                    NameKind::Prompt => {
                        session
                            .request_upstream(up, self.m.method(), &upstream_params)
                            .await
                    }
                }
            }
            Route::Builtin => self.run_builtin(&named.original, found.arguments()).await,
        };
        match found.kind {
            NameKind::Tool => hub.with_refusals(server, refusals, reply),
            NameKind::Prompt => reply,
        }
    }

    /// A built-in tool, run in process: its result wrapped as if a server had answered, so
    /// the rest of the pipeline treats both alike.
    async fn run_builtin(&self, tool: &str, arguments: &str) -> CallReply {
        let args: serde_json::Value =
            serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null);
        let output = self
            .session
            .hub
            .builtins()
            .call(tool, &args)
            .await
            .unwrap_or_else(|| ToolOutput::unknown_tool(tool));
        Message::parse(output.answer("0").into_boxed_str()).map_err(|e| CallError::Closed {
            server: crate::hub::catalog::BUILTIN_SERVER.into(),
            reason: format!("produced an unreadable result: {e}"),
        })
    }

    /// Settle a dispatched call: its outcome read off the reply, the answer sent and audited,
    /// then the result stored in `claim` (only successful, non-error results — already
    /// redacted, so the cache never holds a secret).
    fn settle(
        mut self,
        server: usize,
        reply: CallReply,
        claim: Option<(Claim<'_>, Duration)>,
    ) -> Reply {
        let outcome = self.note_outcome(&reply);
        let policy = self.policy;
        let line = relay(self.m.id(), &reply);
        let sent = self.answer(server, outcome, line);
        if let Some((claim, ttl)) = claim {
            match reply.as_ref().ok().and_then(Message::result) {
                Some(result) if !is_error_result(result) => {
                    claim.store(Arc::from(policy.redact(result).as_ref()), ttl);
                }
                _ => claim.fail(Arc::new(reply)),
            }
        }
        sent
    }

    /// The audit record as far as it is known before the call; an empty one (nothing
    /// allocated) when auditing is off.
    fn audit_start(&self, target: Arc<str>, canon: Option<Arc<str>>) -> Record {
        let policy = self.policy;
        let (true, Some(canon)) = (policy.audit_enabled(), canon) else {
            return Record::default();
        };
        let arguments = policy.settings.audit.arguments.then(|| {
            serde_json::from_str(&policy.redact(&canon)).unwrap_or(serde_json::Value::Null)
        });
        const METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];
        let method = self.m.method();
        Record {
            at: Some(std::time::SystemTime::now()),
            client: lock(&self.session.client_name).clone(),
            method: METHODS
                .into_iter()
                .find(|known| *known == method)
                .map_or_else(|| method.to_string().into(), Cow::Borrowed),
            target,
            cache: "off".into(),
            hash_later: Some(canon),
            arguments,
            program: self.inner.as_ref().and_then(|i| i.program.clone()),
            task: self
                .inner
                .as_ref()
                .and_then(|i| i.task.as_ref().map(|t| t.id.clone())),
            ..Record::default()
        }
    }

    /// Reads the outcome off a server's reply: for the metrics from what is already parsed,
    /// and for the audit (when on) in detail, sparing [`Call::answer`] a re-parse of the
    /// line it becomes. Failures to get a reply are left to `answer`, which records the
    /// error object the client was sent.
    fn note_outcome(&mut self, reply: &CallReply) -> Outcome {
        let counted = match reply {
            Ok(msg) if msg.error().is_none() => Outcome::Ok,
            _ => Outcome::Error,
        };
        let policy = self.policy;
        if !policy.audit_enabled() {
            return counted;
        }
        let Ok(msg) = reply else { return counted };
        let audit = &mut self.audit;
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

    /// Counts the call (of server `server`, with `outcome`), sends the answer, then
    /// completes and files the audit record: that bookkeeping need not delay the client.
    fn answer(self, server: usize, outcome: Outcome, line: String) -> Reply {
        let Call {
            session,
            policy,
            t0,
            mut audit,
            inner,
            ..
        } = self;
        session.hub.metrics.call(server, outcome, t0.elapsed());
        super::traced::answered(&line, policy);
        let send = |line: String| match inner {
            // Redacted before the program sees it, as before the client does.
            Some(inner) => {
                let _ = inner.to.send(policy.redact(&line).into_owned());
            }
            None => session.send(line),
        };
        if !policy.audit_enabled() {
            send(line);
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
        send(line);
        // A URI or a denial message can quote a secret.
        if let Cow::Owned(redacted) = policy.redact(&audit.target) {
            audit.target = redacted.into();
        }
        audit.error = audit.error.map(|e| policy.redact(&e).into_owned());
        policy.audit(audit);
        Reply::Sent
    }
}

/// A `tools/call` result with `isError: true`.
pub(super) fn is_error_result(result: &str) -> bool {
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
    use super::{NotRouted, Unrouted, is_error_result};
    use crate::hub::session::login::LoginError;
    use crate::jsonrpc::Message;
    use serde_json::{Value, json};

    fn request(method: &str) -> Message {
        let line = format!(r#"{{"jsonrpc":"2.0","id":4,"method":"{method}","params":{{}}}}"#);
        Message::parse(line.into()).unwrap()
    }

    fn answer(e: &Unrouted, method: &str) -> Value {
        serde_json::from_str(&e.line(&request(method))).unwrap()
    }

    #[test]
    fn an_unrouted_call_is_rendered_only_at_the_edge() {
        let declined = Unrouted::from(NotRouted::from(LoginError::Declined("gh".into())));
        let why = "the login to server 'gh' was declined; to log in from a terminal instead, run `openpact auth login gh`";
        // A tool call gets a tool error the model can read; a prompt the server's state.
        assert_eq!(
            answer(&declined, "tools/call")["result"],
            json!({"content": [{"type": "text", "text": why}], "isError": true})
        );
        assert_eq!(
            answer(&declined, "prompts/get")["error"],
            json!({"code": crate::upstream::code::UNAVAILABLE, "message": why})
        );
        let missing = Unrouted::missing(&request("resources/read"), "uri");
        assert_eq!(
            answer(&missing, "resources/read")["error"],
            json!({"code": crate::jsonrpc::code::INVALID_PARAMS, "message": "resources/read needs a string `uri`"})
        );
        let unknown = Unrouted::from(crate::hub::RouteError::NoServerForUri("x:/y".into()));
        assert_eq!(
            answer(&unknown, "resources/read")["error"]["code"],
            json!(crate::hub::routing::RESOURCE_NOT_FOUND)
        );
    }

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
