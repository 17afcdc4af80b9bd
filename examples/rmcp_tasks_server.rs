//! An MCP server with tasks (the 2026-07-28 extension `io.modelcontextprotocol/tasks`, SEP-2663)
//! written with rmcp's own task manager: an independent peer for the tests of tasks through
//! the hub. Serves over stdio, in either era (rmcp answers `initialize` and `server/discover`).
//!
//! Tools: `slow_count` (counts `seconds`, one status message a second; needs a task),
//! `ask_name` (asks for a name through an elicitation input request; needs a task) and `quick`
//! (never a task). Asked for a tool that needs a task without the extension declared, it
//! answers -32021 naming the extension, as the extension says. Each task's start and end are
//! written to stderr (`task <id> started`, `... completed|cancelled`), where tests read them.
//!
//!     cargo build --example rmcp_tasks_server   (cargo test --all-targets builds it too)
#![allow(
    clippy::print_stderr,
    reason = "stderr is the server's log, where the tests read what became of each task"
)]

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, CreateTaskResult, GetTaskParams, GetTaskResult, InputRequest, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::json;
use std::time::Duration;

/// How often a client is told to poll: short, so tests run fast.
const POLL_MS: u64 = 100;

#[derive(Clone, Default)]
struct TaskServer {
    tasks: TaskManager,
}

fn tools() -> Result<Vec<Tool>, serde_json::Error> {
    serde_json::from_value(json!([
        {
            "name": "slow_count",
            "description": "Counts to `seconds`, one a second, reporting each count as the task's status. Runs as a task.",
            "inputSchema": {"type": "object", "properties": {"seconds": {"type": "integer", "minimum": 0}}, "required": ["seconds"]}
        },
        {
            "name": "ask_name",
            "description": "Asks the user for their name (an elicitation during the task) and greets them. Runs as a task.",
            "inputSchema": {"type": "object", "properties": {}}
        },
        {
            "name": "quick",
            "description": "Answers at once; never a task.",
            "inputSchema": {"type": "object", "properties": {}}
        }
    ]))
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s.into())])
}

/// Logs how a task ended, for whoever reads stderr.
fn ended(id: &str, outcome: &Result<CallToolResult, TaskExit>) {
    let how = match outcome {
        Ok(_) => "completed",
        Err(TaskExit::Cancelled) => "cancelled",
        Err(TaskExit::Error(_)) => "failed",
    };
    eprintln!("task {id} {how}");
}

impl TaskServer {
    fn slow_count(&self, seconds: u64) -> CreateTaskResult {
        let options = TaskOptions::new()
            .with_poll_interval_ms(POLL_MS)
            .with_status_message(format!("counting to {seconds}"));
        CreateTaskResult::new(self.tasks.spawn(options, move |ctx| {
            Box::pin(async move {
                let run = async {
                    for i in 1..=seconds {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        ctx.set_status_message(format!("counted {i} of {seconds}"));
                    }
                };
                let outcome = tokio::select! {
                    () = ctx.cancelled() => Err(TaskExit::Cancelled),
                    () = run => Ok(text(format!("counted to {seconds}"))),
                };
                ended(ctx.task_id(), &outcome);
                outcome
            })
        }))
    }

    fn ask_name(&self) -> Result<CreateTaskResult, ErrorData> {
        let request: InputRequest = serde_json::from_value(json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "What is your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
            }
        }))
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let options = TaskOptions::new().with_poll_interval_ms(POLL_MS);
        Ok(CreateTaskResult::new(self.tasks.spawn(
            options,
            move |ctx| {
                Box::pin(async move {
                    let outcome = match ctx.request_input("name", request).await {
                        Ok(answer) => match answer["content"]["name"].as_str() {
                            Some(name) if answer["action"] == "accept" => {
                                Ok(text(format!("Hello, {name}!")))
                            }
                            _ => Ok(text("Hello, whoever you are.")),
                        },
                        Err(exit) => Err(exit),
                    };
                    ended(ctx.task_id(), &outcome);
                    outcome
                })
            },
        )))
    }
}

/// A task just made, logged for whoever reads stderr.
fn started(create: CreateTaskResult) -> CallToolResponse {
    eprintln!("task {} started", create.task.task_id);
    CallToolResponse::Task(create)
}

impl ServerHandler for TaskServer {
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = tools().map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let declared = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        let needs_task = || {
            ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            )
        };
        let args = request.arguments.unwrap_or_default();
        match request.name.as_ref() {
            "quick" => Ok(CallToolResponse::from(text("quick"))),
            "slow_count" if declared => {
                let seconds = args.get("seconds").and_then(|s| s.as_u64()).unwrap_or(1);
                Ok(started(self.slow_count(seconds)))
            }
            "ask_name" if declared => Ok(started(self.ask_name()?)),
            "slow_count" | "ask_name" => Err(needs_task()),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        eprintln!("task {} cancel requested", request.task_id);
        self.tasks.cancel_task(&request.task_id)
    }

    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let service = TaskServer::default()
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
