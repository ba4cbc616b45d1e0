//! The kernel command line and kernel build configuration.

use cpushield_cpuset::CpuSet;
use std::collections::BTreeMap;

/// The value of `key=value` on a kernel command line (the last one wins, as
/// in the kernel); `Some("")` for a bare `key`.
pub fn param<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    let mut found = None;
    for word in cmdline.split_whitespace() {
        if word == "--" {
            break; // the rest goes to init
        }
        match word.split_once('=') {
            Some((k, v)) if k == key => found = Some(v),
            None if word == key => found = Some(""),
            _ => {}
        }
    }
    found
}

/// The CPUs of a parameter whose value is `[flags,]cpulist`, like `isolcpus=
/// managed_irq,domain,1-3` or `nohz_full=1-3`, and its flags.
pub fn cpu_param(cmdline: &str, key: &str) -> Option<(CpuSet, Vec<String>)> {
    let value = param(cmdline, key)?;
    let mut flags = Vec::new();
    let mut cpus = CpuSet::new();
    for part in value.split(',') {
        if part.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            if let Ok(set) = CpuSet::parse_list(part) {
                cpus = cpus.union(&set);
            }
        } else if !part.is_empty() {
            flags.push(part.to_string());
        }
    }
    Some((cpus, flags))
}

/// `CONFIG_X=value` lines of a kernel config (`# CONFIG_X is not set` maps to "n").
pub fn parse_kconfig(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# ") {
            if let Some(name) = rest.strip_suffix(" is not set") {
                out.insert(name.to_string(), "n".to_string());
            }
        } else if let Some((k, v)) = line.split_once('=') {
            if k.starts_with("CONFIG_") {
                out.insert(k.to_string(), v.trim_matches('"').to_string());
            }
        }
    }
    out
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
        assert_eq!(cpu_param(cl, "nohz_full").unwrap().0.to_list(), "2-3");
        assert!(cpu_param(cl, "rcu_nocbs").is_none());
    }

    #[test]
    fn kconfig_reads_set_and_unset_options() {
        let k =
            parse_kconfig("CONFIG_HZ=250\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_PREEMPT_NONE=y\n");
        assert_eq!(k["CONFIG_HZ"], "250");
        assert_eq!(k["CONFIG_NO_HZ_FULL"], "n");
        assert_eq!(k["CONFIG_PREEMPT_NONE"], "y");
    }
}
