//! The report's tables as cells, one set for the terminal ([`crate::table`])
//! and report.html ([`crate::html`]): every duration column in one unit
//! ([`TimeColumn`]), named in its header (`max (ms)`) — except the answer's
//! worst cases, whose cells carry it (`34.7 ms`) for a first reader.

use crate::answer::Answer;
use crate::model::{
    AttributionSummary, CauseRow, CompareReport, HostCause, LatencySummary, SampleWindow,
    BUCKET_EDGES_NS,
};
use crate::units::TimeColumn;

/// A table as text cells.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Cells {
    /// The column headers.
    pub header: Vec<String>,
    /// Each column's unit, `""` where the cells carry their own or have none.
    pub units: Vec<String>,
    /// The rows, each as wide as the header.
    pub rows: Vec<Vec<String>>,
    /// The columns that hold words (left-aligned); the others hold figures.
    pub text: Vec<usize>,
}

impl Cells {
    /// A table of these columns (header, unit).
    fn new(columns: &[(&str, &str)], text: &[usize]) -> Self {
        Cells {
            header: columns.iter().map(|(h, _)| h.to_string()).collect(),
            units: columns.iter().map(|(_, u)| u.to_string()).collect(),
            rows: Vec::new(),
            text: text.to_vec(),
        }
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Column `c`'s header with its unit: `max (ms)`.
    pub fn header_with_unit(&self, c: usize) -> String {
        match self.units[c].as_str() {
            "" => self.header[c].clone(),
            unit => format!("{} ({unit})", self.header[c]),
        }
    }
}

/// `-` for what was not measured.
fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "-".into())
}

/// The answer's worst cases loaded and shielded, with the ratio and what
/// the row is to the verdict; empty when there is no pair to compare.
pub fn worst_cases(a: &Answer) -> Cells {
    if a.worst_cases.is_empty() {
        return Cells::default();
    }
    let loaded = TimeColumn::fit(a.worst_cases.iter().map(|w| w.loaded_ns));
    let shielded = TimeColumn::fit(a.worst_cases.iter().map(|w| w.shielded_ns));
    let head = format!("worst case on CPU {}", a.cpus);
    let mut cells = Cells::new(
        &[
            (head.as_str(), ""),
            ("loaded", ""),
            ("shielded", ""),
            ("ratio", ""),
            ("", ""),
        ],
        &[0, 4],
    );
    for w in &a.worst_cases {
        cells.rows.push(vec![
            w.label.clone(),
            loaded.cell(w.loaded_ns),
            shielded.cell(w.shielded_ns),
            or_dash(w.ratio.map(|r| format!("{r:.1}x"))),
            w.role.clone().unwrap_or_default(),
        ]);
    }
    cells
}

/// One row per scenario: wakeup latency, the cyclictest anchor's worst
/// case in the same scenario (and rtla timerlat's, thread and IRQ, when it
/// ran), interrupts.
pub fn latency(report: &CompareReport) -> Cells {
    let s = &report.scenarios;
    let lat = |f: fn(&LatencySummary) -> u64| TimeColumn::fit(s.iter().map(|x| f(&x.latency)));
    let (min, p99, p99999, max) = (
        lat(|l| l.min_ns),
        lat(|l| l.p99_ns),
        lat(|l| l.p99999_ns),
        lat(|l| l.max_ns),
    );
    let anchor = TimeColumn::fit(s.iter().filter_map(|x| x.anchor.as_ref().map(|a| a.max_ns)));
    let rtla = s.iter().any(|x| x.rtla.is_some());
    let rtla_thread = TimeColumn::fit(s.iter().filter_map(|x| x.rtla.as_ref().map(|a| a.max_ns)));
    let rtla_irq = TimeColumn::fit(
        s.iter()
            .filter_map(|x| x.rtla.as_ref().and_then(|a| a.irq_max_ns)),
    );
    let mut columns = vec![
        ("scenario", ""),
        ("cpus", ""),
        ("samples", ""),
        ("missed", ""),
        ("min", min.unit()),
        ("p99", p99.unit()),
        ("p99.999", p99999.unit()),
        ("max", max.unit()),
        ("cyclictest", anchor.unit()),
    ];
    if rtla {
        columns.push(("rtla thread", rtla_thread.unit()));
        columns.push(("rtla irq", rtla_irq.unit()));
    }
    columns.push(("irq/s", ""));
    let mut cells = Cells::new(&columns, &[0]);
    for x in s {
        let l = &x.latency;
        cells.rows.push(vec![
            x.name.clone(),
            x.measured_cpus.clone(),
            l.samples.to_string(),
            l.missed.to_string(),
            min.number(l.min_ns),
            p99.number(l.p99_ns),
            p99999.number(l.p99999_ns),
            max.number(l.max_ns),
            or_dash(x.anchor.as_ref().map(|a| anchor.number(a.max_ns))),
        ]);
        let row = cells.rows.last_mut().expect("the row just pushed");
        if rtla {
            row.push(or_dash(
                x.rtla.as_ref().map(|a| rtla_thread.number(a.max_ns)),
            ));
            row.push(or_dash(
                x.rtla
                    .as_ref()
                    .and_then(|a| a.irq_max_ns)
                    .map(|n| rtla_irq.number(n)),
            ));
        }
        row.push(format!("{:.0}", x.irqs_per_s));
    }
    cells
}

