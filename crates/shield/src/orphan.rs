//! A shield whose saved state is gone (removed, or kept in another state
//! directory): found from what the kernel shows, reported by `show`, `reset`
//! and `check`, and undone as far as the kernel shows by
//! `reset --without-state`. That undo cannot be exact: what every task, IRQ
//! and setting had before the shield was in the state.

use crate::layout::{self, is_kubepods, is_ours, CGROUP_MARK};
use crate::masks::ShieldMasks;
use crate::snapshot::{Snapshot, DEFAULT_IRQ_AFFINITY, LTMR_SYSCTLS, WORKQUEUE_CPUMASK};
use crate::steps::{Plan, Severity, TaskAffinity, WriteKind};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{read_cpu_list, read_trimmed, Kernel};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The value cpushield gives `vm.stat_interval` (the kernel's default is 1).
const SHIELD_STAT_INTERVAL: &str = "10";

/// One of cpushield's cgroups, found without a state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrphanCgroup {
    /// Its directory.
    pub dir: PathBuf,
    /// Whether it carries cpushield's mark (cpushield made it).
    pub marked: bool,
    /// Its CPUs.
    pub cpus: CpuSet,
}

/// The kernel's own values of what the shield changes, as this boot set
/// them (its command line): what the undo gives back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelDefaults {
    /// IRQ affinity: `irqaffinity=`, else every possible CPU.
    pub irqs: CpuSet,
    /// `kernel.watchdog_cpumask`: every possible CPU but `nohz_full`.
    pub watchdog: CpuSet,
    /// The unbound workqueue cpumask: every possible CPU but `nohz_full`
    /// and the `isolcpus` domain.
    pub workqueue: CpuSet,
}

/// What the kernel shows of a shield whose state is gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrphanShield {
    /// The CPUs it shields, as far as the kernel shows.
    pub masks: ShieldMasks,
    /// cpushield's cgroups found.
    pub cgroups: Vec<OrphanCgroup>,
    /// Each sign of the shield found, one line each.
    pub evidence: Vec<String>,
    /// What the undo gives back.
    #[serde(skip)]
    pub defaults: KernelDefaults,
}

/// The kernel's defaults on this boot (see [`KernelDefaults`]).
fn kernel_defaults(kernel: &dyn Kernel, possible: &CpuSet) -> KernelDefaults {
    let cmdline = cpushield_kernel::Procfs::new(kernel)
        .cmdline()
        .unwrap_or_default();
    let sysfs = cpushield_kernel::nohz_full(kernel).ok();
    let nohz = cpushield_parse::cmdline::nohz_full_cpus(sysfs.as_deref(), &cmdline);
    let isolated_domain = match cpushield_parse::cmdline::cpu_param(&cmdline, "isolcpus") {
        Some((cpus, flags)) if flags.is_empty() || flags.iter().any(|f| f == "domain") => cpus,
        _ => CpuSet::new(),
    };
    let watchdog = possible.difference(&nohz);
    KernelDefaults {
        irqs: cpushield_parse::cmdline::cpus(&cmdline, "irqaffinity")
            .unwrap_or_else(|| possible.clone()),
        workqueue: watchdog.difference(&isolated_domain),
        watchdog,
    }
}

