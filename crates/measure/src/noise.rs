//! `measure noise` (oslat-like, the Hyades paper): a busy loop reading a clock on
//! each CPU; every gap between two reads goes into the histogram. The clock is
//! the TSC, read directly with its rate measured against CLOCK_MONOTONIC at the
//! start, where it is invariant (as oslat; see [`crate::tsc`]), else
//! CLOCK_MONOTONIC through the vDSO. Gaps at or
//! above the threshold are interruptions (an IRQ, a softirq, another task, the
//! hypervisor); their sum is the time stolen from the loop.
//!
//! Gaps below the threshold (and below 1024 ns) are counted per nanosecond on
//! a fast path, so the loop stays close to the clock's own cost; they are in
//! every statistic, but only longer gaps carry times for the largest samples.
//!
//! The loop runs at SCHED_OTHER by default. At SCHED_FIFO it is a real-time
//! spinner: with RT throttling active it is stopped for the rest of each period
//! once it has used the budget, and a warning says so.

use crate::distribution::Distribution;
use crate::error::MeasureError;
use crate::harness::{self, AppliedPolicy, Bound, Live, MeasuringThread, Probe, StopFlags};
use crate::progress::Progress;
use crate::recorder::Recorder;
use crate::run_info::RunInfo;
use crate::tsc::{self, GapClock, Monotonic, TscClock};
use crate::warnings::{self, Spin};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_rt::sched::PlaceFn;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Loop iterations between two publications of progress and looks at the clock
/// for the end of the run.
const BATCH: u64 = 1024;

/// Gaps shorter than this (and than the threshold), in nanoseconds, take the
/// loop's fast path.
const FAST_NS: usize = 1024;

/// Configuration of a noise run.
#[derive(Debug, Clone)]
pub struct NoiseConfig {
    /// CPUs to measure, one busy loop each.
    pub cpus: CpuSet,
    /// How long to run (default 60 s).
    pub duration: Duration,
    /// SCHED_FIFO priority; None (the default) runs at SCHED_OTHER.
    pub priority: Option<u8>,
    /// Gaps at or above this are interruptions (default 1 us, oslat's bucket).
    pub threshold: Duration,
    /// Lock memory for the run: every page as it is first touched, the
    /// measuring path pre-faulted (mlockall MCL_ONFAULT; default true).
    pub lock_memory: bool,
    /// How often the control thread reports progress (default 100 ms).
    pub tick: Duration,
    /// How the measuring threads reach their CPUs (default None: plain
    /// affinity; a shield's placer when the CPUs are fenced off).
    pub placer: Option<PlaceFn>,
}

impl NoiseConfig {
    /// The defaults (60 s, SCHED_OTHER, 1 us threshold) on `cpus`.
    pub fn new(cpus: CpuSet) -> Self {
        Self {
            cpus,
            duration: Duration::from_secs(60),
            priority: None,
            threshold: Duration::from_micros(1),
            lock_memory: true,
            tick: Duration::from_millis(100),
            placer: None,
        }
    }

    /// Checks the configuration; the error names the input and the remedy.
    pub fn validate(&self, online: &CpuSet) -> Result<(), MeasureError> {
        warnings::validate_cpus(&self.cpus, online).map_err(MeasureError::Config)?;
        if self.duration.is_zero() {
            return Err(MeasureError::Config(
                "--duration must be longer than 0: use e.g. --duration 60s".into(),
            ));
        }
        if self.threshold.is_zero() {
            return Err(MeasureError::Config(
                "--threshold must be longer than 0: use e.g. --threshold 1us".into(),
            ));
        }
        harness::check_priority(self.priority)?;
        Ok(())
    }
}

/// The configuration as recorded in a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseSettings {
    /// Measured CPUs.
    pub cpus: CpuSet,
    /// Run length in nanoseconds.
    pub duration_ns: u64,
    /// Requested SCHED_FIFO priority (None: SCHED_OTHER).
    pub priority: Option<u8>,
    /// Interruption threshold in nanoseconds.
    pub threshold_ns: u64,
    /// The clock the loop read (absent in older reports: CLOCK_MONOTONIC).
    #[serde(default)]
    pub clock: NoiseClock,
    /// The TSC's measured rate in ticks per second, when the loop read the TSC.
    #[serde(default)]
    pub tsc_hz: Option<u64>,
}

/// The clock the noise loop reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseClock {
    /// CLOCK_MONOTONIC through the vDSO.
    #[default]
    Monotonic,
    /// The TSC read directly (`rdtsc`), scaled by its measured rate.
    Tsc,
}

impl NoiseClock {
    /// How the text report names it.
    pub fn describe(self) -> &'static str {
        match self {
            NoiseClock::Monotonic => "CLOCK_MONOTONIC",
            NoiseClock::Tsc => "the TSC",
        }
    }
}

