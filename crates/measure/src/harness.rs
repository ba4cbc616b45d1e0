//! What every probe shares, as one run ([`run`]): read the system view ->
//! validate -> process set-up (memory lock, /dev/cpu_dma_latency) -> place the
//! control thread -> the probe's own preparation -> /proc/stat before -> one
//! measuring thread per CPU (placed, real-time, stack pre-faulted, stop signals
//! blocked) under a control loop that polls their progress -> /proc/stat after
//! -> [`RunInfo`] with the warnings. A probe ([`Probe`]) supplies only its
//! settings and its per-CPU measuring loop.

use crate::error::MeasureError;
use crate::procstat;
use crate::progress::Progress;
use crate::run_info::{kernel_release, RunInfo};
use crate::signal::block_stop_signals;
use crate::warnings::{self, Spin, SystemView, Warning, WarningKind};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::{gettid, Host};
use cpushield_rt::sched::{self, DmaLatencyGuard, PlaceFn, Policy};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Stack size of a measuring thread (reserved; only what is touched is resident).
const STACK_BYTES: usize = 512 * 1024;
/// How much of it is touched before measuring, so no page fault happens later.
/// A measuring loop needs a few KiB (its frame, the histogram's record path,
/// the libc calls); memory is locked as it is faulted in, so this is also
/// what the stack adds to the resident size.
const PREFAULT_BYTES: usize = 64 * 1024;

/// The scheduling a measuring thread actually ran with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedPolicy {
    /// "fifo" or "other".
    pub policy: SchedPolicy,
    /// Real-time priority (0 for SCHED_OTHER).
    pub priority: u8,
}

/// A scheduling policy name, as the JSON spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedPolicy {
    /// SCHED_FIFO.
    Fifo,
    /// SCHED_OTHER.
    Other,
}

impl std::fmt::Display for AppliedPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.policy {
            SchedPolicy::Fifo => write!(f, "SCHED_FIFO {}", self.priority),
            SchedPolicy::Other => write!(f, "SCHED_OTHER"),
        }
    }
}

/// Either flag stops the measuring threads: the caller's (a signal) or the
/// harness's own (another thread failed).
pub(crate) struct StopFlags<'a> {
    user: &'a AtomicBool,
    halt: AtomicBool,
}

impl StopFlags<'_> {
    /// Whether the threads should stop now.
    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.user.load(Ordering::Relaxed) || self.halt.load(Ordering::Relaxed)
    }
}

/// Counters a measuring thread publishes for the control thread, on their own
/// cache line so publishing does not slow a neighbour.
#[repr(align(64))]
#[derive(Default)]
pub(crate) struct Live {
    samples: AtomicU64,
    max_ns: AtomicU64,
}

impl Live {
    /// Publishes the sample count and running maximum (relaxed stores only).
    #[inline]
    pub(crate) fn publish(&self, samples: u64, max_ns: u64) {
        self.samples.store(samples, Ordering::Relaxed);
        self.max_ns.store(max_ns, Ordering::Relaxed);
    }
}

/// Process-wide set-up held for the length of a run.
pub(crate) struct ProcessSetup {
    _dma: Option<DmaLatencyGuard>,
    pub(crate) warnings: Vec<Warning>,
}

