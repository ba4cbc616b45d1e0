//! Pure analysis: two snapshots, the run-time samples in between and the
//! configuration facts in; findings and per-CPU activity out. No I/O here.

mod bootparams;
mod config;
mod interrupts;
pub(crate) mod irqs;
pub(crate) mod numa;
mod rt;
pub(crate) mod tasks;
mod vm;

use crate::facts::Facts;
use crate::finding::{Finding, Remedy, RemedyKind, Severity, Topic};
use crate::sampling::RunTracker;
use crate::snapshot::Snapshot;
use crate::target::{ShieldInForce, ShieldKind};
use cpushield_cpuset::CpuSet;
use cpushield_parse::interrupts::IrqLine;
use serde::Serialize;
use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};

pub use config::{nohz_full_cpus, preempt_model};

/// Where the checked CPU list came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuSource {
    /// `--cpus` on the command line.
    Argument,
    /// The shield state file (the shielded CPUs).
    ShieldState,
}

/// What a VM's host side (`cpushield vm watch`) said of the checked vCPUs
/// over the interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum HostSaid {
    /// Not asked: no virtio-serial port to a host side, or `--host-channel none`.
    #[default]
    NotAsked,
    /// A port, but no host side answered: the line that says how to get one.
    Absent(String),
    /// Per checked vCPU: the time the host held it off (ns) and its account
    /// in one line, or why the host's view of the interval is missing.
    Held(BTreeMap<usize, Result<(u64, String), String>>),
}

/// Everything the analysis needs.
pub struct CheckInput<'a> {
    /// The CPUs checked.
    pub cpus: &'a CpuSet,
    /// Where they came from.
    pub source: CpuSource,
    /// Counters at the start of the interval.
    pub before: &'a Snapshot,
    /// Counters at the end (with thread affinities).
    pub after: &'a Snapshot,
    /// Run time per thread and CPU over the interval.
    pub runs: &'a RunTracker,
    /// Configuration.
    pub facts: &'a Facts,
    /// The process running the check (left out of the task findings).
    pub self_pid: i32,
    /// The shield in force (its saved state), when one is up: remedies name
    /// only what it leaves to do.
    pub shield: Option<&'a ShieldInForce>,
    /// What a VM's host side said of the checked vCPUs.
    pub host: &'a HostSaid,
    /// What the per-CPU analyses share, derived once ([`Derived::default`]
    /// to start).
    pub derived: Derived<'a>,
}

/// What the analysis derives from its input once and every checked CPU
/// looks up: a scan of every thread or IRQ line per CPU made a check cost
/// CPUs x tasks (512 x 100,000 on a big machine). Each part is filled on
/// first use.
#[derive(Default)]
pub struct Derived<'a> {
    list: OnceCell<String>,
    housekeeping: OnceCell<CpuSet>,
    rcu_offload: OnceCell<crate::facts::RcuOffload>,
    bound_kthreads: OnceCell<BTreeMap<usize, Vec<String>>>,
    lines: OnceCell<IrqLines<'a>>,
    /// The IRQ handler threads (`irq/N-name`) of the end snapshot, with N.
    irq_threads: OnceCell<Vec<(&'a crate::snapshot::ThreadSample, u32)>>,
    /// The per-CPU threads rt.rs names, by CPU, with their kind.
    per_cpu_threads:
        OnceCell<BTreeMap<usize, Vec<(&'static str, &'a crate::snapshot::ThreadSample)>>>,
}

/// The IRQ lines of the two snapshots, paired once.
pub(crate) struct IrqLines<'a> {
    /// Each line of the end snapshot with the start's line of the same id
    /// (the first line of an id, as a search finds it); lines new since are
    /// left out.
    pub pairs: Vec<(&'a IrqLine, &'a IrqLine)>,
    /// The device IRQs' lines by number, start (when there) and end.
    pub by_number: HashMap<u32, (Option<&'a IrqLine>, &'a IrqLine)>,
}

