//! The data of a compare run (schema `cpushield.compare/5`, see docs/compare-json.md).

use serde::{Deserialize, Serialize};

pub use crate::units::fmt_ratio;

/// Schema name and version written into report.json.
pub const SCHEMA: &str = "cpushield.compare/5";

/// Distribution summary of one latency probe, in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Samples taken.
    pub samples: u64,
    /// Periods missed (a wakeup later than a whole period).
    pub missed: u64,
    /// Minimum.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.999th percentile.
    pub p99999_ns: u64,
    /// Maximum: the figure that matters.
    pub max_ns: u64,
    /// Histogram for plotting: (bucket upper bound in ns, count), ascending, counts > 0.
    pub histogram: Vec<(u64, u64)>,
}

impl LatencySummary {
    /// Samples below each of the papers' thresholds (0.1 ms … 100 ms).
    pub fn bucket_table(&self) -> Vec<(u64, u64)> {
        BUCKET_EDGES_NS
            .iter()
            .map(|&edge| {
                let below = self
                    .histogram
                    .iter()
                    .filter(|(upper, _)| *upper <= edge)
                    .map(|(_, c)| c)
                    .sum();
                (edge, below)
            })
            .collect()
    }
}

/// The thresholds of Brosky & Rotolo's bucket tables, in ns.
pub const BUCKET_EDGES_NS: [u64; 8] = [
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    100_000_000,
];

/// Execution determinism (Brosky & Rotolo Figures 1-4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeterminismSummary {
    /// Runs of the fixed workload.
    pub runs: u64,
    /// The ideal, seconds: the fastest run of the whole experiment, one value
    /// for every scenario (Brosky & Rotolo §5.1; see [`CompareReport::judge`]).
    pub ideal_s: f64,
    /// This scenario's own fastest run, seconds.
    #[serde(default)]
    pub fastest_s: f64,
    /// Slowest run, seconds.
    pub max_s: f64,
    /// max − ideal, seconds.
    pub jitter_s: f64,
    /// jitter as % of ideal.
    pub jitter_pct: f64,
    /// Every run's time, seconds, in order.
    pub run_times_s: Vec<f64>,
    /// Per run, the time other code ran on the CPU inside the guest (IRQs,
    /// softirqs, other tasks, kernel threads), seconds, from the trace; empty
    /// when the runs were not traced.
    #[serde(default)]
    pub run_in_guest_s: Vec<f64>,
    /// Per run, the time the vCPU did not run at all (outside the guest),
    /// seconds; empty when not known.
    #[serde(default)]
    pub run_outside_s: Vec<f64>,
    /// The most time other code inside the guest (IRQs, softirqs, other
    /// tasks, kernel threads) took from one run, as % of the ideal: the
    /// jitter the shield answers for. The rest of a run's time over the
    /// ideal is time outside the guest (`run_outside_s`) or the CPU running
    /// the same code slower (a busy SMT sibling or shared cache, frequency),
    /// which no shield of one CPU removes.
    #[serde(default)]
    pub guest_jitter_pct: Option<f64>,
    /// Steal time on the measured CPUs during the runs, seconds (/proc/stat).
    #[serde(default)]
    pub steal_s: Option<f64>,
}

impl ScenarioResult {
    /// Determinism jitter % and in-guest interruption %, as text with two
    /// decimals (`-` where not measured), for tables.
    pub fn jitter_cells(&self) -> (String, String) {
        let Some(d) = &self.determinism else {
            return ("-".into(), "-".into());
        };
        (
            format!("{:.2}", d.jitter_pct),
            d.guest_jitter_pct
                .map(|g| format!("{g:.2}"))
                .unwrap_or_else(|| "-".into()),
        )
    }
}

/// Work a load did during a scenario.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadOps {
    /// Workload name.
    pub workload: String,
    /// Operations completed.
    pub ops: u64,
    /// Operations per second.
    pub ops_per_s: f64,
}

/// Best-effort batch work that shared the measured CPUs' idle time
/// (`shielded+shared`: started with `cpushield run --share`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchWork {
    /// The workload (`compute`).
    pub workload: String,
    /// The command line, as run.
    pub command: String,
    /// Its scheduling policy (`SCHED_IDLE (nice 19)`).
    pub policy: String,
    /// Seconds it counted.
    pub seconds: f64,
    /// Operations completed.
    pub ops: u64,
    /// Operations per second.
    pub ops_per_s: f64,
    /// The share of the measured CPUs' time it got while the scenario ran
    /// (its threads' run time from schedstat over the CPUs' wall time), %.
    pub cpu_share_pct: f64,
}