impl ProcessSetup {
    /// Locks memory (if asked) and holds /dev/cpu_dma_latency at 0 (if
    /// asked); failures become warnings.
    ///
    /// Memory is locked as it is faulted in (MCL_ONFAULT), not all at once as
    /// cyclictest's `mlockall(MCL_CURRENT | MCL_FUTURE)` does: locking the
    /// whole multi-megabyte binary would make it resident although the probes
    /// run a few pages of it. What a measuring loop touches is faulted in
    /// before it starts (the stack here, each [`Recorder`](crate::recorder::Recorder)
    /// when created) and stays locked, so the loop takes no page fault either way.
    pub(crate) fn enter(lock_memory: bool, hold_dma_latency: bool) -> Self {
        let mut warnings = Vec::new();
        if lock_memory {
            // kernels before 4.4 know no MCL_ONFAULT (EINVAL): lock everything then
            let locked = sched::lock_memory_on_fault().or_else(|e| match e.raw_os_error() {
                Some(libc::EINVAL) => sched::lock_memory(),
                _ => Err(e),
            });
            if let Err(e) = locked {
                warnings.push(Warning::new(
                    WarningKind::MemoryNotLocked,
                    format!("could not lock memory (mlockall: {e}): page faults may add latency"),
                    "run as root, or raise the limit (ulimit -l unlimited)",
                ));
            }
        }
        let dma = match hold_dma_latency.then(|| DmaLatencyGuard::hold(0)) {
            None => None,
            Some(Ok(g)) => Some(g),
            Some(Err(e)) => {
                warnings.push(Warning::new(
                    WarningKind::DmaLatency,
                    format!("could not hold /dev/cpu_dma_latency at 0 ({e}): deep C-state exits may add latency"),
                    "run as root",
                ));
                None
            }
        };
        Self {
            _dma: dma,
            warnings,
        }
    }
}

/// Keeps the calling (control) thread off the measured CPUs while alive, and
/// restores its affinity afterwards.
pub(crate) struct ControlPlacement {
    host: Host,
    saved: Option<CpuSet>,
}

impl ControlPlacement {
    /// Moves the calling thread to `cpus` (None: leave it where it is).
    pub(crate) fn enter(host: &Host, cpus: Option<&CpuSet>) -> Self {
        let kernel = host.kernel();
        let host = host.clone();
        let Some(cpus) = cpus else {
            return Self { host, saved: None };
        };
        let saved = kernel.get_affinity(0).ok();
        let target = match &saved {
            Some(s) if s.intersects(cpus) => s.intersection(cpus),
            _ => cpus.clone(),
        };
        match kernel.set_affinity(0, &target) {
            Ok(()) => Self { host, saved },
            Err(_) => Self { host, saved: None },
        }
    }
}

impl Drop for ControlPlacement {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            let _ = self.host.kernel().set_affinity(0, saved);
        }
    }
}

/// Refuses a SCHED_FIFO priority the kernel would refuse, in one line
/// naming the flag and the range (the rule is the runtime's
/// `Policy::validate`).
pub(crate) fn check_priority(priority: Option<u8>) -> Result<(), MeasureError> {
    match priority.map(|p| Policy::Fifo(p).validate()) {
        Some(Err(reason)) => Err(MeasureError::Config(format!("--{reason}"))),
        _ => Ok(()),
    }
}

/// Puts the calling measuring thread on `cpu` at `priority` (None: SCHED_OTHER),
/// blocks stop signals and pre-faults its stack. Failing to pin is an error
/// (the run would measure the wrong CPU); failing to get FIFO is a warning.
pub(crate) fn enter_measuring_thread(
    cpu: usize,
    priority: Option<u8>,
    placer: Option<PlaceFn>,
) -> Result<(AppliedPolicy, Option<Warning>), MeasureError> {
    block_stop_signals();
    let target = CpuSet::from_cpus([cpu]);
    match placer {
        Some(place) => place.place(gettid(), &target),
        None => sched::pin(0, &target),
    }
    .map_err(|source| MeasureError::Pin { cpu, source })?;
    let mut applied = AppliedPolicy {
        policy: SchedPolicy::Other,
        priority: 0,
    };
    let mut warning = None;
    if let Some(p) = priority {
        match sched::set_policy(0, Policy::Fifo(p)) {
            Ok(()) => {
                applied = AppliedPolicy {
                    policy: SchedPolicy::Fifo,
                    priority: p,
                }
            }
            Err(e) => {
                warning = Some(Warning::new(
                    WarningKind::NoRtPriority,
                    format!("could not set SCHED_FIFO {p} for the thread on CPU {cpu} ({e}): it ran at SCHED_OTHER"),
                    "run as root, or raise the limit (ulimit -r 99)",
                ))
            }
        }
    }
    sched::prefault_stack(PREFAULT_BYTES);
    Ok((applied, warning))
}

