//! Tests of the workspace and memory tools: round trips, permissions, the original error
//! messages, refused paths, capped reads and the memory whitelist.

use super::*;
use crate::builtins::Builtins;
use crate::config::BuiltinsSettings;
use serde_json::json;
use std::os::unix::fs::PermissionsExt;

struct Fx {
    tmp: tempfile::TempDir,
    b: Builtins,
}

impl Fx {
    /// A workspace at `<tmp>/ai-data` (not created), a sibling `ai-data-evil` and a
    /// secret beside them.
    fn new() -> Fx {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("ai-data-evil")).unwrap();
        std::fs::write(tmp.path().join("ai-data-evil/x"), "evil").unwrap();
        std::fs::write(tmp.path().join("secret.txt"), "top secret").unwrap();
        let settings = BuiltinsSettings::defaults(tmp.path());
        Fx {
            b: Builtins::new(vec![group(&settings)]),
            tmp,
        }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("ai-data")
    }

    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        self.b.call(tool, &args).await.unwrap()
    }

    async fn ok(&self, tool: &str, args: Value) -> String {
        let out = self.call(tool, args).await;
        assert!(!out.is_error, "{tool}: {}", out.text);
        out.text
    }

    async fn err(&self, tool: &str, args: Value) -> String {
        let out = self.call(tool, args).await;
        assert!(out.is_error, "{tool} should fail: {}", out.text);
        out.text
    }
}

#[test]
fn tools_have_the_original_names_parameters_and_hints() {
    let fx = Fx::new();
    let tools = fx.b.tools();
    let names: Vec<_> = tools.iter().map(|t| t.name).collect();
    assert_eq!(
        names,
        [
            "workspace_read",
            "workspace_write",
            "workspace_list",
            "memory_read",
            "memory_write"
        ]
    );
    for t in &tools {
        assert_eq!(t.input_schema["type"], "object");
        for (_, p) in t.input_schema["properties"].as_object().unwrap() {
            assert!(p["type"].is_string(), "{}", t.name);
        }
        let ro = t.annotations.as_ref().unwrap()["readOnlyHint"] == true;
        assert_eq!(ro, !t.name.ends_with("_write"), "{}", t.name);
    }
    let schema = |n: &str| {
        tools
            .iter()
            .find(|t| t.name == n)
            .unwrap()
            .input_schema
            .clone()
    };
    assert_eq!(
        schema("workspace_write")["required"],
        json!(["path", "content"])
    );
    assert_eq!(schema("workspace_read")["required"], json!(["path"]));
    assert!(schema("workspace_list").get("required").is_none());
    assert_eq!(schema("memory_write")["required"], json!(["content"]));
    assert!(schema("memory_write")["properties"]["append"].is_object());
    assert!(schema("memory_read")["properties"]["file"].is_object());
}

