//! Linux enforcement: Landlock for files and TCP connections, a seccomp filter for the
//! sockets Landlock does not cover (UDP and DNS, raw, netlink, other families, TCP Fast Open,
//! io_uring), Unix socket files (Landlock from ABI 9, else a seccomp rule), and no new
//! privileges. Applied by the wrapper to itself before it `exec`s the
//! server; the kernel carries both into every descendant.

use crate::{ConfineError, Confinement, NetRule, Sandbox, Support, UnixRule, expand};
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
};
use std::collections::BTreeMap;

/// The newest ABI whose rights we ask for; older kernels get what they support of the rest
/// (the essential rights are hard requirements, see [`Landlock::confine`]).
const TARGET: ABI = ABI::V6;
/// The test switch that makes this machine look as if Landlock were missing.
pub const SIMULATE_MISSING: &str = "OPENPACT_SANDBOX_SIMULATE_NO_LANDLOCK";

pub struct Landlock;

impl Sandbox for Landlock {
    fn name(&self) -> &'static str {
        "Landlock + seccomp"
    }

    fn support(&self) -> Support {
        if std::env::var_os(SIMULATE_MISSING).is_some() {
            return Support::Missing(format!(
                "Landlock is not available in this kernel (simulated by {SIMULATE_MISSING})"
            ));
        }
        let files = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .and_then(|r| r.create());
        if let Err(e) = files {
            return Support::Missing(format!(
                "Landlock is not available in this kernel ({e}); it needs Linux 5.13 or later with Landlock enabled (lsm=landlock)"
            ));
        }
        let tcp = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessNet::ConnectTcp)
            .and_then(|r| r.create());
        if let Err(e) = tcp {
            return Support::Partial(format!(
                "this kernel's Landlock cannot restrict TCP ({e}; it needs Linux 6.7 or later): files are confined, the network is not"
            ));
        }
        Support::Full
    }

    fn limits_unix_sockets(&self) -> bool {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::ResolveUnix)
            .and_then(|r| r.create())
            .is_ok()
    }

    fn confine(&self, c: &Confinement) -> Result<(), ConfineError> {
        let kernel = |e: &dyn std::fmt::Display| ConfineError::Kernel(e.to_string());
        drop_capabilities().map_err(|e| kernel(&e))?;
        let (read, write) = expand(c);
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V1))
            .map_err(|e| kernel(&e))?;
        if c.network != NetRule::Open {
            ruleset = ruleset
                .handle_access(AccessNet::ConnectTcp)
                .map_err(|e| kernel(&e))?;
        }
        // Refer, Truncate and device ioctls, and the scopes that keep a server from
        // signalling the hub or reaching abstract sockets outside its sandbox, where the
        // kernel has them.
        ruleset = ruleset
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(TARGET))
            .and_then(|r| r.scope(Scope::AbstractUnixSocket | Scope::Signal))
            .map_err(|e| kernel(&e))?;
        // Connecting to a socket file: only beneath the write grants and the granted
        // sockets, where the hub found the kernel can tell (ABI 9).
        let mut writable = AccessFs::from_all(TARGET);
        let mut sockets = Vec::new();
        if let UnixRule::Landlock(granted) = &c.unix {
            ruleset = ruleset
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessFs::ResolveUnix)
                .map_err(|e| kernel(&e))?
                .set_compatibility(CompatLevel::BestEffort);
            writable |= AccessFs::ResolveUnix;
            sockets.extend(granted.iter().filter(|p| p.exists()));
        }
        let mut created = ruleset
            .create()
            .map_err(|e| kernel(&e))?
            .add_rules(path_beneath_rules(&read, AccessFs::from_read(TARGET)))
            .and_then(|r| r.add_rules(path_beneath_rules(&write, writable)))
            .and_then(|r| r.add_rules(path_beneath_rules(&sockets, AccessFs::ResolveUnix)))
            .map_err(|e| kernel(&e))?;
        if let NetRule::Proxy(port) = c.network {
            created = created
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(|e| kernel(&e))?;
        }
        let status = created.restrict_self().map_err(|e| kernel(&e))?;
        if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
            return Err(ConfineError::Unsupported(
                "Landlock did not take effect".into(),
            ));
        }
        let mut filters = Vec::new();
        if c.network != NetRule::Open {
            filters.push(socket_filter().map_err(|e| kernel(&e))?);
        }
        if c.unix == UnixRule::Seccomp {
            filters.push(unix_filter().map_err(|e| kernel(&e))?);
        }
        for filter in &filters {
            seccompiler::apply_filter(filter).map_err(|e| kernel(&e))?;
        }
        Ok(())
    }
}

