//! The experiment's plan, decided before and between the scenarios (pure):
//! which CPUs each scenario measures, the spike threshold and the advance
//! (which CPUs to shield by default is the shield's rule,
//! `cpushield_shield::default_cpus`).

use crate::scenario::Scenario;
use cpushield_cpuset::CpuSet;
use cpushield_report::LatencySummary;
use std::time::Duration;

/// The CPU the unshielded-cpu scenario measures: the highest housekeeping CPU
/// other than CPU 0 (which runs the machine's own services), if any.
pub fn unshielded_probe_cpu(online: &CpuSet, shielded: &CpuSet) -> Option<usize> {
    online
        .difference(shielded)
        .iter()
        .filter(|c| *c != 0)
        .last()
}

/// Each planned scenario with the CPUs it measures, and the lines saying
/// which were skipped and why (pure).
pub fn plan_scenarios(
    scenarios: &[Scenario],
    online: &CpuSet,
    shielded: &CpuSet,
) -> (Vec<(Scenario, CpuSet)>, Vec<String>) {
    let mut planned = Vec::new();
    let mut skipped = Vec::new();
    for &s in scenarios {
        let cpus = match s {
            Scenario::UnshieldedCpu => match unshielded_probe_cpu(online, shielded) {
                Some(c) => CpuSet::from_cpus([c]),
                None => {
                    skipped.push(
                        "unshielded-cpu skipped: the only unshielded CPU is CPU 0, which runs the machine's own services (needs 3+ CPUs)"
                            .to_string(),
                    );
                    continue;
                }
            },
            _ => shielded.clone(),
        };
        planned.push((s, cpus));
    }
    (planned, skipped)
}

pub use cpushield_measure::trace::threshold_from_idle_p99;

/// The advance of the shielded+advance scenario from the shielded
/// scenario's wakeup latency: its 99.999th percentile (so nearly every
/// wakeup comes before the deadline), at least 10 us and at most a quarter
/// of the period (the spin must leave the CPU mostly idle).
pub fn advance_from_shielded(shielded: &LatencySummary, period_ns: u64) -> Duration {
    let quarter = (period_ns / 4).max(10_000);
    Duration::from_nanos(shielded.p99999_ns.clamp(10_000, quarter))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unshielded_probe_never_uses_cpu0() {
        assert_eq!(
            unshielded_probe_cpu(&CpuSet::first_n(2), &CpuSet::from_cpus([1])),
            None
        );
        assert_eq!(
            unshielded_probe_cpu(&CpuSet::first_n(4), &CpuSet::from_cpus([3])),
            Some(2)
        );
    }
}
