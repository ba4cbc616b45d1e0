//! Configuration that limits the guarantee: enforcement, isolation boot
//! parameters, preemption, throttling, power, timers, workqueues, irqbalance,
//! SMT and steal time.

use super::interrupts::nohz_full_remedy;
use super::{CheckInput, CpuActivity};
use crate::facts::Facts;
use crate::finding::{Finding, Remedy, Severity, Topic};
use crate::target::ShieldKind;
use cpushield_cpuset::CpuSet;
use cpushield_parse::cmdline::param;

/// CPUs in nohz_full mode: sysfs when it says, else the command line.
pub fn nohz_full_cpus(facts: &Facts) -> CpuSet {
    facts.nohz_full_cpus()
}

/// The kernel's preemption model and where that was read: debugfs, the
/// `preempt=` boot parameter of a PREEMPT_DYNAMIC kernel, the build config, or
/// the version string (`uname -v`).
pub fn preempt_model(facts: &Facts) -> (String, String) {
    if let Some(models) = facts
        .preempt_debugfs
        .as_deref()
        .and_then(cpushield_parse::preempt::parse_preempt)
    {
        return (models.current, "/sys/kernel/debug/sched/preempt".into());
    }
    let k = &facts.kconfig;
    let on = |name: &str| k.get(name).map(String::as_str) == Some("y");
    if on("CONFIG_PREEMPT_RT") || facts.kernel_version.contains("PREEMPT_RT") {
        return ("rt".into(), "kernel build".into());
    }
    let dynamic = on("CONFIG_PREEMPT_DYNAMIC") || facts.kernel_version.contains("PREEMPT_DYNAMIC");
    if dynamic {
        if let Some(v) = param(&facts.cmdline, "preempt") {
            return (v.to_string(), "preempt= on /proc/cmdline".into());
        }
    }
    let src = facts.kconfig_source.clone().unwrap_or_default();
    for (opt, model) in [
        ("CONFIG_PREEMPT_LAZY", "lazy"),
        ("CONFIG_PREEMPT", "full"),
        ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
        ("CONFIG_PREEMPT_NONE", "none"),
    ] {
        if on(opt) {
            return (model.into(), format!("{opt}=y in {src} (the boot default)"));
        }
    }
    if facts.kernel_version.contains("PREEMPT ") || facts.kernel_version.ends_with("PREEMPT") {
        return ("full".into(), "uname -v".into());
    }
    (
        "unknown".into(),
        "no debugfs, kernel config or version hint".into(),
    )
}

