//! /proc/cpuinfo, and the rule built on it: whether an idle CPU hands its
//! time back to a hypervisor.

/// Whether /proc/cpuinfo's flags include `hypervisor` (the CPU is virtual).
pub fn runs_under_hypervisor(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "hypervisor"))
}

/// Whether every CPU listed has a TSC that ticks at a constant rate
/// (`constant_tsc`) and does not stop in deep idle states (`nonstop_tsc`):
/// then the TSC, calibrated once, is a clock. False when no CPU has a
/// `flags` line (not x86).
pub fn has_invariant_tsc(cpuinfo: &str) -> bool {
    let mut any = false;
    for line in cpuinfo.lines().filter(|l| l.starts_with("flags")) {
        let flags: Vec<&str> = line.split_whitespace().collect();
        if !(flags.contains(&"constant_tsc") && flags.contains(&"nonstop_tsc")) {
            return false;
        }
        any = true;
    }
    any
}

/// The first CPU's `model name` (x86; other architectures have none).
pub fn model_name(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        l.strip_prefix("model name")
            .and_then(|r| r.split_once(':'))
            .map(|(_, m)| m.trim().to_string())
    })
}

/// Whether an idle CPU halts into the hypervisor: the CPU is virtual, the
/// cpuidle driver (empty when there is none) is not the guest-polling
/// `haltpoll`, and the kernel command line has no `idle=poll`.
pub fn halts_into_hypervisor(in_vm: bool, cpuidle_driver: &str, cmdline: &str) -> bool {
    let idle_poll = crate::cmdline::words(cmdline)
        .iter()
        .any(|(k, v)| k == "idle" && v.as_deref() == Some("poll"));
    in_vm && cpuidle_driver != "haltpoll" && !idle_poll
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_without_haltpoll_halts_into_the_hypervisor() {
        let guest = "processor\t: 0\nflags\t\t: fpu vme hypervisor lahf_lm\n";
        let guest = runs_under_hypervisor(guest);
        assert!(halts_into_hypervisor(guest, "none", "quiet"));
        assert!(halts_into_hypervisor(guest, "", "quiet"));
        assert!(halts_into_hypervisor(guest, "acpi_idle", "quiet"));
        assert!(!halts_into_hypervisor(guest, "haltpoll", "quiet"));
        assert!(!halts_into_hypervisor(guest, "none", "quiet idle=poll"));
        // Words for init (after `--`) do not reach the kernel.
        assert!(halts_into_hypervisor(guest, "none", "quiet -- idle=poll"));
    }

    #[test]
    fn bare_metal_does_not_halt_into_a_hypervisor() {
        let metal = "processor\t: 0\nflags\t\t: fpu vme de pse tsc msr\n";
        let metal = runs_under_hypervisor(metal);
        assert!(!halts_into_hypervisor(metal, "intel_idle", "quiet"));
        assert!(!halts_into_hypervisor(metal, "none", "quiet"));
    }

    #[test]
    fn the_model_name_is_the_first_cpus() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(model_name(text).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(model_name("processor\t: 0\n"), None);
    }

    #[test]
    fn a_flag_named_in_another_line_does_not_count() {
        let text = "model name\t: hypervisor-like CPU\nflags\t\t: fpu vme\n";
        assert!(!runs_under_hypervisor(text));
    }

    #[test]
    fn the_tsc_is_invariant_only_with_both_flags_on_every_cpu() {
        let both = "processor\t: 0\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n\nprocessor\t: 1\nflags\t\t: nonstop_tsc tsc constant_tsc\n";
        assert!(has_invariant_tsc(both));
        let one_lacks = "processor\t: 0\nflags\t\t: tsc constant_tsc nonstop_tsc\n\nprocessor\t: 1\nflags\t\t: tsc constant_tsc\n";
        assert!(!has_invariant_tsc(one_lacks));
        assert!(!has_invariant_tsc(
            "processor\t: 0\nflags\t\t: tsc nonstop_tsc\n"
        ));
        assert!(
            !has_invariant_tsc("processor\t: 0\nBogoMIPS\t: 50.00\n"),
            "no flags line: not x86"
        );
        assert!(
            !has_invariant_tsc("flags\t\t: constant_tsc_x nonstop_tsc\n"),
            "whole words only"
        );
    }
}
