//! The terminal text of a compare run: the answer first, in at most
//! [`ANSWER_LINES`] lines ([`answer`]), then, for `--verbose`, the details in
//! the papers' terms ([`details`]). Prose wraps at the width given (the
//! terminal's); table rows do not, except their last, free-text column.

use crate::answer::Answer;
use crate::cells::{self, Cells};
use crate::model::{fmt_ratio, CompareReport};
use cpushield_cpuset::fmt_ns;
use std::fmt::Write;

/// Lines a compare or demo prints before its `report:` line, at most.
pub const ANSWER_LINES: usize = 15;

/// `text` wrapped at `width` (not at all without one), the first line
/// starting with `first`, the others with `rest`.
pub fn wrap(text: &str, width: Option<usize>, first: &str, rest: &str) -> Vec<String> {
    match width {
        None => vec![format!("{first}{text}")],
        Some(width) => textwrap::wrap(
            text,
            // Never at a hyphen: commands (`--procs`, `per-CPU`) stay whole.
            textwrap::Options::new(width)
                .initial_indent(first)
                .subsequent_indent(rest)
                .word_splitter(textwrap::WordSplitter::NoHyphenation),
        )
        .into_iter()
        .map(|line| line.into_owned())
        .collect(),
    }
}

/// The answer: the verdict, the worst cases loaded and shielded with their
/// ratios, why the raw ratio differs when it does, the sharing line, what
/// still reaches the shielded CPUs with its fix. With `budget`, it fits in
/// that many lines and ends with a line saying where the rest is (what does
/// not fit is left out: the end of a long verdict, the remaining causes
/// beyond the first, the sharing line); without, it is whole and has no
/// such line (the details follow it).
pub fn answer(report: &CompareReport, width: Option<usize>, budget: Option<usize>) -> String {
    let a = report.answer();
    let verdict = wrap(a.verdict, width, "", "  ");
    let worst = worst_lines(&a, width);
    let sharing = a
        .sharing
        .map(|line| wrap(line, width, "", "  "))
        .unwrap_or_default();
    let reason = a
        .raw_differs
        .as_deref()
        .map(|r| wrap(r, width, "  ", "  "))
        .unwrap_or_default();
    let Some(budget) = budget else {
        let remaining = all_remaining(&a, width);
        let lines = [verdict, worst, reason, remaining, sharing].concat();
        return lines.iter().map(|l| format!("{l}\n")).collect();
    };
    let pointer = wrap(&pointer(report), width, "", "  ");
    let mut left = budget.saturating_sub(worst.len() + pointer.len());
    // Room kept for why raw differs and what still reaches the CPUs (all
    // of it when short, else its header, its first cause and the line that
    // counts the others): the end of a long verdict gives way to them.
    let reserve = {
        let whole = all_remaining(&a, width);
        let first = a
            .remaining
            .first()
            .map(|r| wrap(r, width, "  ", "    ").len())
            .unwrap_or(0);
        whole.len().min(first + 2) + reason.len()
    };
    let mut verdict = verdict;
    let room = left.saturating_sub(reserve).max(2);
    if verdict.len() > room {
        // The whole verdict is in the details and in report.html.
        verdict.truncate(room - 1);
        verdict.push("  … (the whole verdict: --verbose, or report.html)".into());
    }
    left = left.saturating_sub(verdict.len());
    let reason = take_if_fits(reason, &mut left);
    let remaining = fit_remaining(&a, width, &mut left);
    let sharing = take_if_fits(sharing, &mut left);
    let lines = [verdict, worst, reason, remaining, sharing, pointer].concat();
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn take_if_fits(lines: Vec<String>, left: &mut usize) -> Vec<String> {
    if lines.len() <= *left {
        *left -= lines.len();
        lines
    } else {
        Vec::new()
    }
}

/// What still reaches the shielded CPUs, every cause.
fn all_remaining(a: &Answer, width: Option<usize>) -> Vec<String> {
    let mut unlimited = usize::MAX;
    fit_remaining(a, width, &mut unlimited)
}

/// What still reaches the shielded CPUs, with each fix, in at most `left`
/// lines: one cause on the header's line, several under it; when they do
/// not all fit, those that do and a line saying how many more there are.
fn fit_remaining(a: &Answer, width: Option<usize>, left: &mut usize) -> Vec<String> {
    let head = format!("still reaching CPU {}:", a.cpus);
    let whole = match a.remaining {
        [] if !a.remaining_searched => Vec::new(),
        [] => wrap(
            &format!("{head} nothing the trace or check named"),
            width,
            "",
            "  ",
        ),
        [one] => wrap(&format!("{head} {one}"), width, "", "  "),
        many => std::iter::once(head.clone())
            .chain(many.iter().flat_map(|r| wrap(r, width, "  ", "    ")))
            .collect(),
    };
    let out = if whole.len() <= *left {
        whole
    } else if *left >= 3 {
        // The header, what fits, and one line for the rest.
        let mut out = vec![head];
        let mut shown = 0;
        for r in a.remaining {
            let entry = wrap(r, width, "  ", "    ");
            if out.len() + entry.len() + 1 > *left {
                break;
            }
            out.extend(entry);
            shown += 1;
        }
        out.push(format!(
            "  … and {} more: --verbose, or report.html",
            a.remaining.len() - shown
        ));
        out
    } else {
        let short = wrap(
            &format!(
                "{head} {}: --verbose, or report.html",
                plural(a.remaining.len(), "cause")
            ),
            width,
            "",
            "  ",
        );
        if short.len() <= *left {
            short
        } else {
            Vec::new()
        }
    };
    *left -= out.len();
    out
}

/// The worst cases loaded and shielded, one unit per column; or each
/// scenario's worst case when there is no pair to compare.
fn worst_lines(a: &Answer, width: Option<usize>) -> Vec<String> {
    if let Some(line) = &a.scenario_worst {
        return wrap(line, width, "", "  ");
    }
    grid(&cells::worst_cases(a), width)
}

/// The last line of a budgeted answer: where the rest is.
fn pointer(report: &CompareReport) -> String {
    let notes = report.verdict.notes.len()
        + report
            .scenarios
            .iter()
            .map(|s| s.notes.len())
            .sum::<usize>();
    let warnings = report.warnings_once().len();
    let mut what = vec!["tables".to_string(), "causes".to_string()];
    if notes > 0 {
        what.push(plural(notes, "note"));
    }
    if warnings > 0 {
        what.push(plural(warnings, "warning"));
    }
    format!("more: --verbose, or report.html ({})", what.join(", "))
}

fn plural(n: usize, word: &str) -> String {
    format!("{n} {word}{}", if n == 1 { "" } else { "s" })
}

/// The fewest columns a free-text column is wrapped into beside its row;
/// with fewer, it goes under the row.
const FREE_TEXT_MIN: usize = 40;

/// A table's lines: columns aligned under their headers (a second header
/// line names the units, when any column has one), words to the left,
/// figures to the right; a last column of words is wrapped under itself.
fn grid(cells: &Cells, width: Option<usize>) -> Vec<String> {
    if cells.is_empty() {
        return Vec::new();
    }
    let columns = cells.header.len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            [&cells.header[c], &cells.units[c]]
                .into_iter()
                .chain(cells.rows.iter().map(|r| &r[c]))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let free = columns - 1;
    let free_is_text = cells.text.contains(&free);
    let longest_free = cells
        .rows
        .iter()
        .map(|r| r[free].chars().count())
        .max()
        .unwrap_or(0);
    let line = |row: &[String], header: bool| -> Vec<String> {
        let mut fixed = String::new();
        let fixed_columns = if free_is_text { free } else { columns };
        for (c, cell) in row.iter().enumerate().take(fixed_columns) {
            if c > 0 {
                fixed.push_str("  ");
            }
            if cells.text.contains(&c) {
                let _ = write!(fixed, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(fixed, "{cell:>w$}", w = widths[c]);
            }
        }
        if !free_is_text || row[free].is_empty() {
            return vec![fixed.trim_end().to_string()];
        }
        let beside = fixed.chars().count() + 2;
        match width {
            // Too narrow beside the figures: under the row, across the width.
            Some(w) if w < beside + FREE_TEXT_MIN && w < beside + longest_free => {
                let mut out = vec![fixed.trim_end().to_string()];
                if !header {
                    out.extend(wrap(&row[free], Some(w), "    ", "    "));
                }
                out
            }
            _ => wrap(
                &row[free],
                width,
                &format!("{fixed}  "),
                &" ".repeat(beside),
            ),
        }
    };
    let mut out = line(&cells.header, true);
    if cells.units.iter().any(|u| !u.is_empty()) {
        out.extend(line(&cells.units, true));
    }
    for r in &cells.rows {
        out.extend(line(r, false));
    }
    out
}

/// Everything the answer leaves out, in the papers' terms: the scenario
/// table, the idle calibration, the guest/outside split and the causes, the
/// samples below each threshold, the load carried, the raw ratios, the
/// sharing table, the notes and the warnings (each once).
pub fn details(report: &CompareReport, width: Option<usize>) -> String {
    let mut lines: Vec<String> = Vec::new();
    lines.extend(wrap(
        &format!(
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
        ),
        width,
        "",
        "  ",
    ));
    lines.extend(grid(&cells::latency(report), width));
    lines.push(String::new());
    lines.extend(wrap(
        "execution determinism (Brosky & Rotolo Figures 1-4; ideal: the experiment's fastest run):",
        width,
        "",
        "  ",
    ));
    lines.extend(grid(&cells::determinism(report), width));
    idle_lines(&mut lines, report, width);
    split_lines(&mut lines, report, width);
    lines.push(String::new());
    lines.push("samples below each threshold (Brosky & Rotolo §6.2):".into());
    lines.extend(grid(&cells::thresholds(report), width));
    if let Some(load) = load_carried(report) {
        lines.push(String::new());
        lines.extend(wrap(&load, width, "", "  "));
    }
    lines.push(String::new());
    for r in ratio_lines(report) {
        lines.extend(wrap(&r, width, "", "  "));
    }
    let sharing = crate::sharing::render(report);
    if !sharing.is_empty() {
        lines.extend(sharing.lines().map(str::to_string));
    }
    let notes = notes_and_warnings(report);
    if !notes.is_empty() {
        lines.push(String::new());
    }
    for n in &notes {
        lines.extend(wrap(n, width, "", "  "));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// The operations per second each loaded scenario's load carried, summed over
/// its workloads; None when no scenario ran a load.
fn load_carried(report: &CompareReport) -> Option<String> {
    let loads: Vec<String> = report
        .scenarios
        .iter()
        .filter(|s| !s.load.is_empty())
        .map(|s| {
            let total: f64 = s.load.iter().map(|l| l.ops_per_s).sum();
            format!("{} {:.0} ops/s", s.name, total)
        })
        .collect();
    (!loads.is_empty()).then(|| format!("load carried: {}", loads.join(", ")))
}

/// The raw ratios, then the ones caused inside the guest when the run was
/// traced.
fn ratio_lines(report: &CompareReport) -> Vec<String> {
    let v = &report.verdict;
    let mut lines = vec![format!(
        "raw: loaded max / shielded max = {}, shielded max / idle max = {}, shielded jitter / loaded jitter = {}",
        fmt_ratio(v.loaded_over_shielded),
        fmt_ratio(v.shielded_over_idle),
        fmt_ratio(v.jitter_shielded_over_loaded)
    )];
    if let Some(g) = v.guest_loaded_over_shielded {
        lines.push(format!(
            "caused inside the guest: loaded worst / shielded worst = {g:.1}, shielded jitter / loaded jitter = {}",
            fmt_ratio(v.guest_jitter_shielded_over_loaded)
        ));
    }
    lines
}

/// The verdict's notes, each scenario's notes named by the scenario, then
/// each warning once (named by its scenarios unless its text names them).
fn notes_and_warnings(report: &CompareReport) -> Vec<String> {
    let mut notes: Vec<String> = report
        .verdict
        .notes
        .iter()
        .map(|n| format!("note: {n}"))
        .collect();
    for s in &report.scenarios {
        notes.extend(s.notes.iter().map(|n| format!("note ({}): {n}", s.name)));
    }
    notes.extend(report.warnings_once().into_iter().map(|w| {
        if w.scenarios_in_text {
            format!("warning: {}", w.text)
        } else {
            format!("warning ({}): {}", w.scenarios.join(", "), w.text)
        }
    }));
    notes
}

/// The terminal text with everything: the answer, then the details.
pub fn render(report: &CompareReport, width: Option<usize>) -> String {
    format!(
        "{}\n{}",
        answer(report, width, None),
        details(report, width)
    )
}

/// How each scenario's CPUs idled, and why.
fn idle_lines(lines: &mut Vec<String>, report: &CompareReport, width: Option<usize>) {
    if report.scenarios.iter().all(|s| s.idle.is_none()) {
        return;
    }
    lines.push(String::new());
    lines.push(format!("idle policy: {}", report.idle_mode));
    lines.extend(grid(&cells::idle(report), width));
}

/// Each scenario's samples above the threshold split into guest causes and
/// time outside the guest, then the largest causes.
fn split_lines(lines: &mut Vec<String>, report: &CompareReport, width: Option<usize>) {
    let traced: Vec<_> = report
        .scenarios
        .iter()
        .filter_map(|s| s.attribution.as_ref().map(|a| (s, a)))
        .collect();
    let Some((_, first)) = traced.first() else {
        return;
    };
    lines.push(String::new());
    lines.extend(wrap(
        &format!(
            "guest vs outside: every sample above {} explained from a kernel trace of the measured CPUs",
            fmt_ns(first.threshold_ns)
        ),
        width,
        "",
        "  ",
    ));
    lines.extend(grid(&cells::split(report), width));
    for (s, a) in &traced {
        if a.causes.is_empty() {
            continue;
        }
        let shown = &a.causes[..a.causes.len().min(CAUSES_SHOWN)];
        lines.push(format!("causes above the threshold, {}:", s.name));
        lines.extend(
            grid(&cells::causes(shown, false), width)
                .into_iter()
                .map(|l| format!("  {l}")),
        );
        if a.causes.len() > CAUSES_SHOWN {
            lines.push(format!(
                "  ... {} more in report.html and report.json",
                a.causes.len() - CAUSES_SHOWN
            ));
        }
        if !a.host_causes.is_empty() {
            lines.push(format!("what the host saw, {}:", s.name));
            lines.extend(
                grid(
                    &cells::host_causes(&a.outside_samples, &a.host_causes),
                    width,
                )
                .into_iter()
                .map(|l| format!("  {l}")),
            );
        }
    }
}

/// Causes listed per scenario in the terminal (all are in report.json and report.html).
const CAUSES_SHOWN: usize = 6;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{LoadOps, ScenarioResult};

    fn scenario(name: &str) -> ScenarioResult {
        ScenarioResult {
            name: name.into(),
            ..ScenarioResult::default()
        }
    }

    #[test]
    fn the_load_carried_sums_each_loaded_scenarios_workloads() {
        let mut loaded = scenario("loaded");
        loaded.load = vec![
            LoadOps {
                workload: "sock".into(),
                ops: 10,
                ops_per_s: 1_000.4,
            },
            LoadOps {
                workload: "fifo".into(),
                ops: 10,
                ops_per_s: 500.0,
            },
        ];
        let mut report = CompareReport {
            scenarios: vec![scenario("idle"), loaded],
            ..CompareReport::default()
        };
        assert_eq!(
            load_carried(&report).as_deref(),
            Some("load carried: loaded 1500 ops/s")
        );
        report.scenarios.truncate(1);
        assert_eq!(load_carried(&report), None, "no load, no line");
    }

    #[test]
    fn the_guest_ratios_follow_the_raw_ones_only_when_traced() {
        let mut report = CompareReport::default();
        report.verdict.loaded_over_shielded = Some(44.1);
        let raw = ratio_lines(&report);
        assert_eq!(raw.len(), 1);
        assert!(
            raw[0].starts_with(
                "raw: loaded max / shielded max = 44.1, shielded max / idle max = n/a"
            ),
            "{}",
            raw[0]
        );
        report.verdict.guest_loaded_over_shielded = Some(40.9);
        let traced = ratio_lines(&report);
        assert_eq!(traced.len(), 2);
        assert!(
            traced[1].starts_with("caused inside the guest: loaded worst / shielded worst = 40.9"),
            "{}",
            traced[1]
        );
    }

    #[test]
    fn notes_come_before_warnings_and_name_their_scenario() {
        let mut shielded = scenario("shielded");
        shielded.notes = vec!["probe moved".into()];
        shielded.warnings = vec!["the tick ran".into()];
        let mut report = CompareReport {
            scenarios: vec![shielded],
            ..CompareReport::default()
        };
        report.verdict.notes = vec!["cyclictest agrees".into()];
        assert_eq!(
            notes_and_warnings(&report),
            [
                "note: cyclictest agrees",
                "note (shielded): probe moved",
                "warning (shielded): the tick ran"
            ]
        );
    }
}