pub(super) fn analyze_cpu(input: &CheckInput<'_>, act: &mut CpuActivity) -> Vec<Finding> {
    let cpu = act.cpu;
    let mut findings = Vec::new();
    let facts = input.facts;
    let list = input.list();
    let cpu_facts = facts.cpus.get(&cpu);

    // Busy share and steal time from /proc/stat.
    let (Some(a), Some(b)) = (
        input.before.cpu_times.get(&cpu),
        input.after.cpu_times.get(&cpu),
    ) else {
        return findings;
    };
    let d = b.since(a);
    let tick_ms = 1000.0 / input.after.user_hz as f64;
    act.busy_pct = if d.total() > 0 {
        d.busy().saturating_sub(d.steal) as f64 / d.total() as f64 * 100.0
    } else {
        0.0
    };
    act.steal_ms = d.steal as f64 * tick_ms;
    if d.steal > 0 {
        findings.push(
            Finding::new(
                Severity::Warn,
                Topic::Steal,
                Some(cpu),
                format!(
                    "the hypervisor took {:.0} ms from CPU {cpu} in {:.1} s (steal time): outside the kernel's control",
                    act.steal_ms,
                    input.interval_s()
                ),
                format!("/proc/stat cpu{cpu} steal +{} ticks of {tick_ms:.0} ms", d.steal),
            )
            .remedy(Remedy::host("dedicate and pin host cores to this VM's vCPUs (no guest-side fix)")),
        );
    }

    findings.extend(steal_with_io(input, cpu));

    // Enforcement by cpusets.
    enforcement(input, cpu, &mut findings);

    // Isolation boot parameters.
    let nohz = nohz_full_cpus(facts);
    if !nohz.contains(cpu) {
        findings.push(
            Finding::new(
                Severity::Warn,
                Topic::Isolation,
                Some(cpu),
                format!("CPU {cpu} is not nohz_full: the scheduler tick interrupts it every jiffy"),
                format!(
                    "/sys/devices/system/cpu/nohz_full: {}; CONFIG_NO_HZ_FULL={}",
                    facts.nohz_full.as_deref().unwrap_or("absent"),
                    facts
                        .kconfig
                        .get("CONFIG_NO_HZ_FULL")
                        .map(String::as_str)
                        .unwrap_or("?")
                ),
            )
            .remedy(nohz_full_remedy(input, &list)),
        );
    }
    let offload = input.rcu_offload();
    if !offload.cpus.contains(cpu) {
        // The command line may ask for it while the kernel did not offload.
        let (title, evidence) = if facts.rcu_offloaded_cpus().contains(cpu) {
            (
                format!("RCU callbacks of CPU {cpu} run on it: the command line asks to offload them, but the kernel did not"),
                format!(
                    "/proc/cmdline has rcu_nocbs= or nohz_full= covering {cpu}, but {}",
                    offload.evidence
                ),
            )
        } else {
            (
                format!("RCU callbacks of CPU {cpu} run on it (no rcu_nocbs)"),
                format!("/proc/cmdline has no rcu_nocbs= or nohz_full= covering {cpu}"),
            )
        };
        findings.push(
            Finding::new(Severity::Warn, Topic::Isolation, Some(cpu), title, evidence)
                .remedy(Remedy::boot(format!("rcu_nocbs={list} rcu_nocb_poll"))),
        );
    }
    let isolated = facts
        .isolated
        .as_deref()
        .and_then(|s| CpuSet::parse_list(s).ok())
        .unwrap_or_default();
    if !isolated.contains(cpu) {
        findings.push(
            Finding::new(
                Severity::Info,
                Topic::Isolation,
                Some(cpu),
                format!("CPU {cpu} is not in isolcpus: managed IRQs and the boot-time scheduler domains include it"),
                format!("/sys/devices/system/cpu/isolated: '{}'", facts.isolated.as_deref().unwrap_or("")),
            )
            .remedy(Remedy::boot(format!("isolcpus=managed_irq,domain,{list}"))),
        );
    }

    // Device IRQs that may be delivered here even if none came in the interval.
    findings.extend(super::irqs::may_be_delivered(input, cpu));

    // Power: frequency governor and idle states.
    if let Some(cf) = cpu_facts {
        match cf.governor.as_deref() {
            Some("performance") | None => {}
            Some(g) => findings.push(
                Finding::new(
                    Severity::Warn,
                    Topic::Power,
                    Some(cpu),
                    format!("CPU {cpu} frequency governor is '{g}': frequency changes add latency"),
                    format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor = {g}"),
                )
                .remedy(Remedy::runtime(format!(
                    "echo performance > /sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
                ))),
            ),
        }
        let deep: Vec<String> = cf
            .idle_states
            .iter()
            .filter(|s| !s.disabled && s.latency_us > 10)
            .map(|s| format!("{} ({}, exit {} us)", s.id, s.name, s.latency_us))
            .collect();
        if !deep.is_empty() {
            let first_deep = cf
                .idle_states
                .iter()
                .find(|s| !s.disabled && s.latency_us > 10)
                .map(|s| s.id.clone())
                .unwrap_or_default();
            findings.push(
                Finding::new(
                    Severity::Warn,
                    Topic::Power,
                    Some(cpu),
                    format!("CPU {cpu} may enter deep idle states whose exit delays a wakeup"),
                    format!("enabled: {}", deep.join(", ")),
                )
                .remedy(Remedy::runtime("hold /dev/cpu_dma_latency at 0 while the real-time task runs (cpushield run and measure do)".to_string()))
                .remedy(Remedy::runtime(format!("echo 1 > /sys/devices/system/cpu/cpu{cpu}/cpuidle/{first_deep}/disable (and each deeper state)")))
                .remedy(Remedy::boot("processor.max_cstate=1 intel_idle.max_cstate=0")),
            );
        }

        if let Some(f) = halting_vcpu(facts, cpu) {
            findings.push(f);
        }

        // SMT siblings outside the checked set.
        if let Some(sibs) = &cf.siblings {
            for sib in sibs.difference(input.cpus).iter() {
                let busy = match (
                    input.before.cpu_times.get(&sib),
                    input.after.cpu_times.get(&sib),
                ) {
                    (Some(a), Some(b)) => {
                        let d = b.since(a);
                        if d.total() > 0 {
                            d.busy() as f64 / d.total() as f64 * 100.0
                        } else {
                            0.0
                        }
                    }
                    _ => 0.0,
                };
                let severity = if busy >= 5.0 {
                    Severity::Warn
                } else {
                    Severity::Info
                };
                findings.push(
                    Finding::new(
                        severity,
                        Topic::Smt,
                        Some(cpu),
                        format!("CPU {cpu} shares its core with CPU {sib}, which is not checked/shielded and was {busy:.0}% busy"),
                        format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list = {}", sibs.to_list()),
                    )
                    .remedy_if(whole_cores_remedy(input, sibs))
                    .remedy(Remedy::boot("nosmt")),
                );
            }
        }
    }
    findings
}