/// An empty vector with room for `n` values whose pages are already faulted
/// in (memory is locked as it is faulted in, see [`ProcessSetup::enter`]), so
/// pushing up to `n` values from a measuring loop takes no page fault.
pub(crate) fn prefaulted(n: usize) -> Vec<u64> {
    let mut v = vec![0u64; n];
    // calloc'd memory is zero but not yet mapped; black_box keeps the
    // compiler from dropping these writes as redundant
    std::hint::black_box(&mut v[..]).fill(0);
    v.clear();
    v
}

/// How the control loop computes the fraction done.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bound {
    /// The run lasts this long.
    Time(Duration),
    /// Each CPU records this many samples (or runs).
    Count(u64),
}

/// The control side of a probe run.
pub(crate) struct Control<'a> {
    /// How often the control loop wakes.
    pub(crate) tick: Duration,
    /// What bounds the run (for the fraction done).
    pub(crate) bound: Bound,
    /// Called on every tick, on the control thread.
    pub(crate) on_tick: &'a mut dyn FnMut(),
    /// The caller's progress callback.
    pub(crate) progress: &'a mut dyn FnMut(Progress),
}

/// Runs `body` on one thread per CPU of `cpus` and the control loop on the
/// calling thread until every thread has returned. `body` gets the CPU, its
/// live counters and the stop flags. The first thread error stops the others
/// and is returned.
pub(crate) fn run_per_cpu<R, F>(
    cpus: &CpuSet,
    stop: &AtomicBool,
    control: Control<'_>,
    body: F,
) -> Result<Vec<R>, MeasureError>
where
    R: Send,
    F: Fn(usize, &Live, &StopFlags<'_>) -> Result<R, MeasureError> + Sync,
{
    let flags = StopFlags {
        user: stop,
        halt: AtomicBool::new(false),
    };
    let cpu_list: Vec<usize> = cpus.iter().collect();
    let lives: Vec<Live> = cpu_list.iter().map(|_| Live::default()).collect();
    let first_error: Mutex<Option<MeasureError>> = Mutex::new(None);
    let started = Instant::now();
    let results = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, &cpu) in cpu_list.iter().enumerate() {
            let live = &lives[i];
            let (body, flags, first_error) = (&body, &flags, &first_error);
            let spawned = std::thread::Builder::new()
                .name(format!("cpushield-cpu{cpu}"))
                .stack_size(STACK_BYTES)
                .spawn_scoped(scope, move || match body(cpu, live, flags) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        flags.halt.store(true, Ordering::Relaxed);
                        first_error.lock().expect("error lock").get_or_insert(e);
                        None
                    }
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    flags.halt.store(true, Ordering::Relaxed);
                    *first_error.lock().expect("error lock") = Some(MeasureError::Spawn(e));
                    break;
                }
            }
        }
        loop {
            std::thread::sleep(control.tick);
            (control.on_tick)();
            let samples: u64 = lives
                .iter()
                .map(|l| l.samples.load(Ordering::Relaxed))
                .sum();
            let least: u64 = lives
                .iter()
                .map(|l| l.samples.load(Ordering::Relaxed))
                .min()
                .unwrap_or(0);
            let max_ns = lives
                .iter()
                .map(|l| l.max_ns.load(Ordering::Relaxed))
                .max()
                .unwrap_or(0);
            let elapsed = started.elapsed();
            let fraction = match control.bound {
                Bound::Time(d) if !d.is_zero() => elapsed.as_secs_f64() / d.as_secs_f64(),
                Bound::Count(n) if n > 0 => least as f64 / n as f64,
                _ => 1.0,
            };
            (control.progress)(Progress {
                elapsed,
                fraction: fraction.clamp(0.0, 1.0),
                samples,
                max_ns,
            });
            let all_done = handles.iter().all(|h| h.is_finished());
            if all_done {
                break;
            }
        }
        (control.on_tick)();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| MeasureError::Thread("a measuring thread panicked".into()))
            })
            .collect::<Vec<_>>()
    });
    if let Some(e) = first_error.into_inner().expect("error lock") {
        return Err(e);
    }
    let mut out = Vec::new();
    for r in results {
        match r? {
            Some(v) => out.push(v),
            None => return Err(MeasureError::Thread("a measuring thread failed".into())),
        }
    }
    Ok(out)
}

