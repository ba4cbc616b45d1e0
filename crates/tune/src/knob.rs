//! The knob catalog: each run-time setting that can matter to a shielded
//! CPU's worst case and that cpushield can restore exactly, how it is read,
//! whether this machine has it (and why not), its candidate value, and how
//! the candidate is put in place and taken back. Facts are read through the
//! kernel door ([`Machine::read`]); the catalog itself is pure
//! ([`catalog`]).

use cpushield_cpuset::CpuSet;
use cpushield_kernel::paths;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The vmstat interval tried: two minutes between the per-CPU statistics
/// folds (`vmstat_update`), against the kernel's one second.
pub const LONG_STAT_INTERVAL: u32 = 120;
/// The probe priority tried: the highest, above every kernel thread that
/// runs at a real-time priority.
pub const TOP_PRIORITY: u8 = 99;

/// Each knob `tune` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KnobId {
    /// The measured CPUs poll instead of halting when idle.
    IdlePoll,
    /// /dev/cpu_dma_latency held at 0 (no deep C-state).
    DmaLatency,
    /// Idle states with an exit latency disabled on the measured CPUs.
    IdleStates,
    /// The preemption model of a PREEMPT_DYNAMIC kernel.
    Preempt,
    /// RT throttling off.
    RtThrottling,
    /// kernel.timer_migration flipped.
    TimerMigration,
    /// vm.stat_interval lengthened.
    StatInterval,
    /// The cpufreq governor of the measured CPUs.
    Governor,
    /// The energy-performance preference of the measured CPUs.
    EnergyPerformance,
    /// The measured CPUs' SMT siblings offline.
    SmtOffline,
    /// IRQs kept off the measured CPUs' SMT siblings too.
    IrqSiblings,
    /// The probe's real-time priority.
    ProbePriority,
    /// The memory nodes of the shield's cpuset: every node instead of the
    /// nodes of its CPUs.
    Mems,
}

impl KnobId {
    /// Every knob, in the order they are measured.
    pub const ALL: [KnobId; 13] = [
        KnobId::IdlePoll,
        KnobId::DmaLatency,
        KnobId::IdleStates,
        KnobId::Preempt,
        KnobId::RtThrottling,
        KnobId::TimerMigration,
        KnobId::StatInterval,
        KnobId::Governor,
        KnobId::EnergyPerformance,
        KnobId::SmtOffline,
        KnobId::IrqSiblings,
        KnobId::ProbePriority,
        KnobId::Mems,
    ];

    /// The name on the command line (`--knobs`) and in the table.
    pub fn name(self) -> &'static str {
        match self {
            KnobId::IdlePoll => "idle-poll",
            KnobId::DmaLatency => "dma-latency",
            KnobId::IdleStates => "idle-states",
            KnobId::Preempt => "preempt",
            KnobId::RtThrottling => "rt-throttling",
            KnobId::TimerMigration => "timer-migration",
            KnobId::StatInterval => "stat-interval",
            KnobId::Governor => "governor",
            KnobId::EnergyPerformance => "epp",
            KnobId::SmtOffline => "smt-offline",
            KnobId::IrqSiblings => "irq-siblings",
            KnobId::ProbePriority => "probe-priority",
            KnobId::Mems => "mems",
        }
    }

    /// The knob named `name`.
    pub fn from_name(name: &str) -> Option<KnobId> {
        KnobId::ALL.into_iter().find(|k| k.name() == name)
    }

    /// What the knob is, in a few words.
    pub fn about(self) -> &'static str {
        match self {
            KnobId::IdlePoll => "idle policy of the measured CPUs",
            KnobId::DmaLatency => "/dev/cpu_dma_latency",
            KnobId::IdleStates => "C-state limit of the measured CPUs",
            KnobId::Preempt => "preemption model",
            KnobId::RtThrottling => "kernel.sched_rt_runtime_us",
            KnobId::TimerMigration => "kernel.timer_migration",
            KnobId::StatInterval => "vm.stat_interval",
            KnobId::Governor => "cpufreq governor",
            KnobId::EnergyPerformance => "energy-performance preference",
            KnobId::SmtOffline => "SMT siblings",
            KnobId::IrqSiblings => "IRQ placement of the housekeeping CPUs",
            KnobId::ProbePriority => "the probe's SCHED_FIFO priority",
            KnobId::Mems => "memory nodes of the shield's cpuset",
        }
    }
}

