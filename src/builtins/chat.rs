//! `chat_send`: post a message through Discord, Telegram, Slack or a generic webhook, each
//! over its plain REST API at a configured base URL (loopback stand-ins in tests).
//!
//! Differences from the original, which goes through long-running bot sessions: a provider
//! is usable when its token variable is set (no gateway connection needed); a generic
//! webhook provider exists; Discord and Telegram messages longer than the platform's limit
//! are sent in several parts instead of failing; Slack's `200 {"ok": false}` answers are
//! errors; target ids are checked before they reach a URL path.

use std::sync::Arc;

use serde_json::{Value, json};

use super::net::{Fetcher, HttpRequest, HttpResponse};
use super::{BoxFuture, Group, ToolDef, ToolOutput, hints};
use crate::config::{ChatProvider, ChatSettings, WebSettings};

/// Discord's message length limit, in characters.
const DISCORD_LIMIT: usize = 2000;
/// Telegram's message length limit, in characters.
const TELEGRAM_LIMIT: usize = 4096;

/// One usable provider: its API base (or webhook URL) and token.
struct Active {
    name: &'static str,
    base: String,
    /// Never logged or shown (Telegram's sits in the URL path, which errors never include).
    token: String,
}

/// The chat group.
pub struct Chat {
    fetcher: Fetcher,
    active: Vec<Active>,
}

/// The chat group, or `None` when no provider is usable (token variables unset or empty, no
/// webhook URL).
pub fn group(c: &ChatSettings, web: &WebSettings) -> Option<Arc<dyn Group>> {
    with_tokens(c, web, |var| {
        std::env::var(var).ok().filter(|t| !t.is_empty())
    })
}

/// The chat group, reading tokens through `token` (variable name → value).
pub fn with_tokens(
    c: &ChatSettings,
    web: &WebSettings,
    token: impl Fn(&str) -> Option<String>,
) -> Option<Arc<dyn Group>> {
    let mut active = Vec::new();
    let providers: [(&'static str, &Option<ChatProvider>); 3] = [
        ("discord", &c.discord),
        ("telegram", &c.telegram),
        ("slack", &c.slack),
    ];
    for (name, p) in providers {
        let Some(p) = p else { continue };
        match token(&p.token_env).filter(|t| !t.is_empty()) {
            Some(t) => active.push(Active {
                name,
                base: p.base_url.trim_end_matches('/').to_string(),
                token: t,
            }),
            None => tracing::info!(
                provider = name,
                variable = %p.token_env,
                "chat provider is off: its token variable is unset or empty"
            ),
        }
    }
    if let Some(url) = &c.webhook {
        active.push(Active {
            name: "webhook",
            base: url.clone(),
            token: String::new(),
        });
    }
    if active.is_empty() {
        return None;
    }
    // Provider URLs are configuration, not model input: no private-address guard.
    let fetcher = match Fetcher::new(web, false) {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!("chat tools are off: {e}");
            return None;
        }
    };
    Some(Arc::new(Chat { fetcher, active }))
}

impl Group for Chat {
    fn tools(&self) -> Vec<ToolDef> {
        let names: Vec<&str> = self.active.iter().map(|a| a.name).collect();
        vec![ToolDef {
            name: "chat_send",
            description: format!(
                "Send a message through a chat provider ({}). Target: `user:<id>` (direct \
                 message, Discord), `channel:<id>`, or a bare id (a Telegram chat id, a Slack \
                 channel id).",
                names.join(", ")
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "provider": {"type": "string", "enum": names, "description": "Which provider to send through"},
                    "target": {"type": "string", "description": "user:<id>, channel:<id>, or a bare id"},
                    "message": {"type": "string", "description": "The message text"}
                },
                "required": ["provider", "target", "message"]
            }),
            annotations: Some(hints::posts("Send a chat message")),
        }]
    }

    fn call<'a>(&'a self, tool: &'a str, args: &'a Value) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            match tool {
                "chat_send" => self.send(args).await,
                other => ToolOutput::unknown_tool(other),
            }
        })
    }
}

/// A target without its `user:` / `channel:` prefix, and whether it named a user.
fn split_target(target: &str) -> (bool, &str) {
    if let Some(id) = target.strip_prefix("user:") {
        (true, id.trim())
    } else {
        (
            false,
            target.strip_prefix("channel:").unwrap_or(target).trim(),
        )
    }
}

impl Chat {
    async fn send(&self, args: &Value) -> ToolOutput {
        let get = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
        let (provider, target, message) =
            (get("provider").trim(), get("target").trim(), get("message"));
        if provider.is_empty() || target.is_empty() || message.is_empty() {
            return ToolOutput::error("provider, target, and message are all required");
        }
        let Some(p) = self.active.iter().find(|a| a.name == provider) else {
            let names: Vec<&str> = self.active.iter().map(|a| a.name).collect();
            return ToolOutput::error(format!(
                "provider {provider:?} is not active (available: {})",
                names.join(", ")
            ));
        };
        let sent = match p.name {
            "discord" => self.discord(p, target, message).await,
            "telegram" => self.telegram(p, target, message).await,
            "slack" => self.slack(p, target, message).await,
            _ => self.webhook(p, target, message).await,
        };
        match sent {
            Ok(()) => ToolOutput::ok(format!("Message sent via {provider} to {target}")),
            Err(e) => ToolOutput::error(format!("failed to send message: {e}")),
        }
    }

