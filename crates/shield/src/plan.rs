//! The pure planner: from a snapshot, the saved original state and the wanted
//! masks, the ordered list of changes that shield (or reset) the system.
//! Nothing here touches the kernel.

use crate::layout::{CgroupLayout, Enforcement, Place, Placing};
use crate::masks::ShieldMasks;
use crate::snapshot::{
    is_kubepods, is_ours, IrqInfo, Scope, Snapshot, TaskInfo, DEFAULT_IRQ_AFFINITY, LTMR_SYSCTLS,
    SHIELD_CGROUP, SYSTEM_CGROUP, WORKQUEUE_CPUMASK,
};
use crate::state::SavedState;
use crate::steps::{Plan, Severity, Step, TaskAffinity, WriteKind};
use cpushield_cpuset::{shielded_affinity, CpuSet};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// What a task asked for and where it was, before the shield.
struct Origin<'a> {
    requested: &'a CpuSet,
    cgroup: &'a str,
    born: bool,
}

/// Finds each task's requested affinity and original cgroup: saved for tasks
/// that existed before the first shield; for tasks born since, those of the
/// nearest ancestor that existed (a new task inherits both from its parent).
/// One per task of `snap.tasks`, in the same order.
fn origins<'a>(snap: &'a Snapshot, saved: &'a SavedState) -> Vec<Origin<'a>> {
    let ppid_of: BTreeMap<i32, i32> = snap.tasks.iter().map(|t| (t.tgid, t.ppid)).collect();
    let saved_of = |t: &TaskInfo| {
        saved
            .tasks
            .get(&t.tid)
            .filter(|s| s.starttime == t.starttime)
    };
    let mut out = Vec::with_capacity(snap.tasks.len());
    for task in &snap.tasks {
        if let Some(s) = saved_of(task) {
            out.push(Origin {
                requested: &s.affinity,
                cgroup: &s.cgroup,
                born: false,
            });
            continue;
        }
        // Walk up the process tree to a task the saved state knows.
        let mut pid = task.ppid;
        let mut ancestor = None;
        for _ in 0..64 {
            if let Some(s) = saved.tasks.get(&pid).filter(|s| s.tgid == pid) {
                ancestor = Some(s);
                break;
            }
            match ppid_of.get(&pid) {
                Some(&pp) if pp > 0 && pp != pid => pid = pp,
                _ => break,
            }
        }
        let adopted = saved
            .adopted
            .get(&task.tid)
            .filter(|a| a.starttime == task.starttime);
        let requested = match (adopted, ancestor) {
            (Some(a), _) => &a.requested,
            (None, Some(a)) if is_ours(&task.cgroup) => &a.affinity,
            (None, None) if is_ours(&task.cgroup) => &saved.online,
            _ => &task.affinity,
        };
        let cgroup = match ancestor {
            Some(a) if is_ours(&task.cgroup) => a.cgroup.as_str(),
            _ if is_ours(&task.cgroup) => "/",
            _ => task.cgroup.as_str(),
        };
        out.push(Origin {
            requested,
            cgroup,
            born: true,
        });
    }
    out
}

/// Tasks born since the first shield that the saved state has not adopted yet,
/// with the affinity they are taken to request (their ancestor's, or their own
/// when they were not cut by the shield).
pub fn born_tasks(snap: &Snapshot, saved: &SavedState) -> Vec<(i32, u64, CpuSet)> {
    snap.tasks
        .iter()
        .zip(origins(snap, saved))
        .filter(|(t, origin)| {
            origin.born && saved.adopted.get(&t.tid).map(|a| a.starttime) != Some(t.starttime)
        })
        .map(|(t, origin)| (t.tid, t.starttime, origin.requested.clone()))
        .collect()
}

/// Plans the shield for `masks` (the complete new masks, not a delta), given
/// the original state saved before the first shield: the cgroups, the tasks,
/// the teardown when no process stays shielded, the IRQs, the unbound
/// workqueues, the local timer, then what the shield cannot do (SMT).
pub fn plan_shield(snap: &Snapshot, saved: &SavedState, masks: &ShieldMasks) -> Plan {
    let mut plan = Plan::default();
    let online = &snap.online;
    let procs = masks.procs.intersection(online);
    plan_cgroups(&mut plan, snap, saved, &procs);
    let affinities = plan_tasks(&mut plan, snap, saved, &procs);
    // Tear down cgroups no longer needed (procs mask now empty), then set
    // the affinities, which cgroup changes would otherwise overwrite.
    if procs.is_empty() {
        teardown_cgroups(&mut plan, saved, &snap.layout);
    }
    plan.set_affinities(affinities);
    plan_irqs(&mut plan, snap, saved, &masks.irqs.intersection(online));
    // Unbound workqueues follow the process shield.
    plan_mask_file(
        &mut plan,
        snap,
        saved,
        WORKQUEUE_CPUMASK,
        &procs,
        MaskFormat::Hex,
    );
    plan_local_timer(&mut plan, snap, saved, &masks.ltmr.intersection(online));
    plan_smt_notes(&mut plan, snap, masks);
    plan
}

/// Step 1, cgroups for the process shield `procs` (online CPUs): what the
/// hierarchy's version needs (see [`crate::layout::Cpusets::enforce`]).
/// Nothing when `procs` is empty (the teardown is planned after the tasks).
fn plan_cgroups(plan: &mut Plan, snap: &Snapshot, saved: &SavedState, procs: &CpuSet) {
    if procs.is_empty() {
        return;
    }
    let layout = &snap.layout;
    let mems = crate::mems::choose(snap, saved.mems.as_ref(), procs);
    let enforced = layout.enforce(&Enforcement {
        shield_mems: mems.nodes.as_ref(),
        shield_mems_now: snap.shield_mems.as_deref(),
        procs,
        housekeeping: &snap.online.difference(procs),
        kept: saved.masks.procs.intersection(procs),
        created: &saved.created_cgroups,
        root_mems: &snap.root_mems,
        foreign: &snap.foreign_cgroups,
        whole_system: snap.scope == Scope::System,
        subtree_control: snap
            .files
            .get(&layout.root_setting())
            .map_or("", String::as_str),
    });
    plan.steps.extend(enforced.steps);
    plan.creates.extend(enforced.creates);
    plan.notes.extend(enforced.notes);
}