#[tokio::test]
async fn write_read_list_round_trip() {
    let fx = Fx::new();
    // Reads and lists before the first write behave as an empty workspace.
    assert_eq!(
        fx.ok("workspace_list", json!({})).await,
        r#"{"path":".","entries":[]}"#
    );
    assert!(
        fx.err("workspace_read", json!({"path": "a.md"}))
            .await
            .starts_with("failed to read file: a.md")
    );
    assert!(!fx.root().exists());
    assert_eq!(
        fx.ok(
            "workspace_write",
            json!({"path": "notes/día.md", "content": "héllo\n"})
        )
        .await,
        "Wrote 7 bytes to notes/día.md"
    );
    assert_eq!(
        fx.ok("workspace_read", json!({"path": "notes/día.md"}))
            .await,
        "héllo\n"
    );
    assert_eq!(
        fx.ok("workspace_read", json!({"path": "./notes/../notes/día.md"}))
            .await,
        "héllo\n"
    );
    fx.ok("workspace_write", json!({"path": "b.txt", "content": ""}))
        .await;
    fx.ok(
        "workspace_write",
        json!({"path": ".hidden", "content": "x"}),
    )
    .await;
    let out = fx.call("workspace_list", json!({})).await;
    assert_eq!(
        out.structured.unwrap(),
        json!({"path": ".", "entries": [".hidden", "b.txt", "notes/"]})
    );
    assert_eq!(
        fx.ok("workspace_list", json!({"path": "notes"})).await,
        r#"{"path":"notes","entries":["día.md"]}"#
    );
    // Overwrite replaces the whole file, leaves no temp file, and makes files 0644.
    fx.ok(
        "workspace_write",
        json!({"path": "notes/día.md", "content": "new"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(fx.root().join("notes/día.md")).unwrap(),
        "new"
    );
    let (entries, _) = list_dir(&fx.root().join("notes"), false).unwrap();
    assert_eq!(entries, ["día.md"]);
    let mode = std::fs::metadata(fx.root().join("b.txt"))
        .unwrap()
        .permissions()
        .mode();
    // 0644 less the umask: owner read-write, nobody else writes, nobody executes.
    assert_eq!(mode & 0o600, 0o600);
    assert_eq!(mode & 0o133, 0);
}

#[tokio::test]
async fn overwrite_keeps_the_files_permissions() {
    let fx = Fx::new();
    fx.ok("workspace_write", json!({"path": "p.sh", "content": "a"}))
        .await;
    let p = fx.root().join("p.sh");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap();
    fx.ok("workspace_write", json!({"path": "p.sh", "content": "b"}))
        .await;
    assert_eq!(
        std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777,
        0o750
    );
}

#[tokio::test]
async fn errors_are_tool_errors_with_the_original_messages() {
    let fx = Fx::new();
    assert_eq!(
        fx.err("workspace_read", json!({})).await,
        "path is required"
    );
    assert_eq!(
        fx.err("workspace_read", json!({"path": 3})).await,
        "path must be a string"
    );
    assert_eq!(
        fx.err("workspace_write", json!({"path": "a"})).await,
        "content is required"
    );
    assert_eq!(
        fx.err("workspace_write", json!({"path": "  ", "content": "x"}))
            .await,
        "path is required"
    );
    fx.ok("workspace_write", json!({"path": "d/f.md", "content": "x"}))
        .await;
    assert_eq!(
        fx.err("workspace_read", json!({"path": "missing.md"}))
            .await,
        "failed to read file: missing.md: no such file"
    );
    assert_eq!(
        fx.err("workspace_read", json!({"path": "d"})).await,
        "failed to read file: d is a directory"
    );
    assert!(
        fx.err("workspace_list", json!({"path": "d/f.md"}))
            .await
            .starts_with("failed to list directory: d/f.md:")
    );
    assert!(
        fx.err("workspace_list", json!({"path": "nope"}))
            .await
            .starts_with("failed to list directory: nope:")
    );
    assert!(
        fx.err("workspace_write", json!({"path": "d", "content": "x"}))
            .await
            .starts_with("failed to write file: d:")
    );
    assert!(
        fx.err(
            "workspace_write",
            json!({"path": "d/f.md/x", "content": "x"})
        )
        .await
        .starts_with("failed to create directory: d/f.md/x:")
    );
}

#[tokio::test]
async fn traversal_is_refused_everywhere() {
    let fx = Fx::new();
    fx.ok("workspace_write", json!({"path": "in.md", "content": "x"}))
        .await;
    std::os::unix::fs::symlink(fx.tmp.path(), fx.root().join("out")).unwrap();
    std::os::unix::fs::symlink(fx.tmp.path().join("secret.txt"), fx.root().join("s.txt")).unwrap();
    let escapes = [
        "../secret.txt",
        "../ai-data-evil/x",
        "notes/../../secret.txt",
        "/etc/passwd",
        fx.tmp.path().join("secret.txt").to_str().unwrap(),
        "out/secret.txt",
        "out/ai-data-evil/x",
        "s.txt",
    ]
    .map(str::to_string);
    for p in &escapes {
        assert_eq!(
            fx.err("workspace_read", json!({"path": p})).await,
            "path escapes workspace",
            "read {p}"
        );
        assert_eq!(
            fx.err("workspace_write", json!({"path": p, "content": "pwned"}))
                .await,
            "path escapes workspace",
            "write {p}"
        );
    }
    for p in ["..", "../ai-data-evil", "/", "/etc", "out"] {
        assert_eq!(
            fx.err("workspace_list", json!({"path": p})).await,
            "path escapes workspace",
            "list {p}"
        );
    }
    assert_eq!(
        fx.err(
            "workspace_write",
            json!({"path": "out/new.md", "content": "x"})
        )
        .await,
        "path escapes workspace"
    );
    // Nothing outside the root changed or appeared.
    assert_eq!(
        std::fs::read_to_string(fx.tmp.path().join("secret.txt")).unwrap(),
        "top secret"
    );
    assert_eq!(
        std::fs::read_to_string(fx.tmp.path().join("ai-data-evil/x")).unwrap(),
        "evil"
    );
    assert!(!fx.tmp.path().join("new.md").exists());
}

#[tokio::test]
async fn reads_are_capped_on_a_character_boundary_and_binary_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("big.md");
    // 'é' is two bytes; a 5-byte cap falls inside the third one.
    std::fs::write(&file, "éééé").unwrap();
    let t = read_text(&file, 5).unwrap();
    assert_eq!(t.text, "éé");
    assert_eq!(
        t.with_marker(),
        "éé\n\n[Content truncated: 4 of 8 bytes shown]"
    );
    assert_eq!(read_text(&file, 8).unwrap().with_marker(), "éééé");
    std::fs::write(&file, b"ab\0cd").unwrap();
    assert!(matches!(read_text(&file, 100), Err(ReadError::Binary)));
    std::fs::write(&file, b"ab\xffcd").unwrap();
    assert!(matches!(read_text(&file, 100), Err(ReadError::Binary)));

    let fx = Fx::new();
    std::fs::create_dir_all(fx.root()).unwrap();
    let big = "a".repeat(MAX_READ_BYTES as usize + 10);
    std::fs::write(fx.root().join("big.txt"), &big).unwrap();
    let out = fx.ok("workspace_read", json!({"path": "big.txt"})).await;
    assert!(out.starts_with(&big[..MAX_READ_BYTES as usize]));
    assert!(out.ends_with(&format!(
        "[Content truncated: {MAX_READ_BYTES} of {} bytes shown]",
        MAX_READ_BYTES + 10
    )));
    std::fs::write(fx.root().join("img.png"), b"\x89PNG\r\n\x1a\n\0\0").unwrap();
    assert_eq!(
        fx.err("workspace_read", json!({"path": "img.png"})).await,
        "failed to read file: img.png is a binary file; only UTF-8 text files can be read"
    );
}

#[tokio::test]
async fn memory_files_are_whitelisted() {
    let fx = Fx::new();
    // Missing files (and a missing workspace) read as empty text.
    assert_eq!(fx.ok("memory_read", json!({})).await, "");
    assert_eq!(
        fx.ok("memory_read", json!({"file": "memory/2024-02-29.md"}))
            .await,
        ""
    );
    assert_eq!(
        fx.ok("memory_write", json!({"content": "# Memory\n"}))
            .await,
        "Wrote memory to MEMORY.md (9 bytes)"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root().join("MEMORY.md")).unwrap(),
        "# Memory\n"
    );
    for f in ["SOUL.md", "USER.md", "memory/2024-01-15.md"] {
        fx.ok("memory_write", json!({"file": f, "content": f}))
            .await;
        assert_eq!(fx.ok("memory_read", json!({"file": f})).await, f);
    }
    assert_eq!(
        fx.ok("memory_read", json!({"file": "MEMORY.md"})).await,
        "# Memory\n"
    );
    for bad in [
        "notes.md",
        "memory/2024-02-30.md",
        "memory/2024-1-5.md",
        "memory/2023-02-29.md",
        "memory/today.md",
        "memory/2024-01-15.txt",
        "../MEMORY.md",
        "/MEMORY.md",
        "./MEMORY.md",
        "memory/../SOUL.md",
        "memory/x/2024-01-15.md",
        "scripts/x.star",
    ] {
        let e = fx
            .err("memory_write", json!({"file": bad, "content": "x"}))
            .await;
        assert!(
            e.starts_with(&format!("invalid memory path '{bad}': allowed are MEMORY.md, SOUL.md, USER.md and memory/YYYY-MM-DD.md")),
            "{e}"
        );
        fx.err("memory_read", json!({"file": bad})).await;
    }
    assert_eq!(
        fx.err("memory_write", json!({"file": "SOUL.md"})).await,
        "content is required"
    );
    assert_eq!(
        fx.err("memory_write", json!({"content": "x", "append": "yes"}))
            .await,
        "append must be a boolean"
    );
}