/// `cpushield shield --all` with the checked CPUs and their siblings, unless
/// the shield in force covers them all from everything already.
fn whole_cores_remedy(input: &CheckInput<'_>, siblings: &CpuSet) -> Option<Remedy> {
    let want = input.cpus.union(siblings);
    let covered = input.shield.is_some_and(|s| {
        [ShieldKind::Procs, ShieldKind::Irqs, ShieldKind::Ltmr]
            .iter()
            .all(|k| want.is_subset(s.shielded(*k)))
    });
    (!covered).then(|| Remedy::cpushield(format!("cpushield shield --all {}", want.to_list())))
}

/// A virtual CPU whose idle loop halts hands itself back to the host: the next
/// timer wakeup waits until the host runs it again (milliseconds when the host
/// is busy). `haltpoll` polls first; `idle=poll` never halts.
fn halting_vcpu(facts: &Facts, cpu: usize) -> Option<Finding> {
    let driver = facts.idle_driver.as_deref().unwrap_or("none");
    if !cpushield_parse::cpuinfo::halts_into_hypervisor(facts.hypervisor, driver, &facts.cmdline) {
        return None;
    }
    Some(
        Finding::new(
            Severity::Warn,
            Topic::Power,
            Some(cpu),
            format!("CPU {cpu} is a virtual CPU that halts when idle: a wakeup from idle waits for the host to run it again (milliseconds on a busy host); polling instead can be worse, because a vCPU that never halts competes on the host with the VM's own I/O emulation"),
            format!("/proc/cpuinfo flags: hypervisor; cpuidle driver: {driver}; no idle=poll on /proc/cmdline"),
        )
        .remedy(Remedy::cpushield(format!("cpushield compare --cpus {cpu} --idle auto (measures halting and polling under your load and keeps the better; use run --idle-poll only where it wins)")))
        .remedy(Remedy::cpushield(format!("cpushield run --cpus {cpu} --idle-poll -- <task> (keeps the CPU polling while the task lives)")))
        .remedy(Remedy::boot("cpuidle_haltpoll.force=1 haltpoll.guest_halt_poll_ns=1000000 (or idle=poll)"))
        .remedy(Remedy::host("dedicate and pin host cores to this VM's vCPUs")),
    )
}

