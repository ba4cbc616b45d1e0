//! A tuning session: every available knob measured against the starting
//! point in interleaved trials, then the winning knobs together. The
//! machine is reached through a [`Bench`] (the real one raises the shield,
//! runs the probe under load, and journals in the shield's saved state; a
//! test's runs on `FakeKernel`), so the order of journal, change, trial and
//! restore is the same code in both.

use crate::decide::{self, Arm, Choice, Decision, Trial, TrialSample, Verdict};
use crate::knob::{Change, Knob, KnobId, ProbeChange};
use crate::schedule::{teardown, Planner, Slot, FINAL_SHARE, FIRST_OVERHEAD};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// How the probe runs in one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSetup {
    /// A SCHED_IDLE spinner keeps each measured CPU polling.
    pub idle_poll: bool,
    /// /dev/cpu_dma_latency held at 0 for the trial.
    pub hold_dma_latency: bool,
    /// SCHED_FIFO priority.
    pub priority: u8,
}

/// What a session needs of the machine.
pub trait Bench {
    /// The door to the kernel, for the knobs' files.
    fn kernel(&self) -> &dyn Kernel;
    /// Records durably what each file held before tune first changes it
    /// (path, value to write back), so `reset` restores it even after a
    /// SIGKILL. Called before the change.
    fn journal(&mut self, files: &[(PathBuf, String)]) -> io::Result<()>;
    /// Keeps IRQs off `cpus` too (`on`), or lets them back, through the shield.
    fn irq_shield(&mut self, cpus: &CpuSet, on: bool) -> io::Result<()>;
    /// Gives the shield's cpuset the memory nodes `nodes`, through the
    /// shield (its cgroup, which a reset removes, is the only one changed).
    fn shield_mems(&mut self, nodes: &CpuSet) -> io::Result<()>;
    /// Runs one trial of the probe.
    fn trial(&mut self, length: Duration, probe: &ProbeSetup) -> Result<TrialSample, String>;
    /// Time since the run began (setup included).
    fn elapsed(&self) -> Duration;
    /// Whether the user asked to stop (Ctrl-C).
    fn stopped(&self) -> bool;
}

/// What a session is asked to do.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The measured (shielded) CPUs.
    pub cpus: CpuSet,
    /// The whole run's budget, setup and teardown included.
    pub budget: Duration,
    /// The probe's priority at the starting point.
    pub priority: u8,
}

/// What became of one knob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum Outcome {
    /// This machine lacks it.
    NotAvailable {
        /// Why.
        reason: String,
    },
    /// It was not measured (no time left, its switch too slow for the
    /// time left, or stopped).
    NotMeasured {
        /// Why.
        reason: String,
    },
    /// Its candidate could not be put in place.
    Failed {
        /// The error.
        reason: String,
    },
    /// Measured.
    Measured(Comparison),
}

/// One comparison against the starting point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Each trial's length, ns.
    pub trial_ns: u64,
    /// The trials in run order.
    pub trials: Vec<Trial>,
    /// What they say.
    pub verdict: Verdict,
}

/// A knob and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnobResult {
    /// The knob as found on this machine.
    pub knob: Knob,
    /// What became of it.
    pub outcome: Outcome,
}

impl KnobResult {
    /// Its decision, when it was measured.
    pub fn decision(&self) -> Option<Decision> {
        match &self.outcome {
            Outcome::Measured(c) => Some(c.verdict.decision),
            _ => None,
        }
    }
}

/// A set of knobs measured together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetResult {
    /// The knobs.
    pub knobs: Vec<KnobId>,
    /// The comparison with the starting point.
    pub comparison: Comparison,
}

/// A whole session's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionResult {
    /// The measured CPUs.
    pub cpus: CpuSet,
    /// Every knob of the catalog.
    pub knobs: Vec<KnobResult>,
    /// The sets measured together.
    pub sets: Vec<SetResult>,
    /// The winning set.
    pub choice: Choice,
    /// Stopped by the user before the end.
    pub interrupted: bool,
    /// Problems met on the way (a file that could not be written back).
    pub problems: Vec<String>,
}

/// Progress, for a bar with the time left.
#[derive(Debug, Clone)]
pub struct Progress {
    /// What is measured (`timer-migration`, `together: a + b`).
    pub what: String,
    /// Trial number (1-based) of the comparison, and the trials it has.
    pub trial: (usize, usize),
    /// The arm of the trial.
    pub arm: Arm,
}

/// What is in place beyond the starting point.
#[derive(Default)]
struct InPlace {
    /// Files written, with the knob that wrote them and the value to write
    /// back, in write order.
    files: Vec<(KnobId, PathBuf, String)>,
    /// CPUs the shield keeps IRQs off for a knob.
    irq_cpus: Option<(KnobId, CpuSet)>,
    /// The shield's memory nodes to give back for a knob.
    mems_back: Option<(KnobId, CpuSet)>,
}

impl InPlace {
    fn is_empty(&self) -> bool {
        self.files.is_empty() && self.irq_cpus.is_none() && self.mems_back.is_none()
    }
}

/// What switching one knob has cost in this run, on the bench's clock: the
/// slowest switch to its candidate and back seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SwitchCost {
    apply: Option<Duration>,
    restore: Option<Duration>,
}

/// The switches a comparison's remaining trials need, predicted from what
/// they cost so far: the switch to the candidate and the switch back.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Predicted {
    apply: Duration,
    restore: Duration,
}

