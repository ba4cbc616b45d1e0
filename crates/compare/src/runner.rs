//! Runs the scenarios in order — idle; then the load; loaded; then the shield;
//! shielded, shielded+shared (with its batch job), shielded+advance,
//! unshielded-cpu — with the same probes in each,
//! and turns the measurements into a [`CompareReport`]. The shield is reset
//! and the load stopped on every way out (normal end, error, SIGINT/SIGTERM).
//!
//! Each scenario goes through the same phases, one method of [`Experiment`]
//! each: bring up what it needs (the load, the shield), choose how the CPUs
//! idle, choose the advance, start the batch job, probe latency (traced and
//! checked), run the anchor, probe determinism, finish the batch job, and sum
//! it up. [`Experiment::restore`] takes the shield down and stops the load,
//! at the end or when a phase fails.

use crate::anchor::{AnchorRun, RtlaRun};
use crate::audit::{fix_for, CheckWhile};
use crate::batch::BatchRun;
use crate::experiment::{CompareConfig, CompareError, Progress, Scope};
use crate::explain::ProbeTrace;
use crate::idle::{self, Calibration, IdleMode};
use crate::irqcount::interrupts_on;
use crate::lab::{BatchJob, Lab, LoadRun};
use crate::plan::{advance_from_shielded, plan_scenarios, threshold_from_idle_p99};
use crate::scenario::Scenario;
use crate::summary::{determinism_summary, host_line, latency_summary, rfc3339_now};
use cpushield_cpuset::{fmt_ns, CpuSet};
use cpushield_kernel::{Kernel, SchedParams};
use cpushield_load::{Load, LoadSpec};
use cpushield_measure::determinism::{DeterminismConfig, DeterminismReport, Work};
use cpushield_measure::latency::{LatencyConfig, LatencyReport, Length};
use cpushield_measure::procstat;
use cpushield_report::{
    Anchor, AttributionSummary, BatchWork, CheckFinding, CompareReport, DeterminismSummary,
    IdleChoice, LatencySummary, LoadOps, ScenarioResult, Verdict, SCHEMA,
};
use cpushield_rt::sched::PlaceFn;
use cpushield_shield::held::reset_failed;
use cpushield_shield::HeldShield;
use cpushield_trace::attribute::CauseKind;
use cpushield_trace::{TraceInstance, TraceOptions, WakeupWatch};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The fix for a task a trace from a nested PID namespace could not place.
const NESTED_FIX: &str =
    "cpushield compare from the initial PID namespace (in Kubernetes, hostPID: true)";

/// Checks everything that can be checked before the first change.
pub fn preflight(lab: &Lab, config: &CompareConfig) -> Result<CpuSet, CompareError> {
    let kernel = lab.host.kernel();
    if config.smt {
        crate::smt::choose_on(kernel, config.cpus.as_ref())?;
    }
    let online = cpushield_kernel::online_cpus(kernel)?;
    let cpus = match &config.cpus {
        Some(c) => c.clone(),
        None => cpushield_shield::default_cpus::default_cpus_on(kernel, &online)
            .map_err(CompareError::Refused)?,
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
        if !lab.is_root {
            return Err(CompareError::Refused(
                "the shielded scenarios move tasks and IRQs: run as root (or use --scenarios idle,loaded)".into(),
            ));
        }
        if !matches!(
            cpushield_shield::state::load_from(lab.host.store()),
            Ok(None)
        ) {
            return Err(CompareError::Refused(format!(
                "a shield is already up (state in {}): run `cpushield reset` first",
                lab.host.store().dir().display()
            )));
        }
        if cpushield_shield::layout::detect(kernel).is_none() {
            return Err(cpushield_shield::ShieldError::NoCpuset.into());
        }
    }
    if !config.smt && config.scenarios.iter().any(|s| s.loaded()) {
        // Its workloads, directory and disk; the CPUs are the door's own.
        Load::validate(lab.host.kernel(), &base_load_spec(config))?;
    }
    if config.duration.is_zero() {
        return Err(CompareError::Refused(
            "--duration must be longer than 0: use e.g. --duration 60s".into(),
        ));
    }
    Ok(cpus)
}

/// How long an anchor (cyclictest, rtla) measures: half the probe's time,
/// at least a second.
fn anchor_duration(config: &CompareConfig) -> Duration {
    (config.duration / 2).max(Duration::from_secs(1))
}

/// The anchors' period, in whole microseconds as their tools take it.
fn anchor_period_us(config: &CompareConfig) -> u64 {
    (config.period.nominal_ns() / 1000).max(1)
}

/// How many slices of a latency probe get a guest-caused worst case of their
/// own (the effect's spread): as many as determinism runs (`--runs`), at
/// least two.
fn effect_slices(config: &CompareConfig) -> usize {
    (config.determinism_runs as usize).max(2)
}

/// The nice value of the thread that runs the experiment while the load
/// runs: the trace reader's (still SCHED_OTHER, never real-time).
pub const ORCHESTRATION_NICE: i32 = -10;

