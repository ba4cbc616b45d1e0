//! `measure latency`: periodic wakeup latency (realfeel, cyclictest), with an
//! optional advance (Sherer §5.3: wake early, then spin to the deadline).
//!
//! One thread per CPU, pinned, SCHED_FIFO, memory locked, stack pre-faulted,
//! /dev/cpu_dma_latency held at 0. Wakeup `k` is due at `start + k * period`
//! (exact, also for 2048 Hz); the thread sleeps to it with an absolute
//! clock_nanosleep on CLOCK_MONOTONIC and records `actual - intended`. Periods
//! that passed while a wakeup was late are counted as missed, not folded into
//! the next sample.
//!
//! With `source` rtc or hpet ([`Source`]) the thread instead blocks in `read()`
//! on the device, whose periodic interrupt wakes it (Brosky & Rotolo's
//! realfeel for the RTC): the wake-to-wake interval minus the period(s) it
//! covered is the latency. The RTC's IRQ is bound to the measured CPU for the
//! run and restored after.
//!
//! With `source` timerlat no thread of ours measures: the kernel's timerlat
//! threads do, and the control thread gathers their records from the trace
//! ([`crate::timerlat`]) into the same result, with the IRQ latency beside.

use crate::distribution::Distribution;
use crate::error::MeasureError;
use crate::harness::{self, AppliedPolicy, Bound, Live, MeasuringThread, Probe, StopFlags};
use crate::period::Period;
use crate::progress::Progress;
use crate::recorder::Recorder;
use crate::run_info::RunInfo;
use crate::source::{self, Device, Source, SourceRequest};
use crate::spike::{ProbeObserver, Spike, SpikeRing, SpikeTap};
use crate::timerlat::TimerlatCpu;
use crate::warnings::{self, Spin};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Host, Kernel};
use cpushield_rt::clock::{now_ns, sleep_until_ns, spin_until_ns};
use cpushield_rt::idle_poll::IdlePoller;
use cpushield_rt::irq::{bind_irq, IrqBinding};
use cpushield_rt::sched::PlaceFn;
use cpushield_trace::TimerlatFeed;
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Delay between a thread's set-up and its first wakeup.
const START_DELAY_NS: u64 = 1_000_000;

/// What bounds a latency run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// Wakeups due within this time from the first.
    Duration(Duration),
    /// This many samples per CPU.
    Samples(u64),
}

impl Length {
    /// What `--samples` or `--duration` names (the samples when both do); a
    /// minute when neither does.
    pub fn from_samples_or_duration(samples: Option<u64>, duration: Option<Duration>) -> Self {
        match (samples, duration) {
            (Some(n), _) => Length::Samples(n),
            (None, Some(d)) => Length::Duration(d),
            (None, None) => Length::Duration(Duration::from_secs(60)),
        }
    }
}

/// Configuration of a latency run.
#[derive(Debug, Clone)]
pub struct LatencyConfig {
    /// CPUs to measure, one thread each.
    pub cpus: CpuSet,
    /// Wakeup period (default 2048 Hz, as realfeel).
    pub period: Period,
    /// How long to run (default 60 s).
    pub length: Length,
    /// SCHED_FIFO priority; None runs at SCHED_OTHER (default 95).
    pub priority: Option<u8>,
    /// Wake this much early and spin to the deadline (Sherer's TIMER_ADVANCE).
    pub advance: Option<Duration>,
    /// Lock memory for the run: every page as it is first touched, the
    /// measuring path pre-faulted (mlockall MCL_ONFAULT; default true).
    pub lock_memory: bool,
    /// Where to send samples above a threshold (for tracing), if anywhere.
    pub spikes: Option<SpikeTap>,
    /// Keep the measured CPUs polling instead of halting between wakeups (a
    /// SCHED_IDLE spinner per CPU; see `cpushield_rt::idle_poll`). Default off,
    /// as cyclictest.
    pub idle_poll: bool,
    /// How often the control thread reports progress and forwards spikes (default 50 ms).
    pub tick: Duration,
    /// Told which thread measures which CPU (for a tracer), if anyone listens.
    pub observer: Option<Arc<dyn ProbeObserver>>,
    /// How the measuring threads (and idle pollers) reach their CPUs (default
    /// None: plain affinity; a shield's placer when the CPUs are fenced off).
    pub placer: Option<PlaceFn>,
    /// What wakes the thread (default: the timer).
    pub source: Source,
    /// Hold /dev/cpu_dma_latency at 0 for the run, as cyclictest does
    /// (default true); `tune` measures the machine without it too.
    pub hold_dma_latency: bool,
    /// The records of the trace session that runs the timerlat tracer; needed
    /// by `source` timerlat (`cpushield_measure::trace` starts the session).
    pub timerlat: Option<TimerlatFeed>,
}

