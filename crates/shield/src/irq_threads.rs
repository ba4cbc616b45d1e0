//! Threaded IRQ handlers (`irq/N-name`; on PREEMPT_RT every device IRQ has
//! one) and whether each followed its IRQ off a shielded CPU. The kernel sets
//! a handler thread's affinity to its IRQ's effective affinity whenever the
//! IRQ's mask is written, so moving the IRQ moves its thread; a thread pinned
//! by hand (`taskset`) keeps that pin until the IRQ's mask is written again.
//! The thread takes the IRQ's *effective* affinity, where the IRQ is really
//! delivered: an IRQ whose move is pending (x86 moves an IO-APIC interrupt at
//! its next occurrence) keeps its thread with it until then.
//! An IRQ whose handler is not threaded (IRQF_NO_THREAD: the timer, IPIs,
//! some chained interrupt controllers; and every device IRQ on a kernel
//! without PREEMPT_RT or `threadirqs`) has no thread: its mask is all there is.

use crate::snapshot::Snapshot;
use cpushield_cpuset::CpuSet;
use cpushield_parse::kthread_name::irq_thread_irq;
use serde::Serialize;

/// The IRQ whose handler thread `task` is, when it is one and its IRQ is
/// in the snapshot: the kernel owns such a thread's affinity (it gives it
/// its IRQ's effective affinity whenever the IRQ's mask is written, and
/// at the IRQ's next interrupt), so the shield neither follows it as a
/// request nor pins it where the kernel would move it anyway.
pub fn handler_irq(task: &crate::snapshot::TaskInfo, snap: &Snapshot) -> Option<u32> {
    let irq = irq_thread_irq(&task.comm).filter(|_| task.kthread)?;
    // A search per handler thread: one scan each cost IRQs x IRQs on a
    // kernel that threads every IRQ.
    snap.irqs
        .binary_search_by_key(&irq, |i| i.irq)
        .is_ok()
        .then_some(irq)
}

/// A handler thread whose IRQ is kept off a CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqThread {
    /// Thread ID.
    pub tid: i32,
    /// Its name (`irq/24-virtio0-i`).
    pub comm: String,
    /// The IRQ it handles.
    pub irq: u32,
    /// The thread's affinity.
    pub affinity: CpuSet,
    /// The IRQ's affinity.
    pub irq_affinity: CpuSet,
}

/// The handler threads of the IRQs whose mask leaves `cpu` out, in three
/// kinds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OffCpu {
    /// Followed their IRQ: their affinity leaves `cpu` out too.
    pub followed: Vec<IrqThread>,
    /// Still allowed on `cpu` though their IRQ is delivered elsewhere:
    /// pinned by hand.
    pub left: Vec<IrqThread>,
    /// Still on `cpu` with their IRQ, whose move is pending (its effective
    /// affinity still holds `cpu`): both move at the IRQ's next interrupt.
    pub pending: Vec<IrqThread>,
}

/// The handler threads of the IRQs whose mask leaves `cpu` out, sorted by
/// kind; `effective` gives an IRQ's effective affinity where the kernel
/// shows it (`/proc/irq/N/effective_affinity_list`).
pub fn off_cpu(snap: &Snapshot, cpu: usize, effective: impl Fn(u32) -> Option<CpuSet>) -> OffCpu {
    let mut out = OffCpu::default();
    for t in snap.tasks.iter().filter(|t| t.kthread) {
        let Some(irq) = irq_thread_irq(&t.comm) else {
            continue;
        };
        let Some(info) = snap.irqs.iter().find(|i| i.irq == irq) else {
            continue;
        };
        if info.affinity.contains(cpu) {
            continue;
        }
        let thread = IrqThread {
            tid: t.tid,
            comm: t.comm.to_string(),
            irq,
            affinity: t.affinity.clone(),
            irq_affinity: info.affinity.clone(),
        };
        if !t.affinity.contains(cpu) {
            out.followed.push(thread);
        } else if effective(irq).is_some_and(|e| e.contains(cpu)) {
            out.pending.push(thread);
        } else {
            out.left.push(thread);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_machine::v1_machine;

    /// A kernel thread's stat: PF_KTHREAD (0x200000) set, PF_NO_SETAFFINITY not.
    fn kthread_stat(tid: i32, comm: &str) -> String {
        format!("{tid} ({comm}) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 {} 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", 1000 + tid)
    }

    #[test]
    fn a_thread_that_followed_its_irq_and_one_pinned_by_hand_are_told_apart() {
        let k = v1_machine("0-3", &[(120, "0"), (121, "0-3"), (122, "3"), (123, "3")]);
        k.set_thread_affinity(124, CpuSet::parse_list("3").unwrap());
        k.set_file("/proc/124/task/124/cgroup", "3:cpuset:/\n");
        k.set_file(
            format!("{}/tasks", crate::fake_machine::V1_ROOT),
            "120\n121\n122\n123\n124\n",
        );
        for (tid, comm) in [
            (120, "irq/24-virtio0-i"),
            (121, "irq/9-acpi"),
            (122, "irq/30-rt-nic"),
            (123, "ksoftirqd/3"),
            (124, "irq/1-i8042"),
        ] {
            k.set_file(
                format!("/proc/{tid}/task/{tid}/stat"),
                kthread_stat(tid, comm),
            );
        }
        for (irq, mask) in [(24, "7"), (9, "7"), (30, "8"), (1, "7")] {
            k.set_file(format!("/proc/irq/{irq}/smp_affinity"), format!("{mask}\n"));
        }
        let snap = crate::snapshot::take(&k, &crate::layout::detect(&k).unwrap()).unwrap();
        // IRQ 1's move is pending: it is still delivered to CPU 3.
        let effective = |irq| (irq == 1).then(|| CpuSet::from_cpus([3]));
        let off = off_cpu(&snap, 3, effective);
        let names = |v: &[IrqThread]| v.iter().map(|t| t.comm.clone()).collect::<Vec<_>>();
        assert_eq!(names(&off.followed), ["irq/24-virtio0-i"]);
        assert_eq!(names(&off.left), ["irq/9-acpi"]);
        assert_eq!((off.left[0].irq, off.left[0].tid), (9, 121));
        assert_eq!(off.left[0].irq_affinity.to_list(), "0-2");
        assert_eq!(names(&off.pending), ["irq/1-i8042"]);
    }
}
