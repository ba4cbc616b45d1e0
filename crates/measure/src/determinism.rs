//! `measure determinism` (Brosky & Rotolo §5.1, figures 1-4): a fixed CPU-bound loop,
//! pinned, SCHED_FIFO, memory locked, timed `runs` times on each CPU. The best
//! run is the ideal; jitter is the worst run minus the ideal, in seconds and as
//! a percentage of the ideal.
//!
//! The loop's iteration count is calibrated once to the wanted work time (on the
//! first measured CPU, at the probe's policy) and then fixed, and reported, so
//! later runs (loaded, shielded) can reuse exactly the same workload.

use crate::distribution::Distribution;
use crate::error::MeasureError;
use crate::harness::{self, AppliedPolicy, Bound, Live, MeasuringThread, Probe, StopFlags};
use crate::progress::Progress;
use crate::recorder::Recorder;
use crate::run_info::RunInfo;
use crate::spike::ProbeObserver;
use crate::warnings::{self, Spin};
use crate::workload;
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_rt::clock::{now_ns, sleep_until_ns, thread_cpu_ns};
use cpushield_rt::sched::PlaceFn;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How much work one run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Calibrate the loop to take about this long.
    Duration(Duration),
    /// A fixed iteration count (from an earlier run's report).
    Iterations(u64),
}

impl Work {
    /// What `--iterations` or `--work` names (the iterations when both do);
    /// a second's loop when neither does.
    pub fn from_iterations_or_duration(iterations: Option<u64>, work: Option<Duration>) -> Self {
        match (iterations, work) {
            (Some(n), _) => Work::Iterations(n),
            (None, Some(d)) => Work::Duration(d),
            (None, None) => Work::Duration(Duration::from_secs(1)),
        }
    }
}

/// Configuration of a determinism run.
#[derive(Debug, Clone)]
pub struct DeterminismConfig {
    /// CPUs to measure, one thread each.
    pub cpus: CpuSet,
    /// Work per run (default 1 s, as Brosky & Rotolo did).
    pub work: Work,
    /// Runs per CPU (default 60).
    pub runs: u32,
    /// SCHED_FIFO priority; None runs at SCHED_OTHER (default 95).
    pub priority: Option<u8>,
    /// Sleep between runs, which gives the CPU back to per-CPU kernel work
    /// (default 100 ms).
    pub rest: Duration,
    /// Lock memory for the run: every page as it is first touched, the
    /// measuring path pre-faulted (mlockall MCL_ONFAULT; default true).
    pub lock_memory: bool,
    /// How often the control thread reports progress (default 100 ms).
    pub tick: Duration,
    /// Told which thread measures which CPU and when each run ran (for a
    /// tracer that explains the runs), if anyone listens.
    pub observer: Option<Arc<dyn ProbeObserver>>,
    /// How the measuring (and calibrating) threads reach their CPUs (default
    /// None: plain affinity; a shield's placer when the CPUs are fenced off).
    pub placer: Option<PlaceFn>,
}

impl DeterminismConfig {
    /// The defaults (1 s of work, 60 runs, SCHED_FIFO 95, 100 ms rest) on `cpus`.
    pub fn new(cpus: CpuSet) -> Self {
        Self {
            cpus,
            work: Work::Duration(Duration::from_secs(1)),
            runs: 60,
            priority: Some(95),
            rest: Duration::from_millis(100),
            lock_memory: true,
            tick: Duration::from_millis(100),
            observer: None,
            placer: None,
        }
    }

    /// Checks the configuration; the error names the input and the remedy.
    pub fn validate(&self, online: &CpuSet) -> Result<(), MeasureError> {
        warnings::validate_cpus(&self.cpus, online).map_err(MeasureError::Config)?;
        let bad = |m: &str| Err(MeasureError::Config(m.into()));
        match self.work {
            Work::Duration(d) if d < Duration::from_millis(1) => {
                return bad("--work must be at least 1ms: use e.g. --work 1s")
            }
            Work::Iterations(0) => {
                return bad("--iterations must be at least 1: use the count from an earlier report")
            }
            _ => {}
        }
        if self.runs == 0 {
            return bad("--runs must be at least 1: use e.g. --runs 60");
        }
        harness::check_priority(self.priority)?;
        Ok(())
    }
}