impl LatencyConfig {
    /// The defaults (2048 Hz, 60 s, SCHED_FIFO 95, no advance) on `cpus`.
    pub fn new(cpus: CpuSet) -> Self {
        Self {
            cpus,
            period: Period::from_rate(2048),
            length: Length::Duration(Duration::from_secs(60)),
            priority: Some(95),
            advance: None,
            lock_memory: true,
            spikes: None,
            idle_poll: false,
            tick: Duration::from_millis(50),
            observer: None,
            placer: None,
            source: Source::Timer,
            hold_dma_latency: true,
            timerlat: None,
        }
    }

    /// The timer period the timerlat tracer is given: the period in whole
    /// microseconds (it takes no finer one), rounded.
    pub fn timerlat_period_us(&self) -> u32 {
        ((self.period.nominal_ns() + 500) / 1000).min(u32::MAX as u64) as u32
    }

    /// Checks the configuration against the online CPUs; the error names the
    /// input and the remedy.
    pub fn validate(&self, online: &CpuSet) -> Result<(), MeasureError> {
        warnings::validate_cpus(&self.cpus, online).map_err(MeasureError::Config)?;
        self.period.validate().map_err(MeasureError::Config)?;
        match self.length {
            Length::Duration(d) if d.is_zero() => {
                return Err(MeasureError::Config(
                    "--duration must be longer than 0: use e.g. --duration 60s".into(),
                ))
            }
            Length::Samples(0) => {
                return Err(MeasureError::Config(
                    "--samples must be at least 1: use e.g. --samples 100000".into(),
                ))
            }
            _ => {}
        }
        harness::check_priority(self.priority)?;
        if self.source != Source::Timer {
            let rate = match self.period {
                Period::Rate { hz } => Some(hz),
                Period::Interval { .. } => None,
            };
            source::select(
                SourceRequest::Exactly(self.source),
                |d| std::path::Path::new(d).exists(),
                self.cpus.len(),
                rate,
            )
            .map_err(MeasureError::Config)?;
            if self.advance.is_some() {
                return Err(MeasureError::Config(format!(
                    "--advance works with the timer only: drop --advance, or use --source timer (not {})",
                    self.source.word()
                )));
            }
        }
        if self.source == Source::Timerlat {
            use cpushield_trace::timerlat::{PERIOD_US, THREAD_PRIORITY};
            if self.priority != Some(THREAD_PRIORITY) {
                return Err(MeasureError::Config(format!(
                    "--source timerlat measures with the kernel's timerlat threads, which run at SCHED_FIFO {THREAD_PRIORITY}: drop --priority"
                )));
            }
            let us = self.timerlat_period_us();
            if !PERIOD_US.contains(&us) {
                return Err(MeasureError::Config(format!(
                    "--source timerlat with a period of {us} us: the tracer takes {} us to {} us: use e.g. --rate 2048 or --interval 1ms",
                    PERIOD_US.start(),
                    PERIOD_US.end()
                )));
            }
        }
        if let Some(adv) = self.advance {
            let period_ns = self.period.nominal_ns();
            if adv.is_zero() {
                return Err(MeasureError::Config(
                    "--advance must be longer than 0: give how early to wake, e.g. --advance 20us"
                        .into(),
                ));
            }
            if adv.as_nanos() >= period_ns as u128 {
                return Err(MeasureError::Config(format!(
                    "--advance {} is not shorter than the period ({}): use an advance below the period, e.g. --advance 20us",
                    crate::render::units::fmt_duration(adv.as_nanos() as u64),
                    crate::render::units::fmt_duration(period_ns)
                )));
            }
        }
        Ok(())
    }
}

