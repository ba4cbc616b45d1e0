//! Interrupts and softirqs that reached a checked CPU during the interval.

use super::{CheckInput, Count, CpuActivity, CpuSource};
use crate::facts::Managed;
use crate::finding::{Finding, Remedy, Severity, Topic};

pub(super) fn analyze_cpu(
    input: &CheckInput<'_>,
    cpu: usize,
    act: &mut CpuActivity,
    findings: &mut Vec<Finding>,
) {
    let list = input.list();
    for line in &input.after.interrupts {
        let Some(before) = input.before.interrupts.iter().find(|l| l.id == line.id) else {
            continue;
        };
        let delta = line.on(cpu).saturating_sub(before.on(cpu));
        if delta == 0 {
            continue;
        }
        let count = Count {
            id: line.id.clone(),
            name: line.name(),
            count: delta,
            per_s: input.per_s(delta),
        };
        match line.number() {
            Some(irq) => findings.push(device_irq(input, cpu, irq, &count, &list)),
            None => {
                if let Some(f) = irq_kind(input, cpu, &count, &list) {
                    findings.push(f);
                }
            }
        }
        act.interrupts.push(count);
    }
    act.interrupts.sort_by_key(|c| std::cmp::Reverse(c.count));

    for (name, after) in &input.after.softirqs {
        let before = input
            .before
            .softirqs
            .get(name)
            .and_then(|m| m.get(&cpu))
            .copied()
            .unwrap_or(0);
        let delta = after.get(&cpu).copied().unwrap_or(0).saturating_sub(before);
        if delta == 0 {
            continue;
        }
        let count = Count {
            id: name.clone(),
            name: name.clone(),
            count: delta,
            per_s: input.per_s(delta),
        };
        findings.push(softirq(input, cpu, &count, &list));
        act.softirqs.push(count);
    }
    act.softirqs.sort_by_key(|c| std::cmp::Reverse(c.count));
}

fn device_irq(input: &CheckInput<'_>, cpu: usize, irq: u32, c: &Count, list: &str) -> Finding {
    let facts = input.facts.irqs.get(&irq);
    let aff = facts
        .and_then(|f| f.affinity.as_ref())
        .map(|s| s.to_list())
        .unwrap_or_else(|| "?".into());
    let eff = facts
        .and_then(|f| f.effective.as_ref())
        .map(|s| format!(", effective {}", s.to_list()))
        .unwrap_or_default();
    let mut managed = facts.map(|f| f.managed).unwrap_or(Managed::Unknown);
    // A block-queue IRQ that still may run on a CPU the shield holds: the
    // shield tried and the kernel refused, so it is managed in practice and
    // only a boot parameter moves it.
    let still_allowed = facts
        .and_then(|f| f.affinity.as_ref())
        .is_some_and(|a| a.contains(cpu));
    let mut managed_evidence = "; debugfs: IRQD_AFFINITY_MANAGED";
    if managed == Managed::Likely && input.source == CpuSource::ShieldState && still_allowed {
        managed = Managed::Yes;
        managed_evidence =
            "; a block-queue interrupt the shield could not move off the shielded CPU";
    }
    let evidence = format!(
        "/proc/interrupts: {} on CPU {cpu} in {:.1} s ({:.1}/s); /proc/irq/{irq}/smp_affinity_list {aff}{eff}",
        c.count,
        input.interval_s(),
        c.per_s
    );
    let boot = Remedy::boot(format!("isolcpus=managed_irq,{list}"));
    match managed {
        Managed::Yes => Finding::new(
            Severity::BreaksShield,
            Topic::Irq,
            Some(cpu),
            format!("IRQ {irq} ({}) is kernel-managed and arrives on CPU {cpu}: its affinity can only change at boot", c.name),
            evidence + managed_evidence,
        )
        .remedy(boot),
        Managed::Likely => Finding::new(
            Severity::BreaksShield,
            Topic::Irq,
            Some(cpu),
            format!("IRQ {irq} ({}) arrives on CPU {cpu}; it is a block-queue interrupt, usually kernel-managed", c.name),
            evidence,
        )
        .remedy(Remedy::cpushield(format!("cpushield shield --irqs {list}")))
        .remedy(boot),
        Managed::No | Managed::Unknown => Finding::new(
            Severity::BreaksShield,
            Topic::Irq,
            Some(cpu),
            format!("IRQ {irq} ({}) arrives on CPU {cpu}", c.name),
            evidence,
        )
        .remedy(Remedy::cpushield(format!("cpushield shield --irqs {list}"))),
    }
}