/// One scenario's results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// idle, loaded, shielded, shielded+shared, shielded+advance, unshielded-cpu.
    pub name: String,
    /// What it is, in a sentence.
    pub description: String,
    /// CPUs the probes ran on (list format).
    pub measured_cpus: String,
    /// Whether a shield was up.
    pub shielded: bool,
    /// Advance used by the latency probe, ns (None = plain wakeup).
    pub advance_ns: Option<u64>,
    /// Wakeup latency.
    pub latency: LatencySummary,
    /// Execution determinism, when measured.
    pub determinism: Option<DeterminismSummary>,
    /// Load work per workload.
    pub load: Vec<LoadOps>,
    /// Interrupts per second on the measured CPUs.
    pub irqs_per_s: f64,
    /// Warnings raised while measuring.
    pub warnings: Vec<String>,
    /// How the measured CPUs idled, and why.
    #[serde(default)]
    pub idle: Option<IdleChoice>,
    /// Every sample above the threshold explained: guest causes vs time
    /// outside the guest.
    #[serde(default)]
    pub attribution: Option<AttributionSummary>,
    /// cyclictest in the same scenario, placed like the probe.
    #[serde(default)]
    pub anchor: Option<Anchor>,
    /// `rtla timerlat` in the same scenario (where the kernel has the
    /// timerlat tracer), a second anchor: the kernel's own measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtla: Option<Anchor>,
    /// Notes on this scenario's figures (why the advance was chosen, ...).
    #[serde(default)]
    pub notes: Vec<String>,
    /// What `cpushield check` found on the measured CPUs while the probe ran
    /// (shielded scenarios), most severe first.
    #[serde(default)]
    pub findings: Vec<CheckFinding>,
    /// The batch job sharing the CPUs' idle time (`shielded+shared` only).
    #[serde(default)]
    pub batch: Option<BatchWork>,
}

/// The idle policy of a scenario's measured CPUs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IdleChoice {
    /// `halt` (the kernel's idle loop) or `poll` (a SCHED_IDLE spinner).
    pub policy: String,
    /// `calibrated` (measured both, kept the better), `asked` or `default`.
    pub how: String,
    /// Worst latency of the calibration run that halted, ns.
    pub halt_max_ns: Option<u64>,
    /// Worst latency of the calibration run that polled, ns.
    pub poll_max_ns: Option<u64>,
    /// Steal during the halting calibration run, ns.
    pub halt_steal_ns: Option<u64>,
    /// Steal during the polling calibration run, ns.
    pub poll_steal_ns: Option<u64>,
    /// Length of each calibration run, s.
    pub calibration_s: f64,
    /// Why, in a sentence.
    pub reason: String,
}

/// A cause of latency above the threshold, summed over the samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CauseRow {
    /// `irq`, `vector`, `hrtimer`, `softirq`, `work`, `task`, `kthread`,
    /// `throttled`, `self` (the probe itself), `outside`, `untraced`.
    pub kind: String,
    /// Its name (`irq 36 virtio0-requests`, `stress-ng-hdd (812)`).
    pub name: String,
    /// Whether it is inside the guest (the shield's business).
    pub guest: bool,
    /// Samples it appeared in.
    pub count: u64,
    /// Time summed over those samples, ns.
    pub total_ns: u64,
    /// The most it took in one sample, ns.
    pub worst_ns: u64,
    /// The fix `check` names for it, when it names one.
    #[serde(default)]
    pub fix: Option<String>,
}

