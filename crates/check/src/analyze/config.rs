//! Configuration that limits the guarantee: enforcement, isolation boot
//! parameters, preemption, throttling, power, timers, workqueues, irqbalance,
//! SMT and steal time.

use super::interrupts::nohz_full_remedy;
use super::{join, CheckInput, CpuActivity};
use crate::facts::{CpuFacts, CpusetInfo, Facts, IdleState};
use crate::finding::{Finding, Remedy, Severity, Topic};
use crate::target::ShieldKind;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::paths::{self, CMDLINE, CPUINFO, ISOLATED, NOHZ_FULL, STAT};
use cpushield_kernel::procfs::PROC;
use cpushield_parse::cmdline::param;
use cpushield_parse::stat::CpuTimes;

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
        return (models.current, paths::PREEMPT.into());
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
    // Busy share and steal time from /proc/stat.
    let (Some(a), Some(b)) = (
        input.before.cpu_times.get(&cpu),
        input.after.cpu_times.get(&cpu),
    ) else {
        return Vec::new();
    };
    let mut findings = Vec::new();
    findings.extend(busy_and_steal(input, act, &b.since(a)));
    findings.extend(host_held_off(input, cpu));
    findings.extend(steal_with_io(input, cpu));
    enforcement(input, cpu, &mut findings);
    findings.extend(isolation_params(input, cpu));
    // Device IRQs that may be delivered here even if none came in the interval.
    findings.extend(super::irqs::may_be_delivered(input, cpu));
    if let Some(cf) = input.facts.cpus.get(&cpu) {
        findings.extend(governor(cpu, cf));
        findings.extend(deep_idle(cpu, cf));
        findings.extend(halting_vcpu(input.facts, cpu));
        findings.extend(smt_siblings(input, cpu, cf));
    }
    findings
}

/// Share of the interval a CPU ran something, steal excluded (the guest did
/// not run then), in percent.
fn busy_pct_without_steal(d: &CpuTimes) -> f64 {
    if d.total() > 0 {
        d.busy().saturating_sub(d.steal) as f64 / d.total() as f64 * 100.0
    } else {
        0.0
    }
}

/// Records the CPU's busy share and steal in `act`; a finding when the
/// hypervisor stole time.
fn busy_and_steal(input: &CheckInput<'_>, act: &mut CpuActivity, d: &CpuTimes) -> Option<Finding> {
    let cpu = act.cpu;
    let tick_ms = 1000.0 / input.after.user_hz as f64;
    act.busy_pct = busy_pct_without_steal(d);
    act.steal_ms = d.steal as f64 * tick_ms;
    (d.steal > 0).then(|| {
        Finding::new(
            Severity::Warn,
            Topic::Steal,
            Some(cpu),
            format!(
                "the hypervisor took {:.0} ms from CPU {cpu} in {:.1} s (steal time): outside the kernel's control",
                act.steal_ms,
                input.interval_s()
            ),
            format!(
                "{STAT} cpu{cpu} steal +{} ticks of {tick_ms:.0} ms{}",
                d.steal,
                match input.host {
                    super::HostSaid::Absent(hint) => format!("; {hint}"),
                    _ => String::new(),
                }
            ),
        )
        .remedy(Remedy::host(PIN_VCPUS))
    })
}

/// The fix for time the host takes from a vCPU.
const PIN_VCPUS: &str = "dedicate and pin host cores to this VM's vCPUs (no guest-side fix)";

/// Held-off time shorter than this in a check's interval is not a finding:
/// a vCPU thread is switched out for microseconds at a time on any host.
const HOST_HELD_OFF_NS: u64 = 1_000_000;

/// What the VM's host side saw keep this vCPU from running: a finding when
/// it held the vCPU off for a millisecond or more, with the host's account
/// (what ran on its host CPU instead); where the host's view of the
/// interval is missing, a note that says so.
fn host_held_off(input: &CheckInput<'_>, cpu: usize) -> Option<Finding> {
    let super::HostSaid::Held(per_cpu) = input.host else {
        return None;
    };
    match per_cpu.get(&cpu)? {
        Ok((ns, _)) if *ns < HOST_HELD_OFF_NS => None,
        Ok((ns, line)) => Some(
            Finding::new(
                Severity::Warn,
                Topic::Steal,
                Some(cpu),
                format!(
                    "the host held vCPU {cpu} off {} in {:.1} s: time outside the guest, outside the kernel's control",
                    cpushield_cpuset::fmt_ns(*ns),
                    input.interval_s()
                ),
                line.clone(),
            )
            .remedy(Remedy::host(PIN_VCPUS)),
        ),
        Err(why) => Some(Finding::new(
            Severity::Info,
            Topic::Steal,
            Some(cpu),
            format!("the host side's view of vCPU {cpu} is missing"),
            why.clone(),
        )),
    }
}

