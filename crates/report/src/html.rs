//! report.html: one self-contained page (inline SVG and CSS, no scripts, no
//! network) in the order a reader needs it: the answer (as the terminal
//! leads with it), then the papers' pictures, then the notes and warnings,
//! then every table the terminal's `--verbose` prints, with the whole cause
//! lists and check's findings besides.

use crate::answer::Answer;
use crate::cells::{self, Cells};
use crate::model::{fmt_ratio, CompareReport};
use cpushield_cpuset::fmt_ns;
use std::fmt::Write;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Escaped, with every word that holds a hyphen kept on one line: a
/// browser would break `--procs` after its dashes.
fn escape_words(text: &str) -> String {
    text.split(' ')
        .map(|word| {
            if word.len() > 1 && word.contains('-') {
                format!("<span class=\"nw\">{}</span>", escape(word))
            } else {
                escape(word)
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A table of cells: headers with their units, words to the left.
fn table(cells: &Cells) -> String {
    let class = |c: usize| {
        if cells.text.contains(&c) {
            " class=\"text\""
        } else {
            ""
        }
    };
    let mut out = String::from("<table><tr>");
    for c in 0..cells.header.len() {
        let _ = write!(
            out,
            "<th{}>{}</th>",
            class(c),
            escape(&cells.header_with_unit(c))
        );
    }
    out.push_str("</tr>\n");
    for r in &cells.rows {
        out.push_str("<tr>");
        for (c, cell) in r.iter().enumerate() {
            let _ = write!(out, "<td{}>{}</td>", class(c), escape_words(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

/// Renders the page; the SVGs are embedded as they are.
pub fn render(report: &CompareReport, latency_svg: &str, determinism_svg: &str) -> String {
    let answer = report.answer();
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<h1>cpushield compare</h1>\n<p>{} — {}; scope <b>{}</b>; load <b>{}</b>; {:.0} s per scenario; probe interval {}{}.</p>",
        escape(&report.created),
        escape(&report.host),
        escape(&report.scope),
        escape(&report.load_profile),
        report.duration_s,
        fmt_ns(report.interval_ns),
        if report.idle_poll {
            "; idle CPUs kept polling in every scenario"
        } else {
            ""
        }
    );
    body.push_str(&verdict_section(&answer));
    let _ = writeln!(
        body,
        "<section id=\"plots\"><h2>The papers' pictures</h2>\n<figure id=\"latency-plot\">{latency_svg}<figcaption>Wakeup latency histogram of each scenario, log-log: samples per latency bucket (as Brosky &amp; Rotolo's Figures 5-7); a wakeup on time (0 ns, as an advanced one can be) is drawn at 0.1 us.</figcaption></figure>\n<figure id=\"determinism-plot\">{determinism_svg}<figcaption>Execution determinism: each run's time over the ideal, the experiment's fastest run (as Brosky &amp; Rotolo's Figures 1-4).</figcaption></figure></section>"
    );
    body.push_str(&notes_sections(report));
    body.push_str(&scenario_section(report));
    body.push_str(&threshold_section(report));
    body.push_str(&idle_section(report));
    body.push_str(&split_sections(report));
    body.push_str(&findings_section(report));
    if report.sharing.is_some() {
        let _ = writeln!(
            body,
            "<section id=\"sharing\"><h2>Sharing the shielded CPU's idle time</h2><pre>{}</pre></section>",
            escape(crate::sharing::render(report).trim())
        );
    }
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>cpushield compare report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; background: #fff; max-width: 80em; }}
table {{ border-collapse: collapse; margin: 1em 0; font-variant-numeric: tabular-nums; }}
th, td {{ border: 1px solid #bbb; padding: 4px 8px; text-align: right; vertical-align: top; }}
th {{ background: #e8eef7; }} td:first-child, th:first-child, .text {{ text-align: left; }}
.pass {{ background: #d9f2d9; padding: 0.6em; font-size: 1.1em; }} .fail {{ background: #f7dada; padding: 0.6em; font-size: 1.1em; }}
figure {{ margin: 1em 0; }} figcaption {{ color: #555; }} .nw {{ white-space: nowrap; }}
</style></head><body>
{body}</body></html>
"#
    )
}

/// The answer, as the terminal leads with it.
fn verdict_section(a: &Answer) -> String {
    let mut out = format!(
        "<section id=\"verdict\"><p class=\"{}\">{}</p>\n",
        if a.pass { "pass" } else { "fail" },
        escape_words(a.verdict)
    );
    if !a.worst_cases.is_empty() {
        out.push_str(&table(&cells::worst_cases(a)));
    } else if let Some(line) = &a.scenario_worst {
        let _ = writeln!(out, "<p>{}</p>", escape_words(line));
    }
    if let Some(r) = &a.raw_differs {
        let _ = writeln!(out, "<p>{}</p>", escape_words(r));
    }
    match a.remaining {
        [] if !a.remaining_searched => {}
        [] => {
            let _ = writeln!(
                out,
                "<p>Still reaching CPU {}: nothing the trace or check named.</p>",
                escape(a.cpus)
            );
        }
        many => {
            let _ = write!(out, "<p>Still reaching CPU {}:</p><ul>", escape(a.cpus));
            for r in many {
                let _ = write!(out, "<li>{}</li>", escape_words(r));
            }
            out.push_str("</ul>\n");
        }
    }
    if let Some(line) = a.sharing {
        let _ = writeln!(out, "<p>{}</p>", escape_words(line));
    }
    out.push_str("</section>\n");
    out
}

/// The notes on the verdict and the scenarios, and the warnings, each once.
fn notes_sections(report: &CompareReport) -> String {
    let mut notes = String::new();
    for n in &report.verdict.notes {
        let _ = writeln!(notes, "<li>{}</li>", escape_words(n));
    }
    for s in &report.scenarios {
        for n in &s.notes {
            let _ = writeln!(notes, "<li>{}: {}</li>", escape(&s.name), escape_words(n));
        }
    }
    let mut warnings = String::new();
    for w in report.warnings_once() {
        if w.scenarios_in_text {
            let _ = writeln!(warnings, "<li>{}</li>", escape_words(&w.text));
        } else {
            let _ = writeln!(
                warnings,
                "<li>{}: {}</li>",
                escape(&w.scenarios.join(", ")),
                escape_words(&w.text)
            );
        }
    }
    let mut out = String::new();
    if !notes.is_empty() {
        let _ = writeln!(
            out,
            "<section id=\"notes\"><h2>Notes</h2><ul>\n{notes}</ul></section>"
        );
    }
    if !warnings.is_empty() {
        let _ = writeln!(
            out,
            "<section id=\"warnings\"><h2>Warnings</h2><ul>\n{warnings}</ul></section>"
        );
    }
    out
}

/// Latency and determinism per scenario, and the raw ratios.
fn scenario_section(report: &CompareReport) -> String {
    let v = &report.verdict;
    let mut ratios = format!(
        "Raw: loaded max / shielded max = {}; shielded max / idle max = {}; shielded jitter / loaded jitter = {}.",
        fmt_ratio(v.loaded_over_shielded),
        fmt_ratio(v.shielded_over_idle),
        fmt_ratio(v.jitter_shielded_over_loaded)
    );
    if let Some(g) = v.guest_loaded_over_shielded {
        let _ = write!(
            ratios,
            " Caused inside the guest: loaded worst / shielded worst = {g:.1}; shielded jitter / loaded jitter = {}.",
            fmt_ratio(v.guest_jitter_shielded_over_loaded)
        );
    }
    format!(
        "<section id=\"scenarios\"><h2>Scenarios</h2><h3>Wakeup latency</h3>{}<h3>Execution determinism (Brosky &amp; Rotolo's Figures 1-4; ideal: the experiment's fastest run)</h3>{}<p>{ratios}</p></section>\n",
        table(&cells::latency(report)),
        table(&cells::determinism(report))
    )
}

/// Samples below each of Brosky & Rotolo's thresholds.
fn threshold_section(report: &CompareReport) -> String {
    format!(
        "<section id=\"thresholds\"><h2>Samples below each threshold (Brosky &amp; Rotolo §6.2)</h2>{}</section>\n",
        table(&cells::thresholds(report))
    )
}

/// How each scenario's CPUs idled, and why.
fn idle_section(report: &CompareReport) -> String {
    let cells = cells::idle(report);
    if cells.is_empty() {
        return String::new();
    }
    format!(
        "<section id=\"idle-policy\"><h2>Idle policy: {}</h2>{}</section>\n",
        escape(&report.idle_mode),
        table(&cells)
    )
}

/// The guest/outside split per scenario, then every cause of each.
fn split_sections(report: &CompareReport) -> String {
    let split = cells::split(report);
    if split.is_empty() {
        return String::new();
    }
    let mut causes = String::new();
    for s in &report.scenarios {
        let Some(a) = &s.attribution else { continue };
        if !a.causes.is_empty() {
            let _ = writeln!(
                causes,
                "<h3>{}</h3>{}",
                escape(&s.name),
                table(&cells::causes(&a.causes, true))
            );
        }
        if !a.host_causes.is_empty() {
            let _ = writeln!(
                causes,
                "<h3>{}: what the host saw</h3><p>The samples that lost the most time outside the guest, as the host side (<code>cpushield vm watch</code>) saw their vCPU: every host time is uncertain by the clock error beside it.</p>{}<ul>{}</ul>",
                escape(&s.name),
                table(&cells::host_causes(&a.outside_samples, &a.host_causes)),
                a.host_causes
                    .iter()
                    .map(|c| format!("<li>{}</li>", escape_words(&c.line)))
                    .collect::<String>()
            );
        }
    }
    let threshold = report
        .scenarios
        .iter()
        .find_map(|s| s.attribution.as_ref())
        .map(|a| fmt_ns(a.threshold_ns))
        .unwrap_or_default();
    format!(
        "<section id=\"guest-host\"><h2>Guest vs outside the guest</h2><p>Every sample above {threshold} explained from a kernel trace of the measured CPUs: the worst latency caused inside the guest (what the shield controls) beside the time the vCPU did not run (the host's steal, firmware). Kernel latency is interrupt entry − intended, user latency task running − intended (as the Hyades paper's Table 2).</p>{}</section>\n<section id=\"causes\"><h2>Causes above the threshold</h2>\n{causes}</section>\n",
        table(&split)
    )
}

/// What check found on the shielded CPUs while the probes ran.
fn findings_section(report: &CompareReport) -> String {
    let mut findings = String::new();
    for s in &report.scenarios {
        for f in &s.findings {
            let _ = writeln!(
                findings,
                "<li>{} [{}]: {}{}</li>",
                escape(&s.name),
                escape(&f.severity),
                escape_words(&f.title),
                f.remedies
                    .first()
                    .map(|r| format!(" — fix: {}", escape_words(r)))
                    .unwrap_or_default()
            );
        }
    }
    if findings.is_empty() {
        return String::new();
    }
    format!("<section id=\"findings\"><h2>What check found on the shielded CPUs</h2><ul>\n{findings}</ul></section>\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_with_hyphens_are_kept_whole_and_everything_is_escaped() {
        assert_eq!(
            escape_words("fix: cpushield shield --procs 1 <now> - tokio-rt-worker"),
            "fix: cpushield shield <span class=\"nw\">--procs</span> 1 &lt;now&gt; - <span class=\"nw\">tokio-rt-worker</span>"
        );
    }
}
