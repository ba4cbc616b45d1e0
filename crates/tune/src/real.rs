//! `tune` on the real machine: preflight, the load, the shield, debugfs
//! where the preemption model lives, the probe, and the [`Bench`] the
//! session measures through. Everything is taken down on every way out
//! (normal end, error, Ctrl-C): the session restores each knob, the
//! shield's reset restores whatever the journal still holds.

use crate::knob::{self, catalog, KnobId, Machine};
use crate::render::{self, TuneReport};
use crate::schedule::Planner;
use crate::session::{self, Bench, ProbeSetup, Progress, SessionConfig};
use crate::TrialSample;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Host, Kernel};
use cpushield_load::{Load, LoadSpec, Workload};
use cpushield_measure::latency::{self, LatencyConfig, Length};
use cpushield_measure::Period;
use cpushield_shield::runtime::MountedDebugfs;
use cpushield_shield::{HeldShield, Options, ShieldMasks};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Setup before the first trial: the shield, the load and its warm-up.
const SETUP: Duration = Duration::from_secs(6);
/// The load's time to reach its steady state.
const WARM_UP: Duration = Duration::from_secs(2);

/// What a tune run is asked to do.
#[derive(Debug, Clone)]
pub struct TuneConfig {
    /// The CPUs to shield and measure.
    pub cpus: CpuSet,
    /// The load's workloads (empty: none).
    pub load: Vec<Workload>,
    /// Its name as the user gave it.
    pub load_name: String,
    /// Where the load's files go.
    pub load_dir: PathBuf,
    /// The whole run's budget.
    pub budget: Duration,
    /// The probe's period.
    pub period: Period,
    /// The probe's priority at the starting point.
    pub priority: u8,
    /// The knobs to measure (`None`: all).
    pub knobs: Option<Vec<KnobId>>,
}

/// The knobs a `--knobs` list names, each once, in the order given; an
/// unknown or empty list is refused naming the knobs there are.
pub fn parse_knobs(text: &str) -> Result<Vec<KnobId>, String> {
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(id) = KnobId::from_name(name) else {
            let all: Vec<&str> = KnobId::ALL.iter().map(|k| k.name()).collect();
            return Err(format!(
                "--knobs: no knob {name:?}; name some of {}",
                all.join(", ")
            ));
        };
        if !out.contains(&id) {
            out.push(id);
        }
    }
    if out.is_empty() {
        return Err(
            "--knobs names no knob: name some, e.g. --knobs timer-migration,preempt".into(),
        );
    }
    Ok(out)
}

/// Why a tune run could not run.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// Bad input or an unusable machine, with the remedy; nothing changed.
    #[error("{0}")]
    Refused(String),
    /// The load failed.
    #[error("load: {0}")]
    Load(cpushield_load::LoadError),
    /// Shielding failed.
    #[error("shield: {0}")]
    Shield(cpushield_shield::ShieldError),
    /// A trial failed.
    #[error("measuring: {0}")]
    Measure(String),
    /// Reading the system failed.
    #[error("{0}")]
    Io(io::Error),
}

// Each variant's message holds its cause's already: the cause is not also
// the error's source, which a chain printer (`{:#}`) would print again.
impl From<cpushield_load::LoadError> for TuneError {
    fn from(e: cpushield_load::LoadError) -> Self {
        TuneError::Load(e)
    }
}
impl From<cpushield_shield::ShieldError> for TuneError {
    fn from(e: cpushield_shield::ShieldError) -> Self {
        TuneError::Shield(e)
    }
}
impl From<io::Error> for TuneError {
    fn from(e: io::Error) -> Self {
        TuneError::Io(e)
    }
}

fn root() -> Options {
    Options {
        is_root: true,
        whole_cores: false,
    }
}