/// Step 2, tasks: Brosky's rule on each, enforced by the cgroup it is placed
/// in. Moves go into `plan`; the affinities are returned, to be set after
/// every cgroup change (which would otherwise overwrite them).
fn plan_tasks(
    plan: &mut Plan,
    snap: &Snapshot,
    saved: &SavedState,
    procs: &CpuSet,
) -> Vec<TaskAffinity> {
    let origins = origins(snap, saved);
    let layout = &snap.layout;
    let mut pass = TaskPass {
        snap,
        procs,
        whole_process_shielded: whole_process_shielded(snap, &origins, procs),
        shield_tasks: layout.tasks_file(&layout.shield_dir()),
        system_tasks: layout.tasks_file(&layout.system_dir()),
        cpusets_change: cpusets_change(plan, layout, procs, saved),
        affinities: Vec::new(),
        moved_ids: BTreeSet::new(),
        per_cpu_threads: BTreeMap::new(),
        pod_tasks_on_shield: 0,
        with_their_irq: Vec::new(),
    };
    for (task, origin) in snap.tasks.iter().zip(&origins) {
        pass.task(plan, task, origin);
    }
    pass.finish(plan)
}

/// Where a move takes a whole process (cgroup v2): whether all its threads
/// are shielded, per process. Empty where moves take single threads.
fn whole_process_shielded(
    snap: &Snapshot,
    origins: &[Origin<'_>],
    procs: &CpuSet,
) -> BTreeMap<i32, bool> {
    let mut whole = BTreeMap::new();
    if snap.layout.moves_processes() {
        for (t, o) in snap.tasks.iter().zip(origins) {
            let inside = !procs.is_empty()
                && shielded_affinity(o.requested, &snap.online, procs).is_subset(procs);
            let e = whole.entry(t.tgid).or_insert(true);
            *e = *e && inside;
        }
    }
    whole
}

/// Whether the plan changes a cpuset's CPUs (or its partition), or removes
/// the shield's cgroups: the kernel then resets the affinity of every task
/// in them, so every affinity is set again, after all cgroup changes.
fn cpusets_change(plan: &Plan, layout: &CgroupLayout, procs: &CpuSet, saved: &SavedState) -> bool {
    plan.steps
        .iter()
        .any(|s| matches!(s, Step::Write { path, .. } if path.starts_with(layout.root())))
        || (procs.is_empty() && !saved.created_cgroups.is_empty())
}

/// The same cgroup, as `dir_of` would join them, without building paths.
fn same_cgroup(a: &str, b: &str) -> bool {
    a.trim_start_matches('/') == b.trim_start_matches('/')
}

/// The names of a CPU's per-CPU kernel threads as a note shows them: the
/// first six distinct neighbours, and how many there are past six.
fn shown_threads(names: &[String]) -> String {
    let mut shown: Vec<&str> = names.iter().map(String::as_str).collect();
    shown.dedup();
    let more = if shown.len() > 6 {
        format!(", … {} in all", shown.len())
    } else {
        String::new()
    };
    shown.truncate(6);
    format!("{}{more}", shown.join(", "))
}

/// What the task step gathers while it walks the tasks.
struct TaskPass<'a> {
    snap: &'a Snapshot,
    procs: &'a CpuSet,
    whole_process_shielded: BTreeMap<i32, bool>,
    shield_tasks: PathBuf,
    system_tasks: PathBuf,
    cpusets_change: bool,
    /// Affinities to set, after every cgroup change.
    affinities: Vec<TaskAffinity>,
    /// IDs already written to a tasks file (a process moves once).
    moved_ids: BTreeSet<i32>,
    /// Kernel-bound threads on each shielded CPU, by name.
    per_cpu_threads: BTreeMap<usize, Vec<String>>,
    /// Tasks of Kubernetes pods that may run on shielded CPUs.
    pod_tasks_on_shield: usize,
    /// IRQ handler threads left with their IRQs, as `comm (IRQ n)`.
    with_their_irq: Vec<String>,
}

