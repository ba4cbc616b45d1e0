//! The kernel's log buffer, as `dmesg` prints it (syslog(2)
//! SYSLOG_ACTION_READ_ALL: `<6>[    0.000000] rcu: ...` lines): the boot
//! records that say what the kernel did with a boot parameter.

use cpushield_cpuset::CpuSet;

/// The line the RCU code logs at boot when it offloads callbacks
/// (kernel/rcu/tree_nocb.h, `rcu_init_nohz`: "\tOffload RCU callbacks from
/// CPUs: %*pbl.", both for `rcu_nocbs=` and for the CPUs of `nohz_full=`).
const OFFLOAD_LINE: &str = "Offload RCU callbacks from CPUs:";

/// The first line the kernel logs at every boot: a buffer that still holds
/// it holds every boot record after it.
const BOOT_LINE: &str = "Linux version ";

/// What the kernel's log says about the CPUs whose RCU callbacks it
/// offloaded at boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RcuOffloadRecord {
    /// It logged "Offload RCU callbacks from CPUs: LIST.": these CPUs.
    Offloaded(CpuSet),
    /// The log reaches back to the boot and holds no such line: no CPU.
    NoneLogged,
    /// The log no longer reaches back to the boot (it wrapped), or its line
    /// does not read as a CPU list: the log does not say.
    Unknown,
}

/// What `log` (the kernel's log buffer) says about RCU callback offloading.
pub fn rcu_offload(log: &str) -> RcuOffloadRecord {
    let line = log
        .lines()
        .rev()
        .find_map(|l| l.split_once(OFFLOAD_LINE).map(|(_, rest)| rest));
    match line {
        Some(rest) => {
            let list = rest.trim().trim_end_matches('.').trim();
            if list.is_empty() {
                RcuOffloadRecord::Offloaded(CpuSet::new())
            } else {
                CpuSet::parse_list(list)
                    .map(RcuOffloadRecord::Offloaded)
                    .unwrap_or(RcuOffloadRecord::Unknown)
            }
        }
        None if log.contains(BOOT_LINE) => RcuOffloadRecord::NoneLogged,
        None => RcuOffloadRecord::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The boot log of the Debian 6.12 PREEMPT_RT guest booted with
    /// `rcu_nocbs=2`, as syslog(2) gives it.
    const LOG_612: &str = "<5>[    0.000000] Linux version 6.12.117+deb12-rt-amd64\n<6>[    0.000000] rcu: Preemptible hierarchical RCU implementation.\n<6>[    0.000000] rcu: \tRCU_SOFTIRQ processing moved to rcuc kthreads.\n<6>[    0.000000] rcu: \tOffload RCU callbacks from CPUs: 2.\n<6>[    0.615437] rcu: Hierarchical SRCU implementation.\n";

    #[test]
    fn the_offload_line_names_the_offloaded_cpus() {
        assert_eq!(
            rcu_offload(LOG_612),
            RcuOffloadRecord::Offloaded(CpuSet::from_cpus([2]))
        );
        assert_eq!(
            rcu_offload("[    0.0] rcu: \tOffload RCU callbacks from CPUs: 1-3,6.\n"),
            RcuOffloadRecord::Offloaded(CpuSet::parse_list("1-3,6").unwrap())
        );
    }

    #[test]
    fn a_log_from_the_boot_without_the_line_offloads_nothing_and_a_wrapped_one_does_not_say() {
        let without = LOG_612.replace("\tOffload RCU callbacks from CPUs: 2.", "\tno offload");
        assert_eq!(rcu_offload(&without), RcuOffloadRecord::NoneLogged);
        let wrapped = without.replace("Linux version", "eth0: link up");
        assert_eq!(rcu_offload(&wrapped), RcuOffloadRecord::Unknown);
        assert_eq!(
            rcu_offload("Linux version x\nOffload RCU callbacks from CPUs: zz.\n"),
            RcuOffloadRecord::Unknown
        );
    }
}
