//! /proc/interrupts: per-IRQ, per-CPU counts.

use crate::{cpu_columns, ParseError};
use serde::Serialize;
use std::collections::BTreeMap;

/// One line of /proc/interrupts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqLine {
    /// `36` for a device IRQ, `LOC`, `RES`, `CAL`, `TLB`, ... for the others.
    pub id: String,
    /// Count per CPU (CPUs without a column, or kinds with one total, are absent).
    pub per_cpu: BTreeMap<usize, u64>,
    /// The rest of the line: chip, hardware IRQ and handler names for a device
    /// IRQ; a description (`Local timer interrupts`) for the others.
    pub description: String,
}

impl IrqLine {
    /// The IRQ number, for device interrupts.
    pub fn number(&self) -> Option<u32> {
        self.id.parse().ok()
    }

    /// The handler (device) name of a device IRQ: the description's words after
    /// the chip and hardware IRQ (`virtio1-req.0`); the description otherwise.
    pub fn name(&self) -> String {
        if self.number().is_some() {
            let words: Vec<&str> = self.description.split_whitespace().collect();
            if words.len() > 2 {
                return words[2..].join(" ");
            }
        }
        self.description.clone()
    }

    /// The count on one CPU (0 when absent).
    pub fn on(&self, cpu: usize) -> u64 {
        self.per_cpu.get(&cpu).copied().unwrap_or(0)
    }
}

/// Parses /proc/interrupts.
pub fn parse_interrupts(text: &str) -> Result<Vec<IrqLine>, ParseError> {
    const FILE: &str = "/proc/interrupts";
    let mut lines = text.lines();
    let header = lines.next().ok_or_else(|| ParseError::new(FILE, "empty"))?;
    let cols = cpu_columns(header, FILE)?;
    let mut out = Vec::new();
    for line in lines {
        let Some((id, rest)) = line.split_once(':') else {
            continue;
        };
        let id = id.trim().to_string();
        let mut words = rest.split_whitespace().peekable();
        let mut counts = Vec::new();
        while counts.len() < cols.len() {
            match words.peek().and_then(|w| w.parse::<u64>().ok()) {
                Some(n) => {
                    counts.push(n);
                    words.next();
                }
                None => break,
            }
        }
        let description = words.collect::<Vec<_>>().join(" ");
        // Lines with one total (ERR, MIS) are not per CPU.
        let per_cpu = if counts.len() == cols.len() {
            cols.iter().copied().zip(counts).collect()
        } else {
            BTreeMap::new()
        };
        out.push(IrqLine {
            id,
            per_cpu,
            description,
        });
    }
    Ok(out)
}

/// IRQ number → device names, from the text of /proc/interrupts (empty
/// when the text has no CPU header).
pub fn irq_names(text: &str) -> BTreeMap<u32, String> {
    parse_interrupts(text)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|line| Some((line.number()?, line.name())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "           CPU0       CPU1       \n \
 36:          0      70165 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n \
 43:          1          0 PCI-MSIX-0000:00:04.0   3-edge      virtio3-event\n\
LOC:      43372      43389   Local timer interrupts\n\
ERR:          0\n";

    #[test]
    fn device_irqs_get_numbers_names_and_per_cpu_counts() {
        let lines = parse_interrupts(TEXT).unwrap();
        assert_eq!(lines[0].number(), Some(36));
        assert_eq!(lines[0].name(), "virtio1-req.0");
        assert_eq!(lines[0].on(1), 70165);
        assert_eq!(lines[2].id, "LOC");
        assert_eq!(lines[2].name(), "Local timer interrupts");
        assert_eq!(lines[2].on(0), 43372);
    }

    #[test]
    fn single_total_lines_have_no_per_cpu_counts() {
        let lines = parse_interrupts(TEXT).unwrap();
        assert!(lines[3].per_cpu.is_empty());
    }

    #[test]
    fn columns_follow_the_header_when_a_cpu_is_offline() {
        let text = "   CPU0   CPU2\n LOC: 5 7 Local timer interrupts\n";
        let lines = parse_interrupts(text).unwrap();
        assert_eq!(lines[0].on(2), 7);
        assert_eq!(lines[0].on(1), 0);
    }

    #[test]
    fn irq_names_come_after_the_per_cpu_counts() {
        let text = "           CPU0       CPU1\n  4:         10          0   IO-APIC   4-edge      ttyS0\n 36:          1          2   PCI-MSIX-0000:00:01.0  0-edge  virtio0-req.0\nLOC:        100        200   Local timer interrupts\n";
        let names = irq_names(text);
        assert_eq!(names[&4], "ttyS0");
        assert_eq!(names[&36], "virtio0-req.0");
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn a_device_irq_with_several_handlers_names_them_all() {
        let text = "   CPU0\n  9:  3  IO-APIC   9-fasteoi   acpi, uhci_hcd:usb1\n";
        assert_eq!(irq_names(text)[&9], "acpi, uhci_hcd:usb1");
    }
}
