//! What a PREEMPT_RT kernel adds on a shielded CPU. Device IRQ handlers run
//! as threads (`irq/N-name`) that the kernel moves with their IRQ: each one
//! that followed its IRQ off the CPU is said, one left behind (pinned by
//! hand) breaks the shield. An IRQ whose handler is not threaded
//! (IRQF_NO_THREAD) has no thread to follow. And the per-CPU threads that do
//! the CPU's own deferred work, `ksoftirqd/N`, `rcuc/N` and `ktimers/N`,
//! are named with what reduces their work.

use super::config::preempt_model;
use super::CheckInput;
use crate::finding::{Finding, Remedy, Severity, Topic};
use crate::snapshot::ThreadSample;
use crate::target::ShieldKind;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{paths::IRQ_DIR, procfs::PROC};
use cpushield_parse::kthread_name::{irq_thread_irq, per_cpu_thread};
use std::collections::{BTreeMap, BTreeSet};

/// The per-CPU threads named here.
const PER_CPU_THREADS: &[&str] = &["ktimers", "rcuc", "ksoftirqd"];

/// SCHED_FIFO, the policy number in /proc/PID/stat.
const SCHED_FIFO: u32 = 1;

/// Whether the kernel is PREEMPT_RT.
pub(super) fn is_rt(input: &CheckInput<'_>) -> bool {
    preempt_model(input.facts).0 == "rt"
}

/// The IRQ's mask (smp_affinity_list), as read.
fn irq_mask<'a>(input: &'a CheckInput<'_>, irq: u32) -> Option<&'a CpuSet> {
    input.after.irq_affinity.get(&irq).map(|a| &a.requested)
}

/// A thread's scheduling, for the text (`SCHED_FIFO 1`, `SCHED_OTHER`).
fn policy(t: &ThreadSample) -> String {
    if t.stat.policy == SCHED_FIFO {
        format!("SCHED_FIFO {}", t.stat.rt_priority)
    } else if t.stat.policy == 0 {
        "SCHED_OTHER".to_string()
    } else {
        format!("policy {} priority {}", t.stat.policy, t.stat.rt_priority)
    }
}

/// The threaded handlers of IRQs kept off `cpu`: those that followed (said
/// once, as info) and each one left behind (breaks the shield). A thread
/// takes its IRQ's effective affinity: one still on `cpu` with its IRQ,
/// whose move is pending (its effective affinity still holds `cpu`), moves
/// with it at its next interrupt, and the IRQ's own finding covers both.
fn irq_threads<'a>(input: &CheckInput<'a>, cpu: usize, findings: &mut Vec<Finding>) {
    let hk = input.housekeeping().to_list();
    let mut followed = Vec::new();
    let irq_threads = input.derived.irq_threads.get_or_init(|| {
        input
            .after
            .threads
            .iter()
            .filter(|t| t.stat.is_kthread())
            .filter_map(|t| Some((t, irq_thread_irq(&t.stat.comm)?)))
            .collect()
    });
    for &(t, irq) in irq_threads {
        let (Some(mask), Some(aff)) = (irq_mask(input, irq), t.affinity.as_ref()) else {
            continue;
        };
        if mask.contains(cpu) {
            continue;
        }
        if !aff.contains(cpu) {
            followed.push(format!("{} (IRQ {irq} on {mask})", t.stat.comm));
            continue;
        }
        let effective = input
            .after
            .irq_affinity
            .get(&irq)
            .and_then(|a| a.effective.as_ref());
        if effective.is_some_and(|e| e.contains(cpu)) {
            continue;
        }
        findings.push(
            Finding::new(
                Severity::BreaksShield,
                Topic::Irq,
                Some(cpu),
                format!(
                    "IRQ {irq}'s handler thread {} (pid {}) may run on CPU {cpu} though IRQ {irq} is kept on {mask}: it was pinned there by hand, so it did not follow its IRQ",
                    t.stat.comm, t.stat.tid
                ),
                format!(
                    "{PROC}/{}/task/{}: affinity {aff}; {IRQ_DIR}/{irq}/smp_affinity_list: {mask}",
                    t.pid, t.stat.tid
                ),
            )
            .remedy(Remedy::runtime(format!("taskset -pc {hk} {}", t.stat.tid)))
            .remedy(Remedy::runtime(format!(
                "echo {mask} > /proc/irq/{irq}/smp_affinity_list (writing the IRQ's mask sets its thread's affinity again)"
            ))),
        );
    }
    if !followed.is_empty() {
        findings.push(Finding::new(
            Severity::Info,
            Topic::Irq,
            Some(cpu),
            format!(
                "{} IRQ handler thread{} followed {} IRQ{} off CPU {cpu}",
                followed.len(),
                if followed.len() == 1 { "" } else { "s" },
                if followed.len() == 1 { "its" } else { "their" },
                if followed.len() == 1 { "" } else { "s" },
            ),
            followed.join(", "),
        ));
    }
}