/// How the probe runs differently for a candidate (nothing outlives the probe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeChange {
    /// A SCHED_IDLE spinner keeps each measured CPU polling.
    IdlePoll,
    /// /dev/cpu_dma_latency held at 0 for the trial.
    HoldDmaLatency,
    /// The probe at this SCHED_FIFO priority.
    Priority(u8),
}

/// How a knob's candidate is put in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Change {
    /// Files written, each journaled in the shield's saved state first.
    Files(Vec<FileChange>),
    /// The probe runs differently.
    Probe(ProbeChange),
    /// The shield keeps IRQs off these CPUs too (the shield journals it).
    IrqShield(CpuSet),
    /// The shield's cpuset takes the memory nodes `nodes`, and `back` after
    /// (the shield writes its `cpuset.mems`; a reset removes its cgroup).
    ShieldMems {
        /// The candidate's nodes.
        nodes: CpuSet,
        /// The nodes it had, given back.
        back: CpuSet,
    },
}

/// A knob on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Knob {
    /// Which knob.
    pub id: KnobId,
    /// Its value as found, for the table.
    pub starting: String,
    /// The candidate value, for the table.
    pub candidate: String,
    /// How to put the candidate in place, or why this machine lacks the knob.
    pub change: Result<Change, String>,
}

impl Knob {
    fn lacking(id: KnobId, starting: impl Into<String>, why: impl Into<String>) -> Self {
        Self {
            id,
            starting: starting.into(),
            candidate: "-".into(),
            change: Err(why.into()),
        }
    }
}

pub use cpushield_runtime::machine::{
    CpuFiles, FileChange, IdleStateFile, Machine, MemoryNodes, DMA_LATENCY, PREEMPT_FILE,
    RT_RUNTIME, STAT_INTERVAL, TIMER_MIGRATION,
};

/// Every knob on a machine, measuring `cpus` with the probe at
/// `priority`: what each would change, or why it is not available here.
pub fn catalog(machine: &Machine, cpus: &CpuSet, priority: u8) -> Vec<Knob> {
    KnobId::ALL
        .into_iter()
        .map(|id| knob(machine, cpus, priority, id))
        .collect()
}

fn file(path: impl Into<PathBuf>, original: &str, candidate: &str) -> FileChange {
    FileChange {
        path: path.into(),
        original: original.to_string(),
        candidate: candidate.to_string(),
    }
}

/// A sysctl's name for the user (`kernel.timer_migration`).
fn sysctl_name(path: &str) -> String {
    paths::sysctl::key(Path::new(path)).unwrap_or_else(|| path.replace('/', "."))
}

/// The per-CPU knob files of the measured CPUs: each CPU's `(value,
/// choices)` by `get`; the change to `want` where a CPU has it and another
/// value, or why not.
fn per_cpu(
    machine: &Machine,
    cpus: &CpuSet,
    want: &str,
    leaf: &str,
    get: fn(&CpuFiles) -> (Option<&String>, &Vec<String>),
    missing: &str,
) -> (String, Result<Change, String>) {
    let mut changes = Vec::new();
    let mut starting = Vec::new();
    for cpu in cpus.iter() {
        let files = machine.cpus.get(&cpu).cloned().unwrap_or_default();
        let (value, choices) = get(&files);
        let Some(value) = value else {
            return (
                "-".into(),
                Err(format!("CPU {cpu} has no {leaf}: {missing}")),
            );
        };
        starting.push(format!("{cpu}: {value}"));
        if !choices.is_empty() && !choices.iter().any(|c| c == want) {
            return (
                starting.join(", "),
                Err(format!(
                    "CPU {cpu} offers no {want} (it offers {})",
                    choices.join(", ")
                )),
            );
        }
        if value != want {
            changes.push(file(
                paths::cpu_file(cpu, &format!("cpufreq/{leaf}")),
                value,
                want,
            ));
        }
    }
    let starting = starting.join(", ");
    if changes.is_empty() {
        return (starting, Err(format!("already {want}")));
    }
    (starting, Ok(Change::Files(changes)))
}