/// Looks for a shield without a state: cpushield's cgroups (and whether they
/// carry its mark), and IRQ, workqueue and local-timer settings that leave
/// out CPUs the kernel's defaults include. `None` when nothing shows one.
/// Read-only.
pub fn detect(kernel: &dyn Kernel) -> std::io::Result<Option<OrphanShield>> {
    let online = cpushield_kernel::online_cpus(kernel)?;
    let possible = cpushield_kernel::possible_cpus(kernel).unwrap_or_else(|_| online.clone());
    let defaults = kernel_defaults(kernel, &possible);
    let mut masks = ShieldMasks::default();
    let mut cgroups = Vec::new();
    let mut evidence = Vec::new();
    if let Some(layout) = layout::detect(kernel) {
        for dir in [layout.shield_dir(), layout.system_dir()] {
            if !kernel.exists(&dir) {
                continue;
            }
            let marked = kernel.get_xattr(&dir, CGROUP_MARK).is_ok();
            let cpus = read_cpu_list(kernel, &dir.join("cpuset.cpus")).unwrap_or_default();
            evidence.push(format!(
                "cgroup {} holds CPUs {} ({})",
                dir.display(),
                cpus,
                if marked {
                    "cpushield made it"
                } else {
                    "without cpushield's mark: someone else made it"
                }
            ));
            if dir == layout.shield_dir() {
                masks.procs = cpus.clone();
            }
            cgroups.push(OrphanCgroup { dir, marked, cpus });
        }
    }
    // A file the loaded tuned profile writes is tuned's doing, no evidence.
    let tuned = crate::tuned::read_claim(kernel);
    let tuneds = |path: &str| tuned.as_ref().is_some_and(|c| c.owns_file(Path::new(path)));
    // The CPUs a setting leaves out that its default includes.
    let left_out = |path: &str, default: &CpuSet, mask: bool| -> CpuSet {
        if tuneds(path) {
            return CpuSet::default();
        }
        let now = read_trimmed(kernel, Path::new(path)).ok().and_then(|text| {
            if mask {
                CpuSet::parse_mask(&text).ok()
            } else {
                CpuSet::parse_list(&text).ok()
            }
        });
        now.map(|now| default.intersection(&online).difference(&now))
            .unwrap_or_default()
    };
    masks.irqs = left_out(DEFAULT_IRQ_AFFINITY, &defaults.irqs, true);
    if !masks.irqs.is_empty() {
        evidence.push(format!(
            "{DEFAULT_IRQ_AFFINITY} leaves out CPU {}, which the kernel's default (irqaffinity= or every CPU) includes",
            masks.irqs
        ));
    }
    let workqueue = left_out(WORKQUEUE_CPUMASK, &defaults.workqueue, true);
    if !workqueue.is_empty() {
        evidence.push(format!(
            "{WORKQUEUE_CPUMASK} leaves out CPU {workqueue}, which the kernel's default includes"
        ));
    }
    masks.ltmr = left_out(LTMR_SYSCTLS[0], &defaults.watchdog, false);
    if !masks.ltmr.is_empty() {
        evidence.push(format!(
            "{} leaves out CPU {}, which the kernel's default (every CPU but nohz_full) includes",
            LTMR_SYSCTLS[0], masks.ltmr
        ));
    }
    if !tuneds(LTMR_SYSCTLS[2])
        && read_trimmed(kernel, Path::new(LTMR_SYSCTLS[2])).is_ok_and(|v| v == SHIELD_STAT_INTERVAL)
    {
        evidence.push(format!(
            "{} is {SHIELD_STAT_INTERVAL}, cpushield's value (the kernel's default is 1)",
            LTMR_SYSCTLS[2]
        ));
    }
    Ok((!evidence.is_empty()).then_some(OrphanShield {
        masks,
        cgroups,
        evidence,
        defaults,
    }))
}

