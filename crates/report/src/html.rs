//! report.html: one self-contained page (inline SVG and CSS, no scripts, no
//! network) with the table, the verdict and both plots.

use crate::model::{human_ns, CompareReport};
use std::fmt::Write;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders the page; the SVGs are embedded as they are.
pub fn render(report: &CompareReport, latency_svg: &str, determinism_svg: &str) -> String {
    let mut rows = String::new();
    for s in &report.scenarios {
        let l = &s.latency;
        let det = s
            .determinism
            .as_ref()
            .map(|d| {
                format!(
                    "<td>{:.4} s</td><td>{:.4} s</td><td>{:.2}%</td>",
                    d.ideal_s, d.max_s, d.jitter_pct
                )
            })
            .unwrap_or_else(|| "<td>-</td><td>-</td><td>-</td>".into());
        let load: f64 = s.load.iter().map(|o| o.ops_per_s).sum();
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><b>{}</b></td>{det}<td>{:.0}</td><td>{:.0}</td></tr>",
            escape(&s.name),
            escape(&s.measured_cpus),
            l.samples,
            l.missed,
            human_ns(l.min_ns),
            human_ns(l.p99_ns),
            human_ns(l.p99999_ns),
            human_ns(l.max_ns),
            load,
            s.irqs_per_s
        );
    }
    let verdict_class = if report.verdict.pass { "pass" } else { "fail" };
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>cpushield compare report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; background: #fff; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #bbb; padding: 4px 8px; text-align: right; }}
th {{ background: #e8eef7; }} td:first-child {{ text-align: left; }}
.pass {{ background: #d9f2d9; padding: 0.6em; }} .fail {{ background: #f7dada; padding: 0.6em; }}
figure {{ margin: 1em 0; }}
</style></head><body>
<h1>cpushield compare</h1>
<p>{created} — {host}; scope <b>{scope}</b>; load <b>{load}</b>; {dur:.0} s per scenario; probe interval {interval}{poll}.</p>
<p class="{verdict_class}">{verdict}</p>
{notes}<table><tr><th>scenario</th><th>CPUs</th><th>samples</th><th>missed</th><th>min</th><th>p99</th><th>p99.999</th><th>max</th><th>det. ideal</th><th>det. max</th><th>jitter</th><th>load ops/s</th><th>IRQ/s</th></tr>
{rows}</table>
<figure>{latency_svg}<figcaption>Wakeup latency histograms, log-scale counts (as seed 000 Figures 5-7).</figcaption></figure>
<figure>{determinism_svg}<figcaption>Execution determinism: each run's time over the ideal (as seed 000 Figures 1-4).</figcaption></figure>
</body></html>
"#,
        created = escape(&report.created),
        host = escape(&report.host),
        scope = escape(&report.scope),
        load = escape(&report.load_profile),
        dur = report.duration_s,
        poll = if report.idle_poll {
            "; idle CPUs kept polling in every scenario"
        } else {
            ""
        },
        interval = human_ns(report.interval_ns),
        verdict = escape(&report.verdict.line),
        notes = report
            .verdict
            .notes
            .iter()
            .map(|n| format!("<p>Note: {}</p>\n", escape(n)))
            .collect::<String>(),
    )
}
