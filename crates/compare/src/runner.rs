//! Runs the scenarios in order — idle; then the load; loaded; then the shield;
//! shielded, shielded+shared (with its batch job), shielded+advance,
//! unshielded-cpu — with the same probes in each,
//! and turns the measurements into a [`CompareReport`]. The shield is reset
//! and the load stopped on every way out (normal end, error, SIGINT/SIGTERM).

use crate::anchor::{self, AnchorRun};
use crate::audit::ShieldAudit;
use crate::batch::BatchRun;
use crate::explain::{DeterminismSplit, ProbeTrace};
use crate::idle::{self, Calibration, IdleMode};
use crate::irqcount;
use crate::scenario::Scenario;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Kernel, RealKernel};
use cpushield_load::{Load, LoadSpec, RunningLoad, Workload};
use cpushield_measure::determinism::{self, DeterminismConfig, Work};
use cpushield_measure::latency::{self, LatencyConfig, Length};
use cpushield_measure::{procstat, Distribution, Period};
use cpushield_report::{
    human_ns, AttributionSummary, CheckFinding, CompareReport, DeterminismSummary, IdleChoice,
    LatencySummary, LoadOps, ScenarioResult, Verdict, SCHEMA,
};
use cpushield_rt::sched::PlaceFn;
use cpushield_shield::{Options, ShieldMasks};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a comparison could not run.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Bad input or an unusable machine, with the remedy.
    #[error("{0}")]
    Refused(String),
    /// A probe failed.
    #[error("measuring: {0}")]
    Measure(#[from] cpushield_measure::MeasureError),
    /// The load failed.
    #[error("load: {0}")]
    Load(#[from] cpushield_load::LoadError),
    /// Shielding failed.
    #[error("shield: {0}")]
    Shield(#[from] cpushield_shield::ShieldError),
    /// Reading the system failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Where the experiment's tasks live: the shield's own notion, the tasks it
/// treats as "the system".
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

/// The CPUs to shield by default: the highest online CPU and its hyperthread
/// siblings, keeping CPU 0 for housekeeping. Refused on a 1-CPU machine.
pub fn default_cpus(
    online: &CpuSet,
    siblings_of: &dyn Fn(usize) -> CpuSet,
) -> Result<CpuSet, CompareError> {
    let last = online.last().unwrap_or(0);
    if online.len() < 2 || last == 0 {
        return Err(CompareError::Refused(format!(
            "this machine has only CPU(s) {online}: a shield needs at least 2 CPUs, one kept for the rest of the system"
        )));
    }
    let cpus = siblings_of(last)
        .union(&CpuSet::from_cpus([last]))
        .intersection(online);
    let cpus = cpus.difference(&CpuSet::from_cpus([0]));
    if online.difference(&cpus).is_empty() {
        return Err(CompareError::Refused(format!(
            "shielding CPU {last} with its siblings would leave no CPU for the rest of the system: name a CPU with --cpus"
        )));
    }
    Ok(cpus)
}

/// The CPU the unshielded-cpu scenario measures: the highest housekeeping CPU
/// other than CPU 0 (which runs the machine's own services), if any.
pub fn unshielded_probe_cpu(online: &CpuSet, shielded: &CpuSet) -> Option<usize> {
    online
        .difference(shielded)
        .iter()
        .filter(|c| *c != 0)
        .last()
}

fn siblings(cpu: usize) -> CpuSet {
    cpushield_kernel::thread_siblings(&RealKernel, cpu).unwrap_or_else(|_| CpuSet::from_cpus([cpu]))
}

/// Checks everything that can be checked before the first change.
pub fn preflight(config: &CompareConfig) -> Result<CpuSet, CompareError> {
    if config.smt {
        crate::smt::choose_here(config.cpus.as_ref())?;
    }
    let kernel = RealKernel;
    let online = cpushield_kernel::online_cpus(&kernel)?;
    let cpus = match &config.cpus {
        Some(c) => c.clone(),
        None => default_cpus(&online, &siblings)?,
    };
    if cpus.is_empty() || !cpus.is_subset(&online) {
        return Err(CompareError::Refused(format!(
            "--cpus {cpus}: not all online (online CPUs: {online}); pick CPUs from that list"
        )));
    }
    if online.difference(&cpus).is_empty() {
        return Err(CompareError::Refused(format!(
            "--cpus {cpus} covers every online CPU: leave at least one for the rest of the system"
        )));
    }
    if config.scenarios.iter().any(|s| s.shield_up()) {
        if !nix::unistd::geteuid().is_root() {
            return Err(CompareError::Refused(
                "the shielded scenarios move tasks and IRQs: run as root (or use --scenarios idle,loaded)".into(),
            ));
        }
        if cpushield_shield::state::is_shielded() {
            return Err(CompareError::Refused(format!(
                "a shield is already up ({}): run `cpushield reset` first",
                cpushield_shield::state::state_path().display()
            )));
        }
        if cpushield_shield::layout::detect(&kernel).is_none() {
            return Err(cpushield_shield::ShieldError::NoCpuset.into());
        }
    }
    if !config.smt && config.scenarios.iter().any(|s| s.loaded()) {
        Load::validate(&load_spec(config))?;
    }
    if config.duration.is_zero() {
        return Err(CompareError::Refused(
            "--duration must be longer than 0: use e.g. --duration 60s".into(),
        ));
    }
    Ok(cpus)
}

fn load_spec(config: &CompareConfig) -> LoadSpec {
    let mut spec = LoadSpec::new(config.load.clone());
    spec.dir = config.load_dir.clone();
    spec
}

/// Takes the shield down when dropped.
pub(crate) struct ShieldGuard;

impl ShieldGuard {
    pub(crate) fn raise(cpus: &CpuSet) -> Result<Self, CompareError> {
        cpushield_shield::shield(
            &RealKernel,
            &ShieldMasks::all(cpus),
            Options {
                is_root: true,
                whole_cores: false,
            },
        )?;
        Ok(ShieldGuard)
    }

    /// How the probes' threads reach the shielded CPUs while the shield is up
    /// (plain affinity cannot: the shield's cpuset fences them off).
    pub(crate) fn placer(&self) -> PlaceFn {
        place_thread
    }
}

fn place_thread(tid: i32, cpus: &CpuSet) -> std::io::Result<()> {
    cpushield_shield::placement::place_task(&RealKernel, tid, cpus)
}

impl Drop for ShieldGuard {
    fn drop(&mut self) {
        if let Err(e) = cpushield_shield::reset(
            &RealKernel,
            Options {
                is_root: true,
                whole_cores: false,
            },
        ) {
            eprintln!("cpushield: error: resetting the shield failed: {e}; run `cpushield reset`");
        }
    }
}

pub(crate) fn interrupts_on(cpus: &CpuSet) -> u64 {
    let text = RealKernel
        .read(Path::new("/proc/interrupts"))
        .unwrap_or_default();
    irqcount::total_on(&text, cpus)
}

fn counters(load: Option<&RunningLoad>) -> BTreeMap<String, u64> {
    load.map(|l| l.counters().into_iter().collect())
        .unwrap_or_default()
}

/// The batch job's own time limit, should it never be stopped: well past
/// everything a scenario runs (calibration, latency, determinism).
fn batch_limit(config: &CompareConfig) -> Duration {
    config.duration * 3
        + config.determinism_work * config.determinism_runs.saturating_mul(3)
        + Duration::from_secs(120)
}

/// Steal time of `cpus` since `before`, ns (/proc/stat, USER_HZ resolution).
fn steal_since(before: &Option<procstat::CpuTimes>, cpus: &CpuSet) -> u64 {
    match (before, procstat::snapshot(&RealKernel)) {
        (Some(before), Ok(after)) => procstat::steal_ns(before, &after, cpus),
        _ => 0,
    }
}

fn steal_mark() -> Option<procstat::CpuTimes> {
    procstat::snapshot(&RealKernel).ok()
}

/// One short latency run for calibration: worst case, p99 and steal.
fn short_probe(
    config: &CompareConfig,
    cpus: &CpuSet,
    poll: bool,
    length: Duration,
    placer: Option<PlaceFn>,
    stop: &AtomicBool,
) -> Result<Calibration, CompareError> {
    let mut lat = LatencyConfig::new(cpus.clone());
    lat.period = config.period;
    lat.length = Length::Duration(length);
    lat.priority = Some(config.priority);
    lat.idle_poll = poll;
    lat.placer = placer;
    let before = steal_mark();
    let r = latency::run(&lat, stop, &mut |_| {})?;
    let summary = summarize_latency(&r);
    Ok(Calibration {
        max_ns: summary.max_ns,
        p99_ns: summary.p99_ns,
        steal_ns: steal_since(&before, cpus),
    })
}

/// The spike threshold: four times the unloaded machine's p99, 20 us to 1 ms.
pub fn threshold_from_idle_p99(p99_ns: u64) -> Duration {
    Duration::from_nanos((p99_ns.saturating_mul(4)).clamp(20_000, 1_000_000))
}

/// The advance of the shielded+advance scenario from the shielded
/// scenario's wakeup latency: its 99.999th percentile (so nearly every
/// wakeup comes before the deadline), at least 10 us and at most a quarter
/// of the period (the spin must leave the CPU mostly idle).
pub fn advance_from_shielded(shielded: &LatencySummary, period_ns: u64) -> Duration {
    let quarter = (period_ns / 4).max(10_000);
    Duration::from_nanos(shielded.p99999_ns.clamp(10_000, quarter))
}

/// The check on some CPUs while a probe runs, in a thread of its own
/// (on the housekeeping CPUs, where the runner is).
struct CheckWhile {
    done: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<CheckFinding>>,
}

impl CheckWhile {
    /// Starts watching `cpus`, for at most `interval`.
    fn start(audit: Arc<dyn ShieldAudit>, cpus: &CpuSet, interval: Duration) -> Self {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let cpus = cpus.clone();
        let handle = std::thread::spawn(move || {
            audit.findings_until(&cpus, interval, &|| flag.load(Ordering::Relaxed))
        });
        Self { done, handle }
    }

    /// Stops watching and returns what the check found, most severe first.
    fn finish(self) -> Vec<CheckFinding> {
        self.done.store(true, Ordering::Relaxed);
        let mut findings = self.handle.join().unwrap_or_default();
        findings.sort_by(|a, b| b.severity.cmp(&a.severity));
        findings
    }
}

/// The fix `check` names for a cause, matched by IRQ number, softirq name,
/// the local timer, or task ID.
fn fix_for(name: &str, findings: &[CheckFinding]) -> Option<String> {
    let key = if let Some(rest) = name.strip_prefix("irq ") {
        format!("IRQ {} ", rest.split_whitespace().next()?)
    } else if let Some(soft) = name.strip_prefix("softirq ") {
        format!("{soft} softirq ")
    } else if name == "local timer interrupt" {
        "the local timer fires".to_string()
    } else if let Some(open) = name.rfind('(') {
        format!("({}", name[open + 1..].trim_end_matches(')'))
    } else {
        return None;
    };
    findings
        .iter()
        .find(|f| f.title.contains(&key))
        .and_then(|f| f.remedies.first().cloned())
}

#[cfg(test)]
mod fix_tests {
    use super::*;

    fn finding(title: &str, remedy: &str) -> CheckFinding {
        CheckFinding {
            severity: "warn".into(),
            title: title.into(),
            remedies: vec![remedy.into()],
            runtime_fix: false,
            topic: "irq".into(),
        }
    }

    #[test]
    fn causes_are_matched_with_the_fix_check_names() {
        let findings = [
            finding(
                "IRQ 36 (virtio1-req.0) is kernel-managed and arrives on CPU 1",
                "isolcpus=managed_irq,1",
            ),
            finding(
                "BLOCK softirq ran 2226 times on CPU 1: completions of disk I/O",
                "isolcpus=managed_irq,1",
            ),
            finding("the local timer fires on CPU 1 (2300/s)", "nohz_full=1"),
            finding(
                "task hog (812) ran 5.0 ms on CPU 1",
                "cpushield shield --procs 1",
            ),
        ];
        assert_eq!(
            fix_for("irq 36 virtio1-req.0", &findings).as_deref(),
            Some("isolcpus=managed_irq,1")
        );
        assert_eq!(
            fix_for("softirq BLOCK", &findings).as_deref(),
            Some("isolcpus=managed_irq,1")
        );
        assert_eq!(
            fix_for("local timer interrupt", &findings).as_deref(),
            Some("nohz_full=1")
        );
        assert_eq!(
            fix_for("hog (812)", &findings).as_deref(),
            Some("cpushield shield --procs 1")
        );
        assert_eq!(fix_for("irq 38 virtio2-input.0", &findings), None);
        assert_eq!(fix_for("softirq NET_RX", &findings), None);
    }
}

/// Runs the experiment. Stops early (with what was measured) when `stop` is set.
pub fn run(
    config: &CompareConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<CompareReport, CompareError> {
    let shielded_cpus = preflight(config)?;
    if config.smt {
        return crate::smt::run(config, stop, progress);
    }
    let online = cpushield_kernel::online_cpus(&RealKernel)?;
    let mut planned: Vec<(Scenario, CpuSet)> = Vec::new();
    let mut skipped = Vec::new();
    for &s in &config.scenarios {
        let cpus = match s {
            Scenario::UnshieldedCpu => match unshielded_probe_cpu(&online, &shielded_cpus) {
                Some(c) => CpuSet::from_cpus([c]),
                None => {
                    skipped.push(
                        "unshielded-cpu skipped: the only unshielded CPU is CPU 0, which runs the machine's own services (needs 3+ CPUs)"
                            .to_string(),
                    );
                    continue;
                }
            },
            _ => shielded_cpus.clone(),
        };
        planned.push((s, cpus));
    }
    let total = planned.len();
    let mut results: Vec<ScenarioResult> = Vec::new();
    let mut load: Option<RunningLoad> = None;
    let mut shield: Option<ShieldGuard> = None;
    // What the scenario that raised the shield tells of pending IRQ moves.
    let mut shield_notes: Vec<String> = Vec::new();
    let mut iterations: Option<u64> = None;
    let mut general = Vec::new();
    let cyclictest = if config.anchor {
        let found = anchor::find_cyclictest();
        if found.is_none() {
            general.push(
                "no cyclictest anchor: rt-tests is not installed (apt-get install rt-tests)"
                    .to_string(),
            );
        }
        found
    } else {
        None
    };
    let cpushield_exe = std::env::current_exe().ok();
    // The spike threshold, from the unloaded machine before anything starts.
    let threshold = match (config.attribute, config.attribute_above) {
        (false, _) => None,
        (true, Some(t)) => Some(t),
        (true, None) => {
            if let Some((s, cpus)) = planned.first() {
                progress(Progress {
                    scenario: *s,
                    index: 0,
                    total,
                    phase: "baseline",
                    fraction: 0.0,
                    max_ns: 0,
                });
                let base = short_probe(
                    config,
                    cpus,
                    false,
                    idle::calibration_length(config.duration),
                    shield.as_ref().map(ShieldGuard::placer),
                    stop,
                )?;
                Some(threshold_from_idle_p99(base.p99_ns))
            } else {
                None
            }
        }
    };
    for (index, (scenario, cpus)) in planned.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let report = |phase, fraction, max_ns| Progress {
            scenario: *scenario,
            index,
            total,
            phase,
            fraction,
            max_ns,
        };
        if scenario.loaded() && load.is_none() {
            progress(report("load", 0.0, 0));
            load = Some(Load::start(&load_spec(config))?);
            // Let the load reach its steady state before measuring.
            std::thread::sleep(Duration::from_secs(2));
        }
        if scenario.shield_up() && shield.is_none() {
            progress(report("shield", 0.0, 0));
            shield = Some(ShieldGuard::raise(&shielded_cpus)?);
            shield_notes =
                crate::pending::settle(&RealKernel, &shielded_cpus, crate::pending::WAIT);
        }
        let mut notes = std::mem::take(&mut shield_notes);
        // 1. How the CPUs idle: measured, or as asked.
        let idle_choice: IdleChoice = match config.idle {
            _ if *scenario == Scenario::ShieldedShared => idle::shared(),
            IdleMode::Auto => {
                let length = idle::calibration_length(config.duration);
                progress(report("idle calibration", 0.0, 0));
                let placer = shield.as_ref().map(ShieldGuard::placer);
                let halt = short_probe(config, cpus, false, length, placer, stop)?;
                progress(report("idle calibration", 0.5, halt.max_ns));
                let poll = short_probe(config, cpus, true, length, placer, stop)?;
                idle::decide(halt, poll, length.as_secs_f64())
            }
            mode => idle::fixed(mode),
        };
        let poll = idle_choice.policy == "poll";
        let advance = if *scenario == Scenario::ShieldedAdvance {
            Some(match config.advance {
                Some(a) => a,
                None => {
                    let chosen = results
                        .iter()
                        .find(|r| r.name == Scenario::Shielded.name())
                        .map(|r| advance_from_shielded(&r.latency, config.period.nominal_ns()));
                    match chosen {
                        Some(a) => {
                            notes.push(format!(
                                "advance {} chosen by measurement: the shielded scenario's 99.999th percentile wakeup latency (spinning {:.0}% of each period)",
                                human_ns(a.as_nanos() as u64),
                                a.as_nanos() as f64 * 100.0 / config.period.nominal_ns() as f64
                            ));
                            a
                        }
                        None => Duration::from_micros(100),
                    }
                }
            })
        } else {
            None
        };

        // The batch job of shielded+shared, from before the probes to after them.
        let mut batch_problems: Vec<String> = Vec::new();
        let batch = match (scenario, &cpushield_exe) {
            (Scenario::ShieldedShared, Some(exe)) => {
                progress(report("batch", 0.0, 0));
                let run = BatchRun {
                    cpushield: exe.clone(),
                    cpus: cpus.clone(),
                    dir: config.load_dir.clone(),
                    limit: batch_limit(config),
                };
                match run.start() {
                    Ok(b) => Some(b),
                    Err(e) => {
                        batch_problems.push(format!("no batch job: {e}"));
                        None
                    }
                }
            }
            (Scenario::ShieldedShared, None) => {
                batch_problems.push("no batch job: the cpushield binary could not be found".into());
                None
            }
            _ => None,
        };

        let ops_before = counters(load.as_ref());
        let irqs_before = interrupts_on(cpus);
        let started = Instant::now();

        // 2. Latency, traced.
        let mut lat = LatencyConfig::new(cpus.clone());
        lat.period = config.period;
        lat.length = Length::Duration(config.duration);
        lat.priority = Some(config.priority);
        lat.idle_poll = poll;
        lat.advance = advance;
        lat.placer = shield.as_ref().map(ShieldGuard::placer);
        let mut trace = match threshold {
            Some(_) => {
                match ProbeTrace::start(cpus, Duration::from_secs(2), config.trace_context.clone())
                {
                    Ok(t) => Some(t),
                    Err(e) => {
                        notes.push(format!("not traced: {e}"));
                        None
                    }
                }
            }
            None => None,
        };
        if let (Some(t), Some(th)) = (trace.as_mut(), threshold) {
            lat.spikes = Some(t.spike_tap(th));
            lat.observer = Some(t.observer());
        }
        let checker = config
            .audit
            .clone()
            .filter(|_| scenario.shield_up() && *scenario != Scenario::UnshieldedCpu)
            .map(|audit| CheckWhile::start(audit, cpus, config.duration));
        let steal_before = steal_mark();
        let latency_report = latency::run(&lat, stop, &mut |p| {
            progress(report("latency", p.fraction, p.max_ns))
        });
        let latency_steal = steal_since(&steal_before, cpus);
        drop(lat);
        let findings = checker.map(CheckWhile::finish).unwrap_or_default();
        let latency_report = latency_report?;
        let max_seen = latency_report.max_ns();
        let latency = summarize_latency(&latency_report);
        let attribution: Option<AttributionSummary> = match (trace, threshold) {
            (Some(t), Some(th)) => {
                progress(report("explaining", 1.0, max_seen));
                let (mut summary, _) = t.finish_latency(
                    th.as_nanos() as u64,
                    latency.max_ns,
                    latency_report.spikes_dropped,
                    latency_steal,
                );
                let namespace_scope = matches!(config.scope, Scope::Namespace);
                for row in summary.causes.iter_mut().filter(|r| r.guest) {
                    row.fix = fix_for(&row.name, &findings).or_else(|| {
                        config.audit.as_ref().and_then(|a| {
                            a.fix_for_cause(&row.kind, &row.name, cpus, namespace_scope)
                        })
                    });
                }
                Some(summary)
            }
            _ => None,
        };

        // 3. The anchor, placed like the probe.
        let anchor = match (&cyclictest, &cpushield_exe, scenario) {
            (Some(ct), Some(exe), Scenario::Loaded | Scenario::Shielded)
                if !stop.load(Ordering::Relaxed) =>
            {
                progress(report("cyclictest", 0.0, max_seen));
                let run = AnchorRun {
                    cpushield: exe.clone(),
                    cyclictest: ct.clone(),
                    cpu: cpus.first().unwrap_or(0),
                    duration: (config.duration / 2).max(Duration::from_secs(1)),
                    interval_us: (config.period.nominal_ns() / 1000).max(1),
                    priority: config.priority,
                    idle_poll: poll,
                    shielded: scenario.shield_up(),
                };
                match run.run() {
                    Ok(a) => Some(a),
                    Err(e) => {
                        notes.push(format!("cyclictest anchor failed: {e}"));
                        None
                    }
                }
            }
            _ => None,
        };

        // 4. Determinism, traced the same way.
        let determinism = if config.determinism_runs > 0 && !stop.load(Ordering::Relaxed) {
            let mut det = DeterminismConfig::new(cpus.clone());
            det.runs = config.determinism_runs;
            det.priority = Some(config.priority);
            det.placer = shield.as_ref().map(ShieldGuard::placer);
            det.work = match iterations {
                Some(n) => Work::Iterations(n),
                None => Work::Duration(config.determinism_work),
            };
            let det_trace = match threshold {
                Some(_) => ProbeTrace::start(
                    cpus,
                    config.determinism_work * 2 + Duration::from_secs(1),
                    config.trace_context.clone(),
                )
                .ok(),
                None => None,
            };
            if let Some(t) = &det_trace {
                det.observer = Some(t.observer());
            }
            let steal_before = steal_mark();
            let r = determinism::run(&det, stop, &mut |p| {
                progress(report("determinism", p.fraction, max_seen))
            });
            let det_steal = steal_since(&steal_before, cpus);
            drop(det);
            let r = r?;
            iterations.get_or_insert(r.settings.iterations);
            let split = det_trace.map(|t| t.finish_determinism(&r));
            Some((r, split, det_steal))
        } else {
            None
        };
        let batch = batch.and_then(|b| match b.finish() {
            Ok(w) => {
                notes.push(format!(
                    "the batch job ran on CPU(s) {cpus} by design, at {} ({:.1}% of the CPU, {:.0} ops/s): check's findings name its tasks (cpushield, cpushield-load, ld-compute)",
                    w.policy, w.cpu_share_pct, w.ops_per_s
                ));
                Some(w)
            }
            Err(e) => {
                batch_problems.push(format!("batch job: {e}"));
                None
            }
        });
        let elapsed = started.elapsed().as_secs_f64().max(1e-9);
        let irqs_per_s = interrupts_on(cpus).saturating_sub(irqs_before) as f64 / elapsed;
        let ops_after = counters(load.as_ref());
        let load_ops = if scenario.loaded() {
            ops_after
                .iter()
                .map(|(name, after)| {
                    let ops = after.saturating_sub(*ops_before.get(name).unwrap_or(&0));
                    LoadOps {
                        workload: name.clone(),
                        ops,
                        ops_per_s: ops as f64 / elapsed,
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut warnings: Vec<String> = Vec::new();
        let mut add_warning = |line: String| {
            if !warnings.contains(&line) {
                warnings.push(line);
            }
        };
        for w in &latency_report.run.warnings {
            add_warning(format!("{} (fix: {})", w.message, w.fix));
        }
        if let Some((d, _, _)) = &determinism {
            for w in &d.run.warnings {
                add_warning(format!("{} (fix: {})", w.message, w.fix));
            }
        }
        for p in batch_problems {
            add_warning(p);
        }
        results.push(ScenarioResult {
            name: scenario.name().into(),
            description: scenario.description().into(),
            measured_cpus: cpus.to_list(),
            shielded: scenario.shield_up() && *scenario != Scenario::UnshieldedCpu,
            advance_ns: advance.map(|a| a.as_nanos() as u64),
            latency,
            determinism: determinism
                .as_ref()
                .map(|(d, split, steal)| summarize_determinism(d, split.as_ref(), *steal)),
            load: load_ops,
            irqs_per_s,
            warnings,
            idle: Some(idle_choice),
            attribution,
            anchor,
            notes,
            findings,
            batch,
        });
        progress(report("done", 1.0, max_seen));
    }
    drop(shield);
    if let Some(l) = load {
        let _ = l.stop();
    }
    explain_advance(&mut results);
    let polled_everywhere = !results.is_empty()
        && results
            .iter()
            .all(|r| r.idle.as_ref().is_some_and(|i| i.policy == "poll"));
    let mut report = CompareReport {
        schema: SCHEMA.into(),
        created: rfc3339_now(),
        host: host_line(&online),
        scope: match config.scope {
            Scope::Namespace => "namespace (private PID namespace; IRQs moved for real)".into(),
            Scope::System => "system".into(),
        },
        load_profile: config.load_name.clone(),
        duration_s: config.duration.as_secs_f64(),
        idle_poll: polled_everywhere,
        idle_mode: match config.idle {
            IdleMode::Auto => "auto (calibrated per scenario)".into(),
            IdleMode::Poll => "poll".into(),
            IdleMode::Halt => "halt".into(),
        },
        interval_ns: config.period.nominal_ns(),
        scenarios: results,
        verdict: Verdict::default(),
        sharing: None,
    };
    report.judge();
    if let Some(first) = report.scenarios.first_mut() {
        first.warnings.extend(skipped);
        first.warnings.extend(general);
    }
    Ok(report)
}

/// Says why shielded+advance did worse than plain shielded, when it did and
/// the trace shows the reason: time outside the guest while spinning.
fn explain_advance(results: &mut [ScenarioResult]) {
    let shielded = results
        .iter()
        .find(|r| r.name == Scenario::Shielded.name())
        .map(|r| r.latency.max_ns);
    let Some(shielded_max) = shielded else {
        return;
    };
    for r in results
        .iter_mut()
        .filter(|r| r.name == Scenario::ShieldedAdvance.name())
    {
        if r.latency.max_ns <= shielded_max {
            continue;
        }
        if let Some(a) = &r.attribution {
            let line = if a.outside_worst_ns * 2 >= r.latency.max_ns {
                format!(
                    "worse than plain shielded ({} vs {}) because of time outside the guest (up to {} in one sample, steal {}): a spinning vCPU keeps running and competes on the host with the VM's own I/O emulation, as a polling one does; the advance itself worked (guest-caused worst {})",
                    human_ns(r.latency.max_ns),
                    human_ns(shielded_max),
                    human_ns(a.outside_worst_ns),
                    human_ns(a.steal_ns),
                    human_ns(a.guest_worst_ns)
                )
            } else {
                format!(
                    "worse than plain shielded ({} vs {}); guest-caused worst {}: see the cause table",
                    human_ns(r.latency.max_ns),
                    human_ns(shielded_max),
                    human_ns(a.guest_worst_ns)
                )
            };
            r.notes.push(line);
        }
    }
}

/// Merges the per-CPU latency distributions (counts summed, worst tail kept).
pub(crate) fn summarize_latency(r: &latency::LatencyReport) -> LatencySummary {
    let worst = r.cpus.iter().max_by_key(|c| c.latency.summary.max_ns);
    let Some(worst) = worst else {
        return LatencySummary::default();
    };
    let mut histogram: BTreeMap<u64, u64> = BTreeMap::new();
    for c in &r.cpus {
        for bin in &c.latency.histogram {
            *histogram.entry(bin.high_ns).or_default() += bin.count;
        }
    }
    let samples: u64 = r.cpus.iter().map(|c| c.samples).sum();
    let mean = if samples > 0 {
        r.cpus
            .iter()
            .map(|c| c.latency.summary.mean_ns * c.samples as f64)
            .sum::<f64>()
            / samples as f64
    } else {
        0.0
    };
    let d: &Distribution = &worst.latency;
    LatencySummary {
        samples,
        missed: r.cpus.iter().map(|c| c.missed_periods).sum(),
        min_ns: r
            .cpus
            .iter()
            .map(|c| c.latency.summary.min_ns)
            .min()
            .unwrap_or(0),
        mean_ns: mean,
        p50_ns: d.summary.percentiles.p50_ns,
        p99_ns: d.summary.percentiles.p99_ns,
        p99999_ns: d.summary.percentiles.p99_999_ns,
        max_ns: d.summary.max_ns,
        histogram: histogram.into_iter().collect(),
    }
}

pub(crate) fn summarize_determinism(
    r: &determinism::DeterminismReport,
    split: Option<&DeterminismSplit>,
    steal_ns: u64,
) -> DeterminismSummary {
    let worst = r
        .cpus
        .iter()
        .max_by(|a, b| a.jitter_percent.total_cmp(&b.jitter_percent));
    let Some(c) = worst else {
        return DeterminismSummary::default();
    };
    DeterminismSummary {
        runs: c.runs_ns.len() as u64,
        ideal_s: c.ideal_ns as f64 / 1e9,
        fastest_s: c.ideal_ns as f64 / 1e9,
        max_s: c.max_ns as f64 / 1e9,
        jitter_s: c.jitter_ns as f64 / 1e9,
        jitter_pct: c.jitter_percent,
        run_times_s: c.runs_ns.iter().map(|n| *n as f64 / 1e9).collect(),
        run_in_guest_s: split
            .map(|s| s.in_guest_ns.iter().map(|n| *n as f64 / 1e9).collect())
            .unwrap_or_default(),
        run_outside_s: split
            .map(|s| s.outside_ns.iter().map(|n| *n as f64 / 1e9).collect())
            .unwrap_or_default(),
        guest_jitter_pct: None,
        steal_s: Some(steal_ns as f64 / 1e9),
    }
}

pub(crate) fn host_line(online: &CpuSet) -> String {
    let release = RealKernel
        .read(Path::new("/proc/sys/kernel/osrelease"))
        .unwrap_or_default();
    let cpuinfo = RealKernel
        .read(Path::new("/proc/cpuinfo"))
        .unwrap_or_default();
    let model = cpushield_parse::cpuinfo::model_name(&cpuinfo).unwrap_or_default();
    let vm = if cpushield_parse::cpuinfo::runs_under_hypervisor(&cpuinfo) {
        ", virtual machine"
    } else {
        ""
    };
    format!(
        "Linux {}, {} CPUs ({model}){vm}",
        release.trim(),
        online.len()
    )
}

/// UTC now as RFC 3339 (whole seconds, `Z`), e.g. `2026-11-22T19:50:36Z`.
pub(crate) fn rfc3339_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339_from_unix_seconds(secs)
}

/// `secs` since the Unix epoch as RFC 3339 in UTC, whole seconds, `Z` suffix.
/// Past the end of jiff's range (late in year 9999) it prints the last
/// second jiff can represent.
fn rfc3339_from_unix_seconds(secs: u64) -> String {
    let ts = i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    // Drop any fraction (only Timestamp::MAX has one) so the text is always
    // whole seconds.
    let ts = jiff::Timestamp::from_second(ts.as_second()).unwrap_or(ts);
    ts.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_cpus_take_the_highest_core_and_keep_cpu0() {
        let online = CpuSet::first_n(4);
        let no_smt = |c: usize| CpuSet::from_cpus([c]);
        assert_eq!(default_cpus(&online, &no_smt).unwrap().to_list(), "3");
        let smt = |c: usize| CpuSet::from_cpus([c - c % 2, c - c % 2 + 1]);
        assert_eq!(default_cpus(&online, &smt).unwrap().to_list(), "2-3");
        assert!(default_cpus(&CpuSet::first_n(1), &no_smt).is_err());
        let all_one_core = |_c: usize| CpuSet::first_n(2);
        assert_eq!(
            default_cpus(&CpuSet::first_n(2), &all_one_core)
                .unwrap()
                .to_list(),
            "1"
        );
    }

    #[test]
    fn the_unshielded_probe_never_uses_cpu0() {
        assert_eq!(
            unshielded_probe_cpu(&CpuSet::first_n(2), &CpuSet::from_cpus([1])),
            None
        );
        assert_eq!(
            unshielded_probe_cpu(&CpuSet::first_n(4), &CpuSet::from_cpus([3])),
            Some(2)
        );
    }

    #[test]
    fn timestamps_are_rfc3339() {
        // Known epoch seconds -> known UTC text.
        assert_eq!(rfc3339_from_unix_seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_from_unix_seconds(1_000_000_000),
            "2001-09-09T01:46:40Z"
        );
        // End of a year: the last second of 1999 and the first of 2000.
        assert_eq!(
            rfc3339_from_unix_seconds(946_684_799),
            "1999-12-31T23:59:59Z"
        );
        assert_eq!(
            rfc3339_from_unix_seconds(946_684_800),
            "2000-01-01T00:00:00Z"
        );
        // Leap years: 2000 (divisible by 400) and 2024 have 29 February...
        assert_eq!(
            rfc3339_from_unix_seconds(951_782_400),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339_from_unix_seconds(1_709_164_800),
            "2024-02-29T00:00:00Z"
        );
        // ...2100 (divisible by 100, not 400) does not.
        assert_eq!(
            rfc3339_from_unix_seconds(4_107_542_399),
            "2100-02-28T23:59:59Z"
        );
        assert_eq!(
            rfc3339_from_unix_seconds(4_107_542_400),
            "2100-03-01T00:00:00Z"
        );
        // 2024 is 366 days long: its last day is day 366.
        assert_eq!(
            rfc3339_from_unix_seconds(1_735_689_599),
            "2024-12-31T23:59:59Z"
        );
        // Beyond the calendar's end the text stays in shape rather than panicking.
        let last = rfc3339_from_unix_seconds(u64::MAX);
        assert!(last.starts_with("9999-12-") && last.len() == 20, "{last}");
        // Now has the same shape.
        let t = rfc3339_now();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T');
    }
}
