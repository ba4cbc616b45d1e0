//! IRQ moves still pending off the measured CPUs once the shield is up.
//!
//! The kernel moves an IO-APIC or MSI interrupt (x86 without interrupt
//! remapping) at its next arrival, which still lands on the old CPU
//! (`cpushield_shield::irq_moves`). An IRQ that fires often completes its
//! move within a moment; `compare` waits that moment, bounded, before the
//! probes start, so the one interrupt does not fall into the measurement,
//! and reports the moves still pending then (IRQs that have not fired since).

use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use cpushield_shield::irq_moves::{self, PendingMove};
use std::time::{Duration, Instant};

/// The longest wait, after the shield went up, for pending moves to complete.
pub const WAIT: Duration = Duration::from_secs(1);

/// How often the wait looks again.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Waits at most `wait` for the moves pending off `cpus` to complete and
/// returns what to tell of them (nothing when none was pending).
pub fn settle(kernel: &dyn Kernel, cpus: &CpuSet, wait: Duration) -> Vec<String> {
    let first = irq_moves::read_pending_off(kernel, cpus);
    if first.is_empty() {
        return Vec::new();
    }
    let start = Instant::now();
    let mut left = first.clone();
    while !left.is_empty() && start.elapsed() < wait {
        std::thread::sleep(LOOK_EVERY);
        left = irq_moves::read_pending_off(kernel, cpus);
    }
    notes(&first, &left, cpus, start.elapsed())
}

/// What to tell of the moves pending when the shield went up (`first`) and
/// of those still pending after `waited` (`left`) (pure).
pub fn notes(
    first: &[PendingMove],
    left: &[PendingMove],
    cpus: &CpuSet,
    waited: Duration,
) -> Vec<String> {
    let names = |v: &[&PendingMove]| {
        v.iter()
            .map(|m| irq_moves::label(m))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let s = |n: usize| if n == 1 { "" } else { "s" };
    let done: Vec<&PendingMove> = first
        .iter()
        .filter(|m| !left.iter().any(|l| l.irq == m.irq))
        .collect();
    let still: Vec<&PendingMove> = left.iter().collect();
    let mut out = Vec::new();
    if !done.is_empty() {
        out.push(format!(
            "IRQ move{} off CPU {cpus} completed in the {:.1} s after the shield went up, before the probes started: {} (each delivered its one last interrupt there then)",
            s(done.len()),
            waited.as_secs_f64(),
            names(&done)
        ));
    }
    if !still.is_empty() {
        out.push(format!(
            "move still pending for IRQ{} {} off CPU {cpus} when the probes started (no interrupt of theirs since the shield went up): {}",
            s(still.len()),
            names(&still),
            irq_moves::meaning(cpus)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    fn moving(irq: u32, name: &str) -> PendingMove {
        PendingMove {
            irq,
            name: name.into(),
            requested: CpuSet::from_cpus([0]),
            still_on: CpuSet::from_cpus([1]),
        }
    }

    #[test]
    fn moves_completed_in_the_wait_and_moves_still_pending_are_told_apart() {
        let first = [moving(25, "ACPI:Ged"), moving(42, "virtio3-tx")];
        let left = [moving(25, "ACPI:Ged")];
        let n = notes(
            &first,
            &left,
            &CpuSet::from_cpus([1]),
            Duration::from_millis(1000),
        );
        assert_eq!(n.len(), 2, "{n:?}");
        assert!(
            n[0].starts_with("IRQ move off CPU 1 completed in the 1.0 s after the shield went up, before the probes started: 42 (virtio3-tx)"),
            "{}",
            n[0]
        );
        assert!(
            n[1].starts_with(
                "move still pending for IRQ 25 (ACPI:Ged) off CPU 1 when the probes started"
            ),
            "{}",
            n[1]
        );
        assert!(n[1].contains("at most one more interrupt each"), "{}", n[1]);
        assert!(notes(&[], &[], &CpuSet::from_cpus([1]), Duration::ZERO).is_empty());
    }

    #[test]
    fn the_wait_ends_at_once_when_nothing_is_pending_and_is_bounded_otherwise() {
        let k = FakeKernel::new();
        k.set_file("/proc/irq/42/smp_affinity_list", "0\n");
        k.set_file("/proc/irq/42/effective_affinity_list", "0\n");
        let cpus = CpuSet::from_cpus([1]);
        let t = Instant::now();
        assert!(settle(&k, &cpus, Duration::from_secs(5)).is_empty());
        assert!(t.elapsed() < Duration::from_secs(1));
        k.set_file("/proc/irq/42/effective_affinity_list", "1\n");
        let t = Instant::now();
        let n = settle(&k, &cpus, Duration::from_millis(100));
        assert!(t.elapsed() >= Duration::from_millis(100));
        assert!(t.elapsed() < Duration::from_secs(2));
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(
            n[0].starts_with("move still pending for IRQ 42 off CPU 1"),
            "{}",
            n[0]
        );
    }
}
