//! `compare` and `demo`: the papers' experiments in one run — idle, loaded,
//! shielded, shielded with advance, and probes on an unshielded CPU while the
//! shield is up; on request shielded with a batch job sharing the CPU's idle
//! time — each under the same load for the same time, producing a
//! [`cpushield_report::CompareReport`].

pub mod anchor;
pub mod audit;
pub mod batch;
pub mod check_audit;
pub mod command;
pub mod experiment;
pub mod explain;
pub mod idle;
pub mod irqcount;
pub mod lab;
pub mod pending;
pub mod plan;
pub mod request;
pub mod runner;
pub mod scenario;
pub mod smt;
pub mod summary;

pub use audit::ShieldAudit;
pub use experiment::{CompareConfig, CompareError, Progress, Scope};
pub use lab::{Lab, Runs};
pub use runner::{run, ORCHESTRATION_NICE};
pub use scenario::Scenario;