impl<'a> IrqLines<'a> {
    fn pair(before: &'a [IrqLine], after: &'a [IrqLine]) -> Self {
        let first_of = |lines: &'a [IrqLine]| -> HashMap<&'a str, &'a IrqLine> {
            // Reversed: the first line of an id wins.
            lines.iter().rev().map(|l| (l.id.as_str(), l)).collect()
        };
        let earlier = first_of(before);
        let pairs = after
            .iter()
            .filter_map(|l| Some((*earlier.get(l.id.as_str())?, l)))
            .collect();
        let by_number = first_of(after)
            .into_values()
            .filter_map(|l| Some((l.number()?, (earlier.get(l.id.as_str()).copied(), l))))
            .collect();
        Self { pairs, by_number }
    }

    /// The interrupts of device IRQ `irq` that arrived on `cpu` between the
    /// two snapshots.
    pub fn arrived(&self, irq: u32, cpu: usize) -> u64 {
        self.by_number.get(&irq).map_or(0, |(before, after)| {
            after
                .on(cpu)
                .saturating_sub(before.map_or(0, |b| b.on(cpu)))
        })
    }
}

impl<'a> CheckInput<'a> {
    pub(crate) fn interval_s(&self) -> f64 {
        (self.after.at_ns.saturating_sub(self.before.at_ns)) as f64 / 1e9
    }
    pub(crate) fn per_s(&self, count: u64) -> f64 {
        count as f64 / self.interval_s().max(1e-9)
    }
    /// The checked CPUs as a list, for remedies (`1,3`).
    pub(crate) fn list(&self) -> String {
        self.derived
            .list
            .get_or_init(|| self.cpus.to_list())
            .clone()
    }
    /// The online CPUs that are not checked (housekeeping).
    pub(crate) fn housekeeping(&self) -> CpuSet {
        self.derived
            .housekeeping
            .get_or_init(|| self.facts.online.difference(self.cpus))
            .clone()
    }
    /// The per-CPU kernel threads bound to `cpu` (affinity that CPU alone,
    /// and the kernel refuses to move them), by name, sorted.
    pub(crate) fn bound_kthreads(&self, cpu: usize) -> &[String] {
        let by_cpu = self.derived.bound_kthreads.get_or_init(|| {
            let mut by_cpu: BTreeMap<usize, Vec<String>> = BTreeMap::new();
            for t in self.runs.all_latest() {
                if !(t.stat.is_kthread() && t.stat.no_setaffinity()) {
                    continue;
                }
                let Some(a) = t.affinity.as_ref().filter(|a| a.len() == 1) else {
                    continue;
                };
                if let Some(only) = a.iter().next() {
                    by_cpu.entry(only).or_default().push(t.stat.comm.clone());
                }
            }
            by_cpu.values_mut().for_each(|v| v.sort());
            by_cpu
        });
        by_cpu.get(&cpu).map(Vec::as_slice).unwrap_or(&[])
    }
    /// The IRQ lines of the two snapshots, paired.
    pub(crate) fn irq_lines(&self) -> &IrqLines<'a> {
        self.derived
            .lines
            .get_or_init(|| IrqLines::pair(&self.before.interrupts, &self.after.interrupts))
    }
    /// Whether the shield in force covers `cpu` for `kind`.
    pub(crate) fn shielded(&self, kind: ShieldKind, cpu: usize) -> bool {
        self.shield.is_some_and(|s| s.shielded(kind).contains(cpu))
    }
    /// The `cpushield shield --KIND` remedy for the checked CPUs the shield
    /// in force does not cover yet; `None` when it covers them all (the
    /// command would change nothing).
    pub(crate) fn shield_remedy(&self, kind: ShieldKind) -> Option<Remedy> {
        shield_remedy(self.shield, kind, self.cpus)
    }
    /// The CPUs whose RCU callbacks the kernel offloads, and what shows it
    /// (the kernel's boot record, else its rcuo threads at the end of the
    /// interval, else the command line).
    pub(crate) fn rcu_offload(&self) -> &crate::facts::RcuOffload {
        self.derived.rcu_offload.get_or_init(|| {
            self.facts.rcu_offload(
                self.after
                    .threads
                    .iter()
                    .filter(|t| t.stat.is_kthread())
                    .map(|t| (t.stat.comm.as_str(), t.stat.state)),
            )
        })
    }
    /// What the shield in force does about `kind` on `cpu`, when it covers it.
    pub(crate) fn in_place(&self, kind: ShieldKind, cpu: usize) -> Option<String> {
        self.shielded(kind, cpu).then(|| in_place(kind, cpu))
    }
}

