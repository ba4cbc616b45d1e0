//! What `show` prints: the shields in force and what can still run on each CPU.

use crate::irq_threads::{self, IrqThread};
use crate::layout::{self, CgroupLayout};
use crate::masks::ShieldMasks;
use crate::orphan::{self, OrphanShield};
use crate::snapshot::{self, Scope, Snapshot};
use crate::state;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{read_trimmed, Host, Kernel};
use serde::Serialize;

/// A task that may still run on a shielded CPU.
#[derive(Debug, Clone, Serialize)]
pub struct TaskOnCpu {
    /// Thread ID.
    pub tid: i32,
    /// Command name.
    pub comm: String,
    /// A kernel thread.
    pub kthread: bool,
    /// Bound there by the kernel (cannot be moved).
    pub pinned_by_kernel: bool,
    /// Its affinity.
    pub affinity: CpuSet,
}

/// An IRQ that may still arrive on a CPU.
#[derive(Debug, Clone, Serialize)]
pub struct IrqOnCpu {
    /// IRQ number.
    pub irq: u32,
    /// Device name.
    pub name: String,
    /// Its affinity.
    pub affinity: CpuSet,
}

/// One CPU's view.
#[derive(Debug, Clone, Serialize)]
pub struct CpuStatus {
    /// CPU number.
    pub cpu: usize,
    /// Shielded from processes.
    pub procs: bool,
    /// Shielded from interrupts.
    pub irqs: bool,
    /// Shielded from the local timer (runtime part).
    pub ltmr: bool,
    /// Covered by nohz_full (tick stopped when one task runs).
    pub nohz_full: bool,
    /// Covered by rcu_nocbs.
    pub rcu_nocbs: bool,
    /// In the kernel's isolated set (isolcpus).
    pub isolated: bool,
    /// How many visible threads may run here.
    pub task_count: usize,
    /// Those threads, listed for shielded CPUs only.
    pub tasks: Vec<TaskOnCpu>,
    /// IRQs whose affinity includes this CPU, listed for shielded CPUs only.
    pub irqs_here: Vec<IrqOnCpu>,
    /// IRQs whose mask no longer includes this CPU but whose move off it is
    /// pending: each still delivers its next interrupt here (`affinity` is
    /// the mask it moves to). Listed for shielded CPUs only.
    pub irq_moves_pending: Vec<IrqOnCpu>,
    /// Threaded handlers of IRQs kept off this CPU that followed their IRQ
    /// off it too (shielded CPUs only; PREEMPT_RT threads every device IRQ).
    pub irq_threads_followed: Vec<IrqThread>,
    /// Threaded handlers of IRQs kept off this CPU that may still run on it
    /// (pinned by hand), shielded CPUs only.
    pub irq_threads_left: Vec<IrqThread>,
    /// Threaded handlers still here with their IRQ, whose move to its new
    /// mask is pending until its next interrupt, shielded CPUs only.
    pub irq_threads_pending: Vec<IrqThread>,
}

/// The whole picture.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// CPUs shielded from processes (list format, "" when none).
    pub procs: String,
    /// CPUs shielded from interrupts.
    pub irqs: String,
    /// CPUs shielded from the local timer.
    pub ltmr: String,
    /// Online CPUs.
    pub online: String,
    /// Enforcement mechanism (or "none").
    pub mechanism: String,
    /// Whether the kernel enforcement is in place as intended, with details.
    pub enforcement: String,
    /// Scope of the visible tasks.
    pub scope: Scope,
    /// The memory nodes of the shield's cpuset, how they were chosen and
    /// what the kernel has in force; `None` with no process shield.
    pub mems: Option<String>,
    /// Where the original state is saved.
    pub state_file: Option<String>,
    /// A shield in place without its saved state, as the kernel shows it
    /// (its masks are the ones above).
    pub without_state: Option<OrphanShield>,
    /// Per-CPU details.
    pub cpus: Vec<CpuStatus>,
}

