//! The answer first: a check's findings grouped by the fix that removes
//! them, one line per fix with what it removes, the boot parameters
//! together as one line, for the text `check` prints before `--verbose`.
//! Pure: a report in, the groups out; the JSON report is not touched.

use crate::analyze::CheckReport;
use crate::finding::{Finding, RemedyKind, Severity, Topic};

/// One fix and what it removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    /// The command, setting or boot line, ready to use (`cpushield shield
    /// --all 1`, `sysctl -w ...`, `boot with nohz_full=1 ...`, `on the host:
    /// ...`).
    pub action: String,
    /// What it removes, in short (`30 tasks, IRQs 36 and 42, the local timer`).
    pub removes: String,
    /// The worst finding it fixes.
    pub severity: Severity,
    /// How many findings it fixes.
    pub findings: usize,
}

/// A report's findings grouped by fix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Fixes applied at run time (cpushield commands, settings), the most
    /// needed first: those of findings that break the shield, then those
    /// that fix the most.
    pub run_time: Vec<Fix>,
    /// The boot parameters of every finding only a reboot fixes, as one line.
    pub boot: Option<Fix>,
    /// Boot-time fixes that are not parameters (another kernel build).
    pub boot_other: Vec<Fix>,
    /// What only the hypervisor's host can fix.
    pub host: Vec<Fix>,
    /// Warnings and worse with no fix named.
    pub without_fix: usize,
}

/// What one finding is, in a few words, for the list of what a fix removes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Item {
    /// A user task (its process ID).
    Task(i32),
    /// A kernel thread that may run elsewhere (its ID).
    KernelThread(i32),
    /// A device IRQ.
    Irq(u32),
    /// Anything else, named.
    Named(String),
}

/// The numbers in `text` after `prefix` (`IRQs 36, 42 ...` -> 36, 42).
fn numbers_after(text: &str, prefix: &str) -> Vec<u32> {
    let Some(rest) = text.strip_prefix(prefix) else {
        return Vec::new();
    };
    rest.split([',', ' '])
        .map(str::trim)
        .take_while(|w| w.is_empty() || w.parse::<u32>().is_ok() || *w == "and")
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// The number in `(pid N)` of a title.
fn pid_in(title: &str) -> Option<i32> {
    let (_, rest) = title.split_once("(pid ")?;
    rest.split(')').next()?.parse().ok()
}

/// What `f` is, in a few words.
fn items(f: &Finding) -> Vec<Item> {
    let t = f.title.as_str();
    let named = |s: &str| vec![Item::Named(s.to_string())];
    match f.topic {
        Topic::Task => match pid_in(t) {
            Some(pid) => vec![Item::Task(pid)],
            None => named("a task"),
        },
        Topic::KernelThread => kernel_thread_items(t),
        Topic::Irq | Topic::IrqPending => irq_items(t, f.topic == Topic::IrqPending),
        Topic::InterruptKind => named(interrupt_kind(&f.evidence)),
        Topic::Softirq => match t.split_once(" softirq ran") {
            Some((id, _)) => vec![Item::Named(format!("{id} softirqs"))],
            None => named("ksoftirqd's work"),
        },
        Topic::Enforcement if t.contains("without its saved state") => {
            named("the shield without its state")
        }
        Topic::Enforcement => named("new tasks (no cpuset keeps them off)"),
        Topic::Isolation => named(isolation(t)),
        Topic::Preemption => named("a non-preemptible kernel"),
        Topic::RtThrottling => named("RT throttling"),
        Topic::Power => named(power(t)),
        Topic::Timers => named(if t.starts_with("timer migration") {
            "timer migration off"
        } else {
            "ktimers' work"
        }),
        Topic::Workqueue => named("unbound workqueues"),
        Topic::Irqbalance => named("irqbalance"),
        Topic::Smt => named("the SMT sibling's load"),
        Topic::Steal if t.contains("disks are busy") => named("steal that rises with disk I/O"),
        Topic::Steal => named("steal time"),
        Topic::Numa => named(numa(t)),
        Topic::Vm => named(vm(t)),
    }
}

/// A kernel thread finding: a per-CPU thread by name, else the thread's ID.
fn kernel_thread_items(title: &str) -> Vec<Item> {
    if let Some(rest) = title.strip_prefix("per-CPU kernel thread ") {
        let name = rest.split(' ').next().unwrap_or("a per-CPU thread");
        return vec![Item::Named(name.to_string())];
    }
    match pid_in(title) {
        Some(tid) => vec![Item::KernelThread(tid)],
        None => vec![Item::Named("a kernel thread".to_string())],
    }
}

/// A device IRQ finding: the IRQs it names, or the kind it is about.
fn irq_items(title: &str, pending: bool) -> Vec<Item> {
    let named = |s: &str| vec![Item::Named(s.to_string())];
    if title.contains("handler thread") {
        return named("IRQ handler threads");
    }
    if title.starts_with("new IRQs") {
        return named("new IRQs");
    }
    if title.contains("movable IRQ") {
        return named("IRQs that may come");
    }
    if pending {
        return named("pending IRQ moves");
    }
    let t = title.strip_prefix("kernel-managed ").unwrap_or(title);
    let irqs: Vec<u32> = [numbers_after(t, "IRQ "), numbers_after(t, "IRQs ")].concat();
    if irqs.is_empty() {
        named("IRQs")
    } else {
        irqs.into_iter().map(Item::Irq).collect()
    }
}

/// The kind of interrupt an `/proc/interrupts ID: ...` evidence names.
fn interrupt_kind(evidence: &str) -> &str {
    let id = evidence
        .strip_prefix(cpushield_kernel::paths::INTERRUPTS)
        .and_then(|e| e.strip_prefix(' '))
        .and_then(|e| e.split(':').next())
        .unwrap_or("");
    match id {
        "LOC" => "the local timer",
        "RES" => "rescheduling IPIs",
        "CAL" => "function-call IPIs",
        "TLB" => "TLB shootdowns",
        "NMI" | "PMI" => "NMIs",
        other if !other.is_empty() => other,
        _ => "interrupts",
    }
}

/// What an isolation finding is about: a boot parameter by name, RCU, the
/// tick or the scheduler domains.
fn isolation(title: &str) -> &str {
    if let Some(rest) = title.strip_prefix("boot parameter ") {
        return rest.split(' ').next().unwrap_or("a boot parameter");
    }
    if title.contains("RCU") || title.contains("rcuc") {
        "RCU callbacks"
    } else if title.contains("tick") || title.contains("nohz_full") {
        "the tick"
    } else if title.contains("isolcpus") {
        "the boot-time scheduler domains"
    } else {
        "isolation"
    }
}

/// The name of the first `(word, name)` whose word is in `title`, else `other`.
fn first_named(title: &str, names: &[(&str, &'static str)], other: &'static str) -> &'static str {
    names
        .iter()
        .find(|(word, _)| title.contains(word))
        .map_or(other, |(_, name)| name)
}

/// What a power finding is about.
fn power(title: &str) -> &'static str {
    first_named(
        title,
        &[
            ("governor", "frequency changes"),
            ("deep idle", "deep idle states"),
        ],
        "the halting vCPU",
    )
}

/// What a NUMA finding is about.
fn numa(title: &str) -> &'static str {
    first_named(
        title,
        &[
            ("span", "CPUs on several memory nodes"),
            ("pages", "memory on a remote node"),
        ],
        "a device on a remote node",
    )
}