/// The configuration as recorded in a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySettings {
    /// Measured CPUs.
    pub cpus: CpuSet,
    /// The period as given.
    pub period: Period,
    /// Nominal period in nanoseconds.
    pub period_ns: u64,
    /// Wakeups per second.
    pub rate_hz: f64,
    /// Run length by time, if so bounded.
    pub duration_ns: Option<u64>,
    /// Run length in samples per CPU, if so bounded.
    pub samples: Option<u64>,
    /// Requested SCHED_FIFO priority (None: SCHED_OTHER).
    pub priority: Option<u8>,
    /// Advance in nanoseconds, if any.
    pub advance_ns: Option<u64>,
    /// Spike threshold in nanoseconds, if a spike tap was given.
    pub spike_threshold_ns: Option<u64>,
    /// Whether the measured CPUs were kept polling instead of halting when idle.
    #[serde(default)]
    pub idle_poll: bool,
    /// What woke the thread (absent in reports older than `--source`: the timer).
    #[serde(default)]
    pub source: Source,
}

/// What the advance did on one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdvanceStats {
    /// Time spent spinning between the early wakeup and the deadline, for the
    /// wakeups that came before the deadline.
    pub spin: Distribution,
    /// Wakeups that came at or after the deadline (the advance was too short);
    /// these did not spin.
    pub late_wakeups: u64,
}

/// One CPU's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuLatency {
    /// The CPU.
    pub cpu: usize,
    /// The scheduling the thread actually had.
    pub applied: AppliedPolicy,
    /// Samples taken.
    pub samples: u64,
    /// Periods skipped because a wakeup came after the next one was due.
    pub missed_periods: u64,
    /// Latency (`actual - intended`). With an advance: how late the work
    /// started relative to the deadline, after the spin.
    pub latency: Distribution,
    /// Spin statistics, with an advance.
    pub advance: Option<AdvanceStats>,
    /// The timer interrupt's latency (expiry to its handler), with source
    /// timerlat; `latency` is then the kernel's timerlat thread latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_latency: Option<Distribution>,
}

/// The result of a latency run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    /// What was asked for.
    pub settings: LatencySettings,
    /// When, how long, interrupted or not, warnings.
    pub run: RunInfo,
    /// One entry per measured CPU, in CPU order.
    pub cpus: Vec<CpuLatency>,
    /// Spikes lost because the ring to the control thread was full.
    pub spikes_dropped: u64,
}

impl LatencyReport {
    /// The largest latency over all CPUs, in nanoseconds.
    pub fn max_ns(&self) -> u64 {
        self.cpus
            .iter()
            .map(|c| c.latency.summary.max_ns)
            .max()
            .unwrap_or(0)
    }
}

/// What a measuring thread needs, precomputed, and what lives for the run.
pub(crate) struct Plan {
    period: Period,
    end_offset_ns: u64,
    /// The first wakeup index at or past `end_offset_ns`.
    end_index: u64,
    max_samples: u64,
    advance_ns: Option<u64>,
    /// Where the threads offer their spikes, with a spike tap.
    ring: Option<SpikeRing>,
    /// The device whose interrupt wakes the thread (rtc, hpet); its periodic
    /// interrupt goes off before the IRQ binding below is restored.
    device: Option<Device>,
    /// The RTC's IRQ bound to the measured CPU; restored when dropped.
    _irq: Option<IrqBinding<'static>>,
    /// Keeps the measured CPUs polling for the run, if asked.
    _poller: Option<IdlePoller>,
}

