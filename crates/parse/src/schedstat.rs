//! /proc/PID/task/TID/schedstat: time run on a CPU (ns), time waited on a
//! run queue (ns), number of time slices.

/// The three fields of a thread's schedstat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Schedstat {
    /// Time spent running on a CPU, ns.
    pub run_ns: u64,
    /// Time spent runnable on a run queue but not running, ns: what
    /// hypervisors call CPU Ready (steal, seen from the host) when the thread
    /// is a vCPU.
    pub wait_ns: u64,
    /// Time slices run.
    pub slices: u64,
}

/// The whole line; `None` unless it has three numbers.
pub fn parse_schedstat(text: &str) -> Option<Schedstat> {
    let mut f = text.split_whitespace().map(|w| w.parse::<u64>().ok());
    Some(Schedstat {
        run_ns: f.next()??,
        wait_ns: f.next()??,
        slices: f.next()??,
    })
}

/// The run time (ns), the first field.
pub fn parse_schedstat_runtime(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_runtime_is_the_first_field() {
        assert_eq!(parse_schedstat_runtime("2224902 100 1\n"), Some(2224902));
        assert_eq!(parse_schedstat_runtime(""), None);
    }

    #[test]
    fn schedstat_gives_run_time_run_queue_wait_and_slices() {
        assert_eq!(
            parse_schedstat("2224902 100 7\n"),
            Some(Schedstat {
                run_ns: 2224902,
                wait_ns: 100,
                slices: 7
            })
        );
        assert_eq!(parse_schedstat("2224902 100"), None);
        assert_eq!(parse_schedstat("1 x 3"), None);
    }
}
