//! The three /proc facts the reader looks up while attributing a spike, parsed
//! from their text (pure functions, no I/O): the per-CPU steal counter of
//! /proc/stat, whether a task is a kernel thread (/proc/PID/stat flags), and
//! a task's IDs in nested PID namespaces (/proc/PID/status `NSpid:`).
//!
//! These follow the parsers of `check` (check/src/parse/{stat,task}.rs),
//! which the workspace's parser crate takes over; the tracer keeps only what
//! it reads, so that it depends on no crate above `sys`.

use std::collections::BTreeMap;

/// PF_KTHREAD in the stat `flags` field: a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;

/// The `steal` counter (USER_HZ ticks) of each `cpuN` line of /proc/stat (the
/// `cpu` total line is skipped). `None` when a line is malformed or there is
/// no `cpuN` line.
pub fn parse_cpu_steal(text: &str) -> Option<BTreeMap<usize, u64>> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        let Some(num) = first.strip_prefix("cpu") else {
            continue;
        };
        let Ok(cpu) = num.parse::<usize>() else {
            continue; // the "cpu" total
        };
        let v: Vec<u64> = words
            .map(|w| w.parse::<u64>())
            .collect::<Result<_, _>>()
            .ok()?;
        if v.len() < 4 {
            return None;
        }
        out.insert(cpu, v.get(7).copied().unwrap_or(0));
    }
    (!out.is_empty()).then_some(out)
}

/// Whether a `stat` line is a kernel thread's (PF_KTHREAD in its flags).
/// `None` when the line does not have the fields of a stat line. The command
/// name may hold spaces and parentheses, so it is taken up to the last `)`.
pub fn stat_is_kthread(text: &str) -> Option<bool> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    text[..open].trim().parse::<i32>().ok()?;
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] is field 3 (state); field n is rest[n - 3].
    let field = |n: usize| rest.get(n - 3).and_then(|w| w.parse::<u64>().ok());
    for n in [4, 14, 15, 39, 40, 41] {
        field(n)?;
    }
    Some(field(9)? & PF_KTHREAD != 0)
}

/// The `NSpid:` line of /proc/PID/status: the task's ID in each PID
/// namespace from the one of that /proc mount down to its own (one entry
/// for a task of that namespace itself).
pub fn parse_nspid(status: &str) -> Option<Vec<i32>> {
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().map(|w| w.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steal_is_read_per_cpu_and_the_total_line_skipped() {
        let text = "cpu  16969 0 3389 73004 547 0 117 53 0 0\ncpu0 8237 0 1838 36568 346 0 46 27 0 0\ncpu1 8732 0 1551 36436 200 0 71 25 0 0\nintr 1 2\n";
        let s = parse_cpu_steal(text).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!((s[&0], s[&1]), (27, 25));
        assert_eq!(parse_cpu_steal("cpu0 1 2 3\n"), None);
        assert_eq!(parse_cpu_steal("cpu0 1 2 x 4\n"), None);
        assert_eq!(parse_cpu_steal("intr 1\n"), None);
        assert_eq!(parse_cpu_steal("cpu0 1 2 3 4\n").unwrap()[&0], 0);
    }

    #[test]
    fn kernel_threads_are_told_from_user_tasks_by_their_flags() {
        // ksoftirqd/1 on a 6.x kernel: flags 0x04208040.
        let kthread = "22 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 12 0 0 20 0 1 0 12 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        let user = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 0 0 0 0 7 3 0 0 -96 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 95 1 0 0 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(stat_is_kthread(kthread), Some(true));
        assert_eq!(stat_is_kthread(user), Some(false));
        assert_eq!(stat_is_kthread("22 (short) S 2 0\n"), None);
        assert_eq!(stat_is_kthread("no parentheses"), None);
    }

    #[test]
    fn nspid_lists_the_ids_from_the_outer_namespace_inward() {
        let status = "Name:\tsleep\nTgid:\t8812\nNSpid:\t8812\t5\nPPid:\t1\n";
        assert_eq!(parse_nspid(status), Some(vec![8812, 5]));
        assert_eq!(parse_nspid("NSpid:\t1\n"), Some(vec![1]));
        assert_eq!(parse_nspid("Name:\tx\n"), None);
        assert_eq!(parse_nspid("NSpid:\t1\tz\n"), None);
    }
}
