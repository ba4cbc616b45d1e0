//! /proc/PID/task/TID/schedstat: time run on a CPU (ns), time waited on a
//! run queue (ns), number of time slices.

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
}