/// Isolation boot parameters the CPU lacks: nohz_full, RCU offload, isolcpus.
fn isolation_params(input: &CheckInput<'_>, cpu: usize) -> Vec<Finding> {
    let facts = input.facts;
    let list = input.list();
    let mut findings = Vec::new();
    let nohz = nohz_full_cpus(facts);
    if !nohz.contains(cpu) {
        findings.push(
            Finding::new(
                Severity::Warn,
                Topic::Isolation,
                Some(cpu),
                format!("CPU {cpu} is not nohz_full: the scheduler tick interrupts it every jiffy"),
                format!(
                    "{NOHZ_FULL}: {}; CONFIG_NO_HZ_FULL={}",
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
                    "{CMDLINE} has rcu_nocbs= or nohz_full= covering {cpu}, but {}",
                    offload.evidence
                ),
            )
        } else {
            (
                format!("RCU callbacks of CPU {cpu} run on it (no rcu_nocbs)"),
                format!("{CMDLINE} has no rcu_nocbs= or nohz_full= covering {cpu}"),
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
                format!("{ISOLATED}: '{}'", facts.isolated.as_deref().unwrap_or("")),
            )
            .remedy(Remedy::boot(format!("isolcpus=managed_irq,domain,{list}"))),
        );
    }
    findings
}

/// A frequency governor other than `performance` changes the clock under
/// the real-time task.
fn governor(cpu: usize, cf: &CpuFacts) -> Option<Finding> {
    match cf.governor.as_deref() {
        Some("performance") | None => None,
        Some(g) => Some(
            Finding::new(
                Severity::Warn,
                Topic::Power,
                Some(cpu),
                format!("CPU {cpu} frequency governor is '{g}': frequency changes add latency"),
                format!(
                    "{} = {g}",
                    paths::cpu_file(cpu, "cpufreq/scaling_governor").display()
                ),
            )
            .remedy(Remedy::runtime(format!(
                "echo performance > /sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor"
            ))),
        ),
    }
}

/// Enabled idle states whose exit takes over 10 us, shallowest first as the
/// kernel lists them.
fn deep_idle_states(cf: &CpuFacts) -> Vec<&IdleState> {
    cf.idle_states
        .iter()
        .filter(|s| !s.disabled && s.latency_us > 10)
        .collect()
}

/// Deep idle states the CPU may enter: their exit delays a wakeup.
fn deep_idle(cpu: usize, cf: &CpuFacts) -> Option<Finding> {
    let deep_states = deep_idle_states(cf);
    let first_deep = deep_states.first()?.id.clone();
    let deep: Vec<String> = deep_states
        .iter()
        .map(|s| format!("{} ({}, exit {} us)", s.id, s.name, s.latency_us))
        .collect();
    Some(
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
    )
}

/// Busy share of a CPU over the interval, in percent (0 when unknown).
fn busy_pct(before: Option<&CpuTimes>, after: Option<&CpuTimes>) -> f64 {
    match (before, after) {
        (Some(a), Some(b)) => {
            let d = b.since(a);
            if d.total() > 0 {
                d.busy() as f64 / d.total() as f64 * 100.0
            } else {
                0.0
            }
        }
        _ => 0.0,
    }
}

/// A sibling busy 5% of the time or more competes for the core enough to warn.
fn sibling_severity(busy_pct: f64) -> Severity {
    if busy_pct >= 5.0 {
        Severity::Warn
    } else {
        Severity::Info
    }
}