/// Runs a latency measurement until its length is reached or `stop` is set
/// (then reports what was measured so far). `progress` is called on the
/// calling thread, which is moved off the measured CPUs for the run.
pub fn run(
    host: &Host,
    config: &LatencyConfig,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<LatencyReport, MeasureError> {
    let outcome = harness::run(host, config, stop, progress)?;
    Ok(LatencyReport {
        settings: LatencySettings {
            cpus: config.cpus.clone(),
            period: config.period,
            period_ns: config.period.nominal_ns(),
            rate_hz: config.period.hz(),
            duration_ns: match config.length {
                Length::Duration(d) => Some(d.as_nanos() as u64),
                Length::Samples(_) => None,
            },
            samples: match config.length {
                Length::Samples(n) => Some(n),
                Length::Duration(_) => None,
            },
            priority: config.priority,
            advance_ns: config.advance_ns(),
            spike_threshold_ns: config
                .spikes
                .as_ref()
                .map(|t| t.threshold.as_nanos() as u64),
            idle_poll: config.idle_poll,
            source: config.source,
        },
        run: outcome.run,
        cpus: outcome.cpus,
        spikes_dropped: outcome
            .prepared
            .as_ref()
            .and_then(|p| p.ring.as_ref())
            .map_or(0, |r| r.dropped()),
    })
}

impl LatencyConfig {
    fn advance_ns(&self) -> Option<u64> {
        self.advance.map(|a| a.as_nanos() as u64)
    }
}

impl Probe for LatencyConfig {
    type Prepared = Plan;
    type Cpu = CpuLatency;

    harness::common_settings!();

    fn hold_dma_latency(&self) -> bool {
        self.hold_dma_latency
    }

    /// With an advance at a real-time policy, the thread spins up to the
    /// advance every period.
    fn spin(&self) -> Option<Spin> {
        match (self.advance_ns(), self.priority) {
            (Some(a), Some(_)) => Some(Spin {
                longest_ns: a,
                fraction: a as f64 / self.period.nominal_ns() as f64,
            }),
            _ => None,
        }
    }

    fn bound(&self) -> Bound {
        match self.length {
            Length::Duration(d) => Bound::Time(d),
            Length::Samples(n) => Bound::Count(n),
        }
    }

    /// Starts the idle pollers (if asked) and the spike ring (with a tap).
    fn prepare(&self, host: &Host, _stop: &AtomicBool) -> Result<Option<Plan>, MeasureError> {
        let poller = if self.idle_poll {
            Some(IdlePoller::start(&self.cpus, self.placer.clone())?)
        } else {
            None
        };
        let (device, irq) = self.open_device(host.kernel())?;
        let end_offset_ns = match self.length {
            Length::Duration(d) => d.as_nanos().min(u64::MAX as u128) as u64,
            Length::Samples(_) => u64::MAX,
        };
        Ok(Some(Plan {
            period: self.period,
            end_offset_ns,
            end_index: self.period.first_due_at_or_after(end_offset_ns),
            max_samples: match self.length {
                Length::Samples(n) => n,
                Length::Duration(_) => u64::MAX,
            },
            advance_ns: self.advance_ns(),
            ring: self
                .spikes
                .as_ref()
                .map(|t| SpikeRing::new(t.threshold.as_nanos().min(u64::MAX as u128) as u64)),
            device,
            _irq: irq,
            _poller: poller,
        }))
    }

    fn measured_by_kernel(&self) -> bool {
        self.source == Source::Timerlat
    }

    /// The timerlat records from the start until the bound, per CPU.
    fn collect(
        &self,
        host: &Host,
        plan: &Plan,
        stop: &AtomicBool,
        control: harness::Control<'_>,
    ) -> Result<Vec<CpuLatency>, MeasureError> {
        collect_timerlat(host.kernel(), self, plan, stop, control)
    }

    /// Forwards the spikes the threads offered to the tap.
    fn on_tick(&self, plan: &Plan) {
        if let (Some(ring), Some(tap)) = (&plan.ring, &self.spikes) {
            ring.drain_to(&tap.sender);
        }
    }

    /// The measuring loop of one CPU.
    fn measure_cpu(
        &self,
        plan: &Plan,
        thread: &MeasuringThread,
        live: &Live,
        flags: &StopFlags<'_>,
    ) -> Result<CpuLatency, MeasureError> {
        if let Some(o) = self.observer.as_deref() {
            o.thread_started(thread.cpu, thread.tid);
        }
        let sampler = Sampler::new(plan, thread, live, flags);
        match &plan.device {
            Some(device) => measure_device(plan, device, sampler),
            None => Ok(measure_timer(plan, sampler)),
        }
    }
}

/// What the timer and device loops share: the recorder, the counters, and what
/// is done with a sample once its clock read is taken.
struct Sampler<'a> {
    cpu: usize,
    tid: i32,
    applied: AppliedPolicy,
    ring: Option<&'a SpikeRing>,
    live: &'a Live,
    flags: &'a StopFlags<'a>,
    latency: Recorder,
    samples: u64,
    missed: u64,
}