/// Reads the status of `host`, with its saved state. Where there is none,
/// a shield in place without it is reported from what the kernel shows.
/// Read-only.
pub fn status(host: &Host) -> std::io::Result<Status> {
    let (kernel, store) = (host.kernel(), host.store());
    let saved = state::load_from(store)?.map(|l| l.state);
    let without_state = match saved {
        Some(_) => None,
        None => orphan::detect(kernel)?,
    };
    let masks = saved
        .as_ref()
        .map(|s| s.masks.clone())
        .or_else(|| without_state.as_ref().map(|o| o.masks.clone()))
        .unwrap_or_default();
    let layout = saved
        .as_ref()
        .map(|s| s.layout.clone())
        .or_else(|| layout::detect(kernel));
    let online = cpushield_kernel::online_cpus(kernel)?;
    let snap = match &layout {
        Some(l) => Some(snapshot::take(kernel, l)?),
        None => None,
    };
    let pending = crate::irq_moves::read_pending_off(kernel, &masks.any());
    let (nohz, nocbs) = tick_and_rcu_offload(kernel);
    let isolated = cpushield_kernel::isolated_cpus(kernel).unwrap_or_default();
    let on_cpus = snap.as_ref().map(|s| OnCpus::of(s, &masks.any()));
    let cpus = online
        .iter()
        .map(|cpu| {
            let mut st = cpu_status(
                kernel,
                cpu,
                &masks,
                snap.as_ref().zip(on_cpus.as_ref()),
                &nohz,
                &nocbs,
                &isolated,
            );
            st.irq_moves_pending = moves_pending_on(cpu, &masks, &pending);
            st
        })
        .collect();
    let mems = match (&snap, &layout) {
        (Some(snap), Some(layout)) if !masks.procs.is_empty() => {
            let asked = saved.as_ref().and_then(|s| s.mems.as_ref());
            let chosen = crate::mems::choose(snap, asked, &masks.procs.intersection(&online));
            Some(shield_mems_text(kernel, layout, &chosen, &snap.root_mems))
        }
        _ => None,
    };
    Ok(Status {
        mems,
        procs: masks.procs.to_list(),
        irqs: masks.irqs.to_list(),
        ltmr: masks.ltmr.to_list(),
        online: online.to_list(),
        mechanism: layout
            .as_ref()
            .map(|l| l.mechanism().to_string())
            .unwrap_or_else(|| "none (no cpuset controller)".into()),
        enforcement: enforcement(kernel, layout.as_ref(), &masks),
        scope: snapshot::detect_scope(kernel),
        state_file: saved.map(|_| store.dir().join(state::STATE_FILE).display().to_string()),
        without_state,
        cpus,
    })
}

/// The nohz_full CPUs and the CPUs whose RCU callbacks are offloaded, as
/// `show` reports them: the rule is `cpushield_parse::cmdline`'s, the one
/// `check` uses too (a nohz_full CPU is offloaded).
pub fn tick_and_rcu_offload(kernel: &dyn Kernel) -> (CpuSet, CpuSet) {
    let cmdline = cpushield_kernel::Procfs::new(kernel)
        .cmdline()
        .unwrap_or_default();
    let sysfs = cpushield_kernel::nohz_full(kernel).ok();
    let nohz = cpushield_parse::cmdline::nohz_full_cpus(sysfs.as_deref(), &cmdline);
    let rcu = cpushield_parse::cmdline::rcu_offloaded_cpus(&cmdline, &nohz);
    (nohz, rcu)
}

/// The pending moves off a shielded `cpu`.
fn moves_pending_on(
    cpu: usize,
    masks: &ShieldMasks,
    pending: &[crate::irq_moves::PendingMove],
) -> Vec<IrqOnCpu> {
    if !masks.any().contains(cpu) {
        return Vec::new();
    }
    pending
        .iter()
        .filter(|m| m.still_on.contains(cpu))
        .map(|m| IrqOnCpu {
            irq: m.irq,
            name: m.name.clone(),
            affinity: m.requested.clone(),
        })
        .collect()
}

/// What may run on each CPU, from one pass over the tasks and IRQs: a
/// pass per CPU would cost CPUs x tasks (51 million affinity tests for 512
/// CPUs and 100,000 threads).
#[derive(Default)]
struct OnCpus {
    /// Tasks that may run on each CPU, by CPU.
    task_count: std::collections::HashMap<usize, usize>,
    /// The tasks that may run on each shielded CPU.
    tasks: std::collections::HashMap<usize, Vec<TaskOnCpu>>,
    /// The IRQs whose affinity includes each shielded CPU.
    irqs: std::collections::HashMap<usize, Vec<IrqOnCpu>>,
}

impl OnCpus {
    fn of(snap: &Snapshot, shielded: &CpuSet) -> OnCpus {
        let mut out = OnCpus::default();
        // Tasks mostly share a few affinities: count each affinity once.
        let mut by_affinity: std::collections::HashMap<&CpuSet, usize> = Default::default();
        for t in &snap.tasks {
            *by_affinity.entry(&t.affinity).or_default() += 1;
            for cpu in t.affinity.intersection(shielded).iter() {
                out.tasks.entry(cpu).or_default().push(TaskOnCpu {
                    tid: t.tid,
                    comm: t.comm.to_string(),
                    kthread: t.kthread,
                    pinned_by_kernel: t.pinned_by_kernel,
                    affinity: t.affinity.clone(),
                });
            }
        }
        for (affinity, n) in by_affinity {
            for cpu in affinity.iter() {
                *out.task_count.entry(cpu).or_default() += n;
            }
        }
        for i in &snap.irqs {
            for cpu in i.affinity.intersection(shielded).iter() {
                out.irqs.entry(cpu).or_default().push(IrqOnCpu {
                    irq: i.irq,
                    name: i.name.clone(),
                    affinity: i.affinity.clone(),
                });
            }
        }
        out
    }
}

