//! The kernel build configuration (/proc/config.gz decompressed, or
//! /boot/config-RELEASE).

use std::collections::BTreeMap;

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
    fn kconfig_reads_set_and_unset_options() {
        let k =
            parse_kconfig("CONFIG_HZ=250\n# CONFIG_NO_HZ_FULL is not set\nCONFIG_PREEMPT_NONE=y\n");
        assert_eq!(k["CONFIG_HZ"], "250");
        assert_eq!(k["CONFIG_NO_HZ_FULL"], "n");
        assert_eq!(k["CONFIG_PREEMPT_NONE"], "y");
    }
}
