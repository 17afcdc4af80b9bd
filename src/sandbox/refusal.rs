//! Refusals a confined server reports in its own words (stderr lines, tool results): the
//! path the sandbox refused, the kind of grant that allows it, and the one command that
//! does; and the last few of them, kept on the server for `servers` and `/health`.

use crate::config::sandbox::Grant;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a line said was refused, before the profile is asked about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub op: Op,
    pub path: PathBuf,
}

/// The operation a refusal names, as far as the words tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Makes or changes something (mkdir, rename, unlink, write…).
    Write,
    /// Lists or reads something that is not a file's content (scandir, opendir, readlink).
    Read,
    /// A Unix socket connect.
    Connect,
    /// `open` or a message without the operation (Python's `[Errno 13]`): for reading or
    /// for writing, which the place tells (see [`Record::kind`]).
    Open,
}

/// Node's `fs` operations that change something.
const NODE_WRITES: &[&str] = &[
    "mkdir",
    "mkdtemp",
    "rename",
    "unlink",
    "rmdir",
    "rm",
    "write",
    "copyfile",
    "cp",
    "symlink",
    "link",
    "chmod",
    "chown",
    "utime",
    "futime",
    "lchown",
    "truncate",
    "appendfile",
];
const NODE_READS: &[&str] = &["scandir", "opendir", "readlink", "readdir", "lstat", "stat"];

/// The refusal in one line of text, if it names one with a path.
pub fn detect(line: &str) -> Option<Seen> {
    // Node: `EACCES: permission denied, mkdir '/home/u/.x'`.
    if let Some(at) = line.find("EACCES: permission denied, ") {
        let rest = &line[at + "EACCES: permission denied, ".len()..];
        let (op, rest) = rest.split_once(' ')?;
        let op = node_op(op);
        return Some(Seen {
            op,
            path: first_path(rest)?,
        });
    }
    // Node's net: `connect EACCES /run/user/1000/bus`.
    if let Some(at) = line.find("connect EACCES ") {
        return Some(Seen {
            op: Op::Connect,
            path: first_path(&line[at + "connect EACCES ".len()..])?,
        });
    }
    // Python: `[Errno 13] Permission denied: '/home/u/.x'`; Rust: `… /path: Permission
    // denied (os error 13)`; C tools: `mkdir: cannot create directory '/x': Permission denied`.
    let lower = line.to_ascii_lowercase();
    // A socket rule made of seccomp answers EPERM rather than EACCES.
    let refused_connect = lower.contains("connect")
        && (line.contains("EPERM") || line.contains("Operation not permitted"));
    if !(refused_connect
        || line.contains("[Errno 13]")
        || line.contains("os error 13")
        || line.contains("Permission denied")
        || line.contains("EACCES"))
    {
        return None;
    }
    let path = first_path(line)?;
    let said = |words: &[&str]| {
        lower
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| words.contains(&w))
    };
    let op = if said(&["connect", "socket"]) {
        Op::Connect
    } else if said(&[
        "mkdir", "create", "creating", "write", "writing", "save", "saving",
    ]) {
        Op::Write
    } else if said(&["read", "reading", "list", "listing"]) {
        Op::Read
    } else {
        Op::Open
    };
    Some(Seen { op, path })
}

fn node_op(op: &str) -> Op {
    let op = op.to_ascii_lowercase();
    if NODE_WRITES.contains(&op.as_str()) {
        Op::Write
    } else if NODE_READS.contains(&op.as_str()) {
        Op::Read
    } else if op == "connect" {
        Op::Connect
    } else {
        Op::Open
    }
}

/// The first absolute path in `text`: quoted ('…', "…", ‘…’, `…`) or up to a blank, a
/// colon or a comma.
fn first_path(text: &str) -> Option<PathBuf> {
    let start = text.find('/')?;
    let before = text[..start].chars().next_back();
    let rest = &text[start..];
    let closing = match before {
        Some('\'') => Some('\''),
        Some('"') => Some('"'),
        Some('‘') => Some('’'),
        Some('`') => Some('`'),
        _ => None,
    };
    let end = match closing {
        Some(c) => rest.find(c)?,
        None => rest
            .find(|c: char| c.is_whitespace() || matches!(c, ':' | ',' | ')' | ']' | '\'' | '"'))
            .unwrap_or(rest.len()),
    };
    let path = rest[..end].trim_end_matches('.');
    // A lone `/` or a URL's `//` is not a refused place.
    if path.len() < 2 || path.starts_with("//") {
        return None;
    }
    Some(PathBuf::from(path))
}

