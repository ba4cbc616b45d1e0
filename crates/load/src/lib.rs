//! cpushield-load: the papers' background workloads, built in.
//!
//! A shield is only proven under load. This crate runs the loads the papers
//! used — Red Hat stress-kernel (Brosky & Rotolo §6.1, Brosky), the disknoise
//! script (000 §5.1), the find / launch / file-move scripts (002) and the
//! ARTiS loads (004) — as real work that counts itself, in child processes
//! that confine themselves to the chosen CPUs and clean up after themselves
//! however the caller ends.
//!
//! ```no_run
//! use cpushield_load::{parse_selection, Load, LoadSpec};
//! let mut spec = LoadSpec::new(parse_selection(&["stress-kernel"])?);
//! spec.cpus = Some("0".parse()?);
//! let kernel = std::sync::Arc::new(cpushield_kernel::RealKernel);
//! let load = Load::start(kernel, &spec)?;    // validated first; refuses clearly
//! std::thread::sleep(std::time::Duration::from_secs(10));
//! println!("{:?}", load.counters());         // live ops per workload
//! let report = load.stop();                  // every process and file gone
//! println!("{}", report.render());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Layout: [`catalog`] (names, profiles), [`plan`] (pure validation and the
//! process list) over [`preflight`] (the system facts), [`running`] (the
//! caller's side) and `supervisor` (the forked owner of every process and
//! file), `workloads` (one module each), [`report`] (results, rendering),
//! [`stressng`] (the `--stress-ng` passthrough).

pub mod catalog;
pub mod error;
pub mod plan;
pub mod preflight;
mod procs;
pub mod report;
pub mod request;
pub mod running;
mod shm;
pub mod stressng;
mod supervisor;
mod workloads;

pub use catalog::{parse_selection, Profile, Workload, DEFAULT_PROFILE};
pub use error::LoadError;
pub use plan::{LoadSpec, Remote, DEFAULT_SIZE_CAP, MAX_SCALE, MIN_SIZE_CAP};
pub use report::{LoadReport, WorkloadStats};
pub use running::{Load, RunningLoad, Waited};
