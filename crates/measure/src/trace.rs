//! `measure latency --trace-above`: spikes from the probe's tap are marked in
//! a kernel trace of the measured CPUs (`cpushield-trace`) and attributed to
//! the IRQs, softirqs and tasks that held the CPU. With `--source timerlat`
//! the same session runs the kernel's timerlat tracer and feeds the probe
//! its records ([`SpikeTracer::start_with_timerlat`], or [`TimerlatTracer`]
//! without `--trace-above`). In a VM the host side (`cpushield vm watch`)
//! is asked, while the probe runs, what kept a vCPU from running.

use crate::latency::{self, LatencyConfig, LatencyReport, Length};
use crate::source::Source;
use crate::spike::{ProbeObserver, Spike, SpikeTap};
use crate::{MeasureError, Progress};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Host;
use cpushield_trace::{
    KernelContext, SignalMode, SpikeMarker, TimerlatFeed, TraceError, TraceOptions, TraceSession,
    TraceSummary,
};
use cpushield_vm::blame::HostSide;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
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
    /// A threshold of 0 would trace every sample.
    #[error("--trace-above must be longer than 0: use e.g. --trace-above 100us")]
    ZeroThreshold,
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
        write_summary(&self.dir, &summary);
        (summary, self.dir)
    }
}

