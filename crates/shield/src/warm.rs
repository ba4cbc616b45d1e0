//! Moves that do not wait for the kernel's first-move grace period.
//!
//! Every move of a task between cgroups write-locks the kernel's
//! `cgroup_threadgroup_rwsem`, a per-CPU rwsem: after a quiet spell its first
//! writer waits for an RCU grace period (`rcu_sync_enter`), 8-19 ms on the
//! machine of docs/PERFORMANCE.md, and the writers after it within a grace
//! period do not. A shield or reset paid that wait at its first move, after
//! reading and planning. [`with_moves_primed`] pays it on a thread of its own
//! while the caller reads, plans and stores its state: the thread "moves"
//! itself into the cgroup it is already in (no task changes cgroup) and does
//! so again every [`PRIME_EVERY`] until the caller is about to move tasks.
//! The caller leaves the thread out of what it reads ([`Primer::leave_out`]):
//! it is cpushield's own and ends before the first change.

use crate::layout::{self, CgroupLayout};
use cpushield_kernel::Kernel;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::ScopedJoinHandle;
use std::time::Duration;

/// How often the priming thread writes again: well within a grace period, so
/// the lock stays in the state where a writer does not wait.
pub const PRIME_EVERY: Duration = Duration::from_millis(2);

/// Ends the priming before the caller's first move (see [`with_moves_primed`]).
pub struct Primer<'scope> {
    stop: &'scope AtomicBool,
    thread: Mutex<Option<ScopedJoinHandle<'scope, ()>>>,
    tid: Option<i32>,
}

impl Primer<'_> {
    /// Removes the priming thread from tasks read while it ran.
    pub fn leave_out(&self, snap: &mut crate::snapshot::Snapshot) {
        if let Some(tid) = self.tid {
            snap.tasks.retain(|t| t.tid != tid);
        }
    }

    /// Stops the priming thread and waits until it has ended, so that no
    /// write of its own runs beside the caller's moves; those made from now
    /// on find the lock primed for a grace period after its last write.
    /// Idempotent.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread.lock().map(|mut t| t.take()).unwrap_or(None);
        if let Some(thread) = thread {
            thread.thread().unpark();
            // A panic there primed nothing; it is not the caller's failure.
            let _ = thread.join();
        }
    }
}

/// Runs `work` while a thread keeps the kernel's cgroup-move lock primed (see
/// the module); `work` leaves the thread out of the tasks it reads
/// ([`Primer::leave_out`]) and calls [`Primer::stop`] right before its first move,
/// and the thread is stopped before this returns in any case. Where the
/// thread cannot start, or this process sits in one of cpushield's own
/// cgroups (which the caller may empty and remove), nothing is primed.
pub fn with_moves_primed<R>(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    work: impl FnOnce(&Primer<'_>) -> R,
) -> R {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = &stop;
        let thread = std::thread::Builder::new()
            .name("cpushield-prime".into())
            .spawn_scoped(s, move || {
                // Its ID first, so that the caller can leave it out.
                let _ = tx.send(nix::unistd::gettid().as_raw());
                keep_primed(kernel, layout, stop)
            })
            .ok();
        let tid = thread.as_ref().and_then(|_| rx.recv().ok());
        let primer = Primer {
            stop,
            thread: Mutex::new(thread),
            tid,
        };
        let out = work(&primer);
        primer.stop();
        out
    })
}

