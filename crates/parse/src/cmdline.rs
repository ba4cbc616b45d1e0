//! The kernel command line (`/proc/cmdline`), read the way the kernel reads it.
//! The one parser for `show` (crates/shield) and `check` (crates/check), and
//! the facts both derive from it ([`nohz_full_cpus`], [`rcu_offloaded_cpus`]).
//!
//! Rules, from the kernel's `parse_args()`/`next_arg()`:
//! - words are split on whitespace, except inside double quotes (`key="a b"`);
//!   the quotes are dropped;
//! - everything after a bare `--` goes to init, not to the kernel;
//! - in a key, `-` and `_` are the same (`nohz-full` is `nohz_full`);
//! - when a key appears more than once, the last one wins (as for most
//!   parameters, among them `isolcpus`, `nohz_full`, `rcu_nocbs`, `irqaffinity`);
//! - a CPU list the kernel cannot parse makes the parameter have no effect:
//!   [`cpu_param`] then returns `None`, as if it were absent.

use cpushield_cpuset::CpuSet;

/// The `key=value` words of a command line meant for the kernel (before `--`),
/// in order, with quotes removed; a bare `key` has the value `None`.
pub fn words(cmdline: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut chars = cmdline.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut word = String::new();
        let mut quoted = false;
        let mut had_quote = false;
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() && !quoted {
                break;
            }
            chars.next();
            if c == '"' {
                quoted = !quoted;
                had_quote = true;
                continue;
            }
            word.push(c);
        }
        if word == "--" && !had_quote {
            break; // the rest goes to init
        }
        match word.split_once('=') {
            Some((k, v)) => out.push((k.to_string(), Some(v.to_string()))),
            None => out.push((word, None)),
        }
    }
    out
}

/// Whether two parameter names are the same to the kernel (`-` equals `_`).
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || (matches!(x, b'-' | b'_') && matches!(y, b'-' | b'_')))
}

/// The value of `key=value` on a kernel command line (the last one wins);
/// `Some("")` for a bare `key`.
pub fn param(cmdline: &str, key: &str) -> Option<String> {
    words(cmdline)
        .into_iter()
        .rev()
        .find(|(k, _)| same_key(k, key))
        .map(|(_, v)| v.unwrap_or_default())
}

/// The CPUs of a parameter whose value is `[flags,]cpulist`, like `isolcpus=
/// managed_irq,domain,1-3` or `nohz_full=1-3`, and its flags (the leading
/// words of letters and `_`, as the kernel's isolcpus parser takes them).
/// `None` when the parameter is absent or its CPU list is invalid (the
/// kernel then ignores it).
pub fn cpu_param(cmdline: &str, key: &str) -> Option<(CpuSet, Vec<String>)> {
    let value = param(cmdline, key)?;
    let mut flags = Vec::new();
    let mut rest = value.as_str();
    while let Some((word, tail)) = rest.split_once(',') {
        if !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_') {
            flags.push(word.to_string());
            rest = tail;
        } else {
            break;
        }
    }
    if !rest.contains(',') && !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_alphabetic()) {
        // `isolcpus=domain` alone: a flag without CPUs is invalid.
        return None;
    }
    let cpus = CpuSet::parse_list(rest).ok()?;
    Some((cpus, flags))
}

/// The CPUs of a `[flags,]cpulist` parameter (see [`cpu_param`]).
pub fn cpus(cmdline: &str, key: &str) -> Option<CpuSet> {
    cpu_param(cmdline, key).map(|(cpus, _)| cpus)
}

/// CPUs in nohz_full mode: /sys/devices/system/cpu/nohz_full when it holds
/// a CPU list (`sysfs`, its text), else the `nohz_full=` parameter.
/// A kernel without nohz_full shows `(null)` there.
pub fn nohz_full_cpus(sysfs: Option<&str>, cmdline: &str) -> CpuSet {
    sysfs
        .and_then(|s| CpuSet::parse_list(s.trim()).ok())
        .or_else(|| cpus(cmdline, "nohz_full"))
        .unwrap_or_default()
}

