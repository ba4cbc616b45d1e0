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

/// Threads that ran on a CPU: user threads per process, kernel threads one
/// by one, each with its run time in ns.
type Groups = BTreeMap<(Kind, i32), Vec<(ThreadSample, u64)>>;

pub(super) fn analyze_cpu(input: &CheckInput<'_>, act: &mut CpuActivity) -> Vec<Finding> {
    let cpu = act.cpu;
    // Per-CPU kernel threads bound to this CPU, whether they ran or not.
    act.bound_kthreads = input.bound_kthreads(cpu).to_vec();
    group_runs(input, act)
        .into_iter()
        .map(|((kind, key), threads)| Group::new(input, cpu, key, &threads).finding(kind))
        .collect()
}

/// The key a thread is grouped under: its process for a user thread, itself
/// for a kernel thread.
fn group_key(t: &ThreadSample) -> i32 {
    if t.stat.is_kthread() {
        t.stat.tid
    } else {
        t.pid
    }
}

/// Records each thread that ran on the CPU in `act` and groups them.
fn group_runs(input: &CheckInput<'_>, act: &mut CpuActivity) -> Groups {
    let mut groups = Groups::new();
    for run in input.runs.ran_on(act.cpu) {
        if run.pid == input.self_pid {
            continue;
        }
        let Some(t) = input.runs.latest(run.tid) else {
            continue;
        };
        let kind = classify(t, act.cpu, input.cpus);
        act.tasks.push(TaskActivity {
            pid: t.pid,
            tid: t.stat.tid,
            comm: t.stat.comm.clone(),
            kernel_thread: t.stat.is_kthread(),
            affinity: t.affinity.as_ref().map(|a| a.to_list()).unwrap_or_default(),
            run_ms: run.run_ns as f64 / 1e6,
        });
        groups
            .entry((kind, group_key(t)))
            .or_default()
            .push((t.clone(), run.run_ns));
    }
    groups
}

/// `; N threads: comm (tid) x ms, ...` (the first six) for a group of more
/// than one thread.
fn thread_note(threads: &[(ThreadSample, u64)]) -> String {
    if threads.len() <= 1 {
        return String::new();
    }
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
}

/// Bound kernel threads cannot be moved; they matter when they run long
/// (a tenth of a percent of the interval or more).
fn bound_kthread_severity(share_pct: f64) -> Severity {
    if share_pct >= 0.1 {
        Severity::Warn
    } else {
        Severity::Info
    }
}

/// One group of threads that ran on a checked CPU, as its finding shows it.
struct Group<'a, 'b> {
    input: &'a CheckInput<'b>,
    cpu: usize,
    /// Process (or kernel thread) id.
    key: i32,
    /// Its first thread.
    first: &'a ThreadSample,
    /// Process name.
    name: String,
    /// Run time on the CPU, ms.
    ms: f64,
    /// Share of the interval, percent.
    share: f64,
    /// Affinity list of the first thread.
    aff: String,
    /// Run time, share and affinity as read.
    evidence: String,
}

impl<'a, 'b> Group<'a, 'b> {
    fn new(
        input: &'a CheckInput<'b>,
        cpu: usize,
        key: i32,
        threads: &'a [(ThreadSample, u64)],
    ) -> Self {
        let total_ns: u64 = threads.iter().map(|(_, ns)| ns).sum();
        let ms = total_ns as f64 / 1e6;
        let interval_ms = input.interval_s() * 1e3;
        let share = ms / interval_ms.max(1e-9) * 100.0;
        let first = &threads[0].0;
        let aff = first
            .affinity
            .as_ref()
            .map(|a| a.to_list())
            .unwrap_or_else(|| "unknown (exited before the end)".into());
        let evidence = format!(
            "ran {ms:.2} ms ({share:.2}% of {:.1} s) on CPU {cpu} (run time from /proc/{key}/task/*/schedstat, CPU from stat field 39); affinity {aff}{}",
            input.interval_s(),
            thread_note(threads)
        );
        Group {
            input,
            cpu,
            key,
            first,
            name: process_name(input, key, first),
            ms,
            share,
            aff,
            evidence,
        }
    }

    /// A finding on the CPU about this group.
    fn finding_with(&self, severity: Severity, title: String) -> Finding {
        let topic = if self.first.stat.is_kthread() {
            Topic::KernelThread
        } else {
            Topic::Task
        };
        Finding::new(
            severity,
            topic,
            Some(self.cpu),
            title,
            self.evidence.clone(),
        )
    }

