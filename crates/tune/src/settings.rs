//! The `[runtime]` section that `tune`'s winning knobs make (what the
//! section means as files is `cpushield_runtime::settings`).

pub use cpushield_runtime::settings::{files_for, SettingError};

use crate::knob::KnobId;
use cpushield_config::RuntimeSettings;
use cpushield_cpuset::CpuSet;

/// The `[runtime]` settings of a winning set of knobs (`knobs` as found on
/// the machine) and the CPUs the shield should also keep IRQs off.
pub fn settings_of(chosen: &[&crate::knob::Knob]) -> (RuntimeSettings, CpuSet) {
    let mut s = RuntimeSettings::default();
    let mut irqs = CpuSet::new();
    for knob in chosen {
        let first_candidate = || match &knob.change {
            Ok(crate::knob::Change::Files(f)) => f.first().map(|f| f.candidate.clone()),
            _ => None,
        };
        match knob.id {
            KnobId::RtThrottling => {
                s.sched_rt_runtime_us = first_candidate().and_then(|v| v.parse().ok())
            }
            KnobId::TimerMigration => {
                s.timer_migration = first_candidate().and_then(|v| v.parse().ok())
            }
            KnobId::StatInterval => {
                s.stat_interval = first_candidate().and_then(|v| v.parse().ok())
            }
            KnobId::Preempt => s.preempt = first_candidate(),
            KnobId::Governor => s.cpufreq_governor = Some("performance".into()),
            KnobId::EnergyPerformance => {
                s.energy_performance_preference = Some("performance".into())
            }
            KnobId::IdleStates => s.idle_max_latency_us = Some(0),
            KnobId::SmtOffline => s.smt_siblings_offline = true,
            KnobId::IrqSiblings => {
                if let Ok(crate::knob::Change::IrqShield(c)) = &knob.change {
                    irqs = irqs.union(c);
                }
            }
            // The shield's nodes are the shield's (`--mems`), not a
            // `[runtime]` setting: the advice names them.
            KnobId::IdlePoll | KnobId::DmaLatency | KnobId::ProbePriority | KnobId::Mems => {}
        }
    }
    (s, irqs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knob::{catalog, FileChange};
    use cpushield_runtime::fake::machine;

    #[test]
    fn the_winning_knobs_become_settings_that_write_the_same_files() {
        let m = machine();
        let cpus = CpuSet::from_cpus([3]);
        let knobs = catalog(&m, &cpus, 95);
        let chosen: Vec<&crate::knob::Knob> = knobs
            .iter()
            .filter(|k| {
                matches!(
                    k.id,
                    KnobId::TimerMigration
                        | KnobId::Preempt
                        | KnobId::Governor
                        | KnobId::IdleStates
                        | KnobId::RtThrottling
                        | KnobId::SmtOffline
                )
            })
            .collect();
        let (settings, irqs) = settings_of(&chosen);
        assert!(irqs.is_empty());
        let from_settings = files_for(&m, &cpus, &settings).unwrap();
        let mut from_knobs: Vec<FileChange> = chosen
            .iter()
            .flat_map(|k| match &k.change {
                Ok(crate::knob::Change::Files(f)) => f.clone(),
                _ => Vec::new(),
            })
            .collect();
        let mut from_settings_sorted = from_settings.clone();
        from_knobs.sort_by(|a, b| a.path.cmp(&b.path));
        from_settings_sorted.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(from_settings_sorted, from_knobs);
    }
}