/// What a VM finding is about.
fn vm(title: &str) -> &'static str {
    first_named(
        title,
        &[
            ("emulator", "a VM's emulator threads"),
            ("kvm-pit", "a VM's kvm-pit thread"),
            ("real-time", "a VM's vCPU policies"),
        ],
        "a VM's vCPU pinning",
    )
}

/// `items` in short: `30 tasks, 2 kernel threads, IRQs 36 and 42, the
/// tick`: tasks, threads and IRQs counted first, the rest in the order met
/// (the findings' order: most severe first).
fn describe(items: &[Item]) -> String {
    let count = |f: fn(&Item) -> bool| items.iter().filter(|i| f(i)).count();
    let plural = |n: usize, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let mut parts = Vec::new();
    let tasks = count(|i| matches!(i, Item::Task(_)));
    if tasks > 0 {
        parts.push(plural(tasks, "task", "tasks"));
    }
    let kthreads = count(|i| matches!(i, Item::KernelThread(_)));
    if kthreads > 0 {
        parts.push(plural(kthreads, "kernel thread", "kernel threads"));
    }
    let mut irqs: Vec<u32> = items
        .iter()
        .filter_map(|i| match i {
            Item::Irq(n) => Some(*n),
            _ => None,
        })
        .collect();
    irqs.sort_unstable();
    let irqs: Vec<String> = irqs.iter().map(u32::to_string).collect();
    match irqs.len() {
        0 => {}
        1 => parts.push(format!("IRQ {}", irqs[0])),
        n if n <= 4 => parts.push(format!(
            "IRQs {} and {}",
            irqs[..n - 1].join(", "),
            irqs[n - 1]
        )),
        n => parts.push(format!("{n} IRQs")),
    }
    parts.extend(items.iter().filter_map(|i| match i {
        Item::Named(s) => Some(s.clone()),
        _ => None,
    }));
    const SHOWN: usize = 8;
    if parts.len() > SHOWN {
        let more = parts.len() - SHOWN;
        parts.truncate(SHOWN);
        parts.push(format!("{more} more"));
    }
    parts.join(", ")
}

