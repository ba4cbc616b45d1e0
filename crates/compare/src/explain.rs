//! Explains a scenario's figures from a kernel trace of the measured CPUs
//! (`cpushield-trace`): every latency sample above the threshold is
//! charged to named causes inside the guest or to time the vCPU did not run,
//! and every determinism run's time over the ideal is split the same way.

use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use cpushield_measure::determinism::DeterminismReport;
use cpushield_measure::{ProbeObserver, SpikeTap};
use cpushield_report::{AttributionSummary, CauseRow, SampleWindow, OUTSIDE_SAMPLES_KEPT};
use cpushield_trace::{
    Attribution, CauseKind, KernelContext, SignalMode, Spike, SpikeMarker, TraceInstance,
    TraceOptions, TraceSession, TraceSummary, WakeupWatch,
};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Sequence numbers of determinism windows start here (latency spikes count from 0).
const WINDOW_SEQ_BASE: u64 = cpushield_trace::attribute::DETERMINISM_SEQ_BASE;

/// Tells the tracer which thread measures which CPU, and marks each
/// determinism run as a window to explain.
struct TraceObserver {
    marker: SpikeMarker,
    windows: Mutex<Vec<Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    cpu: usize,
    index: u32,
    seq: u64,
}

impl std::fmt::Debug for TraceObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceObserver")
    }
}

impl ProbeObserver for TraceObserver {
    fn thread_started(&self, cpu: usize, tid: i32) {
        self.marker.announce(cpu, tid);
    }

    fn run_finished(&self, cpu: usize, tid: i32, index: u32, start_ns: u64, end_ns: u64) {
        let seq = WINDOW_SEQ_BASE + ((cpu as u64) << 24) + index as u64;
        self.marker.mark(&Spike {
            seq,
            cpu,
            tid,
            intended_ns: start_ns,
            actual_ns: end_ns,
        });
        if let Ok(mut w) = self.windows.lock() {
            w.push(Window { cpu, index, seq });
        }
    }
}

/// A trace of the measured CPUs while one probe, or one anchor, runs.
pub struct ProbeTrace {
    session: TraceSession,
    observer: Arc<TraceObserver>,
    forward: Option<JoinHandle<Vec<Spike>>>,
    /// The longest tick period of the traced CPUs (None: a CPU without a
    /// known tick): how much of a vCPU's stop the guest may not see.
    tick_ns: Option<u64>,
    /// When tracing started (CLOCK_MONOTONIC ns).
    started_ns: u64,
}

impl ProbeTrace {
    /// Starts tracing `cpus` through `kernel`, in `instance` when one is lent
    /// (else in an instance of its own); `retention` must cover the longest
    /// window to explain (a determinism run); `context` is what the
    /// attribution knows of the kernel (tick, preemption model, virtual CPUs).
    pub fn start(
        kernel: Arc<dyn Kernel>,
        instance: Option<&Arc<TraceInstance>>,
        cpus: &CpuSet,
        retention: Duration,
        context: KernelContext,
    ) -> Result<Self, String> {
        Self::start_with(kernel, instance, cpus, retention, context, None)
    }

    /// Starts tracing `cpus` while an anchor runs there: every wakeup of the
    /// threads `watch` names later than its threshold is explained by the
    /// same rules as the probe's samples ([`Self::finish_anchor`]).
    pub fn start_anchor(
        kernel: Arc<dyn Kernel>,
        instance: Option<&Arc<TraceInstance>>,
        cpus: &CpuSet,
        context: KernelContext,
        watch: WakeupWatch,
    ) -> Result<Self, String> {
        Self::start_with(
            kernel,
            instance,
            cpus,
            Duration::from_secs(2),
            context,
            Some(watch),
        )
    }

