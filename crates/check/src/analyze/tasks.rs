//! Threads that ran on a checked CPU, and kernel threads bound to it.

use super::{CheckInput, CpuActivity, TaskActivity};
use crate::finding::{Finding, Remedy, Severity, Topic};
use crate::snapshot::ThreadSample;
use crate::target::{ShieldInForce, ShieldKind};
use cpushield_cpuset::CpuSet;
use std::collections::BTreeMap;

/// How a thread relates to a checked CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A per-CPU kernel thread bound there by the kernel.
    BoundKthread,
    /// A kernel thread someone pinned there.
    PinnedKthread,
    /// A kernel thread that may run elsewhere.
    MovableKthread,
    /// A user thread whose affinity is only checked CPUs.
    PinnedTask,
    /// A user thread that may run elsewhere.
    MovableTask,
    /// A user thread of a Kubernetes pod that may run here: the shield
    /// leaves it to the kubelet's CPU manager.
    PodTask,
}

fn classify(t: &ThreadSample, cpu: usize, checked: &CpuSet) -> Kind {
    let single = t
        .affinity
        .as_ref()
        .is_some_and(|a| a.len() == 1 && a.contains(cpu));
    let only_checked = t
        .affinity
        .as_ref()
        .is_some_and(|a| !a.is_empty() && a.is_subset(checked));
    if t.stat.is_kthread() {
        if t.stat.no_setaffinity() && (single || t.affinity.is_none()) {
            Kind::BoundKthread
        } else if single {
            Kind::PinnedKthread
        } else {
            Kind::MovableKthread
        }
    } else if only_checked {
        Kind::PinnedTask
    } else if t.in_kubepods {
        Kind::PodTask
    } else {
        Kind::MovableTask
    }
}

pub(super) fn analyze_cpu(input: &CheckInput<'_>, act: &mut CpuActivity) -> Vec<Finding> {
    let cpu = act.cpu;
    let mut findings = Vec::new();
    let list = input.list();
    let hk = input.housekeeping().to_list();
    let interval_ms = input.interval_s() * 1e3;
    // Per-CPU kernel threads bound to this CPU, whether they ran or not.
    act.bound_kthreads = input.bound_kthreads(cpu).to_vec();

    // User threads are grouped per process; kernel threads stay one by one.
    let mut groups: BTreeMap<(Kind, i32), Vec<(ThreadSample, u64)>> = BTreeMap::new();
    for run in input.runs.ran_on(cpu) {
        if run.pid == input.self_pid {
            continue;
        }
        let Some(t) = input.runs.latest(run.tid) else {
            continue;
        };
        let kind = classify(t, cpu, input.cpus);
        act.tasks.push(TaskActivity {
            pid: t.pid,
            tid: t.stat.tid,
            comm: t.stat.comm.clone(),
            kernel_thread: t.stat.is_kthread(),
            affinity: t.affinity.as_ref().map(|a| a.to_list()).unwrap_or_default(),
            run_ms: run.run_ns as f64 / 1e6,
        });
        let key = if t.stat.is_kthread() {
            t.stat.tid
        } else {
            t.pid
        };
        groups
            .entry((kind, key))
            .or_default()
            .push((t.clone(), run.run_ns));
    }

    for ((kind, key), threads) in groups {
        let total_ns: u64 = threads.iter().map(|(_, ns)| ns).sum();
        let ms = total_ns as f64 / 1e6;
        let share = ms / interval_ms.max(1e-9) * 100.0;
        let first = &threads[0].0;
        let aff = first
            .affinity
            .as_ref()
            .map(|a| a.to_list())
            .unwrap_or_else(|| "unknown (exited before the end)".into());
        let name = process_name(input, key, first);
        let thread_note = if threads.len() > 1 {
            let names: Vec<String> = threads
                .iter()
                .take(6)
                .map(|(t, ns)| {
                    format!(
                        "{} ({}) {:.2} ms",
                        t.stat.comm,
                        t.stat.tid,
                        *ns as f64 / 1e6
                    )
                })
                .collect();
            format!("; {} threads: {}", threads.len(), names.join(", "))
        } else {
            String::new()
        };
        let evidence = format!(
            "ran {ms:.2} ms ({share:.2}% of {:.1} s) on CPU {cpu} (run time from /proc/{key}/task/*/schedstat, CPU from stat field 39); affinity {aff}{thread_note}",
            input.interval_s()
        );
        let topic = if first.stat.is_kthread() {
            Topic::KernelThread
        } else {
            Topic::Task
        };
        // Under the process shield a movable thread that still ran here was
        // not moved by it (it widened its affinity since, or the kernel keeps
        // no cpuset around the CPU): moving it by hand is what is left.
        let procs = input.shield_remedy(ShieldKind::Procs).unwrap_or_else(|| {
            let all = if first.stat.is_kthread() { "" } else { "-a " };
            Remedy::runtime(format!("taskset {all}-pc {hk} {key}"))
        });
        let procs_in_place = input.in_place(ShieldKind::Procs, cpu);
        let finding = match kind {
            Kind::MovableTask => Finding::new(
                Severity::BreaksShield,
                topic,
                Some(cpu),
                format!("task {name} (pid {key}) ran on CPU {cpu} for {ms:.2} ms; it may run on other CPUs"),
                evidence,
            )
            .in_place(procs_in_place)
            .remedy(procs),
            Kind::MovableKthread => Finding::new(
                Severity::BreaksShield,
                topic,
                Some(cpu),
                format!("kernel thread {name} (pid {key}) ran on CPU {cpu} for {ms:.2} ms; it is not bound there"),
                evidence,
            )
            .in_place(procs_in_place)
            .remedy(procs),
            Kind::PodTask => Finding::new(
                Severity::BreaksShield,
                topic,
                Some(cpu),
                format!("task {name} (pid {key}) of a Kubernetes pod ran on CPU {cpu} for {ms:.2} ms; the shield leaves pods to the kubelet's CPU manager, whose shared pool still holds CPU {cpu}"),
                evidence,
            )
            .remedy(pod_task_remedy(&list)),
            Kind::PinnedTask => Finding::new(
                Severity::Warn,
                topic,
                Some(cpu),
                format!("task {name} (pid {key}) is pinned to CPU {aff} and ran on CPU {cpu} for {ms:.2} ms; a shield keeps it there (if it is not your real-time task, move it)"),
                evidence,
            )
            .remedy(Remedy::runtime(format!("taskset -a -pc {hk} {key}"))),
            Kind::PinnedKthread => Finding::new(
                Severity::Warn,
                topic,
                Some(cpu),
                format!("kernel thread {name} (pid {key}) was pinned to CPU {cpu} and ran there for {ms:.2} ms"),
                evidence,
            )
            .remedy(Remedy::runtime(format!("taskset -pc {hk} {key}"))),
            Kind::BoundKthread => {
                let boot = BootIsolation {
                    nohz_full: input.facts.nohz_full_cpus(),
                    rcu_offloaded: input.rcu_offload().cpus.clone(),
                };
                let (why, remedy) =
                    bound_kthread_advice(&first.stat.comm, input.cpus, input.shield, &boot);
                // Bound kernel threads cannot be moved; they matter when they run long.
                let severity = if share >= 0.1 { Severity::Warn } else { Severity::Info };
                let mut f = Finding::new(
                    severity,
                    topic,
                    Some(cpu),
                    format!("per-CPU kernel thread {name} ran on CPU {cpu} for {ms:.2} ms: {why}"),
                    evidence,
                );
                if let Some(r) = remedy {
                    f = f.remedy(r);
                }
                f
            }
        };
        findings.push(finding);
    }
    findings
}

