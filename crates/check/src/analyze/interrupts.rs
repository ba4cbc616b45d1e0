//! Interrupts and softirqs that reached a checked CPU during the interval.

use super::{CheckInput, Count, CpuActivity};
use crate::finding::{Finding, Remedy, Severity, Topic};
use crate::target::ShieldKind;
use cpushield_kernel::paths::{INTERRUPTS, SOFTIRQS};

pub(super) fn analyze_cpu(input: &CheckInput<'_>, act: &mut CpuActivity) -> Vec<Finding> {
    let cpu = act.cpu;
    let mut findings = Vec::new();
    let list = input.list();
    for (before, line) in input.irq_lines().pairs.iter().copied() {
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
            Some(irq) => findings.push(super::irqs::arrived(input, cpu, irq, &count)),
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
    findings
}

/// Architecture interrupt kinds: what each means and what removes it.
fn irq_kind(input: &CheckInput<'_>, cpu: usize, c: &Count, list: &str) -> Option<Finding> {
    let evidence = format!(
        "{INTERRUPTS} {}: {} on CPU {cpu} in {:.1} s ({:.1}/s)",
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
    let procs = input.shield_remedy(ShieldKind::Procs);
    let procs_in_place = input.in_place(ShieldKind::Procs, cpu);
    let procs_shielded = input.shielded(ShieldKind::Procs, cpu);
    Some(match c.id.as_str() {
        "LOC" => {
            let nohz = input.facts.nohz_full_cpus().contains(cpu);
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
            // Below the rate at which the boot-parameter check calls the
            // tick stopped, what fires is nohz_full's residual tick (about
            // 1/s, for the scheduler's accounting) and timers armed there:
            // said as such, never as a tick that runs.
            if nohz && c.per_s <= super::bootparams::tick_limit(input) {
                return Some(f(
                    Severity::Info,
                    format!("the local timer fired {} times on nohz_full CPU {cpu} ({:.1}/s), no more than a stopped tick leaves: nohz_full's residual tick (about once a second) and timers armed there", c.count, c.per_s),
                ));
            }
            let title = if nohz {
                format!("the local timer still fires on nohz_full CPU {cpu} ({:.0}/s): more than one task or pending timers keep the tick on{hrtimers}", c.per_s)
            } else {
                format!("the local timer fires on CPU {cpu} ({:.0}/s): the scheduler tick, because CPU {cpu} is not nohz_full{hrtimers}", c.per_s)
            };
            // The run-time part of --ltmr does not stop the tick: once it is
            // in force, only the kernel (nohz_full) is left.
            let finding = f(Severity::Warn, title)
                .in_place(input.in_place(ShieldKind::Ltmr, cpu))
                .remedy_if(input.shield_remedy(ShieldKind::Ltmr));
            if nohz {
                finding
            } else {
                finding.remedy(nohz_full_remedy(input, list))
            }
        }
        "RES" if procs_shielded => f(
            Severity::Warn,
            format!("{} rescheduling IPIs on CPU {cpu}: other CPUs woke tasks that run on it (its own threads' peers on other CPUs, or wakeups of an idle CPU that halts)", c.count),
        )
        .in_place(procs_in_place)
        .remedy(Remedy::runtime(format!(
            "keep the threads that wake the real-time task on the shielded CPUs, or let CPU {cpu} poll while idle (cpushield run --idle-poll) so a wakeup from another CPU needs no IPI"
        ))),
        "RES" => f(
            Severity::Warn,
            format!("{} rescheduling IPIs on CPU {cpu}: other CPUs woke or moved tasks onto it", c.count),
        )
        .remedy_if(procs),
        "CAL" if procs_shielded => f(
            Severity::Warn,
            format!("{} function-call IPIs on CPU {cpu}: kernel work run on every CPU (expedited RCU grace periods, memory-map changes of a process with threads there, tracing or perf setup), which moving processes does not stop", c.count),
        )
        .in_place(procs_in_place)
        .remedy(Remedy::boot("rcupdate.rcu_normal=1 (normal RCU grace periods instead of expedited ones, which interrupt every CPU)")),
        "CAL" => f(
            Severity::Warn,
            format!("{} function-call IPIs on CPU {cpu}: other CPUs ran kernel functions on it (smp_call_function, e.g. for processes with threads on several CPUs)", c.count),
        )
        .remedy_if(procs),
        "TLB" => f(
            Severity::Warn,
            format!("{} TLB shootdowns on CPU {cpu}: a process with threads on CPU {cpu} and on other CPUs changed its memory map", c.count),
        )
        .in_place(procs_in_place)
        .remedy_if(procs)
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

/// Whether `isolcpus=` with `flag` (`domain`, `managed_irq`) covers `cpu`
/// on this boot: on the command line, and for `domain` shown in
/// /sys/devices/system/cpu/isolated (no flag at all means `domain`).
fn isolated_by_boot(input: &CheckInput<'_>, flag: &str, cpu: usize) -> bool {
    let Some((cpus, flags)) = cpushield_parse::cmdline::cpu_param(&input.facts.cmdline, "isolcpus")
    else {
        return false;
    };
    let has_flag = flags.iter().any(|f| f == flag) || (flag == "domain" && flags.is_empty());
    let shown = flag != "domain"
        || input
            .facts
            .isolated
            .as_deref()
            .and_then(|s| cpushield_cpuset::CpuSet::parse_list(s.trim()).ok())
            .is_some_and(|iso| iso.contains(cpu));
    has_flag && cpus.contains(cpu) && shown
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
        "{SOFTIRQS} {}: {} on CPU {cpu} in {:.1} s ({:.1}/s)",
        c.id,
        c.count,
        input.interval_s(),
        c.per_s
    );
    let f =
        |sev, title: String| Finding::new(sev, Topic::Softirq, Some(cpu), title, evidence.clone());
    match c.id.as_str() {
        "RCU" => {
            let covered = input.rcu_offload().cpus.contains(cpu);
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
        // A boot parameter already in effect is not advised again.
        "TIMER" | "HRTIMER" => f(
            Severity::Warn,
            format!(
                "{} softirq ran {} times on CPU {cpu}: timers expiring there",
                c.id, c.count
            ),
        )
        .in_place(input.in_place(ShieldKind::Ltmr, cpu))
        .remedy_if(input.shield_remedy(ShieldKind::Ltmr))
        .remedy_if(
            (!input.facts.nohz_full_cpus().contains(cpu)).then(|| nohz_full_remedy(input, list)),
        ),
        "SCHED" => f(
            Severity::Warn,
            format!(
                "SCHED softirq ran {} times on CPU {cpu}: scheduler load balancing includes it",
                c.count
            ),
        )
        .in_place(input.in_place(ShieldKind::Procs, cpu))
        .remedy_if(input.shield_remedy(ShieldKind::Procs))
        .remedy_if(
            (!isolated_by_boot(input, "domain", cpu))
                .then(|| Remedy::boot(format!("isolcpus=domain,{list}"))),
        ),
        "BLOCK" => {
            let finding = f(
                Severity::Warn,
                format!(
                    "BLOCK softirq ran {} times on CPU {cpu}: completions of disk I/O whose interrupt arrives there",
                    c.count
                ),
            );
            // Under the IRQ shield the movable block IRQs are gone: what is
            // left comes from a kernel-managed queue interrupt.
            finding
                .in_place(input.in_place(ShieldKind::Irqs, cpu))
                .remedy_if(input.shield_remedy(ShieldKind::Irqs))
                .remedy_if(
                    (!isolated_by_boot(input, "managed_irq", cpu))
                        .then(|| Remedy::boot(format!("isolcpus=managed_irq,{list}"))),
                )
        }
        "NET_RX" | "NET_TX" => f(
            Severity::Warn,
            format!(
                "{} softirq ran {} times on CPU {cpu}: network packets processed there",
                c.id, c.count
            ),
        )
        .in_place(input.in_place(ShieldKind::Irqs, cpu))
        .remedy_if(input.shield_remedy(ShieldKind::Irqs))
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
        .in_place(input.in_place(ShieldKind::Irqs, cpu))
        .remedy_if(input.shield_remedy(ShieldKind::Irqs)),
    }
}
