//! Placing a task onto shielded CPUs (for `cpushield run`): into the shield's
//! cpuset, which plain sched_setaffinity cannot reach once the kernel enforces
//! the shield, then pinned.

use crate::plan::shield_dir;
use crate::state;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use std::io;

/// The CPUs shielded from processes now (empty when nothing is shielded).
pub fn shielded_procs(_kernel: &dyn Kernel) -> io::Result<CpuSet> {
    Ok(state::load()?.map(|s| s.masks.procs).unwrap_or_default())
}

/// Places thread `tid` on `cpus`: when they are all shielded, moves it (v1) or
/// its process (v2) into the shield cgroup first; then sets its affinity.
/// Reservations (`run --reserve`) are checked by the callers that place tasks
/// for users (`run` and the rt library), which know who holds them.
///
/// cpushield's own placement is not the task's request: when the shield has a
/// record of what it set on `tid`, the record is updated, so that `reset`
/// still gives the task its affinity from before the placement.
pub fn place_task(kernel: &dyn Kernel, tid: i32, cpus: &CpuSet) -> io::Result<()> {
    let saved = state::load()?;
    if let Some(saved) = &saved {
        if !cpus.is_empty() && cpus.is_subset(&saved.masks.procs) {
            let dir = shield_dir(&saved.layout);
            let id = if saved.layout.is_v2() {
                tgid_of(kernel, tid)?
            } else {
                tid
            };
            let file = saved.layout.tasks_file(&dir);
            kernel
                .write(&file, &id.to_string())
                .map_err(|e| cpushield_kernel::with_path(e, &file))?;
        }
    }
    kernel.set_affinity(tid, cpus)?;
    if saved.is_some_and(|s| s.set.tasks.contains_key(&tid)) {
        record_placement(kernel, tid)?;
    }
    Ok(())
}

/// Updates the shield's record of what was set on `tid` to its affinity now.
fn record_placement(kernel: &dyn Kernel, tid: i32) -> io::Result<()> {
    let _lock = state::StateLock::acquire()?;
    let Some(mut saved) = state::load()? else {
        return Ok(());
    };
    let now = kernel.get_affinity(tid)?;
    match saved.set.tasks.get_mut(&tid) {
        Some(rec) if rec.cpus != now => rec.cpus = now,
        _ => return Ok(()),
    }
    state::store(&saved)
}

fn tgid_of(kernel: &dyn Kernel, tid: i32) -> io::Result<i32> {
    let status = kernel.read(std::path::Path::new(&format!("/proc/{tid}/status")))?;
    cpushield_parse::pid_status::parse_tgid(&status)
        .ok_or_else(|| io::Error::other(format!("/proc/{tid}/status has no Tgid")))
}

/// Records, in the shield's state, the scheduling policy of each thread in
/// `tids` before `cpushield run --pid` changes it, so that `reset` gives it
/// back. A thread already recorded keeps its first (original) record. Does
/// nothing when no shield is up (there is no reset to restore it).
pub fn record_sched(kernel: &dyn Kernel, pid: i32, tids: &[i32]) -> io::Result<()> {
    let _lock = state::StateLock::acquire()?;
    let Some(mut saved) = state::load()? else {
        return Ok(());
    };
    let mut changed = false;
    for &tid in tids {
        let stat_path = std::path::PathBuf::from(format!("/proc/{pid}/task/{tid}/stat"));
        let stat = match kernel.read_bytes(&stat_path) {
            Ok(b) => cpushield_parse::pid_stat::parse_stat(&b)
                .map_err(|e| io::Error::other(format!("{}: {e}", stat_path.display())))?,
            Err(e) if cpushield_kernel::is_gone(&e) => continue,
            Err(e) => return Err(cpushield_kernel::with_path(e, &stat_path)),
        };
        if saved
            .sched
            .get(&tid)
            .is_some_and(|s| s.starttime == stat.starttime)
        {
            continue;
        }
        let p = match kernel.get_sched(tid) {
            Ok(p) => p,
            Err(e) if cpushield_kernel::is_gone(&e) => continue,
            Err(e) => return Err(e),
        };
        saved.sched.insert(
            tid,
            state::SavedSched {
                starttime: stat.starttime,
                policy: p.policy,
                flags: p.flags,
                nice: p.nice,
                priority: p.priority,
                deadline: [p.runtime, p.deadline, p.period],
            },
        );
        changed = true;
    }
    if changed {
        state::store(&saved)?;
    }
    Ok(())
}
