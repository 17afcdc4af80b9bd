//! Reading, writing, listing and searching notes, and the paths that are refused.

use super::*;

#[test]
fn tools_have_the_original_names_and_parameters() {
    let fx = Fx::new(false);
    let tools = fx.b.tools();
    let names: Vec<_> = tools.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        ["vault_read", "vault_write", "vault_list", "vault_search"]
    );
    let props = |n: &str| {
        let t = tools.iter().find(|t| t.name == n).unwrap();
        let mut p: Vec<String> = t.input_schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        p.sort();
        (
            p,
            t.input_schema["required"].clone(),
            t.annotations.clone().unwrap(),
        )
    };
    let (p, r, a) = props("vault_read");
    assert_eq!((p, r), (vec!["path".to_string()], json!(["path"])));
    assert_eq!(a["readOnlyHint"], true);
    let (p, r, a) = props("vault_write");
    assert_eq!(p, ["commit_message", "content", "path"]);
    assert_eq!(r, json!(["path", "content"]));
    assert_eq!(a["readOnlyHint"], false);
    let (p, r, a) = props("vault_list");
    assert_eq!(
        (p, r),
        (vec!["path".into(), "recursive".into()], Value::Null)
    );
    assert_eq!(a["readOnlyHint"], true);
    let (p, r, a) = props("vault_search");
    assert_eq!(p, ["context", "max_results", "path", "query"]);
    assert_eq!(r, json!(["query"]));
    assert_eq!(a["readOnlyHint"], true);
}

#[tokio::test]
async fn read_write_and_errors() {
    let fx = Fx::new(false);
    assert_eq!(
        fx.ok("vault_read", json!({"path": "Home.md"})).await.text,
        "# Home\nWelcome to the vault.\nSee [[Projects/Plan]].\n"
    );
    assert_eq!(
        fx.ok(
            "vault_write",
            json!({"path": "New/Note.md", "content": "hi", "commit_message": "x"})
        )
        .await
        .text,
        "Wrote New/Note.md"
    );
    assert_eq!(
        fx.ok("vault_read", json!({"path": "New/Note.md"}))
            .await
            .text,
        "hi"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join("New/Note.md")).unwrap(),
        "hi"
    );
    assert_eq!(fx.err("vault_read", json!({})).await, "path is required");
    assert_eq!(
        fx.err("vault_read", json!({"path": "Nope.md"})).await,
        "file not found: Nope.md"
    );
    assert_eq!(
        fx.err("vault_read", json!({"path": "Projects"})).await,
        "failed to read file: Projects is a directory"
    );
    assert_eq!(
        fx.err("vault_write", json!({"path": "a.md"})).await,
        "content is required"
    );
    assert_eq!(
        fx.err("vault_write", json!({"path": ".", "content": "x"}))
            .await,
        "failed to write file: . is a directory"
    );
    std::fs::write(fx.root().join("pic.png"), b"\x89PNG\0\0").unwrap();
    assert_eq!(
        fx.err("vault_read", json!({"path": "pic.png"})).await,
        "failed to read file: pic.png is a binary file; only UTF-8 text files can be read"
    );
    let big = "é".repeat(MAX_READ_BYTES as usize); // twice the cap in bytes
    std::fs::write(fx.root().join("big.md"), &big).unwrap();
    let text = fx.ok("vault_read", json!({"path": "big.md"})).await.text;
    assert!(text.starts_with(&big[..MAX_READ_BYTES as usize]));
    assert!(text.ends_with(&format!(
        "[Content truncated: {MAX_READ_BYTES} of {} bytes shown]",
        2 * MAX_READ_BYTES
    )));
}

