//! The kernel command line that completes a shield at the next boot: what
//! runtime cannot do (stop the tick, offload RCU, move managed IRQs).

use crate::masks::ShieldMasks;
use cpushield_cpuset::CpuSet;

/// The command-line fragment for these masks on a machine with `online` CPUs:
/// `nohz_full` and `rcu_nocbs` for the local-timer shield, `isolcpus` with
/// `domain` for the process shield and `managed_irq` for the IRQ shield, and
/// `irqaffinity` (the default IRQ mask) set to the CPUs left for interrupts.
pub fn boot_params(masks: &ShieldMasks, online: &CpuSet) -> String {
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
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_three_shields_give_the_full_fragment() {
        let cpus = CpuSet::parse_list("3").unwrap();
        let line = boot_params(&ShieldMasks::all(&cpus), &CpuSet::first_n(4));
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
            boot_params(&only_ltmr, &online),
            "nohz_full=2-3 rcu_nocbs=2-3"
        );
        let only_irqs = ShieldMasks {
            irqs: c("3"),
            ..Default::default()
        };
        assert_eq!(
            boot_params(&only_irqs, &online),
            "isolcpus=managed_irq,3 irqaffinity=0-2"
        );
    }
}
