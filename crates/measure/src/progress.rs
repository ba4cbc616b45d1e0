//! What the control thread reports while a probe runs, a few times a second.

use std::time::Duration;

/// A progress report: how far the run is and the running maximum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Time since the probe started.
    pub elapsed: Duration,
    /// Fraction done, 0..=1 (by time, samples or runs, whichever bounds the run).
    pub fraction: f64,
    /// Samples (or runs) recorded so far, over all CPUs.
    pub samples: u64,
    /// Largest value so far over all CPUs, in nanoseconds (latency, gap or run time).
    pub max_ns: u64,
}

impl Progress {
    /// The progress bar's message: `what` recorded so far and the largest
    /// value (`2048 samples, max 12.3 us`).
    pub fn message(&self, what: &str) -> String {
        format!(
            "{} {what}, max {}",
            self.samples,
            cpushield_cpuset::fmt_ns(self.max_ns)
        )
    }
}