/// The `cpushield shield --KIND` remedy for those of `cpus` that `shield`
/// does not cover for `kind`; `None` when it covers them all.
pub(crate) fn shield_remedy(
    shield: Option<&ShieldInForce>,
    kind: ShieldKind,
    cpus: &CpuSet,
) -> Option<Remedy> {
    let left = match shield {
        Some(s) => cpus.difference(s.shielded(kind)),
        None => cpus.clone(),
    };
    (!left.is_empty()).then(|| {
        Remedy::cpushield(format!(
            "cpushield shield --{} {}",
            kind.flag(),
            left.to_list()
        ))
    })
}

/// What a shield of `kind` on `cpu` already does, in a phrase.
pub(crate) fn in_place(kind: ShieldKind, cpu: usize) -> String {
    match kind {
        ShieldKind::Procs => format!(
            "the shield keeps processes and unbound kernel threads off CPU {cpu} (--procs)"
        ),
        ShieldKind::Irqs => format!(
            "the shield moved every IRQ the kernel lets it move off CPU {cpu} (--irqs)"
        ),
        ShieldKind::Ltmr => format!(
            "the shield applied the run-time part of the local-timer shield on CPU {cpu} (--ltmr: watchdog off, vmstat interval 10 s or more, timer migration on)"
        ),
    }
}

/// A count over the interval with its rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Count {
    /// What was counted (IRQ number or kind, softirq name).
    pub id: String,
    /// A readable name (device, description).
    pub name: String,
    /// The count over the interval.
    pub count: u64,
    /// Per second.
    pub per_s: f64,
}

/// One thread that ran on a checked CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskActivity {
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Thread name.
    pub comm: String,
    /// Whether it is a kernel thread.
    pub kernel_thread: bool,
    /// Its affinity, as a CPU list.
    pub affinity: String,
    /// Run time charged to this CPU, ms.
    pub run_ms: f64,
}

/// What happened on one checked CPU during the interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuActivity {
    /// The CPU.
    pub cpu: usize,
    /// Busy time (not idle), percent of the interval.
    pub busy_pct: f64,
    /// Steal time, ms.
    pub steal_ms: f64,
    /// Interrupts that arrived (non-zero only), device IRQs and kinds.
    pub interrupts: Vec<Count>,
    /// Softirqs that ran (non-zero only).
    pub softirqs: Vec<Count>,
    /// Threads that ran, most run time first.
    pub tasks: Vec<TaskActivity>,
    /// Per-CPU kernel threads bound to it.
    pub bound_kthreads: Vec<String>,
}

/// The result of a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckReport {
    /// Schema version of the JSON form.
    pub version: u32,
    /// The checked CPUs.
    pub cpus: String,
    /// Where they came from.
    pub cpus_source: CpuSource,
    /// Length of the interval, s.
    pub interval_s: f64,
    /// How the threads were sampled, and the limits of that.
    pub sampling: String,
    /// The one-line verdict.
    pub verdict: String,
    /// Whether anything breaks the shield (exit code 3).
    pub breaks_shield: bool,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// Per checked CPU.
    pub activity: Vec<CpuActivity>,
}

