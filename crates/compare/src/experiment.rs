//! What a comparison is asked to do ([`CompareConfig`]), why it may not
//! run ([`CompareError`]) and how far it is ([`Progress`]): shared by the
//! scenario runner and `compare --smt`.

use crate::audit::ShieldAudit;
use crate::check_audit::CheckAudit;
use crate::idle::IdleMode;
use crate::scenario::Scenario;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_load::Workload;
use cpushield_measure::Period;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Why a comparison could not run.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Bad input or an unusable machine, with the remedy.
    #[error("{0}")]
    Refused(String),
    /// A probe failed.
    #[error("measuring: {0}")]
    Measure(cpushield_measure::MeasureError),
    /// The load failed.
    #[error("load: {0}")]
    Load(cpushield_load::LoadError),
    /// Shielding failed.
    #[error("shield: {0}")]
    Shield(cpushield_shield::ShieldError),
    /// Reading the system failed.
    #[error("{0}")]
    Io(std::io::Error),
}

// Each variant's message already holds its cause's: the cause is not also
// handed out as the error's source, which a chain printer (`{:#}`) would
// print a second time.
macro_rules! from_cause {
    ($variant:ident, $cause:ty) => {
        impl From<$cause> for CompareError {
            fn from(e: $cause) -> Self {
                CompareError::$variant(e)
            }
        }
    };
}
from_cause!(Measure, cpushield_measure::MeasureError);
from_cause!(Load, cpushield_load::LoadError);
from_cause!(Shield, cpushield_shield::ShieldError);
from_cause!(Io, std::io::Error);

/// Where the experiment's tasks live: a private PID namespace, whose tasks
/// are "the system", or the whole machine; the shield's own scope.
pub use cpushield_shield::snapshot::Scope;

/// Everything a comparison needs.
#[derive(Debug, Clone)]
pub struct CompareConfig {
    /// CPUs to shield and measure; `None` picks the highest CPU and its SMT siblings.
    pub cpus: Option<CpuSet>,
    /// Scenarios, in run order.
    pub scenarios: Vec<Scenario>,
    /// Workloads of the load.
    pub load: Vec<Workload>,
    /// The load's name as the user gave it (profile or list).
    pub load_name: String,
    /// Directory the load's files go under.
    pub load_dir: PathBuf,
    /// Latency probe time per scenario.
    pub duration: Duration,
    /// Latency probe period.
    pub period: Period,
    /// SCHED_FIFO priority of the probes.
    pub priority: u8,
    /// Advance of the shielded+advance scenario; `None` chooses it from the
    /// shielded scenario's measured wakeup latency.
    pub advance: Option<Duration>,
    /// Determinism runs per scenario (0 skips the determinism probe).
    pub determinism_runs: u32,
    /// Length of one determinism run (calibrated once, then fixed).
    pub determinism_work: Duration,
    /// Scope of the experiment.
    pub scope: Scope,
    /// What the measured CPUs do when idle (see [`crate::idle`]).
    pub idle: IdleMode,
    /// Explain every sample above a threshold from a kernel trace (and split
    /// determinism runs the same way).
    pub attribute: bool,
    /// The threshold; `None`: four times the idle machine's p99, measured
    /// at the start (between 20 us and 1 ms).
    pub attribute_above: Option<Duration>,
    /// Run cyclictest in the loaded and shielded scenarios as an anchor,
    /// when it is installed.
    pub anchor: bool,
    /// The check run on the measured CPUs during the shielded scenarios'
    /// latency probe; its findings go in the report and name the fix of each
    /// cause. `None`: no check, no findings.
    pub audit: Option<Arc<dyn ShieldAudit>>,
    /// What the tracer knows of the kernel (tick period per CPU, preemption
    /// model, virtual CPUs), for the attribution of every CPU that may be
    /// measured.
    pub trace_context: cpushield_trace::KernelContext,
    /// `compare --smt`: instead of the scenarios, one shielded CPU measured
    /// with its SMT sibling busy, idle and offline (see [`crate::smt`]).
    pub smt: bool,
}

impl CompareConfig {
    /// The comparison `demo` runs on `host` with `load` (named `load_name`
    /// in the report): every scenario, 15 s each at realfeel's 2048 Hz and
    /// SCHED_FIFO 95, 10 determinism runs of 200 ms, in a private PID
    /// namespace, idle mode chosen by measurement, traced and attributed,
    /// with the anchors and the check's audit of the shielded scenarios.
    /// `compare` starts from it and sets what its options name.
    pub fn new(host: &Host, load: Vec<Workload>, load_name: String) -> Self {
        CompareConfig {
            cpus: None,
            scenarios: Scenario::ALL.to_vec(),
            load,
            load_name,
            load_dir: PathBuf::from("/var/tmp"),
            duration: Duration::from_secs(15),
            period: Period::from_rate(2048),
            priority: 95,
            advance: None,
            determinism_runs: 10,
            determinism_work: Duration::from_millis(200),
            scope: Scope::Namespace,
            idle: IdleMode::Auto,
            attribute: true,
            attribute_above: None,
            anchor: true,
            audit: Some(Arc::new(CheckAudit::new(host.shared_kernel()))),
            trace_context: crate::check_audit::trace_context(host.kernel()),
            smt: false,
        }
    }
}

/// Progress of the whole experiment, for a progress bar.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Scenario under way.
    pub scenario: Scenario,
    /// Its position (0-based) and the number of scenarios.
    pub index: usize,
    /// Number of scenarios that run.
    pub total: usize,
    /// "latency", "determinism", "shield", "load", "batch".
    pub phase: &'static str,
    /// Fraction of the current phase done.
    pub fraction: f64,
    /// Largest latency seen so far in this scenario, ns.
    pub max_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error;

    /// The error as `cpushield: error: {:#}` prints it: each message of its
    /// chain of sources, joined by ": ".
    fn chain(e: &dyn Error) -> String {
        let mut text = e.to_string();
        let mut next = e.source();
        while let Some(s) = next {
            text.push_str(&format!(": {s}"));
            next = s.source();
        }
        text
    }

    #[test]
    fn the_default_comparison_runs_every_scenario_with_the_check_audit() {
        let kernel = cpushield_kernel::FakeKernel::new();
        let store = cpushield_kernel::store::MemoryStore::default();
        let config = CompareConfig::new(&Host::fake(&kernel, &store), Vec::new(), "x".into());
        assert_eq!(config.scenarios, Scenario::ALL.to_vec());
        assert_eq!(config.scope, Scope::Namespace);
        assert_eq!((config.priority, config.determinism_runs), (95, 10));
        assert!(config.audit.is_some() && config.attribute && config.anchor);
    }

    #[test]
    fn a_refused_load_is_printed_once_not_repeated_by_its_source() {
        let e = CompareError::from(cpushield_load::LoadError::BadDir {
            dir: "/var/tmp".into(),
            reason: "does not exist".into(),
        });
        let text = chain(&e);
        assert_eq!(text.matches("does not exist").count(), 1, "{text}");
        let io = CompareError::from(std::io::Error::other("no such CPU"));
        assert_eq!(
            chain(&io).matches("no such CPU").count(),
            1,
            "{}",
            chain(&io)
        );
    }
}
