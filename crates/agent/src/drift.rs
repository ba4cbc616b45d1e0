//! Drift detection: which IRQs and tasks moved onto a shielded CPU, and which
//! CPUs came online, since the last look. Pure: it sees only what was read.

use cpushield_cpuset::CpuSet;
use cpushield_shield::snapshot::{is_kubepods, IrqInfo, TaskInfo, SHIELD_CGROUP};
use std::collections::BTreeMap;

/// Why the agent corrected the shield.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// An IRQ that was not there at the last look has a shielded CPU in its mask.
    IrqNew,
    /// An IRQ's mask was rewritten (irqbalance, a user) onto a shielded CPU.
    IrqRewritten,
    /// At the agent's start, an IRQ already had a shielded CPU in its mask.
    IrqAtStart,
    /// A CPU came online: the housekeeping cpuset and the masks must include it.
    CpuOnline,
    /// A task outside the shield had its affinity widened onto a shielded CPU.
    TaskWidened,
    /// A task that was not there at the last look runs outside the shield
    /// with a shielded CPU in its affinity.
    TaskNew,
    /// At the agent's start, a task outside the shield had a shielded CPU.
    TaskAtStart,
}

impl Cause {
    /// The `cause` label value of `cpushield_corrections_total`.
    pub fn label(self) -> &'static str {
        match self {
            Cause::IrqNew => "irq_new",
            Cause::IrqRewritten => "irq_rewritten",
            Cause::IrqAtStart => "irq_at_start",
            Cause::CpuOnline => "cpu_online",
            Cause::TaskWidened => "task_widened",
            Cause::TaskNew => "task_new",
            Cause::TaskAtStart => "task_at_start",
        }
    }

    /// What happened, for the log line.
    pub fn describe(self) -> &'static str {
        match self {
            Cause::IrqNew => "a new IRQ appeared with a shielded CPU in its mask",
            Cause::IrqRewritten => "its mask was rewritten onto a shielded CPU behind the shield's back (irqbalance or a user)",
            Cause::IrqAtStart => "its mask held a shielded CPU when the agent started",
            Cause::CpuOnline => "a CPU came online (the shield's cpusets and masks must include it)",
            Cause::TaskWidened => "its affinity was widened onto a shielded CPU behind the shield's back (taskset, a library, a container runtime)",
            Cause::TaskNew => "a new task outside the shield has a shielded CPU in its affinity",
            Cause::TaskAtStart => "it ran outside the shield with a shielded CPU in its affinity when the agent started",
        }
    }
}

/// One IRQ found on a shielded CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// IRQ number.
    pub irq: u32,
    /// Device name.
    pub name: String,
    /// Its mask text as found.
    pub mask_text: String,
    /// The shielded CPUs it reaches.
    pub on: CpuSet,
    /// Why it counts as drift.
    pub cause: Cause,
}

/// The IRQ masks seen at the last look.
#[derive(Debug, Default, Clone)]
pub struct Watch {
    seen: Option<BTreeMap<u32, String>>,
}

impl Watch {
    /// A watch that has not looked yet (its first look reports every IRQ on a
    /// shielded CPU as [`Cause::IrqAtStart`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Compares `irqs` with the last look and remembers them. An IRQ is drift
    /// when its mask reaches a CPU of `shielded` and it is new, its mask text
    /// changed, or this is the first look. An IRQ whose mask the shield could
    /// not change (kernel-managed) is reported once, not at every look.
    pub fn observe(&mut self, irqs: &[IrqInfo], shielded: &CpuSet) -> Vec<Drift> {
        let mut out = Vec::new();
        for irq in irqs {
            let on = irq.affinity.intersection(shielded);
            if on.is_empty() {
                continue;
            }
            let cause = match &self.seen {
                None => Some(Cause::IrqAtStart),
                Some(seen) => match seen.get(&irq.irq) {
                    None => Some(Cause::IrqNew),
                    Some(text) if *text != irq.mask_text => Some(Cause::IrqRewritten),
                    Some(_) => None,
                },
            };
            if let Some(cause) = cause {
                out.push(Drift {
                    irq: irq.irq,
                    name: irq.name.clone(),
                    mask_text: irq.mask_text.clone(),
                    on,
                    cause,
                });
            }
        }
        self.remember(irqs);
        out
    }

    /// Remembers `irqs` as seen (after a correction, the masks it wrote).
    pub fn remember(&mut self, irqs: &[IrqInfo]) {
        self.seen = Some(irqs.iter().map(|i| (i.irq, i.mask_text.clone())).collect());
    }
}

/// One task outside the shield found with a shielded CPU in its affinity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskDrift {
    /// Thread ID.
    pub tid: i32,
    /// Command name.
    pub comm: String,
    /// Its affinity as found.
    pub affinity: CpuSet,
    /// The shielded CPUs it reaches.
    pub on: CpuSet,
    /// Why it counts as drift.
    pub cause: Cause,
}

