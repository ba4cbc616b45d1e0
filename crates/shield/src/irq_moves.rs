//! IRQ moves the kernel has not completed yet: the reading of every IRQ's
//! requested and effective CPUs (parsed by `cpushield_parse::irq_affinity`),
//! shared by `shield`, `show`, `check` and `compare`.
//!
//! Why a move can be pending after the shield wrote a mask: on x86 without
//! interrupt remapping the kernel reprograms an IO-APIC or MSI interrupt only
//! when it next arrives, in its acknowledgement on the old CPU. That one
//! interrupt still reaches the shielded CPU, at a moment nobody controls; an
//! IRQ that never fires keeps the old CPU in effective_affinity_list. Nothing
//! a program can do at run time completes the move sooner without side
//! effects of its own (docs/check.md, "Pending IRQ moves").

use crate::steps::{Note, Severity};
use cpushield_cpuset::CpuSet;
use cpushield_kernel::Kernel;
use cpushield_parse::irq_affinity::IrqAffinity;
use serde::Serialize;
use std::collections::BTreeMap;

/// An IRQ whose move off some CPUs waits for its next interrupt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingMove {
    /// IRQ number.
    pub irq: u32,
    /// Device name from /proc/interrupts (empty when unknown).
    pub name: String,
    /// The mask it will move to.
    pub requested: CpuSet,
    /// The CPUs (of those asked about) it still goes to until then.
    pub still_on: CpuSet,
}

/// The IRQs whose move off any of `cpus` is pending, in IRQ order (pure).
pub fn pending_off(
    affinities: &BTreeMap<u32, IrqAffinity>,
    names: &BTreeMap<u32, String>,
    cpus: &CpuSet,
) -> Vec<PendingMove> {
    affinities
        .iter()
        .filter_map(|(irq, a)| {
            let still_on = a.pending_off().intersection(cpus);
            (!still_on.is_empty()).then(|| PendingMove {
                irq: *irq,
                name: names.get(irq).cloned().unwrap_or_default(),
                requested: a.requested.clone(),
                still_on,
            })
        })
        .collect()
}

/// [`pending_off`] as the kernel reports it now.
pub fn read_pending_off(kernel: &dyn Kernel, cpus: &CpuSet) -> Vec<PendingMove> {
    let mut moves = pending_off(
        &cpushield_kernel::irq::affinities(kernel),
        &BTreeMap::new(),
        cpus,
    );
    // The names only where a move is pending: /proc/interrupts is CPUs x
    // IRQs of text (23 MB at 512 CPUs and 4,096 IRQs).
    if !moves.is_empty() {
        let names = cpushield_parse::interrupts::irq_names(
            &cpushield_kernel::Procfs::new(kernel)
                .interrupts()
                .unwrap_or_default(),
        );
        for m in &mut moves {
            m.name = names.get(&m.irq).cloned().unwrap_or_default();
        }
    }
    moves
}

/// `42 (virtio3-tx)`, or `42` without a name.
pub fn label(m: &PendingMove) -> String {
    if m.name.is_empty() {
        m.irq.to_string()
    } else {
        format!("{} ({})", m.irq, m.name)
    }
}

/// What a pending move means, for one CPU list: at most one more interrupt
/// each, when the IRQ next fires.
pub fn meaning(cpus: &CpuSet) -> String {
    format!(
        "the kernel moves such an IRQ when it next fires, and that one interrupt still arrives on CPU {cpus}: at most one more interrupt each, at a moment nobody controls (an IRQ that never fires stays so)"
    )
}

/// The boot parameter that avoids pending moves: IRQs start on the
/// housekeeping CPUs, so the shield has nothing to move.
pub fn boot_remedy(housekeeping: &CpuSet) -> String {
    format!("irqaffinity={housekeeping}")
}