fn knob(machine: &Machine, cpus: &CpuSet, priority: u8, id: KnobId) -> Knob {
    match id {
        KnobId::IdlePoll => idle_poll(machine),
        KnobId::DmaLatency => dma_latency(machine),
        KnobId::IdleStates => idle_states(machine, cpus),
        KnobId::Preempt => preempt(machine),
        KnobId::RtThrottling => sysctl_knob(machine, id, RT_RUNTIME, |v| {
            (v != "-1")
                .then(|| "-1".to_string())
                .ok_or("RT throttling is off already")
        }),
        KnobId::TimerMigration => sysctl_knob(machine, id, TIMER_MIGRATION, |v| match v {
            "0" => Ok("1".into()),
            "1" => Ok("0".into()),
            _ => Err("its value is neither 0 nor 1"),
        }),
        KnobId::StatInterval => {
            sysctl_knob(machine, id, STAT_INTERVAL, |v| match v.parse::<u32>() {
                Ok(n) if n < LONG_STAT_INTERVAL => Ok(LONG_STAT_INTERVAL.to_string()),
                Ok(_) => Err("the interval is as long as the one tried already"),
                Err(_) => Err("its value is not a number of seconds"),
            })
        }
        KnobId::Governor => cpufreq_knob(
            id,
            per_cpu(
                machine,
                cpus,
                "performance",
                "scaling_governor",
                |c| (c.governor.as_ref(), &c.governors),
                "no cpufreq driver, so the clock is set by the firmware or the hypervisor",
            ),
        ),
        KnobId::EnergyPerformance => cpufreq_knob(
            id,
            per_cpu(
                machine,
                cpus,
                "performance",
                "energy_performance_preference",
                |c| (c.epp.as_ref(), &c.epps),
                "its cpufreq driver has no energy-performance preference",
            ),
        ),
        KnobId::SmtOffline => smt_offline(machine, cpus),
        KnobId::IrqSiblings => irq_siblings(machine, cpus),
        KnobId::ProbePriority => probe_priority(priority),
        KnobId::Mems => mems(machine, cpus),
    }
}

/// The measured CPUs poll when idle (a SCHED_IDLE spinner), unless the
/// kernel command line makes every CPU poll already.
fn idle_poll(machine: &Machine) -> Knob {
    let id = KnobId::IdlePoll;
    if cpushield_parse::cmdline::param(&machine.cmdline, "idle").as_deref() == Some("poll") {
        return Knob::lacking(
            id,
            "poll",
            "idle=poll is on the kernel command line: every CPU polls already",
        );
    }
    Knob {
        id,
        starting: "halt".into(),
        candidate: "poll (SCHED_IDLE spinner)".into(),
        change: Ok(Change::Probe(ProbeChange::IdlePoll)),
    }
}

/// /dev/cpu_dma_latency held at 0 during the probe, where the kernel has
/// PM QoS.
fn dma_latency(machine: &Machine) -> Knob {
    let id = KnobId::DmaLatency;
    if !machine.dma_latency {
        return Knob::lacking(
            id,
            "-",
            format!("{DMA_LATENCY} does not exist (kernel without PM QoS)"),
        );
    }
    Knob {
        id,
        starting: "no request".into(),
        candidate: "held at 0 us".into(),
        change: Ok(Change::Probe(ProbeChange::HoldDmaLatency)),
    }
}

/// Every enabled idle state with an exit latency disabled on the measured
/// CPUs.
fn idle_states(machine: &Machine, cpus: &CpuSet) -> Knob {
    let id = KnobId::IdleStates;
    let mut changes = Vec::new();
    for cpu in cpus.iter() {
        let states = machine
            .cpus
            .get(&cpu)
            .map(|c| c.idle_states.clone())
            .unwrap_or_default();
        if states.is_empty() {
            let driver = machine.idle_driver.as_deref().unwrap_or("none");
            return Knob::lacking(id, "-", format!("CPU {cpu} has no cpuidle states (cpuidle driver: {driver}): it halts, there is no C-state to limit"));
        }
        for s in states
            .iter()
            .filter(|s| s.latency_us > 0 && s.disable == "0")
        {
            changes.push(file(s.dir.join("disable"), "0", "1"));
        }
    }
    if changes.is_empty() {
        return Knob::lacking(
            id,
            "no state with an exit latency enabled",
            "every idle state with an exit latency is disabled already",
        );
    }
    Knob {
        id,
        starting: "every state enabled".into(),
        candidate: format!(
            "states with an exit latency disabled on CPU {}",
            cpus.to_list()
        ),
        change: Ok(Change::Files(changes)),
    }
}

