//! The embedding API's requests: JSON values in, the hub's in-process client session
//! ([`crate::hub::LocalClient`], the CLI's too) in between, a result or a typed [`Error`]
//! out.

use super::Error;
use crate::hub::LocalClient;
use serde_json::Value;
use std::sync::Arc;

pub(super) struct Client(LocalClient);

impl Client {
    /// Opens a session on `hub`, declaring no client capabilities: the host answers
    /// permission questions through its hook, not through elicitation. Its notifications are
    /// not read: the host learns of changes through [`super::Events`], from the hub itself.
    pub(super) async fn connect(hub: Arc<crate::hub::Hub>) -> Result<Client, Error> {
        let (client, _messages) = LocalClient::connect(hub, "openpact-embed", "{}")
            .await
            .ok_or(Error::Closed)?;
        Ok(Client(client))
    }

    /// Sends `method` and waits for its result; a JSON-RPC error becomes [`Error::Rpc`].
    pub(super) async fn request(&self, method: &str, params: &Value) -> Result<Value, Error> {
        let answer = self
            .0
            .request(method, &params.to_string())
            .await
            .ok_or(Error::Closed)?;
        if let Some(error) = answer.error() {
            let error: Value = serde_json::from_str(error).unwrap_or_default();
            return Err(Error::Rpc {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            });
        }
        let result = answer.result().unwrap_or("null");
        serde_json::from_str(result).map_err(|e| Error::Answer {
            method: method.to_string(),
            why: e.to_string(),
        })
    }
}