/// A fix in the making.
#[derive(Default)]
struct Group {
    /// What its findings are, each once, in the order met.
    items: Vec<Item>,
    severity: Option<Severity>,
    findings: usize,
    /// For `taskset`: the task IDs, in the order met.
    ids: Vec<String>,
}

impl Group {
    fn add(&mut self, f: &Finding) {
        for item in items(f) {
            if !self.items.contains(&item) {
                self.items.push(item);
            }
        }
        self.severity = self.severity.max(Some(f.severity));
        self.findings += 1;
    }

    fn fix(&self, action: String) -> Fix {
        Fix {
            action,
            removes: describe(&self.items),
            severity: self.severity.unwrap_or(Severity::Info),
            findings: self.findings,
        }
    }
}

/// `cpushield shield --KIND LIST`, with nothing after it.
fn shield_command(action: &str) -> Option<(&str, &str)> {
    let rest = action.strip_prefix("cpushield shield --")?;
    let (kind, list) = rest.split_once(' ')?;
    (["procs", "irqs", "ltmr"].contains(&kind) && !list.contains(' ')).then_some((kind, list))
}

/// A run-time action as grouped: its text before an explanation in
/// parentheses, and for `taskset ... ID` the ID apart (one line for all).
fn run_time_key(action: &str) -> (String, Option<String>) {
    let bare = action
        .split(" (")
        .next()
        .unwrap_or(action)
        .trim()
        .to_string();
    if bare.starts_with("taskset ") {
        if let Some((cmd, id)) = bare.rsplit_once(' ') {
            if id.parse::<u32>().is_ok() {
                return (format!("{cmd} PID"), Some(id.to_string()));
            }
        }
    }
    (bare, None)
}

/// Whether a word of a boot remedy is a kernel parameter (`nohz_full=1`,
/// `rcu_nocb_poll`, `nosmt`) rather than prose.
fn is_param(word: &str) -> bool {
    !word.starts_with('(')
        && (word.contains('=') || word.contains('_') || word.contains('.') || word == "nosmt")
}

/// The boot parameters of all `actions` as one line: each parameter once,
/// `isolcpus=` with the union of its flags and CPUs; and what a parameter
/// needs, said after it where the remedy said so (`on a kernel built with
/// CONFIG_NO_HZ_FULL=y (this one is not)`).
fn boot_line(actions: &[&str]) -> (String, Vec<String>) {
    let mut params: Vec<(String, Option<String>)> = Vec::new();
    let mut needs = Vec::new();
    for action in actions {
        let words: Vec<&str> = action.split_whitespace().collect();
        let n = words.iter().take_while(|w| is_param(w)).count();
        let rest = words[n..].join(" ");
        if n > 0 && !rest.is_empty() && !rest.starts_with('(') {
            let need = format!("{} {rest}", words[..n].join(" "));
            if !needs.contains(&need) {
                needs.push(need);
            }
        }
        for w in &words[..n] {
            let (key, value) = match w.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(v.to_string())),
                None => (w.to_string(), None),
            };
            match params.iter_mut().find(|(k, _)| *k == key) {
                None => params.push((key, value)),
                Some((k, Some(old))) if k == "isolcpus" => {
                    if let Some(new) = value {
                        *old = merge_isolcpus(old, &new);
                    }
                }
                Some(_) => {}
            }
        }
    }
    // The order of `cpushield boot-params`, then the others as met.
    const ORDER: [&str; 5] = [
        "isolcpus",
        "nohz_full",
        "rcu_nocbs",
        "rcu_nocb_poll",
        "irqaffinity",
    ];
    params.sort_by_key(|(k, _)| ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()));
    let line = params
        .into_iter()
        .map(|(k, v)| match v {
            Some(v) => format!("{k}={v}"),
            None => k,
        })
        .collect::<Vec<_>>()
        .join(" ");
    (line, needs)
}

