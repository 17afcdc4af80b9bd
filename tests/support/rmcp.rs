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
