//! What a scenario's measurements come to in the report: one latency and
//! one determinism summary over the measured CPUs, the host line and the
//! report's timestamp.

use crate::explain::DeterminismSplit;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use cpushield_measure::determinism;
use cpushield_measure::latency;
use cpushield_measure::Distribution;
use cpushield_report::{DeterminismSummary, LatencySummary};
use std::collections::BTreeMap;

/// Merges the per-CPU latency distributions (counts summed, worst tail kept).
pub fn latency_summary(r: &latency::LatencyReport) -> LatencySummary {
    let worst = r.cpus.iter().max_by_key(|c| c.latency.summary.max_ns);
    let Some(worst) = worst else {
        return LatencySummary::default();
    };
    let mut histogram: BTreeMap<u64, u64> = BTreeMap::new();
    for c in &r.cpus {
        for bin in &c.latency.histogram {
            *histogram.entry(bin.high_ns).or_default() += bin.count;
        }
    }
    let samples: u64 = r.cpus.iter().map(|c| c.samples).sum();
    let mean = if samples > 0 {
        r.cpus
            .iter()
            .map(|c| c.latency.summary.mean_ns * c.samples as f64)
            .sum::<f64>()
            / samples as f64
    } else {
        0.0
    };
    let d: &Distribution = &worst.latency;
    LatencySummary {
        samples,
        missed: r.cpus.iter().map(|c| c.missed_periods).sum(),
        min_ns: r
            .cpus
            .iter()
            .map(|c| c.latency.summary.min_ns)
            .min()
            .unwrap_or(0),
        mean_ns: mean,
        p50_ns: d.summary.percentiles.p50_ns,
        p99_ns: d.summary.percentiles.p99_ns,
        p99999_ns: d.summary.percentiles.p99_999_ns,
        max_ns: d.summary.max_ns,
        histogram: histogram.into_iter().collect(),
    }
}

/// The worst CPU's determinism runs (largest jitter), with the trace's
/// split of each run into time in the guest and outside it, and the steal.
pub fn determinism_summary(
    r: &determinism::DeterminismReport,
    split: Option<&DeterminismSplit>,
    steal_ns: u64,
) -> DeterminismSummary {
    let worst = r
        .cpus
        .iter()
        .max_by(|a, b| a.jitter_percent.total_cmp(&b.jitter_percent));
    let Some(c) = worst else {
        return DeterminismSummary::default();
    };
    DeterminismSummary {
        runs: c.runs_ns.len() as u64,
        ideal_s: c.ideal_ns as f64 / 1e9,
        fastest_s: c.ideal_ns as f64 / 1e9,
        max_s: c.max_ns as f64 / 1e9,
        jitter_s: c.jitter_ns as f64 / 1e9,
        jitter_pct: c.jitter_percent,
        run_times_s: c.runs_ns.iter().map(|n| *n as f64 / 1e9).collect(),
        run_in_guest_s: split
            .map(|s| s.in_guest_ns.iter().map(|n| *n as f64 / 1e9).collect())
            .unwrap_or_default(),
        run_outside_s: split
            .map(|s| s.outside_ns.iter().map(|n| *n as f64 / 1e9).collect())
            .unwrap_or_default(),
        guest_jitter_pct: None,
        steal_s: Some(steal_ns as f64 / 1e9),
    }
}

/// `Linux <release>, <n> CPUs (<model>)`, and whether it is a virtual machine.
pub fn host_line(kernel: &dyn Kernel, online: &CpuSet) -> String {
    let release = cpushield_kernel::kernel_release(kernel).unwrap_or_default();
    let cpuinfo = cpushield_kernel::Procfs::new(kernel)
        .cpuinfo()
        .unwrap_or_default();
    let model = cpushield_parse::cpuinfo::model_name(&cpuinfo).unwrap_or_default();
    let vm = if cpushield_parse::cpuinfo::runs_under_hypervisor(&cpuinfo) {
        ", virtual machine"
    } else {
        ""
    };
    format!(
        "Linux {}, {} CPUs ({model}){vm}",
        release.trim(),
        online.len()
    )
}

/// UTC now as RFC 3339 (whole seconds, `Z`), e.g. `2026-11-22T19:50:36Z`.
pub fn rfc3339_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339_from_unix_seconds(secs)
}

/// `secs` since the Unix epoch as RFC 3339 in UTC, whole seconds, `Z` suffix.
/// Past the end of jiff's range (late in year 9999) it prints the last
/// second jiff can represent.
fn rfc3339_from_unix_seconds(secs: u64) -> String {
    let ts = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    // Drop any fraction (only Timestamp::MAX has one) so the text is always
    // whole seconds.
    let ts = jiff::Timestamp::from_second(ts.as_second()).unwrap_or(ts);
    ts.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        // Known epoch seconds -> known UTC text.
        assert_eq!(rfc3339_from_unix_seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_from_unix_seconds(1_000_000_000),
            "2001-09-09T01:46:40Z"
        );
        // End of a year: the last second of 1999 and the first of 2000.
        assert_eq!(
            rfc3339_from_unix_seconds(946_684_799),
            "1999-12-31T23:59:59Z"
        );
        assert_eq!(
            rfc3339_from_unix_seconds(946_684_800),
            "2000-01-01T00:00:00Z"
        );
        // Leap years: 2000 (divisible by 400) and 2024 have 29 February...
        assert_eq!(
            rfc3339_from_unix_seconds(951_782_400),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339_from_unix_seconds(1_709_164_800),
            "2024-02-29T00:00:00Z"
        );
        // ...2100 (divisible by 100, not 400) does not.
        assert_eq!(
            rfc3339_from_unix_seconds(4_107_542_399),
            "2100-02-28T23:59:59Z"
        );
        assert_eq!(
            rfc3339_from_unix_seconds(4_107_542_400),
            "2100-03-01T00:00:00Z"
        );
        // 2024 is 366 days long: its last day is day 366.
        assert_eq!(
            rfc3339_from_unix_seconds(1_735_689_599),
            "2024-12-31T23:59:59Z"
        );
        // Beyond the calendar's end the text stays in shape rather than panicking.
        let last = rfc3339_from_unix_seconds(u64::MAX);
        assert!(last.starts_with("9999-12-") && last.len() == 20, "{last}");
        // Now has the same shape.
        let t = rfc3339_now();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T');
    }
}
