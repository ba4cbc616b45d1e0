//! The placer of `cpushield run`: into the shield's cpuset when the CPUs are
//! shielded (through `cpushield_shield::placement`), recording a task's
//! policy in the shield's state before it changes, so that `reset` restores it.

use crate::run::Placer;
use crate::sched::PlaceFn;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_shield::placement;
use std::io;

/// Places into the shield's cpuset of its host when the CPUs are shielded, and
/// records a task's policy in its state before it changes.
pub struct ShieldPlacer(pub Host);

impl Placer for ShieldPlacer {
    fn place(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
        placement::place_task(&self.0, tid, cpus)
    }
    fn record_sched(&self, pid: i32, tids: &[i32]) -> io::Result<()> {
        placement::record_sched(&self.0, pid, tids)
    }
    fn poller_placement(&self) -> Option<PlaceFn> {
        // An `--idle-poll` thread enters the shield alone: this process,
        // which only waits for the command, stays on the CPUs the shield
        // leaves to the system (moved whole into a v2 shield, it would wake
        // on the shielded CPU beside the task it serves).
        Some(placement::own_thread_from_anywhere_placer(&self.0))
    }
}
