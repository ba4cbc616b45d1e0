//! cpushield-measure: the probes behind `cpushield measure`, as a library.
//!
//! - [`latency`]: periodic wakeup latency (realfeel/cyclictest), with an
//!   optional advance (wake early, spin to the deadline).
//! - [`determinism`]: a fixed CPU-bound loop timed repeatedly: ideal, max, jitter.
//! - [`noise`]: a busy loop's gaps between clock reads (oslat-like).
//!
//! Each probe has a `Config` with defaults and `validate`, and
//! `run(&config, stop, progress) -> Result<Report>`: `stop` ends the run early
//! (what was measured so far is reported), `progress` is called a few times a
//! second on the calling thread. Reports are plain serde data; [`render`] turns
//! them into text, the papers' bucket table or cyclictest's histogram format, and
//! [`json`] into the versioned JSON of docs/measure-json.md.
//!
//! Histograms lose nothing that matters: 1 ns to 10 s at 3 significant digits,
//! constant memory, exact min/max/mean/stddev, and the 10 largest samples with
//! their times ([`recorder`]).

pub mod determinism;
pub mod distribution;
mod error;
pub mod guard;
mod harness;
pub use harness::{set_thread_placer, ThreadPlacer};
pub mod json;
pub mod latency;
pub mod noise;
pub mod period;
pub mod procstat;
pub mod progress;
pub mod recorder;
pub mod render;
pub mod run_info;
pub mod signal;
pub mod spike;
pub mod top;
pub mod workload;

pub use cpushield_cpuset::CpuSet;
pub use distribution::{Bin, Distribution, Percentiles, Summary};
pub use error::MeasureError;
pub use guard::{Warning, WarningKind};
pub use harness::{AppliedPolicy, SchedPolicy};
pub use period::Period;
pub use progress::Progress;
pub use run_info::RunInfo;
pub use spike::{ProbeObserver, Spike, SpikeTap};
pub use top::TopSample;