/// Full preemption on a PREEMPT_DYNAMIC kernel whose debugfs shows the
/// models.
fn preempt(machine: &Machine) -> Knob {
    let id = KnobId::Preempt;
    let dynamic = machine.kernel_version.contains("PREEMPT_DYNAMIC");
    let Some(models) = &machine.preempt else {
        let why = if !dynamic {
            "the kernel is not PREEMPT_DYNAMIC: its preemption model is fixed when it is built"
                .to_string()
        } else {
            match &machine.debugfs_problem {
                Some(p) => format!("{PREEMPT_FILE} cannot be reached: {p}"),
                None => format!("{PREEMPT_FILE} cannot be read"),
            }
        };
        return Knob::lacking(id, "-", why);
    };
    if models.current == "full" {
        return Knob::lacking(id, "full", "the kernel preempts fully already");
    }
    if !models.choices.iter().any(|c| c == "full") {
        return Knob::lacking(
            id,
            models.current.clone(),
            format!(
                "the kernel offers no full preemption (it offers {})",
                models.choices.join(", ")
            ),
        );
    }
    Knob {
        id,
        starting: models.current.clone(),
        candidate: "full".into(),
        change: Ok(Change::Files(vec![file(
            PREEMPT_FILE,
            &models.current,
            "full",
        )])),
    }
}

/// A cpufreq knob set to `performance`, from [`per_cpu`]'s answer.
fn cpufreq_knob(id: KnobId, (starting, change): (String, Result<Change, String>)) -> Knob {
    Knob {
        id,
        starting,
        candidate: "performance".into(),
        change,
    }
}

/// The measured CPUs' SMT siblings offline, where that can be undone
/// exactly and CPU 0 is not one of them.
fn smt_offline(machine: &Machine, cpus: &CpuSet) -> Knob {
    let id = KnobId::SmtOffline;
    let list = cpus.to_list();
    let others = siblings_outside(machine, cpus);
    if others.is_empty() {
        return Knob::lacking(
            id,
            "-",
            format!("no CPU shares a core with CPU {list} (no SMT)"),
        );
    }
    if others.contains(0) {
        return Knob::lacking(
            id,
            "online",
            format!("CPU 0 shares a core with CPU {list}, and tune leaves CPU 0 alone"),
        );
    }
    if machine.cgroup_v1 {
        return Knob::lacking(id, "online", "on cgroup v1 a CPU taken offline leaves every cpuset for good, so they could not be restored exactly");
    }
    Knob {
        id,
        starting: format!("CPU {others} online"),
        candidate: format!("CPU {others} offline"),
        change: Ok(Change::Files(
            others
                .iter()
                .map(|c| file(paths::cpu_online(c), "1", "0"))
                .collect(),
        )),
    }
}

/// IRQs kept off the measured CPUs' SMT siblings too, where another
/// housekeeping CPU can take them.
fn irq_siblings(machine: &Machine, cpus: &CpuSet) -> Knob {
    let id = KnobId::IrqSiblings;
    let list = cpus.to_list();
    let others = siblings_outside(machine, cpus);
    if others.is_empty() {
        return Knob::lacking(id, "-", format!("no housekeeping CPU shares a core with CPU {list}: their IRQs reach the measured cores only through shared caches"));
    }
    let movable = others.difference(&CpuSet::from_cpus([0]));
    if movable.is_empty() {
        return Knob::lacking(id, "-", format!("CPU 0 is the housekeeping CPU sharing a core with CPU {list}, and tune leaves CPU 0's interrupts alone"));
    }
    if machine
        .online
        .difference(cpus)
        .difference(&movable)
        .is_empty()
    {
        return Knob::lacking(
            id,
            "-",
            format!("CPU {movable} are the only housekeeping CPUs: IRQs have nowhere else to go"),
        );
    }
    Knob {
        id,
        starting: format!("IRQs allowed on CPU {movable}"),
        candidate: format!("IRQs kept off CPU {movable} (sibling of CPU {list})"),
        change: Ok(Change::IrqShield(movable)),
    }
}