/// Raises this thread (and the threads and tools it starts from now on) to
/// [`ORCHESTRATION_NICE`], after the load has started at the nice it was
/// given. At an equal nice, each of this thread's steps (a trace's setup and
/// teardown, starting an anchor, reading its output) waits behind every
/// worker of the load on the housekeeping CPUs: on a loaded machine that
/// stretched each scenario's setup from about a second to many, and the
/// measured windows with it. The measuring threads set their own real-time
/// policy, so this changes nothing on the measured CPUs. Returns the
/// scheduling to put back, or None when nothing was changed (not SCHED_OTHER,
/// already at least as high, or not permitted).
fn raise_above_load(kernel: &dyn Kernel) -> Option<SchedParams> {
    let saved = kernel.get_sched(0).ok()?;
    if saved.policy != libc::SCHED_OTHER as u32 || saved.nice <= ORCHESTRATION_NICE {
        return None;
    }
    let raised = SchedParams {
        nice: ORCHESTRATION_NICE,
        ..saved
    };
    kernel.set_sched(0, &raised).ok()?;
    Some(saved)
}

/// The load as asked for: its workloads and directory.
fn base_load_spec(config: &CompareConfig) -> LoadSpec {
    let mut spec = LoadSpec::new(config.load.clone());
    spec.dir = config.load_dir.clone();
    spec
}

/// The load: on every online CPU, the measured ones included (the main
/// thread that starts it keeps to the housekeeping CPUs, which it would
/// otherwise inherit), its supervisor on the housekeeping CPUs.
fn load_spec(config: &CompareConfig, online: &CpuSet, housekeeping: Option<&CpuSet>) -> LoadSpec {
    let mut spec = base_load_spec(config);
    spec.cpus = Some(online.clone());
    spec.supervisor_cpus = housekeeping.cloned();
    spec
}

/// The CPUs none of `config`'s scenarios measures when `shielded` are the
/// shielded CPUs (as [`preflight`] chose them), where cpushield's own threads
/// and processes stay; None when there are none, and for `--smt`, which
/// measures one CPU beside its sibling.
pub fn housekeeping(
    kernel: &dyn Kernel,
    config: &CompareConfig,
    shielded: &CpuSet,
) -> Result<Option<CpuSet>, CompareError> {
    if config.smt {
        return Ok(None);
    }
    let online = cpushield_kernel::online_cpus(kernel)?;
    let (planned, _) = plan_scenarios(&config.scenarios, &online, shielded);
    Ok(housekeeping_cpus(&online, &planned))
}

/// The CPUs none of the planned scenarios measures, where cpushield's own
/// threads stay (None: there are none).
fn housekeeping_cpus(online: &CpuSet, planned: &[(Scenario, CpuSet)]) -> Option<CpuSet> {
    let measured = planned
        .iter()
        .fold(CpuSet::default(), |all, (_, cpus)| all.union(cpus));
    let rest = online.difference(&measured);
    (!rest.is_empty()).then_some(rest)
}

/// The batch job's own time limit, should it never be stopped: well past
/// everything a scenario runs (calibration, latency, determinism).
fn batch_limit(config: &CompareConfig) -> Duration {
    config.duration * 3
        + config.determinism_work * config.determinism_runs.saturating_mul(3)
        + Duration::from_secs(120)
}

/// Steal time of `cpus` since `before`, ns (/proc/stat, USER_HZ resolution).
fn steal_since(kernel: &dyn Kernel, before: &Option<procstat::CpuTimes>, cpus: &CpuSet) -> u64 {
    match (before, procstat::snapshot(kernel)) {
        (Some(before), Ok(after)) => procstat::steal_ns(before, &after, cpus),
        _ => 0,
    }
}

fn steal_mark(kernel: &dyn Kernel) -> Option<procstat::CpuTimes> {
    procstat::snapshot(kernel).ok()
}

/// Keeps the calling thread, and so every thread and process it starts
/// later, to `cpus` (None: leaves it be); returns its affinity before, to
/// give back. The probes' threads place themselves on the measured CPUs;
/// nothing else of cpushield belongs there.
fn keep_to(kernel: &dyn Kernel, cpus: Option<&CpuSet>) -> Option<CpuSet> {
    let cpus = cpus?;
    let saved = kernel.get_affinity(0).ok()?;
    let target = if saved.intersects(cpus) {
        saved.intersection(cpus)
    } else {
        cpus.clone()
    };
    kernel.set_affinity(0, &target).ok()?;
    Some(saved)
}

