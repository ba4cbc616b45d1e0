//! The run-time settings of a config's `[runtime]` section as files to
//! write on this machine (what `apply` makes true), checked against what the
//! machine offers.

use crate::machine::{
    FileChange, Machine, PREEMPT_FILE, RT_RUNTIME, STAT_INTERVAL, TIMER_MIGRATION,
};
use cpushield_config::RuntimeSettings;
use cpushield_cpuset::CpuSet;
use std::path::PathBuf;

/// A setting this machine cannot take: the key, what is wrong, the remedy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    /// The key (`runtime.preempt`).
    pub key: &'static str,
    /// What is wrong.
    pub problem: String,
    /// What to do.
    pub remedy: String,
}

fn refuse(key: &'static str, problem: String, remedy: &str) -> SettingError {
    SettingError {
        key,
        problem,
        remedy: remedy.to_string(),
    }
}

/// Each file `settings` writes on `machine` with the shielded CPUs `cpus`:
/// its current value (to journal) and the one asked, also when they are
/// equal (the caller skips those).
pub fn files_for(
    machine: &Machine,
    cpus: &CpuSet,
    settings: &RuntimeSettings,
) -> Result<Vec<FileChange>, SettingError> {
    let mut out = Vec::new();
    for (key, path, value) in [
        (
            "runtime.sched_rt_runtime_us",
            RT_RUNTIME,
            settings.sched_rt_runtime_us.map(|v| v.to_string()),
        ),
        (
            "runtime.timer_migration",
            TIMER_MIGRATION,
            settings.timer_migration.map(|v| v.to_string()),
        ),
        (
            "runtime.stat_interval",
            STAT_INTERVAL,
            settings.stat_interval.map(|v| v.to_string()),
        ),
    ] {
        let Some(value) = value else { continue };
        let Some(current) = machine.sysctls.get(path) else {
            return Err(refuse(
                key,
                format!("{path} does not exist on this kernel"),
                "remove the key",
            ));
        };
        out.push(change(path, current, &value));
    }
    if let Some(model) = &settings.preempt {
        let Some(models) = &machine.preempt else {
            let why = machine
                .debugfs_problem
                .clone()
                .unwrap_or_else(|| "a kernel without PREEMPT_DYNAMIC, or no debugfs".into());
            return Err(refuse(
                "runtime.preempt",
                format!("{PREEMPT_FILE} cannot be read ({why})"),
                "remove the key, or boot with preempt= on the kernel command line",
            ));
        };
        if !models.choices.contains(model) {
            return Err(refuse(
                "runtime.preempt",
                format!(
                    "the kernel offers no {model} (it offers {})",
                    models.choices.join(", ")
                ),
                "name one of those",
            ));
        }
        out.push(change(PREEMPT_FILE, &models.current, model));
    }
    for cpu in cpus.iter() {
        let files = machine.cpus.get(&cpu).cloned().unwrap_or_default();
        let base = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq");
        for (key, leaf, want, have, choices) in [
            (
                "runtime.cpufreq_governor",
                "scaling_governor",
                &settings.cpufreq_governor,
                &files.governor,
                &files.governors,
            ),
            (
                "runtime.energy_performance_preference",
                "energy_performance_preference",
                &settings.energy_performance_preference,
                &files.epp,
                &files.epps,
            ),
        ] {
            let Some(want) = want else { continue };
            let Some(have) = have else {
                return Err(refuse(
                    key,
                    format!("CPU {cpu} has no {base}/{leaf}"),
                    "remove the key",
                ));
            };
            if !choices.is_empty() && !choices.contains(want) {
                return Err(refuse(
                    key,
                    format!(
                        "CPU {cpu} offers no {want} (it offers {})",
                        choices.join(", ")
                    ),
                    "name one of those",
                ));
            }
            out.push(change(&format!("{base}/{leaf}"), have, want));
        }
        if let Some(limit) = settings.idle_max_latency_us {
            if files.idle_states.is_empty() {
                return Err(refuse(
                    "runtime.idle_max_latency_us",
                    format!("CPU {cpu} has no cpuidle states"),
                    "remove the key (the CPU halts; there is no C-state to limit)",
                ));
            }
            for s in files.idle_states.iter().filter(|s| s.latency_us > limit) {
                out.push(change(
                    &s.dir.join("disable").display().to_string(),
                    &s.disable,
                    "1",
                ));
            }
        }
    }
    if settings.smt_siblings_offline {
        let siblings = cpus
            .iter()
            .filter_map(|c| machine.cpus.get(&c).map(|f| f.siblings.clone()))
            .fold(CpuSet::new(), |a, s| a.union(&s))
            .difference(cpus);
        if siblings.is_empty() {
            return Err(refuse(
                "runtime.smt_siblings_offline",
                format!("the shielded CPUs {cpus} have no SMT sibling on this machine (SMT is off or absent)"),
                "remove the key",
            ));
        }
        if siblings.contains(0) {
            return Err(refuse(
                "runtime.smt_siblings_offline",
                "CPU 0 is an SMT sibling of a shielded CPU and cannot go offline".into(),
                "remove the key, or shield CPUs on another core",
            ));
        }
        if machine.cgroup_v1 && !siblings.is_empty() {
            return Err(refuse("runtime.smt_siblings_offline", "on cgroup v1 a CPU taken offline leaves every cpuset for good, so reset could not restore them".into(), "remove the key, or turn SMT off at boot (nosmt)"));
        }
        for sib in siblings.intersection(&machine.online).iter() {
            out.push(change(
                &format!("/sys/devices/system/cpu/cpu{sib}/online"),
                "1",
                "0",
            ));
        }
    }
    Ok(out)
}

