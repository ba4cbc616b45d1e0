//! Which task IDs may have been given to new tasks since the first shield.
//!
//! Reset must tell a task saved before the shield from a new task that got
//! the same ID after the saved one exited: the start time in its stat tells
//! them apart, at the cost of reading the stat of every task. The kernel's
//! PID allocator bounds the question instead. It gives each new task the
//! first free ID after the last one it gave (`idr_alloc_cyclic`), wrapping
//! from `pid_max` to the low IDs. Unless it went all the way round, every ID
//! given since the first shield lies between the last ID given then and the
//! last ID given now. Only the saved tasks with IDs in that interval have
//! their stat read at reset; any other saved ID still in use names the task
//! saved.
//!
//! Going all the way round passes every ID of the ring, each one either given
//! to a new task or in use at that moment. With `K` tasks created since (in
//! every namespace, so at least those of this one) and at most `T + K` IDs in
//! use (`T` the tasks that existed at the first shield, in every namespace),
//! the ring of at least `pid_max - 300` IDs (the allocator skips the first
//! 300 once it has wrapped) is passed whole only if `2K + T` reaches it. So
//! the interval is trusted only when `2K + T` is below that and `pid_max` is
//! unchanged; otherwise every task is read.
//!
//! The first shield reads no stat for most tasks (see
//! [`crate::snapshot::take_first`]): a thread-group leader is saved with start
//! time [`UNREAD_START`] and the snapshot's `unread_start_before` tick `W`.
//! `W` is one tick after the uptime read right after the allocator's
//! position, and every per-task read of that snapshot happens once the
//! uptime has reached `W`. A task holding a saved ID later that started
//! before tick `W` was alive through that task's read, so it is the task
//! saved; any other holder started after the saved one left, at tick `W` or
//! later ([`same_task`]). Tasks given IDs while the first shield read the
//! lists (between the two positions) have their stat read.
//!
//! Not covered: a task created with a chosen ID (`clone3` with `set_tid`, or a
//! write to `ns_last_pid`; both are checkpoint/restore tools and need
//! CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN) that reuses a saved task's ID
//! outside the interval is taken as the task saved.

use serde::{Deserialize, Serialize};

/// IDs below this are skipped by the allocator once it has wrapped
/// (`RESERVED_PIDS` in the kernel).
const RESERVED_PIDS: u64 = 300;

/// The start time saved for a task whose stat the first shield did not read:
/// it started before the state's `unread_start_before` tick.
pub const UNREAD_START: u64 = 0;

/// Whether a task that started at tick `start` and holds a saved task's ID is
/// that task, saved with start time `saved_start` in a state whose first
/// shield read no stat for tasks that started before `unread_start_before`.
/// A saved [`UNREAD_START`] also stands for a task that really started in
/// tick 0, which the same rule covers.
pub fn same_task(saved_start: u64, start: u64, unread_start_before: Option<u64>) -> bool {
    saved_start == start
        || (saved_start == UNREAD_START && unread_start_before.is_some_and(|w| start < w))
}

/// The PID allocator's position and the kernel's task counters at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PidCursor {
    /// The last ID given in this PID namespace (/proc/sys/kernel/ns_last_pid).
    pub last_pid: u32,
    /// This namespace's ID limit (/proc/sys/kernel/pid_max): IDs are below it.
    pub pid_max: u32,
    /// Tasks created since boot, in every namespace (/proc/stat `processes`).
    pub forks: u64,
    /// Tasks the kernel holds, in every namespace (/proc/loadavg).
    pub tasks: u64,
}

/// The IDs the allocator may have given between two cursors: the cyclic
/// interval after the first cursor's last ID up to the second's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewIds {
    after: u32,
    upto: u32,
}

