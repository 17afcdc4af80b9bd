//! The workspace, memory and vault built-ins end to end through `openpact serve`: listed
//! under bare names beside a server's namespaced tools, real files round-tripped, traversal
//! refused as `isError` results, and the vault's git sync against a local bare repository.

use crate::support::{
    Client, Scratch, WAIT, bare_git, fixture, is_error, ready_polling, serve, synced_vault, text,
};
use serde_json::{Value, json};
use std::time::Instant;

/// The result text of a call that must succeed.
async fn ok(c: &mut Client, tool: &str, args: Value) -> Value {
    let r = c.call(tool, args).await;
    assert!(
        r.get("error").is_none() && !is_error(&r),
        "{tool} failed: {r}"
    );
    r
}

/// The text of a call that must fail as a tool result (not a protocol error).
async fn refused(c: &mut Client, tool: &str, args: Value) -> String {
    let r = c.call(tool, args).await;
    assert!(is_error(&r), "{tool} should fail with isError: {r}");
    text(&r)
}

#[tokio::test]
async fn workspace_and_memory_tools_round_trip_through_the_hub() {
    let s = Scratch::new();
    let root = s.path().join("ai-data");
    std::fs::create_dir_all(s.path().join("ai-data-evil")).unwrap();
    std::fs::write(s.path().join("ai-data-evil/x"), "evil").unwrap();
    let cfg = s.config(&json!({
        "mcpServers": {"fx": fixture(&[])},
        "openpact": {"builtins": {"workspace": {"root": root.to_str().unwrap()}}}
    }));
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    let five = [
        "workspace_read",
        "workspace_write",
        "workspace_list",
        "memory_read",
        "memory_write",
    ];
    let mut want = vec!["fx:echo"];
    want.extend(five);
    let tools = ready_polling(c, &want).await;
    for name in five {
        let t = tools.iter().find(|t| t["name"] == name).unwrap();
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().is_some_and(|d| !d.is_empty()));
        assert_eq!(
            t["annotations"]["readOnlyHint"],
            !name.ends_with("_write"),
            "{t}"
        );
    }
    assert!(
        !tools.iter().any(|t| t["name"] == "vault_read"),
        "no vault configured, so no vault tools"
    );
    // The workspace appears on first write.
    assert!(!root.exists());
    let r = ok(c, "workspace_list", json!({})).await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"path": ".", "entries": []})
    );

    let r = ok(
        c,
        "workspace_write",
        json!({"path": "notes/today.md", "content": "Buy milk ✓\n"}),
    )
    .await;
    assert_eq!(text(&r), "Wrote 13 bytes to notes/today.md");
    assert_eq!(
        std::fs::read_to_string(root.join("notes/today.md")).unwrap(),
        "Buy milk ✓\n"
    );
    let r = ok(c, "workspace_read", json!({"path": "notes/today.md"})).await;
    assert_eq!(text(&r), "Buy milk ✓\n");
    let r = ok(c, "workspace_list", json!({})).await;
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"path": ".", "entries": ["notes/"]})
    );
    let listed: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(listed, r["result"]["structuredContent"]);

    // Traversal, absolute paths and the sibling prefix are refused, and nothing leaks out.
    for p in [
        "../mcp.json",
        "../ai-data-evil/x",
        "/etc/passwd",
        "notes/../../mcp.json",
    ] {
        assert_eq!(
            refused(c, "workspace_read", json!({"path": p})).await,
            "path escapes workspace",
            "{p}"
        );
    }
    assert_eq!(
        refused(
            c,
            "workspace_write",
            json!({"path": "../ai-data-evil/x", "content": "pwned"})
        )
        .await,
        "path escapes workspace"
    );
    assert_eq!(
        std::fs::read_to_string(s.path().join("ai-data-evil/x")).unwrap(),
        "evil"
    );
    assert_eq!(
        refused(c, "workspace_list", json!({"path": ".."})).await,
        "path escapes workspace"
    );
    // Bad arguments are named.
    assert_eq!(
        refused(c, "workspace_read", json!({})).await,
        "path is required"
    );
    assert_eq!(
        refused(c, "workspace_write", json!({"path": "a.md", "content": 5})).await,
        "content must be a string"
    );

    // Memory: documented shape, whitelist, append.
    assert_eq!(text(&ok(c, "memory_read", json!({})).await), "");
    ok(c, "memory_write", json!({"content": "- likes tea"})).await;
    ok(
        c,
        "memory_write",
        json!({"content": "- lives in Lyon", "append": true}),
    )
    .await;
    assert_eq!(
        text(&ok(c, "memory_read", json!({"file": "MEMORY.md"})).await),
        "- likes tea\n- lives in Lyon"
    );
    ok(
        c,
        "memory_write",
        json!({"file": "memory/2025-06-30.md", "content": "met Bo", "append": true}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root.join("memory/2025-06-30.md")).unwrap(),
        "met Bo"
    );
    assert!(
        refused(
            c,
            "memory_write",
            json!({"file": "notes/x.md", "content": "x"})
        )
        .await
        .starts_with("invalid memory path 'notes/x.md'")
    );

    // The server's own tools still work beside the built-ins.
    let r = ok(c, "fx:echo", json!({"message": "still here"})).await;
    assert_eq!(text(&r), "still here");
}

