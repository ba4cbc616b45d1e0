//! Argument types shared by the subcommands: CPU sets, durations, exit codes.

use cpushield_cpuset::CpuSet;
use std::time::Duration;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: error or bad usage.
pub const EXIT_ERROR: u8 = 1;
#[allow(dead_code)] // used once measure lands
/// Exit code: a latency threshold (`--max-latency`) was exceeded.
pub const EXIT_THRESHOLD: u8 = 2;
#[allow(dead_code)] // used once check lands
/// Exit code: `check` found something that breaks the shield.
pub const EXIT_FINDINGS: u8 = 3;

/// clap value parser for a CPU list (`0-3,8`) or hex mask (`0x8`, `f,00000000`).
pub fn cpu_set(text: &str) -> Result<CpuSet, String> {
    CpuSet::parse_user(text).map_err(|e| format!("{e}; use a list like 1,3-4 or a mask like 0x8"))
}

#[allow(dead_code)] // used once measure lands
/// clap value parser for a duration: `60s`, `1ms`, `20us`, `500ns`, `2m`, `1h`;
/// a bare number is seconds.
pub fn duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err(format!("'{t}' is not a duration: use e.g. 60s, 1ms, 20us"));
    }
    let t = t.replace("µs", "us");
    humantime::parse_duration(&t)
        .map_err(|_| format!("'{text}' is not a duration: use e.g. 60s, 1ms, 20us, 500ns"))
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
}
