//! Sharing a shielded CPU's idle time, the Hyades paper's ARTiS experiment:
//! the real-time task's 99.999 % and maximum latency without and with a
//! best-effort batch job on its CPU (scenarios `shielded` and
//! `shielded+shared` of the same run), beside the batch job's throughput and
//! the share of the CPU it got, in the form of the paper's Table 2.
//!
//! Judged on its own line: the shield's verdict is not changed by it.

use crate::model::{CompareReport, ScenarioResult, Sharing, SharingRow};
use crate::units::TimeColumn;
use cpushield_cpuset::fmt_ns;
use std::fmt::Write;

/// The scenario without sharing.
pub const WITHOUT: &str = "shielded";
/// The scenario with sharing.
pub const WITH: &str = "shielded+shared";
/// Sharing keeps the real-time task's latency when its maximum with the
/// batch job is at most this many times the maximum without.
pub const KEEPS_RATIO: f64 = 2.0;

fn row(s: &ScenarioResult) -> SharingRow {
    SharingRow {
        configuration: s.name.clone(),
        p99999_ns: s.latency.p99999_ns,
        max_ns: s.latency.max_ns,
        batch_ops_per_s: s.batch.as_ref().map(|b| b.ops_per_s),
        batch_cpu_share_pct: s.batch.as_ref().map(|b| b.cpu_share_pct),
    }
}

fn ratio(with: u64, without: u64) -> Option<f64> {
    (without > 0).then(|| with as f64 / without as f64)
}

/// The sharing experiment of `report`, or None when `shielded+shared` did not run.
pub fn summarize(report: &CompareReport) -> Option<Sharing> {
    let with = report.scenario(WITH)?;
    let without = report.scenario(WITHOUT);
    let mut rows: Vec<SharingRow> = without.iter().map(|s| row(s)).collect();
    rows.push(row(with));
    let max_ratio = without.and_then(|w| ratio(with.latency.max_ns, w.latency.max_ns));
    let p_ratio = without.and_then(|w| ratio(with.latency.p99999_ns, w.latency.p99999_ns));
    let keeps = max_ratio.map(|r| r <= KEEPS_RATIO);
    let batch = match &with.batch {
        Some(b) => format!(
            "the batch job got {:.0}% of CPU {} ({:.0} ops/s)",
            b.cpu_share_pct, with.measured_cpus, b.ops_per_s
        ),
        None => "the batch job did not run (see the warnings)".to_string(),
    };
    let line = match (without, max_ratio) {
        (Some(w), Some(r)) => format!(
            "{}: worst case {} shared vs {} unshared ({r:.1}x), 99.999% {} vs {}; {batch}",
            if r <= KEEPS_RATIO {
                "SHARING KEEPS THE LATENCY"
            } else {
                "SHARING COSTS LATENCY"
            },
            fmt_ns(with.latency.max_ns),
            fmt_ns(w.latency.max_ns),
            fmt_ns(with.latency.p99999_ns),
            fmt_ns(w.latency.p99999_ns),
        ),
        _ => format!(
            "sharing not judged: run the shielded scenario in the same compare (--scenarios shielded,shielded+shared); shared worst case {}; {batch}",
            fmt_ns(with.latency.max_ns)
        ),
    };
    Some(Sharing {
        cpus: with.measured_cpus.clone(),
        rows,
        max_with_over_without: max_ratio,
        p99999_with_over_without: p_ratio,
        keeps_latency: keeps,
        line,
    })
}

fn cell<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

