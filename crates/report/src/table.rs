//! The terminal table in the papers' terms.

use crate::model::{human_ns, CompareReport, BUCKET_EDGES_NS};
use std::fmt::Write;

/// Renders the comparison table, the seeds' bucket counts, and the verdict.
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
    let _ = writeln!(out, "\nsamples below each threshold (seed 000 §6.2):");
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
    let ratio = |r: Option<f64>| r.map(|x| format!("{x:.1}")).unwrap_or_else(|| "n/a".into());
    let _ = writeln!(
        out,
        "\nloaded max / shielded max = {}   shielded max / idle max = {}   shielded jitter / loaded jitter = {}",
        ratio(v.loaded_over_shielded),
        ratio(v.shielded_over_idle),
        ratio(v.jitter_shielded_over_loaded)
    );
    let _ = writeln!(out, "{}", v.line);
    for n in &v.notes {
        let _ = writeln!(out, "note: {n}");
    }
    for s in &report.scenarios {
        for w in &s.warnings {
            let _ = writeln!(out, "warning ({}): {w}", s.name);
        }
    }
    out
}

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