/// Steal on a checked CPU that rises while the disks are busy: the host runs
/// the VM's I/O emulation where this vCPU would run. A vCPU that never halts
/// (polling) competes with it harder.
fn steal_with_io(input: &CheckInput<'_>, cpu: usize) -> Option<Finding> {
    let samples = input.runs.activity();
    let (mut io_n, mut io_steal, mut quiet_n, mut quiet_steal) = (0u64, 0u64, 0u64, 0u64);
    for w in samples.windows(2) {
        let steal = match (w[0].cpu_times.get(&cpu), w[1].cpu_times.get(&cpu)) {
            (Some(a), Some(b)) => b.since(a).steal,
            _ => continue,
        };
        if w[1].disk_busy_ms > w[0].disk_busy_ms {
            io_n += 1;
            io_steal += steal;
        } else {
            quiet_n += 1;
            quiet_steal += steal;
        }
    }
    let rate = |steal: u64, n: u64| steal as f64 / n.max(1) as f64;
    let (with_io, without) = (rate(io_steal, io_n), rate(quiet_steal, quiet_n));
    if io_n < 3 || io_steal == 0 || with_io < 2.0 * without {
        return None;
    }
    let tick_ms = 1000.0 / input.after.user_hz.max(1) as f64;
    let hk = input.housekeeping().to_list();
    Some(
        Finding::new(
            Severity::Warn,
            Topic::Steal,
            Some(cpu),
            format!("steal on CPU {cpu} rises while the disks are busy: the host runs this VM's I/O emulation where CPU {cpu}'s vCPU would run"),
            format!(
                "{:.0} ms stolen in {io_n} samples with disk I/O vs {:.0} ms in {quiet_n} without (/proc/stat steal, /proc/diskstats io_ticks, every sample ~{} ms)",
                io_steal as f64 * tick_ms,
                quiet_steal as f64 * tick_ms,
                input.interval_s() * 1000.0 / samples.len().max(1) as f64
            ),
        )
        .remedy(Remedy::cpushield(format!(
            "keep CPU {cpu} halting when idle: no --idle-poll (cpushield compare --cpus {cpu} --idle auto measures which is better here)"
        )))
        .remedy(Remedy::runtime(format!(
            "lower the I/O priority of the disk-heavy work on CPUs {hk} (ionice -c3 -p PID), or run it outside the real-time work's critical periods"
        )))
        .remedy(Remedy::host("give the VM's I/O emulation threads host cores of their own, apart from the vCPUs")),
    )
}