impl TaskPass<'_> {
    /// Brosky's rule on one task: its move and affinity, or why it is left.
    fn task(&mut self, plan: &mut Plan, task: &TaskInfo, origin: &Origin<'_>) {
        let (snap, procs) = (self.snap, self.procs);
        if is_kubepods(&task.cgroup) {
            // A Kubernetes pod: the kubelet's CPU manager owns its cpuset and
            // CPUs, so it is neither moved nor narrowed.
            if !procs.is_empty() && task.affinity.intersects(procs) {
                self.pod_tasks_on_shield += 1;
            }
            return;
        }
        if task.pinned_by_kernel {
            for cpu in task.affinity.intersection(procs).iter() {
                self.per_cpu_threads
                    .entry(cpu)
                    .or_default()
                    .push(task.comm.to_string());
            }
            return;
        }
        let eff = shielded_affinity(origin.requested, &snap.online, procs);
        // An IRQ handler thread that would stay on shielded CPUs only is
        // there with its IRQ: the kernel moves it when it moves the IRQ,
        // and a write of its affinity either pins it where the kernel takes
        // it from anyway or is refused (cgroup v2: its cgroup no longer has
        // the CPU).
        if !procs.is_empty() && eff.is_subset(procs) {
            if let Some(irq) = crate::irq_threads::handler_irq(task, snap) {
                self.with_their_irq
                    .push(format!("{} (IRQ {irq})", task.comm));
                return;
            }
        }
        let place = snap.layout.place(&Placing {
            origin: origin.cgroup,
            here: &task.cgroup,
            effective: &eff,
            procs,
            whole_process_shielded: self
                .whole_process_shielded
                .get(&task.tgid)
                .copied()
                .unwrap_or(false),
        });
        let Some(moved) = self.move_to(plan, task, &place) else {
            // Someone else's cpuset, which the shield does not change:
            // only the affinity follows the rule.
            if eff != task.affinity {
                self.affinities.push(TaskAffinity {
                    tid: task.tid,
                    cpus: eff,
                });
            }
            return;
        };
        if moved || self.cpusets_change || eff != task.affinity {
            self.affinities.push(TaskAffinity {
                tid: task.tid,
                cpus: eff.clone(),
            });
        }
        if !procs.is_empty() && eff.is_subset(procs) && place != Place::Shield {
            plan.note(
                Severity::Warn,
                format!(
                    "thread {} ({}) asks only for shielded CPUs {} but other threads of process {} do not; a move takes its whole process (cgroup v2), so it runs on housekeeping CPUs",
                    task.tid, task.comm, origin.requested, task.tgid
                ),
                Some(format!("place the whole process with `cpushield run --cpus {} --pid {}`", procs, task.tgid)),
            );
        }
    }

    /// Moves the task to the cgroup `place` names, unless it is there:
    /// whether it moved, or `None` where it stays in a cgroup not the
    /// shield's.
    fn move_to(&mut self, plan: &mut Plan, task: &TaskInfo, place: &Place<'_>) -> Option<bool> {
        let layout = &self.snap.layout;
        // The destination (relative, as in /proc/PID/cgroup) and, for ours,
        // its tasks file.
        let (dest, file) = match place {
            Place::Stay => return None,
            Place::Shield => (SHIELD_CGROUP, Some(&self.shield_tasks)),
            Place::System => (SYSTEM_CGROUP, Some(&self.system_tasks)),
            Place::Cgroup(c) => (*c, None),
        };
        if same_cgroup(dest, &task.cgroup) {
            return Some(false);
        }
        let Some(id) = layout.move_id(task.tid, task.tgid, task.kthread) else {
            return Some(false);
        };
        if self.moved_ids.insert(id) {
            match file {
                Some(file) => plan.move_task(file, id),
                None => plan.move_task(&layout.tasks_file(&layout.dir_of(dest)), id),
            }
        }
        Some(true)
    }

    /// The notes on what the shield leaves where it is; the affinities to set.
    fn finish(self, plan: &mut Plan) -> Vec<TaskAffinity> {
        let procs = self.procs;
        if !self.with_their_irq.is_empty() {
            plan.note(
                Severity::Info,
                format!(
                    "IRQ handler threads {} stay with their IRQs on shielded CPUs {procs}: the kernel sets a handler thread's affinity from its IRQ's, so they leave when their IRQs do (shield --irqs, at each IRQ's next interrupt)",
                    self.with_their_irq.join(", ")
                ),
                None,
            );
        }
        if self.pod_tasks_on_shield > 0 {
            plan.note(
                Severity::Warn,
                format!(
                    "{} tasks of Kubernetes pods (cgroups kubepods*) may run on shielded CPUs {procs}: cpushield leaves pods to the kubelet's CPU manager and does not move them",
                    self.pod_tasks_on_shield
                ),
                Some("keep the shielded CPUs out of the pods' CPUs: list them in the kubelet's reservedSystemCPUs with the CPU manager option strict-cpu-reservation (docs/fleet.md)".into()),
            );
        }
        for (cpu, names) in &self.per_cpu_threads {
            plan.note(
                Severity::Info,
                format!(
                    "CPU {cpu}: {} per-CPU kernel threads stay bound there by the kernel ({}); they run only when work is queued for this CPU",
                    names.len(),
                    shown_threads(names)
                ),
                Some(format!("boot with nohz_full={cpu} rcu_nocbs={cpu} to offload RCU callbacks and most timer work")),
            );
        }
        self.affinities
    }
}

/// Writes an IRQ's saved original text back when it differs from its current one.
fn restore_irq(plan: &mut Plan, saved: &SavedState, irq: &IrqInfo) {
    if let Some(text) = saved.irqs.get(&irq.irq) {
        if *text != irq.mask_text {
            plan.write(
                irq_path(irq.irq),
                text.clone(),
                WriteKind::Irq {
                    irq: irq.irq,
                    name: irq.name.clone(),
                },
            );
        }
    }
}

/// Step 4, IRQs for the interrupt shield `irqs` (online CPUs): Brosky's rule
/// on each IRQ's original mask and on the default for new IRQs; the original
/// text back when nothing is shielded.
fn plan_irqs(plan: &mut Plan, snap: &Snapshot, saved: &SavedState, irqs: &CpuSet) {
    let online = &snap.online;
    for irq in &snap.irqs {
        let original = saved
            .irqs
            .get(&irq.irq)
            .and_then(|t| CpuSet::parse_mask(t).ok())
            .unwrap_or_else(|| irq.affinity.clone());
        let want = shielded_affinity(&original, online, irqs);
        if irqs.is_empty() {
            restore_irq(plan, saved, irq);
        } else if want.intersection(online) != irq.affinity.intersection(online) {
            plan.write(
                irq_path(irq.irq),
                want.to_mask_padded(snap.possible),
                WriteKind::Irq {
                    irq: irq.irq,
                    name: irq.name.clone(),
                },
            );
        }
    }
    plan_mask_file(
        plan,
        snap,
        saved,
        DEFAULT_IRQ_AFFINITY,
        irqs,
        MaskFormat::Hex,
    );
}

/// Step 6, the local-timer shield `ltmr` (online CPUs): what runtime allows
/// (the watchdog mask, timer migration, a longer vmstat interval); the
/// originals back when nothing is shielded.
fn plan_local_timer(plan: &mut Plan, snap: &Snapshot, saved: &SavedState, ltmr: &CpuSet) {
    plan_mask_file(plan, snap, saved, LTMR_SYSCTLS[0], ltmr, MaskFormat::List);
    for (path, shielded_value) in [
        (LTMR_SYSCTLS[1], "1".to_string()),
        (LTMR_SYSCTLS[2], stat_interval(snap, saved)),
    ] {
        let path = PathBuf::from(path);
        let (Some(original), Some(current)) = (saved.files.get(&path), snap.files.get(&path))
        else {
            continue;
        };
        // A run-time setting (tune, apply's [runtime]) owns it now; reset
        // writes its value back before this one.
        if saved.runtime.original(&path).is_some() && !ltmr.is_empty() {
            continue;
        }
        let want = if ltmr.is_empty() {
            original.clone()
        } else {
            shielded_value
        };
        if want != *current {
            plan.write(
                path,
                want,
                WriteKind::BestEffort("a local-timer setting could not be changed".into()),
            );
        }
    }
}

/// Step 7, what the shield cannot do at runtime: a shielded CPU sharing its
/// core with an unshielded sibling.
fn plan_smt_notes(plan: &mut Plan, snap: &Snapshot, masks: &ShieldMasks) {
    let online = &snap.online;
    for cpu in masks.any().intersection(online).iter() {
        if let Some(sibs) = snap.siblings.get(&cpu) {
            let unshielded = sibs.difference(&masks.procs);
            if !unshielded.is_empty() && masks.procs.contains(cpu) {
                plan.note(
                    Severity::Warn,
                    format!("CPU {cpu} shares a core with unshielded CPU(s) {unshielded}: hyperthread siblings disturb each other (Brosky & Rotolo measured it)"),
                    Some("add --whole-cores to shield the siblings too".into()),
                );
            }
        }
    }
}

