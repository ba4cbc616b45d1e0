//! /proc/diskstats: per block device I/O counters.

use std::collections::BTreeMap;

/// Milliseconds each block device spent doing I/O (the 10th counter of a
/// /proc/diskstats line: `io_ticks`), by device name. Lines that do not have
/// the field are skipped; a partition counts on its own line as well.
pub fn parse_io_ticks(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // major minor name, then the counters; io_ticks is the 10th counter.
        let (Some(name), Some(ticks)) = (fields.get(2), fields.get(12)) else {
            continue;
        };
        if let Ok(ms) = ticks.parse::<u64>() {
            out.insert((*name).to_string(), ms);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_ticks_are_the_tenth_counter_per_device() {
        let text = " 254       0 vda 4522 1210 336052 1903 91911 62005 3480906 81016 0 50080 105203 0 0 0 0 1523 22283\n 254       1 vda1 4470 1210 333004 1889 91911 62005 3480906 81016 0 50072 82906 0 0 0 0 0 0\n   7       0 loop0 12\n";
        let t = parse_io_ticks(text);
        assert_eq!(t.get("vda"), Some(&50080));
        assert_eq!(t.get("vda1"), Some(&50072));
        assert_eq!(t.get("loop0"), None);
    }
}
