//! /proc/PID/task/TID/stat and schedstat: what a thread is and how long it ran.

use super::ParseError;
use serde::Serialize;

/// PF_KTHREAD in the stat `flags` field: a kernel thread.
pub const PF_KTHREAD: u64 = 0x0020_0000;
/// PF_NO_SETAFFINITY in the stat `flags` field: user space may not change its
/// affinity (per-CPU kernel threads, some workers).
pub const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

/// The fields of a thread's `stat` file that `check` uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadStat {
    /// Thread id.
    pub tid: i32,
    /// Command name (up to 15 bytes).
    pub comm: String,
    /// State letter (R, S, D, ...).
    pub state: char,
    /// Parent's pid.
    pub ppid: i32,
    /// PF_* flags.
    pub flags: u64,
    /// User time in USER_HZ ticks.
    pub utime: u64,
    /// System time in USER_HZ ticks.
    pub stime: u64,
    /// The CPU it last ran on.
    pub processor: usize,
    /// Real-time priority (0 for SCHED_OTHER).
    pub rt_priority: u32,
    /// Scheduling policy number (0 other, 1 FIFO, 2 RR, 3 batch, 5 idle, 6 deadline).
    pub policy: u32,
}

impl ThreadStat {
    /// Whether it is a kernel thread.
    pub fn is_kthread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
    /// Whether its affinity is fixed by the kernel (PF_NO_SETAFFINITY).
    pub fn no_setaffinity(&self) -> bool {
        self.flags & PF_NO_SETAFFINITY != 0
    }
}

/// Parses a `stat` line. The command name may hold spaces and parentheses, so
/// it is taken between the first `(` and the last `)`.
pub fn parse_thread_stat(text: &str) -> Result<ThreadStat, ParseError> {
    const FILE: &str = "/proc/PID/task/TID/stat";
    let open = text
        .find('(')
        .ok_or_else(|| ParseError::new(FILE, "no '('"))?;
    let close = text
        .rfind(')')
        .ok_or_else(|| ParseError::new(FILE, "no ')'"))?;
    let tid = text[..open]
        .trim()
        .parse()
        .map_err(|_| ParseError::new(FILE, "bad pid"))?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // rest[0] is field 3 (state); field n is rest[n - 3].
    let field = |n: usize| -> Result<u64, ParseError> {
        rest.get(n - 3)
            .and_then(|w| w.parse::<u64>().ok())
            .ok_or_else(|| ParseError::new(FILE, format!("field {n} missing or not a number")))
    };
    Ok(ThreadStat {
        tid,
        comm,
        state: rest.first().and_then(|s| s.chars().next()).unwrap_or('?'),
        ppid: field(4)? as i32,
        flags: field(9)?,
        utime: field(14)?,
        stime: field(15)?,
        processor: field(39)? as usize,
        rt_priority: field(40)? as u32,
        policy: field(41)? as u32,
    })
}

/// Parses `schedstat`: time run on a CPU (ns), time waited on a run queue (ns),
/// number of time slices. Returns the run time.
pub fn parse_schedstat_runtime(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
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
    #[test]
    fn nspid_lists_the_ids_from_the_outer_namespace_inward() {
        let status = "Name:\tsleep\nTgid:\t8812\nNSpid:\t8812\t5\nPPid:\t1\n";
        assert_eq!(super::parse_nspid(status), Some(vec![8812, 5]));
        assert_eq!(super::parse_nspid("NSpid:\t1\n"), Some(vec![1]));
        assert_eq!(super::parse_nspid("Name:\tx\n"), None);
        assert_eq!(super::parse_nspid("NSpid:\t1\tz\n"), None);
    }

    use super::*;

    #[test]
    fn stat_with_spaces_and_parens_in_comm_parses() {
        let text = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 0 0 0 0 7 3 0 0 -96 0 1 0 100 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 95 1 0 0 0 0 0 0 0 0 0 0 0\n";
        let s = parse_thread_stat(text).unwrap();
        assert_eq!(s.tid, 4242);
        assert_eq!(s.comm, "my (odd) prog");
        assert_eq!((s.utime, s.stime), (7, 3));
        assert_eq!(s.processor, 1);
        assert_eq!(s.rt_priority, 95);
        assert_eq!(s.policy, 1);
        assert!(!s.is_kthread());
    }

    #[test]
    fn kernel_thread_flags_are_recognised() {
        // ksoftirqd/1 on a 6.x kernel: flags 0x04208040.
        let text = "22 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 0 12 0 0 20 0 1 0 12 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        let s = parse_thread_stat(text).unwrap();
        assert!(s.is_kthread());
        assert!(s.no_setaffinity());
        assert_eq!(s.processor, 1);
    }

    #[test]
    fn schedstat_runtime_is_the_first_field() {
        assert_eq!(parse_schedstat_runtime("2224902 100 1\n"), Some(2224902));
        assert_eq!(parse_schedstat_runtime(""), None);
    }
}