/// Samples above the threshold, explained from a kernel trace of the
/// measured CPUs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttributionSummary {
    /// Samples above this were explained, ns.
    pub threshold_ns: u64,
    /// Samples above the threshold.
    pub samples_above: u64,
    /// Of those, explained from the trace.
    pub explained: u64,
    /// Samples above the threshold lost before they could be explained.
    pub lost: u64,
    /// Latency summed over the samples above the threshold, ns.
    pub latency_ns: u64,
    /// Of that, charged to a named cause (anything but "untraced"), ns.
    pub named_ns: u64,
    /// Of that, charged to causes inside the guest, ns.
    pub guest_ns: u64,
    /// Of that, time the vCPU (or CPU) was not running at all, ns.
    pub outside_ns: u64,
    /// The worst latency the guest itself caused, within the shield's scope:
    /// a sample minus its time outside the guest and minus time taken by
    /// tasks outside the shield's scope (other PID namespaces, Kubernetes
    /// pods), over all samples, ns.
    pub guest_worst_ns: u64,
    /// The guest-caused worst case less what the host may have hidden in
    /// it: a sample that lost time outside the guest may have lost up to one
    /// tick period more than the trace could see (a vCPU stopped between two
    /// due interrupts), counted here as the host's, ns; None in reports
    /// older than schema 5. Where it differs much from `guest_worst_ns`, the
    /// host's stalls blur the figure.
    #[serde(default)]
    pub guest_worst_low_ns: Option<u64>,
    /// Samples above the threshold that also lost time outside the guest.
    #[serde(default)]
    pub samples_with_outside: u64,
    /// The guest-caused worst case in each of equal slices of the probe's
    /// time, in order (as many slices as determinism runs, `--runs`); a
    /// slice with no sample above the threshold holds the threshold (or
    /// the probe's worst case, if lower), ns. Empty for an anchor.
    #[serde(default)]
    pub guest_worst_by_slice_ns: Vec<u64>,
    /// The most time outside the guest in one sample, ns.
    pub outside_worst_ns: u64,
    /// The most time one sample lost to tasks outside the shield's scope:
    /// of other PID namespaces (a namespace-scoped shield does not move them;
    /// `--system` does) and of Kubernetes pods (left to the kubelet), ns.
    #[serde(default)]
    pub other_scope_worst_ns: u64,
    /// Kernel latency (interrupt entry − intended, the Hyades paper's t1 − t0)
    /// of the samples above the threshold: the worst, ns.
    pub kernel_latency_max_ns: Option<u64>,
    /// User latency (task running − intended, t2 − t0) of the same samples:
    /// the worst, ns.
    pub user_latency_max_ns: Option<u64>,
    /// Steal time on the measured CPUs during the latency probe, ns (/proc/stat).
    pub steal_ns: u64,
    /// Trace events the kernel dropped.
    pub lost_events: u64,
    /// Causes, largest total first.
    pub causes: Vec<CauseRow>,
    /// The samples that lost the most time outside the guest, most first
    /// (at most [`OUTSIDE_SAMPLES_KEPT`]): where and when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_samples: Vec<SampleWindow>,
    /// The host's cause of each of those samples' time outside the guest, in
    /// the same order, where a host side (`cpushield vm watch`) answered on
    /// the virtio-serial port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_causes: Vec<HostCause>,
}

/// Samples with time outside the guest kept for the host's answer.
pub const OUTSIDE_SAMPLES_KEPT: usize = 8;

/// One sample's CPU and time (CLOCK_MONOTONIC ns of the machine measured).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleWindow {
    /// The CPU (in a guest, the vCPU).
    pub cpu: usize,
    /// When the thread should have woken, ns.
    pub intended_ns: u64,
    /// When it ran, ns.
    pub actual_ns: u64,
    /// Its time outside the guest, ns.
    pub outside_ns: u64,
}

/// What the host said kept a vCPU from running during a sample.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCause {
    /// The host's cause, one line.
    pub line: String,
    /// `preempted`, `halted`, `interrupted`, `exit`; `missing` where the
    /// host's view does not reach that time; `nothing` where the host saw
    /// the vCPU run throughout (a contradiction).
    pub kind: String,
    /// The vCPU.
    pub vcpu: u32,
    /// How much of the sample the host's gap covers, ns.
    pub overlap_ns: u64,
    /// The guest↔host clock offset's error, ns: every host time is that uncertain.
    pub err_ns: u64,
    /// What held the vCPU's host CPU longest (a task's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub culprit: Option<String>,
    /// Its pid on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub culprit_pid: Option<i32>,
    /// The host CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<usize>,
    /// How long it held the host CPU, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub culprit_ns: Option<u64>,
    /// For `missing`: the guest time from which the host's view is missing, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_from_ns: Option<u64>,
}

impl AttributionSummary {
    /// Share of the latency above the threshold charged to a named cause, %.
    pub fn named_pct(&self) -> f64 {
        if self.latency_ns == 0 {
            100.0
        } else {
            self.named_ns as f64 * 100.0 / self.latency_ns as f64
        }
    }
}