/// The priming thread: writes its own ID (v1: the thread's; v2: the
/// process's) into the cgroup it is in, until stopped or refused.
fn keep_primed(kernel: &dyn Kernel, layout: &CgroupLayout, stop: &AtomicBool) {
    let Ok(text) = kernel.read(Path::new("/proc/thread-self/cgroup")) else {
        return;
    };
    let Some(cgroup) = layout::cgroup_of(layout, &text) else {
        return;
    };
    if crate::snapshot::is_ours(&cgroup) {
        return;
    }
    let file = layout.tasks_file(&layout.dir_of(&cgroup));
    let id = if layout.is_v2() {
        std::process::id().to_string()
    } else {
        nix::unistd::gettid().as_raw().to_string()
    };
    while !stop.load(Ordering::Acquire) {
        if kernel.write(&file, &id).is_err() {
            return;
        }
        std::thread::park_timeout(PRIME_EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_cpuset::CpuSet;
    use cpushield_kernel::FakeKernel;

    const ROOT: &str = "/sys/fs/cgroup/cpuset";

    fn v1() -> CgroupLayout {
        CgroupLayout::V1 { root: ROOT.into() }
    }

    #[test]
    fn the_thread_writes_its_own_id_into_its_own_cgroup_and_nothing_once_stopped() {
        let k = FakeKernel::new();
        k.set_file("/proc/thread-self/cgroup", "4:cpuset:/\n");
        k.set_file(format!("{ROOT}/tasks"), "");
        let wrote_before_stop = with_moves_primed(&k, &v1(), |primer| {
            let until = std::time::Instant::now() + Duration::from_secs(5);
            while k
                .file(format!("{ROOT}/tasks"))
                .unwrap_or_default()
                .is_empty()
                && std::time::Instant::now() < until
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            let wrote = k.file(format!("{ROOT}/tasks")).unwrap_or_default();
            primer.stop();
            // Stopped means ended: nothing is written after stop returns.
            k.set_file(format!("{ROOT}/tasks"), "");
            std::thread::sleep(PRIME_EVERY * 10);
            assert_eq!(k.file(format!("{ROOT}/tasks")).unwrap(), "");
            wrote
        });
        let id: i32 = wrote_before_stop.trim().parse().expect("a thread ID");
        assert!(id > 0);
        assert_ne!(
            wrote_before_stop.trim(),
            nix::unistd::gettid().as_raw().to_string(),
            "the priming thread's own ID, not the caller's"
        );
    }

    #[test]
    fn nothing_is_written_from_one_of_cpushields_own_cgroups() {
        let k = FakeKernel::new();
        k.set_file("/proc/thread-self/cgroup", "4:cpuset:/cpushield-system\n");
        k.set_file(format!("{ROOT}/cpushield-system/tasks"), "");
        with_moves_primed(&k, &v1(), |_| std::thread::sleep(Duration::from_millis(20)));
        assert_eq!(
            k.file(format!("{ROOT}/cpushield-system/tasks")).unwrap(),
            ""
        );
    }

    #[test]
    fn the_priming_thread_is_left_out_of_a_snapshot_taken_while_it_ran() {
        let k = crate::fake_machine::v1_machine("0-3", &[(100, "0-3")]);
        k.set_file("/proc/thread-self/cgroup", "4:cpuset:/\n");
        let layout = crate::layout::detect(&k).unwrap();
        with_moves_primed(&k, &layout, |primer| {
            let tid = primer.tid.expect("the thread reported its ID");
            // The fake machine lists the thread once it has written itself
            // into the root cpuset; give it the files a listed task has.
            let until = std::time::Instant::now() + Duration::from_secs(5);
            while !k
                .file(format!("{ROOT}/tasks"))
                .unwrap_or_default()
                .lines()
                .any(|l| l == tid.to_string())
                && std::time::Instant::now() < until
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            k.set_file(
                format!("/proc/{tid}/stat"),
                format!("{tid} (cpushield-prime) S 1 {tid} {tid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n"),
            );
            k.set_thread_affinity(tid, CpuSet::parse_list("0-3").unwrap());
            let mut snap = crate::snapshot::take(&k, &layout).unwrap();
            assert!(
                snap.tasks.iter().any(|t| t.tid == tid),
                "listed while it runs"
            );
            primer.leave_out(&mut snap);
            let tids: Vec<i32> = snap.tasks.iter().map(|t| t.tid).collect();
            assert_eq!(tids, vec![100]);
            primer.stop();
        });
    }

    #[test]
    fn work_runs_and_returns_without_a_cgroup_to_prime() {
        let k = FakeKernel::new();
        assert_eq!(with_moves_primed(&k, &v1(), |_| 7), 7);
    }
}
