//! `measure latency --trace-above`: spikes from the probe are marked in a
//! kernel trace of the measured CPUs (cpushield-check's tracer) and attributed
//! to the IRQs, softirqs and tasks that held the CPU.

use anyhow::Context;
use cpushield_check::trace::{SignalMode, Spike, TraceOptions, TraceSession, TraceSummary};
use cpushield_cpuset::CpuSet;
use cpushield_measure::SpikeTap;
use cpushield_sys::RealKernel;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A running trace fed by the probe's spike tap.
pub struct SpikeTracer {
    session: TraceSession,
    forward: JoinHandle<()>,
    dir: PathBuf,
}

/// Tells the trace which (possibly namespace-local) thread ID measures each
/// CPU, from the measuring thread itself (see `SpikeMarker::announce`).
struct Announcer(cpushield_check::trace::SpikeMarker);

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Announcer")
    }
}

impl cpushield_measure::ProbeObserver for Announcer {
    fn thread_started(&self, cpu: usize, tid: i32) {
        self.0.announce(cpu, tid);
    }
}

impl SpikeTracer {
    /// Starts tracing `cpus` and returns the tap and the observer to put in
    /// the latency config.
    pub fn start(
        cpus: &CpuSet,
        threshold: Duration,
        dir: Option<PathBuf>,
    ) -> anyhow::Result<(Self, SpikeTap, Arc<dyn cpushield_measure::ProbeObserver>)> {
        let dir = dir.unwrap_or_else(|| {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0);
            PathBuf::from(format!("cpushield-trace-{secs}"))
        });
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("--trace-dir {}: cannot create it", dir.display()))?;
        let options = TraceOptions {
            trace_dir: Some(dir.clone()),
            // The probe's own SIGINT handler stops the run; finish() then restores tracefs.
            signals: SignalMode::None,
            // CPUSHIELD_TRACE_INSTANCE=0 traces in the top-level buffer, as on
            // a kernel without instances (the guest tests use it).
            instance: std::env::var("CPUSHIELD_TRACE_INSTANCE").as_deref() != Ok("0"),
            ..Default::default()
        };
        let session = TraceSession::start(Arc::new(RealKernel), cpus, options)
            .context("--trace-above: starting the kernel trace")?;
        let marker = session.marker();
        let announcer: Arc<dyn cpushield_measure::ProbeObserver> =
            Arc::new(Announcer(session.marker()));
        let (sender, receiver) = std::sync::mpsc::channel::<cpushield_measure::Spike>();
        let forward = std::thread::Builder::new()
            .name("cpushield-spikes".into())
            .spawn(move || {
                for (seq, s) in receiver.into_iter().enumerate() {
                    marker.mark(&Spike {
                        seq: seq as u64,
                        cpu: s.cpu,
                        tid: s.tid,
                        intended_ns: s.intended_ns,
                        actual_ns: s.actual_ns,
                    });
                }
            })
            .context("starting the spike forwarding thread")?;
        Ok((
            Self {
                session,
                forward,
                dir,
            },
            SpikeTap { threshold, sender },
            announcer,
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
