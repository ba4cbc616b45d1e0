//! Human-readable text of a check report (JSON is the report's serde form):
//! the answer first (the verdict, one line per fix with what it removes,
//! the boot line; at most [`ANSWER_LINES`] lines), and with `--verbose`
//! every finding with its evidence after it.

use crate::analyze::{CheckReport, CpuSource};
use crate::finding::Severity;
use crate::summary::{summarize, Fix};
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

/// Every finding with its evidence, what ran on the CPUs, and how they
/// were sampled (`--verbose`).
fn render_details(r: &CheckReport) -> String {
    let mut o = String::new();
    for a in &r.activity {
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
    }
    let count = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    let _ = writeln!(
        o,
        "Findings ({} break the shield, {} warnings, {} info):",
        count(Severity::BreaksShield),
        count(Severity::Warn),
        count(Severity::Info)
    );
    for f in &r.findings {
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
    }
    let _ = writeln!(o, "\nSampling: {}.", r.sampling);
    o
}

fn none_or(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}