/// Writes `summary` as `dir`/trace-summary.json (again, once notes were
/// added to it after the trace: the host's cause of time outside the guest).
pub fn write_summary(dir: &std::path::Path, summary: &TraceSummary) {
    if let Ok(text) = serde_json::to_string_pretty(summary) {
        let _ = std::fs::write(dir.join("trace-summary.json"), text);
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

/// The spike threshold: four times the unloaded machine's p99, 20 us to 1 ms.
pub fn threshold_from_idle_p99(p99_ns: u64) -> Duration {
    Duration::from_nanos((p99_ns.saturating_mul(4)).clamp(20_000, 1_000_000))
}

/// Which samples a traced latency run explains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceAbove {
    /// Every sample above this latency (`--trace-above`).
    Fixed(Duration),
    /// Every sample above four times the p99 of a 2-second run with the same
    /// settings, made first ([`threshold_from_idle_p99`]; `--attribute`).
    ShortRunP99,
}

impl TraceAbove {
    /// What `--trace-above` or `--attribute` asks for; `None`: no tracing.
    pub fn from_options(trace_above: Option<Duration>, attribute: bool) -> Option<Self> {
        match (trace_above, attribute) {
            (Some(t), _) => Some(TraceAbove::Fixed(t)),
            (None, true) => Some(TraceAbove::ShortRunP99),
            (None, false) => None,
        }
    }
}

/// The kernel trace a latency run asks for.
pub struct SpikeTracing {
    /// Which samples are explained.
    pub above: TraceAbove,
    /// Where the raw trace windows go (default `cpushield-trace-<unix seconds>`).
    pub dir: Option<PathBuf>,
    /// What the attribution knows of the kernel (`cpushield_check::trace_context`).
    pub kernel: KernelContext,
    /// In a VM: the virtio-serial port where the host side answers what
    /// kept a vCPU from running (`None`: the port found by name; `none`:
    /// do not ask).
    pub host_channel: Option<PathBuf>,
}

/// A latency run whose tracers have finished and restored tracefs.
pub struct TracedLatency {
    /// The probe's report.
    pub report: LatencyReport,
    /// The spike trace, when traced.
    pub spikes: Option<TracedSpikes>,
}

/// What the spike trace of a latency run found.
pub struct TracedSpikes {
    /// The summary as traced (the host's causes are in trace-summary.json
    /// and [`TracedSpikes::host_lines`]).
    pub summary: TraceSummary,
    /// The directory of the trace windows and trace-summary.json.
    pub dir: PathBuf,
    /// What the host side said of the spikes charged outside the guest
    /// (`cpushield_vm::blame::HostSide::blame_spikes`); empty when not asked.
    pub host_lines: Vec<String>,
}

/// Why a traced latency run failed.
#[derive(Debug, thiserror::Error)]
pub enum TracedRunError {
    /// A tracer could not start.
    #[error(transparent)]
    Trace(#[from] SpikeTraceError),
    /// The probe failed.
    #[error(transparent)]
    Measure(#[from] MeasureError),
}

/// `measure latency` from start to finish: the threshold (measured first
/// for [`TraceAbove::ShortRunP99`]), the spike tracer and, for the timerlat
/// source, the kernel's timerlat tracer started around the probe, and all of
/// them finished (tracefs restored) before the report is returned, on an
/// error of the probe too. With the spike tracer the host side is asked
/// while the probe runs, as `compare` does: the spikes charged outside the
/// guest get the host's cause. `trace_error` hears, as it is met, each
/// problem of a timerlat tracer's run or restore.
pub fn run_latency(
    host: &Host,
    mut config: LatencyConfig,
    tracing: Option<SpikeTracing>,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
    trace_error: &mut dyn FnMut(&str),
) -> Result<TracedLatency, TracedRunError> {
    let host_side = tracing
        .as_ref()
        .map(|t| HostSide::start(host.kernel(), t.host_channel.as_deref()));
    let threshold = match tracing.as_ref().map(|t| t.above) {
        Some(TraceAbove::Fixed(t)) => Some(t),
        Some(TraceAbove::ShortRunP99) => {
            Some(short_run_threshold(host, &config, stop, trace_error)?)
        }
        None => None,
    };
    let tracer = match (threshold, tracing) {
        (Some(threshold), Some(tracing)) => {
            if threshold.is_zero() {
                return Err(SpikeTraceError::ZeroThreshold.into());
            }
            let (tracer, tap, announcer) = if config.source == Source::Timerlat {
                let (tracer, tap, announcer, feed) = SpikeTracer::start_with_timerlat(
                    host,
                    &config.cpus,
                    threshold,
                    tracing.dir,
                    tracing.kernel,
                    config.timerlat_period_us(),
                )?;
                config.timerlat = Some(feed);
                (tracer, tap, announcer)
            } else {
                SpikeTracer::start(host, &config.cpus, threshold, tracing.dir, tracing.kernel)?
            };
            config.spikes = Some(tap);
            config.observer = Some(announcer);
            Some(tracer)
        }
        _ => None,
    };
    let timerlat = match (config.source, &tracer) {
        (Source::Timerlat, None) => {
            let (t, feed) = TimerlatTracer::start(host, &config.cpus, config.timerlat_period_us())?;
            config.timerlat = Some(feed);
            Some(t)
        }
        _ => None,
    };
    let report = latency::run(host, &config, stop, progress);
    // The probe's spike sender goes with the config; the tracer then drains and restores tracefs.
    drop(config);
    if let Some(t) = timerlat {
        for e in &t.finish().errors {
            trace_error(e);
        }
    }
    let spikes = tracer.map(SpikeTracer::finish).map(|(summary, dir)| {
        let host_lines = match host_side {
            Some(side) => {
                let mut blamed = summary.clone();
                let lines = side.blame_spikes(&mut blamed.attributions);
                write_summary(&dir, &blamed);
                lines
            }
            None => Vec::new(),
        };
        TracedSpikes {
            summary,
            dir,
            host_lines,
        }
    });
    Ok(TracedLatency {
        report: report?,
        spikes,
    })
}

/// [`TraceAbove::ShortRunP99`]'s threshold: a 2-second run of `config`,
/// untraced (but with its timerlat tracer for that source).
fn short_run_threshold(
    host: &Host,
    config: &LatencyConfig,
    stop: &AtomicBool,
    trace_error: &mut dyn FnMut(&str),
) -> Result<Duration, TracedRunError> {
    let mut short = config.clone();
    short.length = Length::Duration(Duration::from_secs(2));
    short.spikes = None;
    let tracer = if short.source == Source::Timerlat {
        let (tracer, feed) = TimerlatTracer::start(host, &short.cpus, short.timerlat_period_us())?;
        short.timerlat = Some(feed);
        Some(tracer)
    } else {
        None
    };
    let r = latency::run(host, &short, stop, &mut |_| {});
    drop(short);
    if let Some(t) = tracer {
        for e in &t.finish().errors {
            trace_error(e);
        }
    }
    let p99 = r?
        .cpus
        .iter()
        .map(|c| c.latency.summary.percentiles.p99_ns)
        .max()
        .unwrap_or(0);
    Ok(threshold_from_idle_p99(p99))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_run_threshold_is_four_times_its_p99_within_20us_and_1ms() {
        assert_eq!(threshold_from_idle_p99(10_000), Duration::from_micros(40));
        assert_eq!(threshold_from_idle_p99(1_000), Duration::from_micros(20));
        assert_eq!(threshold_from_idle_p99(u64::MAX), Duration::from_millis(1));
    }

    #[test]
    fn a_zero_threshold_is_refused_before_any_trace_starts() {
        let kernel = cpushield_kernel::FakeKernel::new();
        let store = cpushield_kernel::store::MemoryStore::default();
        let host = Host::fake(&kernel, &store);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("windows");
        let tracing = SpikeTracing {
            above: TraceAbove::Fixed(Duration::ZERO),
            dir: Some(dir.clone()),
            kernel: KernelContext::default(),
            host_channel: Some("none".into()),
        };
        let stop = AtomicBool::new(false);
        let config = LatencyConfig::new(CpuSet::from_cpus([1]));
        let err = run_latency(
            &host,
            config,
            Some(tracing),
            &stop,
            &mut |_| {},
            &mut |_| {},
        )
        .err()
        .expect("refused");
        assert_eq!(
            err.to_string(),
            "--trace-above must be longer than 0: use e.g. --trace-above 100us"
        );
        assert!(!dir.exists(), "no trace directory made");
    }
}
