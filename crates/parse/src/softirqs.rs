//! /proc/softirqs: per-kind, per-CPU softirq counts.

use crate::{cpu_columns, ParseError};
use std::collections::BTreeMap;

/// Softirq name (`TIMER`, `NET_RX`, `RCU`, ...) to per-CPU counts.
pub type SoftirqCounts = BTreeMap<String, BTreeMap<usize, u64>>;

/// Parses /proc/softirqs.
pub fn parse_softirqs(text: &str) -> Result<SoftirqCounts, ParseError> {
    const FILE: &str = "/proc/softirqs";
    let mut lines = text.lines();
    let header = lines.next().ok_or_else(|| ParseError::new(FILE, "empty"))?;
    let cols = cpu_columns(header, FILE)?;
    let mut out = SoftirqCounts::new();
    for line in lines {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let counts: Vec<u64> = rest
            .split_whitespace()
            .map(|w| w.parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| ParseError::new(FILE, format!("bad counts on line '{line}'")))?;
        let per_cpu = cols.iter().copied().zip(counts).collect();
        out.insert(name.trim().to_string(), per_cpu);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softirq_counts_are_keyed_by_name_and_cpu() {
        let text = "                    CPU0       CPU1\n          HI:          0          0\n       TIMER:       7660       9279\n";
        let s = parse_softirqs(text).unwrap();
        assert_eq!(s["TIMER"][&1], 9279);
        assert_eq!(s["HI"][&0], 0);
    }
}