impl Predicted {
    /// The switches `rest` needs, run in order from a machine with the
    /// candidate in place (`in_place`) or not, the last switch back
    /// included: (their count, their time).
    fn switches(&self, rest: &[Arm], mut in_place: bool) -> (u32, Duration) {
        let mut count = 0;
        let mut time = Duration::ZERO;
        for arm in rest {
            match arm {
                Arm::Candidate if !in_place => {
                    time += self.apply;
                    in_place = true;
                    count += 1;
                }
                Arm::Start if in_place => {
                    time += self.restore;
                    in_place = false;
                    count += 1;
                }
                _ => {}
            }
        }
        if in_place {
            time += self.restore;
            count += 1;
        }
        (count, time)
    }
}

/// Whole seconds past 10 s, tenths below.
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 10.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

struct Runner<'a> {
    bench: &'a mut dyn Bench,
    config: &'a SessionConfig,
    journaled: BTreeSet<PathBuf>,
    in_place: InPlace,
    problems: Vec<String>,
    trial_time: Duration,
    comparison_time: Duration,
    trials_run: u32,
    /// Each knob's switches measured so far.
    costs: BTreeMap<KnobId, SwitchCost>,
    /// Time spent switching knobs, kept out of the per-trial overhead.
    switch_time: Duration,
}

impl<'a> Runner<'a> {
    fn new(bench: &'a mut dyn Bench, config: &'a SessionConfig) -> Self {
        Runner {
            bench,
            config,
            journaled: BTreeSet::new(),
            in_place: InPlace::default(),
            problems: Vec::new(),
            trial_time: Duration::ZERO,
            comparison_time: Duration::ZERO,
            trials_run: 0,
            costs: BTreeMap::new(),
            switch_time: Duration::ZERO,
        }
    }

    /// What a trial costs beyond its measuring time, switches left out
    /// (each knob's are predicted from its own, [`Runner::predicted`]).
    fn overhead(&self) -> Duration {
        if self.trials_run == 0 {
            return FIRST_OVERHEAD;
        }
        let measured = self
            .comparison_time
            .saturating_sub(self.trial_time)
            .saturating_sub(self.switch_time)
            / self.trials_run;
        measured.max(FIRST_OVERHEAD / 3)
    }

    /// The per-trial overhead of a comparison of `knobs`: the trial's own
    /// and, where their switches were measured, a share of them large
    /// enough for every order (a comparison of n trials per arm switches at
    /// most n + 1 times in its 2n trials).
    fn overhead_of(&self, knobs: &[&Knob]) -> Duration {
        let own = self.overhead();
        match self.predicted(knobs) {
            Some(p) => own + (p.apply + p.restore) / 2,
            None => own,
        }
    }

    /// The time switching `knobs` to their candidates and back will take,
    /// from the slowest of each seen so far (a switch back not seen yet is
    /// taken to cost what the switch there did). None while one of them was
    /// never switched: its first switch cannot be foreseen.
    fn predicted(&self, knobs: &[&Knob]) -> Option<Predicted> {
        let mut p = Predicted {
            apply: Duration::ZERO,
            restore: Duration::ZERO,
        };
        for knob in knobs {
            if !matches!(
                knob.change,
                Ok(Change::Files(_)) | Ok(Change::IrqShield(_)) | Ok(Change::ShieldMems { .. })
            ) {
                continue;
            }
            let cost = self.costs.get(&knob.id)?;
            let apply = cost.apply?;
            p.apply += apply;
            p.restore += cost.restore.unwrap_or(apply);
        }
        Some(p)
    }

    fn record(&mut self, id: KnobId, took: Duration, apply: bool) {
        let cost = self.costs.entry(id).or_default();
        let slot = if apply {
            &mut cost.apply
        } else {
            &mut cost.restore
        };
        *slot = Some(slot.map_or(took, |seen| seen.max(took)));
        self.switch_time += took;
    }

    /// Puts the candidates of `knobs` in place, each file journaled first,
    /// each knob's switch timed.
    fn apply(&mut self, knobs: &[&Knob]) -> Result<(), String> {
        for knob in knobs {
            let began = self.bench.elapsed();
            match &knob.change {
                Ok(Change::Files(files)) => self.apply_files(knob.id, files)?,
                Ok(Change::IrqShield(cpus)) => {
                    self.bench
                        .irq_shield(cpus, true)
                        .map_err(|e| format!("shielding CPU {cpus} from IRQs: {e}"))?;
                    self.in_place.irq_cpus = Some((knob.id, cpus.clone()));
                }
                Ok(Change::ShieldMems { nodes, back }) => {
                    // Recorded first: a failed pass may have written part.
                    self.in_place.mems_back = Some((knob.id, back.clone()));
                    self.bench.shield_mems(nodes).map_err(|e| {
                        format!("giving the shield's cpuset memory nodes {nodes}: {e}")
                    })?;
                }
                Ok(Change::Probe(_)) | Err(_) => continue,
            }
            let took = self.bench.elapsed().saturating_sub(began);
            self.record(knob.id, took, true);
        }
        Ok(())
    }

    fn apply_files(&mut self, id: KnobId, files: &[crate::knob::FileChange]) -> Result<(), String> {
        let new: Vec<(PathBuf, String)> = files
            .iter()
            .filter(|f| !self.journaled.contains(&f.path))
            .map(|f| (f.path.clone(), f.original.clone()))
            .collect();
        if !new.is_empty() {
            self.bench.journal(&new).map_err(|e| {
                format!("the shield's saved state could not record the values to restore ({e}), so nothing was changed")
            })?;
            self.journaled.extend(new.into_iter().map(|(p, _)| p));
        }
        for f in files {
            self.bench
                .kernel()
                .write(&f.path, &f.candidate)
                .map_err(|e| format!("{} = {}: {e}", f.path.display(), f.candidate))?;
            self.in_place
                .files
                .push((id, f.path.clone(), f.original.clone()));
        }
        Ok(())
    }