/// Runs every analysis and builds the report.
pub fn analyze(input: &CheckInput<'_>, sampling: &str) -> CheckReport {
    let mut findings = Vec::new();
    let mut activity = Vec::new();
    for cpu in input.cpus.iter() {
        let mut act = CpuActivity {
            cpu,
            busy_pct: 0.0,
            steal_ms: 0.0,
            interrupts: Vec::new(),
            softirqs: Vec::new(),
            tasks: Vec::new(),
            bound_kthreads: Vec::new(),
        };
        findings.extend(interrupts::analyze_cpu(input, &mut act));
        findings.extend(tasks::analyze_cpu(input, &mut act));
        findings.extend(config::analyze_cpu(input, &mut act));
        rt::analyze_cpu(input, cpu, &mut findings);
        activity.push(act);
    }
    config::analyze_system(input, &mut findings);
    rt::analyze_system(input, &mut findings);
    bootparams::analyze(input, &mut findings);
    numa::analyze(input, &mut findings);
    vm::analyze(input, &mut findings);
    let promise = partial_promise(input);
    if promise.is_some() {
        judge_by_the_shield_in_force(input, &mut findings);
    }
    let lost = input.shield.and_then(|s| Some((s, s.state_lost.as_ref()?)));
    if let Some((shield, signs)) = lost {
        state_lost(shield, signs, &mut findings);
    }
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.cpu.cmp(&b.cpu))
            .then(a.topic.cmp(&b.topic))
    });
    let breaks = findings
        .iter()
        .filter(|f| f.severity == Severity::BreaksShield)
        .count();
    let warns = findings
        .iter()
        .filter(|f| f.severity == Severity::Warn)
        .count();
    let cpus = input.list();
    let plural = if input.cpus.len() > 1 { "CPUs" } else { "CPU" };
    let verdict = if lost.is_some() {
        format!(
            "{plural} {cpus}: a shield is in place without its saved state; undo it with `cpushield reset --without-state`, then shield again ({breaks} finding{} break{} the shield, {warns} warning{})",
            s(breaks),
            if breaks == 1 { "s" } else { "" },
            s(warns)
        )
    } else if let Some(promise) = &promise {
        if breaks > 0 {
            format!(
                "{plural} {cpus} NOT shielded: {breaks} finding{} break{} what the shield in force promises ({promise}), {warns} warning{}",
                s(breaks),
                if breaks == 1 { "s" } else { "" },
                s(warns)
            )
        } else {
            format!(
                "{plural} {cpus} clean for what the shield in force promises ({promise}): nothing reached {} that it keeps away ({warns} warning{})",
                if input.cpus.len() > 1 { "them" } else { "it" },
                s(warns)
            )
        }
    } else if breaks > 0 {
        format!(
            "{plural} {cpus} NOT shielded: {breaks} finding{} break{} the shield, {warns} warning{}",
            s(breaks),
            if breaks == 1 { "s" } else { "" },
            s(warns)
        )
    } else {
        format!(
            "{plural} {cpus} clean: nothing reached {} that a shield keeps away ({warns} warning{})",
            if input.cpus.len() > 1 { "them" } else { "it" },
            s(warns)
        )
    };
    CheckReport {
        version: 1,
        cpus,
        cpus_source: input.source.clone(),
        interval_s: input.interval_s(),
        sampling: sampling.to_string(),
        verdict,
        breaks_shield: breaks > 0,
        findings,
        activity,
    }
}

/// A shield whose saved state is gone: said as what breaks it, with the
/// one command that undoes it; every `cpushield shield` remedy is dropped,
/// since the shield refuses to run over it.
fn state_lost(shield: &ShieldInForce, signs: &[String], findings: &mut Vec<Finding>) {
    for f in findings.iter_mut() {
        f.remedies.retain(|r| {
            !(r.kind == RemedyKind::Cpushield && r.action.starts_with("cpushield shield "))
        });
    }
    findings.push(
        Finding::new(
            Severity::BreaksShield,
            Topic::Enforcement,
            None,
            format!(
                "a shield is in place on CPU {} without its saved state: cpushield can neither change it (`cpushield shield` refuses) nor undo it exactly",
                shield.masks.any()
            ),
            signs.join("; "),
        )
        .remedy(Remedy::cpushield(
            "cpushield reset --without-state (then shield again; what the tasks, IRQs and settings had before the shield was in the state, so it gives back the kernel's defaults)",
        )),
    );
}

