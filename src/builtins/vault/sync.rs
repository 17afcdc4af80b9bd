//! The vault's optional git sync: pull before reading, commit and push after writing, and
//! running git itself (no shell, a time limit).

use super::Vault;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

impl Vault {
    /// `git pull --rebase` when sync is on. Failures are logged, not returned: the notes on
    /// disk are still worth reading when the remote is unreachable.
    pub(super) async fn pull(&self) {
        if !self.git_sync {
            return;
        }
        let _guard = self.git_lock.lock().await;
        let root = self.root.as_path();
        if self.rebase_in_progress().await {
            tracing::warn!(vault = %root.display(), "vault git pull skipped: a rebase is in progress");
            return;
        }
        let failure = match git(root, &["pull", "--rebase"], self.git_timeout).await {
            Ok(out) if out.ok() => return,
            Ok(out) => out.failure("pull"),
            Err(e) => e,
        };
        tracing::warn!(vault = %root.display(), "vault git pull failed (using the local copy): {failure}");
        // A conflicting pull stops mid-rebase; undo it so the vault stays writable.
        if self.rebase_in_progress().await
            && let Err(e) = git(root, &["rebase", "--abort"], self.git_timeout).await
        {
            tracing::warn!(vault = %root.display(), "vault git rebase --abort failed: {e}");
        }
    }

    /// Whether the vault's repository is stopped mid-rebase.
    async fn rebase_in_progress(&self) -> bool {
        let args = [
            "rev-parse",
            "--git-path",
            "rebase-merge",
            "--git-path",
            "rebase-apply",
        ];
        match git(&self.root, &args, self.git_timeout).await {
            Ok(out) if out.ok() => out
                .stdout
                .lines()
                .map(str::trim)
                .any(|p| !p.is_empty() && self.root.join(p).exists()),
            _ => false,
        }
    }

    /// `git add`, `git commit` (only this note, only if it changed), `git push` (after a
    /// rejected push: `git pull --rebase` and one more push). Pushes even with nothing new to
    /// commit, so a commit left by an earlier failed push goes out. Ok(false) means there was
    /// nothing to commit.
    pub(super) async fn commit_and_push(&self, rel: &Path, message: &str) -> Result<bool, String> {
        let root = self.root.as_path();
        let t = self.git_timeout;
        let rel = rel.as_os_str();
        let s = OsStr::new;
        let add = git(root, &[s("add"), s("--"), rel], t).await?;
        if !add.ok() {
            return Err(add.failure("add"));
        }
        let diff = git(
            root,
            &[s("diff"), s("--cached"), s("--quiet"), s("--"), rel],
            t,
        )
        .await?;
        let changed = match diff.code {
            Some(0) => false,
            Some(1) => true,
            _ => return Err(diff.failure("diff")),
        };
        if changed {
            let commit = git(
                root,
                &[s("commit"), s("-q"), s("-m"), s(message), s("--"), rel],
                t,
            )
            .await?;
            if !commit.ok() {
                return Err(commit.failure("commit"));
            }
        }
        let push = git(root, &["push", "-q"], t).await?;
        if push.ok() {
            return Ok(changed);
        }
        // Usually the remote moved on since the last pull: rebase onto it and push once more.
        // Anything else (no remote, no access, a conflict) reports the first push's failure.
        let pull = git(root, &["pull", "-q", "--rebase"], t).await?;
        if !pull.ok() {
            if self.rebase_in_progress().await {
                let _ = git(root, &["rebase", "--abort"], t).await;
            }
            return Err(push.failure("push"));
        }
        let again = git(root, &["push", "-q"], t).await?;
        if !again.ok() {
            return Err(again.failure("push"));
        }
        Ok(changed)
    }
}

/// What a git command printed and how it ended.
pub(super) struct GitRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl GitRun {
    fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// `git <what> failed: exit status N: <last of stderr>`.
    fn failure(&self, what: &str) -> String {
        let status = match self.code {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".into(),
        };
        let err = self.stderr.trim();
        // The end of stderr holds the reason; keep the message short.
        let tail: String = {
            let n = err.chars().count();
            err.chars().skip(n.saturating_sub(600)).collect()
        };
        if tail.is_empty() {
            format!("git {what} failed: {status}")
        } else {
            format!("git {what} failed: {status}: {tail}")
        }
    }
}

/// Runs `git ARGS` in `dir` without a shell; killed after `timeout`. Err only when git
/// could not run or timed out.
pub(super) async fn git<S: AsRef<std::ffi::OsStr>>(
    dir: &Path,
    args: &[S],
    timeout: Duration,
) -> Result<GitRun, String> {
    let what = args
        .first()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .unwrap_or_default();
    let args: Vec<OsString> = args.iter().map(|a| a.as_ref().to_os_string()).collect();
    let child = tokio::process::Command::new("git")
        .args(&args)
        .current_dir(dir)
        // Never wait for a password prompt; paths are literal, not pathspec patterns.
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_LITERAL_PATHSPECS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("git {what} could not start: {e}"))?;
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => Ok(GitRun {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }),
        Ok(Err(e)) => Err(format!("git {what} failed: {e}")),
        // Dropping the future drops the child, which kill_on_drop kills.
        Err(_) => Err(format!(
            "git {what} timed out after {}s",
            timeout.as_secs_f32()
        )),
    }
}