/// The shield's cpuset on every memory node instead of the nodes of its
/// CPUs (what `shield` gives it): on a machine of several nodes a page on a
/// remote node costs 1.3 to 2 times as much per cache miss, which this
/// measures. Offered only where the shield holds its CPUs' nodes and they
/// are not every node, so that giving them back restores `cpuset.mems`
/// exactly.
fn mems(machine: &Machine, cpus: &CpuSet) -> Knob {
    let id = KnobId::Mems;
    let memory = &machine.memory;
    let with_memory = CpuSet::from_cpus(memory.nodes.iter().filter(|n| n.memory).map(|n| n.id));
    let root = if memory.nodes.is_empty() {
        memory.root.clone()
    } else {
        memory.root.intersection(&with_memory)
    };
    if root.len() < 2 {
        let list = if root.is_empty() {
            "0".into()
        } else {
            root.to_list()
        };
        return Knob::lacking(id, list, "one memory node: every CPU's memory is local");
    }
    let local = cpushield_kernel::numa::nodes_of(&memory.nodes, cpus).intersection(&root);
    let all = root.to_list();
    if local.is_empty() {
        return Knob::lacking(
            id,
            all,
            format!("the nodes of CPU {cpus} have no memory: every node is remote to them"),
        );
    }
    if local == root {
        return Knob::lacking(
            id,
            all,
            format!(
                "CPU {cpus} sit on every memory node ({}): local is every node",
                root.to_list()
            ),
        );
    }
    let Some(now) = &memory.shield else {
        return Knob::lacking(id, "-", "the shield's cpuset has no cpuset.mems to change");
    };
    // Empty on cgroup v2: the root's nodes.
    let now = if now.is_empty() { &root } else { now };
    if now != &local {
        return Knob::lacking(
            id,
            now.to_list(),
            format!(
                "the shield's cpuset has nodes {}, not the nodes of CPU {cpus} ({}): tune compares those with every node",
                now.to_list(),
                local.to_list()
            ),
        );
    }
    Knob {
        id,
        starting: format!("{} (the nodes of CPU {cpus})", local.to_list()),
        candidate: format!("{all} (every node)"),
        change: Ok(Change::ShieldMems {
            nodes: root,
            back: local,
        }),
    }
}

/// The probe at the top SCHED_FIFO priority, unless it runs there already.
fn probe_priority(priority: u8) -> Knob {
    let id = KnobId::ProbePriority;
    if priority >= TOP_PRIORITY {
        return Knob::lacking(
            id,
            priority.to_string(),
            "the probe runs at the top priority already",
        );
    }
    Knob {
        id,
        starting: format!("SCHED_FIFO {priority}"),
        candidate: format!("SCHED_FIFO {TOP_PRIORITY}"),
        change: Ok(Change::Probe(ProbeChange::Priority(TOP_PRIORITY))),
    }
}

/// Online SMT siblings of `cpus` that are not measured.
fn siblings_outside(machine: &Machine, cpus: &CpuSet) -> CpuSet {
    cpus.iter()
        .filter_map(|c| machine.cpus.get(&c).map(|f| f.siblings.clone()))
        .fold(CpuSet::new(), |acc, s| acc.union(&s))
        .difference(cpus)
        .intersection(&machine.online)
}