/// Checks everything that can be checked before the first change.
pub fn preflight(host: &Host, config: &TuneConfig) -> Result<(), TuneError> {
    let kernel = host.kernel();
    let online = cpushield_kernel::online_cpus(kernel)?;
    let cpus = &config.cpus;
    if cpus.is_empty() || !cpus.is_subset(&online) {
        return Err(TuneError::Refused(format!(
            "--cpus {cpus}: not all online (online CPUs: {online}); pick CPUs from that list"
        )));
    }
    if cpus.contains(0) {
        return Err(TuneError::Refused(format!(
            "--cpus {cpus} names CPU 0, which runs the machine's own services: tune never measures or changes it; pick other CPUs"
        )));
    }
    if online.difference(cpus).is_empty() {
        return Err(TuneError::Refused(format!(
            "--cpus {cpus} covers every online CPU: leave at least one for the rest of the system"
        )));
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(TuneError::Refused(
            "tune shields CPUs and changes kernel settings: run as root (sudo cpushield tune ...)"
                .into(),
        ));
    }
    if cpushield_shield::state::is_shielded(host.store()) {
        return Err(TuneError::Refused(format!(
            "a shield is already up ({}): run `cpushield reset` first, so tune starts from the machine as found",
            host.store()
                .dir()
                .join(cpushield_shield::state::STATE_FILE)
                .display()
        )));
    }
    if cpushield_shield::layout::detect(kernel).is_none() {
        return Err(cpushield_shield::ShieldError::NoCpuset.into());
    }
    config.period.validate().map_err(TuneError::Refused)?;
    if !config.load.is_empty() {
        Load::validate(host.kernel(), &load_spec(config))?;
    }
    let knobs = config.knobs.as_ref().map_or(KnobId::ALL.len(), Vec::len);
    let minimum = Planner::minimum_budget(knobs, SETUP);
    if config.budget < minimum {
        return Err(TuneError::Refused(format!(
            "--budget {}s is too short for {knobs} knobs: give at least --budget {}s, or fewer knobs with --knobs",
            config.budget.as_secs(),
            minimum.as_secs() + 1
        )));
    }
    Ok(())
}

fn load_spec(config: &TuneConfig) -> LoadSpec {
    let mut spec = LoadSpec::new(config.load.clone());
    spec.dir = config.load_dir.clone();
    spec
}

/// Mounts debugfs (inside tune's private mount namespace) when the kernel
/// can switch its preemption model and the file is not there; the problem,
/// when it cannot.
fn reach_debugfs(host: &Host) -> (Option<MountedDebugfs>, Option<String>) {
    let kernel = host.kernel();
    let version = cpushield_kernel::kernel_version(kernel).unwrap_or_default();
    if !version.contains("PREEMPT_DYNAMIC") || kernel.exists(Path::new(knob::PREEMPT_FILE)) {
        return (None, None);
    }
    match MountedDebugfs::mount(host.shared_kernel()) {
        Ok(mounted) if kernel.exists(Path::new(knob::PREEMPT_FILE)) => (Some(mounted), None),
        Ok(mounted) => (
            Some(mounted),
            Some("debugfs has no sched/preempt (kernel built without it)".into()),
        ),
        Err(e) => (None, Some(format!("mounting debugfs: {e}"))),
    }
}

struct RealBench<'a> {
    host: &'a Host,
    cpus: CpuSet,
    period: Period,
    stop: &'a AtomicBool,
    started: Instant,
}

