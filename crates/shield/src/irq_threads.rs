//! Threaded IRQ handlers (`irq/N-name`; on PREEMPT_RT every device IRQ has
//! one) and whether each followed its IRQ off a shielded CPU. The kernel sets
//! a handler thread's affinity to its IRQ's effective affinity whenever the
//! IRQ's mask is written, so moving the IRQ moves its thread; a thread pinned
//! by hand (`taskset`) keeps that pin until the IRQ's mask is written again.
//! An IRQ whose handler is not threaded (IRQF_NO_THREAD: the timer, IPIs,
//! some chained interrupt controllers; and every device IRQ on a kernel
//! without PREEMPT_RT or `threadirqs`) has no thread: its mask is all there is.

use crate::snapshot::Snapshot;
use cpushield_cpuset::CpuSet;
use cpushield_parse::kthread_name::irq_thread_irq;
use serde::Serialize;

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

/// The handler threads of the IRQs whose mask leaves `cpu` out: those that
/// followed (their affinity leaves it out too) and those left behind (still
/// allowed on `cpu`: pinned by hand).
pub fn off_cpu(snap: &Snapshot, cpu: usize) -> (Vec<IrqThread>, Vec<IrqThread>) {
    let mut followed = Vec::new();
    let mut left = Vec::new();
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
        if t.affinity.contains(cpu) {
            left.push(thread);
        } else {
            followed.push(thread);
        }
    }
    (followed, left)
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
        for (tid, comm) in [
            (120, "irq/24-virtio0-i"),
            (121, "irq/9-acpi"),
            (122, "irq/30-rt-nic"),
            (123, "ksoftirqd/3"),
        ] {
            k.set_file(
                format!("/proc/{tid}/task/{tid}/stat"),
                kthread_stat(tid, comm),
            );
        }
        for (irq, mask) in [(24, "7"), (9, "7"), (30, "8")] {
            k.set_file(format!("/proc/irq/{irq}/smp_affinity"), format!("{mask}\n"));
        }
        let snap = crate::snapshot::take(&k, &crate::layout::detect(&k).unwrap()).unwrap();
        let (followed, left) = off_cpu(&snap, 3);
        let names = |v: &[IrqThread]| v.iter().map(|t| t.comm.clone()).collect::<Vec<_>>();
        assert_eq!(names(&followed), ["irq/24-virtio0-i"]);
        assert_eq!(names(&left), ["irq/9-acpi"]);
        assert_eq!((left[0].irq, left[0].tid), (9, 121));
        assert_eq!(left[0].irq_affinity.to_list(), "0-2");
    }
}
