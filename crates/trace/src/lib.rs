//! cpushield-trace: the tracing engine behind `measure latency --trace-above`
//! and `compare --attribute`: records kernel
//! events on the measured CPUs through tracefs (no osnoise/timerlat tracer
//! needed) and explains each latency spike by what ran between the intended
//! and the actual wakeup.
//!
//! ```no_run
//! use cpushield_trace::{Spike, TraceOptions, TraceSession};
//! use cpushield_cpuset::CpuSet;
//! use std::sync::Arc;
//!
//! let cpus = CpuSet::parse_list("1").unwrap();
//! let session = TraceSession::start(Arc::new(cpushield_kernel::RealKernel), &cpus, TraceOptions::default())?;
//! let marker = session.marker(); // Clone + Send: give it to the real-time thread
//! // ... in the measuring loop, for a sample above the threshold:
//! marker.mark(&Spike { seq: 1, cpu: 1, tid: 1234, intended_ns: 10, actual_ns: 2_000_010 });
//! // ... at the end:
//! let summary = session.finish();
//! print!("{}", cpushield_trace::render_summary(&summary, 10, 3));
//! # Ok::<(), cpushield_trace::TraceError>(())
//! ```
//!
//! Every tracefs setting is made in a private instance
//! (`instances/cpushield-<pid>`), so the top-level trace buffer of other users
//! is not touched; each setting is still remembered and restored, the instance
//! removed and tracefs unmounted if a cpushield process mounted it and no
//! other one still traces ([`mount`]) — on `finish`, on drop, and on
//! SIGINT/SIGTERM. A program that traces many phases one after
//! another makes a [`TraceInstance`] once and lends it to each session
//! ([`TraceSession::start_in`]): the events stay enabled in between, and the
//! instance is restored and removed when it is closed.
//!
//! What the attribution needs to know of the kernel beyond the trace (the
//! tick period, the preemption model, whether the CPUs are virtual) comes in
//! [`TraceOptions::kernel`] as a [`KernelContext`]: `cpushield-check` reads it
//! (`cpushield_check::trace_context`), so this crate depends on nothing above
//! the kernel door (`cpushield-kernel`).

pub mod attribute;
pub mod event;
pub mod mount;
mod reader;
pub mod settings;
mod signal;
pub mod summary;
pub mod timerlat;
pub mod watch;

pub use attribute::{Attribution, Cause, CauseKind, Phase, Spike};
pub use event::TimerlatRecord;
pub use mount::TracefsUse;
pub use summary::{render_attribution, render_summary, TraceSummary};
pub use timerlat::TimerlatFeed;
pub use watch::{WakeupWatch, WatchedWakeups};

use cpushield_cpuset::CpuSet;
use cpushield_kernel::{Kernel, TraceMarker, TracePipe};
use reader::{Reader, Shared};
use settings::SettingsGuard;
use signal::SignalWatch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The events enabled, where the kernel has them (`system/event`), with the
/// filter each gets. Context switches are kept only when a real-time task
/// (kernel priority below 100) is involved: under a load of ordinary tasks
/// they are most of the volume, and every trace line already names the task
/// current when it was recorded. The `ipi:ipi_send_*` events are left out:
/// they fire on the sending CPU, which is not traced; the receiving side is
/// the `irq_vectors` entries.
///
/// Every event that fires inside the measured task's own wakeup path adds to
/// every sample. `dev/bench/trace-event-cost.sh` measures it A/B on the measured
/// CPU (3 rounds, medians of the added p50 on this project's
/// 2-vCPU VM): `sched_wakeup` +0.5 us, `hrtimer_expire_entry/exit` +0.5 us,
/// the hrtimer entry with a filter that drops the probe's own timer still
/// +0.4 us (a filter runs after the event is built), `sched_switch` +0.2 us;
/// the whole set +1.2 us with them, +0.7 us without. So `sched_wakeup` and
/// the hrtimer events are not enabled: attribution takes the wakeup from the
/// end of the interrupt that woke the task (its exit shows the reschedule
/// flag), and an hrtimer callback's time is charged to the local timer
/// interrupt it ran in. The local timer's entry and exit stay: without
/// either, the time after a tick would be charged to the wrong context.
pub const EVENTS: &[(&str, Option<&str>)] = &[
    ("irq/irq_handler_entry", None),
    ("irq/irq_handler_exit", None),
    ("irq/softirq_entry", None),
    ("irq/softirq_exit", None),
    (
        "sched/sched_switch",
        Some("prev_prio < 100 || next_prio < 100"),
    ),
    ("irq_vectors/local_timer_entry", None),
    ("irq_vectors/local_timer_exit", None),
    ("irq_vectors/reschedule_entry", None),
    ("irq_vectors/reschedule_exit", None),
    ("irq_vectors/call_function_entry", None),
    ("irq_vectors/call_function_exit", None),
    ("irq_vectors/call_function_single_entry", None),
    ("irq_vectors/call_function_single_exit", None),
    ("irq_vectors/irq_work_entry", None),
    ("irq_vectors/irq_work_exit", None),
    ("irq_vectors/x86_platform_ipi_entry", None),
    ("irq_vectors/x86_platform_ipi_exit", None),
    ("irq_vectors/thermal_apic_entry", None),
    ("irq_vectors/thermal_apic_exit", None),
    ("ipi/ipi_entry", None),
    ("ipi/ipi_exit", None),
    ("workqueue/workqueue_execute_start", None),
    ("workqueue/workqueue_execute_end", None),
];

/// What to do on SIGINT/SIGTERM while tracing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignalMode {
    /// Restore tracefs, then re-raise the signal with the previous action in
    /// place (the process dies of it, or the caller's handler runs).
    RestoreAndReraise,
    /// Install nothing: the caller handles signals and calls `finish`.
    None,
}

