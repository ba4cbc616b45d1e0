//! The writers against golden files: the papers' bucket table, cyclictest's `-h`
//! format, and the human determinism lines. Regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p cpushield-measure --test golden` and review the diff.

use cpushield_measure::determinism::{CpuDeterminism, DeterminismReport, DeterminismSettings};
use cpushield_measure::distribution::Distribution;
use cpushield_measure::recorder::Recorder;
use cpushield_measure::render::{cyclictest, table, text};
use cpushield_measure::{AppliedPolicy, CpuSet, RunInfo, SchedPolicy};
use std::path::PathBuf;

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create)",
            path.display()
        )
    });
    assert_eq!(actual, expected, "output differs from {}", path.display());
}

fn dist(values: &[(u64, u64)]) -> Distribution {
    // (value_ns, repeat) pairs, recorded in order, 1 ms apart
    let mut r = Recorder::new();
    let mut i = 0u64;
    for &(v, n) in values {
        for _ in 0..n {
            r.record(v, i * 1_000_000, i);
            i += 1;
        }
    }
    r.finish()
}

#[test]
fn bucket_table_in_the_style_of_brosky_and_rotolo_figure_6() {
    // 9984 samples under 0.1 ms, then a thin tail up to 0.45 ms
    let d = dist(&[
        (12_000, 5000),
        (35_000, 4000),
        (80_000, 984),
        (150_000, 8),
        (250_000, 5),
        (350_000, 2),
        (450_000, 1),
    ]);
    check("bucket_table_fig6.txt", &table::render_bucket_table(&d));
}

#[test]
fn bucket_table_in_the_style_of_brosky_and_rotolo_figure_7() {
    // RCIM-like: everything between 11 and 27 us
    let d = dist(&[(11_000, 28_800_000 / 1000), (12_500, 70), (27_000, 12)]);
    check("bucket_table_fig7.txt", &table::render_bucket_table(&d));
}

#[test]
fn bucket_table_when_every_sample_is_in_the_first_bucket() {
    let d = dist(&[(3_000, 10), (3_500, 10)]);
    let out = table::render_bucket_table(&d);
    assert_eq!(out, "20 samples < 0.004ms (100%)\n");
}

#[test]
fn cyclictest_histogram_with_two_threads_and_overflows() {
    let t0 = dist(&[(1_500, 3), (2_500, 5), (9_999, 1), (15_000, 1), (1_200, 2)]);
    let t1 = dist(&[(3_000, 2), (12_000, 12), (4_700, 4)]);
    check(
        "cyclictest_two_threads.txt",
        &cyclictest::write_histogram(&[&t0, &t1], 10),
    );
}

#[test]
fn cyclictest_histogram_sized_to_cover_everything_has_no_overflow() {
    let t0 = dist(&[(1_500, 3), (7_200, 1)]);
    let bins = cyclictest::bins_to_cover(&[&t0], 5);
    assert_eq!(bins, 8);
    let out = cyclictest::write_histogram(&[&t0], bins);
    check("cyclictest_one_thread.txt", &out);
    assert!(out.contains("# Histogram Overflows: 00000\n"));
}

#[test]
fn determinism_lines_match_brosky_and_rotolo_figure_1() {
    let applied = AppliedPolicy {
        policy: SchedPolicy::Fifo,
        priority: 95,
    };
    let runs = vec![1_147_132_000, 1_150_000_000, 1_447_316_000, 1_160_500_000];
    let report = DeterminismReport {
        settings: DeterminismSettings {
            cpus: CpuSet::from_cpus([1]),
            work_ns: Some(1_000_000_000),
            iterations: 52_000_000,
            runs: 4,
            priority: Some(95),
            rest_ns: 100_000_000,
        },
        run: RunInfo {
            started_unix_ns: 0,
            elapsed_ns: 5_000_000_000,
            interrupted: false,
            kernel_release: "6.18.0-test".into(),
            warnings: vec![],
        },
        cpus: vec![CpuDeterminism::from_runs(1, applied, runs)],
    };
    check("determinism_fig1.txt", &text::determinism(&report));
}

#[test]
fn a_timerlat_report_shows_and_keeps_the_irq_latency_beside_the_thread_latency() {
    use cpushield_measure::latency::{CpuLatency, LatencyReport, LatencySettings};
    use cpushield_measure::source::Source;
    use cpushield_measure::Period;
    let report = LatencyReport {
        settings: LatencySettings {
            cpus: CpuSet::parse_list("3").unwrap(),
            period: Period::from_interval(std::time::Duration::from_millis(1)),
            period_ns: 1_000_000,
            rate_hz: 1000.0,
            duration_ns: Some(1_000_000_000),
            samples: None,
            priority: Some(95),
            advance_ns: None,
            spike_threshold_ns: None,
            idle_poll: false,
            source: Source::Timerlat,
        },
        run: RunInfo {
            started_unix_ns: 0,
            elapsed_ns: 1_000_000_000,
            interrupted: false,
            kernel_release: "6.12.117+deb12-rt-amd64".into(),
            warnings: Vec::new(),
        },
        cpus: vec![CpuLatency {
            cpu: 3,
            applied: AppliedPolicy {
                policy: SchedPolicy::Fifo,
                priority: 95,
            },
            samples: 3,
            missed_periods: 0,
            latency: dist(&[(4_000, 2), (9_000, 1)]),
            advance: None,
            irq_latency: Some(dist(&[(1_000, 2), (2_500, 1)])),
        }],
        spikes_dropped: 0,
    };
    let shown = text::latency(&report);
    assert!(shown.contains("latency: timerlat"), "{shown}");
    assert!(
        shown.contains("thread latency (timer expiry to the timerlat thread running)"),
        "{shown}"
    );
    assert!(
        shown.contains("IRQ latency (timer expiry to its interrupt handler)"),
        "{shown}"
    );
    let text = cpushield_measure::json::to_string(&report);
    assert!(text.contains("\"source\":\"timerlat\""), "{text}");
    let back: LatencyReport = cpushield_measure::json::from_str(&text).unwrap();
    assert_eq!(back, report);
    assert_eq!(
        back.cpus[0].irq_latency.as_ref().unwrap().summary.max_ns,
        2_500
    );
}