    /// Takes back everything in place, last change first, each knob's
    /// switch back timed. Never skipped, whatever the time left.
    fn restore(&mut self) {
        while let Some(&(id, _, _)) = self.in_place.files.last() {
            let began = self.bench.elapsed();
            while let Some((_, path, original)) = self.in_place.files.pop_if(|f| f.0 == id) {
                if let Err(e) = self.bench.kernel().write(&path, &original) {
                    self.problems.push(format!(
                        "{} could not be written back to {original} ({e}): `cpushield reset` restores it from the saved state",
                        path.display()
                    ));
                }
            }
            let took = self.bench.elapsed().saturating_sub(began);
            self.record(id, took, false);
        }
        if let Some((id, cpus)) = self.in_place.irq_cpus.take() {
            let began = self.bench.elapsed();
            if let Err(e) = self.bench.irq_shield(&cpus, false) {
                self.problems.push(format!(
                    "IRQs could not be let back onto CPU {cpus} ({e}): `cpushield reset` restores them"
                ));
            }
            let took = self.bench.elapsed().saturating_sub(began);
            self.record(id, took, false);
        }
        if let Some((id, nodes)) = self.in_place.mems_back.take() {
            let began = self.bench.elapsed();
            if let Err(e) = self.bench.shield_mems(&nodes) {
                self.problems.push(format!(
                    "the shield's cpuset could not be given memory nodes {nodes} back ({e}): `cpushield reset` removes it"
                ));
            }
            let took = self.bench.elapsed().saturating_sub(began);
            self.record(id, took, false);
        }
    }

    fn probe(&self, knobs: &[&Knob]) -> ProbeSetup {
        let mut p = ProbeSetup {
            idle_poll: false,
            hold_dma_latency: false,
            priority: self.config.priority,
        };
        for knob in knobs {
            match knob.change {
                Ok(Change::Probe(ProbeChange::IdlePoll)) => p.idle_poll = true,
                Ok(Change::Probe(ProbeChange::HoldDmaLatency)) => p.hold_dma_latency = true,
                Ok(Change::Probe(ProbeChange::Priority(prio))) => p.priority = prio,
                _ => {}
            }
        }
        p
    }

    /// The time left before the teardown, less `kept` for the comparisons
    /// still to come.
    fn left(&self, kept: Duration) -> Duration {
        let budget = self.config.budget;
        budget
            .saturating_sub(teardown(budget))
            .saturating_sub(self.bench.elapsed())
            .saturating_sub(kept)
    }

    /// Why the rest of a comparison of `knobs` (the trials `rest`, the
    /// first of them next) must not go on, if it must not: its trials and
    /// the switches they need, with the switch back, do not fit the time
    /// left before the teardown, less `kept` for the comparisons after it.
    /// Only once the switches are known to cost
    /// more than a trial's overhead (the plan counts that much for each);
    /// the first switch of a knob cannot be foreseen.
    fn beyond_budget(
        &self,
        what: &str,
        knobs: &[&Knob],
        rest: &[Arm],
        trial: Duration,
        kept: Duration,
        (measured_before, left_at_start): (bool, Duration),
    ) -> Option<String> {
        let p = self.predicted(knobs)?;
        let overhead = self.overhead();
        if p.apply.max(p.restore) <= overhead {
            return None;
        }
        let (count, switches) = p.switches(rest, !self.in_place.is_empty());
        let need = (trial + overhead) * rest.len() as u32 + switches;
        let left = self.left(kept);
        if need <= left {
            return None;
        }
        let back = if p.restore != p.apply {
            format!(" and {} back", secs(p.restore))
        } else {
            String::new()
        };
        let when = if measured_before {
            "measured earlier in this run"
        } else {
            "measured on its first trial"
        };
        Some(format!(
            "switching {} took {}{back} ({when}); its {} trials and {count} switches left needed {}, and {} of the budget were left for it ({} when it began)",
            what.trim_start_matches("together: "),
            secs(p.apply),
            rest.len(),
            secs(need),
            secs(left),
            secs(left_at_start),
        ))
    }