/// Two `isolcpus=` values as one: the flags of both (`managed_irq`,
/// `domain`, in that order first), then the CPUs of both.
fn merge_isolcpus(a: &str, b: &str) -> String {
    let split = |v: &str| -> (Vec<String>, cpushield_cpuset::CpuSet) {
        let mut flags = Vec::new();
        let mut cpus = Vec::new();
        for part in v.split(',') {
            if part.bytes().all(|c| c.is_ascii_alphabetic() || c == b'_') && !part.is_empty() {
                flags.push(part.to_string());
            } else {
                cpus.push(part);
            }
        }
        let set = cpushield_cpuset::CpuSet::parse_list(&cpus.join(",")).unwrap_or_default();
        (flags, set)
    };
    let (fa, ca) = split(a);
    let (fb, cb) = split(b);
    let mut flags: Vec<String> = Vec::new();
    for f in ["managed_irq", "domain"]
        .iter()
        .map(|f| f.to_string())
        .chain(fa.iter().cloned())
        .chain(fb.iter().cloned())
    {
        if (fa.contains(&f) || fb.contains(&f)) && !flags.contains(&f) {
            flags.push(f);
        }
    }
    let cpus = ca.union(&cb);
    flags.push(cpus.to_list());
    flags.join(",")
}

/// Groups the report's warnings and worse by the fix each names first.
pub fn summarize(r: &CheckReport) -> Summary {
    let mut run_time: Vec<(String, Group)> = Vec::new();
    let mut shield_kinds: Vec<(String, String)> = Vec::new();
    let mut shield = Group::default();
    let mut boot = Group::default();
    let mut boot_actions: Vec<&str> = Vec::new();
    let mut other_boot: Vec<(String, Group)> = Vec::new();
    let mut host: Vec<(String, Group)> = Vec::new();
    let mut summary = Summary::default();
    let group_in = |groups: &mut Vec<(String, Group)>, key: String| -> usize {
        match groups.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                groups.push((key, Group::default()));
                groups.len() - 1
            }
        }
    };
    for f in r.findings.iter().filter(|f| f.severity >= Severity::Warn) {
        let Some(first) = f.remedies.first() else {
            summary.without_fix += 1;
            continue;
        };
        match first.kind {
            RemedyKind::Boot => {
                let words = first.action.split_whitespace().next().unwrap_or("");
                if is_param(words) {
                    boot.add(f);
                    boot_actions.push(&first.action);
                } else {
                    let i = group_in(&mut other_boot, format!("boot with {}", first.action));
                    other_boot[i].1.add(f);
                }
            }
            RemedyKind::Host => {
                let i = group_in(&mut host, first.to_string());
                host[i].1.add(f);
            }
            RemedyKind::Cpushield | RemedyKind::Runtime => {
                let (key, id) = run_time_key(&first.action);
                if let Some((kind, list)) = shield_command(&key) {
                    let pair = (kind.to_string(), list.to_string());
                    if !shield_kinds.contains(&pair) {
                        shield_kinds.push(pair);
                    }
                    shield.add(f);
                    continue;
                }
                let i = group_in(&mut run_time, key);
                run_time[i].1.add(f);
                if let Some(id) = id {
                    if !run_time[i].1.ids.contains(&id) {
                        run_time[i].1.ids.push(id);
                    }
                }
            }
        }
    }
    let mut fixes: Vec<Fix> = Vec::new();
    if shield.findings > 0 {
        fixes.push(shield.fix(shield_line(&shield_kinds)));
    }
    for (key, g) in &run_time {
        let action = match g.ids.as_slice() {
            [] => key.clone(),
            [one] => key.replace("PID", one),
            ids if ids.len() <= 5 => format!("{key}, for each PID of {}", ids.join(", ")),
            ids => format!(
                "{key}, for each PID of {} and {} more",
                ids[..4].join(", "),
                ids.len() - 4
            ),
        };
        fixes.push(g.fix(action));
    }
    fixes.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.findings.cmp(&a.findings))
    });
    summary.run_time = fixes;
    if boot.findings > 0 {
        let (line, needs) = boot_line(&boot_actions);
        let mut fix = boot.fix(format!("boot with {line}"));
        for need in needs {
            fix.removes.push_str(&format!("; {need}"));
        }
        summary.boot = Some(fix);
    }
    summary.boot_other = other_boot.iter().map(|(k, g)| g.fix(k.clone())).collect();
    summary.host = host.iter().map(|(k, g)| g.fix(k.clone())).collect();
    summary
}