/// CPUs whose RCU callbacks are offloaded to `rcuo` kthreads: those of
/// `rcu_nocbs=` and every nohz_full CPU (`nohz_full`, see
/// [`nohz_full_cpus`]). Documentation/admin-guide/kernel-parameters.txt,
/// `nohz_full=` (since Linux 4.13): "Any CPUs in this list will have their
/// RCU callbacks offloaded, just as if they had also been called out in the
/// rcu_nocbs= boot parameter."
pub fn rcu_offloaded_cpus(cmdline: &str, nohz_full: &CpuSet) -> CpuSet {
    cpus(cmdline, "rcu_nocbs")
        .unwrap_or_default()
        .union(nohz_full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_params_split_flags_from_cpus() {
        let cl = "quiet isolcpus=managed_irq,domain,1-3 nohz_full=2,3 -- nohz_full=0";
        let (cpus, flags) = cpu_param(cl, "isolcpus").unwrap();
        assert_eq!(cpus.to_list(), "1-3");
        assert_eq!(flags, vec!["managed_irq", "domain"]);
        assert_eq!(cpus_of(cl, "nohz_full"), "2-3");
        assert!(cpu_param(cl, "rcu_nocbs").is_none());
    }

    fn cpus_of(cl: &str, key: &str) -> String {
        cpus(cl, key).unwrap().to_list()
    }

    #[test]
    fn words_after_a_double_dash_go_to_init() {
        assert!(param("quiet -- nohz_full=1", "nohz_full").is_none());
        assert_eq!(param("a=1 -- a=2", "a").unwrap(), "1");
    }

    #[test]
    fn the_last_of_duplicate_keys_wins() {
        let cl = "nohz_full=1 rcu_nocbs=1 nohz_full=0-1";
        assert_eq!(cpus_of(cl, "nohz_full"), "0-1");
        assert_eq!(cpus_of(cl, "rcu_nocbs"), "1");
    }

    #[test]
    fn an_invalid_cpu_list_leaves_the_parameter_without_effect() {
        assert!(cpus("nohz_full=3-1", "nohz_full").is_none());
        assert!(cpus("nohz_full=garbage", "nohz_full").is_none());
        assert!(cpus("isolcpus=domain", "isolcpus").is_none());
        // The last occurrence decides, even when it is the invalid one.
        assert!(cpus("nohz_full=1 nohz_full=x1", "nohz_full").is_none());
    }

    #[test]
    fn quotes_dashes_and_bare_keys_are_read_as_the_kernel_does() {
        let cl = "dyndbg=\"file a.c +p\" nohz-full=1 quiet";
        assert_eq!(param(cl, "dyndbg").unwrap(), "file a.c +p");
        assert_eq!(cpus_of(cl, "nohz_full"), "1");
        assert_eq!(param(cl, "quiet").unwrap(), "");
        assert_eq!(
            cpus_of("isolcpus=nohz,domain,managed_irq,1,3-4", "isolcpus"),
            "1,3-4"
        );
    }

    #[test]
    fn kernel_cpu_list_groups_work_in_parameters() {
        assert_eq!(cpus_of("nohz_full=0-7:1/4", "nohz_full"), "0,4");
    }

    #[test]
    fn nohz_full_cpus_count_as_rcu_offloaded() {
        let cl = "nohz_full=2-3 rcu_nocbs=1";
        let nohz = nohz_full_cpus(None, cl);
        assert_eq!(nohz.to_list(), "2-3");
        assert_eq!(rcu_offloaded_cpus(cl, &nohz).to_list(), "1-3");
        assert_eq!(
            rcu_offloaded_cpus("nohz_full=2", &nohz_full_cpus(None, "nohz_full=2")).to_list(),
            "2"
        );
        assert!(rcu_offloaded_cpus("quiet", &CpuSet::new()).is_empty());
    }

    #[test]
    fn sysfs_nohz_full_wins_over_the_command_line_unless_it_is_null() {
        assert_eq!(nohz_full_cpus(Some("3\n"), "nohz_full=1-3").to_list(), "3");
        assert_eq!(
            nohz_full_cpus(Some("(null)\n"), "nohz_full=1-3").to_list(),
            "1-3"
        );
        assert!(nohz_full_cpus(Some("(null)\n"), "quiet").is_empty());
    }
}
