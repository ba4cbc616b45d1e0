//! /proc/interrupts: per-IRQ, per-CPU counts.

use crate::{cpu_columns, ParseError};
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The counts of one line per CPU, in the header's column order. The CPU
/// numbers are shared by every line: a map per line cost a node per CPU and
/// IRQ (two million on 512 CPUs with 4,096 IRQs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PerCpu {
    /// The header's CPU numbers (shared by every line of one parse).
    cpus: Arc<[usize]>,
    /// One count per column; empty for a line with one total.
    counts: Vec<u64>,
}

impl PerCpu {
    /// The count of `cpu`, when the line has a column for it.
    pub fn get(&self, cpu: &usize) -> Option<&u64> {
        if self.counts.is_empty() {
            return None;
        }
        // All CPUs online: column i is CPU i. Else the header's order,
        // ascending as the kernel prints it (searched in full if not).
        let at = if self.cpus.get(*cpu) == Some(cpu) {
            Some(*cpu)
        } else if self.cpus.windows(2).all(|w| w[0] < w[1]) {
            self.cpus.binary_search(cpu).ok()
        } else {
            self.cpus.iter().position(|c| c == cpu)
        };
        self.counts.get(at?)
    }

    /// Whether the line has no per-CPU counts (ERR, MIS).
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// (CPU, count) in column order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.cpus.iter().copied().zip(self.counts.iter().copied())
    }
}

impl Serialize for PerCpu {
    /// As a map of CPU to count, the form it had as a map.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.counts.len()))?;
        let mut pairs: Vec<(usize, u64)> = self.iter().collect();
        pairs.sort_unstable();
        for (cpu, count) in pairs {
            map.serialize_entry(&cpu, &count)?;
        }
        map.end()
    }
}

/// One line of /proc/interrupts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqLine {
    /// `36` for a device IRQ, `LOC`, `RES`, `CAL`, `TLB`, ... for the others.
    pub id: String,
    /// Count per CPU (CPUs without a column, or kinds with one total, are absent).
    pub per_cpu: PerCpu,
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
    let cols: Arc<[usize]> = cpu_columns(header, FILE)?.into();
    let mut out = Vec::new();
    for line in lines {
        let Some((id, rest)) = line.split_once(':') else {
            continue;
        };
        let id = id.trim().to_string();
        let mut words = rest.split_whitespace().peekable();
        let mut counts = Vec::with_capacity(cols.len());
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
            PerCpu {
                cpus: Arc::clone(&cols),
                counts,
            }
        } else {
            PerCpu::default()
        };
        out.push(IrqLine {
            id,
            per_cpu,
            description,
        });
    }
    Ok(out)
}

/// Whether `word` is a count (what `u64`'s parse accepts), without parsing
/// the usual one: at most 19 digits always fit. [`irq_names`] skips some two
/// million counts at 512 CPUs and 4,096 IRQs.
fn is_count(word: &str) -> bool {
    (word.len() <= 19 && word.bytes().all(|b| b.is_ascii_digit())) || word.parse::<u64>().is_ok()
}

/// IRQ number → device names, from the text of /proc/interrupts (empty
/// when the text has no CPU header). The counts are skipped, not kept: the
/// names are read wherever IRQs are listed, and the counts are CPUs x IRQs.
pub fn irq_names(text: &str) -> BTreeMap<u32, String> {
    let mut lines = text.lines();
    let Some(cols) = lines
        .next()
        .and_then(|h| cpu_columns(h, "/proc/interrupts").ok())
    else {
        return BTreeMap::new();
    };
    let mut names = BTreeMap::new();
    for line in lines {
        let Some((id, rest)) = line.split_once(':') else {
            continue;
        };
        let Ok(irq) = id.trim().parse::<u32>() else {
            continue;
        };
        let mut words = rest.split_whitespace().peekable();
        let mut counted = 0;
        while counted < cols.len() && words.peek().is_some_and(|w| is_count(w)) {
            words.next();
            counted += 1;
        }
        // As IrqLine::name: the words after the chip and hardware IRQ.
        let words: Vec<&str> = words.collect();
        let name = if words.len() > 2 {
            words[2..].join(" ")
        } else {
            words.join(" ")
        };
        names.entry(irq).or_insert(name);
    }
    names
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
    fn a_count_is_what_u64_parses_and_nothing_else() {
        for word in [
            "0",
            "42",
            "+7",
            "18446744073709551615",
            "1234567890123456789",
        ] {
            assert!(is_count(word), "{word}");
        }
        for word in [
            "18446744073709551616",
            "-1",
            "PCI-MSI",
            "1-edge",
            "0x10",
            "+",
        ] {
            assert!(!is_count(word), "{word}");
        }
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
    fn irq_names_are_the_names_of_the_parsed_lines() {
        let text = "   CPU0 CPU1\n  4: 1 2 IO-APIC 4-edge ttyS0\n  4: 3 4 IO-APIC 4-edge dup\n  7: 5 x\n 36: 1 2 PCI-MSIX 0-edge virtio0-req.0 more\nLOC: 1 2 Local\n";
        let parsed: BTreeMap<u32, String> = parse_interrupts(text)
            .unwrap()
            .into_iter()
            .rev()
            .filter_map(|l| Some((l.number()?, l.name())))
            .collect();
        assert_eq!(irq_names(text), parsed);
        assert_eq!(irq_names(text)[&4], "ttyS0");
    }

    #[test]
    fn a_count_is_found_by_cpu_number_with_cpus_offline() {
        let lines = parse_interrupts("   CPU0   CPU2\n LOC: 5 7 Local timer interrupts\n").unwrap();
        assert_eq!(
            lines[0].per_cpu.iter().collect::<Vec<_>>(),
            [(0, 5), (2, 7)]
        );
        assert_eq!(lines[0].per_cpu.get(&2), Some(&7));
        assert_eq!(lines[0].per_cpu.get(&1), None);
    }

    #[test]
    fn a_device_irq_with_several_handlers_names_them_all() {
        let text = "   CPU0\n  9:  3  IO-APIC   9-fasteoi   acpi, uhci_hcd:usb1\n";
        assert_eq!(irq_names(text)[&9], "acpi, uhci_hcd:usb1");
    }
}