/// One refusal as `servers` and `/health` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The place, `~` for the home folder.
    pub what: String,
    /// write, read, net or socket.
    pub kind: String,
    /// RFC 3339, the last time it was seen.
    pub at: String,
    /// The command that allows it.
    pub fix: String,
    /// Whether it lies in a place the profile denies (where credentials live): the sentence
    /// then says so, since allowing it hands the server what is kept there.
    #[serde(default)]
    pub credential: bool,
}

impl Refusal {
    /// The sentence a client gets with the call's result.
    pub fn sentence(&self) -> String {
        let doing = match self.kind.as_str() {
            "write" => "writing",
            "read" => "reading",
            "socket" => "connecting to the socket",
            _ => "reaching",
        };
        let why = match self.credential {
            true => ", a place where credentials live; if this server should have it",
            false => "; to allow it",
        };
        format!(
            "openpact: the sandbox refused {doing} {}{why}: {}",
            self.what, self.fix
        )
    }
}

/// How many refusals a server keeps.
const KEPT: usize = 5;

/// A server's recent refusals. `count` grows with every one seen, so a call can tell which
/// came while it ran.
#[derive(Debug, Default)]
pub struct Record {
    inner: Mutex<(VecDeque<(u64, Refusal)>, u64)>,
}

/// What the record needs to know of the server: its name, home folder and profile.
pub struct Judge<'a> {
    pub server: &'a str,
    pub home: Option<&'a Path>,
    pub profile: &'a super::Profile,
    /// The config file to name in the command, as shown (`None`: the one a plain
    /// `openpact` finds).
    pub config: Option<&'a str>,
}

impl Judge<'_> {
    /// The grant that would allow `seen`, if the profile does not already: places it grants
    /// are refused for other reasons (file modes), which no grant changes; the kernel's own
    /// files are not the profile's to grant, and the shared package caches must stay shut.
    pub fn refusal(&self, seen: &Seen) -> Option<Refusal> {
        let path = &seen.path;
        let p = self.profile;
        // The shared package caches are read-only on purpose (code planted there runs
        // outside the sandbox later); the server has caches of its own.
        if ["/proc", "/sys", "/dev"]
            .iter()
            .any(|d| path.starts_with(d))
            || p.shared_caches.iter().any(|c| path.starts_with(c))
        {
            return None;
        }
        let reads: Vec<PathBuf> = p.read.iter().chain(&p.write).cloned().collect();
        let credential = denied(&p.deny, &reads, path);
        let readable = covered(&reads, &p.private, path) && !credential;
        let kind = match seen.op {
            Op::Connect => Grant::Socket,
            Op::Read => Grant::Read,
            Op::Write => Grant::Write,
            // Reading it was allowed, so it was a write; a credential place is read; a
            // private place (a temp root) may have been either, and a write grant allows both.
            Op::Open if readable => Grant::Write,
            Op::Open if credential => Grant::Read,
            Op::Open => Grant::Write,
        };
        let granted = match kind {
            Grant::Write => covered(&p.write, &p.private, path),
            Grant::Read => readable,
            Grant::Socket => p.unix_sockets.iter().any(|g| g == path),
            Grant::Net => false,
        };
        if granted {
            return None;
        }
        let place = self.place(kind, path);
        let what = tilde(path, self.home);
        let shown = tilde(&place, self.home);
        let mut fix = allow_command(self.config, self.server, kind, &shown);
        // A file to be can only be granted once it exists (see `made_at_start`).
        if kind == Grant::Write
            && !place.exists()
            && !crate::config::sandbox::made_at_start(&place, self.home)
        {
            fix = format!("touch {} && {fix}", shell_word(&shown));
        }
        Some(Refusal {
            what,
            kind: kind.word().to_string(),
            at: crate::time::now_rfc3339(),
            fix,
            credential,
        })
    }

    /// What to grant for a refused `path`: itself when it exists; for one to be made, the
    /// highest missing folder above it that openpact makes at start (a server creating
    /// `~/.app/cache/x.json` needs `~/.app`), else the folder it goes in.
    fn place(&self, kind: Grant, path: &Path) -> PathBuf {
        if kind != Grant::Write || path.exists() {
            return path.to_path_buf();
        }
        let made = |p: &Path| crate::config::sandbox::made_at_start(p, self.home);
        let highest_missing = path
            .ancestors()
            .filter(|a| !a.exists())
            .last()
            .filter(|a| made(a));
        match highest_missing {
            Some(a) => a.to_path_buf(),
            None if made(path) => path.to_path_buf(),
            None => match path.parent() {
                Some(parent) if parent.exists() && !super::places::too_broad(parent, self.home) => {
                    parent.to_path_buf()
                }
                _ => path.to_path_buf(),
            },
        }
    }
}

