//! The progress bar of the long commands (measure, compare, tune): drawn on
//! stderr when it is a terminal, absent when it is piped or redirected.

use crate::args::EXIT_ERROR;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

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

/// A scenario runner's bar (compare, tune) of `len` steps, saying `first`
/// until the runner reports; redrawn while a phase runs, since a probe, an
/// anchor or the load's start can each take a minute with nothing else to
/// report. None when stderr is not a terminal.
pub fn runner_bar(len: u64, first: &str) -> Option<ProgressBar> {
    let bar = terminal_bar(len, RUNNER_STYLE);
    if let Some(bar) = &bar {
        bar.set_message(first.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
    }
    bar
}

/// Prints what a runner said once done: `stdout` as it is, each line of
/// `stderr` after the program's name.
pub fn print_said(stdout: &str, stderr: &[String]) {
    print!("{stdout}");
    for line in stderr {
        eprintln!("cpushield: {line}");
    }
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