/// The sharing table in the Hyades paper's Table 2 form, and its line; empty
/// when the run had no `shielded+shared`.
pub fn render(report: &CompareReport) -> String {
    let Some(s) = &report.sharing else {
        return String::new();
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nsharing the shielded CPU's idle time (the Hyades paper's Table 2, ARTiS): real-time task on CPU {}, batch job SCHED_IDLE",
        s.cpus
    );
    let _ = writeln!(
        out,
        "{:<18} {:>9} {:>9} {:>12} {:>10}",
        "configuration", "99.999%", "maximum", "batch ops/s", "batch CPU"
    );
    let p99999 = TimeColumn::fit(s.rows.iter().map(|r| r.p99999_ns));
    let max = TimeColumn::fit(s.rows.iter().map(|r| r.max_ns));
    for r in &s.rows {
        let _ = writeln!(
            out,
            "{:<18} {:>9} {:>9} {:>12} {:>10}",
            r.configuration,
            p99999.cell(r.p99999_ns),
            max.cell(r.max_ns),
            cell(r.batch_ops_per_s, |v| format!("{v:.0}")),
            cell(r.batch_cpu_share_pct, |v| format!("{v:.1}%")),
        );
    }
    let _ = writeln!(out, "{}", s.line);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BatchWork, LatencySummary};

    fn scenario(name: &str, p99999_ns: u64, max_ns: u64, batch: bool) -> ScenarioResult {
        ScenarioResult {
            name: name.into(),
            measured_cpus: "1".into(),
            shielded: true,
            latency: LatencySummary {
                p99999_ns,
                max_ns,
                ..LatencySummary::default()
            },
            batch: batch.then(|| BatchWork {
                workload: "compute".into(),
                ops: 6_000,
                ops_per_s: 2_000.0,
                cpu_share_pct: 93.5,
                ..BatchWork::default()
            }),
            ..ScenarioResult::default()
        }
    }

    fn report(scenarios: Vec<ScenarioResult>) -> CompareReport {
        let mut r = CompareReport {
            scenarios,
            ..CompareReport::default()
        };
        r.sharing = summarize(&r);
        r
    }

    #[test]
    fn without_the_shared_scenario_there_is_no_sharing_block() {
        let r = report(vec![scenario("shielded", 20_000, 40_000, false)]);
        assert_eq!(r.sharing, None);
        assert_eq!(render(&r), "");
    }

    #[test]
    fn the_table_shows_both_configurations_and_the_batch_work() {
        let r = report(vec![
            scenario("shielded", 20_000, 40_000, false),
            scenario("shielded+shared", 30_000, 60_000, true),
        ]);
        let s = r.sharing.as_ref().unwrap();
        assert_eq!(s.max_with_over_without, Some(1.5));
        assert_eq!(s.keeps_latency, Some(true));
        assert_eq!(
            render(&r),
            "\nsharing the shielded CPU's idle time (the Hyades paper's Table 2, ARTiS): real-time task on CPU 1, batch job SCHED_IDLE\n\
             configuration        99.999%   maximum  batch ops/s  batch CPU\n\
             shielded             20.0 us   40.0 us            -          -\n\
             shielded+shared      30.0 us   60.0 us         2000      93.5%\n\
             SHARING KEEPS THE LATENCY: worst case 60.0 us shared vs 40.0 us unshared (1.5x), 99.999% 30.0 us vs 20.0 us; the batch job got 94% of CPU 1 (2000 ops/s)\n"
        );
    }

    #[test]
    fn report_html_carries_the_sharing_table_only_when_sharing_ran() {
        let shared = report(vec![
            scenario("shielded", 20_000, 40_000, false),
            scenario("shielded+shared", 30_000, 60_000, true),
        ]);
        let html = crate::html::render(&shared, "", "");
        assert!(html.contains("<section id=\"sharing\">"), "{html}");
        assert!(html.contains("SHARING KEEPS THE LATENCY"), "{html}");
        let plain = report(vec![scenario("shielded", 20_000, 40_000, false)]);
        assert!(!crate::html::render(&plain, "", "").contains("id=\"sharing\""));
    }

    #[test]
    fn a_worst_case_more_than_twice_the_unshared_one_costs_latency() {
        let r = report(vec![
            scenario("shielded", 20_000, 40_000, false),
            scenario("shielded+shared", 30_000, 90_000, true),
        ]);
        let s = r.sharing.unwrap();
        assert_eq!(s.keeps_latency, Some(false));
        assert!(s.line.starts_with("SHARING COSTS LATENCY: "), "{}", s.line);
    }

    #[test]
    fn sharing_alone_is_not_judged_and_says_what_to_run() {
        let r = report(vec![scenario("shielded+shared", 30_000, 90_000, false)]);
        let s = r.sharing.unwrap();
        assert_eq!(s.rows.len(), 1);
        assert_eq!(s.keeps_latency, None);
        assert!(
            s.line.contains("--scenarios shielded,shielded+shared")
                && s.line.contains("did not run"),
            "{}",
            s.line
        );
    }
}