/// Architecture interrupt kinds: what each means and what removes it.
fn irq_kind(input: &CheckInput<'_>, cpu: usize, c: &Count, list: &str) -> Option<Finding> {
    let evidence = format!(
        "/proc/interrupts {}: {} on CPU {cpu} in {:.1} s ({:.1}/s)",
        c.id,
        c.count,
        input.interval_s(),
        c.per_s
    );
    let f = |sev, title: String| {
        Finding::new(
            sev,
            Topic::InterruptKind,
            Some(cpu),
            title,
            evidence.clone(),
        )
    };
    let procs = Remedy::cpushield(format!("cpushield shield --procs {list}"));
    Some(match c.id.as_str() {
        "LOC" => {
            let nohz = super::config::nohz_full_cpus(input.facts).contains(cpu);
            let hz: Option<f64> = input
                .facts
                .kconfig
                .get("CONFIG_HZ")
                .and_then(|h| h.parse().ok());
            let hrtimers = if hz.is_some_and(|hz| c.per_s > hz * 1.2) {
                " plus hrtimers expiring there"
            } else {
                ""
            };
            let title = if nohz {
                format!("the local timer still fires on nohz_full CPU {cpu} ({:.0}/s): more than one task or pending timers keep the tick on{hrtimers}", c.per_s)
            } else {
                format!("the local timer fires on CPU {cpu} ({:.0}/s): the scheduler tick, because CPU {cpu} is not nohz_full{hrtimers}", c.per_s)
            };
            // Under a shield the runtime part of --ltmr is in force already:
            // only a boot parameter stops the tick.
            let mut finding = f(Severity::Warn, title);
            if input.source != CpuSource::ShieldState {
                finding = finding.remedy(Remedy::cpushield(format!("cpushield shield --ltmr {list}")));
            }
            if !nohz {
                finding = finding.remedy(nohz_full_remedy(input, list));
            }
            finding
        }
        "RES" => f(
            Severity::Warn,
            format!("{} rescheduling IPIs on CPU {cpu}: other CPUs woke or moved tasks onto it", c.count),
        )
        .remedy(procs),
        "CAL" => f(
            Severity::Warn,
            format!("{} function-call IPIs on CPU {cpu}: other CPUs ran kernel functions on it (smp_call_function, e.g. for processes with threads on several CPUs)", c.count),
        )
        .remedy(procs),
        "TLB" => f(
            Severity::Warn,
            format!("{} TLB shootdowns on CPU {cpu}: a process with threads on CPU {cpu} and on other CPUs changed its memory map", c.count),
        )
        .remedy(procs)
        .remedy(Remedy::runtime("keep the real-time process's threads on shielded CPUs only, mlock its memory and avoid munmap/mprotect while it runs".to_string())),
        "IWI" => f(Severity::Info, format!("{} IRQ-work interrupts on CPU {cpu} (perf, printk, tracing, RCU)", c.count)),
        "NMI" | "PMI" => f(Severity::Info, format!("{} {} on CPU {cpu} (perf counters, watchdog)", c.count, c.name))
            .remedy(Remedy::runtime("sysctl -w kernel.nmi_watchdog=0".to_string())),
        "HYP" => f(Severity::Info, format!("{} hypervisor callback interrupts on CPU {cpu}", c.count)),
        "MCE" | "MCP" | "THR" | "TRM" | "DFR" => f(Severity::Info, format!("{} {} on CPU {cpu} (hardware events)", c.count, c.name)),
        "SPU" | "ERR" | "MIS" => f(Severity::Warn, format!("{} {} on CPU {cpu}", c.count, c.name)),
        _ => f(Severity::Info, format!("{} {} ({}) on CPU {cpu}", c.count, c.name, c.id)),
    })
}

