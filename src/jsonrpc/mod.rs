//! JSON-RPC 2.0 for the forwarding path: a parse-once envelope that keeps every byte it does
//! not need to touch, newline framing with a size cap, and builders for outgoing lines.
//!
//! Knows nothing of MCP methods. Ids are kept verbatim as JSON text so that `1`, `"1"` and
//! `1.0` stay distinct and big integers survive.

mod framing;
mod message;
mod object;
pub mod scan;

pub use framing::{Frame, Framer, id_in_edges};
pub use message::{Kind, Message, Messages, ParseError, parse_frame};
pub use object::{MemberProbe, RawObject};

/// Standard JSON-RPC error codes.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// Serialises a string as a JSON string literal.
pub fn quote(s: &str) -> String {
    // Serialising a &str cannot fail; the fallback keeps this total without a panic path.
    serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""))
}

/// `{"jsonrpc":"2.0","id":ID,"method":M[,"params":P]}` — `id` and `params` are JSON text.
pub fn request(id: &str, method: &str, params: Option<&str>) -> String {
    let mut s = String::with_capacity(48 + id.len() + method.len() + params.map_or(0, str::len));
    s.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    s.push_str(id);
    s.push_str(",\"method\":");
    s.push_str(&quote(method));
    if let Some(p) = params {
        s.push_str(",\"params\":");
        s.push_str(p);
    }
    s.push('}');
    s
}

/// `{"jsonrpc":"2.0","method":M[,"params":P]}`.
pub fn notification(method: &str, params: Option<&str>) -> String {
    let mut s = String::with_capacity(40 + method.len() + params.map_or(0, str::len));
    s.push_str("{\"jsonrpc\":\"2.0\",\"method\":");
    s.push_str(&quote(method));
    if let Some(p) = params {
        s.push_str(",\"params\":");
        s.push_str(p);
    }
    s.push('}');
    s
}

/// `{"jsonrpc":"2.0","id":ID,"result":R}`.
pub fn result(id: &str, result: &str) -> String {
    let mut s = String::with_capacity(36 + id.len() + result.len());
    s.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    s.push_str(id);
    s.push_str(",\"result\":");
    s.push_str(result);
    s.push('}');
    s
}

/// `{"jsonrpc":"2.0","id":ID,"error":E}` where `E` is a complete error object as JSON text.
pub fn error_raw(id: &str, error: &str) -> String {
    let mut s = String::with_capacity(36 + id.len() + error.len());
    s.push_str("{\"jsonrpc\":\"2.0\",\"id\":");
    s.push_str(id);
    s.push_str(",\"error\":");
    s.push_str(error);
    s.push('}');
    s
}

/// An error object `{"code":C,"message":M[,"data":D]}` as JSON text.
pub fn error_object(code: i64, message: &str, data: Option<&str>) -> String {
    let mut s = format!("{{\"code\":{code},\"message\":{}", quote(message));
    if let Some(d) = data {
        s.push_str(",\"data\":");
        s.push_str(d);
    }
    s.push('}');
    s
}

/// A whole error response line.
pub fn error(id: &str, code: i64, message: &str, data: Option<&str>) -> String {
    error_raw(id, &error_object(code, message, data))
}