/// On PREEMPT_RT: the device IRQs with no handler thread, whose handlers run
/// in hard interrupt context all the same (IRQF_NO_THREAD), once per check.
fn unthreaded_irqs(input: &CheckInput<'_>, findings: &mut Vec<Finding>) {
    let threaded: BTreeSet<u32> = input
        .after
        .threads
        .iter()
        .filter(|t| t.stat.is_kthread())
        .filter_map(|t| irq_thread_irq(&t.stat.comm))
        .collect();
    let bare: Vec<String> = input
        .after
        .interrupts
        .iter()
        .filter_map(|l| Some((l.number()?, l.name())))
        .filter(|(n, _)| !threaded.contains(n))
        .map(|(n, name)| format!("{n} {name}"))
        .collect();
    if bare.is_empty() {
        return;
    }
    findings.push(Finding::new(
        Severity::Info,
        Topic::Irq,
        None,
        format!(
            "{} IRQ{} {} no handler thread on this PREEMPT_RT kernel (IRQF_NO_THREAD, e.g. the timer): {} in hard interrupt context, so only {} mask keeps {} off a shielded CPU",
            bare.len(),
            if bare.len() == 1 { "" } else { "s" },
            if bare.len() == 1 { "has" } else { "have" },
            if bare.len() == 1 { "its handler runs" } else { "their handlers run" },
            if bare.len() == 1 { "its" } else { "their" },
            if bare.len() == 1 { "it" } else { "them" },
        ),
        format!(
            "no irq/N-* thread for IRQ {} in /proc/*/task",
            bare.join(", ")
        ),
    ));
}

/// The per-CPU threads of `cpu` that do its deferred work, each with what it
/// does and what reduces it.
fn per_cpu_work<'a>(input: &CheckInput<'a>, cpu: usize, findings: &mut Vec<Finding>) {
    let list = input.list();
    let nohz = input.facts.nohz_full_cpus().contains(cpu);
    let offloaded = input.rcu_offload().cpus.contains(cpu);
    let by_cpu = input.derived.per_cpu_threads.get_or_init(|| {
        let mut by_cpu: BTreeMap<usize, Vec<(&'static str, &ThreadSample)>> = BTreeMap::new();
        for t in input.after.threads.iter().filter(|t| t.stat.is_kthread()) {
            if let Some((kind, c)) = per_cpu_thread(&t.stat.comm, PER_CPU_THREADS) {
                by_cpu.entry(c).or_default().push((kind, t));
            }
        }
        by_cpu
    });
    let mut threads: Vec<(&str, &ThreadSample)> = by_cpu.get(&cpu).cloned().unwrap_or_default();
    threads.sort_by_key(|(kind, _)| PER_CPU_THREADS.iter().position(|k| k == kind));
    for (kind, t) in threads {
        let who = format!("{} (pid {}, {})", t.stat.comm, t.stat.tid, policy(t));
        let evidence = format!(
            "{PROC}/{}/task/{}/stat; nohz_full {}, RCU callbacks {}",
            t.pid,
            t.stat.tid,
            if nohz { "yes" } else { "no" },
            if offloaded {
                "offloaded"
            } else {
                "not offloaded"
            }
        );
        let f = match kind {
            "ktimers" => {
                let mut f = Finding::new(
                    Severity::Info,
                    Topic::Timers,
                    Some(cpu),
                    format!("{who} on CPU {cpu} expires this CPU's timers (PREEMPT_RT runs the timer softirq in it): a real-time task above its priority is not delayed by it, timers armed here still wake it"),
                    evidence,
                )
                .remedy(Remedy::cpushield(format!(
                    "run the real-time task above {}: cpushield run --cpus {cpu} --fifo 80 -- PROGRAM",
                    policy(t)
                )));
                if !nohz {
                    f = f.remedy(Remedy::boot(format!("nohz_full={list}")));
                }
                // Advised only where it would change something: off, and
                // not already turned on by the local-timer shield.
                let ltmr = input.shielded(ShieldKind::Ltmr, cpu);
                if input.facts.timer_migration == Some(0) && !ltmr {
                    f = f.remedy(Remedy::runtime("sysctl -w kernel.timer_migration=1"));
                }
                f
            }
            "rcuc" if offloaded => Finding::new(
                Severity::Info,
                Topic::Isolation,
                Some(cpu),
                format!("{who} on CPU {cpu} has no RCU callbacks to run: they are offloaded to the rcuo threads on the housekeeping CPUs"),
                evidence,
            ),
            "rcuc" => Finding::new(
                Severity::Warn,
                Topic::Isolation,
                Some(cpu),
                format!("{who} on CPU {cpu} runs this CPU's RCU callbacks (PREEMPT_RT's per-CPU RCU thread)"),
                evidence,
            )
            .remedy(Remedy::boot(format!("rcu_nocbs={list} rcu_nocb_poll"))),
            _ => {
                let mut f = Finding::new(
                    Severity::Info,
                    Topic::Softirq,
                    Some(cpu),
                    format!("{who} on CPU {cpu} runs the softirqs raised here that their raising context did not finish (on PREEMPT_RT most run in the thread that raised them)"),
                    evidence,
                );
                if let Some(r) = input.shield_remedy(ShieldKind::Irqs) {
                    f = f.remedy(r);
                }
                if !nohz {
                    f = f.remedy(Remedy::boot(format!("nohz_full={list}")));
                }
                f
            }
        };
        findings.push(f);
    }
}

/// The PREEMPT_RT findings of one checked CPU (and, on an RT kernel, once
/// for the system: the IRQs without a handler thread).
pub(super) fn analyze_cpu(input: &CheckInput<'_>, cpu: usize, findings: &mut Vec<Finding>) {
    irq_threads(input, cpu, findings);
    per_cpu_work(input, cpu, findings);
}

/// The system-wide PREEMPT_RT finding.
pub(super) fn analyze_system(input: &CheckInput<'_>, findings: &mut Vec<Finding>) {
    if is_rt(input) {
        unthreaded_irqs(input, findings);
    }
}
