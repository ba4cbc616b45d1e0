//! Human-readable text of a check report (JSON is the report's serde form):
//! the answer first (the verdict, one line per fix with what it removes,
//! the boot line; at most [`ANSWER_LINES`] lines), and with `--verbose`
//! every finding with its evidence after it.

use crate::analyze::{CheckReport, CpuSource};
use crate::finding::Severity;
use crate::summary::{summarize, Fix};
use cpushield_shield::tuned::{self, SetBy};
use std::fmt::Write;

/// Most lines the answer takes before `--verbose`.
pub const ANSWER_LINES: usize = 15;

/// Renders a report for a terminal: the answer, and with `verbose` every
/// finding with its evidence after it.
pub fn render_text(r: &CheckReport, verbose: bool) -> String {
    let mut o = render_answer(r, verbose);
    if verbose {
        o.push('\n');
        o.push_str(&render_details(r));
    }
    o
}

/// The answer: the verdict, the fixes (run time, most needed first), the
/// boot line, the host, then where the rest is. At most [`ANSWER_LINES`]
/// lines.
fn render_answer(r: &CheckReport, verbose: bool) -> String {
    let summary = summarize(r);
    let line = |f: &Fix| {
        if f.removes.is_empty() {
            format!("  {}", f.action)
        } else {
            format!("  {}: {}", f.action, f.removes)
        }
    };
    let mut fixes: Vec<String> = summary.run_time.iter().map(line).collect();
    let last: Vec<String> = summary
        .boot
        .iter()
        .chain(&summary.boot_other)
        .chain(&summary.host)
        .map(line)
        .collect();
    let mut lines = vec![format!("Verdict: {}", r.verdict)];
    if !fixes.is_empty() || !last.is_empty() {
        lines.push("Fix, most needed first (each with what it removes):".to_string());
    }
    // The verdict, the heading and the closing line are kept; the fixes
    // that do not fit are counted in one line.
    let room = ANSWER_LINES - lines.len() - 1;
    if fixes.len() + last.len() > room {
        let keep = room.saturating_sub(last.len() + 1);
        let cut = fixes.len() - keep.min(fixes.len());
        fixes.truncate(keep);
        fixes.push(format!("  … {cut} more run-time fixes (--verbose)"));
    }
    lines.extend(fixes);
    lines.extend(last);
    lines.truncate(ANSWER_LINES - 1);
    let count = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    let source = match r.cpus_source {
        CpuSource::Argument => format!("--cpus {}", r.cpus),
        CpuSource::ShieldState => "the shielded CPUs".to_string(),
    };
    let without = if summary.without_fix > 0 {
        format!(
            ", {} with no fix to name",
            if summary.without_fix == 1 {
                "1 warning".to_string()
            } else {
                format!("{} warnings", summary.without_fix)
            }
        )
    } else {
        String::new()
    };
    let rerun = match r.cpus_source {
        CpuSource::Argument => format!("cpushield check --cpus {} --verbose", r.cpus),
        CpuSource::ShieldState => "cpushield check --verbose".to_string(),
    };
    lines.push(format!(
        "Watched CPU {} ({source}) for {:.1} s: {} break the shield, {} warnings, {} info{without}{}",
        r.cpus,
        r.interval_s,
        count(Severity::BreaksShield),
        count(Severity::Warn),
        count(Severity::Info),
        if verbose {
            String::new()
        } else {
            format!("; each with its evidence: {rerun}")
        }
    ));
    let mut o = lines.join("\n");
    o.push('\n');
    o
}

/// Above this many checked CPUs, CPUs whose details read alike (but for
/// their own number) share one block, named by a list of ranges.
const FOLD_ABOVE: usize = 16;

/// Every finding with its evidence, what ran on the CPUs, and how they
/// were sampled (`--verbose`). On more than [`FOLD_ABOVE`] CPUs, the CPUs
/// whose activity, or whose finding, reads the same share one block.
fn render_details(r: &CheckReport) -> String {
    let fold = r.activity.len() > FOLD_ABOVE;
    let mut o = fold_blocks(
        r.activity.iter().map(|a| (Some(a.cpu), activity_block(a))),
        fold,
    );
    let count = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    let _ = writeln!(
        o,
        "Findings ({} break the shield, {} warnings, {} info):",
        count(Severity::BreaksShield),
        count(Severity::Warn),
        count(Severity::Info)
    );
    o.push_str(&fold_blocks(
        r.findings.iter().map(|f| (f.cpu, finding_block(f))),
        fold,
    ));
    let _ = writeln!(o, "\nSampling: {}.", r.sampling);
    o
}