/// Runs the experiment in `lab` ([`Lab::real`] for this machine). Stops
/// early (with what was measured) when `stop` is set.
pub fn run(
    lab: &Lab,
    config: &CompareConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<CompareReport, CompareError> {
    let shielded_cpus = preflight(lab, config)?;
    if config.smt {
        return crate::smt::run(lab, config, stop, progress);
    }
    let online = cpushield_kernel::online_cpus(lab.host.kernel())?;
    let (planned, skipped) = plan_scenarios(&config.scenarios, &online, &shielded_cpus);
    let mut general = Vec::new();
    let housekeeping = housekeeping_cpus(&online, &planned);
    let plan = Plan {
        shielded_cpus,
        online: online.clone(),
        housekeeping,
        total: planned.len(),
    };
    let mut experiment = Experiment::new(lab, config, stop, progress, plan);
    experiment.find_anchor(&mut general);
    experiment.threshold = experiment.spike_threshold(planned.first())?;
    for (index, (scenario, cpus)) in planned.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let at = At {
            scenario: *scenario,
            index,
            total: planned.len(),
        };
        let result = experiment.scenario(at, cpus)?;
        experiment.results.push(result);
    }
    if experiment.osnoise_absent {
        general.push(cpushield_trace::summary::OSNOISE_ABSENT.to_string());
    }
    if experiment.nested_namespace {
        general.push(cpushield_trace::summary::NESTED_NAMESPACE.to_string());
    }
    let mut results = std::mem::take(&mut experiment.results);
    // A shield that did not come down is the run's error: the machine is not
    // as it was. (When a phase fails above, dropping the experiment restores
    // it and prints a failure.)
    experiment.restore()?;
    drop(experiment);
    explain_advance(&mut results);
    Ok(compare_report(
        lab, config, &online, results, skipped, general,
    ))
}

/// Where the experiment is, for its progress reports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At {
    /// The scenario run.
    pub scenario: Scenario,
    /// Its place in the run, from 0.
    pub index: usize,
    /// How many the run has.
    pub total: usize,
}

impl At {
    /// The progress report of `phase` at this place.
    pub(crate) fn progress(self, phase: &'static str, fraction: f64, max_ns: u64) -> Progress {
        Progress {
            scenario: self.scenario,
            index: self.index,
            total: self.total,
            phase,
            fraction,
            max_ns,
        }
    }
}

/// The latency phase's outcome.
struct LatencyPhase {
    report: LatencyReport,
    summary: LatencySummary,
    attribution: Option<AttributionSummary>,
    findings: Vec<CheckFinding>,
}

/// What an experiment shields and where cpushield's own work stays.
pub(crate) struct Plan {
    /// The CPUs the shielded scenarios shield.
    pub shielded_cpus: CpuSet,
    /// The online CPUs.
    pub online: CpuSet,
    /// Where cpushield's own threads and processes stay (None: anywhere).
    pub housekeeping: Option<CpuSet>,
    /// How many scenarios the run has.
    pub total: usize,
}

/// A running experiment: what is up on the machine and what was measured.
/// Dropped, it restores the machine (see [`Experiment::restore`]). The
/// scenarios of `compare` and the sibling states of `compare --smt` are run
/// by its phases.
pub(crate) struct Experiment<'a> {
    lab: &'a Lab,
    config: &'a CompareConfig,
    stop: &'a AtomicBool,
    progress: &'a mut dyn FnMut(Progress),
    shielded_cpus: CpuSet,
    /// The calling thread's affinity before it kept to the housekeeping
    /// CPUs (given back at the end).
    own_affinity: Option<CpuSet>,
    /// This thread's scheduling before it was raised above the load's
    /// ([`raise_above_load`]); put back when the load stops.
    own_sched: Option<SchedParams>,
    /// The trace instance every traced probe and anchor records into, made
    /// at the first ([`Self::lent_trace`]).
    trace: Option<Arc<TraceInstance>>,
    /// On cgroup v2, the cgroup this process was in before it moved to the
    /// root cgroup, from where one of its threads can join the shield alone.
    own_cgroup: Option<(cpushield_shield::layout::CgroupLayout, String)>,
    online: CpuSet,
    /// Where cpushield's own threads and processes stay.
    housekeeping: Option<CpuSet>,
    total: usize,
    shield: Option<HeldShield>,
    load: Option<Box<dyn LoadRun>>,
    /// What the scenario that raised the shield tells of pending IRQ moves.
    shield_notes: Vec<String>,
    /// The determinism probe's loop count, calibrated once, then fixed.
    iterations: Option<u64>,
    /// The spike threshold of the attribution (None: no trace).
    threshold: Option<Duration>,
    cyclictest: Option<PathBuf>,
    /// rtla, the second anchor, where the kernel has the timerlat tracer.
    rtla: Option<PathBuf>,
    /// A trace found no osnoise events to attribute with (said once).
    osnoise_absent: bool,
    /// A trace ran from a nested PID namespace (said once).
    nested_namespace: bool,
    results: Vec<ScenarioResult>,
}

impl Drop for Experiment<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("cpushield: error: {}", reset_failed(&e));
        }
    }
}

impl<'a> Experiment<'a> {
    /// An experiment of `config` in `lab` by `plan`, nothing up yet; this
    /// thread (and what it starts) keeps to the plan's housekeeping CPUs.
    pub(crate) fn new(
        lab: &'a Lab,
        config: &'a CompareConfig,
        stop: &'a AtomicBool,
        progress: &'a mut dyn FnMut(Progress),
        plan: Plan,
    ) -> Self {
        Experiment {
            lab,
            config,
            stop,
            progress,
            shielded_cpus: plan.shielded_cpus,
            own_affinity: keep_to(lab.host.kernel(), plan.housekeeping.as_ref()),
            own_sched: None,
            trace: None,
            own_cgroup: None,
            online: plan.online,
            housekeeping: plan.housekeeping,
            total: plan.total,
            shield: None,
            load: None,
            shield_notes: Vec::new(),
            iterations: None,
            threshold: None,
            cyclictest: None,
            rtla: None,
            osnoise_absent: false,
            nested_namespace: false,
            results: Vec::new(),
        }
    }

