//! Adapters for tests that drive the hub with rmcp (the Rust SDK) as its client.

use super::{StderrLog, WAIT};
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, Service, ServiceExt};
use serde_json::Value;
use std::process::Stdio;
use tokio::process::Command;

/// `cmd` (an `openpact` serving over stdio) as an rmcp child-process transport; its stderr
/// is kept for the failure report.
pub fn transport(cmd: Command) -> (TokioChildProcess, StderrLog) {
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn openpact");
    (
        transport,
        StderrLog::drain("openpact", stderr.expect("stderr is piped")),
    )
}

/// `client` connected over `transport`: the handshake done within [`WAIT`].
pub async fn connect<S: Service<RoleClient>>(
    client: S,
    transport: TokioChildProcess,
) -> RunningService<RoleClient, S> {
    tokio::time::timeout(WAIT, client.serve(transport))
        .await
        .expect("handshake in time")
        .expect("rmcp initialize")
}

/// Tool arguments as rmcp wants them.
pub fn obj(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

/// The text of a result's first content block.
pub fn first_text(r: &CallToolResult) -> String {
    let content = serde_json::to_value(&r.content).unwrap();
    content[0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {content}"))
        .to_string()
}

/// An rmcp client that declares elicitation and answers each prompt with the next queued
/// answer (cancelling when none is left), recording what it was asked and the progress it
/// was sent. `clientInfo.name` is "test-rmcp".
#[derive(Clone, Default)]
pub struct Answering {
    pub answers:
        std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<rmcp::model::ElicitResult>>>,
    pub asked: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    pub progress: std::sync::Arc<std::sync::Mutex<Vec<rmcp::model::ProgressNotificationParam>>>,
}

impl rmcp::ClientHandler for Answering {
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.asked
            .lock()
            .unwrap()
            .push(serde_json::to_value(&request).unwrap());
        Ok(self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(rmcp::model::ElicitResult::new(
                rmcp::model::ElicitationAction::Cancel,
            )))
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        serde_json::from_value(serde_json::json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "test-rmcp", "version": "0"},
        }))
        .unwrap()
    }
}

/// A `mcpServers` entry for the rmcp server with tasks (`examples/rmcp_tasks_server.rs`), with
/// a per-request `timeout`. `cargo test --all-targets` builds examples only as test harnesses,
/// so the runnable binary is built here (once per test run) when `cargo build --example
/// rmcp_tasks_server` has not left it beside the test binary.
pub fn tasks_server(timeout: &str) -> Value {
    static BUILT: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
    // The test binary is target/<profile>/deps/integration-…; examples sit beside deps.
    let exe = std::env::current_exe().expect("the test binary's path");
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>")
        .join("examples/rmcp_tasks_server");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if !*built {
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--example", "rmcp_tasks_server"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build --example rmcp_tasks_server");
        assert!(
            status.success(),
            "cargo build --example rmcp_tasks_server failed"
        );
        *built = true;
    }
    assert!(
        path.exists(),
        "{} is missing after building it",
        path.display()
    );
    serde_json::json!({"command": path, "timeout": timeout})
}
