//! The operating system's side of openpact: every piece that differs between Linux, macOS
//! (and the other unix systems) and Windows, each behind one owner, so that a port is a
//! task of known size. The small primitives are functions here (`unix.rs` for every unix,
//! `linux.rs` for what only Linux has); the pieces that are large and intrinsically unix
//! stay in their modules, gated with `#[cfg(unix)]` or `#[cfg(target_os = "linux")]` where
//! they are declared.
//!
//! What was compiled: Linux (x86_64) only. This machine has no toolchain or standard library
//! for any other target, so neither the macOS nor the Windows column below has been built:
//! macOS is expected to compile (everything it uses is POSIX that std, nix and tokio offer
//! there, and each Linux-only piece has its fallback), and Windows stops at the
//! `compile_error!` below until the last column is written.
//!
//! | piece | owner: module / function (callers) | Linux | macOS, other unix | Windows: what a port needs |
//! |---|---|---|---|---|
//! | private dirs and files, kept modes | `platform::{create_dir_all, create_mode, mode, set_mode, set_file_mode}` (`state`, and through it every state file; `policy::audit`, `face::socket`, `cli::connect`, `sandbox`) | mode bits: dirs 0700, files 0600 | same | no mode bits: an owner-only ACL, or trust the per-user `%LOCALAPPDATA%`; `mode` means nothing there (`state::replace`'s `keep_mode`) |
//! | a file's identity | `platform::file_id` (`policy::audit`: its rotation, done by another process, is seen) | inode | same | the file index (`GetFileInformationByHandle`; std's `MetadataExt::file_index` is unstable) |
//! | the user | `platform::{uid, private_to_user}` (`sandbox`: temp root name and its owner check, `places`' `/run/user/UID`; `face::socket`: the peer's uid) | `getuid` | same | the user's SID; ownership through the ACL |
//! | exclusive locks between processes | `state::{lock_exclusive, lock_private, try_lock_private}` on std's `File::lock`/`try_lock` (`policy::decisions`, `auth::store`, `face::socket`, `builtins::scripts`) | `flock` | `flock` | nothing: std uses `LockFileEx` (mandatory there, which the empty lock files do not mind) |
//! | signals to a running hub, is it alive | `platform::{send, liveness}`, [`HubSignal`], [`Liveness`] (`cli`: `reload` = `Reload`, `cache clear` = `ClearCache`; `ui` = `UiLogin`; `face::status_file`; `sandbox::sweep_stale_temp`) | `kill(2)`, SIGHUP / SIGUSR1 / SIGUSR2, null signal | same | no signals: a named event per hub pid, or the request sent over the hub's own socket or HTTP face; alive: `OpenProcess` + `GetExitCodeProcess` |
//! | signals a hub takes | `platform::listen` → [`SignalStream`] (`face::serve`: `Terminate`, `Interrupt`, `ClearCache`, `UiLogin`; `face::reload`: `Reload`) | tokio `signal::unix` | same | `Terminate`/`Interrupt`: tokio `signal::windows::{ctrl_c, ctrl_close, ctrl_shutdown}`; `Reload`/`ClearCache`/`UiLogin` as in the row above |
//! | a child's process group, killed whole | `platform::{new_process_group, signal_group}`, [`GroupSignal`] (`transport::child`: every stdio server; `cli::connect`: the detached shared hub) | `setpgid(0)`, `killpg` SIGTERM then SIGKILL | same | `CREATE_NEW_PROCESS_GROUP` (+ `DETACHED_PROCESS` for the hub) and a Job Object per server: no SIGTERM, so close stdin, wait, then `TerminateJobObject` |
//! | reading stdin from the background | `platform::{fail_background_reads, is_background_read}` (`transport::stdio`'s reading thread) | SIGTTIN blocked on that thread, EIO read as the end | same | nothing to do (no job control): `Ok(())` and `false` |
//! | the terminal for permission prompts | `platform::{terminal, TerminalMode}` (`policy::prompt`) | `/dev/tty`, termios saved and restored | same | `CONIN$` / `CONOUT$`, `GetConsoleMode` / `SetConsoleMode` |
//! | another process's exit, awaited | [`ProcessEnd`] (`cli::connect`: the shared hub that died, before a new one is reached or started) | a pidfd, readable once the process has exited | the null signal, polled every 10 ms (a zombie counts as running) | `OpenProcess` + `WaitForSingleObject` |
//! | a file's changes seen without a `stat` | [`FileWatch`] (`policy::decisions`, on every call without a rule) | inotify on the state dir, trusted only on local filesystems (`statfs` type) | none: every look is a `stat` of the file, the fallback Linux takes on NFS (kqueue could do better) | none, as macOS (`ReadDirectoryChangesW` could do better) |
//! | longest socket path | `platform::SOCKET_PATH_MAX` (`face::socket`) | 107 bytes | 103 bytes | not used (named pipes have other names) |
//! | stdio on the runtime | `transport::stdio::pollable`, module `#[cfg(unix)]` (`transport::stdio::{stdout, read_stdin}`) | pipes and sockets on epoll, `O_NONBLOCK` put back at the end | same (kqueue) | anonymous pipes cannot be polled: `Pollable::open` answering `Ok(None)` sends stdio to the thread fallback that serves terminals and files today |
//! | a child's stdin and line writers | `transport::child::Spawned::stdin` (`tokio::net::unix::pipe::Sender`), `transport::lines::{halves, SharedWrite for pipe::Sender}`, `transport::socket` (a Unix socket registered one way only, the writer only while it waits: a socket wakes its registered writers on every read by its peer), items and module `#[cfg(unix)]` | `pipe(2)`, unix sockets | same | the child's stdin as a named pipe we create (tokio `named_pipe`, which has `try_write_vectored` and `poll_write_ready`: a `SharedWrite` of six lines), or a writer thread |
//! | the shared hub (`openpact connect`, `serve --shared`) | `face::socket`, `face::handoff`, `cli::connect`, modules `#[cfg(unix)]` (used by `face::serve`'s `Faces::socket`, and by `cli`'s `connect` and `serve --shared`) | a unix socket, 0600 in a 0700 dir, each peer's uid checked | same (`getpeereid`) | a named pipe with an owner-only DACL and the client's SID checked (tokio `named_pipe`), or leave shared mode out and `cfg` those uses away |
//! | the sandbox | the `openpact-confine` crate's seam (src/confine/lib.rs: `Sandbox`, `platform()`): its `linux` module, `#[cfg(target_os = "linux")]`, used by `sandbox` and by `src/bin/openpact-sandbox.rs` | Landlock + seccomp + dropped capabilities | none: servers run unconfined with a warning, or are refused where a sandbox is required (`seam`'s `Unavailable`); `sandbox-exec` profiles could do | none, as macOS (AppContainer and Job Objects could) |
//! | the sandbox wrapper's `exec` | `openpact_confine::wrapper::exec` (src/confine/wrapper.rs), `#[cfg(unix)]` | `execve` | same | no exec: an `exec` answering `Unsupported` lets `openpact-sandbox` build (confining fails first there anyway); with a sandbox, spawn, wait and exit with the child's code |
//! | the sandbox's places | `sandbox::places` (`/tmp`, `/var/tmp`, `/run/user/UID`) | as named | nothing until macOS has a sandbox (it has no `/run/user`; its `$TMPDIR` comes through `temp_dir`) | nothing until Windows has a sandbox |
//! | the test harness | `tests/integration.rs` (`#![cfg(unix)]`), `fixtures/fixture_server.rs` (its SIGTERM block `#[cfg(unix)]`; its stdout fd, `ExitStatusExt`, tokio `signal::unix` are not gated), `examples/bench` (its kills `#[cfg(unix)]`; it reads CPU time and memory from `/proc`), unit tests using `std::os::unix::fs::symlink` or mode bits | signals, ptys, pipes, modes, `/proc` in places | same, but `/proc` is Linux's: the bench's CPU and memory figures and a few integration tests need another source on macOS | a port of the harness with the product |
//!
//! Already portable, no seam needed: the config's hot-reload watch (`notify`: inotify, FSEvents,
//! `ReadDirectoryChangesW`), the OS keyring (`keyring`: Secret Service, Keychain, Credential
//! Manager), the config and state dirs (`directories`), the browser for logins (`open`),
//! commands on PATH (`which`; `config::resolve` already takes `\` as a separator on Windows).
//! Not portable yet, though no `cfg` marks it: `~` in the config expands from `HOME`
//! (`config::build`), which Windows does not set (a port reads `USERPROFILE` there).
//!
//! Dependencies follow the same lines (`Cargo.toml`, `src/confine/Cargo.toml`): `landlock`,
//! `seccompiler`, `caps` and `libc` only for Linux (the wrapper's crate), `nix` only for unix.

