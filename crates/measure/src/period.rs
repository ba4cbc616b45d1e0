//! The period of a periodic probe, kept exact: 2048 Hz is 488281.25 ns, which no
//! whole number of nanoseconds is, so wakeup `k` is computed as `k * 1e9 / rate`
//! rather than by adding a rounded interval `k` times.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A wakeup period, either a rate in Hz or a fixed interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Period {
    /// `hz` wakeups per second, exactly (2048 Hz as realfeel).
    Rate {
        /// Wakeups per second; at least 1.
        hz: u32,
    },
    /// A fixed interval in nanoseconds; at least 1.
    Interval {
        /// The interval in nanoseconds.
        ns: u64,
    },
}

impl Period {
    /// A period of `hz` wakeups per second.
    pub fn from_rate(hz: u32) -> Self {
        Period::Rate { hz }
    }

    /// A period of a fixed interval.
    pub fn from_interval(interval: Duration) -> Self {
        Period::Interval {
            ns: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Checks that the period is not zero, naming the remedy.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Period::Rate { hz: 0 } => {
                Err("--rate 0: the rate must be at least 1 Hz: use e.g. --rate 2048".into())
            }
            Period::Interval { ns: 0 } => Err(
                "--interval 0: the interval must be longer than 0: use e.g. --interval 1ms".into(),
            ),
            _ => Ok(()),
        }
    }

    /// Offset of wakeup `k` from the first wakeup, in nanoseconds, exact to the
    /// nanosecond (rounded down).
    #[inline]
    pub fn offset_ns(&self, k: u64) -> u64 {
        match *self {
            Period::Rate { hz } => ((k as u128 * 1_000_000_000) / hz.max(1) as u128) as u64,
            Period::Interval { ns } => k.saturating_mul(ns),
        }
    }

    /// The length of one period in nanoseconds (rounded down for rates).
    pub fn nominal_ns(&self) -> u64 {
        match *self {
            Period::Rate { hz } => 1_000_000_000 / hz.max(1) as u64,
            Period::Interval { ns } => ns,
        }
    }

    /// How many wakeups fall in `[0, duration)` from the first one.
    pub fn wakeups_in(&self, duration_ns: u64) -> u64 {
        match *self {
            Period::Rate { hz } => {
                // smallest k with k * 1e9 / hz >= duration, i.e. ceil(duration * hz / 1e9)
                let num = duration_ns as u128 * hz as u128;
                num.div_ceil(1_000_000_000) as u64
            }
            Period::Interval { ns } => duration_ns.div_ceil(ns.max(1)),
        }
    }

    /// Wakeups per second, as a float for display.
    pub fn hz(&self) -> f64 {
        match *self {
            Period::Rate { hz } => hz as f64,
            Period::Interval { ns } => 1e9 / ns.max(1) as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2048_hz_rate_does_not_drift_over_a_second() {
        let p = Period::from_rate(2048);
        assert_eq!(p.offset_ns(1), 488_281);
        assert_eq!(p.offset_ns(2048), 1_000_000_000);
        assert_eq!(p.offset_ns(2048 * 3600), 3600 * 1_000_000_000);
    }

    #[test]
    fn wakeup_count_matches_offsets_below_the_duration() {
        for p in [
            Period::from_rate(2048),
            Period::from_rate(3),
            Period::from_interval(Duration::from_micros(700)),
        ] {
            for d in [1u64, 999_999, 1_000_000_000, 2_000_000_001] {
                let n = p.wakeups_in(d);
                assert!(n == 0 || p.offset_ns(n - 1) < d, "{p:?} {d}");
                assert!(p.offset_ns(n) >= d, "{p:?} {d}");
            }
        }
    }

    #[test]
    fn zero_rate_and_zero_interval_are_refused() {
        assert!(Period::from_rate(0).validate().is_err());
        assert!(Period::from_interval(Duration::ZERO).validate().is_err());
        assert!(Period::from_rate(1).validate().is_ok());
    }
}