/// The configuration as recorded in a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeterminismSettings {
    /// Measured CPUs.
    pub cpus: CpuSet,
    /// Wanted work per run in nanoseconds, when calibrated.
    pub work_ns: Option<u64>,
    /// Loop iterations per run (calibrated or given).
    pub iterations: u64,
    /// Runs per CPU asked for.
    pub runs: u32,
    /// Requested SCHED_FIFO priority (None: SCHED_OTHER).
    pub priority: Option<u8>,
    /// Sleep between runs in nanoseconds.
    pub rest_ns: u64,
}

/// One CPU's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuDeterminism {
    /// The CPU.
    pub cpu: usize,
    /// The scheduling the thread actually had.
    pub applied: AppliedPolicy,
    /// Every completed run's duration in nanoseconds, in order.
    pub runs_ns: Vec<u64>,
    /// The best run (Brosky & Rotolo's "ideal").
    pub ideal_ns: u64,
    /// The worst run.
    pub max_ns: u64,
    /// `max - ideal`.
    pub jitter_ns: u64,
    /// Jitter as a percentage of the ideal.
    pub jitter_percent: f64,
    /// Distribution of the run durations.
    pub durations: Distribution,
    /// CPU time the thread got in each run (its scheduler run time), ns, in
    /// order: a run's duration minus this is time the CPU gave to something
    /// else (other tasks, or a hypervisor where the kernel accounts steal).
    #[serde(default)]
    pub runs_cpu_ns: Vec<u64>,
}

impl CpuDeterminism {
    /// Builds the result from the run durations.
    pub fn from_runs(cpu: usize, applied: AppliedPolicy, runs_ns: Vec<u64>) -> Self {
        let mut rec = Recorder::new();
        let mut offset = 0u64;
        for (i, &d) in runs_ns.iter().enumerate() {
            rec.record(d, offset, i as u64);
            offset += d;
        }
        let ideal = runs_ns.iter().copied().min().unwrap_or(0);
        let max = runs_ns.iter().copied().max().unwrap_or(0);
        let jitter = max - ideal;
        Self {
            cpu,
            applied,
            ideal_ns: ideal,
            max_ns: max,
            jitter_ns: jitter,
            jitter_percent: if ideal > 0 {
                jitter as f64 * 100.0 / ideal as f64
            } else {
                0.0
            },
            durations: rec.finish(),
            runs_ns,
            runs_cpu_ns: Vec::new(),
        }
    }
}

/// The result of a determinism run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeterminismReport {
    /// What was asked for, with the iteration count used.
    pub settings: DeterminismSettings,
    /// When, how long, interrupted or not, warnings.
    pub run: RunInfo,
    /// One entry per measured CPU, in CPU order.
    pub cpus: Vec<CpuDeterminism>,
}