/// SMT siblings outside the checked set share the core with the CPU.
fn smt_siblings(input: &CheckInput<'_>, cpu: usize, cf: &CpuFacts) -> Vec<Finding> {
    let Some(sibs) = &cf.siblings else {
        return Vec::new();
    };
    sibs.difference(input.cpus)
        .iter()
        .map(|sib| {
            let busy = busy_pct(
                input.before.cpu_times.get(&sib),
                input.after.cpu_times.get(&sib),
            );
            Finding::new(
                sibling_severity(busy),
                Topic::Smt,
                Some(cpu),
                format!("CPU {cpu} shares its core with CPU {sib}, which is not checked/shielded and was {busy:.0}% busy"),
                format!("{} = {}", paths::thread_siblings(cpu).display(), sibs.to_list()),
            )
            .remedy_if(whole_cores_remedy(input, sibs))
            .remedy(Remedy::boot("nosmt"))
        })
        .collect()
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
            format!("{CPUINFO} flags: hypervisor; cpuidle driver: {driver}; no idle=poll on {CMDLINE}"),
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

/// What keeps other tasks off a CPU, as the cpusets say.
#[derive(Debug)]
enum Enforcer<'a> {
    /// A valid cgroup v2 partition (not the root) holds it.
    Partition(&'a CpusetInfo),
    /// A cgroup v2 partition holding it is invalid: the kernel enforces nothing.
    InvalidPartition(&'a CpusetInfo),
    /// An exclusive, non-balancing cgroup v1 cpuset holds it and the root
    /// does not balance either.
    Exclusive {
        /// The exclusive cpuset.
        set: &'a CpusetInfo,
        /// The hierarchy's root.
        root: Option<&'a CpusetInfo>,
    },
    /// Nothing the kernel enforces.
    Nothing,
}

/// The first cpuset that enforces (or fails to enforce) the CPU, in the
/// order a partition, an invalid partition, an exclusive v1 cpuset.
fn enforcer(sets: &[CpusetInfo], cpu: usize) -> Enforcer<'_> {
    if let Some(p) = sets
        .iter()
        .find(|c| !c.is_root && c.cpus.contains(cpu) && c.isolation.is_valid_partition())
    {
        return Enforcer::Partition(p);
    }
    if let Some(p) = sets
        .iter()
        .find(|c| c.cpus.contains(cpu) && c.isolation.is_invalid_partition())
    {
        return Enforcer::InvalidPartition(p);
    }
    let root = sets.iter().find(|c| c.is_root);
    let root_lb = root.and_then(|c| c.isolation.load_balance());
    match sets
        .iter()
        .find(|c| !c.is_root && c.cpus.contains(cpu) && c.isolation.is_exclusive_unbalanced())
    {
        Some(set) if root_lb == Some(false) => Enforcer::Exclusive { set, root },
        _ => Enforcer::Nothing,
    }
}

/// The remedy that keeps processes off the checked CPUs: the process shield,
/// or, for a shield set up inside a PID namespace, one from the initial one.
fn procs_remedy(input: &CheckInput<'_>) -> Option<Remedy> {
    let list = input.list();
    // Under the process shield, `shield --procs` again would change nothing
    // here: the findings say what the kernel does not enforce.
    // A shield set up inside a PID namespace leaves the root cpuset (and
    // the tasks outside) as they were: shielding the whole system is left.
    input.shield_remedy(ShieldKind::Procs).or_else(|| {
        input
            .shield
            .is_some_and(|s| s.scope == cpushield_shield::snapshot::Scope::Namespace)
            .then(|| {
                Remedy::cpushield(format!(
                    "cpushield reset, then cpushield shield --procs {list} from the initial PID namespace (a shield set up inside a PID namespace leaves the root cpuset and the tasks outside as they are)"
                ))
            })
    })
}

/// Whether the kernel keeps new tasks off the CPU, by a cpuset.
fn enforcement(input: &CheckInput<'_>, cpu: usize, findings: &mut Vec<Finding>) {
    let procs = procs_remedy(input);
    let procs_in_place = input.in_place(ShieldKind::Procs, cpu);
    let finding = match enforcer(&input.facts.cpusets, cpu) {
        Enforcer::Partition(p) => Finding::new(
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
        ),
        Enforcer::InvalidPartition(p) => Finding::new(
            Severity::BreaksShield,
            Topic::Enforcement,
            Some(cpu),
            format!("the cgroup v2 partition {} holding CPU {cpu} is invalid: the kernel does not enforce it", p.path.display()),
            format!("cpuset.cpus.partition = {}", p.isolation.partition().unwrap_or("")),
        )
        .in_place(procs_in_place)
        .remedy_if(procs),
        Enforcer::Exclusive { set, root } => exclusive(input, cpu, set, root, procs, procs_in_place),
        Enforcer::Nothing => not_enforced(input, cpu, procs, procs_in_place),
    };
    findings.push(finding);
}

/// User threads (not kernel threads) among `tids`, as last sampled.
fn user_threads(input: &CheckInput<'_>, tids: &[i32]) -> usize {
    tids.iter()
        .filter(|tid| {
            input
                .runs
                .latest(**tid)
                .is_some_and(|s| !s.stat.is_kthread())
        })
        .count()
}

/// An exclusive cgroup v1 cpuset holds the CPU: enforced, unless user
/// threads are still in the root cpuset that spans it.
fn exclusive(
    input: &CheckInput<'_>,
    cpu: usize,
    set: &CpusetInfo,
    root: Option<&CpusetInfo>,
    procs: Option<Remedy>,
    procs_in_place: Option<String>,
) -> Finding {
    let root_tasks = root
        .and_then(|c| c.tasks.as_ref())
        .map(|t| user_threads(input, t))
        .unwrap_or(0);
    if root_tasks == 0 {
        return Finding::new(
            Severity::Info,
            Topic::Enforcement,
            Some(cpu),
            format!(
                "CPU {cpu} is kernel-enforced by the exclusive cgroup v1 cpuset {}",
                set.path.display()
            ),
            "cpu_exclusive=1, sched_load_balance=0; root sched_load_balance=0".to_string(),
        );
    }
    let list = input.list();
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
    })
}

