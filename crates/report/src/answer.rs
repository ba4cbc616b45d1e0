//! The answer of a compare run, which the terminal and report.html both lead
//! with: the verdict, the worst cases it rests on (caused inside the guest,
//! raw, cyclictest) loaded and shielded, why the raw ratio differs from the
//! guest's when it does, what still reaches the shielded CPUs, and the sharing
//! experiment's line. Facts only; [`crate::table`] and [`crate::html`] lay
//! them out.

use crate::model::{AttributionSummary, CompareReport};
use crate::units::TimeColumn;
use crate::verdict::RAW_RATIO_NEEDED;
use cpushield_cpuset::fmt_ns;

/// One worst case measured loaded and shielded, with the verdict's ratio.
#[derive(Debug, Clone, PartialEq)]
pub struct WorstCase {
    /// What was measured: `caused in the guest`, `raw`, `cyclictest`, `rtla timerlat`.
    pub label: String,
    /// Loaded, ns.
    pub loaded_ns: u64,
    /// Shielded, ns.
    pub shielded_ns: u64,
    /// loaded / shielded, as the verdict computed it.
    pub ratio: Option<f64>,
    /// What the row is to the verdict (`judged on this: needs 10x`), if anything.
    pub role: Option<String>,
}

/// The answer, before any table.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer<'a> {
    /// The verdict line.
    pub verdict: &'a str,
    /// Whether the shield met the papers' claim.
    pub pass: bool,
    /// The shielded CPUs (list format).
    pub cpus: &'a str,
    /// Worst cases loaded and shielded; empty without both scenarios.
    pub worst_cases: Vec<WorstCase>,
    /// Why the raw ratio and the guest's differ, when they do.
    pub raw_differs: Option<String>,
    /// Each scenario's worst case in one unit, when there is no loaded and
    /// shielded pair to compare (`compare --smt`, or a single scenario):
    /// `worst case on CPU 3: smt-busy 1.20 ms, smt-idle 0.30 ms`.
    pub scenario_worst: Option<String>,
    /// What still reaches the shielded CPUs, each with its fix.
    pub remaining: &'a [String],
    /// Whether the run looked for what still reaches the shielded CPUs (the
    /// loaded and shielded scenarios were traced): only then does an empty
    /// `remaining` mean nothing was found.
    pub remaining_searched: bool,
    /// The sharing experiment's line, when it ran.
    pub sharing: Option<&'a str>,
}

/// The raw and the guest ratio differ when one is this many times the other.
const RATIOS_DIFFER: f64 = 1.25;

impl CompareReport {
    /// The answer this report leads with.
    pub fn answer(&self) -> Answer<'_> {
        let v = &self.verdict;
        let (loaded, shielded) = (self.scenario("loaded"), self.scenario("shielded"));
        let mut worst_cases = Vec::new();
        let mut raw_differs = None;
        let mut remaining_searched = false;
        if let (Some(l), Some(s)) = (loaded, shielded) {
            let traced = l.attribution.as_ref().zip(s.attribution.as_ref());
            if let Some((la, sa)) = traced {
                remaining_searched = true;
                worst_cases.push(WorstCase {
                    label: "caused in the guest".into(),
                    loaded_ns: la.guest_worst_ns,
                    shielded_ns: sa.guest_worst_ns,
                    ratio: v.guest_loaded_over_shielded,
                    role: Some(match &v.effect_slices {
                        Some(s) => format!(
                            "the shield's effect; {:.1}-{:.1}x over {} slices",
                            s.min, s.max, s.count
                        ),
                        None => "the shield's effect".to_string(),
                    }),
                });
                let differ = v
                    .guest_loaded_over_shielded
                    .zip(v.loaded_over_shielded)
                    .is_some_and(|(g, r)| g > 0.0 && r > 0.0 && (g / r).max(r / g) > RATIOS_DIFFER);
                if differ {
                    raw_differs = why_raw_differs(la, sa);
                }
            }
            worst_cases.push(WorstCase {
                label: "raw".into(),
                loaded_ns: l.latency.max_ns,
                shielded_ns: s.latency.max_ns,
                ratio: v.loaded_over_shielded,
                role: traced
                    .is_none()
                    .then(|| format!("judged on this: needs {RAW_RATIO_NEEDED:.0}x")),
            });
            // Each anchor in the terms it was checked in (in the guest when
            // its wakeups were traced), with what it found.
            for a in &v.anchors {
                worst_cases.push(WorstCase {
                    label: a.tool.clone(),
                    loaded_ns: a.loaded_ns,
                    shielded_ns: a.shielded_ns,
                    ratio: a.ratio,
                    role: Some(a.line.clone()),
                });
            }
        }
        let cpus = shielded
            .or(self.scenarios.first())
            .map(|s| s.measured_cpus.as_str())
            .unwrap_or("-");
        let scenario_worst = (worst_cases.is_empty() && !self.scenarios.is_empty()).then(|| {
            let column = TimeColumn::fit(self.scenarios.iter().map(|s| s.latency.max_ns));
            let each: Vec<String> = self
                .scenarios
                .iter()
                .map(|s| format!("{} {}", s.name, column.cell(s.latency.max_ns)))
                .collect();
            format!("worst case on CPU {cpus}: {}", each.join(", "))
        });
        Answer {
            verdict: &v.line,
            pass: v.pass,
            cpus,
            worst_cases,
            raw_differs,
            scenario_worst,
            remaining: &v.remaining,
            remaining_searched,
            sharing: self.sharing.as_ref().map(|s| s.line.as_str()),
        }
    }
}

