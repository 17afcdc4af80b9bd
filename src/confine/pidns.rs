//! A server's own PID namespace with a fresh `/proc`, so that it reads no other process's
//! command line, environment or memory map: the wrapper enters new user, mount and PID
//! namespaces, runs itself again as the namespace's first process, which mounts `/proc` and
//! stays as a small init (it reaps orphans and exits with the server's status).
//! Unprivileged: the user namespace maps the user's own uid and gid to themselves.

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid};
use std::process::Command;

/// What the hub sends to stop a server (and a terminal's hangup), which the wrapper outside
/// outlives (see [`supervise`]).
const HELD: [Signal; 3] = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];

/// Enters the namespaces and runs `again` (this wrapper) as the PID namespace's first
/// process; its exit code once it ends. Must run before any other thread exists (the kernel
/// refuses a new user namespace to a threaded process).
pub fn outside(again: Command) -> Result<u8, String> {
    let (uid, gid) = (Uid::current(), Gid::current());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWPID)
        .map_err(|e| format!("unprivileged user namespaces are unavailable ({e})"))?;
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("could not write /proc/self/{file}: {e}"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))?;
    // Mounting `/proc` takes CAP_SYS_ADMIN in the new user namespace, which a user other than
    // root loses at `exec`, unless it is ambient.
    use caps::{CapSet, Capability};
    caps::raise(None, CapSet::Inheritable, Capability::CAP_SYS_ADMIN)
        .and_then(|()| caps::raise(None, CapSet::Ambient, Capability::CAP_SYS_ADMIN))
        .map_err(|e| format!("could not keep the right to mount /proc: {e}"))?;
    supervise(again, false)
        .map_err(|e| format!("could not start the namespace's first process: {e}"))
}

/// In the new namespaces: mounts stop propagating, `/proc` shows this namespace's processes
/// only, and the right to mount is given up (the server gets none of it).
pub fn fresh_proc() -> Result<(), String> {
    let none: Option<&str> = None;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
        .map_err(|e| format!("could not make the mounts private: {e}"))?;
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        none,
    )
    .map_err(|e| format!("could not mount a fresh /proc: {e}"))?;
    use caps::CapSet;
    for set in [CapSet::Ambient, CapSet::Inheritable] {
        caps::clear(None, set).map_err(|e| format!("could not drop capabilities: {e}"))?;
    }
    Ok(())
}

/// Runs `child` with this process's standard streams until it ends, reaping whatever else
/// ends meanwhile (the first process of a namespace adopts its orphans); answers the child's
/// exit code (128 + the signal that killed it, as shells report it).
///
/// Signals are not passed on: the hub stops a server by signalling its whole process group,
/// which the wrappers and the server share, so the server gets them first-hand (passed on,
/// it would get each twice, and some servers take a second SIGINT as "quit at once"). The
/// wrapper outside only holds them off so as to outlive the server and report how it ended;
/// the first process inside ignores them anyway, as a namespace's first process does
/// without a handler; and it dies with the wrapper outside, which takes the namespace with
/// it, so a SIGKILL to the wrapper alone (the hub's `kill_on_drop`) still ends the server.
pub fn supervise(mut child: Command, inside: bool) -> std::io::Result<u8> {
    let mut held = SigSet::empty();
    for s in HELD {
        held.add(s);
    }
    if inside {
        // Held by the wrapper outside, whose mask it inherits: the server must not be.
        SigSet::empty().thread_set_mask()?;
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    } else {
        held.thread_block()?;
    }
    let pid = Pid::from_raw(i32::try_from(child.spawn()?.id()).unwrap_or(i32::MAX));
    loop {
        match waitpid(None, None) {
            Ok(WaitStatus::Exited(p, code)) if p == pid => {
                return Ok(u8::try_from(code).unwrap_or(1));
            }
            Ok(WaitStatus::Signaled(p, signal, _)) if p == pid => {
                return Ok(128u8.saturating_add(signal as u8));
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}