/// One row per scenario: execution determinism (Brosky & Rotolo's Figures
/// 1-4: the runs against the experiment's fastest) and the load carried.
pub fn determinism(report: &CompareReport) -> Cells {
    let s = &report.scenarios;
    let dets = || s.iter().filter_map(|x| x.determinism.as_ref());
    let ideal = TimeColumn::fit_secs(dets().map(|d| d.ideal_s));
    let slowest = TimeColumn::fit_secs(dets().map(|d| d.max_s));
    let mut cells = Cells::new(
        &[
            ("scenario", ""),
            ("runs", ""),
            ("ideal", ideal.unit()),
            ("slowest", slowest.unit()),
            ("jitter", "%"),
            ("in guest", "%"),
            ("load", "ops/s"),
        ],
        &[0],
    );
    for x in s {
        let d = x.determinism.as_ref();
        let (jitter, in_guest) = x.jitter_cells();
        cells.rows.push(vec![
            x.name.clone(),
            or_dash(d.map(|d| d.runs.to_string())),
            or_dash(d.map(|d| ideal.number_secs(d.ideal_s))),
            or_dash(d.map(|d| slowest.number_secs(d.max_s))),
            jitter,
            in_guest,
            if x.load.is_empty() {
                "-".into()
            } else {
                format!(
                    "{:.0}",
                    x.load.iter().map(|o| o.ops_per_s).sum::<f64>().max(0.0)
                )
            },
        ]);
    }
    cells
}

/// Samples below each of Brosky & Rotolo's thresholds: one row per
/// threshold, one column per scenario (count and share).
pub fn thresholds(report: &CompareReport) -> Cells {
    let mut columns = vec![("below", "")];
    columns.extend(report.scenarios.iter().map(|s| (s.name.as_str(), "")));
    let mut cells = Cells::new(&columns, &[0]);
    let tables: Vec<Vec<(u64, u64)>> = report
        .scenarios
        .iter()
        .map(|s| s.latency.bucket_table())
        .collect();
    for (row, edge) in BUCKET_EDGES_NS.iter().enumerate() {
        let mut line = vec![format!("{} ms", *edge as f64 / 1e6)];
        for (s, table) in report.scenarios.iter().zip(&tables) {
            let below = table[row].1;
            let pct = if s.latency.samples > 0 {
                100.0 * below as f64 / s.latency.samples as f64
            } else {
                0.0
            };
            line.push(format!("{below} ({})", percent(pct)));
        }
        cells.rows.push(line);
    }
    cells
}

/// A percentage with enough digits to show the tail (99.99997%).
pub fn percent(p: f64) -> String {
    if p >= 100.0 {
        "100%".into()
    } else if p >= 99.0 {
        let s = format!("{p:.5}");
        format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{p:.2}%")
    }
}