#[tokio::test]
async fn traversal_and_git_dir_are_refused() {
    let fx = Fx::new(false);
    std::fs::create_dir_all(fx.root().join(".git")).unwrap();
    std::fs::write(
        fx.root().join(".git/config"),
        "[remote] url = https://token@x",
    )
    .unwrap();
    std::os::unix::fs::symlink(fx.tmp.path(), fx.root().join("out")).unwrap();
    std::os::unix::fs::symlink(fx.tmp.path().join("secret.md"), fx.root().join("s.md")).unwrap();
    std::os::unix::fs::symlink(fx.root().join(".git"), fx.root().join("g")).unwrap();
    let abs = fx
        .tmp
        .path()
        .join("secret.md")
        .to_string_lossy()
        .into_owned();
    for p in [
        "../secret.md",
        "../vault-evil/x.md",
        "Projects/../../secret.md",
        "/etc/passwd",
        abs.as_str(),
        "out/secret.md",
        "s.md",
    ] {
        assert_eq!(
            fx.err("vault_read", json!({"path": p})).await,
            "path escapes vault",
            "read {p}"
        );
        assert_eq!(
            fx.err("vault_write", json!({"path": p, "content": "pwned"}))
                .await,
            "path escapes vault",
            "write {p}"
        );
        assert_eq!(
            fx.err("vault_search", json!({"query": "plan", "path": p}))
                .await,
            "path escapes vault",
            "search {p}"
        );
    }
    for p in ["..", "../vault-evil", "/", "out"] {
        assert_eq!(
            fx.err("vault_list", json!({"path": p})).await,
            "path escapes vault",
            "list {p}"
        );
        assert_eq!(
            fx.err("vault_list", json!({"path": p, "recursive": true}))
                .await,
            "path escapes vault",
            "list -r {p}"
        );
    }
    for p in [
        ".git/config",
        ".GIT/hooks/post-commit",
        "g/config",
        "x/../.git/HEAD",
    ] {
        assert!(
            fx.err("vault_read", json!({"path": p}))
                .await
                .contains(".git is not part of the vault"),
            "{p}"
        );
        assert!(
            fx.err("vault_write", json!({"path": p, "content": "x"}))
                .await
                .contains(".git is not part of the vault"),
            "{p}"
        );
    }
    assert!(!fx.root().join(".git/hooks").exists());
    assert!(
        fx.err("vault_list", json!({"path": ".git"}))
            .await
            .contains(".git is not part of the vault")
    );
    assert_eq!(
        std::fs::read_to_string(fx.tmp.path().join("secret.md")).unwrap(),
        "secret plan"
    );
    assert_eq!(
        std::fs::read_to_string(fx.tmp.path().join("vault-evil/x.md")).unwrap(),
        "evil plan"
    );
}

#[tokio::test]
async fn listing_one_level_and_recursive() {
    let fx = Fx::new(false);
    let out = fx.ok("vault_list", json!({})).await;
    assert_eq!(
        out.structured.unwrap(),
        json!({"path": ".", "recursive": false, "entries": ["Archive/", "Home.md", "Projects/"]})
    );
    let out = fx.ok("vault_list", json!({"path": "Projects"})).await;
    assert_eq!(
        out.structured.unwrap()["entries"],
        json!(["Deep/", "Plan.md", "notes.txt"])
    );
    let out = fx.ok("vault_list", json!({"recursive": true})).await;
    assert_eq!(
        out.structured.unwrap()["entries"],
        json!([
            "Archive/",
            "Home.md",
            "Projects/",
            "Projects/Deep/",
            "Projects/Deep/Idea.MD",
            "Projects/Plan.md"
        ])
    );
    let out = fx
        .ok(
            "vault_list",
            json!({"path": "Projects/Deep", "recursive": true}),
        )
        .await;
    assert_eq!(
        out.text,
        r#"{"path":"Projects/Deep","recursive":true,"entries":["Projects/Deep/Idea.MD"]}"#
    );
    assert!(
        fx.err("vault_list", json!({"path": "Home.md"}))
            .await
            .starts_with("failed to list directory: Home.md:")
    );
    assert_eq!(
        fx.err("vault_list", json!({"recursive": "yes"})).await,
        "recursive must be a boolean"
    );
}