    /// Whether the run was asked to stop.
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Reports progress.
    pub(crate) fn tell(&mut self, progress: Progress) {
        (self.progress)(progress);
    }

    /// How the probes' threads reach the measured CPUs now.
    fn placer(&self) -> Option<PlaceFn> {
        self.shield
            .is_some()
            .then(|| self.lab.runs.shield_placement())
    }

    /// Stops the load, then takes the shield down: a load still forking
    /// while reset moves its tasks back would race it (its children are
    /// born in the shield's cgroups). Idempotent.
    pub(crate) fn restore(&mut self) -> Result<(), CompareError> {
        if let Some(trace) = self.trace.take() {
            for e in trace.close() {
                eprintln!("cpushield: warning: {e}");
            }
        }
        if let Some(load) = self.load.take() {
            load.stop();
        }
        if let Some(saved) = self.own_sched.take() {
            let _ = self.lab.host.kernel().set_sched(0, &saved);
        }
        let lowered = match self.shield.take() {
            Some(shield) => shield.lower().map(|_| ()).map_err(CompareError::from),
            None => Ok(()),
        };
        let kernel = self.lab.host.kernel();
        if let Some((layout, cgroup)) = self.own_cgroup.take() {
            if let Err(e) = cpushield_shield::placement::leave_root_cgroup(kernel, &layout, &cgroup)
            {
                eprintln!(
                    "cpushield: warning: could not move this process back to cgroup {cgroup}: {e}"
                );
            }
        }
        if let Some(saved) = self.own_affinity.take() {
            let _ = kernel.set_affinity(0, &saved);
        }
        lowered
    }

    /// The trace instance of the run, made for `cpus` when none is yet (its
    /// buffers grow to each later scenario's CPUs): set up once, its events
    /// stay enabled from one traced phase to the next, each of which would
    /// otherwise take seconds on a loaded machine to enable and disable
    /// them ([`TraceInstance`]). None when attribution is off, or when it
    /// cannot be made: the phase's own session then says why.
    fn lent_trace(&mut self, cpus: &CpuSet) -> Option<Arc<TraceInstance>> {
        self.threshold?;
        if self.trace.is_none() {
            self.trace = TraceInstance::create(
                self.lab.host.shared_kernel(),
                cpus,
                &TraceOptions::default(),
            )
            .ok()
            .map(Arc::new);
        }
        self.trace.clone()
    }

    /// Looks for cyclictest (and rtla, where the kernel has timerlat) when
    /// the anchor is asked for; says so when one is missing.
    fn find_anchor(&mut self, general: &mut Vec<String>) {
        if !self.config.anchor {
            return;
        }
        self.cyclictest = self.lab.runs.cyclictest();
        if self.cyclictest.is_none() {
            general.push(
                "no cyclictest anchor: rt-tests is not installed (apt-get install rt-tests)"
                    .to_string(),
            );
        }
        self.rtla = self.lab.runs.rtla(general);
    }

    /// The spike threshold, from the unloaded machine before anything starts.
    fn spike_threshold(
        &mut self,
        first: Option<&(Scenario, CpuSet)>,
    ) -> Result<Option<Duration>, CompareError> {
        let config = self.config;
        match (config.attribute, config.attribute_above, first) {
            (false, _, _) => Ok(None),
            (true, Some(t), _) => Ok(Some(t)),
            (true, None, None) => Ok(None),
            (true, None, Some((scenario, cpus))) => {
                let at = At {
                    scenario: *scenario,
                    index: 0,
                    total: self.total,
                };
                self.tell(at.progress("baseline", 0.0, 0));
                let length = idle::calibration_length(config.duration);
                let base = self.short_probe(cpus, false, length)?;
                Ok(Some(threshold_from_idle_p99(base.p99_ns)))
            }
        }
    }

