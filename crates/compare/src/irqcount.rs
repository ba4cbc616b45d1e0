//! Interrupts delivered to given CPUs, from /proc/interrupts deltas.

use cpushield_cpuset::CpuSet;

/// Sum of all interrupt counts (device IRQs and per-CPU kinds such as LOC, RES)
/// on the given CPUs, from the text of /proc/interrupts.
pub fn total_on(interrupts: &str, cpus: &CpuSet) -> u64 {
    let mut lines = interrupts.lines();
    let Some(header) = lines.next() else {
        return 0;
    };
    let columns: Vec<usize> = header
        .split_whitespace()
        .filter_map(|c| c.strip_prefix("CPU").and_then(|n| n.parse().ok()))
        .collect();
    let mut total = 0;
    for line in lines {
        let Some((_, rest)) = line.split_once(':') else {
            continue;
        };
        for (value, cpu) in rest.split_whitespace().zip(&columns) {
            let Ok(count) = value.parse::<u64>() else {
                break;
            };
            if cpus.contains(*cpu) {
                total += count;
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_the_asked_cpu_columns() {
        let text = "           CPU0       CPU1\n  4:         10          3   IO-APIC   4-edge      ttyS0\nLOC:        100        200   Local timer interrupts\nERR:          0\n";
        assert_eq!(total_on(text, &CpuSet::from_cpus([1])), 203);
        assert_eq!(total_on(text, &CpuSet::from_cpus([0])), 110);
        assert_eq!(total_on(text, &CpuSet::from_cpus([0, 1])), 313);
    }
}