#[cfg(not(unix))]
compile_error!(
    "openpact has not been ported to this operating system yet: src/platform/mod.rs lists what a port needs"
);

#[cfg(target_os = "linux")]
mod linux;
#[cfg(unix)]
mod unix;

#[cfg(target_os = "linux")]
pub use linux::{FileWatch, ProcessEnd};
#[cfg(unix)]
pub use unix::{
    SOCKET_PATH_MAX, SignalStream, TerminalMode, create_dir_all, create_mode,
    fail_background_reads, file_id, is_background_read, listen, liveness, mode, new_process_group,
    private_to_user, send, set_file_mode, set_mode, signal_group, terminal, uid,
};
#[cfg(not(target_os = "linux"))]
pub use unwatched::{FileWatch, ProcessEnd};

/// `bytes` random bytes from the system's source, as lower-case hex: the one way every
/// unguessable id and key (sessions, tasks, login links, questions) is made. `None` when
/// the system has no random source to give.
pub fn random_hex(bytes: usize) -> Option<String> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).ok()?;
    Some(hex::encode(buf))
}

/// What another process (`openpact reload`, `openpact cache clear`, a service manager, the
/// terminal) may ask a running hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HubSignal {
    /// Stop (SIGTERM).
    Terminate,
    /// Stop, from the terminal (SIGINT).
    Interrupt,
    /// Read the config again (SIGHUP).
    Reload,
    /// Drop the cached results (SIGUSR1).
    ClearCache,
    /// Take the dashboard login keys `openpact ui` left in the state dir (SIGUSR2).
    UiLogin,
}