/// A tool run in the same scenario as an independent anchor (cyclictest, or
/// rtla timerlat).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Anchor {
    /// The tool (`cyclictest`, `rtla timerlat`).
    pub tool: String,
    /// The command line.
    pub command: String,
    /// Seconds it ran.
    pub duration_s: f64,
    /// Its samples.
    pub samples: u64,
    /// Its worst latency, ns.
    pub max_ns: u64,
    /// Its average latency, ns.
    pub avg_ns: u64,
    /// rtla timerlat: the worst latency of the timer's interrupt handler, ns
    /// (`max_ns` is then its thread latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_max_ns: Option<u64>,
    /// Its wakeups seen in a kernel trace of the CPU while it ran (the
    /// kernel's record of when its timer was due and when it ran); None when
    /// it was not traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced_wakeups: Option<u64>,
    /// Its wakeups above the threshold explained by the same rules as the
    /// probe's samples: what was caused inside the guest and what outside
    /// it, so that it checks the verdict in the verdict's own terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attribution: Option<AttributionSummary>,
}

/// A `check` finding, as the report carries it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckFinding {
    /// `info`, `warn` or `breaks-shield`.
    pub severity: String,
    /// What was found.
    pub title: String,
    /// The fixes, best first (each ready to use).
    pub remedies: Vec<String>,
    /// Whether a fix applies at run time (a cpushield command or a sysctl):
    /// a cause the shield should have removed.
    pub runtime_fix: bool,
    /// check's topic (`irq`, `irq-pending`, `task`, ...; empty in older
    /// reports).
    #[serde(default)]
    pub topic: String,
}

/// The whole experiment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompareReport {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// When it ran (RFC 3339, UTC).
    pub created: String,
    /// Kernel release and machine facts.
    pub host: String,
    /// "namespace" (private PID namespace) or "system".
    pub scope: String,
    /// The load profile used.
    pub load_profile: String,
    /// Seconds per scenario.
    pub duration_s: f64,
    /// Whether the measured CPUs were kept polling instead of halting when
    /// idle, in every scenario alike (`--idle`).
    #[serde(default)]
    pub idle_poll: bool,
    /// How the idle policy was chosen: `auto (calibrated per scenario)`,
    /// `poll` or `halt`; each scenario's choice is in its `idle`.
    #[serde(default)]
    pub idle_mode: String,
    /// Latency probe interval, ns.
    pub interval_ns: u64,
    /// The scenarios in the order run.
    pub scenarios: Vec<ScenarioResult>,
    /// The verdict lines.
    pub verdict: Verdict,
    /// Sharing a shielded CPU's idle time (the Hyades paper's Table 2), when
    /// `shielded+shared` ran; judged on its own line, apart from the verdict.
    #[serde(default)]
    pub sharing: Option<Sharing>,
}

/// One row of the sharing table (one configuration).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SharingRow {
    /// The scenario: `shielded` or `shielded+shared`.
    pub configuration: String,
    /// The real-time task's 99.999th percentile latency, ns.
    pub p99999_ns: u64,
    /// Its maximum latency, ns.
    pub max_ns: u64,
    /// The batch job's throughput, ops per second (None: no batch job).
    pub batch_ops_per_s: Option<f64>,
    /// The share of the measured CPUs' time the batch job got, % (None: no batch job).
    pub batch_cpu_share_pct: Option<f64>,
}

/// The sharing experiment, when the run had `shielded+shared`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sharing {
    /// The measured (shielded) CPUs.
    pub cpus: String,
    /// Without sharing (when `shielded` ran too), then with sharing.
    pub rows: Vec<SharingRow>,
    /// Maximum latency with / without sharing.
    pub max_with_over_without: Option<f64>,
    /// 99.999th percentile with / without sharing.
    pub p99999_with_over_without: Option<f64>,
    /// Whether the real-time task kept its latency (maximum with sharing at
    /// most [`crate::sharing::KEEPS_RATIO`] times the maximum without); None without both.
    pub keeps_latency: Option<bool>,
    /// One line for humans.
    pub line: String,
}