/// No cpuset keeps new tasks off the CPU: the cpusets that hold it, as evidence.
fn not_enforced(
    input: &CheckInput<'_>,
    cpu: usize,
    procs: Option<Remedy>,
    procs_in_place: Option<String>,
) -> Finding {
    let seen: Vec<String> = input
        .facts
        .cpusets
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
    Finding::new(
        Severity::Warn,
        Topic::Enforcement,
        Some(cpu),
        format!("the kernel does not keep new tasks off CPU {cpu}: no isolated cpuset partition or exclusive non-balancing cpuset holds it"),
        if seen.is_empty() { "no cpuset hierarchy found in /proc/self/mountinfo".to_string() } else { seen.join("; ") },
    )
    .in_place(procs_in_place)
    .remedy_if(procs)
}

pub(super) fn analyze_system(input: &CheckInput<'_>, findings: &mut Vec<Finding>) {
    findings.push(preemption(input.facts));
    findings.extend(rt_throttling(input.facts));
    findings.extend(timer_migration(input));
    findings.extend(workqueue_mask(input));
    findings.extend(default_irq_affinity(input));
    findings.extend(irqbalance(input));
}

/// How much a preemption model limits the guarantee, and the title saying so.
fn preempt_verdict(model: &str) -> (Severity, String) {
    match model {
        "none" | "voluntary" => (
            Severity::Warn,
            format!("kernel preemption model is '{model}': a task inside a system call keeps its CPU until it returns or calls cond_resched()"),
        ),
        "unknown" => (Severity::Info, "kernel preemption model unknown".to_string()),
        _ => (Severity::Info, format!("kernel preemption model is '{model}'")),
    }
}

/// Whether the kernel can change its preemption model at boot or run time.
fn preempt_dynamic(facts: &Facts) -> bool {
    facts
        .kconfig
        .get("CONFIG_PREEMPT_DYNAMIC")
        .map(String::as_str)
        == Some("y")
        || facts.kernel_version.contains("PREEMPT_DYNAMIC")
}

/// The kernel's preemption model, with a remedy where it limits the guarantee.
fn preemption(facts: &Facts) -> Finding {
    let (model, source) = preempt_model(facts);
    let (sev, title) = preempt_verdict(&model);
    let f = Finding::new(
        sev,
        Topic::Preemption,
        None,
        title,
        format!("from {source}; uname -v: {}", facts.kernel_version),
    );
    if sev != Severity::Warn {
        return f;
    }
    if preempt_dynamic(facts) {
        f.remedy(Remedy::runtime(
            "echo full > /sys/kernel/debug/sched/preempt (debugfs mounted)",
        ))
        .remedy(Remedy::boot("preempt=full"))
    } else {
        f.remedy(Remedy::boot(
            "a kernel built with CONFIG_PREEMPT=y or CONFIG_PREEMPT_RT=y",
        ))
    }
}

/// RT throttling stops real-time tasks for the rest of each period.
fn rt_throttling(facts: &Facts) -> Option<Finding> {
    let rt = facts.rt_runtime_us.filter(|rt| *rt >= 0)?;
    Some(
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
    )
}