    fn start_with(
        kernel: Arc<dyn Kernel>,
        instance: Option<&Arc<TraceInstance>>,
        cpus: &CpuSet,
        retention: Duration,
        context: KernelContext,
        watch: Option<WakeupWatch>,
    ) -> Result<Self, String> {
        let tick_ns = cpus
            .iter()
            .map(|cpu| context.tick_ns.get(&cpu).copied().flatten())
            .collect::<Option<Vec<u64>>>()
            .and_then(|t| t.into_iter().max());
        let options = TraceOptions {
            kernel: context,
            signals: SignalMode::None,
            retention: retention.max(Duration::from_secs(2)),
            proc_root: machine_proc().to_path_buf(),
            namespace_scope: cpushield_kernel::namespace::host_proc().is_some(),
            watch,
            ..Default::default()
        };
        let session = match instance {
            Some(instance) => TraceSession::start_in(instance, cpus, options),
            None => TraceSession::start(kernel, cpus, options),
        }
        .map_err(|e| format!("tracing the measured CPUs: {e}"))?;
        let observer = Arc::new(TraceObserver {
            marker: session.marker(),
            windows: Mutex::new(Vec::new()),
        });
        Ok(Self {
            session,
            observer,
            forward: None,
            tick_ns,
            started_ns: cpushield_kernel::clock::now_ns(),
        })
    }

    /// The observer to put in a probe's configuration.
    pub fn observer(&self) -> Arc<dyn ProbeObserver> {
        self.observer.clone()
    }

    /// A tap for the latency probe: samples above `threshold` are marked in
    /// the trace and kept for the summary.
    pub fn spike_tap(&mut self, threshold: Duration) -> SpikeTap {
        let (sender, receiver) = std::sync::mpsc::channel::<Spike>();
        let marker = self.session.marker();
        self.forward = Some(
            std::thread::Builder::new()
                .name("cpushield-spikes".into())
                .spawn(move || {
                    let mut seen = Vec::new();
                    for (seq, s) in receiver.into_iter().enumerate() {
                        let spike = Spike {
                            seq: seq as u64,
                            ..s
                        };
                        marker.mark(&spike);
                        seen.push(spike);
                    }
                    seen
                })
                .expect("spawn the spike forwarding thread"),
        );
        SpikeTap { threshold, sender }
    }

    /// Ends a latency trace (the tap must be dropped first) and explains
    /// every sample above the threshold. `probe_max_ns` is the probe's worst
    /// sample; `ring_lost` the samples the probe could not hand over;
    /// `slices` how many equal slices of the probe's time get a guest-caused
    /// worst case of their own.
    pub fn finish_latency(
        mut self,
        threshold_ns: u64,
        probe_max_ns: u64,
        ring_lost: u64,
        steal_ns: u64,
        slices: usize,
    ) -> (AttributionSummary, TraceSummary) {
        let ended_ns = cpushield_kernel::clock::now_ns();
        let spikes = self
            .forward
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let trace = self.session.finish();
        let by_seq: HashMap<u64, &Attribution> = trace
            .attributions
            .iter()
            .map(|a| (a.spike.seq, a))
            .collect();
        let mut s = AttributionSummary {
            threshold_ns,
            samples_above: spikes.len() as u64 + ring_lost,
            lost: ring_lost,
            steal_ns,
            lost_events: trace.lost_events,
            // Samples at or below the threshold were not explained: count
            // them as caused inside the guest.
            guest_worst_ns: probe_max_ns.min(threshold_ns),
            guest_worst_low_ns: Some(probe_max_ns.min(threshold_ns)),
            ..AttributionSummary::default()
        };
        let samples = spikes
            .iter()
            .map(|spike| (spike.latency_ns(), by_seq.get(&spike.seq).copied()));
        explain_samples(&mut s, samples, self.tick_ns);
        let floor = probe_max_ns.min(threshold_ns);
        let slices = slices.max(1);
        let span = ended_ns.saturating_sub(self.started_ns).max(1);
        s.guest_worst_by_slice_ns = vec![floor; slices];
        for spike in &spikes {
            let at = spike.intended_ns.saturating_sub(self.started_ns);
            let slice = ((at as u128 * slices as u128 / span as u128) as usize).min(slices - 1);
            let guest = match by_seq.get(&spike.seq) {
                Some(a) => {
                    let split = Split::of(a);
                    spike
                        .latency_ns()
                        .saturating_sub(split.outside)
                        .saturating_sub(split.other_scope)
                }
                None => spike.latency_ns(),
            };
            s.guest_worst_by_slice_ns[slice] = s.guest_worst_by_slice_ns[slice].max(guest);
        }
        (s, trace)
    }