    /// One scenario, phase by phase.
    pub(crate) fn scenario(
        &mut self,
        at: At,
        cpus: &CpuSet,
    ) -> Result<ScenarioResult, CompareError> {
        let scenario = at.scenario;
        self.bring_up(at)?;
        let mut notes = std::mem::take(&mut self.shield_notes);
        let idle_choice = self.choose_idle(at, cpus)?;
        let poll = idle_choice.policy == "poll";
        let advance = self.choose_advance(scenario, &mut notes);
        let mut problems = Vec::new();
        let batch = self.start_batch(at, cpus, &mut problems);
        let ops_before = self.load_counters();
        let irqs_before = interrupts_on(self.lab.host.kernel(), cpus);
        let started = Instant::now();
        let latency = self.probe_latency(at, cpus, poll, advance, &mut notes)?;
        let max_seen = latency.report.max_ns();
        let anchor = self.run_anchor(at, cpus, poll, max_seen, &mut notes);
        let rtla = self.run_rtla(at, cpus, poll, max_seen, &mut notes);
        let determinism = self.probe_determinism(at, cpus, max_seen)?;
        let batch = finish_batch(batch, cpus, &mut notes, &mut problems);
        let elapsed = started.elapsed().as_secs_f64().max(1e-9);
        let irqs_per_s = interrupts_on(self.lab.host.kernel(), cpus).saturating_sub(irqs_before)
            as f64
            / elapsed;
        let load = if scenario.loaded() {
            load_ops(&ops_before, &self.load_counters(), elapsed)
        } else {
            Vec::new()
        };
        let determinism_report = determinism.as_ref().map(|(r, _)| r);
        let warnings = scenario_warnings(&latency.report, determinism_report, problems);
        self.tell(at.progress("done", 1.0, max_seen));
        Ok(ScenarioResult {
            name: scenario.name().into(),
            description: scenario.description().into(),
            measured_cpus: cpus.to_list(),
            shielded: scenario.shield_up() && scenario != Scenario::UnshieldedCpu,
            advance_ns: advance.map(|a| a.as_nanos() as u64),
            latency: latency.summary,
            determinism: determinism.map(|(_, summary)| summary),
            load,
            irqs_per_s,
            warnings,
            idle: Some(idle_choice),
            attribution: latency.attribution,
            anchor,
            rtla,
            notes,
            findings: latency.findings,
            batch,
        })
    }

    /// Starts the load and raises the shield when the scenario is the first
    /// to need them; they stay up for the scenarios after it. `--smt` runs
    /// no load: the sibling's spinner is its only disturbance.
    pub(crate) fn bring_up(&mut self, at: At) -> Result<(), CompareError> {
        if at.scenario.loaded() && !self.config.smt && self.load.is_none() {
            self.tell(at.progress("load", 0.0, 0));
            let spec = load_spec(self.config, &self.online, self.housekeeping.as_ref());
            self.load = Some(self.lab.runs.start_load(&spec)?);
            self.own_sched = raise_above_load(self.lab.host.kernel());
            // Let the load reach its steady state before measuring.
            std::thread::sleep(Duration::from_secs(2));
        }
        if at.scenario.shield_up() && self.shield.is_none() {
            self.tell(at.progress("shield", 0.0, 0));
            self.shield = Some(self.lab.raise_shield(&self.shielded_cpus)?);
            // A probe's thread joins the shield alone (so that the rest of
            // this process stays on the housekeeping CPUs); on cgroup v2 only
            // from the root cgroup. Should the move fail, the placement says
            // so with its remedy.
            let kernel = self.lab.host.kernel();
            if let Some(layout) = cpushield_shield::layout::detect(kernel) {
                if let Ok(Some(cgroup)) =
                    cpushield_shield::placement::enter_root_cgroup(kernel, &layout)
                {
                    self.own_cgroup = Some((layout, cgroup));
                }
            }
            // The partition's change (6.1) and the move to the root cgroup
            // give this process's threads the root's CPUs, the unshielded one
            // that unshielded-cpu measures included: pinned again after both.
            // No measuring thread runs yet; each scenario starts its own later.
            if let Some(cpus) = &self.housekeeping {
                cpushield_shield::placement::pin_own_threads(kernel, cpus);
            }
            self.shield_notes = crate::pending::settle(
                self.lab.host.kernel(),
                &self.shielded_cpus,
                crate::pending::WAIT,
            );
        }
        if let (Some(_), Some(dir)) = (&self.shield, self.load.as_ref().and_then(|l| l.run_dir())) {
            self.lab.record_load_dir(&dir);
        }
        Ok(())
    }

    /// How the CPUs idle: measured (halting against polling), or as asked.
    fn choose_idle(&mut self, at: At, cpus: &CpuSet) -> Result<IdleChoice, CompareError> {
        Ok(match self.config.idle {
            _ if at.scenario == Scenario::ShieldedShared => idle::shared(),
            IdleMode::Auto => {
                let length = idle::calibration_length(self.config.duration);
                self.tell(at.progress("idle calibration", 0.0, 0));
                let halt = self.short_probe(cpus, false, length)?;
                self.tell(at.progress("idle calibration", 0.5, halt.max_ns));
                let poll = self.short_probe(cpus, true, length)?;
                idle::decide(halt, poll, length.as_secs_f64())
            }
            mode => idle::fixed(mode),
        })
    }

    /// One short latency run for calibration: worst case, p99 and steal.
    fn short_probe(
        &self,
        cpus: &CpuSet,
        poll: bool,
        length: Duration,
    ) -> Result<Calibration, CompareError> {
        let mut lat = self.latency_config(cpus, length, poll);
        lat.placer = self.placer();
        let kernel = self.lab.host.kernel();
        let before = steal_mark(kernel);
        let r = self.lab.runs.latency(&lat, self.stop, &mut |_| {})?;
        let summary = latency_summary(&r);
        Ok(Calibration {
            max_ns: summary.max_ns,
            p99_ns: summary.p99_ns,
            steal_ns: steal_since(kernel, &before, cpus),
        })
    }