fn stat_interval(snap: &Snapshot, saved: &SavedState) -> String {
    let path = PathBuf::from(LTMR_SYSCTLS[2]);
    let original: u64 = saved
        .files
        .get(&path)
        .or(snap.files.get(&path))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1);
    original.max(10).to_string()
}

#[derive(Clone, Copy)]
enum MaskFormat {
    Hex,
    List,
}

/// Applies Brosky's rule to a CPU-mask file: shielded CPUs removed from the
/// original mask, or the original text back when nothing is shielded.
fn plan_mask_file(
    plan: &mut Plan,
    snap: &Snapshot,
    saved: &SavedState,
    path: &str,
    shielded: &CpuSet,
    format: MaskFormat,
) {
    let path = PathBuf::from(path);
    let (Some(original), Some(current)) = (saved.files.get(&path), snap.files.get(&path)) else {
        return;
    };
    let parse = |t: &str| match format {
        MaskFormat::Hex => CpuSet::parse_mask(t),
        MaskFormat::List => CpuSet::parse_list(t),
    };
    let (Ok(orig), Ok(cur)) = (parse(original), parse(current)) else {
        return;
    };
    if shielded.is_empty() {
        if original != current {
            plan.write(path, original.clone(), WriteKind::Required);
        }
        return;
    }
    let want = shielded_affinity(&orig, &snap.online, shielded);
    if want.intersection(&snap.online) != cur.intersection(&snap.online) {
        let value = match format {
            MaskFormat::Hex => want.to_mask_padded(snap.possible),
            MaskFormat::List => want.to_list(),
        };
        plan.write(path, value, WriteKind::Required);
    }
}

/// The mask file of `irq`, which the shield writes and journals by path.
pub(crate) fn irq_path(irq: u32) -> PathBuf {
    cpushield_kernel::paths::irq_affinity(irq)
}

/// Steps that empty and remove cpushield's cgroups (tasks go to the root).
fn teardown_cgroups(plan: &mut Plan, saved: &SavedState, layout: &CgroupLayout) {
    for dir in saved.created_cgroups.iter().rev() {
        plan.steps.extend(layout.teardown(dir));
    }
}