/// Runs the determinism probe until every CPU did its runs or `stop` is set
/// (then reports the completed runs; a run cut short is dropped). The
/// calibration comes first; `run.elapsed_ns` covers the measured runs only.
pub fn run(
    host: &Host,
    config: &DeterminismConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<DeterminismReport, MeasureError> {
    let outcome = harness::run(host, config, stop, progress)?;
    let iterations = outcome.prepared.as_ref().map_or(0, |p| p.iterations);
    let work_ns = match config.work {
        Work::Iterations(_) => None,
        Work::Duration(d) => Some(d.as_nanos() as u64),
    };
    let mut run = outcome.run;
    let cpus = outcome.cpus;
    if config.priority.is_some() {
        let longest = cpus.iter().map(|c| c.max_ns).max().or(work_ns).unwrap_or(0);
        let rest = config.rest.as_nanos() as f64;
        let spin = Spin {
            longest_ns: longest,
            fraction: longest as f64 / (longest as f64 + rest).max(1.0),
        };
        run.warnings
            .extend(warnings::throttling(&outcome.view, spin));
    }
    Ok(DeterminismReport {
        settings: DeterminismSettings {
            cpus: config.cpus.clone(),
            work_ns,
            iterations,
            runs: config.runs,
            priority: config.priority,
            rest_ns: config.rest.as_nanos() as u64,
        },
        run,
        cpus,
    })
}

/// The loop's iteration count, fixed for every run of every CPU.
pub(crate) struct Calibrated {
    iterations: u64,
}

impl Probe for DeterminismConfig {
    type Prepared = Calibrated;
    type Cpu = CpuDeterminism;

    harness::common_settings!();

    /// None: the throttling warning is decided after the run, from the
    /// longest run measured.
    fn spin(&self) -> Option<Spin> {
        None
    }

    fn bound(&self) -> Bound {
        Bound::Count(self.runs as u64)
    }

    /// Calibrates the loop (unless an iteration count was given), on the first
    /// CPU at the probe's policy. None if stopped while calibrating.
    fn prepare(&self, _host: &Host, stop: &AtomicBool) -> Result<Option<Calibrated>, MeasureError> {
        let iterations = match self.work {
            Work::Iterations(n) => Some(n),
            Work::Duration(d) => calibrate_on(
                self.cpus.first().expect("validated"),
                self.priority,
                self.placer.clone(),
                d.as_nanos() as u64,
                stop,
            )?,
        };
        Ok(iterations
            .filter(|&n| n > 0)
            .map(|iterations| Calibrated { iterations }))
    }

    /// The runs of one CPU.
    fn measure_cpu(
        &self,
        prepared: &Calibrated,
        thread: &MeasuringThread,
        live: &Live,
        flags: &StopFlags<'_>,
    ) -> Result<CpuDeterminism, MeasureError> {
        let (cpu, tid, iterations) = (thread.cpu, thread.tid, prepared.iterations);
        let rest_ns = self.rest.as_nanos() as u64;
        let observer = self.observer.as_deref();
        if let Some(o) = observer {
            o.thread_started(cpu, tid);
        }
        let mut runs = harness::prefaulted(self.runs as usize);
        let mut cpu_times = harness::prefaulted(self.runs as usize);
        let mut max = 0u64;
        for i in 0..self.runs {
            let cpu_before = thread_cpu_ns();
            let start = now_ns();
            let Some(t) = workload::time_loop(iterations, &|| flags.is_set()) else {
                break;
            };
            cpu_times.push(thread_cpu_ns().saturating_sub(cpu_before));
            if let Some(o) = observer {
                o.run_finished(cpu, tid, i, start, start + t);
            }
            runs.push(t);
            max = max.max(t);
            live.publish(runs.len() as u64, max);
            if flags.is_set() {
                break;
            }
            if i + 1 < self.runs && rest_ns > 0 {
                sleep_until_ns(now_ns() + rest_ns, true);
            }
        }
        let mut result = CpuDeterminism::from_runs(cpu, thread.applied, runs);
        result.runs_cpu_ns = cpu_times;
        Ok(result)
    }
}

/// Calibrates the loop on `cpu` at the probe's policy, on a thread of its own.
fn calibrate_on(
    cpu: usize,
    priority: Option<u8>,
    placer: Option<PlaceFn>,
    target_ns: u64,
    stop: &AtomicBool,
) -> Result<Option<u64>, MeasureError> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name(format!("cpushield-cal{cpu}"))
            .spawn_scoped(s, || {
                harness::enter_measuring_thread(cpu, priority, placer)?;
                Ok(workload::calibrate(target_ns, &|| {
                    stop.load(Ordering::Relaxed)
                }))
            })
            .map_err(MeasureError::Spawn)?
            .join()
            .map_err(|_| MeasureError::Thread("the calibration thread panicked".into()))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::SchedPolicy;

    #[test]
    fn jitter_is_worst_minus_best_as_in_figure_1() {
        let applied = AppliedPolicy {
            policy: SchedPolicy::Fifo,
            priority: 95,
        };
        let r = CpuDeterminism::from_runs(
            1,
            applied,
            vec![1_200_000_000, 1_147_132_000, 1_447_316_000],
        );
        assert_eq!(r.ideal_ns, 1_147_132_000);
        assert_eq!(r.max_ns, 1_447_316_000);
        assert_eq!(r.jitter_ns, 300_184_000);
        assert!(
            (r.jitter_percent - 26.168).abs() < 0.01,
            "{}",
            r.jitter_percent
        );
        assert_eq!(r.durations.summary.count, 3);
    }
}