/// What the raw worst cases hold that the guest-caused ones leave out, as
/// far as the trace measured it; None when it measured nothing of the kind.
fn why_raw_differs(loaded: &AttributionSummary, shielded: &AttributionSummary) -> Option<String> {
    let mut parts = Vec::new();
    if loaded.outside_worst_ns > 0 || shielded.outside_worst_ns > 0 {
        parts.push(format!(
            "time outside the guest (the vCPU not running), up to {} in a loaded sample, {} in a shielded one (steal {}, {})",
            fmt_ns(loaded.outside_worst_ns),
            fmt_ns(shielded.outside_worst_ns),
            fmt_ns(loaded.steal_ns),
            fmt_ns(shielded.steal_ns)
        ));
    }
    if loaded.other_scope_worst_ns > 0 || shielded.other_scope_worst_ns > 0 {
        parts.push(format!(
            "tasks outside the shield's scope (other PID namespaces, pods), up to {} and {}",
            fmt_ns(loaded.other_scope_worst_ns),
            fmt_ns(shielded.other_scope_worst_ns)
        ));
    }
    (!parts.is_empty()).then(|| format!("raw also counts {}", parts.join("; ")))
}

/// A warning as a reader should see it: once, with the scenarios that raised it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedWarning {
    /// The scenarios that raised it, in run order.
    pub scenarios: Vec<String>,
    /// The warning; where its figures differ per scenario, each figure is
    /// followed by its scenario in brackets.
    pub text: String,
    /// Whether the text names the scenarios (its figures differ per scenario).
    pub scenarios_in_text: bool,
}

impl CompareReport {
    /// Every scenario's warnings, each said once: the same warning raised in
    /// several scenarios is one entry listing them; one whose single varying
    /// figure differs per scenario (the steal time of a VM) is one entry
    /// with each scenario's figure in place.
    pub fn warnings_once(&self) -> Vec<MergedWarning> {
        // Warnings of one template, in order of first appearance.
        let mut groups: Vec<(String, Vec<Raised>)> = Vec::new();
        for s in &self.scenarios {
            for w in &s.warnings {
                let (template, figures) = split_figures(w);
                let entry = (s.name.as_str(), figures, w.as_str());
                match groups.iter_mut().find(|(t, _)| *t == template) {
                    Some((_, members)) => members.push(entry),
                    None => groups.push((template, vec![entry])),
                }
            }
        }
        let mut out = Vec::new();
        for (template, members) in groups {
            let mut scenarios: Vec<String> = Vec::new();
            for (name, _, _) in &members {
                if !scenarios.iter().any(|s| s == name) {
                    scenarios.push(name.to_string());
                }
            }
            let varying: Vec<usize> = (0..members[0].1.len())
                .filter(|i| members.iter().any(|m| m.1[*i] != members[0].1[*i]))
                .collect();
            match varying.as_slice() {
                [] => out.push(MergedWarning {
                    scenarios,
                    text: members[0].2.to_string(),
                    scenarios_in_text: false,
                }),
                [at] => {
                    let mut per_scenario: Vec<(&str, Vec<&str>)> = Vec::new();
                    for (name, figures, _) in &members {
                        match per_scenario.iter_mut().find(|(n, _)| n == name) {
                            Some((_, values)) => values.push(figures[*at]),
                            None => per_scenario.push((name, vec![figures[*at]])),
                        }
                    }
                    let listed: Vec<String> = per_scenario
                        .iter()
                        .map(|(name, values)| format!("{} ({name})", values.join(" and ")))
                        .collect();
                    let mut figures: Vec<String> =
                        members[0].1.iter().map(|f| f.to_string()).collect();
                    figures[*at] = listed.join(", ");
                    out.push(MergedWarning {
                        scenarios,
                        text: fill_figures(&template, &figures),
                        scenarios_in_text: true,
                    });
                }
                _ => {
                    for (name, _, text) in members {
                        out.push(MergedWarning {
                            scenarios: vec![name.to_string()],
                            text: text.to_string(),
                            scenarios_in_text: false,
                        });
                    }
                }
            }
        }
        out
    }
}

/// One warning as a scenario raised it: (scenario, figures, text).
type Raised<'a> = (&'a str, Vec<&'a str>, &'a str);