    async fn post(
        &self,
        url: String,
        auth: Option<String>,
        body: &Value,
    ) -> Result<HttpResponse, String> {
        let mut headers = vec![(
            "Content-Type".to_string(),
            "application/json; charset=utf-8".to_string(),
        )];
        if let Some(a) = auth {
            headers.push(("Authorization".into(), a));
        }
        self.fetcher
            .fetch(HttpRequest {
                method: "POST".into(),
                url,
                headers,
                body: Some(body.to_string().into_bytes()),
                timeout: None,
            })
            .await
            .map_err(|e| e.to_string())
    }

    async fn discord(&self, p: &Active, target: &str, message: &str) -> Result<(), String> {
        let (user, id) = split_target(target);
        // Snowflakes are numbers; checking keeps the id a single path segment.
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("invalid Discord ID: {id:?}"));
        }
        let auth = || Some(format!("Bot {}", p.token));
        let channel = if user {
            let resp = self
                .post(
                    format!("{}/users/@me/channels", p.base),
                    auth(),
                    &json!({ "recipient_id": id }),
                )
                .await?;
            let v = expect_2xx("Discord", &resp)?;
            match v.get("id").and_then(Value::as_str) {
                Some(c) if !c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()) => c.to_string(),
                _ => return Err("Discord API error: no DM channel id in the response".into()),
            }
        } else {
            id.to_string()
        };
        for part in split_message(message, DISCORD_LIMIT) {
            let resp = self
                .post(
                    format!("{}/channels/{channel}/messages", p.base),
                    auth(),
                    &json!({ "content": part }),
                )
                .await?;
            expect_2xx("Discord", &resp)?;
        }
        Ok(())
    }

    async fn telegram(&self, p: &Active, target: &str, message: &str) -> Result<(), String> {
        let (_, id) = split_target(target);
        let chat_id: i64 = id
            .parse()
            .map_err(|_| "invalid Telegram chat ID".to_string())?;
        for part in split_message(message, TELEGRAM_LIMIT) {
            let resp = self
                .post(
                    format!("{}/bot{}/sendMessage", p.base, p.token),
                    None,
                    &json!({ "chat_id": chat_id, "text": part }),
                )
                .await?;
            let v = expect_2xx("Telegram", &resp)?;
            if v.get("ok") == Some(&Value::Bool(false)) {
                return Err(format!("Telegram API error: {}", describe(&v)));
            }
        }
        Ok(())
    }

    async fn slack(&self, p: &Active, target: &str, message: &str) -> Result<(), String> {
        let (_, id) = split_target(target);
        let resp = self
            .post(
                format!("{}/chat.postMessage", p.base),
                Some(format!("Bearer {}", p.token)),
                &json!({ "channel": id, "text": message }),
            )
            .await?;
        let v = expect_2xx("Slack", &resp)?;
        // Slack reports failures as 200 with `ok: false`.
        if v.get("ok") != Some(&Value::Bool(true)) {
            return Err(format!("Slack API error: {}", describe(&v)));
        }
        Ok(())
    }

    async fn webhook(&self, p: &Active, target: &str, message: &str) -> Result<(), String> {
        let resp = self
            .post(
                p.base.clone(),
                None,
                &json!({ "text": message, "target": target }),
            )
            .await?;
        if !resp.is_success() {
            return Err(format!(
                "webhook error: {}",
                status_and_message(&resp, None)
            ));
        }
        Ok(())
    }
}

/// The JSON body of a 2xx answer (`{}` when empty or not JSON), else an API error.
fn expect_2xx(api: &str, resp: &HttpResponse) -> Result<Value, String> {
    let v = serde_json::from_slice::<Value>(&resp.body).ok();
    if !resp.is_success() {
        return Err(format!(
            "{api} API error: {}",
            status_and_message(resp, v.as_ref())
        ));
    }
    Ok(v.unwrap_or_else(|| json!({})))
}

/// `<status> - <message>`, the message from the provider's JSON error when it has one.
fn status_and_message(resp: &HttpResponse, v: Option<&Value>) -> String {
    let msg = v
        .map(describe)
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| resp.excerpt(300));
    format!("{} - {msg}", resp.status)
}

/// The error text of a Discord (`message`), Telegram (`description`) or Slack (`error`) body.
fn describe(v: &Value) -> String {
    ["message", "description", "error"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .unwrap_or("")
        .to_string()
}

/// Splits `text` into parts of at most `limit` characters, at a line break when one is in
/// the second half of the window, else at a character boundary.
fn split_message(text: &str, limit: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.chars().count() > limit {
        let cut = rest
            .char_indices()
            .nth(limit)
            .map_or(rest.len(), |(i, _)| i);
        let at = match rest[..cut].rfind('\n') {
            Some(nl) if nl >= cut / 2 => nl + 1,
            _ => cut,
        };
        parts.push(&rest[..at]);
        rest = &rest[at..];
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest);
    }
    parts
}

#[cfg(test)]
mod tests;
