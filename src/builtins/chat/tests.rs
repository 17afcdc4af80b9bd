//! The chat tools against a loopback stand-in of each provider.

use super::*;
use crate::builtins::test_support::{Stand, json_reply, reply, web};

fn provider(base: &str, env: &str) -> Option<ChatProvider> {
    Some(ChatProvider {
        token_env: env.into(),
        base_url: base.into(),
    })
}

fn tokens(var: &str) -> Option<String> {
    match var {
        "DISCORD_TOKEN" => Some("d-secret".into()),
        "TELEGRAM_BOT_TOKEN" => Some("123:tg-secret".into()),
        "SLACK_BOT_TOKEN" => Some("xoxb-secret".into()),
        _ => None,
    }
}

#[test]
fn no_usable_provider_no_group() {
    let c = ChatSettings {
        discord: provider("http://127.0.0.1:9", "DISCORD_TOKEN"),
        ..Default::default()
    };
    assert!(with_tokens(&c, &web(false), |_| None).is_none());
    assert!(with_tokens(&c, &web(false), |_| Some(String::new())).is_none());
    assert!(with_tokens(&ChatSettings::default(), &web(false), tokens).is_none());
}

#[test]
fn splitting() {
    assert_eq!(split_message("abc", 5), ["abc"]);
    assert_eq!(split_message("ééééé", 2), ["éé", "éé", "é"]);
    assert_eq!(split_message("ab\ncdef", 5), ["ab\n", "cdef"]);
    assert_eq!(split_message("a\nbcdefg", 5), ["a\nbcd", "efg"]);
    assert_eq!(split_message("abcd\nef", 5), ["abcd\n", "ef"]);
}

#[tokio::test]
async fn discord() {
    let s = Stand::start(|rq| match (rq.method.as_str(), rq.url.as_str()) {
        ("POST", "/api/v10/users/@me/channels") => json_reply(200, json!({"id": "555", "type": 1})),
        ("POST", "/api/v10/channels/555/messages") | ("POST", "/api/v10/channels/777/messages") => {
            json_reply(200, json!({"id": "1"}))
        }
        _ => json_reply(404, json!({"message": "Unknown Channel", "code": 10003})),
    });
    let c = ChatSettings {
        discord: provider(&format!("{}/api/v10", s.base), "DISCORD_TOKEN"),
        ..Default::default()
    };
    let g = with_tokens(&c, &web(false), tokens).unwrap();
    assert_eq!(
        g.tools()[0].input_schema["properties"]["provider"]["enum"],
        json!(["discord"])
    );

    let out = g
        .call(
            "chat_send",
            &json!({"provider": "discord", "target": "user:42", "message": "hi"}),
        )
        .await;
    assert_eq!(
        (out.is_error, out.text.as_str()),
        (false, "Message sent via discord to user:42")
    );
    let seen = s.seen();
    assert_eq!(seen[0].url, "/api/v10/users/@me/channels");
    assert_eq!(seen[0].json(), json!({"recipient_id": "42"}));
    assert_eq!(seen[1].url, "/api/v10/channels/555/messages");
    assert_eq!(seen[1].json(), json!({"content": "hi"}));
    for rq in &seen {
        assert_eq!(rq.header("authorization"), Some("Bot d-secret"));
        assert!(
            rq.header("content-type")
                .unwrap()
                .starts_with("application/json")
        );
    }

    for target in ["channel:777", "777"] {
        let out = g
            .call(
                "chat_send",
                &json!({"provider": "discord", "target": target, "message": "yo"}),
            )
            .await;
        assert!(!out.is_error, "{}", out.text);
    }
    assert_eq!(s.seen()[2].url, "/api/v10/channels/777/messages");
    assert_eq!(s.seen()[3].url, "/api/v10/channels/777/messages");

    let long = "x".repeat(4500);
    let out = g
        .call(
            "chat_send",
            &json!({"provider": "discord", "target": "777", "message": long}),
        )
        .await;
    assert!(!out.is_error);
    let lens: Vec<usize> = s.seen()[4..]
        .iter()
        .map(|r| r.json()["content"].as_str().unwrap().len())
        .collect();
    assert_eq!(lens, [2000, 2000, 500]);

    let out = g
        .call(
            "chat_send",
            &json!({"provider": "discord", "target": "channel:999", "message": "x"}),
        )
        .await;
    assert_eq!(
        (out.is_error, out.text.as_str()),
        (
            true,
            "failed to send message: Discord API error: 404 - Unknown Channel"
        )
    );
    let out = g
        .call(
            "chat_send",
            &json!({"provider": "discord", "target": "../x", "message": "x"}),
        )
        .await;
    assert!(
        out.is_error && out.text.contains("invalid Discord ID"),
        "{}",
        out.text
    );

    let out = g
        .call(
            "chat_send",
            &json!({"provider": "slack", "target": "C1", "message": "x"}),
        )
        .await;
    assert_eq!(
        out.text,
        "provider \"slack\" is not active (available: discord)"
    );
    let out = g
        .call(
            "chat_send",
            &json!({"provider": "discord", "target": "", "message": "x"}),
        )
        .await;
    assert_eq!(out.text, "provider, target, and message are all required");
}

