//! Memory nodes: the entries of /sys/devices/system/node (`node0`, `node1`),
//! their lists (`cpulist`, `has_memory`, which take the CPU-list format), a
//! device's `numa_node`, and /proc/PID/numa_maps.

use crate::ParseError;
use cpushield_cpuset::CpuSet;
use std::collections::BTreeMap;

/// The node number of a /sys/devices/system/node entry (`node3` is 3);
/// `None` for the other entries (`online`, `has_memory`, `power`…).
pub fn node_entry(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("node")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A list of nodes (`0-1,3`), as in `has_memory`, `online` and
/// `cpuset.mems`; empty text is no node.
pub fn parse_node_list(file: &str, text: &str) -> Result<CpuSet, ParseError> {
    CpuSet::parse_list(text.trim()).map_err(|e| ParseError::new(file, e.to_string()))
}

/// A device's `numa_node`: its node, or `None` where the kernel does not
/// know it (`-1`: a machine of one node, or firmware that does not say).
pub fn parse_device_node(text: &str) -> Result<Option<usize>, ParseError> {
    let t = text.trim();
    if t == "-1" {
        return Ok(None);
    }
    t.parse()
        .map(Some)
        .map_err(|_| ParseError::new("numa_node", format!("'{t}' is not a node number")))
}

/// An IRQ number as a device names it: an entry of its `msi_irqs`
/// directory, or its `irq` file (legacy INTx; 0 is none).
pub fn device_irq(text: &str) -> Option<u32> {
    text.trim().parse().ok().filter(|&irq| irq != 0)
}

/// The resident pages of a process on each node, summed over its mappings
/// in /proc/PID/numa_maps (the `N<node>=<pages>` fields of each line),
/// apart for the mappings of a file (`file=`: shared code and page cache,
/// which sit where the file was first read) and the rest (heap, stack,
/// anonymous memory: the process's own data). Pages of every size count
/// alike: a huge page counts once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodePages {
    /// Pages of anonymous mappings, by node.
    pub private: BTreeMap<usize, u64>,
    /// Pages of file mappings, by node.
    pub file: BTreeMap<usize, u64>,
}

/// Parses /proc/PID/numa_maps into [`NodePages`].
pub fn parse_numa_maps(text: &str) -> Result<NodePages, ParseError> {
    let mut pages = NodePages::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_ascii_whitespace();
        let address = words.next().unwrap_or("");
        if u64::from_str_radix(address, 16).is_err() {
            return Err(ParseError::new(
                "/proc/PID/numa_maps",
                format!("line does not start with an address: '{line}'"),
            ));
        }
        let words: Vec<&str> = words.collect();
        let into = if words.iter().any(|w| w.starts_with("file=")) {
            &mut pages.file
        } else {
            &mut pages.private
        };
        for word in words {
            let Some((key, value)) = word.split_once('=') else {
                continue;
            };
            let Some(node) = key.strip_prefix('N').and_then(|n| n.parse::<usize>().ok()) else {
                continue;
            };
            let count: u64 = value.parse().map_err(|_| {
                ParseError::new(
                    "/proc/PID/numa_maps",
                    format!("bad page count '{word}' in '{line}'"),
                )
            })?;
            *into.entry(node).or_default() += count;
        }
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_entries_are_told_from_the_other_files_of_the_directory() {
        assert_eq!(node_entry("node0"), Some(0));
        assert_eq!(node_entry("node12"), Some(12));
        for other in ["online", "has_memory", "node", "nodex", "power", "node1a"] {
            assert_eq!(node_entry(other), None, "{other}");
        }
    }

    #[test]
    fn node_lists_take_the_cpu_list_format_and_empty_is_none() {
        assert_eq!(
            parse_node_list("has_memory", "0-1,3\n").unwrap().to_list(),
            "0-1,3"
        );
        assert!(parse_node_list("has_memory", "\n").unwrap().is_empty());
        assert!(parse_node_list("has_memory", "x").is_err());
    }

    #[test]
    fn a_device_irq_is_a_number_and_zero_is_none() {
        assert_eq!(device_irq("35"), Some(35));
        assert_eq!(device_irq("0\n"), None);
        assert_eq!(device_irq("msi"), None);
    }

    #[test]
    fn a_device_node_of_minus_one_is_unknown() {
        assert_eq!(parse_device_node("1\n"), Ok(Some(1)));
        assert_eq!(parse_device_node("-1\n"), Ok(None));
        assert!(parse_device_node("one").is_err());
    }

    #[test]
    fn numa_maps_pages_are_summed_per_node_apart_for_file_mappings() {
        let text = "\
00400000 default file=/usr/bin/rt mapped=3 N0=3 kernelpagesize_kB=4
7f0000000000 bind:1 anon=512 dirty=512 active=0 N1=500 N0=12 kernelpagesize_kB=4
7ffd1c000000 default stack anon=3 dirty=3 N1=3 kernelpagesize_kB=4
7ffd1c100000 default
";
        let pages = parse_numa_maps(text).unwrap();
        assert_eq!(pages.private.get(&0), Some(&12));
        assert_eq!(pages.private.get(&1), Some(&503));
        assert_eq!(pages.private.len(), 2);
        assert_eq!(pages.file, BTreeMap::from([(0, 3)]));
    }

    #[test]
    fn numa_maps_with_a_bad_count_or_no_address_is_an_error() {
        assert!(parse_numa_maps("00400000 default N0=x\n").is_err());
        assert!(parse_numa_maps("default N0=3\n").is_err());
        assert_eq!(parse_numa_maps("").unwrap(), NodePages::default());
    }
}
