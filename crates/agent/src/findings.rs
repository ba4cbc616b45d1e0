//! Check's analysis at low cost: every few looks the agent reads one `check`
//! snapshot of the shielded CPUs and analyses it against the previous one
//! (no sampling in between, no tracing), for the findings-by-severity gauge.

use cpushield_check::sampling::RunTracker;
use cpushield_check::snapshot::{read_raw, ReadOptions, Snapshot};
use cpushield_check::{analyse_snapshots, CpuSource, Severity, ShieldInForce};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use std::collections::BTreeMap;
use std::time::Instant;

/// How many findings of each severity the last analysis had.
pub type Counts = BTreeMap<Severity, usize>;

/// The periodic analysis: the snapshot it started from and its cadence.
pub struct Checker {
    every: u32,
    looks: u32,
    before: Option<(CpuSet, Snapshot)>,
    start: Instant,
}

/// What one analysis found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Findings per severity (every severity present, 0 when none).
    pub counts: Counts,
    /// The title of the first finding that breaks the shield, if any.
    pub breaks: Option<String>,
}

impl Checker {
    /// Analyses every `every` looks (at least 1).
    pub fn new(every: u32) -> Self {
        Self {
            every: every.max(1),
            looks: 0,
            before: None,
            start: Instant::now(),
        }
    }

    fn read(&self, kernel: &dyn Kernel, affinities: bool) -> Option<Snapshot> {
        let now = self.start.elapsed().as_nanos() as u64;
        let raw = read_raw(kernel, ReadOptions { affinities }, now).ok()?;
        Snapshot::parse(&raw).ok()
    }

    /// One look: the first look (or one after the CPUs changed) only reads
    /// the starting snapshot; every `every`-th look analyses since then,
    /// with the shield in force (`shield`, built only for a look that
    /// analyses: it parses every IRQ's saved masks) taken into account.
    pub fn look(
        &mut self,
        kernel: &dyn Kernel,
        cpus: &CpuSet,
        shield: impl FnOnce() -> Option<ShieldInForce>,
    ) -> Option<Outcome> {
        if cpus.is_empty() {
            self.before = None;
            return None;
        }
        self.looks = self.looks.wrapping_add(1);
        let fresh = !matches!(&self.before, Some((c, _)) if c == cpus);
        if fresh {
            self.looks = 0;
            self.before = self.read(kernel, false).map(|s| (cpus.clone(), s));
            return None;
        }
        if !self.looks.is_multiple_of(self.every) {
            return None;
        }
        let after = self.read(kernel, true)?;
        let (_, before) = self.before.take()?;
        let mut runs = RunTracker::new();
        runs.add(&before.threads);
        runs.add(&after.threads);
        let shield = shield();
        let report = analyse_snapshots(
            kernel,
            cpus,
            CpuSource::ShieldState,
            shield.as_ref(),
            &before,
            &after,
            &runs,
            "two snapshots of the agent, no sampling in between",
            &cpushield_check::HostSaid::NotAsked,
        );
        self.before = Some((cpus.clone(), after));
        let mut counts: Counts = [Severity::Info, Severity::Warn, Severity::BreaksShield]
            .into_iter()
            .map(|s| (s, 0))
            .collect();
        for f in &report.findings {
            *counts.entry(f.severity).or_default() += 1;
        }
        let breaks = report
            .findings
            .iter()
            .find(|f| f.severity == Severity::BreaksShield)
            .map(|f| f.title.clone());
        Some(Outcome { counts, breaks })
    }
}
