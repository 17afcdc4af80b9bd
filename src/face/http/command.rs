//! A stdio MCP server served directly over Streamable HTTP, without a hub: each HTTP session
//! gets a child process of its own, through the same face code as `openpact serve --http`
//! (same routes, guard and session handling). The fixture's `--http` uses it, so a call
//! "direct over HTTP" and one through the hub's HTTP face differ only by the hub.

use super::session::Backend;
use super::{HttpError, HttpFace, bind, start_backend};
use crate::config::HttpSettings;
use crate::transport::ChildSpec;
use std::net::SocketAddr;

/// Binds `address` (`settings.address` when `None`; the same checks as `serve --http`:
/// loopback, or a token) and serves `command` on `/mcp`, one child per session, each
/// started when its client sends `initialize` and stopped when the session ends. Returns
/// the address bound (useful with port 0) and the running face, to stop when done.
pub async fn serve_stdio_command(
    settings: &HttpSettings,
    address: Option<&str>,
    command: ChildSpec,
) -> Result<(SocketAddr, HttpFace), HttpError> {
    let bound = bind(settings, address).await?;
    let addr = bound.addr;
    Ok((
        addr,
        start_backend(bound, Backend::Command(command), settings),
    ))
}