/// A task of a Kubernetes pod found with a shielded CPU in its affinity. The
/// kubelet's CPU manager places pods; the shield leaves them alone, so the
/// agent names the task and corrects nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTask {
    /// Thread ID.
    pub tid: i32,
    /// Command name.
    pub comm: String,
    /// Its cgroup (a `kubepods*` path).
    pub cgroup: String,
    /// Its affinity as found.
    pub affinity: CpuSet,
    /// The shielded CPUs it reaches.
    pub on: CpuSet,
}

/// What one look at the tasks found on shielded CPUs, new or changed since
/// the last look.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskLook {
    /// Tasks the shield places: each is drift to correct.
    pub drifts: Vec<TaskDrift>,
    /// Tasks of Kubernetes pods: named, never corrected.
    pub pods: Vec<PodTask>,
}

/// Whether a task belongs on shielded CPUs: it is in the shield's cgroup
/// (placed by `run`, the agent's socket, or Brosky's rule) or the kernel
/// binds it to its CPU (per-CPU kernel thread).
fn belongs_on_shield(task: &TaskInfo) -> bool {
    task.pinned_by_kernel
        || task.cgroup.trim_start_matches('/').split('/').next() == Some(SHIELD_CGROUP)
}

/// The task affinities seen at the last look, by (tid, start time).
#[derive(Debug, Default, Clone)]
pub struct TaskWatch {
    seen: Option<BTreeMap<(i32, u64), CpuSet>>,
}

impl TaskWatch {
    /// A watch that has not looked yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Compares `tasks` with the last look and remembers them. A task outside
    /// the shield (see the shield's cgroup; per-CPU kernel threads excepted)
    /// counts when its affinity reaches a CPU of `shielded` and it is new,
    /// its affinity changed, or this is the first look: as drift, or, when
    /// it is a Kubernetes pod's, as a pod task.
    pub fn observe(&mut self, tasks: &[TaskInfo], shielded: &CpuSet) -> TaskLook {
        let out = self.compare(tasks, shielded);
        self.remember(tasks);
        out
    }

    /// [`TaskWatch::observe`] of a look that read only some tasks (those
    /// that can reach `shielded`): the tasks not read keep what was seen of
    /// them, so that one moved later into a cgroup on shielded CPUs with a
    /// widened affinity counts as widened, not as new.
    pub fn observe_some(&mut self, tasks: &[TaskInfo], shielded: &CpuSet) -> TaskLook {
        let out = self.compare(tasks, shielded);
        match &mut self.seen {
            Some(seen) => {
                for t in tasks {
                    seen.insert((t.tid, t.starttime), t.affinity.clone());
                }
            }
            None => self.remember(tasks),
        }
        out
    }

    /// What [`TaskWatch::observe`] reports of `tasks`, without remembering them.
    fn compare(&self, tasks: &[TaskInfo], shielded: &CpuSet) -> TaskLook {
        let mut out = TaskLook::default();
        for t in tasks {
            let on = t.affinity.intersection(shielded);
            if on.is_empty() || belongs_on_shield(t) {
                continue;
            }
            let cause = match &self.seen {
                None => Some(Cause::TaskAtStart),
                Some(seen) => match seen.get(&(t.tid, t.starttime)) {
                    None => Some(Cause::TaskNew),
                    Some(a) if *a != t.affinity => Some(Cause::TaskWidened),
                    Some(_) => None,
                },
            };
            if cause.is_some() && is_kubepods(&t.cgroup) {
                out.pods.push(PodTask {
                    tid: t.tid,
                    comm: t.comm.to_string(),
                    cgroup: t.cgroup.to_string(),
                    affinity: t.affinity.clone(),
                    on,
                });
            } else if let Some(cause) = cause {
                out.drifts.push(TaskDrift {
                    tid: t.tid,
                    comm: t.comm.to_string(),
                    affinity: t.affinity.clone(),
                    on,
                    cause,
                });
            }
        }
        out
    }

    /// Remembers `tasks` as seen (after a correction, the affinities it set).
    pub fn remember(&mut self, tasks: &[TaskInfo]) {
        self.seen = Some(
            tasks
                .iter()
                .map(|t| ((t.tid, t.starttime), t.affinity.clone()))
                .collect(),
        );
    }
}

/// The online CPUs seen at the last look.
#[derive(Debug, Default, Clone)]
pub struct OnlineWatch {
    seen: Option<CpuSet>,
}

impl OnlineWatch {
    /// The CPUs that came online since the last look (none at the first).
    pub fn observe(&mut self, online: &CpuSet) -> CpuSet {
        let came = match &self.seen {
            Some(seen) => online.difference(seen),
            None => CpuSet::default(),
        };
        self.seen = Some(online.clone());
        came
    }
}
