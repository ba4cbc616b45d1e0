//! Interrupts delivered to given CPUs, from /proc/interrupts deltas.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;

/// [`total_on`] of the kernel's /proc/interrupts now (0 when unreadable).
pub fn interrupts_on(kernel: &dyn Kernel, cpus: &CpuSet) -> u64 {
    let text = cpushield_kernel::Procfs::new(kernel)
        .interrupts()
        .unwrap_or_default();
    total_on(&text, cpus)
}

/// Sum of all interrupt counts (device IRQs and per-CPU kinds such as LOC, RES)
/// on the given CPUs, from the text of /proc/interrupts.
pub fn total_on(interrupts: &str, cpus: &CpuSet) -> u64 {
    cpushield_parse::interrupts::parse_interrupts(interrupts)
        .unwrap_or_default()
        .iter()
        .map(|line| cpus.iter().map(|cpu| line.on(cpu)).sum::<u64>())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_the_asked_cpu_columns() {
        let text = "           CPU0       CPU1\n  4:         10          3   IO-APIC   4-edge      ttyS0\nLOC:        100        200   Local timer interrupts\nERR:          0\n";
        assert_eq!(total_on(text, &CpuSet::from_cpus([1])), 203);
        assert_eq!(total_on(text, &CpuSet::from_cpus([0])), 110);
        assert_eq!(total_on(text, &CpuSet::from_cpus([0, 1])), 313);
    }
}
