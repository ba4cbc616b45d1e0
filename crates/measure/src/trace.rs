//! `measure latency --trace-above`: spikes from the probe's tap are marked in
//! a kernel trace of the measured CPUs (`cpushield-trace`) and attributed to
//! the IRQs, softirqs and tasks that held the CPU. With `--source timerlat`
//! the same session runs the kernel's timerlat tracer and feeds the probe
//! its records ([`SpikeTracer::start_with_timerlat`], or [`TimerlatTracer`]
//! without `--trace-above`).

use crate::spike::{ProbeObserver, Spike, SpikeTap};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_trace::{
    KernelContext, SignalMode, SpikeMarker, TimerlatFeed, TraceError, TraceOptions, TraceSession,
    TraceSummary,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Why the spike tracer could not start.
#[derive(Debug, thiserror::Error)]
pub enum SpikeTraceError {
    /// The trace directory could not be created.
    #[error("--trace-dir {}: cannot create it: {error}", dir.display())]
    TraceDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The kernel trace could not start.
    #[error("--trace-above: starting the kernel trace: {0}")]
    Start(TraceError),
    /// The timerlat tracer could not start (the kernel lacks it, another
    /// user runs it, tracefs refused).
    #[error("--source timerlat: {0}")]
    Timerlat(TraceError),
    /// The thread that forwards spikes to the trace could not start.
    #[error("starting the spike forwarding thread: {0}")]
    Spawn(std::io::Error),
}

/// A running trace fed by the probe's spike tap.
pub struct SpikeTracer {
    session: TraceSession,
    forward: JoinHandle<()>,
    dir: PathBuf,
}

/// Tells the trace which (possibly namespace-local) thread ID measures each
/// CPU, from the measuring thread itself (see [`SpikeMarker::announce`]).
struct Announcer(SpikeMarker);

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Announcer")
    }
}

impl ProbeObserver for Announcer {
    fn thread_started(&self, cpu: usize, tid: i32) {
        self.0.announce(cpu, tid);
    }
}

impl SpikeTracer {
    /// Starts tracing `cpus` and returns the tap and the observer to put in
    /// the latency config. The raw trace windows go under `dir` (default
    /// `cpushield-trace-<unix seconds>`); `kernel` is what the attribution
    /// knows of the kernel (`cpushield_check::trace_context`).
    pub fn start(
        host: &Host,
        cpus: &CpuSet,
        threshold: Duration,
        dir: Option<PathBuf>,
        kernel: KernelContext,
    ) -> Result<(Self, SpikeTap, Arc<dyn ProbeObserver>), SpikeTraceError> {
        Self::start_session(host, cpus, threshold, dir, kernel, None)
            .map(|(tracer, tap, observer, _)| (tracer, tap, observer))
    }

    /// As [`SpikeTracer::start`], with the kernel's timerlat tracer at
    /// `period_us` in the same session: its records for the probe's
    /// `timerlat` field, and its osnoise events for the attribution.
    pub fn start_with_timerlat(
        host: &Host,
        cpus: &CpuSet,
        threshold: Duration,
        dir: Option<PathBuf>,
        kernel: KernelContext,
        period_us: u32,
    ) -> Result<(Self, SpikeTap, Arc<dyn ProbeObserver>, TimerlatFeed), SpikeTraceError> {
        Self::start_session(host, cpus, threshold, dir, kernel, Some(period_us))
    }

    fn start_session(
        host: &Host,
        cpus: &CpuSet,
        threshold: Duration,
        dir: Option<PathBuf>,
        kernel: KernelContext,
        timerlat_period_us: Option<u32>,
    ) -> Result<(Self, SpikeTap, Arc<dyn ProbeObserver>, TimerlatFeed), SpikeTraceError> {
        let dir = dir.unwrap_or_else(|| {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            PathBuf::from(format!("cpushield-trace-{secs}"))
        });
        std::fs::create_dir_all(&dir).map_err(|error| SpikeTraceError::TraceDir {
            dir: dir.clone(),
            error,
        })?;
        let options = TraceOptions {
            trace_dir: Some(dir.clone()),
            // The probe's own SIGINT handler stops the run; finish() then restores tracefs.
            signals: SignalMode::None,
            // CPUSHIELD_TRACE_INSTANCE=0 traces in the top-level buffer, as on
            // a kernel without instances (the guest tests use it).
            instance: std::env::var("CPUSHIELD_TRACE_INSTANCE").as_deref() != Ok("0"),
            kernel,
            timerlat_period_us,
            ..Default::default()
        };
        let session = TraceSession::start(host.shared_kernel(), cpus, options).map_err(|e| {
            if timerlat_period_us.is_some() {
                SpikeTraceError::Timerlat(e)
            } else {
                SpikeTraceError::Start(e)
            }
        })?;
        let feed = session.timerlat_feed();
        let marker = session.marker();
        let announcer: Arc<dyn ProbeObserver> = Arc::new(Announcer(session.marker()));
        let (sender, receiver) = std::sync::mpsc::channel::<Spike>();
        let forward = std::thread::Builder::new()
            .name("cpushield-spikes".into())
            .spawn(move || {
                for (seq, s) in receiver.into_iter().enumerate() {
                    marker.mark(&Spike {
                        seq: seq as u64,
                        ..s
                    });
                }
            })
            .map_err(SpikeTraceError::Spawn)?;
        Ok((
            Self {
                session,
                forward,
                dir,
            },
            SpikeTap { threshold, sender },
            announcer,
            feed,
        ))
    }

    /// Waits for the forwarded spikes (the tap must be dropped first), stops the
    /// trace, restores tracefs and writes trace-summary.json.
    pub fn finish(self) -> (TraceSummary, PathBuf) {
        let _ = self.forward.join();
        let summary = self.session.finish();
        if let Ok(text) = serde_json::to_string_pretty(&summary) {
            let _ = std::fs::write(self.dir.join("trace-summary.json"), text);
        }
        (summary, self.dir)
    }
}

/// The kernel's timerlat tracer alone (`--source timerlat` without
/// `--trace-above`): a private instance recording only its records.
pub struct TimerlatTracer {
    session: TraceSession,
}

impl TimerlatTracer {
    /// Starts the tracer on `cpus` at `period_us`; the feed goes in the
    /// probe's `timerlat` field. The error says in one line why it cannot run
    /// (a kernel without the tracer, another user of it), with nothing left
    /// changed.
    pub fn start(
        host: &Host,
        cpus: &CpuSet,
        period_us: u32,
    ) -> Result<(Self, TimerlatFeed), SpikeTraceError> {
        let options = TraceOptions {
            signals: SignalMode::None,
            instance: std::env::var("CPUSHIELD_TRACE_INSTANCE").as_deref() != Ok("0"),
            timerlat_period_us: Some(period_us),
            attribution_events: false,
            ..Default::default()
        };
        let session = TraceSession::start(host.shared_kernel(), cpus, options)
            .map_err(SpikeTraceError::Timerlat)?;
        let feed = session.timerlat_feed();
        Ok((Self { session }, feed))
    }

    /// Stops the tracer and restores tracefs; the summary lists any problem.
    pub fn finish(self) -> TraceSummary {
        self.session.finish()
    }
}
