//! Tests of the vault tools, and the fixture vault they share.

mod notes;
mod sync;

use super::search::MAX_LINE_CHARS;
use super::sync::git;
use super::*;
use crate::builtins::Builtins;
use crate::builtins::workspace::MAX_READ_BYTES;
use crate::config::VaultSettings;
use serde_json::json;

/// The default git time limit (the config's `vault.git.timeout`), as the tests use it.
const GIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The vault tools over `path`.
fn tools(path: PathBuf, git_sync: bool) -> Builtins {
    Builtins::new(vec![group(&VaultSettings {
        path,
        git_sync,
        max_bytes: MAX_READ_BYTES,
        git_timeout: GIT_TIMEOUT,
    })])
}

struct Fx {
    tmp: tempfile::TempDir,
    b: Builtins,
}

impl Fx {
    /// A vault at `<tmp>/vault` with a few notes, a sibling `vault-evil` and a secret
    /// beside it.
    fn new(git_sync: bool) -> Fx {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("vault");
        for (p, text) in [
            (
                "Home.md",
                "# Home\nWelcome to the vault.\nSee [[Projects/Plan]].\n",
            ),
            (
                "Projects/Plan.md",
                "line one\nThe PLAN is here\nline three\nline four\n",
            ),
            ("Projects/notes.txt", "plan in a text file\n"),
            ("Projects/Deep/Idea.MD", "another plan\n"),
            (".obsidian/app.md", "plan hidden\n"),
            ("Archive/.hidden.md", "plan hidden file\n"),
        ] {
            let f = root.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        }
        std::fs::create_dir_all(tmp.path().join("vault-evil")).unwrap();
        std::fs::write(tmp.path().join("vault-evil/x.md"), "evil plan").unwrap();
        std::fs::write(tmp.path().join("secret.md"), "secret plan").unwrap();
        let b = tools(root, git_sync);
        Fx { tmp, b }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("vault")
    }

    async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        self.b.call(tool, &args).await.unwrap()
    }

    async fn ok(&self, tool: &str, args: Value) -> ToolOutput {
        let out = self.call(tool, args).await;
        assert!(!out.is_error, "{tool}: {}", out.text);
        out
    }

    async fn err(&self, tool: &str, args: Value) -> String {
        let out = self.call(tool, args).await;
        assert!(out.is_error, "{tool} should fail: {}", out.text);
        out.text
    }
}
