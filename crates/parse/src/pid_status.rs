//! /proc/PID/status: `Key:\tvalue` lines about a task.

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
}