/// Whether a grant in `grants` holds `path`: one that a private place (cut out of broader
/// grants) between them does not take it from.
fn covered(grants: &[PathBuf], private: &[PathBuf], path: &Path) -> bool {
    grants.iter().any(|g| {
        path.starts_with(g)
            && !private
                .iter()
                .any(|p| path.starts_with(p) && !g.starts_with(p))
    })
}

/// Whether a denied place holds `path` without a grant inside it (naming a credential place
/// grants it).
fn denied(deny: &[PathBuf], grants: &[PathBuf], path: &Path) -> bool {
    deny.iter().any(|d| {
        path.starts_with(d)
            && !grants
                .iter()
                .any(|g| g.starts_with(d) && path.starts_with(g))
    })
}

/// `path` with the home folder shown as `~`.
pub fn tilde(path: &Path, home: Option<&Path>) -> String {
    match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) if rest.as_os_str().is_empty() => "~".to_string(),
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    }
}

/// The command that grants `value` to `server`: the one every refusal names (paths, sockets,
/// hosts, downloads at start). `config` is the file to name, shown as the user would type it,
/// when it is not the one a plain `openpact` finds.
pub fn allow_command(config: Option<&str>, server: &str, grant: Grant, value: &str) -> String {
    let flag = config.map_or_else(String::new, |c| format!("--config {} ", shell_word(c)));
    format!(
        "openpact {flag}sandbox allow {} {} {}",
        shell_word(server),
        grant.word(),
        shell_word(value)
    )
}

/// `word` as one shell word: quoted when it holds anything a shell would read.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./~:@%+=,".contains(c);
    // A leading `~/` stays unquoted so the shell still expands it.
    let (head, rest) = match word.strip_prefix("~/") {
        Some(rest) => ("~/", rest),
        None => ("", word),
    };
    if !rest.is_empty() && rest.chars().all(plain) {
        return word.to_string();
    }
    format!("{head}'{}'", rest.replace('\'', r"'\''"))
}

