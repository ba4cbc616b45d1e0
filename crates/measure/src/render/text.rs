//! Human-readable reports: a header, then per CPU the summary, the percentiles,
//! the papers' bucket table and the largest samples with their times.

use super::table::render_bucket_table;
use super::units::{percent, secs6};
use crate::determinism::DeterminismReport;
use crate::distribution::{Distribution, Percentiles};
use crate::latency::LatencyReport;
use crate::noise::NoiseReport;
use crate::recorder::Recorder;
use crate::run_info::RunInfo;
use crate::trace::TracedSpikes;
use crate::warnings::Warning;
use cpushield_cpuset::fmt_ns;

fn fmt_rate(hz: f64) -> String {
    if hz.fract() == 0.0 {
        format!("{hz:.0}")
    } else {
        format!("{hz:.3}")
    }
}

fn indent(text: &str, by: &str) -> String {
    text.lines().map(|l| format!("{by}{l}\n")).collect()
}

fn run_line(run: &RunInfo) -> String {
    format!(
        "ran {:.3} s on kernel {}{}",
        run.elapsed_ns as f64 / 1e9,
        run.kernel_release,
        if run.interrupted {
            " (interrupted: what was measured so far)"
        } else {
            ""
        }
    )
}

/// The summary and percentile lines of a distribution.
pub fn summary(dist: &Distribution) -> String {
    let s = &dist.summary;
    let mut out = format!(
        "min {}  mean {}  stddev {}  max {}\n",
        fmt_ns(s.min_ns),
        fmt_ns(s.mean_ns.round() as u64),
        fmt_ns(s.stddev_ns.round() as u64),
        fmt_ns(s.max_ns)
    );
    let parts: Vec<String> = Percentiles::LABELS
        .iter()
        .zip(s.percentiles.values())
        .map(|(l, v)| format!("{l} {}", fmt_ns(v)))
        .collect();
    out.push_str(&parts.join("  "));
    out.push('\n');
    out
}

/// The largest samples, one per line: value, time into the run, sample number.
pub fn largest(dist: &Distribution, what: &str) -> String {
    let mut out = format!("{} largest {what}:\n", dist.top.len());
    for t in &dist.top {
        out.push_str(&format!(
            "  {:>12}  at {:>10.6} s  (#{})\n",
            fmt_ns(t.value_ns),
            t.offset_ns as f64 / 1e9,
            t.index
        ));
    }
    out
}

/// The CPUs of `report` whose worst latency is above `limit_ns`, as
/// `CPU 1 (12.3 us), CPU 3 (40.0 us)`; None when no CPU is.
pub fn over_limit(report: &LatencyReport, limit_ns: u64) -> Option<String> {
    let over: Vec<String> = report
        .cpus
        .iter()
        .filter(|c| c.latency.summary.max_ns > limit_ns)
        .map(|c| format!("CPU {} ({})", c.cpu, fmt_ns(c.latency.summary.max_ns)))
        .collect();
    (!over.is_empty()).then(|| over.join(", "))
}

/// The `--max-latency` refusal: the CPUs of `report` whose worst latency is
/// above `limit`, in one line; None when no CPU is.
pub fn over_max_latency(report: &LatencyReport, limit: std::time::Duration) -> Option<String> {
    let limit_ns = limit.as_nanos() as u64;
    over_limit(report, limit_ns)
        .map(|over| format!("latency above --max-latency {} on {over}", fmt_ns(limit_ns)))
}

/// A latency report as text.
pub fn latency(report: &LatencyReport) -> String {
    let st = &report.settings;
    let mut out = format!(
        "latency: {}, CPUs {}, {} Hz (period {}), {}{}; {}\n",
        st.source.probe_name(),
        st.cpus,
        fmt_rate(st.rate_hz),
        fmt_ns(st.period_ns),
        match st.advance_ns {
            Some(a) => format!("advance {} (wake early, spin to the deadline)", fmt_ns(a)),
            None => "absolute sleeps".into(),
        },
        if st.idle_poll {
            ", idle CPUs kept polling"
        } else {
            ""
        },
        run_line(&report.run)
    );
    for cpu in &report.cpus {
        out.push_str(&format!(
            "\nCPU {}: {}, {} samples, {} missed periods\n",
            cpu.cpu, cpu.applied, cpu.latency.summary.count, cpu.missed_periods
        ));
        let what = if cpu.advance.is_some() {
            "deviation from the deadline"
        } else if cpu.irq_latency.is_some() {
            "thread latency (timer expiry to the timerlat thread running)"
        } else {
            "wakeup latency"
        };
        out.push_str(&format!("  {what}:\n"));
        out.push_str(&indent(&summary(&cpu.latency), "    "));
        if let Some(irq) = &cpu.irq_latency {
            out.push_str("  IRQ latency (timer expiry to its interrupt handler):\n");
            out.push_str(&indent(&summary(irq), "    "));
        }
        if let Some(adv) = &cpu.advance {
            out.push_str(&format!(
                "  spin before the deadline ({} late wakeups did not spin):\n",
                adv.late_wakeups
            ));
            out.push_str(&indent(&summary(&adv.spin), "    "));
        }
        out.push_str(&format!(
            "  measured {} samples\n  max latency: {}\n",
            cpu.latency.summary.count,
            fmt_ns(cpu.latency.summary.max_ns)
        ));
        out.push_str(&indent(&render_bucket_table(&cpu.latency), "  "));
        out.push_str(&indent(&largest(&cpu.latency, "latencies"), "  "));
    }
    if report.spikes_dropped > 0 {
        out.push_str(&format!(
            "\n{} spikes were not forwarded (ring full)\n",
            report.spikes_dropped
        ));
    }
    out
}