fn cpu_status(
    kernel: &dyn Kernel,
    cpu: usize,
    masks: &ShieldMasks,
    snap: Option<(&Snapshot, &OnCpus)>,
    nohz: &CpuSet,
    nocbs: &CpuSet,
    isolated: &CpuSet,
) -> CpuStatus {
    let shielded = masks.any().contains(cpu);
    let mut tasks = Vec::new();
    let mut task_count = 0;
    let mut irqs_here = Vec::new();
    let mut irq_threads = irq_threads::OffCpu::default();
    if let Some((snap, on)) = snap {
        task_count = on.task_count.get(&cpu).copied().unwrap_or(0);
        if shielded {
            tasks = on.tasks.get(&cpu).cloned().unwrap_or_default();
            irqs_here = on.irqs.get(&cpu).cloned().unwrap_or_default();
            irq_threads = irq_threads::off_cpu(snap, cpu, |irq| {
                cpushield_kernel::irq::effective_affinity(kernel, irq).ok()
            });
        }
    }
    CpuStatus {
        cpu,
        procs: masks.procs.contains(cpu),
        irqs: masks.irqs.contains(cpu),
        ltmr: masks.ltmr.contains(cpu),
        nohz_full: nohz.contains(cpu),
        rcu_nocbs: nocbs.contains(cpu),
        isolated: isolated.contains(cpu),
        task_count,
        tasks,
        irqs_here,
        irq_moves_pending: Vec::new(),
        irq_threads_followed: irq_threads.followed,
        irq_threads_left: irq_threads.left,
        irq_threads_pending: irq_threads.pending,
    }
}

/// The shield's memory nodes for `show`: as chosen, what the kernel has in
/// force in its cgroup, and the nodes the rest keeps.
fn shield_mems_text(
    kernel: &dyn Kernel,
    layout: &CgroupLayout,
    chosen: &crate::mems::MemsChoice,
    root_mems: &str,
) -> String {
    let effective = read_trimmed(kernel, &layout.shield_dir().join(layout.root_mems_file()))
        .unwrap_or_else(|_| "?".into());
    format!(
        "shield {} (in force: {effective}); the rest keeps every node ({root_mems})",
        chosen.describe(root_mems)
    )
}

fn enforcement(kernel: &dyn Kernel, layout: Option<&CgroupLayout>, masks: &ShieldMasks) -> String {
    let Some(layout) = layout else {
        return "none: no cpuset controller".into();
    };
    if masks.procs.is_empty() {
        return "no process shield".into();
    }
    let dir = layout.shield_dir();
    if !kernel.exists(&dir) {
        return format!(
            "MISSING: {} does not exist; run `cpushield reset` and shield again",
            dir.display()
        );
    }
    layout.enforcement_status(kernel, &dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_lists_a_pending_irq_move_on_the_shielded_cpu_it_still_reaches_only() {
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file(
            "/proc/interrupts",
            "           CPU0       CPU1       CPU2\n 42:          5          3          0 PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx\n",
        );
        k.set_file("/proc/irq/42/smp_affinity_list", "0\n");
        k.set_file("/proc/irq/42/effective_affinity_list", "1\n");
        let masks = ShieldMasks::all(&CpuSet::from_cpus([1, 2]));
        let pending = crate::irq_moves::read_pending_off(&k, &masks.any());
        let on1 = moves_pending_on(1, &masks, &pending);
        assert_eq!(on1.len(), 1);
        assert_eq!((on1[0].irq, on1[0].name.as_str()), (42, "virtio3-tx"));
        assert_eq!(on1[0].affinity.to_list(), "0");
        assert!(moves_pending_on(2, &masks, &pending).is_empty());
        let irqs_only_elsewhere = ShieldMasks::all(&CpuSet::from_cpus([2]));
        assert!(moves_pending_on(1, &irqs_only_elsewhere, &pending).is_empty());
    }

    #[test]
    fn show_counts_a_nohz_full_cpu_as_rcu_offloaded() {
        // Regression: `show` printed rcu_nocbs=no for a CPU of nohz_full=
        // while `check` counted it offloaded (the kernel offloads it).
        let k = cpushield_kernel::FakeKernel::new();
        k.set_file("/proc/cmdline", "quiet nohz_full=1 rcu_nocbs=3\n");
        k.set_file("/sys/devices/system/cpu/nohz_full", "(null)\n");
        let (nohz, rcu) = tick_and_rcu_offload(&k);
        assert_eq!(nohz.to_list(), "1");
        assert_eq!(rcu.to_list(), "1,3");
    }
}