/// How each scenario's CPUs idled: both calibration runs' worst cases and why.
pub fn idle(report: &CompareReport) -> Cells {
    let choices: Vec<_> = report
        .scenarios
        .iter()
        .filter_map(|s| s.idle.as_ref().map(|i| (s, i)))
        .collect();
    if choices.is_empty() {
        return Cells::default();
    }
    let halt = TimeColumn::fit(choices.iter().filter_map(|(_, i)| i.halt_max_ns));
    let poll = TimeColumn::fit(choices.iter().filter_map(|(_, i)| i.poll_max_ns));
    let mut cells = Cells::new(
        &[
            ("scenario", ""),
            ("policy", ""),
            ("how", ""),
            ("halting max", halt.unit()),
            ("polling max", poll.unit()),
            ("why", ""),
        ],
        &[0, 1, 2, 5],
    );
    for (s, i) in choices {
        cells.rows.push(vec![
            s.name.clone(),
            i.policy.clone(),
            i.how.clone(),
            or_dash(i.halt_max_ns.map(|n| halt.number(n))),
            or_dash(i.poll_max_ns.map(|n| poll.number(n))),
            i.reason.clone(),
        ]);
    }
    cells
}

/// Each traced scenario's samples above the threshold: the worst caused in
/// the guest against time outside it, kernel and user latency.
pub fn split(report: &CompareReport) -> Cells {
    let traced: Vec<_> = report
        .scenarios
        .iter()
        .filter_map(|s| s.attribution.as_ref().map(|a| (s, a)))
        .collect();
    if traced.is_empty() {
        return Cells::default();
    }
    let column =
        |f: fn(&AttributionSummary) -> u64| TimeColumn::fit(traced.iter().map(|(_, a)| f(a)));
    let (guest, outside, outside_sum, steal) = (
        column(|a| a.guest_worst_ns),
        column(|a| a.outside_worst_ns),
        column(|a| a.outside_ns),
        column(|a| a.steal_ns),
    );
    let kernel = TimeColumn::fit(traced.iter().filter_map(|(_, a)| a.kernel_latency_max_ns));
    let user = TimeColumn::fit(traced.iter().filter_map(|(_, a)| a.user_latency_max_ns));
    let mut cells = Cells::new(
        &[
            ("scenario", ""),
            ("above", ""),
            ("named", "%"),
            ("guest max", guest.unit()),
            ("outside max", outside.unit()),
            ("outside sum", outside_sum.unit()),
            ("steal", steal.unit()),
            ("kernel max", kernel.unit()),
            ("user max", user.unit()),
        ],
        &[0],
    );
    for (s, a) in traced {
        cells.rows.push(vec![
            s.name.clone(),
            a.samples_above.to_string(),
            format!("{:.1}", a.named_pct()),
            guest.number(a.guest_worst_ns),
            outside.number(a.outside_worst_ns),
            outside_sum.number(a.outside_ns),
            steal.number(a.steal_ns),
            or_dash(a.kernel_latency_max_ns.map(|n| kernel.number(n))),
            or_dash(a.user_latency_max_ns.map(|n| user.number(n))),
        ]);
    }
    cells
}

/// Causes above the threshold, largest total first, each with its fix: in
/// a column of its own when `fix_apart`, else after the cause's name.
pub fn causes(causes: &[CauseRow], fix_apart: bool) -> Cells {
    let total = TimeColumn::fit(causes.iter().map(|c| c.total_ns));
    let worst = TimeColumn::fit(causes.iter().map(|c| c.worst_ns));
    let mut cells = Cells::new(
        &[
            ("kind", ""),
            ("side", ""),
            ("samples", ""),
            ("total", total.unit()),
            ("worst", worst.unit()),
            ("cause", ""),
            ("fix", ""),
        ],
        &[0, 1, 5, 6],
    );
    for c in causes {
        cells.rows.push(vec![
            c.kind.clone(),
            if c.guest { "guest" } else { "outside" }.into(),
            c.count.to_string(),
            total.number(c.total_ns),
            worst.number(c.worst_ns),
            c.name.clone(),
            or_dash(c.fix.clone()),
        ]);
    }
    if !fix_apart {
        cells.header.pop();
        cells.units.pop();
        cells.text.pop();
        for (row, c) in cells.rows.iter_mut().zip(causes) {
            row.pop();
            if let Some(fix) = &c.fix {
                row[5] = format!("{} (fix: {fix})", c.name);
            }
        }
    }
    cells
}