/// Ratios and the one-line verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// loaded max / shielded max.
    pub loaded_over_shielded: Option<f64>,
    /// shielded max / idle max.
    pub shielded_over_idle: Option<f64>,
    /// shielded jitter % / loaded jitter %.
    pub jitter_shielded_over_loaded: Option<f64>,
    /// loaded / shielded worst case caused inside the guest (time outside
    /// the guest taken out), when the runs were traced.
    #[serde(default)]
    pub guest_loaded_over_shielded: Option<f64>,
    /// shielded / loaded jitter caused inside the guest.
    #[serde(default)]
    pub guest_jitter_shielded_over_loaded: Option<f64>,
    /// The same ratio with what the host may have hidden in the loaded
    /// figure counted as the host's (`guest_worst_low_ns`): the low end of
    /// the effect.
    #[serde(default)]
    pub guest_loaded_over_shielded_low: Option<f64>,
    /// The effect's spread: each slice of the loaded probe's guest-caused
    /// worst case over the shielded worst case (`guest_worst_by_slice_ns`).
    #[serde(default)]
    pub effect_slices: Option<Spread>,
    /// loaded max / shielded max of the cyclictest anchor in the same run
    /// (raw: as cyclictest reports them).
    #[serde(default)]
    pub anchor_loaded_over_shielded: Option<f64>,
    /// Each anchor checked against the verdict, in the verdict's own terms
    /// where its wakeups were traced.
    #[serde(default)]
    pub anchors: Vec<AnchorCheck>,
    /// Whether the verdict agrees with its anchors: false when one of them
    /// refutes it, true when one confirms it and none refutes it, None when
    /// none could be compared.
    #[serde(default)]
    pub anchor_agrees: Option<bool>,
    /// What the verdict says, as a word: `works`, `works-with-remaining`,
    /// `leaks`, `cannot-judge` (traced runs), or `works` and `falls-short`
    /// (raw figures, not traced).
    #[serde(default)]
    pub category: String,
    /// What still reaches the shielded CPUs that the shield does not
    /// control, grouped by what removes it.
    #[serde(default)]
    pub remains: Vec<Remains>,
    /// Whether time outside the guest (steal, a vCPU not running) was large
    /// enough to matter in the loaded or shielded figures.
    #[serde(default)]
    pub host_noisy: bool,
    /// Causes inside the guest that still reach the shielded CPUs, with the fix.
    #[serde(default)]
    pub remaining: Vec<String>,
    /// Whether the shield met the papers' claim on this run.
    pub pass: bool,
    /// One line for humans.
    pub line: String,
    /// What limited the run, when the figures show it (the machine's own floor).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The middle and the ends of a set of ratios.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// How many.
    pub count: usize,
}

/// One thing that still reaches the shielded CPUs and that the shield does
/// not control, with what removes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Remains {
    /// What removes it: `a boot parameter`, `a wider scope`, `the kubelet's
    /// CPU manager`, `a setting` or `a quieter host`.
    pub needs: String,
    /// The fix, ready to use.
    pub fix: String,
    /// What it removes (causes and check's findings), each once.
    pub what: Vec<String>,
    /// The most one of them took from one sample, ns (0: a finding of check's).
    pub worst_ns: u64,
}

/// An anchor set beside the verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnchorCheck {
    /// The tool (`cyclictest`, `rtla timerlat`).
    pub tool: String,
    /// `in the guest` (its wakeups traced and split as the probe's samples
    /// are) or `raw` (as the tool reports them).
    pub terms: String,
    /// Its worst case loaded, in those terms, ns.
    pub loaded_ns: u64,
    /// Its worst case shielded, in those terms, ns.
    pub shielded_ns: u64,
    /// loaded / shielded.
    pub ratio: Option<f64>,
    /// Whether it agrees with the verdict (None: not comparable).
    pub agrees: Option<bool>,
    /// What it checked and found, in words that match its numbers.
    pub line: String,
}

impl CompareReport {
    /// The scenario with this name.
    pub fn scenario(&self, name: &str) -> Option<&ScenarioResult> {
        self.scenarios.iter().find(|s| s.name == name)
    }

    /// Puts every scenario's determinism on one ideal, the fastest run of the
    /// whole experiment, as Brosky & Rotolo do (their Figures 1-4 share the
    /// best run on an unloaded system); each scenario's own fastest is kept
    /// apart. The guest-caused jitter takes each run's time outside the guest
    /// out before comparing with the same ideal.
    pub fn use_common_ideal(&mut self) {
        let ideal = self
            .scenarios
            .iter()
            .filter_map(|s| s.determinism.as_ref())
            .flat_map(|d| d.run_times_s.iter().copied())
            .filter(|t| *t > 0.0)
            .fold(f64::INFINITY, f64::min);
        if !ideal.is_finite() {
            return;
        }
        for d in self
            .scenarios
            .iter_mut()
            .filter_map(|s| s.determinism.as_mut())
        {
            let fastest = d.run_times_s.iter().copied().fold(f64::INFINITY, f64::min);
            if !fastest.is_finite() {
                continue;
            }
            d.fastest_s = fastest;
            d.ideal_s = ideal;
            d.jitter_s = d.max_s - ideal;
            d.jitter_pct = d.jitter_s / ideal * 100.0;
            d.guest_jitter_pct = (d.run_in_guest_s.len() == d.run_times_s.len()
                && !d.run_in_guest_s.is_empty())
            .then(|| d.run_in_guest_s.iter().copied().fold(0.0, f64::max) / ideal * 100.0);
        }
    }
}
