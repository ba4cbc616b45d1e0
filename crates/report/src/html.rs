//! report.html: one self-contained page (inline SVG and CSS, no scripts, no
//! network) with the table, the verdict and both plots.

use crate::model::{fmt_ratio, human_ns, CompareReport};
use std::fmt::Write;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A latency in a cell, or `-` when absent.
fn cell_ns(ns: Option<u64>) -> String {
    ns.map(human_ns).unwrap_or_else(|| "-".into())
}

/// Renders the page; the SVGs are embedded as they are. It shows everything
/// the terminal table shows (verdict, notes, warnings, idle policy, the
/// guest/outside split and the cause tables), each in a section with an id.
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
        let load = if s.load.is_empty() {
            "-".to_string()
        } else {
            format!(
                "{:.0}",
                s.load.iter().map(|o| o.ops_per_s).sum::<f64>().max(0.0)
            )
        };
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><b>{}</b></td><td>{}</td>{det}<td>{load}</td><td>{:.0}</td></tr>",
            escape(&s.name),
            escape(&s.measured_cpus),
            l.samples,
            l.missed,
            human_ns(l.min_ns),
            human_ns(l.p99_ns),
            human_ns(l.p99999_ns),
            human_ns(l.max_ns),
            cell_ns(s.anchor.as_ref().map(|a| a.max_ns)),
            s.irqs_per_s
        );
    }
    let v = &report.verdict;
    let verdict_class = if v.pass { "pass" } else { "fail" };
    let mut verdict_extra = String::new();
    let _ = write!(
        verdict_extra,
        "<p>Raw: loaded max / shielded max = {}; shielded max / idle max = {}; shielded jitter / loaded jitter = {}.",
        fmt_ratio(v.loaded_over_shielded),
        fmt_ratio(v.shielded_over_idle),
        fmt_ratio(v.jitter_shielded_over_loaded)
    );
    if let Some(g) = v.guest_loaded_over_shielded {
        let _ = write!(
            verdict_extra,
            " Caused inside the guest: loaded worst / shielded worst = {g:.1}; jitter ratio {}.",
            fmt_ratio(v.guest_jitter_shielded_over_loaded)
        );
    }
    if let Some(a) = v.anchor_loaded_over_shielded {
        let _ = write!(
            verdict_extra,
            " cyclictest anchor: loaded / shielded = {a:.1} ({}).",
            match v.anchor_agrees {
                Some(false) => "the verdict DISAGREES with it",
                _ => "the verdict agrees",
            }
        );
    }
    verdict_extra.push_str("</p>\n");
    if !v.remaining.is_empty() {
        verdict_extra.push_str("<p>Still reaching the shield:</p><ul>");
        for r in &v.remaining {
            let _ = write!(verdict_extra, "<li>{}</li>", escape(r));
        }
        verdict_extra.push_str("</ul>\n");
    }
    let mut notes = String::new();
    for n in &v.notes {
        let _ = writeln!(notes, "<li>{}</li>", escape(n));
    }
    for s in &report.scenarios {
        for n in &s.notes {
            let _ = writeln!(notes, "<li>{}: {}</li>", escape(&s.name), escape(n));
        }
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!("<section id=\"notes\"><h2>Notes</h2><ul>\n{notes}</ul></section>\n")
    };
    let mut warnings = String::new();
    for s in &report.scenarios {
        for w in &s.warnings {
            let _ = writeln!(warnings, "<li>{}: {}</li>", escape(&s.name), escape(w));
        }
    }
    let warnings = if warnings.is_empty() {
        String::new()
    } else {
        format!("<section id=\"warnings\"><h2>Warnings</h2><ul>\n{warnings}</ul></section>\n")
    };
    let mut idle = String::new();
    for s in &report.scenarios {
        if let Some(i) = &s.idle {
            let _ = writeln!(
                idle,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td style=\"text-align:left\">{}</td></tr>",
                escape(&s.name),
                escape(&i.policy),
                escape(&i.how),
                cell_ns(i.halt_max_ns),
                cell_ns(i.poll_max_ns),
                escape(&i.reason)
            );
        }
    }
    let idle = if idle.is_empty() {
        String::new()
    } else {
        format!(
            "<section id=\"idle-policy\"><h2>Idle policy ({})</h2><table><tr><th>scenario</th><th>policy</th><th>how</th><th>halting max</th><th>polling max</th><th>why</th></tr>\n{idle}</table></section>\n",
            escape(&report.idle_mode)
        )
    };
    let mut split = String::new();
    let mut causes = String::new();
    for s in &report.scenarios {
        let Some(a) = &s.attribution else { continue };
        let (raw_j, guest_j) = s.jitter_cells();
        let _ = writeln!(
            split,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{raw_j}</td><td>{guest_j}</td></tr>",
            escape(&s.name),
            human_ns(a.threshold_ns),
            a.samples_above,
            a.named_pct(),
            human_ns(a.guest_worst_ns),
            human_ns(a.outside_worst_ns),
            human_ns(a.outside_ns),
            human_ns(a.steal_ns),
            cell_ns(a.kernel_latency_max_ns),
            cell_ns(a.user_latency_max_ns),
        );
        if a.causes.is_empty() {
            continue;
        }
        let _ = writeln!(
            causes,
            "<h3>{}</h3><table><tr><th>kind</th><th>side</th><th>samples</th><th>total</th><th>worst</th><th>cause</th><th>fix</th></tr>",
            escape(&s.name)
        );
        for c in &a.causes {
            let _ = writeln!(
                causes,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td style=\"text-align:left\">{}</td><td style=\"text-align:left\">{}</td></tr>",
                escape(&c.kind),
                if c.guest { "guest" } else { "outside" },
                c.count,
                human_ns(c.total_ns),
                human_ns(c.worst_ns),
                escape(&c.name),
                c.fix.as_deref().map(escape).unwrap_or_else(|| "-".into())
            );
        }
        causes.push_str("</table>\n");
    }
    let split = if split.is_empty() {
        String::new()
    } else {
        format!(
            "<section id=\"guest-host\"><h2>Guest vs outside the guest</h2><p>Every sample above the threshold explained from a kernel trace of the measured CPUs: the worst latency caused inside the guest (what the shield controls) beside the time the vCPU did not run (the host's steal, firmware). Kernel latency is interrupt entry − intended, user latency task running − intended (as the Hyades paper's Table 2).</p><table><tr><th>scenario</th><th>threshold</th><th>samples above</th><th>named</th><th>guest worst</th><th>outside max</th><th>outside total</th><th>steal</th><th>kernel max</th><th>user max</th><th>jitter %</th><th>in-guest %</th></tr>\n{split}</table></section>\n<section id=\"causes\"><h2>Causes above the threshold</h2>\n{causes}</section>\n"
        )
    };
    let mut findings = String::new();
    for s in &report.scenarios {
        for f in &s.findings {
            let _ = writeln!(
                findings,
                "<li>{} [{}]: {}{}</li>",
                escape(&s.name),
                escape(&f.severity),
                escape(&f.title),
                f.remedies
                    .first()
                    .map(|r| format!(" — fix: {}", escape(r)))
                    .unwrap_or_default()
            );
        }
    }
    let findings = if findings.is_empty() {
        String::new()
    } else {
        format!("<section id=\"findings\"><h2>What check found on the shielded CPUs</h2><ul>\n{findings}</ul></section>\n")
    };
    let sharing = if report.sharing.is_some() {
        format!(
            "<section id=\"sharing\"><h2>Sharing the shielded CPU's idle time</h2><pre>{}</pre></section>\n",
            escape(crate::sharing::render(report).trim())
        )
    } else {
        String::new()
    };
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
<section id="verdict"><p class="{verdict_class}">{verdict}</p>
{verdict_extra}</section>
{notes}<section id="scenarios"><table><tr><th>scenario</th><th>CPUs</th><th>samples</th><th>missed</th><th>min</th><th>p99</th><th>p99.999</th><th>max</th><th>cyclictest max</th><th>det. ideal</th><th>det. max</th><th>jitter</th><th>load ops/s</th><th>IRQ/s</th></tr>
{rows}</table></section>
{idle}{split}{findings}{sharing}{warnings}<figure>{latency_svg}<figcaption>Wakeup latency histograms, log-scale counts (as Brosky &amp; Rotolo's Figures 5-7).</figcaption></figure>
<figure>{determinism_svg}<figcaption>Execution determinism: each run's time over the ideal (as Brosky &amp; Rotolo's Figures 1-4).</figcaption></figure>
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
        verdict = escape(&v.line),
    )
}
