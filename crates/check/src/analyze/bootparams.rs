//! The boot parameters of `cpushield boot-params`, closed loop: after the
//! reboot, whether each one took effect on the checked CPUs, from what the
//! kernel shows rather than what the command line says.
//!
//! | parameter | in effect when |
//! |---|---|
//! | `isolcpus=…domain…` | /sys/devices/system/cpu/isolated holds the CPUs |
//! | `isolcpus=managed_irq…` | no kernel-managed IRQ is delivered to them |
//! | `nohz_full=` | /sys/devices/system/cpu/nohz_full holds them, and the tick stops: LOC near zero while one task keeps the CPU busy |
//! | `rcu_nocbs=` | the kernel's boot log names them ("Offload RCU callbacks from CPUs"), else their rcuo threads run while those of CPUs not offloaded are parked (6.12); otherwise not verified |
//! | `irqaffinity=` | /proc/irq/default_smp_affinity leaves them out |
//!
//! Once any of the line's parameters is on the command line (the line was
//! used), each one not in effect breaks the shield and is named with the
//! reason: not on the line (or misspelt there), a CPU list that does not
//! cover the CPU or does not parse, a kernel built without the option, or a
//! kernel that did not apply it. Without any of them, the isolation findings
//! of the configuration analysis stand alone (a runtime shield is complete
//! as far as runtime goes). Where a loaded tuned profile set the boot line,
//! a parameter it did not ask for is named for information only.

use super::CheckInput;
use crate::facts::Managed;
use crate::finding::{Finding, Remedy, Severity, Topic};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::paths::{
    CMDLINE, DEFAULT_IRQ_AFFINITY, INTERRUPTS, ISOLATED, NOHZ_FULL, STAT,
};
use cpushield_parse::cmdline::{cpu_param, param, words};
use cpushield_shield::bootparams::boot_params;
use cpushield_shield::masks::ShieldMasks;

/// Busy share above which the CPU counts as running a task throughout.
const BUSY_PCT: f64 = 80.0;
/// Ticks per second taken when the kernel's HZ is not known (the lowest usual value).
const HZ_UNKNOWN: u64 = 100;

/// The kernel build option each parameter needs.
fn option_of(key: &str) -> &'static str {
    match key {
        "nohz_full" => "CONFIG_NO_HZ_FULL",
        "rcu_nocbs" => "CONFIG_RCU_NOCB_CPU",
        "isolcpus" => "CONFIG_CPU_ISOLATION",
        _ => "CONFIG_SMP",
    }
}