fn enforcement(input: &CheckInput<'_>, cpu: usize, findings: &mut Vec<Finding>) {
    let list = input.list();
    let sets = &input.facts.cpusets;
    // Under the process shield, `shield --procs` again would change nothing
    // here: the findings say what the kernel does not enforce.
    // A shield set up inside a PID namespace leaves the root cpuset (and
    // the tasks outside) as they were: shielding the whole system is left.
    let procs = input.shield_remedy(ShieldKind::Procs).or_else(|| {
        input
            .shield
            .is_some_and(|s| s.scope == cpushield_shield::snapshot::Scope::Namespace)
            .then(|| {
                Remedy::cpushield(format!(
                    "cpushield reset, then cpushield shield --procs {list} from the initial PID namespace (a shield set up inside a PID namespace leaves the root cpuset and the tasks outside as they are)"
                ))
            })
    });
    let procs_in_place = input.in_place(ShieldKind::Procs, cpu);
    // cgroup v2: an isolated (or root) partition holding the CPU.
    if let Some(p) = sets
        .iter()
        .find(|c| !c.is_root && c.cpus.contains(cpu) && c.isolation.is_valid_partition())
    {
        findings.push(Finding::new(
            Severity::Info,
            Topic::Enforcement,
            Some(cpu),
            format!(
                "CPU {cpu} is kernel-enforced by the cgroup v2 partition {}",
                p.path.display()
            ),
            format!(
                "cpuset.cpus.partition = {}",
                p.isolation.partition().unwrap_or("")
            ),
        ));
        return;
    }
    if let Some(p) = sets
        .iter()
        .find(|c| c.cpus.contains(cpu) && c.isolation.is_invalid_partition())
    {
        findings.push(
            Finding::new(
                Severity::BreaksShield,
                Topic::Enforcement,
                Some(cpu),
                format!("the cgroup v2 partition {} holding CPU {cpu} is invalid: the kernel does not enforce it", p.path.display()),
                format!("cpuset.cpus.partition = {}", p.isolation.partition().unwrap_or("")),
            )
            .in_place(procs_in_place)
            .remedy_if(procs),
        );
        return;
    }
    // cgroup v1: an exclusive cpuset without load balancing, and the root not balancing either.
    let root = sets.iter().find(|c| c.is_root);
    let root_lb = root.and_then(|c| c.isolation.load_balance());
    if let Some(s) = sets
        .iter()
        .find(|c| !c.is_root && c.cpus.contains(cpu) && c.isolation.is_exclusive_unbalanced())
    {
        if root_lb == Some(false) {
            let root_tasks = root
                .and_then(|c| c.tasks.as_ref())
                .map(|t| {
                    t.iter()
                        .filter(|tid| {
                            input
                                .runs
                                .latest(**tid)
                                .is_some_and(|s| !s.stat.is_kthread())
                        })
                        .count()
                })
                .unwrap_or(0);
            if root_tasks > 0 {
                findings.push(
                    Finding::new(
                        Severity::Warn,
                        Topic::Enforcement,
                        Some(cpu),
                        format!("{root_tasks} user threads are still in the root cpuset, which spans CPU {cpu}"),
                        format!("{}/tasks", root.map(|c| c.path.display().to_string()).unwrap_or_default()),
                    )
                    .in_place(procs_in_place)
                    .remedy(match procs {
                        Some(r) => r,
                        // The shield moves tasks it finds outside its cpusets
                        // each time it is applied.
                        None => Remedy::cpushield(format!(
                            "cpushield shield --procs {list} (applies the shield again, to the threads that entered the root cpuset since)"
                        )),
                    }),
                );
            } else {
                findings.push(Finding::new(
                    Severity::Info,
                    Topic::Enforcement,
                    Some(cpu),
                    format!(
                        "CPU {cpu} is kernel-enforced by the exclusive cgroup v1 cpuset {}",
                        s.path.display()
                    ),
                    "cpu_exclusive=1, sched_load_balance=0; root sched_load_balance=0".to_string(),
                ));
            }
            return;
        }
    }
    let seen: Vec<String> = sets
        .iter()
        .filter(|c| c.cpus.contains(cpu))
        .map(|c| {
            format!(
                "v{} {} cpus={}{}",
                c.isolation.version(),
                c.path.display(),
                c.cpus.to_list(),
                c.isolation.settings()
            )
        })
        .collect();
    findings.push(
        Finding::new(
            Severity::Warn,
            Topic::Enforcement,
            Some(cpu),
            format!("the kernel does not keep new tasks off CPU {cpu}: no isolated cpuset partition or exclusive non-balancing cpuset holds it"),
            if seen.is_empty() { "no cpuset hierarchy found in /proc/self/mountinfo".to_string() } else { seen.join("; ") },
        )
        .in_place(procs_in_place)
        .remedy_if(procs),
    );
}