    /// The finding for a group of this kind.
    fn finding(&self, kind: Kind) -> Finding {
        let (input, cpu, key, ms) = (self.input, self.cpu, self.key, self.ms);
        let (name, aff) = (&self.name, &self.aff);
        let hk = input.housekeeping().to_list();
        // Under the process shield a movable thread that still ran here was
        // not moved by it (it widened its affinity since, or the kernel keeps
        // no cpuset around the CPU): moving it by hand is what is left.
        let procs = || {
            input.shield_remedy(ShieldKind::Procs).unwrap_or_else(|| {
                let all = if self.first.stat.is_kthread() {
                    ""
                } else {
                    "-a "
                };
                Remedy::runtime(format!("taskset {all}-pc {hk} {key}"))
            })
        };
        let procs_in_place = || input.in_place(ShieldKind::Procs, cpu);
        match kind {
            Kind::MovableTask => self
                .finding_with(
                    Severity::BreaksShield,
                    format!("task {name} (pid {key}) ran on CPU {cpu} for {ms:.2} ms; it may run on other CPUs"),
                )
                .in_place(procs_in_place())
                .remedy(procs()),
            Kind::MovableKthread => self
                .finding_with(
                    Severity::BreaksShield,
                    format!("kernel thread {name} (pid {key}) ran on CPU {cpu} for {ms:.2} ms; it is not bound there"),
                )
                .in_place(procs_in_place())
                .remedy(procs()),
            Kind::PodTask => self
                .finding_with(
                    Severity::BreaksShield,
                    format!("task {name} (pid {key}) of a Kubernetes pod ran on CPU {cpu} for {ms:.2} ms; the shield leaves pods to the kubelet's CPU manager, whose shared pool still holds CPU {cpu}"),
                )
                .remedy(pod_task_remedy(&input.list())),
            Kind::PinnedTask => self
                .finding_with(
                    Severity::Warn,
                    format!("task {name} (pid {key}) is pinned to CPU {aff} and ran on CPU {cpu} for {ms:.2} ms; a shield keeps it there (if it is not your real-time task, move it)"),
                )
                .remedy(Remedy::runtime(format!("taskset -a -pc {hk} {key}"))),
            Kind::PinnedKthread => self
                .finding_with(
                    Severity::Warn,
                    format!("kernel thread {name} (pid {key}) was pinned to CPU {cpu} and ran there for {ms:.2} ms"),
                )
                .remedy(Remedy::runtime(format!("taskset -pc {hk} {key}"))),
            Kind::BoundKthread => self.bound_kthread(),
        }
    }

    /// A per-CPU kernel thread: what boot isolation would do about it.
    fn bound_kthread(&self) -> Finding {
        let input = self.input;
        let boot = BootIsolation {
            nohz_full: input.facts.nohz_full_cpus(),
            rcu_offloaded: input.rcu_offload().cpus.clone(),
        };
        let (why, remedy) =
            bound_kthread_advice(&self.first.stat.comm, input.cpus, input.shield, &boot);
        let f = self.finding_with(
            bound_kthread_severity(self.share),
            format!(
                "per-CPU kernel thread {} ran on CPU {} for {:.2} ms: {why}",
                self.name, self.cpu, self.ms
            ),
        );
        match remedy {
            Some(r) => f.remedy(r),
            None => f,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_parse::pid_stat::ThreadStat;

    const PF_KTHREAD: u64 = 0x0020_0000;

    fn thread(pid: i32, tid: i32, flags: u64) -> ThreadSample {
        ThreadSample {
            pid,
            stat: ThreadStat {
                tid,
                comm: format!("t{tid}"),
                state: 'R',
                ppid: 1,
                flags,
                utime: 0,
                stime: 0,
                processor: 1,
                rt_priority: 0,
                policy: 0,
            },
            runtime_ns: 0,
            affinity: None,
            in_kubepods: false,
        }
    }

    #[test]
    fn user_threads_group_by_process_and_kernel_threads_by_themselves() {
        assert_eq!(group_key(&thread(10, 12, 0)), 10);
        assert_eq!(group_key(&thread(10, 12, PF_KTHREAD)), 12);
    }

    #[test]
    fn a_group_names_up_to_six_of_its_threads_and_a_lone_thread_none() {
        assert_eq!(thread_note(&[(thread(10, 10, 0), 1_000_000)]), "");
        let many: Vec<_> = (0..8).map(|i| (thread(10, 10 + i, 0), 2_000_000)).collect();
        let note = thread_note(&many);
        assert!(
            note.starts_with("; 8 threads: t10 (10) 2.00 ms, "),
            "{note}"
        );
        assert!(note.contains("t15 (15)") && !note.contains("t16"), "{note}");
    }

    #[test]
    fn a_bound_kernel_thread_warns_from_a_tenth_of_a_percent_of_the_interval() {
        assert_eq!(bound_kthread_severity(0.09), Severity::Info);
        assert_eq!(bound_kthread_severity(0.1), Severity::Warn);
    }
}