    fn latency_config(&self, cpus: &CpuSet, length: Duration, poll: bool) -> LatencyConfig {
        let mut lat = LatencyConfig::new(cpus.clone());
        lat.period = self.config.period;
        lat.length = Length::Duration(length);
        lat.priority = Some(self.config.priority);
        lat.idle_poll = poll;
        lat
    }

    /// The advance of shielded+advance: as asked, or from the shielded
    /// scenario's measured wakeup latency (100 us without one).
    fn choose_advance(&self, scenario: Scenario, notes: &mut Vec<String>) -> Option<Duration> {
        if scenario != Scenario::ShieldedAdvance {
            return None;
        }
        if let Some(a) = self.config.advance {
            return Some(a);
        }
        let period_ns = self.config.period.nominal_ns();
        let chosen = self
            .results
            .iter()
            .find(|r| r.name == Scenario::Shielded.name())
            .map(|r| advance_from_shielded(&r.latency, period_ns));
        Some(match chosen {
            Some(a) => {
                notes.push(format!(
                    "advance {} chosen by measurement: the shielded scenario's 99.999th percentile wakeup latency (spinning {:.0}% of each period)",
                    fmt_ns(a.as_nanos() as u64),
                    a.as_nanos() as f64 * 100.0 / period_ns as f64
                ));
                a
            }
            None => Duration::from_micros(100),
        })
    }

    /// The batch job of shielded+shared, from before the probes to after them.
    fn start_batch(
        &mut self,
        at: At,
        cpus: &CpuSet,
        problems: &mut Vec<String>,
    ) -> Option<Box<dyn BatchJob>> {
        if at.scenario != Scenario::ShieldedShared {
            return None;
        }
        let Some(exe) = self.lab.runs.cpushield_exe() else {
            problems.push("no batch job: the cpushield binary could not be found".into());
            return None;
        };
        self.tell(at.progress("batch", 0.0, 0));
        let run = BatchRun {
            cpushield: exe,
            cpus: cpus.clone(),
            dir: self.config.load_dir.clone(),
            limit: batch_limit(self.config),
        };
        match self.lab.runs.start_batch(&run) {
            Ok(b) => Some(b),
            Err(e) => {
                problems.push(format!("no batch job: {e}"));
                None
            }
        }
    }

    fn load_counters(&self) -> BTreeMap<String, u64> {
        self.load
            .as_ref()
            .map(|l| l.counters().into_iter().collect())
            .unwrap_or_default()
    }

    /// The latency probe, traced when spikes are attributed, with the check
    /// watching the CPUs while the shield is up.
    fn probe_latency(
        &mut self,
        at: At,
        cpus: &CpuSet,
        poll: bool,
        advance: Option<Duration>,
        notes: &mut Vec<String>,
    ) -> Result<LatencyPhase, CompareError> {
        let config = self.config;
        let kernel = self.lab.host.kernel();
        let mut lat = self.latency_config(cpus, config.duration, poll);
        lat.advance = advance;
        lat.placer = self.placer();
        let instance = self.lent_trace(cpus);
        let mut trace = self.threshold.and_then(|_| {
            ProbeTrace::start(
                self.lab.host.shared_kernel(),
                instance.as_ref(),
                cpus,
                Duration::from_secs(2),
                config.trace_context.clone(),
            )
            .map_err(|e| notes.push(format!("not traced: {e}")))
            .ok()
        });
        if let (Some(t), Some(th)) = (trace.as_mut(), self.threshold) {
            lat.spikes = Some(t.spike_tap(th));
            lat.observer = Some(t.observer());
        }
        let checker = config
            .audit
            .clone()
            .filter(|_| at.scenario.shield_up() && at.scenario != Scenario::UnshieldedCpu)
            .map(|audit| CheckWhile::start(audit, cpus, config.duration));
        let steal_before = steal_mark(kernel);
        let progress = &mut *self.progress;
        let report = self.lab.runs.latency(&lat, self.stop, &mut |p| {
            progress(at.progress("latency", p.fraction, p.max_ns))
        });
        let steal = steal_since(kernel, &steal_before, cpus);
        drop(lat);
        let findings = checker.map(CheckWhile::finish).unwrap_or_default();
        let report = report?;
        let summary = latency_summary(&report);
        let attribution = match (trace, self.threshold) {
            (Some(t), Some(th)) => {
                self.tell(at.progress("explaining", 1.0, report.max_ns()));
                let (mut attribution, trace) = t.finish_latency(
                    th.as_nanos() as u64,
                    summary.max_ns,
                    report.spikes_dropped,
                    steal,
                    effect_slices(config),
                );
                if !trace.osnoise_events {
                    self.osnoise_absent = true;
                }
                if trace.nested_namespace {
                    self.nested_namespace = true;
                }
                self.name_fixes(&mut attribution, cpus, &findings);
                Some(attribution)
            }
            _ => None,
        };
        Ok(LatencyPhase {
            report,
            summary,
            attribution,
            findings,
        })
    }

