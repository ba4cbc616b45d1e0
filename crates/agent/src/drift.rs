//! Drift detection: which IRQs moved onto a shielded CPU since the last look.
//! Pure: it sees only what was read.

use cpushield_cpuset::CpuSet;
use cpushield_shield::snapshot::IrqInfo;
use std::collections::BTreeMap;

/// Why the agent corrected the shield.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// An IRQ that was not there at the last look has a shielded CPU in its mask.
    IrqNew,
    /// An IRQ's mask was rewritten (irqbalance, a user) onto a shielded CPU.
    IrqRewritten,
    /// At the agent's start, an IRQ already had a shielded CPU in its mask.
    IrqAtStart,
}

impl Cause {
    /// The `cause` label value of `cpushield_corrections_total`.
    pub fn label(self) -> &'static str {
        match self {
            Cause::IrqNew => "irq_new",
            Cause::IrqRewritten => "irq_rewritten",
            Cause::IrqAtStart => "irq_at_start",
        }
    }

    /// What happened, for the log line.
    pub fn describe(self) -> &'static str {
        match self {
            Cause::IrqNew => "a new IRQ appeared with a shielded CPU in its mask",
            Cause::IrqRewritten => "its mask was rewritten onto a shielded CPU behind the shield's back (irqbalance or a user)",
            Cause::IrqAtStart => "its mask held a shielded CPU when the agent started",
        }
    }
}

/// One IRQ found on a shielded CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// IRQ number.
    pub irq: u32,
    /// Device name.
    pub name: String,
    /// Its mask text as found.
    pub mask_text: String,
    /// The shielded CPUs it reaches.
    pub on: CpuSet,
    /// Why it counts as drift.
    pub cause: Cause,
}

/// The IRQ masks seen at the last look.
#[derive(Debug, Default, Clone)]
pub struct Watch {
    seen: Option<BTreeMap<u32, String>>,
}

impl Watch {
    /// A watch that has not looked yet (its first look reports every IRQ on a
    /// shielded CPU as [`Cause::IrqAtStart`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Compares `irqs` with the last look and remembers them. An IRQ is drift
    /// when its mask reaches a CPU of `shielded` and it is new, its mask text
    /// changed, or this is the first look. An IRQ whose mask the shield could
    /// not change (kernel-managed) is reported once, not at every look.
    pub fn observe(&mut self, irqs: &[IrqInfo], shielded: &CpuSet) -> Vec<Drift> {
        let mut out = Vec::new();
        for irq in irqs {
            let on = irq.affinity.intersection(shielded);
            if on.is_empty() {
                continue;
            }
            let cause = match &self.seen {
                None => Some(Cause::IrqAtStart),
                Some(seen) => match seen.get(&irq.irq) {
                    None => Some(Cause::IrqNew),
                    Some(text) if *text != irq.mask_text => Some(Cause::IrqRewritten),
                    Some(_) => None,
                },
            };
            if let Some(cause) = cause {
                out.push(Drift {
                    irq: irq.irq,
                    name: irq.name.clone(),
                    mask_text: irq.mask_text.clone(),
                    on,
                    cause,
                });
            }
        }
        self.remember(irqs);
        out
    }

    /// Remembers `irqs` as seen (after a correction, the masks it wrote).
    pub fn remember(&mut self, irqs: &[IrqInfo]) {
        self.seen = Some(irqs.iter().map(|i| (i.irq, i.mask_text.clone())).collect());
    }
}