impl NewIds {
    /// Whether `id` may have been given to a new task in the interval.
    pub fn may_contain(&self, id: i32) -> bool {
        let Ok(id) = u32::try_from(id) else {
            return true;
        };
        if self.after <= self.upto {
            self.after < id && id <= self.upto
        } else {
            // Wrapped past pid_max.
            id > self.after || id <= self.upto
        }
    }
}

/// The IDs given between `then` and `now`, or `None` when the allocator may
/// have gone all the way round (or `pid_max` changed, or the counters went
/// back): then any ID may have been given again.
pub fn new_ids_between(then: &PidCursor, now: &PidCursor) -> Option<NewIds> {
    if then.pid_max != now.pid_max || now.forks < then.forks {
        return None;
    }
    let created = now.forks - then.forks;
    let ring = u64::from(now.pid_max).saturating_sub(RESERVED_PIDS);
    let passable = created
        .saturating_mul(2)
        .saturating_add(then.tasks)
        .saturating_add(1);
    if passable > ring {
        return None;
    }
    Some(NewIds {
        after: then.last_pid,
        upto: now.last_pid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cursor(last_pid: u32, forks: u64) -> PidCursor {
        PidCursor {
            last_pid,
            pid_max: 32768,
            forks,
            tasks: 1000,
        }
    }

    #[test]
    fn ids_given_since_lie_after_the_old_cursor_up_to_the_new_one() {
        let ids = new_ids_between(&cursor(5000, 100), &cursor(5200, 150)).unwrap();
        assert!(!ids.may_contain(5000));
        assert!(ids.may_contain(5001));
        assert!(ids.may_contain(5200));
        assert!(!ids.may_contain(5201));
        assert!(!ids.may_contain(17));
    }

    #[test]
    fn a_wrap_past_pid_max_covers_the_top_and_the_low_ids() {
        let ids = new_ids_between(&cursor(32000, 100), &cursor(400, 1500)).unwrap();
        assert!(ids.may_contain(32001));
        assert!(ids.may_contain(32767));
        assert!(ids.may_contain(1));
        assert!(ids.may_contain(400));
        assert!(!ids.may_contain(401));
        assert!(!ids.may_contain(32000));
    }

    #[test]
    fn no_task_created_in_the_namespace_means_no_id_given() {
        let ids = new_ids_between(&cursor(5000, 100), &cursor(5000, 180)).unwrap();
        assert!(!ids.may_contain(5000));
        assert!(!ids.may_contain(5001));
        assert!(!ids.may_contain(4999));
    }

    #[test]
    fn enough_forks_to_go_all_the_way_round_trusts_no_interval() {
        // Ring 32468, 1000 tasks: 15734 forks could pass every free ID.
        assert!(new_ids_between(&cursor(5000, 0), &cursor(5100, 15_733)).is_some());
        assert!(new_ids_between(&cursor(5000, 0), &cursor(5100, 15_734)).is_none());
    }

    #[test]
    fn a_changed_pid_max_or_a_counter_gone_back_trusts_no_interval() {
        let mut bigger = cursor(5100, 200);
        bigger.pid_max = 65536;
        assert!(new_ids_between(&cursor(5000, 100), &bigger).is_none());
        assert!(new_ids_between(&cursor(5000, 100), &cursor(5100, 99)).is_none());
    }

    #[test]
    fn a_task_saved_unread_is_any_holder_started_before_the_tick_and_no_later_one() {
        assert!(same_task(UNREAD_START, 4999, Some(5000)));
        assert!(!same_task(UNREAD_START, 5000, Some(5000)));
        assert!(
            !same_task(UNREAD_START, 4999, None),
            "no tick: nothing unread"
        );
        assert!(same_task(4000, 4000, Some(5000)));
        assert!(
            !same_task(4000, 3999, Some(5000)),
            "a read start time must match"
        );
    }

    #[test]
    fn negative_ids_are_never_taken_as_known() {
        let ids = new_ids_between(&cursor(5000, 100), &cursor(5000, 100)).unwrap();
        assert!(ids.may_contain(-1));
    }
}
