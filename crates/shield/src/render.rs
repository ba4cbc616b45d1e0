//! Human-readable text of `cpushield show` (a [`Status`]) and of the reports of
//! `shield`, `unshield` and `reset` (a [`Report`]); JSON is their serde form.

use crate::status::{CpuStatus, Status, TaskOnCpu};
use crate::steps::Severity;
use crate::Report;
use cpushield_cpuset::CpuSet;
use std::fmt::Write;

/// How many task names a CPU's "may still run" line lists before "… N in all".
const TASKS_LISTED: usize = 12;

/// Up to this many online CPUs `show` prints a row and a block per CPU;
/// above it, CPUs that read alike share one (a list of ranges).
const FOLD_ABOVE: usize = 16;

/// Renders the shield status for a terminal (`cpushield show`).
pub fn render_status(st: &Status) -> String {
    // The CPU itself is part of the key where nothing folds.
    let fold = st.cpus.len() > FOLD_ABOVE;
    let mut o = status_header(st);
    o.push_str(&cpu_table(st, fold));
    o.push_str(&shielded_details(st, fold));
    o
}

/// "-" for an empty list.
fn dash(s: &str) -> String {
    if s.is_empty() {
        "-".to_string()
    } else {
        s.to_string()
    }
}

/// What is shielded, how, and a shield without its state.
fn status_header(st: &Status) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "shielded: procs {}  irqs {}  ltmr {}   (online {})",
        dash(&st.procs),
        dash(&st.irqs),
        dash(&st.ltmr),
        st.online
    );
    let _ = writeln!(
        o,
        "mechanism: {}; {}; scope {:?}",
        st.mechanism, st.enforcement, st.scope
    );
    if let Some(mems) = &st.mems {
        let _ = writeln!(o, "memory nodes: {mems}");
    }
    if let Some(found) = &st.without_state {
        let _ = writeln!(
            o,
            "NO STATE: a shield is in place without its saved state ({}); undo it with `cpushield reset --without-state` (the settings from before it are not known), or run with the CPUSHIELD_STATE_DIR it was set up with",
            found.evidence.join("; ")
        );
    }
    o
}

/// The range of some counts (at least one), `3` or `2-5`.
fn count_range(counts: impl Iterator<Item = usize>) -> String {
    let (lo, hi) = counts.fold((usize::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)));
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}-{hi}")
    }
}

/// One row per group of CPUs that read the same (the tasks column as the
/// range of their counts): a machine of 512 CPUs prints a few rows.
fn cpu_table(st: &Status, fold: bool) -> String {
    let mut o = String::new();
    let yn = |b: bool| if b { "yes" } else { "-" };
    let alone = |cpu: usize| if fold { None } else { Some(cpu) };
    let rows = cpushield_cpuset::group_cpus(st.cpus.iter().map(|c| {
        let irqs = if c.procs || c.irqs || c.ltmr {
            c.irqs_here.len().to_string()
        } else {
            String::new()
        };
        let flags = [
            c.procs,
            c.irqs,
            c.ltmr,
            c.nohz_full,
            c.rcu_nocbs,
            c.isolated,
        ];
        (c.cpu, (alone(c.cpu), flags, irqs))
    }));
    let tasks_of = |cpus: &CpuSet| {
        count_range(
            st.cpus
                .iter()
                .filter(|c| cpus.contains(c.cpu))
                .map(|c| c.task_count),
        )
    };
    let rows: Vec<(String, [bool; 6], String, String)> = rows
        .into_iter()
        .map(|(cpus, (_, flags, irqs))| (cpus.to_list(), flags, tasks_of(&cpus), irqs))
        .collect();
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(4);
    let _ = writeln!(
        o,
        "{:>w$}  {:5} {:4} {:4}  {:9} {:9} {:8}  {:>6}  {:>4}",
        "CPU", "procs", "irqs", "ltmr", "nohz_full", "rcu_nocbs", "isolated", "tasks", "IRQs"
    );
    for (cpus, f, tasks, irqs) in &rows {
        let _ = writeln!(
            o,
            "{cpus:>w$}  {:5} {:4} {:4}  {:9} {:9} {:8}  {tasks:>6}  {irqs:>4}",
            yn(f[0]),
            yn(f[1]),
            yn(f[2]),
            yn(f[3]),
            yn(f[4]),
            yn(f[5]),
        );
    }
    o
}