impl Record {
    /// Files `r` (a repeat moves to the end with its new time) and returns it.
    pub fn note(&self, r: Refusal) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.1 += 1;
        let n = g.1;
        g.0.retain(|(_, old)| !(old.what == r.what && old.kind == r.kind));
        if g.0.len() == KEPT {
            g.0.pop_front();
        }
        g.0.push_back((n, r));
    }

    /// How many were noted so far.
    pub fn count(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).1
    }

    /// Those noted after the count was `since`.
    pub fn since(&self, since: u64) -> Vec<Refusal> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0.iter()
            .filter(|(n, _)| *n > since)
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// The last few, oldest first.
    pub fn recent(&self) -> Vec<Refusal> {
        self.since(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(line: &str) -> (Op, String) {
        let s = detect(line).unwrap_or_else(|| panic!("nothing in {line}"));
        (s.op, s.path.display().to_string())
    }

    #[test]
    fn node() {
        assert_eq!(
            seen("Error: EACCES: permission denied, mkdir '/home/u/.claude-server-commander'"),
            (Op::Write, "/home/u/.claude-server-commander".into())
        );
        assert_eq!(
            seen("[Error: EACCES: permission denied, open '/home/u/.kube/config'] {"),
            (Op::Open, "/home/u/.kube/config".into())
        );
        assert_eq!(
            seen("EACCES: permission denied, scandir '/home/u/.ssh'"),
            (Op::Read, "/home/u/.ssh".into())
        );
        assert_eq!(
            seen("Error: connect EACCES /run/user/1000/bus"),
            (Op::Connect, "/run/user/1000/bus".into())
        );
    }

    #[test]
    fn python() {
        assert_eq!(
            seen("PermissionError: [Errno 13] Permission denied: '/home/u/.arxiv-mcp-server'"),
            (Op::Open, "/home/u/.arxiv-mcp-server".into())
        );
        assert_eq!(
            seen("OSError: [Errno 13] Permission denied: \"/home/u/it's\""),
            (Op::Open, "/home/u/it's".into())
        );
    }

    #[test]
    fn rust_and_c() {
        assert_eq!(
            seen("Error: cannot write /home/u/notes.txt: Permission denied (os error 13)"),
            (Op::Write, "/home/u/notes.txt".into())
        );
        assert_eq!(
            seen("cannot read /home/u/.kube/config: Permission denied (os error 13)"),
            (Op::Read, "/home/u/.kube/config".into())
        );
        assert_eq!(
            seen("failed: /home/u/a b/c: Permission denied (os error 13)"),
            (Op::Open, "/home/u/a".into())
        );
        assert_eq!(
            seen("mkdir: cannot create directory ‘/home/u/.x’: Permission denied"),
            (Op::Write, "/home/u/.x".into())
        );
        assert_eq!(
            seen("connect /tmp/agent.sock: Operation not permitted (os error 1)"),
            (Op::Connect, "/tmp/agent.sock".into())
        );
    }

    #[test]
    fn nothing_without_a_path_or_a_refusal() {
        assert_eq!(detect("Permission denied (os error 13)"), None);
        assert_eq!(detect("[Errno 13] Permission denied"), None);
        assert_eq!(detect("wrote /home/u/x"), None);
        assert_eq!(
            detect("GET https://example.com/x 403 Permission denied"),
            None
        );
    }

    #[test]
    fn the_kind_and_the_place_granted() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id"), "k").unwrap();
        std::fs::write(home.join("notes.txt"), "n").unwrap();
        let profile = crate::sandbox::Profile {
            read: vec!["/".into()],
            write: vec![home.join(".cache")],
            deny: vec![home.join(".ssh")],
            private: vec!["/elsewhere/tmp".into()],
            network: crate::sandbox::Network::None,
            env: Vec::new(),
            tmpdir: "/elsewhere/tmp/s".into(),
            data: home.join(".local/share/openpact/servers/s"),
            create: Vec::new(),
            caches: home.join(".cache/openpact/servers/s"),
            shared_caches: vec![home.join(".npm")],
            warnings: Vec::new(),
            unix_sockets: vec!["/run/granted.sock".into()],
            unix: crate::sandbox::confine::UnixRule::Seccomp,
            pid_namespace: Ok(()),
        };
        let judge = Judge {
            server: "s",
            home: Some(&home),
            profile: &profile,
            config: None,
        };
        let fix = |op, path: PathBuf| {
            judge
                .refusal(&Seen { op, path })
                .map(|r| (r.kind, r.what, r.fix))
        };
        let allow = |rest: &str| format!("openpact sandbox allow s {rest}");
        // Reading it is allowed, so an `open` refused was a write.
        assert_eq!(
            fix(Op::Open, home.join("notes.txt")),
            Some((
                "write".into(),
                "~/notes.txt".into(),
                allow("write ~/notes.txt")
            ))
        );
        // A credential place is read, and the sentence says what allowing it hands over.
        assert_eq!(
            fix(Op::Open, home.join(".ssh/id")),
            Some(("read".into(), "~/.ssh/id".into(), allow("read ~/.ssh/id")))
        );
        let key = judge.refusal(&Seen {
            op: Op::Open,
            path: home.join(".ssh/id"),
        });
        assert!(
            key.unwrap()
                .sentence()
                .contains("~/.ssh/id, a place where credentials live; if this server should have it: openpact sandbox allow s read ~/.ssh/id")
        );
        let note = judge.refusal(&Seen {
            op: Op::Open,
            path: home.join("notes.txt"),
        });
        assert!(!note.unwrap().credential);
        // A folder to be: the highest missing one below home, which `allow` makes.
        assert_eq!(
            fix(Op::Write, home.join(".app/cache/x")),
            Some((
                "write".into(),
                "~/.app/cache/x".into(),
                allow("write ~/.app")
            ))
        );
        // A file to be in the home folder itself: granted once it exists.
        assert_eq!(
            fix(Op::Open, home.join("new.json")).map(|f| f.2),
            Some(format!("touch ~/new.json && {}", allow("write ~/new.json")))
        );
        assert_eq!(
            fix(Op::Connect, "/run/agent.sock".into()).map(|f| f.2),
            Some(allow("socket /run/agent.sock"))
        );
        // A hub serving another config than the user's own names it.
        let other = Judge {
            config: Some("~/project/mcp.json"),
            ..judge
        };
        let named = other.refusal(&Seen {
            op: Op::Connect,
            path: "/run/agent.sock".into(),
        });
        assert_eq!(
            named.map(|r| r.fix),
            Some(
                "openpact --config ~/project/mcp.json sandbox allow s socket /run/agent.sock"
                    .into()
            )
        );
        // Granted already (the refusal is the file's mode), or the kernel's own files.
        assert_eq!(fix(Op::Write, home.join(".cache/x")), None);
        assert_eq!(fix(Op::Open, "/proc/1/environ".into()), None);
        assert_eq!(fix(Op::Connect, "/run/granted.sock".into()), None);
        assert_eq!(fix(Op::Write, home.join(".npm/_npx/x/index.js")), None);
    }

    #[test]
    fn shell_words() {
        assert_eq!(shell_word("~/.app"), "~/.app");
        assert_eq!(shell_word("~/my notes"), "~/'my notes'");
        assert_eq!(shell_word("/x/it's"), r"'/x/it'\''s'");
    }
}