/// Marks a figure's place in a warning's template.
const FIGURE: char = '\u{1}';

/// Splits a warning into its template (each figure replaced by [`FIGURE`])
/// and its figures: numbers that stand as words (`230 ms`, `12.5%`, `3`),
/// with their unit; digits inside a name (`virtio1-req.0`) are not figures.
fn split_figures(text: &str) -> (String, Vec<&str>) {
    let bytes = text.as_bytes();
    let mut template = String::new();
    let mut figures = Vec::new();
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        let starts_word = i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.');
        if !(bytes[i].is_ascii_digit() && starts_word) {
            i += 1;
            continue;
        }
        let mut end = i;
        while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b'.') {
            end += 1;
        }
        if bytes[end - 1] == b'.' {
            end -= 1;
        }
        if text[end..].starts_with('%') {
            end += 1;
        } else if let Some(unit) = ["ns", "us", "ms", "s"].iter().find(|u| {
            let rest = &text[end..];
            rest.starts_with(' ')
                && rest[1..].starts_with(**u)
                && !rest[1 + u.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphanumeric())
        }) {
            end += 1 + unit.len();
        } else if end < bytes.len() && bytes[end].is_ascii_alphanumeric() {
            // Part of a name (`2nd`, `6470a`): not a figure.
            i = end;
            continue;
        }
        template.push_str(&text[copied..i]);
        template.push(FIGURE);
        figures.push(&text[i..end]);
        copied = end;
        i = end;
    }
    template.push_str(&text[copied..]);
    (template, figures)
}

fn fill_figures(template: &str, figures: &[String]) -> String {
    let mut out = String::new();
    let mut figures = figures.iter();
    for c in template.chars() {
        if c == FIGURE {
            out.push_str(figures.next().map(String::as_str).unwrap_or(""));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ScenarioResult;

    fn report(warnings: &[(&str, &str)]) -> CompareReport {
        let mut r = CompareReport::default();
        for (name, w) in warnings {
            if r.scenario(name).is_none() {
                r.scenarios.push(ScenarioResult {
                    name: name.to_string(),
                    ..Default::default()
                });
            }
            let s = r.scenarios.iter_mut().find(|s| s.name == *name).unwrap();
            s.warnings.push(w.to_string());
        }
        r
    }

    const STEAL: &str = "running in a VM: the hypervisor took {} from CPU 1 during the run (steal time in /proc/stat), so these figures include the host's noise (fix: measure on bare metal)";

    #[test]
    fn the_steal_warning_of_every_scenario_is_said_once_with_each_figure() {
        let r = report(&[
            ("idle", "unshielded-cpu skipped: needs 3+ CPUs"),
            ("loaded", &STEAL.replace("{}", "230 ms")),
            ("loaded", &STEAL.replace("{}", "30 ms")),
            ("shielded", &STEAL.replace("{}", "40 ms")),
            ("shielded+advance", &STEAL.replace("{}", "10 ms")),
        ]);
        let merged = r.warnings_once();
        assert_eq!(merged.len(), 2, "{merged:#?}");
        assert_eq!(merged[0].scenarios, ["idle"]);
        assert_eq!(merged[0].text, "unshielded-cpu skipped: needs 3+ CPUs");
        assert_eq!(
            merged[1].scenarios,
            ["loaded", "shielded", "shielded+advance"]
        );
        assert_eq!(
            merged[1].text,
            STEAL.replace(
                "{}",
                "230 ms and 30 ms (loaded), 40 ms (shielded), 10 ms (shielded+advance)"
            )
        );
    }

    #[test]
    fn a_warning_repeated_word_for_word_lists_its_scenarios() {
        let r = report(&[
            ("loaded", "RT throttling is on (fix: sysctl)"),
            ("shielded", "RT throttling is on (fix: sysctl)"),
        ]);
        assert_eq!(
            r.warnings_once(),
            [MergedWarning {
                scenarios: vec!["loaded".into(), "shielded".into()],
                text: "RT throttling is on (fix: sysctl)".into(),
                scenarios_in_text: false,
            }]
        );
    }

    #[test]
    fn warnings_differing_in_more_than_one_figure_stay_apart() {
        let r = report(&[
            ("loaded", "took 230 ms from CPU 1"),
            ("shielded", "took 40 ms from CPU 2"),
        ]);
        let merged = r.warnings_once();
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[1].text, "took 40 ms from CPU 2");
    }

    #[test]
    fn digits_inside_names_are_not_figures() {
        let (template, figures) = split_figures("IRQ 36 (virtio1-req.0) took 12.5% and 3 s, 2nd");
        assert_eq!(figures, ["36", "12.5%", "3 s"]);
        assert_eq!(
            template,
            "IRQ \u{1} (virtio1-req.0) took \u{1} and \u{1}, 2nd"
        );
    }
}
