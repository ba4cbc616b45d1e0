//! Which CPUs a shield takes when the user names none (`compare`, `demo`,
//! `tune` without `--cpus`): one rule for every command that shields.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;

/// The CPUs to shield by default: the highest online CPU and its hyperthread
/// siblings, keeping CPU 0 for housekeeping (pure; `siblings_of` gives a
/// CPU's SMT siblings). Refused, with the remedy, on a 1-CPU machine or where
/// that core would leave no CPU to the rest of the system.
pub fn default_cpus(
    online: &CpuSet,
    siblings_of: &dyn Fn(usize) -> CpuSet,
) -> Result<CpuSet, String> {
    let last = online.last().unwrap_or(0);
    if online.len() < 2 || last == 0 {
        return Err(format!(
            "this machine has only CPU(s) {online}: a shield needs at least 2 CPUs, one kept for the rest of the system"
        ));
    }
    let cpus = siblings_of(last)
        .union(&CpuSet::from_cpus([last]))
        .intersection(online);
    let cpus = cpus.difference(&CpuSet::from_cpus([0]));
    if online.difference(&cpus).is_empty() {
        return Err(format!(
            "shielding CPU {last} with its siblings would leave no CPU for the rest of the system: name a CPU with --cpus"
        ));
    }
    Ok(cpus)
}

/// [`default_cpus`] of the `online` CPUs with the siblings the kernel shows;
/// a CPU whose siblings cannot be read counts as a core of its own.
pub fn default_cpus_on(kernel: &dyn Kernel, online: &CpuSet) -> Result<CpuSet, String> {
    default_cpus(online, &|cpu| {
        cpushield_kernel::thread_siblings(kernel, cpu).unwrap_or_else(|_| CpuSet::from_cpus([cpu]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    #[test]
    fn default_cpus_take_the_highest_core_and_keep_cpu0() {
        let online = CpuSet::first_n(4);
        let no_smt = |c: usize| CpuSet::from_cpus([c]);
        assert_eq!(default_cpus(&online, &no_smt).unwrap().to_list(), "3");
        let smt = |c: usize| CpuSet::from_cpus([c - c % 2, c - c % 2 + 1]);
        assert_eq!(default_cpus(&online, &smt).unwrap().to_list(), "2-3");
        assert!(default_cpus(&CpuSet::first_n(1), &no_smt).is_err());
        let all_one_core = |_c: usize| CpuSet::first_n(2);
        assert_eq!(
            default_cpus(&CpuSet::first_n(2), &all_one_core)
                .unwrap()
                .to_list(),
            "1"
        );
    }

    #[test]
    fn default_cpus_on_a_kernel_take_the_siblings_it_shows() {
        let k = FakeKernel::new();
        k.set_file(
            "/sys/devices/system/cpu/cpu3/topology/thread_siblings_list",
            "2-3\n",
        );
        let online = CpuSet::first_n(4);
        assert_eq!(default_cpus_on(&k, &online).unwrap().to_list(), "2-3");
        let unreadable = CpuSet::first_n(6);
        assert_eq!(default_cpus_on(&k, &unreadable).unwrap().to_list(), "5");
    }
}
