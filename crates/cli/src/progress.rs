//! The progress bar of the long commands (measure, compare, tune): drawn on
//! stderr when it is a terminal, absent when it is piped or redirected.

use crate::args::EXIT_ERROR;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// The style of the scenario runners' bars (compare, tune).
pub const RUNNER_STYLE: &str = "{spinner} [{elapsed_precise}] {bar:30} {msg}";

/// The style of the probes' bars (measure), with the running maximum.
pub const PROBE_STYLE: &str = "{bar:40} {percent:>3}% {elapsed:>4} {msg}";

/// A bar drawn on stderr when it is a terminal; otherwise every call does nothing.
pub struct Bar(Option<ProgressBar>);

impl Bar {
    /// A bar of `len` steps drawn with `template`.
    pub fn new(len: u64, template: &str) -> Self {
        Self(std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(len);
            bar.set_style(
                ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        }))
    }

    /// Moves the bar to step `position`, saying `message` (made only when drawn).
    pub fn update(&self, position: u64, message: impl FnOnce() -> String) {
        if let Some(bar) = &self.0 {
            bar.set_position(position);
            bar.set_message(message());
        }
    }

    /// Clears the bar from the terminal.
    pub fn clear(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

/// A scenario runner's bar (compare, tune) of `len` steps, saying `first`
/// until the runner reports; redrawn while a phase runs, since a probe, an
/// anchor or the load's start can each take a minute with nothing else to
/// report.
pub fn runner_bar(len: u64, first: &str) -> Bar {
    let bar = Bar::new(len, RUNNER_STYLE);
    if let Some(bar) = &bar.0 {
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
pub fn finish<T, E: std::fmt::Display>(bar: &Bar, result: Result<T, E>) -> Result<T, u8> {
    bar.clear();
    result.map_err(|e| {
        eprintln!("cpushield: error: {e}");
        EXIT_ERROR
    })
}
