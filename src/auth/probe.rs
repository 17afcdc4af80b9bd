//! The unauthenticated `initialize` POST that `openpact auth login` sends first, to get the
//! server's 401 challenge (its `WWW-Authenticate` starts discovery).

use super::http::{http, without_query};
use url::Url;

/// How the server answered a request without a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub status: u16,
    pub www_authenticate: Option<String>,
}

impl Probe {
    /// The server asked for credentials (401, or 403 with a challenge).
    pub fn wants_login(&self) -> bool {
        self.status == 401 || (self.status == 403 && self.www_authenticate.is_some())
    }
}

/// POSTs an `initialize` to `url` with the configured `headers` (minus any `Authorization`),
/// as a Streamable HTTP client would, and ends the session it may have opened.
pub async fn probe(url: &str, headers: &[(String, String)]) -> Result<Probe, String> {
    let target = Url::parse(url).map_err(|e| format!("\"{url}\" is not a valid URL: {e}"))?;
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "openpact", "version": env!("CARGO_PKG_VERSION")},
        },
    });
    let client = http()?.plain();
    let mut request = client
        .post(target.clone())
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json");
    for (k, v) in headers {
        if !k.eq_ignore_ascii_case("authorization") {
            request = request.header(k.as_str(), v.as_str());
        }
    }
    let response = request
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("cannot reach {}: {e}", without_query(&target)))?;
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    let www_authenticate = header("www-authenticate");
    let session = header("mcp-session-id");
    drop(response);
    if let Some(session) = session {
        // A server that let us in opened a session; close it rather than leave it dangling.
        let _ = client
            .delete(target)
            .header("Mcp-Session-Id", session)
            .send()
            .await;
    }
    Ok(Probe {
        status,
        www_authenticate,
    })
}