fn change(path: &str, original: &str, candidate: &str) -> FileChange {
    FileChange {
        path: PathBuf::from(path),
        original: original.to_string(),
        candidate: candidate.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::CpuFiles;

    /// CPU 3 of a 4-CPU machine, with these files.
    fn with_cpu3(files: CpuFiles) -> Machine {
        let mut m = Machine {
            online: CpuSet::parse_list("0-3").unwrap(),
            ..Default::default()
        };
        m.cpus.insert(3, files);
        m
    }

    #[test]
    fn a_setting_the_machine_lacks_is_refused_naming_its_key() {
        let s = RuntimeSettings {
            preempt: Some("full".into()),
            ..Default::default()
        };
        let no_debugfs = with_cpu3(CpuFiles::default());
        assert_eq!(
            files_for(&no_debugfs, &CpuSet::from_cpus([3]), &s)
                .unwrap_err()
                .key,
            "runtime.preempt"
        );
        let s = RuntimeSettings {
            cpufreq_governor: Some("schedutil".into()),
            ..Default::default()
        };
        let governed = with_cpu3(CpuFiles {
            governor: Some("powersave".into()),
            governors: vec!["performance".into(), "powersave".into()],
            ..Default::default()
        });
        assert!(files_for(&governed, &CpuSet::from_cpus([3]), &s)
            .unwrap_err()
            .problem
            .contains("offers no schedutil"));
        let mut v1 = with_cpu3(CpuFiles {
            siblings: CpuSet::parse_list("1,3").unwrap(),
            ..Default::default()
        });
        v1.cgroup_v1 = true;
        let s = RuntimeSettings {
            smt_siblings_offline: true,
            ..Default::default()
        };
        assert!(files_for(&v1, &CpuSet::from_cpus([3]), &s)
            .unwrap_err()
            .problem
            .contains("cgroup v1"));
    }

    #[test]
    fn smt_siblings_offline_on_a_machine_without_smt_is_refused_naming_its_key() {
        let s = RuntimeSettings {
            smt_siblings_offline: true,
            ..Default::default()
        };
        let err =
            files_for(&with_cpu3(CpuFiles::default()), &CpuSet::from_cpus([3]), &s).unwrap_err();
        assert_eq!(err.key, "runtime.smt_siblings_offline");
        assert!(err.problem.contains("no SMT sibling"), "{}", err.problem);
    }

    #[test]
    fn a_sysctl_is_set_from_its_value_now() {
        let mut m = with_cpu3(CpuFiles::default());
        m.sysctls.insert(RT_RUNTIME, "950000".into());
        let s = RuntimeSettings {
            sched_rt_runtime_us: Some(-1),
            ..Default::default()
        };
        let files = files_for(&m, &CpuSet::from_cpus([3]), &s).unwrap();
        assert_eq!(
            files,
            [FileChange {
                path: RT_RUNTIME.into(),
                original: "950000".into(),
                candidate: "-1".into(),
            }]
        );
    }
}