/// How to trace.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// tracefs mount point.
    pub tracefs: PathBuf,
    /// Where the cpushield processes that use tracefs agree on who unmounts
    /// it ([`mount`]): the shield's state directory.
    pub state_dir: PathBuf,
    /// Ring buffer per traced CPU, KiB.
    pub buffer_kb: u32,
    /// How often the reader drains the pipes.
    pub poll: Duration,
    /// How long events are kept in memory for attribution.
    pub retention: Duration,
    /// Where to save the raw trace window of each spike (created if missing).
    pub trace_dir: Option<PathBuf>,
    /// At most this many windows are kept on disk (those of the largest spikes).
    pub max_saved: usize,
    /// Spikes that may wait for attribution at once.
    pub queue: usize,
    /// Signal handling.
    pub signals: SignalMode,
    /// Use a private tracefs instance (falls back to the top level when the
    /// kernel has no instances).
    pub instance: bool,
    /// The /proc where trace events' (global) thread IDs are looked up: the
    /// machine's own, also when the caller runs in a private PID namespace.
    pub proc_root: PathBuf,
    /// The measurement runs in a private PID namespace: user tasks of other
    /// namespaces are charged as such (a namespace-scoped shield leaves them).
    pub namespace_scope: bool,
    /// What the attribution needs to know of the kernel (see [`KernelContext`]).
    pub kernel: KernelContext,
    /// Run the kernel's timerlat tracer in the session's instance with this
    /// timer period, microseconds (None: no tracer, only events). Its records
    /// come out of [`TraceSession::timerlat_feed`].
    pub timerlat_period_us: Option<u32>,
    /// Enable [`EVENTS`] and the osnoise events for attribution; off, the
    /// session records only what its tracer does.
    pub attribution_events: bool,
    /// Explain the wakeups of threads the session did not start, from the
    /// kernel's record of when each meant to wake ([`watch`]): enables
    /// [`watch::WATCH_EVENT`] too. What it saw is in
    /// [`TraceSummary::watched`], its late wakeups among the attributions.
    pub watch: Option<WakeupWatch>,
}

/// The kernel facts that explain a spike beyond the trace itself. The
/// default knows nothing: no tick period, the preemption model "unknown", a
/// physical CPU, USER_HZ 100.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelContext {
    /// The tick period per CPU, ns (`None` on a nohz_full CPU); a CPU missing
    /// here has no known tick.
    pub tick_ns: BTreeMap<usize, Option<u64>>,
    /// The kernel's preemption model ("none", "voluntary", "full", "rt"...).
    pub preempt_model: Option<String>,
    /// The CPUs are virtual (a hypervisor runs them): time no event accounts
    /// for may be time the vCPU did not run.
    pub virtual_cpu: bool,
    /// USER_HZ, the unit of /proc/stat's steal counter.
    pub user_hz: u64,
}

impl Default for KernelContext {
    fn default() -> Self {
        Self {
            tick_ns: BTreeMap::new(),
            preempt_model: None,
            virtual_cpu: false,
            // USER_HZ is 100 on every Linux architecture.
            user_hz: 100,
        }
    }
}

impl Default for TraceOptions {
    fn default() -> Self {
        Self {
            // tracefs' usual mount point, an option the user may change; not a fact read.
            tracefs: PathBuf::from("/sys/kernel/tracing"),
            state_dir: cpushield_kernel::shield_state_dir(),
            buffer_kb: 32768,
            poll: Duration::from_millis(10),
            retention: Duration::from_secs(2),
            trace_dir: None,
            max_saved: 50,
            queue: 4096,
            signals: SignalMode::RestoreAndReraise,
            instance: true,
            proc_root: PathBuf::from(cpushield_kernel::procfs::PROC),
            namespace_scope: false,
            kernel: KernelContext::default(),
            timerlat_period_us: None,
            attribution_events: true,
            watch: None,
        }
    }
}

/// A trace session that could not start.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Bad CPU list.
    #[error("{0}")]
    Cpus(String),
    /// Another session runs in this process.
    #[error("a trace session is already running in this process: finish it first")]
    Busy,
    /// tracefs could not be mounted or set up.
    #[error("{0}")]
    Setup(String),
}

/// Undoes what the session did to the system; runs once.
struct Cleanup {
    kernel: Arc<dyn Kernel>,
    guard: SettingsGuard,
    instance: Option<PathBuf>,
    /// This process's use of tracefs, ended last.
    mount: Option<TracefsUse>,
    done: bool,
    errors: Vec<String>,
}

impl Cleanup {
    fn run(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let errs = self.guard.restore();
        self.errors.extend(errs);
        if let Some(dir) = self.instance.take() {
            self.errors
                .extend(crate::remove_instance(self.kernel.as_ref(), &dir));
        }
        if let Some(mut mount) = self.mount.take() {
            self.errors.extend(mount.release());
        }
    }
}

/// Removes the trace instance `dir`, retrying for half a second: the kernel
/// refuses (EBUSY) while a reader still holds one of its files open. The
/// error, with its remedy, where it stays.
pub fn remove_instance(kernel: &dyn Kernel, dir: &std::path::Path) -> Option<String> {
    let mut last = None;
    for _ in 0..20 {
        match kernel.rmdir(dir) {
            Ok(()) => return None,
            Err(e) => {
                last = Some(e);
                std::thread::sleep(Duration::from_millis(25));
            }
        }
    }
    last.map(|e| {
        format!(
            "{}: could not remove the trace instance: {e}; remove it with rmdir",
            dir.display()
        )
    })
}

static ACTIVE: AtomicBool = AtomicBool::new(false);

/// A running trace of some CPUs. Dropping it stops tracing and restores tracefs.
pub struct TraceSession {
    shared: Arc<Shared>,
    instance: Arc<TraceInstance>,
    /// The instance ends with the session ([`TraceSession::start`]).
    owned: bool,
    /// The session's own settings, restored when it ends.
    guard: Arc<Mutex<SettingsGuard>>,
    reader: Option<JoinHandle<()>>,
    signals: Option<SignalWatch>,
    marker: SpikeMarker,
    cpus: CpuSet,
    summary: TraceSummary,
    finished: bool,
}

