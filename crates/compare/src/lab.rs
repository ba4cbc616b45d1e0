//! Where the scenarios happen: the kernel door and the shield's state store
//! ([`Lab`]), and the probes and background work a scenario starts
//! ([`Runs`]). [`Lab::real`] is this machine; a test hands in a fake kernel,
//! a state kept in memory and runs of its own, and the runner goes through
//! the same phases in the same order.

use crate::anchor::{AnchorRun, RtlaRun};
use crate::batch::{Batch, BatchRun};
use crate::experiment::CompareError;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_load::{Load, LoadError, LoadSpec, RunningLoad};
use cpushield_measure::determinism::{self, DeterminismConfig, DeterminismReport};
use cpushield_measure::latency::{self, LatencyConfig, LatencyReport};
use cpushield_measure::MeasureError;
use cpushield_report::{Anchor, BatchWork};
pub use cpushield_rt::sched::PlaceFn;
use cpushield_shield::{HeldShield, Options, ShieldMasks};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

/// The machine a comparison changes and measures.
pub struct Lab {
    /// The kernel door and the shield's state store.
    pub host: Host,
    /// Whether this process may shield (root).
    pub is_root: bool,
    /// The probes and the background work.
    pub runs: Box<dyn Runs>,
}

impl Lab {
    /// This machine, `host`: its kernel and state store, the measure
    /// crate's probes, the load crate's workloads, cyclictest and the
    /// `cpushield` binary for the anchor and the batch job.
    pub fn real(host: &Host) -> Self {
        Self {
            host: host.clone(),
            is_root: nix::unistd::geteuid().is_root(),
            runs: Box::new(RealRuns { host: host.clone() }),
        }
    }

    fn shield_options(&self) -> Options {
        Options {
            is_root: self.is_root,
            whole_cores: false,
        }
    }

    /// Records a load's run directory in the shield's state, so that a
    /// reset after a run killed before it stopped its load removes its
    /// files. Nothing when no shield is up.
    pub(crate) fn record_load_dir(&self, dir: &std::path::Path) {
        let _ = cpushield_shield::state::record_load_dir_in(self.host.store(), dir);
    }

    /// Shields `cpus` from processes, IRQs and the local timer until the
    /// returned shield is lowered or dropped.
    pub(crate) fn raise_shield(&self, cpus: &CpuSet) -> Result<HeldShield, CompareError> {
        Ok(HeldShield::raise(
            &self.host,
            &ShieldMasks::all(cpus),
            self.shield_options(),
        )?)
    }
}

/// What a scenario starts besides the kernel changes: the probes, the load,
/// the cyclictest anchor and the batch job.
pub trait Runs {
    /// A latency probe (`cpushield_measure::latency::run`).
    fn latency(
        &self,
        config: &LatencyConfig,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(cpushield_measure::Progress),
    ) -> Result<LatencyReport, MeasureError>;
    /// A determinism probe (`cpushield_measure::determinism::run`).
    fn determinism(
        &self,
        config: &DeterminismConfig,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(cpushield_measure::Progress),
    ) -> Result<DeterminismReport, MeasureError>;
    /// How a probe's thread enters the shield's cpuset while the shield is
    /// up (plain affinity cannot reach the shielded CPUs then).
    fn shield_placement(&self) -> PlaceFn;
    /// Starts the background load.
    fn start_load(&self, spec: &LoadSpec) -> Result<Box<dyn LoadRun>, LoadError>;
    /// cyclictest, when installed.
    fn cyclictest(&self) -> Option<PathBuf>;
    /// Runs the cyclictest anchor to its end.
    fn run_anchor(&self, run: &AnchorRun) -> Result<Anchor, String>;
    /// rtla, the second anchor, or None with the line saying why added to
    /// `notes` (not installed, or a kernel without the timerlat tracer).
    fn rtla(&self, notes: &mut Vec<String>) -> Option<PathBuf>;
    /// Runs rtla timerlat; with `poll` (the placement of the idle poller), the
    /// measured CPU is kept polling meanwhile, as the probe's was.
    fn run_rtla(&self, run: &RtlaRun, poll: Option<Option<PlaceFn>>) -> Result<Anchor, String>;
    /// The `cpushield` binary that starts the anchor and the batch job.
    fn cpushield_exe(&self) -> Option<PathBuf>;
    /// Starts the batch job of shielded+shared and waits until it counts.
    fn start_batch(&self, run: &BatchRun) -> Result<Box<dyn BatchJob>, String>;
}

/// A running background load.
pub trait LoadRun {
    /// Operations done so far, by workload.
    fn counters(&self) -> Vec<(String, u64)>;
    /// The directory of its files, if it writes any.
    fn run_dir(&self) -> Option<PathBuf> {
        None
    }
    /// Stops it and waits until it is gone.
    fn stop(self: Box<Self>);
}

impl LoadRun for RunningLoad {
    fn counters(&self) -> Vec<(String, u64)> {
        RunningLoad::counters(self)
    }
    fn run_dir(&self) -> Option<PathBuf> {
        Some(RunningLoad::run_dir(self).to_path_buf())
    }
    fn stop(self: Box<Self>) {
        let _ = RunningLoad::stop(*self);
    }
}

/// A running batch job.
pub trait BatchJob {
    /// Stops it and reports what it did.
    fn finish(self: Box<Self>) -> Result<BatchWork, String>;
}

impl BatchJob for Batch {
    fn finish(self: Box<Self>) -> Result<BatchWork, String> {
        Batch::finish(*self)
    }
}

/// This machine's runs (see [`Lab::real`]).
pub struct RealRuns {
    host: Host,
}

impl Runs for RealRuns {
    fn latency(
        &self,
        config: &LatencyConfig,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(cpushield_measure::Progress),
    ) -> Result<LatencyReport, MeasureError> {
        latency::run(&self.host, config, stop, progress)
    }
    fn determinism(
        &self,
        config: &DeterminismConfig,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(cpushield_measure::Progress),
    ) -> Result<DeterminismReport, MeasureError> {
        determinism::run(&self.host, config, stop, progress)
    }
    /// The probes are real threads: each alone into the shield's cpuset,
    /// never its process (the rest of cpushield stays on the housekeeping
    /// CPUs).
    fn shield_placement(&self) -> PlaceFn {
        cpushield_shield::placement::own_thread_placer(&self.host)
    }
    fn start_load(&self, spec: &LoadSpec) -> Result<Box<dyn LoadRun>, LoadError> {
        Ok(Box::new(Load::start(self.host.shared_kernel(), spec)?))
    }
    fn cyclictest(&self) -> Option<PathBuf> {
        crate::anchor::find_cyclictest()
    }
    fn run_anchor(&self, run: &AnchorRun) -> Result<Anchor, String> {
        run.run()
    }
    fn rtla(&self, notes: &mut Vec<String>) -> Option<PathBuf> {
        crate::anchor::rtla_anchor(self.host.kernel(), crate::anchor::find_rtla(), notes)
    }
    fn run_rtla(&self, run: &RtlaRun, poll: Option<Option<PlaceFn>>) -> Result<Anchor, String> {
        let poller = poll.and_then(|place| {
            cpushield_rt::idle_poll::IdlePoller::start(&CpuSet::from_cpus([run.cpu]), place).ok()
        });
        let result = run.run();
        drop(poller);
        result
    }
    fn cpushield_exe(&self) -> Option<PathBuf> {
        std::env::current_exe().ok()
    }
    fn start_batch(&self, run: &BatchRun) -> Result<Box<dyn BatchJob>, String> {
        Ok(Box::new(run.start(self.host.shared_kernel())?))
    }
}
