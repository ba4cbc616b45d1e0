//! The terminal table in the papers' terms.

use crate::model::{fmt_ratio, human_ns, CompareReport, BUCKET_EDGES_NS};
use std::fmt::Write;

/// Renders the comparison table, the papers' bucket counts, and the verdict.
pub fn render(report: &CompareReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "cpushield compare — load {}, {:.0} s per scenario, scope {}, {}{}",
        report.load_profile,
        report.duration_s,
        report.scope,
        report.host,
        if report.idle_poll {
            "; idle CPUs kept polling in every scenario"
        } else {
            ""
        }
    );
    let anchored = report.scenarios.iter().any(|s| s.anchor.is_some());
    let _ = writeln!(
        out,
        "{:<18} {:>5} {:>10} {:>7} {:>9} {:>9} {:>9} {:>9}  {:>9} {:>9} {:>8} {:>8}",
        "scenario",
        "cpus",
        "samples",
        "missed",
        "min",
        "p99",
        "p99.999",
        "max",
        "det.ideal",
        "det.max",
        "jitter%",
        "irq/s"
    );
    for s in &report.scenarios {
        let l = &s.latency;
        let (ideal, dmax, jitter) = match &s.determinism {
            Some(d) => (
                format!("{:.4}s", d.ideal_s),
                format!("{:.4}s", d.max_s),
                format!("{:.2}", d.jitter_pct),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "{:<18} {:>5} {:>10} {:>7} {:>9} {:>9} {:>9} {:>9}  {:>9} {:>9} {:>8} {:>8.0}",
            s.name,
            s.measured_cpus,
            l.samples,
            l.missed,
            human_ns(l.min_ns),
            human_ns(l.p99_ns),
            human_ns(l.p99999_ns),
            human_ns(l.max_ns),
            ideal,
            dmax,
            jitter,
            s.irqs_per_s
        );
    }
    if anchored {
        let _ = writeln!(
            out,
            "\ncyclictest (rt-tests), same scenario, placed like the probe: {}",
            report
                .scenarios
                .iter()
                .filter_map(|s| s.anchor.as_ref().map(|a| format!(
                    "{} max {} (ours {})",
                    s.name,
                    human_ns(a.max_ns),
                    human_ns(s.latency.max_ns)
                )))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    render_idle(&mut out, report);
    render_split(&mut out, report);
    let _ = writeln!(
        out,
        "\nsamples below each threshold (Brosky & Rotolo §6.2):"
    );
    let _ = write!(out, "{:<18}", "scenario");
    for edge in BUCKET_EDGES_NS {
        let _ = write!(out, " {:>19}", format!("< {}", threshold(edge)));
    }
    let _ = writeln!(out);
    for s in &report.scenarios {
        let _ = write!(out, "{:<18}", s.name);
        for (_, below) in s.latency.bucket_table() {
            let pct = if s.latency.samples > 0 {
                100.0 * below as f64 / s.latency.samples as f64
            } else {
                0.0
            };
            let _ = write!(out, " {:>19}", format!("{below} ({})", percent(pct)));
        }
        let _ = writeln!(out);
    }
    let loads: Vec<String> = report
        .scenarios
        .iter()
        .filter(|s| !s.load.is_empty())
        .map(|s| {
            let total: f64 = s.load.iter().map(|l| l.ops_per_s).sum();
            format!("{} {:.0} ops/s", s.name, total)
        })
        .collect();
    if !loads.is_empty() {
        let _ = writeln!(out, "\nload carried: {}", loads.join(", "));
    }
    let v = &report.verdict;
    let _ = writeln!(
        out,
        "\nloaded max / shielded max = {}   shielded max / idle max = {}   shielded jitter / loaded jitter = {}",
        fmt_ratio(v.loaded_over_shielded),
        fmt_ratio(v.shielded_over_idle),
        fmt_ratio(v.jitter_shielded_over_loaded)
    );
    if let Some(g) = v.guest_loaded_over_shielded {
        let _ = writeln!(
            out,
            "caused inside the guest: loaded worst / shielded worst = {g:.1}   shielded jitter / loaded jitter = {}{}",
            fmt_ratio(v.guest_jitter_shielded_over_loaded),
            v.anchor_loaded_over_shielded
                .map(|a| format!("   cyclictest loaded / shielded = {a:.1}"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(out, "{}", v.line);
    for r in &v.remaining {
        let _ = writeln!(out, "still reaching the shield: {r}");
    }
    out.push_str(&crate::sharing::render(report));
    for n in &v.notes {
        let _ = writeln!(out, "note: {n}");
    }
    for s in &report.scenarios {
        for n in &s.notes {
            let _ = writeln!(out, "note ({}): {n}", s.name);
        }
    }
    for s in &report.scenarios {
        for w in &s.warnings {
            let _ = writeln!(out, "warning ({}): {w}", s.name);
        }
    }
    out
}

/// How each scenario's CPUs idled, and why.
fn render_idle(out: &mut String, report: &CompareReport) {
    let choices: Vec<_> = report
        .scenarios
        .iter()
        .filter_map(|s| s.idle.as_ref().map(|i| (s, i)))
        .collect();
    if choices.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nidle policy ({}):", report.idle_mode);
    for (s, i) in choices {
        let _ = writeln!(out, "  {:<18} {:<5} {}", s.name, i.policy, i.reason);
    }
}

/// Each scenario's samples above the threshold split into guest causes and
/// time outside the guest, then the largest causes.
fn render_split(out: &mut String, report: &CompareReport) {
    let traced: Vec<_> = report
        .scenarios
        .iter()
        .filter_map(|s| s.attribution.as_ref().map(|a| (s, a)))
        .collect();
    let Some((_, first)) = traced.first() else {
        return;
    };
    let _ = writeln!(
        out,
        "\nguest vs outside: every sample above {} explained from a kernel trace of the measured CPUs",
        human_ns(first.threshold_ns)
    );
    let _ = writeln!(
        out,
        "{:<18} {:>9} {:>7} {:>11} {:>12} {:>13} {:>9} {:>10} {:>10} {:>9} {:>9}",
        "scenario",
        "above",
        "named%",
        "guest worst",
        "outside max",
        "outside total",
        "steal",
        "kernel max",
        "user max",
        "jitter%",
        "in-guest%"
    );
    for (s, a) in &traced {
        let (raw_j, guest_j) = s.jitter_cells();
        let _ = writeln!(
            out,
            "{:<18} {:>9} {:>7.1} {:>11} {:>12} {:>13} {:>9} {:>10} {:>10} {:>9} {:>9}",
            s.name,
            a.samples_above,
            a.named_pct(),
            human_ns(a.guest_worst_ns),
            human_ns(a.outside_worst_ns),
            human_ns(a.outside_ns),
            human_ns(a.steal_ns),
            a.kernel_latency_max_ns
                .map(human_ns)
                .unwrap_or_else(|| "-".into()),
            a.user_latency_max_ns
                .map(human_ns)
                .unwrap_or_else(|| "-".into()),
            raw_j,
            guest_j
        );
    }
    for (s, a) in &traced {
        if a.causes.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "causes above the threshold, {} (samples, total, worst):",
            s.name
        );
        for c in a.causes.iter().take(CAUSES_SHOWN) {
            let _ = writeln!(
                out,
                "  {:<8} {:<7} {:>6} {:>10} {:>10}  {}{}",
                c.kind,
                if c.guest { "guest" } else { "outside" },
                c.count,
                human_ns(c.total_ns),
                human_ns(c.worst_ns),
                c.name,
                c.fix
                    .as_ref()
                    .map(|f| format!(" (fix: {f})"))
                    .unwrap_or_default()
            );
        }
        if a.causes.len() > CAUSES_SHOWN {
            let _ = writeln!(
                out,
                "  ... {} more in report.json",
                a.causes.len() - CAUSES_SHOWN
            );
        }
    }
}

/// Causes listed per scenario in the terminal (all are in report.json).
const CAUSES_SHOWN: usize = 6;

fn threshold(ns: u64) -> String {
    format!("{}ms", ns as f64 / 1e6)
}

/// A percentage with enough digits to show the tail (99.99997%).
fn percent(p: f64) -> String {
    if p >= 100.0 {
        "100%".into()
    } else if p >= 99.0 {
        let s = format!("{p:.5}");
        format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{p:.2}%")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_keep_the_tail_digits() {
        assert_eq!(percent(99.99997), "99.99997%");
        assert_eq!(percent(100.0), "100%");
        assert_eq!(percent(50.0), "50.00%");
    }
}