/// A determinism report as text, with Brosky & Rotolo's three lines per CPU
/// (`ideal: 1.147132sec`, `max: ...`, `jitter: ... (26.17%)`).
pub fn determinism(report: &DeterminismReport) -> String {
    let st = &report.settings;
    let mut out = format!(
        "determinism: CPUs {}, {} iterations of the sine loop per run{}, {} runs; {}\n",
        st.cpus,
        st.iterations,
        st.work_ns
            .map(|w| format!(" (calibrated to {})", fmt_ns(w)))
            .unwrap_or_default(),
        st.runs,
        run_line(&report.run)
    );
    for cpu in &report.cpus {
        out.push_str(&format!(
            "\nCPU {}: {}, {} runs\n",
            cpu.cpu,
            cpu.applied,
            cpu.runs_ns.len()
        ));
        if cpu.runs_ns.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "  ideal: {}sec\n  max: {}sec\n  jitter: {}sec ({:.2}%)\n",
            secs6(cpu.ideal_ns),
            secs6(cpu.max_ns),
            secs6(cpu.jitter_ns),
            cpu.jitter_percent
        ));
        // variance from the ideal, as the figures plot it
        let mut excess = Recorder::new();
        for (i, &d) in cpu.runs_ns.iter().enumerate() {
            excess.record(d - cpu.ideal_ns, 0, i as u64);
        }
        out.push_str("  variance from ideal:\n");
        out.push_str(&indent(&render_bucket_table(&excess.finish()), "    "));
    }
    out
}

/// A noise report as text.
pub fn noise(report: &NoiseReport) -> String {
    let st = &report.settings;
    let mut out = format!(
        "noise: CPUs {}, busy loop reading {}, interruptions are gaps >= {}; {}\n",
        st.cpus,
        st.clock.describe(),
        fmt_ns(st.threshold_ns),
        run_line(&report.run)
    );
    for cpu in &report.cpus {
        let gaps = &cpu.gaps.summary;
        out.push_str(&format!(
            "\nCPU {}: {}, {} loops in {:.3} s\n  stolen: {} per second ({}% of the CPU), {} interruptions\n",
            cpu.cpu,
            cpu.applied,
            gaps.count,
            cpu.elapsed_ns as f64 / 1e9,
            fmt_ns(cpu.stolen_ns_per_s.round() as u64),
            percent(cpu.stolen_ns, cpu.elapsed_ns.max(1)),
            cpu.interruptions
        ));
        out.push_str("  gap between clock reads:\n");
        out.push_str(&indent(&summary(&cpu.gaps), "    "));
        out.push_str(&indent(&render_bucket_table(&cpu.gaps), "  "));
        out.push_str(&indent(&largest(&cpu.gaps, "gaps"), "  "));
    }
    out
}

/// Warnings as `warning: <what>; fix: <how>` lines.
pub fn warnings(warnings: &[Warning]) -> String {
    warnings
        .iter()
        .map(|w| format!("warning: {}; fix: {}\n", w.message, w.fix))
        .collect()
}

/// A traced run's spikes: the trace summary (the ten largest spikes, the
/// three top causes), where its windows are, then what the host side said.
pub fn spikes(spikes: &TracedSpikes) -> String {
    let mut out = cpushield_trace::render_summary(&spikes.summary, 10, 3);
    out.push_str(&format!(
        "trace windows and trace-summary.json: {}\n",
        spikes.dir.display()
    ));
    for line in &spikes.host_lines {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spikes_print_the_summary_then_the_windows_then_the_host_lines() {
        let traced = TracedSpikes {
            summary: Default::default(),
            dir: "/tmp/cpushield-trace-1".into(),
            host_lines: vec!["host side: spike 1 on CPU 1: preempted".into()],
        };
        let text = spikes(&traced);
        let summary = cpushield_trace::render_summary(&traced.summary, 10, 3);
        assert_eq!(
            text,
            format!(
                "{summary}trace windows and trace-summary.json: /tmp/cpushield-trace-1\n\
                 host side: spike 1 on CPU 1: preempted\n"
            )
        );
    }
}