/// What ran on one checked CPU.
fn activity_block(a: &crate::analyze::CpuActivity) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "CPU {}: busy {:.1}%, steal {:.0} ms",
        a.cpu, a.busy_pct, a.steal_ms
    );
    let irqs: Vec<String> = a
        .interrupts
        .iter()
        .map(|c| {
            if c.id.parse::<u32>().is_ok() {
                format!("{} {} {}", c.id, c.name, c.count)
            } else {
                format!("{} {}", c.id, c.count)
            }
        })
        .collect();
    let _ = writeln!(o, "  interrupts: {}", none_or(&irqs));
    let soft: Vec<String> = a
        .softirqs
        .iter()
        .map(|c| format!("{} {}", c.id, c.count))
        .collect();
    let _ = writeln!(o, "  softirqs:   {}", none_or(&soft));
    let tasks: Vec<String> = a
        .tasks
        .iter()
        .take(12)
        .map(|t| {
            format!(
                "{} ({}){} {:.2} ms",
                t.comm,
                t.tid,
                if t.kernel_thread { " [kthread]" } else { "" },
                t.run_ms
            )
        })
        .collect();
    let more = a.tasks.len().saturating_sub(12);
    let _ = write!(o, "  tasks:      {}", none_or(&tasks));
    if more > 0 {
        let _ = write!(o, ", and {more} more");
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "  bound kernel threads: {}\n",
        none_or(&a.bound_kthreads)
    );
    o
}

/// One finding with its evidence and fixes.
fn finding_block(f: &crate::finding::Finding) -> String {
    let mut o = String::new();
    let cpu = f
        .cpu
        .filter(|c| !f.title.contains(&format!("CPU {c}")))
        .map(|c| format!("CPU {c}: "))
        .unwrap_or_default();
    let _ = writeln!(o, "  [{}] {cpu}{}", f.severity, f.title);
    let _ = writeln!(o, "      evidence: {}", f.evidence);
    if let Some(done) = &f.in_place {
        let _ = writeln!(o, "      in place: {done}");
    }
    for (i, rem) in f.remedies.iter().enumerate() {
        let label = if i == 0 { "fix:     " } else { "or:      " };
        let _ = writeln!(o, "      {label} {rem}");
    }
    o
}

/// Where a folded block names its CPUs, and where a per-CPU kernel
/// thread's name has its CPU (`ksoftirqd/N`).
const CPUS_MARK: char = '\u{1}';
const OWN_CPU_MARK: char = '\u{2}';

/// `text` with CPU `cpu` taken out where it names that CPU (`CPU 5`, a
/// per-CPU thread's `/5`, the number as a word of its own), so that the
/// texts of alike CPUs compare equal.
fn mask_cpu(text: &str, cpu: usize) -> String {
    let mut out = text.to_string();
    // A list (`CPU 5-7`) goes on with '-' or ','; a thread name (`cpuhp/5,`) ends there.
    for (pattern, mark, list) in [
        (format!("CPU {cpu}"), format!("CPU {CPUS_MARK}"), true),
        (format!("/{cpu}"), format!("/{OWN_CPU_MARK}"), false),
    ] {
        let mut masked = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some(at) = rest.find(&pattern) {
            let after = &rest[at + pattern.len()..];
            masked.push_str(&rest[..at]);
            if after.starts_with(|c: char| c.is_ascii_digit() || (list && (c == '-' || c == ','))) {
                masked.push_str(&pattern);
            } else {
                masked.push_str(&mark);
            }
            rest = after;
        }
        masked.push_str(rest);
        out = masked;
    }
    // The number alone, as evidence names it (`covering 5`).
    let number = cpu.to_string();
    let mut masked = String::with_capacity(out.len());
    let mut rest = out.as_str();
    let mut prev: Option<char> = None;
    while let Some(at) = rest.find(&number) {
        let before = rest[..at].chars().next_back().or(prev);
        let after = &rest[at + number.len()..];
        // A number inside a word, a decimal or a CPU list is something else.
        let joined = |c: char| c.is_ascii_alphanumeric() || ".-,".contains(c);
        let whole = !before.is_some_and(joined) && !after.starts_with(joined);
        masked.push_str(&rest[..at]);
        if whole {
            masked.push(CPUS_MARK);
        } else {
            masked.push_str(&number);
        }
        prev = number.chars().next_back();
        rest = after;
    }
    masked.push_str(rest);
    // A per-CPU thread's process ID says nothing the folded line needs.
    let mut out = masked;
    // Not a read: the prefix of a path in evidence text, folded out of the lines.
    for prefix in ["(pid ", "/proc/", "/task/"] {
        let mut next = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some(at) = rest.find(prefix) {
            let start = at + prefix.len();
            let digits = rest[start..].bytes().take_while(u8::is_ascii_digit).count();
            next.push_str(&rest[..start]);
            next.push_str(if digits > 0 { "…" } else { "" });
            rest = &rest[start + digits..];
        }
        next.push_str(rest);
        out = next;
    }
    out
}

