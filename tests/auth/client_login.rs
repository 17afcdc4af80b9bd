//! Logging in through the downstream client: `openpact serve` with a remote server that needs
//! a login and no user on its terminal. A client that declared URL-mode elicitation is asked
//! to open the authorization URL (the test follows it headlessly, as a browser would) and its
//! call then goes through; a decline or a login that is not finished in time ends the call
//! with a clear error; a client without URL mode is only told how to log in.

use super::{LIMIT, client, serve, started, stored, text_of, token_file};
use crate::support::{Client, Hub};
use serde_json::{Value, json};
use std::path::Path;

/// `openpact serve` with no browser and no terminal (logins wait for a client), initialized
/// with `capabilities`, once the remote server is known to need a login.
async fn hub_needing_login(cfg: &Path, state: &Path, capabilities: Value) -> Hub {
    hub_with_login_timeout(cfg, state, capabilities, "30").await
}

async fn hub_with_login_timeout(
    cfg: &Path,
    state: &Path,
    capabilities: Value,
    timeout_secs: &str,
) -> Hub {
    let mut hub = serve(
        cfg,
        state,
        &[
            ("OPENPACT_OAUTH_BROWSER", "none"),
            ("OPENPACT_OAUTH_TIMEOUT_SECS", timeout_secs),
        ],
    );
    hub.client.initialize_as(capabilities, "url-client").await;
    hub.wait_log("needs a login", LIMIT).await;
    hub
}

/// Sends a call to `remote:echo`; returns its id.
async fn call_echo(c: &mut Client, text: &str) -> Value {
    let id = json!(c.next_id());
    c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "remote:echo", "arguments": {"text": text}}}))
        .await;
    id
}

/// A call whose login elicitation is answered with `action` (the URL is never followed): the
/// call's response, which must be a tool error.
async fn refused_call(c: &mut Client, action: &str) -> Value {
    let id = call_echo(c, "never").await;
    let ask = c
        .wait_for("elicitation/create", LIMIT)
        .await
        .expect("the hub asks the client to open the URL");
    c.send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": action}}))
        .await;
    let r = c.response(&id).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
    r
}

#[tokio::test]
async fn a_url_elicitation_logs_in_and_the_call_proceeds() {
    use std::os::unix::fs::PermissionsExt;
    let Some((server, _sc, cfg, state)) = started(3600).await else {
        return;
    };
    let mut hub = hub_needing_login(&cfg, &state, json!({"elicitation": {"url": {}}})).await;
    let id = call_echo(&mut hub.client, "after login").await;

    let ask = hub
        .client
        .wait_for("elicitation/create", LIMIT)
        .await
        .expect("the hub asks the client to open the URL");
    let params = &ask["params"];
    assert_eq!(params["mode"], "url", "{ask}");
    assert!(
        params["message"].as_str().unwrap().contains("'remote'"),
        "{ask}"
    );
    let elicitation_id = params["elicitationId"].as_str().unwrap().to_string();
    assert!(!elicitation_id.is_empty());
    let url = params["url"].as_str().unwrap();
    assert!(url.contains("/authorize?"), "{ask}");
    assert!(url.contains("code_challenge_method=S256"), "{ask}");
    hub.client
        .send(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}}))
        .await;

    // The "browser": follows the authorization server's redirect to the hub's callback.
    let page = client().get(url).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200, "{page:?}");

    let r = hub.client.response(&id).await;
    assert_eq!(text_of(&r), "echo: after login");
    let done = hub
        .client
        .wait_for("notifications/elicitation/complete", LIMIT)
        .await
        .expect("the client is told the login is complete");
    assert_eq!(done["params"]["elicitationId"], elicitation_id.as_str());
    // Logged in now: the next call needs nothing more.
    let again = hub
        .client
        .call("remote:echo", json!({"text": "again"}))
        .await;
    assert_eq!(text_of(&again), "echo: again");
    assert!(
        hub.client
            .inbox
            .iter()
            .all(|m| m["method"] != "elicitation/create"),
        "asked once: {:?}",
        hub.client.inbox
    );

    let path = token_file(&state).expect("tokens in the file store");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let tokens = stored(&state);
    let stats = server.stats().await;
    assert_eq!(stats["code_exchanges"], 1, "{stats}");
    let (code, _) = hub.close().await;
    assert_eq!(code, Some(0));
    let audit = std::fs::read_to_string(state.join("audit.jsonl")).unwrap_or_default();
    super::assert_no_secret(
        &[&hub.stderr(), &audit],
        &[
            tokens["access_token"].as_str().unwrap().to_string(),
            tokens["refresh_token"].as_str().unwrap().to_string(),
        ],
    );
}

#[tokio::test]
async fn a_declined_login_fails_the_call_clearly() {
    let Some((server, _sc, cfg, state)) = started(3600).await else {
        return;
    };
    let mut hub = hub_needing_login(&cfg, &state, json!({"elicitation": {"url": {}}})).await;
    let r = refused_call(&mut hub.client, "decline").await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("declined"), "{r}");
    assert!(text.contains("openpact auth login remote"), "{r}");
    assert!(token_file(&state).is_none());
    assert_eq!(server.stats().await["code_exchanges"], 0);
}

#[tokio::test]
async fn an_unfinished_login_times_out_and_fails_the_call() {
    let Some((server, _sc, cfg, state)) = started(3600).await else {
        return;
    };
    let caps = json!({"elicitation": {"url": {}}});
    let mut hub = hub_with_login_timeout(&cfg, &state, caps, "1").await;
    // Accepted, but the page is never opened.
    let r = refused_call(&mut hub.client, "accept").await;
    let text = r["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("not completed within 1 s"), "{r}");
    assert!(token_file(&state).is_none());
    assert_eq!(server.stats().await["code_exchanges"], 0);
}

#[tokio::test]
async fn a_client_without_url_mode_is_told_how_to_log_in() {
    let Some((_server, _sc, cfg, state)) = started(3600).await else {
        return;
    };
    // Form mode only: a URL must not be sent to it.
    let mut hub = hub_needing_login(&cfg, &state, json!({"elicitation": {}})).await;
    let id = call_echo(&mut hub.client, "never").await;
    let r = hub.client.response(&id).await;
    let said = r.to_string();
    assert!(said.contains("openpact auth login remote"), "{r}");
    assert!(
        hub.client
            .inbox
            .iter()
            .all(|m| m["method"] != "elicitation/create"),
        "{:?}",
        hub.client.inbox
    );
    assert!(token_file(&state).is_none());
}