/// Plans the undo of `orphan` as far as the kernel shows, on the machine in
/// `snap`: tasks in cpushield's cgroups back to the root cgroup with every
/// online CPU, and every task left on exactly the housekeeping CPUs given
/// every online CPU; cpushield's marked cgroups removed; every IRQ, the
/// default IRQ affinity, the workqueue cpumask and the local-timer settings
/// at the kernel's defaults. Notes say what it cannot know. Pure.
pub fn plan_undo(snap: &Snapshot, orphan: &OrphanShield) -> Plan {
    let mut plan = Plan::default();
    let layout = &snap.layout;
    let online = &snap.online;
    let housekeeping = online.difference(&orphan.masks.procs);
    let root_tasks = layout.tasks_file(layout.root());
    let mut moved = BTreeSet::new();
    let mut affinities = Vec::new();
    for task in &snap.tasks {
        if task.pinned_by_kernel || is_kubepods(&task.cgroup) {
            continue;
        }
        let in_ours = is_ours(&task.cgroup);
        if let Some(id) = layout
            .move_id(task.tid, task.tgid, task.kthread)
            .filter(|&id| in_ours && moved.insert(id))
        {
            plan.move_task(&root_tasks, id);
        }
        let narrowed = !orphan.masks.procs.is_empty() && task.affinity == housekeeping;
        if in_ours || narrowed {
            affinities.push(TaskAffinity {
                tid: task.tid,
                cpus: online.clone(),
            });
        } else if layout.teardown_resets_affinities() {
            // What it has now, which the teardown would overwrite.
            affinities.push(TaskAffinity {
                tid: task.tid,
                cpus: task.affinity.clone(),
            });
        }
    }
    for cgroup in &orphan.cgroups {
        if cgroup.marked {
            plan.steps.extend(layout.teardown(&cgroup.dir));
        } else {
            plan.note(
                Severity::Warn,
                format!(
                    "cgroup {} has no cpushield mark ({CGROUP_MARK}), so cpushield did not make it and does not remove it",
                    cgroup.dir.display()
                ),
                Some(format!("remove it with the tool that made it (rmdir {})", cgroup.dir.display())),
            );
        }
    }
    plan.set_affinities(affinities);
    let defaults = &orphan.defaults;
    let irq_mask = defaults.irqs.to_mask_padded(snap.possible);
    for irq in &snap.irqs {
        if irq.affinity.intersection(online) != defaults.irqs.intersection(online) {
            plan.write(
                crate::plan::irq_path(irq.irq),
                irq_mask.clone(),
                WriteKind::Irq {
                    irq: irq.irq,
                    name: irq.name.clone(),
                },
            );
        }
    }
    let mut settings = vec![
        (DEFAULT_IRQ_AFFINITY, irq_mask),
        (
            WORKQUEUE_CPUMASK,
            defaults.workqueue.to_mask_padded(snap.possible),
        ),
        (LTMR_SYSCTLS[0], defaults.watchdog.to_list()),
        (LTMR_SYSCTLS[1], "1".into()),
        (LTMR_SYSCTLS[2], "1".into()),
    ];
    let root_setting = layout.root_setting();
    if let (Some(value), Some(path)) = (layout.root_setting_default(), root_setting.to_str()) {
        settings.push((path, value.into()));
    }
    for (path, value) in settings {
        let path = PathBuf::from(path);
        let same = |now: &String| {
            now == &value
                || matches!(
                    (CpuSet::parse_mask(now), CpuSet::parse_mask(&value)),
                    (Ok(a), Ok(b)) if a == b
                )
        };
        if snap.files.get(&path).is_some_and(|now| !same(now)) {
            plan.write(
                path,
                value,
                WriteKind::BestEffort("a setting could not be given its kernel default".into()),
            );
        }
    }
    plan.note(
        Severity::Warn,
        "without its state, the shield cannot be undone exactly: each task's affinity and cgroup, each IRQ's mask and each setting from before it are not known. Tasks in cpushield's cgroups went back to the root cgroup with every online CPU and tasks left on exactly the housekeeping CPUs got every online CPU; other tasks keep their affinity. IRQs, the default IRQ affinity, the workqueue cpumask, kernel.watchdog_cpumask, kernel.timer_migration and vm.stat_interval got the kernel's defaults for this boot. Scheduling policies `cpushield run --pid` changed, and whether the cpuset controller was enabled for the root's children before (cgroup v2), are not known and left as they are".into(),
        Some("set by hand what differed before the shield (taskset -p, /proc/irq/N/smp_affinity, sysctl)".into()),
    );
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_defaults_follow_the_boot_command_line() {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file(
            "/proc/cmdline",
            "quiet irqaffinity=0-1 nohz_full=3 isolcpus=domain,2\n",
        );
        let d = kernel_defaults(&k, &CpuSet::parse_list("0-3").unwrap());
        assert_eq!(d.irqs.to_list(), "0-1");
        assert_eq!(d.watchdog.to_list(), "0-2");
        assert_eq!(d.workqueue.to_list(), "0-1");
        k.set_file("/proc/cmdline", "quiet\n");
        let d = kernel_defaults(&k, &CpuSet::parse_list("0-3").unwrap());
        assert_eq!(d.irqs.to_list(), "0-3");
        assert_eq!(d.workqueue.to_list(), "0-3");
    }
}