impl<'a> Sampler<'a> {
    /// The shared prologue: recorder allocated and faulted in before the first wakeup.
    fn new(
        plan: &'a Plan,
        thread: &MeasuringThread,
        live: &'a Live,
        flags: &'a StopFlags<'a>,
    ) -> Self {
        Self {
            cpu: thread.cpu,
            tid: thread.tid,
            applied: thread.applied,
            ring: plan.ring.as_ref(),
            live,
            flags,
            latency: Recorder::new(),
            samples: 0,
            missed: 0,
        }
    }

    /// Records one sample, taken after the clock read: `value` ns late, for a
    /// wakeup due at `intended` and observed at `actual`, `since_start` ns into
    /// the run. Returns whether the loop should stop (a signal or another
    /// thread's failure).
    #[inline]
    fn take(&mut self, value: u64, intended: u64, actual: u64, since_start: u64) -> bool {
        self.latency.record(value, since_start, self.samples);
        if let Some(ring) = self.ring {
            ring.offer(Spike {
                seq: 0,
                cpu: self.cpu,
                tid: self.tid,
                intended_ns: intended,
                actual_ns: actual,
            });
        }
        self.samples += 1;
        self.live.publish(self.samples, self.latency.max());
        self.flags.is_set()
    }

    /// The CPU's result.
    fn finish(self, advance: Option<AdvanceStats>) -> CpuLatency {
        CpuLatency {
            cpu: self.cpu,
            applied: self.applied,
            samples: self.samples,
            missed_periods: self.missed,
            latency: self.latency.finish(),
            advance,
            irq_latency: None,
        }
    }
}

/// Sleeps to the absolute CLOCK_MONOTONIC time `target_ns` and returns the
/// clock read taken right after the sleep returns: nothing runs in between
/// but the EINTR check (as cyclictest: clock_nanosleep TIMER_ABSTIME, then
/// clock_gettime through the vDSO).
#[inline(always)]
fn wake_at(target_ns: u64) -> u64 {
    sleep_until_ns(target_ns, true);
    now_ns()
}