/// What still reaches each shielded CPU; CPUs that differ only in their own
/// per-CPU kernel threads (an idle shielded CPU) share one block.
fn shielded_details(st: &Status, fold: bool) -> String {
    let alone = |cpu: usize| if fold { None } else { Some(cpu) };
    let shielded: Vec<&CpuStatus> = st
        .cpus
        .iter()
        .filter(|c| c.procs || c.irqs || c.ltmr)
        .collect();
    let groups = cpushield_cpuset::group_cpus(shielded.iter().map(|c| {
        (
            c.cpu,
            (alone(c.cpu), cpu_details(c, "#", &CpuSet::new(), true)),
        )
    }));
    let mut o = String::new();
    for (cpus, _) in groups {
        let first = shielded
            .iter()
            .find(|c| cpus.contains(c.cpu))
            .expect("a group has a CPU");
        o.push_str(&cpu_details(first, &cpus.to_list(), &cpus, cpus.len() > 1));
    }
    o
}

/// Whether `t` is one of `cpu`'s own per-CPU kernel threads (bound there,
/// and only there, by the kernel): what an idle shielded CPU still runs.
fn own_kthread(t: &TaskOnCpu, cpu: usize) -> bool {
    t.pinned_by_kernel && t.affinity.len() == 1 && t.affinity.contains(cpu)
}

/// The lines of what still reaches shielded CPU `c`, said of CPUs `label`
/// (`cpus`); `folded` counts its own per-CPU kernel threads instead of
/// naming them, so that CPUs alike but for those share the lines.
fn cpu_details(c: &CpuStatus, label: &str, cpus: &CpuSet, folded: bool) -> String {
    let mut o = String::new();
    if !c.tasks.is_empty() {
        let name = |t: &TaskOnCpu| {
            format!(
                "{}({}){}",
                t.comm,
                t.tid,
                if t.pinned_by_kernel { "*" } else { "" }
            )
        };
        let (own, others): (Vec<&TaskOnCpu>, Vec<&TaskOnCpu>) = if folded {
            c.tasks.iter().partition(|t| own_kthread(t, c.cpu))
        } else {
            (Vec::new(), c.tasks.iter().collect())
        };
        let mut names: Vec<String> = Vec::new();
        if !own.is_empty() {
            names.push(format!(
                "its own {} per-CPU kernel thread{}*",
                own.len(),
                if own.len() == 1 { "" } else { "s" }
            ));
        }
        names.extend(others.iter().take(TASKS_LISTED).map(|t| name(t)));
        let more = if others.len() > TASKS_LISTED {
            format!(" … {} in all", others.len())
        } else {
            String::new()
        };
        let each = if folded && cpus.len() > 1 {
            " each"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "CPU {label} may still run{each}: {}{more}   (* = bound by the kernel)",
            names.join(" ")
        );
    }
    if !c.irqs_here.is_empty() {
        let irqs: Vec<String> = c.irqs_here.iter().map(irq_label).collect();
        let _ = writeln!(o, "CPU {label} still takes IRQs: {}", irqs.join(", "));
    }
    if !c.irq_moves_pending.is_empty() {
        let irqs: Vec<String> = c.irq_moves_pending.iter().map(irq_label).collect();
        let _ = writeln!(
            o,
            "CPU {label} move pending for IRQs {}: {}",
            irqs.join(", "),
            crate::irq_moves::meaning(cpus)
        );
    }
    if !c.irq_threads_followed.is_empty() {
        let names: Vec<&str> = c
            .irq_threads_followed
            .iter()
            .map(|t| t.comm.as_str())
            .collect();
        let _ = writeln!(
            o,
            "CPU {label}: {} IRQ handler thread{} followed {} IRQ{} off it: {}",
            names.len(),
            if names.len() == 1 { "" } else { "s" },
            if names.len() == 1 { "its" } else { "their" },
            if names.len() == 1 { "" } else { "s" },
            names.join(" ")
        );
    }
    for t in &c.irq_threads_pending {
        let _ = writeln!(
            o,
            "CPU {label}: IRQ {}'s handler thread {}({}) stays here with its IRQ until the IRQ's next interrupt moves both to {}",
            t.irq, t.comm, t.tid, t.irq_affinity
        );
    }
    for t in &c.irq_threads_left {
        let _ = writeln!(
            o,
            "CPU {label}: IRQ {}'s handler thread {}({}) may still run here though IRQ {} is on {} (pinned by hand): taskset -pc {} {}",
            t.irq,
            t.comm,
            t.tid,
            t.irq,
            t.irq_affinity,
            t.irq_affinity,
            t.tid
        );
    }
    o
}

