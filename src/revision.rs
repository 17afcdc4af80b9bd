//! The MCP revision of the stateless era openpact speaks on both sides, 2026-07-28: its
//! version string, the reserved `_meta` keys every request of it carries, and its error
//! codes (a leaf: imports no layer).

/// The one stateless revision.
pub const STATELESS_VERSION: &str = "2026-07-28";

/// The reserved `_meta` keys of a 2026-07-28 request or result (§2.2).
pub mod meta {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
}

/// Error codes only the 2026-07-28 revision has (§1.3, §2.2): a peer answering with one
/// is stateless, whatever else it says; each goes with HTTP 400.
pub mod code {
    pub const HEADER_MISMATCH: i64 = -32020;
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
    pub const UNSUPPORTED_VERSION: i64 = -32022;
}