    /// Ends an anchor's trace ([`Self::start_anchor`]) and explains its
    /// wakeups as [`Self::finish_latency`] explains the probe's samples.
    /// Returns the summary and the wakeups the trace saw.
    pub fn finish_anchor(self, threshold_ns: u64, steal_ns: u64) -> (AttributionSummary, u64) {
        let tick_ns = self.tick_ns;
        let trace = self.session.finish();
        let watched = trace.watched.clone().unwrap_or_default();
        let mut s = AttributionSummary {
            threshold_ns,
            samples_above: watched.above,
            steal_ns,
            lost_events: trace.lost_events,
            guest_worst_ns: watched.max_ns.min(threshold_ns),
            guest_worst_low_ns: Some(watched.max_ns.min(threshold_ns)),
            ..AttributionSummary::default()
        };
        let explained = trace.attributions.iter().map(|a| (a.latency_ns, Some(a)));
        explain_samples(&mut s, explained, tick_ns);
        // Wakeups above the threshold the reader could not explain: the
        // latest one may be among them, all of it counted as the guest's.
        let unexplained = watched.above.saturating_sub(s.explained);
        if unexplained > 0 {
            s.lost += unexplained;
            s.guest_worst_ns = s.guest_worst_ns.max(watched.max_ns);
            raise(&mut s.guest_worst_low_ns, watched.max_ns);
        }
        (s, watched.wakeups)
    }

    /// Ends a determinism trace and splits each run of the worst CPU (the
    /// one the report shows) into time inside the guest and time outside it.
    pub fn finish_determinism(self, report: &DeterminismReport) -> DeterminismSplit {
        let trace = self.session.finish();
        let windows = self
            .observer
            .windows
            .lock()
            .map(|w| w.clone())
            .unwrap_or_default();
        let by_seq: HashMap<u64, &Attribution> = trace
            .attributions
            .iter()
            .map(|a| (a.spike.seq, a))
            .collect();
        let worst = report
            .cpus
            .iter()
            .max_by(|a, b| a.jitter_percent.total_cmp(&b.jitter_percent));
        let Some(cpu) = worst else {
            return DeterminismSplit::default();
        };
        let mut split = DeterminismSplit {
            in_guest_ns: vec![0; cpu.runs_ns.len()],
            outside_ns: vec![0; cpu.runs_ns.len()],
            explained: 0,
        };
        for w in windows.iter().filter(|w| w.cpu == cpu.cpu) {
            let i = w.index as usize;
            let (Some(a), Some(&wall)) = (by_seq.get(&w.seq), cpu.runs_ns.get(i)) else {
                continue;
            };
            split.explained += 1;
            let parts = Split::of(a);
            split.in_guest_ns[i] = parts.guest_others;
            // The thread's own run time leaves out what other tasks ran and,
            // where the kernel accounts steal, the time the vCPU did not run.
            let not_running = cpu
                .runs_cpu_ns
                .get(i)
                .map(|c| wall.saturating_sub(*c).saturating_sub(parts.guest_others))
                .unwrap_or(0);
            split.outside_ns[i] = parts.outside.max(not_running).min(wall);
        }
        split
    }
}