/// An IRQ as `show` lists it: its number and name, or, for an IRQ with no
/// line in /proc/interrupts (no handler: x86's cascade IRQ 2), that.
fn irq_label(irq: &crate::status::IrqOnCpu) -> String {
    if irq.name.trim().is_empty() {
        format!("{} (no handler in /proc/interrupts)", irq.irq)
    } else {
        format!("{} {}", irq.irq, irq.name)
    }
}

/// Renders the report of `shield`, `unshield` or `reset` for a terminal;
/// `verb` starts the first line ("shielded", "shield now", "reset").
pub fn render_report(report: &Report, verb: &str) -> String {
    let mut o = String::new();
    let m = &report.masks;
    let show = |s: &CpuSet| {
        if s.is_empty() {
            "-".to_string()
        } else {
            s.to_list()
        }
    };
    let _ = writeln!(
        o,
        "{verb}: procs {}  irqs {}  ltmr {}  ({}, scope {:?})",
        show(&m.procs),
        show(&m.irqs),
        show(&m.ltmr),
        report.mechanism,
        report.scope
    );
    if let Some(mems) = &report.mems {
        let _ = writeln!(o, "  memory nodes of the shield: {mems}");
    }
    let out = &report.outcome;
    let _ = writeln!(
        o,
        "  {} tasks moved, {} affinities set, {} IRQs changed, {} tasks exited meanwhile",
        out.moved, out.affinities, out.irqs, out.vanished
    );
    for note in report.notes.iter().chain(&out.notes) {
        let tag = match note.severity {
            Severity::Info => "note",
            Severity::Warn => "warning",
        };
        match &note.remedy {
            Some(fix) => {
                let _ = writeln!(o, "  {tag}: {} (fix: {fix})", note.text);
            }
            None => {
                let _ = writeln!(o, "  {tag}: {}", note.text);
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::irq_threads::IrqThread;
    use crate::snapshot::Scope;
    use crate::status::{CpuStatus, IrqOnCpu, TaskOnCpu};

    fn cpu(n: usize, shielded: bool) -> CpuStatus {
        CpuStatus {
            cpu: n,
            procs: shielded,
            irqs: shielded,
            ltmr: false,
            nohz_full: false,
            rcu_nocbs: shielded,
            isolated: false,
            task_count: if shielded { 2 } else { 97 },
            tasks: Vec::new(),
            irqs_here: Vec::new(),
            irq_moves_pending: Vec::new(),
            irq_threads_followed: Vec::new(),
            irq_threads_left: Vec::new(),
            irq_threads_pending: Vec::new(),
        }
    }

    /// The status of a cgroup-v2 shield of CPU 3 (processes and IRQs) on
    /// a 4-CPU machine, with these CPUs' rows.
    fn shield_of_cpu_3(cpus: Vec<CpuStatus>) -> Status {
        Status {
            procs: "3".into(),
            irqs: "3".into(),
            ltmr: String::new(),
            online: "0-3".into(),
            mechanism: "cgroup v2 cpuset".into(),
            enforcement: "in force".into(),
            scope: Scope::System,
            state_file: None,
            mems: None,
            without_state: None,
            cpus,
        }
    }

    #[test]
    fn status_text_has_the_summary_the_table_and_what_still_reaches_a_shielded_cpu_with_pending_irq_moves(
    ) {
        let mut one = cpu(1, true);
        one.tasks = vec![
            TaskOnCpu {
                tid: 20,
                comm: "ksoftirqd/1".into(),
                kthread: true,
                pinned_by_kernel: true,
                affinity: CpuSet::from_cpus([1]),
            },
            TaskOnCpu {
                tid: 4242,
                comm: "rt-app".into(),
                kthread: false,
                pinned_by_kernel: false,
                affinity: CpuSet::from_cpus([1]),
            },
        ];
        one.irqs_here = vec![IrqOnCpu {
            irq: 24,
            name: "virtio0-input".into(),
            affinity: CpuSet::from_cpus([0, 1]),
        }];
        one.irq_moves_pending = vec![IrqOnCpu {
            irq: 42,
            name: "virtio3-tx".into(),
            affinity: CpuSet::from_cpus([0]),
        }];
        let thread = |tid, comm: &str, irq, affinity: &[usize]| IrqThread {
            tid,
            comm: comm.into(),
            irq,
            affinity: CpuSet::from_cpus(affinity.iter().copied()),
            irq_affinity: CpuSet::from_cpus([0]),
        };
        one.irq_threads_followed = vec![
            thread(70, "irq/25-virtio1-i", 25, &[0]),
            thread(71, "irq/26-virtio1-o", 26, &[0]),
        ];
        one.irq_threads_left = vec![thread(72, "irq/9-acpi", 9, &[0, 1])];
        one.irq_threads_pending = vec![thread(73, "irq/1-i8042", 1, &[1])];
        let st = Status {
            procs: "1".into(),
            irqs: "1".into(),
            ltmr: String::new(),
            online: "0-1".into(),
            mechanism: "cgroup v1 cpuset".into(),
            enforcement: "in force".into(),
            scope: Scope::Namespace,
            state_file: None,
            mems: None,
            without_state: None,
            cpus: vec![cpu(0, false), one],
        };
        let expected = "\
shielded: procs 1  irqs 1  ltmr -   (online 0-1)
mechanism: cgroup v1 cpuset; in force; scope Namespace
 CPU  procs irqs ltmr  nohz_full rcu_nocbs isolated   tasks  IRQs
   0  -     -    -     -         -         -             97      
   1  yes   yes  -     -         yes       -              2     1
CPU 1 may still run: ksoftirqd/1(20)* rt-app(4242)   (* = bound by the kernel)
CPU 1 still takes IRQs: 24 virtio0-input
CPU 1 move pending for IRQs 42 virtio3-tx: the kernel moves such an IRQ when it next fires, and that one interrupt still arrives on CPU 1: at most one more interrupt each, at a moment nobody controls (an IRQ that never fires stays so)
CPU 1: 2 IRQ handler threads followed their IRQs off it: irq/25-virtio1-i irq/26-virtio1-o
CPU 1: IRQ 1's handler thread irq/1-i8042(73) stays here with its IRQ until the IRQ's next interrupt moves both to 0
CPU 1: IRQ 9's handler thread irq/9-acpi(72) may still run here though IRQ 9 is on 0 (pinned by hand): taskset -pc 0 72
";
        assert_eq!(render_status(&st), expected);
    }

    #[test]
    fn an_irq_without_a_name_is_said_to_have_no_handler_not_left_blank() {
        let mut one = cpu(3, true);
        one.irqs_here = [(0, "timer"), (2, "")]
            .into_iter()
            .map(|(irq, name)| IrqOnCpu {
                irq,
                name: name.into(),
                affinity: CpuSet::from_cpus([3]),
            })
            .collect();
        let st = shield_of_cpu_3(vec![one]);
        let text = render_status(&st);
        assert!(
            text.contains("CPU 3 still takes IRQs: 0 timer, 2 (no handler in /proc/interrupts)\n"),
            "{text}"
        );
    }

    #[test]
    fn a_small_machine_keeps_a_row_per_cpu_even_where_cpus_read_alike() {
        let st = shield_of_cpu_3(vec![
            cpu(0, false),
            cpu(1, false),
            cpu(2, false),
            cpu(3, true),
        ]);
        let text = render_status(&st);
        let rows: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|w| w.chars().all(|c| c.is_ascii_digit()))
            .collect();
        assert_eq!(rows, ["0", "1", "2", "3"], "{text}");
    }

    #[test]
    fn a_long_task_list_is_cut_at_twelve_names_with_the_total() {
        let mut one = cpu(1, true);
        one.tasks = (0..15)
            .map(|i| TaskOnCpu {
                tid: 100 + i,
                comm: "w".into(),
                kthread: false,
                pinned_by_kernel: false,
                affinity: CpuSet::from_cpus([1]),
            })
            .collect();
        let st = Status {
            procs: "1".into(),
            irqs: String::new(),
            ltmr: String::new(),
            online: "0-1".into(),
            mechanism: "none".into(),
            enforcement: "-".into(),
            scope: Scope::System,
            state_file: None,
            mems: None,
            without_state: None,
            cpus: vec![one],
        };
        let text = render_status(&st);
        assert!(text.contains("w(111) … 15 in all   (*"), "{text}");
        assert!(!text.contains("w(112)"), "{text}");
    }

    #[test]
    fn show_on_512_cpus_prints_cpu_ranges_and_folds_alike_and_idle_cpus_into_one_line() {
        use crate::fake_machine::{shielded_big_machine, MachineSize};
        let store = cpushield_kernel::store::MemoryStore::new();
        let k = shielded_big_machine(MachineSize::WIDE, &store);
        let host = cpushield_kernel::Host::fake(&k, &store);
        let text = render_status(&crate::status::status(&host).unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() < 40, "{} lines:\n{text}", lines.len());
        // The table: the housekeeping socket and the shielded one, each a
        // range list, tasks as the range of their counts.
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start().starts_with("0-127,256-383  -     -    -  ")),
            "{text}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("128-255,384-511  yes   yes  yes ")),
            "{text}"
        );
        // Idle shielded CPUs (only their own per-CPU kernel threads) share one line.
        let idle = lines
            .iter()
            .find(|l| l.contains("may still run each: its own 4 per-CPU kernel threads*"))
            .unwrap_or_else(|| panic!("no folded line:\n{text}"));
        let cpus = idle
            .strip_prefix("CPU ")
            .and_then(|l| l.split(' ').next())
            .unwrap();
        assert!(CpuSet::parse_list(cpus).unwrap().len() > 200, "{idle}");
    }

    #[test]
    fn a_report_has_the_masks_the_counts_and_each_note_with_its_fix() {
        use crate::apply::Outcome;
        use crate::steps::{Note, Severity};
        use crate::ShieldMasks;
        let report = Report {
            masks: ShieldMasks {
                procs: CpuSet::from_cpus([1]),
                irqs: CpuSet::from_cpus([1]),
                ltmr: CpuSet::new(),
            },
            mechanism: "cgroup v1 cpuset".into(),
            scope: Scope::System,
            outcome: Outcome {
                moved: 3,
                affinities: 4,
                irqs: 5,
                vanished: 1,
                notes: vec![Note {
                    severity: Severity::Warn,
                    text: "IRQ 9 is kernel-managed".into(),
                    remedy: Some("boot with isolcpus=managed_irq,1".into()),
                }],
                ..Outcome::default()
            },
            notes: vec![Note {
                severity: Severity::Info,
                text: "CPU 1 has no SMT sibling".into(),
                remedy: None,
            }],
            mems: Some("1 (the nodes of its CPUs)".into()),
        };
        let expected = "\
shielded: procs 1  irqs 1  ltmr -  (cgroup v1 cpuset, scope System)
  memory nodes of the shield: 1 (the nodes of its CPUs)
  3 tasks moved, 4 affinities set, 5 IRQs changed, 1 tasks exited meanwhile
  note: CPU 1 has no SMT sibling
  warning: IRQ 9 is kernel-managed (fix: boot with isolcpus=managed_irq,1)
";
        assert_eq!(render_report(&report, "shielded"), expected);
    }

    #[test]
    fn a_range_of_equal_counts_is_one_number() {
        assert_eq!(count_range([3, 3].into_iter()), "3");
        assert_eq!(count_range([5, 2, 4].into_iter()), "2-5");
        assert_eq!(dash(""), "-");
        assert_eq!(dash("1-3"), "1-3");
    }
}