/// How a child's process group is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSignal {
    /// Asked to exit (SIGTERM).
    Terminate,
    /// Ended outright (SIGKILL).
    Kill,
}

/// What a pid names now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// A running process this user may signal.
    Running,
    /// A process this user may not signal: another user's, so not the one we knew.
    Foreign,
    /// No process.
    Gone,
}

/// What the events since the last look of a [`FileWatch`] say about its file.
#[derive(Debug, PartialEq, Eq)]
pub enum Look {
    /// Nothing happened to it: the last reading stands.
    Unchanged,
    /// It was written, replaced or removed, or events were lost: read it again.
    Changed,
    /// No watch (any longer): only its mtime can tell.
    Unwatched,
}

/// Outside Linux there is no change watch: [`FileWatch::start`] says so, and every look at
/// the file is a `stat`, as on Linux where the filesystem is not local. Nor a pidfd: a
/// [`ProcessEnd`] is polled.
#[cfg(not(target_os = "linux"))]
mod unwatched {
    use super::Look;
    use std::path::Path;

    pub enum FileWatch {}

    impl FileWatch {
        pub fn start(_file: &Path) -> Option<FileWatch> {
            None
        }

        pub fn look(&self) -> Look {
            match *self {}
        }
    }

    /// Another process's exit, asked with the null signal every few milliseconds (no
    /// pidfd): a zombie still counts as running, and a pid reused meanwhile is waited for
    /// until `limit`.
    pub struct ProcessEnd(u32);

    impl ProcessEnd {
        pub fn of(pid: u32) -> Option<ProcessEnd> {
            (super::liveness(pid) == super::Liveness::Running).then_some(ProcessEnd(pid))
        }

        pub async fn exited(&self, limit: std::time::Duration) -> bool {
            let deadline = tokio::time::Instant::now() + limit;
            while super::liveness(self.0) == super::Liveness::Running {
                if tokio::time::Instant::now() > deadline {
                    return false;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            true
        }
    }
}
