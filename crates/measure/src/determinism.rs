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
use crate::guard::{self, Spin, Warning};
use crate::harness::{
    self, AppliedPolicy, Bound, Control, ControlPlacement, Live, ProcessSetup, StopFlags,
};
use crate::procstat;
use crate::progress::Progress;
use crate::recorder::Recorder;
use crate::run_info::{kernel_release, RunInfo};
use crate::spike::ProbeObserver;
use crate::workload;
use cpushield_cpuset::CpuSet;
use cpushield_rt::clock::{now_ns, sleep_until_ns, thread_cpu_ns};
use cpushield_sys::RealKernel;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How much work one run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    /// Calibrate the loop to take about this long.
    Duration(Duration),
    /// A fixed iteration count (from an earlier run's report).
    Iterations(u64),
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
    /// Lock all memory for the run (default true).
    pub lock_memory: bool,
    /// How often the control thread reports progress (default 100 ms).
    pub tick: Duration,
    /// Told which thread measures which CPU and when each run ran (for a
    /// tracer that explains the runs), if anyone listens.
    pub observer: Option<Arc<dyn ProbeObserver>>,
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
        }
    }

    /// Checks the configuration; the error names the input and the remedy.
    pub fn validate(&self, online: &CpuSet) -> Result<(), MeasureError> {
        guard::validate_cpus(&self.cpus, online).map_err(MeasureError::Config)?;
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
        if let Some(p) = self.priority {
            if !(1..=99).contains(&p) {
                return Err(MeasureError::Config(format!(
                    "--priority {p} is out of range: use 1..99"
                )));
            }
        }
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
/// (then reports the completed runs; a run cut short is dropped).
pub fn run(
    config: &DeterminismConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<DeterminismReport, MeasureError> {
    let kernel = RealKernel;
    let view = guard::read_view(&kernel, &config.cpus)?;
    config.validate(&view.online)?;
    let mut warnings = guard::before_run(&view, &config.cpus, harness::is_root(), None);
    let setup = ProcessSetup::enter(config.lock_memory);
    warnings.extend(setup.warnings.iter().cloned());
    let _placement =
        ControlPlacement::enter(guard::control_cpus(&config.cpus, &view.online).as_ref());
    let started_unix_ns = harness::unix_now_ns();
    let started = Instant::now();
    let (iterations, work_ns) = match config.work {
        Work::Iterations(n) => (n, None),
        Work::Duration(d) => {
            let target = d.as_nanos() as u64;
            match calibrate_on(
                config.cpus.first().expect("validated"),
                config.priority,
                target,
                stop,
            )? {
                Some(n) => (n, Some(target)),
                None => (0, Some(target)),
            }
        }
    };
    let before = procstat::snapshot(&kernel).ok();
    let mut runs = Vec::new();
    if iterations > 0 {
        let mut on_tick = || {};
        let control = Control {
            tick: config.tick,
            bound: Bound::Count(config.runs as u64),
            on_tick: &mut on_tick,
            progress,
        };
        let rest_ns = config.rest.as_nanos() as u64;
        runs = harness::run_per_cpu(&config.cpus, stop, control, |cpu, live, flags| {
            measure_cpu(cpu, config, iterations, rest_ns, live, flags)
        })?;
    }
    let elapsed_ns = started.elapsed().as_nanos() as u64;
    if let (Some(before), Ok(after)) = (before, procstat::snapshot(&kernel)) {
        warnings.extend(guard::after_run(
            &view,
            &config.cpus,
            &before,
            &after,
            procstat::user_hz(),
        ));
    }
    let mut cpus = Vec::new();
    for (result, warning) in runs {
        warnings.extend(warning);
        cpus.push(result);
    }
    if config.priority.is_some() {
        let longest = cpus.iter().map(|c| c.max_ns).max().or(work_ns).unwrap_or(0);
        let rest = config.rest.as_nanos() as f64;
        let spin = Spin {
            longest_ns: longest,
            fraction: longest as f64 / (longest as f64 + rest).max(1.0),
        };
        warnings.extend(guard::throttling(&view, spin));
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
        run: RunInfo {
            started_unix_ns,
            elapsed_ns,
            interrupted: stop.load(Ordering::Relaxed),
            kernel_release: kernel_release(&kernel),
            warnings,
        },
        cpus,
    })
}

/// Calibrates the loop on `cpu` at the probe's policy, on a thread of its own.
fn calibrate_on(
    cpu: usize,
    priority: Option<u8>,
    target_ns: u64,
    stop: &AtomicBool,
) -> Result<Option<u64>, MeasureError> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name(format!("cpushield-cal{cpu}"))
            .spawn_scoped(s, || {
                harness::enter_measuring_thread(cpu, priority)?;
                Ok(workload::calibrate(target_ns, &|| {
                    stop.load(Ordering::Relaxed)
                }))
            })
            .map_err(MeasureError::Spawn)?
            .join()
            .map_err(|_| MeasureError::Thread("the calibration thread panicked".into()))?
    })
}

/// The runs of one CPU.
fn measure_cpu(
    cpu: usize,
    config: &DeterminismConfig,
    iterations: u64,
    rest_ns: u64,
    live: &Live,
    flags: &StopFlags<'_>,
) -> Result<(CpuDeterminism, Option<Warning>), MeasureError> {
    let (applied, warning) = harness::enter_measuring_thread(cpu, config.priority)?;
    let tid = harness::gettid();
    let observer = config.observer.as_deref();
    if let Some(o) = observer {
        o.thread_started(cpu, tid);
    }
    let mut runs = Vec::with_capacity(config.runs as usize);
    let mut cpu_times = Vec::with_capacity(config.runs as usize);
    let mut max = 0u64;
    for i in 0..config.runs {
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
        if i + 1 < config.runs && rest_ns > 0 {
            sleep_until_ns(now_ns() + rest_ns, true);
        }
    }
    let mut result = CpuDeterminism::from_runs(cpu, applied, runs);
    result.runs_cpu_ns = cpu_times;
    Ok((result, warning))
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
