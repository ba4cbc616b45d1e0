//! cpushield-check: what still reaches a shielded CPU, why, and the fix
//! (`cpushield check`), and the tracer that names the cause of every latency
//! spike (`measure latency --trace-above`).
//!
//! Layout: `parse` turns kernel text into data; `snapshot` and `facts` are the
//! thin reading layer (through [`cpushield_sys::Kernel`]); `runtime` and
//! `analyze` are pure; `render` prints; `run` ties a check together. `trace`
//! is the tracefs engine.

pub mod analyze;
pub mod facts;
pub mod finding;
pub mod parse;
pub mod render;
pub mod run;
pub mod runtime;
pub mod snapshot;
pub mod target;
pub mod trace;

pub use analyze::{analyze, CheckInput, CheckReport, CpuSource};
pub use finding::{Finding, Remedy, RemedyKind, Severity, Topic};
pub use run::{analyse_snapshots, run_check, run_check_until, CheckError, CheckOptions};
