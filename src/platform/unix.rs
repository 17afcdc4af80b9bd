//! The unix side of the platform seam, Linux and macOS alike: file modes and owners, signals
//! to and from other processes, process groups, the controlling terminal, the longest socket
//! path. All of it is POSIX that std and nix offer on every unix; what only Linux has is in
//! `linux.rs`.

use super::{GroupSignal, HubSignal, Liveness};
use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use std::fs::{File, Metadata, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;

// Files: modes and owners.

/// Creates `dir` and its missing parents with `mode` (less the umask, as `mkdir` does).
pub fn create_dir_all(dir: &Path, mode: u32) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
}

/// Makes the files `options` creates get `mode` (less the umask).
pub fn create_mode(options: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
    options.mode(mode)
}

/// The permission bits of `meta` (setuid, setgid and sticky included).
pub fn mode(meta: &Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

/// Sets exactly `mode` on `path`, whatever the umask.
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, Permissions::from_mode(mode))
}

/// Sets exactly `mode` on an open file, whatever the umask.
pub fn set_file_mode(file: &File, mode: u32) -> io::Result<()> {
    file.set_permissions(Permissions::from_mode(mode))
}

/// What tells a file from another one put at the same path since: its inode number.
pub fn file_id(meta: &Metadata) -> u64 {
    meta.ino()
}

/// Whether `meta` belongs to this user and is closed to everyone else.
pub fn private_to_user(meta: &Metadata) -> bool {
    meta.uid() == uid() && meta.mode() & 0o077 == 0
}

/// This process's real user id.
pub fn uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

// Signals and processes.

/// A pid as the kernel takes it. 0 and negative numbers name process groups to `kill`, never
/// the one process meant, so they are refused.
fn to_pid(pid: u32) -> io::Result<Pid> {
    match i32::try_from(pid) {
        Ok(raw) if raw > 0 => Ok(Pid::from_raw(raw)),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{pid} is not a process id"),
        )),
    }
}

fn signal_of(signal: HubSignal) -> Signal {
    match signal {
        HubSignal::Terminate => Signal::SIGTERM,
        HubSignal::Interrupt => Signal::SIGINT,
        HubSignal::Reload => Signal::SIGHUP,
        HubSignal::ClearCache => Signal::SIGUSR1,
        HubSignal::UiLogin => Signal::SIGUSR2,
    }
}

impl HubSignal {
    /// The name a log line gives it: the unix signal's.
    pub fn name(self) -> &'static str {
        signal_of(self).as_str()
    }
}

/// Sends `signal` to the process `pid`.
pub fn send(pid: u32, signal: HubSignal) -> io::Result<()> {
    nix::sys::signal::kill(to_pid(pid)?, signal_of(signal)).map_err(io::Error::from)
}

/// Whether `pid` names a running process, asked with the null signal.
pub fn liveness(pid: u32) -> Liveness {
    let Ok(pid) = to_pid(pid) else {
        return Liveness::Gone;
    };
    match nix::sys::signal::kill(pid, None) {
        Ok(()) => Liveness::Running,
        Err(Errno::ESRCH) => Liveness::Gone,
        // EPERM: a process of another user has the pid now.
        Err(_) => Liveness::Foreign,
    }
}

/// Deliveries of one [`HubSignal`] to this process.
pub struct SignalStream(tokio::signal::unix::Signal);

impl SignalStream {
    /// Waits for the next delivery (`None` once no more can come).
    pub async fn recv(&mut self) -> Option<()> {
        self.0.recv().await
    }
}

/// Starts taking `signal` for this process: from now on it no longer has its default effect
/// (ending the process), but is delivered to the stream. Must be called on the runtime.
pub fn listen(signal: HubSignal) -> io::Result<SignalStream> {
    use tokio::signal::unix::SignalKind;
    let kind = match signal {
        HubSignal::Terminate => SignalKind::terminate(),
        HubSignal::Interrupt => SignalKind::interrupt(),
        HubSignal::Reload => SignalKind::hangup(),
        HubSignal::ClearCache => SignalKind::user_defined1(),
        HubSignal::UiLogin => SignalKind::user_defined2(),
    };
    tokio::signal::unix::signal(kind).map(SignalStream)
}

/// Starts `cmd`'s process in a new process group of its own (led by it, so its pid is the
/// group's id): [`signal_group`] then reaches its children too, and a Ctrl-C in our terminal
/// does not.
pub fn new_process_group(cmd: &mut std::process::Command) {
    cmd.process_group(0);
}

/// Sends `signal` to every process of the group `leader` leads (see [`new_process_group`]).
pub fn signal_group(leader: u32, signal: GroupSignal) -> io::Result<()> {
    let signal = match signal {
        GroupSignal::Terminate => Signal::SIGTERM,
        GroupSignal::Kill => Signal::SIGKILL,
    };
    nix::sys::signal::killpg(to_pid(leader)?, signal).map_err(io::Error::from)
}

/// Makes the calling thread's reads of a terminal this process is in the background of fail
/// (with [`is_background_read`]'s error) instead of stopping the whole process with SIGTTIN.
pub fn fail_background_reads() -> io::Result<()> {
    use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};
    let ttin = SigSet::from(Signal::SIGTTIN);
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttin), None).map_err(io::Error::from)
}

/// Whether a read failed because this process is in the background of its terminal (EIO,
/// once [`fail_background_reads`] applies).
pub fn is_background_read(e: &io::Error) -> bool {
    e.raw_os_error() == Some(Errno::EIO as i32)
}

// The terminal.

/// The controlling terminal.
const TERMINAL: &str = "/dev/tty";

/// The controlling terminal, opened once to read and once to write; `None` if this process
/// has none.
pub fn terminal() -> Option<(File, File)> {
    let read = OpenOptions::new().read(true).open(TERMINAL).ok()?;
    let write = OpenOptions::new().write(true).open(TERMINAL).ok()?;
    Some((read, write))
}

/// The controlling terminal's mode (echo, line editing) as it was, to put back.
pub struct TerminalMode {
    tty: File,
    termios: nix::sys::termios::Termios,
}

impl TerminalMode {
    /// The mode now; `None` without a controlling terminal.
    pub fn save() -> Option<TerminalMode> {
        let tty = OpenOptions::new()
            .read(true)
            .write(true)
            .open(TERMINAL)
            .ok()?;
        let termios = nix::sys::termios::tcgetattr(&tty).ok()?;
        Some(TerminalMode { tty, termios })
    }

    /// Puts the saved mode back, at once.
    pub fn restore(&self) {
        let _ = nix::sys::termios::tcsetattr(
            &self.tty,
            nix::sys::termios::SetArg::TCSANOW,
            &self.termios,
        );
    }

    /// The terminal, open to write.
    pub fn terminal(&self) -> &File {
        &self.tty
    }
}

// Sockets.

/// The longest path a unix socket can be bound at: `sun_path` holds 108 bytes on Linux and
/// 104 on macOS and the BSDs, the terminating NUL included.
pub const SOCKET_PATH_MAX: usize = if cfg!(any(target_os = "linux", target_os = "android")) {
    107
} else {
    103
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_that_name_groups_are_refused() {
        for bad in [0, u32::MAX, 1 << 31] {
            assert_eq!(liveness(bad), Liveness::Gone);
            assert!(send(bad, HubSignal::Reload).is_err());
            assert!(signal_group(bad, GroupSignal::Kill).is_err());
        }
        assert_eq!(liveness(std::process::id()), Liveness::Running);
        assert_eq!(HubSignal::Reload.name(), "SIGHUP");
    }
}
