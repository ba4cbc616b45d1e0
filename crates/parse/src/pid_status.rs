//! /proc/PID/status: `Key:\tvalue` lines about a task.

/// The value of a `Key:` line of /proc/PID/status, trimmed.
pub fn field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::trim)
    })
}

/// The thread group (process) ID of the task (`Tgid:`).
pub fn parse_tgid(status: &str) -> Option<i32> {
    field(status, "Tgid")?.parse().ok()
}

/// The task's effective capabilities (`CapEff:`, hexadecimal), as a bit set.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    u64::from_str_radix(field(status, "CapEff")?, 16).ok()
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

    const STATUS: &str = "Name:\tcat\nUmask:\t0022\nState:\tR (running)\nTgid:\t4242\nNgid:\t0\nPid:\t4243\nPPid:\t1\nNSpid:\t4243\nCapEff:\t000001ffffffffff\nCpus_allowed_list:\t0-1\n";

    #[test]
    fn tgid_and_effective_capabilities_are_read_by_key() {
        assert_eq!(super::parse_tgid(STATUS), Some(4242));
        assert_eq!(super::parse_cap_eff(STATUS), Some(0x1ff_ffff_ffff));
        assert_eq!(super::field(STATUS, "Cpus_allowed_list"), Some("0-1"));
        // `Pid` is not `PPid`, and a key is matched whole.
        assert_eq!(super::field(STATUS, "Pid"), Some("4243"));
        assert_eq!(super::field(STATUS, "Cap"), None);
        assert_eq!(super::parse_tgid("Name:\tx\n"), None);
        assert_eq!(super::parse_cap_eff("CapEff:\tzz\n"), None);
    }
}