/// The blocks in order, those of CPUs alike but for their own number
/// (`fold`) as one block at the first one's place, its CPUs a range list
/// and their own threads `/N`.
fn fold_blocks(blocks: impl Iterator<Item = (Option<usize>, String)>, fold: bool) -> String {
    let mut groups: Vec<(String, cpushield_cpuset::CpuSet, String)> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    for (cpu, text) in blocks {
        match cpu.filter(|_| fold) {
            Some(cpu) => {
                let key = mask_cpu(&text, cpu);
                match index.get(&key) {
                    Some(&i) => groups[i].1.insert(cpu),
                    None => {
                        index.insert(key.clone(), groups.len());
                        groups.push((key, cpushield_cpuset::CpuSet::from_cpus([cpu]), text));
                    }
                }
            }
            None => groups.push((String::new(), Default::default(), text)),
        }
    }
    let mut o = String::new();
    for (key, cpus, text) in groups {
        if cpus.len() > 1 {
            o.push_str(
                &key.replace(CPUS_MARK, &cpus.to_list())
                    .replace(OWN_CPU_MARK, "N"),
            );
        } else {
            o.push_str(&text);
        }
    }
    o
}

fn none_or(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// What `check` prints: [`render_text`], then which tool set the settings
/// cpushield and tuned both set (`set_by`): each with `verbose`, else in
/// one line.
pub fn render_with_set_by(r: &CheckReport, set_by: &[SetBy], verbose: bool) -> String {
    let mut out = render_text(r, verbose);
    if verbose {
        out.push_str(&tuned::render_set_by(set_by));
    } else {
        out.push_str(&tuned::render_set_by_line(set_by));
    }
    out
}

/// What `check --json` prints: the report's fields and `set_by`.
pub fn json_with_set_by(r: &CheckReport, set_by: &[SetBy]) -> serde_json::Result<String> {
    let mut json = serde_json::to_value(r)?;
    if let Some(object) = json.as_object_mut() {
        object.insert("set_by".into(), serde_json::to_value(set_by)?);
    }
    serde_json::to_string_pretty(&json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_by() -> Vec<SetBy> {
        vec![SetBy {
            setting: "IRQ affinity".into(),
            by: "cpushield over tuned".into(),
            detail: "24, 25".into(),
        }]
    }

    fn clean() -> CheckReport {
        CheckReport {
            version: 1,
            cpus: "1".into(),
            cpus_source: CpuSource::Argument,
            interval_s: 5.0,
            sampling: String::new(),
            verdict: "nothing reaches CPU 1".into(),
            breaks_shield: false,
            findings: Vec::new(),
            activity: Vec::new(),
        }
    }

    #[test]
    fn who_set_what_follows_the_report_in_one_line_or_each_when_verbose() {
        let r = clean();
        let short = render_with_set_by(&r, &set_by(), false);
        assert!(short.starts_with(&render_text(&r, false)), "{short}");
        assert!(
            short.ends_with("Set by cpushield over tuned: IRQ affinity (--verbose for each)\n"),
            "{short}"
        );
        let long = render_with_set_by(&r, &set_by(), true);
        assert!(
            long.contains("  IRQ affinity  cpushield over tuned  24, 25\n"),
            "{long}"
        );
    }

    #[test]
    fn the_json_holds_the_reports_fields_and_who_set_what() {
        let r = clean();
        let json: serde_json::Value =
            serde_json::from_str(&json_with_set_by(&r, &set_by()).unwrap()).unwrap();
        assert_eq!(json["set_by"][0]["by"], "cpushield over tuned");
        assert!(json.get("breaks_shield").is_some(), "{json}");
    }
    use cpushield_shield::fake_machine::{shielded_big_machine, MachineSize};

    #[test]
    fn mask_cpu_takes_out_the_cpu_it_names_and_no_other_number() {
        assert_eq!(
            mask_cpu("CPU 5 runs ksoftirqd/5; CPU 51 and irq/5x stay", 5),
            "CPU \u{1} runs ksoftirqd/\u{2}; CPU 51 and irq/\u{2}x stay"
        );
    }

    #[test]
    fn check_on_512_cpus_names_alike_cpus_once_as_ranges() {
        let store = cpushield_kernel::store::MemoryStore::new();
        let k = shielded_big_machine(MachineSize::WIDE, &store);
        let saved = cpushield_shield::state::load_from(&store)
            .unwrap()
            .unwrap()
            .state;
        let shield = crate::ShieldInForce::from_saved(&saved);
        let opts = crate::CheckOptions {
            interval: std::time::Duration::from_millis(1),
            sample_every: std::time::Duration::from_millis(1),
        };
        let report = crate::run_check(
            &k,
            &MachineSize::WIDE.second_socket(),
            CpuSource::ShieldState,
            Some(&shield),
            opts,
        )
        .unwrap();
        let text = render_text(&report, true);
        let lines = text.lines().count();
        // One block per CPU would be 256 activity blocks of five lines.
        assert!(lines < 200, "{lines} lines:\n{text}");
        assert!(
            text.lines().any(|l| l.starts_with("CPU 128-")),
            "no folded activity block:\n{text}"
        );
        assert!(text.contains("cpuhp/N"), "{text}");
        assert!(!text.contains('\u{1}') && !text.contains('\u{2}'), "{text}");
    }
}