/// The timer's measuring loop: sleep to each due time, read the clock, then
/// record (and with an advance, spin to the due time first).
fn measure_timer(plan: &Plan, mut s: Sampler<'_>) -> CpuLatency {
    let mut spin = plan.advance_ns.map(|_| Recorder::new());
    let mut late = 0u64;
    let start = now_ns() + START_DELAY_NS;
    let mut k = 0u64;
    loop {
        let offset = plan.period.offset_ns(k);
        if offset >= plan.end_offset_ns || s.samples >= plan.max_samples {
            break;
        }
        let target = start + offset;
        let actual = match plan.advance_ns {
            None => wake_at(target),
            Some(advance) => {
                let woke = wake_at(target.saturating_sub(advance));
                if woke >= target {
                    late += 1;
                    woke
                } else {
                    let reached = spin_until_ns(target);
                    if let Some(spin) = spin.as_mut() {
                        spin.record(reached - woke, reached - start, s.samples);
                    }
                    reached
                }
            }
        };
        if s.take(
            actual.saturating_sub(target),
            target,
            actual,
            actual - start,
        ) {
            break;
        }
        k += 1;
        // periods whose time passed before this late wakeup: missed, not folded in
        // (computed from the wake time, not stepped through one by one)
        let due = plan
            .period
            .first_due_at_or_after(actual.saturating_sub(start));
        let skipped = due.min(plan.end_index).saturating_sub(k);
        s.missed += skipped;
        k += skipped;
    }
    s.finish(spin.map(|spin| AdvanceStats {
        spin: spin.finish(),
        late_wakeups: late,
    }))
}

impl LatencyConfig {
    /// For a device source: binds the RTC's IRQ to the measured CPU, then
    /// opens the device and starts its periodic interrupt.
    #[allow(clippy::type_complexity)]
    fn open_device(
        &self,
        kernel: &dyn Kernel,
    ) -> Result<(Option<Device>, Option<IrqBinding<'static>>), MeasureError> {
        let (Source::Rtc | Source::Hpet) = self.source else {
            return Ok((None, None));
        };
        let Period::Rate { hz } = self.period else {
            return Err(MeasureError::Config(format!(
                "--source {} takes --rate (a power of two, e.g. 2048), not --interval",
                self.source.word()
            )));
        };
        let irq = if self.source == Source::Rtc {
            let text = cpushield_kernel::Procfs::new(kernel)
                .interrupts()
                .map_err(|source| MeasureError::System {
                    what: "reading /proc/interrupts".into(),
                    error: source,
                })?;
            let irq = source::rtc_irq(&text).ok_or_else(|| {
                MeasureError::Config(
                    "--source rtc: no IRQ named rtc0 in /proc/interrupts, so it cannot be sent to the measured CPU: check the RTC driver (rtc_cmos), or use --source timer".into(),
                )
            })?;
            Some(bind_irq(irq, &self.cpus).map_err(|e| {
                MeasureError::Config(format!(
                    "--source rtc: could not bind the RTC's IRQ {irq} to CPUs {}: {e}",
                    self.cpus
                ))
            })?)
        } else {
            None
        };
        let device = Device::open(self.source, hz).map_err(|source| MeasureError::System {
            what: format!("--source {}", self.source.word()),
            error: source,
        })?;
        Ok((Some(device), irq))
    }
}

/// The measuring loop of a device source: block in `read()`, one sample per
/// wakeup after the first (which only sets the start).
fn measure_device(
    plan: &Plan,
    device: &Device,
    mut s: Sampler<'_>,
) -> Result<CpuLatency, MeasureError> {
    let period_ns = plan.period.nominal_ns();
    let read_err = |source| MeasureError::System {
        what: "reading the device".into(),
        error: source,
    };
    device.wait().map_err(read_err)?;
    let start = now_ns();
    let mut prev = start;
    while s.samples < plan.max_samples && prev - start < plan.end_offset_ns {
        let interrupts = device.wait().map_err(read_err)?;
        let actual = now_ns();
        let (value, skipped) = source::interval_latency(actual - prev, period_ns, interrupts);
        s.missed += skipped;
        prev = actual;
        if s.take(value, actual - value, actual, actual - start) {
            break;
        }
    }
    Ok(s.finish(None))
}

/// How long the trace reader may take to read records up to a given time
/// (it polls every 10 ms and reads in bounded rounds).
const TIMERLAT_SETTLE: Duration = Duration::from_millis(200);

