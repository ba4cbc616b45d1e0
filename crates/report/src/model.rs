//! The data of a compare run (schema `cpushield.compare/2`, see docs/compare-json.md).

use serde::{Deserialize, Serialize};

/// Schema name and version written into report.json.
pub const SCHEMA: &str = "cpushield.compare/2";

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
    /// Samples below each of the seeds' thresholds (0.1 ms … 100 ms).
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

/// The thresholds of seed 000's bucket tables, in ns.
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

/// Execution determinism (seed 000 Figures 1-4).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeterminismSummary {
    /// Runs of the fixed workload.
    pub runs: u64,
    /// The ideal, seconds: the fastest run of the whole experiment, one value
    /// for every scenario (seed 000 §5.1; see [`CompareReport::judge`]).
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

/// One scenario's results.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// idle, loaded, shielded, shielded+advance, unshielded-cpu.
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
    /// Latency probe interval, ns.
    pub interval_ns: u64,
    /// The scenarios in the order run.
    pub scenarios: Vec<ScenarioResult>,
    /// The verdict lines.
    pub verdict: Verdict,
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
    /// Whether the shield met the papers' claim on this run.
    pub pass: bool,
    /// One line for humans.
    pub line: String,
    /// What limited the run, when the figures show it (the machine's own floor).
    #[serde(default)]
    pub notes: Vec<String>,
}

impl CompareReport {
    /// The scenario with this name.
    pub fn scenario(&self, name: &str) -> Option<&ScenarioResult> {
        self.scenarios.iter().find(|s| s.name == name)
    }

    /// Puts every scenario's determinism on one ideal, the fastest run of the
    /// whole experiment, as seed 000 does (its figures 1-4 share the best run
    /// on an unloaded system); each scenario's own fastest is kept apart.
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
        }
    }

    /// Puts determinism on the common ideal ([`Self::use_common_ideal`]), then
    /// computes the ratios, the verdict (acceptance of issue 5: loaded/shielded
    /// ≥ 20, shielded ≤ 1.5 × idle, jitter ≤ 1/3) and notes on what limited it.
    pub fn judge(&mut self) {
        self.use_common_ideal();
        let max = |n: &str| {
            self.scenario(n)
                .map(|s| s.latency.max_ns as f64)
                .filter(|m| *m > 0.0)
        };
        let jitter = |n: &str| {
            self.scenario(n)
                .and_then(|s| s.determinism.as_ref())
                .map(|d| d.jitter_pct)
        };
        let (idle, loaded, shielded) = (max("idle"), max("loaded"), max("shielded"));
        let (jitter_shielded, jitter_loaded, jitter_idle) =
            (jitter("shielded"), jitter("loaded"), jitter("idle"));
        let v = &mut self.verdict;
        v.loaded_over_shielded = loaded.zip(shielded).map(|(l, s)| l / s);
        v.shielded_over_idle = shielded.zip(idle).map(|(s, i)| s / i);
        v.jitter_shielded_over_loaded = jitter_shielded
            .zip(jitter_loaded)
            .filter(|(_, l)| *l > 0.0)
            .map(|(s, l)| s / l);
        let checks = [
            v.loaded_over_shielded.map(|r| r >= 20.0),
            v.shielded_over_idle.map(|r| r <= 1.5),
            v.jitter_shielded_over_loaded.map(|r| r <= 1.0 / 3.0),
        ];
        let known: Vec<bool> = checks.iter().flatten().copied().collect();
        v.pass = !known.is_empty() && known.iter().all(|b| *b);
        let fmt = |r: Option<f64>| r.map(|x| format!("{x:.1}")).unwrap_or_else(|| "n/a".into());
        v.line = match (loaded, shielded) {
            (Some(l), Some(s)) => format!(
                "{}: shielded worst case {} vs loaded {} ({}x better), {}x idle; determinism jitter ratio {}",
                if v.pass { "SHIELD WORKS" } else { "SHIELD FALLS SHORT" },
                human_ns(s as u64),
                human_ns(l as u64),
                fmt(v.loaded_over_shielded),
                fmt(v.shielded_over_idle),
                fmt(v.jitter_shielded_over_loaded)
            ),
            _ => "no verdict: the run lacks the loaded or shielded scenario".into(),
        };
        v.notes.clear();
        if let (Some(l), Some(s), Some(i)) = (loaded, shielded, idle) {
            if s <= 1.5 * i && l / s < 20.0 {
                v.notes.push(format!(
                    "latency: the shielded CPU is as good as the idle one ({} vs {}): the floor is the unloaded machine's own worst case, so loaded / shielded cannot exceed about {:.1} on this run",
                    human_ns(s as u64),
                    human_ns(i as u64),
                    l / i
                ));
            }
        }
        if let (Some(ji), Some(jl)) = (jitter_idle, jitter_loaded) {
            if jl > 0.0 && ji > jl / 3.0 {
                v.notes.push(format!(
                    "determinism: with no load and no shield the jitter is already {ji:.1}% ({:.1}% loaded): the variation comes from outside the kernel's scheduling (the host, frequency, shared caches), which a shield does not remove",
                    jl
                ));
            }
        }
    }
}

/// A duration in ns for humans: 412 us, 34.7 ms, 143 ns.
pub fn human_ns(ns: u64) -> String {
    match ns {
        0..=9_999 => format!("{ns} ns"),
        10_000..=9_999_999 => format!("{} us", ns / 1_000),
        _ => format!("{:.1} ms", ns as f64 / 1e6),
    }
}