/// Why a parameter is not in effect.
#[derive(Debug, Clone, PartialEq)]
enum Why {
    /// Not on the command line.
    Absent,
    /// Not on the command line, but a word close to its name is.
    Misspelt(String),
    /// Its CPU list does not parse: the kernel ignores the parameter.
    Invalid(String),
    /// Its CPUs leave a checked CPU out.
    Mismatch(String),
    /// The kernel is built without what it needs.
    NotBuilt(&'static str),
    /// On the line and valid, yet the kernel shows no effect.
    Ignored(String),
    /// On the line (or implied by another parameter), but nothing the
    /// kernel shows tells whether it took effect: the reason.
    Unverified(String),
}

/// One parameter's verdict: in effect (with the evidence) or why not.
struct Verdict {
    /// `nohz_full=3`, as `boot-params` prints it.
    wanted: String,
    /// Its name.
    key: &'static str,
    result: Result<String, Why>,
}

/// The words of the command line that look like a misspelling of `key`
/// (a small edit away, not the key itself).
fn misspelling(cmdline: &str, key: &str) -> Option<String> {
    let norm = |s: &str| s.replace('-', "_").to_ascii_lowercase();
    let key = norm(key);
    words(cmdline).into_iter().find_map(|(k, v)| {
        let k_norm = norm(&k);
        (k_norm != key && k_norm.len() >= 4 && strsim::levenshtein(&k_norm, &key) <= 2).then(|| {
            match v {
                Some(v) => format!("{k}={v}"),
                None => k,
            }
        })
    })
}

/// Whether the kernel has `option`, from its build config (None when the
/// config is not readable).
fn built_with(input: &CheckInput<'_>, option: &str) -> Option<bool> {
    let k = &input.facts.kconfig;
    (!k.is_empty()).then(|| k.get(option).is_some_and(|v| v == "y"))
}

/// What the command line says about `key` for the checked CPUs: `Ok` with
/// its CPUs and flags when it covers them, else why not.
fn given(input: &CheckInput<'_>, key: &str) -> Result<(CpuSet, Vec<String>), Why> {
    let cmdline = &input.facts.cmdline;
    let Some(value) = param(cmdline, key) else {
        return Err(match misspelling(cmdline, key) {
            Some(word) => Why::Misspelt(word),
            None => Why::Absent,
        });
    };
    let Some((cpus, flags)) = cpu_param(cmdline, key) else {
        return Err(Why::Invalid(format!("{key}={value}")));
    };
    if !input.cpus.is_subset(&cpus) {
        return Err(Why::Mismatch(format!("{key}={value}")));
    }
    Ok((cpus, flags))
}

/// Why a parameter that is on the line has no effect: the build, else the kernel.
fn not_applied(input: &CheckInput<'_>, key: &str, shown: String) -> Why {
    match built_with(input, option_of(key)) {
        Some(false) => Why::NotBuilt(option_of(key)),
        _ => Why::Ignored(shown),
    }
}

fn isolated(input: &CheckInput<'_>) -> CpuSet {
    input
        .facts
        .isolated
        .as_deref()
        .and_then(|s| CpuSet::parse_list(s.trim()).ok())
        .unwrap_or_default()
}

/// `isolcpus=` with its `domain` part (the scheduler domains) and its
/// `managed_irq` part (kernel-managed IRQs), checked apart.
fn isolcpus(input: &CheckInput<'_>, wanted: &str) -> Vec<Verdict> {
    let mut out = Vec::new();
    let flags_wanted: Vec<&str> = wanted
        .trim_start_matches("isolcpus=")
        .split(',')
        .filter(|w| w.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_'))
        .collect();
    let given = given(input, "isolcpus");
    if flags_wanted.contains(&"domain") {
        let result = given.clone().and_then(|(_, flags)| {
            // No flag at all means `domain`.
            if !flags.is_empty() && !flags.iter().any(|f| f == "domain") {
                return Err(Why::Mismatch(format!(
                    "isolcpus={} (without the domain flag)",
                    param(&input.facts.cmdline, "isolcpus").unwrap_or_default()
                )));
            }
            let iso = isolated(input);
            if input.cpus.is_subset(&iso) {
                Ok(format!("{ISOLATED} = {iso}"))
            } else {
                Err(not_applied(
                    input,
                    "isolcpus",
                    format!(
                        "{ISOLATED} reads '{}'",
                        input.facts.isolated.as_deref().unwrap_or("").trim()
                    ),
                ))
            }
        });
        out.push(Verdict {
            wanted: format!("{wanted} (its domain part)"),
            key: "isolcpus",
            result,
        });
    }
    if flags_wanted.contains(&"managed_irq") {
        let result = given.and_then(|(_, flags)| {
            if !flags.iter().any(|f| f == "managed_irq") {
                return Err(Why::Mismatch(format!(
                    "isolcpus={} (without the managed_irq flag)",
                    param(&input.facts.cmdline, "isolcpus").unwrap_or_default()
                )));
            }
            let here: Vec<String> = input
                .facts
                .irqs
                .iter()
                .filter(|(_, f)| matches!(f.managed, Managed::Yes | Managed::Likely))
                .filter(|(irq, _)| {
                    input.after.irq_affinity.get(irq).is_some_and(|a| {
                        a.effective
                            .as_ref()
                            .unwrap_or(&a.requested)
                            .intersects(input.cpus)
                    })
                })
                .map(|(irq, _)| irq.to_string())
                .collect();
            let managed = input
                .facts
                .irqs
                .values()
                .filter(|f| matches!(f.managed, Managed::Yes | Managed::Likely))
                .count();
            if here.is_empty() {
                Ok(format!(
                    "none of the {managed} kernel-managed IRQs is delivered to CPU {}",
                    input.list()
                ))
            } else {
                Err(Why::Ignored(format!(
                    "kernel-managed IRQ {} still delivered there (managed_irq moves only IRQs whose mask also holds a housekeeping CPU)",
                    here.join(", ")
                )))
            }
        });
        out.push(Verdict {
            wanted: format!("{wanted} (its managed_irq part)"),
            key: "isolcpus",
            result,
        });
    }
    out
}

/// `nohz_full=`: the sysfs list.
fn nohz_full(input: &CheckInput<'_>, wanted: &str) -> Verdict {
    let result = given(input, "nohz_full").and_then(|_| {
        let shown = input.facts.nohz_full.clone().unwrap_or_default();
        let sysfs = CpuSet::parse_list(shown.trim()).unwrap_or_default();
        if input.cpus.is_subset(&sysfs) {
            Ok(format!("{NOHZ_FULL} = {sysfs}"))
        } else {
            Err(not_applied(
                input,
                "nohz_full",
                format!("{NOHZ_FULL} reads '{}'", shown.trim()),
            ))
        }
    });
    Verdict {
        wanted: wanted.to_string(),
        key: "nohz_full",
        result,
    }
}

/// `rcu_nocbs=`: the CPUs the kernel offloads, from what proves it (its
/// boot record, else its rcuo threads; see `Facts::rcu_offload`). An rcuo
/// thread alone proves nothing: 6.1 and 6.12 start one for every CPU once
/// any CPU is offloaded. `nohz_full=` offloads its CPUs as well, so a line
/// without `rcu_nocbs=` whose CPUs are offloaded is in effect. Without
/// proof the parameter is not verified, neither in effect nor broken.
fn rcu_nocbs(input: &CheckInput<'_>, wanted: &str) -> Verdict {
    let offload = input.rcu_offload().clone();
    let all = input.cpus.is_subset(&offload.cpus);
    let result = match given(input, "rcu_nocbs") {
        Ok(_) if !offload.proven => Err(Why::Unverified(offload.evidence)),
        Ok(_) if all => Ok(offload.evidence),
        Ok(_) => Err(not_applied(input, "rcu_nocbs", offload.evidence)),
        Err(Why::Absent) if offload.proven && all => Ok(format!(
            "{}: nohz_full= offloads its CPUs' callbacks as well",
            offload.evidence
        )),
        Err(Why::Absent) if !offload.proven && all => Err(Why::Unverified(offload.evidence)),
        Err(why) => Err(why),
    };
    Verdict {
        wanted: wanted.to_string(),
        key: "rcu_nocbs",
        result,
    }
}

/// `irqaffinity=`: the default IRQ mask.
fn irqaffinity(input: &CheckInput<'_>, wanted: &str) -> Verdict {
    let cmdline = &input.facts.cmdline;
    let result = match param(cmdline, "irqaffinity") {
        None => Err(match misspelling(cmdline, "irqaffinity") {
            Some(word) => Why::Misspelt(word),
            None => Why::Absent,
        }),
        Some(value) => match CpuSet::parse_list(&value) {
            Err(_) => Err(Why::Invalid(format!("irqaffinity={value}"))),
            Ok(cpus) if cpus.intersects(input.cpus) => {
                Err(Why::Mismatch(format!("irqaffinity={value}")))
            }
            Ok(_) => match &input.facts.default_irq_affinity {
                Some(d) if !d.intersects(input.cpus) => Ok(format!("{DEFAULT_IRQ_AFFINITY} = {d}")),
                d => Err(Why::Ignored(format!(
                    "{DEFAULT_IRQ_AFFINITY} = {}",
                    d.as_ref().map(|d| d.to_list()).unwrap_or_default()
                ))),
            },
        },
    };
    Verdict {
        wanted: wanted.to_string(),
        key: "irqaffinity",
        result,
    }
}

/// The kernel's HZ, from its build config.
fn kernel_hz(input: &CheckInput<'_>) -> Option<u64> {
    input
        .facts
        .kconfig
        .get("CONFIG_HZ")
        .and_then(|v| v.parse::<u64>().ok())
}

/// Local timer interrupts per second at or below which a nohz_full CPU's
/// tick counts as stopped: a tenth of HZ.
pub(super) fn tick_limit(input: &CheckInput<'_>) -> f64 {
    kernel_hz(input).unwrap_or(HZ_UNKNOWN) as f64 / 10.0
}

/// The tick on a nohz_full CPU: local timer interrupts per second while the
/// CPU was busy (one task running), against the kernel's HZ.
fn tick(input: &CheckInput<'_>, cpu: usize) -> Option<Finding> {
    let loc = |s: &crate::snapshot::Snapshot| {
        s.interrupts
            .iter()
            .find(|l| l.id == "LOC")
            .map(|l| l.on(cpu))
    };
    let (Some(a), Some(b)) = (loc(input.before), loc(input.after)) else {
        return None;
    };
    let per_s = input.per_s(b.saturating_sub(a));
    let (Some(t0), Some(t1)) = (
        input.before.cpu_times.get(&cpu),
        input.after.cpu_times.get(&cpu),
    ) else {
        return None;
    };
    let d = t1.since(t0);
    let busy = if d.total() > 0 {
        d.busy().saturating_sub(d.steal) as f64 / d.total() as f64 * 100.0
    } else {
        0.0
    };
    let hz = kernel_hz(input);
    let limit = tick_limit(input);
    let hz_text = hz.map_or("HZ unknown".to_string(), |h| format!("HZ {h}"));
    let evidence = format!(
        "{INTERRUPTS} LOC on CPU {cpu}: +{} in {:.1} s ({per_s:.1}/s, {hz_text}); CPU {cpu} {busy:.0}% busy ({STAT})",
        b.saturating_sub(a),
        input.interval_s()
    );
    Some(if busy < BUSY_PCT {
        Finding::new(
            Severity::Info,
            Topic::Isolation,
            Some(cpu),
            format!("the stopped tick on CPU {cpu} is not verified: the CPU was idle ({busy:.0}% busy), and an idle CPU stops its tick anyway"),
            evidence,
        )
        .remedy(Remedy::cpushield(format!(
            "run one task there during the check, e.g. cpushield run --cpus {cpu} -- PROGRAM"
        )))
    } else if per_s <= limit {
        Finding::new(
            Severity::Info,
            Topic::Isolation,
            Some(cpu),
            format!("the tick stopped on nohz_full CPU {cpu}: {per_s:.1} local timer interrupts/s while a task kept it busy"),
            evidence,
        )
    } else {
        Finding::new(
            Severity::BreaksShield,
            Topic::Isolation,
            Some(cpu),
            format!("the tick still runs on nohz_full CPU {cpu}: {per_s:.0} local timer interrupts/s while a task kept it busy (more than one task runnable there, or timers armed on it)"),
            evidence,
        )
        .remedy(Remedy::cpushield(format!("cpushield shield --all {}", input.list())))
        .remedy(Remedy::runtime("sysctl -w kernel.timer_migration=1"))
    })
}

/// The text of a reason.
fn reason(v: &Verdict, input: &CheckInput<'_>) -> String {
    let cpus = input.list();
    match &v.result {
        Ok(_) => String::new(),
        Err(Why::Absent) => format!("{} is not on the kernel command line", v.key),
        Err(Why::Misspelt(word)) => format!(
            "{} is not on the kernel command line: '{word}' is a misspelling of it, which the kernel does not know (it passes the word to init)",
            v.key
        ),
        Err(Why::Invalid(word)) => {
            format!("{word}: its CPU list does not parse, so the kernel ignored it")
        }
        Err(Why::Mismatch(word)) => format!("{word} does not cover CPU {cpus}"),
        Err(Why::NotBuilt(option)) => format!(
            "{} is on the command line, but this kernel is built without {option} ({})",
            v.key,
            input
                .facts
                .kconfig_source
                .as_deref()
                .unwrap_or("its build config")
        ),
        Err(Why::Unverified(why)) => format!(
            "{} is asked for, but whether the kernel applied it is not shown: {why}",
            v.key
        ),
        Err(Why::Ignored(shown)) => {
            let build = if input.facts.kconfig.is_empty() {
                format!(
                    "; its build config is not readable to tell whether {} is set",
                    option_of(v.key)
                )
            } else {
                String::new()
            };
            format!(
                "{} is on the command line, but {shown}: the kernel did not apply it (dmesg says why){build}",
                v.key
            )
        }
    }
}

/// `cpushield boot-params --all` of the checked CPUs on this machine.
fn shield_line(input: &CheckInput<'_>) -> String {
    let facts = input.facts;
    let balancing = cpushield_kernel::numa::balancing_applies(&facts.nodes, facts.numa_balancing);
    boot_params(&ShieldMasks::all(input.cpus), &facts.online, balancing)
}

/// The boot parameters' findings for the checked CPUs.
pub(super) fn analyze(input: &CheckInput<'_>, findings: &mut Vec<Finding>) {
    let line = shield_line(input);
    let cmdline = &input.facts.cmdline;
    // A parameter of the line, or a misspelling of one (alone on the
    // command line, it is the only sign that the line was meant).
    let used = line.split_whitespace().any(|w| {
        let key = w.split('=').next().unwrap_or(w);
        param(cmdline, key).is_some() || misspelling(cmdline, key).is_some()
    });
    if !used {
        return;
    }
    let mut verdicts = Vec::new();
    for wanted in line.split_whitespace() {
        match wanted.split('=').next().unwrap_or("") {
            "isolcpus" => verdicts.extend(isolcpus(input, wanted)),
            "nohz_full" => verdicts.push(nohz_full(input, wanted)),
            "rcu_nocbs" => verdicts.push(rcu_nocbs(input, wanted)),
            "irqaffinity" => verdicts.push(irqaffinity(input, wanted)),
            _ => {}
        }
    }
    // The line is tuned's when the loaded tuned profile asked for one (its
    // bootloader plugin): a parameter it asked for is checked as any other; one
    // of cpushield's line it did not ask for is tuned's choice, named, not a
    // broken shield (cpu-partitioning leaves out isolcpus unless asked).
    let tuned = &input.facts.tuned_boot_line;
    let tuned_asks = |key: &str| {
        tuned
            .iter()
            .any(|w| w.split('=').next().unwrap_or(w) == key)
    };
    let mut nohz_in_effect = false;
    for v in &verdicts {
        if !tuned.is_empty() && !tuned_asks(v.key) && v.result.is_err() {
            findings.push(
                Finding::new(
                    Severity::Info,
                    Topic::Isolation,
                    None,
                    format!(
                        "boot parameter {} is not on the boot line of the loaded tuned profile",
                        v.wanted
                    ),
                    format!(
                        "tuned's bootloader plugin set the line ({}); {}",
                        tuned.join(" "),
                        reason(v, input)
                    ),
                )
                .remedy(Remedy::boot(line.clone())),
            );
            continue;
        }
        match &v.result {
            Ok(evidence) => {
                nohz_in_effect |= v.key == "nohz_full";
                findings.push(Finding::new(
                    Severity::Info,
                    Topic::Isolation,
                    None,
                    format!("boot parameter {} in effect", v.wanted),
                    evidence.clone(),
                ));
            }
            Err(Why::Unverified(_)) => findings.push(Finding::new(
                Severity::Info,
                Topic::Isolation,
                None,
                format!(
                    "boot parameter {} not verified: {}",
                    v.wanted,
                    reason(v, input)
                ),
                format!("{CMDLINE}: {}", cmdline.trim()),
            )),
            Err(_) => findings.push(
                Finding::new(
                    Severity::BreaksShield,
                    Topic::Isolation,
                    None,
                    format!(
                        "boot parameter {} from `cpushield boot-params --all {}` is not in effect: {}",
                        v.wanted,
                        input.list(),
                        reason(v, input)
                    ),
                    format!("{CMDLINE}: {}", cmdline.trim()),
                )
                .remedy(Remedy::boot(line.clone())),
            ),
        }
    }
    if nohz_in_effect {
        findings.extend(input.cpus.iter().filter_map(|cpu| tick(input, cpu)));
    }
}