/// The settings every probe has, borrowed from its config.
pub(crate) struct Common<'a> {
    /// CPUs to measure, one thread each.
    pub(crate) cpus: &'a CpuSet,
    /// SCHED_FIFO priority of the measuring threads (None: SCHED_OTHER).
    pub(crate) priority: Option<u8>,
    /// Lock memory for the run (each page as it is first touched).
    pub(crate) lock_memory: bool,
    /// How often the control loop wakes.
    pub(crate) tick: Duration,
    /// How the measuring threads reach their CPUs (None: plain affinity).
    pub(crate) placer: Option<PlaceFn>,
}

/// [`Probe::common`] and [`Probe::validate`] for a config with the usual
/// fields (`cpus`, `priority`, `lock_memory`, `tick`, `placer`) and an
/// inherent `validate(&self, online)`.
macro_rules! common_settings {
    () => {
        fn common(&self) -> $crate::harness::Common<'_> {
            $crate::harness::Common {
                cpus: &self.cpus,
                priority: self.priority,
                lock_memory: self.lock_memory,
                tick: self.tick,
                placer: self.placer.clone(),
            }
        }

        fn validate(
            &self,
            online: &cpushield_cpuset::CpuSet,
        ) -> Result<(), $crate::error::MeasureError> {
            Self::validate(self, online)
        }
    };
}
pub(crate) use common_settings;

/// A measuring thread as its loop sees it: on its CPU, at its policy.
pub(crate) struct MeasuringThread {
    /// The CPU it runs on.
    pub(crate) cpu: usize,
    /// Its kernel thread ID.
    pub(crate) tid: i32,
    /// The scheduling it got.
    pub(crate) applied: AppliedPolicy,
}

/// One probe as [`run`] runs it: its settings and its per-CPU measuring loop.
pub(crate) trait Probe: Sync {
    /// What the probe prepares once per run, after the control thread is
    /// placed and before the measurement starts (a calibration, a spike ring,
    /// pollers); shared by the measuring threads.
    type Prepared: Sync;
    /// One CPU's result.
    type Cpu: Send;

    /// The settings every probe has.
    fn common(&self) -> Common<'_>;

    /// Whether the run holds /dev/cpu_dma_latency at 0, as cyclictest does
    /// (the default).
    fn hold_dma_latency(&self) -> bool {
        true
    }

    /// Checks the settings against the online CPUs; the error names the input
    /// and the remedy.
    fn validate(&self, online: &CpuSet) -> Result<(), MeasureError>;

    /// How the probe spins at a real-time policy, known before the run (for
    /// the throttling warning); None if it does not spin.
    fn spin(&self) -> Option<Spin>;

    /// What bounds the run (for the fraction done).
    fn bound(&self) -> Bound;

    /// Prepares the run. `Ok(None)`: `stop` was set while preparing, nothing
    /// is measured.
    fn prepare(
        &self,
        host: &Host,
        stop: &AtomicBool,
    ) -> Result<Option<Self::Prepared>, MeasureError>;

    /// Called on every tick of the control loop, on the control thread.
    fn on_tick(&self, _prepared: &Self::Prepared) {}

    /// Whether the kernel measures instead of a thread of ours per CPU (the
    /// timerlat tracer's threads): then [`Probe::collect`] gathers the
    /// results on the control thread and no measuring thread is started.
    fn measured_by_kernel(&self) -> bool {
        false
    }

    /// Gathers what the kernel measured until the bound or `stop`, calling
    /// the control's tick and progress as the measuring threads' control
    /// loop does; one result per CPU, in CPU order. Called only when
    /// [`Probe::measured_by_kernel`].
    fn collect(
        &self,
        _host: &Host,
        _prepared: &Self::Prepared,
        _stop: &AtomicBool,
        _control: Control<'_>,
    ) -> Result<Vec<Self::Cpu>, MeasureError> {
        Err(MeasureError::Thread(
            "this probe measures on its own threads, not in the kernel".into(),
        ))
    }