    /// Runs one comparison, `kept` kept for the comparisons after it. Err:
    /// a candidate could not be put in place (everything is taken back),
    /// its switches do not fit the time left, or a trial failed.
    fn compare(
        &mut self,
        what: &str,
        knobs: &[&Knob],
        slot: Slot,
        kept: Duration,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Comparison, CompareFailure> {
        let started = self.bench.elapsed();
        let order = slot.order();
        let known = (self.predicted(knobs).is_some(), self.left(kept));
        let mut trials = Vec::new();
        let mut result = Ok(());
        for (i, arm) in order.iter().enumerate() {
            if self.bench.stopped() {
                break;
            }
            // Before a switch whose cost is known, and again after one
            // (a knob's first switch tells its cost only once done).
            if let Some(why) = self.beyond_budget(what, knobs, &order[i..], slot.trial, kept, known)
            {
                result = Err(CompareFailure::Budget(why));
                break;
            }
            if let Err(e) = self.switch_for(*arm, knobs) {
                result = Err(e);
                break;
            }
            if let Some(why) = self.beyond_budget(what, knobs, &order[i..], slot.trial, kept, known)
            {
                result = Err(CompareFailure::Budget(why));
                break;
            }
            progress(&Progress {
                what: what.to_string(),
                trial: (i + 1, order.len()),
                arm: *arm,
            });
            let probe = match arm {
                Arm::Start => self.probe(&[]),
                Arm::Candidate => self.probe(knobs),
            };
            match self.bench.trial(slot.trial, &probe) {
                Ok(sample) => {
                    self.trial_time += slot.trial;
                    self.trials_run += 1;
                    trials.push(Trial { arm: *arm, sample });
                }
                Err(e) => {
                    result = Err(CompareFailure::Trial(e));
                    break;
                }
            }
        }
        self.restore();
        self.comparison_time += self.bench.elapsed().saturating_sub(started);
        result?;
        let verdict = decide::judge(&trials);
        Ok(Comparison {
            trial_ns: slot.trial.as_nanos() as u64,
            trials,
            verdict,
        })
    }

    /// Puts the machine in the state of `arm`: the candidates of `knobs`
    /// in place, or the starting point.
    fn switch_for(&mut self, arm: Arm, knobs: &[&Knob]) -> Result<(), CompareFailure> {
        match arm {
            Arm::Candidate if self.in_place.is_empty() => {
                self.apply(knobs).map_err(CompareFailure::Change)
            }
            Arm::Start => {
                self.restore();
                Ok(())
            }
            Arm::Candidate => Ok(()),
        }
    }
}

enum CompareFailure {
    /// The candidate could not be put in place.
    Change(String),
    /// The probe failed.
    Trial(String),
    /// Its switches, as measured, do not fit the time left.
    Budget(String),
}

/// Runs a session over `knobs` (the catalog, unavailable ones included).
/// Every change is taken back before it returns, also on Ctrl-C and on
/// error; Err only when a trial fails (the probe cannot run).
pub fn run(
    bench: &mut dyn Bench,
    config: &SessionConfig,
    knobs: Vec<Knob>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<SessionResult, String> {
    let planner = Planner {
        budget: config.budget,
    };
    let mut runner = Runner::new(bench, config);
    let results = measure_each(&mut runner, &planner, knobs, progress)?;
    let singles: Vec<(KnobId, Decision)> = results
        .iter()
        .filter_map(|r| r.decision().map(|d| (r.knob.id, d)))
        .collect();
    let to_combine = decide::sets_to_combine(&singles);
    let (sets, cut_short) = measure_sets(&mut runner, &planner, &results, &to_combine, progress)?;
    let interrupted = runner.bench.stopped();
    let choice = choose(interrupted, &sets, to_combine.len(), cut_short);
    Ok(SessionResult {
        cpus: config.cpus.clone(),
        knobs: results,
        sets,
        choice,
        interrupted,
        problems: runner.problems,
    })
}

/// Each knob alone against the starting point, in catalog order, each
/// given its share of the time left.
fn measure_each(
    runner: &mut Runner,
    planner: &Planner,
    knobs: Vec<Knob>,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Vec<KnobResult>, String> {
    let mut results = Vec::new();
    let mut left = knobs.iter().filter(|k| k.change.is_ok()).count();
    for knob in knobs {
        let outcome = match &knob.change {
            Err(reason) => Outcome::NotAvailable {
                reason: reason.clone(),
            },
            Ok(_) => {
                left -= 1;
                measure_one(runner, planner, &knob, left + 1, progress)?
            }
        };
        results.push(KnobResult { knob, outcome });
    }
    Ok(results)
}

/// One available knob's outcome, with `knobs_left` (it included) still to
/// measure.
fn measure_one(
    runner: &mut Runner,
    planner: &Planner,
    knob: &Knob,
    knobs_left: usize,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Outcome, String> {
    if runner.bench.stopped() {
        return Ok(Outcome::NotMeasured {
            reason: "stopped (Ctrl-C)".into(),
        });
    }
    let overhead = runner.overhead_of(&[knob]);
    let Some(slot) = planner.next_knob(runner.bench.elapsed(), knobs_left, overhead) else {
        return Ok(Outcome::NotMeasured {
            reason: "no time left in the budget".into(),
        });
    };
    let kept = Planner::kept_for(knobs_left - 1 + FINAL_SHARE as usize, runner.overhead());
    Ok(
        match runner.compare(knob.id.name(), &[knob], slot, kept, progress) {
            Ok(c) => Outcome::Measured(c),
            Err(CompareFailure::Change(reason)) => Outcome::Failed { reason },
            Err(CompareFailure::Budget(reason)) => Outcome::NotMeasured { reason },
            Err(CompareFailure::Trial(e)) => return Err(e),
        },
    )
}

/// The sets to combine measured together, while time is left; with why the
/// last did not fit when its switches, as measured, were what did not.
fn measure_sets(
    runner: &mut Runner,
    planner: &Planner,
    results: &[KnobResult],
    to_combine: &[Vec<KnobId>],
    progress: &mut dyn FnMut(&Progress),
) -> Result<(Vec<SetResult>, Option<String>), String> {
    let mut sets = Vec::new();
    for (i, set) in to_combine.iter().enumerate() {
        if runner.bench.stopped() {
            break;
        }
        let members: Vec<&Knob> = set
            .iter()
            .filter_map(|id| results.iter().find(|r| r.knob.id == *id).map(|r| &r.knob))
            .collect();
        let Some(slot) = planner.next_set(
            runner.bench.elapsed(),
            to_combine.len() - i,
            runner.overhead_of(&members),
        ) else {
            break;
        };
        let what = format!(
            "together: {}",
            set.iter().map(|k| k.name()).collect::<Vec<_>>().join(" + ")
        );
        let kept = Planner::kept_for(to_combine.len() - i - 1, runner.overhead());
        match runner.compare(&what, &members, slot, kept, progress) {
            Ok(comparison) => sets.push(SetResult {
                knobs: set.clone(),
                comparison,
            }),
            Err(CompareFailure::Change(reason)) => {
                runner.problems.push(format!("{what}: {reason}"));
            }
            Err(CompareFailure::Budget(reason)) => return Ok((sets, Some(reason))),
            Err(CompareFailure::Trial(e)) => return Err(e),
        }
    }
    Ok((sets, None))
}

/// The winning set, or why none is chosen: stopped, or the sets not all
/// measured (`cut_short` says why, when a switch's measured cost did it).
fn choose(
    interrupted: bool,
    sets: &[SetResult],
    to_combine: usize,
    cut_short: Option<String>,
) -> Choice {
    if interrupted {
        return Choice {
            knobs: Vec::new(),
            reason: "stopped before the end (Ctrl-C): nothing is chosen, every knob is as found"
                .into(),
        };
    }
    if sets.len() < to_combine {
        let why = cut_short.map(|r| format!(" ({r})")).unwrap_or_default();
        return Choice {
            knobs: Vec::new(),
            reason: format!("the budget ran out before the winning knobs were measured together{why}: nothing is chosen (give a longer --budget)"),
        };
    }
    let measured: Vec<(Vec<KnobId>, Verdict)> = sets
        .iter()
        .map(|s| (s.knobs.clone(), s.comparison.verdict))
        .collect();
    decide::choose(&measured)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knob::{catalog, FileChange, Machine, PREEMPT_FILE, STAT_INTERVAL, TIMER_MIGRATION};
    use cpushield_kernel::{FakeKernel, SchedParams};
    use std::path::Path;
    use std::sync::{Arc, Mutex};

    /// A FakeKernel whose writes to some files take time on the bench's
    /// clock, as a preemption-model switch does where it patches kernel
    /// text (minutes under an emulator).
    struct SlowKernel {
        inner: FakeKernel,
        clock: Arc<Mutex<Duration>>,
        slow: BTreeMap<PathBuf, Duration>,
        /// Every file written, in order.
        writes: Mutex<Vec<PathBuf>>,
    }

    impl Kernel for SlowKernel {
        fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
            self.inner.read_bytes(path)
        }
        fn write(&self, path: &Path, data: &str) -> io::Result<()> {
            self.writes.lock().unwrap().push(path.to_path_buf());
            if let Some(took) = self.slow.get(path) {
                *self.clock.lock().unwrap() += *took;
            }
            self.inner.write(path, data)
        }
        fn read_dir(&self, path: &Path) -> io::Result<Vec<String>> {
            self.inner.read_dir(path)
        }
        fn exists(&self, path: &Path) -> bool {
            self.inner.exists(path)
        }
        fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
            self.inner.read_link(path)
        }
        fn mkdir(&self, path: &Path) -> io::Result<()> {
            self.inner.mkdir(path)
        }
        fn rmdir(&self, path: &Path) -> io::Result<()> {
            self.inner.rmdir(path)
        }
        fn remove_tree(&self, path: &Path) -> io::Result<()> {
            self.inner.remove_tree(path)
        }
        fn get_affinity(&self, tid: i32) -> io::Result<CpuSet> {
            self.inner.get_affinity(tid)
        }
        fn set_affinity(&self, tid: i32, cpus: &CpuSet) -> io::Result<()> {
            self.inner.set_affinity(tid, cpus)
        }
        fn set_xattr(&self, path: &Path, name: &str, value: &[u8]) -> io::Result<()> {
            self.inner.set_xattr(path, name, value)
        }
        fn get_xattr(&self, path: &Path, name: &str) -> io::Result<Vec<u8>> {
            self.inner.get_xattr(path, name)
        }
        fn get_sched(&self, tid: i32) -> io::Result<SchedParams> {
            self.inner.get_sched(tid)
        }
        fn set_sched(&self, tid: i32, params: &SchedParams) -> io::Result<()> {
            self.inner.set_sched(tid, params)
        }
    }

    /// A bench on FakeKernel whose probe reads the knobs' files: the
    /// latency it reports depends on what is in place, as a machine's would.
    struct FakeBench {
        kernel: FakeKernel,
        /// The same files, as the session reaches them (some writes slow).
        door: SlowKernel,
        clock: Arc<Mutex<Duration>>,
        /// Every event in order: journal, write, trial.
        log: Vec<String>,
        /// The latency (us) of a trial given the kernel and the probe.
        latency: fn(&FakeKernel, &ProbeSetup, u32) -> u64,
        trials: u32,
        stop_after_trials: Option<u32>,
        journal: Vec<(PathBuf, String)>,
        refuse_journal: bool,
    }

    impl Bench for FakeBench {
        fn kernel(&self) -> &dyn Kernel {
            &self.door
        }
        fn journal(&mut self, files: &[(PathBuf, String)]) -> io::Result<()> {
            if self.refuse_journal {
                return Err(io::Error::from_raw_os_error(libc_enospc()));
            }
            for (p, v) in files {
                self.log.push(format!("journal {} {v}", p.display()));
                self.journal.push((p.clone(), v.clone()));
            }
            Ok(())
        }
        fn irq_shield(&mut self, cpus: &CpuSet, on: bool) -> io::Result<()> {
            self.log.push(format!("irq-shield {cpus} {on}"));
            Ok(())
        }
        fn shield_mems(&mut self, nodes: &CpuSet) -> io::Result<()> {
            self.log.push(format!("shield-mems {nodes}"));
            Ok(())
        }
        fn trial(&mut self, length: Duration, probe: &ProbeSetup) -> Result<TrialSample, String> {
            *self.clock.lock().unwrap() += length + Duration::from_millis(100);
            self.trials += 1;
            let us = (self.latency)(&self.kernel, probe, self.trials);
            self.log.push(format!("trial {us}"));
            Ok(TrialSample {
                max_ns: us * 1000,
                p99_99_ns: us * 250,
                samples: 1000,
            })
        }
        fn elapsed(&self) -> Duration {
            *self.clock.lock().unwrap()
        }
        fn stopped(&self) -> bool {
            self.stop_after_trials.is_some_and(|n| self.trials >= n)
        }
    }

    fn libc_enospc() -> i32 {
        28
    }

    fn bench(latency: fn(&FakeKernel, &ProbeSetup, u32) -> u64) -> FakeBench {
        let kernel = FakeKernel::new();
        kernel.set_file("/sys/devices/system/cpu/online", "0-1");
        kernel.set_file(
            "/sys/devices/system/cpu/cpu1/topology/thread_siblings_list",
            "1",
        );
        kernel.set_file(TIMER_MIGRATION, "1");
        kernel.set_file(STAT_INTERVAL, "10");
        let clock = Arc::new(Mutex::new(Duration::from_secs(5)));
        FakeBench {
            door: SlowKernel {
                inner: kernel.handle(),
                clock: clock.clone(),
                slow: BTreeMap::new(),
                writes: Mutex::new(Vec::new()),
            },
            kernel,
            clock,
            log: Vec::new(),
            latency,
            trials: 0,
            stop_after_trials: None,
            journal: Vec::new(),
            refuse_journal: false,
        }
    }

    /// Noise that varies from trial to trial, from 1000 to 1900 us.
    fn noise(trial: u32) -> u64 {
        1000 + (trial as u64 * 7919) % 10 * 100
    }

    /// A probe latency that timer_migration = 0 quarters; nothing else
    /// matters.
    fn timer_migration_off_quarters(k: &FakeKernel, _: &ProbeSetup, trial: u32) -> u64 {
        if file(k, TIMER_MIGRATION) == "0" {
            noise(trial) / 4
        } else {
            noise(trial)
        }
    }

    fn config() -> SessionConfig {
        SessionConfig {
            cpus: CpuSet::from_cpus([1]),
            budget: Duration::from_secs(300),
            priority: 95,
        }
    }

    fn knobs(b: &FakeBench) -> Vec<Knob> {
        catalog(
            &Machine::read(&b.kernel, &CpuSet::from_cpus([1])),
            &CpuSet::from_cpus([1]),
            95,
        )
    }

    fn file(k: &FakeKernel, p: &str) -> String {
        k.read(Path::new(p)).unwrap()
    }

    #[test]
    fn a_winning_sysctl_is_chosen_and_every_file_is_as_found_after() {
        let mut b = bench(timer_migration_off_quarters);
        let knobs = knobs(&b);
        let r = run(&mut b, &config(), knobs, &mut |_| {}).unwrap();
        assert_eq!(
            r.choice.knobs,
            vec![KnobId::TimerMigration],
            "{:?}",
            r.choice
        );
        assert_eq!(file(&b.kernel, TIMER_MIGRATION), "1");
        assert_eq!(file(&b.kernel, STAT_INTERVAL), "10");
        assert!(b.elapsed() <= config().budget, "{:?}", b.elapsed());
        let tm = r
            .knobs
            .iter()
            .find(|k| k.knob.id == KnobId::TimerMigration)
            .unwrap();
        assert_eq!(tm.decision(), Some(Decision::Keep));
        let si = r
            .knobs
            .iter()
            .find(|k| k.knob.id == KnobId::StatInterval)
            .unwrap();
        assert_eq!(si.decision(), Some(Decision::NoDifference));
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }

    #[test]
    fn each_file_is_journaled_once_before_its_first_write() {
        let mut b = bench(|_, _, t| noise(t));
        let knobs = knobs(&b);
        run(&mut b, &config(), knobs, &mut |_| {}).unwrap();
        let journal = format!("journal {TIMER_MIGRATION} 1");
        let first = b.log.iter().position(|l| *l == journal).expect("journaled");
        assert_eq!(b.log.iter().filter(|l| **l == journal).count(), 1);
        assert_eq!(
            b.journal
                .iter()
                .filter(|(p, _)| p == Path::new(TIMER_MIGRATION))
                .count(),
            1
        );
        // The first trial with the candidate in place comes after the journal.
        let kernel_writes = b.kernel.file(TIMER_MIGRATION);
        assert_eq!(kernel_writes.as_deref(), Some("1"));
        assert!(first < b.log.len());
    }

    #[test]
    fn the_probe_knobs_change_the_probe_not_the_machine() {
        let mut b = bench(|_, p, t| if p.idle_poll { noise(t) / 5 } else { noise(t) });
        let knobs = knobs(&b);
        let r = run(&mut b, &config(), knobs, &mut |_| {}).unwrap();
        assert_eq!(r.choice.knobs, vec![KnobId::IdlePoll]);
        assert!(b
            .journal
            .iter()
            .all(|(p, _)| p != Path::new("/dev/cpu_dma_latency")));
    }

    #[test]
    fn ctrl_c_stops_with_every_knob_as_found_and_nothing_chosen() {
        let mut b = bench(timer_migration_off_quarters);
        // Stop in the middle of timer-migration's trials (its candidate in place).
        b.stop_after_trials = Some(8 * 2 + 3);
        let knobs = knobs(&b);
        let r = run(&mut b, &config(), knobs, &mut |_| {}).unwrap();
        assert!(r.interrupted);
        assert!(r.choice.knobs.is_empty());
        assert_eq!(file(&b.kernel, TIMER_MIGRATION), "1");
        assert!(r
            .knobs
            .iter()
            .any(|k| matches!(k.outcome, Outcome::NotMeasured { .. })));
    }

    #[test]
    fn the_mems_knob_goes_through_the_shield_and_gets_its_nodes_back_when_stopped_anywhere() {
        let knob = Knob {
            id: KnobId::Mems,
            starting: "1".into(),
            candidate: "0-1".into(),
            change: Ok(Change::ShieldMems {
                nodes: CpuSet::parse_list("0-1").unwrap(),
                back: CpuSet::from_cpus([1]),
            }),
        };
        let mut ever_applied = 0;
        for stop in [None, Some(1), Some(2), Some(3), Some(4), Some(5)] {
            let mut b = bench(|_, _, t| noise(t));
            b.stop_after_trials = stop;
            run(&mut b, &config(), vec![knob.clone()], &mut |_| {}).unwrap();
            let switches: Vec<&String> = b
                .log
                .iter()
                .filter(|l| l.starts_with("shield-mems"))
                .collect();
            let to = switches.iter().filter(|l| **l == "shield-mems 0-1").count();
            assert!(to >= 1 || stop.is_some(), "{:?}", b.log);
            assert_eq!(
                switches.len(),
                2 * to,
                "stopped after {stop:?}: {:?}",
                b.log
            );
            if to > 0 {
                assert_eq!(switches.last().unwrap().as_str(), "shield-mems 1");
                ever_applied += 1;
            }
        }
        assert!(
            ever_applied >= 4,
            "stopped with the candidate in place mostly"
        );
    }

    #[test]
    fn a_journal_that_cannot_be_written_changes_nothing() {
        let mut b = bench(|_, _, t| noise(t));
        b.refuse_journal = true;
        let knobs = knobs(&b);
        let r = run(&mut b, &config(), knobs, &mut |_| {}).unwrap();
        let tm = r
            .knobs
            .iter()
            .find(|k| k.knob.id == KnobId::TimerMigration)
            .unwrap();
        assert!(
            matches!(&tm.outcome, Outcome::Failed { reason } if reason.contains("nothing was changed")),
            "{:?}",
            tm.outcome
        );
        assert_eq!(b.kernel.file(TIMER_MIGRATION).as_deref(), Some("1"));
        assert!(!b.log.iter().any(|l| l.starts_with("journal")));
    }

    #[test]
    fn a_refused_write_fails_the_knob_and_takes_back_what_was_written() {
        let mut b = bench(|_, _, t| noise(t));
        b.kernel.set_file("/a", "x");
        b.kernel.refuse_writes("/b");
        let knob = Knob {
            id: KnobId::Governor,
            starting: "x".into(),
            candidate: "y".into(),
            change: Ok(Change::Files(vec![
                FileChange {
                    path: "/a".into(),
                    original: "x".into(),
                    candidate: "y".into(),
                },
                FileChange {
                    path: "/b".into(),
                    original: "x".into(),
                    candidate: "y".into(),
                },
            ])),
        };
        let r = run(&mut b, &config(), vec![knob], &mut |_| {}).unwrap();
        assert!(matches!(r.knobs[0].outcome, Outcome::Failed { .. }));
        assert_eq!(b.kernel.file("/a").as_deref(), Some("x"));
    }

    #[test]
    fn a_short_budget_measures_what_fits_and_says_what_did_not() {
        let mut b = bench(|_, _, t| noise(t));
        let knobs = knobs(&b);
        let config = SessionConfig {
            budget: Duration::from_secs(25),
            ..config()
        };
        let r = run(&mut b, &config, knobs, &mut |_| {}).unwrap();
        assert!(b.elapsed() <= config.budget, "{:?}", b.elapsed());
        assert!(r.knobs.iter().any(
            |k| matches!(&k.outcome, Outcome::NotMeasured { reason } if reason.contains("budget"))
        ));
    }

    #[test]
    fn the_irq_knob_goes_through_the_shield_and_comes_back() {
        let mut b = bench(|_, _, t| noise(t));
        let knob = Knob {
            id: KnobId::IrqSiblings,
            starting: "-".into(),
            candidate: "-".into(),
            change: Ok(Change::IrqShield(CpuSet::from_cpus([3]))),
        };
        run(&mut b, &config(), vec![knob], &mut |_| {}).unwrap();
        let on = b.log.iter().filter(|l| *l == "irq-shield 3 true").count();
        let off = b.log.iter().filter(|l| *l == "irq-shield 3 false").count();
        assert!(on >= 2 && on == off, "{:?}", b.log);
        assert_eq!(
            b.log.iter().rev().find(|l| l.starts_with("irq")).unwrap(),
            "irq-shield 3 false"
        );
    }

    /// A PREEMPT_DYNAMIC kernel at voluntary preemption whose every switch
    /// of the model takes `switch` on the bench's clock.
    fn slow_preempt(b: &mut FakeBench, switch: Duration) {
        b.kernel
            .set_file("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC");
        b.kernel.set_file(PREEMPT_FILE, "none (voluntary) full\n");
        b.door.slow.insert(PathBuf::from(PREEMPT_FILE), switch);
    }

    fn outcome(r: &SessionResult, id: KnobId) -> &Outcome {
        &r.knobs.iter().find(|k| k.knob.id == id).unwrap().outcome
    }

    /// The writes of the preemption model's file, in order.
    fn preempt_writes(b: &FakeBench) -> usize {
        let writes = b.door.writes.lock().unwrap();
        writes
            .iter()
            .filter(|p| *p == Path::new(PREEMPT_FILE))
            .count()
    }

    #[test]
    fn a_switch_slower_than_the_budget_stops_its_knob_at_once_with_its_cost_and_the_machine_restored(
    ) {
        let switch = Duration::from_secs(100);
        let mut b = bench(|_, _, t| noise(t));
        slow_preempt(&mut b, switch);
        let knobs = knobs(&b);
        assert!(knobs
            .iter()
            .any(|k| k.id == KnobId::Preempt && k.change.is_ok()));
        let config = SessionConfig {
            budget: Duration::from_secs(60),
            ..config()
        };
        let r = run(&mut b, &config, knobs, &mut |_| {}).unwrap();
        // One switch there and one back, never a second round.
        assert_eq!(preempt_writes(&b), 2);
        assert!(
            b.elapsed() <= config.budget + 2 * switch,
            "{:?}",
            b.elapsed()
        );
        match outcome(&r, KnobId::Preempt) {
            Outcome::NotMeasured { reason } => {
                assert!(reason.contains("switching preempt took 100 s"), "{reason}");
                assert!(reason.contains("measured on its first trial"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(file(&b.kernel, PREEMPT_FILE), "voluntary");
        // idle-poll came before it, in the time it was given.
        assert!(matches!(
            outcome(&r, KnobId::IdlePoll),
            Outcome::Measured(_)
        ));
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }

    #[test]
    fn a_slow_switch_is_left_unmeasured_and_the_knobs_after_it_still_fit_the_budget() {
        let switch = Duration::from_secs(20);
        let mut b = bench(|_, _, t| noise(t));
        slow_preempt(&mut b, switch);
        let knobs = knobs(&b);
        let config = SessionConfig {
            budget: Duration::from_secs(150),
            ..config()
        };
        let r = run(&mut b, &config, knobs, &mut |_| {}).unwrap();
        assert!(b.elapsed() <= config.budget, "{:?}", b.elapsed());
        assert_eq!(preempt_writes(&b), 2);
        assert!(
            matches!(outcome(&r, KnobId::Preempt), Outcome::NotMeasured { reason } if reason.contains("took 20 s")),
            "{:?}",
            outcome(&r, KnobId::Preempt)
        );
        for id in [
            KnobId::IdlePoll,
            KnobId::TimerMigration,
            KnobId::StatInterval,
            KnobId::ProbePriority,
        ] {
            assert!(
                matches!(outcome(&r, id), Outcome::Measured(_)),
                "{id:?}: {:?}",
                outcome(&r, id)
            );
        }
        assert_eq!(file(&b.kernel, PREEMPT_FILE), "voluntary");
    }

    #[test]
    fn a_switch_as_fast_as_a_trials_overhead_changes_nothing_in_the_plan() {
        let run_with = |switch: Duration| {
            let mut b = bench(|_, _, t| noise(t));
            slow_preempt(&mut b, switch);
            let knobs = knobs(&b);
            let r = run(&mut b, &config(), knobs, &mut |_| {}).unwrap();
            assert!(b.elapsed() <= config().budget, "{:?}", b.elapsed());
            (r, preempt_writes(&b))
        };
        let (instant, writes) = run_with(Duration::ZERO);
        let (fast, fast_writes) = run_with(Duration::from_millis(20));
        assert_eq!(fast_writes, writes);
        for k in &fast.knobs {
            let trials = |o: &Outcome| match o {
                Outcome::Measured(c) => Some((c.trials.len(), c.trial_ns)),
                _ => None,
            };
            let same = instant
                .knobs
                .iter()
                .find(|i| i.knob.id == k.knob.id)
                .unwrap();
            assert!(trials(&k.outcome).is_some() == trials(&same.outcome).is_some());
            assert_eq!(
                trials(&k.outcome).map(|t| t.0),
                trials(&same.outcome).map(|t| t.0),
                "{:?}",
                k.knob.id
            );
        }
        assert!(matches!(
            outcome(&fast, KnobId::Preempt),
            Outcome::Measured(_)
        ));
    }

    #[test]
    fn the_remaining_switches_count_the_switch_back_from_where_the_machine_is() {
        use Arm::{Candidate as B, Start as A};
        let p = Predicted {
            apply: Duration::from_secs(3),
            restore: Duration::from_secs(5),
        };
        let order = [A, B, B, A, A, B, B, A];
        assert_eq!(p.switches(&order, false), (4, Duration::from_secs(16)));
        // With the candidate in place, before the third trial: back, there, back.
        assert_eq!(p.switches(&order[2..], true), (3, Duration::from_secs(13)));
        // A last trial with the candidate in place still switches back.
        assert_eq!(p.switches(&[B], true), (1, Duration::from_secs(5)));
    }

    #[test]
    fn the_winning_set_is_planned_with_the_switch_cost_measured_alone() {
        // Each switch of timer_migration takes 2 s.
        let mut b = bench(timer_migration_off_quarters);
        b.door
            .slow
            .insert(PathBuf::from(TIMER_MIGRATION), Duration::from_secs(2));
        let knobs = knobs(&b);
        let r = run(&mut b, &config(), knobs, &mut |_| {}).unwrap();
        assert!(b.elapsed() <= config().budget, "{:?}", b.elapsed());
        assert_eq!(
            r.choice.knobs,
            vec![KnobId::TimerMigration],
            "{:?}",
            r.choice
        );
        assert_eq!(file(&b.kernel, TIMER_MIGRATION), "1");
    }
}
