//! Rate limits: per server and per tool, the error a refused call gets, and the shipped
//! default of 10 calls/s with a burst of 20.

use super::{hub, hub_with, started, wait_audit_where};
use crate::support::{Client, Scratch, fixture, send_call, state_dir, text};
use serde_json::{Value, json};
use std::time::Duration;

/// Sends `n` calls at once and returns the responses in order.
async fn burst(c: &mut Client, n: usize, name: &str, arguments: Value) -> Vec<Value> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(send_call(c, name, arguments.clone()).await);
    }
    let mut out = Vec::new();
    for id in &ids {
        out.push(c.response(id).await);
    }
    out
}

fn rate_limited(r: &Value) -> bool {
    r["error"]["code"] == -32000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_per_server_refuses_the_call_over_the_burst() {
    let sc = Scratch::new();
    let (mut hub, config) = hub_with(
        &sc,
        json!({"fx": fixture(&[]), "other": fixture(&[])}),
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": {"perSecond": 1, "burst": 20}}}),
    )
    .await;
    let c = &mut hub.client;
    let rs = burst(c, 21, "fx:echo", json!({"message": "m"})).await;
    let refused: Vec<&Value> = rs.iter().filter(|r| rate_limited(r)).collect();
    assert_eq!(
        (rs.len() - refused.len(), refused.len()),
        (20, 1),
        "{rs:#?}"
    );
    let e = &refused[0]["error"];
    assert_eq!(e["message"], "Rate limit exceeded. Please try again later.");
    assert_eq!(e["data"]["limit"], "server fx", "{e}");
    assert_eq!(e["data"]["perSecond"].as_f64(), Some(1.0), "{e}");
    assert_eq!(e["data"]["burst"], 20, "{e}");
    let retry = e["data"]["retryAfterMs"].as_u64().unwrap();
    assert!(retry > 0 && retry <= 1000, "{e}");
    // Another server has its own bucket.
    let r = c.call("other:echo", json!({"message": "o"})).await;
    assert_eq!(text(&r), "o", "{r}");
    // After the wait it asks for, fx answers again.
    tokio::time::sleep(Duration::from_millis(retry + 50)).await;
    let r = c.call("fx:echo", json!({"message": "later"})).await;
    assert_eq!(text(&r), "later", "{r}");
    let rec = wait_audit_where(&state_dir(&config), 1, |r| r["outcome"] == "rateLimited").await;
    assert_eq!(rec[0]["target"], "fx:echo", "{rec:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_per_tool() {
    let sc = Scratch::new();
    let (mut hub, _) = hub(
        &sc,
        json!({"permissions": {"default": "allow"},
               "rateLimits": {"default": "off",
                              "tools": {"fx:add": {"perSecond": 0.2, "burst": 1}}}}),
    )
    .await;
    let c = &mut hub.client;
    let r = c.call("fx:add", json!({"a": 1, "b": 2})).await;
    assert_eq!(r["result"]["structuredContent"], json!({"sum": 3}), "{r}");
    let r = c.call("fx:add", json!({"a": 1, "b": 2})).await;
    assert!(rate_limited(&r), "{r}");
    let d = &r["error"]["data"];
    assert_eq!(d["limit"], "tool fx:add", "{r}");
    assert_eq!(d["perSecond"].as_f64(), Some(0.2), "{r}");
    assert_eq!(d["burst"], 1, "{r}");
    let retry = d["retryAfterMs"].as_u64().unwrap();
    assert!(retry > 0 && retry <= 5000, "{r}");
    // Other tools of the server are not limited.
    for _ in 0..30 {
        assert!(!rate_limited(
            &c.call("fx:echo", json!({"message": "e"})).await
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_shipped_default_is_ten_per_second_burst_twenty() {
    let sc = Scratch::new();
    // Written directly: `Scratch::config` would switch rate limits off.
    let config = sc.raw_config(
        "mcp.json",
        &json!({"mcpServers": {"fx": fixture(&[])},
                "openpact": {"permissions": {"default": "allow"}}}),
    );
    let mut hub = started(&config, &[], json!({}), "policy-test").await;
    let rs = burst(&mut hub.client, 30, "fx:echo", json!({"message": "m"})).await;
    let refused: Vec<&Value> = rs.iter().filter(|r| rate_limited(r)).collect();
    let ok = rs.len() - refused.len();
    // 20 at once, plus at most what refills (10/s) while the burst is under way.
    assert!((20..=23).contains(&ok), "{ok} succeeded: {rs:#?}");
    let d = &refused[0]["error"]["data"];
    assert_eq!(
        (&d["limit"], d["perSecond"].as_f64(), &d["burst"]),
        (&json!("server fx"), Some(10.0), &json!(20)),
        "{d}"
    );
}