/// Gathers the timerlat records of the measured CPUs from now until the run's
/// bound (or `stop`): thread latency into `latency`, IRQ latency into
/// `irq_latency`, thread latencies above the spike threshold to the tap.
fn collect_timerlat(
    kernel: &dyn Kernel,
    config: &LatencyConfig,
    plan: &Plan,
    stop: &AtomicBool,
    control: harness::Control<'_>,
) -> Result<Vec<CpuLatency>, MeasureError> {
    let feed = config.timerlat.as_ref().ok_or_else(|| {
        MeasureError::Config(
            "--source timerlat needs the timerlat trace session (cpushield_measure::trace::TimerlatTracer)".into(),
        )
    })?;
    let mut cpus: std::collections::BTreeMap<usize, TimerlatCpu> = config
        .cpus
        .iter()
        .map(|c| (c, TimerlatCpu::new()))
        .collect();
    let start = now_ns();
    let started = std::time::Instant::now();
    let threshold_ns = config
        .spikes
        .as_ref()
        .map(|t| t.threshold.as_nanos().min(u64::MAX as u128) as u64);
    let take = |cpus: &mut std::collections::BTreeMap<usize, TimerlatCpu>| {
        for r in feed.drain() {
            let due = r.ts_ns.saturating_sub(r.latency_ns);
            if due < start || due.saturating_sub(start) >= plan.end_offset_ns {
                continue;
            }
            let Some(c) = cpus.get_mut(&r.cpu) else {
                continue;
            };
            if c.thread.count() >= plan.max_samples {
                continue;
            }
            let spike = c.take(&r, r.ts_ns.saturating_sub(start));
            if let (Some(spike), Some(limit), Some(tap)) = (spike, threshold_ns, &config.spikes) {
                if spike.latency_ns() > limit {
                    let _ = tap.sender.send(spike);
                }
            }
        }
    };
    loop {
        std::thread::sleep(control.tick);
        take(&mut cpus);
        (control.on_tick)();
        let least = cpus.values().map(|c| c.thread.count()).min().unwrap_or(0);
        let elapsed = started.elapsed();
        let fraction = match config.length {
            Length::Duration(d) => elapsed.as_secs_f64() / d.as_secs_f64().max(1e-9),
            Length::Samples(n) => least as f64 / n.max(1) as f64,
        };
        (control.progress)(Progress {
            elapsed,
            fraction: fraction.clamp(0.0, 1.0),
            samples: cpus.values().map(|c| c.thread.count()).sum(),
            max_ns: cpus.values().map(|c| c.thread.max()).max().unwrap_or(0),
        });
        if stop.load(std::sync::atomic::Ordering::Relaxed) || fraction >= 1.0 {
            break;
        }
    }
    // The records due before the end may still be on their way from the trace.
    std::thread::sleep(TIMERLAT_SETTLE);
    take(&mut cpus);
    (control.on_tick)();
    Ok(cpus
        .into_iter()
        .map(|(cpu, c)| CpuLatency {
            cpu,
            applied: timerlat_policy(kernel, c.tid),
            samples: c.thread.count(),
            missed_periods: c.missed,
            latency: c.thread.finish(),
            advance: None,
            irq_latency: Some(c.irq.finish()),
        })
        .collect())
}

/// The scheduling of a timerlat thread, from its stat; the kernel's own
/// (SCHED_FIFO 95) when it cannot be read (another PID namespace).
fn timerlat_policy(kernel: &dyn Kernel, tid: Option<i32>) -> AppliedPolicy {
    let read = tid.and_then(|t| {
        let text = cpushield_kernel::Procfs::new(kernel)
            .process_file(t, "stat")
            .ok()??;
        cpushield_parse::pid_stat::parse_thread_stat(&text).ok()
    });
    match read {
        Some(st) if st.policy == 0 => AppliedPolicy {
            policy: crate::harness::SchedPolicy::Other,
            priority: 0,
        },
        Some(st) => AppliedPolicy {
            policy: crate::harness::SchedPolicy::Fifo,
            priority: st.rt_priority.min(99) as u8,
        },
        None => AppliedPolicy {
            policy: crate::harness::SchedPolicy::Fifo,
            priority: cpushield_trace::timerlat::THREAD_PRIORITY,
        },
    }
}