pub(super) fn analyze_system(input: &CheckInput<'_>, findings: &mut Vec<Finding>) {
    let facts = input.facts;
    let list = input.list();
    let hk = input.housekeeping();

    let (model, source) = preempt_model(facts);
    let (sev, title) = match model.as_str() {
        "none" | "voluntary" => (
            Severity::Warn,
            format!("kernel preemption model is '{model}': a task inside a system call keeps its CPU until it returns or calls cond_resched()"),
        ),
        "unknown" => (Severity::Info, "kernel preemption model unknown".to_string()),
        _ => (Severity::Info, format!("kernel preemption model is '{model}'")),
    };
    let mut f = Finding::new(
        sev,
        Topic::Preemption,
        None,
        title,
        format!("from {source}; uname -v: {}", facts.kernel_version),
    );
    if sev == Severity::Warn {
        let dynamic = facts
            .kconfig
            .get("CONFIG_PREEMPT_DYNAMIC")
            .map(String::as_str)
            == Some("y")
            || facts.kernel_version.contains("PREEMPT_DYNAMIC");
        if dynamic {
            f = f
                .remedy(Remedy::runtime(
                    "echo full > /sys/kernel/debug/sched/preempt (debugfs mounted)",
                ))
                .remedy(Remedy::boot("preempt=full"));
        } else {
            f = f.remedy(Remedy::boot(
                "a kernel built with CONFIG_PREEMPT=y or CONFIG_PREEMPT_RT=y",
            ));
        }
    }
    findings.push(f);

    match facts.rt_runtime_us {
        Some(rt) if rt >= 0 => findings.push(
            Finding::new(
                Severity::Warn,
                Topic::RtThrottling,
                None,
                format!(
                    "RT throttling is on: real-time tasks are stopped after {} ms of each {} ms",
                    rt / 1000,
                    facts.rt_period_us.unwrap_or(1_000_000) / 1000
                ),
                format!("kernel.sched_rt_runtime_us = {rt}"),
            )
            .remedy(Remedy::runtime("sysctl -w kernel.sched_rt_runtime_us=-1")),
        ),
        _ => {}
    }

    // With timer migration on, a timer armed while a CPU is idle may be queued
    // on a busy CPU instead (the kernel's get_nohz_timer_target): the
    // local-timer shield turns it on for that reason, so check advises the
    // same, and nothing when it is already on. Whether it helps on a given
    // machine is measured by `cpushield tune` (its timer-migration knob).
    let ltmr_on_all = input
        .shield
        .is_some_and(|s| input.cpus.is_subset(s.shielded(ShieldKind::Ltmr)));
    if facts.timer_migration == Some(0) && !ltmr_on_all {
        findings.push(
            Finding::new(
                Severity::Info,
                Topic::Timers,
                None,
                "timer migration is off: a timer armed while the CPU is idle stays on it"
                    .to_string(),
                "kernel.timer_migration = 0".to_string(),
            )
            .remedy(Remedy::runtime(format!(
                "cpushield shield --ltmr {}",
                input.cpus.to_list()
            ))),
        );
    }

    if let Some(mask) = &facts.workqueue_cpumask {
        let hit = mask.intersection(input.cpus);
        if !hit.is_empty() && !hk.is_empty() {
            findings.push(
                Finding::new(
                    Severity::Warn,
                    Topic::Workqueue,
                    None,
                    format!("unbound workqueue work may run on CPU {}", hit.to_list()),
                    format!(
                        "/sys/devices/virtual/workqueue/cpumask = {}",
                        mask.to_mask()
                    ),
                )
                .remedy_if(input.shield_remedy(ShieldKind::Procs))
                .remedy(Remedy::runtime(format!(
                    "echo {} > /sys/devices/virtual/workqueue/cpumask",
                    hk.to_mask()
                ))),
            );
        }
    }

    if let Some(mask) = &facts.default_irq_affinity {
        let hit = mask.intersection(input.cpus);
        if !hit.is_empty() && !hk.is_empty() {
            findings.push(
                Finding::new(
                    Severity::Warn,
                    Topic::Irq,
                    None,
                    format!("new IRQs will be allowed on CPU {}", hit.to_list()),
                    format!("/proc/irq/default_smp_affinity = {}", mask.to_mask()),
                )
                .remedy_if(input.shield_remedy(ShieldKind::Irqs))
                .remedy(Remedy::runtime(format!(
                    "echo {} > /proc/irq/default_smp_affinity",
                    hk.to_mask()
                ))),
            );
        }
    }

    let irqbalance: Vec<i32> = input
        .runs
        .all_latest()
        .filter(|t| t.stat.tid == t.pid && t.stat.comm == "irqbalance")
        .map(|t| t.pid)
        .collect();
    if !irqbalance.is_empty() {
        findings.push(
            Finding::new(
                Severity::BreaksShield,
                Topic::Irqbalance,
                None,
                format!(
                    "irqbalance is running (pid {}): it moves IRQs back onto shielded CPUs",
                    join(&irqbalance)
                ),
                "/proc/*/comm = irqbalance".to_string(),
            )
            .remedy(Remedy::runtime("systemctl stop irqbalance"))
            .remedy(Remedy::runtime(format!(
                "IRQBALANCE_BANNED_CPULIST={list} in /etc/default/irqbalance"
            ))),
        );
    }
}

fn join<T: ToString>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
