//! A tuning session: every available knob measured against the starting
//! point in interleaved trials, then the winning knobs together. The
//! machine is reached through a [`Bench`] (the real one raises the shield,
//! runs the probe under load, and journals in the shield's saved state; a
//! test's runs on `FakeKernel`), so the order of journal, change, trial and
//! restore is the same code in both.

use crate::decide::{self, Arm, Choice, Decision, Trial, TrialSample, Verdict};
use crate::knob::{Change, Knob, KnobId, ProbeChange};
use crate::schedule::{Planner, Slot, FIRST_OVERHEAD};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
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
    /// It was not measured (no time left, or stopped).
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
    /// Files written, with the value to write back, in write order.
    files: Vec<(PathBuf, String)>,
    /// CPUs the shield keeps IRQs off for a knob.
    irq_cpus: Option<CpuSet>,
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
}

impl Runner<'_> {
    fn overhead(&self) -> Duration {
        if self.trials_run == 0 {
            return FIRST_OVERHEAD;
        }
        let measured = self.comparison_time.saturating_sub(self.trial_time) / self.trials_run;
        measured.max(FIRST_OVERHEAD / 3)
    }

    /// Puts the candidates of `knobs` in place, each file journaled first.
    fn apply(&mut self, knobs: &[&Knob]) -> Result<(), String> {
        for knob in knobs {
            match &knob.change {
                Ok(Change::Files(files)) => {
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
                            .push((f.path.clone(), f.original.clone()));
                    }
                }
                Ok(Change::IrqShield(cpus)) => {
                    self.bench
                        .irq_shield(cpus, true)
                        .map_err(|e| format!("shielding CPU {cpus} from IRQs: {e}"))?;
                    self.in_place.irq_cpus = Some(cpus.clone());
                }
                Ok(Change::Probe(_)) | Err(_) => {}
            }
        }
        Ok(())
    }

    /// Takes back everything in place, last change first.
    fn restore(&mut self) {
        while let Some((path, original)) = self.in_place.files.pop() {
            if let Err(e) = self.bench.kernel().write(&path, &original) {
                self.problems.push(format!(
                    "{} could not be written back to {original} ({e}): `cpushield reset` restores it from the saved state",
                    path.display()
                ));
            }
        }
        if let Some(cpus) = self.in_place.irq_cpus.take() {
            if let Err(e) = self.bench.irq_shield(&cpus, false) {
                self.problems.push(format!(
                    "IRQs could not be let back onto CPU {cpus} ({e}): `cpushield reset` restores them"
                ));
            }
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

    /// Runs one comparison. Err: a candidate could not be put in place
    /// (everything is taken back) or a trial failed.
    fn compare(
        &mut self,
        what: &str,
        knobs: &[&Knob],
        slot: Slot,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Comparison, CompareFailure> {
        let started = self.bench.elapsed();
        let order = slot.order();
        let mut trials = Vec::new();
        let mut result = Ok(());
        for (i, arm) in order.iter().enumerate() {
            if self.bench.stopped() {
                break;
            }
            let switched = match arm {
                Arm::Candidate
                    if self.in_place.files.is_empty() && self.in_place.irq_cpus.is_none() =>
                {
                    self.apply(knobs).map_err(CompareFailure::Change)
                }
                Arm::Start => {
                    self.restore();
                    Ok(())
                }
                Arm::Candidate => Ok(()),
            };
            if let Err(e) = switched {
                result = Err(e);
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
}

enum CompareFailure {
    /// The candidate could not be put in place.
    Change(String),
    /// The probe failed.
    Trial(String),
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
    let mut runner = Runner {
        bench,
        config,
        journaled: BTreeSet::new(),
        in_place: InPlace::default(),
        problems: Vec::new(),
        trial_time: Duration::ZERO,
        comparison_time: Duration::ZERO,
        trials_run: 0,
    };
    let mut results: Vec<KnobResult> = Vec::new();
    let mut left = knobs.iter().filter(|k| k.change.is_ok()).count();
    for knob in knobs {
        let outcome = match &knob.change {
            Err(reason) => Outcome::NotAvailable {
                reason: reason.clone(),
            },
            Ok(_) if runner.bench.stopped() => Outcome::NotMeasured {
                reason: "stopped (Ctrl-C)".into(),
            },
            Ok(_) => {
                let slot = planner.next_knob(runner.bench.elapsed(), left, runner.overhead());
                left -= 1;
                match slot {
                    None => Outcome::NotMeasured {
                        reason: "no time left in the budget".into(),
                    },
                    Some(slot) => match runner.compare(knob.id.name(), &[&knob], slot, progress) {
                        Ok(c) => Outcome::Measured(c),
                        Err(CompareFailure::Change(reason)) => Outcome::Failed { reason },
                        Err(CompareFailure::Trial(e)) => return Err(e),
                    },
                }
            }
        };
        results.push(KnobResult { knob, outcome });
    }
    let singles: Vec<(KnobId, Decision)> = results
        .iter()
        .filter_map(|r| r.decision().map(|d| (r.knob.id, d)))
        .collect();
    let to_combine = decide::sets_to_combine(&singles);
    let mut sets = Vec::new();
    for (i, set) in to_combine.iter().enumerate() {
        if runner.bench.stopped() {
            break;
        }
        let Some(slot) = planner.next_set(
            runner.bench.elapsed(),
            to_combine.len() - i,
            runner.overhead(),
        ) else {
            break;
        };
        let members: Vec<&Knob> = set
            .iter()
            .filter_map(|id| results.iter().find(|r| r.knob.id == *id).map(|r| &r.knob))
            .collect();
        let what = format!(
            "together: {}",
            set.iter().map(|k| k.name()).collect::<Vec<_>>().join(" + ")
        );
        match runner.compare(&what, &members, slot, progress) {
            Ok(comparison) => sets.push(SetResult {
                knobs: set.clone(),
                comparison,
            }),
            Err(CompareFailure::Change(reason)) => {
                runner.problems.push(format!("{what}: {reason}"));
            }
            Err(CompareFailure::Trial(e)) => return Err(e),
        }
    }
    let interrupted = runner.bench.stopped();
    let choice = if interrupted {
        Choice {
            knobs: Vec::new(),
            reason: "stopped before the end (Ctrl-C): nothing is chosen, every knob is as found"
                .into(),
        }
    } else if sets.len() < to_combine.len() {
        Choice {
            knobs: Vec::new(),
            reason: "the budget ran out before the winning knobs were measured together: nothing is chosen (give a longer --budget)".into(),
        }
    } else {
        let measured: Vec<(Vec<KnobId>, Verdict)> = sets
            .iter()
            .map(|s| (s.knobs.clone(), s.comparison.verdict))
            .collect();
        decide::choose(&measured)
    };
    Ok(SessionResult {
        cpus: config.cpus.clone(),
        knobs: results,
        sets,
        choice,
        interrupted,
        problems: runner.problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knob::{catalog, FileChange, Machine, STAT_INTERVAL, TIMER_MIGRATION};
    use cpushield_kernel::FakeKernel;
    use std::cell::Cell;
    use std::path::Path;

    /// A bench on FakeKernel whose probe reads the knobs' files: the
    /// latency it reports depends on what is in place, as a machine's would.
    struct FakeBench {
        kernel: FakeKernel,
        clock: Cell<Duration>,
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
            &self.kernel
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
        fn trial(&mut self, length: Duration, probe: &ProbeSetup) -> Result<TrialSample, String> {
            self.clock
                .set(self.clock.get() + length + Duration::from_millis(100));
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
            self.clock.get()
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
        FakeBench {
            kernel,
            clock: Cell::new(Duration::from_secs(5)),
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
        // timer_migration = 0 quarters the latency; nothing else matters.
        let mut b = bench(|k, _, t| {
            let base = noise(t);
            if file(k, TIMER_MIGRATION) == "0" {
                base / 4
            } else {
                base
            }
        });
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
        let mut b = bench(|k, _, t| {
            if file(k, TIMER_MIGRATION) == "0" {
                noise(t) / 4
            } else {
                noise(t)
            }
        });
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
}