impl Bench for RealBench<'_> {
    fn kernel(&self) -> &dyn Kernel {
        self.host.kernel()
    }

    fn journal(&mut self, files: &[(PathBuf, String)]) -> io::Result<()> {
        cpushield_shield::state::record_runtime_in(self.host.store(), files)
    }

    fn irq_shield(&mut self, cpus: &CpuSet, on: bool) -> io::Result<()> {
        let masks = ShieldMasks {
            irqs: cpus.clone(),
            ..Default::default()
        };
        let done = if on {
            cpushield_shield::shield(self.host, &masks, root())
        } else {
            cpushield_shield::unshield(self.host, &masks, root())
        };
        done.map(|_| ()).map_err(io::Error::other)
    }

    fn trial(&mut self, length: Duration, probe: &ProbeSetup) -> Result<TrialSample, String> {
        let mut lat = LatencyConfig::new(self.cpus.clone());
        lat.period = self.period;
        lat.length = Length::Duration(length);
        lat.priority = Some(probe.priority);
        lat.idle_poll = probe.idle_poll;
        lat.hold_dma_latency = probe.hold_dma_latency;
        // The probe's thread into the shield, alone: the rest of tune (its
        // main thread, the load's supervisor) stays on the housekeeping CPUs.
        lat.placer = Some(cpushield_shield::placement::own_thread_placer(self.host));
        let report =
            latency::run(self.host, &lat, self.stop, &mut |_| {}).map_err(|e| e.to_string())?;
        let max = |f: fn(&cpushield_measure::Summary) -> u64| {
            report
                .cpus
                .iter()
                .map(|c| f(&c.latency.summary))
                .max()
                .unwrap_or(0)
        };
        Ok(TrialSample {
            max_ns: max(|s| s.max_ns),
            p99_99_ns: max(|s| s.percentiles.p99_99_ns),
            samples: report.cpus.iter().map(|c| c.samples).sum(),
        })
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Runs tune: the load, the shield, every knob, the winning set together;
/// everything taken down after. `progress` gets each trial as it starts and
/// the time since the start.
pub fn run(
    host: &Host,
    config: &TuneConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress, Duration),
) -> Result<TuneReport, TuneError> {
    let started = Instant::now();
    let (debugfs, debugfs_problem) = reach_debugfs(host);
    let load = if config.load.is_empty() {
        None
    } else {
        let load = Load::start(host.shared_kernel(), &load_spec(config))?;
        std::thread::sleep(WARM_UP);
        Some(load)
    };
    let kernel = host.kernel();
    let shield = HeldShield::raise(host, &ShieldMasks::all(&config.cpus), root())?;
    // A run killed from here on leaves the load's files to reset.
    if let Some(load) = &load {
        let _ = cpushield_shield::state::record_load_dir_in(host.store(), load.run_dir());
    }
    // On cgroup v2 the probe's thread joins the shield alone only from the
    // root cgroup (placement::enter_root_cgroup); back where it was after.
    let own_cgroup = cpushield_shield::layout::detect(kernel).and_then(|layout| {
        cpushield_shield::placement::enter_root_cgroup(kernel, &layout)
            .ok()
            .flatten()
            .map(|cgroup| (layout, cgroup))
    });
    let mut machine = Machine::read(kernel, &config.cpus);
    machine.debugfs_problem = machine.debugfs_problem.take().or(debugfs_problem);
    let mut knobs = catalog(&machine, &config.cpus, config.priority);
    if let Some(only) = &config.knobs {
        knobs.retain(|k| only.contains(&k.id));
    }
    let mut bench = RealBench {
        host,
        cpus: config.cpus.clone(),
        period: config.period,
        stop,
        started,
    };
    let session_config = SessionConfig {
        cpus: config.cpus.clone(),
        budget: config.budget,
        priority: config.priority,
    };
    let result = session::run(&mut bench, &session_config, knobs, &mut |p| {
        progress(p, started.elapsed())
    });
    // The load stops first: one still forking while reset moves its tasks
    // back would race it. A shield that does not come down is the run's error.
    if let Some(load) = load {
        load.stop();
    }
    let lowered = shield.lower();
    if let Some((layout, cgroup)) = own_cgroup {
        let _ = cpushield_shield::placement::leave_root_cgroup(kernel, &layout, &cgroup);
    }
    drop(debugfs);
    lowered?;
    let session = result.map_err(TuneError::Measure)?;
    Ok(render::build(
        session,
        &machine,
        config.budget.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        if config.load.is_empty() {
            "none"
        } else {
            &config.load_name
        },
        config.period.hz(),
        config.priority,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_knob_list_keeps_each_knob_once_and_refuses_unknown_or_no_names() {
        assert_eq!(
            parse_knobs("preempt, timer-migration,preempt").unwrap(),
            [
                KnobId::from_name("preempt").unwrap(),
                KnobId::from_name("timer-migration").unwrap()
            ]
        );
        let e = parse_knobs("preempt,turbo").unwrap_err();
        assert!(
            e.starts_with("--knobs: no knob \"turbo\"; name some of "),
            "{e}"
        );
        assert!(e.contains("timer-migration"), "{e}");
        assert!(parse_knobs(" , ")
            .unwrap_err()
            .starts_with("--knobs names no knob"));
    }
}
