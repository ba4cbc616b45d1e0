//! Human-readable text of a check report (JSON is the report's serde form).

use crate::analyze::{CheckReport, CpuSource};
use crate::finding::Severity;
use std::fmt::Write;

/// Renders a report for a terminal.
pub fn render_text(r: &CheckReport) -> String {
    let mut o = String::new();
    let source = match r.cpus_source {
        CpuSource::Argument => "from --cpus",
        CpuSource::ShieldState => "the shielded CPUs",
    };
    let _ = writeln!(
        o,
        "cpushield check: CPU {} ({source}), watched {:.1} s\n",
        r.cpus, r.interval_s
    );
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
    let _ = writeln!(o, "Verdict: {}", r.verdict);
    o
}

fn none_or(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}
