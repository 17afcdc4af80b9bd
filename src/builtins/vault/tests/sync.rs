//! Git sync against a real bare remote: commits, pushes, pulls, conflicts, a hung git.

use super::*;

// The integration tests drive git the same way: one file, compiled into both.
#[path = "../../../../tests/support/git.rs"]
mod git_as_tester;
use git_as_tester::{bare_git, clone_of, sh_git, synced_vault};

#[tokio::test]
async fn git_sync_commits_pushes_and_pulls() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, vault) = synced_vault(tmp.path(), &[("Home.md", "# Home\n")]);
    let b = tools(vault.clone(), true);
    let call = |tool: &'static str, args: Value| {
        let b = b.clone();
        async move { b.call(tool, &args).await.unwrap() }
    };

    let out = call(
        "vault_write",
        json!({"path": "Daily/2025-01-02.md", "content": "Met Ada.\n", "commit_message": "Daily note"}),
    )
    .await;
    assert_eq!(out, ToolOutput::ok("Wrote and synced Daily/2025-01-02.md"));
    assert_eq!(
        bare_git(&bare, &["log", "-1", "--format=%s|%an"]).trim(),
        "Daily note|Vault Bot"
    );
    assert_eq!(
        bare_git(&bare, &["show", "HEAD:Daily/2025-01-02.md"]),
        "Met Ada.\n"
    );
    // Default message; only the written note is in the commit.
    std::fs::write(vault.join("stray.md"), "not mine").unwrap();
    let out = call(
        "vault_write",
        json!({"path": "Home.md", "content": "# Home v2\n"}),
    )
    .await;
    assert_eq!(out.text, "Wrote and synced Home.md");
    assert_eq!(
        bare_git(&bare, &["log", "-1", "--format=%s"]).trim(),
        "Update Home.md"
    );
    assert_eq!(
        bare_git(&bare, &["show", "--name-only", "--format=", "HEAD"]).trim(),
        "Home.md"
    );
    // Same content again: nothing to commit is fine.
    let out = call(
        "vault_write",
        json!({"path": "Home.md", "content": "# Home v2\n"}),
    )
    .await;
    assert_eq!(out.text, "Wrote and synced Home.md (no changes to commit)");
    assert_eq!(
        bare_git(&bare, &["rev-list", "--count", "HEAD"]).trim(),
        "3"
    );

    // Someone else pushes; a read pulls it first.
    let other = clone_of(&bare, tmp.path(), "other");
    std::fs::write(other.join("Remote.md"), "from elsewhere: plan\n").unwrap();
    sh_git(&other, &["add", "Remote.md"]);
    sh_git(&other, &["commit", "-q", "-m", "remote"]);
    sh_git(&other, &["push", "-q"]);
    let out = call("vault_read", json!({"path": "Remote.md"})).await;
    assert_eq!(out, ToolOutput::ok("from elsewhere: plan\n"));
    std::fs::write(other.join("Second.md"), "second plan\n").unwrap();
    sh_git(&other, &["add", "Second.md"]);
    sh_git(&other, &["commit", "-q", "-m", "second"]);
    sh_git(&other, &["push", "-q"]);
    let out = call("vault_search", json!({"query": "second"})).await;
    assert_eq!(out.structured.unwrap()["results"][0]["path"], "Second.md");

    // The remote moved on and nothing pulled since: the write rebases and pushes again.
    std::fs::write(other.join("Third.md"), "third\n").unwrap();
    sh_git(&other, &["add", "Third.md"]);
    sh_git(&other, &["commit", "-q", "-m", "third"]);
    sh_git(&other, &["push", "-q"]);
    let out = call(
        "vault_write",
        json!({"path": "Mine.md", "content": "mine\n"}),
    )
    .await;
    assert_eq!(out, ToolOutput::ok("Wrote and synced Mine.md"));
    assert_eq!(bare_git(&bare, &["show", "HEAD:Mine.md"]), "mine\n");
    assert_eq!(bare_git(&bare, &["show", "HEAD~1:Third.md"]), "third\n");
    assert!(vault.join("Third.md").exists());

    // A push that fails is reported; the file is still written.
    sh_git(
        &vault,
        &[
            "remote",
            "set-url",
            "origin",
            tmp.path().join("gone.git").to_str().unwrap(),
        ],
    );
    let out = call("vault_write", json!({"path": "Late.md", "content": "late"})).await;
    assert!(out.is_error);
    assert!(
        out.text
            .starts_with("file written but git sync failed: git push failed: exit status"),
        "{}",
        out.text
    );
    assert_eq!(
        std::fs::read_to_string(vault.join("Late.md")).unwrap(),
        "late"
    );
    // A failing pull is only logged: reads still work.
    let out = call("vault_read", json!({"path": "Late.md"})).await;
    assert_eq!(out, ToolOutput::ok("late"));
    let out = call("vault_list", json!({})).await;
    assert!(!out.is_error, "{}", out.text);
}

#[tokio::test]
async fn a_conflicting_pull_leaves_no_rebase_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, vault) = synced_vault(tmp.path(), &[("Home.md", "# Home\n")]);
    let b = tools(vault.clone(), true);
    let other = clone_of(&bare, tmp.path(), "other");
    std::fs::write(other.join("Home.md"), "theirs\n").unwrap();
    sh_git(&other, &["commit", "-q", "-am", "theirs"]);
    sh_git(&other, &["push", "-q"]);
    std::fs::write(vault.join("Home.md"), "ours\n").unwrap();
    sh_git(&vault, &["commit", "-q", "-am", "ours"]);
    let out = b
        .call("vault_read", &json!({"path": "Home.md"}))
        .await
        .unwrap();
    assert_eq!(out, ToolOutput::ok("ours\n"));
    assert!(!vault.join(".git/rebase-merge").exists());
    assert!(!vault.join(".git/rebase-apply").exists());
    assert_eq!(sh_git(&vault, &["status", "--porcelain"]).trim(), "");
}

#[tokio::test]
async fn git_that_hangs_is_killed_at_the_timeout() {
    let tmp = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    // `git -c alias.x='!sleep 5' x`: a shell alias we start only in this test, to hang.
    let r = git(
        tmp.path(),
        &["-c", "alias.hang=!sleep 5", "hang"],
        Duration::from_millis(300),
    )
    .await;
    assert!(r.is_err_and(|e| e.contains("timed out")));
    assert!(t0.elapsed() < Duration::from_secs(4));
}
