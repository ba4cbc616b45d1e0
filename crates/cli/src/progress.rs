//! The progress bar of the long commands (measure, compare, tune): drawn on
//! stderr when it is a terminal, absent when it is piped or redirected.

use crate::args::EXIT_ERROR;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// The style of the scenario runners' bars (compare, tune).
pub const RUNNER_STYLE: &str = "{spinner} [{elapsed_precise}] {bar:30} {msg}";

/// A bar of `len` steps drawn with `template`, or None when stderr is not a
/// terminal.
pub fn terminal_bar(len: u64, template: &str) -> Option<ProgressBar> {
    std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(len);
        bar.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    })
}

/// Clears `bar` and passes on the run's result; an error is printed as one
/// line and becomes [`EXIT_ERROR`].
pub fn finish<T, E: std::fmt::Display>(
    bar: Option<&ProgressBar>,
    result: Result<T, E>,
) -> Result<T, u8> {
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result.map_err(|e| {
        eprintln!("cpushield: error: {e}");
        EXIT_ERROR
    })
}