/// A server started by root would keep root's capabilities, and some of them step around the
/// sandbox (CAP_SYS_PTRACE reads other processes' memory and environment, which Landlock's
/// ptrace rule then allows; CAP_DAC_READ_SEARCH opens files by handle). A server needs none:
/// they leave the bounding set, so no descendant gets them back by `exec`.
fn drop_capabilities() -> Result<(), caps::errors::CapsError> {
    use caps::{CapSet, Capability};
    // Without CAP_SETPCAP (not root) the bounding set is not ours to change; a user's
    // process has only what its own user namespace gave it (see pidns), dropped below.
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP)? {
        for cap in caps::read(None, CapSet::Bounding)? {
            caps::drop(None, CapSet::Bounding, cap)?;
        }
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set)?;
    }
    Ok(())
}

/// Refuses (EPERM) every socket but local ones and plain TCP (which Landlock confines to the
/// proxy's port), TCP Fast Open (a connect that bypasses `connect`), and io_uring (which
/// could open sockets without the `socket` call this filter sees).
fn socket_filter() -> Result<seccompiler::BpfProgram, seccompiler::Error> {
    let arg = |index, op, value| SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value);
    let (inet, inet6) = (libc::AF_INET as u64, libc::AF_INET6 as u64);
    let mut socket = vec![SeccompRule::new(vec![
        arg(0, SeccompCmpOp::Ne, libc::AF_UNIX as u64)?,
        arg(0, SeccompCmpOp::Ne, inet)?,
        arg(0, SeccompCmpOp::Ne, inet6)?,
    ])?];
    for family in [inet, inet6] {
        // The socket type is the low four bits; the rest are SOCK_NONBLOCK / SOCK_CLOEXEC.
        for kind in (0..16u64).filter(|k| *k != libc::SOCK_STREAM as u64) {
            socket.push(SeccompRule::new(vec![
                arg(0, SeccompCmpOp::Eq, family)?,
                arg(1, SeccompCmpOp::MaskedEq(0xf), kind)?,
            ])?);
        }
        // A stream socket of another protocol (SCTP, MPTCP) is not TCP to Landlock.
        socket.push(SeccompRule::new(vec![
            arg(0, SeccompCmpOp::Eq, family)?,
            arg(2, SeccompCmpOp::Ne, 0)?,
            arg(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
        ])?);
    }
    let fast_open = libc::MSG_FASTOPEN as u64;
    let flags_at = |index| -> Result<Vec<SeccompRule>, seccompiler::Error> {
        Ok(vec![SeccompRule::new(vec![arg(
            index,
            SeccompCmpOp::MaskedEq(fast_open),
            fast_open,
        )?])?])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, socket);
    rules.insert(libc::SYS_sendto, flags_at(3)?);
    rules.insert(libc::SYS_sendmsg, flags_at(2)?);
    rules.insert(libc::SYS_sendmmsg, flags_at(3)?);
    for call in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(call, Vec::new());
    }
    refusing(rules, libc::EPERM)
}

/// Refuses (EACCES, so that what the server reports reads as a permission refusal) to open a
/// Unix socket, and io_uring, which could open one unseen; `socketpair` stays allowed, since
/// runtimes use it for their children's standard streams.
fn unix_filter() -> Result<seccompiler::BpfProgram, seccompiler::Error> {
    let family = SeccompCondition::new(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        libc::AF_UNIX as u64,
    )?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, vec![SeccompRule::new(vec![family])?]);
    for call in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        rules.insert(call, Vec::new());
    }
    refusing(rules, libc::EACCES)
}

/// A filter answering `errno` to the calls `rules` match, and allowing the rest.
fn refusing(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
) -> Result<seccompiler::BpfProgram, seccompiler::Error> {
    let arch: seccompiler::TargetArch = std::env::consts::ARCH.try_into()?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )?;
    Ok(filter.try_into()?)
}