/// One CPU's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuNoise {
    /// The CPU.
    pub cpu: usize,
    /// The scheduling the loop actually had.
    pub applied: AppliedPolicy,
    /// How long the loop ran, in nanoseconds.
    pub elapsed_ns: u64,
    /// Gaps between consecutive clock reads.
    pub gaps: Distribution,
    /// Gaps at or above the threshold.
    pub interruptions: u64,
    /// Sum of those gaps: time taken from the loop, in nanoseconds.
    pub stolen_ns: u64,
    /// Stolen time per second of running, in nanoseconds.
    pub stolen_ns_per_s: f64,
}

/// The result of a noise run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoiseReport {
    /// What was asked for.
    pub settings: NoiseSettings,
    /// When, how long, interrupted or not, warnings.
    pub run: RunInfo,
    /// One entry per measured CPU, in CPU order.
    pub cpus: Vec<CpuNoise>,
}

/// Runs the noise probe for its duration or until `stop` is set.
pub fn run(
    host: &Host,
    config: &NoiseConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<NoiseReport, MeasureError> {
    let outcome = harness::run(host, config, stop, progress)?;
    let tsc = outcome.prepared.flatten();
    Ok(NoiseReport {
        settings: NoiseSettings {
            cpus: config.cpus.clone(),
            duration_ns: config.duration_ns(),
            priority: config.priority,
            threshold_ns: config.threshold_ns(),
            clock: match tsc {
                Some(_) => NoiseClock::Tsc,
                None => NoiseClock::Monotonic,
            },
            tsc_hz: tsc.map(|t| t.hz),
        },
        run: outcome.run,
        cpus: outcome.cpus,
    })
}

impl NoiseConfig {
    fn duration_ns(&self) -> u64 {
        self.duration.as_nanos().min(u64::MAX as u128) as u64
    }

    fn threshold_ns(&self) -> u64 {
        self.threshold.as_nanos() as u64
    }
}

impl Probe for NoiseConfig {
    /// The TSC and its rate, where the loop reads it.
    type Prepared = Option<TscClock>;
    type Cpu = CpuNoise;

    harness::common_settings!();

    fn spin(&self) -> Option<Spin> {
        self.priority.map(|_| Spin {
            longest_ns: self.duration_ns(),
            fraction: 1.0,
        })
    }

    fn bound(&self) -> Bound {
        Bound::Time(self.duration)
    }

    /// Measures the TSC's rate, where it is a clock.
    fn prepare(
        &self,
        host: &Host,
        _stop: &AtomicBool,
    ) -> Result<Option<Option<TscClock>>, MeasureError> {
        Ok(Some(TscClock::calibrate(
            host.kernel(),
            tsc::CALIBRATION_WINDOW,
        )))
    }

    /// The busy loop of one CPU.
    fn measure_cpu(
        &self,
        tsc: &Option<TscClock>,
        thread: &MeasuringThread,
        live: &Live,
        flags: &StopFlags<'_>,
    ) -> Result<CpuNoise, MeasureError> {
        Ok(match tsc {
            Some(clock) => self.busy_loop(clock, thread, live, flags),
            None => self.busy_loop(&Monotonic, thread, live, flags),
        })
    }
}

impl NoiseConfig {
    /// The busy loop on `clock`.
    fn busy_loop<C: GapClock>(
        &self,
        clock: &C,
        thread: &MeasuringThread,
        live: &Live,
        flags: &StopFlags<'_>,
    ) -> CpuNoise {
        let (duration_ns, threshold_ns) = (self.duration_ns(), self.threshold_ns());
        // fast path: gaps below this are only counted, per nanosecond, in a small
        // array (exact, and cheaper than the histogram); the rest are recorded
        // with their times
        let fast_limit = threshold_ns.min(FAST_NS as u64);
        let mut fast = [0u64; FAST_NS];
        let mut gaps = Recorder::new();
        let (mut interruptions, mut stolen) = (0u64, 0u64);
        let start = clock.read();
        let end = start.saturating_add(clock.raw(duration_ns));
        let mut prev = start;
        let mut index = 0u64;
        loop {
            for _ in 0..BATCH {
                let t = clock.read();
                let gap = clock.ns(t.saturating_sub(prev));
                prev = t;
                if gap < fast_limit {
                    fast[gap as usize] += 1;
                } else {
                    gaps.record(gap, clock.ns(t - start), index);
                    if gap >= threshold_ns {
                        interruptions += 1;
                        stolen += gap;
                    }
                }
                index += 1;
            }
            live.publish(index, gaps.max());
            if prev >= end || flags.is_set() {
                break;
            }
        }
        for (value, &count) in fast.iter().enumerate() {
            gaps.record_many(value as u64, count);
        }
        let elapsed = clock.ns(prev - start);
        CpuNoise {
            cpu: thread.cpu,
            applied: thread.applied,
            elapsed_ns: elapsed,
            gaps: gaps.finish(),
            interruptions,
            stolen_ns: stolen,
            stolen_ns_per_s: if elapsed > 0 {
                stolen as f64 * 1e9 / elapsed as f64
            } else {
                0.0
            },
        }
    }
}