const KINDS: [ShieldKind; 3] = [ShieldKind::Procs, ShieldKind::Irqs, ShieldKind::Ltmr];

/// What a shield of `kind` keeps off a CPU, in a phrase.
fn kept_off(kind: ShieldKind) -> &'static str {
    match kind {
        ShieldKind::Procs => "processes and unbound kernel threads",
        ShieldKind::Irqs => "device IRQs",
        ShieldKind::Ltmr => "the local timer's run-time sources",
    }
}

/// The shield whose promise a finding that breaks a shield breaks, by its
/// topic; `None` for what no run-time shield promises (boot parameters).
fn promised_by(topic: Topic) -> Option<ShieldKind> {
    match topic {
        Topic::Task | Topic::KernelThread | Topic::Enforcement => Some(ShieldKind::Procs),
        Topic::Irq | Topic::IrqPending | Topic::Irqbalance => Some(ShieldKind::Irqs),
        _ => None,
    }
}

/// When the shield in force covers every checked CPU, but not from
/// everything (`shield --irqs 3` alone), what it promises there, in a
/// phrase (`--irqs: device IRQs kept off; not processes and unbound kernel
/// threads, not the local timer's run-time sources`). `None` without a
/// shield, with one that covers them from everything, or with one that
/// leaves a checked CPU out (then the check judges a whole shield).
fn partial_promise(input: &CheckInput<'_>) -> Option<String> {
    let shield = input.shield?;
    let covers = |k: ShieldKind| input.cpus.is_subset(shield.shielded(k));
    let (on, off): (Vec<ShieldKind>, Vec<ShieldKind>) = KINDS.into_iter().partition(|k| covers(*k));
    let any = KINDS
        .iter()
        .fold(CpuSet::new(), |all, k| all.union(shield.shielded(*k)));
    if on.is_empty() || off.is_empty() || !input.cpus.is_subset(&any) {
        return None;
    }
    let flags: Vec<String> = on.iter().map(|k| format!("--{}", k.flag())).collect();
    let kept: Vec<&str> = on.iter().map(|k| kept_off(*k)).collect();
    let not: Vec<String> = off
        .iter()
        .map(|k| format!("not {}", kept_off(*k)))
        .collect();
    Some(format!(
        "{}: {} kept off; {}",
        flags.join(" "),
        kept.join(" and "),
        not.join(", ")
    ))
}

/// Under a shield in force from some kinds only, a finding that breaks
/// what a kind it does not apply would promise (a task on a CPU shielded
/// from IRQs alone) is a warning: the shield in force never promised it.
/// It says what the shield does promise; its remedy (the missing kind)
/// stays.
fn judge_by_the_shield_in_force(input: &CheckInput<'_>, findings: &mut [Finding]) {
    for f in findings
        .iter_mut()
        .filter(|f| f.severity == Severity::BreaksShield)
    {
        let (Some(cpu), Some(kind)) = (f.cpu, promised_by(f.topic)) else {
            continue;
        };
        if input.shielded(kind, cpu) {
            continue;
        }
        let on: Vec<String> = KINDS
            .iter()
            .filter(|k| input.shielded(**k, cpu))
            .map(|k| format!("--{}", k.flag()))
            .collect();
        f.severity = Severity::Warn;
        let what = format!(
            "the shield in force on CPU {cpu} is {} alone: it does not keep {} off",
            on.join(" "),
            kept_off(kind)
        );
        f.in_place = Some(match f.in_place.take() {
            Some(before) => format!("{before}; {what}"),
            None => what,
        });
    }
}

/// The items of a finding's list (IRQ numbers, CPUs) as `a, b, c`.
fn join<T: ToString>(v: &[T]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn s(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
