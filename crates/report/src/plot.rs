//! Plots like Brosky & Rotolo's: latency histograms with log-scale counts, all
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

/// Fonts tried, in order, for the plots' text (Debian's DejaVu and Liberation).
const FONT_FILES: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
];

/// Registers a system font as "sans-serif" for plotters' text layout, once.
/// Without one, plots are drawn without text rather than not at all.
pub(crate) fn ensure_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for path in FONT_FILES {
            if let Ok(bytes) = std::fs::read(path) {
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return;
                }
            }
        }
    });
}

/// Buckets per decade of latency in the plotted histogram.
const BUCKETS_PER_DECADE: f64 = 10.0;

/// Re-bins a fine histogram (upper bound ns, count) into log-spaced buckets,
/// returning (bucket centre in µs, count) for the non-empty ones.
pub fn log_buckets(histogram: &[(u64, u64)]) -> Vec<(f64, u64)> {
    let mut buckets: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    for &(ns, count) in histogram {
        let us = (ns as f64 / 1e3).max(0.1);
        let index = (us.log10() * BUCKETS_PER_DECADE).floor() as i64;
        *buckets.entry(index).or_default() += count;
    }
    buckets
        .into_iter()
        .map(|(i, c)| (10f64.powf((i as f64 + 0.5) / BUCKETS_PER_DECADE), c))
        .collect()
}

/// Columns of the grid of latency histograms.
const PANEL_COLUMNS: usize = 2;
/// Height of one latency histogram.
const PANEL_HEIGHT: u32 = 300;

/// Latency histograms, one per scenario as the papers draw them (Brosky &
/// Rotolo's Figures 5-7), in a grid on shared log-log axes so the panels
/// compare: x = latency, y = samples per bucket.
pub fn latency_svg(report: &CompareReport) -> String {
    ensure_font();
    let panels = report.scenarios.len().max(1);
    let rows = panels.div_ceil(PANEL_COLUMNS);
    let size = (SIZE.0, PANEL_HEIGHT * rows as u32 + 40);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let _ = root.fill(&WHITE);
        let Ok(root) = root.titled(
            "Timer wakeup latency (clock_nanosleep): samples per bucket, log-log",
            ("sans-serif", 22),
        ) else {
            return svg_fallback();
        };
        let max_us = report
            .scenarios
            .iter()
            .map(|s| s.latency.max_ns as f64 / 1e3)
            .fold(10.0, f64::max)
            * 1.5;
        let binned: Vec<Vec<(f64, u64)>> = report
            .scenarios
            .iter()
            .map(|s| log_buckets(&s.latency.histogram))
            .collect();
        let max_count = binned
            .iter()
            .flat_map(|b| b.iter().map(|(_, c)| *c))
            .max()
            .unwrap_or(1) as f64
            * 2.0;
        let areas = root.split_evenly((rows, PANEL_COLUMNS));
        for (i, (s, area)) in report.scenarios.iter().zip(&areas).enumerate() {
            let color = COLORS[i % COLORS.len()];
            let chart = ChartBuilder::on(area)
                .caption(
                    format!(
                        "{}: max {}, {} samples",
                        s.name,
                        cpushield_cpuset::fmt_ns(s.latency.max_ns),
                        s.latency.samples
                    ),
                    ("sans-serif", 16),
                )
                .margin(8)
                .x_label_area_size(36)
                .y_label_area_size(52)
                .build_cartesian_2d(
                    (0.1f64..max_us).log_scale(),
                    (0.5f64..max_count).log_scale(),
                );
            let Ok(mut chart) = chart else {
                return svg_fallback();
            };
            let _ = chart
                .configure_mesh()
                .x_desc("latency")
                .y_desc("samples")
                .x_label_formatter(&|us| latency_tick(*us))
                .y_label_formatter(&|n| count_tick(*n))
                .draw();
            let points: Vec<(f64, f64)> =
                binned[i].iter().map(|(us, c)| (*us, *c as f64)).collect();
            let _ = chart.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)));
            let _ = chart.draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 2, color.filled())),
            );
        }
        let _ = root.present();
    }
    svg
}

/// A latency axis tick (µs) in the unit that reads best: `0.1 us`, `10 us`, `1 ms`.
fn latency_tick(us: f64) -> String {
    let (value, unit) = if us >= 1000.0 {
        (us / 1000.0, "ms")
    } else {
        (us, "us")
    };
    format!("{} {unit}", trim_number(value))
}

/// A count axis tick: `1`, `100`, `10k`.
fn count_tick(n: f64) -> String {
    if n >= 1000.0 {
        format!("{}k", trim_number(n / 1000.0))
    } else {
        trim_number(n)
    }
}

/// A number without trailing zeros: `0.1`, `10`, `2.5`.
fn trim_number(v: f64) -> String {
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Determinism: each run's time as % over the ideal, one line per scenario.
pub fn determinism_svg(report: &CompareReport) -> String {
    ensure_font();
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
            .build_cartesian_2d(1usize..runs, 0f64..top);
        let Ok(mut chart) = chart else {
            return svg_fallback();
        };
        let _ = chart
            .configure_mesh()
            .x_desc("run")
            .y_desc("% over ideal")
            .y_label_formatter(&|pct| trim_number(*pct))
            .draw();
        for (i, s, d) in with {
            let color = COLORS[i % COLORS.len()];
            let points: Vec<(usize, f64)> = d
                .run_times_s
                .iter()
                .enumerate()
                .map(|(r, t)| (r + 1, 100.0 * (t / d.ideal_s - 1.0)))
                .collect();
            if let Ok(series) = chart.draw_series(LineSeries::new(points, color.stroke_width(2))) {
                series
                    .label(format!("{} (jitter {:.2}%)", s.name, d.jitter_pct))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                    });
            }
        }
        draw_legend_and_present(&mut chart, &root);
    }
    svg
}

/// Draws the series' legend (upper left, on a light background) and ends
/// the drawing of `root`. A failed draw leaves the picture without it.
pub(crate) fn draw_legend_and_present<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    root: &DrawingArea<DB, plotters::coord::Shift>,
) {
    let _ = chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw();
    let _ = root.present();
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
    let installed: Vec<String> = options
        .fontdb
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .collect();
    if let Some(family) = ["DejaVu Sans", "Liberation Sans", "FreeSans"]
        .into_iter()
        .find(|want| installed.iter().any(|have| have == want))
    {
        options.fontdb_mut().set_sans_serif_family(family);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_buckets_merge_fine_bins_into_ten_per_decade() {
        // 10, 10.05 and 11 µs share the bucket [10, 12.6) µs; 13 µs is the next one.
        let fine = [(10_000, 5), (10_050, 5), (11_000, 1), (13_000, 2)];
        let b = log_buckets(&fine);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].1, 11);
        assert!((b[0].0 - 10f64.powf(1.05)).abs() < 1e-9);
        assert_eq!(b.iter().map(|x| x.1).sum::<u64>(), 13);
    }
}