/// The name of a process: its main thread's name when known.
fn process_name(input: &CheckInput<'_>, key: i32, first: &ThreadSample) -> String {
    input
        .runs
        .latest(key)
        .map(|t| t.stat.comm.clone())
        .unwrap_or_else(|| first.stat.comm.clone())
}

/// The fix for a user task of a Kubernetes pod running on `list`: the
/// shield leaves pods to the kubelet's CPU manager, whose shared pool must
/// leave those CPUs out.
pub(crate) fn pod_task_remedy(list: &str) -> Remedy {
    Remedy::host(format!(
        "kubelet: static CPU manager with reservedSystemCPUs (--reserved-cpus) including {list} and the CPU manager option strict-cpu-reservation (docs/fleet.md)"
    ))
}

/// What the kernel was booted to do for the checked CPUs: a boot parameter
/// already in effect is not advised again. Empty when not known.
#[derive(Debug, Clone, Default)]
pub(crate) struct BootIsolation {
    /// The nohz_full CPUs.
    pub nohz_full: CpuSet,
    /// The CPUs whose RCU callbacks the kernel offloads.
    pub rcu_offloaded: CpuSet,
}

/// What a bound kernel thread does and what reduces its work on `cpus`,
/// leaving out what the shield in force (`shield`) and the boot (`boot`)
/// already do.
pub(crate) fn bound_kthread_advice(
    comm: &str,
    cpus: &cpushield_cpuset::CpuSet,
    shield: Option<&ShieldInForce>,
    boot: &BootIsolation,
) -> (&'static str, Option<Remedy>) {
    let list = cpus.to_list();
    if comm.starts_with("ksoftirqd/") {
        (
            "softirqs deferred from interrupts on this CPU",
            super::shield_remedy(shield, ShieldKind::Irqs, cpus),
        )
    } else if comm.starts_with("kworker/") {
        // The local-timer shield sets vm.stat_interval to 10 s or more.
        let ltmr_done = shield.is_some_and(|s| cpus.is_subset(s.shielded(ShieldKind::Ltmr)));
        (
            "per-CPU workqueue work (vmstat, LRU drain, ...)",
            (!ltmr_done).then(|| Remedy::runtime("sysctl -w vm.stat_interval=10".to_string())),
        )
    } else if comm.starts_with("rcuc/") || comm.starts_with("rcuop/") || comm.starts_with("rcuog/")
    {
        (
            "RCU callbacks",
            (!cpus.is_subset(&boot.rcu_offloaded))
                .then(|| Remedy::boot(format!("rcu_nocbs={list} rcu_nocb_poll"))),
        )
    } else if comm.starts_with("ktimers/") {
        (
            "this CPU's expired timers (PREEMPT_RT's timer softirq thread)",
            (!cpus.is_subset(&boot.nohz_full)).then(|| Remedy::boot(format!("nohz_full={list}"))),
        )
    } else if comm.starts_with("migration/") {
        (
            "stop-machine work and task migration",
            super::shield_remedy(shield, ShieldKind::Procs, cpus),
        )
    } else {
        ("bound to this CPU by the kernel; it cannot be moved", None)
    }
}