#[tokio::test]
async fn telegram() {
    let s = Stand::start(|rq| {
        let b = rq.json();
        if rq.url != "/bot123:tg-secret/sendMessage" {
            json_reply(
                404,
                json!({"ok": false, "error_code": 404, "description": "Not Found"}),
            )
        } else if b["chat_id"] == json!(-100123) {
            json_reply(200, json!({"ok": true, "result": {"message_id": 1}}))
        } else {
            json_reply(
                400,
                json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"}),
            )
        }
    });
    let c = ChatSettings {
        telegram: provider(&format!("{}/", s.base), "TELEGRAM_BOT_TOKEN"),
        ..Default::default()
    };
    let g = with_tokens(&c, &web(false), tokens).unwrap();
    for target in ["-100123", "channel:-100123", "user:-100123"] {
        let out = g
            .call(
                "chat_send",
                &json!({"provider": "telegram", "target": target, "message": "héllo"}),
            )
            .await;
        assert_eq!(out.text, format!("Message sent via telegram to {target}"));
    }
    let rq = &s.seen()[0];
    assert_eq!(rq.method, "POST");
    assert_eq!(rq.json(), json!({"chat_id": -100123, "text": "héllo"}));
    assert!(rq.json()["chat_id"].is_i64());

    let out = g
        .call(
            "chat_send",
            &json!({"provider": "telegram", "target": "@channel", "message": "x"}),
        )
        .await;
    assert_eq!(out.text, "failed to send message: invalid Telegram chat ID");
    let out = g
        .call(
            "chat_send",
            &json!({"provider": "telegram", "target": "5", "message": "x"}),
        )
        .await;
    assert_eq!(
        out.text,
        "failed to send message: Telegram API error: 400 - Bad Request: chat not found"
    );
    assert!(!out.text.contains("tg-secret"));
    assert_eq!(s.seen().len(), 4, "the invalid id made no request");
}

#[tokio::test]
async fn slack_and_webhook() {
    let s = Stand::start(|rq| {
        let b = rq.json();
        match rq.url.as_str() {
            "/api/chat.postMessage" if b["channel"] == "C123" => {
                json_reply(200, json!({"ok": true, "ts": "1.2"}))
            }
            "/api/chat.postMessage" => {
                json_reply(200, json!({"ok": false, "error": "channel_not_found"}))
            }
            "/hook" => reply(204, "text/plain", ""),
            _ => reply(500, "text/plain", "boom"),
        }
    });
    let c = ChatSettings {
        slack: provider(&format!("{}/api", s.base), "SLACK_BOT_TOKEN"),
        webhook: Some(format!("{}/hook", s.base)),
        ..Default::default()
    };
    let g = with_tokens(&c, &web(false), tokens).unwrap();
    assert_eq!(
        g.tools()[0].input_schema["properties"]["provider"]["enum"],
        json!(["slack", "webhook"])
    );
    let out = g
        .call(
            "chat_send",
            &json!({"provider": "slack", "target": "channel:C123", "message": "hi"}),
        )
        .await;
    assert_eq!(
        (out.is_error, out.text.as_str()),
        (false, "Message sent via slack to channel:C123")
    );
    let rq = &s.seen()[0];
    assert_eq!(rq.header("authorization"), Some("Bearer xoxb-secret"));
    assert_eq!(
        rq.header("content-type"),
        Some("application/json; charset=utf-8")
    );
    assert_eq!(rq.json(), json!({"channel": "C123", "text": "hi"}));

    let out = g
        .call(
            "chat_send",
            &json!({"provider": "slack", "target": "C999", "message": "hi"}),
        )
        .await;
    assert_eq!(
        (out.is_error, out.text.as_str()),
        (
            true,
            "failed to send message: Slack API error: channel_not_found"
        )
    );

    let out = g
        .call(
            "chat_send",
            &json!({"provider": "webhook", "target": "ops", "message": "deploy done"}),
        )
        .await;
    assert_eq!(
        (out.is_error, out.text.as_str()),
        (false, "Message sent via webhook to ops")
    );
    let rq = &s.seen()[2];
    assert_eq!((rq.method.as_str(), rq.url.as_str()), ("POST", "/hook"));
    assert_eq!(rq.header("authorization"), None);
    assert_eq!(rq.json(), json!({"text": "deploy done", "target": "ops"}));
}