#[tokio::test]
async fn memory_append_adds_a_line() {
    let fx = Fx::new();
    let day = "memory/2025-03-01.md";
    assert_eq!(
        fx.ok(
            "memory_write",
            json!({"file": day, "content": "first", "append": true})
        )
        .await,
        "Appended 5 bytes to memory/2025-03-01.md"
    );
    fx.ok(
        "memory_write",
        json!({"file": day, "content": "second\n", "append": true}),
    )
    .await;
    fx.ok(
        "memory_write",
        json!({"file": day, "content": "third", "append": true}),
    )
    .await;
    assert_eq!(
        fx.ok("memory_read", json!({"file": day})).await,
        "first\nsecond\nthird"
    );
    fx.ok(
        "memory_write",
        json!({"file": day, "content": "reset", "append": false}),
    )
    .await;
    assert_eq!(fx.ok("memory_read", json!({"file": day})).await, "reset");
    // Concurrent appends are serialised: none is lost.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8 {
        let b = fx.b.clone();
        tasks.spawn(async move {
            let args = json!({"content": format!("line {i}"), "append": true});
            b.call("memory_write", &args).await.unwrap()
        });
    }
    while let Some(out) = tasks.join_next().await {
        let out = out.unwrap();
        assert!(!out.is_error, "{}", out.text);
    }
    let text = fx.ok("memory_read", json!({})).await;
    assert_eq!(text.lines().count(), 8, "{text}");
}

#[tokio::test]
async fn memory_files_that_are_escaping_symlinks_are_refused() {
    let fx = Fx::new();
    std::fs::create_dir_all(fx.root()).unwrap();
    std::os::unix::fs::symlink(fx.tmp.path().join("secret.txt"), fx.root().join("USER.md"))
        .unwrap();
    std::os::unix::fs::symlink(fx.tmp.path(), fx.root().join("memory")).unwrap();
    assert_eq!(
        fx.err("memory_read", json!({"file": "USER.md"})).await,
        "path escapes workspace"
    );
    assert_eq!(
        fx.err(
            "memory_write",
            json!({"file": "USER.md", "content": "x", "append": true})
        )
        .await,
        "path escapes workspace"
    );
    assert_eq!(
        fx.err(
            "memory_write",
            json!({"file": "memory/2024-01-01.md", "content": "x"})
        )
        .await,
        "path escapes workspace"
    );
    assert_eq!(
        std::fs::read_to_string(fx.tmp.path().join("secret.txt")).unwrap(),
        "top secret"
    );
    assert!(!fx.tmp.path().join("2024-01-01.md").exists());
}