    /// The measuring loop of one CPU, on its own thread, already placed.
    fn measure_cpu(
        &self,
        prepared: &Self::Prepared,
        thread: &MeasuringThread,
        live: &Live,
        flags: &StopFlags<'_>,
    ) -> Result<Self::Cpu, MeasureError>;
}

/// What [`run`] hands back to the probe to build its report from.
pub(crate) struct Outcome<P: Probe> {
    /// The system as read before the run.
    pub(crate) view: SystemView,
    /// What the probe prepared (None: stopped while preparing).
    pub(crate) prepared: Option<P::Prepared>,
    /// One result per measured CPU, in CPU order (empty if nothing was measured).
    pub(crate) cpus: Vec<P::Cpu>,
    /// When, how long (the measurement only), interrupted or not, warnings.
    pub(crate) run: RunInfo,
}

/// Runs `probe` until its bound is reached or `stop` is set: the common
/// skeleton of every probe. `elapsed_ns` covers the measurement only, not the
/// preparation (e.g. determinism's calibration).
pub(crate) fn run<P: Probe>(
    host: &Host,
    probe: &P,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome<P>, MeasureError> {
    let kernel = host.kernel();
    let common = probe.common();
    let view = warnings::read_view(kernel, common.cpus)?;
    probe.validate(&view.online)?;
    let mut warnings = warnings::before_run(&view, common.cpus, is_root(), probe.spin());
    let setup = ProcessSetup::enter(common.lock_memory, probe.hold_dma_latency());
    warnings.extend(setup.warnings.iter().cloned());
    let _placement = ControlPlacement::enter(
        host,
        warnings::control_cpus(common.cpus, &view.online).as_ref(),
    );
    let prepared = probe.prepare(host, stop)?;
    let before = procstat::snapshot(kernel).ok();
    let started_unix_ns = unix_now_ns();
    let started = Instant::now();
    let mut threads = Vec::new();
    if let Some(prepared) = &prepared {
        let mut on_tick = || probe.on_tick(prepared);
        let control = Control {
            tick: common.tick,
            bound: probe.bound(),
            on_tick: &mut on_tick,
            progress,
        };
        threads = if probe.measured_by_kernel() {
            probe
                .collect(host, prepared, stop, control)?
                .into_iter()
                .map(|cpu| (cpu, None))
                .collect()
        } else {
            run_per_cpu(common.cpus, stop, control, |cpu, live, flags| {
                let (applied, warning) =
                    enter_measuring_thread(cpu, common.priority, common.placer.clone())?;
                let thread = MeasuringThread {
                    cpu,
                    tid: gettid(),
                    applied,
                };
                Ok((probe.measure_cpu(prepared, &thread, live, flags)?, warning))
            })?
        };
    }
    let elapsed_ns = started.elapsed().as_nanos() as u64;
    if let (Some(before), Ok(after)) = (before, procstat::snapshot(kernel)) {
        warnings.extend(warnings::after_run(
            &view,
            common.cpus,
            &before,
            &after,
            procstat::user_hz(),
        ));
    }
    let mut cpus = Vec::with_capacity(threads.len());
    for (result, warning) in threads {
        warnings.extend(warning);
        cpus.push(result);
    }
    Ok(Outcome {
        view,
        prepared,
        cpus,
        run: RunInfo {
            started_unix_ns,
            elapsed_ns,
            interrupted: stop.load(Ordering::Relaxed),
            kernel_release: kernel_release(kernel),
            warnings,
        },
    })
}

/// CLOCK_REALTIME now, in nanoseconds since the Unix epoch (for reports).
pub(crate) fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Whether the process runs as root.
pub(crate) fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefaulted_vector_is_empty_with_room_for_all_values() {
        let v = prefaulted(10_000);
        assert!(v.is_empty());
        assert!(v.capacity() >= 10_000);
        assert!(prefaulted(0).is_empty());
    }
}
