//! /proc/interrupts: per-IRQ, per-CPU counts.

use crate::{cpu_columns, ParseError};
use cpushield_cpuset::CpuSet;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The counts of one line per CPU, in the header's column order. The CPU
/// numbers are shared by every line: a map per line cost a node per CPU and
/// IRQ (two million on 512 CPUs with 4,096 IRQs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PerCpu {
    /// The CPUs of the columns kept (shared by every line of one parse).
    columns: Arc<Columns>,
    /// One count per column; empty for a line with one total.
    counts: Vec<u64>,
}

/// The CPU numbers of the columns a parse kept, and how to find one.
#[derive(Debug, PartialEq, Eq, Default)]
struct Columns {
    cpus: Vec<usize>,
    /// Whether `cpus` ascend, as the kernel prints them (searched in full
    /// if not); known once per parse, not at each lookup.
    ascending: bool,
}

impl Columns {
    fn new(cpus: Vec<usize>) -> Self {
        let ascending = cpus.windows(2).all(|w| w[0] < w[1]);
        Self { cpus, ascending }
    }

    /// The column of `cpu`.
    fn of(&self, cpu: usize) -> Option<usize> {
        // Every CPU kept and online: column i is CPU i.
        if self.cpus.get(cpu) == Some(&cpu) {
            Some(cpu)
        } else if self.ascending {
            self.cpus.binary_search(&cpu).ok()
        } else {
            self.cpus.iter().position(|&c| c == cpu)
        }
    }
}

impl PerCpu {
    /// The count of `cpu`, when the line has a column for it.
    pub fn get(&self, cpu: &usize) -> Option<&u64> {
        if self.counts.is_empty() {
            return None;
        }
        self.counts.get(self.columns.of(*cpu)?)
    }