fn sysctl_knob(
    machine: &Machine,
    id: KnobId,
    path: &'static str,
    candidate: impl Fn(&str) -> Result<String, &'static str>,
) -> Knob {
    let name = sysctl_name(path);
    let Some(value) = machine.sysctls.get(path) else {
        return Knob::lacking(id, "-", format!("{name} does not exist on this kernel"));
    };
    match candidate(value) {
        Ok(c) => Knob {
            id,
            starting: value.clone(),
            candidate: c.clone(),
            change: Ok(Change::Files(vec![file(path, value, &c)])),
        },
        Err(why) => Knob::lacking(id, value.clone(), why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;
    use cpushield_parse::preempt::parse_preempt;

    fn set(text: &str) -> CpuSet {
        CpuSet::parse_list(text).unwrap()
    }

    /// This host as seen on 2026-11-26: 2 vCPUs, no SMT, no cpufreq, no
    /// cpuidle states, PREEMPT_DYNAMIC with debugfs not mounted, cgroup v1.
    fn this_host() -> FakeKernel {
        let k = FakeKernel::new();
        k.set_file("/sys/devices/system/cpu/online", "0-1\n");
        k.set_file("/proc/cmdline", "console=ttyS0 root=/dev/vda\n");
        k.set_file("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC @0\n");
        k.set_file(DMA_LATENCY, "");
        k.set_file(RT_RUNTIME, "950000\n");
        k.set_file(TIMER_MIGRATION, "1\n");
        k.set_file(STAT_INTERVAL, "10\n");
        k.set_file("/sys/devices/system/cpu/cpuidle/current_driver", "none\n");
        for cpu in 0..2 {
            k.set_file(
                format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
                format!("{cpu}\n"),
            );
        }
        k
    }

    fn by_id(knobs: &[Knob], id: KnobId) -> &Knob {
        knobs.iter().find(|k| k.id == id).unwrap()
    }

    #[test]
    fn on_this_host_seven_knobs_are_available_and_the_rest_say_why_not() {
        let k = this_host();
        let m = Machine::read(&k, &set("1"));
        let knobs = catalog(&m, &set("1"), 95);
        let available: Vec<&str> = knobs
            .iter()
            .filter(|k| k.change.is_ok())
            .map(|k| k.id.name())
            .collect();
        assert_eq!(
            available,
            [
                "idle-poll",
                "dma-latency",
                "rt-throttling",
                "timer-migration",
                "stat-interval",
                "probe-priority"
            ]
        );
        let why = |id| by_id(&knobs, id).change.clone().unwrap_err();
        assert!(why(KnobId::IdleStates).contains("cpuidle driver: none"));
        assert!(why(KnobId::Preempt).contains(PREEMPT_FILE));
        assert!(why(KnobId::Governor).contains("no cpufreq driver"));
        assert!(why(KnobId::SmtOffline).contains("no SMT"));
        assert!(why(KnobId::IrqSiblings).contains("shares a core"));
        assert!(why(KnobId::Mems).starts_with("one memory node"));
        let tm = by_id(&knobs, KnobId::TimerMigration);
        assert_eq!(
            tm.change,
            Ok(Change::Files(vec![file(TIMER_MIGRATION, "1", "0")]))
        );
        assert_eq!(
            by_id(&knobs, KnobId::StatInterval).change,
            Ok(Change::Files(vec![file(STAT_INTERVAL, "10", "120")]))
        );
    }

    #[test]
    fn a_dynamic_kernel_with_debugfs_offers_full_preemption() {
        let k = this_host();
        k.set_file(PREEMPT_FILE, "none (voluntary) full lazy\n");
        let knobs = catalog(&Machine::read(&k, &set("1")), &set("1"), 95);
        assert_eq!(
            by_id(&knobs, KnobId::Preempt).change,
            Ok(Change::Files(vec![file(PREEMPT_FILE, "voluntary", "full")]))
        );
        k.set_file(PREEMPT_FILE, "none voluntary (full) lazy\n");
        let knobs = catalog(&Machine::read(&k, &set("1")), &set("1"), 95);
        assert!(by_id(&knobs, KnobId::Preempt).change.is_err());
        k.set_file("/proc/sys/kernel/version", "#1 SMP\n");
        k.set_file(PREEMPT_FILE, "");
        let knobs = catalog(&Machine::read(&k, &set("1")), &set("1"), 95);
        assert!(by_id(&knobs, KnobId::Preempt)
            .change
            .clone()
            .unwrap_err()
            .contains("not PREEMPT_DYNAMIC"));
    }

    /// A 4-CPU bare-metal box with SMT pairs (0,2) and (1,3), cpufreq,
    /// cpuidle states and cgroup v2.
    fn smt_box() -> FakeKernel {
        let k = this_host();
        k.set_file("/sys/devices/system/cpu/online", "0-3\n");
        k.set_file(
            "/proc/self/mountinfo",
            "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        );
        k.set_file("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu\n");
        for (cpu, sibs) in [(0, "0,2"), (1, "1,3"), (2, "0,2"), (3, "1,3")] {
            let base = format!("/sys/devices/system/cpu/cpu{cpu}");
            k.set_file(format!("{base}/topology/thread_siblings_list"), sibs);
            k.set_file(format!("{base}/cpufreq/scaling_governor"), "powersave\n");
            k.set_file(
                format!("{base}/cpufreq/scaling_available_governors"),
                "performance powersave\n",
            );
            k.set_file(
                format!("{base}/cpufreq/energy_performance_preference"),
                "balance_performance\n",
            );
            k.set_file(
                format!("{base}/cpufreq/energy_performance_available_preferences"),
                "default performance balance_performance power\n",
            );
            for (i, (name, lat, dis)) in [
                ("POLL", 0, "0"),
                ("C1", 2, "0"),
                ("C6", 170, "0"),
                ("C10", 400, "1"),
            ]
            .iter()
            .enumerate()
            {
                let d = format!("{base}/cpuidle/state{i}");
                k.set_file(format!("{d}/name"), *name);
                k.set_file(format!("{d}/latency"), lat.to_string());
                k.set_file(format!("{d}/disable"), *dis);
            }
        }
        k
    }

    #[test]
    fn per_cpu_knobs_change_only_the_measured_cpus() {
        let k = smt_box();
        let knobs = catalog(&Machine::read(&k, &set("3")), &set("3"), 95);
        let files = |id| match by_id(&knobs, id).change.clone() {
            Ok(Change::Files(f)) => f
                .into_iter()
                .map(|f| (f.path.display().to_string(), f.candidate))
                .collect::<Vec<_>>(),
            other => panic!("{id:?}: {other:?}"),
        };
        assert_eq!(
            files(KnobId::Governor),
            [(
                "/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor".into(),
                "performance".into()
            )]
        );
        assert_eq!(files(KnobId::EnergyPerformance).len(), 1);
        assert_eq!(
            files(KnobId::IdleStates),
            [
                (
                    "/sys/devices/system/cpu/cpu3/cpuidle/state1/disable".to_string(),
                    "1".to_string()
                ),
                (
                    "/sys/devices/system/cpu/cpu3/cpuidle/state2/disable".to_string(),
                    "1".to_string()
                ),
            ],
            "POLL (no exit latency) and the disabled C10 are left alone"
        );
        assert_eq!(
            files(KnobId::SmtOffline),
            [("/sys/devices/system/cpu/cpu1/online".into(), "0".into())]
        );
        assert!(
            matches!(by_id(&knobs, KnobId::IrqSiblings).change, Ok(Change::IrqShield(ref c)) if c == &set("1"))
        );
    }

    #[test]
    fn cpu0_and_cgroup_v1_keep_their_cpus_online() {
        let k = smt_box();
        let knobs = catalog(&Machine::read(&k, &set("2")), &set("2"), 95);
        assert!(by_id(&knobs, KnobId::SmtOffline)
            .change
            .clone()
            .unwrap_err()
            .contains("CPU 0"));
        assert!(by_id(&knobs, KnobId::IrqSiblings)
            .change
            .clone()
            .unwrap_err()
            .contains("CPU 0"));
        let mut m = Machine::read(&k, &set("3"));
        m.cgroup_v1 = true;
        let knobs = catalog(&m, &set("3"), 95);
        assert!(by_id(&knobs, KnobId::SmtOffline)
            .change
            .clone()
            .unwrap_err()
            .contains("cgroup v1"));
    }

    #[test]
    fn knobs_already_at_their_candidate_are_not_available() {
        let k = this_host();
        k.set_file(RT_RUNTIME, "-1\n");
        k.set_file(STAT_INTERVAL, "300\n");
        k.set_file("/proc/cmdline", "idle=poll\n");
        let knobs = catalog(&Machine::read(&k, &set("1")), &set("1"), 99);
        for id in [
            KnobId::RtThrottling,
            KnobId::StatInterval,
            KnobId::IdlePoll,
            KnobId::ProbePriority,
        ] {
            assert!(by_id(&knobs, id).change.is_err(), "{id:?}");
        }
    }

    #[test]
    fn a_preemption_file_the_kernel_refuses_to_read_is_named_as_the_reason() {
        let k = this_host();
        k.set_file(PREEMPT_FILE, "");
        k.refuse_reads(PREEMPT_FILE, 1);
        let knobs = catalog(&Machine::read(&k, &set("1")), &set("1"), 95);
        let why = by_id(&knobs, KnobId::Preempt).change.clone().unwrap_err();
        assert!(why.contains("refuses to read it"), "{why}");
    }

    #[test]
    fn every_knob_name_round_trips() {
        for id in KnobId::ALL {
            assert_eq!(KnobId::from_name(id.name()), Some(id));
        }
    }

    #[test]
    fn idle_poll_changes_the_probe_unless_the_command_line_polls_already() {
        let mut m = Machine::default();
        assert_eq!(
            idle_poll(&m).change,
            Ok(Change::Probe(ProbeChange::IdlePoll))
        );
        m.cmdline = "quiet idle=poll".into();
        assert!(idle_poll(&m).change.unwrap_err().contains("idle=poll"));
    }

    #[test]
    fn dma_latency_needs_the_pm_qos_device() {
        let mut m = Machine::default();
        assert!(dma_latency(&m).change.unwrap_err().contains("PM QoS"));
        m.dma_latency = true;
        assert_eq!(
            dma_latency(&m).change,
            Ok(Change::Probe(ProbeChange::HoldDmaLatency))
        );
    }

    #[test]
    fn preempt_is_lacking_where_the_kernel_offers_no_full_model() {
        let m = Machine {
            kernel_version: "#1 SMP PREEMPT_DYNAMIC".into(),
            preempt: parse_preempt("none (voluntary)\n"),
            ..Machine::default()
        };
        let why = preempt(&m).change.unwrap_err();
        assert!(
            why.contains("offers no full preemption (it offers none, voluntary)"),
            "{why}"
        );
    }

    #[test]
    fn a_cpufreq_knob_tries_performance_with_what_per_cpu_found() {
        let k = cpufreq_knob(KnobId::Governor, ("1: powersave".into(), Err("x".into())));
        assert_eq!(
            (k.starting.as_str(), k.candidate.as_str()),
            ("1: powersave", "performance")
        );
        assert_eq!(k.change, Err("x".into()));
    }

    #[test]
    fn irq_siblings_needs_another_housekeeping_cpu_to_take_the_irqs() {
        let k = smt_box();
        let mut m = Machine::read(&k, &set("3"));
        assert!(irq_siblings(&m, &set("3")).change.is_ok());
        // Only CPU 1 (3's sibling) besides the measured one: nowhere to go.
        m.online = set("1,3");
        let why = irq_siblings(&m, &set("3")).change.unwrap_err();
        assert!(why.contains("nowhere else to go"), "{why}");
    }

    #[test]
    fn smt_offline_takes_only_the_measured_cpus_siblings_offline() {
        let k = smt_box();
        let m = Machine::read(&k, &set("3"));
        assert_eq!(
            smt_offline(&m, &set("3")).change,
            Ok(Change::Files(vec![file(
                "/sys/devices/system/cpu/cpu1/online",
                "1",
                "0"
            )]))
        );
    }

    #[test]
    fn idle_states_disables_only_enabled_states_with_an_exit_latency() {
        let k = smt_box();
        let m = Machine::read(&k, &set("3"));
        let Ok(Change::Files(files)) = idle_states(&m, &set("3")).change else {
            panic!("no files");
        };
        assert_eq!(files.len(), 2, "C1 and C6, not POLL nor the disabled C10");
        assert!(idle_states(&Machine::default(), &set("3"))
            .change
            .unwrap_err()
            .contains("no cpuidle states"));
    }

    /// Memory nodes 0 (CPUs 0-1) and 1 (CPUs 2-3), each with memory, every
    /// node the root's; the shield's cpuset holds `shield`.
    fn two_nodes(shield: Option<&str>) -> Machine {
        let nodes = ["0-1", "2-3"]
            .iter()
            .enumerate()
            .map(|(id, cpus)| cpushield_kernel::numa::NumaNode {
                id,
                cpus: set(cpus),
                memory: true,
            })
            .collect();
        Machine {
            memory: MemoryNodes {
                nodes,
                root: set("0-1"),
                shield: shield.map(|s| CpuSet::parse_list(s).unwrap()),
            },
            ..Machine::default()
        }
    }

    #[test]
    fn on_two_nodes_mems_tries_every_node_against_the_nodes_of_the_shielded_cpus() {
        let knob = mems(&two_nodes(Some("1")), &set("2-3"));
        assert_eq!(
            knob.change,
            Ok(Change::ShieldMems {
                nodes: set("0-1"),
                back: set("1")
            })
        );
        assert_eq!(knob.starting, "1 (the nodes of CPU 2-3)");
        assert_eq!(knob.candidate, "0-1 (every node)");
        let on_node_0 = mems(&two_nodes(Some("0")), &set("1"));
        assert!(
            matches!(on_node_0.change, Ok(Change::ShieldMems { ref back, .. }) if back == &set("0"))
        );
    }

    #[test]
    fn mems_is_lacking_with_its_reason_where_local_and_every_node_are_one_or_cannot_be_given_back()
    {
        let why = |m: &Machine, cpus: &str| mems(m, &set(cpus)).change.unwrap_err();
        let mut one = two_nodes(Some("0"));
        one.memory.nodes.truncate(1);
        one.memory.root = set("0");
        assert!(
            why(&one, "1").starts_with("one memory node"),
            "{}",
            why(&one, "1")
        );
        assert!(why(&Machine::default(), "1").starts_with("one memory node"));
        assert!(why(&two_nodes(Some("0-1")), "1-2").contains("sit on every memory node"));
        // --mems by hand, or cgroup v2's empty list (the root's nodes): tune
        // could not give them back as they were.
        assert!(why(&two_nodes(Some("0")), "3").contains("not the nodes of CPU 3 (1)"));
        assert!(why(&two_nodes(Some("")), "3").contains("has nodes 0-1"));
        assert!(why(&two_nodes(None), "3").contains("no cpuset.mems"));
        let mut memoryless = two_nodes(Some("1"));
        memoryless.memory.nodes[1].memory = false;
        assert!(why(&memoryless, "3").starts_with("one memory node"));
    }

    #[test]
    fn probe_priority_tries_the_top_priority_from_below_it() {
        assert_eq!(
            probe_priority(95).change,
            Ok(Change::Probe(ProbeChange::Priority(TOP_PRIORITY)))
        );
        assert!(probe_priority(TOP_PRIORITY).change.is_err());
    }
}
