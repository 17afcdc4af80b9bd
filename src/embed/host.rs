//! What the host program brings to the hub: its answers to permission questions, and tools
//! of its own served beside OpenPact's built-ins.

use crate::builtins::{BoxFuture, Group, ToolDef, ToolOutput};
use crate::policy::prompt::{Answer, Question};
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// A permission question the policy would put to a person (see `permissions` in the
/// config: an `ask` rule, `"default": "ask"`, a changed definition, a tool that asks on every
/// call, or a host a sandboxed server wants to reach).
#[derive(Debug, Clone)]
pub struct Permission {
    /// `tool`, `prompt`, `resource`, or `host` (a sandboxed server's network request;
    /// `name` is then `host:port`).
    pub kind: String,
    /// The qualified name: `server:tool`, or a bare name for a built-in tool.
    pub name: String,
    /// The server it belongs to.
    pub server: String,
    /// The tool's or prompt's description.
    pub description: String,
    /// The call's arguments as JSON text, shortened and with secrets hidden.
    pub arguments: String,
    /// Why the question comes again, when a remembered answer no longer applies.
    pub changed: Option<String>,
    /// Why the data-flow guard (`openpact.flows`) asks about this call: the session's
    /// earlier private and untrusted calls. Such a question is never rememberable.
    pub guard: Option<String>,
    /// Whether an answer can be remembered ([`Decision::AllowAlways`],
    /// [`Decision::DenyAlways`]); when not, those count for this call only.
    pub rememberable: bool,
}

/// The host's answer to a [`Permission`] question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Allow this call.
    AllowOnce,
    /// Allow it, and remember that in the state dir (bound to the tool's definition).
    AllowAlways,
    /// Refuse this call: the caller gets a tool error saying so.
    Deny,
    /// Refuse it, and remember the refusal.
    DenyAlways,
}

/// The hook as the policy calls it.
pub(super) fn decider(
    hook: impl Fn(&Permission) -> Decision + Send + Sync + 'static,
) -> crate::policy::prompt::Decider {
    Arc::new(move |q: &Question| {
        let ask = Permission {
            kind: q.kind.to_string(),
            name: q.qualified.clone(),
            server: q.server.clone(),
            description: q.description.clone(),
            arguments: q.arguments.clone(),
            changed: q.changed.clone(),
            guard: q.guard.clone(),
            rememberable: q.rememberable,
        };
        match hook(&ask) {
            Decision::AllowOnce => Answer::Once,
            Decision::AllowAlways => Answer::Always,
            Decision::Deny => Answer::Deny { remember: false },
            Decision::DenyAlways => Answer::Deny { remember: true },
        }
    })
}

type Handler = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

/// A tool of the host program, served by the hub under its bare name beside OpenPact's own
/// built-in tools, through the same policy as every tool (permissions, limits, cache, audit).
#[derive(Clone)]
pub struct HostTool {
    def: ToolDef,
    handler: Handler,
}

impl std::fmt::Debug for HostTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTool")
            .field("name", &self.def.name)
            .finish_non_exhaustive()
    }
}

impl HostTool {
    /// The tool's name.
    pub fn name(&self) -> &str {
        self.def.name
    }

    /// A tool called `name` (pick one OpenPact's built-ins do not use), described by
    /// `description`, taking arguments that `input_schema` (a JSON Schema object) accepts:
    /// the hub checks them against it before `handler` runs. The handler's `Ok` value is
    /// the result (a string as text; anything else as JSON text and structured content);
    /// its `Err` is a tool error the caller reads.
    pub fn new<F, Fut>(name: &str, description: &str, input_schema: Value, handler: F) -> HostTool
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        HostTool {
            def: ToolDef {
                // Built-in names are static; a host adds its few tools once, for the
                // program's life, so the name is kept for good.
                name: Box::leak(name.to_string().into_boxed_str()),
                description: description.to_string(),
                input_schema,
                annotations: None,
            },
            handler: Arc::new(move |args| Box::pin(handler(args))),
        }
    }
}

/// The host's tools as one group of built-ins.
pub(super) struct HostTools(pub(super) Vec<HostTool>);

impl Group for HostTools {
    fn tools(&self) -> Vec<ToolDef> {
        self.0.iter().map(|t| t.def.clone()).collect()
    }

    fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Some(t) = self.0.iter().find(|t| t.def.name == tool) else {
                return ToolOutput::unknown_tool(tool);
            };
            match (t.handler)(args.clone()).await {
                Ok(Value::String(text)) => ToolOutput::ok(text),
                Ok(value) => ToolOutput::json(value),
                Err(why) => ToolOutput::error(why),
            }
        })
    }
}