    /// Each guest cause's fix: the one check found while the probe ran, or
    /// the one it names for such a cause.
    fn name_fixes(
        &self,
        attribution: &mut AttributionSummary,
        cpus: &CpuSet,
        findings: &[CheckFinding],
    ) {
        let config = self.config;
        let namespace_scope = matches!(config.scope, Scope::Namespace);
        for row in attribution.causes.iter_mut().filter(|r| r.guest) {
            if self.nested_namespace && row.kind == CauseKind::OtherNamespace.word() {
                row.fix = Some(NESTED_FIX.into());
                continue;
            }
            row.fix = fix_for(&row.name, findings).or_else(|| {
                config
                    .audit
                    .as_ref()
                    .and_then(|a| a.fix_for_cause(&row.kind, &row.name, cpus, namespace_scope))
            });
        }
    }

    /// Runs an anchor with the measured CPUs traced when spikes are
    /// attributed: the kernel's record of when each wakeup of the anchor's
    /// measuring thread (named `thread`) was due and when it ran tells how
    /// late it was, and every one later than the threshold is explained by
    /// the probe's own rules, so the anchor's worst case caused inside the
    /// guest can be set beside the verdict's.
    fn traced_anchor(
        &mut self,
        cpus: &CpuSet,
        thread: &str,
        tool: &str,
        notes: &mut Vec<String>,
        run: impl FnOnce(&Lab) -> Result<Anchor, String>,
    ) -> Result<Anchor, String> {
        let instance = self.lent_trace(cpus);
        let kernel = self.lab.host.kernel();
        let threshold = self.threshold.map(|t| t.as_nanos() as u64);
        let trace = threshold.and_then(|threshold_ns| {
            ProbeTrace::start_anchor(
                self.lab.host.shared_kernel(),
                instance.as_ref(),
                cpus,
                self.config.trace_context.clone(),
                WakeupWatch {
                    comm_prefixes: vec![thread.to_string()],
                    threshold_ns,
                },
            )
            .map_err(|e| notes.push(format!("{tool} not traced: {e}")))
            .ok()
        });
        let steal_before = steal_mark(kernel);
        let result = run(self.lab);
        let steal = steal_since(kernel, &steal_before, cpus);
        let (mut anchor, trace, threshold_ns) = match (result, trace, threshold) {
            (Ok(a), Some(t), Some(th)) => (a, t, th),
            (result, _, _) => return result,
        };
        let (mut attribution, wakeups) = trace.finish_anchor(threshold_ns, steal);
        if wakeups == 0 {
            notes.push(format!(
                "{tool} not traced: none of its wakeups was found in the trace (no thread named {thread}* switched in after its timer)"
            ));
            return Ok(anchor);
        }
        self.name_fixes(&mut attribution, cpus, &[]);
        anchor.traced_wakeups = Some(wakeups);
        anchor.attribution = Some(attribution);
        Ok(anchor)
    }

    /// Whether the anchors run in this scenario: the loaded and shielded
    /// ones, unless the run was stopped.
    fn anchor_due(&self, at: At) -> bool {
        matches!(at.scenario, Scenario::Loaded | Scenario::Shielded) && !self.stopped()
    }

    /// The cyclictest anchor of the loaded and shielded scenarios, placed
    /// like the probe.
    fn run_anchor(
        &mut self,
        at: At,
        cpus: &CpuSet,
        poll: bool,
        max_seen: u64,
        notes: &mut Vec<String>,
    ) -> Option<Anchor> {
        if !self.anchor_due(at) {
            return None;
        }
        let cyclictest = self.cyclictest.clone()?;
        let cpushield = self.lab.runs.cpushield_exe()?;
        self.tell(at.progress("cyclictest", 0.0, max_seen));
        let config = self.config;
        let run = AnchorRun {
            cpushield,
            cyclictest,
            cpu: cpus.first().unwrap_or(0),
            duration: anchor_duration(config),
            interval_us: anchor_period_us(config),
            priority: config.priority,
            idle_poll: poll,
            shielded: at.scenario.shield_up(),
        };
        self.traced_anchor(cpus, "cyclictest", "cyclictest", notes, |lab| {
            lab.runs.run_anchor(&run)
        })
        .map_err(|e| notes.push(format!("cyclictest anchor failed: {e}")))
        .ok()
    }

    /// The kernel's own measurement beside the cyclictest anchor, where it
    /// has timerlat: `rtla timerlat` on the measured CPU, idle-polled like
    /// the probe.
    fn run_rtla(
        &mut self,
        at: At,
        cpus: &CpuSet,
        poll: bool,
        max_seen: u64,
        notes: &mut Vec<String>,
    ) -> Option<Anchor> {
        if !self.anchor_due(at) {
            return None;
        }
        let rtla = self.rtla.clone()?;
        self.tell(at.progress("rtla timerlat", 0.0, max_seen));
        let config = self.config;
        let run = RtlaRun {
            rtla,
            cpu: cpus.first().unwrap_or(0),
            duration: anchor_duration(config),
            period_us: anchor_period_us(config),
            priority: config.priority,
        };
        let poll_placement = poll.then(|| self.placer());
        self.traced_anchor(cpus, "timerlat/", "rtla timerlat", notes, |lab| {
            lab.runs.run_rtla(&run, poll_placement)
        })
        .map_err(|e| notes.push(format!("rtla timerlat anchor failed: {e}")))
        .ok()
    }