/// One `cpushield shield` command for the kinds and CPU lists advised:
/// `--all LIST` when all three name the same CPUs.
fn shield_line(kinds: &[(String, String)]) -> String {
    let list_of = |kind: &str| {
        kinds
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
    };
    let (procs, irqs, ltmr) = (list_of("procs"), list_of("irqs"), list_of("ltmr"));
    if procs.len() == 1 && procs == irqs && irqs == ltmr {
        return format!("cpushield shield --all {}", procs[0]);
    }
    let mut parts = vec!["cpushield shield".to_string()];
    for (kind, lists) in [("procs", procs), ("irqs", irqs), ("ltmr", ltmr)] {
        if !lists.is_empty() {
            let set = lists
                .iter()
                .filter_map(|l| cpushield_cpuset::CpuSet::parse_list(l).ok())
                .fold(cpushield_cpuset::CpuSet::new(), |a, b| a.union(&b));
            parts.push(format!("--{kind} {}", set.to_list()));
        }
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_parameters_merge_into_one_line_with_isolcpus_flags_joined() {
        let (line, needs) = boot_line(&[
            "nohz_full=1 on a kernel built with CONFIG_NO_HZ_FULL=y (this one is not)",
            "rcu_nocbs=1 rcu_nocb_poll",
            "isolcpus=managed_irq,1",
            "isolcpus=domain,1",
            "irqaffinity=0 (IRQs start on the housekeeping CPUs, so no move is left pending)",
            "rcu_nocbs=1 rcu_nocb_poll",
        ]);
        assert_eq!(
            line,
            "isolcpus=managed_irq,domain,1 nohz_full=1 rcu_nocbs=1 rcu_nocb_poll irqaffinity=0"
        );
        assert_eq!(
            needs,
            ["nohz_full=1 on a kernel built with CONFIG_NO_HZ_FULL=y (this one is not)"]
        );
    }

    #[test]
    fn the_three_shield_kinds_on_the_same_cpus_are_one_shield_all() {
        let k = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            shield_line(&[k("procs", "1"), k("irqs", "1"), k("ltmr", "1")]),
            "cpushield shield --all 1"
        );
        assert_eq!(
            shield_line(&[k("irqs", "3"), k("procs", "3")]),
            "cpushield shield --procs 3 --irqs 3"
        );
    }

    #[test]
    fn a_list_of_irqs_and_of_tasks_is_said_in_short() {
        let set: Vec<Item> = [
            Item::Task(5),
            Item::Task(6),
            Item::KernelThread(7),
            Item::Irq(36),
            Item::Irq(42),
            Item::Named("the local timer".into()),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            describe(&set),
            "2 tasks, 1 kernel thread, IRQs 36 and 42, the local timer"
        );
        assert_eq!(numbers_after("IRQs 36, 42 asked for", "IRQs "), [36, 42]);
        assert_eq!(
            numbers_after("IRQ 38 (virtio2-input.0) arrives", "IRQ "),
            [38]
        );
    }

    #[test]
    fn a_kernel_thread_is_named_when_per_cpu_and_counted_by_id_otherwise() {
        assert_eq!(
            kernel_thread_items("per-CPU kernel thread ktimers/1 ran on CPU 1"),
            vec![Item::Named("ktimers/1".into())]
        );
        assert_eq!(
            kernel_thread_items("kernel thread kworker (pid 77) ran on CPU 1"),
            vec![Item::KernelThread(77)]
        );
        assert_eq!(
            kernel_thread_items("kernel thread ran"),
            vec![Item::Named("a kernel thread".into())]
        );
    }

    #[test]
    fn an_irq_finding_lists_its_irqs_unless_it_is_about_a_kind() {
        assert_eq!(
            irq_items("kernel-managed IRQs 36, 42 can be delivered", false),
            vec![Item::Irq(36), Item::Irq(42)]
        );
        assert_eq!(
            irq_items("IRQ 5 (eth0) arrived once", true),
            vec![Item::Named("pending IRQ moves".into())]
        );
        assert_eq!(
            irq_items("2 movable IRQs may be delivered", false),
            vec![Item::Named("IRQs that may come".into())]
        );
        assert_eq!(irq_items("odd", false), vec![Item::Named("IRQs".into())]);
    }

    #[test]
    fn interrupt_kinds_and_isolation_findings_read_as_what_they_are() {
        assert_eq!(
            interrupt_kind("/proc/interrupts LOC: 12"),
            "the local timer"
        );
        assert_eq!(interrupt_kind("/proc/interrupts XYZ: 1"), "XYZ");
        assert_eq!(interrupt_kind("elsewhere"), "interrupts");
        assert_eq!(
            isolation("boot parameter nohz_full= is missing"),
            "nohz_full="
        );
        assert_eq!(
            isolation("RCU callbacks of CPU 1 run on it"),
            "RCU callbacks"
        );
        assert_eq!(isolation("CPU 1 is not nohz_full"), "the tick");
        assert_eq!(
            power("CPU 1 frequency governor is 'x'"),
            "frequency changes"
        );
        assert_eq!(numa("pages on node 1"), "memory on a remote node");
        assert_eq!(vm("emulator threads"), "a VM's emulator threads");
    }
}