    /// Whether the line has no per-CPU counts (ERR, MIS).
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// (CPU, count) in column order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.columns
            .cpus
            .iter()
            .copied()
            .zip(self.counts.iter().copied())
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

/// Parses /proc/interrupts, every CPU's column.
pub fn parse_interrupts(text: &str) -> Result<Vec<IrqLine>, ParseError> {
    parse_columns(text, |_| true)
}

/// Parses /proc/interrupts keeping the counts of the CPUs in `cpus` only
/// (the others are skipped, not parsed): a look at a few shielded CPUs of a
/// 512-CPU machine reads 23 MB of counts and needs a few of every line's
/// 512. A line's `per_cpu` has a column for each CPU of `cpus` the header
/// names; which lines are per CPU is decided on all their columns, as
/// [`parse_interrupts`] does.
pub fn parse_interrupts_of(text: &str, cpus: &CpuSet) -> Result<Vec<IrqLine>, ParseError> {
    parse_columns(text, |cpu| cpus.contains(cpu))
}

fn parse_columns(text: &str, keep: impl Fn(usize) -> bool) -> Result<Vec<IrqLine>, ParseError> {
    const FILE: &str = "/proc/interrupts";
    let mut lines = text.lines();
    let header = lines.next().ok_or_else(|| ParseError::new(FILE, "empty"))?;
    let columns = cpu_columns(header, FILE)?;
    let kept: Vec<bool> = columns.iter().map(|&cpu| keep(cpu)).collect();
    let shared = Arc::new(Columns::new(
        columns.iter().copied().filter(|&cpu| keep(cpu)).collect(),
    ));
    let mut out = Vec::new();
    for line in lines {
        let Some((id, rest)) = line.split_once(':') else {
            continue;
        };
        let mut counts = Vec::with_capacity(shared.cpus.len());
        let (seen, description) = scan_counts(rest, columns.len(), |column, n| {
            if kept[column] {
                counts.push(n);
            }
        });
        // Lines with one total (ERR, MIS) are not per CPU.
        let per_cpu = if seen == columns.len() {
            PerCpu {
                columns: Arc::clone(&shared),
                counts,
            }
        } else {
            PerCpu::default()
        };
        out.push(IrqLine {
            id: id.trim().to_string(),
            per_cpu,
            description: description.split_whitespace().collect::<Vec<_>>().join(" "),
        });
    }
    Ok(out)
}

/// Walks the leading counts of `rest` (a line after its `id:`), at most
/// `columns` of them, handing each value to `count` with its column; returns
/// how many there were and the text after them. A count is a word (split at
/// ASCII whitespace, which is what the kernel prints between counts) that
/// `u64` parses. The counts are CPUs x IRQs, two million words at 512 CPUs
/// and 4,096 IRQs, nearly all a 10-wide pad of spaces before `0`: they are
/// read in one pass, the pad 8 bytes at a time, the digits added up as they
/// pass; a word of another shape goes to `u64`'s parse.
fn scan_counts(rest: &str, columns: usize, mut count: impl FnMut(usize, u64)) -> (usize, &str) {
    const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
    let bytes = rest.as_bytes();
    let mut at = 0;
    let mut seen = 0;
    while seen < columns {
        let mut start = at;
        while let Some(eight) = bytes.get(start..start + 8) {
            if u64::from_ne_bytes(eight.try_into().expect("8 bytes")) != SPACES {
                break;
            }
            start += 8;
        }
        while bytes.get(start).is_some_and(u8::is_ascii_whitespace) {
            start += 1;
        }
        let mut end = start;
        let mut value = 0u64;
        // 19 digits always fit in a u64.
        while end - start < 19 && bytes.get(end).is_some_and(u8::is_ascii_digit) {
            value = value * 10 + u64::from(bytes[end] - b'0');
            end += 1;
        }
        if end == start || bytes.get(end).is_some_and(|b| !b.is_ascii_whitespace()) {
            // Not 1 to 19 digits alone: `+7`, 20 digits, or not a count.
            end = start
                + bytes[start..]
                    .iter()
                    .position(u8::is_ascii_whitespace)
                    .unwrap_or(bytes.len() - start);
            // Both ends sit at ASCII bytes or the ends of the text: char boundaries.
            match rest[start..end].parse::<u64>() {
                Ok(n) => value = n,
                Err(_) => break,
            }
        }
        count(seen, value);
        seen += 1;
        at = end;
    }
    (seen, &rest[at..])
}

/// IRQ number → device names, from the text of /proc/interrupts (empty
/// when the text has no CPU header). The counts are skipped, not kept: the
/// names are read wherever IRQs are listed, and the counts are CPUs x IRQs.
pub fn irq_names(text: &str) -> BTreeMap<u32, String> {
    names_of(&parse_columns(text, |_| false).unwrap_or_default())
}

/// IRQ number → device names of parsed lines of /proc/interrupts (the
/// first line of a number names it; `LOC` and the other lines without a
/// number name none).
pub fn names_of(lines: &[IrqLine]) -> BTreeMap<u32, String> {
    let mut names = BTreeMap::new();
    for line in lines {
        if let Some(irq) = line.number() {
            names.entry(irq).or_insert_with(|| line.name());
        }
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
        let scan = |text: &str| {
            let mut values = Vec::new();
            let (seen, after) = scan_counts(text, 9, |_, n| values.push(n));
            (seen, values, after.to_string())
        };
        for word in [
            "0",
            "42",
            "+7",
            "18446744073709551615",
            "1234567890123456789",
            "00000000000000000000000042",
        ] {
            let n: u64 = word.parse().unwrap();
            assert_eq!(
                scan(&format!("   {word}   x")),
                (1, vec![n], "   x".into()),
                "{word}"
            );
        }
        for word in [
            "18446744073709551616",
            "-1",
            "PCI-MSI",
            "1-edge",
            "0x10",
            "+",
            "12\u{a0}",
        ] {
            let text = format!("           5 {word} 6");
            assert_eq!(scan(&text), (1, vec![5], format!(" {word} 6")), "{word}");
        }
        // Runs of padding of every length, with tabs, to the end of the text.
        let text: String = (0..20).map(|i| format!("{}{i}\t", " ".repeat(i))).collect();
        assert_eq!(scan(&text).1, (0..9).collect::<Vec<u64>>());
        assert_eq!(scan("  7").0, 1);
        assert_eq!(scan("   ").0, 0);
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
    fn parsing_some_cpus_keeps_their_counts_as_the_full_parse_has_them_and_no_others() {
        let text = "   CPU0   CPU2   CPU3\n 36: 1 2 3 PCI-MSIX 0-edge virtio0\n 37: 4 5 PCI-MSIX 1-edge short\nLOC: 7 8 9 Local timer interrupts\nERR: 0\n";
        let all = parse_interrupts(text).unwrap();
        let some = parse_interrupts_of(text, &CpuSet::from_cpus([2, 3, 5])).unwrap();
        assert_eq!(some.len(), all.len());
        for (a, s) in all.iter().zip(&some) {
            assert_eq!((&a.id, &a.description), (&s.id, &s.description));
            assert_eq!(a.per_cpu.is_empty(), s.per_cpu.is_empty(), "{}", a.id);
            for cpu in [2, 3] {
                assert_eq!(
                    a.per_cpu.get(&cpu),
                    s.per_cpu.get(&cpu),
                    "{} CPU {cpu}",
                    a.id
                );
            }
            assert_eq!(s.per_cpu.get(&0), None);
            assert_eq!(s.per_cpu.get(&5), None);
        }
        assert_eq!(some[0].per_cpu.iter().collect::<Vec<_>>(), [(2, 2), (3, 3)]);
        // Two counts of three columns: not a per-CPU line.
        assert!(some[1].per_cpu.is_empty());
        assert_eq!(some[1].description, "PCI-MSIX 1-edge short");
        assert_eq!(some[2].on(3), 9);
    }

    #[test]
    fn counts_too_large_for_ten_columns_or_signed_parse_as_u64_does() {
        let text = "   CPU0   CPU1\n 36: 18446744073709551615 +7 PCI-MSIX 0-edge big\n 37: 18446744073709551616 1 PCI-MSIX 1-edge over\n";
        let lines = parse_interrupts_of(text, &CpuSet::from_cpus([0, 1])).unwrap();
        assert_eq!(lines[0].on(0), u64::MAX);
        assert_eq!(lines[0].on(1), 7);
        assert_eq!(lines[0].name(), "big");
        assert!(lines[1].per_cpu.is_empty());
    }

    #[test]
    fn a_device_irq_with_several_handlers_names_them_all() {
        let text = "   CPU0\n  9:  3  IO-APIC   9-fasteoi   acpi, uhci_hcd:usb1\n";
        assert_eq!(irq_names(text)[&9], "acpi, uhci_hcd:usb1");
    }
}
