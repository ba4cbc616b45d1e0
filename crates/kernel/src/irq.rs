//! The IRQs of /proc/irq, through the kernel door: which IRQs there are and
//! where each may go and goes now (parsed by `cpushield_parse::irq_affinity`).

use crate::{paths, read_cpu_list, Kernel};
use cpushield_cpuset::CpuSet;
use cpushield_parse::irq_affinity::{IrqAffinity, IrqAffinityText};
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// The IRQ numbers /proc/irq lists, in order (`default_smp_affinity` left out).
pub fn numbers(kernel: &dyn Kernel) -> io::Result<Vec<u32>> {
    let entries = kernel.read_dir(Path::new(paths::IRQ_DIR))?;
    let mut numbers: Vec<u32> = entries.iter().filter_map(|e| e.parse().ok()).collect();
    numbers.sort_unstable();
    Ok(numbers)
}

/// The affinity files of every IRQ under /proc/irq, as read (IRQs without a
/// readable smp_affinity_list are left out).
pub fn affinity_texts(kernel: &dyn Kernel) -> BTreeMap<u32, IrqAffinityText> {
    let mut out = BTreeMap::new();
    let Ok(irqs) = numbers(kernel) else {
        return out;
    };
    for irq in irqs {
        let file = |name: &str| kernel.read(&paths::irq_file(irq, name));
        let Ok(smp_affinity_list) = file("smp_affinity_list") else {
            continue;
        };
        out.insert(
            irq,
            IrqAffinityText {
                smp_affinity_list,
                effective_affinity_list: file("effective_affinity_list").ok(),
            },
        );
    }
    out
}

/// Every IRQ's requested and effective CPUs (IRQs whose files do not parse
/// are left out).
pub fn affinities(kernel: &dyn Kernel) -> BTreeMap<u32, IrqAffinity> {
    affinity_texts(kernel)
        .iter()
        .filter_map(|(irq, text)| Some((*irq, IrqAffinity::parse(text).ok()?)))
        .collect()
}

/// The CPUs IRQ `irq` is delivered to now (its effective_affinity_list).
pub fn effective_affinity(kernel: &dyn Kernel, irq: u32) -> io::Result<CpuSet> {
    read_cpu_list(kernel, &paths::irq_file(irq, "effective_affinity_list"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeKernel;

    #[test]
    fn irqs_are_listed_in_order_with_their_requested_and_effective_cpus() {
        let k = FakeKernel::new();
        k.set_file("/proc/irq/default_smp_affinity", "f\n");
        k.set_file("/proc/irq/36/smp_affinity_list", "0-1\n");
        k.set_file("/proc/irq/36/effective_affinity_list", "1\n");
        k.set_file("/proc/irq/4/smp_affinity_list", "0\n");
        k.add_dir("/proc/irq/9");
        assert_eq!(numbers(&k).unwrap(), vec![4, 9, 36]);
        let all = affinities(&k);
        assert_eq!(all.keys().copied().collect::<Vec<_>>(), vec![4, 36]);
        assert_eq!(all[&36].requested, CpuSet::from_cpus([0, 1]));
        assert_eq!(all[&36].effective, Some(CpuSet::from_cpus([1])));
        assert_eq!(all[&4].effective, None);
        assert_eq!(effective_affinity(&k, 36).unwrap(), CpuSet::from_cpus([1]));
        assert!(effective_affinity(&k, 4).is_err());
    }
}