/// Writes spike markers into the trace and queues spikes for attribution.
/// Cheap and allocation-free: call it from the real-time thread.
#[derive(Clone)]
pub struct SpikeMarker {
    /// Taken (and the file closed) when the session ends, so the instance can go.
    writer: Arc<RwLock<Option<Box<dyn TraceMarker>>>>,
    shared: Arc<Shared>,
}

impl SpikeMarker {
    /// Writes `cpushield spike seq=.. cpu=.. tid=.. intended=.. actual=.. latency_ns=..`
    /// to trace_marker (one write(2)) and queues the spike. Returns false when
    /// the queue was full (the spike is counted as dropped).
    pub fn mark(&self, spike: &Spike) -> bool {
        let mut buf = [0u8; 192];
        let mut cur = std::io::Cursor::new(&mut buf[..]);
        let _ = std::io::Write::write_fmt(
            &mut cur,
            format_args!(
                "cpushield spike seq={} cpu={} tid={} intended={} actual={} latency_ns={}\n",
                spike.seq,
                spike.cpu,
                spike.tid,
                spike.intended_ns,
                spike.actual_ns,
                spike.latency_ns()
            ),
        );
        let n = cur.position() as usize;
        if let Ok(w) = self.writer.read() {
            match w.as_ref() {
                Some(w) => {
                    let _ = w.write_line(&buf[..n]);
                }
                None => return false, // the session has ended
            }
        }
        self.shared.marked.fetch_add(1, Ordering::Relaxed);
        if self.shared.queue.push(*spike).is_err() {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }
}

impl SpikeMarker {
    /// Tells the trace which thread measures `cpu`: writes `cpushield thread
    /// cpu=.. tid=..` to trace_marker. Call it on the measuring thread itself:
    /// the trace records the writer's global thread ID, so a spike that
    /// carries the ID seen inside a PID namespace is matched with the events
    /// (which carry global IDs).
    pub fn announce(&self, cpu: usize, tid: i32) {
        let mut buf = [0u8; 96];
        let mut cur = std::io::Cursor::new(&mut buf[..]);
        let _ = std::io::Write::write_fmt(
            &mut cur,
            format_args!("{THREAD_MARK} cpu={cpu} tid={tid}\n"),
        );
        let n = cur.position() as usize;
        if let Ok(w) = self.writer.read() {
            if let Some(w) = w.as_ref() {
                let _ = w.write_line(&buf[..n]);
            }
        }
    }
}

/// The text that starts a thread announcement (see [`SpikeMarker::announce`]).
pub const THREAD_MARK: &str = "cpushield thread";

/// A tracefs directory made ready once (its trace clock, buffers and the
/// attribution events, [`EVENTS`]) and lent to one [`TraceSession`] after
/// another ([`TraceSession::start_in`]), so that a program tracing many short
/// phases pays for the setup once. Each enabled event costs the kernel a
/// code patch or an RCU grace period, which waits for every CPU: on a loaded
/// machine, and above all in a VM whose vCPUs take turns, setting up and
/// tearing down a session took seconds each time (compare traced three or
/// four phases per scenario). Between sessions tracing is off, so nothing is
/// recorded; what a session's reader did not take is skipped by the next
/// (it reads only what was recorded after it started). Dropping the last
/// handle (or [`TraceInstance::close`]) restores every setting, removes the
/// instance and unmounts tracefs if it was mounted here.
pub struct TraceInstance {
    kernel: Arc<dyn Kernel>,
    cleanup: Arc<Mutex<Cleanup>>,
    dir: PathBuf,
    /// The CPUs whose buffers are sized (grown by [`Self::cover`]).
    cpus: Mutex<CpuSet>,
    buffer_kb: u32,
    tracefs: PathBuf,
    /// What the setup did, the start of each session's summary.
    base: TraceSummary,
}

impl TraceInstance {
    /// Mounts tracefs if needed, makes a private instance (or uses the top
    /// level where the kernel has none), sizes the buffers of `cpus` and
    /// enables the attribution events, from `opts` (its tracefs, buffer size,
    /// instance and attribution settings; the rest is each session's).
    /// Nothing is recorded until a session starts.
    pub fn create(
        kernel: Arc<dyn Kernel>,
        cpus: &CpuSet,
        opts: &TraceOptions,
    ) -> Result<TraceInstance, TraceError> {
        check_online(kernel.as_ref(), cpus)?;
        let mount = TracefsUse::acquire(kernel.clone(), &opts.tracefs, &opts.state_dir)
            .map_err(TraceError::Setup)?;
        let mounted_by_us = mount.mounted_here();
        let mut cleanup = Cleanup {
            kernel: kernel.clone(),
            guard: SettingsGuard::new(kernel.clone()),
            instance: None,
            mount: Some(mount),
            done: false,
            errors: Vec::new(),
        };
        let (dir, mut base) = match Self::configure(kernel.as_ref(), cpus, opts, &mut cleanup) {
            Ok(configured) => configured,
            Err(e) => return Err(TraceError::Setup(restored_after(&mut cleanup, e))),
        };
        base.mounted_tracefs = mounted_by_us;
        Ok(TraceInstance {
            kernel,
            cleanup: Arc::new(Mutex::new(cleanup)),
            dir,
            cpus: Mutex::new(cpus.clone()),
            buffer_kb: opts.buffer_kb,
            tracefs: opts.tracefs.clone(),
            base,
        })
    }

    fn configure(
        k: &dyn Kernel,
        cpus: &CpuSet,
        opts: &TraceOptions,
        cleanup: &mut Cleanup,
    ) -> Result<(PathBuf, TraceSummary), String> {
        let root = &opts.tracefs;
        check_mono_clock(k, root)?;
        let mut summary = TraceSummary::default();
        let dir = session_dir(k, opts, cleanup, &mut summary);
        let g = &mut cleanup.guard;
        prepare_buffers(g, k, root, &dir, cpus, opts, &mut summary)?;
        if opts.attribution_events {
            enable_attribution_events(g, k, &dir, &mut summary)?;
        }
        Ok((dir, summary))
    }