/// Timer migration off, where the local-timer shield does not cover every
/// checked CPU.
fn timer_migration(input: &CheckInput<'_>) -> Option<Finding> {
    // With timer migration on, a timer armed while a CPU is idle may be queued
    // on a busy CPU instead (the kernel's get_nohz_timer_target): the
    // local-timer shield turns it on for that reason, so check advises the
    // same, and nothing when it is already on. Whether it helps on a given
    // machine is measured by `cpushield tune` (its timer-migration knob).
    let ltmr_on_all = input
        .shield
        .is_some_and(|s| input.cpus.is_subset(s.shielded(ShieldKind::Ltmr)));
    if input.facts.timer_migration != Some(0) || ltmr_on_all {
        return None;
    }
    Some(
        Finding::new(
            Severity::Info,
            Topic::Timers,
            None,
            "timer migration is off: a timer armed while the CPU is idle stays on it".to_string(),
            "kernel.timer_migration = 0".to_string(),
        )
        .remedy(Remedy::runtime(format!(
            "cpushield shield --ltmr {}",
            input.cpus.to_list()
        ))),
    )
}

/// The checked CPUs in `mask`, when there are housekeeping CPUs to move to.
fn checked_in_mask(input: &CheckInput<'_>, mask: &CpuSet) -> Option<CpuSet> {
    let hit = mask.intersection(input.cpus);
    (!hit.is_empty() && !input.housekeeping().is_empty()).then_some(hit)
}

/// A mask that lets work onto checked CPUs: what it lets on (`title` of
/// the CPUs hit), the shield that covers it, and the write of the mask file
/// (`path`, shown to the user as evidence and as the fix) that keeps it to
/// the housekeeping CPUs.
fn mask_finding(
    input: &CheckInput<'_>,
    mask: Option<&CpuSet>,
    (topic, kind): (Topic, ShieldKind),
    title: impl Fn(&CpuSet) -> String,
    path: &str,
) -> Option<Finding> {
    let mask = mask?;
    let hit = checked_in_mask(input, mask)?;
    Some(
        Finding::new(
            Severity::Warn,
            topic,
            None,
            title(&hit),
            format!("{path} = {}", mask.to_mask()),
        )
        .remedy_if(input.shield_remedy(kind))
        .remedy(Remedy::runtime(format!(
            "echo {} > {path}",
            input.housekeeping().to_mask()
        ))),
    )
}

/// Unbound workqueue work allowed on checked CPUs.
fn workqueue_mask(input: &CheckInput<'_>) -> Option<Finding> {
    mask_finding(
        input,
        input.facts.workqueue_cpumask.as_ref(),
        (Topic::Workqueue, ShieldKind::Procs),
        |hit| format!("unbound workqueue work may run on CPU {}", hit.to_list()),
        cpushield_shield::snapshot::WORKQUEUE_CPUMASK,
    )
}

/// New IRQs allowed on checked CPUs by the default affinity.
fn default_irq_affinity(input: &CheckInput<'_>) -> Option<Finding> {
    mask_finding(
        input,
        input.facts.default_irq_affinity.as_ref(),
        (Topic::Irq, ShieldKind::Irqs),
        |hit| format!("new IRQs will be allowed on CPU {}", hit.to_list()),
        cpushield_shield::snapshot::DEFAULT_IRQ_AFFINITY,
    )
}

