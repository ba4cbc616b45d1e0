//! cpushield-check: what still reaches a shielded CPU, why, and the fix
//! (`cpushield check`).
//!
//! Layout: `parse` turns kernel text into data; `snapshot` and `facts` are the
//! thin reading layer (through [`cpushield_kernel::Kernel`]); `sampling` (which
//! threads ran on which CPU, from repeated samples) and `analyze` are pure;
//! `summary` groups the findings by fix and `render` prints; `run` ties a
//! check together. `trace_context` reads what
//! the tracer (`cpushield-trace`) needs to know of the kernel.

pub mod analyze;
pub mod causes;
pub mod command;
pub mod facts;
pub mod finding;
pub mod render;
pub mod run;
pub mod sampling;
pub mod snapshot;
pub mod summary;
pub mod target;
pub mod trace_context;

pub use analyze::{analyze, CheckInput, CheckReport, CpuSource, HostSaid};
pub use finding::{Finding, Remedy, RemedyKind, Severity, Topic};
pub use run::{
    analyse_snapshots, run_check, run_check_until, sample, CheckError, CheckOptions, Sampled,
};
pub use target::{shield_in_force, ShieldInForce, ShieldKind};
pub use trace_context::trace_context;
