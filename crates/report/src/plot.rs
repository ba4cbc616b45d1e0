//! Plots like seed 000's: latency histograms with log-scale counts, all
//! scenarios overlaid (Figures 5-7), and per-run times of the determinism test
//! (Figures 1-4). SVG via plotters; PNG by rendering that SVG with resvg.

use crate::model::CompareReport;
use plotters::prelude::*;
use std::io;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];
const SIZE: (u32, u32) = (960, 540);

/// Latency histogram: x = latency (µs, log scale), y = samples (log scale).
pub fn latency_svg(report: &CompareReport) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let _ = root.fill(&WHITE);
        let max_us = report
            .scenarios
            .iter()
            .map(|s| s.latency.max_ns as f64 / 1e3)
            .fold(10.0, f64::max)
            * 1.5;
        let max_count = report
            .scenarios
            .iter()
            .flat_map(|s| s.latency.histogram.iter().map(|(_, c)| *c))
            .max()
            .unwrap_or(1) as f64
            * 2.0;
        let chart = ChartBuilder::on(&root)
            .caption(
                "Wakeup latency (realfeel) — samples per bucket",
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (0.1f64..max_us).log_scale(),
                (0.5f64..max_count).log_scale(),
            );
        let Ok(mut chart) = chart else {
            return svg_fallback();
        };
        let _ = chart
            .configure_mesh()
            .x_desc("latency (µs)")
            .y_desc("samples")
            .draw();
        for (i, s) in report.scenarios.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(f64, f64)> = s
                .latency
                .histogram
                .iter()
                .map(|(ns, c)| ((*ns as f64 / 1e3).max(0.1), *c as f64))
                .collect();
            if let Ok(series) =
                chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            {
                series
                    .label(format!(
                        "{} (max {})",
                        s.name,
                        crate::model::human_ns(s.latency.max_ns)
                    ))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                    });
            }
            let _ = chart.draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 2, color.filled())),
            );
        }
        let _ = chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw();
        let _ = root.present();
    }
    svg
}

/// Determinism: each run's time as % over the ideal, one line per scenario.
pub fn determinism_svg(report: &CompareReport) -> String {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let _ = root.fill(&WHITE);
        let with: Vec<_> = report
            .scenarios
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.determinism.as_ref().map(|d| (i, s, d)))
            .collect();
        let runs = with
            .iter()
            .map(|(_, _, d)| d.run_times_s.len())
            .max()
            .unwrap_or(1)
            .max(2);
        let top = with
            .iter()
            .flat_map(|(_, _, d)| {
                d.run_times_s
                    .iter()
                    .map(move |t| 100.0 * (t / d.ideal_s - 1.0))
            })
            .fold(1.0, f64::max)
            * 1.15;
        let chart = ChartBuilder::on(&root)
            .caption(
                "Execution determinism — time over ideal per run",
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0usize..runs, 0f64..top);
        let Ok(mut chart) = chart else {
            return svg_fallback();
        };
        let _ = chart
            .configure_mesh()
            .x_desc("run")
            .y_desc("% over ideal")
            .draw();
        for (i, s, d) in with {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(usize, f64)> = d
                .run_times_s
                .iter()
                .enumerate()
                .map(|(r, t)| (r, 100.0 * (t / d.ideal_s - 1.0)))
                .collect();
            if let Ok(series) = chart.draw_series(LineSeries::new(points, color.stroke_width(2))) {
                series
                    .label(format!("{} (jitter {:.2}%)", s.name, d.jitter_pct))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                    });
            }
        }
        let _ = chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw();
        let _ = root.present();
    }
    svg
}

fn svg_fallback() -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\"><text x=\"20\" y=\"40\">no data to plot</text></svg>",
        SIZE.0, SIZE.1
    )
}

/// Renders an SVG to PNG bytes (system fonts for the text).
pub fn svg_to_png(svg: &str) -> io::Result<Vec<u8>> {
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(svg, &options).map_err(io::Error::other)?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| io::Error::other("empty plot size"))?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().map_err(io::Error::other)
}