/// Adds samples above the threshold, each with its latency and its
/// attribution (None: lost before it was explained), to `s`.
fn explain_samples<'a>(
    s: &mut AttributionSummary,
    samples: impl Iterator<Item = (u64, Option<&'a Attribution>)>,
    tick_ns: Option<u64>,
) {
    let mut causes = CauseTable::default();
    for (latency, attribution) in samples {
        s.latency_ns += latency;
        let Some(a) = attribution else {
            s.lost += 1;
            s.guest_worst_ns = s.guest_worst_ns.max(latency);
            raise(&mut s.guest_worst_low_ns, latency);
            continue;
        };
        s.explained += 1;
        let split = Split::of(a);
        s.named_ns += split.named;
        s.guest_ns += split.guest;
        s.outside_ns += split.outside;
        // What the shield answers for: the sample without its time
        // outside the guest and outside the shield's scope.
        let guest = latency
            .saturating_sub(split.outside)
            .saturating_sub(split.other_scope);
        s.guest_worst_ns = s.guest_worst_ns.max(guest);
        raise(
            &mut s.guest_worst_low_ns,
            guest.saturating_sub(host_may_hide(&split, guest, tick_ns)),
        );
        if split.outside > 0 {
            s.samples_with_outside += 1;
        }
        if split.outside > 0 {
            s.outside_samples.push(SampleWindow {
                cpu: a.spike.cpu,
                intended_ns: a.spike.intended_ns,
                actual_ns: a.spike.actual_ns,
                outside_ns: split.outside,
            });
            s.outside_samples
                .sort_by_key(|w| std::cmp::Reverse(w.outside_ns));
            s.outside_samples.truncate(OUTSIDE_SAMPLES_KEPT);
        }
        s.outside_worst_ns = s.outside_worst_ns.max(split.outside);
        s.other_scope_worst_ns = s.other_scope_worst_ns.max(split.other_scope);
        if let Some(k) = a.irq_entry_after_ns {
            s.kernel_latency_max_ns = Some(s.kernel_latency_max_ns.unwrap_or(0).max(k));
        }
        s.user_latency_max_ns = Some(s.user_latency_max_ns.unwrap_or(0).max(latency));
        causes.add(a);
    }
    s.causes = causes.rows();
}

/// Raises a worst case to at least `ns`.
fn raise(worst: &mut Option<u64>, ns: u64) {
    *worst = Some(worst.unwrap_or(0).max(ns));
}

/// How much of a sample's guest-caused part may still be the host's: a
/// sample that lost time outside the guest may have lost more than the
/// trace could see, up to one tick period (the vCPU stopped between two
/// due interrupts); without a known tick, all of it.
fn host_may_hide(split: &Split, guest_ns: u64, tick_ns: Option<u64>) -> u64 {
    if split.outside == 0 {
        return 0;
    }
    tick_ns.map_or(guest_ns, |t| t.min(guest_ns))
}

/// The machine's /proc: the one trace events' thread IDs belong to.
fn machine_proc() -> &'static Path {
    cpushield_kernel::namespace::host_proc().unwrap_or(Path::new(cpushield_kernel::procfs::PROC))
}

/// Each run's time inside the guest (other code on the CPU) and outside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeterminismSplit {
    /// Per run: IRQs, softirqs, other tasks and kernel threads on the CPU, ns.
    pub in_guest_ns: Vec<u64>,
    /// Per run: time the vCPU did not run, ns.
    pub outside_ns: Vec<u64>,
    /// Runs explained from the trace.
    pub explained: usize,
}

/// One attribution's time by side.
#[derive(Debug, Default, Clone, Copy)]
struct Split {
    /// Charged to a named cause (all but "untraced").
    named: u64,
    /// Inside the guest, the measured task's own path included.
    guest: u64,
    /// Inside the guest, other code than the measured task.
    guest_others: u64,
    /// Outside the guest.
    outside: u64,
    /// Tasks outside the shield's scope though inside the guest: of other PID
    /// namespaces (with a namespace-scoped shield) and of Kubernetes pods
    /// (left to the kubelet's CPU manager).
    other_scope: u64,
}

impl Split {
    fn of(a: &Attribution) -> Self {
        let mut s = Split::default();
        for c in &a.causes {
            match c.kind {
                CauseKind::Untraced => continue,
                CauseKind::Outside => s.outside += c.ns,
                CauseKind::MeasuredTask => s.guest += c.ns,
                CauseKind::OtherNamespace | CauseKind::PodTask => {
                    s.guest += c.ns;
                    s.guest_others += c.ns;
                    s.other_scope += c.ns;
                }
                _ => {
                    s.guest += c.ns;
                    s.guest_others += c.ns;
                }
            }
            s.named += c.ns;
        }
        s
    }
}

/// Causes summed over attributions: per (kind, name), samples, total and worst.
#[derive(Default)]
struct CauseTable {
    rows: BTreeMap<(CauseKind, String), CauseRow>,
}

