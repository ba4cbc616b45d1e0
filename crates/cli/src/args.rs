//! Argument types shared by the subcommands: CPU sets, durations, exit codes,
//! and the rule that a value may start with `-` (so `--rr -5` is refused by
//! the option's own parser, naming the option and its range).

use clap::Command;
use cpushield_cpuset::CpuSet;
use std::time::Duration;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: error or bad usage.
pub const EXIT_ERROR: u8 = 1;
/// Exit code: a latency threshold (`--max-latency`) was exceeded.
pub const EXIT_THRESHOLD: u8 = 2;
/// Exit code: `check` found something that breaks the shield.
pub const EXIT_FINDINGS: u8 = 3;

/// The longest duration any option accepts (a year): longer ones are typos, and
/// they would overflow the clock arithmetic of the probes.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// clap value parser for a CPU list (`0-3,8`) or hex mask (`0x8`, `f,00000000`).
/// A mask typed without `0x` (`abc`, `1,00000000`) that names CPUs which are not
/// online is refused with the reading that was taken.
pub fn cpu_set(text: &str) -> Result<CpuSet, String> {
    let online = cpushield_kernel::online_cpus(crate::host::real().kernel()).ok();
    CpuSet::parse_user_for(text, online.as_ref())
}

/// clap value parser for a duration: `60s`, `1ms`, `20us`, `500ns`, `2m`, `1h`;
/// a bare number is seconds. From 0 to [`MAX_DURATION`].
pub fn duration(text: &str) -> Result<Duration, String> {
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

/// Lets every option that takes a value accept one that starts with `-`, in
/// `cmd` and all its subcommands, so `--rr -5`, `--all -1` and `--duration -1s`
/// reach the option's parser (which names the option and the valid range)
/// instead of clap's "unexpected argument" (which for `run` even suggests
/// `-- -5`, running `-5` as the program). Positional arguments are unchanged.
pub fn hyphen_values(cmd: Command) -> Command {
    let cmd = cmd.mut_args(|arg| {
        if arg.is_positional() || !arg.get_action().takes_values() {
            arg
        } else {
            arg.allow_hyphen_values(true)
        }
    });
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    names
        .into_iter()
        .fold(cmd, |cmd, name| cmd.mut_subcommand(name, hyphen_values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_units_and_bare_seconds() {
        assert_eq!(duration("1ms").unwrap(), Duration::from_millis(1));
        assert_eq!(duration("20us").unwrap(), Duration::from_micros(20));
        assert_eq!(duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(duration("1.5").unwrap(), Duration::from_millis(1500));
        assert!(duration("-1").is_err());
        assert!(duration("soon").is_err());
    }

    #[test]
    fn huge_durations_are_refused_with_the_range_not_a_panic() {
        for text in ["1e20", "1e30", "1e300", "99999999999h", "400days"] {
            let err = duration(text).unwrap_err();
            assert!(err.contains("0 to 365 days"), "{text}: {err}");
        }
        assert_eq!(duration("365days").unwrap(), MAX_DURATION);
    }

    #[test]
    fn negative_durations_name_the_problem() {
        assert!(duration("-1s").unwrap_err().contains("negative"));
    }
}
