//! cpushield-measure: the probes behind `cpushield measure`, as a library.
//!
//! - [`latency`]: periodic wakeup latency (realfeel/cyclictest), with an
//!   optional advance (wake early, spin to the deadline).
//! - [`determinism`]: a fixed CPU-bound loop timed repeatedly: ideal, max, jitter.
//! - [`noise`]: a busy loop's gaps between clock reads (oslat-like), on the
//!   TSC where it is invariant ([`tsc`]).
//! - [`net`]: UDP and TCP ping-pong between two pinned endpoints, round-trip
//!   latency and throughput against message size (the Hyades paper).
//! - [`trace`]: the latency probe's spikes marked in a kernel trace and
//!   attributed (`cpushield-trace`), for `--trace-above`.
//!
//! Each probe has a `Config` with defaults and `validate`, and
//! `run(&config, stop, progress) -> Result<Report>`: `stop` ends the run early
//! (what was measured so far is reported), `progress` is called a few times a
//! second on the calling thread. Reports are plain serde data; [`render`] turns
//! them into text, the papers' bucket table or cyclictest's histogram format, and
//! [`json`] into the versioned JSON of docs/measure-json.md.
//!
//! The three probes share one harness: read the system view, validate, set up
//! the process, place the control thread, /proc/stat before and after, the
//! [`RunInfo`] and its [`warnings`]. A probe adds only its settings and its
//! per-CPU measuring loop. A config's `placer` (`cpushield_rt::sched::PlaceFn`) says how the
//! measuring threads reach CPUs that a shield's cpuset fences off.
//!
//! Histograms lose nothing that matters: 1 ns to 10 s at 3 significant digits,
//! constant memory, exact min/max/mean/stddev, and the 10 largest samples with
//! their times ([`recorder`]).

pub mod determinism;
pub mod distribution;
mod error;
mod harness;
pub mod json;
pub mod latency;
pub mod net;
pub mod noise;
pub mod period;
pub mod procstat;
pub mod progress;
pub mod recorder;
pub mod render;
pub mod request;
pub mod run_info;
pub mod signal;
pub mod source;
pub mod spike;
mod timerlat;
pub mod top;
pub mod trace;
pub mod tsc;
pub mod warnings;
pub mod workload;

pub use cpushield_cpuset::CpuSet;
pub use distribution::{Bin, Distribution, Percentiles, Summary};
pub use error::MeasureError;
pub use harness::{AppliedPolicy, SchedPolicy};
pub use period::Period;
pub use progress::Progress;
pub use run_info::RunInfo;
pub use spike::{ProbeObserver, Spike, SpikeTap};
pub use top::TopSample;
pub use warnings::{Warning, WarningKind};
