//! The kernel command line that completes a shield at the next boot: what
//! runtime cannot do (stop the tick, offload RCU, move managed IRQs), and on
//! a machine of several memory nodes, automatic NUMA balancing off for good.

use crate::masks::ShieldMasks;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{numa, Host};

/// Why no boot command line could be given.
#[derive(Debug, thiserror::Error)]
pub enum BootParamsError {
    /// Reading the machine or the shield's state failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The saved shield names CPUs that are not a list.
    #[error(transparent)]
    Cpus(#[from] cpushield_cpuset::ParseError),
    /// The masks do not fit this machine.
    #[error(transparent)]
    Shield(#[from] crate::ShieldError),
    /// Nothing to isolate, or nothing left for the kernel; with the remedy.
    #[error("{0}")]
    Refused(String),
}

/// `cpushield boot-params`: the command line for `masks` on `host`, or for
/// the shield in force when `masks` is empty; refused when nothing is
/// shielded, when the masks do not fit the online CPUs, and when they
/// would leave the kernel no housekeeping CPU.
pub fn for_host(host: &Host, masks: &ShieldMasks) -> Result<String, BootParamsError> {
    let online = cpushield_kernel::online_cpus(host.kernel())?;
    let mut masks = masks.clone();
    if masks.is_empty() {
        let st = crate::status::status(host)?;
        masks = ShieldMasks {
            procs: CpuSet::parse_list(&st.procs)?,
            irqs: CpuSet::parse_list(&st.irqs)?,
            ltmr: CpuSet::parse_list(&st.ltmr)?,
        };
        if masks.is_empty() {
            return Err(BootParamsError::Refused(
                "nothing is shielded: name CPUs, e.g. `cpushield boot-params --all 3`".into(),
            ));
        }
    }
    crate::validate(&masks, &online)?;
    refuse_no_housekeeping(&masks, &online)?;
    let k = host.kernel();
    let balancing = numa::balancing_applies(&numa::nodes(k), numa::balancing(k));
    Ok(boot_params(&masks, &online, balancing))
}

/// A boot command line that isolates every online CPU (e.g. `--procs 1 --irqs 0`
/// on two CPUs gives `isolcpus=managed_irq,domain,0-1`) leaves the kernel no
/// housekeeping CPU: refused, naming the remedy.
fn refuse_no_housekeeping(masks: &ShieldMasks, online: &CpuSet) -> Result<(), BootParamsError> {
    let shielded = masks.procs.union(&masks.irqs).union(&masks.ltmr);
    if !online.is_empty() && online.is_subset(&shielded) {
        return Err(BootParamsError::Refused(format!(
            "--procs/--irqs/--ltmr together cover every online CPU ({online}): the boot \
             parameters would leave the kernel no housekeeping CPU; leave at least one CPU \
             unshielded, e.g. CPU {}",
            online.first().unwrap_or(0)
        )));
    }
    Ok(())
}

/// The command-line fragment for these masks on a machine with `online` CPUs:
/// `nohz_full` and `rcu_nocbs` for the local-timer shield, `isolcpus` with
/// `domain` for the process shield and `managed_irq` for the IRQ shield, and
/// `irqaffinity` (the default IRQ mask) set to the CPUs left for interrupts.
/// With `numa_balancing` (the kernel balances: several memory nodes, see
/// [`numa::balancing_applies`]) and a process shield, `numa_balancing=disable`:
/// the balancer unmaps a sample of every task's pages each scan period to
/// learn where they are used, and the task's next touch of each is a page
/// fault, in the shielded task too. `sysctl kernel.numa_balancing=0` does the
/// same at run time (`check` names it); the parameter keeps it off from boot.
pub fn boot_params(masks: &ShieldMasks, online: &CpuSet, numa_balancing: bool) -> String {
    let mut parts = Vec::new();
    let isolcpus_cpus = masks.procs.union(&masks.irqs);
    if !isolcpus_cpus.is_empty() {
        let mut flags = Vec::new();
        if !masks.irqs.is_empty() {
            flags.push("managed_irq");
        }
        if !masks.procs.is_empty() {
            flags.push("domain");
        }
        parts.push(format!("isolcpus={},{}", flags.join(","), isolcpus_cpus));
    }
    if !masks.ltmr.is_empty() {
        parts.push(format!("nohz_full={}", masks.ltmr));
        parts.push(format!("rcu_nocbs={}", masks.ltmr));
    }
    if !masks.irqs.is_empty() {
        let housekeeping = online.difference(&masks.irqs);
        if !housekeeping.is_empty() {
            parts.push(format!("irqaffinity={housekeeping}"));
        }
    }
    if numa_balancing && !masks.procs.is_empty() {
        parts.push("numa_balancing=disable".into());
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_nothing_shielded_and_no_cpus_named_boot_params_say_so() {
        let k = crate::fake_machine::v1_machine("0-1", &[(100, "0-1")]);
        let store = cpushield_kernel::store::MemoryStore::default();
        let e = for_host(&Host::fake(&k, &store), &ShieldMasks::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("nothing is shielded: name CPUs"), "{e}");
        let masks = ShieldMasks::all(&CpuSet::from_cpus([1]));
        let line = for_host(&Host::fake(&k, &store), &masks).unwrap();
        assert!(line.contains("nohz_full=1"), "{line}");
    }

    #[test]
    fn boot_params_covering_every_cpu_together_are_refused() {
        let online = CpuSet::first_n(2);
        let c = |s: &str| CpuSet::parse_list(s).unwrap();
        let split = ShieldMasks {
            procs: c("1"),
            irqs: c("0"),
            ..Default::default()
        };
        let err = refuse_no_housekeeping(&split, &online).unwrap_err();
        assert!(err.to_string().contains("no housekeeping CPU"), "{err}");
        let fine = ShieldMasks {
            procs: c("1"),
            irqs: c("1"),
            ..Default::default()
        };
        assert!(refuse_no_housekeeping(&fine, &online).is_ok());
    }

    #[test]
    fn all_three_shields_give_the_full_fragment() {
        let cpus = CpuSet::parse_list("3").unwrap();
        let line = boot_params(&ShieldMasks::all(&cpus), &CpuSet::first_n(4), false);
        assert_eq!(
            line,
            "isolcpus=managed_irq,domain,3 nohz_full=3 rcu_nocbs=3 irqaffinity=0-2"
        );
    }

    #[test]
    fn each_kind_adds_only_its_own_parameters() {
        let online = CpuSet::first_n(4);
        let c = |s: &str| CpuSet::parse_list(s).unwrap();
        let only_ltmr = ShieldMasks {
            ltmr: c("2-3"),
            ..Default::default()
        };
        assert_eq!(
            boot_params(&only_ltmr, &online, true),
            "nohz_full=2-3 rcu_nocbs=2-3"
        );
        let only_irqs = ShieldMasks {
            irqs: c("3"),
            ..Default::default()
        };
        assert_eq!(
            boot_params(&only_irqs, &online, true),
            "isolcpus=managed_irq,3 irqaffinity=0-2"
        );
    }

    #[test]
    fn numa_balancing_is_disabled_at_boot_only_for_a_process_shield_where_the_kernel_balances() {
        let online = CpuSet::first_n(4);
        let all = ShieldMasks::all(&CpuSet::parse_list("2-3").unwrap());
        assert!(boot_params(&all, &online, true).ends_with(" numa_balancing=disable"));
        assert!(!boot_params(&all, &online, false).contains("numa_balancing"));
    }

    #[test]
    fn the_kernel_balances_only_with_the_sysctl_and_two_nodes_with_memory() {
        let node = |id, cpus: &str, memory| numa::NumaNode {
            id,
            cpus: CpuSet::parse_list(cpus).unwrap(),
            memory,
        };
        let two = [node(0, "0-1", true), node(1, "2-3", true)];
        assert!(numa::balancing_applies(&two, Some(1)));
        assert!(numa::balancing_applies(&two, Some(0)));
        assert!(!numa::balancing_applies(&two, None));
        let one_with_memory = [node(0, "0-1", true), node(1, "2-3", false)];
        assert!(!numa::balancing_applies(&one_with_memory, Some(1)));
        assert!(!numa::balancing_applies(&[], Some(1)));
    }

    #[test]
    fn boot_params_of_a_two_node_machine_with_balancing_disable_it() {
        let k = crate::fake_machine::v1_machine("0-3", &[(100, "0-3")]);
        k.set_file("/sys/devices/system/node/node0/cpulist", "0-1\n");
        k.set_file("/sys/devices/system/node/node1/cpulist", "2-3\n");
        k.set_file("/sys/devices/system/node/has_memory", "0-1\n");
        let store = cpushield_kernel::store::MemoryStore::default();
        let masks = ShieldMasks::all(&CpuSet::parse_list("3").unwrap());
        let without = for_host(&Host::fake(&k, &store), &masks).unwrap();
        assert!(!without.contains("numa_balancing"), "{without}");
        k.set_file(numa::NUMA_BALANCING, "1\n");
        let with = for_host(&Host::fake(&k, &store), &masks).unwrap();
        assert!(with.ends_with(" numa_balancing=disable"), "{with}");
    }
}