pub(super) fn nohz_full_remedy(input: &CheckInput<'_>, list: &str) -> Remedy {
    if input
        .facts
        .kconfig
        .get("CONFIG_NO_HZ_FULL")
        .map(String::as_str)
        == Some("n")
    {
        Remedy::boot(format!(
            "nohz_full={list} on a kernel built with CONFIG_NO_HZ_FULL=y (this one is not)"
        ))
    } else {
        Remedy::boot(format!("nohz_full={list}"))
    }
}

fn softirq(input: &CheckInput<'_>, cpu: usize, c: &Count, list: &str) -> Finding {
    let evidence = format!(
        "/proc/softirqs {}: {} on CPU {cpu} in {:.1} s ({:.1}/s)",
        c.id,
        c.count,
        input.interval_s(),
        c.per_s
    );
    let f =
        |sev, title: String| Finding::new(sev, Topic::Softirq, Some(cpu), title, evidence.clone());
    match c.id.as_str() {
        "RCU" => {
            let covered = input.facts.rcu_offloaded_cpus().contains(cpu);
            let finding = f(
                Severity::Warn,
                format!(
                    "RCU softirq ran {} times on CPU {cpu}: RCU callbacks and grace-period work",
                    c.count
                ),
            );
            if covered {
                finding
            } else {
                finding.remedy(Remedy::boot(format!("rcu_nocbs={list} rcu_nocb_poll")))
            }
        }
        "TIMER" | "HRTIMER" => f(
            Severity::Warn,
            format!(
                "{} softirq ran {} times on CPU {cpu}: timers expiring there",
                c.id, c.count
            ),
        )
        .remedy(Remedy::cpushield(format!("cpushield shield --ltmr {list}")))
        .remedy(nohz_full_remedy(input, list)),
        "SCHED" => f(
            Severity::Warn,
            format!(
                "SCHED softirq ran {} times on CPU {cpu}: scheduler load balancing includes it",
                c.count
            ),
        )
        .remedy(Remedy::cpushield(format!(
            "cpushield shield --procs {list}"
        )))
        .remedy(Remedy::boot(format!("isolcpus=domain,{list}"))),
        "BLOCK" => {
            let finding = f(
                Severity::Warn,
                format!(
                    "BLOCK softirq ran {} times on CPU {cpu}: completions of disk I/O whose interrupt arrives there",
                    c.count
                ),
            );
            let boot = Remedy::boot(format!("isolcpus=managed_irq,{list}"));
            // Under a shield the movable block IRQs are already gone: what
            // is left comes from a kernel-managed queue interrupt.
            if input.source == CpuSource::ShieldState {
                finding.remedy(boot)
            } else {
                finding
                    .remedy(Remedy::cpushield(format!("cpushield shield --irqs {list}")))
                    .remedy(boot)
            }
        }
        "NET_RX" | "NET_TX" => f(
            Severity::Warn,
            format!(
                "{} softirq ran {} times on CPU {cpu}: network packets processed there",
                c.id, c.count
            ),
        )
        .remedy(Remedy::cpushield(format!("cpushield shield --irqs {list}")))
        .remedy(Remedy::runtime(format!(
            "echo {} > /sys/class/net/<dev>/queues/rx-<n>/rps_cpus (receive processing on CPUs {})",
            input.housekeeping().to_mask(),
            input.housekeeping().to_list()
        ))),
        _ => f(
            Severity::Warn,
            format!(
                "{} softirq ran {} times on CPU {cpu}: deferred work of interrupts handled there",
                c.id, c.count
            ),
        )
        .remedy(Remedy::cpushield(format!("cpushield shield --irqs {list}"))),
    }
}