/// The note `shield` adds for the moves still pending off the shielded
/// CPUs, or `None` when there are none.
pub fn note(moves: &[PendingMove], housekeeping: &CpuSet) -> Option<Note> {
    if moves.is_empty() {
        return None;
    }
    let still_on = moves
        .iter()
        .fold(CpuSet::new(), |all, m| all.union(&m.still_on));
    let names: Vec<String> = moves.iter().map(label).collect();
    Some(Note {
        severity: Severity::Info,
        text: format!(
            "move pending for IRQ{} {} off CPU {still_on}: {}",
            if moves.len() == 1 { "" } else { "s" },
            names.join(", "),
            meaning(&still_on)
        ),
        remedy: (!housekeeping.is_empty()).then(|| {
            format!(
                "none at run time; booting with {} starts IRQs on the housekeeping CPUs, so no move is left pending",
                boot_remedy(housekeeping)
            )
        }),
    })
}

/// Adds to a shield's report the note for the IRQ moves still pending off
/// the CPUs it shields from interrupts (read now, after the shield wrote
/// its masks).
pub fn note_pending(kernel: &dyn Kernel, report: &mut crate::Report) {
    let shielded = &report.masks.irqs;
    if shielded.is_empty() {
        return;
    }
    let housekeeping = cpushield_kernel::online_cpus(kernel)
        .unwrap_or_default()
        .difference(shielded);
    report
        .notes
        .extend(note(&read_pending_off(kernel, shielded), &housekeeping));
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpushield_kernel::FakeKernel;

    fn irq(k: &FakeKernel, n: u32, mask: &str, eff: Option<&str>) {
        k.set_file(
            format!("/proc/irq/{n}/smp_affinity_list"),
            format!("{mask}\n"),
        );
        if let Some(e) = eff {
            k.set_file(
                format!("/proc/irq/{n}/effective_affinity_list"),
                format!("{e}\n"),
            );
        }
    }

    fn machine() -> FakeKernel {
        let k = FakeKernel::new();
        k.set_file(
            "/proc/interrupts",
            "           CPU0       CPU1\n 29:          0          0 PCI-MSIX-0000:00:01.0   1-edge      virtio0-inflate\n 42:       6931       3293 PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx\n 39:       7225          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0\n",
        );
        // 42: written to CPU 0, still delivered to CPU 1 (pending).
        irq(&k, 42, "0", Some("1"));
        // 29: never fired since the write: pending too.
        irq(&k, 29, "0", Some("1"));
        // 39: moved.
        irq(&k, 39, "0", Some("0"));
        // 7: no effective affinity (nothing known to be pending).
        irq(&k, 7, "0", None);
        k
    }

    #[test]
    fn an_irq_still_delivered_outside_its_mask_is_a_pending_move_off_that_cpu() {
        let k = machine();
        let moves = read_pending_off(&k, &CpuSet::from_cpus([1]));
        let irqs: Vec<u32> = moves.iter().map(|m| m.irq).collect();
        assert_eq!(irqs, [29, 42]);
        assert_eq!(moves[1].name, "virtio3-tx");
        assert_eq!(moves[1].requested.to_list(), "0");
        assert_eq!(moves[1].still_on.to_list(), "1");
        assert!(read_pending_off(&k, &CpuSet::from_cpus([2])).is_empty());
    }

    #[test]
    fn the_shield_note_names_each_pending_irq_and_what_it_means() {
        let k = machine();
        let moves = read_pending_off(&k, &CpuSet::from_cpus([1]));
        let n = note(&moves, &CpuSet::from_cpus([0])).unwrap();
        assert!(
            n.text.starts_with(
                "move pending for IRQs 29 (virtio0-inflate), 42 (virtio3-tx) off CPU 1: "
            ),
            "{}",
            n.text
        );
        assert!(
            n.text.contains("at most one more interrupt each"),
            "{}",
            n.text
        );
        assert!(n.remedy.unwrap().contains("irqaffinity=0"));
        assert!(note(&[], &CpuSet::from_cpus([0])).is_none());
    }
}
