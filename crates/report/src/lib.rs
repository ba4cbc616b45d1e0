//! Rendering of a `compare` experiment: the answer the terminal leads with
//! and the tables in the papers' terms behind it, report.json, latency and
//! determinism plots (SVG and PNG), and an offline report.html in the same
//! order. Pure rendering: the data comes in a [`CompareReport`].

pub mod answer;
pub mod cells;
pub mod html;
pub mod model;
pub mod output;
pub mod plot;
pub mod sharing;
pub mod table;
pub mod textfile;
pub mod trials;
pub mod units;
pub mod verdict;

pub use model::*;

use std::io;
use std::path::Path;

/// Writes every artefact into `dir`: report.json, latency.svg/png,
/// determinism.svg/png, report.html. Returns the files written.
pub fn write_all(report: &CompareReport, dir: &Path) -> io::Result<Vec<std::path::PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut files = Vec::new();
    let json = dir.join("report.json");
    std::fs::write(
        &json,
        serde_json::to_string_pretty(report).map_err(io::Error::other)?,
    )?;
    files.push(json);
    let latency_svg = plot::latency_svg(report);
    let determinism_svg = plot::determinism_svg(report);
    for (name, svg) in [("latency", &latency_svg), ("determinism", &determinism_svg)] {
        let svg_path = dir.join(format!("{name}.svg"));
        std::fs::write(&svg_path, svg)?;
        files.push(svg_path);
        let png_path = dir.join(format!("{name}.png"));
        std::fs::write(&png_path, plot::svg_to_png(svg)?)?;
        files.push(png_path);
    }
    let html_path = dir.join("report.html");
    std::fs::write(
        &html_path,
        html::render(report, &latency_svg, &determinism_svg),
    )?;
    files.push(html_path);
    Ok(files)
}