/// A running irqbalance moves IRQs back onto shielded CPUs.
fn irqbalance(input: &CheckInput<'_>) -> Option<Finding> {
    let irqbalance: Vec<i32> = input
        .runs
        .all_latest()
        .filter(|t| t.stat.tid == t.pid && t.stat.comm == "irqbalance")
        .map(|t| t.pid)
        .collect();
    if irqbalance.is_empty() {
        return None;
    }
    Some(
        Finding::new(
            Severity::BreaksShield,
            Topic::Irqbalance,
            None,
            format!(
                "irqbalance is running (pid {}): it moves IRQs back onto shielded CPUs",
                join(&irqbalance)
            ),
            format!("{PROC}/*/comm = irqbalance"),
        )
        .remedy(Remedy::runtime("systemctl stop irqbalance"))
        .remedy(Remedy::runtime(format!(
            "IRQBALANCE_BANNED_CPULIST={} in /etc/default/irqbalance",
            input.list()
        ))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_shield::layout::Isolation;
    use std::path::PathBuf;

    fn set(path: &str, is_root: bool, cpus: &str, isolation: Isolation) -> CpusetInfo {
        CpusetInfo {
            path: PathBuf::from(path),
            is_root,
            cpus: CpuSet::parse_list(cpus).unwrap(),
            isolation,
            tasks: None,
        }
    }

    fn v1(exclusive: bool, load_balance: bool) -> Isolation {
        Isolation::Exclusive {
            exclusive: Some(exclusive),
            load_balance: Some(load_balance),
        }
    }

    #[test]
    fn busy_share_leaves_out_steal_and_idle() {
        let d = CpuTimes {
            user: 30,
            idle: 50,
            steal: 20,
            ..Default::default()
        };
        assert_eq!(busy_pct_without_steal(&d), 30.0);
        assert_eq!(busy_pct_without_steal(&CpuTimes::default()), 0.0);
    }

    #[test]
    fn sibling_busy_share_counts_all_busy_ticks_and_is_zero_when_unknown() {
        let a = CpuTimes::default();
        let b = CpuTimes {
            user: 10,
            idle: 90,
            ..Default::default()
        };
        assert_eq!(busy_pct(Some(&a), Some(&b)), 10.0);
        assert_eq!(busy_pct(None, Some(&b)), 0.0);
        assert_eq!(busy_pct(Some(&a), Some(&a)), 0.0);
    }

    #[test]
    fn a_sibling_warns_from_five_percent_busy() {
        assert_eq!(sibling_severity(4.9), Severity::Info);
        assert_eq!(sibling_severity(5.0), Severity::Warn);
    }

    #[test]
    fn deep_idle_states_are_the_enabled_ones_slower_than_10_us() {
        let state = |id: &str, latency_us, disabled| IdleState {
            id: id.into(),
            name: id.into(),
            latency_us,
            disabled,
        };
        let cf = CpuFacts {
            idle_states: vec![
                state("state0", 0, false),
                state("state1", 10, false),
                state("state2", 100, true),
                state("state3", 200, false),
            ],
            ..Default::default()
        };
        let ids: Vec<&str> = deep_idle_states(&cf)
            .iter()
            .map(|s| s.id.as_str())
            .collect();
        assert_eq!(ids, ["state3"]);
        assert!(deep_idle(1, &cf).unwrap().evidence.contains("state3"));
        assert!(deep_idle(1, &CpuFacts::default()).is_none());
    }

    #[test]
    fn a_governor_other_than_performance_is_a_finding() {
        let with = |g: Option<&str>| CpuFacts {
            governor: g.map(String::from),
            ..Default::default()
        };
        assert!(governor(1, &with(None)).is_none());
        assert!(governor(1, &with(Some("performance"))).is_none());
        assert!(governor(1, &with(Some("powersave"))).is_some());
    }

    #[test]
    fn a_valid_partition_enforces_before_an_exclusive_cpuset() {
        let sets = [
            set("/sys/fs/cgroup", true, "0-3", Isolation::Partition(None)),
            set(
                "/sys/fs/cgroup/rt",
                false,
                "2-3",
                Isolation::Partition(Some("isolated".into())),
            ),
            set(
                "/sys/fs/cgroup/bad",
                false,
                "1",
                Isolation::Partition(Some("isolated invalid".into())),
            ),
        ];
        assert!(matches!(enforcer(&sets, 2), Enforcer::Partition(p) if p.path.ends_with("rt")));
        assert!(
            matches!(enforcer(&sets, 1), Enforcer::InvalidPartition(p) if p.path.ends_with("bad"))
        );
        assert!(matches!(enforcer(&sets, 0), Enforcer::Nothing));
    }

    #[test]
    fn an_exclusive_v1_cpuset_enforces_only_when_the_root_does_not_balance() {
        let mut sets = vec![
            set("/cpuset", true, "0-3", v1(true, false)),
            set("/cpuset/rt", false, "2-3", v1(true, false)),
        ];
        assert!(
            matches!(enforcer(&sets, 2), Enforcer::Exclusive { set, root: Some(_) } if set.path.ends_with("rt"))
        );
        sets[0].isolation = v1(true, true);
        assert!(matches!(enforcer(&sets, 2), Enforcer::Nothing));
    }

    #[test]
    fn preemption_none_and_voluntary_warn_the_others_inform() {
        assert_eq!(preempt_verdict("none").0, Severity::Warn);
        assert_eq!(preempt_verdict("voluntary").0, Severity::Warn);
        assert_eq!(preempt_verdict("full").0, Severity::Info);
        assert_eq!(
            preempt_verdict("unknown").1,
            "kernel preemption model unknown"
        );
    }
}