    /// The tracefs directory in use (the private instance, or the top level).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sizes the buffers of those of `cpus` not yet covered.
    fn cover(&self, cpus: &CpuSet) -> Result<(), TraceError> {
        let mut covered = self.cpus.lock().expect("instance cpus");
        let new = cpus.difference(&covered);
        if new.is_empty() {
            return Ok(());
        }
        let mut cleanup = self.cleanup.lock().expect("cleanup");
        for cpu in new.iter() {
            let f = self.dir.join(format!("per_cpu/cpu{cpu}/buffer_size_kb"));
            cleanup
                .guard
                .set(&f, &self.buffer_kb.to_string())
                .map_err(|e| TraceError::Setup(e.to_string()))?;
        }
        *covered = covered.union(&new);
        Ok(())
    }

    /// Restores every setting, removes the instance and unmounts tracefs if
    /// it was mounted here (once; dropping does it too). Returns what could
    /// not be restored, each with its remedy.
    pub fn close(&self) -> Vec<String> {
        let mut cleanup = self.cleanup.lock().expect("cleanup");
        cleanup.run();
        std::mem::take(&mut cleanup.errors)
    }
}

impl Drop for TraceInstance {
    fn drop(&mut self) {
        for e in self.close() {
            eprintln!("cpushield: warning: {e}");
        }
    }
}

/// Refuses an empty CPU list or one with a CPU not online.
fn check_online(kernel: &dyn Kernel, cpus: &CpuSet) -> Result<(), TraceError> {
    if cpus.is_empty() {
        return Err(TraceError::Cpus(
            "no CPU to trace: pass a CPU list like 1".into(),
        ));
    }
    let online =
        cpushield_kernel::online_cpus(kernel).map_err(|e| TraceError::Cpus(e.to_string()))?;
    if let Some(cpu) = cpus.difference(&online).first() {
        return Err(TraceError::Cpus(format!(
            "CPU {cpu} is not online (online: {}): trace online CPUs only",
            online.to_list()
        )));
    }
    Ok(())
}

impl TraceSession {
    /// Starts tracing `cpus` on the kernel's tracefs (mounting it if needed),
    /// in an instance of its own that ends with the session.
    pub fn start(
        kernel: Arc<dyn Kernel>,
        cpus: &CpuSet,
        opts: TraceOptions,
    ) -> Result<TraceSession, TraceError> {
        check_online(kernel.as_ref(), cpus)?;
        if ACTIVE.swap(true, Ordering::SeqCst) {
            return Err(TraceError::Busy);
        }
        let started = TraceInstance::create(kernel, cpus, &opts)
            .and_then(|instance| Self::begin(Arc::new(instance), cpus, opts, true));
        if started.is_err() {
            ACTIVE.store(false, Ordering::SeqCst);
        }
        started
    }

    /// Starts tracing `cpus` in `instance`, which outlives the session (see
    /// [`TraceInstance`]): the instance's tracefs, buffer size and events
    /// stand; `opts` gives the rest. The instance's owner handles signals, so
    /// `opts.signals` must be [`SignalMode::None`].
    pub fn start_in(
        instance: &Arc<TraceInstance>,
        cpus: &CpuSet,
        opts: TraceOptions,
    ) -> Result<TraceSession, TraceError> {
        if opts.signals != SignalMode::None {
            return Err(TraceError::Setup(
                "a session in a lent trace instance leaves signals to the instance's owner (SignalMode::None)".into(),
            ));
        }
        check_online(instance.kernel.as_ref(), cpus)?;
        if ACTIVE.swap(true, Ordering::SeqCst) {
            return Err(TraceError::Busy);
        }
        let started = instance
            .cover(cpus)
            .and_then(|()| Self::begin(instance.clone(), cpus, opts, false));
        if started.is_err() {
            ACTIVE.store(false, Ordering::SeqCst);
        }
        started
    }

    /// The session's own settings (which CPUs record, the watch's event,
    /// the timerlat tracer), its pipes and marker, then tracing on and the
    /// reader started. `owned`: the instance ends with the session.
    fn begin(
        instance: Arc<TraceInstance>,
        cpus: &CpuSet,
        opts: TraceOptions,
        owned: bool,
    ) -> Result<TraceSession, TraceError> {
        let kernel = instance.kernel.clone();
        let mut guard = SettingsGuard::new(kernel.clone());
        let (pipes, writer, mut summary) =
            match Self::configure_session(&instance, &mut guard, cpus, &opts) {
                Ok(configured) => configured,
                Err(e) => {
                    let mut errors = guard.restore();
                    if owned {
                        errors.extend(instance.close());
                    }
                    return Err(TraceError::Setup(if errors.is_empty() {
                        e
                    } else {
                        format!("{e} (and while restoring: {})", errors.join("; "))
                    }));
                }
            };
        summary.nested_namespace =
            cpushield_kernel::namespace::is_nested_proc(kernel.as_ref(), &opts.proc_root);
        if let Some(d) = &opts.trace_dir {
            summary.trace_dir = Some(d.display().to_string());
        }
        let shared = Arc::new(Shared::new(opts.queue));
        shared
            .collect_timerlat
            .store(opts.timerlat_period_us.is_some(), Ordering::SeqCst);
        let guard = Arc::new(Mutex::new(guard));
        // Trace time is CLOCK_MONOTONIC plus the measured offset.
        let now = cpushield_kernel::clock::now_ns();
        let not_before_ns = summary
            .clock_offset_ns
            .map_or(now, |off| now.saturating_add_signed(off));
        let reader = new_reader(
            &kernel,
            &opts,
            pipes,
            &shared,
            summary.nested_namespace,
            not_before_ns,
        );
        let end = |guard: &Arc<Mutex<SettingsGuard>>| {
            guard.lock().expect("session settings").restore();
            if owned {
                instance.close();
            }
        };
        let handle = match spawn_reader(&kernel, cpus, reader) {
            Ok(h) => h,
            Err(e) => {
                end(&guard);
                return Err(TraceError::Setup(e));
            }
        };
        let writer = Arc::new(RwLock::new(Some(writer)));
        let signals = if opts.signals == SignalMode::RestoreAndReraise {
            match restore_on_signal(&shared, &guard, &instance.cleanup, &writer) {
                Ok(w) => Some(w),
                Err(e) => {
                    shared.stop.store(true, Ordering::SeqCst);
                    let _ = handle.join();
                    end(&guard);
                    return Err(TraceError::Setup(format!(
                        "cannot install the SIGINT handler: {e}"
                    )));
                }
            }
        } else {
            None
        };
        Ok(TraceSession {
            marker: SpikeMarker {
                writer,
                shared: shared.clone(),
            },
            shared,
            instance,
            owned,
            guard,
            reader: Some(handle),
            signals,
            cpus: cpus.clone(),
            summary,
            finished: false,
        })
    }