/// The host's view of the samples that lost the most time outside the guest
/// (`cpushield vm watch` answering on the virtio-serial port): for each, the
/// vCPU, its time outside the guest, why the host did not run it, what held
/// its host CPU and for how long, and the clock offset's error that bounds
/// every host time. `samples` and `host` are in the same order.
pub fn host_causes(samples: &[SampleWindow], host: &[HostCause]) -> Cells {
    let outside = TimeColumn::fit(samples.iter().map(|w| w.outside_ns));
    let held = TimeColumn::fit(host.iter().filter_map(|c| c.culprit_ns));
    let err = TimeColumn::fit(host.iter().map(|c| c.err_ns));
    let mut cells = Cells::new(
        &[
            ("vCPU", ""),
            ("outside", outside.unit()),
            ("host saw", ""),
            ("held by", ""),
            ("host CPU", ""),
            ("held", held.unit()),
            ("± clock", err.unit()),
        ],
        &[2, 3],
    );
    for (w, c) in samples.iter().zip(host) {
        cells.rows.push(vec![
            c.vcpu.to_string(),
            outside.number(w.outside_ns),
            c.kind.clone(),
            match (&c.culprit, c.culprit_pid) {
                (Some(name), Some(pid)) => format!("{name} (pid {pid})"),
                (Some(name), None) => name.clone(),
                _ => "-".into(),
            },
            or_dash(c.host_cpu.map(|cpu| cpu.to_string())),
            c.culprit_ns
                .map_or_else(|| "-".into(), |ns| held.number(ns)),
            err.number(c.err_ns),
        ]);
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_view_names_what_held_each_vcpu_and_the_clock_error_beside_the_guests_time() {
        let samples = [
            SampleWindow {
                cpu: 1,
                intended_ns: 1,
                actual_ns: 2,
                outside_ns: 41_200_000,
            },
            SampleWindow {
                cpu: 1,
                intended_ns: 3,
                actual_ns: 4,
                outside_ns: 2_000_000,
            },
            SampleWindow {
                cpu: 1,
                intended_ns: 5,
                actual_ns: 6,
                outside_ns: 1_600_000,
            },
        ];
        let host = [
            HostCause {
                kind: "preempted".into(),
                vcpu: 1,
                err_ns: 400_000,
                culprit: Some("sh".into()),
                culprit_pid: Some(4711),
                host_cpu: Some(1),
                culprit_ns: Some(40_300_000),
                ..HostCause::default()
            },
            HostCause {
                kind: "halted".into(),
                vcpu: 1,
                err_ns: 400_000,
                ..HostCause::default()
            },
            HostCause {
                kind: "halted".into(),
                vcpu: 1,
                err_ns: 400_000,
                culprit: Some("sh".into()),
                culprit_pid: Some(4711),
                host_cpu: Some(1),
                culprit_ns: Some(1_500_000),
                ..HostCause::default()
            },
        ];
        let c = host_causes(&samples, &host);
        assert_eq!(c.header[2], "host saw");
        assert_eq!(c.rows[0][2..5], ["preempted", "sh (pid 4711)", "1"]);
        assert_eq!(c.rows[1][2..6], ["halted", "-", "-", "-"]);
        // Woken from halt, then kept waiting: still halted, with what held it.
        assert_eq!(c.rows[2][2..5], ["halted", "sh (pid 4711)", "1"]);
        assert_eq!(c.rows.len(), 3);
    }

    #[test]
    fn percentages_keep_the_tail_digits() {
        assert_eq!(percent(99.99997), "99.99997%");
        assert_eq!(percent(100.0), "100%");
        assert_eq!(percent(50.0), "50.00%");
    }
}
