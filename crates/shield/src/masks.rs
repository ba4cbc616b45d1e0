//! The three shield masks of Brosky & Rotolo: processes, interrupts, local timer.

use cpushield_cpuset::CpuSet;
use serde::{Deserialize, Serialize};

/// Which CPUs are shielded from each kind of disturbance.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShieldMasks {
    /// CPUs shielded from processes (and unbound kernel threads, workqueues).
    pub procs: CpuSet,
    /// CPUs shielded from interrupts.
    pub irqs: CpuSet,
    /// CPUs shielded from the local timer (what runtime allows; see boot-params).
    pub ltmr: CpuSet,
}

impl ShieldMasks {
    /// The same CPUs for all three kinds (`shield --all`).
    pub fn all(cpus: &CpuSet) -> Self {
        Self {
            procs: cpus.clone(),
            irqs: cpus.clone(),
            ltmr: cpus.clone(),
        }
    }

    /// Whether no CPU is shielded from anything.
    pub fn is_empty(&self) -> bool {
        self.procs.is_empty() && self.irqs.is_empty() && self.ltmr.is_empty()
    }

    /// Every CPU shielded from at least one kind.
    pub fn any(&self) -> CpuSet {
        self.procs.union(&self.irqs).union(&self.ltmr)
    }

    /// The masks in words, for a message: `procs 1, irqs 1, ltmr 1` (a
    /// kind with no CPU is left out).
    pub fn describe(&self) -> String {
        let kinds = [
            ("procs", &self.procs),
            ("irqs", &self.irqs),
            ("ltmr", &self.ltmr),
        ];
        let named: Vec<String> = kinds
            .iter()
            .filter(|(_, set)| !set.is_empty())
            .map(|(name, set)| format!("{name} {}", set.to_list()))
            .collect();
        if named.is_empty() {
            "nothing".into()
        } else {
            named.join(", ")
        }
    }

    /// These masks with `other`'s CPUs added (a second `shield` call).
    pub fn union(&self, other: &Self) -> Self {
        Self {
            procs: self.procs.union(&other.procs),
            irqs: self.irqs.union(&other.irqs),
            ltmr: self.ltmr.union(&other.ltmr),
        }
    }

    /// These masks with `other`'s CPUs removed (`unshield`).
    pub fn difference(&self, other: &Self) -> Self {
        Self {
            procs: self.procs.difference(&other.procs),
            irqs: self.irqs.difference(&other.irqs),
            ltmr: self.ltmr.difference(&other.ltmr),
        }
    }
}