    #[allow(clippy::type_complexity)]
    fn configure_session(
        instance: &TraceInstance,
        g: &mut SettingsGuard,
        cpus: &CpuSet,
        opts: &TraceOptions,
    ) -> Result<
        (
            Vec<(usize, Box<dyn TracePipe>)>,
            Box<dyn TraceMarker>,
            TraceSummary,
        ),
        String,
    > {
        let k = instance.kernel.as_ref();
        let dir = &instance.dir;
        let mut summary = instance.base.clone();
        // Only this session's CPUs record: another CPU's buffer, never read
        // here, would hold stale events for the session that traces it next.
        record_only(g, k, dir, cpus)?;
        enable_session_events(g, k, &instance.tracefs, dir, cpus, opts, &mut summary)?;
        let mut pipes = Vec::new();
        for cpu in cpus.iter() {
            let pipe = k
                .open_trace_pipe(&dir.join(format!("per_cpu/cpu{cpu}/trace_pipe")))
                .map_err(|e| e.to_string())?;
            pipes.push((cpu, pipe));
        }
        let writer = k
            .open_trace_marker(&dir.join("trace_marker"))
            .map_err(|e| e.to_string())?;
        if let Some(d) = &opts.trace_dir {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("{}: cannot create the trace directory: {e}", d.display()))?;
        }
        g.set(&dir.join("tracing_on"), "1")
            .map_err(|e| e.to_string())?;
        Ok((pipes, writer, summary))
    }

    /// The records of the timerlat tracer the session runs
    /// ([`TraceOptions::timerlat_period_us`]; empty without it).
    pub fn timerlat_feed(&self) -> TimerlatFeed {
        TimerlatFeed {
            shared: self.shared.clone(),
        }
    }

    /// A handle for marking spikes (Clone + Send + Sync; give it to the
    /// measuring thread).
    pub fn marker(&self) -> SpikeMarker {
        self.marker.clone()
    }

    /// Marks a spike (see [`SpikeMarker::mark`]).
    pub fn mark(&self, spike: &Spike) -> bool {
        self.marker.mark(spike)
    }

    /// The tracefs directory in use (the private instance, or the top level).
    pub fn dir(&self) -> &Path {
        &self.instance.dir
    }

    /// The traced CPUs.
    pub fn cpus(&self) -> &CpuSet {
        &self.cpus
    }

