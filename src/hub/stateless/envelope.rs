//! What a 2026-07-28 request says about itself: the client it comes from (its envelope in
//! `_meta`), the request line the session serves without it, and the digest that binds a
//! `requestState` to the request it may come back with.

use super::state;
use super::{Out, Status, VERSION};
use crate::hub::{LOG_LEVELS, log_rank};
use crate::jsonrpc::{self, Message, code};
use crate::revision::code::UNSUPPORTED_VERSION;
use crate::revision::meta::{
    CLIENT_CAPABILITIES as KEY_CAPS, CLIENT_INFO as KEY_INFO, LOG_LEVEL as KEY_LOG,
    PROTOCOL_VERSION as KEY_VERSION,
};
use serde_json::{Value, json};

/// What a request says about its client.
pub(super) struct Envelope {
    pub(super) capabilities: String,
    pub(super) client_name: String,
    pub(super) log_rank: Option<usize>,
}

impl Envelope {
    pub(super) fn read(m: &Message, params: &Value) -> Result<Envelope, Out> {
        let id = m.id();
        let meta = params.get("_meta");
        let version = meta.and_then(|m| m.get(KEY_VERSION));
        match version {
            Some(Value::String(v)) if v == VERSION => {}
            Some(Value::String(v)) => {
                let data = json!({"supported": [VERSION], "requested": v}).to_string();
                return Err(Out::error(
                    id,
                    UNSUPPORTED_VERSION,
                    &format!(
                        "Unsupported protocol version {v:?}: requests without initialize speak {VERSION}; older revisions start with initialize"
                    ),
                    Some(&data),
                    Status::BadRequest,
                ));
            }
            _ => {
                return Err(Out::error(
                    id,
                    code::INVALID_PARAMS,
                    &format!("params._meta[{KEY_VERSION:?}] must be a string"),
                    None,
                    Status::BadRequest,
                ));
            }
        }
        let capabilities = match meta.and_then(|m| m.get(KEY_CAPS)) {
            Some(c @ Value::Object(_)) => c.to_string(),
            _ => {
                return Err(Out::error(
                    id,
                    code::INVALID_PARAMS,
                    &format!(
                        "params._meta must carry {KEY_CAPS:?}, an object ({{}} declares no optional capability)"
                    ),
                    None,
                    Status::BadRequest,
                ));
            }
        };
        let log_rank = match meta.and_then(|m| m.get(KEY_LOG)) {
            None | Some(Value::Null) => None,
            Some(Value::String(level)) if log_rank(level).is_some() => log_rank(level),
            Some(other) => {
                return Err(Out::error(
                    id,
                    code::INVALID_PARAMS,
                    &format!(
                        "params._meta[{KEY_LOG:?}] is {other}, not one of {}",
                        LOG_LEVELS.join(", ")
                    ),
                    None,
                    Status::BadRequest,
                ));
            }
        };
        let client_name = meta
            .and_then(|m| m.get(KEY_INFO))
            .and_then(|i| i.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_string();
        Ok(Envelope {
            capabilities,
            client_name,
            log_rank,
        })
    }
}

/// The request line the session serves: the client's, without what only this module reads.
/// Public (hidden) for the fuzz targets in `tests/fuzz`.
#[doc(hidden)]
pub fn inner_request(id: &str, method: &str, params: &Value) -> String {
    let mut params = params.clone();
    if let Some(obj) = params.as_object_mut() {
        obj.remove("requestState");
        // A retry's answers are the hub's to give; `tasks/update` carries its own.
        if method != "tasks/update" {
            obj.remove("inputResponses");
        }
        let empty = obj
            .get_mut("_meta")
            .and_then(Value::as_object_mut)
            .map(|meta| {
                for key in [KEY_VERSION, KEY_CAPS, KEY_INFO, KEY_LOG] {
                    meta.remove(key);
                }
                meta.is_empty()
            });
        if empty == Some(true) {
            obj.remove("_meta");
        }
    }
    jsonrpc::request(id, method, Some(&params.to_string()))
}

pub(super) fn progress_token(params: &Value) -> Option<Value> {
    params.get("_meta")?.get("progressToken").cloned()
}

/// Binds a `requestState` to the request it may come back with. Public (hidden) for the
/// fuzz targets in `tests/fuzz`.
#[doc(hidden)]
pub fn request_digest(origin: &str, method: &str, params: &Value) -> String {
    let target = params
        .get("name")
        .or_else(|| params.get("uri"))
        .map(Value::to_string)
        .unwrap_or_default();
    let arguments = params
        .get("arguments")
        .map(|a| crate::policy::canonical::canonical(&a.to_string()))
        .unwrap_or_default();
    state::digest(&[origin, method, &target, &arguments])
}