    /// The determinism probe, traced the same way; its loop count is
    /// calibrated in the first scenario and fixed after.
    fn probe_determinism(
        &mut self,
        at: At,
        cpus: &CpuSet,
        max_seen: u64,
    ) -> Result<Option<(DeterminismReport, DeterminismSummary)>, CompareError> {
        let config = self.config;
        if config.determinism_runs == 0 || self.stopped() {
            return Ok(None);
        }
        let kernel = self.lab.host.kernel();
        let mut det = DeterminismConfig::new(cpus.clone());
        det.runs = config.determinism_runs;
        det.priority = Some(config.priority);
        det.placer = self.placer();
        det.work = match self.iterations {
            Some(n) => Work::Iterations(n),
            None => Work::Duration(config.determinism_work),
        };
        let instance = self.lent_trace(cpus);
        let trace = self.threshold.and_then(|_| {
            ProbeTrace::start(
                self.lab.host.shared_kernel(),
                instance.as_ref(),
                cpus,
                config.determinism_work * 2 + Duration::from_secs(1),
                config.trace_context.clone(),
            )
            .ok()
        });
        if let Some(t) = &trace {
            det.observer = Some(t.observer());
        }
        let steal_before = steal_mark(kernel);
        let progress = &mut *self.progress;
        let report = self.lab.runs.determinism(&det, self.stop, &mut |p| {
            progress(at.progress("determinism", p.fraction, max_seen))
        });
        let steal = steal_since(kernel, &steal_before, cpus);
        drop(det);
        let report = report?;
        self.iterations.get_or_insert(report.settings.iterations);
        let split = trace.map(|t| t.finish_determinism(&report));
        let summary = determinism_summary(&report, split.as_ref(), steal);
        Ok(Some((report, summary)))
    }
}

/// Stops the batch job and says what it did, or why it did not report.
fn finish_batch(
    batch: Option<Box<dyn BatchJob>>,
    cpus: &CpuSet,
    notes: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> Option<BatchWork> {
    match batch?.finish() {
        Ok(w) => {
            notes.push(format!(
                "the batch job ran on CPU(s) {cpus} by design, at {} ({:.1}% of the CPU, {:.0} ops/s): check's findings name its tasks (cpushield, cpushield-load, ld-compute)",
                w.policy, w.cpu_share_pct, w.ops_per_s
            ));
            Some(w)
        }
        Err(e) => {
            problems.push(format!("batch job: {e}"));
            None
        }
    }
}

/// What each workload of the load did between two counts (pure).
fn load_ops(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    elapsed_s: f64,
) -> Vec<LoadOps> {
    after
        .iter()
        .map(|(name, after)| {
            let ops = after.saturating_sub(*before.get(name).unwrap_or(&0));
            LoadOps {
                workload: name.clone(),
                ops,
                ops_per_s: ops as f64 / elapsed_s,
            }
        })
        .collect()
}

/// The probes' warnings, each with its fix, and the batch job's problems,
/// every line once.
fn scenario_warnings(
    latency: &LatencyReport,
    determinism: Option<&DeterminismReport>,
    problems: Vec<String>,
) -> Vec<String> {
    let probe_warnings = latency
        .run
        .warnings
        .iter()
        .chain(determinism.into_iter().flat_map(|d| d.run.warnings.iter()))
        .map(|w| format!("{} (fix: {})", w.message, w.fix));
    let mut warnings: Vec<String> = Vec::new();
    for line in probe_warnings.chain(problems) {
        if !warnings.contains(&line) {
            warnings.push(line);
        }
    }
    warnings
}

/// The report of the scenarios run, judged; what was skipped and what
/// holds for the whole run lead the first scenario's warnings.
fn compare_report(
    lab: &Lab,
    config: &CompareConfig,
    online: &CpuSet,
    results: Vec<ScenarioResult>,
    skipped: Vec<String>,
    general: Vec<String>,
) -> CompareReport {
    let polled_everywhere = !results.is_empty()
        && results
            .iter()
            .all(|r| r.idle.as_ref().is_some_and(|i| i.policy == "poll"));
    let mut report = CompareReport {
        schema: SCHEMA.into(),
        created: rfc3339_now(),
        host: host_line(lab.host.kernel(), online),
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
    report
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
                    fmt_ns(r.latency.max_ns),
                    fmt_ns(shielded_max),
                    fmt_ns(a.outside_worst_ns),
                    fmt_ns(a.steal_ns),
                    fmt_ns(a.guest_worst_ns)
                )
            } else {
                format!(
                    "worse than plain shielded ({} vs {}); guest-caused worst {}: see the cause table",
                    fmt_ns(r.latency.max_ns),
                    fmt_ns(shielded_max),
                    fmt_ns(a.guest_worst_ns)
                )
            };
            r.notes.push(line);
        }
    }
}