    /// The attribution of a spike, waiting up to `timeout` for the reader to
    /// get past it. A spike not marked before is queued now.
    pub fn attribute(&self, spike: &Spike, timeout: Duration) -> Option<Attribution> {
        let deadline = Instant::now() + timeout;
        let mut queued = false;
        loop {
            if let Some(a) = self
                .shared
                .results
                .lock()
                .expect("results")
                .attributions
                .iter()
                .find(|a| a.spike == *spike)
            {
                return Some(a.clone());
            }
            if Instant::now() >= deadline {
                return None;
            }
            // Not marked with this session's marker within half the time: queue it.
            if !queued && Instant::now() + timeout / 2 >= deadline {
                let _ = self.shared.queue.push(*spike);
                queued = true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops tracing, attributes what is pending, restores tracefs and returns
    /// everything found.
    pub fn finish(mut self) -> TraceSummary {
        self.stop(true)
    }

    fn stop(&mut self, drain: bool) -> TraceSummary {
        if self.finished {
            return self.summary.clone();
        }
        self.finished = true;
        if drain {
            self.shared.finishing.store(true, Ordering::SeqCst);
        } else {
            self.shared.stop.store(true, Ordering::SeqCst);
        }
        if let Some(h) = self.reader.take() {
            let _ = h.join();
        }
        if let Some(s) = self.signals.take() {
            s.uninstall();
        }
        if let Ok(mut w) = self.marker.writer.write() {
            *w = None;
        }
        let lost = overruns(
            self.instance.kernel.as_ref(),
            &self.instance.dir,
            &self.cpus,
        );
        let mut errors = self.guard.lock().expect("session settings").restore();
        if self.owned {
            errors.extend(self.instance.close());
        }
        ACTIVE.store(false, Ordering::SeqCst);
        let mut r = self.shared.results.lock().expect("results");
        let mut s = std::mem::take(&mut self.summary);
        s.attributions = std::mem::take(&mut r.attributions);
        s.attributions.sort_by_key(|a| a.spike.seq);
        s.top_causes = summary::top_causes(&s.attributions);
        s.events = r.events;
        s.unparsed_lines = r.unparsed;
        s.lost_events = r.lost.max(lost);
        s.spikes_marked = self.shared.marked.load(Ordering::Relaxed);
        s.spikes_dropped = self.shared.dropped.load(Ordering::Relaxed);
        s.watched = r.watched.take();
        s.errors = std::mem::take(&mut r.errors);
        s.errors.append(&mut errors);
        s
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.stop(false);
        }
    }
}

/// Restores what a failed setup changed; returns `error` with what the
/// restore could not do appended.
fn restored_after(cleanup: &mut Cleanup, error: String) -> String {
    cleanup.run();
    if cleanup.errors.is_empty() {
        error
    } else {
        format!(
            "{error} (and while restoring: {})",
            cleanup.errors.join("; ")
        )
    }
}

/// The reader of a session's pipes.
fn new_reader(
    kernel: &Arc<dyn Kernel>,
    opts: &TraceOptions,
    pipes: Vec<(usize, Box<dyn TracePipe>)>,
    shared: &Arc<Shared>,
    nested_proc: bool,
    not_before_ns: u64,
) -> Reader {
    Reader {
        pipes,
        kernel: kernel.clone(),
        shared: shared.clone(),
        poll: opts.poll,
        retention_ns: opts.retention.as_nanos() as u64,
        tick_ns: opts.kernel.tick_ns.clone(),
        preempt_model: opts.kernel.preempt_model.clone(),
        trace_dir: opts.trace_dir.clone(),
        max_saved: opts.max_saved,
        user_hz: opts.kernel.user_hz,
        proc_root: opts.proc_root.clone(),
        namespace_scope: opts.namespace_scope,
        nested_proc,
        virtual_cpu: opts.kernel.virtual_cpu,
        now: cpushield_kernel::clock::now_ns,
        started_ns: cpushield_kernel::clock::now_ns(),
        not_before_ns,
        tracker: opts.watch.clone().map(watch::WakeupTracker::new),
    }
}

/// Starts the reader thread: on the CPUs not traced, so reading adds no
/// noise there, at nice -10 (still SCHED_OTHER, never real-time) so a
/// loaded machine does not starve it.
fn spawn_reader(
    kernel: &Arc<dyn Kernel>,
    cpus: &CpuSet,
    reader: Reader,
) -> Result<JoinHandle<()>, String> {
    let housekeeping = reader_cpus(kernel.as_ref(), cpus);
    let pin_kernel = kernel.clone();
    std::thread::Builder::new()
        .name("cpushield-trace".into())
        .spawn(move || {
            if let Some(hk) = housekeeping {
                let _ = pin_kernel.set_affinity(0, &hk);
            }
            // SAFETY: setpriority on our own thread id.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10);
            }
            reader.run()
        })
        .map_err(|e| format!("cannot start the trace reader thread: {e}"))
}

/// On SIGINT: stop the reader, close the marker (or the instance stays
/// busy) and restore every setting, then let the signal take its course.
fn restore_on_signal(
    shared: &Arc<Shared>,
    session: &Arc<Mutex<SettingsGuard>>,
    cleanup: &Arc<Mutex<Cleanup>>,
    writer: &Arc<RwLock<Option<Box<dyn TraceMarker>>>>,
) -> std::io::Result<SignalWatch> {
    let (sh, se, cl, wr) = (
        shared.clone(),
        session.clone(),
        cleanup.clone(),
        writer.clone(),
    );
    SignalWatch::install(Box::new(move || {
        sh.stop.store(true, Ordering::SeqCst);
        sh.wait_done(Duration::from_secs(1));
        if let Ok(mut w) = wr.write() {
            *w = None;
        }
        se.lock().expect("session settings").restore();
        cl.lock().expect("cleanup").run();
        ACTIVE.store(false, Ordering::SeqCst);
    }))
}

/// Refuses a tracefs without the `mono` trace clock: its times could not be
/// compared with CLOCK_MONOTONIC.
fn check_mono_clock(k: &dyn Kernel, root: &Path) -> Result<(), String> {
    let path = root.join("trace_clock");
    let clocks = k
        .read(&path)
        .map_err(|e| format!("{}: {e}; is tracefs mounted there?", path.display()))?;
    if clocks
        .split_whitespace()
        .any(|c| c.trim_matches(|x| x == '[' || x == ']') == "mono")
    {
        Ok(())
    } else {
        Err(format!(
            "{}: this kernel has no 'mono' trace clock, so trace times cannot be compared with CLOCK_MONOTONIC",
            path.display()
        ))
    }
}

/// Where the session traces: an instance of its own when asked for and
/// possible (stale ones of dead sessions removed first), else the top level.
fn session_dir(
    k: &dyn Kernel,
    opts: &TraceOptions,
    cleanup: &mut Cleanup,
    summary: &mut TraceSummary,
) -> PathBuf {
    let root = &opts.tracefs;
    if !(opts.instance && k.exists(&root.join("instances"))) {
        return root.clone();
    }
    remove_stale_instances(k, root);
    let inst = root
        .join("instances")
        .join(format!("cpushield-{}", std::process::id()));
    match k.mkdir(&inst) {
        Ok(()) => {
            cleanup.instance = Some(inst.clone());
            summary.instance = Some(inst.display().to_string());
            inst
        }
        Err(_) => root.clone(),
    }
}

/// Stops tracing in `dir` and sets its tracer, clock (measuring its offset
/// to CLOCK_MONOTONIC), CPU mask and per-CPU buffers.
fn prepare_buffers(
    g: &mut SettingsGuard,
    k: &dyn Kernel,
    root: &Path,
    dir: &Path,
    cpus: &CpuSet,
    opts: &TraceOptions,
    summary: &mut TraceSummary,
) -> Result<(), String> {
    let err = |e: std::io::Error| e.to_string();
    // What the top-level buffer means must survive the session, also
    // when the session itself only uses an instance.
    let top_buffer = root.join("buffer_size_kb");
    if k.exists(&top_buffer) {
        g.watch(&top_buffer).map_err(err)?;
    }
    let p = |f: &str| dir.join(f);
    g.set(&p("tracing_on"), "0").map_err(err)?;
    if k.exists(&p("current_tracer")) {
        g.set(&p("current_tracer"), "nop").map_err(err)?;
    }
    // Timestamps: trace clock "mono" is ktime_get_mono_fast_ns(), the same
    // clock as clock_gettime(CLOCK_MONOTONIC) (an NMI-safe accessor of it),
    // so a spike's intended/actual times from the measuring thread can be
    // compared with trace times directly. The offset is measured below
    // with a marker and reported in the summary.
    g.set(&p("trace_clock"), "mono").map_err(err)?;
    g.set(&p("tracing_on"), "1").map_err(err)?;
    summary.clock_offset_ns = clock_offset(k, dir);
    g.set(&p("tracing_on"), "0").map_err(err)?;
    record_only(g, k, dir, cpus)?;
    for cpu in cpus.iter() {
        let f = dir.join(format!("per_cpu/cpu{cpu}/buffer_size_kb"));
        g.set(&f, &opts.buffer_kb.to_string()).map_err(err)?;
    }
    Ok(())
}

/// Enables the attribution events ([`EVENTS`], with their filters) and the
/// osnoise events where the kernel has them; refuses a kernel without
/// sched_switch.
fn enable_attribution_events(
    g: &mut SettingsGuard,
    k: &dyn Kernel,
    dir: &Path,
    summary: &mut TraceSummary,
) -> Result<(), String> {
    let err = |e: std::io::Error| e.to_string();
    for (ev, filter) in EVENTS {
        let base = dir.join("events").join(ev);
        let f = base.join("enable");
        if k.exists(&f) {
            if let Some(expr) = filter {
                g.set(&base.join("filter"), expr).map_err(err)?;
            }
            g.set(&f, "1").map_err(err)?;
            summary.events_enabled.push(match filter {
                Some(expr) => format!("{ev} if {expr}"),
                None => ev.to_string(),
            });
        }
    }
    for ev in timerlat::OSNOISE_EVENTS {
        let f = dir.join("events").join(ev).join("enable");
        if k.exists(&f) {
            g.set(&f, "1").map_err(err)?;
            summary.events_enabled.push(ev.to_string());
            summary.osnoise_events = true;
        }
    }
    if !summary
        .events_enabled
        .iter()
        .any(|e| e.starts_with("sched/sched_switch"))
    {
        return Err(format!(
            "{}: no sched_switch event: this kernel's tracefs lacks the scheduler events",
            dir.join("events").display()
        ));
    }
    Ok(())
}

/// Enables what one session adds to its instance: the watch's event and the
/// timerlat tracer, when asked for; refuses a kernel without hrtimer_start
/// when watching.
fn enable_session_events(
    g: &mut SettingsGuard,
    k: &dyn Kernel,
    root: &Path,
    dir: &Path,
    cpus: &CpuSet,
    opts: &TraceOptions,
    summary: &mut TraceSummary,
) -> Result<(), String> {
    if opts.watch.is_some() {
        let f = dir.join("events").join(watch::WATCH_EVENT).join("enable");
        if !k.exists(&f) {
            return Err(format!(
                "{}: no hrtimer_start event: this kernel's tracefs cannot tell when a thread meant to wake",
                f.display()
            ));
        }
        g.set(&f, "1").map_err(|e| e.to_string())?;
        summary.events_enabled.push(watch::WATCH_EVENT.to_string());
    }
    if let Some(period_us) = opts.timerlat_period_us {
        timerlat::configure(g, k, root, dir, cpus, period_us)?;
        summary.tracer = Some("timerlat".into());
    }
    Ok(())
}

/// Lets only `cpus` record into `dir`'s buffers (`tracing_cpumask`).
fn record_only(
    g: &mut SettingsGuard,
    k: &dyn Kernel,
    dir: &Path,
    cpus: &CpuSet,
) -> Result<(), String> {
    let possible = cpushield_kernel::possible_cpus(k).unwrap_or_else(|_| cpus.clone());
    let width = possible.last().map(|c| c + 1).unwrap_or(1);
    g.set(&dir.join("tracing_cpumask"), &cpus.to_mask_padded(width))
        .map_err(|e| e.to_string())
}

/// Measures trace clock − CLOCK_MONOTONIC with a marker written just after
/// reading the clock; `None` if the marker cannot be found.
fn clock_offset(k: &dyn Kernel, dir: &Path) -> Option<i64> {
    let t0 = cpushield_kernel::clock::now_ns();
    let tag = format!("cpushield-clock-sync {t0}");
    k.write(&dir.join("trace_marker"), &format!("{tag}\n"))
        .ok()?;
    let text = k.read(&dir.join("trace")).ok()?;
    text.lines()
        .filter(|l| l.contains(&tag))
        .find_map(event::parse_line)
        .map(|e| e.ts_ns as i64 - t0 as i64)
}

/// Ring-buffer overruns of the traced CPUs (per_cpu/cpuN/stats).
fn overruns(k: &dyn Kernel, dir: &Path, cpus: &CpuSet) -> u64 {
    cpus.iter()
        .filter_map(|c| k.read(&dir.join(format!("per_cpu/cpu{c}/stats"))).ok())
        .map(|t| {
            t.lines()
                .filter(|l| l.starts_with("overrun:") || l.starts_with("dropped events:"))
                .filter_map(|l| l.rsplit(':').next()?.trim().parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// Removes instances left by a cpushield process that no longer exists.
fn remove_stale_instances(k: &dyn Kernel, root: &Path) {
    let dir = root.join("instances");
    for name in k.read_dir(&dir).unwrap_or_default() {
        let Some(pid) = name
            .strip_prefix("cpushield-")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id()
            && !k.exists(&cpushield_kernel::Procfs::new(k).process_dir(pid as i32))
        {
            let _ = k.rmdir(&dir.join(&name));
        }
    }
}

fn online_minus(k: &dyn Kernel, cpus: &CpuSet) -> Option<CpuSet> {
    let hk = cpushield_kernel::online_cpus(k).ok()?.difference(cpus);
    (!hk.is_empty()).then_some(hk)
}

/// Where the reader reads: the CPUs not traced, within the CPUs of the
/// thread that starts the session when they share any. A caller that keeps
/// its own threads off more CPUs than these (compare keeps off every CPU one
/// of its scenarios measures, not only the one traced now) keeps its reader
/// there too.
fn reader_cpus(k: &dyn Kernel, traced: &CpuSet) -> Option<CpuSet> {
    let hk = online_minus(k, traced)?;
    let within_caller = k
        .get_affinity(0)
        .map(|caller| caller.intersection(&hk))
        .unwrap_or_default();
    Some(if within_caller.is_empty() {
        hk
    } else {
        within_caller
    })
}

#[cfg(test)]
mod reader_cpus_tests {
    use super::reader_cpus;
    use cpushield_cpuset::CpuSet;
    use cpushield_kernel::FakeKernel;

    fn machine(caller: &str) -> FakeKernel {
        let k = FakeKernel::new();
        k.set_file("/sys/devices/system/cpu/online", "0-3\n");
        k.set_thread_affinity(0, CpuSet::parse_list(caller).unwrap());
        k
    }

    #[test]
    fn the_reader_keeps_to_the_callers_cpus_within_those_not_traced() {
        let traced = CpuSet::parse_list("3").unwrap();
        // compare's runner keeps to 0-1 (CPU 2 is measured by another of its
        // scenarios): the reader does not widen onto CPU 2.
        let got = reader_cpus(&machine("0-1"), &traced).unwrap();
        assert_eq!(got.to_list(), "0-1");
        // A caller on every CPU (measure latency): every CPU not traced.
        let got = reader_cpus(&machine("0-3"), &traced).unwrap();
        assert_eq!(got.to_list(), "0-2");
        // A caller only on the traced CPU: never there.
        let got = reader_cpus(&machine("3"), &traced).unwrap();
        assert_eq!(got.to_list(), "0-2");
    }
}

#[cfg(test)]
mod setup_tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    const ROOT: &str = "/sys/kernel/tracing";

    /// A mounted tracefs with the sched_switch event, or without it.
    fn tracefs_with(sched_switch: bool) -> Arc<FakeKernel> {
        let k = Arc::new(FakeKernel::new());
        k.set_file(
            "/proc/self/mounts",
            format!("tracefs {ROOT} tracefs rw 0 0\n"),
        );
        k.set_file("/sys/devices/system/cpu/possible", "0-1\n");
        let f = |p: &str, v: &str| k.set_file(format!("{ROOT}/{p}"), v);
        f("trace_clock", "[local] global mono\n");
        f("tracing_on", "1\n");
        f("current_tracer", "function\n");
        f("tracing_cpumask", "3\n");
        f("trace_marker", "");
        f("per_cpu/cpu1/buffer_size_kb", "1408\n");
        if sched_switch {
            f("events/sched/sched_switch/enable", "0\n");
            f("events/sched/sched_switch/filter", "none\n");
        }
        k
    }

    fn tracefs() -> Arc<FakeKernel> {
        tracefs_with(true)
    }

    fn cleanup(k: &Arc<FakeKernel>) -> Cleanup {
        Cleanup {
            kernel: k.clone(),
            guard: SettingsGuard::new(k.clone()),
            instance: None,
            mount: None,
            done: false,
            errors: Vec::new(),
        }
    }

    fn opts() -> TraceOptions {
        TraceOptions {
            tracefs: PathBuf::from(ROOT),
            buffer_kb: 4096,
            ..Default::default()
        }
    }

    #[test]
    fn tracefs_already_mounted_is_not_mounted_again() {
        let k = tracefs();
        let mut used =
            TracefsUse::acquire(k.clone(), Path::new(ROOT), Path::new("/run/cs")).unwrap();
        assert!(!used.mounted_here());
        assert!(used.release().is_empty());
        assert!(mount::tracefs_mounted(k.as_ref(), Path::new(ROOT)));
    }

    #[test]
    fn a_tracefs_without_the_mono_clock_is_refused_and_one_with_it_taken() {
        let k = tracefs();
        assert_eq!(check_mono_clock(k.as_ref(), Path::new(ROOT)), Ok(()));
        k.set_file(format!("{ROOT}/trace_clock"), "[local] global\n");
        let err = check_mono_clock(k.as_ref(), Path::new(ROOT)).unwrap_err();
        assert!(err.contains("no 'mono' trace clock"), "{err}");
    }

    #[test]
    fn without_an_instances_directory_the_session_traces_at_the_top_level() {
        let k = tracefs();
        let mut c = cleanup(&k);
        let mut summary = TraceSummary::default();
        let dir = session_dir(k.as_ref(), &opts(), &mut c, &mut summary);
        assert_eq!(dir, PathBuf::from(ROOT));
        assert_eq!(summary.instance, None);
    }

    #[test]
    fn preparing_the_buffers_sets_the_clock_mask_and_sizes_and_remembers_each() {
        let k = tracefs();
        let mut c = cleanup(&k);
        let mut summary = TraceSummary::default();
        let cpus = CpuSet::parse_list("1").unwrap();
        let root = Path::new(ROOT);
        prepare_buffers(
            &mut c.guard,
            k.as_ref(),
            root,
            root,
            &cpus,
            &opts(),
            &mut summary,
        )
        .unwrap();
        assert_eq!(k.file(format!("{ROOT}/trace_clock")).unwrap(), "mono");
        assert_eq!(k.file(format!("{ROOT}/current_tracer")).unwrap(), "nop");
        assert_eq!(k.file(format!("{ROOT}/tracing_cpumask")).unwrap(), "2");
        assert_eq!(
            k.file(format!("{ROOT}/per_cpu/cpu1/buffer_size_kb"))
                .unwrap(),
            "4096"
        );
        assert_eq!(k.file(format!("{ROOT}/tracing_on")).unwrap(), "0");
        c.guard.restore();
        assert_eq!(
            k.file(format!("{ROOT}/current_tracer")).unwrap(),
            "function"
        );
    }

    #[test]
    fn events_are_enabled_with_their_filters_and_a_kernel_without_sched_switch_refused() {
        let k = tracefs();
        let mut c = cleanup(&k);
        let mut summary = TraceSummary::default();
        let root = Path::new(ROOT);
        enable_attribution_events(&mut c.guard, k.as_ref(), root, &mut summary).unwrap();
        assert_eq!(
            k.file(format!("{ROOT}/events/sched/sched_switch/enable"))
                .unwrap(),
            "1"
        );
        assert!(summary.events_enabled[0].starts_with("sched/sched_switch"));
        assert!(!summary.osnoise_events);
        let bare = tracefs_with(false);
        let mut c = cleanup(&bare);
        let mut summary = TraceSummary::default();
        let err =
            enable_attribution_events(&mut c.guard, bare.as_ref(), root, &mut summary).unwrap_err();
        assert!(err.contains("no sched_switch event"), "{err}");
    }
}