/// Plans the exact undo: every task back in its original cgroup with its
/// original affinity (tasks born meanwhile where a new task would have gone),
/// cgroups removed, every IRQ and file back to its original text.
pub fn plan_reset(snap: &Snapshot, saved: &SavedState) -> Plan {
    let mut plan = Plan::default();
    let layout = &saved.layout;
    let origins = origins(snap, saved);
    let mut moved_ids = BTreeSet::new();
    let mut affinities = Vec::new();
    let same_namespace =
        saved.pid_namespace.is_empty() || saved.pid_namespace == snap.pid_namespace;
    if !same_namespace {
        plan.note(
            Severity::Warn,
            format!(
                "the shield was set up in PID namespace {} and this is {}: task IDs differ, so tasks are not touched; cgroups, IRQs and settings are restored",
                saved.pid_namespace, snap.pid_namespace
            ),
            None,
        );
    }
    // The tasks file of each original cgroup, built once.
    let mut files: BTreeMap<&str, PathBuf> = BTreeMap::new();
    for (task, origin) in snap.tasks.iter().zip(&origins).filter(|_| same_namespace) {
        if task.pinned_by_kernel {
            continue;
        }
        let in_ours = is_ours(&task.cgroup);
        if !in_ours && is_kubepods(&task.cgroup) {
            // The shield never changed a pod's task (see plan_tasks).
            continue;
        }
        let move_id = layout.move_id(task.tid, task.tgid, task.kthread);
        if let Some(id) = move_id.filter(|&id| in_ours && moved_ids.insert(id)) {
            let to = files
                .entry(origin.cgroup)
                .or_insert_with(|| layout.tasks_file(&layout.dir_of(origin.cgroup)));
            plan.move_task(to, id);
        }
        // A task born meanwhile outside our cgroups keeps what it chose.
        // Where the teardown below resets affinities, every task is set again.
        let restore = !origin.born || in_ours;
        let reset_by_teardown = layout.teardown_resets_affinities();
        if restore && (in_ours || reset_by_teardown || *origin.requested != task.affinity) {
            affinities.push(TaskAffinity {
                tid: task.tid,
                cpus: origin.requested.clone(),
            });
        }
    }
    teardown_cgroups(&mut plan, saved, layout);
    plan.set_affinities(affinities);
    // Scheduling policies `run --pid` changed, for the same tasks only.
    for task in snap.tasks.iter().filter(|_| same_namespace) {
        if let Some(s) = saved
            .sched
            .get(&task.tid)
            .filter(|s| s.starttime == task.starttime)
        {
            plan.steps.push(Step::Sched {
                tid: task.tid,
                comm: task.comm.to_string(),
                policy: s.policy,
                priority: s.priority,
                nice: s.nice,
                flags: s.flags,
                deadline: s.deadline,
            });
        }
    }
    for irq in &snap.irqs {
        restore_irq(&mut plan, saved, irq);
    }
    for (path, original) in &saved.files {
        let Some(current) = snap.files.get(path) else {
            continue;
        };
        if original == current {
            continue;
        }
        if path.ends_with("cgroup.subtree_control") {
            let had = |t: &str| t.split_whitespace().any(|c| c == "cpuset");
            if had(current) && !had(original) {
                plan.write(path.clone(), "-cpuset", WriteKind::Required);
            }
            continue;
        }
        plan.write(path.clone(), original.clone(), WriteKind::Required);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::Note;
    use std::path::Path;

    const ROOT: &str = "/sys/fs/cgroup/cpuset";

    fn cpus(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn task(tid: i32, affinity: &str) -> TaskInfo {
        TaskInfo {
            tid,
            tgid: tid,
            ppid: 1,
            comm: format!("task{tid}"),
            starttime: 1000 + tid as u64,
            kthread: false,
            pinned_by_kernel: false,
            affinity: cpus(affinity),
            cgroup: "/".into(),
        }
    }

    /// A 4-CPU v1 machine seen by the whole system, IRQ 10 on every CPU.
    fn snapshot(tasks: Vec<TaskInfo>) -> Snapshot {
        Snapshot {
            online: cpus("0-3"),
            possible: 4,
            layout: CgroupLayout::v1(ROOT),
            scope: Scope::System,
            tasks,
            irqs: vec![IrqInfo {
                irq: 10,
                mask_text: "f".into(),
                affinity: cpus("0-3"),
                name: "eth0".into(),
            }],
            files: BTreeMap::from([
                (PathBuf::from(DEFAULT_IRQ_AFFINITY), "f".to_string()),
                (PathBuf::from(LTMR_SYSCTLS[0]), "0-3".to_string()),
                (PathBuf::from(LTMR_SYSCTLS[1]), "0".to_string()),
                (PathBuf::from(LTMR_SYSCTLS[2]), "1".to_string()),
            ]),
            root_cpus: cpus("0-3"),
            root_mems: "0".into(),
            foreign_cgroups: Vec::new(),
            siblings: BTreeMap::new(),
            pid_namespace: "pid:[1]".into(),
            nodes: Vec::new(),
            shield_mems: None,
        }
    }

    fn original(snap: &Snapshot) -> SavedState {
        SavedState::from_snapshot(snap, ShieldMasks::default())
    }

    fn writes(plan: &Plan) -> Vec<(String, String)> {
        plan.steps
            .iter()
            .filter_map(|s| match s {
                Step::Write { path, value, .. } => {
                    Some((path.display().to_string(), value.clone()))
                }
                _ => None,
            })
            .collect()
    }

    fn w(path: &str, value: &str) -> (String, String) {
        (path.to_string(), value.to_string())
    }

    #[test]
    fn the_first_v1_shield_creates_both_cpusets_and_shrinks_before_it_grows() {
        let snap = snapshot(vec![]);
        let mut plan = Plan::default();
        plan_cgroups(&mut plan, &snap, &original(&snap), &cpus("3"));
        let system = format!("{ROOT}/cpushield-system");
        let shield = format!("{ROOT}/cpushield-shield");
        assert_eq!(
            plan.creates,
            vec![PathBuf::from(&system), PathBuf::from(&shield)]
        );
        assert_eq!(plan.steps[0], Step::Mkdir(system.clone().into()));
        assert_eq!(
            writes(&plan),
            vec![
                w(&format!("{system}/cpuset.mems"), "0"),
                w(&format!("{shield}/cpuset.mems"), "0"),
                w(&format!("{shield}/cpuset.memory_migrate"), "1"),
                w(&format!("{system}/cpuset.cpus"), "0-2"),
                w(&format!("{shield}/cpuset.cpus"), "3"),
                w(&format!("{shield}/cpuset.cpu_exclusive"), "1"),
                w(&format!("{shield}/cpuset.sched_load_balance"), "0"),
                w(&format!("{ROOT}/cpuset.sched_load_balance"), "0"),
            ]
        );
    }

    #[test]
    fn no_process_shield_plans_no_cgroup_change() {
        let snap = snapshot(vec![]);
        let mut plan = Plan::default();
        plan_cgroups(&mut plan, &snap, &original(&snap), &CpuSet::new());
        assert!(plan.steps.is_empty() && plan.creates.is_empty());
    }

    #[test]
    fn a_foreign_cpuset_on_shielded_cpus_leaves_the_shield_not_exclusive_with_a_warning() {
        let mut snap = snapshot(vec![]);
        snap.foreign_cgroups = vec![("docker".into(), cpus("2-3"))];
        let mut plan = Plan::default();
        plan_cgroups(&mut plan, &snap, &original(&snap), &cpus("3"));
        assert!(!writes(&plan)
            .iter()
            .any(|(p, v)| p.ends_with("cpuset.cpu_exclusive") && v == "1"));
        assert!(plan
            .notes
            .iter()
            .any(|n| n.severity == Severity::Warn && n.text.contains("docker")));
    }

    #[test]
    fn tasks_go_where_broskys_rule_puts_them_and_kernel_bound_threads_stay() {
        let mut kthread = task(7, "3");
        kthread.comm = "ksoftirqd/3".into();
        kthread.kthread = true;
        kthread.pinned_by_kernel = true;
        let snap = snapshot(vec![task(100, "0-3"), task(101, "3"), kthread]);
        let mut plan = Plan::default();
        let affinities = plan_tasks(&mut plan, &snap, &original(&snap), &cpus("3"));
        let moves: Vec<(i32, String)> = plan
            .steps
            .iter()
            .flat_map(|s| match s {
                Step::Moves { to, ids } => ids
                    .iter()
                    .map(|id| (*id, to.display().to_string()))
                    .collect(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(
            moves,
            vec![
                (100, format!("{ROOT}/cpushield-system/tasks")),
                (101, format!("{ROOT}/cpushield-shield/tasks")),
            ]
        );
        let set: Vec<(i32, CpuSet)> = affinities.iter().map(|a| (a.tid, a.cpus.clone())).collect();
        assert_eq!(set, vec![(100, cpus("0-2")), (101, cpus("3"))]);
        assert!(plan.notes.iter().any(|n| n.text.contains("ksoftirqd/3")));
    }

    /// The task IDs a plan's steps move or set.
    fn touched(steps: &[Step]) -> Vec<i32> {
        steps
            .iter()
            .flat_map(|s| match s {
                Step::Moves { ids, .. } => ids.clone(),
                Step::Affinities(tasks) => tasks.iter().map(|a| a.tid).collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    fn pod_task(tid: i32, affinity: &str, cgroup: &str) -> TaskInfo {
        TaskInfo {
            cgroup: cgroup.into(),
            ..task(tid, affinity)
        }
    }

    #[test]
    fn tasks_of_kubernetes_pods_are_neither_moved_nor_narrowed_in_v1_or_v2() {
        let tasks = vec![
            task(100, "0-3"),
            // A burstable pod in the shared pool, on every CPU (cgroupfs driver).
            pod_task(200, "0-3", "/kubepods/burstable/pod1/c1"),
            // A guaranteed pod pinned by the static CPU manager (systemd driver).
            pod_task(
                201,
                "3",
                "/kubepods.slice/kubepods-pod2.slice/cri-containerd-c2.scope",
            ),
        ];
        let v1 = snapshot(tasks.clone());
        let mut v2 = snapshot(tasks);
        v2.layout = CgroupLayout::v2("/sys/fs/cgroup");
        for snap in [v1, v2] {
            let mut plan = Plan::default();
            plan_cgroups(&mut plan, &snap, &original(&snap), &cpus("3"));
            let affinities = plan_tasks(&mut plan, &snap, &original(&snap), &cpus("3"));
            let mut ids = touched(&plan.steps);
            ids.extend(affinities.iter().map(|a| a.tid));
            assert!(ids.contains(&100), "the host task is shielded: {ids:?}");
            assert!(
                !ids.contains(&200) && !ids.contains(&201),
                "a pod task was touched: {ids:?}"
            );
            assert!(
                !writes(&plan).iter().any(|(p, _)| p.contains("kubepods")),
                "a kubepods cgroup file was written: {:?}",
                writes(&plan)
            );
            assert!(plan.notes.iter().any(|n| n.severity == Severity::Warn
                && n.text.starts_with("2 tasks of Kubernetes pods")));
        }
    }

    #[test]
    fn tasks_of_a_foreign_cpuset_get_the_affinity_rule_without_a_move_and_pods_are_left_alone() {
        let tasks = vec![
            task(100, "0-3"),
            // A docker container, its cpuset on every CPU.
            pod_task(300, "0-3", "/docker/abc"),
            pod_task(301, "2-3", "/docker/abc"),
            pod_task(200, "0-3", "/kubepods/burstable/pod1/c1"),
        ];
        let mut v1 = snapshot(tasks.clone());
        v1.foreign_cgroups = vec![
            ("/docker".into(), cpus("0-3")),
            ("/kubepods".into(), cpus("0-3")),
        ];
        let mut v2 = v1.clone();
        v2.layout = CgroupLayout::v2("/sys/fs/cgroup");
        for snap in [v1, v2] {
            let plan = plan_shield(&snap, &original(&snap), &ShieldMasks::all(&cpus("3")));
            let moved: Vec<i32> = plan
                .steps
                .iter()
                .flat_map(|s| match s {
                    Step::Moves { ids, .. } => ids.clone(),
                    _ => Vec::new(),
                })
                .collect();
            let set: Vec<(i32, CpuSet)> = plan
                .steps
                .iter()
                .flat_map(|s| match s {
                    Step::Affinities(tasks) => {
                        tasks.iter().map(|a| (a.tid, a.cpus.clone())).collect()
                    }
                    _ => Vec::new(),
                })
                .collect();
            assert!(
                !moved.iter().any(|id| [300, 301, 200].contains(id)),
                "{}: moved {moved:?}",
                snap.layout.mechanism()
            );
            assert!(
                set.contains(&(300, cpus("0-2"))) && set.contains(&(301, cpus("2"))),
                "{set:?}"
            );
            assert!(
                !set.iter().any(|(tid, _)| *tid == 200),
                "a pod task narrowed: {set:?}"
            );
        }
    }

    #[test]
    fn a_v2_shield_warns_that_its_partition_takes_cpus_from_the_pods_cgroup() {
        let mut snap = snapshot(vec![]);
        snap.layout = CgroupLayout::v2("/sys/fs/cgroup");
        snap.foreign_cgroups = vec![
            ("/kubepods.slice".into(), CpuSet::new()),
            ("/system.slice".into(), CpuSet::new()),
        ];
        let mut plan = Plan::default();
        plan_cgroups(&mut plan, &snap, &original(&snap), &cpus("3"));
        let warned: Vec<&Note> = plan
            .notes
            .iter()
            .filter(|n| n.severity == Severity::Warn)
            .collect();
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(
            warned[0].text.contains("/kubepods.slice"),
            "{}",
            warned[0].text
        );
        assert!(
            !warned[0].text.contains("system.slice"),
            "{}",
            warned[0].text
        );
        // Pods kept off the shielded CPUs: no warning.
        snap.foreign_cgroups = vec![("/kubepods.slice".into(), cpus("0-2"))];
        let mut plan = Plan::default();
        plan_cgroups(&mut plan, &snap, &original(&snap), &cpus("3"));
        assert!(plan.notes.iter().all(|n| n.severity != Severity::Warn));
    }

    #[test]
    fn reset_leaves_tasks_of_kubernetes_pods_alone() {
        let before = snapshot(vec![pod_task(200, "0-3", "/kubepods/besteffort/pod3/c3")]);
        let saved = original(&before);
        let mut now = before.clone();
        // The kubelet moved the container's CPUs meanwhile.
        now.tasks[0].affinity = cpus("0-1");
        assert!(touched(&plan_reset(&now, &saved).steps).is_empty());
    }

    #[test]
    fn irqs_and_the_default_leave_the_shielded_cpus() {
        let snap = snapshot(vec![]);
        let mut plan = Plan::default();
        plan_irqs(&mut plan, &snap, &original(&snap), &cpus("3"));
        assert_eq!(
            writes(&plan),
            vec![
                w("/proc/irq/10/smp_affinity", "7"),
                w(DEFAULT_IRQ_AFFINITY, "7")
            ]
        );
    }

    #[test]
    fn unshielding_irqs_writes_back_the_exact_saved_text_as_reset_does() {
        let mut snap = snapshot(vec![]);
        let mut saved = original(&snap);
        saved.irqs.insert(10, "0000000f".into());
        snap.irqs[0].mask_text = "7".into();
        snap.irqs[0].affinity = cpus("0-2");
        let mut plan = Plan::default();
        plan_irqs(&mut plan, &snap, &saved, &CpuSet::new());
        let expected = w("/proc/irq/10/smp_affinity", "0000000f");
        assert_eq!(writes(&plan), vec![expected.clone()]);
        assert!(writes(&plan_reset(&snap, &saved)).contains(&expected));
    }

    #[test]
    fn the_local_timer_shield_sets_and_gives_back_what_runtime_allows() {
        let snap = snapshot(vec![]);
        let saved = original(&snap);
        let mut plan = Plan::default();
        plan_local_timer(&mut plan, &snap, &saved, &cpus("3"));
        assert_eq!(
            writes(&plan),
            vec![
                w(LTMR_SYSCTLS[0], "0-2"),
                w(LTMR_SYSCTLS[1], "1"),
                w(LTMR_SYSCTLS[2], "10"),
            ]
        );
        let mut shielded = snap.clone();
        for (path, value) in writes(&plan) {
            shielded.files.insert(path.into(), value);
        }
        let mut back = Plan::default();
        plan_local_timer(&mut back, &shielded, &saved, &CpuSet::new());
        assert_eq!(
            writes(&back),
            vec![
                w(LTMR_SYSCTLS[0], "0-3"),
                w(LTMR_SYSCTLS[1], "0"),
                w(LTMR_SYSCTLS[2], "1"),
            ]
        );
    }

    #[test]
    fn a_later_shield_leaves_alone_a_local_timer_setting_tune_or_apply_owns() {
        let snap = snapshot(vec![]);
        let mut saved = original(&snap);
        let mut tuned = snap.clone();
        tuned.files.insert(LTMR_SYSCTLS[1].into(), "0".into());
        saved
            .runtime
            .record(std::path::Path::new(LTMR_SYSCTLS[1]), "1");
        let mut plan = Plan::default();
        plan_local_timer(&mut plan, &tuned, &saved, &cpus("3"));
        assert!(
            !writes(&plan).iter().any(|(p, _)| p == LTMR_SYSCTLS[1]),
            "{:?}",
            writes(&plan)
        );
    }

    #[test]
    fn a_shielded_cpu_sharing_a_core_with_an_unshielded_one_is_warned_about() {
        let mut snap = snapshot(vec![]);
        snap.siblings = BTreeMap::from([(2, cpus("2-3")), (3, cpus("2-3"))]);
        let mut plan = Plan::default();
        plan_smt_notes(&mut plan, &snap, &ShieldMasks::all(&cpus("3")));
        assert_eq!(plan.notes.len(), 1);
        assert!(plan.notes[0].text.contains("CPU 3 shares a core"));
        let mut whole = Plan::default();
        plan_smt_notes(&mut whole, &snap, &ShieldMasks::all(&cpus("2-3")));
        assert!(whole.notes.is_empty());
    }

    #[test]
    fn reset_moves_tasks_back_removes_the_cgroups_and_restores_their_affinity() {
        let before = snapshot(vec![task(100, "0-3")]);
        let mut saved = original(&before);
        saved.created_cgroups = vec![
            PathBuf::from(ROOT).join(SYSTEM_CGROUP),
            PathBuf::from(ROOT).join(SHIELD_CGROUP),
        ];
        let mut now = before.clone();
        now.tasks[0].affinity = cpus("0-2");
        now.tasks[0].cgroup = format!("/{SYSTEM_CGROUP}");
        let plan = plan_reset(&now, &saved);
        assert_eq!(
            plan.steps[0],
            Step::Moves {
                to: format!("{ROOT}/tasks").into(),
                ids: vec![100],
            }
        );
        assert!(plan
            .steps
            .contains(&Step::Rmdir(PathBuf::from(ROOT).join(SHIELD_CGROUP))));
        assert_eq!(
            plan.steps.last(),
            Some(&Step::Affinities(vec![TaskAffinity {
                tid: 100,
                cpus: cpus("0-3")
            }]))
        );
    }

    #[test]
    fn reset_moves_in_task_order_one_step_per_run_to_the_same_cgroup() {
        let mut tasks: Vec<TaskInfo> = (100..106).map(|t| task(t, "0-3")).collect();
        // 103 started in a cgroup of its own: its move splits the run.
        tasks[3].cgroup = "/app".into();
        let before = snapshot(tasks);
        let mut saved = original(&before);
        saved.created_cgroups = vec![PathBuf::from(ROOT).join(SYSTEM_CGROUP)];
        let mut now = before.clone();
        for t in &mut now.tasks {
            t.cgroup = format!("/{SYSTEM_CGROUP}");
        }
        let plan = plan_reset(&now, &saved);
        let moves: Vec<(String, Vec<i32>)> = plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Moves { to, ids } => Some((to.display().to_string(), ids.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            moves,
            vec![
                (format!("{ROOT}/tasks"), vec![100, 101, 102]),
                (format!("{ROOT}/app/tasks"), vec![103]),
                (format!("{ROOT}/tasks"), vec![104, 105]),
            ]
        );
        let affinities: Vec<&Step> = plan
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Affinities(_)))
            .collect();
        assert_eq!(affinities.len(), 1, "one step sets every affinity");
    }

    /// A 4-CPU v2 machine (cgroup2 at /sys/fs/cgroup, cpuset enabled).
    fn snapshot_v2(tasks: Vec<TaskInfo>) -> Snapshot {
        let mut snap = snapshot(tasks);
        snap.layout = CgroupLayout::v2("/sys/fs/cgroup");
        snap.files.insert(
            PathBuf::from("/sys/fs/cgroup/cgroup.subtree_control"),
            "cpuset".into(),
        );
        snap
    }

    #[test]
    fn the_first_v2_shield_is_made_threaded_right_after_mkdir_then_an_isolated_partition() {
        let snap = snapshot_v2(vec![]);
        let mut plan = Plan::default();
        plan_cgroups(&mut plan, &snap, &original(&snap), &cpus("3"));
        let shield = "/sys/fs/cgroup/cpushield-shield";
        assert_eq!(plan.steps[0], Step::Mkdir(shield.into()));
        assert_eq!(
            writes(&plan),
            vec![
                w(&format!("{shield}/cgroup.type"), "threaded"),
                w(&format!("{shield}/cpuset.cpus"), "3"),
                w(&format!("{shield}/cpuset.cpus.partition"), "isolated"),
            ]
        );
        assert!(matches!(
            &plan.steps[1],
            Step::Write {
                kind: WriteKind::BestEffort(_),
                ..
            }
        ));
        // apply knows the partition write by its kind, not by its file name.
        assert!(plan.steps.iter().any(|step| matches!(
            step,
            Step::Write { path, kind: WriteKind::IsolatedPartition, .. }
                if path.ends_with("cpuset.cpus.partition")
        )));
    }

    /// `snap` on two memory nodes: CPUs 0-1 on node 0, 2-3 on node 1.
    fn on_two_nodes(mut snap: Snapshot) -> Snapshot {
        snap.nodes = ["0-1", "2-3"]
            .iter()
            .enumerate()
            .map(|(id, list)| cpushield_kernel::numa::NumaNode {
                id,
                cpus: cpus(list),
                memory: true,
            })
            .collect();
        snap.root_mems = "0-1".into();
        snap
    }

    fn mems_writes(plan: &Plan) -> Vec<(String, String)> {
        writes(plan)
            .into_iter()
            .filter(|(p, _)| p.ends_with("cpuset.mems"))
            .collect()
    }

    #[test]
    fn a_v1_shield_on_two_nodes_gets_its_cpus_node_and_the_rest_keeps_both() {
        let snap = on_two_nodes(snapshot(vec![]));
        let mut plan = Plan::default();
        plan_cgroups(&mut plan, &snap, &original(&snap), &cpus("2-3"));
        assert_eq!(
            mems_writes(&plan),
            vec![
                w(&format!("{ROOT}/cpushield-system/cpuset.mems"), "0-1"),
                w(&format!("{ROOT}/cpushield-shield/cpuset.mems"), "1"),
            ]
        );
        let mut across = Plan::default();
        plan_cgroups(&mut across, &snap, &original(&snap), &cpus("1-2"));
        assert_eq!(
            mems_writes(&across)[1],
            w(&format!("{ROOT}/cpushield-shield/cpuset.mems"), "0-1"),
            "a shield across both nodes keeps both"
        );
    }

    #[test]
    fn a_v1_shield_that_grows_onto_another_node_widens_its_nodes_and_asked_mems_win() {
        let mut snap = on_two_nodes(snapshot(vec![]));
        let mut saved = original(&snap);
        saved.created_cgroups = vec![
            PathBuf::from(format!("{ROOT}/cpushield-system")),
            PathBuf::from(format!("{ROOT}/cpushield-shield")),
        ];
        saved.masks = ShieldMasks::all(&cpus("3"));
        snap.shield_mems = Some("1".into());
        let mut same = Plan::default();
        plan_cgroups(&mut same, &snap, &saved, &cpus("2-3"));
        assert!(
            mems_writes(&same).is_empty(),
            "unchanged nodes are not written"
        );
        let mut grown = Plan::default();
        plan_cgroups(&mut grown, &snap, &saved, &cpus("1,3"));
        assert_eq!(
            mems_writes(&grown),
            vec![w(&format!("{ROOT}/cpushield-shield/cpuset.mems"), "0-1")]
        );
        saved.mems = Some(cpus("0"));
        let mut asked = Plan::default();
        plan_cgroups(&mut asked, &snap, &saved, &cpus("3"));
        assert_eq!(
            mems_writes(&asked),
            vec![w(&format!("{ROOT}/cpushield-shield/cpuset.mems"), "0")]
        );
    }

    #[test]
    fn a_v2_partition_gets_its_cpus_node_and_goes_back_to_its_parents_when_it_spans_both() {
        let snap = on_two_nodes(snapshot_v2(vec![]));
        let shield = "/sys/fs/cgroup/cpushield-shield";
        let mut plan = Plan::default();
        plan_cgroups(&mut plan, &snap, &original(&snap), &cpus("2-3"));
        assert_eq!(
            mems_writes(&plan),
            vec![w(&format!("{shield}/cpuset.mems"), "1")]
        );
        let mut saved = original(&snap);
        saved.created_cgroups = vec![PathBuf::from(shield)];
        let mut wide = snap.clone();
        wide.shield_mems = Some("1".into());
        let mut across = Plan::default();
        plan_cgroups(&mut across, &wide, &saved, &cpus("1-3"));
        assert_eq!(
            mems_writes(&across),
            vec![w(&format!("{shield}/cpuset.mems"), "")],
            "empty: the parent's nodes"
        );
    }

    #[test]
    fn a_one_node_machine_writes_no_memory_node_beyond_what_it_did_before() {
        let mut snap = snapshot_v2(vec![]);
        snap.nodes = vec![cpushield_kernel::numa::NumaNode {
            id: 0,
            cpus: cpus("0-3"),
            memory: true,
        }];
        let mut plan = Plan::default();
        plan_cgroups(&mut plan, &snap, &original(&snap), &cpus("3"));
        assert!(mems_writes(&plan).is_empty());
    }

    #[test]
    fn a_v2_thread_placed_alone_in_the_shield_stays_there_at_the_next_shield() {
        // Process 100: thread 100 on the housekeeping CPUs in the root cgroup,
        // thread 101 placed alone in the threaded shield (cgroup.threads) and
        // adopted with CPU 3 as its request.
        let mut main = task(100, "0-3");
        main.starttime = 5000;
        let mut placed = task(101, "3");
        placed.tgid = 100;
        placed.starttime = 5001;
        placed.cgroup = format!("/{SHIELD_CGROUP}");
        let before = snapshot_v2(vec![task(1, "0-3")]);
        let mut saved = original(&before);
        saved.created_cgroups = vec![PathBuf::from("/sys/fs/cgroup").join(SHIELD_CGROUP)];
        saved.adopted.insert(
            101,
            crate::state::AdoptedTask {
                starttime: 5001,
                requested: cpus("3"),
            },
        );
        let now = snapshot_v2(vec![task(1, "0-3"), main, placed]);
        let mut plan = Plan::default();
        let affinities = plan_tasks(&mut plan, &now, &saved, &cpus("2-3"));
        assert!(
            !plan.steps.iter().any(|s| matches!(s, Step::Moves { .. })),
            "nothing moves: {:?}",
            plan.steps
        );
        assert!(
            !affinities
                .iter()
                .any(|a| a.tid == 101 && a.cpus != cpus("3")),
            "thread 101 keeps CPU 3: {affinities:?}"
        );
        assert!(!plan.notes.iter().any(|n| n.text.contains("thread 101")));
        // Reset takes the process (and so the thread) back to the root cgroup
        // and leaves the thread the CPU it asked for.
        let reset = plan_reset(&now, &saved);
        assert!(reset.steps.iter().any(|s| matches!(
            s,
            Step::Moves { to, ids } if to.as_path() == Path::new("/sys/fs/cgroup/cgroup.procs") && ids.contains(&100)
        )));
        assert!(reset.steps.iter().any(|s| matches!(
            s,
            Step::Affinities(tasks) if tasks.contains(&TaskAffinity { tid: 101, cpus: cpus("3") })
        )));
    }

    #[test]
    fn cgroup_names_compare_without_their_leading_slash() {
        assert!(same_cgroup("/cpushield-shield", "cpushield-shield"));
        assert!(same_cgroup("/", ""));
        assert!(!same_cgroup("/a", "/b"));
    }

    #[test]
    fn a_cpus_kernel_threads_are_shown_six_at_most_with_the_count() {
        let names = |n: usize| (0..n).map(|i| format!("k{i}")).collect::<Vec<_>>();
        assert_eq!(shown_threads(&names(2)), "k0, k1");
        assert_eq!(
            shown_threads(&names(8)),
            "k0, k1, k2, k3, k4, k5, … 8 in all"
        );
        let twice = vec!["ksoftirqd/3".to_string(), "ksoftirqd/3".to_string()];
        assert_eq!(shown_threads(&twice), "ksoftirqd/3");
    }
}