#[tokio::test]
async fn vault_tools_search_and_sync_through_the_hub() {
    let s = Scratch::new();
    let (bare, vault) = synced_vault(
        s.path(),
        &[
            ("Home.md", "# Home\nnothing here\n"),
            ("Projects/Plan.md", "intro\nShip the Rust port\noutro\n"),
        ],
    );

    let cfg = s.config(&json!({
        "mcpServers": {"fx": fixture(&[])},
        "openpact": {"builtins": {
            "workspace": {"root": s.path().join("ai-data").to_str().unwrap()},
            "vault": {"path": vault.to_str().unwrap(), "git": {"sync": true}}
        }}
    }));
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    ready_polling(
        c,
        &[
            "fx:echo",
            "vault_read",
            "vault_write",
            "vault_list",
            "vault_search",
        ],
    )
    .await;

    let r = ok(c, "vault_search", json!({"query": "rust PORT"})).await;
    assert_eq!(
        r["result"]["structuredContent"]["results"],
        json!([{"path": "Projects/Plan.md", "line": 2, "text": "Ship the Rust port", "before": ["intro"], "after": ["outro"]}])
    );
    let r = ok(c, "vault_list", json!({"recursive": true})).await;
    assert_eq!(
        r["result"]["structuredContent"]["entries"],
        json!(["Home.md", "Projects/", "Projects/Plan.md"])
    );
    let r = ok(
        c,
        "vault_write",
        json!({"path": "Inbox/Idea.md", "content": "an idea\n", "commit_message": "Capture idea"}),
    )
    .await;
    assert_eq!(text(&r), "Wrote and synced Inbox/Idea.md");
    assert_eq!(
        bare_git(&bare, &["log", "-1", "--format=%s"]).trim(),
        "Capture idea"
    );
    assert_eq!(
        bare_git(&bare, &["show", "HEAD:Inbox/Idea.md"]),
        "an idea\n"
    );
    assert_eq!(
        text(&ok(c, "vault_read", json!({"path": "Inbox/Idea.md"})).await),
        "an idea\n"
    );
    assert_eq!(
        refused(c, "vault_read", json!({"path": "../mcp.json"})).await,
        "path escapes vault"
    );
    assert!(
        refused(
            c,
            "vault_write",
            json!({"path": ".git/config", "content": "x"})
        )
        .await
        .contains(".git is not part of the vault")
    );
}

/// Built-in tools pass the same pipeline as servers' tools: permission rules (by bare name),
/// the rate limit of server `openpact`, the result cache, and the audit log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtins_pass_permission_rate_limit_cache_and_audit() {
    let s = Scratch::new();
    let root = s.path().join("ai-data");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("note.md"), "first").unwrap();
    let cfg = s.config(&json!({
        "mcpServers": {},
        "openpact": {
            "builtins": {"workspace": {"root": root}},
            "permissions": {"default": "allow", "deny": ["workspace_write"]},
            "rateLimits": {"default": "off", "servers": {"openpact": {"perSecond": 0.5, "burst": 3}}},
            "cache": {"rules": {"workspace_read": "1m"}},
            "audit": {"enabled": true}
        }
    }));
    let mut hub = serve(&cfg).await;
    let c = &mut hub.client;
    c.initialize().await;
    ready_polling(c, &["workspace_read"]).await;

    // Denied by a rule naming the built-in by its bare name, as an isError result.
    let r = c
        .call("workspace_write", json!({"path": "x.md", "content": "no"}))
        .await;
    assert!(
        is_error(&r) && text(&r).contains("openpact.permissions.deny"),
        "{r}"
    );
    assert!(!root.join("x.md").exists());

    // Cached: the second read does not see the file change on disk.
    assert_eq!(
        text(&ok(c, "workspace_read", json!({"path": "note.md"})).await),
        "first"
    );
    std::fs::write(root.join("note.md"), "second").unwrap();
    assert_eq!(
        text(&ok(c, "workspace_read", json!({"path": "note.md"})).await),
        "first"
    );

    // Permission comes before the rate limit, so the denied call took no token: the third
    // allowed call (a cache hit still counts) passes, the fourth is refused by the bucket of
    // server `openpact`.
    ok(c, "workspace_list", json!({})).await;
    let r = c.call("workspace_list", json!({})).await;
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert_eq!(r["error"]["data"]["limit"], "server openpact", "{r}");

    // Audited like any other call.
    let audit = s.path().join("state/audit.jsonl");
    let deadline = Instant::now() + WAIT;
    let lines = loop {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        if text.lines().count() >= 5 || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let records: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let outcomes: Vec<(String, String, String)> = records
        .iter()
        .map(|r| {
            (
                r["target"].as_str().unwrap().into(),
                r["outcome"].as_str().unwrap().into(),
                r["cache"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("workspace_write".into(), "denied".into(), "off".into()),
            ("workspace_read".into(), "ok".into(), "miss".into()),
            ("workspace_read".into(), "ok".into(), "hit".into()),
            ("workspace_list".into(), "ok".into(), "off".into()),
            ("workspace_list".into(), "rateLimited".into(), "off".into()),
        ],
        "{lines}"
    );
}