impl CauseTable {
    fn add(&mut self, a: &Attribution) {
        let mut per_sample: BTreeMap<(CauseKind, String), u64> = BTreeMap::new();
        for c in &a.causes {
            *per_sample
                .entry((c.kind, group_name(c.kind, &c.name)))
                .or_insert(0) += c.ns;
        }
        for ((kind, name), ns) in per_sample {
            let row = self
                .rows
                .entry((kind, name.clone()))
                .or_insert_with(|| CauseRow {
                    kind: kind.word().into(),
                    name,
                    guest: !matches!(kind, CauseKind::Outside | CauseKind::Untraced),
                    ..CauseRow::default()
                });
            row.count += 1;
            row.total_ns += ns;
            row.worst_ns = row.worst_ns.max(ns);
        }
    }

    fn rows(self) -> Vec<CauseRow> {
        let mut v: Vec<CauseRow> = self.rows.into_values().collect();
        v.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
        v
    }
}

/// One name per cause across samples: the text of "outside" causes carries
/// the length of each stretch, which is dropped here.
fn group_name(kind: CauseKind, name: &str) -> String {
    match kind {
        CauseKind::Outside if name.starts_with("no kernel event for") => {
            "no kernel event for longer than the tick: interrupts off or vCPU not running".into()
        }
        CauseKind::MeasuredTask => "the probe itself, on its way to user space".into(),
        _ => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_trace::{Cause, Phase};

    #[test]
    fn the_verdict_and_the_tracer_use_one_word_for_each_kind_outside_the_shields_scope() {
        assert_eq!(
            cpushield_trace::attribute::CauseKind::OtherNamespace.word(),
            cpushield_report::verdict::OTHER_NAMESPACE_KIND
        );
        assert_eq!(
            cpushield_trace::attribute::CauseKind::PodTask.word(),
            cpushield_report::verdict::POD_KIND
        );
    }

    fn attribution(causes: &[(CauseKind, &str, u64)]) -> Attribution {
        let total: u64 = causes.iter().map(|c| c.2).sum();
        Attribution {
            spike: Spike {
                seq: 0,
                cpu: 1,
                tid: 5,
                intended_ns: 0,
                actual_ns: total,
            },
            latency_ns: total,
            causes: causes
                .iter()
                .map(|(kind, name, ns)| Cause {
                    kind: *kind,
                    name: name.to_string(),
                    phase: Phase::BeforeWakeup,
                    ns: *ns,
                })
                .collect(),
            outside_ns: causes
                .iter()
                .filter(|c| c.0 == CauseKind::Outside)
                .map(|c| c.2)
                .sum(),
            steal: None,
            irq_entry_after_ns: None,
            wakeup_after_ns: None,
            switch_in_after_ns: None,
            events: 3,
            notes: Vec::new(),
            trace_file: None,
        }
    }

    #[test]
    fn time_outside_the_guest_is_kept_apart_from_guest_causes() {
        let a = attribution(&[
            (
                CauseKind::Outside,
                "CPU idle while the timer should have fired",
                900,
            ),
            (CauseKind::Irq, "irq 36 virtio0", 80),
            (CauseKind::MeasuredTask, "measured task", 15),
            (CauseKind::Untraced, "before tracing started", 5),
        ]);
        let s = Split::of(&a);
        assert_eq!(s.outside, 900);
        assert_eq!(s.guest, 95);
        assert_eq!(s.guest_others, 80);
        assert_eq!(s.named, 995);
    }

    #[test]
    fn causes_are_summed_per_name_with_count_and_worst() {
        let mut t = CauseTable::default();
        t.add(&attribution(&[
            (CauseKind::Irq, "irq 36 virtio0", 80),
            (CauseKind::Outside, "no kernel event for 9.10 ms (tick every 4.00 ms): interrupts off or vCPU not running", 5_000),
        ]));
        t.add(&attribution(&[
            (CauseKind::Irq, "irq 36 virtio0", 120),
            (CauseKind::Outside, "no kernel event for 7.00 ms (tick every 4.00 ms): interrupts off or vCPU not running", 3_000),
        ]));
        let rows = t.rows();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0].kind, "outside");
        assert!(!rows[0].guest);
        assert_eq!(
            (rows[0].count, rows[0].total_ns, rows[0].worst_ns),
            (2, 8_000, 5_000)
        );
        assert_eq!(rows[1].name, "irq 36 virtio0");
        assert!(rows[1].guest);
        assert_eq!(
            (rows[1].count, rows[1].total_ns, rows[1].worst_ns),
            (2, 200, 120)
        );
    }
}
