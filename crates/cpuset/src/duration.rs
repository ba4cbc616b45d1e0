//! The one way a duration is written for people, in every command's output,
//! and the one way a duration option is read from them.

use std::time::Duration;

/// The longest duration any option accepts (a year): longer ones are typos, and
/// they would overflow the clock arithmetic of the probes.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// A duration typed as an option's value: `60s`, `1ms`, `20us`, `500ns`,
/// `2m`, `1h`; a bare number is seconds. From 0 to [`MAX_DURATION`].
pub fn parse_duration_arg(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let range = "give a duration from 0 to 365 days, e.g. 60s, 1ms, 20us";
    if t.starts_with('-') {
        return Err(format!("'{t}' is negative: {range}"));
    }
    let parsed = if let Ok(secs) = t.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!("'{t}' is not a duration: {range}"));
        }
        Duration::try_from_secs_f64(secs).map_err(|_| format!("'{t}' is too long: {range}"))?
    } else {
        let t = t.replace("µs", "us");
        humantime::parse_duration(&t).map_err(|_| format!("'{text}' is not a duration: {range}"))?
    };
    if parsed > MAX_DURATION {
        return Err(format!("'{t}' is too long: {range}"));
    }
    Ok(parsed)
}

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// A duration in nanoseconds for people: three significant figures in the
/// largest of ns, us, ms and s in which the value is at least 1, rounded to
/// the nearest (half up): `850 ns`, `1.25 us`, `12.3 us`, `340 us`,
/// `1.00 ms`, `2.50 s`. Below 1 us it is whole nanoseconds (`7 ns`); from
/// 1000 s up, whole seconds (`1234 s`). Rounding that reaches the next
/// unit is written in it (999,600 ns is `1.00 ms`, not `1000 us`).
pub fn fmt_ns(ns: u64) -> String {
    if ns < US {
        return format!("{ns} ns");
    }
    if ns >= 1_000 * S {
        return format!("{} s", (u128::from(ns) + u128::from(S / 2)) / u128::from(S));
    }
    // Round to three significant figures first, so the unit is chosen from
    // the rounded value.
    let digits = ns.ilog10() + 1;
    let step = 10u64.pow(digits - 3);
    let rounded = (ns / step + u64::from(ns % step >= step.div_ceil(2))) * step;
    let (unit, symbol) = match rounded {
        r if r >= S => (S, "s"),
        r if r >= MS => (MS, "ms"),
        _ => (US, "us"),
    };
    let whole = rounded / unit;
    let decimals = 3 - (whole.ilog10() + 1).min(3);
    if decimals == 0 {
        return format!("{whole} {symbol}");
    }
    let frac = rounded % unit / (unit / 10u64.pow(decimals));
    format!("{whole}.{frac:0width$} {symbol}", width = decimals as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_a_microsecond_is_whole_nanoseconds() {
        assert_eq!(fmt_ns(0), "0 ns");
        assert_eq!(fmt_ns(7), "7 ns");
        assert_eq!(fmt_ns(999), "999 ns");
    }

    #[test]
    fn each_unit_starts_at_one_with_three_significant_figures() {
        assert_eq!(fmt_ns(1_000), "1.00 us");
        assert_eq!(fmt_ns(1_000_000), "1.00 ms");
        assert_eq!(fmt_ns(1_000_000_000), "1.00 s");
        assert_eq!(fmt_ns(2_500_000_000), "2.50 s");
    }

    #[test]
    fn decimals_shrink_as_the_whole_part_grows() {
        assert_eq!(fmt_ns(1_250), "1.25 us");
        assert_eq!(fmt_ns(12_340), "12.3 us");
        assert_eq!(fmt_ns(340_000), "340 us");
        assert_eq!(fmt_ns(45_000), "45.0 us");
        assert_eq!(fmt_ns(34_700_000), "34.7 ms");
        assert_eq!(fmt_ns(412_000_000), "412 ms");
    }

    #[test]
    fn rounds_half_up_to_the_nearest() {
        assert_eq!(fmt_ns(1_234), "1.23 us");
        assert_eq!(fmt_ns(1_235), "1.24 us");
        assert_eq!(fmt_ns(12_349), "12.3 us");
        assert_eq!(fmt_ns(12_350), "12.4 us");
        assert_eq!(fmt_ns(340_499), "340 us");
        assert_eq!(fmt_ns(340_500), "341 us");
    }

    #[test]
    fn rounding_that_reaches_the_next_unit_is_written_in_it() {
        assert_eq!(fmt_ns(9_994), "9.99 us");
        assert_eq!(fmt_ns(9_995), "10.0 us");
        assert_eq!(fmt_ns(99_950), "100 us");
        assert_eq!(fmt_ns(999_499), "999 us");
        assert_eq!(fmt_ns(999_500), "1.00 ms");
        assert_eq!(fmt_ns(999_500_000), "1.00 s");
    }

    #[test]
    fn from_a_thousand_seconds_it_is_whole_seconds() {
        assert_eq!(fmt_ns(999_400_000_000), "999 s");
        assert_eq!(fmt_ns(999_500_000_000), "1000 s");
        assert_eq!(fmt_ns(1_234_400_000_000), "1234 s");
        assert_eq!(fmt_ns(u64::MAX), "18446744074 s");
    }

    #[test]
    fn durations_accept_units_and_bare_seconds() {
        assert_eq!(parse_duration_arg("1ms").unwrap(), Duration::from_millis(1));
        assert_eq!(
            parse_duration_arg("20us").unwrap(),
            Duration::from_micros(20)
        );
        assert_eq!(
            parse_duration_arg("20µs").unwrap(),
            Duration::from_micros(20)
        );
        assert_eq!(parse_duration_arg("2").unwrap(), Duration::from_secs(2));
        assert_eq!(
            parse_duration_arg("1.5").unwrap(),
            Duration::from_millis(1500)
        );
        assert!(parse_duration_arg("-1").is_err());
        assert!(parse_duration_arg("soon").is_err());
    }

    #[test]
    fn huge_durations_are_refused_with_the_range_not_a_panic() {
        for text in ["1e20", "1e30", "1e300", "99999999999h", "400days"] {
            let err = parse_duration_arg(text).unwrap_err();
            assert!(err.contains("0 to 365 days"), "{text}: {err}");
        }
        assert_eq!(parse_duration_arg("365days").unwrap(), MAX_DURATION);
    }

    #[test]
    fn negative_durations_name_the_problem() {
        assert!(parse_duration_arg("-1s").unwrap_err().contains("negative"));
    }
}
