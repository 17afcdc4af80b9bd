//! Holding this program, and every process it starts meanwhile, on one CPU: the placement
//! that part 1's gate measures under (see [`crate::latency`]). Linux only; elsewhere, and
//! where the affinity cannot be set, [`OneCpu::hold`] answers `None` and runs stay unpinned.

/// While alive, the calling thread (and every child it spawns, which inherits its mask) may
/// run only on [`OneCpu::cpu`]; dropping it gives the thread its previous CPUs back.
pub struct OneCpu {
    pub cpu: usize,
    #[cfg(target_os = "linux")]
    previous: nix::sched::CpuSet,
}

#[cfg(target_os = "linux")]
impl OneCpu {
    /// The first CPU this thread may use; `None` when there is only one (nothing to pin)
    /// or the mask cannot be read or set (a container's seccomp profile, say).
    pub fn hold() -> Option<OneCpu> {
        use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
        use nix::unistd::Pid;
        let previous = sched_getaffinity(Pid::from_raw(0)).ok()?;
        let allowed: Vec<usize> = (0..CpuSet::count())
            .filter(|&i| previous.is_set(i).unwrap_or(false))
            .collect();
        let &cpu = allowed.first().filter(|_| allowed.len() > 1)?;
        let mut one = CpuSet::new();
        one.set(cpu).ok()?;
        sched_setaffinity(Pid::from_raw(0), &one).ok()?;
        Some(OneCpu { cpu, previous })
    }
}

#[cfg(target_os = "linux")]
impl Drop for OneCpu {
    fn drop(&mut self) {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &self.previous);
    }
}

#[cfg(not(target_os = "linux"))]
impl OneCpu {
    pub fn hold() -> Option<OneCpu> {
        None
    }
}