#[tokio::test]
async fn search_returns_lines_with_context_and_honours_the_cap() {
    let fx = Fx::new(false);
    let out = fx.ok("vault_search", json!({"query": "plan"})).await;
    let v = out.structured.unwrap();
    assert_eq!(out.text, v.to_string());
    assert_eq!(
        v["results"],
        json!([
            {"path": "Home.md", "line": 3, "text": "See [[Projects/Plan]].", "before": ["Welcome to the vault."], "after": []},
            {"path": "Projects/Deep/Idea.MD", "line": 1, "text": "another plan", "before": [], "after": []},
            {"path": "Projects/Plan.md", "line": 2, "text": "The PLAN is here", "before": ["line one"], "after": ["line three"]},
        ])
    );
    assert_eq!(v["truncated"], false);
    assert_eq!(v["count"], 3);
    // Hidden folders and files, non-Markdown files and the sibling are not searched.
    assert_eq!(v["files_searched"], 3);

    let v = fx
        .ok(
            "vault_search",
            json!({"query": "PLAN IS", "path": "Projects", "context": 2}),
        )
        .await
        .structured
        .unwrap();
    assert_eq!(
        v["results"],
        json!([{"path": "Projects/Plan.md", "line": 2, "text": "The PLAN is here", "before": ["line one"], "after": ["line three", "line four"]}])
    );
    let v = fx
        .ok(
            "vault_search",
            json!({"query": "line", "context": 0, "max_results": 2}),
        )
        .await
        .structured
        .unwrap();
    assert_eq!(v["count"], 2);
    assert_eq!(v["truncated"], true);
    assert!(v["note"].as_str().unwrap().contains("first 2 matches"));
    assert_eq!(v["results"][1]["line"], 3);
    assert_eq!(v["results"][1]["before"], json!([]));
    // Exactly at the cap is not truncated.
    let v = fx
        .ok("vault_search", json!({"query": "line", "max_results": 3}))
        .await
        .structured
        .unwrap();
    assert_eq!(
        (v["count"].clone(), v["truncated"].clone()),
        (json!(3), json!(false))
    );

    let v = fx
        .ok("vault_search", json!({"query": "nothing like this"}))
        .await
        .structured
        .unwrap();
    assert_eq!(v["results"], json!([]));
    assert_eq!(v["note"], "No files containing 'nothing like this'");
    // The default cap is 50 matches.
    let many: String = (0..80).map(|i| format!("match {i}\n")).collect();
    std::fs::write(fx.root().join("Many.md"), many).unwrap();
    let v = fx
        .ok("vault_search", json!({"query": "match"}))
        .await
        .structured
        .unwrap();
    assert_eq!(
        (v["count"].clone(), v["truncated"].clone()),
        (json!(50), json!(true))
    );
    // Long lines are clipped on a character boundary.
    std::fs::write(fx.root().join("Long.md"), format!("zz{}", "é".repeat(900))).unwrap();
    let v = fx
        .ok("vault_search", json!({"query": "zz"}))
        .await
        .structured
        .unwrap();
    let t = v["results"][0]["text"].as_str().unwrap();
    assert_eq!(t.chars().count(), MAX_LINE_CHARS + 1);
    assert!(t.ends_with('…'));

    assert_eq!(fx.err("vault_search", json!({})).await, "query is required");
    assert_eq!(
        fx.err("vault_search", json!({"query": "  "})).await,
        "query is required"
    );
    assert_eq!(
        fx.err("vault_search", json!({"query": "x", "max_results": 0}))
            .await,
        "max_results must be between 1 and 500"
    );
    assert_eq!(
        fx.err("vault_search", json!({"query": "x", "context": 11}))
            .await,
        "context must be between 0 and 10"
    );
    assert_eq!(
        fx.err("vault_search", json!({"query": "x", "context": "2"}))
            .await,
        "context must be an integer"
    );
}
