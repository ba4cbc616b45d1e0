//! The plot of one A/B comparison's trials (`cpushield tune`): each trial's
//! worst case and 99.99th percentile in run order, the starting point and
//! the candidate in two colours, on a log latency scale.

use crate::plot::{draw_legend_and_present, ensure_font};
use plotters::prelude::*;

/// One trial to plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrialPoint {
    /// Whether the candidate was in place (else the starting point).
    pub candidate: bool,
    /// The trial's worst case, ns.
    pub max_ns: u64,
    /// Its 99.99th percentile, ns.
    pub p99_99_ns: u64,
}

const START: RGBColor = RGBColor(31, 119, 180);
const CANDIDATE: RGBColor = RGBColor(214, 39, 40);

/// The SVG of a comparison's trials, titled `title`.
pub fn trials_svg(title: &str, trials: &[TrialPoint]) -> String {
    ensure_font();
    let mut svg = String::new();
    draw(&mut svg, title, trials);
    svg
}

fn draw(svg: &mut String, title: &str, trials: &[TrialPoint]) {
    {
        let root = SVGBackend::with_string(svg, (640, 300)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let us = |ns: u64| (ns as f64 / 1e3).max(0.1);
        let top = trials.iter().map(|t| us(t.max_ns)).fold(10.0, f64::max) * 2.0;
        let bottom = trials
            .iter()
            .map(|t| us(t.p99_99_ns))
            .fold(top, f64::min)
            .max(0.1)
            / 2.0;
        let chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(55)
            .build_cartesian_2d(
                0f64..(trials.len().max(1) as f64 + 1.0),
                (bottom..top).log_scale(),
            );
        let Ok(mut chart) = chart else {
            return;
        };
        let _ = chart
            .configure_mesh()
            .x_labels(trials.len() + 2)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .x_desc("trial (run order)")
            .y_desc("latency (µs)")
            .draw();
        for (candidate, color, label) in [
            (false, START, "starting point"),
            (true, CANDIDATE, "candidate"),
        ] {
            let arm: Vec<(f64, &TrialPoint)> = trials
                .iter()
                .enumerate()
                .filter(|(_, t)| t.candidate == candidate)
                .map(|(i, t)| (i as f64 + 1.0, t))
                .collect();
            if let Ok(series) = chart.draw_series(
                arm.iter()
                    .map(|(x, t)| Circle::new((*x, us(t.max_ns)), 5, color.filled())),
            ) {
                series
                    .label(format!("{label}: worst case (dot), p99.99 (ring)"))
                    .legend(move |(x, y)| Circle::new((x + 8, y), 5, color.filled()));
            }
            let _ =
                chart
                    .draw_series(arm.iter().map(|(x, t)| {
                        Circle::new((*x, us(t.p99_99_ns)), 4, color.stroke_width(2))
                    }));
        }
        draw_legend_and_present(&mut chart, &root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_trial_is_a_dot_and_a_ring_in_its_arms_colour() {
        let t = |candidate, max_ns| TrialPoint {
            candidate,
            max_ns,
            p99_99_ns: max_ns / 4,
        };
        let svg = trials_svg(
            "timer-migration",
            &[
                t(false, 2_000_000),
                t(true, 500_000),
                t(true, 600_000),
                t(false, 1_800_000),
            ],
        );
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        let circles = svg.matches("<circle").count();
        assert!(circles >= 8, "{circles} circles");
        assert!(
            svg.contains("#D62728") || svg.contains("#d62728"),
            "the candidate's red"
        );
        assert!(svg.contains("timer-migration"));
    }
}
