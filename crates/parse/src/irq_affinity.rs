//! /proc/irq/N/smp_affinity_list and effective_affinity_list: the CPUs an
//! IRQ is allowed on, and the CPU it is delivered to now.
//!
//! The two differ while a move is pending. On x86 without interrupt
//! remapping (IO-APIC and PCI MSI chips sit directly on the vector domain,
//! flagged `IRQCHIP_MOVE_DEFERRED`), a write of smp_affinity only records the
//! new mask (`irqd_set_move_pending`); the kernel reprograms the interrupt in
//! the acknowledgement of its next arrival, which is still delivered to the
//! old CPU (`irq_move_masked_irq`). Until then smp_affinity reads the new
//! (pending) mask while effective_affinity names the old CPU; an IRQ that
//! never fires keeps it so.

use crate::ParseError;
use cpushield_cpuset::CpuSet;
use serde::Serialize;

/// The two files of one IRQ, as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IrqAffinityText {
    /// /proc/irq/N/smp_affinity_list.
    pub smp_affinity_list: String,
    /// /proc/irq/N/effective_affinity_list, when the kernel has it.
    pub effective_affinity_list: Option<String>,
}

/// Where an IRQ may go and where it goes now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqAffinity {
    /// The CPUs asked for (smp_affinity_list; the pending mask while a move
    /// waits).
    pub requested: CpuSet,
    /// The CPUs it is delivered to now (effective_affinity_list); `None` on
    /// kernels or chips without it.
    pub effective: Option<CpuSet>,
}

impl IrqAffinity {
    /// Parses the two files (CPU lists). An empty effective list (an IRQ not
    /// started yet) is kept as empty.
    pub fn parse(text: &IrqAffinityText) -> Result<Self, ParseError> {
        let list = |file: &str, s: &str| {
            CpuSet::parse_list(s.trim()).map_err(|e| ParseError::new(file, e.to_string()))
        };
        Ok(Self {
            requested: list("/proc/irq/N/smp_affinity_list", &text.smp_affinity_list)?,
            effective: text
                .effective_affinity_list
                .as_deref()
                .map(|s| list("/proc/irq/N/effective_affinity_list", s))
                .transpose()?,
        })
    }

    /// The CPUs the IRQ is still delivered to although its mask no longer
    /// allows them: its move off them is pending and completes at its next
    /// interrupt, which still arrives there. Empty when no move is pending
    /// (or the kernel has no effective affinity).
    pub fn pending_off(&self) -> CpuSet {
        self.effective
            .as_ref()
            .map(|e| e.difference(&self.requested))
            .unwrap_or_default()
    }

    /// Whether its move off `cpu` is pending ([`IrqAffinity::pending_off`]
    /// holds it), without building the set: a check asks this of every IRQ
    /// on every checked CPU.
    pub fn is_pending_off(&self, cpu: usize) -> bool {
        self.effective
            .as_ref()
            .is_some_and(|e| e.contains(cpu) && !self.requested.contains(cpu))
    }

    /// The CPUs its next interrupt may arrive on: the effective CPUs when the
    /// kernel reports them, else the requested ones.
    pub fn delivered_to(&self) -> &CpuSet {
        match &self.effective {
            Some(e) if !e.is_empty() => e,
            _ => &self.requested,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(aff: &str, eff: Option<&str>) -> IrqAffinityText {
        IrqAffinityText {
            smp_affinity_list: aff.into(),
            effective_affinity_list: eff.map(String::from),
        }
    }

    #[test]
    fn an_effective_cpu_outside_the_mask_is_a_pending_move_off_it() {
        let a = IrqAffinity::parse(&text("0\n", Some("1\n"))).unwrap();
        assert_eq!(a.pending_off().to_list(), "1");
        assert_eq!(a.delivered_to().to_list(), "1");
    }

    #[test]
    fn an_effective_cpu_inside_the_mask_is_no_pending_move() {
        let a = IrqAffinity::parse(&text("0-1", Some("1"))).unwrap();
        assert!(a.pending_off().is_empty());
        assert_eq!(a.delivered_to().to_list(), "1");
    }

    #[test]
    fn without_an_effective_affinity_nothing_is_pending_and_the_mask_is_where_it_goes() {
        let a = IrqAffinity::parse(&text("2-3", None)).unwrap();
        assert!(a.pending_off().is_empty());
        assert_eq!(a.delivered_to().to_list(), "2-3");
        let not_started = IrqAffinity::parse(&text("0-3", Some("\n"))).unwrap();
        assert!(not_started.pending_off().is_empty());
        assert_eq!(not_started.delivered_to().to_list(), "0-3");
    }

    #[test]
    fn a_list_that_does_not_parse_is_an_error_naming_the_file() {
        let e = IrqAffinity::parse(&text("zz", Some("1"))).unwrap_err();
        assert!(e.file.contains("smp_affinity_list"), "{e}");
        let e = IrqAffinity::parse(&text("1", Some("x"))).unwrap_err();
        assert!(e.file.contains("effective_affinity_list"), "{e}");
    }
}
