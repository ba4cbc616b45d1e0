//! Number formatting shared by the renderers.

/// A duration as it would be typed on the command line: the largest unit that
/// keeps it whole (`1ms`, `488281ns`, `20us`, `2s`).
pub fn fmt_duration(ns: u64) -> String {
    for (unit, name) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns >= unit && ns.is_multiple_of(unit) {
            return format!("{}{name}", ns / unit);
        }
    }
    format!("{ns}ns")
}

/// A bucket edge in milliseconds as the papers print it: at least one decimal,
/// as many as needed to be exact (`0.1ms`, `0.02ms`, `1.0ms`, `100.0ms`).
pub fn ms_label(ns: u64) -> String {
    let whole = ns / 1_000_000;
    let frac = format!("{:06}", ns % 1_000_000);
    let frac = frac.trim_end_matches('0');
    let frac = if frac.is_empty() { "0" } else { frac };
    format!("{whole}.{frac}ms")
}

/// `part` as a percentage of `total` as the papers print it: three decimals, more
/// when needed so that anything short of all never reads as 100, and a bare
/// `100` when it is all (`99.140`, `99.99997`, `100`).
pub fn percent(part: u64, total: u64) -> String {
    if total == 0 {
        return "0".into();
    }
    if part >= total {
        return "100".into();
    }
    let p = part as f64 * 100.0 / total as f64;
    let mut decimals = 3;
    loop {
        let s = format!("{p:.decimals$}");
        if !s.starts_with("100") || decimals >= 12 {
            return s;
        }
        decimals += 1;
    }
}

/// Seconds with six decimals, as the determinism figures print them (`1.147132`).
pub fn secs6(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, (ns % 1_000_000_000) / 1_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_durations_use_the_largest_whole_unit() {
        assert_eq!(fmt_duration(1_000_000), "1ms");
        assert_eq!(fmt_duration(20_000), "20us");
        assert_eq!(fmt_duration(488_281), "488281ns");
        assert_eq!(fmt_duration(2_000_000_000), "2s");
    }

    #[test]
    fn bucket_edges_print_like_brosky_and_rotolos_bucket_table() {
        assert_eq!(ms_label(100_000), "0.1ms");
        assert_eq!(ms_label(20_000), "0.02ms");
        assert_eq!(ms_label(1_000_000), "1.0ms");
        assert_eq!(ms_label(100_000_000), "100.0ms");
        assert_eq!(ms_label(100), "0.0001ms");
    }

    #[test]
    fn percentages_never_round_up_to_a_hundred() {
        // Brosky & Rotolo's figures 5 and 6
        assert_eq!(percent(44_374_681, 44_759_417), "99.140");
        assert_eq!(percent(59_999_983, 60_000_000), "99.99997");
        assert_eq!(percent(44_759_417, 44_759_417), "100");
        assert_eq!(percent(999_999_999, 1_000_000_000), "99.9999999");
    }

    #[test]
    fn determinism_seconds_have_six_decimals() {
        assert_eq!(secs6(1_147_132_000), "1.147132");
        assert_eq!(secs6(21_498_999), "0.021498");
    }
}
