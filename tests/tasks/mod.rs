//! MCP Tasks through the hub, both eras: the hub's own task face, servers' tasks followed,
//! and real peers' clients.

mod clients;
mod face;
mod follow;
mod rmcp;
