//! The run-time settings of a config's `[runtime]` section as files to
//! write on this machine (what `apply` makes true), checked against what the
//! machine offers.

use crate::machine::{
    FileChange, Machine, PREEMPT_FILE, RT_RUNTIME, STAT_INTERVAL, TIMER_MIGRATION,
};
use cpushield_config::RuntimeSettings;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::paths;
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
    let mut out = sysctl_files(machine, settings)?;
    out.extend(preempt_file(machine, settings)?);
    for cpu in cpus.iter() {
        out.extend(cpufreq_files(machine, cpu, settings)?);
        out.extend(idle_files(machine, cpu, settings)?);
    }
    if settings.smt_siblings_offline {
        out.extend(smt_files(machine, cpus)?);
    }
    Ok(out)
}

/// The sysctls asked, each of which must exist on this kernel.
fn sysctl_files(
    machine: &Machine,
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
    Ok(out)
}

/// The preemption model asked, when it is one the kernel offers.
fn preempt_file(
    machine: &Machine,
    settings: &RuntimeSettings,
) -> Result<Option<FileChange>, SettingError> {
    let Some(model) = &settings.preempt else {
        return Ok(None);
    };
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
    Ok(Some(change(PREEMPT_FILE, &models.current, model)))
}

/// CPU `cpu`'s governor and energy-performance preference asked, each
/// where its driver has the file and offers the value.
fn cpufreq_files(
    machine: &Machine,
    cpu: usize,
    settings: &RuntimeSettings,
) -> Result<Vec<FileChange>, SettingError> {
    let files = machine.cpus.get(&cpu).cloned().unwrap_or_default();
    let base = paths::cpu_file(cpu, "cpufreq").display().to_string();
    let mut out = Vec::new();
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
    Ok(out)
}

/// CPU `cpu`'s idle states deeper than the exit latency asked, disabled.
fn idle_files(
    machine: &Machine,
    cpu: usize,
    settings: &RuntimeSettings,
) -> Result<Vec<FileChange>, SettingError> {
    let Some(limit) = settings.idle_max_latency_us else {
        return Ok(Vec::new());
    };
    let files = machine.cpus.get(&cpu).cloned().unwrap_or_default();
    if files.idle_states.is_empty() {
        return Err(refuse(
            "runtime.idle_max_latency_us",
            format!("CPU {cpu} has no cpuidle states"),
            "remove the key (the CPU halts; there is no C-state to limit)",
        ));
    }
    Ok(files
        .idle_states
        .iter()
        .filter(|s| s.latency_us > limit)
        .map(|s| {
            change(
                &s.dir.join("disable").display().to_string(),
                &s.disable,
                "1",
            )
        })
        .collect())
}

/// The shielded CPUs' SMT siblings offline, where they have some, CPU 0 is
/// not one of them and reset can bring them back (cgroup v2).
fn smt_files(machine: &Machine, cpus: &CpuSet) -> Result<Vec<FileChange>, SettingError> {
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
    if machine.cgroup_v1 {
        return Err(refuse("runtime.smt_siblings_offline", "on cgroup v1 a CPU taken offline leaves every cpuset for good, so reset could not restore them".into(), "remove the key, or turn SMT off at boot (nosmt)"));
    }
    Ok(siblings
        .intersection(&machine.online)
        .iter()
        .map(|sib| change(&paths::cpu_online(sib).display().to_string(), "1", "0"))
        .collect())
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
    use crate::fake::machine;
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

    #[test]
    fn a_sysctl_the_kernel_lacks_is_refused_naming_its_key() {
        let mut m = machine();
        m.sysctls.remove(STAT_INTERVAL);
        let s = RuntimeSettings {
            timer_migration: Some(0),
            stat_interval: Some(120),
            ..Default::default()
        };
        assert_eq!(
            sysctl_files(&m, &s).unwrap_err().key,
            "runtime.stat_interval"
        );
        m.sysctls.insert(STAT_INTERVAL, "10".into());
        let files = sysctl_files(&m, &s).unwrap();
        assert_eq!(
            files,
            [
                change(TIMER_MIGRATION, "1", "0"),
                change(STAT_INTERVAL, "10", "120")
            ]
        );
    }

    #[test]
    fn a_preemption_model_the_kernel_does_not_offer_is_refused() {
        let m = machine();
        let asked = |model: &str| RuntimeSettings {
            preempt: Some(model.into()),
            ..Default::default()
        };
        assert_eq!(
            preempt_file(&m, &asked("full")).unwrap(),
            Some(change(PREEMPT_FILE, "voluntary", "full"))
        );
        assert!(preempt_file(&m, &asked("rt"))
            .unwrap_err()
            .problem
            .contains("offers no rt"));
        assert_eq!(preempt_file(&m, &RuntimeSettings::default()).unwrap(), None);
    }

    #[test]
    fn a_cpufreq_setting_on_a_cpu_without_its_file_is_refused_naming_the_file() {
        let m = machine();
        let s = RuntimeSettings {
            energy_performance_preference: Some("performance".into()),
            ..Default::default()
        };
        let err = cpufreq_files(&m, 3, &s).unwrap_err();
        assert_eq!(err.key, "runtime.energy_performance_preference");
        assert!(
            err.problem.contains("energy_performance_preference"),
            "{}",
            err.problem
        );
    }

    #[test]
    fn only_idle_states_deeper_than_the_limit_are_disabled() {
        let m = machine();
        let limit = |us| RuntimeSettings {
            idle_max_latency_us: Some(us),
            ..Default::default()
        };
        let files = idle_files(&m, 3, &limit(1)).unwrap();
        assert_eq!(files.len(), 1, "C1 (2 us), not POLL");
        assert!(idle_files(&m, 3, &limit(2)).unwrap().is_empty());
        assert_eq!(
            idle_files(&m, 2, &limit(1)).unwrap_err().key,
            "runtime.idle_max_latency_us"
        );
    }

    #[test]
    fn smt_siblings_offline_leaves_cpu_0_online() {
        let mut m = machine();
        assert_eq!(
            smt_files(&m, &CpuSet::from_cpus([3])).unwrap(),
            [change("/sys/devices/system/cpu/cpu1/online", "1", "0")]
        );
        m.cpus.get_mut(&3).unwrap().siblings = CpuSet::parse_list("0,3").unwrap();
        assert!(smt_files(&m, &CpuSet::from_cpus([3]))
            .unwrap_err()
            .problem
            .contains("CPU 0"));
    }
}
