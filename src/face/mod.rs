//! The outside world's way in: `openpact serve` as one MCP server on stdio.
//!
//! Stdout belongs to the protocol here: nothing in this module (or below it) prints.

pub mod status_file;
pub mod stdio;
